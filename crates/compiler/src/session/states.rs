//! The distinct map states of a live session, indexed by the selectors
//! their ops name, with their entries counted.
//!
//! An identity that appears or goes changes the states whose ops name a
//! selector that gains or loses it, and no other. Finding those by asking
//! every state (`by_peers` of each record) touched every record of the
//! session on every add: with 257 states, a cold add (one after other
//! work, as a pod appearing in a running agent is) spent ~100 µs in cache
//! misses on records it then skipped (session 12, `incr-child`). The index
//! here answers from one entry per selector. The entry total is kept the
//! same way, so the limits' check after an add does not read every state.
//!
//! Every change goes through [`States::insert`], [`States::remove`] or the
//! guard of [`States::get_mut`], which keep the index and the total; debug
//! builds check both against a recount after every incremental update.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::{Deref, DerefMut};

use crate::inventory::NamedPort;
use crate::resolve::policy::SelectorId;

/// A distinct state: the identity and named ports its endpoints share.
pub(super) type StateKey = (u32, Vec<NamedPort>);

/// What the index reads of a state's record.
pub(super) trait Indexed {
    /// The selectors the record's ops name as peers (any order, repeats
    /// allowed).
    fn selectors(&self) -> Vec<SelectorId>;
    /// The entries of its map state.
    fn entries(&self) -> usize;
}

/// The states of a session (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct States<R> {
    map: HashMap<StateKey, R>,
    /// The states whose ops name each selector. foldhash, not SipHash: the
    /// keys are the session's own small selector ids.
    reached: foldhash::HashMap<SelectorId, BTreeSet<StateKey>>,
    /// Σ of the states' entries.
    entries: u64,
    /// The keys of taken records ([`States::take`]), still indexed under
    /// their selectors until they are put back or removed.
    taken: HashSet<StateKey>,
    /// The named-port lists of each identity's states (taken ones too):
    /// a rule change visits the states of the identities it changes, not
    /// every state (one per identity: 30,000 in a 30,000-pod cluster).
    by_identity: foldhash::HashMap<u32, BTreeSet<Vec<NamedPort>>>,
}

impl<R> Default for States<R> {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            reached: foldhash::HashMap::default(),
            entries: 0,
            taken: HashSet::new(),
            by_identity: foldhash::HashMap::default(),
        }
    }
}

impl<R: Indexed> States<R> {
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn get(&self, key: &StateKey) -> Option<&R> {
        self.map.get(key)
    }

    pub(super) fn contains_key(&self, key: &StateKey) -> bool {
        self.map.contains_key(key)
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &StateKey> {
        self.map.keys()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&StateKey, &R)> {
        self.map.iter()
    }

    /// The keys of `identity`'s states, sorted.
    pub(super) fn keys_of(&self, identity: u32) -> impl Iterator<Item = StateKey> + '_ {
        self.by_identity
            .get(&identity)
            .into_iter()
            .flatten()
            .map(move |ports| (identity, ports.clone()))
            .filter(|key| self.map.contains_key(key))
    }

    /// Σ of the states' entries.
    pub(super) fn entries(&self) -> u64 {
        self.entries
    }

    /// Puts `record` at `key`; the record it replaces, if any. Only the
    /// selectors that differ from the replaced record's are re-indexed: a
    /// one-rule change replaces a state whose ops name the same hundreds
    /// of selectors. A taken record goes back through
    /// [`States::put_back`]; given here, it is forgotten whole first.
    pub(super) fn insert(&mut self, key: StateKey, record: R) -> Option<R> {
        let previous = self.map.remove(&key);
        let old = match &previous {
            Some(previous) => {
                self.entries = self.entries.saturating_sub(wide(previous.entries()));
                sorted(previous.selectors())
            }
            None => {
                self.forget_taken(&key);
                Vec::new()
            }
        };
        let new = sorted(record.selectors());
        self.reindex(&key, &old, &new);
        self.entries = self.entries.saturating_add(wide(record.entries()));
        if previous.is_none() {
            self.by_identity
                .entry(key.0)
                .or_default()
                .insert(key.1.clone());
        }
        self.map.insert(key, record);
        previous
    }

    /// Removes `key`'s record, from the index too.
    pub(super) fn remove(&mut self, key: &StateKey) -> Option<R> {
        self.forget_taken(key);
        unindex(&mut self.by_identity, key.0, &key.1);
        let record = self.map.remove(key)?;
        self.entries = self.entries.saturating_sub(wide(record.entries()));
        self.reindex(key, &sorted(record.selectors()), &[]);
        Some(record)
    }

