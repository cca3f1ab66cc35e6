//! PR011 `duplicate-rule`: two rule items identical after lowering.

use std::collections::HashMap;

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;
use porin_compiler::resolve::rule::PolicyRule;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR011",
        name: "duplicate-rule",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "Two rule items are identical after lowering.",
        doc: Some(Doc {
            what: "Compares every lowered rule (subject, direction, deny, peers, ports, L7, auth).",
            why: "Duplicates are copy-paste leftovers; editing one leaves the other in force.",
            example: "Two policies with the same endpointSelector and the same ingress item.",
            instead: "Keep one.",
            references: "Cilium `pkg/policy/rule.go` (rules are merged, duplicates are invisible).",
        }),
    },
};

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
            RULE.info,
            format!("{} duplicates {}", cx.describe(origin), cx.describe(other)),
        )
        .at(cx.rule_location(origin));
        d.related
            .push((cx.rule_location(other), "the same rule".to_owned()));
        out.push(d.help("keep one of them"));
    }
}
