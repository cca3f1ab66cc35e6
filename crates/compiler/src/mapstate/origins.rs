//! The rule-origin ids of one map entry or one selector's policy: a small
//! ordered set.
//!
//! Almost every entry has one origin, a few have two or three (rules that
//! merged on a key). A `BTreeSet<u32>` put each of them in a heap node of
//! its own: a 65,535-rule CIDR policy allocated one per entry and per
//! selector policy, and a live session that moves a rule renumbered them
//! by taking each id out and putting it back (`session::live::Renumber`).
//! This keeps up to four ids inline, sorted and without duplicates, so the
//! common entry allocates nothing and a renumbering is a pass over a few
//! integers in place. It reads like the `BTreeSet` it replaces (the same
//! order, `Debug` as a set), so the map algebra, the findings and every
//! output see the same ids in the same order.

use std::fmt;

use smallvec::SmallVec;

/// Rule-origin ids in ascending order, each once.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origins(SmallVec<[u32; 4]>);

impl Origins {
    /// No origin.
    pub fn new() -> Origins {
        Origins(SmallVec::new())
    }

    /// Adds `id`; false when it was there already.
    pub fn insert(&mut self, id: u32) -> bool {
        match self.0.binary_search(&id) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, id);
                true
            }
        }
    }

    /// Whether `id` is one of them.
    pub fn contains(&self, id: &u32) -> bool {
        self.0.binary_search(id).is_ok()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The smallest.
    pub fn first(&self) -> Option<&u32> {
        self.0.first()
    }

    /// The largest.
    pub fn last(&self) -> Option<&u32> {
        self.0.last()
    }

    /// Removes every id.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The ids in ascending order.
    pub fn iter(&self) -> std::slice::Iter<'_, u32> {
        self.0.iter()
    }

    /// Passes every id through `map`, then restores the order (ids that map
    /// to one id become one).
    pub fn map_ids(&mut self, map: impl Fn(u32) -> u32) {
        let mut sorted = true;
        let mut previous: Option<u32> = None;
        for id in &mut self.0 {
            *id = map(*id);
            sorted &= previous.is_none_or(|p| p < *id);
            previous = Some(*id);
        }
        if !sorted {
            self.0.sort_unstable();
            self.0.dedup();
        }
    }
}

impl fmt::Debug for Origins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.iter()).finish()
    }
}

impl Extend<u32> for Origins {
    fn extend<I: IntoIterator<Item = u32>>(&mut self, ids: I) {
        for id in ids {
            // Ids usually come in ascending order after the ones held.
            if self.0.last().is_none_or(|last| *last < id) {
                self.0.push(id);
            } else {
                self.insert(id);
            }
        }
    }
}

impl FromIterator<u32> for Origins {
    fn from_iter<I: IntoIterator<Item = u32>>(ids: I) -> Origins {
        let mut origins = Origins::new();
        origins.extend(ids);
        origins
    }
}

impl<const N: usize> From<[u32; N]> for Origins {
    fn from(ids: [u32; N]) -> Origins {
        ids.into_iter().collect()
    }
}

impl IntoIterator for Origins {
    type Item = u32;
    type IntoIter = smallvec::IntoIter<[u32; 4]>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Origins {
    type Item = &'a u32;
    type IntoIter = std::slice::Iter<'a, u32>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::Origins;

    proptest! {
        /// Every operation gives what a `BTreeSet<u32>` gives, `Debug`
        /// included (snapshots print entries).
        #[test]
        fn reads_as_a_btreeset(
            first in proptest::collection::vec(0u32..20, 0..8),
            second in proptest::collection::vec(0u32..20, 0..8),
            probe in 0u32..20,
            from in 0u32..20,
        ) {
            let mut set: BTreeSet<u32> = first.iter().copied().collect();
            let mut origins: Origins = first.iter().copied().collect();
            prop_assert_eq!(origins.iter().copied().collect::<Vec<_>>(), set.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(format!("{origins:?}"), format!("{set:?}"));
            prop_assert_eq!(origins.contains(&probe), set.contains(&probe));
            prop_assert_eq!(origins.insert(probe), set.insert(probe));
            origins.extend(second.iter().copied());
            set.extend(second.iter().copied());
            prop_assert_eq!(origins.len(), set.len());
            prop_assert_eq!(origins.first(), set.first());
            prop_assert_eq!(origins.last(), set.last());
            // A removal's renumbering: ids from `from` on lose one, `from`
            // itself goes to u32::MAX.
            let map = |id: u32| match id.cmp(&from) {
                std::cmp::Ordering::Less => id,
                std::cmp::Ordering::Equal => u32::MAX,
                std::cmp::Ordering::Greater => id - 1,
            };
            origins.map_ids(map);
            let set: BTreeSet<u32> = set.iter().map(|id| map(*id)).collect();
            prop_assert_eq!(origins.into_iter().collect::<Vec<_>>(), set.into_iter().collect::<Vec<_>>());
        }
    }
}
