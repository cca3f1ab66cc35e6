//! Identity allocation: which number every label set gets.
//!
//! - Reserved identities 1..=10 with their `reserved:` labels
//!   (`pkg/identity/numericidentity.go`; 7 = kube-apiserver also carries
//!   `reserved:remote-node`).
//! - Endpoint identities: the endpoint's identity labels (§2.3; see
//!   [`try_endpoint_identity_labels`]). Endpoints with equal label sets share
//!   one identity, as in Cilium. Numbers given by the inventory (cluster
//!   dumps) are kept once [`check_given_identity`] accepts them (a reserved
//!   endpoint's own reserved number, or a cluster identity); the other
//!   distinct label sets are **sorted** and
//!   numbered from 256 upward, skipping given numbers, so the result is
//!   independent of input order. The range is cluster 0's with the default
//!   `max-connected-clusters` (256..=65535).
//! - Local-scope CIDR identities `0x01000000 | n` for every prefix the
//!   policies name (including `except` prefixes, FQDN answers and
//!   selector-less service backends), sorted (IPv4 first, then by address
//!   and length) and numbered from 1, except that a number the inventory
//!   gives a prefix (`Inventory::cidr_identities`: a session's pins) is
//!   kept and skipped. Their labels are `cidr:<prefix>` and the family's
//!   world label (`labels.GetCIDRLabels`, dual-stack). `/0` prefixes are
//!   the world identities 9/10 themselves.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use ipnetwork::IpNetwork;
use rayon::prelude::*;
use serde::Serialize;

use crate::cidrgroup::CidrGroups;
use crate::error::{CompileError, IdentityRange, InventoryError};
use crate::identity::{Identity, IdentityError};
use crate::inventory::{Endpoint, Inventory};
use crate::labels::{
    CLUSTER_LABEL, Label, LabelSet, NAMESPACE_LABELS_PREFIX, POD_NAMESPACE_LABEL,
    SERVICE_ACCOUNT_LABEL, SOURCE_CIDR, SOURCE_CIDRGROUP, SOURCE_FQDN, SOURCE_K8S, SOURCE_RESERVED,
    canonical_prefix, is_identity_label,
};

/// First number allocated to endpoint label sets (`MinimalNumericIdentity`).
pub const FIRST_ALLOCATED: u32 = 256;

/// From how many prefixes the CIDR identities' labels are made on rayon's
/// threads.
const PARALLEL_CIDR_IDENTITIES: usize = 1024;
/// Last number of cluster 0's range (`max-connected-clusters` = 255).
pub const LAST_ALLOCATED: u32 = 65_535;

/// What an identity stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum IdentityKind {
    /// A reserved identity (`reserved:<name>`).
    Reserved {
        /// Its name.
        name: String,
    },
    /// A reserved identity that inventory endpoints carry (health, ...).
    ReservedEndpoints {
        /// Its labels.
        name: String,
        /// The endpoints (indices into the inventory).
        endpoints: Vec<usize>,
    },
    /// The identity of one or more endpoints.
    Endpoints {
        /// The endpoints (indices into the inventory).
        endpoints: Vec<usize>,
    },
    /// A remote node's own identity (`enable-node-selector-labels`): the
    /// remote-node scope number its addresses carry.
    Node {
        /// The nodes with these labels, by name.
        nodes: Vec<String>,
    },
    /// A local CIDR identity.
    Cidr {
        /// Its prefix.
        #[serde(serialize_with = "crate::labels::serialize_display")]
        prefix: IpNetwork,
    },
}

/// One identity with its labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdentityInfo {
    /// The number.
    pub id: u32,
    /// Its labels.
    pub labels: LabelSet,
    /// What it stands for.
    pub kind: IdentityKind,
}

/// All identities of a compilation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityTable {
    /// Every identity, sorted by number (lookups bisect it: a table built
    /// by hand must keep it sorted).
    pub identities: Vec<IdentityInfo>,
    /// Identity of each inventory endpoint (same order as the inventory).
    pub endpoint_identity: Vec<u32>,
    /// CIDR identity of each policy prefix.
    pub cidr_identity: BTreeMap<IpNetwork, u32>,
    /// The identity of each remote node with one of its own
    /// (`enable-node-selector-labels`), by node name; empty otherwise (the
    /// nodes' addresses are then `remote-node`, 6).
    pub node_identity: BTreeMap<String, u32>,
    /// Under `policy-cidr-match-mode: nodes`, the identity of each remote
    /// node address (one per address: its labels include the address's
    /// `cidr:` labels); empty otherwise. Takes precedence over
    /// [`Self::node_identity`].
    pub node_address_identity: BTreeMap<std::net::IpAddr, u32>,
}

impl IdentityTable {
    /// Allocates identities for an inventory and the prefixes of the
    /// policies, without CIDR groups.
    pub fn allocate(
        inventory: &Inventory,
        prefixes: &BTreeSet<IpNetwork>,
    ) -> Result<Self, CompileError> {
        Self::allocate_with_groups(inventory, prefixes, &CidrGroups::default())
    }

