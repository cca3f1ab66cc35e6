//! Capacity: how many policy-map entries an endpoint needs, and from which
//! rules, without building a state larger than the map.
//!
//! A state over the capacity cannot be enforced (the kernel refuses entries
//! past `bpf-policy-map-max`), so porin never builds or emits it; but the
//! linter must still say how far over it is and which rules put it there
//! (PR001). [`distill_capped`] counts such a state exactly, one group of
//! peer identities at a time: keys of identity X interact in the insertion
//! algebra only with keys of X and of identity 0, and identity-0 keys only
//! with each other ([`Resolver::map_state_where`]), so the state restricted
//! to {0} ∪ G is the full state's keys of those identities. The groups are
//! runs of ascending identities whose insertion bound stays within the
//! capacity, so no partial state holds much more than the map would; the
//! work is that of one full distillation plus one scan of the filters per
//! group.
//!
//! What the count means for porin's datapath (`porin-ebpf`'s `DATAPATH.md`
//! §2.0): each entry is stored once, either in the slot's exact-key hash
//! (prefix length 64) or in its prefix trie, and both maps are sized to the
//! capacity. The census counts every entry once, so a state within the
//! capacity fits both maps; the bound stays Cilium's (one map of
//! `bpf-policy-map-max` entries), so what porin accepts, Cilium can load.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use porin_model::diagnostic::Diagnostic;

use crate::identity::Identity;
use crate::inventory::Endpoint;
use crate::limits::filter_blocks;
use crate::mapstate::{Direction, MapState};
use crate::resolve::policy::{L4Policy, Resolver, SelectorCache};

/// The entries of one origin (rule) in a state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginCensus {
    /// Entries carrying the origin.
    pub entries: usize,
    /// Distinct peer identities of those entries. A count, not a set: a
    /// census outlives its state (PR001 reports it after every unit is
    /// distilled), and a set of every selected identity per origin per
    /// over-capacity state is what grew a 30,000-identity lint past 1 GiB.
    pub identities: usize,
    /// Distinct (port, prefix length) port prefixes.
    pub port_prefixes: BTreeSet<(u16, u8)>,
    /// Distinct protocols.
    pub protos: BTreeSet<u8>,
}

/// The entry count of a state and each origin's share, exact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    /// Entries of the state.
    pub entries: u64,
    /// Per origin id.
    pub origins: BTreeMap<u32, OriginCensus>,
}

impl Census {
    /// The census of a built state.
    pub fn of(state: &MapState) -> Census {
        let mut census = Census::default();
        census.add(state, |_| true);
        census
    }

    /// Adds the keys of `state` whose peer identity satisfies `keep`.
    ///
    /// The identities counted by one call must be disjoint from those of
    /// every other call on this census ([`distill_capped`]'s parts are: the
    /// identity-0 part, then disjoint runs of identities), so each origin's
    /// distinct identities are the sum of each call's distinct identities,
    /// and only one part's identities are held at a time.
    fn add(&mut self, state: &MapState, keep: impl Fn(u32) -> bool) {
        let mut seen: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (key, entry) in state.iter() {
            let identity = key.identity().get();
            if !keep(identity) {
                continue;
            }
            self.entries += 1;
            for origin in &entry.origins {
                let c = self.origins.entry(*origin).or_default();
                c.entries += 1;
                c.port_prefixes.insert((key.port(), key.port_prefix_len()));
                c.protos.insert(key.proto());
                let ids = seen.entry(*origin).or_default();
                // Keys are in (direction, identity, ...) order: an origin's
                // repeats of one identity are mostly adjacent.
                if ids.last() != Some(&identity) {
                    ids.push(identity);
                }
            }
        }
        for (origin, mut ids) in seen {
            ids.sort_unstable();
            ids.dedup();
            if let Some(c) = self.origins.get_mut(&origin) {
                c.identities += ids.len();
            }
        }
    }

    /// The origins by entries, largest first (ties by origin id).
    pub fn contributions(&self) -> Vec<(u32, &OriginCensus)> {
        let mut list: Vec<(u32, &OriginCensus)> =
            self.origins.iter().map(|(id, c)| (*id, c)).collect();
        list.sort_by(|a, b| b.1.entries.cmp(&a.1.entries).then(a.0.cmp(&b.0)));
        list
    }
}