    /// Takes `key`'s record out to be made again and put back with
    /// [`States::put_back`], given how its selectors changed; the index
    /// keeps its selectors until then (a taken key is never reached:
    /// [`States::reached_by`] skips keys without a record). Nothing is
    /// listed here: listing and sorting the selectors of a state that
    /// names 4,096 of them, here and again at the put-back, was a tenth
    /// of a one-rule change (session 26).
    pub(super) fn take(&mut self, key: &StateKey) -> Option<R> {
        let record = self.map.remove(key)?;
        self.entries = self.entries.saturating_sub(wide(record.entries()));
        self.taken.insert(key.clone());
        Some(record)
    }

    /// Puts back the record taken at `key`, whose ops no longer name the
    /// selectors `gone` and now name `came` (each without repeats). A key
    /// not taken is inserted as by [`States::insert`].
    pub(super) fn put_back(
        &mut self,
        key: StateKey,
        record: R,
        (gone, came): (&[SelectorId], &[SelectorId]),
    ) {
        if !self.taken.remove(&key) {
            self.insert(key, record);
            return;
        }
        for selector in gone {
            unindex(&mut self.reached, *selector, &key);
        }
        for selector in came {
            self.reached
                .entry(*selector)
                .or_default()
                .insert(key.clone());
        }
        self.entries = self.entries.saturating_add(wide(record.entries()));
        self.map.insert(key, record);
    }

    /// A taken key put back whole or removed: it leaves the index. Its
    /// selectors were not listed ([`States::take`]), so every selector's
    /// entry is looked at; the session puts its taken records back with
    /// [`States::put_back`] instead.
    fn forget_taken(&mut self, key: &StateKey) {
        if self.taken.remove(key) {
            self.reached.retain(|_, keys| {
                keys.remove(key);
                !keys.is_empty()
            });
        }
    }

    /// The record at `key`, to change its state (not its ops: the guard
    /// recounts the entries when it is dropped; debug builds check that
    /// the selectors stayed).
    pub(super) fn get_mut(&mut self, key: &StateKey) -> Option<StateMut<'_, R>> {
        let Self { map, entries, .. } = self;
        let record = map.get_mut(key)?;
        Some(StateMut {
            before: record.entries(),
            #[cfg(debug_assertions)]
            selectors: sorted(record.selectors()),
            record,
            total: entries,
        })
    }

    /// Changes every record in place without changing the selectors its
    /// ops name (debug builds check it); the entry total is recounted.
    pub(super) fn for_each_mut(&mut self, mut change: impl FnMut(&mut R)) {
        let mut entries = 0_u64;
        for record in self.map.values_mut() {
            #[cfg(debug_assertions)]
            let selectors = sorted(record.selectors());
            change(record);
            #[cfg(debug_assertions)]
            debug_assert_eq!(
                selectors,
                sorted(record.selectors()),
                "a state's ops changed their selectors through States::for_each_mut"
            );
            entries += wide(record.entries());
        }
        self.entries = entries;
    }

    /// The keys of the states whose ops name one of `selectors`, sorted.
    pub(super) fn reached_by(&self, selectors: &[SelectorId]) -> Vec<StateKey> {
        let mut keys: BTreeSet<&StateKey> = BTreeSet::new();
        for selector in selectors {
            if let Some(reached) = self.reached.get(selector) {
                keys.extend(reached.iter().filter(|key| self.map.contains_key(key)));
            }
        }
        keys.into_iter().cloned().collect()
    }

    /// Selectors numbered again (`moves`: old id to new id, a
    /// permutation of those ids): the index follows, and `change` is given
    /// every record whose ops name a moved selector, to rename them (the
    /// records reached by no moved selector keep theirs). No record may be
    /// taken ([`States::take`]).
    pub(super) fn relabel(
        &mut self,
        moves: &foldhash::HashMap<SelectorId, SelectorId>,
        mut change: impl FnMut(&StateKey, &mut R),
    ) {
        debug_assert!(self.taken.is_empty(), "a state taken during a renumbering");
        for key in &relabel_index(&mut self.reached, moves) {
            if let Some(record) = self.map.get_mut(key) {
                change(key, record);
            }
        }
    }

    /// Moves `key` in the index from the selectors `old` to `new` (both
    /// sorted, without repeats), touching only those in one of them.
    fn reindex(&mut self, key: &StateKey, old: &[SelectorId], new: &[SelectorId]) {
        reindex(&mut self.reached, key, old, new);
    }

    /// Debug builds: the index and the total equal a recount (the
    /// session calls it after each incremental update; the tests run
    /// debug builds).
    pub(super) fn debug_check(&self) {
        #[cfg(debug_assertions)]
        {
            let mut reached: HashMap<SelectorId, BTreeSet<StateKey>> = HashMap::new();
            let mut entries = 0_u64;
            for (key, record) in &self.map {
                entries += wide(record.entries());
                for selector in record.selectors() {
                    reached.entry(selector).or_default().insert(key.clone());
                }
            }
            let kept: HashMap<SelectorId, BTreeSet<StateKey>> = self
                .reached
                .iter()
                .map(|(s, keys)| (*s, keys.clone()))
                .collect();
            debug_assert_eq!(kept, reached, "the states' selector index");
            let mut by_identity: HashMap<u32, BTreeSet<Vec<NamedPort>>> = HashMap::new();
            for (identity, ports) in self.map.keys() {
                by_identity
                    .entry(*identity)
                    .or_default()
                    .insert(ports.clone());
            }
            let kept: HashMap<u32, BTreeSet<Vec<NamedPort>>> = self
                .by_identity
                .iter()
                .map(|(identity, ports)| (*identity, ports.clone()))
                .collect();
            debug_assert_eq!(kept, by_identity, "the states' identity index");
            debug_assert_eq!(self.entries, entries, "the states' entry total");
            debug_assert!(self.taken.is_empty(), "a state taken and not put back");
        }
    }
}