    /// [`Self::allocate`] with the CiliumCIDRGroups of the inputs: every
    /// CIDR identity also carries the `cidrgroup:` labels of the group
    /// prefixes that contain it ([`CidrGroups::labels_of`]), and a group
    /// listing a `/0` gives its labels to that family's world identity
    /// (Cilium's ipcache labels `0.0.0.0/0` itself, which stays world).
    pub fn allocate_with_groups(
        inventory: &Inventory,
        prefixes: &BTreeSet<IpNetwork>,
        groups: &CidrGroups,
    ) -> Result<Self, CompileError> {
        let mut identities: Vec<IdentityInfo> = reserved_identities();
        let mut label_sets: Vec<LabelSet> = Vec::with_capacity(inventory.endpoints.len());
        for endpoint in &inventory.endpoints {
            let labels = try_endpoint_identity_labels(endpoint, inventory).map_err(|message| {
                InventoryError::Invalid {
                    file: endpoint.location.file.clone(),
                    line: endpoint.location.line,
                    message: format!("endpoint `{}`: {message}", endpoint.display_name()),
                }
            })?;
            label_sets.push(labels);
        }

        // Reserved label sets keep their reserved numbers; given numbers
        // claim their label set next.
        let mut by_labels: BTreeMap<LabelSet, u32> = identities
            .iter()
            .map(|info| (info.labels.clone(), info.id))
            .collect();
        let mut taken: BTreeMap<u32, LabelSet> = BTreeMap::new();
        let mut reserved_given: BTreeMap<u32, &LabelSet> = BTreeMap::new();
        for (endpoint, labels) in inventory.endpoints.iter().zip(&label_sets) {
            let Some(id) = endpoint.identity else {
                continue;
            };
            check_given_identity(id, labels).map_err(|message| CompileError::Identity {
                identity: id,
                message: format!(
                    "given to `{}` ({}:{}): {message}",
                    endpoint.display_name(),
                    endpoint.location.file,
                    endpoint.location.line
                ),
            })?;
            let conflict = if Identity::new(id).is_ok_and(Identity::is_reserved) {
                reserved_given
                    .insert(id, labels)
                    .filter(|l| *l != labels)
                    .cloned()
            } else {
                taken.insert(id, labels.clone()).filter(|l| l != labels)
            };
            if let Some(existing) = conflict {
                return Err(CompileError::Identity {
                    identity: id,
                    message: format!(
                        "given to `{}` with labels `{labels}` but also to labels `{existing}`",
                        endpoint.display_name()
                    ),
                });
            }
            by_labels.entry(labels.clone()).or_insert(id);
        }
        // A reserved endpoint of a cluster dump brings its identity's
        // labels as the agent has them (the host's node labels and
        // reserved:kube-apiserver when the apiserver runs on the node).
        for info in &mut identities {
            if let Some(labels) = reserved_given.get(&info.id) {
                info.labels = (*labels).clone();
            }
        }
        let to_allocate: BTreeSet<&LabelSet> = inventory
            .endpoints
            .iter()
            .zip(&label_sets)
            .filter(|(e, l)| e.identity.is_none() && !by_labels.contains_key(*l))
            .map(|(_, l)| l)
            .collect();
        let mut next = FIRST_ALLOCATED;
        for labels in to_allocate {
            while taken.contains_key(&next) {
                next += 1;
            }
            if next > LAST_ALLOCATED {
                return Err(CompileError::RangeExhausted {
                    range: IdentityRange::Endpoint,
                    given: by_labels.len() + 1,
                    limit: (LAST_ALLOCATED - FIRST_ALLOCATED + 1) as usize,
                });
            }
            taken.insert(next, labels.clone());
            by_labels.insert(labels.clone(), next);
            next += 1;
        }

        let mut endpoint_identity = Vec::with_capacity(inventory.endpoints.len());
        let mut members: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (index, (endpoint, labels)) in inventory.endpoints.iter().zip(&label_sets).enumerate() {
            let id = match endpoint.identity {
                Some(id) => id,
                None => by_labels.get(labels).copied().unwrap_or(0),
            };
            endpoint_identity.push(id);
            members.entry(id).or_default().push(index);
        }
        for info in &mut identities {
            if let (IdentityKind::Reserved { .. }, Some(list)) = (&info.kind, members.get(&info.id))
            {
                info.kind = IdentityKind::ReservedEndpoints {
                    name: info.labels.to_string(),
                    endpoints: list.clone(),
                };
            }
        }
        for (id, labels) in &taken {
            identities.push(IdentityInfo {
                id: *id,
                labels: labels.clone(),
                kind: IdentityKind::Endpoints {
                    endpoints: members.get(id).cloned().unwrap_or_default(),
                },
            });
        }

        // CIDR identities: a given (pinned) number kept, the other prefixes
        // numbered in sorted prefix order from the lowest free number.
        let mut sorted: Vec<IpNetwork> = prefixes
            .iter()
            .map(|p| canonical_prefix(*p))
            .filter(|p| p.prefix() != 0)
            .collect();
        sorted.sort_by_key(|p| (p.is_ipv6(), p.network(), p.prefix()));
        sorted.dedup();
        let numbers = cidr_numbers(&sorted, &inventory.cidr_identities)?;
        // Each prefix's labels on their own, in parallel (65,535 CIDR rules:
        // formatting and sorting their labels was ~2 % of the compile, on
        // the calling thread alone), kept in prefix order.
        let cidr = |(number, prefix): (u32, IpNetwork)| -> Result<IdentityInfo, CompileError> {
            let id = Identity::local(number).map_err(|_| CompileError::RangeExhausted {
                range: IdentityRange::Cidr,
                given: prefixes.len(),
                limit: Identity::MAX_INDEX as usize,
            })?;
            Ok(IdentityInfo {
                id: id.get(),
                labels: cidr_labels(prefix, groups),
                kind: IdentityKind::Cidr { prefix },
            })
        };
        let cidr_identities: Vec<IdentityInfo> = if sorted.len() >= PARALLEL_CIDR_IDENTITIES {
            numbers
                .into_par_iter()
                .zip(sorted)
                .map(cidr)
                .collect::<Result<_, _>>()?
        } else {
            numbers
                .into_iter()
                .zip(sorted)
                .map(cidr)
                .collect::<Result<_, _>>()?
        };
        let cidr_identity: BTreeMap<IpNetwork, u32> = cidr_identities
            .iter()
            .filter_map(|info| match info.kind {
                IdentityKind::Cidr { prefix } => Some((prefix, info.id)),
                _ => None,
            })
            .collect();
        identities.extend(cidr_identities);

        let (node_identity, node_address_identity) = node_identities(inventory, &mut identities)?;
        if inventory.settings.policy_cidr_match_nodes {
            host_cidr_labels(inventory, &mut identities);
        }

        for info in &mut identities {
            let all = match &info.kind {
                IdentityKind::Reserved { name } if name == "world-ipv4" => {
                    IpNetwork::new(std::net::Ipv4Addr::UNSPECIFIED.into(), 0)
                }
                IdentityKind::Reserved { name } if name == "world-ipv6" => {
                    IpNetwork::new(std::net::Ipv6Addr::UNSPECIFIED.into(), 0)
                }
                _ => continue,
            };
            if let Ok(all) = all {
                for label in groups.labels_of(all).iter() {
                    info.labels.insert(label.clone());
                }
            }
        }
        identities.sort_by_key(|i| i.id);
        Ok(Self {
            identities,
            endpoint_identity,
            cidr_identity,
            node_identity,
            node_address_identity,
        })
    }

    /// Incremental allocation (a session's, `crate::session`): the number
    /// a new endpoint with identity labels `labels` and no given number
    /// gets from [`Self::allocate`] when every other endpoint holds its
    /// number as a given one (the session pins them): the number of the
    /// endpoint identity with these labels (`Some((id, false))`), else the
    /// lowest number from [`FIRST_ALLOCATED`] no endpoint identity holds
    /// (`Some((id, true))`). `None` when that is not this simple: the
    /// labels are a reserved identity's, or the range is exhausted; the
    /// session then allocates in full.
    pub fn endpoint_number(&self, labels: &LabelSet) -> Option<(u32, bool)> {
        // `identities` is in id order, so the endpoint numbers of the range
        // come ascending: the lowest free one is the first gap, found in the
        // same pass as the label comparison (no set of taken numbers).
        let mut free = FIRST_ALLOCATED;
        let mut gap = false;
        for info in &self.identities {
            match &info.kind {
                IdentityKind::Endpoints { .. } => {
                    if info.labels == *labels {
                        return Some((info.id, false));
                    }
                    if !gap && (FIRST_ALLOCATED..=LAST_ALLOCATED).contains(&info.id) {
                        if info.id == free {
                            free += 1;
                        } else if info.id > free {
                            gap = true;
                        }
                    }
                }
                IdentityKind::Reserved { .. } | IdentityKind::ReservedEndpoints { .. } => {
                    if info.labels == *labels {
                        return None;
                    }
                }
                IdentityKind::Cidr { .. } | IdentityKind::Node { .. } => {}
            }
        }
        (free <= LAST_ALLOCATED).then_some((free, true))
    }

