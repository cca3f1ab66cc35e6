//! Writing policy entries into kernel maps without ever leaving a half-applied policy in force.
//!
//! Two ways to change the enforced policy, both driven through [`super::Datapath`]:
//!
//! - the **A/B replacement** (DATAPATH.md §2.3): fill the inactive slot, then flip
//!   `porin_config`. A failure while filling leaves the flip undone, so the programs keep
//!   reading the old slot ([`super::KernelError::PolicyWrite`]).
//! - the **in-place difference** ([`apply_changes`]): the hole-free write list of
//!   `porin_compiler::diff::policy_diff` applied to the live map. A failure part-way is undone
//!   write by write in reverse order from an undo log of previous values, so the map ends
//!   exactly as it started ([`super::KernelError::DiffRolledBack`]).
//!
//! Every map write of both paths goes through a [`MapWriter`]. Production code uses
//! [`DirectWrites`] (plain `BPF_MAP_UPDATE_ELEM` / `BPF_MAP_DELETE_ELEM`); the trait is the
//! seam through which the fault-injection tests make write *k* fail, without any test-only
//! branch in the production path.

use std::collections::BTreeMap;

use super::error::KernelError;
use super::map::Map;
use porin_compiler::diff::MapChange;
use porin_ebpf::abi::{PolicyEntry, PolicyKey, PolicyPair};

/// Performs the individual map writes of a policy apply.
pub trait MapWriter {
    /// Writes `key -> value` into `map` (create or replace).
    fn update(&mut self, map: &Map, key: &[u8], value: &[u8]) -> Result<(), KernelError>;
    /// Deletes `key` from `map`; `false` when it was absent.
    fn delete(&mut self, map: &Map, key: &[u8]) -> Result<bool, KernelError>;
}

/// The production [`MapWriter`]: each write is one `bpf(2)` call on the map.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectWrites;

impl MapWriter for DirectWrites {
    fn update(&mut self, map: &Map, key: &[u8], value: &[u8]) -> Result<(), KernelError> {
        map.update(key, value)
    }

    fn delete(&mut self, map: &Map, key: &[u8]) -> Result<bool, KernelError> {
        map.delete(key)
    }
}

/// The two maps of one policy slot (DATAPATH.md §2.2): exact keys (prefix length 64) in the
/// hash, every other key in the LPM trie. The programs read the hash first, so the pair
/// answers every lookup as one LPM trie holding both would.
#[derive(Debug, Clone, Copy)]
pub struct SlotMaps<'m> {
    /// The exact-key hash (`porin_polhash_a` / `_b`).
    pub exact: &'m Map,
    /// The prefix trie (`porin_policy_a` / `_b`).
    pub prefix: &'m Map,
}

impl<'m> SlotMaps<'m> {
    /// The map that holds `key`.
    pub fn for_key(&self, key: &PolicyKey) -> &'m Map {
        if key.is_exact() {
            self.exact
        } else {
            self.prefix
        }
    }
}

/// Writes `entries` into the slot's maps in order (each into the map that holds its key); the
/// first failure stops the fill and is reported with the map, the entry's index and the entry
/// count. The caller must not make the slot enforced after an error: its contents are then a
/// prefix of `entries` on top of what it held.
pub fn fill_map<W: MapWriter>(
    maps: SlotMaps<'_>,
    entries: &[PolicyPair],
    writer: &mut W,
) -> Result<(), KernelError> {
    for (index, (key, value)) in entries.iter().enumerate() {
        let map = maps.for_key(key);
        writer
            .update(map, &key.to_bytes(), &value.to_bytes())
            .map_err(|source| KernelError::PolicyWrite {
                map: map.name().to_owned(),
                index,
                count: entries.len(),
                source: Box::new(source),
            })?;
    }
    Ok(())
}

