//! Cilium's map-state insertion algebra (`mapState.insertWithChanges` and
//! friends in `pkg/policy/mapstate.go`, docs/semantics.md §4.6), without tiers /
//! PASS verdicts.
//!
//! The relations, with "covers" meaning broader-or-equal protocol/port in
//! the same direction ([`Key::port_proto_covers`]):
//!
//! - *covering keys* of `k`: keys that cover `k` with the same identity or
//!   identity 0 (`BroaderOrEqualKeys`, filtered to covering ones);
//! - *narrower keys* of `k`: keys `k` covers with the same identity, or any
//!   identity if `k` has identity 0 (`NarrowerOrEqualKeys`);
//! - *same-ID covering / subset keys*: as above but only the same identity
//!   (`CoveringKeysWithSameID`, `SubsetKeysWithSameID`), visited in LPM
//!   order (longest prefix first / shortest prefix first).
//!
//! Identity 0 and a specific identity are resolved against each other by the
//! datapath at lookup time (two lookups, §5.4), so the algebra only needs to
//! keep precedence straight within those covering relations.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{BitOr, BitOrAssign};

use thiserror::Error;

use super::entry::Entry;
use super::key::{Direction, Key};
use super::{MapState, normalise};
use crate::identity::Identity;

/// Which kinds of rules exist in one direction of a policy
/// (`policyFeatures`, collected in `L4Filter.attach`). They select the
/// insertion algorithm: with none of them, allows are added without any
/// pruning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PolicyFeatures(u8);

impl PolicyFeatures {
    /// No features: all rules are plain allows at one priority.
    pub const NONE: PolicyFeatures = PolicyFeatures(0);
    /// `denyRules`: some rule denies.
    pub const DENY: PolicyFeatures = PolicyFeatures(1);
    /// `redirectRules`: some rule redirects to a proxy (L7 parser, listener).
    pub const REDIRECT: PolicyFeatures = PolicyFeatures(1 << 1);
    /// `orderedRules`: some rule has a non-zero priority.
    pub const ORDERED: PolicyFeatures = PolicyFeatures(1 << 2);
    /// `authRules`: some rule has explicit authentication.
    pub const AUTH: PolicyFeatures = PolicyFeatures(1 << 3);
    /// `precedenceFeatures = deny | redirect | ordered`.
    pub const PRECEDENCE: PolicyFeatures = PolicyFeatures(0b0111);
    /// `allFeatures`.
    pub const ALL: PolicyFeatures = PolicyFeatures(0b1111);

    /// True if any feature of `other` is present (Cilium's `contains`).
    pub const fn intersects(self, other: PolicyFeatures) -> bool {
        self.0 & other.0 != 0
    }

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }
}

impl BitOr for PolicyFeatures {
    type Output = PolicyFeatures;

    fn bitor(self, rhs: PolicyFeatures) -> PolicyFeatures {
        PolicyFeatures(self.0 | rhs.0)
    }
}

impl BitOrAssign for PolicyFeatures {
    fn bitor_assign(&mut self, rhs: PolicyFeatures) {
        self.0 |= rhs.0;
    }
}

/// Incremental changes of one or more insertions (Cilium's `ChangeState`):
/// keys added or changed in a datapath-visible way, keys deleted, and the
/// original value of every key modified or deleted (not of keys first added
/// in the same round).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Keys whose datapath value is new or changed.
    pub adds: BTreeSet<Key>,
    /// Keys removed.
    pub deletes: BTreeSet<Key>,
    /// Original values of modified or removed keys.
    pub old: BTreeMap<Key, Entry>,
    /// Record nothing ([`MapState::insert_quiet`]): a batch distillation
    /// discards the changes, and recording them doubled its tree work.
    quiet: bool,
}

impl Changes {
    /// `insertOldIfNotExists`: remember the original value once, unless the
    /// key was first added in this round. True if recorded.
    fn record_old(&mut self, key: Key, entry: &Entry) -> bool {
        if self.quiet || self.old.contains_key(&key) || self.adds.contains(&key) {
            return false;
        }
        self.old.insert(key, entry.clone());
        true
    }

