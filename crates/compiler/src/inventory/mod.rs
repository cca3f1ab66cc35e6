//! The inventory: the workloads policies are judged against.
//!
//! An [`Inventory`] lists endpoints (Kubernetes pods or workloads, or
//! endpoints outside Kubernetes such as microVMs: no namespace, arbitrary
//! labels), namespaces with their labels, the local cluster name, DNS
//! answers for `toFQDNs` and service definitions for `toServices`.
//!
//! Sources, all producing the same [`Inventory`]:
//! - porin's own YAML ([`yaml`]): the inventory fields of a `PolicyTest`
//!   file, or a standalone `kind: Inventory` file that may also list
//!   `services` (see `docs` in `fixtures/inventories/`);
//! - Kubernetes manifests in a directory ([`k8s`]): Pod, Deployment,
//!   StatefulSet, DaemonSet, ReplicaSet, Job and CronJob pod templates,
//!   Namespace and Service objects, so CI can lint a GitOps repository
//!   without a cluster;
//! - a cluster dump ([`cilium`]): `cilium-dbg identity list -o json` or
//!   `cilium-dbg endpoint list -o json`, which carry identity numbers and
//!   full identity labels.
//!
//! Addresses: endpoints without `ips` get deterministic addresses (see
//! [`AUTO_IPV4_BASE`], [`AUTO_IPV6_BASE`]) in (namespace, name) order,
//! skipping addresses already taken, so the same inventory always yields
//! the same ipcache.

pub mod cilium;
pub mod invariants;
pub mod k8s;
pub mod service;
pub mod yaml;

