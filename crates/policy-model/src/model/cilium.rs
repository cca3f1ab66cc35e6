//! `cilium.io/v2` `CiliumNetworkPolicy` and `CiliumClusterwideNetworkPolicy`,
//! 1:1 with the YAML (Cilium `pkg/policy/api/*.go`, CRD
//! `pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml`).
//!
//! Every list is an `Option<Vec<_>>` because Cilium gives nil and empty lists
//! different meanings (docs/semantics.md §3.2: an omitted `fromEndpoints` is a
//! wildcard when ports are given, `fromEndpoints: []` selects nothing).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::ObjectMeta;
use super::selector::EndpointSelector;

/// A namespaced `CiliumNetworkPolicy` (`cilium.io/v2`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct CiliumNetworkPolicy {
    /// Always `cilium.io/v2`.
    pub api_version: String,
    /// Always `CiliumNetworkPolicy`.
    pub kind: String,
    /// Object metadata; `name` is required.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// A single rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Rule>,
    /// A list of rules (combined with `spec` when both are set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specs: Option<Vec<Rule>>,
    /// Status written by Cilium; ignored by porin, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// A cluster-scoped `CiliumClusterwideNetworkPolicy` (`cilium.io/v2`).
///
/// Same shape as [`CiliumNetworkPolicy`]; it may use `nodeSelector` and its
/// selectors are not confined to one namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct CiliumClusterwideNetworkPolicy {
    /// Always `cilium.io/v2`.
    pub api_version: String,
    /// Always `CiliumClusterwideNetworkPolicy`.
    pub kind: String,
    /// Object metadata; `name` is required.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// A single rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Rule>,
    /// A list of rules (combined with `spec` when both are set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specs: Option<Vec<Rule>>,
    /// Status written by Cilium; ignored by porin, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// One policy rule (`api.Rule`): a subject selector and the four direction lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Subject endpoints. Exactly one of `endpointSelector`/`nodeSelector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_selector: Option<EndpointSelector>,
    /// Subject nodes (host firewall); clusterwide policies only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<EndpointSelector>,
    /// Ingress allow rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<IngressRule>>,
    /// Ingress deny rules; they win over allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_deny: Option<Vec<IngressDenyRule>>,
    /// Egress allow rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<EgressRule>>,
    /// Egress deny rules; they win over allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_deny: Option<Vec<EgressDenyRule>>,
    /// Rule labels (metadata; they become the rule's origin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<Label>>,
    /// Whether this rule puts its subjects into default deny, per direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_default_deny: Option<DefaultDenyConfig>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Hubble policy-log tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogConfig>,
}

/// A rule label `{key, value, source}` (`labels.Label`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct Label {
    /// Label key (required).
    pub key: String,
    /// Label value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Label source; empty means `unspec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// `enableDefaultDeny`: per-direction default-deny switch (docs/semantics.md §3.3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct DefaultDenyConfig {
    /// Ingress default deny; unset means "if the rule has ingress rules".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<bool>,
    /// Egress default deny; unset means "if the rule has egress rules".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<bool>,
}

/// `log`: the policy-log tag (CRD: at most 32 printable characters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// The tag value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub value: Option<String>,
}

/// An ingress allow rule (`api.IngressRule`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct IngressRule {
    /// Peer endpoints by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_endpoints: Option<Vec<EndpointSelector>>,
    /// Removed in Cilium 1.19 (CRD `maxItems: 0`); modelled so it can be rejected with a clear message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 0))]
    pub from_requires: Option<Vec<EndpointSelector>>,
    /// Peer IP blocks in prefix notation.
    #[serde(default, rename = "fromCIDR", skip_serializing_if = "Option::is_none")]
    pub from_cidr: Option<Vec<String>>,
    /// Peer IP blocks with exceptions, or CIDR-group references.
    #[serde(
        default,
        rename = "fromCIDRSet",
        skip_serializing_if = "Option::is_none"
    )]
    pub from_cidr_set: Option<Vec<CidrRule>>,
    /// Special peers (`world`, `host`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_entities: Option<Vec<Entity>>,
    /// Cloud-provider groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_groups: Option<Vec<Groups>>,
    /// Peer nodes by node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_nodes: Option<Vec<EndpointSelector>>,
    /// L4 (and L7) constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ports: Option<Vec<PortRule>>,
    /// ICMP types; not together with `toPorts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmps: Option<Vec<IcmpRule>>,
    /// Mutual-authentication requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    /// Pre-release spelling of `authentication` (`auth: {type: ...}`) still in
    /// Cilium's `examples/policies/auth/auth.yaml`. The 1.19 CRD does not
    /// define it, so the API server prunes it and it has no effect; porin keeps
    /// it verbatim and warns (`PM041`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<serde_json::Value>,
}