    /// Records an endpoint appended to the inventory (position
    /// `endpoint_identity.len()`, a session's storage order) with endpoint
    /// identity `id` (from [`Self::endpoint_number`]). No other endpoint
    /// moves, so no member list but `id`'s changes: the work is that of
    /// the identity, not of the cluster (inserting at the endpoint's sorted
    /// place shifted every member index above it: at 10,257 endpoints two
    /// thirds of a session's identity add, session 12).
    pub fn push_endpoint(&mut self, id: u32, labels: &LabelSet) {
        let index = self.endpoint_identity.len();
        self.endpoint_identity.push(id);
        if let Ok(position) = self.position(id) {
            if let IdentityKind::Endpoints { endpoints } = &mut self.identities[position].kind {
                // The highest index: the list stays ascending.
                endpoints.push(index);
            }
            return;
        }
        self.insert_identity(IdentityInfo {
            id,
            labels: labels.clone(),
            kind: IdentityKind::Endpoints {
                endpoints: vec![index],
            },
        });
    }

    /// Puts a new identity (its number not in the table) at its place in
    /// number order.
    fn insert_identity(&mut self, info: IdentityInfo) {
        let position = self.identities.partition_point(|i| i.id < info.id);
        self.identities.insert(position, info);
    }

    /// Takes identity `id` out of the table (not out of the other maps).
    fn remove_identity(&mut self, id: u32) -> Option<IdentityInfo> {
        let position = self.position(id).ok()?;
        Some(self.identities.remove(position))
    }

    /// Where identity `id` is in [`Self::identities`] (`Err`: where it
    /// would go). A binary search of the sorted list: a map from numbers to
    /// positions had every position above an added or removed identity
    /// move, a pass over the CIDR identities for each pod added or removed
    /// (~1.8 µs per thousand of them, session 25).
    fn position(&self, id: u32) -> Result<usize, usize> {
        self.identities.binary_search_by_key(&id, |info| info.id)
    }

    /// Records the removal of the endpoint at position `index` the way
    /// `Vec::swap_remove` removes it: the last endpoint takes its place.
    /// Returns its identity and whether that identity is gone (no other
    /// endpoint holds it). `None` (nothing changed) when an endpoint
    /// involved holds no endpoint identity (a reserved one): the session
    /// then allocates in full.
    pub fn swap_remove_endpoint(&mut self, index: usize) -> Option<(u32, bool)> {
        let id = *self.endpoint_identity.get(index)?;
        let last = self.endpoint_identity.len() - 1;
        let moved = self.endpoint_identity[last];
        for identity in [id, moved] {
            let position = self.position(identity).ok()?;
            if !matches!(
                self.identities[position].kind,
                IdentityKind::Endpoints { .. }
            ) {
                return None;
            }
        }
        let position = self.position(id).ok()?;
        let IdentityKind::Endpoints { endpoints } = &mut self.identities[position].kind else {
            return None;
        };
        endpoints.retain(|e| *e != index);
        let gone = endpoints.is_empty();
        if gone {
            self.remove_identity(id);
        }
        self.endpoint_identity.swap_remove(index);
        if index != last {
            // The last endpoint now sits at `index`: its identity's list
            // loses `last` (its highest entry) and gains `index`.
            let position = self.position(moved).ok();
            if let Some(IdentityKind::Endpoints { endpoints }) = position
                .and_then(|p| self.identities.get_mut(p))
                .map(|i| &mut i.kind)
            {
                endpoints.retain(|e| *e != last);
                let at = endpoints.partition_point(|e| *e < index);
                endpoints.insert(at, index);
            }
        }
        Some((id, gone))
    }

    /// Incremental allocation (a session's): the local number a new CIDR
    /// prefix gets from [`Self::allocate`] when every other prefix holds
    /// its number as a given one: the lowest that no CIDR identity holds.
    /// `None` when the local range is full.
    pub fn free_cidr_number(&self) -> Option<u32> {
        let first = Identity::MIN_LOCAL.get();
        // The local identities, ascending and distinct: the k-th is
        // `first + k` up to the first free number, and above it after, so
        // that number is found by bisection (a walk from `first` read every
        // CIDR identity for each prefix added).
        let start = self.identities.partition_point(|info| info.id < first);
        let end = self
            .identities
            .partition_point(|info| info.id <= Identity::MAX_LOCAL.get());
        let local = self.identities.get(start..end)?;
        let (mut taken, mut above) = (0, local.len());
        while taken < above {
            let mid = taken + (above - taken) / 2;
            if u64::from(local[mid].id) == u64::from(first) + mid as u64 {
                taken = mid + 1;
            } else {
                above = mid;
            }
        }
        let free = first.checked_add(u32::try_from(taken).ok()?)?;
        (free <= Identity::MAX_LOCAL.get()).then_some(free & Identity::MAX_INDEX)
    }

    /// Records the CIDR identity of a new policy prefix (canonical, not
    /// `/0`) with local number `number` (from [`Self::free_cidr_number`]),
    /// labelled as [`Self::allocate_with_groups`] labels it among `groups`;
    /// its identity.
    pub fn insert_cidr(
        &mut self,
        prefix: IpNetwork,
        number: u32,
        groups: &CidrGroups,
    ) -> Option<u32> {
        let id = Identity::local(number).ok()?.get();
        if self.position(id).is_ok() || self.cidr_identity.contains_key(&prefix) {
            return None;
        }
        self.insert_identity(IdentityInfo {
            id,
            labels: cidr_labels(prefix, groups),
            kind: IdentityKind::Cidr { prefix },
        });
        self.cidr_identity.insert(prefix, id);
        Some(id)
    }

    /// Takes out the CIDR identity of a prefix no policy names any more;
    /// its identity and labels.
    pub fn remove_cidr(&mut self, prefix: IpNetwork) -> Option<(u32, LabelSet)> {
        let id = self.cidr_identity.remove(&prefix)?;
        let info = self.remove_identity(id)?;
        Some((id, info.labels))
    }