    /// True if nothing changed.
    pub fn is_empty(&self) -> bool {
        self.adds.is_empty() && self.deletes.is_empty() && self.old.is_empty()
    }
}

/// An insertion the map algebra refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MapStateError {
    /// PASS verdicts (tiers) are not modelled; see the module docs.
    #[error("pass verdicts (precedence `{precedence:#010x}`) are not supported")]
    PassNotSupported {
        /// The entry's precedence.
        precedence: u32,
    },
}

impl MapState {
    /// Inserts `entry` at `key` following Cilium's `insertWithChanges`
    /// (docs/semantics.md §4.6), given the features of the key's direction:
    ///
    /// - **deny**: bail if a covering key has higher precedence or is a
    ///   different deny of equal precedence; otherwise delete narrower keys
    ///   with lower precedence (and equal-precedence denies at other keys),
    ///   then add;
    /// - **allow with `AUTH`**: `authPreferredInsert` (same-ID covering keys
    ///   only, auth inheritance and push-down);
    /// - **allow with `DENY`/`REDIRECT`/`ORDERED`**: bail if covered by a
    ///   higher precedence, else prune lower-precedence narrower keys and add;
    /// - **allow without features**: add (merge on an equal key).
    ///
    /// Returns the incremental changes (useful for explanations and tests).
    pub fn insert_with_features(
        &mut self,
        key: Key,
        entry: Entry,
        features: PolicyFeatures,
    ) -> Result<Changes, MapStateError> {
        let mut changes = Changes::default();
        self.insert_recording(key, entry, features, &mut changes)?;
        Ok(changes)
    }

    /// [`MapState::insert_with_features`] without recording the changes
    /// (the same state; what a batch distillation uses).
    pub fn insert_quiet(
        &mut self,
        key: Key,
        entry: Entry,
        features: PolicyFeatures,
    ) -> Result<(), MapStateError> {
        let mut changes = Changes {
            quiet: true,
            ..Changes::default()
        };
        self.insert_recording(key, entry, features, &mut changes)
    }

    /// [`MapState::insert_with_features`] accumulating into `changes`.
    pub fn insert_recording(
        &mut self,
        key: Key,
        entry: Entry,
        features: PolicyFeatures,
        changes: &mut Changes,
    ) -> Result<(), MapStateError> {
        if entry.precedence.is_pass() {
            return Err(MapStateError::PassNotSupported {
                precedence: entry.precedence.get(),
            });
        }
        let entry = normalise(entry);
        if entry.is_deny() {
            if !self.is_bailed(&key, &entry) {
                self.prune_narrower(&key, &entry, changes);
                self.add_key(key, entry, changes);
            }
            return Ok(());
        }
        if features.intersects(PolicyFeatures::AUTH) {
            self.auth_preferred_insert(key, entry, changes);
            return Ok(());
        }
        if features.intersects(PolicyFeatures::PRECEDENCE) {
            if self.is_bailed(&key, &entry) {
                return Ok(());
            }
            self.prune_narrower(&key, &entry, changes);
        }
        self.add_key(key, entry, changes);
        Ok(())
    }

    /// Removes the entry at exactly `key` (`deleteKeyWithChanges`, used when
    /// an identity stops being selected), recording the change. Like
    /// Cilium, nothing that this entry once suppressed is reinstated: only
    /// specific-identity keys are removed incrementally, and all keys of that
    /// identity go together (see the comment on `insertWithChanges`).
    pub fn remove_recording(&mut self, key: &Key, changes: &mut Changes) -> Option<Entry> {
        let entry = self.entries.get(key).cloned()?;
        self.delete_existing(*key, &entry, changes);
        Some(entry)
    }

    /// Keys with identity `identity` in `direction`, in key order.
    fn keys_with_identity(&self, direction: Direction, identity: Identity) -> Vec<(Key, &Entry)> {
        let lo = Key::for_direction(direction).with_identity(identity);
        self.entries
            .range(lo..)
            .take_while(|(k, _)| k.direction() == direction && k.identity() == identity)
            .map(|(k, e)| (*k, e))
            .collect()
    }

