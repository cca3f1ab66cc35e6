//! porin's own inventory YAML.
//!
//! The inventory fields of a `PolicyTest` file (docs/policy-tests.md:
//! `cluster`, `namespaces`, `endpoints`, `fqdns`), also accepted as a
//! standalone document of `kind: Inventory`, which may add `services`:
//!
//! ```yaml
//! kind: Inventory
//! cluster: default
//! allowLocalhost: auto   # or always | policy (Cilium's allow-localhost)
//! ciliumVersion: "1.20"  # the Cilium the cluster runs (default 1.19); --cilium-version wins
//! enableK8sClusterNetworkPolicy: true   # the agent's --enable-k8s-cluster-network-policy
//! namespaces: {prod: {team: payments}}
//! endpoints:
//!   - {name: web, namespace: prod, labels: {app: web}, ports: [{name: http, port: 8080}]}
//!   - {name: vm-1, labels: {role: db}, ips: [192.0.2.10]}   # outside Kubernetes
//!   - {name: cached, namespace: prod, labels: {app: c}, identity: 4242}  # given identity
//!   - {name: cilium-health, labels: {"reserved:health": ""}, identity: 4}  # a reserved endpoint
//!   - {name: vm-2, labels: {role: web}, ips: [192.0.2.11], interface: tap3}  # its host-side device
//! fqdns: {api.example.com: [203.0.113.10]}
//! services:
//!   - {name: db, namespace: prod, selector: {app: db}}
//!   - {name: legacy, namespace: prod, backends: [192.0.2.50]}      # selector-less
//!   - {name: web, namespace: prod, selector: {app: web}, ports: [{port: 80, targetPort: http}]}
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{
    AllowLocalhost, Endpoint, Interface, Inventory, NamedPort, Node, Service, ServicePort,
    SourceLocation, TargetPort, container_port_proto, model::set_target_key,
};
use crate::allocation::{check_given_identity, try_endpoint_identity_labels};
use crate::error::InventoryError;
use crate::limits::{InventoryLimit, InventoryLimits};
use crate::settings::SettingsSpec;

/// One parsed YAML document with the line it starts on.
#[derive(Debug, Clone)]
pub struct Document {
    /// Index of the document in its file (0-based).
    pub index: usize,
    /// 1-based line of the document's root node.
    pub line: u32,
    /// The document as a JSON value.
    pub value: serde_json::Value,
}

/// Converts a serde-saphyr error into a located inventory error.
pub fn syntax_error(file: &str, error: &serde_saphyr::Error) -> InventoryError {
    let (line, column) = error
        .location()
        .map(|l| {
            (
                u32::try_from(l.line()).unwrap_or(u32::MAX),
                u32::try_from(l.column()).unwrap_or(u32::MAX),
            )
        })
        .unwrap_or((0, 0));
    InventoryError::Syntax {
        file: file.to_owned(),
        line,
        column,
        message: first_line(&error.to_string()),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

/// The parser options that enforce `limits` while a text is read: the
/// budget counts parser events before any value is built, the alias limit
/// counts replayed events.
fn parse_options(limits: &InventoryLimits) -> serde_saphyr::Options {
    // Events: a start and an end per collection, one per scalar and
    // alias, two per document and two per stream; the node and document
    // limits are the ones users set, so events never stop a parse first.
    let max_events = limits
        .max_nodes
        .saturating_mul(2)
        .saturating_add(limits.max_documents.saturating_mul(2))
        .saturating_add(limits.max_alias_expansions)
        .saturating_add(2);
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: limits.max_depth,
            max_documents: limits.max_documents,
            max_nodes: limits.max_nodes,
            max_events: max_events,
            // Every alias replays at least one event: the replay limit
            // bounds the alias and anchor counts too.
            max_aliases: limits.max_alias_expansions,
            max_anchors: limits.max_alias_expansions,
            max_recorded_anchor_events: limits.max_alias_expansions,
            // Replaced by the explicit replay budget: the ratio heuristic
            // would refuse inventories that reuse a few anchors often.
            enforce_alias_anchor_ratio: false,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: limits.max_alias_expansions,
        },
    }
}