    /// The table with its endpoints renumbered to the inventory order
    /// `order` (`order[k]` is the endpoint now at position `k`): what
    /// [`Self::allocate`] gives for the reordered inventory when every
    /// endpoint holds its number as a given one.
    pub fn reordered(&self, order: &[usize]) -> Self {
        let mut position = vec![0; order.len()];
        for (k, &old) in order.iter().enumerate() {
            if let Some(slot) = position.get_mut(old) {
                *slot = k;
            }
        }
        let mut table = self.clone();
        table.endpoint_identity = order
            .iter()
            .filter_map(|&old| self.endpoint_identity.get(old).copied())
            .collect();
        for info in &mut table.identities {
            if let IdentityKind::Endpoints { endpoints }
            | IdentityKind::ReservedEndpoints { endpoints, .. } = &mut info.kind
            {
                for e in endpoints.iter_mut() {
                    *e = position.get(*e).copied().unwrap_or(*e);
                }
                endpoints.sort_unstable();
            }
        }
        table
    }

    /// The identity with this number.
    pub fn get(&self, id: u32) -> Option<&IdentityInfo> {
        self.position(id).ok().map(|index| &self.identities[index])
    }

    /// The most specific policy prefix containing an address (its CIDR
    /// identity), as the ipcache's longest-prefix match would find.
    pub fn cidr_identity_of(&self, ip: std::net::IpAddr) -> Option<(IpNetwork, u32)> {
        self.cidr_identity
            .iter()
            .filter(|(prefix, _)| prefix.contains(ip))
            .max_by_key(|(prefix, _)| prefix.prefix())
            .map(|(prefix, id)| (*prefix, *id))
    }
}

/// The labels of the CIDR identity of `prefix` (canonical, not `/0`):
/// `cidr:<prefix>`, the family's world label and the `cidrgroup:` labels
/// of the groups containing it (`labels.GetCIDRLabels`).
pub(crate) fn cidr_labels(prefix: IpNetwork, groups: &CidrGroups) -> LabelSet {
    let world = if prefix.is_ipv4() {
        "world-ipv4"
    } else {
        "world-ipv6"
    };
    let mut labels: LabelSet = [Label::cidr(prefix), Label::reserved(world)]
        .into_iter()
        .collect();
    for label in groups.labels_of(prefix).iter() {
        labels.insert(label.clone());
    }
    labels
}

/// The local number (`n` of `0x01000000 | n`) of each of the `sorted`
/// prefixes: the one `given` names for it (a session's pin), else the
/// lowest number neither given to another of the prefixes nor taken
/// before it, in sorted order. Without given numbers that is `1..`, as
/// Cilium's allocator starts a fresh agent. A given number that is not a
/// local CIDR identity's, or given to two prefixes, is an error.
fn cidr_numbers(
    sorted: &[IpNetwork],
    given: &BTreeMap<IpNetwork, u32>,
) -> Result<Vec<u32>, CompileError> {
    if given.is_empty() {
        return Ok((1..=u32::try_from(sorted.len()).unwrap_or(u32::MAX)).collect());
    }
    let mut pinned: BTreeMap<IpNetwork, u32> = BTreeMap::new();
    for (prefix, id) in given {
        let local = Identity::new(*id).ok().filter(|i| i.has_local_scope());
        let Some(local) = local else {
            return Err(CompileError::Identity {
                identity: *id,
                message: format!("given to CIDR prefix {prefix}: not a local CIDR identity"),
            });
        };
        let number = local.get() & Identity::MAX_INDEX;
        let prefix = canonical_prefix(*prefix);
        if pinned.insert(prefix, number).is_some_and(|n| n != number) {
            return Err(CompileError::Identity {
                identity: *id,
                message: format!("CIDR prefix {prefix} is given two numbers"),
            });
        }
    }
    let mut taken: BTreeMap<u32, IpNetwork> = BTreeMap::new();
    for prefix in sorted {
        if let Some(&number) = pinned.get(prefix)
            && let Some(other) = taken.insert(number, *prefix)
        {
            return Err(CompileError::Identity {
                identity: Identity::SCOPE_LOCAL | number,
                message: format!("given to CIDR prefixes {other} and {prefix}"),
            });
        }
    }
    let mut next = 1;
    let mut numbers = Vec::with_capacity(sorted.len());
    for prefix in sorted {
        let number = match pinned.get(prefix) {
            Some(&number) => number,
            None => {
                while taken.contains_key(&next) {
                    next += 1;
                }
                next += 1;
                next - 1
            }
        };
        numbers.push(number);
    }
    Ok(numbers)
}

/// The remote nodes' own identities.
///
/// - Under `enable-node-selector-labels` (`pkg/node/manager/manager.go`
///   `nodeIdentityLabels`: with the option, a remote node's addresses get
///   an identity of the node's labels, in the remote-node scope,
///   `pkg/identity/numericidentity.go` `IdentityScopeRemoteNode`): labels
///   [`crate::inventory::Node::remote_identity_labels`], one identity per
///   distinct label set.
/// - Under `policy-cidr-match-mode: nodes` every remote node *address*
///   gets its own identity: `pkg/node/manager` adds
///   `labels.GetCIDRLabels(prefix)` of the address to the node's labels
///   (`reserved:remote-node`, or the node labels above), `pkg/ipcache/
///   metadata.go` `resolveIdentity` keeps those CIDR labels for nodes only
///   in this mode and removes the world label, and
///   `pkg/identity/reserved.go` `LookupReservedIdentityByLabels` no longer
///   answers 6 for them, so they are allocated in the remote-node scope
///   (`isLocalIdentity` in `daemon/cmd/identity_restoration.go` counts that
///   scope as local in this mode). A CIDR selector then matches exactly the
///   addresses inside its prefix, never the other nodes (which 6 would).
///
/// Numbered `0x02000001` upward in label order. The first map is by node
/// name (per-node identities), the second by address (this mode).
/// Without either option, none (the addresses carry `remote-node`, 6).
#[allow(clippy::type_complexity)]
fn node_identities(
    inventory: &Inventory,
    identities: &mut Vec<IdentityInfo>,
) -> Result<(BTreeMap<String, u32>, BTreeMap<std::net::IpAddr, u32>), CompileError> {
    let mut by_node = BTreeMap::new();
    let mut by_address = BTreeMap::new();
    let per_node = inventory.settings.enable_node_selector_labels;
    let per_address = inventory.settings.policy_cidr_match_nodes;
    if !per_node && !per_address {
        return Ok((by_node, by_address));
    }
    let mut by_labels: BTreeMap<LabelSet, (Vec<String>, Vec<std::net::IpAddr>)> = BTreeMap::new();
    for node in inventory.nodes.iter().filter(|n| !n.local) {
        let base = if per_node {
            node.remote_identity_labels(&inventory.cluster)
        } else {
            [Label::reserved("remote-node")].into_iter().collect()
        };
        if per_address {
            for ip in &node.ips {
                let mut labels = base.clone();
                labels.insert(Label::cidr(crate::labels::host_prefix(*ip)));
                let entry = by_labels.entry(labels).or_default();
                entry.0.push(node.name.clone());
                entry.1.push(*ip);
            }
        } else {
            by_labels.entry(base).or_default().0.push(node.name.clone());
        }
    }
    for (index, (labels, (nodes, addresses))) in by_labels.into_iter().enumerate() {
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let id = Identity::remote_node(number).map_err(|_| CompileError::RangeExhausted {
            range: IdentityRange::Cidr,
            given: index + 1,
            limit: 0x00FF_FFFF,
        })?;
        if per_address {
            for ip in &addresses {
                by_address.insert(*ip, id.get());
            }
        } else {
            for node in &nodes {
                by_node.insert(node.clone(), id.get());
            }
        }
        identities.push(IdentityInfo {
            id: id.get(),
            labels,
            kind: IdentityKind::Node { nodes },
        });
    }
    Ok((by_node, by_address))
}

