//! Per-endpoint policy-map state: keys, entries, Cilium's insertion algebra
//! and the datapath's lookup, as a reference evaluator.
//!
//! References (Cilium, docs/semantics.md §4.2–§5.4): `pkg/policy/types/types.go`
//! (keys), `pkg/policy/types/entry.go` (entries, precedence),
//! `pkg/policy/mapstate.go` (`insertWithChanges`, `lookup`),
//! `pkg/maps/policymap/policymap.go` and `bpf/lib/policy.h` (datapath layout
//! and `__policy_can_access`).
//!
//! # Contents
//!
//! - [`Key`], [`Direction`]: a map key; [`Key::datapath_prefix_len`] is its
//!   LPM prefix length in the datapath.
//! - [`Entry`], [`Precedence`], [`Priority`], [`ListenerPriority`],
//!   [`AuthType`], [`AuthRequirement`]: a map value.
//!
//! The compiler knows no bytes: the policy map's key and value layout
//! (`struct policy_key`, `struct policy_entry`) and their encoding from
//! these types are `porin-ebpf`'s `abi` module.
//! - [`MapState`]: the ordered map of one endpoint, with
//!   [`MapState::insert_with_features`] (Cilium's `insertWithChanges`) and
//!   [`MapState::lookup`] (the datapath's two-lookup decision).
//!
//! # Example
//!
//! ```
//! use porin_compiler::identity::Identity;
//! use porin_compiler::mapstate::{Direction, Entry, Key, MapState, PolicyFeatures, Verdict};
//!
//! let foo = Identity::new(1001).unwrap();
//! let mut state = MapState::new();
//! // allow foo on TCP/80, deny everyone on TCP/80-95 (port 80, prefix 12)
//! let allow = Key::ingress().with_identity(foo).with_port_proto(6, 80).unwrap();
//! let deny = Key::ingress().with_port_proto_prefix(6, 80, 12).unwrap();
//! state.insert_with_features(allow, Entry::allow(), PolicyFeatures::DENY).unwrap();
//! state.insert_with_features(deny, Entry::deny(), PolicyFeatures::DENY).unwrap();
//! // A deny on identity 0 removes the narrower allows of every identity.
//! assert_eq!(state.len(), 1);
//! assert_eq!(state.get(&allow), None);
//! let decision = state.lookup(Direction::Ingress, foo, 6, 80);
//! assert!(!decision.verdict.is_allowed());
//! // Protocol (8 bits) and 12 port bits after the 40 static ones.
//! assert_eq!(deny.datapath_prefix_len(), 60);
//! ```
//!
//! # Contract for the resolve stage
//!
//! For each endpoint, start from [`MapState::new`]. If a direction is not
//! enforced, add its allow-all key with [`MapState::upsert`]
//! (`Key::for_direction(d)`, [`Entry::allow`]) — Cilium's
//! `allowAllIdentities` bypasses the insertion logic too.
//!
//! Then, per direction, compute the [`PolicyFeatures`] of *all* filters of
//! that direction first (Cilium collects them in `L4Filter.attach` before
//! any insertion): `DENY` if any rule denies, `REDIRECT` if any has an L7
//! parser / listener, `ORDERED` if any priority is non-zero, `AUTH` if any
//! has explicit authentication. Then for each filter × selector ×
//! selected identity × masked port (from
//! [`crate::ports::port_range_to_masked_ports`] via
//! [`Key::with_masked_port`]) call [`MapState::insert_with_features`] with
//! that direction's features. Build entries with [`Entry::new`] (deny clears
//! proxy and auth), put the rule-origin ids of the contributing rules in
//! [`Entry::origins`] (an [`Origins`]: a small sorted set, inline for up
//! to four ids): they are opaque `u32`s owned by the resolve stage,
//! unioned when two entries for the same key merge and replaced when a
//! higher-precedence entry takes a key over; the map never interprets them.
//!
//! The wildcard-selector elision of `L4Filter.toMapState` (skip a per-ID
//! entry identical to the ID-0 entry for the same non-zero port) is the
//! caller's job; it is a size optimisation with no effect on verdicts.
//!
//! Insertion order does not change the verdicts for deny-vs-allow
//! (precedence) conflicts; tests check this.
//!
//! Not supported: tiers / PASS verdicts (no CNP field at the Cilium
//! snapshot, docs/semantics.md §10.5); an entry with a pass precedence is
//! rejected with [`MapStateError::PassNotSupported`] instead of being
//! silently mis-merged.