/// An ingress deny rule (`api.IngressDenyRule`): no L7, no authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct IngressDenyRule {
    /// Peer endpoints by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_endpoints: Option<Vec<EndpointSelector>>,
    /// Removed in Cilium 1.19 (CRD `maxItems: 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 0))]
    pub from_requires: Option<Vec<EndpointSelector>>,
    /// Peer IP blocks in prefix notation.
    #[serde(default, rename = "fromCIDR", skip_serializing_if = "Option::is_none")]
    pub from_cidr: Option<Vec<String>>,
    /// Peer IP blocks with exceptions, or CIDR-group references.
    #[serde(
        default,
        rename = "fromCIDRSet",
        skip_serializing_if = "Option::is_none"
    )]
    pub from_cidr_set: Option<Vec<CidrRule>>,
    /// Special peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_entities: Option<Vec<Entity>>,
    /// Cloud-provider groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_groups: Option<Vec<Groups>>,
    /// Peer nodes by node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_nodes: Option<Vec<EndpointSelector>>,
    /// L4 constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ports: Option<Vec<PortDenyRule>>,
    /// ICMP types; not together with `toPorts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmps: Option<Vec<IcmpRule>>,
}

/// An egress allow rule (`api.EgressRule`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct EgressRule {
    /// Peer endpoints by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_endpoints: Option<Vec<EndpointSelector>>,
    /// Removed in Cilium 1.19 (CRD `maxItems: 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 0))]
    pub to_requires: Option<Vec<EndpointSelector>>,
    /// Peer IP blocks in prefix notation.
    #[serde(default, rename = "toCIDR", skip_serializing_if = "Option::is_none")]
    pub to_cidr: Option<Vec<String>>,
    /// Peer IP blocks with exceptions, or CIDR-group references.
    #[serde(default, rename = "toCIDRSet", skip_serializing_if = "Option::is_none")]
    pub to_cidr_set: Option<Vec<CidrRule>>,
    /// Special peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_entities: Option<Vec<Entity>>,
    /// Kubernetes services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_services: Option<Vec<Service>>,
    /// DNS names; need DNS answers to compile.
    #[serde(default, rename = "toFQDNs", skip_serializing_if = "Option::is_none")]
    pub to_fqdns: Option<Vec<FqdnSelector>>,
    /// Cloud-provider groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_groups: Option<Vec<Groups>>,
    /// Peer nodes by node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_nodes: Option<Vec<EndpointSelector>>,
    /// L4 (and L7) constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ports: Option<Vec<PortRule>>,
    /// ICMP types; not together with `toPorts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmps: Option<Vec<IcmpRule>>,
    /// Mutual-authentication requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    /// Pre-release spelling of `authentication` (`auth: {type: ...}`) still in
    /// Cilium's `examples/policies/auth/auth.yaml`. The 1.19 CRD does not
    /// define it, so the API server prunes it and it has no effect; porin keeps
    /// it verbatim and warns (`PM041`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<serde_json::Value>,
}

/// An egress deny rule (`api.EgressDenyRule`): no L7, no FQDNs, no authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct EgressDenyRule {
    /// Peer endpoints by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_endpoints: Option<Vec<EndpointSelector>>,
    /// Removed in Cilium 1.19 (CRD `maxItems: 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 0))]
    pub to_requires: Option<Vec<EndpointSelector>>,
    /// Peer IP blocks in prefix notation.
    #[serde(default, rename = "toCIDR", skip_serializing_if = "Option::is_none")]
    pub to_cidr: Option<Vec<String>>,
    /// Peer IP blocks with exceptions, or CIDR-group references.
    #[serde(default, rename = "toCIDRSet", skip_serializing_if = "Option::is_none")]
    pub to_cidr_set: Option<Vec<CidrRule>>,
    /// Special peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_entities: Option<Vec<Entity>>,
    /// Kubernetes services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_services: Option<Vec<Service>>,
    /// Cloud-provider groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_groups: Option<Vec<Groups>>,
    /// Peer nodes by node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_nodes: Option<Vec<EndpointSelector>>,
    /// L4 constraints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ports: Option<Vec<PortDenyRule>>,
    /// ICMP types; not together with `toPorts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmps: Option<Vec<IcmpRule>>,
}

