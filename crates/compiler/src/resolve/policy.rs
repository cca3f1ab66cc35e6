//! Rules → L4 filters → map state, per identity and endpoint.
//!
//! Mirrors Cilium's `Repository.resolvePolicyLocked` (`pkg/policy/repository.go`),
//! `L4PolicyMap.mergeL4Filter` / `L4Filter.mergePortProto` (`pkg/policy/rule.go`,
//! `pkg/policy/l4.go`) and `selectorPolicy.DistillPolicy` / `L4Filter.toMapState`
//! (`pkg/policy/resolve.go`, `pkg/policy/l4.go`), docs/semantics.md §3.3 and §4.1.
//!
//! Cost model: subject selectors are matched once per *identity*, peer
//! selectors once per selector against all identities (a selector cache,
//! like Cilium's `SelectorCache`); endpoints that share an identity share
//! its L4 policy, and share the distilled map state too unless ingress
//! named ports differ.

use std::collections::{BTreeMap, BTreeSet};

use porin_model::diagnostic::Diagnostic;
use rayon::prelude::*;

use super::lower::{ORIGIN_ALLOW_ANY_EGRESS, ORIGIN_ALLOW_ANY_INGRESS};
use super::prehash::{self, PrehashedMap};
use super::rule::{AuthMode, L7, L7Parser, PolicyRule, PortRef, proto};
use super::selection::SelectionIndex;
use crate::allocation::{IdentityTable, endpoint_identity_labels};
use crate::codes;
use crate::identity::Identity;
use crate::inventory::{AllowLocalhost, Endpoint, Inventory, NamedPort};
use crate::labels::{LabelSet, POD_NAMESPACE_LABEL, SOURCE_K8S, SOURCE_RESERVED};
use crate::mapstate::{
    AuthRequirement, AuthType, Direction, Entry, Key, ListenerPriority, MapState, Origins,
    PolicyFeatures, Priority,
};
use crate::ports::port_range_to_masked_ports;
use crate::selector::Selector;

/// First proxy port porin assigns to an L7 redirect. Ports are numbered per
/// endpoint in sorted order of (direction, parser, protocol, port, end port)
/// of its redirecting filters: 10000, 10001, ... (Cilium allocates proxy
/// ports at runtime; porin only needs them stable and distinct).
pub const PROXY_PORT_BASE: u16 = 10_000;

/// Key of the host's reserved label (`reserved:host`).
const HOST_LABEL_KEY: &str = "host";

/// Interned selector id.
pub type SelectorId = usize;

/// A filter key: port (or name), range end and protocol (0 = L3-only).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FilterKey {
    /// Port or named port.
    pub port: PortRef,
    /// Inclusive range end (0 = single port).
    pub end_port: u16,
    /// Protocol number; 0 only for the L3-only filter.
    pub proto: u8,
}

/// What one selector gets on one filter (`PerSelectorPolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorPolicy {
    /// Deny.
    pub deny: bool,
    /// Merged L7 side.
    pub l7: L7,
    /// Merged authentication.
    pub auth: Option<AuthMode>,
    /// Log cookie (smallest non-zero of the merged rules).
    pub cookie: u32,
    /// Contributing origins.
    pub origins: Origins,
    /// A merge conflict Cilium refuses (`cannot merge conflicting ...`);
    /// porin then emits nothing for this selector (fail closed).
    pub conflict: Option<MergeConflict>,
}

/// Two rules on the same port and peer that Cilium refuses to merge
/// (`mergePortProto`: "cannot merge conflicting ...").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeConflict {
    /// Two L7 parsers neither of which is promoted to the other.
    #[error("cannot merge conflicting L7 parsers ({first}/{second})")]
    Parsers {
        /// The first parser's name.
        first: String,
        /// The second parser's name.
        second: String,
    },
    /// Two CiliumEnvoyConfig listeners of the same priority.
    #[error(
        "cannot merge conflicting CiliumEnvoyConfig Listeners ({first}/{second}) with the same priority ({priority})"
    )]
    Listeners {
        /// The first listener.
        first: String,
        /// The second listener.
        second: String,
        /// Their priority.
        priority: u8,
    },
    /// Two authentication modes.
    #[error("cannot merge conflicting authentication types ({first:?}/{second:?})")]
    Auth {
        /// The first mode.
        first: AuthMode,
        /// The second mode.
        second: AuthMode,
    },
}

/// The filters of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirectionPolicy {
    /// Whether the direction is enforced (some rule selects the subject).
    pub enforced: bool,
    /// Filters.
    pub filters: BTreeMap<FilterKey, BTreeMap<SelectorId, SelectorPolicy>>,
}

impl DirectionPolicy {
    /// Cilium's per-direction `policyFeatures`.
    pub fn features(&self) -> PolicyFeatures {
        let mut bits = PolicyFeatures::NONE;
        for per_selector in self.filters.values() {
            for policy in per_selector.values() {
                if policy.deny {
                    bits |= PolicyFeatures::DENY;
                }
                if policy.l7.parser != L7Parser::None {
                    bits |= PolicyFeatures::REDIRECT;
                }
                if policy.auth.is_some() {
                    bits |= PolicyFeatures::AUTH;
                }
            }
        }
        bits
    }
}

/// The resolved L4 policy of one subject identity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct L4Policy {
    /// Ingress.
    pub ingress: DirectionPolicy,
    /// Egress.
    pub egress: DirectionPolicy,
}

impl L4Policy {
    /// The policy of a direction.
    pub fn direction(&self, direction: Direction) -> &DirectionPolicy {
        match direction {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }

    fn direction_mut(&mut self, direction: Direction) -> &mut DirectionPolicy {
        match direction {
            Direction::Ingress => &mut self.ingress,
            Direction::Egress => &mut self.egress,
        }
    }
}

/// New selectors per piece of [`SelectorCache::intern_all`].
const INTERN_PIECE: usize = 4096;

/// From how many new selectors [`SelectorCache::intern_all`] computes
/// their selections on rayon's threads (fewer take less than waking them).
const PARALLEL_INTERN: usize = 1024;

/// Selector interning and the identities each selects.
#[derive(Debug, Default)]
pub struct SelectorCache {
    selectors: Vec<Selector>,
    ids: foldhash::HashMap<Selector, SelectorId>,
    selections: Vec<Vec<u32>>,
    /// Label indexes over the table (built on first use).
    index: Option<SelectionIndex>,
    /// The table changed since [`Self::index`] was built
    /// ([`SelectorCache::forget_index`]): the next interning builds it again
    /// (or [`SelectorCache::select_indexed`], when asked to).
    index_stale: bool,
    /// Identities tested against selectors so far.
    work: u64,
    /// Most identities to test (`max_selector_evaluations`); past it,
    /// selectors select nothing and [`SelectorCache::work`] says so.
    budget: Option<u64>,
}

impl SelectorCache {
    /// Interns a selector, computing its selection against the table.
    pub fn intern(&mut self, selector: &Selector, table: &IdentityTable) -> SelectorId {
        if let Some(id) = self.ids.get(selector) {
            return *id;
        }
        let over = self.budget.is_some_and(|budget| self.work > budget);
        let selection = if selector.is_wildcard() {
            vec![0]
        } else if over {
            // The compilation fails on the budget (`Compilation::run`);
            // testing more identities would only cost time.
            Vec::new()
        } else {
            let index = current_index(&mut self.index, &mut self.index_stale, table);
            index.select_counted(selector, table, &mut self.work)
        };
        let id = self.selectors.len();
        self.selectors.push(selector.clone());
        self.selections.push(selection);
        self.ids.insert(selector.clone(), id);
        id
    }

