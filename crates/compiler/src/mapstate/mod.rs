//! Per-endpoint policy-map state: keys, entries, Cilium's insertion algebra
//! and the datapath's lookup, as a reference evaluator.
//!
//! References (Cilium, semantics.md §4.2–§5.4): `pkg/policy/types/types.go`
//! (keys), `pkg/policy/types/entry.go` (entries, precedence),
//! `pkg/policy/mapstate.go` (`insertWithChanges`, `lookup`),
//! `pkg/maps/policymap/policymap.go` and `bpf/lib/policy.h` (datapath layout
//! and `__policy_can_access`).
//!
//! # Contents
//!
//! - [`Key`], [`Direction`]: a map key; [`Key::to_bytes`] is the 12-byte
//!   datapath key.
//! - [`Entry`], [`Precedence`], [`Priority`], [`ListenerPriority`],
//!   [`AuthType`], [`AuthRequirement`]: a map value;
//!   [`Entry::to_datapath_bytes`] is the 12-byte datapath value.
//! - [`MapState`]: the ordered map of one endpoint, with
//!   [`MapState::insert_with_features`] (Cilium's `insertWithChanges`) and
//!   [`MapState::lookup`] (the datapath's two-lookup decision).
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
//! [`Entry::origins`]: they are opaque `u32`s owned by the resolve stage,
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
//! snapshot, semantics.md §10.5); an entry with a pass precedence is
//! rejected with [`MapStateError::PassNotSupported`] instead of being
//! silently mis-merged.

mod datapath;
mod entry;
mod error;
mod insert;
mod key;
mod lookup;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

pub use datapath::{DROP_POLICY, DROP_POLICY_AUTH_REQUIRED, DROP_POLICY_DENY};
pub use entry::{AuthRequirement, AuthType, Entry, ListenerPriority, Precedence, Priority};
pub use error::{EntryError, KeyError};
pub use insert::{Changes, MapStateError, PolicyFeatures};
pub use key::{Direction, Key};
pub use lookup::{Decision, DenyReason, MatchType, MatchedEntry, Verdict};

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

    /// The entry stored at exactly `key`.
    pub fn get(&self, key: &Key) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// All entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Entry)> + '_ {
        self.entries.iter()
    }

    /// Stores `entry` at `key` without any precedence logic, replacing what
    /// was there (Cilium's `mapState.upsert`, used by `allowAllIdentities`
    /// for non-enforced directions and by tests to set up a state). A deny's
    /// proxy port and auth are cleared.
    pub fn upsert(&mut self, key: Key, entry: Entry) -> Option<Entry> {
        self.entries.insert(key, normalise(entry))
    }

    /// The datapath encoding of every entry, in key order: (12-byte key,
    /// 12-byte value) pairs ready for the policy map.
    pub fn to_datapath_entries(&self) -> Vec<([u8; 12], [u8; 12])> {
        self.entries
            .iter()
            .map(|(key, entry)| (key.to_bytes(), entry.to_datapath_bytes(key)))
            .collect()
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
