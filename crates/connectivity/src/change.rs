//! The connectivity diff of two compilations of one inventory (`porin
//! diff`): for every endpoint present in both, direction and peer, the
//! port classes cut by the keys of both map states whose verdict changes,
//! merged into "now allowed" / "now denied" port ranges, and the map entry
//! counts.
//!
//! Peers are matched by identity number, except CIDR identities, which are
//! matched by prefix (their numbers depend on the policy set); a prefix
//! present on one side only is decided on the other side with the
//! narrowest identity whose prefix contains it (the `0.0.0.0/0` / `::/0`
//! routes give world-ipv4 / world-ipv6).

use std::collections::BTreeMap;

use ipnetwork::IpNetwork;
use porin_compiler::allocation::IdentityKind;
use porin_compiler::compile::Compiled;
use porin_compiler::explain::passes;
use porin_compiler::ipcache::Family;
use porin_compiler::mapstate::Direction;

use crate::flows::{PortRange, merge, port_classes};

/// A peer, matched across the two compilations.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Peer {
    Identity(u32),
    Cidr(IpNetwork),
}

/// One changed (direction, peer) of one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The policy direction of the endpoint.
    pub direction: Direction,
    /// The peer as users name it: `ns/name` of the endpoints of an
    /// identity (three, then `and N more`), `reserved:world`, `cidr P`.
    pub peer: String,
    /// Port ranges denied before and allowed now, merged.
    pub now_allowed: Vec<PortRange>,
    /// Port ranges allowed before and denied now, merged.
    pub now_denied: Vec<PortRange>,
}

/// One endpoint's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointDiff {
    /// The endpoint's display name (`namespace/name`).
    pub name: String,
    /// Its policy map entries in the old compilation.
    pub old_entries: usize,
    /// Its policy map entries in the new compilation.
    pub new_entries: usize,
    /// The (direction, peer) pairs whose connectivity changed.
    pub changes: Vec<Change>,
}

pub(crate) fn peers(compiled: &Compiled) -> BTreeMap<Peer, u32> {
    compiled
        .identities
        .iter()
        .map(|info| match &info.kind {
            IdentityKind::Cidr { prefix } => (Peer::Cidr(*prefix), info.id),
            _ => (Peer::Identity(info.id), info.id),
        })
        .collect()
}

/// The identity of a peer in a compilation that may lack it.
pub(crate) fn identity_in(compiled: &Compiled, table: &BTreeMap<Peer, u32>, peer: &Peer) -> u32 {
    if let Some(id) = table.get(peer) {
        return *id;
    }
    match peer {
        Peer::Identity(id) => *id,
        Peer::Cidr(prefix) => compiled
            .ipcache
            .iter()
            .filter(|e| e.prefix.prefix() <= prefix.prefix() && e.prefix.contains(prefix.network()))
            .max_by_key(|e| e.prefix.prefix())
            // No entry covers it: the family's world identity, what an
            // ipcache miss gives (world-ipv4 / world-ipv6; identity 2 is no
            // packet's identity in a dual-stack agent, bpf/bpf_lxc.c).
            .map_or_else(
                || Family::of(prefix.network()).world_identity().get(),
                |e| e.identity,
            ),
    }
}

fn peer_name(compiled: &Compiled, peer: &Peer, id: u32) -> String {
    if let Peer::Cidr(prefix) = peer {
        return format!("cidr {prefix}");
    }
    let info = compiled.identities.iter().find(|i| i.id == id);
    match info.map(|i| &i.kind) {
        Some(IdentityKind::Reserved { name } | IdentityKind::ReservedEndpoints { name, .. }) => {
            format!("reserved:{name}")
        }
        Some(IdentityKind::Endpoints { endpoints }) => {
            let names: Vec<String> = compiled
                .endpoints
                .iter()
                .filter(|e| e.identity == id)
                .map(|e| e.display_name())
                .collect();
            match names.len() {
                0 => format!("identity {id} ({} endpoints)", endpoints.len()),
                1..=3 => names.join(", "),
                n => format!("{} and {} more", names[..3].join(", "), n - 3),
            }
        }
        _ => format!("identity {id}"),
    }
}

/// How connectivity changes from `old` to `new` (two compilations of one
/// inventory): one entry per endpoint of `new` that is also in `old` and
/// whose connectivity or map entry count changed, in `new`'s endpoint
/// order. Empty when nothing changed.
pub fn diff(old: &Compiled, new: &Compiled) -> Vec<EndpointDiff> {
    let old_peers = peers(old);
    let new_peers = peers(new);
    let mut all: Vec<Peer> = old_peers.keys().chain(new_peers.keys()).cloned().collect();
    all.sort();
    all.dedup();
    let mut out = Vec::new();
    for endpoint in &new.endpoints {
        let Some(before) = old
            .endpoints
            .iter()
            .find(|e| e.display_name() == endpoint.display_name())
        else {
            continue;
        };
        let mut changes = Vec::new();
        for direction in Direction::ALL {
            let classes = port_classes(&[(&before.state, direction), (&endpoint.state, direction)]);
            for peer in &all {
                let id_old = identity_in(old, &old_peers, peer);
                let id_new = identity_in(new, &new_peers, peer);
                let (Ok(a), Ok(b)) = (
                    porin_compiler::identity::Identity::new(id_old),
                    porin_compiler::identity::Identity::new(id_new),
                ) else {
                    continue;
                };
                let mut allowed = Vec::new();
                let mut denied = Vec::new();
                for &(p, lo, hi) in &classes {
                    let was = passes(
                        old.mutual_auth,
                        before.state.lookup(direction, a, p, lo).verdict,
                        before.identity,
                        id_old,
                    );
                    let is = passes(
                        new.mutual_auth,
                        endpoint.state.lookup(direction, b, p, lo).verdict,
                        endpoint.identity,
                        id_new,
                    );
                    if !was && is {
                        allowed.push((p, lo, hi));
                    } else if was && !is {
                        denied.push((p, lo, hi));
                    }
                }
                if allowed.is_empty() && denied.is_empty() {
                    continue;
                }
                changes.push(Change {
                    direction,
                    peer: peer_name(new, peer, id_new),
                    now_allowed: merge(allowed),
                    now_denied: merge(denied),
                });
            }
        }
        if changes.is_empty() && before.state.len() == endpoint.state.len() {
            continue;
        }
        out.push(EndpointDiff {
            name: endpoint.display_name(),
            old_entries: before.state.len(),
            new_entries: endpoint.state.len(),
            changes,
        });
    }
    out
}
