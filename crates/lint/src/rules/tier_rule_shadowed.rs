//! PR033 `tier-rule-shadowed`: a ClusterNetworkPolicy rule that never
//! decides anything, because a rule checked before it (an earlier place in
//! its tier, or any Admin rule before a Baseline one) matches every flow it
//! matches and decides it first.
//!
//! Cilium 1.20 orders the rules by `spec.priority + index/100`
//! (`pkg/k8s/cluster_network_policy.go`), Admin before the NetworkPolicy
//! tier before Baseline; the first matching rule decides (a Pass skips the
//! rest of its tier, so an Admin Pass does not shadow a Baseline rule). The
//! check reads the YAML and claims coverage only when it holds for every
//! inventory (a wildcard or equal selector, a superset of the ports).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::model::{ClusterAction, Tier};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::tiers::{peers_cover, ports_cover, subject_covers, tier_items};
use crate::Context;

/// The rule: its registry entry and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR033",
        name: "tier-rule-shadowed",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "A ClusterNetworkPolicy rule never decides anything: a rule checked before it matches every flow it matches.",
        doc: Some(Doc {
            what: "Compares every ClusterNetworkPolicy rule with the rules checked before it (lower \
priority, or the same priority and a lower rule index, in the same tier; any Admin rule before a \
Baseline rule) in the same direction: when one of them selects at least its subjects, its peers and \
its ports, the later rule is dead.",
            why: "The rule reads as if it decided something; it never does, so a change to it changes \
nothing, and its author probably meant another order.",
            example: "tier: Admin, priority: 10: Accept from namespaces {} ... and priority: 20: Deny \
from namespaces {matchLabels: {team: red}}",
            instead: "Give the narrower rule the lower priority (it is checked first), or delete it.",
            references: "network-policy-api apis/v1beta1/clusternetworkpolicy_types.go (Priority); \
Cilium 1.20 pkg/k8s/cluster_network_policy.go (ParseClusterNetworkPolicy).",
        }),
    },
};

/// Reports rules shadowed by an earlier one.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let items = tier_items(cx.inputs);
    for later in &items {
        let shadow = items.iter().find(|earlier| {
            earlier.section == later.section
                && earlier.strictly_before(later)
                // An Admin Pass hands the flow to the NetworkPolicy and
                // Baseline tiers: it shadows only its own tier.
                && !(earlier.action == ClusterAction::Pass
                    && earlier.tier() == Tier::Admin
                    && later.tier() == Tier::Baseline)
                && subject_covers(&earlier.policy.spec.subject, &later.policy.spec.subject)
                && peers_cover(earlier.peers, later.peers)
                && ports_cover(earlier.protocols, later.protocols)
        });
        let Some(earlier) = shadow else { continue };
        out.push(
            Diagnostic::new(
                RULE.info,
                format!(
                    "{} never decides anything: {} is checked first and matches every flow it matches",
                    later.describe(),
                    earlier.describe()
                ),
            )
            .at(later.input.location(&later.route()))
            .note(format!("the earlier rule is at {}", earlier.place()))
            .note("Cilium 1.20 checks ClusterNetworkPolicy rules by spec.priority, then rule index (pkg/k8s/cluster_network_policy.go), Admin before NetworkPolicy before Baseline")
            .help("give the narrower rule a lower priority than the broader one, or delete it"),
        );
    }
}
