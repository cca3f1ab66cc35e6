//! The inventory's data: what the loaders ([`super::yaml`], [`super::k8s`],
//! [`super::cilium`]) produce and the compiler reads. A leaf of the
//! inventory module, so the loaders and the compiler use these types
//! without depending on the code that calls the loaders.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::labels::LabelSet;
use crate::settings::AgentSettings;
pub use crate::settings::AllowLocalhost;

/// Cluster name used when none is given (Cilium's `cluster-name` default).
pub const DEFAULT_CLUSTER: &str = "default";

/// First automatically assigned IPv4 address: `10.244.0.1`, then upward
/// through `10.244.0.0/16`... and beyond if ever needed.
pub const AUTO_IPV4_BASE: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 0);
/// Base of automatically assigned IPv6 addresses: `fd00:10:244::1` upward.
pub const AUTO_IPV6_BASE: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0x244, 0, 0, 0, 0, 0);

/// Where an inventory item was defined.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct SourceLocation {
    /// Display path of the file.
    pub file: String,
    /// 1-based line, 0 when unknown.
    pub line: u32,
}

/// A named container port (for named-port rules).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct NamedPort {
    /// The port name (lower case, as Cilium compares them).
    pub name: String,
    /// The port number; 0 is kept so the "named port is zero" failure
    /// of Cilium can be reproduced.
    pub port: u16,
    /// IP protocol number (6 TCP, 17 UDP, 132 SCTP).
    pub proto: u8,
}

/// One endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    /// Name, unique within its namespace.
    pub name: String,
    /// Kubernetes namespace; `None` for endpoints outside Kubernetes.
    pub namespace: Option<String>,
    /// The workload's own labels (key → value). A Kubernetes endpoint's
    /// labels all get source `k8s` (a source the key names is dropped, as
    /// Cilium's `NewLabel` does); an endpoint outside Kubernetes keeps the
    /// source its keys name (`source:key`), `unspec` by default.
    pub labels: BTreeMap<String, String>,
    /// Addresses (given or assigned).
    pub ips: Vec<IpAddr>,
    /// Service account, for Kubernetes endpoints.
    pub service_account: Option<String>,
    /// Named container ports.
    pub ports: Vec<NamedPort>,
    /// Identity number given by the source (cluster dumps), if any.
    pub identity: Option<u32>,
    /// Complete identity labels given by the source (cluster dumps); when
    /// set they are used as they are, without deriving or filtering.
    pub identity_labels: Option<LabelSet>,
    /// Where the endpoint was defined.
    pub location: SourceLocation,
}

impl Endpoint {
    /// `namespace/name`, or `name` for an endpoint outside Kubernetes.
    pub fn display_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// A Kubernetes service, for `toServices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Service {
    /// Service name.
    pub name: String,
    /// Service namespace.
    pub namespace: String,
    /// The service's own labels (matched by `k8sServiceSelector`).
    pub labels: BTreeMap<String, String>,
    /// The pod selector; `None` for a selector-less service.
    pub selector: Option<BTreeMap<String, String>>,
    /// Backend addresses of a selector-less service (its Endpoints).
    pub backends: Vec<IpAddr>,
    /// The service's ports (`spec.ports`), in manifest order.
    pub ports: Vec<ServicePort>,
    /// `spec.clusterIPs` (or `spec.clusterIP`); empty for a headless
    /// service (`None`) or when the manifest gives none.
    pub cluster_ips: Vec<IpAddr>,
    /// Where the service was defined.
    pub location: SourceLocation,
}

/// One port of a Service: the port clients connect to and the pod port
/// it forwards to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServicePort {
    /// The port's name, if any.
    pub name: Option<String>,
    /// The Service port (`port`).
    pub port: u16,
    /// Where the traffic goes on a backing pod (`targetPort`; the Service
    /// port when absent, as Kubernetes defaults it).
    pub target: TargetPort,
    /// IP protocol number (6 TCP default, 17 UDP, 132 SCTP).
    pub proto: u8,
}

/// A Service's `targetPort`: a number, or the name of a container port of
/// each backing pod (resolved per pod, so two pods may differ).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum TargetPort {
    /// A port number.
    Number(u16),
    /// A container port name (lower case).
    Name(String),
}