/// A CIDR with exceptions, or a reference to CiliumCIDRGroups (`api.CIDRRule`).
/// Exactly one of `cidr`, `cidrGroupRef`, `cidrGroupSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct CidrRule {
    /// The allowed prefix, e.g. `10.0.0.0/8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// Name of a CiliumCIDRGroup; needs the group's definition to compile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 253),
        pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub cidr_group_ref: Option<String>,
    /// Selects CiliumCIDRGroups by label; needs their definitions to compile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr_group_selector: Option<EndpointSelector>,
    /// Prefixes inside `cidr` that are excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub except: Option<Vec<String>>,
}

/// A special peer class (`api.Entity`, the CRD enum).
///
/// `world-ipv4`/`world-ipv6` exist in Cilium's Go code but not in the CRD enum,
/// so the API server rejects them (docs/semantics.md §2.2); porin does too.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Entity {
    /// Every identity (wildcard).
    #[serde(rename = "all")]
    All,
    /// Everything outside the cluster.
    #[serde(rename = "world")]
    World,
    /// Everything inside the cluster.
    #[serde(rename = "cluster")]
    Cluster,
    /// The local host.
    #[serde(rename = "host")]
    Host,
    /// Endpoints whose identity is not resolved yet.
    #[serde(rename = "init")]
    Init,
    /// The ingress (Envoy) identity.
    #[serde(rename = "ingress")]
    Ingress,
    /// Pods not managed by Cilium.
    #[serde(rename = "unmanaged")]
    Unmanaged,
    /// Other nodes of the cluster.
    #[serde(rename = "remote-node")]
    RemoteNode,
    /// Cilium health endpoints.
    #[serde(rename = "health")]
    Health,
    /// Nothing.
    #[serde(rename = "none")]
    None,
    /// The Kubernetes API server.
    #[serde(rename = "kube-apiserver")]
    KubeApiserver,
}

impl Entity {
    /// The YAML spelling of the entity.
    pub fn as_str(self) -> &'static str {
        match self {
            Entity::All => "all",
            Entity::World => "world",
            Entity::Cluster => "cluster",
            Entity::Host => "host",
            Entity::Init => "init",
            Entity::Ingress => "ingress",
            Entity::Unmanaged => "unmanaged",
            Entity::RemoteNode => "remote-node",
            Entity::Health => "health",
            Entity::None => "none",
            Entity::KubeApiserver => "kube-apiserver",
        }
    }
}

/// Cloud-provider groups (`api.Groups`); turned into CIDRs by a derivative policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct Groups {
    /// AWS security groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsGroup>,
}

/// AWS group selection (`api.AWSGroup`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct AwsGroup {
    /// Instance tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Security group ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups_ids: Option<Vec<String>>,
    /// Security group names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups_names: Option<Vec<String>>,
    /// AWS region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// A Kubernetes service peer (`api.Service`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// A service by name and namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s_service: Option<K8sServiceNamespace>,
    /// Services by label and namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s_service_selector: Option<ServiceSelector>,
}

/// A service named by `serviceName` and `namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct K8sServiceNamespace {
    /// Service name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Service namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Services chosen by a label selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ServiceSelector {
    /// Label selector over service labels (required).
    pub selector: EndpointSelector,
    /// Service namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A DNS-name peer (`api.FQDNSelector`): exactly one of `matchName`/`matchPattern`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct FqdnSelector {
    /// A literal DNS name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255), pattern(r"^([-a-zA-Z0-9_]+[.]?)+$"))]
    pub match_name: Option<String>,
    /// A DNS name pattern with `*` wildcards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255), pattern(r"^([-a-zA-Z0-9_*]+[.]?)+$"))]
    pub match_pattern: Option<String>,
}