    /// Interns `selectors` in order, as [`SelectorCache::intern`] one
    /// after the other would: the same ids, selections and work (a
    /// selector first met past the budget selects nothing). The selections
    /// of many new selectors are computed in parallel pieces (65,535 CIDR
    /// peers: a tenth of that compile on one thread), at most one piece
    /// past the budget.
    pub fn intern_all(
        &mut self,
        selectors: &[&Selector],
        table: &IdentityTable,
    ) -> Vec<SelectorId> {
        let first_new = self.selectors.len();
        // New selectors are told apart by reference first, and their owned
        // copies (the map's key and the list's entry) made afterwards, in
        // parallel when many: cloning 65,535 peer selectors twice on the
        // calling thread was a fifth of building the resolver.
        // Their hashes are computed in parallel first.
        let mut fresh: Vec<&Selector> = Vec::new();
        let mut fresh_ids: PrehashedMap<&Selector, SelectorId> = PrehashedMap::default();
        fresh_ids.reserve(selectors.len());
        let ids = prehash::hashes(selectors)
            .into_iter()
            .map(|selector| {
                if let Some(id) = self.ids.get(selector.key()) {
                    return *id;
                }
                *fresh_ids.entry(selector).or_insert_with(|| {
                    fresh.push(selector.key());
                    first_new + fresh.len() - 1
                })
            })
            .collect();
        drop(fresh_ids);
        let parallel = fresh.len() >= PARALLEL_INTERN;
        let copies = |fresh: &[&Selector]| -> Vec<Selector> {
            if parallel {
                fresh.par_iter().map(|s| (*s).clone()).collect()
            } else {
                fresh.iter().map(|s| (*s).clone()).collect()
            }
        };
        self.ids.reserve(fresh.len());
        self.ids.extend(copies(&fresh).into_iter().zip(first_new..));
        self.selectors.append(&mut copies(&fresh));
        self.selections.reserve(fresh.len());
        for piece in fresh.chunks(INTERN_PIECE) {
            let evaluated: Vec<Option<(Vec<u32>, u64)>> =
                if self.over_budget() || piece.iter().all(|s| s.is_wildcard()) {
                    vec![None; piece.len()]
                } else {
                    let index = current_index(&mut self.index, &mut self.index_stale, table);
                    let evaluate = |selector: &&Selector| {
                        (!selector.is_wildcard()).then(|| {
                            let mut work = 0;
                            let selection = index.select_counted(selector, table, &mut work);
                            (selection, work)
                        })
                    };
                    if parallel {
                        piece.par_iter().map(evaluate).collect()
                    } else {
                        piece.iter().map(evaluate).collect()
                    }
                };
            for (selector, evaluated) in piece.iter().zip(evaluated) {
                let over = self.over_budget();
                let selection = match evaluated {
                    _ if selector.is_wildcard() => vec![0],
                    Some((selection, work)) if !over => {
                        self.work = self.work.saturating_add(work);
                        selection
                    }
                    _ => Vec::new(),
                };
                self.selections.push(selection);
            }
        }
        ids
    }

    /// Identities tested against selectors so far (subjects and peers):
    /// when it exceeds the budget, the selections are incomplete and the
    /// compilation must stop.
    pub fn work(&self) -> u64 {
        self.work
    }

    /// Whether the work exceeded the budget.
    pub fn over_budget(&self) -> bool {
        self.budget.is_some_and(|budget| self.work > budget)
    }

    /// Counts from zero under `budget` (a live session, at the start of
    /// each update): a session bounds each update's own tests, as a batch
    /// compile bounds its resolution's, so the count of a long-lived
    /// session's earlier updates never refuses a later one.
    pub fn count_from_now(&mut self, budget: Option<u64>) {
        self.work = 0;
        self.budget = budget;
    }

    /// Adds `tests` identities tested against selectors outside the
    /// cache's own interning (a session testing a new identity against the
    /// selectors that may select it).
    pub fn add_work(&mut self, tests: u64) {
        self.work = self.work.saturating_add(tests);
    }

    /// The id of a selector already interned.
    pub fn id_of(&self, selector: &Selector) -> Option<SelectorId> {
        self.ids.get(selector).copied()
    }

    /// Number of interned selectors (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.selectors.len()
    }

    /// True if no selector is interned.
    pub fn is_empty(&self) -> bool {
        self.selectors.is_empty()
    }

    /// Incremental selection update (a session's, `crate::session`): adds
    /// `identity` to the selection of `id`, keeping it sorted (the table's
    /// order). The caller has checked [`Selector::matches`]; the wildcard's
    /// selection (`[0]`) is never changed.
    pub fn add_to_selection(&mut self, id: SelectorId, identity: u32) {
        if self.selectors[id].is_wildcard() {
            return;
        }
        let selection = &mut self.selections[id];
        if let Err(at) = selection.binary_search(&identity) {
            selection.insert(at, identity);
        }
    }

    /// Removes `identity` from the selection of `id`; true if it was there.
    pub fn remove_from_selection(&mut self, id: SelectorId, identity: u32) -> bool {
        if self.selectors[id].is_wildcard() {
            return false;
        }
        let selection = &mut self.selections[id];
        match selection.binary_search(&identity) {
            Ok(at) => {
                selection.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Marks the label index out of date, so the next
    /// [`SelectorCache::intern`] (or [`SelectorCache::select_indexed`]
    /// asked to rebuild) builds it from the table it is given: a
    /// table edited in place may keep its storage address and length, which
    /// the index cannot tell apart. The old index is dropped then, not
    /// here: freeing it (a map per label key over every identity) was most
    /// of a session's first identity add, ~4× the later ones, and most
    /// adds intern nothing.
    pub fn forget_index(&mut self) {
        self.index_stale = true;
    }

    /// The identities of `table` that `selector` selects, through the
    /// label index, without interning the selector or counting the work;
    /// `None` when no requirement of the selector can use the index
    /// ([`SelectionIndex::select_indexed`]), or when the index is not up
    /// to date with `table` and `rebuild` is false. A session places one
    /// new rule's subject with it, as `Resolver::new` places every rule's;
    /// it asks for the index to be built again only when that reads about
    /// as many identities as its own test would (after an identity change,
    /// the next interning builds it anyway).
    pub fn select_indexed(
        &mut self,
        selector: &Selector,
        table: &IdentityTable,
        rebuild: bool,
    ) -> Option<Vec<u32>> {
        if !SelectionIndex::can_answer(selector) {
            return None;
        }
        let current = !self.index_stale && self.index.as_ref().is_some_and(|i| i.is_for(table));
        if !current && !rebuild {
            return None;
        }
        current_index(&mut self.index, &mut self.index_stale, table).select_indexed(selector, table)
    }

    /// Gives each selector of `moves` (`(old id, new id)`, a permutation
    /// of those ids) its new id, with its selection: a session numbers its
    /// peer selectors again in place when a change makes their first uses
    /// come in another order than their ids (the batch numbers them by
    /// first use, and a filter's ops follow the ids). `false`, the cache
    /// unchanged, when `moves` is not a permutation of ids it holds.
    pub fn relabel(&mut self, moves: &[(SelectorId, SelectorId)]) -> bool {
        let mut olds: Vec<SelectorId> = moves.iter().map(|(old, _)| *old).collect();
        let mut news: Vec<SelectorId> = moves.iter().map(|(_, new)| *new).collect();
        olds.sort_unstable();
        news.sort_unstable();
        if olds != news
            || olds.windows(2).any(|w| w[0] == w[1])
            || olds.last().is_some_and(|id| *id >= self.selectors.len())
        {
            return false;
        }
        let taken: Vec<(SelectorId, Selector, Vec<u32>)> = moves
            .iter()
            .map(|(old, new)| {
                (
                    *new,
                    self.selectors[*old].clone(),
                    std::mem::take(&mut self.selections[*old]),
                )
            })
            .collect();
        for (new, selector, selection) in taken {
            self.ids.insert(selector.clone(), new);
            self.selectors[new] = selector;
            self.selections[new] = selection;
        }
        true
    }

    /// The selector of an id.
    pub fn selector(&self, id: SelectorId) -> &Selector {
        &self.selectors[id]
    }

    /// The identities a selector selects (`[0]` for the wildcard).
    pub fn selection(&self, id: SelectorId) -> &[u32] {
        &self.selections[id]
    }
}

/// The label index of a [`SelectorCache`] over `table`, built again when
/// the table is not the one it was built for or changed since
/// ([`SelectorCache::forget_index`]).
fn current_index<'i>(
    slot: &'i mut Option<SelectionIndex>,
    stale: &mut bool,
    table: &IdentityTable,
) -> &'i SelectionIndex {
    let stale = std::mem::take(stale);
    if stale || !slot.as_ref().is_some_and(|index| index.is_for(table)) {
        *slot = None;
    }
    slot.get_or_insert_with(|| SelectionIndex::new(table))
}

/// Parser promotion of `mergePortProto` (None → TLS → HTTP/Kafka/proxylib;
/// DNS and CRD merge only with themselves or None).
fn merge_parser(a: &L7, b: &L7) -> Result<L7, MergeConflict> {
    let (pa, pb) = (&a.parser, &b.parser);
    let mut merged = if pa == pb {
        a.clone()
    } else if *pa == L7Parser::None {
        b.clone()
    } else if *pb == L7Parser::None {
        a.clone()
    } else if *pa == L7Parser::Tls
        && matches!(pb, L7Parser::Http | L7Parser::Kafka | L7Parser::Proxylib(_))
    {
        b.clone()
    } else if *pb == L7Parser::Tls
        && matches!(pa, L7Parser::Http | L7Parser::Kafka | L7Parser::Proxylib(_))
    {
        a.clone()
    } else {
        return Err(MergeConflict::Parsers {
            first: pa.name().clone(),
            second: pb.name().clone(),
        });
    };
    if a.parser == L7Parser::Crd && b.parser == L7Parser::Crd && a.listener != b.listener {
        // The listener with the higher priority (lower number) wins; a tie
        // is a conflict.
        let (prio_a, prio_b) = (
            a.listener_priority().unwrap_or(126),
            b.listener_priority().unwrap_or(126),
        );
        merged = match prio_a.cmp(&prio_b) {
            std::cmp::Ordering::Less => a.clone(),
            std::cmp::Ordering::Greater => b.clone(),
            std::cmp::Ordering::Equal => {
                return Err(MergeConflict::Listeners {
                    first: a.listener.clone().unwrap_or_default(),
                    second: b.listener.clone().unwrap_or_default(),
                    priority: prio_a,
                });
            }
        };
    }
    merged.rule_count = a.rule_count + b.rule_count;
    Ok(merged)
}

fn merge_selector_policy(existing: &mut SelectorPolicy, new: SelectorPolicy) {
    match (existing.deny, new.deny) {
        (true, false) => {}
        (false, true) => *existing = new,
        (true, true) => existing.origins.extend(new.origins),
        (false, false) => {
            existing.origins.extend(new.origins.iter().copied());
            existing.cookie = match (existing.cookie, new.cookie) {
                (0, c) | (c, 0) => c,
                (a, b) => a.min(b),
            };
            if existing.conflict.is_none() {
                existing.conflict = new.conflict.clone();
            }
            match merge_parser(&existing.l7, &new.l7) {
                Ok(l7) => existing.l7 = l7,
                Err(conflict) => existing.conflict = Some(conflict),
            }
            match (existing.auth, new.auth) {
                (Some(a), Some(b)) if a != b => {
                    existing.conflict = Some(MergeConflict::Auth {
                        first: a,
                        second: b,
                    });
                }
                (None, Some(b)) => existing.auth = Some(b),
                _ => {}
            }
        }
    }
}

/// The owned state of a [`Resolver`] (everything but the rules, table and
/// inventory it borrows), so a long-lived session can keep it between
/// updates and edit it ([`Resolver::into_parts`], [`Resolver::from_parts`]).
#[derive(Debug, Default)]
pub struct ResolverParts {
    /// The selector cache.
    pub cache: SelectorCache,
    /// Rule indices selecting each endpoint identity, in rule order.
    pub rules_by_identity: BTreeMap<u32, Vec<usize>>,
    /// Interned peer selectors of each rule (`None`: selects nothing).
    pub peer_ids: Vec<Option<Vec<SelectorId>>>,
    /// The cluster-wide named-port table.
    pub cluster_ports: BTreeMap<String, BTreeSet<(u16, u8)>>,
    /// Origin of the host allow entries.
    pub localhost_origin: Option<u32>,
    /// The interned wildcard selector.
    pub wildcard: SelectorId,
}

/// Which identities one [`MapOp`] inserts its key for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpPeers {
    /// Every identity the selector selects (identity 0 for the wildcard).
    Selector(SelectorId),
    /// One fixed identity: 0 for the allow-all of a direction that is not
    /// enforced, the host (1) for the host allow.
    Fixed(u32),
}