/// Under `policy-cidr-match-mode: nodes` the host identity (1) carries the
/// `cidr:` labels of every local node address (`pkg/node/manager/
/// manager.go` `nodeIdentityLabels` merges them into the local node's
/// labels; `pkg/ipcache/metadata.go` `resolveIdentity` adds the labels of
/// host prefixes to the host identity, minus the world label). A CIDR rule
/// covering one of the host's addresses therefore selects the host, as in
/// Cilium.
fn host_cidr_labels(inventory: &Inventory, identities: &mut [IdentityInfo]) {
    let Some(host) = identities.iter_mut().find(|i| i.id == Identity::HOST.get()) else {
        return;
    };
    for node in inventory.nodes.iter().filter(|n| n.local) {
        for ip in &node.ips {
            host.labels
                .insert(Label::cidr(crate::labels::host_prefix(*ip)));
        }
    }
}

fn reserved_identities() -> Vec<IdentityInfo> {
    let mut list = Vec::new();
    for (identity, name) in Identity::RESERVED {
        if identity == Identity::ENCRYPTED_OVERLAY {
            // Never on the wire, never a policy peer.
            continue;
        }
        let mut labels = LabelSet::new();
        labels.insert(Label::reserved(name));
        if identity == Identity::KUBE_APISERVER {
            labels.insert(Label::reserved("remote-node"));
        }
        list.push(IdentityInfo {
            id: identity.get(),
            labels,
            kind: IdentityKind::Reserved {
                name: name.to_owned(),
            },
        });
    }
    list
}

/// `k8sconst.LabelPrefix` (`pkg/k8s/apis/cilium.io/const.go`): the label
/// keys Cilium owns and strips from pod labels.
const CILIUM_OWNED_LABEL_PREFIX: &str = "io.cilium.k8s";

/// Label sources Cilium derives itself, from addresses and DNS answers
/// (`pkg/labels/cidr.go`, the DNS proxy, CIDR groups). A label set made of
/// them and reserved labels gets a local-scope identity
/// (`pkg/identity/numericidentity.go` `ScopeForLabels`); an endpoint never
/// carries one.
const DERIVED_SOURCES: [&str; 3] = [SOURCE_CIDR, SOURCE_FQDN, SOURCE_CIDRGROUP];

/// The reserved identities an agent has endpoints for: the host endpoint
/// (1), the cilium-health endpoint (4), endpoints that have no labels yet
/// (5) and the Ingress endpoint (8). The other reserved identities (world,
/// unmanaged, remote-node, kube-apiserver) stand for addresses outside the
/// node's endpoints.
pub const RESERVED_ENDPOINT_IDENTITIES: [Identity; 4] = [
    Identity::HOST,
    Identity::HEALTH,
    Identity::INIT,
    Identity::INGRESS,
];

/// The identity labels of an endpoint, as [`try_endpoint_identity_labels`]
/// derives them; an endpoint whose labels are refused (which
/// [`Inventory::finish`] and [`IdentityTable::allocate`] report) has none.
pub fn endpoint_identity_labels(endpoint: &Endpoint, inventory: &Inventory) -> LabelSet {
    try_endpoint_identity_labels(endpoint, inventory).unwrap_or_default()
}

/// The identity labels of an endpoint, or why Cilium would not give its
/// labels one identity.
///
/// Labels given by a cluster dump are used as they are. Otherwise:
///
/// - **A pod** (an endpoint with a namespace) follows
///   `pkg/k8s/utils/utils.go` `SanitizePodLabels` and then
///   `labels.Map2Labels(labels, "k8s")` (`pkg/endpoint`
///   `metadataResolver.GetPodMetadata`): its own labels except those under
///   `io.cilium.k8s` (`filterPodLabels`), `io.cilium.k8s.namespace.labels.<k>`
///   for every namespace label, `io.kubernetes.pod.namespace`,
///   `io.cilium.k8s.policy.serviceaccount` when it has one and
///   `io.cilium.k8s.policy.cluster`. Every key then goes through
///   [`Label::from_key_value`] with source `k8s`: a source the key names
///   (`cidr:`, `unspec:`, `$`, `reserved.`, ...) is dropped, never used.
///   Two keys that become the same label key with different values are
///   refused: `Map2Labels` iterates a Go map, so Cilium keeps one of them
///   at random.
/// - **An endpoint outside Kubernetes** (no namespace; Cilium's
///   `createEndpoint` parses API labels with `NewLabelsFromModel`) keeps the
///   source its keys name (default `unspec`) and gets no cluster label:
///   only pods carry `io.cilium.k8s.policy.cluster`, so the `cluster`
///   entity does not cover it. Reserved labels are refused next to other
///   labels (`createEndpoint`: "not allowed to add reserved labels"); a
///   single one of [`RESERVED_ENDPOINT_IDENTITIES`] alone makes the
///   endpoint that reserved endpoint. CIDR, FQDN and CIDR-group labels are
///   refused (see `DERIVED_SOURCES`).
///
/// Both keep only identity labels (`pkg/labelsfilter`).
pub fn try_endpoint_identity_labels(
    endpoint: &Endpoint,
    inventory: &Inventory,
) -> Result<LabelSet, LabelError> {
    if let Some(given) = &endpoint.identity_labels {
        return Ok(given.clone());
    }
    let mut labels = match &endpoint.namespace {
        Some(namespace) => {
            check_pod_keys(endpoint)?;
            let map = pod_label_map(endpoint, namespace, inventory);
            map_to_labels(map.iter().map(|(k, v)| (k.as_ref(), *v)), SOURCE_K8S)?
        }
        None => {
            let map = endpoint.labels.iter();
            let labels = map_to_labels(map.map(|(k, v)| (k.as_str(), v.as_str())), "")?;
            if labels.has_source(SOURCE_RESERVED) {
                return reserved_endpoint_labels(labels);
            }
            if let Some(label) = labels
                .iter()
                .find(|l| DERIVED_SOURCES.contains(&l.source.as_str()))
            {
                return Err(LabelError::Derived {
                    label: label.clone(),
                });
            }
            labels
        }
    };
    labels.retain(is_identity_label);
    Ok(labels)
}