    /// Covering keys: broader-or-equal protocol/port with the same identity
    /// or identity 0 (`BroaderOrEqualKeys` restricted to covering ones, as
    /// `maybeBailEntry` uses it).
    /// (The insertion itself checks the same relation in place,
    /// `is_bailed`; the tests compare against this.)
    #[cfg(test)]
    pub(crate) fn covering_keys(&self, key: &Key) -> Vec<(Key, Entry)> {
        let mut found: Vec<(Key, Entry)> = self
            .keys_with_identity(key.direction(), Identity::WILDCARD)
            .into_iter()
            .filter(|(k, _)| k.port_proto_covers(key))
            .map(|(k, e)| (k, e.clone()))
            .collect();
        if !key.identity().is_wildcard() {
            found.extend(
                self.keys_with_identity(key.direction(), key.identity())
                    .into_iter()
                    .filter(|(k, _)| k.port_proto_covers(key))
                    .map(|(k, e)| (k, e.clone())),
            );
        }
        found
    }

    /// Narrower-or-equal keys (`NarrowerOrEqualKeys`): the same identity, or
    /// every identity when `key` has identity 0.
    pub(crate) fn narrower_keys(&self, key: &Key) -> Vec<(Key, Entry)> {
        if !key.identity().is_wildcard() {
            return self
                .keys_with_identity(key.direction(), key.identity())
                .into_iter()
                .filter(|(k, _)| key.port_proto_covers(k))
                .map(|(k, e)| (k, e.clone()))
                .collect();
        }
        self.entries
            .iter()
            .filter(|(k, _)| key.port_proto_covers(k))
            .map(|(k, e)| (*k, e.clone()))
            .collect()
    }

    /// Same-identity covering keys, longest prefix first
    /// (`CoveringKeysWithSameID`).
    fn covering_keys_same_id(&self, key: &Key) -> Vec<(Key, Entry)> {
        let mut found: Vec<(Key, Entry)> = self
            .keys_with_identity(key.direction(), key.identity())
            .into_iter()
            .filter(|(k, _)| k.port_proto_covers(key))
            .map(|(k, e)| (k, e.clone()))
            .collect();
        // Ancestors form a chain, so prefix length orders them totally.
        found.sort_by_key(|(k, _)| std::cmp::Reverse(k.userspace_prefix_len()));
        found
    }

    /// Same-identity narrower-or-equal keys, shortest prefix first
    /// (`SubsetKeysWithSameID`); ties in port order.
    fn subset_keys_same_id(&self, key: &Key) -> Vec<(Key, Entry)> {
        let mut found: Vec<(Key, Entry)> = self
            .keys_with_identity(key.direction(), key.identity())
            .into_iter()
            .filter(|(k, _)| key.port_proto_covers(k))
            .map(|(k, e)| (k, e.clone()))
            .collect();
        found.sort_by_key(|(k, _)| (k.userspace_prefix_len(), k.proto(), k.port()));
        found
    }

    /// `maybeBailEntry` without PASS: true if a covering key has higher
    /// precedence, or (for a deny) is a different key with equal precedence.
    fn is_bailed(&self, key: &Key, entry: &Entry) -> bool {
        // `covering_keys` without collecting or cloning: this runs once per
        // insertion with precedence features.
        let bails = |k: &Key, v: &Entry| {
            v.precedence > entry.precedence
                || (entry.is_deny() && v.precedence == entry.precedence && k != key)
        };
        let scan = |identity: Identity| {
            let lo = Key::for_direction(key.direction()).with_identity(identity);
            self.entries
                .range(lo..)
                .take_while(|(k, _)| k.direction() == key.direction() && k.identity() == identity)
                .any(|(k, v)| k.port_proto_covers(key) && bails(k, v))
        };
        scan(Identity::WILDCARD) || (!key.identity().is_wildcard() && scan(key.identity()))
    }

