//! PR007 `subject-selects-nothing`: no rule of a policy selects any
//! endpoint of the inventory.

use std::collections::{BTreeMap, BTreeSet};

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR007",
        name: "subject-selects-nothing",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "A policy's subject selector matches no endpoint of the inventory.",
        doc: Some(Doc {
            what: "Matches `endpointSelector` / `podSelector` against every endpoint identity of the \
inventory.",
            why: "The policy enforces nothing; usually a label typo or a wrong namespace.",
            example: "endpointSelector: {matchLabels: {app: frontedn}}",
            instead: "Fix the labels, or complete the inventory if the workload exists.",
            references: "Cilium `pkg/policy/repository.go` (`computePolicyEnforcementAndRules`).",
        }),
    },
};

/// (file, document, kind, name, rule prefix).
type PolicyKey = (String, usize, String, String, String);

/// Reports policies none of whose rules select an endpoint.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let selecting: BTreeSet<usize> = cx
        .units
        .iter()
        .flat_map(|u| u.rules.iter().copied())
        .chain(cx.overflows.iter().flat_map(|o| o.rules.iter().copied()))
        .collect();
    // Per policy (file, document, kind, name) and rule prefix (`spec`, `specs[i]`).
    let mut policies: BTreeMap<PolicyKey, (bool, usize)> = BTreeMap::new();
    for rule in 0..cx.rules().len() {
        // Host policies: the compiler's PC030 checks them against nodes.
        if !is_user_rule(cx, rule) || cx.rules().get(rule).is_some_and(|r| r.host) {
            continue;
        }
        let Some(origin) = cx.origin(rule) else {
            continue;
        };
        let prefix = origin
            .route
            .rsplit_once('.')
            .map_or_else(|| "spec".to_owned(), |(p, _)| p.to_owned());
        let key = (
            origin.file.clone(),
            origin.document,
            origin.kind.to_string(),
            origin.name.clone(),
            prefix,
        );
        let slot = policies.entry(key).or_insert((false, rule));
        slot.0 |= selecting.contains(&rule);
    }
    for ((_, _, kind, _, prefix), (selects, rule)) in policies {
        if selects {
            continue;
        }
        let Some(origin) = cx.origin(rule) else {
            continue;
        };
        let field = if kind == "NetworkPolicy" {
            "podSelector"
        } else {
            "endpointSelector"
        };
        let route = format!("{prefix}.{field}");
        let name = match &origin.namespace {
            Some(ns) => format!("{ns}/{}", origin.name),
            None => origin.name.clone(),
        };
        out.push(
            Diagnostic::new(RULE.info, format!("{kind} `{name}`: `{field}` selects no endpoint of the inventory; the policy enforces nothing"),
            )
            .at(cx.location(origin, &route))
            .help("check the labels (and the namespace) against the workloads, or complete the inventory"),
        );
    }
}
