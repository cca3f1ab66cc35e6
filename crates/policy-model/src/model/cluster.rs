//! Kubernetes `ClusterNetworkPolicy` (`policy.networking.k8s.io/v1alpha2`
//! and `v1beta1`, kubernetes-sigs/network-policy-api), 1:1 with the YAML.
//!
//! Both versions serve one shape (`apis/v1alpha2/clusternetworkpolicy_types.go`
//! and `apis/v1beta1/clusternetworkpolicy_types.go`); the CRD's limits (tier
//! enum, priority 0..=1000, at most 25 rules, exactly one field per peer,
//! subject and protocol) are checked by `validate::cluster`. Cilium 1.20
//! translates it in `pkg/k8s/cluster_network_policy.go`
//! (`ParseClusterNetworkPolicy`), behind `--enable-k8s-cluster-network-policy`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::ObjectMeta;
use super::selector::LabelSelector;

/// The API versions that serve `ClusterNetworkPolicy`.
pub const CLUSTER_NETWORK_POLICY_VERSIONS: [&str; 2] = [
    "policy.networking.k8s.io/v1alpha2",
    "policy.networking.k8s.io/v1beta1",
];

/// A cluster-scoped, tiered `ClusterNetworkPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterNetworkPolicy {
    /// `policy.networking.k8s.io/v1alpha2` or `policy.networking.k8s.io/v1beta1`.
    pub api_version: String,
    /// Always `ClusterNetworkPolicy`.
    pub kind: String,
    /// Object metadata; `name` is required.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The policy (required).
    pub spec: ClusterNetworkPolicySpec,
    /// Status written by the cluster; ignored, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// `ClusterNetworkPolicySpec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterNetworkPolicySpec {
    /// `Admin` (before every NetworkPolicy and CiliumNetworkPolicy) or
    /// `Baseline` (after them).
    pub tier: Tier,
    /// 0..=1000 within the tier; lower values are checked first.
    pub priority: i64,
    /// The pods the policy applies to: exactly one of `namespaces`, `pods`.
    pub subject: ClusterNetworkPolicySubject,
    /// Ingress rules, in precedence order (at most 25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<ClusterNetworkPolicyIngressRule>>,
    /// Egress rules, in precedence order (at most 25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<ClusterNetworkPolicyEgressRule>>,
}

/// `Tier`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum Tier {
    /// Checked before NetworkPolicy and CiliumNetworkPolicy.
    Admin,
    /// Checked after them, for traffic they leave undecided.
    Baseline,
}

impl Tier {
    /// The name as written in YAML.
    pub const fn name(self) -> &'static str {
        match self {
            Tier::Admin => "Admin",
            Tier::Baseline => "Baseline",
        }
    }
}

/// `ClusterNetworkPolicySubject`: exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterNetworkPolicySubject {
    /// Every pod of the namespaces this selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    /// Pods by namespace and pod selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
}

/// `NamespacedPod`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct NamespacedPod {
    /// Namespaces by label; empty selects every namespace.
    #[serde(default)]
    pub namespace_selector: LabelSelector,
    /// Pods by label (required); empty selects every pod.
    pub pod_selector: LabelSelector,
}

/// `ClusterNetworkPolicyRuleAction`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum ClusterAction {
    /// Allow; no later rule of any tier is consulted.
    Accept,
    /// Drop; no later rule of any tier is consulted.
    Deny,
    /// Skip the rest of this tier; the next tier decides.
    Pass,
}

impl ClusterAction {
    /// The name as written in YAML.
    pub const fn name(self) -> &'static str {
        match self {
            ClusterAction::Accept => "Accept",
            ClusterAction::Deny => "Deny",
            ClusterAction::Pass => "Pass",
        }
    }
}

/// `ClusterNetworkPolicyIngressRule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterNetworkPolicyIngressRule {
    /// At most 100 characters, for observability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the rule does with matching traffic.
    pub action: ClusterAction,
    /// Sources (1..=25 items).
    pub from: Vec<ClusterNetworkPolicyPeer>,
    /// Destination ports (1..=25 items when present); absent: every port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<ClusterNetworkPolicyProtocol>>,
}

/// `ClusterNetworkPolicyEgressRule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterNetworkPolicyEgressRule {
    /// At most 100 characters, for observability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the rule does with matching traffic.
    pub action: ClusterAction,
    /// Destinations (1..=25 items).
    pub to: Vec<ClusterNetworkPolicyPeer>,
    /// Destination ports (1..=25 items when present); absent: every port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<ClusterNetworkPolicyProtocol>>,
}

/// `ClusterNetworkPolicyIngressPeer` / `ClusterNetworkPolicyEgressPeer`:
/// exactly one field. `nodes`, `networks` and `domainNames` are egress
/// only (validation says so at the field).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterNetworkPolicyPeer {
    /// Every pod of the namespaces this selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    /// Pods by namespace and pod selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
    /// Nodes by label (egress only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<LabelSelector>,
    /// CIDRs (egress only, 1..=25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<String>>,
    /// Domain names (egress only, Accept only, 1..=25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_names: Option<Vec<String>>,
}

impl ClusterNetworkPolicyPeer {
    /// How many of the peer's fields are set (the CRD wants exactly one).
    pub fn fields_set(&self) -> usize {
        usize::from(self.namespaces.is_some())
            + usize::from(self.pods.is_some())
            + usize::from(self.nodes.is_some())
            + usize::from(self.networks.is_some())
            + usize::from(self.domain_names.is_some())
    }
}

/// `ClusterNetworkPolicyProtocol`: exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterNetworkPolicyProtocol {
    /// TCP destination ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<ProtocolPort>,
    /// UDP destination ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<ProtocolPort>,
    /// SCTP destination ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sctp: Option<ProtocolPort>,
    /// A container port name of the destination pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_named_port: Option<String>,
}

/// `ClusterNetworkPolicyProtocolTCP` (and UDP, SCTP): `destinationPort` is
/// required (`MinProperties=1`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ProtocolPort {
    /// The port or range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<ClusterPort>,
}

/// `Port`: exactly one of `number`, `range`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterPort {
    /// 1..=65535.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<i64>,
    /// An inclusive range, `start < end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<ClusterPortRange>,
}

/// `PortRange`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClusterPortRange {
    /// First port, 1..=65535.
    pub start: i64,
    /// Last port, 1..=65535, greater than `start`.
    pub end: i64,
}