/// An allow rule's L4 entry (`api.PortRule`): ports plus optional TLS, SNI, listener and L7 rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct PortRule {
    // The TLS contexts, the listener and the L7 rules are boxed: absent
    // from most rules, they made each `PortRule` ~490 bytes inline (~80
    // boxed), 27 MiB of a load of 65,535 one-port CIDR rules (issue 14).
    // (Not a doc comment: it would enter the published schema.)
    /// Ports and protocols (at most 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 40))]
    pub ports: Option<Vec<PortProtocol>>,
    /// TLS context for connections terminated by the proxy.
    #[serde(
        default,
        rename = "terminatingTLS",
        skip_serializing_if = "Option::is_none"
    )]
    pub terminating_tls: Option<Box<TlsContext>>,
    /// TLS context for connections originated by the proxy.
    #[serde(
        default,
        rename = "originatingTLS",
        skip_serializing_if = "Option::is_none"
    )]
    pub originating_tls: Option<Box<TlsContext>>,
    /// Allowed TLS SNI values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), inner(length(max = 255)))]
    pub server_names: Option<Vec<String>>,
    /// Custom Envoy listener to redirect to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener: Option<Box<Listener>>,
    /// L7 rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Box<L7Rules>>,
}

/// A deny rule's L4 entry (`api.PortDenyRule`): ports only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct PortDenyRule {
    /// Ports and protocols (at most 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 40))]
    pub ports: Option<Vec<PortProtocol>>,
}

/// One port (or range) and protocol (`api.PortProtocol`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct PortProtocol {
    /// A port number 0-65535 or an IANA service name (named port), as a
    /// string: the CRD types it as a string, so an unquoted YAML integer is
    /// rejected at admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})|([a-zA-Z0-9]-?)*[a-zA-Z](-?[a-zA-Z0-9])*$"))]
    pub port: Option<String>,
    /// Inclusive end of a port range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 65535))]
    pub end_port: Option<i32>,
    /// L4 protocol; omitted means `ANY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<L4Proto>,
}

/// L4 protocol of a port entry (CRD enum; upper case only).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum L4Proto {
    /// TCP (6).
    #[serde(rename = "TCP")]
    Tcp,
    /// UDP (17).
    #[serde(rename = "UDP")]
    Udp,
    /// SCTP (132).
    #[serde(rename = "SCTP")]
    Sctp,
    /// VRRP (112); port must be empty or 0.
    #[serde(rename = "VRRP")]
    Vrrp,
    /// IGMP (2); port must be empty or 0.
    #[serde(rename = "IGMP")]
    Igmp,
    /// TCP, UDP and SCTP.
    #[serde(rename = "ANY")]
    Any,
}

impl L4Proto {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            L4Proto::Tcp => "TCP",
            L4Proto::Udp => "UDP",
            L4Proto::Sctp => "SCTP",
            L4Proto::Vrrp => "VRRP",
            L4Proto::Igmp => "IGMP",
            L4Proto::Any => "ANY",
        }
    }
}

/// A TLS context (`api.TLSContext`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct TlsContext {
    /// Secret holding the certificates (required).
    pub secret: Secret,
    /// Item name of the trusted CA.
    #[serde(default, rename = "trustedCA", skip_serializing_if = "Option::is_none")]
    pub trusted_ca: Option<String>,
    /// Item name of the certificate chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    /// Item name of the private key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
}

/// A reference to a Kubernetes secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct Secret {
    /// Secret namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Secret name (required).
    pub name: String,
}

/// A custom Envoy listener (`api.Listener`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct Listener {
    /// The CiliumEnvoyConfig that defines the listener (required).
    pub envoy_config: EnvoyConfig,
    /// Listener name (required, non-empty).
    #[schemars(length(min = 1))]
    pub name: String,
    /// Priority 1..=100 among listeners on the same entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub priority: Option<i64>,
}

/// Reference to a CiliumEnvoyConfig or CiliumClusterwideEnvoyConfig.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct EnvoyConfig {
    /// Resource kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<EnvoyConfigKind>,
    /// Resource name (required, non-empty).
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Kind of an Envoy config resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum EnvoyConfigKind {
    /// Namespaced.
    CiliumEnvoyConfig,
    /// Cluster-scoped.
    CiliumClusterwideEnvoyConfig,
}