/// One step of distilling a map state ([`Resolver::map_ops`]): the key
/// `key` (its identity replaced by each identity of `peers`) gets `entry`.
/// A map state is the fold of its ops in order ([`Resolver::apply_ops`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapOp {
    /// The identities.
    pub peers: OpPeers,
    /// The key (identity 0 for [`OpPeers::Selector`], the fixed identity
    /// otherwise).
    pub key: Key,
    /// The entry.
    pub entry: Entry,
    /// The features of the key's direction.
    pub features: PolicyFeatures,
    /// `MapState::upsert` (allow-all of a direction that is not enforced:
    /// Cilium's `allowAllIdentities` bypasses the insertion logic) instead
    /// of `insert_with_features`.
    pub upsert: bool,
    /// The filter the op comes from (`None` for the fixed ones): with the
    /// key it places the op in the fold's order (filters in order, then
    /// masked ports, then selectors), which a session compares.
    pub filter: Option<FilterKey>,
}

/// The subjects of rules: which rules select each endpoint identity.
pub struct Resolver<'a> {
    rules: &'a [PolicyRule],
    inventory: &'a Inventory,
    /// The selector cache (peer selectors).
    pub cache: SelectorCache,
    rules_by_identity: BTreeMap<u32, Vec<usize>>,
    peer_ids: Vec<Option<Vec<SelectorId>>>,
    cluster_ports: BTreeMap<String, BTreeSet<(u16, u8)>>,
    localhost_origin: Option<u32>,
    /// The wildcard selector, interned up front so that resolving an L4
    /// policy only reads the cache ([`Resolver::l4_policy`] takes `&self`
    /// and runs on several threads at once).
    wildcard: SelectorId,
}

impl<'a> Resolver<'a> {
    /// Prepares resolution: matches subject selectors against endpoint
    /// identities (once per distinct subject selector) and interns peers.
    pub fn new(
        rules: &'a [PolicyRule],
        table: &'a IdentityTable,
        inventory: &'a Inventory,
    ) -> Self {
        Self::with_selector_budget(rules, table, inventory, None)
    }

    /// [`Resolver::new`], testing at most `budget` identities against
    /// selectors ([`SelectorCache::over_budget`] tells when it ran out).
    pub fn with_selector_budget(
        rules: &'a [PolicyRule],
        table: &'a IdentityTable,
        inventory: &'a Inventory,
        budget: Option<u64>,
    ) -> Self {
        // The host identity is a subject of host rules only, and host rules
        // select nothing else (`pkg/policy/repository.go`: "NodeSelector can
        // only match nodes, EndpointSelector only pods").
        let endpoint_ids: BTreeSet<u32> = table
            .endpoint_identity
            .iter()
            .copied()
            .filter(|id| *id != Identity::HOST.get())
            .collect();
        let host_id = table
            .endpoint_identity
            .contains(&Identity::HOST.get())
            .then_some(Identity::HOST.get());
        // Subjects through the label index: a subject selector is tested
        // only against the identities that can satisfy its most selective
        // requirement (the same `Selector::matches`, so the same result as
        // testing every endpoint identity), instead of selectors × endpoint
        // identities tests.
        let index = (!rules.is_empty()).then(|| SelectionIndex::new(table));
        let mut work: u64 = 0;
        // Each distinct subject is matched once; the subjects' hashes are
        // computed in parallel first (one per rule).
        let mut subject_matches: PrehashedMap<(bool, &Selector), Vec<u32>> =
            PrehashedMap::default();
        let subjects: Vec<(bool, &Selector)> = rules
            .iter()
            .map(|rule| (rule.host, &rule.subject))
            .collect();
        let mut rules_by_identity: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for ((index_of_rule, rule), subject) in
            rules.iter().enumerate().zip(prehash::hashes(&subjects))
        {
            let selected = subject_matches.entry(subject).or_insert_with(|| {
                if rule.host {
                    work = work.saturating_add(1);
                    return host_id
                        .filter(|id| {
                            table
                                .get(*id)
                                .is_some_and(|info| rule.subject.matches(&info.labels))
                        })
                        .into_iter()
                        .collect();
                }
                let candidates = match &index {
                    Some(index) if !rule.subject.is_wildcard() => {
                        index.select_counted(&rule.subject, table, &mut work)
                    }
                    _ => {
                        work = work
                            .saturating_add(u64::try_from(endpoint_ids.len()).unwrap_or(u64::MAX));
                        endpoint_ids
                            .iter()
                            .copied()
                            .filter(|id| {
                                table
                                    .get(*id)
                                    .is_some_and(|info| rule.subject.matches(&info.labels))
                            })
                            .collect()
                    }
                };
                candidates
                    .into_iter()
                    .filter(|id| endpoint_ids.contains(id))
                    .collect()
            });
            for id in selected.iter() {
                rules_by_identity
                    .entry(*id)
                    .or_default()
                    .push(index_of_rule);
            }
        }
        let mut cache = SelectorCache {
            index,
            work,
            budget,
            ..SelectorCache::default()
        };
        let peers: Vec<&Selector> = rules
            .iter()
            .flat_map(|rule| rule.peers.iter().flatten())
            .collect();
        let mut interned = cache.intern_all(&peers, table).into_iter();
        let peer_ids = rules
            .iter()
            .map(|rule| {
                rule.peers
                    .as_ref()
                    .map(|list| interned.by_ref().take(list.len()).collect())
            })
            .collect();
        let wildcard = cache.intern(&Selector::wildcard(), table);
        let mut cluster_ports: BTreeMap<String, BTreeSet<(u16, u8)>> = BTreeMap::new();
        for endpoint in &inventory.endpoints {
            for port in &endpoint.ports {
                cluster_ports
                    .entry(port.name.clone())
                    .or_default()
                    .insert((port.port, port.proto));
            }
        }
        Self {
            rules,
            inventory,
            cache,
            rules_by_identity,
            peer_ids,
            cluster_ports,
            localhost_origin: None,
            wildcard,
        }
    }

