//! PR004 `allow-shadowed-by-deny` (and the shared coverage analysis of
//! PR005 `redundant-allow`).
//!
//! An allow rule R "changes no verdict" when, for every endpoint R selects,
//! the map state compiled without R decides every flow class exactly as
//! the full state does ([`crate::Context::rule_changes_verdicts`]).
//! Such a rule is then classified by what decides the flows R would allow
//! on its own (the state of R alone): deny rules (PR004) or other allows
//! (PR005).

use std::collections::BTreeSet;

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;
use porin_connectivity::analysis::{decide, flow_points};

pub use crate::context::Coverage;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR004",
        name: "allow-shadowed-by-deny",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "An allow rule grants nothing: deny rules cover every flow it would allow.",
        doc: Some(Doc {
            what: "For every endpoint the rule selects, porin compiles the map state with and without \
the rule and compares the verdict of every (peer identity, protocol, port class) exactly (the \
classes are derived from the keys, nothing is sampled). If the rule changes no verdict anywhere \
and some flow it would allow on its own is denied by a deny rule, this fires and names the deny \
rules.",
            why: "The author believed the allow opens a path; it does not. Either the allow is dead \
code or the deny is broader than intended.",
            example: "ingressDeny:\n- fromEntities: [cluster]\ningress:\n- fromEndpoints: [{matchLabels: {app: web}}]\n  toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]",
            instead: "Narrow the deny (e.g. `except`-style CIDR sets or a tighter selector), or delete \
the allow.",
            references: "semantics.md §4.6 (deny precedence), §5.4; Cilium `pkg/policy/mapstate.go` \
(`insertWithChanges`).",
        }),
    },
};

/// The coverage of a user allow rule that changes no verdict; `None` if the
/// rule changes a verdict, selects nothing or would allow nothing alone.
/// Computed once per run (PR004 and PR005 share it).
pub fn coverage(cx: &Context<'_>, rule: usize) -> Option<Coverage> {
    cx.coverage
        .get_or_init(|| (0..cx.rules().len()).map(|r| compute(cx, r)).collect())
        .get(rule)
        .cloned()
        .flatten()
}

fn compute(cx: &Context<'_>, rule: usize) -> Option<Coverage> {
    let policy_rule = cx.rules().get(rule)?;
    if policy_rule.deny || !is_user_rule(cx, rule) {
        return None;
    }
    if !cx.units.iter().any(|u| u.rules.contains(&rule)) || cx.rule_changes_verdicts(rule) {
        return None;
    }
    let mut coverage = Coverage::default();
    for (u, unit) in cx.units.iter().enumerate() {
        if !unit.rules.contains(&rule) {
            continue;
        }
        let alone = cx.state_of_rules(unit, std::slice::from_ref(policy_rule));
        let without = cx.state_without_rule(u, rule);
        for point in flow_points(&[&alone, &without]) {
            let own = decide(&alone, &point);
            let granted = own.verdict.is_allowed()
                && own
                    .chosen
                    .as_ref()
                    .is_some_and(|c| c.entry.origins.contains(&policy_rule.origin));
            if !granted {
                continue;
            }
            coverage.flows += 1;
            let other = decide(&without, &point);
            let origins: BTreeSet<u32> = other
                .chosen
                .as_ref()
                .map(|c| c.entry.origins.clone())
                .unwrap_or_default();
            if other.verdict.is_allowed() {
                coverage.allows.extend(origins);
            } else {
                coverage.denies.extend(origins);
            }
        }
    }
    (coverage.flows > 0).then_some(coverage)
}

/// Builds the finding of a dead allow rule.
pub fn report(
    cx: &Context<'_>,
    rule: usize,
    coverage: &Coverage,
    code: CodeInfo,
) -> Option<Diagnostic> {
    let origin = cx.origin(rule)?;
    let (message, help) = if code == RULE.info {
        (
            format!(
                "{} allows nothing: deny rules decide every flow it would allow",
                cx.describe(origin)
            ),
            "narrow the deny rule, or delete this allow",
        )
    } else {
        (
            format!(
                "{} is redundant: other allow rules already allow every flow it would allow",
                cx.describe(origin)
            ),
            "delete this rule, or narrow the broader one if it allows too much",
        )
    };
    let mut d = Diagnostic::new(code, message).at(cx.rule_location(origin));
    for (ids, label) in [
        (&coverage.denies, "denied by this rule"),
        (&coverage.allows, "already allowed by this rule"),
    ] {
        for id in ids {
            let Some(other) = cx.origin_by_id(*id) else {
                continue;
            };
            if other.is_synthetic() {
                d.notes.push(format!("{label}: {}", cx.describe(other)));
            } else {
                d.related.push((cx.rule_location(other), label.to_owned()));
            }
        }
    }
    d.notes.push(format!(
        "exact: without this rule, every flow class of every endpoint it selects keeps its verdict ({} classes it would allow alone)",
        coverage.flows
    ));
    Some(d.help(help))
}

/// Reports allow rules whose flows deny rules decide.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for rule in 0..cx.rules().len() {
        if let Some(c) = coverage(cx, rule)
            && !c.denies.is_empty()
            && let Some(d) = report(cx, rule, &c, RULE.info)
        {
            out.push(d);
        }
    }
}