/// Applies a policy difference to the live slot `maps` write by write, in the given (hole-free)
/// order, each write to the map that holds its key. The pair answers lookups as one trie
/// holding both would (see [`SlotMaps`]), so every intermediate state is the one the single
/// trie would go through, and the order stays hole-free. When write `k` fails, writes `k-1, ..., 0` are undone in that order from an undo log
/// of each key's previous value (restored with an update, or deleted when the key was absent),
/// and [`KernelError::DiffRolledBack`] reports the failure: the map then holds exactly its
/// previous entries. Each intermediate state of the rollback is one the forward pass already
/// went through, so a rollback is as hole-free as the difference itself.
///
/// Why the rollback cannot run out of map space: let `S_j` be the map after `j` forward writes
/// (each kernel map write is atomic: a failed write leaves the map unchanged, so the map is
/// `S_k` when write `k` fails). Undoing write `j` turns `S_{j+1}` back into `S_j`, and it is
/// the inverse of a write that the kernel accepted on `S_j`:
/// - write `j` added a key: the undo is a delete, which frees space;
/// - write `j` replaced a value: the undo replaces it back on a map with the same entry count
///   as the one on which the forward replace succeeded (this holds even on kernels before 6.14,
///   where a full LPM trie refused in-place replacement too: the forward replace succeeded, so
///   the trie was not full at that count);
/// - write `j` deleted a key: the undo re-inserts it into `S_{j+1}`, which has one entry fewer
///   than `S_j`, a state the map already held, so the entry count after the re-insert is one
///   the map had room for.
///
/// So undo writes never need more entries than the map held at some point of the forward pass.
/// What this argument does not cover, and what is therefore reported as
/// [`KernelError::RollbackFailed`] rather than assumed away: another writer changing the same
/// map concurrently (porin's agents have one writer per map), and a kernel memory allocation
/// failure (`ENOMEM`; the policy maps are `BPF_F_NO_PREALLOC`, so each insert allocates).
pub fn apply_changes<W: MapWriter>(
    maps: SlotMaps<'_>,
    changes: &[MapChange],
    writer: &mut W,
) -> Result<(), KernelError> {
    let count = changes.len();
    // The previous value of a key cannot be read with one lookup: on an LPM trie,
    // `BPF_MAP_LOOKUP_ELEM` of an absent key returns the value of the longest *shorter* prefix
    // that covers it (e.g. the L3 entry of the same identity), not "absent". So the undo log is
    // taken from a snapshot of the exact keys (`BPF_MAP_GET_NEXT_KEY` lists stored keys only),
    // kept up to date as writes succeed.
    // One snapshot per map: a key is looked for only in the map that holds it.
    let mut exact_shadow = snapshot(maps.exact)?;
    let mut prefix_shadow = snapshot(maps.prefix)?;
    // undo[j] = (key, value before write j): None when the key was absent.
    let mut undo: Vec<(PolicyKey, Option<PolicyEntry>)> = Vec::with_capacity(count);
    for (index, change) in changes.iter().enumerate() {
        let key = PolicyKey::from_key(&change.key);
        let map = maps.for_key(&key);
        let shadow = if key.is_exact() {
            &mut exact_shadow
        } else {
            &mut prefix_shadow
        };
        let value = change
            .entry
            .as_ref()
            .map(|entry| PolicyEntry::from_entry(&change.key, entry));
        let written = match &value {
            Some(value) => writer.update(map, &key.to_bytes(), &value.to_bytes()),
            None => writer.delete(map, &key.to_bytes()).map(drop),
        };
        if let Err(source) = written {
            return Err(roll_back(maps, map, undo, writer, index, count, source));
        }
        let previous = match value {
            Some(value) => shadow.insert(key, value),
            None => shadow.remove(&key),
        };
        undo.push((key, previous));
    }
    Ok(())
}

/// Every stored (key, value) of a policy map, by exact key. Read as raw
/// structs, not decoded: whatever the map held is what a rollback restores.
fn snapshot(map: &Map) -> Result<BTreeMap<PolicyKey, PolicyEntry>, KernelError> {
    let wrong_size = |what: &'static str, given: usize, expected: usize| KernelError::WrongSize {
        what,
        map: map.name().to_owned(),
        given,
        expected,
    };
    let mut entries = BTreeMap::new();
    for key in map.keys()? {
        let exact = PolicyKey::from_bytes(&key)
            .map_err(|_| wrong_size("key", key.len(), PolicyKey::SIZE))?;
        // A stored key's own entry is its longest match, so this lookup is exact.
        if let Some(value) = map.lookup(&key)? {
            let value = PolicyEntry::from_bytes(&value)
                .map_err(|_| wrong_size("value", value.len(), PolicyEntry::SIZE))?;
            entries.insert(exact, value);
        }
    }
    Ok(entries)
}

/// Undoes the logged writes in reverse order and builds the error that reports write `index`
/// (to `map`).
fn roll_back<W: MapWriter>(
    maps: SlotMaps<'_>,
    map: &Map,
    undo: Vec<(PolicyKey, Option<PolicyEntry>)>,
    writer: &mut W,
    index: usize,
    count: usize,
    source: KernelError,
) -> KernelError {
    for (undo_index, (key, previous)) in undo.into_iter().enumerate().rev() {
        let target = maps.for_key(&key);
        let restored = match &previous {
            Some(value) => writer.update(target, &key.to_bytes(), &value.to_bytes()),
            None => writer.delete(target, &key.to_bytes()).map(drop),
        };
        if let Err(rollback) = restored {
            return KernelError::RollbackFailed {
                map: map.name().to_owned(),
                index,
                count,
                source: Box::new(source),
                undo_index,
                rollback: Box::new(rollback),
            };
        }
    }
    KernelError::DiffRolledBack {
        map: map.name().to_owned(),
        index,
        count,
        source: Box::new(source),
    }
}
