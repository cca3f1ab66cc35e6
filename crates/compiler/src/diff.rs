//! The difference between two map states, ordered so that applying it one
//! write at a time never opens a hole.
//!
//! An agent that updates a live policy map in place (instead of the A/B
//! replacement of `DATAPATH.md` §2.3) writes one key per syscall, and the
//! datapath may decide packets between any two writes. [`policy_diff`]
//! orders the writes so that **in every intermediate map state, a flow that
//! passes gets exactly the verdict (allow, or redirect to the same proxy
//! port) of the old state or of the new state**; in particular no
//! intermediate state allows a flow that neither the old nor the new state
//! allows, and none lets a flow skip an L7 proxy that both would use.
//! Verdicts are those of the reference lookup [`MapState::lookup`]
//! (docs/semantics.md §5.4, Cilium `bpf/lib/policy.h` `__policy_can_access`).
//!
//! The touched keys `T` are the keys added, changed or deleted. Two phases:
//!
//! 1. **fence**: every key of `T` is written as the maximal deny
//!    ([`Entry::deny`], precedence `0xFFFFFFFF`) unless it already holds
//!    exactly that. Writing the maximal deny is pure narrowing: a packet
//!    whose exact-identity match is such a key returns at once (deny), and
//!    one whose wildcard match is such a key chooses it (no precedence is
//!    higher). So a passing packet matched only untouched keys or keys
//!    with their old values, and since every old key is still present
//!    (deleted keys are fenced, not removed), those are its old matches:
//!    its verdict is the old one.
//! 2. **settle**: the final value of every key of `T` that the new state
//!    keeps (unless the fence already is that value), and the deletion of
//!    every key only the old state had, in key order. Every key of the new
//!    state is present throughout (final or fenced), and keys only the old
//!    state had are fenced until deleted; so a passing packet's two matches
//!    are keys of the new state holding their new values, which are its
//!    matches in the new state: its verdict is the new one.
//!
//! Every key is decided on its own (fence, then settle, each phase in key
//! order) and a key both states hold with the same datapath value gets no
//! write, so for two states that differ only in the keys of some peer
//! identities, the difference of those identities' parts alone is the
//! whole difference: a live session (`crate::session`) diffs only the parts
//! it replaced.
//!
//! Cost: a key whose final value is not the maximal deny may be written
//! twice (fence, then value). Deletions and additions stay single writes
//! when the fence is already final. The property is checked over random
//! old/new pairs in a small universe by the tests below (every prefix of
//! the sequence, every flow of the universe).

use crate::mapstate::{Entry, Key, MapState};

/// What a [`MapChange`] does to the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// The key is not in the map yet (`BPF_NOEXIST` would succeed).
    Add,
    /// The key is in the map and gets another value.
    Change,
    /// The key is removed.
    Delete,
}

/// The phase a change belongs to (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Temporary (or final) maximal denies on every touched key.
    Fence = 1,
    /// Final values and deletions.
    Settle = 2,
}

/// One write of the difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapChange {
    /// Add, change or delete.
    pub kind: ChangeKind,
    /// The phase that ordered it.
    pub phase: Phase,
    /// The key.
    pub key: Key,
    /// The entry to write (`None` for a delete).
    pub entry: Option<Entry>,
}

/// The ordered writes that turn `old` into `new`, as typed keys and entries
/// (the map bytes are `porin-ebpf`'s `abi::policy_pair`). Entries are
/// compared by what the datapath stores ([`Entry::datapath_eq`]; origins do
/// not matter to the datapath): a map state's denies carry no proxy port or
/// auth (it normalises them), so equal here is equal in the map.
pub fn policy_diff(old: &MapState, new: &MapState) -> Vec<MapChange> {
    let fence = Entry::deny();
    let is_fence = |entry: &Entry| entry.datapath_eq(&fence);
    let mut fences = Vec::new();
    let mut settles = Vec::new();
    for (key, entry) in new.iter() {
        let previous = old.get(key);
        if previous.is_some_and(|p| p.datapath_eq(entry)) {
            continue;
        }
        let fenced_already = previous.is_some_and(is_fence);
        if !fenced_already {
            fences.push(MapChange {
                kind: if previous.is_some() {
                    ChangeKind::Change
                } else {
                    ChangeKind::Add
                },
                phase: Phase::Fence,
                key: *key,
                entry: Some(if is_fence(entry) {
                    entry.clone()
                } else {
                    fence.clone()
                }),
            });
        }
        if !is_fence(entry) {
            settles.push(MapChange {
                kind: ChangeKind::Change,
                phase: Phase::Settle,
                key: *key,
                entry: Some(entry.clone()),
            });
        }
    }
    for (key, entry) in old.iter() {
        if new.get(key).is_some() {
            continue;
        }
        if !is_fence(entry) {
            fences.push(MapChange {
                kind: ChangeKind::Change,
                phase: Phase::Fence,
                key: *key,
                entry: Some(fence.clone()),
            });
        }
        settles.push(MapChange {
            kind: ChangeKind::Delete,
            phase: Phase::Settle,
            key: *key,
            entry: None,
        });
    }
    fences.sort_by_key(|c| c.key);
    settles.sort_by_key(|c| c.key);
    fences.extend(settles);
    fences
}