    /// A resolver over state kept from an earlier one ([`Self::into_parts`]);
    /// the parts must have been computed for `rules`, `table` and
    /// `inventory` (a session updates them incrementally).
    pub fn from_parts(
        rules: &'a [PolicyRule],
        table: &'a IdentityTable,
        inventory: &'a Inventory,
        parts: ResolverParts,
    ) -> Self {
        // The table is the one the parts were computed for; the resolver
        // itself keeps only what it reads later (the selections).
        let _ = table;
        Self {
            rules,
            inventory,
            cache: parts.cache,
            rules_by_identity: parts.rules_by_identity,
            peer_ids: parts.peer_ids,
            cluster_ports: parts.cluster_ports,
            localhost_origin: parts.localhost_origin,
            wildcard: parts.wildcard,
        }
    }

    /// The owned state, to keep for [`Self::from_parts`].
    pub fn into_parts(self) -> ResolverParts {
        ResolverParts {
            cache: self.cache,
            rules_by_identity: self.rules_by_identity,
            peer_ids: self.peer_ids,
            cluster_ports: self.cluster_ports,
            localhost_origin: self.localhost_origin,
            wildcard: self.wildcard,
        }
    }

    /// Names the origin the host allow entries carry
    /// ([`super::lower::Lowered::localhost_origin`]), so explanations can
    /// say why the host is allowed. Without it the entries carry no origin.
    #[must_use]
    pub fn with_localhost_origin(mut self, origin: Option<u32>) -> Self {
        self.localhost_origin = origin;
        self
    }

    /// The origin of the host allow entries, if named
    /// ([`Self::with_localhost_origin`]).
    pub(crate) fn localhost_origin(&self) -> Option<u32> {
        self.localhost_origin
    }

    /// Whether the agent inserts the host allow for this endpoint
    /// (`determineAllowLocalhostIngress`, `pkg/policy/mapstate.go`, called
    /// by `DistillPolicy` in `pkg/policy/resolve.go` unless the endpoint is
    /// the host endpoint), given the inventory's `allowLocalhost`.
    ///
    /// `auto` follows `daemon/cmd/daemon.go`: an agent in Kubernetes mode
    /// turns it into `always`. porin decides Kubernetes mode per identity,
    /// so endpoints that share an identity share their map state: an
    /// identity with a pod namespace label is a Kubernetes endpoint; an
    /// endpoint with reserved labels only (health, ingress, init) belongs
    /// to the agent of the inventory's pods, so it is in Kubernetes mode
    /// when any endpoint of the inventory has a namespace; anything else
    /// (microVMs, workloads outside Kubernetes) keeps `auto` = no host
    /// allow.
    pub fn allows_localhost(&self, endpoint: &Endpoint) -> bool {
        self.allows_localhost_with(
            endpoint,
            &endpoint_identity_labels(endpoint, self.inventory),
        )
    }

    /// [`Self::allows_localhost`] given the endpoint's identity labels
    /// (`endpoint_identity_labels` of it over this resolver's inventory),
    /// for a caller that already derived them: an identity add derives
    /// them for its allocation, and deriving them again was ~16 % of its
    /// instructions (callgrind, session 13).
    pub fn allows_localhost_with(&self, endpoint: &Endpoint, labels: &LabelSet) -> bool {
        let is_host = endpoint.identity == Some(Identity::HOST.get())
            || labels
                .get(HOST_LABEL_KEY)
                .is_some_and(|l| l.source == SOURCE_RESERVED);
        if is_host {
            return false;
        }
        match self.inventory.allow_localhost {
            AllowLocalhost::Always => true,
            AllowLocalhost::Policy => false,
            AllowLocalhost::Auto => {
                if labels
                    .get(POD_NAMESPACE_LABEL)
                    .is_some_and(|l| l.source == SOURCE_K8S)
                {
                    return true;
                }
                let reserved_only =
                    !labels.is_empty() && labels.iter().all(|l| l.source == SOURCE_RESERVED);
                reserved_only
                    && self
                        .inventory
                        .endpoints
                        .iter()
                        .any(|e| e.namespace.is_some())
            }
        }
    }

    /// The cluster-wide named-port table (name → (port, protocol) of every
    /// endpoint naming it), which egress named ports resolve against.
    pub fn cluster_ports(&self) -> &BTreeMap<String, BTreeSet<(u16, u8)>> {
        &self.cluster_ports
    }

    /// The rules selecting an identity, in input order.
    pub fn rules_of(&self, identity: u32) -> &[usize] {
        self.rules_by_identity
            .get(&identity)
            .map_or(&[], Vec::as_slice)
    }

    /// Resolves the L4 policy of a subject identity (§3.3, §4.1 steps 1–3).
    pub fn l4_policy(&self, identity: u32) -> L4Policy {
        let rule_indices: Vec<usize> = self.rules_of(identity).to_vec();
        self.l4_policy_of(identity, &rule_indices, None)
    }

    /// [`Resolver::l4_policy`] of a subject identity under a subset of the
    /// rules selecting it (`rule_indices`, in input order), for analyses
    /// that ask what the policy would be without some rules. `synthetic`,
    /// when given, says per direction (ingress, egress) whether the
    /// synthetic allow-all of a direction whose rules all opt out of
    /// default deny is added, instead of deciding it from the subset.
    pub fn l4_policy_of(
        &self,
        identity: u32,
        rule_indices: &[usize],
        synthetic: Option<[bool; 2]>,
    ) -> L4Policy {
        self.l4_policy_inner(identity, rule_indices, synthetic, None, None)
    }

    /// [`Resolver::l4_policy`] with only the filters `keep` accepts: both
    /// directions' `enforced` as the whole policy has them, and each kept
    /// filter exactly as there (a filter is the fold, in rule order, of the
    /// rules whose keys ([`filter_keys`]) include its key, and for the
    /// L3-only filter of the synthetic allow-all after them). For a
    /// session that folds again only the filters a changed rule touches.
    pub fn l4_policy_filters(&self, identity: u32, keep: &FilterFilter<'_>) -> L4Policy {
        let rule_indices: Vec<usize> = self.rules_of(identity).to_vec();
        self.l4_policy_inner(identity, &rule_indices, None, Some((keep, None)), None)
    }

    /// [`Resolver::l4_policy_filters`] when the caller knows which rules
    /// can add to the kept filters: `adding` (ascending) holds every rule
    /// whose [`filter_keys`] include a key `keep` accepts (a rule→filter
    /// index), so the other rules are read only for the directions'
    /// enforcement instead of being asked for their keys.
    ///
    /// With `selectors`, the kept filters hold only the policies of the
    /// selectors it accepts. A selector's policy in a filter is the merge
    /// of the rules that add that selector to that filter, in rule order,
    /// and of nothing else, so each is what the whole fold gives it;
    /// `adding` then need only hold the rules that name an accepted
    /// selector. A session folds again only the selectors a rule change
    /// names this way (one CIDR rule of 4,096 that share a port, session
    /// 27).
    pub fn l4_policy_filters_of(
        &self,
        identity: u32,
        keep: &FilterFilter<'_>,
        adding: &[usize],
        selectors: Option<&dyn Fn(SelectorId) -> bool>,
    ) -> L4Policy {
        self.l4_policy_inner(
            identity,
            self.rules_of(identity),
            None,
            Some((keep, Some(adding))),
            selectors,
        )
    }