/// Refuses a pod label whose key becomes one of Cilium's own
/// (`io.cilium.k8s*`) once `NewLabel` splits its source off: `filterPodLabels`
/// strips those keys by their raw text only, so Cilium lets such a pod
/// claim a namespace label or service account it lacks, or keeps one of
/// two values at random (`reserved.io.cilium.k8s.policy.serviceaccount` is
/// a valid Kubernetes label key). porin cannot give Cilium's answer and
/// fails closed.
fn check_pod_keys(endpoint: &Endpoint) -> Result<(), LabelError> {
    for (raw, value) in &endpoint.labels {
        let (_, key, _) = Label::parts_of(raw, value, SOURCE_K8S);
        if !raw.starts_with(CILIUM_OWNED_LABEL_PREFIX) && key.starts_with(CILIUM_OWNED_LABEL_PREFIX)
        {
            return Err(LabelError::CiliumOwned {
                raw: raw.clone(),
                label: Label::from_key_value(raw, value, SOURCE_K8S),
            });
        }
    }
    Ok(())
}

/// The label map `SanitizePodLabels` hands to `Map2Labels` for a pod, as
/// (raw key, value) pairs in key order, one per key: the map's order, which
/// decides which of two raw keys a conflict names first. A sorted `Vec` of
/// borrowed text rather than a `BTreeMap` of copies: a pod has a few
/// labels, and an identity add computes them on its way to the delta.
fn pod_label_map<'a>(
    endpoint: &'a Endpoint,
    namespace: &'a str,
    inventory: &'a Inventory,
) -> Vec<(Cow<'a, str>, &'a str)> {
    // filterPodLabels: a pod's own keys under `io.cilium.k8s` (namespace
    // labels, service account, cluster) are dropped, by their raw text.
    let mut map: Vec<(Cow<'a, str>, &'a str)> = endpoint
        .labels
        .iter()
        .filter(|(key, _)| !key.starts_with(CILIUM_OWNED_LABEL_PREFIX))
        .map(|(key, value)| (Cow::Borrowed(key.as_str()), value.as_str()))
        .collect();
    if let Some(ns_labels) = inventory.namespaces.get(namespace) {
        for (key, value) in ns_labels {
            let key = format!("{NAMESPACE_LABELS_PREFIX}.{key}");
            set_label(&mut map, Cow::Owned(key), value);
        }
    }
    set_label(&mut map, Cow::Borrowed(POD_NAMESPACE_LABEL), namespace);
    match endpoint.service_account.as_deref() {
        Some(sa) if !sa.is_empty() => {
            set_label(&mut map, Cow::Borrowed(SERVICE_ACCOUNT_LABEL), sa);
        }
        _ => {
            if let Ok(at) = map.binary_search_by(|(k, _)| k.as_ref().cmp(SERVICE_ACCOUNT_LABEL)) {
                map.remove(at);
            }
        }
    }
    set_label(&mut map, Cow::Borrowed(CLUSTER_LABEL), &inventory.cluster);
    map
}

/// Sets `key` to `value` in a label map kept in key order (a map insert).
fn set_label<'a>(map: &mut Vec<(Cow<'a, str>, &'a str)>, key: Cow<'a, str>, value: &'a str) {
    match map.binary_search_by(|(k, _)| k.as_ref().cmp(key.as_ref())) {
        Ok(at) => map[at] = (key, value),
        Err(at) => map.insert(at, (key, value)),
    }
}

/// `labels.Map2Labels(map, source)`: one label per entry (given in the
/// map's key order), keyed by the label's key, refusing what Cilium would
/// decide at random.
fn map_to_labels<'a>(
    map: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
    source: &str,
) -> Result<LabelSet, LabelError> {
    // By the label's key (a raw key's source prefix is split off, so two raw
    // keys can give one label key); a sorted `Vec`, as few labels as a pod
    // has, with no key copied.
    let mut by_key: Vec<(Label, &str)> = Vec::with_capacity(map.len());
    for (raw, value) in map {
        let label = Label::from_key_value(raw, value, source);
        if label.key.is_empty() {
            return Err(LabelError::EmptyKey {
                raw: raw.to_owned(),
            });
        }
        match by_key.binary_search_by(|(first, _)| first.key.cmp(&label.key)) {
            Ok(at) => {
                let (first, first_raw) = &by_key[at];
                if *first != label {
                    return Err(LabelError::SameKey {
                        first_raw: (*first_raw).to_owned(),
                        raw: raw.to_owned(),
                        first: Box::new(first.clone()),
                        label: Box::new(label),
                    });
                }
                by_key[at] = (label, raw);
            }
            Err(at) => by_key.insert(at, (label, raw)),
        }
    }
    Ok(by_key.into_iter().map(|(label, _)| label).collect())
}

/// The labels of an endpoint outside Kubernetes that has reserved labels:
/// exactly one reserved endpoint label, nothing else.
fn reserved_endpoint_labels(labels: LabelSet) -> Result<LabelSet, LabelError> {
    let label = match labels.len() {
        1 => labels.iter().next().cloned(),
        _ => None,
    };
    let Some(label) = label else {
        return Err(LabelError::ReservedWithOthers { labels });
    };
    let is_endpoint = Identity::from_reserved_name(&label.key)
        .is_some_and(|id| RESERVED_ENDPOINT_IDENTITIES.contains(&id));
    if !is_endpoint || !label.value.is_empty() {
        return Err(LabelError::NotAnEndpointReserved { label });
    }
    Ok(labels)
}

/// Why an endpoint's labels have no identity labels porin can give Cilium's
/// answer for ([`try_endpoint_identity_labels`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LabelError {
    /// A CIDR, FQDN or CIDR-group label on an endpoint.
    #[error(
        "label `{label}`: Cilium derives `{}:` labels itself from addresses and DNS answers, an \
         endpoint cannot carry one (it would share the local-scope identities of \
         pkg/identity/numericidentity.go ScopeForLabels)",
        label.source
    )]
    Derived {
        /// The label.
        label: Label,
    },
    /// A pod label key that becomes one of Cilium's own (`io.cilium.k8s*`).
    #[error(
        "label key `{raw}` becomes `{label}`, a label Cilium sets itself: SanitizePodLabels \
         strips `{CILIUM_OWNED_LABEL_PREFIX}*` keys by their text before labels.Map2Labels \
         drops the source, so Cilium would let the pod claim it"
    )]
    CiliumOwned {
        /// The key as written.
        raw: String,
        /// The label it becomes.
        label: Label,
    },
    /// A label key that is only a source prefix.
    #[error("label key `{raw}` has no key after its source prefix")]
    EmptyKey {
        /// The key as written.
        raw: String,
    },
    /// Two label keys that become the same key with different values.
    #[error(
        "label keys `{first_raw}` and `{raw}` both become the key `{}` (`{first}` and \
         `{label}`): Cilium's labels.Map2Labels keeps one of them at random",
        label.key
    )]
    SameKey {
        /// The first key as written.
        first_raw: String,
        /// The second key as written.
        raw: String,
        /// The label of the first key (boxed: the error stays small).
        first: Box<Label>,
        /// The label of the second key.
        label: Box<Label>,
    },
    /// A reserved label next to other labels.
    #[error(
        "labels `{labels}` mix a reserved label with others: Cilium refuses such an endpoint \
         (daemon/cmd/endpoint.go createEndpoint: \"not allowed to add reserved labels\")"
    )]
    ReservedWithOthers {
        /// The endpoint's labels.
        labels: LabelSet,
    },
    /// A reserved label that is not an agent endpoint's.
    #[error(
        "label `{label}`: only the reserved labels of agent endpoints make an endpoint \
         (reserved:host, reserved:health, reserved:init, reserved:ingress, without a value)"
    )]
    NotAnEndpointReserved {
        /// The label.
        label: Label,
    },
}

