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

/// Each user rule item (origin) identical to an earlier one, with that
/// earlier item, in input order. Items are compared whole: lowering splits
/// an item into several rules (one per Kubernetes peer, ...), and an item
/// only some of whose rules another item repeats is not a duplicate
/// (deleting it would delete the rest too).
pub fn duplicate_items(cx: &Context<'_>) -> Vec<(u32, u32)> {
    let mut items: Vec<(u32, Vec<String>)> = Vec::new();
    let mut position: HashMap<u32, usize> = HashMap::new();
    for (index, rule) in cx.rules().iter().enumerate() {
        if !is_user_rule(cx, index) {
            continue;
        }
        let slot = *position.entry(rule.origin).or_insert_with(|| {
            items.push((rule.origin, Vec::new()));
            items.len() - 1
        });
        if let Some((_, bodies)) = items.get_mut(slot) {
            bodies.push(format!("{:?}", body(rule)));
        }
    }
    let mut first: HashMap<Vec<String>, u32> = HashMap::new();
    let mut out = Vec::new();
    for (origin, mut bodies) in items {
        bodies.sort();
        match first.get(&bodies) {
            Some(earlier) => out.push((origin, *earlier)),
            None => {
                first.insert(bodies, origin);
            }
        }
    }
    out
}

/// Reports each rule item identical to an earlier one, once per pair.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (later, earlier) in duplicate_items(cx) {
        let (Some(origin), Some(other)) = (cx.origin_by_id(later), cx.origin_by_id(earlier)) else {
            continue;
        };
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
