//! PR011 `duplicate-rule`: two rule items identical after lowering.

use std::collections::HashMap;

use porin_model::diagnostic::{Diagnostic, Severity};

use super::is_user_rule;
use crate::{Context, codes};
use porin_compiler::resolve::rule::PolicyRule;

/// The rule without its origin and log cookie.
fn body(rule: &PolicyRule) -> PolicyRule {
    PolicyRule {
        origin: 0,
        cookie: 0,
        ..rule.clone()
    }
}

/// Reports each rule identical to an earlier one (from another item).
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut first: HashMap<String, usize> = HashMap::new();
    for (index, rule) in cx.rules().iter().enumerate() {
        if !is_user_rule(cx, index) {
            continue;
        }
        let key = format!("{:?}", body(rule));
        let Some(&earlier) = first.get(&key) else {
            first.insert(key, index);
            continue;
        };
        let (Some(origin), Some(other)) = (cx.origin(index), cx.origin(earlier)) else {
            continue;
        };
        if origin.id == other.id {
            continue;
        }
        let mut d = Diagnostic::new(
            codes::DUPLICATE_RULE,
            Severity::Warning,
            format!("{} duplicates {}", cx.describe(origin), cx.describe(other)),
        )
        .at(cx.rule_location(origin));
        d.related
            .push((cx.rule_location(other), "the same rule".to_owned()));
        out.push(d.help("keep one of them"));
    }
}