/// The cluster's nodes, as an agent sees them (`pkg/node/types/node.go`
/// `Node`: name, labels, addresses).
///
/// The node an agent runs on is the **local node**: its addresses are the
/// `host` identity (1) in the ipcache; every other node's addresses are
/// `remote-node` (6) (`pkg/node/manager/manager.go` `NodeUpdated`: the
/// node IPs of a remote node get `ReservedIdentityRemoteNode`, those of
/// the local node `ReservedIdentityHost`). The local node also has a host
/// endpoint ([`Node::host_endpoint`]), the subject of host policies (the
/// host firewall).
///
/// Sources: porin inventory YAML and PolicyTest files (`nodes:` with
/// `name`, `labels`, `addresses`, `local`) and Kubernetes `Node` manifests
/// (`kubectl get nodes -o yaml`: `status.addresses` of type `InternalIP`
/// and `ExternalIP`, which `k8s.ParseNode`, `pkg/k8s/node.go`, turns into
/// node addresses). A manifest does not say which node is local; the
/// inventory's `localNode: NAME` does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Node addresses (InternalIP, ExternalIP).
    pub ips: Vec<IpAddr>,
    /// Whether porin compiles for this node's agent (the local node).
    pub local: bool,
    /// Where it was defined.
    pub location: SourceLocation,
}

/// The namespace part of a host endpoint's reference: the host endpoint
/// of node `NAME` is `node/NAME` (its namespace in [`Endpoint`] and in the
/// compiled output), the same word as `node/NAME` peers.
pub const HOST_ENDPOINT_NAMESPACE: &str = "node";

impl Node {
    /// The labels of the node's host endpoint, which the host identity (1)
    /// carries on the node's own agent: `reserved:host` and the node's
    /// labels in the `k8s` source (`pkg/endpoint/host.go` /
    /// `pkg/node/types/node.go`: the host endpoint takes the node's labels,
    /// and `identity.AddReservedIdentityWithLabels` gives them to
    /// identity 1). Host policies' `nodeSelector`s match these.
    pub fn host_labels(&self) -> LabelSet {
        let mut labels = LabelSet::new();
        labels.insert(crate::labels::Label::reserved("host"));
        for (key, value) in &self.labels {
            labels.insert(crate::labels::Label::k8s(key, value));
        }
        labels
    }

    /// The labels of a remote node's own identity under
    /// `enable-node-selector-labels`: `reserved:remote-node`, the node's
    /// labels in the `k8s` source and the cluster label, which
    /// `fromNodes`/`toNodes` selectors match (they require
    /// `reserved:remote-node` and, by default, the local cluster:
    /// `pkg/k8s/apis/cilium.io/utils/utils.go` `parseToCiliumIngressCommonRule`).
    pub fn remote_identity_labels(&self, cluster: &str) -> LabelSet {
        let mut labels = LabelSet::new();
        labels.insert(crate::labels::Label::reserved("remote-node"));
        for (key, value) in &self.labels {
            labels.insert(crate::labels::Label::k8s(key, value));
        }
        labels.insert(crate::labels::Label::k8s(
            crate::labels::CLUSTER_LABEL,
            cluster,
        ));
        labels
    }

    /// The node's host endpoint: `node/NAME`, the host identity (1) with
    /// [`Node::host_labels`], the node's addresses. Only the local node
    /// has one in a compilation ([`Inventory::finish`] adds it): every
    /// agent enforces its own host's policy, and the other nodes are
    /// `remote-node` peers.
    pub fn host_endpoint(&self) -> Endpoint {
        Endpoint {
            name: self.name.clone(),
            namespace: Some(HOST_ENDPOINT_NAMESPACE.to_owned()),
            labels: self.labels.clone(),
            ips: self.ips.clone(),
            service_account: None,
            ports: Vec::new(),
            identity: Some(crate::identity::Identity::HOST.get()),
            identity_labels: Some(self.host_labels()),
            location: self.location.clone(),
        }
    }
}

impl Endpoint {
    /// Whether this is a node's host endpoint that [`Inventory::finish`]
    /// added ([`Node::host_endpoint`]), not one the inventory listed.
    pub fn is_node_host(&self) -> bool {
        self.namespace.as_deref() == Some(HOST_ENDPOINT_NAMESPACE)
            && self.identity == Some(crate::identity::Identity::HOST.get())
    }
}