    /// `pruneNarrower` without PASS: delete narrower-or-equal keys with lower
    /// precedence, and equal-precedence denies at different keys.
    fn prune_narrower(&mut self, key: &Key, entry: &Entry, changes: &mut Changes) {
        for (k, v) in self.narrower_keys(key) {
            let lower = v.precedence < entry.precedence;
            let other_equal_deny = v.is_deny() && v.precedence == entry.precedence && k != *key;
            if lower || other_equal_deny {
                self.delete_existing(k, &v, changes);
            }
        }
    }

    /// `deleteExistingWithChanges`.
    fn delete_existing(&mut self, key: Key, entry: &Entry, changes: &mut Changes) {
        if changes.record_old(key, entry) {
            changes.deletes.insert(key);
        }
        changes.adds.remove(&key);
        self.entries.remove(&key);
    }

    /// `addKeyWithChanges` (without PASS): insert, or on an existing key merge
    /// same-level entries (`MapStateEntry.Merge`, origins unioned) or let the
    /// higher precedence take over.
    fn add_key(&mut self, key: Key, entry: Entry, changes: &mut Changes) {
        let Some(old) = self.entries.get(&key).cloned() else {
            self.entries.insert(key, entry);
            if !changes.quiet {
                changes.adds.insert(key);
                changes.deletes.remove(&key);
            }
            return;
        };
        if old == entry {
            return;
        }
        changes.record_old(key, &old);
        let datapath_equal = old.datapath_eq(&entry);
        let mut merged = old.clone();
        if old
            .precedence
            .may_differ_only_in_proxy_byte(entry.precedence)
        {
            merged.merge_same_level(&entry);
            merged.origins.extend(entry.origins.iter().copied());
        } else if old.precedence < entry.precedence {
            merged = entry;
        } else {
            return;
        }
        self.entries.insert(key, merged);
        if !datapath_equal && !changes.quiet {
            changes.adds.insert(key);
            changes.deletes.remove(&key);
        }
    }

    /// `authPreferredInsert`: precedence among same-ID keys, plus auth
    /// inheritance from the most specific covering key with explicit auth and
    /// push-down of a new explicit auth to narrower keys with derived auth.
    fn auth_preferred_insert(&mut self, key: Key, mut entry: Entry, changes: &mut Changes) {
        let explicit = entry.auth.is_explicit();
        let mut derived = false;
        for (k, v) in self.covering_keys_same_id(&key) {
            if v.precedence > entry.precedence {
                if v.is_deny() || !explicit {
                    // Covered by a higher precedence and nothing of our own
                    // to keep: bail.
                    return;
                }
                // Our explicit auth differs: keep the entry, but with the
                // covering entry's redirect and precedence.
                entry.proxy_port = v.proxy_port;
                entry.precedence = v.precedence;
                break;
            }
            if !derived
                && !explicit
                && !k.port_proto_is_equal(&key)
                && v.auth.is_explicit()
                && v.precedence.allow_precedence() >= entry.precedence.allow_precedence()
            {
                entry.auth = v.auth.as_derived();
                derived = true;
            }
        }

        let mut propagated = false;
        for (k, v) in self.subset_keys_same_id(&key) {
            if v.precedence < entry.precedence {
                if v.auth.is_explicit() {
                    // overrideProxyPortForAuth: keep it for its own auth.
                    changes.record_old(k, &v);
                    if let Some(stored) = self.entries.get_mut(&k) {
                        stored.proxy_port = entry.proxy_port;
                        stored.precedence = entry.precedence;
                    }
                } else {
                    self.delete_existing(k, &v, changes);
                    continue;
                }
            }
            if !propagated && explicit && !k.port_proto_is_equal(&key) {
                if v.is_deny() || v.auth.is_explicit() {
                    // The more specific explicit key governs what is below it.
                    propagated = true;
                    continue;
                }
                if v.auth.auth_type() != entry.auth.auth_type() {
                    // overrideAuthRequirement: only derived auth is overridden.
                    changes.record_old(k, &v);
                    if let Some(stored) = self.entries.get_mut(&k) {
                        stored.auth = entry.auth.as_derived();
                    }
                }
            }
        }

        self.add_key(key, entry, changes);
    }
}