mod datapath;
mod entry;
mod error;
mod insert;
mod key;
mod lookup;
mod origins;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::identity::Identity;

pub use datapath::{DROP_POLICY, DROP_POLICY_AUTH_REQUIRED, DROP_POLICY_DENY};
pub use entry::{AuthRequirement, AuthType, Entry, ListenerPriority, Precedence, Priority};
pub use error::{EntryError, KeyError};
pub use insert::{Changes, MapStateError, PolicyFeatures};
pub use key::{Direction, Key};
pub use lookup::{Decision, DenyReason, MatchType, MatchedEntry, Verdict};
pub use origins::Origins;

/// The policy-map state of one endpoint: an ordered, deterministic map
/// from [`Key`] to [`Entry`].
///
/// Iteration order is [`Key`]'s `Ord` (direction, identity, protocol, port,
/// prefix length), so output built from it is reproducible.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapState {
    entries: BTreeMap<Key, Entry>,
}

impl MapState {
    /// An empty map (everything denied by default).
    pub fn new() -> MapState {
        MapState::default()
    }

    /// Number of entries (what the datapath map would hold).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Passes every entry's origins through `renumber` (a live session
    /// moving origin ids when a rule is inserted or removed); what the
    /// datapath sees stays.
    pub(crate) fn renumber_origins(&mut self, renumber: &dyn Fn(&mut Origins)) {
        for entry in self.entries.values_mut() {
            renumber(&mut entry.origins);
        }
    }

    /// The entry stored at exactly `key`.
    pub fn get(&self, key: &Key) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// All entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Entry)> + '_ {
        self.entries.iter()
    }

    /// The entries whose key has `identity` (both directions), in key
    /// order: one peer identity's part of the state.
    pub fn identity_entries(&self, identity: Identity) -> Vec<(Key, Entry)> {
        let mut out = Vec::new();
        for direction in Direction::ALL {
            let low = Key::for_direction(direction).with_identity(identity);
            out.extend(
                self.entries
                    .range(low..)
                    .take_while(|(k, _)| k.direction() == direction && k.identity() == identity)
                    .map(|(k, e)| (*k, e.clone())),
            );
        }
        out
    }

    /// The entries of one (direction, peer identity), in key order, without
    /// copying: what [`MapState::lookup`] reads for that identity (besides
    /// the identity-0 entries of the direction, `identity_keys(direction,
    /// Identity::WILDCARD)`).
    pub fn identity_keys(
        &self,
        direction: Direction,
        identity: Identity,
    ) -> impl Iterator<Item = (&Key, &Entry)> + '_ {
        let low = Key::for_direction(direction).with_identity(identity);
        self.entries
            .range(low..)
            .take_while(move |(k, _)| k.direction() == direction && k.identity() == identity)
    }

    /// Removes the entry at exactly `key`, without any precedence logic
    /// (a session replacing one peer identity's part of the state).
    pub fn remove(&mut self, key: &Key) -> Option<Entry> {
        self.entries.remove(key)
    }

    /// Stores `entry` at `key` without any precedence logic, replacing and
    /// returning what was there (Cilium's `mapState.upsert`, used by
    /// `allowAllIdentities` for non-enforced directions and by tests to set
    /// up a state). A deny's proxy port and auth are cleared; a PASS entry is
    /// refused, since the datapath would read it as an allow.
    pub fn upsert(&mut self, key: Key, entry: Entry) -> Result<Option<Entry>, MapStateError> {
        if entry.precedence.is_pass() {
            return Err(MapStateError::PassNotSupported {
                precedence: entry.precedence.get(),
            });
        }
        Ok(self.entries.insert(key, normalise(entry)))
    }
}

/// A deny carries no redirect and no auth (`NewMapStateEntry` normalises).
fn normalise(mut entry: Entry) -> Entry {
    if entry.is_deny() {
        entry.proxy_port = 0;
        entry.auth = AuthRequirement::NONE;
    }
    entry
}

impl<'a> IntoIterator for &'a MapState {
    type Item = (&'a Key, &'a Entry);
    type IntoIter = std::collections::btree_map::Iter<'a, Key, Entry>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}
