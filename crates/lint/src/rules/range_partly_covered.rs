//! PR017 `range-partly-covered`: part of an allow rule's port range is
//! already allowed, for every peer the rule names, by other rules.
//!
//! Exact like PR004/PR005: per endpoint the rule selects, the flows the
//! rule allows on its own are compared with the state compiled without
//! it, per port class. A rule that is redundant as a whole is PR005's.

use std::collections::BTreeSet;

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::allow_shadowed_by_deny::coverage;
use super::is_user_rule;
use crate::Context;
use porin_connectivity::flows::{describe, merge};
use porin_compiler::resolve::rule::PortRef;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR017",
        name: "range-partly-covered",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "Part of an allow rule's port range is already allowed, for every peer it names, by other rules.",
        doc: Some(Doc {
            what: "For an allow rule with a port range, compares (exactly, per port class and \
endpoint) the flows it allows on its own with the state compiled without it, and reports the \
ports of its range that other rules already allow for every peer. A rule that is redundant as a \
whole is PR005.",
            why: "Overlapping ranges across rules hide which rule is responsible for a port; \
narrowing one of them later does not close the port. They also cost policy-map entries.",
            example: "ingress:\n- fromEndpoints: [{matchLabels: {app: api}}]\n  toPorts: [{ports: [{port: \"8080\", protocol: TCP}]}]\n- fromEndpoints: [{matchLabels: {app: api}}]\n  toPorts: [{ports: [{port: \"8000\", endPort: 8100, protocol: TCP}]}]",
            instead: "Shrink the range to the ports nothing else allows, or drop the narrower rule.",
            references: "semantics.md §4.5 (port ranges), §4.6.",
        }),
    },
};

/// Reports allow rules with a port range partly allowed by other rules.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for (index, rule) in cx.rules().iter().enumerate() {
        if rule.deny || !is_user_rule(cx, index) || !seen.insert(rule.origin) {
            continue;
        }
        // The item's ports (every rule of an item has the same ports).
        let specs: Vec<_> = cx
            .item_rules(rule.origin)
            .into_iter()
            .filter_map(|r| cx.rules().get(r))
            .flat_map(|r| r.ports.iter())
            .collect();
        let has_range = specs
            .iter()
            .any(|p| matches!(p.port, PortRef::Number(n) if n != 0 && p.end_port > n));
        if !has_range || coverage(cx, index).is_some() {
            continue;
        }
        let effects = cx.effects_of(index);
        if !effects.selected {
            continue;
        }
        let classes = &effects.classes;
        let covered: Vec<(u8, u16, u16)> = classes
            .iter()
            .filter(|(_, (all, _))| *all)
            .map(|((_, p, lo, hi), _)| (*p, *lo, *hi))
            .collect();
        if covered.is_empty() || covered.len() == classes.len() {
            continue;
        }
        // Only the parts inside the rule's own ranges are interesting.
        let in_range: Vec<(u8, u16, u16)> = covered
            .into_iter()
            .filter(|(_, lo, hi)| {
                specs.iter().any(|spec| match spec.port {
                    PortRef::Number(n) if n != 0 && spec.end_port > n => {
                        *lo >= n && *hi <= spec.end_port
                    }
                    _ => false,
                })
            })
            .collect();
        if in_range.is_empty() {
            continue;
        }
        let origins: BTreeSet<u32> = classes
            .values()
            .filter(|(all, _)| *all)
            .flat_map(|(_, o)| o.iter().copied())
            .filter(|o| *o != rule.origin)
            .collect();
        let Some(origin) = cx.origin(index) else {
            continue;
        };
        let mut d = Diagnostic::new(RULE.info, format!(
                "{}: ports {} of its range are already allowed by other rules for every peer it names",
                cx.describe(origin),
                describe(&merge(in_range))
            ),
        )
        .at(cx.location(origin, &format!("{}.toPorts", origin.route)));
        for id in origins {
            if let Some(other) = cx.origin_by_id(id) {
                if other.is_synthetic() {
                    d.notes
                        .push(format!("already allowed by {}", cx.describe(other)));
                } else {
                    d.related.push((
                        cx.rule_location(other),
                        "already allows part of the range".to_owned(),
                    ));
                }
            }
        }
        out.push(
            d.help("shrink the range to the ports nothing else allows, or drop the narrower rule"),
        );
    }
}