/// Why an identity number cannot be given to an endpoint
/// ([`check_given_identity`]). The messages start with the number: callers
/// say "identity" before them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GivenIdentityError {
    /// Not a number Cilium's identity scopes allow.
    #[error(transparent)]
    Number(#[from] IdentityError),
    /// A local-scope (CIDR/FQDN) identity.
    #[error(
        "{id} ({id:#010x}) is in the local identity scope (0x01xxxxxx, \
         pkg/identity/numericidentity.go IdentityScopeLocal), which Cilium allocates only to \
         CIDR and FQDN prefixes: an endpoint never holds it"
    )]
    LocalScope {
        /// The number.
        id: u32,
    },
    /// A remote-node identity.
    #[error(
        "{id} ({id:#010x}) is in the remote-node identity scope (0x02xxxxxx, \
         IdentityScopeRemoteNode): an endpoint never holds it"
    )]
    RemoteNodeScope {
        /// The number.
        id: u32,
    },
    /// A reserved identity no agent endpoint holds.
    #[error(
        "{id} is reserved:{name}, which no endpoint holds (the agent's endpoints are host 1, \
         health 4, init 5 and ingress 8)"
    )]
    ReservedNotAnEndpoint {
        /// The number.
        id: u32,
        /// Its reserved name.
        name: &'static str,
    },
    /// A reserved endpoint's identity without its reserved label.
    #[error(
        "{id} is reserved:{name}, but the endpoint's labels `{labels}` are not the {name} \
         endpoint's (`reserved:{name}`)"
    )]
    ReservedLabelMissing {
        /// The number.
        id: u32,
        /// Its reserved name.
        name: &'static str,
        /// The endpoint's identity labels.
        labels: LabelSet,
    },
    /// A reserved endpoint's identity with a label it does not carry.
    #[error("{id} is reserved:{name}, which does not carry `{label}`")]
    ReservedExtraLabel {
        /// The number.
        id: u32,
        /// Its reserved name.
        name: &'static str,
        /// The label.
        label: Label,
    },
    /// A global number Cilium never allocates.
    #[error(
        "{id} is no identity Cilium allocates (reserved 1-11, well-known 100-115, \
         user-reserved 128-255, cluster identities from 256)"
    )]
    NotAllocated {
        /// The number.
        id: u32,
    },
    /// A cluster identity with reserved or derived labels.
    #[error(
        "{id} is a cluster identity, but its labels carry `{label}`: Cilium gives reserved, \
         CIDR and FQDN labels only to reserved and local-scope identities"
    )]
    ClusterWithReservedLabel {
        /// The number.
        id: u32,
        /// The label.
        label: Label,
    },
}

/// Whether `id` may be given to an endpoint with these identity labels:
/// Cilium hands endpoints cluster identities (global scope, 256 and up,
/// or the well-known and user-reserved numbers 100-115 and 128-255) made of
/// neither reserved nor derived labels, and the reserved identity of the
/// reserved endpoint itself (its own `reserved:` label). Everything else
/// (`0x01xxxxxx` is `IdentityScopeLocal`, allocated only to CIDR and FQDN
/// prefixes; `0x02xxxxxx` is remote nodes'; numbers Cilium never uses)
/// would merge the endpoint with an identity it cannot hold.
pub fn check_given_identity(id: u32, labels: &LabelSet) -> Result<(), GivenIdentityError> {
    let identity = Identity::new(id)?;
    if identity.has_local_scope() {
        return Err(GivenIdentityError::LocalScope { id });
    }
    if identity.has_remote_node_scope() {
        return Err(GivenIdentityError::RemoteNodeScope { id });
    }
    if let Some(name) = identity.reserved_name() {
        if !RESERVED_ENDPOINT_IDENTITIES.contains(&identity) {
            return Err(GivenIdentityError::ReservedNotAnEndpoint { id, name });
        }
        if labels.find(SOURCE_RESERVED, name).is_none() {
            return Err(GivenIdentityError::ReservedLabelMissing {
                id,
                name,
                labels: labels.clone(),
            });
        }
        // The host identity also carries reserved:kube-apiserver when the
        // apiserver runs on the node, and node labels; the other reserved
        // endpoints carry their own label alone.
        let extra = labels
            .iter()
            .find(|l| l.key != name && (identity != Identity::HOST || is_refused_on_host(l)));
        if let Some(label) = extra {
            return Err(GivenIdentityError::ReservedExtraLabel {
                id,
                name,
                label: label.clone(),
            });
        }
        return Ok(());
    }
    let known = id >= FIRST_ALLOCATED
        || (Identity::FIRST_WELL_KNOWN..=Identity::LAST_WELL_KNOWN).contains(&id)
        || id >= Identity::USER_RESERVED_MIN;
    if !known {
        return Err(GivenIdentityError::NotAllocated { id });
    }
    if let Some(label) = labels
        .iter()
        .find(|l| l.source == SOURCE_RESERVED || DERIVED_SOURCES.contains(&l.source.as_str()))
    {
        return Err(GivenIdentityError::ClusterWithReservedLabel {
            id,
            label: label.clone(),
        });
    }
    Ok(())
}