    fn l4_policy_inner(
        &self,
        identity: u32,
        rule_indices: &[usize],
        synthetic: Option<[bool; 2]>,
        keep: Option<(&FilterFilter<'_>, Option<&[usize]>)>,
        selectors: Option<&dyn Fn(SelectorId) -> bool>,
    ) -> L4Policy {
        let adding = keep.and_then(|(_, adding)| adding);
        let keep = keep.map(|(keep, _)| keep);
        let kept = |direction: Direction, key: &FilterKey| keep.is_none_or(|k| k(direction, key));
        let mut policy = L4Policy::default();
        let mut default_deny = [false, false];
        if identity == Identity::INIT.get() {
            // computePolicyEnforcementAndRules: an endpoint still being
            // initialised is in default deny both ways.
            policy.ingress.enforced = true;
            policy.egress.enforced = true;
            default_deny = [true, true];
        }
        for &index in rule_indices {
            let rule = &self.rules[index];
            if rule.tier.is_some() {
                // A ClusterNetworkPolicy rule: decided by `crate::tier`,
                // and it puts no endpoint into default deny.
                continue;
            }
            let slot = usize::from(rule.direction == Direction::Egress);
            let direction = policy.direction_mut(rule.direction);
            direction.enforced = true;
            default_deny[slot] |= rule.default_deny;
            let Some(peers) = &self.peer_ids[index] else {
                continue;
            };
            if peers.is_empty() {
                continue;
            }
            let asked = match adding {
                Some(adding) => adding.binary_search(&index).is_ok(),
                None => keep.is_none() || adds_to(rule, &|key| kept(rule.direction, key)),
            };
            if !asked {
                // None of its filters is asked for: skip building them.
                continue;
            }
            let template = SelectorPolicy {
                deny: rule.deny,
                l7: L7::none(),
                auth: if rule.deny { None } else { rule.auth },
                cookie: rule.cookie,
                origins: [rule.origin].into(),
                conflict: None,
            };
            if rule.l3_only {
                let key = L3_FILTER;
                if kept(rule.direction, &key) {
                    add_to_filter(direction, key, peers, &template, selectors);
                }
                continue;
            }
            for spec in &rule.ports {
                for key in spec_filter_keys(spec) {
                    if !kept(rule.direction, &key) {
                        continue;
                    }
                    let mut per = template.clone();
                    if !rule.deny {
                        per.l7 = spec.l7.clone();
                    }
                    add_to_filter(direction, key, peers, &per, selectors);
                }
            }
        }
        // The synthetic wildcard allow of a direction whose rules all opted
        // out of default deny (computePolicyEnforcementAndRules).
        for (slot, direction) in Direction::ALL.into_iter().enumerate() {
            let dir = policy.direction_mut(direction);
            let add = synthetic.map_or(dir.enforced && !default_deny[slot], |s| s[slot]);
            if add && kept(direction, &L3_FILTER) {
                let wildcard = self.wildcard;
                let origin = if direction == Direction::Ingress {
                    ORIGIN_ALLOW_ANY_INGRESS
                } else {
                    ORIGIN_ALLOW_ANY_EGRESS
                };
                let key = FilterKey {
                    port: PortRef::Number(0),
                    end_port: 0,
                    proto: proto::ANY,
                };
                let template = SelectorPolicy {
                    deny: false,
                    l7: L7::none(),
                    auth: None,
                    cookie: 0,
                    origins: [origin].into(),
                    conflict: None,
                };
                add_to_filter(dir, key, &[wildcard], &template, selectors);
            }
        }
        policy
    }

    /// `GetNamedPort` (`pkg/endpoint/policy.go`): ingress from the
    /// endpoint's own container ports (`NamedPortMap.GetNamedPort`), egress
    /// from every endpoint's ports (`namedPortMultiMap.GetNamedPort`,
    /// `pkg/types/portmap.go`).
    fn named_port(
        &self,
        direction: Direction,
        endpoint: &Endpoint,
        name: &str,
        proto_number: u8,
    ) -> Result<u16, &'static str> {
        match direction {
            Direction::Ingress => {
                let found: Option<&NamedPort> = endpoint.ports.iter().find(|p| p.name == name);
                let port = found.ok_or("unknown named port")?;
                if port.proto != proto_number {
                    return Err("incompatible protocol");
                }
                if port.port == 0 {
                    return Err("named port is zero");
                }
                Ok(port.port)
            }
            Direction::Egress => {
                let entries = self.cluster_ports.get(name).ok_or("unknown named port")?;
                let mut result: Result<u16, &'static str> = Err("unknown named port");
                let mut chosen = 0u16;
                for (port, port_proto) in entries {
                    if *port_proto != 0 && *port_proto != proto_number {
                        result = Err("incompatible protocol");
                        continue;
                    }
                    if *port == 0 {
                        result = Err("named port is zero");
                        continue;
                    }
                    if chosen != 0 && *port != chosen {
                        return Err("duplicate named ports");
                    }
                    chosen = *port;
                    result = Ok(*port);
                }
                result
            }
        }
    }

    /// Distills the map state of one endpoint from its identity's L4 policy
    /// (§4.1 steps 4–5), with diagnostics for ports that yield no keys.
    pub fn map_state(
        &self,
        endpoint: &Endpoint,
        policy: &L4Policy,
        origins_file: &dyn Fn(u32) -> String,
    ) -> (MapState, Vec<Diagnostic>) {
        self.map_state_where(endpoint, policy, origins_file, &|_| true)
    }

    /// [`Resolver::map_state`] restricted to the keys whose peer identity
    /// satisfies `keep`: every other insertion is skipped. Keys of
    /// identity X interact in the insertion algebra only with keys of X
    /// and of identity 0 (`covering_keys`, `narrower_keys`: same identity
    /// or identity 0), and the fate of an identity-0 key depends on
    /// identity-0 keys only, so with `keep` = {0} ∪ G the result holds
    /// exactly the keys of the full state whose identity is in {0} ∪ G.
    /// The capacity census ([`crate::compile::capacity`]) counts a state
    /// too large to build, one group of identities at a time.
    pub fn map_state_where(
        &self,
        endpoint: &Endpoint,
        policy: &L4Policy,
        origins_file: &dyn Fn(u32) -> String,
        keep: &dyn Fn(u32) -> bool,
    ) -> (MapState, Vec<Diagnostic>) {
        let mut state = MapState::new();
        let mut diagnostics = Vec::new();
        let proxy_ports = proxy_ports(policy);
        let mut insertions = Vec::new();
        for direction in Direction::ALL {
            let dir = policy.direction(direction);
            if !dir.enforced {
                if !keep(0) {
                    continue;
                }
                // An allow entry is never a PASS; upsert cannot refuse it.
                let _ = state.upsert(
                    Key::for_direction(direction),
                    Entry::allow().with_origin(allow_all_origin(direction)),
                );
                continue;
            }
            let features = dir.features();
            for (filter_key, per_selector) in &dir.filters {
                insertions.clear();
                self.filter_insertions(
                    &FilterContext {
                        endpoint,
                        direction,
                        proxy_ports: &proxy_ports,
                        origins_file,
                    },
                    filter_key,
                    per_selector,
                    &mut diagnostics,
                    &mut insertions,
                );
                for (key, entry) in insertions.drain(..) {
                    if !keep(key.identity().get()) {
                        continue;
                    }
                    if let Err(error) = state.insert_quiet(key, entry, features) {
                        diagnostics
                            .push(Diagnostic::new(codes::MERGE_CONFLICT, format!("{error}")));
                    }
                }
            }
        }
        if let Some((key, entry)) = self
            .localhost_insertion(endpoint)
            .filter(|(key, _)| keep(key.identity().get()))
        {
            let features = policy.direction(Direction::Ingress).features();
            if let Err(error) = state.insert_quiet(key, entry, features) {
                diagnostics.push(Diagnostic::new(codes::MERGE_CONFLICT, format!("{error}")));
            }
        }
        (state, diagnostics)
    }

    /// Folds `ops` into `state` in order. With `only`, keys are inserted
    /// for identity 0 and that identity alone: the keys of a specific
    /// identity depend only on the insertions for it and for identity 0
    /// (the insertion algebra compares a key with covering and narrower
    /// keys of its own identity and of identity 0, and an identity-0 key
    /// only with identity-0 keys, `mapstate::insert`), so this gives exactly
    /// the identity's keys of the full fold (`crate::session` relies on it).
    pub fn apply_ops(
        &self,
        ops: &[MapOp],
        state: &mut MapState,
        diagnostics: &mut Vec<Diagnostic>,
        only: Option<u32>,
    ) {
        for op in ops {
            self.apply_op(op, state, diagnostics, only);
        }
    }

