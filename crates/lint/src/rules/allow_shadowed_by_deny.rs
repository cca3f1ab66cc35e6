//! PR004 `allow-shadowed-by-deny` (and the shared coverage analysis of
//! PR005 `redundant-allow`).
//!
//! An allow rule item R (an origin: every rule lowered from one policy
//! item) "changes no verdict" when, for every endpoint R selects, the map
//! state without R decides every flow class exactly as the full state does
//! ([`crate::Context::rule_changes_verdicts`], computed without
//! recompiling: `context/shadow.rs`). Such an item is then classified by
//! what decides the flows R would allow on its own (the state of R alone):
//! deny rules (PR004) or other allows (PR005).

use std::collections::{BTreeMap, BTreeSet};

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;

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
            what: "For every endpoint the rule item selects, porin compares the map state with and \
without the item (every rule lowered from it) on every (peer identity, protocol, port class) \
exactly (the classes are derived from the keys, nothing is sampled). If the item changes no \
verdict anywhere and some flow it would allow on its own is denied by a deny rule, this fires and \
names the deny rules. An item is never covered by its own peers.",
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

/// The coverage of a user allow rule item that changes no verdict; `None`
/// if removing the item changes a verdict, it selects nothing or would
/// allow nothing alone. Computed once per run for every item (PR004,
/// PR005 and PR017 share it); the item of `rule` is its origin, so an item
/// is never covered by its own rules.
pub fn coverage(cx: &Context<'_>, rule: usize) -> Option<Coverage> {
    let origin = cx.rules().get(rule)?.origin;
    let effects = cx.item_effects().get(&origin)?;
    (effects.selected && !effects.changes && effects.flows > 0).then(|| Coverage {
        denies: effects.denies.clone(),
        allows: effects.allows.clone(),
        flows: effects.flows,
    })
}

/// The rules PR004/PR005 report: the first rule of each user allow item
/// with a coverage, except an item of an identical pair (PR011) whose
/// coverage relies on its twin: "delete this rule" on each of the two
/// would, followed twice, delete both; PR011 reports the pair once.
pub fn reported(cx: &Context<'_>) -> Vec<(usize, Coverage)> {
    // Items identical to one another, by the earliest of them.
    let mut groups: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for (later, earliest) in super::duplicate_rule::duplicate_items(cx) {
        groups.entry(earliest).or_insert_with(|| [earliest].into()).insert(later);
    }
    let mut twins: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for group in groups.values() {
        for member in group {
            twins.insert(*member, group.iter().copied().filter(|o| o != member).collect());
        }
    }
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    let mut found = Vec::new();
    for (rule, r) in cx.rules().iter().enumerate() {
        if r.deny || !is_user_rule(cx, rule) || !seen.insert(r.origin) {
            continue;
        }
        let Some(c) = coverage(cx, rule) else {
            continue;
        };
        let relies_on_twin = twins
            .get(&r.origin)
            .is_some_and(|t| t.iter().any(|twin| c.allows.contains(twin)));
        if !relies_on_twin {
            found.push((rule, c));
        }
    }
    found
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
    for (rule, c) in reported(cx) {
        if !c.denies.is_empty()
            && let Some(d) = report(cx, rule, &c, RULE.info)
        {
            out.push(d);
        }
    }
}
