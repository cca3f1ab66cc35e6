//! PR035 `baseline-never-applies`: a Baseline ClusterNetworkPolicy rule
//! none of whose endpoints it ever decides for, because a NetworkPolicy
//! (or CiliumNetworkPolicy) puts every one of them in default deny in the
//! rule's direction, and that tier "always makes a final decision for
//! selected pods" (`apis/v1beta1/clusternetworkpolicy_types.go`, Tier).
//!
//! Cilium 1.20 checks the Baseline tier only for what the NetworkPolicy
//! tier leaves undecided (`pkg/k8s/cluster_network_policy.go` with the tier
//! order of `pkg/policy/types`); porin's `porin_compiler::tier` does the
//! same, so such a rule has no entry in any map.

use std::collections::{BTreeMap, BTreeSet};

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::model::Tier;
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use crate::Context;

/// The rule: its registry entry and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR035",
        name: "baseline-never-applies",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "A Baseline ClusterNetworkPolicy rule never applies: a NetworkPolicy puts every endpoint it selects in default deny in its direction.",
        doc: Some(Doc {
            what: "For every Baseline rule, looks at the endpoints of the inventory its subject selects; \
when a NetworkPolicy, CiliumNetworkPolicy or CiliumClusterwideNetworkPolicy puts each of them in \
default deny in the rule's direction, the Baseline rule is never reached.",
            why: "A Baseline rule is a default for namespaces without their own policy; where every \
namespace it covers has one, it changes nothing, and a Baseline Deny meant as a guard guards \
nothing.",
            example: "tier: Baseline ... ingress: [{action: Deny, from: [{namespaces: {}}]}] for \
namespaces that all have a NetworkPolicy with policyTypes [Ingress]",
            instead: "Move the rule to the Admin tier if it must hold whatever the NetworkPolicies say, \
or delete it.",
            references: "network-policy-api apis/v1beta1/clusternetworkpolicy_types.go (Tier); \
Cilium 1.20 pkg/k8s/cluster_network_policy.go.",
        }),
    },
};

/// Reports Baseline rules every selected endpoint's NetworkPolicy tier
/// decides first.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let rules = cx.rules();
    // Per Baseline origin: (selected by some unit, reached in some unit).
    let mut seen: BTreeMap<u32, (bool, bool)> = BTreeMap::new();
    let selecting = cx
        .units
        .iter()
        .map(|u| &u.rules)
        .chain(cx.overflows.iter().map(|o| &o.rules));
    for unit_rules in selecting {
        let default_deny: BTreeSet<_> = unit_rules
            .iter()
            .filter_map(|&r| rules.get(r))
            .filter(|r| r.tier.is_none() && r.default_deny)
            .map(|r| r.direction)
            .collect();
        for rule in unit_rules.iter().filter_map(|&r| rules.get(r)) {
            if rule.tier.is_none_or(|t| t.tier != Tier::Baseline) {
                continue;
            }
            let slot = seen.entry(rule.origin).or_insert((false, false));
            slot.0 = true;
            slot.1 |= !default_deny.contains(&rule.direction);
        }
    }
    for (origin_id, (selected, reached)) in seen {
        if !selected || reached {
            continue;
        }
        let Some(origin) = cx.lowered.origins.get(origin_id as usize) else {
            continue;
        };
        out.push(
            Diagnostic::new(
                RULE.info,
                format!(
                    "{} never applies: every endpoint it selects is in default deny in {} by a NetworkPolicy-tier policy, which decides first",
                    cx.describe(origin),
                    origin.direction
                ),
            )
            .at(cx.location(origin, &origin.route))
            .note("the Baseline tier decides only what the NetworkPolicy tier leaves undecided (Tier in network-policy-api apis/v1beta1/clusternetworkpolicy_types.go)")
            .help("move the rule to the Admin tier if it must hold whatever the NetworkPolicies say, or delete it"),
        );
    }
}