/// A parse error: an [`InventoryError::Limit`] when a limit of `limits`
/// stopped the parser, else [`syntax_error`].
fn parse_error(
    file: &str,
    error: &serde_saphyr::Error,
    limits: &InventoryLimits,
) -> InventoryError {
    use serde_saphyr::Error;
    use serde_saphyr::budget::BudgetBreach;
    let mut inner = error;
    while let Error::AliasError { error, .. } | Error::WithSnippet { error, .. } = inner {
        inner = error;
    }
    let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let over = |limit: InventoryLimit| limits.get(limit).saturating_add(1);
    let (limit_kind, given) = match inner {
        Error::Budget { breach, .. } => match breach {
            BudgetBreach::Depth { depth } => (InventoryLimit::Depth, wide(*depth)),
            BudgetBreach::Documents { documents } => (InventoryLimit::Documents, wide(*documents)),
            BudgetBreach::Nodes { nodes } => (InventoryLimit::Nodes, wide(*nodes)),
            // Only reachable through nodes or aliases (see parse_options).
            BudgetBreach::Events { .. } => (InventoryLimit::Nodes, over(InventoryLimit::Nodes)),
            BudgetBreach::Aliases { aliases } => (InventoryLimit::AliasExpansions, wide(*aliases)),
            BudgetBreach::Anchors { anchors } => (InventoryLimit::AliasExpansions, wide(*anchors)),
            // Events copied into open anchors: how nested anchors (the
            // levels of an alias bomb) are charged before they replay.
            BudgetBreach::RecordedAnchorEvents {
                recorded_anchor_events,
            } => (
                InventoryLimit::AliasExpansions,
                wide(*recorded_anchor_events),
            ),
            _ => return syntax_error(file, error),
        },
        Error::AliasReplayLimitExceeded {
            total_replayed_events,
            ..
        } => (
            InventoryLimit::AliasExpansions,
            wide(*total_replayed_events),
        ),
        Error::AliasReplayStackDepthExceeded { depth, .. } => (
            InventoryLimit::Depth,
            wide(*depth).max(over(InventoryLimit::Depth)),
        ),
        _ => return syntax_error(file, error),
    };
    InventoryError::Limit {
        file: file.to_owned(),
        limit_kind,
        given,
        limit: limits.get(limit_kind),
    }
}

/// Parses every document of a YAML (or JSON) text, skipping empty ones,
/// under the default [`InventoryLimits`].
pub fn parse_documents(file: &str, text: &str) -> Result<Vec<Document>, InventoryError> {
    parse_documents_with_limits(file, text, &InventoryLimits::default())
}

/// [`parse_documents`] under explicit limits.
pub fn parse_documents_with_limits(
    file: &str,
    text: &str,
    limits: &InventoryLimits,
) -> Result<Vec<Document>, InventoryError> {
    let documents: Vec<Option<Spanned<serde_json::Value>>> =
        serde_saphyr::from_multiple_with_options(text, parse_options(limits))
            .map_err(|e| parse_error(file, &e, limits))?;
    Ok(documents
        .into_iter()
        .enumerate()
        .filter_map(|(index, doc)| {
            let doc = doc?;
            if doc.value.is_null() {
                return None;
            }
            Some(Document {
                index,
                line: u32::try_from(doc.referenced.line()).unwrap_or(u32::MAX),
                value: doc.value,
            })
        })
        .collect())
}

/// A scalar that YAML may write as a string, number or boolean; label
/// values and ports are strings in the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Any {
            Text(String),
            Unsigned(u64),
            Signed(i64),
            Float(f64),
            Flag(bool),
        }
        Ok(Scalar(match Any::deserialize(deserializer)? {
            Any::Text(text) => text,
            Any::Unsigned(n) => n.to_string(),
            Any::Signed(n) => n.to_string(),
            Any::Float(n) => n.to_string(),
            Any::Flag(b) => b.to_string(),
        }))
    }
}

/// Label maps: `key: value` with scalar values.
pub type LabelMap = BTreeMap<String, Scalar>;

fn labels_of(map: &LabelMap) -> BTreeMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect()
}

