//! PR022 `empty-cidr-group`: a CiliumCIDRGroup without CIDRs.
//!
//! The CRD accepts `externalCIDRs: []` (`+kubebuilder:validation:MinItems=0`,
//! `pkg/k8s/apis/cilium.io/v2/cidrgroups_types.go`), and the agent then
//! labels no prefix (`applyCIDRGroup`, `pkg/policy/k8s/cidr_group.go`): a
//! `cidrGroupRef` to it, or a `cidrGroupSelector` that selects only it,
//! selects nothing, so an allow allows nothing and a deny denies nothing.

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::model::PolicyDocument;
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use crate::Context;

/// The rule: its registry entry and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR022",
        name: "empty-cidr-group",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "A CiliumCIDRGroup lists no CIDR: rules that reference it select nothing.",
        doc: Some(Doc {
            what: "Finds CiliumCIDRGroups whose `spec.externalCIDRs` is empty, and counts the \
`cidrGroupRef` entries of the policies that name them.",
            why: "The API server accepts an empty group, and Cilium labels no prefix for it: \
a `toCIDRSet: [{cidrGroupRef: ...}]` allow then allows nothing (the endpoint is still in \
default deny), and a deny that references the group denies nothing, which is easy to miss when \
the group is filled by automation that failed.",
            example: "apiVersion: cilium.io/v2\nkind: CiliumCIDRGroup\nmetadata: {name: partners}\nspec:\n  externalCIDRs: []",
            instead: "List the group's CIDRs, or remove the group and the rules that reference it.",
            references: "Cilium `pkg/k8s/apis/cilium.io/v2/cidrgroups_types.go` (MinItems=0), \
`pkg/policy/k8s/cidr_group.go` (`applyCIDRGroup`); semantics.md §3.6.1.",
        }),
    },
};

/// Reports every empty group.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for input in cx.inputs {
        let PolicyDocument::CiliumCidrGroup(group) = input.policy else {
            continue;
        };
        if !group.spec.external_cidrs.is_empty() {
            continue;
        }
        let name = input.policy.name();
        let references = references_to(cx, name);
        let consequence = match references {
            0 => "no rule references it yet".to_owned(),
            1 => "the 1 cidrGroupRef that names it selects nothing".to_owned(),
            n => format!("the {n} cidrGroupRef entries that name it select nothing"),
        };
        out.push(
            Diagnostic::new(
                RULE.info,
                format!("CiliumCIDRGroup `{name}` lists no CIDR; {consequence}"),
            )
            .at(input.location("spec.externalCIDRs"))
            .note("Cilium labels no prefix for an empty group (applyCIDRGroup, pkg/policy/k8s/cidr_group.go)")
            .help("list the group's CIDRs, or remove the group and the rules that reference it"),
        );
    }
}

/// How many `cidrGroupRef` entries of the inputs name `group`.
fn references_to(cx: &Context<'_>, group: &str) -> usize {
    let mut count = 0;
    for input in cx.inputs {
        for (_, rule) in input.policy.cilium_rules() {
            let sections = [
                rule.ingress.iter().flatten().map(|i| i.from_cidr_set.as_ref()).collect::<Vec<_>>(),
                rule.ingress_deny.iter().flatten().map(|i| i.from_cidr_set.as_ref()).collect(),
                rule.egress.iter().flatten().map(|i| i.to_cidr_set.as_ref()).collect(),
                rule.egress_deny.iter().flatten().map(|i| i.to_cidr_set.as_ref()).collect(),
            ];
            count += sections
                .iter()
                .flatten()
                .flatten()
                .flat_map(|set| set.iter())
                .filter(|entry| entry.cidr_group_ref.as_deref() == Some(group))
                .count();
        }
    }
    count
}