    /// One op of [`Self::apply_ops`].
    pub fn apply_op(
        &self,
        op: &MapOp,
        state: &mut MapState,
        diagnostics: &mut Vec<Diagnostic>,
        only: Option<u32>,
    ) {
        let wanted = |id: u32| only.is_none_or(|o| id == 0 || id == o);
        let mut insert = |key: Key| {
            let result = if op.upsert {
                state.upsert(key, op.entry.clone()).map(drop)
            } else {
                state
                    .insert_with_features(key, op.entry.clone(), op.features)
                    .map(drop)
            };
            if let Err(error) = result {
                diagnostics.push(Diagnostic::new(codes::MERGE_CONFLICT, format!("{error}")));
            }
        };
        match op.peers {
            OpPeers::Fixed(id) => {
                if wanted(id) {
                    insert(op.key);
                }
            }
            OpPeers::Selector(selector) => {
                for id in self.cache.selection(selector) {
                    if !wanted(*id) {
                        continue;
                    }
                    let Ok(identity) = Identity::new(*id) else {
                        continue;
                    };
                    insert(op.key.with_identity(identity));
                }
            }
        }
    }

    /// The insertions that distill one endpoint's map state, in order
    /// ([`Self::map_state`] builds the same state, expanding them as it
    /// goes), with the diagnostics for ports that yield no keys. They depend
    /// on the L4 policy, the endpoint's and the cluster's named ports and the
    /// host allow, never on which identities a selector selects.
    pub fn map_ops(
        &self,
        endpoint: &Endpoint,
        policy: &L4Policy,
        origins_file: &dyn Fn(u32) -> String,
    ) -> (Vec<MapOp>, Vec<Diagnostic>) {
        self.map_ops_with(
            endpoint,
            policy,
            origins_file,
            self.allows_localhost(endpoint),
        )
    }

    /// [`Self::map_ops`] with the endpoint's host allow decided
    /// ([`Self::allows_localhost`] of it).
    pub fn map_ops_with(
        &self,
        endpoint: &Endpoint,
        policy: &L4Policy,
        origins_file: &dyn Fn(u32) -> String,
        allows_localhost: bool,
    ) -> (Vec<MapOp>, Vec<Diagnostic>) {
        let mut ops: Vec<MapOp> = Vec::new();
        let mut diagnostics = Vec::new();
        let proxy_ports = proxy_ports(policy);
        for direction in Direction::ALL {
            let dir = policy.direction(direction);
            if !dir.enforced {
                ops.push(MapOp {
                    peers: OpPeers::Fixed(0),
                    key: Key::for_direction(direction),
                    entry: Entry::allow().with_origin(allow_all_origin(direction)),
                    features: PolicyFeatures::NONE,
                    upsert: true,
                    filter: None,
                });
                continue;
            }
            let features = dir.features();
            for (filter_key, per_selector) in &dir.filters {
                self.filter_ops(
                    &FilterContext {
                        endpoint,
                        direction,
                        proxy_ports: &proxy_ports,
                        origins_file,
                    },
                    filter_key,
                    per_selector,
                    features,
                    &mut diagnostics,
                    &mut ops,
                );
            }
        }
        if let Some((key, entry)) = allows_localhost.then(|| self.localhost_entry()) {
            ops.push(MapOp {
                peers: OpPeers::Fixed(Identity::HOST.get()),
                key,
                entry,
                features: policy.direction(Direction::Ingress).features(),
                upsert: false,
                filter: None,
            });
        }
        (ops, diagnostics)
    }

    /// The host's ingress allow the agent inserts after every policy entry
    /// (see [`Resolver::allows_localhost`]), if it does for this endpoint.
    pub fn localhost_insertion(&self, endpoint: &Endpoint) -> Option<(Key, Entry)> {
        self.allows_localhost(endpoint)
            .then(|| self.localhost_entry())
    }

    /// The host's ingress allow ([`Self::localhost_insertion`]).
    fn localhost_entry(&self) -> (Key, Entry) {
        // determineAllowLocalhostIngress, after every policy entry and
        // whether or not ingress is enforced: an L3-only ingress allow
        // for the host at priority 0 (`newAllowEntryWithLabels`,
        // precedence 0xFFFFFF01, no proxy, no auth), inserted like any
        // other entry, so a covering deny for the host still wins and a
        // narrower host deny or redirect stays in place.
        let mut entry = Entry::allow();
        if let Some(origin) = self.localhost_origin {
            entry = entry.with_origin(origin);
        }
        let key = Key::for_direction(Direction::Ingress).with_identity(Identity::HOST);
        (key, entry)
    }

    /// The insertions (key, entry, in insertion order) one filter of an
    /// enforced direction contributes to the map state ([`Resolver::map_state`]
    /// inserts them with the direction's features). Exposed so analyses can
    /// rebuild the part of a map state one filter decides without
    /// recompiling the rest.
    pub fn filter_insertions(
        &self,
        cx: &FilterContext<'_>,
        filter_key: &FilterKey,
        per_selector: &BTreeMap<SelectorId, SelectorPolicy>,
        diagnostics: &mut Vec<Diagnostic>,
        out: &mut Vec<(Key, Entry)>,
    ) {
        let mut ops = Vec::new();
        self.filter_ops(
            cx,
            filter_key,
            per_selector,
            PolicyFeatures::NONE,
            diagnostics,
            &mut ops,
        );
        for op in ops {
            let OpPeers::Selector(selector) = op.peers else {
                continue;
            };
            for id in self.cache.selection(selector) {
                let Ok(identity) = Identity::new(*id) else {
                    continue;
                };
                out.push((op.key.with_identity(identity), op.entry.clone()));
            }
        }
    }

    /// The ops (per selector, before the selection is expanded) of one
    /// filter, in insertion order: [`Self::filter_insertions`] expands them,
    /// [`Self::map_ops`] keeps them for a session.
    pub fn filter_ops(
        &self,
        cx: &FilterContext<'_>,
        filter_key: &FilterKey,
        per_selector: &BTreeMap<SelectorId, SelectorPolicy>,
        features: PolicyFeatures,
        diagnostics: &mut Vec<Diagnostic>,
        out: &mut Vec<MapOp>,
    ) {
        self.filter_ops_where(
            cx,
            (filter_key, per_selector),
            None,
            features,
            diagnostics,
            out,
        );
    }

    /// The ops of [`Self::filter_ops`] that name the selectors `only`
    /// (ascending), in the same order, made without reading the filter's
    /// other selectors but the wildcard (whose entry suppresses identical
    /// ones, `toMapState`). A session makes again only the ops of the
    /// selectors whose policy in a filter changed (session 27).
    ///
    /// Returns the keys (identity 0) of the filter's masked port blocks,
    /// in the order its ops take them ([`Self::filter_ops`] lists each
    /// block's ops in turn): the session places the new ops among the old
    /// by them, and they are the ones the ops were made for, so the named
    /// port is resolved once. `None` when a named port does not resolve
    /// (no ops; a finding says why).
    pub fn filter_ops_of(
        &self,
        cx: &FilterContext<'_>,
        (filter_key, per_selector): (&FilterKey, &BTreeMap<SelectorId, SelectorPolicy>),
        only: &[SelectorId],
        features: PolicyFeatures,
        diagnostics: &mut Vec<Diagnostic>,
        out: &mut Vec<MapOp>,
    ) -> Option<Vec<Key>> {
        debug_assert!(only.windows(2).all(|w| w[0] < w[1]), "`only` ascending");
        self.filter_ops_where(
            cx,
            (filter_key, per_selector),
            Some(only),
            features,
            diagnostics,
            out,
        )
    }

