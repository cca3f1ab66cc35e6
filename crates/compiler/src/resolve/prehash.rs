//! Hash maps over many keys whose hashes are computed beforehand, in
//! parallel: the calling thread then only probes and compares.
//!
//! Building the resolver tells apart 65,535 peer selectors and looks up
//! 65,535 rule subjects (65,535 CIDR rules); hashing them was most of that
//! work, on the calling thread while the other cores waited.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

use rayon::prelude::*;

/// A key and its hash (from [`hashes`]): the map's hasher passes the hash
/// on, and keys of equal hashes are told apart by `==`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prehashed<K> {
    hash: u64,
    key: K,
}

impl<K: Copy> Prehashed<K> {
    /// The key.
    pub(crate) fn key(&self) -> K {
        self.key
    }
}

impl<K: PartialEq> PartialEq for Prehashed<K> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl<K: Eq> Eq for Prehashed<K> {}

impl<K> Hash for Prehashed<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// The hasher of a map of [`Prehashed`] keys: the key's hash itself.
#[derive(Debug, Default)]
pub(crate) struct PassHasher(u64);

impl Hasher for PassHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is called (`Prehashed::hash`); anything else is
        // still mixed in rather than dropped.
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map of [`Prehashed`] keys.
pub(crate) type PrehashedMap<K, V> = HashMap<Prehashed<K>, V, BuildHasherDefault<PassHasher>>;

/// From how many keys [`hashes`] runs on rayon's threads.
const PARALLEL_HASHES: usize = 1024;

/// `keys` with their hashes under one keyed [`foldhash`] state (a
/// per-process and per-call seed: colliding keys cannot be prepared in a
/// policy file), computed in parallel when many.
pub(crate) fn hashes<K: Hash + Copy + Send + Sync>(keys: &[K]) -> Vec<Prehashed<K>> {
    let state = foldhash::fast::RandomState::default();
    let hashed = |key: &K| Prehashed {
        hash: state.hash_one(key),
        key: *key,
    };
    if keys.len() >= PARALLEL_HASHES {
        keys.par_iter().map(hashed).collect()
    } else {
        keys.iter().map(hashed).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal keys are one entry, distinct keys distinct entries, whatever
    /// their hashes (a forced collision included).
    #[test]
    fn keys_are_told_apart_by_value() {
        let words = ["a", "b", "a", "c", "b"];
        let mut map: PrehashedMap<&str, usize> = PrehashedMap::default();
        for (at, key) in hashes(&words).into_iter().enumerate() {
            map.entry(key).or_insert(at);
        }
        let mut firsts: Vec<usize> = map.values().copied().collect();
        firsts.sort_unstable();
        assert_eq!(firsts, [0, 1, 3]);
        let colliding = [
            Prehashed { hash: 7, key: "x" },
            Prehashed { hash: 7, key: "y" },
        ];
        let map: PrehashedMap<&str, ()> = colliding.into_iter().map(|k| (k, ())).collect();
        assert_eq!(map.len(), 2);
    }
}