/// A named container port as written in an inventory.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    /// Name.
    pub name: String,
    /// Number.
    pub port: u16,
    /// `TCP` (default), `UDP` or `SCTP`.
    #[serde(default)]
    pub protocol: Option<String>,
}

/// An endpoint as written in an inventory.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EndpointSpec {
    /// Name.
    pub name: String,
    /// Namespace; absent = outside Kubernetes.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: LabelMap,
    /// Addresses.
    #[serde(default)]
    pub ips: Vec<String>,
    /// Service account.
    #[serde(default)]
    pub service_account: Option<String>,
    /// Named ports.
    #[serde(default)]
    pub ports: Vec<PortSpec>,
    /// A given identity number (porin extension, e.g. from a cluster).
    #[serde(default)]
    pub identity: Option<u32>,
    /// The endpoint's host-side network device (`porin agent`).
    #[serde(default)]
    pub interface: Option<String>,
}

/// A service as written in an inventory.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceSpec {
    /// Name.
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The service's labels.
    #[serde(default)]
    pub labels: LabelMap,
    /// Pod selector; absent = selector-less service.
    #[serde(default)]
    pub selector: Option<LabelMap>,
    /// Backend addresses of a selector-less service.
    #[serde(default)]
    pub backends: Vec<String>,
    /// The service's ports, as a Service manifest's `spec.ports` (what a
    /// `svc/NAMESPACE/NAME` destination resolves, [`super::service`]).
    #[serde(default)]
    pub ports: Vec<ServicePortSpec>,
}

/// One port of a service as written: `port`, `targetPort` (a number or a
/// container port name; the port when absent), `protocol` (TCP default).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServicePortSpec {
    /// The port's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The Service port.
    pub port: u16,
    /// Where it goes on each backend.
    #[serde(default)]
    pub target_port: Option<Scalar>,
    /// TCP (default), UDP or SCTP.
    #[serde(default)]
    pub protocol: Option<String>,
}

/// A node as written in an inventory ([`super::Node`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Name (required, unique).
    pub name: String,
    /// Node labels.
    #[serde(default)]
    pub labels: LabelMap,
    /// Node addresses (at least one).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Whether this is the node porin compiles for.
    #[serde(default)]
    pub local: bool,
}

/// The inventory fields of an `Inventory` or `PolicyTest` document; other
/// fields (policies, cases) are read by their own owners.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InventoryFields {
    /// Document kind.
    #[serde(default)]
    pub kind: Option<String>,
    /// Local cluster name.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The agent's `allow-localhost` option (`auto`, `always`, `policy`).
    #[serde(default)]
    pub allow_localhost: Option<AllowLocalhost>,
    /// The agent settings, by Cilium flag name ([`crate::settings`]).
    #[serde(default)]
    pub settings: Option<Spanned<SettingsSpec>>,
    /// Namespace labels.
    #[serde(default)]
    pub namespaces: BTreeMap<String, Option<LabelMap>>,
    /// Endpoints.
    #[serde(default)]
    pub endpoints: Vec<Spanned<EndpointSpec>>,
    /// DNS answers.
    #[serde(default)]
    pub fqdns: BTreeMap<String, Vec<String>>,
    /// Services.
    #[serde(default)]
    pub services: Vec<Spanned<ServiceSpec>>,
    /// Nodes.
    #[serde(default)]
    pub nodes: Vec<Spanned<NodeSpec>>,
    /// The local node's name (for nodes from manifests).
    #[serde(default)]
    pub local_node: Option<String>,
    /// The Cilium version the cluster runs (`"1.19"`, `"1.20"`).
    #[serde(default)]
    pub cilium_version: Option<Spanned<String>>,
    /// The agent runs with `--enable-k8s-cluster-network-policy`.
    #[serde(default)]
    pub enable_k8s_cluster_network_policy: Option<Spanned<bool>>,
}

fn parse_ip(file: &str, line: u32, text: &str) -> Result<IpAddr, InventoryError> {
    text.trim().parse().map_err(|_| InventoryError::Invalid {
        file: file.to_owned(),
        line,
        message: format!("`{text}` is not an IP address"),
    })
}

