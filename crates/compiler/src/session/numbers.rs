//! The identity number an added endpoint's labels get, without a pass
//! over every identity.
//!
//! `IdentityTable::endpoint_number` compares the labels with every
//! identity's and counts the endpoint numbers up to the first gap: with
//! 10,257 endpoints (one identity each) that was ~390,000 of an identity
//! add's ~900,000 instructions and a third of its cache misses (callgrind,
//! session 12). A session keeps the identities by their labels and a floor
//! below which every endpoint number is taken, and answers the same
//! (debug builds compare every answer with the table's).

use std::collections::HashMap;

use crate::allocation::{FIRST_ALLOCATED, IdentityKind, IdentityTable, LAST_ALLOCATED};
use crate::labels::LabelSet;

/// Identity numbers by labels (see the module docs).
#[derive(Debug, Clone, Default)]
pub(super) struct IdentityNumbers {
    /// The identities with these labels (ascending; one, unless a cluster
    /// dump pinned two numbers to one label set), each with whether it is
    /// an endpoint identity (a reserved one's labels get no number). The
    /// first answers, as in the table's search in id order.
    by_labels: HashMap<LabelSet, Vec<(u32, bool)>>,
    /// Every endpoint identity number from `FIRST_ALLOCATED` up to (not
    /// including) this one is taken. Only a lower bound: a removal below
    /// it lowers it, a search raises it.
    floor: u32,
}

impl IdentityNumbers {
    pub(super) fn new(table: &IdentityTable) -> Self {
        let mut by_labels: HashMap<LabelSet, Vec<(u32, bool)>> = HashMap::new();
        // `identities` is in id order: each list comes ascending.
        for info in &table.identities {
            let endpoint = match info.kind {
                IdentityKind::Endpoints { .. } => true,
                IdentityKind::Reserved { .. } | IdentityKind::ReservedEndpoints { .. } => false,
                IdentityKind::Cidr { .. } | IdentityKind::Node { .. } => continue,
            };
            by_labels
                .entry(info.labels.clone())
                .or_default()
                .push((info.id, endpoint));
        }
        // The floor settled at the first free number now: the session's
        // build pays the pass over the taken numbers, not its first add.
        let mut floor = FIRST_ALLOCATED;
        while floor <= LAST_ALLOCATED && taken(table, floor) {
            floor += 1;
        }
        Self { by_labels, floor }
    }

    /// What `table.endpoint_number(labels)` answers: the endpoint
    /// identity with these labels (`false`: it exists), else the lowest
    /// free endpoint number (`true`: new); `None` for a reserved
    /// identity's labels or when the range is full.
    pub(super) fn endpoint_number(
        &mut self,
        table: &IdentityTable,
        labels: &LabelSet,
    ) -> Option<(u32, bool)> {
        let answer = match self.by_labels.get(labels).and_then(|ids| ids.first()) {
            Some(&(id, endpoint)) => endpoint.then_some((id, false)),
            None => {
                let mut n = self.floor.max(FIRST_ALLOCATED);
                while n <= LAST_ALLOCATED && taken(table, n) {
                    n += 1;
                }
                self.floor = n;
                (n <= LAST_ALLOCATED).then_some((n, true))
            }
        };
        debug_assert_eq!(
            answer,
            table.endpoint_number(labels),
            "the kept identity numbers"
        );
        answer
    }

    /// A new endpoint identity `id` with `labels` is in the table.
    pub(super) fn added(&mut self, labels: &LabelSet, id: u32) {
        let ids = self.by_labels.entry(labels.clone()).or_default();
        let at = ids.partition_point(|(other, _)| *other < id);
        ids.insert(at, (id, true));
    }

    /// Endpoint identity `id` with `labels` left the table.
    pub(super) fn removed(&mut self, labels: &LabelSet, id: u32) {
        if let Some(ids) = self.by_labels.get_mut(labels) {
            ids.retain(|entry| *entry != (id, true));
            if ids.is_empty() {
                self.by_labels.remove(labels);
            }
        }
        if (FIRST_ALLOCATED..=LAST_ALLOCATED).contains(&id) && id < self.floor {
            self.floor = id;
        }
    }
}

/// Whether endpoint number `n` is an endpoint identity's (the numbers the
/// table's search counts as taken).
fn taken(table: &IdentityTable, n: u32) -> bool {
    matches!(
        table.get(n).map(|info| &info.kind),
        Some(IdentityKind::Endpoints { .. })
    )
}