/// Applies changes to a state (for tests and for agents that mirror the map).
pub fn apply(state: &MapState, changes: &[MapChange]) -> MapState {
    let mut entries: std::collections::BTreeMap<Key, Entry> =
        state.iter().map(|(k, e)| (*k, e.clone())).collect();
    for change in changes {
        match &change.entry {
            Some(entry) => {
                entries.insert(change.key, entry.clone());
            }
            None => {
                entries.remove(&change.key);
            }
        }
    }
    let mut out = MapState::new();
    for (key, entry) in entries {
        // Entries come from MapStates or are denies, never PASS entries.
        let _ = out.upsert(key, entry);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Identity;
    use crate::mapstate::{AuthRequirement, AuthType, Direction, ListenerPriority, Priority};
    use proptest::prelude::*;

    fn keys() -> Vec<Key> {
        let mut out = Vec::new();
        for identity in [0u32, 300, 301] {
            let base = Key::ingress().with_identity(Identity::new(identity).unwrap());
            out.push(base);
            for proto in [6u8, 17] {
                out.push(Key::new(Direction::Ingress, base.identity(), proto, 0, 0).unwrap());
                out.push(Key::new(Direction::Ingress, base.identity(), proto, 80, 16).unwrap());
                out.push(Key::new(Direction::Ingress, base.identity(), proto, 64, 12).unwrap());
            }
        }
        out
    }

    fn entries() -> Vec<Entry> {
        let p1 = Priority::new(1).unwrap();
        vec![
            Entry::allow(),
            Entry::deny(),
            Entry::redirect(15001, ListenerPriority::HTTP),
            Entry::redirect(15002, ListenerPriority::DNS),
            Entry::new(p1, false, 0, ListenerPriority::NONE, AuthRequirement::NONE),
            Entry::allow().with_auth(AuthRequirement::explicit(AuthType::SPIRE)),
            Entry::allow().with_auth(AuthRequirement::derived(AuthType::SPIRE)),
            Entry::allow().with_cookie(7),
        ]
    }

    fn state(choice: &[Option<usize>]) -> MapState {
        let keys = keys();
        let entries = entries();
        let mut out = MapState::new();
        for (key, pick) in keys.iter().zip(choice) {
            if let Some(index) = pick {
                out.upsert(*key, entries[index % entries.len()].clone())
                    .unwrap();
            }
        }
        out
    }

    fn flows() -> Vec<(Identity, u8, u16)> {
        let mut out = Vec::new();
        for identity in [300u32, 301, 302] {
            for proto in [6u8, 17, 1] {
                for port in [80u16, 81, 64, 443] {
                    out.push((Identity::new(identity).unwrap(), proto, port));
                }
            }
        }
        out
    }

    /// What the datapath stores of a state: keys and entries without origins.
    fn datapath_view(state: &MapState) -> Vec<(Key, Entry)> {
        state
            .iter()
            .map(|(key, entry)| {
                let mut entry = entry.clone();
                entry.origins.clear();
                (*key, entry)
            })
            .collect()
    }

    /// The hole check: every prefix of the change list, every flow.
    fn assert_no_hole(old: &MapState, new: &MapState) {
        let changes = policy_diff(old, new);
        assert_eq!(datapath_view(&apply(old, &changes)), datapath_view(new));
        for n in 0..=changes.len() {
            let mid = apply(old, &changes[..n]);
            for (identity, proto, port) in flows() {
                let v = |s: &MapState| s.lookup(Direction::Ingress, identity, proto, port).verdict;
                let (vo, vn, vm) = (v(old), v(new), v(&mid));
                if vm.is_allowed() {
                    assert!(
                        vm == vo || vm == vn,
                        "after {n} of {} changes, flow {identity}/{proto}/{port} gets {vm} \
                         but old gives {vo} and new {vn}\nchanges: {changes:#?}",
                        changes.len()
                    );
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// A passing verdict is always the old or the new one (so nothing
        /// passes that neither state passes, and no L7 proxy is skipped).
        #[test]
        fn no_intermediate_state_opens_a_hole(
            old in proptest::collection::vec(proptest::option::weighted(0.3, 0usize..8), 21),
            new in proptest::collection::vec(proptest::option::weighted(0.3, 0usize..8), 21),
        ) {
            assert_no_hole(&state(&old), &state(&new));
        }
    }

    #[test]
    fn fences_come_first_then_final_values() {
        let k = keys();
        let mut old = MapState::new();
        old.upsert(k[0], Entry::allow()).unwrap();
        let mut new = MapState::new();
        new.upsert(k[2], Entry::deny()).unwrap();
        new.upsert(k[3], Entry::allow()).unwrap();
        let changes = policy_diff(&old, &new);
        let phases: Vec<_> = changes.iter().map(|c| (c.kind, c.phase, c.key)).collect();
        assert_eq!(
            phases,
            vec![
                (ChangeKind::Change, Phase::Fence, k[0]),
                (ChangeKind::Add, Phase::Fence, k[3]),
                (ChangeKind::Add, Phase::Fence, k[2]),
                (ChangeKind::Delete, Phase::Settle, k[0]),
                (ChangeKind::Change, Phase::Settle, k[3]),
            ]
        );
        assert_no_hole(&old, &new);
    }

    #[test]
    fn identical_states_need_no_write() {
        let k = keys();
        let mut state = MapState::new();
        state
            .upsert(k[1], Entry::redirect(15001, ListenerPriority::HTTP))
            .unwrap();
        assert!(policy_diff(&state, &state).is_empty());
    }
}