fn to_line(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl InventoryFields {
    /// The target keys (`ciliumVersion`, `enableK8sClusterNetworkPolicy`).
    fn add_target_to(&self, inventory: &mut Inventory, file: &str) -> Result<(), InventoryError> {
        let at = |line: u64| SourceLocation {
            file: file.to_owned(),
            line: to_line(line),
        };
        if let Some(version) = &self.cilium_version {
            let location = at(version.referenced.line());
            let parsed =
                porin_model::CiliumVersion::parse_modelled(&version.value).map_err(|e| {
                    InventoryError::Invalid {
                        file: file.to_owned(),
                        line: location.line,
                        message: format!("ciliumVersion: {e}"),
                    }
                })?;
            set_target_key(
                &mut inventory.target.cilium_version,
                "ciliumVersion",
                parsed,
                &location,
            )?;
        }
        if let Some(switch) = &self.enable_k8s_cluster_network_policy {
            set_target_key(
                &mut inventory.target.k8s_cluster_network_policy,
                "enableK8sClusterNetworkPolicy",
                switch.value,
                &at(switch.referenced.line()),
            )?;
        }
        Ok(())
    }

    /// Adds these fields to an inventory.
    pub fn add_to(&self, inventory: &mut Inventory, file: &str) -> Result<(), InventoryError> {
        self.add_target_to(inventory, file)?;
        if let Some(cluster) = &self.cluster {
            inventory.cluster.clone_from(cluster);
        }
        if let Some(allow_localhost) = self.allow_localhost {
            inventory.allow_localhost = allow_localhost;
        }
        if let Some(settings) = &self.settings {
            let line = to_line(settings.referenced.line());
            if let (Some(top), Some(inner)) = (self.allow_localhost, settings.value.allow_localhost)
                && top != inner
            {
                return Err(InventoryError::Invalid {
                    file: file.to_owned(),
                    line,
                    message: format!(
                        "allowLocalhost `{}` and settings.allow-localhost `{}` disagree; keep one",
                        top.as_str(),
                        inner.as_str()
                    ),
                });
            }
            settings
                .value
                .apply(&mut inventory.settings, &mut inventory.allow_localhost)
                .map_err(|message| InventoryError::Invalid {
                    file: file.to_owned(),
                    line,
                    message,
                })?;
        }
        for spanned in &self.nodes {
            let line = to_line(spanned.referenced.line());
            let spec = &spanned.value;
            let mut ips = Vec::with_capacity(spec.addresses.len());
            for ip in &spec.addresses {
                ips.push(parse_ip(file, line, ip)?);
            }
            inventory.nodes.push(Node {
                name: spec.name.clone(),
                labels: labels_of(&spec.labels),
                ips,
                local: spec.local,
                location: SourceLocation {
                    file: file.to_owned(),
                    line,
                },
            });
        }
        if let Some(name) = &self.local_node {
            inventory.local_node = Some(name.clone());
        }
        for (name, labels) in &self.namespaces {
            let entry = inventory.namespaces.entry(name.clone()).or_default();
            if let Some(labels) = labels {
                entry.extend(labels_of(labels));
            }
        }
        for (index, spanned) in self.endpoints.iter().enumerate() {
            let line = to_line(spanned.referenced.line());
            let spec = &spanned.value;
            let mut ips = Vec::with_capacity(spec.ips.len());
            for ip in &spec.ips {
                ips.push(parse_ip(file, line, ip)?);
            }
            let mut ports = Vec::with_capacity(spec.ports.len());
            for port in &spec.ports {
                let proto = container_port_proto(port.protocol.as_deref()).ok_or_else(|| {
                    InventoryError::Invalid {
                        file: file.to_owned(),
                        line,
                        message: format!(
                            "port `{}`: protocol `{}` is not TCP, UDP or SCTP",
                            port.name,
                            port.protocol.as_deref().unwrap_or_default()
                        ),
                    }
                })?;
                ports.push(NamedPort {
                    name: port.name.to_ascii_lowercase(),
                    port: port.port,
                    proto,
                });
            }
            if spec.name.is_empty() {
                return Err(InventoryError::Invalid {
                    file: file.to_owned(),
                    line,
                    message: "endpoint without a name".to_owned(),
                });
            }
            let endpoint = Endpoint {
                name: spec.name.clone(),
                namespace: spec.namespace.clone(),
                labels: labels_of(&spec.labels),
                ips,
                service_account: spec.service_account.clone(),
                ports,
                identity: spec.identity,
                identity_labels: None,
                location: SourceLocation {
                    file: file.to_owned(),
                    line,
                },
            };
            if let Some(device) = &spec.interface {
                check_device_name(device).map_err(|problem| InventoryError::Invalid {
                    file: file.to_owned(),
                    line,
                    message: format!(
                        "endpoints[{index}].interface: endpoint `{}`: device name `{device}` {problem}",
                        endpoint.display_name()
                    ),
                })?;
                inventory.interfaces.insert(
                    endpoint.display_name(),
                    Interface {
                        device: device.clone(),
                        location: endpoint.location.clone(),
                    },
                );
            }
            if let Some(id) = spec.identity {
                // Whether the endpoint is a reserved one does not depend on
                // namespace labels defined later; label errors themselves
                // are reported by `Inventory::finish`.
                if let Ok(labels) = try_endpoint_identity_labels(&endpoint, inventory) {
                    check_given_identity(id, &labels).map_err(|message| {
                        InventoryError::Invalid {
                            file: file.to_owned(),
                            line,
                            message: format!(
                                "endpoints[{index}].identity: endpoint `{}`: identity {message}",
                                endpoint.display_name()
                            ),
                        }
                    })?;
                }
            }
            inventory.endpoints.push(endpoint);
        }
        for (name, ips) in &self.fqdns {
            let mut parsed = Vec::with_capacity(ips.len());
            for ip in ips {
                parsed.push(parse_ip(file, 0, ip)?);
            }
            inventory
                .fqdns
                .entry(name.to_ascii_lowercase().trim_end_matches('.').to_owned())
                .or_default()
                .extend(parsed);
        }
        for spanned in &self.services {
            let line = to_line(spanned.referenced.line());
            let spec = &spanned.value;
            let mut backends = Vec::with_capacity(spec.backends.len());
            for ip in &spec.backends {
                backends.push(parse_ip(file, line, ip)?);
            }
            let mut ports = Vec::with_capacity(spec.ports.len());
            for (index, written) in spec.ports.iter().enumerate() {
                let invalid = |what: String| InventoryError::Invalid {
                    file: file.to_owned(),
                    line,
                    message: format!("service `{}`: ports[{index}]: {what}", spec.name),
                };
                if written.port == 0 {
                    return Err(invalid("`port` 0 is not a port".to_owned()));
                }
                let target = match written.target_port.as_ref().map(|t| t.0.trim()) {
                    None => TargetPort::Number(written.port),
                    Some(text) => match text.parse::<u16>() {
                        Ok(0) => return Err(invalid("`targetPort` 0 is not a port".to_owned())),
                        Ok(number) => TargetPort::Number(number),
                        Err(_) if !text.is_empty() => TargetPort::Name(text.to_ascii_lowercase()),
                        Err(_) => {
                            return Err(invalid("`targetPort` is empty".to_owned()));
                        }
                    },
                };
                let proto = container_port_proto(written.protocol.as_deref()).ok_or_else(|| {
                    invalid(format!(
                        "protocol `{}` is not TCP, UDP or SCTP",
                        written.protocol.as_deref().unwrap_or_default()
                    ))
                })?;
                ports.push(ServicePort {
                    name: written.name.clone(),
                    port: written.port,
                    target,
                    proto,
                });
            }
            inventory.services.push(Service {
                name: spec.name.clone(),
                namespace: spec
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_owned()),
                labels: labels_of(&spec.labels),
                selector: spec.selector.as_ref().map(labels_of),
                backends,
                ports,
                cluster_ips: Vec::new(),
                location: SourceLocation {
                    file: file.to_owned(),
                    line,
                },
            });
        }
        Ok(())
    }
}