/// Everything the compiler knows about the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Inventory {
    /// Local cluster name (`cluster-name`).
    pub cluster: String,
    /// The agent's `allow-localhost` option (porin inventory YAML and test
    /// files: top-level `allowLocalhost`; other sources keep `auto`).
    pub allow_localhost: AllowLocalhost,
    /// The other agent settings that change verdicts
    /// ([`crate::settings`]; top-level `settings` of an inventory or test
    /// file).
    pub settings: AgentSettings,
    /// Namespace labels by namespace name; every namespace also carries
    /// `kubernetes.io/metadata.name=<name>` after [`Inventory::finish`].
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Endpoints, sorted by (namespace, name) after [`Inventory::finish`].
    pub endpoints: Vec<Endpoint>,
    /// DNS answers: name → addresses.
    pub fqdns: BTreeMap<String, Vec<IpAddr>>,
    /// Services.
    pub services: Vec<Service>,
    /// The cluster's nodes ([`super::Node`]); at most one is local.
    pub nodes: Vec<Node>,
    /// The local node's name given apart from its definition
    /// (`localNode`, for Node manifests that cannot say it).
    pub local_node: Option<String>,
    /// Host-side network devices of endpoints (`endpoints[].interface`, porin
    /// inventory YAML), by endpoint display name (`namespace/name` or
    /// `name`): the device `porin agent` attaches the endpoint's programs
    /// to (a microVM's tap, a container's host-side veth).
    ///
    /// Kept beside the endpoints rather than in [`Endpoint`]: where an
    /// endpoint is attached is no input of policy, so moving a VM to another
    /// tap changes no endpoint, no identity and no map state.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub interfaces: BTreeMap<String, Interface>,
    /// The Cilium the inventory's files say the cluster runs
    /// (`ciliumVersion`, `enableK8sClusterNetworkPolicy` of porin
    /// inventory YAML and test files). Read by the callers that validate
    /// policies ([`InventoryTarget::choice`]), below the command line and
    /// above `.porin.yaml`; the compiler itself reads no version.
    #[serde(skip)]
    pub target: InventoryTarget,
    /// Local CIDR identities given by number, by prefix: a session pins
    /// the number each policy prefix got, as Cilium keeps a prefix's local
    /// identity while a policy names it, so that a prefix added later does
    /// not renumber the others ([`crate::allocation`]). A prefix no policy
    /// names is ignored; no input format sets or shows these.
    #[serde(skip)]
    pub cidr_identities: BTreeMap<ipnetwork::IpNetwork, u32>,
}

/// `ciliumVersion` and `enableK8sClusterNetworkPolicy` of an inventory,
/// each with the file and line that set it (two files that disagree are
/// an error naming both).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InventoryTarget {
    /// `ciliumVersion`.
    pub cilium_version: Option<(porin_model::CiliumVersion, SourceLocation)>,
    /// `enableK8sClusterNetworkPolicy`.
    pub k8s_cluster_network_policy: Option<(bool, SourceLocation)>,
}

/// Records one target key in `slot`: a second file (or document) may
/// repeat the value, not contradict it.
pub(super) fn set_target_key<T: PartialEq + std::fmt::Display + Copy>(
    slot: &mut Option<(T, SourceLocation)>,
    key: &str,
    value: T,
    location: &SourceLocation,
) -> Result<(), crate::error::InventoryError> {
    if let Some((earlier, at)) = slot.as_ref() {
        if *earlier != value {
            return Err(crate::error::InventoryError::Invalid {
                file: location.file.clone(),
                line: location.line,
                message: format!(
                    "{key} `{value}` disagrees with {key} `{earlier}` of {}:{}; keep one",
                    at.file, at.line
                ),
            });
        }
        return Ok(());
    }
    *slot = Some((value, location.clone()));
    Ok(())
}

impl InventoryTarget {
    /// Adds what another inventory says (the C API merges inventories
    /// loaded apart); a disagreement is an error naming both places.
    pub fn merge(&mut self, other: &InventoryTarget) -> Result<(), crate::error::InventoryError> {
        if let Some((version, at)) = &other.cilium_version {
            set_target_key(&mut self.cilium_version, "ciliumVersion", *version, at)?;
        }
        if let Some((switch, at)) = &other.k8s_cluster_network_policy {
            set_target_key(
                &mut self.k8s_cluster_network_policy,
                "enableK8sClusterNetworkPolicy",
                *switch,
                at,
            )?;
        }
        Ok(())
    }

    /// What the inventory says about the target, as one layer of
    /// [`porin_model::TargetChoice`].
    pub fn choice(&self) -> porin_model::TargetChoice {
        porin_model::TargetChoice {
            version: self.cilium_version.as_ref().map(|(v, _)| *v),
            k8s_cluster_network_policy: self.k8s_cluster_network_policy.as_ref().map(|(b, _)| *b),
        }
    }
}

/// The host-side device of an endpoint, as the inventory names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    /// The device name (`tap3`, `veth1a2b`), at most 15 bytes (`IFNAMSIZ`).
    pub device: String,
    /// Where the endpoint naming it was defined.
    pub location: SourceLocation,
}

/// Parses an IP protocol name of a container port (`TCP` default).
pub(crate) fn container_port_proto(name: Option<&str>) -> Option<u8> {
    match name.map(str::to_ascii_uppercase).as_deref() {
        None | Some("TCP") => Some(6),
        Some("UDP") => Some(17),
        Some("SCTP") => Some(132),
        Some(_) => None,
    }
}
