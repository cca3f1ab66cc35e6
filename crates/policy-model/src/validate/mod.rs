//! Validation equal to what a Cilium 1.19 cluster accepts: the CRD schema the
//! API server enforces **and** the agent's `Rule.Sanitize()`; where they
//! differ the stricter wins (docs/semantics.md §2.4). Kubernetes NetworkPolicy
//! gets the API server's validation.
//!
//! Checks run over the typed model and report [`Finding`]s by route; the
//! loader resolves routes to lines and columns and turns each into the one
//! diagnostics type, [`crate::Diagnostic`]. A `Finding` is that diagnostic
//! before it has a place in the file: the checks see the typed model, not
//! the YAML tree that knows lines.

mod cidrgroup;
mod cilium;
pub mod cluster;
mod finding;
mod k8s;
pub mod selector;
pub(crate) mod text;

pub use finding::Finding;
pub(crate) use finding::Findings;

use crate::model::PolicyDocument;

/// Validates one policy object.
pub fn validate_document(doc: &PolicyDocument) -> Vec<Finding> {
    let mut findings = Findings::default();
    match doc {
        PolicyDocument::CiliumNetworkPolicy(p) => cilium::validate_cilium_policy(
            &mut findings,
            cilium::Scope::Namespaced,
            &p.metadata,
            p.spec.as_ref(),
            p.specs.as_ref(),
        ),
        PolicyDocument::CiliumClusterwideNetworkPolicy(p) => cilium::validate_cilium_policy(
            &mut findings,
            cilium::Scope::Clusterwide,
            &p.metadata,
            p.spec.as_ref(),
            p.specs.as_ref(),
        ),
        PolicyDocument::NetworkPolicy(p) => k8s::validate_network_policy(&mut findings, p),
        PolicyDocument::CiliumCidrGroup(g) => cidrgroup::validate_cidr_group(&mut findings, g),
        PolicyDocument::ClusterNetworkPolicy(p) => {
            cluster::validate_cluster_network_policy(&mut findings, p);
        }
    }
    findings.list
}

/// Validates one item of a CNP/CCNP rule at `at` (`spec.ingress[3]`) of a
/// rule with a `nodeSelector` (`host`) or not: the findings
/// [`validate_document`] reports under that item. The rule's other checks
/// read only its frame (selectors, log) and whether its sections are
/// empty, so an item replaced by another changes only these (the
/// incremental re-parse, [`crate::reparse`], relies on it).
pub(crate) fn validate_cilium_item(
    at: &crate::route::Route,
    item: &crate::model::RuleItem<'_>,
    host: bool,
) -> Vec<Finding> {
    let mut findings = Findings::default();
    cilium::validate_item(&mut findings, at, item, host);
    findings.list
}
