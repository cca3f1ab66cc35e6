//! The session's endpoints by name, over its storage order.
//!
//! A session keeps its inventory's endpoints in *storage order*: an added
//! endpoint is appended and a removed one's place is taken by the last
//! (`Vec::swap_remove`), so no endpoint moves but the last and no index
//! the identity table keeps shifts. Inserting at the sorted place moved
//! every endpoint after it and every member index above it: at 10,257
//! endpoints that was two thirds of an identity add (session 12).
//!
//! What people and the batch compiler see stays in *name order*
//! (namespace, then name: `Inventory::finish`'s), which this index gives:
//! lookups by name, the order of deltas and of `Session::compiled`, and a
//! state's first endpoint.

use std::collections::BTreeMap;

use crate::inventory::Endpoint;

/// An endpoint's place in name order.
type NameKey = (Option<String>, String);

fn key_of(endpoint: &Endpoint) -> NameKey {
    (endpoint.namespace.clone(), endpoint.name.clone())
}

/// Name → storage position of every endpoint of a session.
#[derive(Debug, Clone, Default)]
pub(super) struct EndpointNames {
    by_name: BTreeMap<NameKey, usize>,
    /// Whether the storage order is the name order.
    sorted: bool,
}

impl EndpointNames {
    /// The index of `endpoints` (names are distinct: `Inventory::finish`
    /// refuses repeats).
    pub(super) fn new(endpoints: &[Endpoint]) -> Self {
        let by_name: BTreeMap<NameKey, usize> = endpoints
            .iter()
            .enumerate()
            .map(|(index, e)| (key_of(e), index))
            .collect();
        let sorted = by_name.values().copied().eq(0..endpoints.len());
        Self { by_name, sorted }
    }

    /// The storage position of endpoint `namespace/name`.
    pub(super) fn get(&self, namespace: Option<&str>, name: &str) -> Option<usize> {
        self.by_name
            .get(&(namespace.map(str::to_owned), name.to_owned()))
            .copied()
    }

    /// Storage positions in name order.
    pub(super) fn in_order(&self) -> impl Iterator<Item = usize> + '_ {
        self.by_name.values().copied()
    }

    /// Whether storage order is name order (then the inventory is what
    /// `Inventory::finish` gives, as it is).
    pub(super) fn is_sorted(&self) -> bool {
        self.sorted
    }

    /// Whether an endpoint with a namespace is left when the one at
    /// `except` is not counted: namespaced names sort after the others,
    /// so the last two entries tell.
    pub(super) fn any_namespaced_except(&self, except: usize) -> bool {
        self.by_name
            .iter()
            .rev()
            .take(2)
            .any(|((namespace, _), index)| namespace.is_some() && *index != except)
    }

    /// `endpoint` was appended at `index` (the storage length before).
    pub(super) fn pushed(&mut self, endpoint: &Endpoint, index: usize) {
        let key = key_of(endpoint);
        let last = self.by_name.last_key_value().is_none_or(|(k, _)| *k < key);
        self.sorted &= last;
        self.by_name.insert(key, index);
    }

    /// `removed` left position `index` and the endpoint `moved` (the last
    /// one, when it was not `removed` itself) took it.
    pub(super) fn swap_removed(
        &mut self,
        removed: &Endpoint,
        index: usize,
        moved: Option<&Endpoint>,
    ) {
        self.by_name.remove(&key_of(removed));
        if let Some(moved) = moved
            && let Some(slot) = self.by_name.get_mut(&key_of(moved))
        {
            *slot = index;
            // It had the last name when the order was sorted; it still
            // does, and now sits last, only when it moved one place.
            self.sorted &= index + 1 == self.by_name.len();
        }
    }

    /// Debug builds: the index agrees with `endpoints`.
    pub(super) fn debug_check(&self, endpoints: &[Endpoint]) {
        if cfg!(debug_assertions) {
            let fresh = Self::new(endpoints);
            debug_assert_eq!(self.by_name, fresh.by_name, "the endpoint names");
            debug_assert!(
                !self.sorted || fresh.sorted,
                "the storage order is not the name order"
            );
        }
    }
}
