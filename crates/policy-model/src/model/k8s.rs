//! `networking.k8s.io/v1` `NetworkPolicy`, 1:1 with the YAML (Kubernetes
//! `k8s.io/api/networking/v1/types.go`; Cilium translates it in
//! `pkg/k8s/network_policy.go`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cilium::IntOrString;
use super::meta::ObjectMeta;
use super::selector::LabelSelector;

/// A Kubernetes `NetworkPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Always `networking.k8s.io/v1`.
    pub api_version: String,
    /// Always `NetworkPolicy`.
    pub kind: String,
    /// Object metadata; `name` is required.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NetworkPolicySpec>,
    /// Status written by the cluster; ignored, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// `NetworkPolicySpec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicySpec {
    /// Subject pods in the policy's namespace; `{}` selects all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// Ingress allow rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<NetworkPolicyIngressRule>>,
    /// Egress allow rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<NetworkPolicyEgressRule>>,
    /// Directions the policy applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_types: Option<Vec<PolicyType>>,
}

/// A policy direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PolicyType {
    /// Ingress.
    Ingress,
    /// Egress.
    Egress,
}

/// `NetworkPolicyIngressRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicyIngressRule {
    /// Allowed ports; empty or missing means all ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<NetworkPolicyPort>>,
    /// Allowed sources; empty or missing means all sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Vec<NetworkPolicyPeer>>,
}

/// `NetworkPolicyEgressRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicyEgressRule {
    /// Allowed ports; empty or missing means all ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<NetworkPolicyPort>>,
    /// Allowed destinations; empty or missing means all destinations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<NetworkPolicyPeer>>,
}

/// `NetworkPolicyPeer`: pods and/or namespaces, or an IP block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicyPeer {
    /// Pods (in the policy's namespace unless `namespaceSelector` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// Namespaces by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// An IP block; not together with the selectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_block: Option<IpBlock>,
}

/// `IPBlock`: a CIDR with exceptions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct IpBlock {
    /// The prefix (required).
    pub cidr: String,
    /// Prefixes inside `cidr` that are excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub except: Option<Vec<String>>,
}

/// `NetworkPolicyPort`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicyPort {
    /// Protocol; default TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<K8sProtocol>,
    /// Port number or named port; missing means all ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<IntOrString>,
    /// Inclusive range end; needs a numeric `port` and `endPort >= port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_port: Option<i32>,
}

/// Kubernetes `Protocol` as NetworkPolicy accepts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum K8sProtocol {
    /// TCP.
    #[serde(rename = "TCP")]
    Tcp,
    /// UDP.
    #[serde(rename = "UDP")]
    Udp,
    /// SCTP.
    #[serde(rename = "SCTP")]
    Sctp,
}