/// L7 rules of a port rule (`api.L7Rules`); only one kind may be set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct L7Rules {
    /// HTTP rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<Vec<PortRuleHttp>>,
    /// Kafka rules (deprecated beta).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<Vec<PortRuleKafka>>,
    /// DNS rules (egress only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Vec<PortRuleDns>>,
    /// Name of a generic L7 protocol parser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l7proto: Option<String>,
    /// Key-value rules for `l7proto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l7: Option<Vec<BTreeMap<String, String>>>,
}

/// An HTTP rule (`api.PortRuleHTTP`); all fields are POSIX extended regexes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct PortRuleHttp {
    /// Path regex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Method regex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Host regex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Headers that must be present (`Name` or `Name: value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<String>>,
    /// Header value matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_matches: Option<Vec<HeaderMatch>>,
}

/// One header match of an HTTP rule (`api.HeaderMatch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct HeaderMatch {
    /// What to do on a mismatch; default drop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<MismatchAction>,
    /// Header name (required).
    #[schemars(length(min = 1))]
    pub name: String,
    /// Secret holding the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Secret>,
    /// Literal value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Header mismatch action (CRD enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum MismatchAction {
    /// Log the mismatch.
    #[serde(rename = "LOG")]
    Log,
    /// Add the header.
    #[serde(rename = "ADD")]
    Add,
    /// Delete the header.
    #[serde(rename = "DELETE")]
    Delete,
    /// Replace the header value.
    #[serde(rename = "REPLACE")]
    Replace,
}

/// A Kafka rule (`kafka.PortRule` from `cilium/proxy`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct PortRuleKafka {
    /// `produce` or `consume`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Kafka API key name or number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// Kafka API version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Client id.
    #[serde(default, rename = "clientID", skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Topic name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

/// A DNS rule (`api.PortRuleDNS`): one of `matchName`/`matchPattern`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct PortRuleDns {
    /// A literal DNS name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255), pattern(r"^([-a-zA-Z0-9_]+[.]?)+$"))]
    pub match_name: Option<String>,
    /// A DNS name pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255), pattern(r"^([-a-zA-Z0-9_*]+[.]?)+$"))]
    pub match_pattern: Option<String>,
}

/// A list of ICMP fields (`api.ICMPRule`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct IcmpRule {
    /// The ICMP types (at most 40).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 40))]
    pub fields: Option<Vec<IcmpField>>,
}

/// One ICMP type (`api.ICMPField`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct IcmpField {
    /// IP family; default `IPv4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<IcmpFamily>,
    /// Type number 0-255 or its CamelCase name (required).
    #[serde(rename = "type")]
    pub icmp_type: IntOrString,
}

/// ICMP family (CRD enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum IcmpFamily {
    /// ICMP.
    IPv4,
    /// ICMPv6.
    IPv6,
}

/// Mutual authentication (`api.Authentication`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct Authentication {
    /// Required mode.
    pub mode: AuthenticationMode,
}

/// Authentication mode (CRD enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum AuthenticationMode {
    /// No authentication.
    #[serde(rename = "disabled")]
    Disabled,
    /// Mutual authentication required.
    #[serde(rename = "required")]
    Required,
    /// Always fails (testing).
    #[serde(rename = "test-always-fail")]
    TestAlwaysFail,
}

/// A Kubernetes `IntOrString` (`x-kubernetes-int-or-string`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum IntOrString {
    /// An integer.
    Int(i64),
    /// A string.
    String(String),
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntOrStringVisitor;
        impl serde::de::Visitor<'_> for IntOrStringVisitor {
            type Value = IntOrString;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IntOrString, E> {
                Ok(IntOrString::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrString, E> {
                i64::try_from(v)
                    .map(IntOrString::Int)
                    .map_err(|_| E::custom(format!("integer `{v}` is out of range")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::String(v.to_owned()))
            }
        }
        deserializer.deserialize_any(IntOrStringVisitor)
    }
}

/// ICMPv4 type names (CRD pattern and Cilium `icmpIpv4TypeNameToCode`, icmp.go).
const ICMPV4_TYPES: &[(&str, u8)] = &[
    ("EchoReply", 0),
    ("DestinationUnreachable", 3),
    ("Redirect", 5),
    ("Echo", 8),
    ("EchoRequest", 8),
    ("RouterAdvertisement", 9),
    ("RouterSelection", 10),
    ("TimeExceeded", 11),
    ("ParameterProblem", 12),
    ("Timestamp", 13),
    ("TimestampReply", 14),
    ("Photuris", 40),
    ("ExtendedEchoRequest", 42),
    ("ExtendedEchoReply", 43),
];

