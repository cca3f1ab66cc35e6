//! The typed policy model: serde only, span-free, 1:1 with the YAML and
//! round-trippable. Locations live in the loader's source tree, not here.

pub mod cidrgroup;
pub mod cilium;
pub mod cluster;
pub mod k8s;
pub mod meta;
pub mod section;
pub mod selector;

use schemars::JsonSchema;
use serde::Serialize;

pub use cidrgroup::{CidrGroupSpec, CiliumCidrGroup};
pub use cilium::*;
pub use cluster::*;
pub use k8s::*;
pub use meta::ObjectMeta;
pub use section::{RuleItem, RuleSection, ToPorts};
pub use selector::{
    EndpointSelector, LabelSelector, LabelSelectorRequirement, MatchLabels, SelectorOperator,
};

/// One policy resource, whichever kind it is.
///
/// Serializes as the resource itself (no wrapper). It has no `Deserialize`:
/// the loader picks the variant from `kind`/`apiVersion`, because CNP and CCNP
/// share one shape and an untagged guess would confuse them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum PolicyDocument {
    /// `cilium.io/v2` `CiliumNetworkPolicy`.
    CiliumNetworkPolicy(CiliumNetworkPolicy),
    /// `cilium.io/v2` `CiliumClusterwideNetworkPolicy`.
    CiliumClusterwideNetworkPolicy(CiliumClusterwideNetworkPolicy),
    /// `networking.k8s.io/v1` `NetworkPolicy`.
    NetworkPolicy(NetworkPolicy),
    /// `cilium.io/v2alpha1` or `cilium.io/v2` `CiliumCIDRGroup`: no rules of
    /// its own, the CIDRs that `cidrGroupRef`/`cidrGroupSelector` name.
    CiliumCidrGroup(CiliumCidrGroup),
    /// `policy.networking.k8s.io/v1alpha2` or `v1beta1`
    /// `ClusterNetworkPolicy`: tiered (Admin/Baseline) cluster policy,
    /// enforced by Cilium 1.20 with `--enable-k8s-cluster-network-policy`.
    ClusterNetworkPolicy(ClusterNetworkPolicy),
}

impl PolicyDocument {
    /// The resource kind as written in YAML.
    pub fn kind(&self) -> &'static str {
        match self {
            PolicyDocument::CiliumNetworkPolicy(_) => "CiliumNetworkPolicy",
            PolicyDocument::CiliumClusterwideNetworkPolicy(_) => "CiliumClusterwideNetworkPolicy",
            PolicyDocument::NetworkPolicy(_) => "NetworkPolicy",
            PolicyDocument::CiliumCidrGroup(_) => "CiliumCIDRGroup",
            PolicyDocument::ClusterNetworkPolicy(_) => "ClusterNetworkPolicy",
        }
    }

    /// The object metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            PolicyDocument::CiliumNetworkPolicy(p) => &p.metadata,
            PolicyDocument::CiliumClusterwideNetworkPolicy(p) => &p.metadata,
            PolicyDocument::NetworkPolicy(p) => &p.metadata,
            PolicyDocument::CiliumCidrGroup(g) => &g.metadata,
            PolicyDocument::ClusterNetworkPolicy(p) => &p.metadata,
        }
    }

    /// `metadata.name`, or `""` when absent (validation rejects that).
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or("")
    }

    /// The namespace the object lives in: `metadata.namespace` of a CNP or
    /// NetworkPolicy, `default` when absent (what `kubectl apply` and the
    /// compiler use); `None` for a cluster-scoped CCNP, whose
    /// `metadata.namespace` the API server ignores.
    pub fn effective_namespace(&self) -> Option<&str> {
        match self {
            PolicyDocument::CiliumClusterwideNetworkPolicy(_)
            | PolicyDocument::CiliumCidrGroup(_)
            | PolicyDocument::ClusterNetworkPolicy(_) => None,
            PolicyDocument::CiliumNetworkPolicy(_) | PolicyDocument::NetworkPolicy(_) => {
                Some(self.metadata().namespace.as_deref().unwrap_or("default"))
            }
        }
    }

    /// What names the object in a cluster: kind, namespace, name. Two
    /// documents with the same key are one object (the later apply wins).
    pub fn object_key(&self) -> ObjectKey {
        ObjectKey {
            kind: self.kind(),
            namespace: self.effective_namespace().map(str::to_owned),
            name: self.name().to_owned(),
        }
    }

    /// The ClusterNetworkPolicy, when this document is one.
    pub fn as_cluster_network_policy(&self) -> Option<&ClusterNetworkPolicy> {
        match self {
            PolicyDocument::ClusterNetworkPolicy(policy) => Some(policy),
            _ => None,
        }
    }

    /// The CIDR group, when this document is a `CiliumCIDRGroup` (not a
    /// policy: it allows nothing itself, rules reference it).
    pub fn as_cidr_group(&self) -> Option<&CiliumCidrGroup> {
        match self {
            PolicyDocument::CiliumCidrGroup(group) => Some(group),
            _ => None,
        }
    }

    /// The Cilium rules of a CNP/CCNP with the route prefix of each
    /// (`spec` or `specs[i]`), in document order; empty for a NetworkPolicy.
    pub fn cilium_rules(&self) -> Vec<(String, &Rule)> {
        let (spec, specs) = match self {
            PolicyDocument::CiliumNetworkPolicy(p) => (&p.spec, &p.specs),
            PolicyDocument::CiliumClusterwideNetworkPolicy(p) => (&p.spec, &p.specs),
            PolicyDocument::NetworkPolicy(_)
            | PolicyDocument::CiliumCidrGroup(_)
            | PolicyDocument::ClusterNetworkPolicy(_) => {
                return Vec::new();
            }
        };
        let mut rules = Vec::new();
        if let Some(rule) = spec {
            rules.push(("spec".to_owned(), rule));
        }
        for (index, rule) in specs.iter().flatten().enumerate() {
            rules.push((format!("specs[{index}]"), rule));
        }
        rules
    }
}

/// The identity of a policy object in a cluster ([`PolicyDocument::object_key`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// The resource kind.
    pub kind: &'static str,
    /// The namespace; `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    /// The kind, then the quoted `namespace/name` (`name` alone when cluster-scoped).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} `{namespace}/{}`", self.kind, self.name),
            None => write!(f, "{} `{}`", self.kind, self.name),
        }
    }
}