    /// The port a filter's ops are for: its number, or its named port
    /// resolved for the endpoint (`GetNamedPort`).
    fn filter_port(
        &self,
        cx: &FilterContext<'_>,
        filter_key: &FilterKey,
    ) -> Result<u16, &'static str> {
        match &filter_key.port {
            PortRef::Number(n) => Ok(*n),
            PortRef::Named(name) => {
                self.named_port(cx.direction, cx.endpoint, name, filter_key.proto)
            }
        }
    }

    /// A selector's entry in a filter, or the merge conflict that gives
    /// it none.
    fn selector_entry(
        cx: &FilterContext<'_>,
        filter_key: &FilterKey,
        sp: &SelectorPolicy,
    ) -> Result<Entry, MergeConflict> {
        if let Some(conflict) = &sp.conflict {
            return Err(conflict.clone());
        }
        let mut entry = if sp.deny {
            Entry::deny()
        } else {
            let proxy_port = if sp.l7.parser == L7Parser::None {
                0
            } else {
                cx.proxy_ports
                    .get(&(
                        cx.direction,
                        sp.l7.parser.name(),
                        filter_key.proto,
                        filter_key.port.clone(),
                        filter_key.end_port,
                    ))
                    .copied()
                    .unwrap_or(PROXY_PORT_BASE)
            };
            let listener = ListenerPriority::new(sp.l7.listener_priority().unwrap_or(0));
            let auth = match sp.auth {
                None => AuthRequirement::NONE,
                Some(mode) => AuthRequirement::explicit(
                    AuthType::new(mode.auth_type()).unwrap_or(AuthType::DISABLED),
                ),
            };
            Entry::new(Priority::ZERO, false, proxy_port, listener, auth).with_cookie(sp.cookie)
        };
        entry.origins.clone_from(&sp.origins);
        Ok(entry)
    }

    /// [`Self::filter_ops`], or only the ops of the selectors `only`
    /// ([`Self::filter_ops_of`]), and the filter's masked port blocks
    /// (`None`: a named port does not resolve).
    fn filter_ops_where(
        &self,
        cx: &FilterContext<'_>,
        (filter_key, per_selector): (&FilterKey, &BTreeMap<SelectorId, SelectorPolicy>),
        only: Option<&[SelectorId]>,
        features: PolicyFeatures,
        diagnostics: &mut Vec<Diagnostic>,
        out: &mut Vec<MapOp>,
    ) -> Option<Vec<Key>> {
        let FilterContext {
            endpoint,
            direction,
            origins_file,
            ..
        } = *cx;
        let port = match self.filter_port(cx, filter_key) {
            Ok(port) => port,
            Err(reason) => {
                let PortRef::Named(name) = &filter_key.port else {
                    return None;
                };
                let origins: BTreeSet<u32> = per_selector
                    .values()
                    .flat_map(|p| p.origins.iter().copied())
                    .collect();
                let mut d = Diagnostic::new(
                    codes::NAMED_PORT,
                    format!(
                        "{direction} named port `{name}`/{} of `{}`: {reason}; the rule yields no keys (as in Cilium)",
                        proto::name(filter_key.proto),
                        endpoint.display_name()
                    ),
                );
                for origin in origins {
                    d.notes.push(format!("from {}", origins_file(origin)));
                }
                diagnostics.push(d);
                return None;
            }
        };
        let is_wildcard = |selector: SelectorId| self.cache.selector(selector).is_wildcard();
        // Entries per selector (of `only`, when given), and the findings of
        // those whose rules conflict: the wildcard selector's first, then
        // by id. The wildcard's id is not the order (a live session never
        // moves it, and numbers it first when it starts without rules, the
        // batch in rule order): its findings were listed by its id, and a
        // session gave two conflicts on one port the other way round from
        // the batch (session 27's second review).
        let wildcard = per_selector.get_key_value(&self.wildcard);
        let others = |(s, _): &(&SelectorId, &SelectorPolicy)| **s != self.wildcard;
        let chosen: Box<dyn Iterator<Item = (&SelectorId, &SelectorPolicy)>> = match only {
            None => Box::new(
                wildcard
                    .into_iter()
                    .chain(per_selector.iter().filter(others)),
            ),
            Some(only) => Box::new(
                wildcard
                    .filter(|(s, _)| only.binary_search(s).is_ok())
                    .into_iter()
                    .chain(
                        only.iter()
                            .filter_map(|s| per_selector.get_key_value(s))
                            .filter(others),
                    ),
            ),
        };
        let mut entries: Vec<(SelectorId, Entry)> = Vec::new();
        for (selector, sp) in chosen {
            match Self::selector_entry(cx, filter_key, sp) {
                Ok(entry) => entries.push((*selector, entry)),
                Err(conflict) => diagnostics.push(conflict_finding(
                    cx,
                    (filter_key, port),
                    &conflict,
                    &sp.origins,
                )),
            }
        }
        // The wildcard is interned once (`Resolver::new`): its policy is
        // the one under `self.wildcard`, and `chosen` listed it first. Its
        // entry suppresses the identical ones of the others, whether or
        // not its own ops are asked for.
        debug_assert!(
            per_selector
                .keys()
                .all(|s| *s == self.wildcard || !is_wildcard(*s)),
            "one wildcard selector"
        );
        let wildcard_entry =
            wildcard.and_then(|(_, sp)| Self::selector_entry(cx, filter_key, sp).ok());
        let bases = filter_bases(direction, filter_key, port);
        for base in &bases {
            for (selector, entry) in &entries {
                let wildcard = is_wildcard(*selector);
                if !wildcard
                    && port != 0
                    && wildcard_entry
                        .as_ref()
                        .is_some_and(|w| w.datapath_eq(entry))
                {
                    // toMapState: "identical L3L4 entry suppressed".
                    continue;
                }
                out.push(MapOp {
                    peers: OpPeers::Selector(*selector),
                    key: *base,
                    entry: entry.clone(),
                    features,
                    upsert: false,
                    filter: Some(filter_key.clone()),
                });
            }
        }
        Some(bases)
    }

    /// The interned wildcard selector.
    pub fn wildcard(&self) -> SelectorId {
        self.wildcard
    }

    /// The inventory this resolver works on.
    pub fn inventory(&self) -> &Inventory {
        self.inventory
    }
}

/// Proxy ports of an endpoint's redirecting filters, by (direction,
/// parser, protocol, port, end port); see [`PROXY_PORT_BASE`].
pub type ProxyPorts = BTreeMap<(Direction, String, u8, PortRef, u16), u16>;

/// Numbers the proxy ports of a policy's redirecting filters, per endpoint
/// in sorted filter order.
pub fn proxy_ports(policy: &L4Policy) -> ProxyPorts {
    let mut proxy_ports = ProxyPorts::new();
    for direction in Direction::ALL {
        for (key, per_selector) in &policy.direction(direction).filters {
            for sp in per_selector.values() {
                if !sp.deny && sp.l7.parser != L7Parser::None {
                    proxy_ports.insert(
                        (
                            direction,
                            sp.l7.parser.name(),
                            key.proto,
                            key.port.clone(),
                            key.end_port,
                        ),
                        0,
                    );
                }
            }
        }
    }
    for (offset, port) in proxy_ports.values_mut().enumerate() {
        *port = PROXY_PORT_BASE.saturating_add(u16::try_from(offset).unwrap_or(u16::MAX));
    }
    proxy_ports
}

/// The origin of the allow-all entry of a direction no rule enforces.
pub const fn allow_all_origin(direction: Direction) -> u32 {
    match direction {
        Direction::Ingress => ORIGIN_ALLOW_ANY_INGRESS,
        Direction::Egress => ORIGIN_ALLOW_ANY_EGRESS,
    }
}

/// What [`Resolver::filter_insertions`] needs besides the filter.
#[derive(Clone, Copy)]
pub struct FilterContext<'c> {
    /// The endpoint (its named ports resolve ingress named ports).
    pub endpoint: &'c Endpoint,
    /// The filter's direction.
    pub direction: Direction,
    /// The endpoint's proxy ports ([`proxy_ports`]).
    pub proxy_ports: &'c ProxyPorts,
    /// Describes an origin for diagnostics.
    pub origins_file: &'c dyn Fn(u32) -> String,
}

/// Which filters of an L4 policy to fold ([`Resolver::l4_policy_filters`]).
pub type FilterFilter<'a> = dyn Fn(Direction, &FilterKey) -> bool + 'a;

/// The key of the L3-only filter (port 0, any protocol).
pub const L3_FILTER: FilterKey = FilterKey {
    port: PortRef::Number(0),
    end_port: 0,
    proto: proto::ANY,
};

/// The filters `rule` adds to in the L4 policy of a subject it selects
/// (when it has peers), as [`Resolver::l4_policy`] keys them.
pub fn filter_keys(rule: &PolicyRule) -> Vec<(Direction, FilterKey)> {
    if rule.l3_only {
        return vec![(rule.direction, L3_FILTER)];
    }
    rule.ports
        .iter()
        .flat_map(spec_filter_keys)
        .map(|key| (rule.direction, key))
        .collect()
}