/// ICMPv6 type names (Cilium `icmpIpv6TypeNameToCode`, icmp.go).
const ICMPV6_TYPES: &[(&str, u8)] = &[
    ("DestinationUnreachable", 1),
    ("PacketTooBig", 2),
    ("TimeExceeded", 3),
    ("ParameterProblem", 4),
    ("EchoRequest", 128),
    ("EchoReply", 129),
    ("MulticastListenerQuery", 130),
    ("MulticastListenerReport", 131),
    ("MulticastListenerDone", 132),
    ("RouterSolicitation", 133),
    ("RouterAdvertisement", 134),
    ("NeighborSolicitation", 135),
    ("NeighborAdvertisement", 136),
    ("RedirectMessage", 137),
    ("RouterRenumbering", 138),
    ("ICMPNodeInformationQuery", 139),
    ("ICMPNodeInformationResponse", 140),
    ("InverseNeighborDiscoverySolicitation", 141),
    ("InverseNeighborDiscoveryAdvertisement", 142),
    ("HomeAgentAddressDiscoveryRequest", 144),
    ("HomeAgentAddressDiscoveryReply", 145),
    ("MobilePrefixSolicitation", 146),
    ("MobilePrefixAdvertisement", 147),
    ("DuplicateAddressRequestCodeSuffix", 157),
    ("DuplicateAddressConfirmationCodeSuffix", 158),
    ("ExtendedEchoRequest", 160),
    ("ExtendedEchoReply", 161),
];

fn icmp_table(family: IcmpFamily) -> &'static [(&'static str, u8)] {
    match family {
        IcmpFamily::IPv4 => ICMPV4_TYPES,
        IcmpFamily::IPv6 => ICMPV6_TYPES,
    }
}

/// The ICMP type number for a name or a decimal string (`"8"`) in a family,
/// as Cilium resolves it; `None` if unknown. Numeric strings follow the CRD
/// pattern (0-255, no leading zeros).
pub fn icmp_type_number(family: IcmpFamily, name: &str) -> Option<u8> {
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        if name.len() > 1 && name.starts_with('0') {
            return None;
        }
        return name.parse().ok();
    }
    icmp_table(family)
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, number)| *number)
}

/// The ICMP type names of a family.
pub fn icmp_type_names(family: IcmpFamily) -> Vec<&'static str> {
    icmp_table(family).iter().map(|(name, _)| *name).collect()
}

impl IcmpField {
    /// The family, defaulting to IPv4 as the CRD does.
    pub fn family_or_default(&self) -> IcmpFamily {
        self.family.unwrap_or(IcmpFamily::IPv4)
    }

    /// The ICMP type number (`None` only for values validation rejects).
    pub fn type_number(&self) -> Option<u8> {
        match &self.icmp_type {
            IntOrString::Int(n) => u8::try_from(*n).ok(),
            IntOrString::String(name) => icmp_type_number(self.family_or_default(), name),
        }
    }
}

/// A `ports[].port` value as Cilium reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortValue {
    /// A number; `0` means every port of the protocol.
    Number(u16),
    /// A named port (IANA service name), lower-cased as Cilium normalises it.
    Named(String),
}

impl PortProtocol {
    /// The port as Cilium reads it (`PortProtocol.Validate`/`Sanitize`):
    /// a service name (lower-cased) or `strconv.ParseUint(port, 0, 16)` —
    /// so `"010"` is port 8 (docs/semantics.md §10.2). `None` when absent or
    /// invalid (validation rejects those).
    pub fn port_value(&self) -> Option<PortValue> {
        let text = self.port.as_deref()?;
        if crate::validate::text::is_iana_svc_name(text) {
            return Some(PortValue::Named(text.to_ascii_lowercase()));
        }
        crate::validate::text::parse_go_uint16(text)
            .ok()
            .map(PortValue::Number)
    }

    /// The protocol, `ANY` when omitted.
    pub fn protocol_or_any(&self) -> L4Proto {
        self.protocol.unwrap_or(L4Proto::Any)
    }
}