/// Checks a network device name as Linux accepts it (`dev_valid_name`,
/// `net/core/dev.c`): 1 to 15 bytes (`IFNAMSIZ` - 1), not `.` or `..`, no
/// `/`, `:` or whitespace.
fn check_device_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name.len() > 15 {
        return Err("is longer than 15 bytes (IFNAMSIZ)");
    }
    if name == "." || name == ".." {
        return Err("is not a device name");
    }
    if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err("contains `/`, `:`, whitespace or a control character");
    }
    Ok(())
}

/// The top-level fields of an `Inventory` document, as [`InventoryFields`]
/// reads them (camelCase). A `PolicyTest` document may carry these and its
/// own fields; each owner checks the union it accepts.
pub const INVENTORY_FIELDS: &[&str] = &[
    "kind",
    "cluster",
    "allowLocalhost",
    "settings",
    "namespaces",
    "endpoints",
    "fqdns",
    "services",
    "nodes",
    "localNode",
    "ciliumVersion",
    "enableK8sClusterNetworkPolicy",
];

/// The `kind` and the top-level keys of one YAML mapping document, with
/// their locations (other values are skipped unread), in one pass.
struct TopLevelKeys {
    kind: Option<String>,
    keys: Vec<Spanned<String>>,
}

impl<'de> Deserialize<'de> for TopLevelKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = TopLevelKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TopLevelKeys, A::Error> {
                let (mut kind, mut keys) = (None, Vec::new());
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    if key.value == "kind" {
                        kind = map.next_value::<Option<String>>()?;
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                    keys.push(key);
                }
                Ok(TopLevelKeys { kind, keys })
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// Refuses a top-level field that no reader of `kind` documents knows:
/// serde would skip it, and a misspelt `endpoint:` or `case:` would
/// silently leave an inventory without endpoints or a test file without
/// cases, so a test that passes while testing nothing. `accepted(kind)`
/// gives the fields of a kind, `None` for kinds that are not checked.
pub fn check_top_level_fields(
    file: &str,
    text: &str,
    limits: &InventoryLimits,
    accepted: impl Fn(&str) -> Option<Vec<&'static str>>,
) -> Result<(), InventoryError> {
    let documents: Vec<Option<TopLevelKeys>> =
        serde_saphyr::from_multiple_with_options(text, parse_options(limits))
            .map_err(|e| parse_error(file, &e, limits))?;
    for document in documents.into_iter().flatten() {
        let TopLevelKeys {
            kind: Some(kind),
            keys,
        } = document
        else {
            continue;
        };
        let Some(fields) = accepted(&kind) else {
            continue;
        };
        if let Some(unknown) = keys
            .iter()
            .find(|key| !fields.contains(&key.value.as_str()))
        {
            return Err(InventoryError::Invalid {
                file: file.to_owned(),
                line: to_line(unknown.referenced.line()),
                message: format!(
                    "unknown field `{}` in a document of kind `{kind}`; expected one of {}",
                    unknown.value,
                    fields
                        .iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    Ok(())
}

/// Reads the inventory fields of every `Inventory`/`PolicyTest` document of
/// a text, under the default [`InventoryLimits`].
pub fn add_inventory_text(
    inventory: &mut Inventory,
    file: &str,
    text: &str,
) -> Result<(), InventoryError> {
    add_inventory_text_with_limits(inventory, file, text, &InventoryLimits::default())
}

/// [`add_inventory_text`] under explicit limits.
pub fn add_inventory_text_with_limits(
    inventory: &mut Inventory,
    file: &str,
    text: &str,
    limits: &InventoryLimits,
) -> Result<(), InventoryError> {
    let documents: Vec<Option<InventoryFields>> =
        serde_saphyr::from_multiple_with_options(text, parse_options(limits))
            .map_err(|e| parse_error(file, &e, limits))?;
    check_top_level_fields(file, text, limits, |kind| {
        (kind == "Inventory").then(|| INVENTORY_FIELDS.to_vec())
    })?;
    for fields in documents.into_iter().flatten() {
        if matches!(fields.kind.as_deref(), Some("Inventory" | "PolicyTest")) {
            fields.add_to(inventory, file)?;
        }
    }
    Ok(())
}