/// Whether `rule` adds to a filter `wanted` accepts ([`filter_keys`]
/// without collecting them: asked of every rule of a subject per update).
fn adds_to(rule: &PolicyRule, wanted: &dyn Fn(&FilterKey) -> bool) -> bool {
    if rule.l3_only {
        return wanted(&L3_FILTER);
    }
    rule.ports
        .iter()
        .any(|spec| spec_filter_keys(spec).any(|key| wanted(&key)))
}

/// The filter keys of one port spec: one per protocol, `ANY` expanded to
/// TCP, UDP and SCTP.
fn spec_filter_keys(spec: &crate::resolve::rule::PortSpec) -> impl Iterator<Item = FilterKey> + '_ {
    let protos: &[u8] = if spec.proto == proto::ANY {
        &proto::ANY_EXPANSION
    } else {
        std::slice::from_ref(&spec.proto)
    };
    protos.iter().map(move |&p| FilterKey {
        port: spec.port.clone(),
        end_port: spec.end_port,
        proto: p,
    })
}

/// The finding of a selector whose rules Cilium refuses to merge on a
/// filter (it gets no entry there).
fn conflict_finding(
    cx: &FilterContext<'_>,
    (filter_key, port): (&FilterKey, u16),
    conflict: &MergeConflict,
    origins: &Origins,
) -> Diagnostic {
    let mut d = Diagnostic::new(
        codes::MERGE_CONFLICT,
        format!(
            "{conflict} on {} {}/{} for `{}`; porin allows nothing there (fail closed)",
            cx.direction,
            port,
            proto::name(filter_key.proto),
            cx.endpoint.display_name()
        ),
    );
    for origin in origins {
        d.notes.push(format!("from {}", (cx.origins_file)(*origin)));
    }
    d
}

/// The keys (identity 0) of the masked port blocks of a filter whose port
/// is `port`, in op order: one block for any protocol, else the minimal
/// prefixes of the port range.
fn filter_bases(direction: Direction, filter_key: &FilterKey, port: u16) -> Vec<Key> {
    let masked = if filter_key.proto == proto::ANY {
        vec![crate::ports::MaskedPort::WILDCARD]
    } else {
        port_range_to_masked_ports(port, filter_key.end_port)
    };
    masked
        .into_iter()
        .filter_map(|masked_port| {
            Key::for_direction(direction)
                .with_masked_port(filter_key.proto, masked_port)
                .ok()
        })
        .collect()
}

/// Merges `template` into the policy of each of `peers` (those
/// `selectors` accepts, when given) in the filter `key`; a filter no peer
/// is added to is not made.
fn add_to_filter(
    direction: &mut DirectionPolicy,
    key: FilterKey,
    peers: &[SelectorId],
    template: &SelectorPolicy,
    selectors: Option<&dyn Fn(SelectorId) -> bool>,
) {
    let mut peers = peers
        .iter()
        .filter(|s| selectors.is_none_or(|accepts| accepts(**s)))
        .peekable();
    if peers.peek().is_none() {
        return;
    }
    let filter = direction.filters.entry(key).or_default();
    for selector in peers {
        match filter.get_mut(selector) {
            Some(existing) => merge_selector_policy(existing, template.clone()),
            None => {
                filter.insert(*selector, template.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` generated CIDR policies lowered, and their identity table.
    fn cidr_rules_and_table(count: usize) -> (super::super::lower::Lowered, IdentityTable) {
        let outcome = porin_model::loader::load_str(
            "p.yaml",
            &super::super::lower::test_inputs::cidr_policies(count),
            &porin_model::LoadLimits::default(),
        );
        let inputs = super::super::lower::PolicyInput::from_outcome(&outcome);
        let inventory = Inventory::new();
        let lowered = super::super::lower::lower(&inputs, &inventory);
        let table = IdentityTable::allocate_with_groups(
            &inventory,
            &lowered.prefixes,
            &lowered.cidr_groups,
        )
        .unwrap();
        (lowered, table)
    }

    /// `intern_all` is `intern` one selector after the other: the same ids,
    /// selections and work, with repeats, the wildcard, and a budget that
    /// runs out half way (past it, new selectors select nothing).
    #[test]
    fn interning_all_at_once_is_interning_one_after_the_other() {
        let (lowered, table) = cidr_rules_and_table(3000);
        let wildcard = Selector::wildcard();
        let mut selectors: Vec<&Selector> = lowered
            .rules
            .iter()
            .flat_map(|rule| rule.peers.iter().flatten().chain([&rule.subject]))
            .collect();
        selectors.insert(100, &wildcard);
        selectors.extend(selectors.clone().iter().step_by(7));
        assert!(selectors.len() > 6000, "{}", selectors.len());
        let mut unbounded = SelectorCache::default();
        for selector in &selectors {
            unbounded.intern(selector, &table);
        }
        let half = unbounded.work / 2;
        assert!(half > 1000, "{half}");
        for budget in [None, Some(half), Some(0)] {
            let mut one_by_one = SelectorCache {
                budget,
                ..SelectorCache::default()
            };
            let ids: Vec<SelectorId> = selectors
                .iter()
                .map(|s| one_by_one.intern(s, &table))
                .collect();
            let mut at_once = SelectorCache {
                budget,
                ..SelectorCache::default()
            };
            assert_eq!(at_once.intern_all(&selectors, &table), ids);
            assert_eq!(at_once.selectors, one_by_one.selectors);
            assert_eq!(at_once.selections, one_by_one.selections);
            assert_eq!(at_once.work, one_by_one.work);
            if budget == Some(half) {
                assert!(at_once.over_budget());
                assert!(at_once.selections.iter().any(Vec::is_empty));
            }
        }
    }

    /// After [`SelectorCache::forget_index`], a selector interned against a
    /// table edited in place (same storage and length, so the index's own
    /// check cannot tell) is selected from the table as it is now, not
    /// through the index built before the edit.
    #[test]
    fn interning_after_forgetting_the_index_reads_the_edited_table() {
        let (lowered, mut table) = cidr_rules_and_table(40);
        let peers: Vec<&Selector> = lowered
            .rules
            .iter()
            .flat_map(|rule| rule.peers.iter().flatten())
            .collect();
        let mut cache = SelectorCache::default();
        cache.intern(peers[0], &table);
        // A later peer selecting one identity only (a /32), whose labels
        // are swapped with another identity's in place.
        let (later, before) = peers[1..]
            .iter()
            .map(|p| (*p, crate::resolve::selection::select_brute_force(p, &table)))
            .find(|(_, selected)| selected.len() == 1)
            .expect("a peer selecting one identity");
        let at = |id: u32| table.identities.iter().position(|i| i.id == id).unwrap();
        let (a, b) = (at(before[0]), at(table.identities.last().unwrap().id));
        assert_ne!(a, b);
        let moved = table.identities[a].labels.clone();
        table.identities[a].labels = std::mem::replace(&mut table.identities[b].labels, moved);
        let after = crate::resolve::selection::select_brute_force(later, &table);
        assert_ne!(after, before, "the edit changes what the peer selects");
        cache.forget_index();
        let id = cache.intern(later, &table);
        assert_eq!(cache.selection(id), after.as_slice());
    }

    fn l7(parser: L7Parser) -> L7 {
        L7 {
            parser,
            ..L7::none()
        }
    }

    #[test]
    fn parser_promotion_follows_merge_port_proto() {
        assert_eq!(
            merge_parser(&l7(L7Parser::None), &l7(L7Parser::Http))
                .unwrap()
                .parser,
            L7Parser::Http
        );
        assert_eq!(
            merge_parser(&l7(L7Parser::Tls), &l7(L7Parser::Http))
                .unwrap()
                .parser,
            L7Parser::Http
        );
        assert!(merge_parser(&l7(L7Parser::Http), &l7(L7Parser::Kafka)).is_err());
        assert!(merge_parser(&l7(L7Parser::Dns), &l7(L7Parser::Http)).is_err());
    }

    #[test]
    fn deny_wins_at_same_priority_rule_go() {
        let allow = SelectorPolicy {
            deny: false,
            l7: l7(L7Parser::Http),
            auth: None,
            cookie: 0,
            origins: [5].into(),
            conflict: None,
        };
        let deny = SelectorPolicy {
            deny: true,
            l7: L7::none(),
            auth: None,
            cookie: 0,
            origins: [6].into(),
            conflict: None,
        };
        let mut a = allow.clone();
        merge_selector_policy(&mut a, deny.clone());
        assert!(a.deny);
        let mut d = deny;
        merge_selector_policy(&mut d, allow);
        assert!(d.deny);
        assert_eq!(d.origins, [6].into());
    }
}