/// A state's record borrowed to change its state (see
/// [`States::get_mut`]).
pub(super) struct StateMut<'a, R: Indexed> {
    record: &'a mut R,
    total: &'a mut u64,
    before: usize,
    #[cfg(debug_assertions)]
    selectors: Vec<SelectorId>,
}

impl<R: Indexed> Deref for StateMut<'_, R> {
    type Target = R;
    fn deref(&self) -> &R {
        self.record
    }
}

impl<R: Indexed> DerefMut for StateMut<'_, R> {
    fn deref_mut(&mut self) -> &mut R {
        self.record
    }
}

impl<R: Indexed> Drop for StateMut<'_, R> {
    fn drop(&mut self) {
        *self.total = self
            .total
            .saturating_sub(wide(self.before))
            .saturating_add(wide(self.record.entries()));
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            self.selectors,
            sorted(self.record.selectors()),
            "a state's ops changed through States::get_mut"
        );
    }
}

/// The selectors sorted, without repeats.
pub(super) fn sorted(mut selectors: Vec<SelectorId>) -> Vec<SelectorId> {
    selectors.sort_unstable();
    selectors.dedup();
    selectors
}

fn wide(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Selectors numbered again (`moves`: old id to new id, a permutation of
/// those ids) in a selector index: each moved selector's members go to its
/// new id. Gives the members of the moved selectors.
pub(super) fn relabel_index<T: Ord + Clone>(
    index: &mut foldhash::HashMap<SelectorId, BTreeSet<T>>,
    moves: &foldhash::HashMap<SelectorId, SelectorId>,
) -> BTreeSet<T> {
    let moved: Vec<(SelectorId, BTreeSet<T>)> = moves
        .iter()
        .filter_map(|(old, new)| index.remove(old).map(|members| (*new, members)))
        .collect();
    let mut members = BTreeSet::new();
    for (new, list) in moved {
        members.extend(list.iter().cloned());
        // Every new id is some moved selector's old one, taken out above.
        index.insert(new, list);
    }
    members
}

/// Moves `member` in a selector index from the selectors `old` to `new`
/// (both sorted, without repeats), touching only those in one of them.
pub(super) fn reindex<T: Ord + Clone>(
    index: &mut foldhash::HashMap<SelectorId, BTreeSet<T>>,
    member: &T,
    old: &[SelectorId],
    new: &[SelectorId],
) {
    let (mut o, mut n) = (0, 0);
    while o < old.len() || n < new.len() {
        match (old.get(o), new.get(n)) {
            (Some(a), Some(b)) if a == b => {
                o += 1;
                n += 1;
            }
            (Some(a), b) if b.is_none_or(|b| a < b) => {
                unindex(index, *a, member);
                o += 1;
            }
            (_, Some(b)) => {
                index.entry(*b).or_default().insert(member.clone());
                n += 1;
            }
            (_, None) => o += 1,
        }
    }
}

/// Takes `member` out of the set an index keeps under `key` (a selector,
/// an identity), dropping the set when it empties (an index without empty
/// sets is what the debug checks recount).
pub(super) fn unindex<K: std::hash::Hash + Eq, T: Ord>(
    index: &mut foldhash::HashMap<K, BTreeSet<T>>,
    key: K,
    member: &T,
) {
    if let Some(members) = index.get_mut(&key) {
        members.remove(member);
        if members.is_empty() {
            index.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone)]
    struct Fake {
        selectors: Vec<SelectorId>,
        entries: usize,
    }

    impl Indexed for Fake {
        fn selectors(&self) -> Vec<SelectorId> {
            self.selectors.clone()
        }
        fn entries(&self) -> usize {
            self.entries
        }
    }

    fn key(identity: u32) -> StateKey {
        (identity, Vec::new())
    }

    fn fake(selectors: &[SelectorId], entries: usize) -> Fake {
        Fake {
            selectors: selectors.to_vec(),
            entries,
        }
    }

    #[test]
    fn the_index_follows_inserts_replacements_removals_and_edits() {
        let mut states = States::default();
        states.insert(key(1), fake(&[0, 1], 3));
        states.insert(key(2), fake(&[1, 2, 2], 4));
        states.insert(key(3), fake(&[], 5));
        assert_eq!(states.reached_by(&[1]), vec![key(1), key(2)]);
        assert_eq!(states.reached_by(&[2, 0]), vec![key(1), key(2)]);
        assert_eq!(states.entries(), 12);
        // Replaced: its old selectors no longer reach it.
        assert!(states.insert(key(1), fake(&[2], 1)).is_some());
        assert_eq!(states.reached_by(&[0]), Vec::<StateKey>::new());
        assert_eq!(states.reached_by(&[2]), vec![key(1), key(2)]);
        assert_eq!(states.entries(), 10);
        // Edited in place: the total follows the state.
        if let Some(mut record) = states.get_mut(&key(2)) {
            record.entries = 40;
        }
        assert_eq!(states.entries(), 46);
        assert!(states.remove(&key(2)).is_some());
        assert_eq!(states.reached_by(&[1, 2]), vec![key(1)]);
        assert_eq!(states.entries(), 6);
        assert!(states.remove(&key(2)).is_none());
        assert_eq!(states.len(), 2);
        states.debug_check();
    }

    #[test]
    fn a_taken_record_inserted_whole_leaves_its_old_selectors() {
        let mut states = States::default();
        states.insert(key(1), fake(&[0, 1, 2], 3));
        states.insert(key(2), fake(&[2], 1));
        let taken = states.take(&key(1));
        assert_eq!(taken.map(|r| r.entries), Some(3));
        // Taken: not reached, not counted.
        assert_eq!(states.reached_by(&[0, 1, 2]), vec![key(2)]);
        assert_eq!(states.entries(), 1);
        assert!(states.insert(key(1), fake(&[1, 3], 5)).is_none());
        assert_eq!(states.reached_by(&[0]), Vec::<StateKey>::new());
        assert_eq!(states.reached_by(&[1]), vec![key(1)]);
        assert_eq!(states.reached_by(&[2]), vec![key(2)]);
        assert_eq!(states.reached_by(&[3]), vec![key(1)]);
        assert_eq!(states.entries(), 6);
        states.debug_check();
        // Taken, then removed for good.
        assert!(states.take(&key(2)).is_some());
        assert!(states.remove(&key(2)).is_none());
        assert_eq!(states.reached_by(&[2]), Vec::<StateKey>::new());
        states.debug_check();
    }

    #[test]
    fn a_taken_record_put_back_moves_only_the_selectors_it_is_told() {
        let mut states = States::default();
        states.insert(key(1), fake(&[0, 1, 2], 3));
        states.insert(key(2), fake(&[2], 1));
        assert!(states.take(&key(1)).is_some());
        // 0 gone, 3 came: 1 and 2 stay indexed as they were.
        states.put_back(key(1), fake(&[1, 2, 3], 4), (&[0], &[3]));
        assert_eq!(states.reached_by(&[0]), Vec::<StateKey>::new());
        assert_eq!(states.reached_by(&[1]), vec![key(1)]);
        assert_eq!(states.reached_by(&[2]), vec![key(1), key(2)]);
        assert_eq!(states.reached_by(&[3]), vec![key(1)]);
        assert_eq!(states.entries(), 5);
        states.debug_check();
        // A key not taken is inserted whole.
        states.put_back(key(3), fake(&[4], 2), (&[], &[]));
        assert_eq!(states.reached_by(&[4]), vec![key(3)]);
        assert_eq!(states.entries(), 7);
        states.debug_check();
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "a state's ops changed through States::get_mut")]
    fn changing_the_selectors_in_place_is_caught() {
        let mut states = States::default();
        states.insert(key(1), fake(&[0], 1));
        if let Some(mut record) = states.get_mut(&key(1)) {
            record.selectors.push(7);
        }
    }
}