/// A label the host identity cannot carry: a reserved label other than
/// `kube-apiserver`, or a derived one.
fn is_refused_on_host(label: &Label) -> bool {
    (label.source == SOURCE_RESERVED && label.key != "kube-apiserver")
        || DERIVED_SOURCES.contains(&label.source.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::SourceLocation;

    fn endpoint(name: &str, ns: Option<&str>, app: &str) -> Endpoint {
        Endpoint {
            name: name.into(),
            namespace: ns.map(Into::into),
            labels: [("app".to_owned(), app.to_owned())].into(),
            ips: vec![],
            service_account: None,
            ports: vec![],
            identity: None,
            identity_labels: None,
            location: SourceLocation::default(),
        }
    }

    /// `SanitizePodLabels` then `Map2Labels` (pkg/k8s/utils, pkg/labels):
    /// Cilium's own keys come from the inventory, a pod's copies of them are
    /// dropped by their raw text, and the namespace label is the pod's
    /// namespace whatever the pod says.
    #[test]
    fn a_pods_identity_labels_follow_sanitize_pod_labels() {
        let mut inv = Inventory::new();
        inv.cluster = "east".to_owned();
        inv.namespaces.insert(
            "prod".to_owned(),
            [("team".to_owned(), "a".to_owned())].into(),
        );
        let mut pod = endpoint("a", Some("prod"), "web");
        pod.service_account = Some("api".to_owned());
        pod.labels.extend([
            ("io.kubernetes.pod.namespace".to_owned(), "other".to_owned()),
            ("io.cilium.k8s.policy.cluster".to_owned(), "west".to_owned()),
            (
                "io.cilium.k8s.namespace.labels.team".to_owned(),
                "b".to_owned(),
            ),
            ("pod-template-hash".to_owned(), "x1".to_owned()),
        ]);
        let labels = try_endpoint_identity_labels(&pod, &inv).map(|set| set.to_string());
        assert_eq!(
            labels.as_deref(),
            Ok("k8s:app=web,k8s:io.cilium.k8s.namespace.labels.team=a,\
                k8s:io.cilium.k8s.policy.cluster=east,\
                k8s:io.cilium.k8s.policy.serviceaccount=api,\
                k8s:io.kubernetes.pod.namespace=prod")
        );
        pod.service_account = Some(String::new());
        let labels = try_endpoint_identity_labels(&pod, &inv).map(|set| set.len());
        assert_eq!(labels, Ok(4), "an empty service account gives no label");
    }

    /// Two raw keys that give one label key with different values: refused,
    /// naming first the raw key that sorts first (the map's order).
    #[test]
    fn two_raw_keys_of_one_label_key_are_refused_in_key_order() {
        let inv = Inventory::new();
        let mut pod = endpoint("a", Some("prod"), "web");
        pod.labels.insert("k8s:app".to_owned(), "api".to_owned());
        match try_endpoint_identity_labels(&pod, &inv) {
            Err(LabelError::SameKey { first_raw, raw, .. }) => {
                assert_eq!((first_raw.as_str(), raw.as_str()), ("app", "k8s:app"));
            }
            other => panic!("expected SameKey, got {other:?}"),
        }
        // The same value twice is one label.
        pod.labels.insert("k8s:app".to_owned(), "web".to_owned());
        assert!(try_endpoint_identity_labels(&pod, &inv).is_ok());
    }

    #[test]
    fn equal_label_sets_share_one_identity_from_256() {
        let mut inv = Inventory::new();
        inv.endpoints = vec![
            endpoint("a", Some("prod"), "web"),
            endpoint("b", Some("prod"), "web"),
            endpoint("c", Some("prod"), "db"),
        ];
        inv.finish().unwrap();
        let table = IdentityTable::allocate(&inv, &BTreeSet::new()).unwrap();
        let ids = &table.endpoint_identity;
        assert_eq!(ids[0], ids[1]);
        assert_ne!(ids[0], ids[2]);
        assert!(ids.iter().all(|id| *id >= 256));
        let labels = &table.get(ids[0]).unwrap().labels;
        assert_eq!(
            labels.to_string(),
            "k8s:app=web,k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=prod,\
             k8s:io.cilium.k8s.policy.cluster=default,k8s:io.kubernetes.pod.namespace=prod"
        );
    }

    #[test]
    fn cidr_identities_are_local_scope_and_sorted() {
        let prefixes: BTreeSet<IpNetwork> = ["192.0.2.0/24", "10.0.0.0/8", "0.0.0.0/0", "fd00::/8"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        let table = IdentityTable::allocate(&Inventory::new(), &prefixes).unwrap();
        assert_eq!(
            table.cidr_identity[&"10.0.0.0/8".parse().unwrap()],
            0x0100_0001
        );
        assert_eq!(
            table.cidr_identity[&"192.0.2.0/24".parse().unwrap()],
            0x0100_0002
        );
        assert_eq!(
            table.cidr_identity[&"fd00::/8".parse().unwrap()],
            0x0100_0003
        );
        assert_eq!(table.cidr_identity.len(), 3, "/0 is the world identity");
    }

    /// `free_cidr_number` bisects the local numbers and `get` bisects the
    /// list: both agree with a walk over the identities after prefixes are
    /// taken out and added again at numbers with gaps below and above.
    #[test]
    fn free_cidr_numbers_and_lookups_agree_with_a_walk() {
        let prefixes: BTreeSet<IpNetwork> = (0..40_u8)
            .map(|i| format!("10.{i}.0.0/16").parse().unwrap())
            .collect();
        let mut inv = Inventory::new();
        inv.endpoints = vec![endpoint("a", Some("prod"), "web")];
        inv.finish().unwrap();
        let mut table = IdentityTable::allocate(&inv, &prefixes).unwrap();
        let walk = |table: &IdentityTable| {
            let first = Identity::MIN_LOCAL.get();
            (first..=Identity::MAX_LOCAL.get())
                .find(|n| !table.identities.iter().any(|i| i.id == *n))
                .map(|n| n & Identity::MAX_INDEX)
        };
        assert_eq!(table.free_cidr_number(), Some(41));
        let groups = CidrGroups::default();
        for (step, i) in [0_u8, 7, 39, 1, 20, 0].into_iter().enumerate() {
            let prefix: IpNetwork = format!("10.{i}.0.0/16").parse().unwrap();
            if step % 2 == 0 {
                let (id, _) = table.remove_cidr(prefix).unwrap();
                assert!(table.get(id).is_none());
            }
            let free = table.free_cidr_number();
            assert_eq!(free, walk(&table), "after step {step}");
            let fresh: IpNetwork = format!("172.16.{step}.0/24").parse().unwrap();
            let id = table.insert_cidr(fresh, free.unwrap(), &groups).unwrap();
            assert_eq!(
                table.get(id).unwrap().kind,
                IdentityKind::Cidr { prefix: fresh }
            );
            assert!(table.identities.windows(2).all(|w| w[0].id < w[1].id));
            for info in &table.identities {
                assert_eq!(table.get(info.id), Some(info));
            }
        }
        assert_eq!(table.free_cidr_number(), walk(&table));
    }

    #[test]
    fn given_identity_conflict_is_an_error() {
        let mut inv = Inventory::new();
        let mut a = endpoint("a", Some("prod"), "web");
        a.identity = Some(1000);
        let mut b = endpoint("b", Some("prod"), "db");
        b.identity = Some(1000);
        inv.endpoints = vec![a, b];
        inv.finish().unwrap();
        assert!(matches!(
            IdentityTable::allocate(&inv, &BTreeSet::new()),
            Err(CompileError::Identity { identity: 1000, .. })
        ));
    }
}