mod model;
pub(crate) use model::container_port_proto;
pub use model::{
    AUTO_IPV4_BASE, AUTO_IPV6_BASE, AllowLocalhost, DEFAULT_CLUSTER, Endpoint,
    HOST_ENDPOINT_NAMESPACE, Interface, Inventory, InventoryTarget, NamedPort, Node, Service,
    ServicePort, SourceLocation, TargetPort,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use crate::error::InventoryError;
use crate::limits::{InventoryLimit, InventoryLimits};
use crate::settings::SettingsSpec;

impl Inventory {
    /// An empty inventory of the default cluster.
    pub fn new() -> Self {
        Self {
            cluster: DEFAULT_CLUSTER.to_owned(),
            ..Self::default()
        }
    }

    /// Loads an inventory from a file or a directory and finishes it, under
    /// the default [`InventoryLimits`].
    ///
    /// A directory is read recursively (files ending in `.yaml`, `.yml` or
    /// `.json`, in path order); each file may be porin YAML, Kubernetes
    /// manifests or a Cilium dump; documents of other kinds (policies, for
    /// example) are ignored.
    pub fn load(path: &Path) -> Result<Self, InventoryError> {
        Self::load_with_limits(path, &InventoryLimits::default())
    }

    /// [`Inventory::load`] under explicit limits: the file count is checked
    /// while the directory is listed, each file's size before it is read,
    /// the YAML budget while it is parsed, and the endpoint count after
    /// each file.
    pub fn load_with_limits(path: &Path, limits: &InventoryLimits) -> Result<Self, InventoryError> {
        Self::with_settings(&SettingsSpec::default())?.load_path(path, limits)
    }

    /// An empty inventory whose agent settings start from `defaults`
    /// (`settings:` of `.porin.yaml`) instead of Cilium's defaults; the
    /// `settings:` of the inventory files loaded into it override them.
    /// `Err` names a setting porin does not model.
    pub fn with_settings(defaults: &SettingsSpec) -> Result<Self, InventoryError> {
        let mut inventory = Self::new();
        defaults
            .apply(&mut inventory.settings, &mut inventory.allow_localhost)
            .map_err(|message| InventoryError::Invalid {
                file: String::new(),
                line: 0,
                message,
            })?;
        Ok(inventory)
    }

    /// Adds a file or directory ([`Inventory::add_path_with_limits`]) and
    /// finishes the inventory.
    pub fn load_path(
        mut self,
        path: &Path,
        limits: &InventoryLimits,
    ) -> Result<Self, InventoryError> {
        self.add_path_with_limits(path, limits)?;
        self.finish()?;
        Ok(self)
    }

    /// Adds one stream, named `name` in messages (at most
    /// `max_file_bytes` are read, as from a file), and finishes the
    /// inventory.
    pub fn load_reader(
        mut self,
        name: &str,
        reader: impl std::io::Read,
        limits: &InventoryLimits,
    ) -> Result<Self, InventoryError> {
        let text = read_rest(Path::new(name), reader, limits)?;
        self.add_text_with_limits(name, &text, limits)?;
        self.finish()?;
        Ok(self)
    }

    /// Loads an inventory from one stream (`porin --inventory -` passes
    /// standard input), named `name` in messages, and finishes it: at most
    /// `max_file_bytes` are read, as from a file.
    pub fn load_reader_with_limits(
        name: &str,
        reader: impl std::io::Read,
        limits: &InventoryLimits,
    ) -> Result<Self, InventoryError> {
        Self::new().load_reader(name, reader, limits)
    }

    /// Adds the inventory content of a file or directory (not finished),
    /// read as [`Inventory::load_with_limits`] reads it.
    pub fn add_path_with_limits(
        &mut self,
        path: &Path,
        limits: &InventoryLimits,
    ) -> Result<(), InventoryError> {
        let mut files = Vec::new();
        collect_files(path, path, limits, &mut files)?;
        for file in files {
            let text = read_bounded(&file, limits)?;
            self.add_text_with_limits(&file.display().to_string(), &text, limits)?;
        }
        Ok(())
    }

    /// Adds the inventory content of one file's text (not finished), under
    /// the default [`InventoryLimits`].
    pub fn add_text(&mut self, file: &str, text: &str) -> Result<(), InventoryError> {
        self.add_text_with_limits(file, text, &InventoryLimits::default())
    }

    /// [`Inventory::add_text`] under explicit limits (the text's size, the
    /// YAML budget, and the endpoint count of the whole inventory after
    /// it). On error the inventory may hold part of the text: callers that
    /// keep going clone first (the C API does).
    pub fn add_text_with_limits(
        &mut self,
        file: &str,
        text: &str,
        limits: &InventoryLimits,
    ) -> Result<(), InventoryError> {
        check_limit(
            file,
            InventoryLimit::FileBytes,
            u64::try_from(text.len()).unwrap_or(u64::MAX),
            limits,
        )?;
        self.add_text_unchecked(file, text, limits)?;
        check_limit(
            file,
            InventoryLimit::Endpoints,
            u64::try_from(self.endpoints.len()).unwrap_or(u64::MAX),
            limits,
        )
    }

    fn add_text_unchecked(
        &mut self,
        file: &str,
        text: &str,
        limits: &InventoryLimits,
    ) -> Result<(), InventoryError> {
        let trimmed = text.trim_start();
        if trimmed.starts_with('[') {
            // A JSON list: a Cilium dump unless its items are Kubernetes
            // objects (they carry a `kind`), which are not inventory.
            let is_dump = serde_json::from_str::<Vec<serde_json::Value>>(text)
                .map_or(true, |items| items.iter().all(|i| i.get("kind").is_none()));
            if is_dump {
                return cilium::add_dump(self, file, text);
            }
            return Ok(());
        }
        if trimmed.starts_with('{')
            && serde_json::from_str::<serde_json::Value>(text)
                .is_ok_and(|v| v.get("kind").is_none() && v.get("status").is_some())
        {
            // One endpoint object of `cilium-dbg endpoint get -o json`.
            return cilium::add_dump(self, file, text);
        }
        let documents = yaml::parse_documents_with_limits(file, text, limits)?;
        let mut has_inventory = false;
        for document in &documents {
            let kind = document.value.get("kind").and_then(|k| k.as_str());
            if matches!(kind, Some("Inventory" | "PolicyTest")) {
                has_inventory = true;
            } else {
                k8s::add_manifest(self, file, document)?;
            }
        }
        if has_inventory {
            // A second, typed pass keeps the line of every endpoint.
            yaml::add_inventory_text_with_limits(self, file, text, limits)?;
        }
        Ok(())
    }

    /// Completes the inventory: namespaces named by endpoints exist, every
    /// namespace carries `kubernetes.io/metadata.name`, endpoints are sorted
    /// and unique, and endpoints without addresses get deterministic ones.
    pub fn finish(&mut self) -> Result<(), InventoryError> {
        self.finish_inner()
    }

    /// Checks the nodes: names unique, every node with an address, at
    /// most one local node (`localNode` marks one of the names), no
    /// address of a node used by another node or an endpoint.
    fn finish_nodes(&mut self) -> Result<(), InventoryError> {
        let invalid = |node: &Node, message: String| InventoryError::Invalid {
            file: node.location.file.clone(),
            line: node.location.line,
            message,
        };
        if let Some(local) = self.local_node.clone() {
            let Some(node) = self.nodes.iter_mut().find(|n| n.name == local) else {
                return Err(InventoryError::Invalid {
                    file: String::new(),
                    line: 0,
                    message: format!("localNode `{local}` is not one of the inventory's nodes"),
                });
            };
            node.local = true;
        }
        let mut names: BTreeMap<&str, &Node> = BTreeMap::new();
        let mut owners: BTreeMap<IpAddr, String> = self
            .endpoints
            .iter()
            .flat_map(|e| {
                e.ips
                    .iter()
                    .map(move |ip| (*ip, format!("endpoint `{}`", e.display_name())))
            })
            .collect();
        let mut local: Option<&Node> = None;
        for node in &self.nodes {
            if node.name.is_empty() {
                return Err(invalid(node, "node without a name".to_owned()));
            }
            if let Some(first) = names.insert(&node.name, node) {
                return Err(invalid(
                    node,
                    format!(
                        "duplicate node `{}` (first defined at {}:{})",
                        node.name, first.location.file, first.location.line
                    ),
                ));
            }
            if node.ips.is_empty() {
                return Err(invalid(
                    node,
                    format!(
                        "node `{}` has no addresses: its traffic would get no node identity (host or remote-node); list `addresses` (a Node manifest: status.addresses of type InternalIP or ExternalIP)",
                        node.name
                    ),
                ));
            }
            if node.local {
                if let Some(other) = local {
                    return Err(invalid(
                        node,
                        format!(
                            "nodes `{}` and `{}` are both local; porin compiles for one agent",
                            other.name, node.name
                        ),
                    ));
                }
                local = Some(node);
            }
            for ip in &node.ips {
                if let Some(owner) = owners.insert(*ip, format!("node `{}`", node.name)) {
                    return Err(invalid(
                        node,
                        format!(
                            "node `{}`: address {ip} is also the address of {owner}",
                            node.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn finish_inner(&mut self) -> Result<(), InventoryError> {
        // The local node's host endpoint is derived here, last; a second
        // `finish` (a session re-finishing an inventory it changed) derives
        // it again from the nodes as they are then.
        self.endpoints.retain(|e| !e.is_node_host());
        if self.cluster.is_empty() {
            DEFAULT_CLUSTER.clone_into(&mut self.cluster);
        }
        for endpoint in &self.endpoints {
            if let Some(ns) = &endpoint.namespace {
                self.namespaces.entry(ns.clone()).or_default();
            }
        }
        for (name, labels) in &mut self.namespaces {
            // The API server always sets `kubernetes.io/metadata.name` to
            // the namespace's name (NamespaceDefaultLabelName, GA in 1.22),
            // overwriting any other value: an inventory cannot make one
            // namespace look like another to a namespaceSelector.
            labels.insert(crate::labels::NAMESPACE_NAME_LABEL.to_owned(), name.clone());
        }
        self.finish_nodes()?;
        // A stable sort on the name alone: of two endpoints with one name,
        // the one loaded first stays first, so the duplicate error points
        // at the later definition whatever the two files' paths are.
        self.endpoints
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        for pair in self.endpoints.windows(2) {
            if pair[0].namespace == pair[1].namespace && pair[0].name == pair[1].name {
                return Err(InventoryError::Invalid {
                    file: pair[1].location.file.clone(),
                    line: pair[1].location.line,
                    message: format!(
                        "duplicate endpoint `{}` (first defined at {}:{})",
                        pair[1].display_name(),
                        pair[0].location.file,
                        pair[0].location.line
                    ),
                });
            }
        }
        for endpoint in &self.endpoints {
            // Labels Cilium would not turn into one identity, and given
            // numbers the endpoint cannot hold, refuse the inventory here,
            // located, rather than at compile time.
            let invalid = |message: String| InventoryError::Invalid {
                file: endpoint.location.file.clone(),
                line: endpoint.location.line,
                message: format!("endpoint `{}`: {message}", endpoint.display_name()),
            };
            let labels = crate::allocation::try_endpoint_identity_labels(endpoint, self)
                .map_err(|e| invalid(e.to_string()))?;
            if let Some(id) = endpoint.identity {
                crate::allocation::check_given_identity(id, &labels)
                    .map_err(|m| invalid(format!("identity {m}")))?;
            }
        }
        let mut owner: BTreeMap<IpAddr, String> = BTreeMap::new();
        for endpoint in &self.endpoints {
            for ip in &endpoint.ips {
                if let Some(previous) = owner.insert(*ip, endpoint.display_name()) {
                    return Err(InventoryError::Invalid {
                        file: endpoint.location.file.clone(),
                        line: endpoint.location.line,
                        message: format!(
                            "address {ip} of `{}` is already used by `{previous}`",
                            endpoint.display_name()
                        ),
                    });
                }
            }
        }
        let taken: BTreeSet<IpAddr> = owner.keys().copied().collect();
        let mut next_v4 = u32::from(AUTO_IPV4_BASE);
        let mut next_v6 = u128::from(AUTO_IPV6_BASE);
        for endpoint in &mut self.endpoints {
            if !endpoint.ips.is_empty() {
                continue;
            }
            let v4 = loop {
                next_v4 = next_v4.wrapping_add(1);
                let candidate = IpAddr::V4(Ipv4Addr::from(next_v4));
                if !taken.contains(&candidate) {
                    break candidate;
                }
            };
            let v6 = loop {
                next_v6 = next_v6.wrapping_add(1);
                let candidate = IpAddr::V6(Ipv6Addr::from(next_v6));
                if !taken.contains(&candidate) {
                    break candidate;
                }
            };
            endpoint.ips = vec![v4, v6];
        }
        self.add_host_endpoint()
    }

    /// Adds the local node's host endpoint ([`Node::host_endpoint`]), the
    /// subject of host policies, unless the inventory already lists a host
    /// endpoint (a cluster dump's, identity 1). It sorts where `node/NAME`
    /// sorts among the endpoints.
    fn add_host_endpoint(&mut self) -> Result<(), InventoryError> {
        let has_host = self
            .endpoints
            .iter()
            .any(|e| e.identity == Some(crate::identity::Identity::HOST.get()));
        let Some(node) = self.nodes.iter().find(|n| n.local) else {
            return Ok(());
        };
        if has_host {
            return Ok(());
        }
        let host = node.host_endpoint();
        let at = self
            .endpoints
            .partition_point(|e| (&e.namespace, &e.name) < (&host.namespace, &host.name));
        if let Some(same) = self
            .endpoints
            .get(at)
            .filter(|e| e.namespace == host.namespace && e.name == host.name)
        {
            return Err(InventoryError::Invalid {
                file: same.location.file.clone(),
                line: same.location.line,
                message: format!(
                    "endpoint `{}` has the name of the local node's host endpoint (`node/NAME` names a node's host); rename the endpoint or its namespace",
                    same.display_name()
                ),
            });
        }
        self.endpoints.insert(at, host);
        Ok(())
    }

    /// The endpoint named `namespace/name` (or `name` outside Kubernetes).
    pub fn endpoint(&self, reference: &str) -> Option<usize> {
        let (namespace, name) = match reference.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, reference),
        };
        self.endpoints
            .iter()
            .position(|e| e.namespace.as_deref() == namespace && e.name == name)
    }
}

/// Refuses `given` if it exceeds `limit` of `limits`.
fn check_limit(
    file: &str,
    limit: InventoryLimit,
    given: u64,
    limits: &InventoryLimits,
) -> Result<(), InventoryError> {
    let max = limits.get(limit);
    if given > max {
        return Err(InventoryError::Limit {
            file: file.to_owned(),
            limit_kind: limit,
            given,
            limit: max,
        });
    }
    Ok(())
}

/// Reads a file, refusing it by its size before reading and, should it
/// grow meanwhile, after at most one byte more than the limit.
fn read_bounded(file: &Path, limits: &InventoryLimits) -> Result<String, InventoryError> {
    let display = file.display().to_string();
    let read_error = |source| InventoryError::Read {
        path: file.to_path_buf(),
        source,
    };
    let handle = std::fs::File::open(file).map_err(read_error)?;
    let size = handle.metadata().map_err(read_error)?.len();
    check_limit(&display, InventoryLimit::FileBytes, size, limits)?;
    read_rest(file, handle, limits)
}

/// Reads at most one byte more than `max_file_bytes` from `reader` (a file,
/// or a stream whose size is not known before) and refuses more.
fn read_rest(
    file: &Path,
    reader: impl std::io::Read,
    limits: &InventoryLimits,
) -> Result<String, InventoryError> {
    use std::io::Read as _;
    let display = file.display().to_string();
    let read_error = |source| InventoryError::Read {
        path: file.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    reader
        .take(limits.max_file_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    check_limit(
        &display,
        InventoryLimit::FileBytes,
        u64::try_from(bytes.len()).unwrap_or(u64::MAX),
        limits,
    )?;
    String::from_utf8(bytes).map_err(|e| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e.utf8_error(),
        ))
    })
}

/// Lists the inventory files under `path`, refusing the directory `root`
/// as soon as it holds more than `max_files` of them.
fn collect_files(
    root: &Path,
    path: &Path,
    limits: &InventoryLimits,
    files: &mut Vec<std::path::PathBuf>,
) -> Result<(), InventoryError> {
    let metadata = std::fs::metadata(path).map_err(|source| InventoryError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if !metadata.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries = Vec::new();
    let mut counted: usize = 0;
    let reader = std::fs::read_dir(path).map_err(|source| InventoryError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    for entry in reader {
        let entry = entry.map_err(|source| InventoryError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let entry_path = entry.path();
        // Counted while the directory is listed (by name), so a directory
        // of millions of files is refused before they are all held.
        if is_inventory_file(&entry_path) {
            counted = counted.saturating_add(1);
            check_limit(
                &root.display().to_string(),
                InventoryLimit::Files,
                u64::try_from(files.len().saturating_add(counted)).unwrap_or(u64::MAX),
                limits,
            )?;
        }
        entries.push(entry_path);
    }
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect_files(root, &entry, limits, files)?;
        } else if is_inventory_file(&entry) {
            files.push(entry);
            check_limit(
                &root.display().to_string(),
                InventoryLimit::Files,
                u64::try_from(files.len()).unwrap_or(u64::MAX),
                limits,
            )?;
        }
    }
    Ok(())
}

fn is_inventory_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
}