/// A unit's state when it fits the capacity, else its census.
#[derive(Debug)]
pub enum Capped {
    /// The state (at most the capacity) and its findings.
    Fits(MapState, Vec<Diagnostic>),
    /// Over the capacity: the exact census, and the findings of the
    /// distillation (named ports, merge conflicts).
    Over(Census, Vec<Diagnostic>),
}

impl Capped {
    pub(crate) fn into_outcome(self, groups: usize) -> UnitOutcome {
        match self {
            Capped::Fits(state, diagnostics) => {
                UnitOutcome::State(std::sync::Arc::new(state), vec![diagnostics; groups.max(1)])
            }
            Capped::Over(census, _) => UnitOutcome::Over(census),
        }
    }
}

/// Per peer identity, an upper bound of the keys inserted for it
/// ([`crate::limits::insertion_bound`] split by identity), with the host's
/// allow.
fn identity_bounds(
    policy: &L4Policy,
    cache: &SelectorCache,
    host_allow: bool,
) -> BTreeMap<u32, u64> {
    let mut bounds: BTreeMap<u32, u64> = BTreeMap::new();
    for direction in Direction::ALL {
        let dir = policy.direction(direction);
        if !dir.enforced {
            *bounds.entry(0).or_default() += 1;
            continue;
        }
        for (filter, per_selector) in &dir.filters {
            let blocks = filter_blocks(filter);
            for selector in per_selector.keys() {
                for id in cache.selection(*selector) {
                    let bound = bounds.entry(*id).or_default();
                    *bound = bound.saturating_add(blocks);
                }
            }
        }
    }
    if host_allow {
        *bounds.entry(Identity::HOST.get()).or_default() += 1;
    }
    bounds
}

/// The state of `endpoint` under `policy` if it has at most `cap` entries;
/// otherwise its exact [`Census`], counted in groups of peer identities so
/// that no partial state holds more than about `cap` keys besides the
/// identity-0 ones (see the module docs). The work is bounded by the
/// caller's insertion limit ([`crate::limits::CompileLimits::check_l4_policy`]).
pub fn distill_capped(
    resolver: &Resolver<'_>,
    endpoint: &Endpoint,
    policy: &L4Policy,
    describe: &dyn Fn(u32) -> String,
    cap: usize,
) -> Capped {
    let bounds = identity_bounds(policy, &resolver.cache, resolver.allows_localhost(endpoint));
    let cap_wide = u64::try_from(cap).unwrap_or(u64::MAX);
    let total = bounds.values().fold(0_u64, |a, b| a.saturating_add(*b));
    if total <= cap_wide {
        let (state, diagnostics) = resolver.map_state(endpoint, policy, describe);
        return Capped::Fits(state, diagnostics);
    }
    let mut census = Census::default();
    let (zero, diagnostics) = resolver.map_state_where(endpoint, policy, describe, &|id| id == 0);
    census.add(&zero, |_| true);
    drop(zero);
    // Runs of ascending identities whose bound stays within the capacity
    // (at least one identity each).
    let mut groups: Vec<(u32, u32)> = Vec::new();
    let mut current: Option<(u32, u32, u64)> = None;
    for (&id, &bound) in bounds.iter().filter(|(id, _)| **id != 0) {
        current = match current {
            Some((lo, _, sum)) if sum.saturating_add(bound) <= cap_wide => {
                Some((lo, id, sum + bound))
            }
            Some((lo, hi, _)) => {
                groups.push((lo, hi));
                Some((id, id, bound))
            }
            None => Some((id, id, bound)),
        };
    }
    if let Some((lo, hi, _)) = current {
        groups.push((lo, hi));
    }
    for (lo, hi) in groups {
        let (part, _) = resolver.map_state_where(endpoint, policy, describe, &|id| {
            id == 0 || (lo..=hi).contains(&id)
        });
        census.add(&part, |id| id != 0);
    }
    if census.entries <= cap_wide {
        // Merges and denies kept it within the map after all.
        let (state, diagnostics) = resolver.map_state(endpoint, policy, describe);
        return Capped::Fits(state, diagnostics);
    }
    Capped::Over(census, diagnostics)
}

/// What distilling one unit gave.
#[derive(Debug)]
pub enum UnitOutcome {
    /// The state (at most `max_entries_per_endpoint` entries) and the
    /// findings of each identity group.
    State(Arc<MapState>, Vec<Vec<Diagnostic>>),
    /// The state needs more entries than `max_entries_per_endpoint`: it
    /// was counted one group of peer identities at a time, never built
    /// whole.
    Over(Census),
}
