//! PR034 `tier-same-priority-conflict`: two ClusterNetworkPolicies of one
//! tier with the same `spec.priority` whose rules may match the same flow
//! with different actions.
//!
//! The API leaves the outcome to the implementation ("the implementation
//! can apply any of the matching policies",
//! `apis/v1beta1/clusternetworkpolicy_types.go`); Cilium 1.20 orders them by
//! rule index (`priority + index/100`) and, at the same index, a Deny before
//! an Accept before a Pass (its precedence byte, `pkg/policy/types/entry.go`),
//! which porin follows. Rules are reported unless the YAML proves them
//! disjoint (different values of one label key, disjoint ports).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::tiers::{peers_disjoint, ports_disjoint, subjects_disjoint, tier_items};
use crate::Context;

/// The rule: its registry entry and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR034",
        name: "tier-same-priority-conflict",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "Two ClusterNetworkPolicies of one tier share a priority and have rules with different actions that may match the same flow.",
        doc: Some(Doc {
            what: "Pairs the rules of different ClusterNetworkPolicies with the same tier, \
`spec.priority` and direction and different actions, unless their subjects, peers or ports are \
provably disjoint.",
            why: "The API lets each implementation pick either policy; a cluster's verdict may change \
with the implementation or its version.",
            example: "two Admin policies at priority 10, one Accepting and one Denying from namespaces {}",
            instead: "Give the policies different priorities (the one to win gets the lower number).",
            references: "network-policy-api apis/v1beta1/clusternetworkpolicy_types.go (Priority); \
Cilium 1.20 pkg/k8s/cluster_network_policy.go, pkg/policy/types/entry.go.",
        }),
    },
};

/// Reports conflicting pairs, once per pair, at the later document.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let items = tier_items(cx.inputs);
    for (j, later) in items.iter().enumerate() {
        for earlier in &items[..j] {
            if std::ptr::eq(earlier.policy, later.policy)
                || earlier.tier() != later.tier()
                || earlier.priority() != later.priority()
                || earlier.section != later.section
                || earlier.action == later.action
                || subjects_disjoint(&earlier.policy.spec.subject, &later.policy.spec.subject)
                || peers_disjoint(earlier.peers, later.peers)
                || ports_disjoint(earlier.protocols, later.protocols)
            {
                continue;
            }
            out.push(
                Diagnostic::new(
                    RULE.info,
                    format!(
                        "{} and {} have the same tier and priority and may match the same flow with different actions",
                        later.describe(),
                        earlier.describe()
                    ),
                )
                .at(later.input.location(&later.route()))
                .note(format!("the other rule is at {}", earlier.place()))
                .note("the API lets the implementation apply either; Cilium 1.20 (and porin) order them by rule index, then Deny before Accept before Pass")
                .help("give the two policies different priorities: the one that should win gets the lower number"),
            );
        }
    }
}
