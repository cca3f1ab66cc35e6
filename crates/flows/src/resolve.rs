//! Flow ends to peers of a compilation, the way `porin test` names them
//! ([`porin_compiler::explain::Peer`]): an inventory endpoint, or an
//! address with the identity the ipcache gives it (world, a CIDR of the
//! policies), or a reserved entity (host, remote-node, ...).
//!
//! An end is an endpoint when its pod name and namespace (or its first
//! workload's name, what a Kubernetes manifest's endpoint is named) name
//! one, else when its address is one's, else when its Kubernetes labels
//! contain every Kubernetes label of one in its namespace. An end that is
//! a pod none of these finds is not guessed at: it is
//! [`Resolved::Unmapped`] and its flow is not decided. Otherwise a
//! reserved label other than world (`reserved:host`) names the entity,
//! and an address is decided by the identity porin's ipcache gives it,
//! as a packet from or to it would be.

use std::collections::HashMap;
use std::net::IpAddr;

use porin_compiler::compile::Compiled;
use porin_compiler::explain::{Family, Peer};
use porin_compiler::identity::Identity;

use crate::record::FlowEnd;

/// A peer as far as a decision goes: the endpoint, or the identity of a
/// non-endpoint end (two addresses of one identity decide alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerKey {
    /// An endpoint (index into `Compiled::endpoints`).
    Endpoint(usize),
    /// An address outside the endpoints, by the identity it carries.
    Address(u32),
    /// A reserved entity (host, remote-node, ...), by its identity.
    Reserved(u32),
}

/// How an end resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// A peer.
    Peer(PeerKey),
    /// A pod no endpoint matches (the reason).
    Unmapped(String),
}

/// The most addresses whose ipcache identity is remembered; past it, an
/// address is looked up each time (the cache must not grow with a file of
/// scanners' addresses).
const ADDRESS_CACHE: usize = 1 << 16;

/// Resolves flow ends against one compilation.
pub struct Resolver<'c> {
    compiled: &'c Compiled,
    /// Namespace, then name: looked up by `&str`, without building a key
    /// per flow.
    by_name: HashMap<String, HashMap<String, usize>>,
    by_ip: HashMap<IpAddr, usize>,
    /// Per endpoint, its Kubernetes labels as Hubble writes them.
    k8s_labels: Vec<Vec<String>>,
    addresses: HashMap<IpAddr, u32>,
}

impl<'c> Resolver<'c> {
    /// A resolver of `compiled`'s endpoints and ipcache.
    pub fn new(compiled: &'c Compiled) -> Self {
        let mut by_name = HashMap::new();
        let mut by_ip = HashMap::new();
        let mut k8s_labels = Vec::new();
        for (index, endpoint) in compiled.endpoints.iter().enumerate() {
            by_name
                .entry(endpoint.namespace.clone().unwrap_or_default())
                .or_insert_with(HashMap::new)
                .entry(endpoint.name.clone())
                .or_insert(index);
            for ip in &endpoint.ips {
                by_ip.entry(*ip).or_insert(index);
            }
            k8s_labels.push(
                endpoint
                    .labels
                    .iter()
                    .filter(|l| l.source == "k8s")
                    .map(ToString::to_string)
                    .collect(),
            );
        }
        Resolver {
            compiled,
            by_name,
            by_ip,
            k8s_labels,
            addresses: HashMap::new(),
        }
    }

    /// The compilation.
    pub fn compiled(&self) -> &'c Compiled {
        self.compiled
    }

    fn by_labels(&self, end: &FlowEnd) -> Option<usize> {
        let k8s: Vec<&str> = end
            .labels
            .iter()
            .map(String::as_str)
            .filter(|l| l.starts_with("k8s:"))
            .collect();
        if k8s.is_empty() {
            return None;
        }
        self.compiled
            .endpoints
            .iter()
            .enumerate()
            .find(|(index, endpoint)| {
                endpoint.namespace.as_deref() == end.namespace.as_deref()
                    && !self.k8s_labels[*index].is_empty()
                    && self.k8s_labels[*index]
                        .iter()
                        .all(|l| k8s.contains(&l.as_str()))
            })
            .map(|(index, _)| index)
    }

    fn address_identity(&mut self, ip: IpAddr) -> u32 {
        if let Some(id) = self.addresses.get(&ip) {
            return *id;
        }
        let id = self.compiled.identity_of_ip(ip);
        if self.addresses.len() < ADDRESS_CACHE {
            self.addresses.insert(ip, id);
        }
        id
    }

    /// Resolves one end.
    pub fn resolve(&mut self, end: &FlowEnd) -> Resolved {
        let names = self
            .by_name
            .get(end.namespace.as_deref().unwrap_or_default());
        for name in [&end.pod_name, &end.workload].into_iter().flatten() {
            if let Some(index) = names.and_then(|n| n.get(name.as_str())) {
                return Resolved::Peer(PeerKey::Endpoint(*index));
            }
        }
        if let Some(index) = end.ip.and_then(|ip| self.by_ip.get(&ip)) {
            return Resolved::Peer(PeerKey::Endpoint(*index));
        }
        if let Some(index) = self.by_labels(end) {
            return Resolved::Peer(PeerKey::Endpoint(index));
        }
        if end.pod_name.is_some() || end.labels.iter().any(|l| l.starts_with("k8s:")) {
            return Resolved::Unmapped(format!(
                "{} is a pod that no inventory endpoint matches (by name, address or labels)",
                end.describe()
            ));
        }
        let reserved = end
            .labels
            .iter()
            .filter_map(|l| l.strip_prefix("reserved:"))
            .filter(|name| !name.starts_with("world"))
            .find_map(Identity::from_reserved_name)
            .or_else(|| {
                Identity::new(end.identity).ok().filter(|id| {
                    id.is_reserved()
                        && ![Identity::WORLD, Identity::WORLD_IPV4, Identity::WORLD_IPV6]
                            .contains(id)
                })
            });
        if let Some(identity) = reserved {
            return Resolved::Peer(PeerKey::Reserved(identity.get()));
        }
        match end.ip {
            Some(ip) => Resolved::Peer(PeerKey::Address(self.address_identity(ip))),
            None => Resolved::Unmapped(format!("{} has no address", end.describe())),
        }
    }

    /// The peer of `key` for a packet of `family` (`ip` is the flow's
    /// address of that end, which an address peer keeps).
    pub fn peer(&self, key: PeerKey, ip: IpAddr) -> Peer {
        match key {
            PeerKey::Endpoint(index) => Peer::Endpoint(index),
            PeerKey::Address(id) => Peer::Address(ip, id),
            PeerKey::Reserved(id) => Peer::Reserved(
                Identity::new(id)
                    .ok()
                    .and_then(Identity::reserved_name)
                    .unwrap_or("reserved")
                    .to_owned(),
                id,
            ),
        }
    }

    /// The name a report groups the peer under: the endpoint
    /// (`shop/api`), or the identity's name (`world-ipv4`, `CIDR
    /// 203.0.113.0/24`, `host`).
    pub fn name(&self, key: PeerKey) -> String {
        match key {
            PeerKey::Endpoint(index) => self
                .compiled
                .endpoints
                .get(index)
                .map(|e| e.display_name())
                .unwrap_or_default(),
            PeerKey::Address(id) | PeerKey::Reserved(id) => self.compiled.identity_name(id),
        }
    }
}

/// The family of a flow (its addresses are of one, checked when parsed).
pub fn family(ip: IpAddr) -> Family {
    Family::of(ip)
}
