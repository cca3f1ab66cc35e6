//! PR023 `cidr-group-covers-pods`: a CiliumCIDRGroup's CIDR covers
//! addresses of inventory endpoints.
//!
//! A group is meant for peers outside the cluster (`ExternalCIDRs`,
//! `pkg/k8s/apis/cilium.io/v2/cidrgroups_types.go`). The agent labels the
//! group's prefixes (`applyCIDRGroup`, `pkg/policy/k8s/cidr_group.go`), but
//! an endpoint's address resolves to the endpoint's own identity in the
//! ipcache (its /32 or /128 outranks the group prefix), which carries no
//! `cidrgroup:` label: rules that reference the group never match those
//! endpoints. The same holds for any CIDR rule (PR020); this rule looks at
//! the group itself, whether or not a rule references it yet.

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::model::PolicyDocument;
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use crate::Context;

/// The rule: its registry entry and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR023",
        name: "cidr-group-covers-pods",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "A CiliumCIDRGroup's CIDR covers addresses of inventory endpoints, which rules \
referencing the group never match.",
        doc: Some(Doc {
            what: "For every CIDR of every CiliumCIDRGroup, porin lists the inventory endpoints \
(pods, and workloads outside Kubernetes) whose addresses the CIDR contains.",
            why: "A CIDR group is for peers outside the cluster. An endpoint's address resolves \
to the endpoint's own security identity, never to the group's CIDR identity, so \
`cidrGroupRef`/`cidrGroupSelector` rules do not allow (or deny) those endpoints even though the \
group lists their addresses.",
            example: "kind: CiliumCIDRGroup\nmetadata: {name: office}\nspec:\n  externalCIDRs: [10.0.0.0/8]   # the pod network too",
            instead: "Keep the group to addresses outside the cluster and select endpoints by \
label (`toEndpoints`/`fromEndpoints`, `toEntities: [cluster]`).",
            references: "cilium/cilium#9209; Cilium `pkg/policy/k8s/cidr_group.go` \
(`applyCIDRGroup`), `pkg/ipcache/metadata.go`; semantics.md §3.6 and §3.6.1.",
        }),
    },
};

/// How many endpoints a message names before `and N more`.
const NAMED: usize = 5;

/// Reports group CIDRs that contain endpoint addresses.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for input in cx.inputs {
        let PolicyDocument::CiliumCidrGroup(group) = input.policy else {
            continue;
        };
        let name = input.policy.name();
        for (index, text) in group.spec.external_cidrs.iter().enumerate() {
            let Ok(prefix) = text.trim().parse::<ipnetwork::IpNetwork>() else {
                continue;
            };
            let mut covered: Vec<String> = cx
                .inventory
                .endpoints
                .iter()
                .filter_map(|endpoint| {
                    let ips: Vec<String> = endpoint
                        .ips
                        .iter()
                        .filter(|ip| prefix.contains(**ip))
                        .map(ToString::to_string)
                        .collect();
                    (!ips.is_empty())
                        .then(|| format!("{} ({})", endpoint.display_name(), ips.join(", ")))
                })
                .collect();
            if covered.is_empty() {
                continue;
            }
            let total = covered.len();
            if total > NAMED {
                covered.truncate(NAMED);
                covered.push(format!("and {} more", total - NAMED));
            }
            let endpoints = if total == 1 { "endpoint" } else { "endpoints" };
            out.push(
                Diagnostic::new(
                    RULE.info,
                    format!(
                        "CiliumCIDRGroup `{name}` spec.externalCIDRs[{index}] `{text}` covers the addresses of {total} {endpoints} of the inventory: {}; rules that reference the group never match them (an endpoint keeps its own identity)",
                        covered.join(", ")
                    ),
                )
                .at(input.location(&format!("spec.externalCIDRs[{index}]")))
                .note("an endpoint's address resolves to its own identity, which carries no cidrgroup: label (pkg/policy/k8s/cidr_group.go, pkg/ipcache)")
                .help("keep the group to addresses outside the cluster, and select endpoints by label"),
            );
        }
    }
}
