//! A live session: policy texts and an inventory kept compiled, updated one
//! change at a time, each update giving the map writes of every endpoint it
//! touched (see the parent module's docs for the design and why the
//! writes are exact).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use ipnetwork::IpNetwork;
use porin_model::diagnostic::Diagnostic;
use porin_model::loader::LoadOutcome;
use porin_model::reparse::{EditKind, LineShift};

use super::addresses::AddressBook;
use super::items::{ChangedItems, Compared, Lines, MovedByEdit, MovedItem};
use super::load::Reparse;
use super::names::EndpointNames;
use super::numbers::IdentityNumbers;
use super::states::{Indexed, StateKey, States, reindex, relabel_index, unindex};

use crate::allocation::{IdentityKind, IdentityTable, try_endpoint_identity_labels};
use crate::cidrgroup::CidrGroups;
use crate::compile::{
    Compiled, EndpointPolicy, Enforcement, SelectedBy, build_ipcache, selects_nothing,
};
use crate::diff::{MapChange, policy_diff};
use crate::error::{CompileError, InventoryError};
use crate::identity::Identity;
use crate::inventory::{Endpoint, Inventory};
use crate::labels::{
    LabelSet, SOURCE_CIDR, SOURCE_RESERVED, canonical_prefix, parse_cidr_label_key,
};
use crate::limits::{CompileLimits, Limit, filter_blocks, insertion_bound};
use crate::mapstate::Direction;
use crate::mapstate::MapState;
use crate::mapstate::Origins;
use crate::mapstate::PolicyFeatures;
use crate::resolve::lower::{Lowered, Origin, PolicyInput, Scope, lower, lower_part};
use crate::resolve::policy::{
    FilterContext, FilterKey, L3_FILTER, L4Policy, MapOp, OpPeers, ProxyPorts, Resolver,
    ResolverParts, SelectorCache, SelectorId, SelectorPolicy, filter_keys, proxy_ports,
};
use crate::resolve::rule::PolicyRule;
use crate::selector::{Operator, Selector, SelectorKey, cidr_selector_key};
use crate::tier::Tiers;

/// More peer identities than this in one state's change: the state is
/// folded in full (cheaper than replaying that many identities; exact
/// either way).
const REPLAY_LIMIT: usize = 64;

/// Items after an edited one (inserted, removed, or replaced with lines
/// added or removed) from which the re-parse's shift of the tree's later
/// lines runs on another thread, beside the move or replacement of the
/// compiled rules (`Session::beside_shift`). Both passes are linear in the
/// items after it; below this many, each takes less than waking a thread
/// does (tens of microseconds).
pub(super) const PARALLEL_SHIFT_ITEMS: usize = 256;

#[cfg(test)]
thread_local! {
    /// Tests only: the work beside the shift panics (`Session::beside_shift`
    /// puts the text's outcome back all the same).
    pub(super) static PANIC_BESIDE_SHIFT: std::cell::Cell<bool> =
        const { std::cell::Cell::new(false) };
}

/// How an update was computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdatePath {
    /// Only what the change touches was recomputed.
    Incremental,
    /// Everything was recompiled (the reason says why the change could not
    /// be applied incrementally); the writes are still the exact
    /// difference.
    Full(&'static str),
}

/// The map writes of one endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointDelta {
    /// `namespace/name` or `name`.
    pub endpoint: String,
    /// Its identity after the update (before it, for a removed endpoint).
    pub identity: u32,
    /// The endpoint is new: `changes` fill an empty map.
    pub added: bool,
    /// The endpoint is gone: its map is to be dropped (`changes` is empty).
    pub removed: bool,
    /// The hole-free ordered writes ([`crate::diff::policy_diff`] of the
    /// endpoint's map state before and after the update).
    pub changes: Vec<MapChange>,
}

/// What one update did.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// Endpoints whose map changed, was added or removed, in inventory
    /// order (removed endpoints first).
    pub deltas: Vec<EndpointDelta>,
    /// Incremental or full.
    pub path: UpdatePath,
    /// Map states recomputed by a full fold.
    pub states_folded: usize,
    /// Peer identities whose part of some map state was replayed.
    pub identities_replayed: usize,
    /// Policy rules lowered again (a policy change: the changed items, or
    /// every rule of the text when the change could not be narrowed to
    /// its items).
    pub rules_lowered: usize,
    /// Rule items of the changed text whose old and new models were
    /// compared (a policy change: 1 when the edit was narrowed to the item
    /// whose text holds it, else every item of the text).
    pub items_compared: usize,
}

impl Update {
    fn incremental(deltas: Vec<EndpointDelta>) -> Self {
        Self {
            deltas,
            path: UpdatePath::Incremental,
            states_folded: 0,
            identities_replayed: 0,
            rules_lowered: 0,
            items_compared: 0,
        }
    }
}

/// One policy text of a session (a file's worth of documents).
struct PolicyText {
    name: String,
    outcome: LoadOutcome,
    /// How the text was loaded, when it came as bytes
    /// ([`Session::apply_policy_text`]): what an in-place re-parse of its
    /// next version needs. `None` for an outcome given whole, or after an
    /// edit the session did not plan.
    reparse: Option<Reparse>,
}

/// Where one text's lowering sits in the whole lowering.
#[derive(Debug, Clone)]
struct TextSpan {
    rules: Range<usize>,
    origins: Range<usize>,
    diagnostics: Range<usize>,
    prefixes: BTreeSet<IpNetwork>,
    /// The text's log values (`resolve::lower::log_values`): the log
    /// cookies are numbered over every text's.
    log_values: BTreeSet<String>,
    /// How many requirements of its rules' peer selectors are on each
    /// key ([`count_peer_keys`]), made on first need
    /// ([`Model::ensure_peer_keys`]) and kept by every change of its
    /// rules: whether another rule of the text has a selector on a
    /// dropped prefix's key is one lookup, not a pass over the text's
    /// rules (a quarter of a prefix change at 4,096 rules, session 26).
    peer_keys: Option<PeerKeys>,
}

/// Requirement counts by key ([`TextSpan::peer_keys`]).
type PeerKeys = foldhash::HashMap<SelectorKey, u32>;

/// Counts (`add`) or uncounts the requirements of `rule`'s peer selectors
/// by key.
fn count_peer_keys(counts: &mut PeerKeys, rule: &PolicyRule, add: bool) {
    for requirement in rule.peers.iter().flatten().flat_map(|s| s.requirements()) {
        let key = &requirement.key;
        if add {
            match counts.get_mut(key) {
                Some(n) => *n += 1,
                None => {
                    counts.insert(key.clone(), 1);
                }
            }
        } else if let Some(n) = counts.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(key);
            }
        } else {
            debug_assert!(false, "a text's requirement count of {key:?} went below 0");
        }
    }
}

/// A [`TextSpan`]'s three ranges, without its sets: what a change held
/// across the model's mutation reads (a copy of the span cloned its
/// prefix set, 4,096 prefixes for one rule changed in one text).
#[derive(Debug, Clone)]
struct SpanRanges {
    rules: Range<usize>,
    origins: Range<usize>,
    diagnostics: Range<usize>,
}

impl TextSpan {
    fn ranges(&self) -> SpanRanges {
        SpanRanges {
            rules: self.rules.clone(),
            origins: self.origins.clone(),
            diagnostics: self.diagnostics.clone(),
        }
    }
}

/// What a text's prefix set lost and gained (each sorted, disjoint from
/// the other).
#[derive(Debug)]
struct PrefixDelta {
    removed: Vec<IpNetwork>,
    added: Vec<IpNetwork>,
}

impl PrefixDelta {
    /// From the set `old` to the set `new`.
    fn between(old: &BTreeSet<IpNetwork>, new: &BTreeSet<IpNetwork>) -> Self {
        Self {
            removed: old.difference(new).copied().collect(),
            added: new.difference(old).copied().collect(),
        }
    }
}

/// A text lowered alone, its origin ids moved to where they sit in the
/// whole lowering.
struct TextLowering {
    rules: Vec<PolicyRule>,
    origins: Vec<Origin>,
    diagnostics: Vec<Diagnostic>,
    prefixes: BTreeSet<IpNetwork>,
    log_values: BTreeSet<String>,
}

/// Op indices (ascending) by their peers. Hashed with foldhash, not
/// SipHash: an identity add looks up its gained selectors in every state's
/// index (SipHash was ~65,000 of an add's ~480,000 instructions with 257
/// states, callgrind, session 11), and the keys are the session's own small
/// selector ids and identity numbers, not input an attacker chooses.
type OpIndex = foldhash::HashMap<OpPeers, Vec<usize>>;

/// An op index and its identity-0 peers (`StateRecord::zero`).
type IndexedPeers = (OpIndex, Vec<OpPeers>);

/// One distinct map state (shared by the endpoints with its identity and
/// named ports), with the ops it is the fold of.
#[derive(Debug, Clone)]
struct StateRecord {
    state: Arc<MapState>,
    diagnostics: Vec<Diagnostic>,
    ops: Vec<MapOp>,
    /// Op indices by peers, ascending.
    by_peers: OpIndex,
    /// The peers of the ops for identity 0 (`Fixed(0)`, the selectors
    /// whose selection is identity 0: the wildcard).
    zero: Vec<OpPeers>,
    /// The shape (`ops_shape`) of the L4 policy the ops were made from,
    /// when known: a one-rule change splices the ops when the new
    /// policy's is the same.
    shape: Option<OpsShape>,
}

impl Indexed for StateRecord {
    fn selectors(&self) -> Vec<SelectorId> {
        self.by_peers
            .keys()
            .filter_map(|peers| match peers {
                OpPeers::Selector(id) => Some(*id),
                OpPeers::Fixed(_) => None,
            })
            .collect()
    }

    fn entries(&self) -> usize {
        self.state.len()
    }
}

impl StateRecord {
    /// Distills the state of `endpoint` from `policy` in full (as the
    /// batch compiler does for a state's first endpoint), with its host
    /// allow decided (`Resolver::allows_localhost` of it).
    fn fold(
        resolver: &Resolver<'_>,
        endpoint: &Endpoint,
        policy: &L4Policy,
        origins: &[Origin],
        allows_localhost: bool,
    ) -> Self {
        debug_assert_eq!(
            allows_localhost,
            resolver.allows_localhost(endpoint),
            "the host allow given for `{}`",
            endpoint.display_name()
        );
        let (ops, mut diagnostics) = resolver.map_ops_with(
            endpoint,
            policy,
            &|id| describe(origins, id),
            allows_localhost,
        );
        let mut state = MapState::new();
        resolver.apply_ops(&ops, &mut state, &mut diagnostics, None);
        let mut record = Self::new(resolver, state, diagnostics, ops);
        record.shape = Some(ops_shape(policy));
        record
    }

    fn new(
        resolver: &Resolver<'_>,
        state: MapState,
        diagnostics: Vec<Diagnostic>,
        ops: Vec<MapOp>,
    ) -> Self {
        let mut by_peers = OpIndex::default();
        for (index, op) in ops.iter().enumerate() {
            by_peers.entry(op.peers).or_default().push(index);
        }
        let zero = by_peers
            .keys()
            .filter(|peers| selects_zero(resolver, **peers))
            .copied()
            .collect();
        Self::with_index(resolver, state, diagnostics, ops, (by_peers, zero))
    }

    /// [`StateRecord::new`] with the op index and its identity-0 peers
    /// already made (`by_peers` and `zero` of `ops`: `splice_ops` shifts
    /// the old ones instead of hashing every op again).
    fn with_index(
        resolver: &Resolver<'_>,
        state: MapState,
        diagnostics: Vec<Diagnostic>,
        ops: Vec<MapOp>,
        (by_peers, zero): IndexedPeers,
    ) -> Self {
        // Read only by the debug-build check below.
        let _ = resolver;
        // The tests (debug builds) check a given index against a fresh one.
        #[cfg(debug_assertions)]
        {
            let mut fresh = OpIndex::default();
            for (index, op) in ops.iter().enumerate() {
                fresh.entry(op.peers).or_default().push(index);
            }
            debug_assert_eq!(fresh, by_peers, "the op index of a spliced state");
            let fresh: BTreeSet<OpPeers> = by_peers
                .keys()
                .filter(|peers| selects_zero(resolver, **peers))
                .copied()
                .collect();
            let given: BTreeSet<OpPeers> = zero.iter().copied().collect();
            debug_assert_eq!(fresh, given, "the identity-0 peers of a spliced state");
        }
        Self {
            state: Arc::new(state),
            diagnostics,
            ops,
            by_peers,
            zero,
            shape: None,
        }
    }
}

/// Whether ops with `peers` hold identity 0's keys (`StateRecord::zero`).
fn selects_zero(resolver: &Resolver<'_>, peers: OpPeers) -> bool {
    match peers {
        OpPeers::Fixed(id) => id == 0,
        OpPeers::Selector(s) => resolver.cache.selection(s).contains(&0),
    }
}

/// Cilium's selector cache keeps, per selector, the identities it selects
/// and updates them when an identity appears or goes
/// (`pkg/policy/selectorcache.go`, `UpdateIdentities`). Testing every
/// selector against a new identity costs the number of selectors; this
/// index narrows it to the selectors that can match: a selector with a
/// positive requirement on a non-CIDR key needs a label with that key
/// (`Exists`) or with that key and one of its values (`In`), the reasoning
/// of `resolve::selection`; one whose only positive requirements are on
/// CIDR keys needs a CIDR label inside the prefix of one of them (a CIDR
/// requirement finds a CIDR label whose prefix its prefix contains,
/// `LabelSet::find`), so it is indexed by that prefix and an identity
/// looks up its CIDR labels' prefixes and their supernets (at most 33 or
/// 129 lookups, where a policy of 4,096 `fromCIDR` rules has 4,096 such
/// selectors); the others are always tested. Of a selector's positive
/// requirements the one with the fewest selectors indexed under it so far
/// is taken, so the namespace requirement every namespaced policy's
/// selector has does not put them all in one bucket.
#[derive(Debug, Default, Clone)]
struct PeerIndex {
    /// `In` requirements: by key, then value.
    by_value: HashMap<String, HashMap<String, Vec<SelectorId>>>,
    /// `Exists` requirements: by key.
    by_key: HashMap<String, Vec<SelectorId>>,
    /// Selectors whose positive requirements are all on CIDR keys: by the
    /// (canonical) prefix of the first one.
    cidr_by_prefix: HashMap<IpNetwork, Vec<SelectorId>>,
    /// Those whose CIDR keys name no prefix (they select nothing; kept to
    /// be tested as any other).
    cidr: Vec<SelectorId>,
    always: Vec<SelectorId>,
    /// Where each selector is indexed, by id: a renumbering renames the
    /// moved selectors in their own buckets (a pass over every bucket was
    /// a twentieth of a CIDR prefix change at 4,096 rules, session 26).
    places: Vec<Place>,
    indexed: usize,
}

/// When more than one in this many of a state's peers (or a kept bound's
/// selectors) moved, `Model::renumber_selectors` renames all of its
/// entries in one pass instead of taking the moved ones out and back.
const BULK_RENAME: usize = 4;

/// Up to this many moved selectors, [`PeerIndex::relabel`] renames each
/// in its own bucket; past it, one pass renames every bucket.
const RENAME_IN_PLACE: usize = 64;

/// A selector's bucket in the [`PeerIndex`]. The requirement is named by
/// its place among the selector's requirements (which move with it when
/// its id changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Wildcard,
    Value(usize),
    Key(usize),
    Cidr(IpNetwork),
    CidrNone,
    Always,
}

impl PeerIndex {
    /// Indexes the selectors interned since the last call.
    fn catch_up(&mut self, cache: &SelectorCache) {
        for id in self.indexed..cache.len() {
            let selector = cache.selector(id);
            if selector.is_wildcard() {
                self.places.push(Place::Wildcard);
                continue;
            }
            let mut best: Option<(usize, usize, &crate::selector::Requirement)> = None;
            let mut cidr = false;
            let mut prefix: Option<IpNetwork> = None;
            for (at, r) in selector.requirements().enumerate() {
                if !matches!(r.operator, Operator::In | Operator::Exists) {
                    continue;
                }
                if r.key.source == SOURCE_CIDR {
                    cidr = true;
                    prefix = prefix.or_else(|| parse_cidr_label_key(&r.key.key));
                    continue;
                }
                let size = match r.operator {
                    Operator::In => {
                        let values = self.by_value.get(r.key.key.as_str());
                        r.values
                            .iter()
                            .map(|v| values.and_then(|m| m.get(v.as_str())).map_or(0, Vec::len))
                            .sum()
                    }
                    _ => self.by_key.get(r.key.key.as_str()).map_or(0, Vec::len),
                };
                if best.is_none_or(|(smallest, _, _)| size < smallest) {
                    best = Some((size, at, r));
                }
            }
            let place = match best {
                Some((_, at, r)) if r.operator == Operator::In => Place::Value(at),
                Some((_, at, _)) => Place::Key(at),
                None => match prefix {
                    Some(prefix) => Place::Cidr(prefix),
                    None if cidr => Place::CidrNone,
                    None => Place::Always,
                },
            };
            self.places.push(place);
            self.each_bucket(place, selector, |list| list.push(id));
        }
        self.indexed = cache.len();
    }

    /// Calls `f` with each bucket list of a selector indexed at `place`
    /// (an `In` requirement's id is in one list per value).
    fn each_bucket(
        &mut self,
        place: Place,
        selector: &crate::selector::Selector,
        mut f: impl FnMut(&mut Vec<SelectorId>),
    ) {
        let requirement = |at: usize| selector.requirements().nth(at);
        match place {
            Place::Wildcard => {}
            Place::Value(at) => {
                if let Some(r) = requirement(at) {
                    let values = self.by_value.entry(r.key.key.clone()).or_default();
                    for value in &r.values {
                        f(values.entry(value.clone()).or_default());
                    }
                }
            }
            Place::Key(at) => {
                if let Some(r) = requirement(at) {
                    f(self.by_key.entry(r.key.key.clone()).or_default());
                }
            }
            Place::Cidr(prefix) => f(self.cidr_by_prefix.entry(prefix).or_default()),
            Place::CidrNone => f(&mut self.cidr),
            Place::Always => f(&mut self.always),
        }
    }

    /// Selectors numbered again (`moves`, a permutation of those ids;
    /// `cache` already relabelled, so each moved selector is at its new
    /// id): each keeps its bucket under its new id. Two passes, through
    /// a marked id (`!new`), so that two moved selectors of one bucket do
    /// not take each other's places.
    fn relabel(
        &mut self,
        cache: &SelectorCache,
        moves: &foldhash::HashMap<SelectorId, SelectorId>,
    ) {
        let placed: Vec<(SelectorId, SelectorId, Place)> = moves
            .iter()
            .filter_map(|(old, new)| Some((*old, *new, *self.places.get(*old)?)))
            .collect();
        if moves.len() > RENAME_IN_PLACE {
            // Many moves (a rule inserted first): one pass over every
            // bucket, each id renamed at once, costs less than a search
            // of its bucket per moved selector (one bucket may hold
            // thousands).
            let rename = |list: &mut Vec<SelectorId>| {
                for id in list {
                    if let Some(new) = moves.get(id) {
                        *id = *new;
                    }
                }
            };
            self.by_value
                .values_mut()
                .flat_map(HashMap::values_mut)
                .for_each(rename);
            self.by_key.values_mut().for_each(rename);
            self.cidr_by_prefix.values_mut().for_each(rename);
            rename(&mut self.cidr);
            rename(&mut self.always);
            for &(_, new, place) in &placed {
                if let Some(slot) = self.places.get_mut(new) {
                    *slot = place;
                }
            }
            return;
        }
        for &(old, new, place) in &placed {
            self.each_bucket(place, cache.selector(new), |list| {
                if let Some(id) = list.iter_mut().find(|id| **id == old) {
                    *id = !new;
                }
            });
        }
        for &(_, new, place) in &placed {
            self.each_bucket(place, cache.selector(new), |list| {
                if let Some(id) = list.iter_mut().find(|id| **id == !new) {
                    *id = new;
                }
            });
            if let Some(slot) = self.places.get_mut(new) {
                *slot = place;
            }
        }
    }

    /// The selectors that select an identity with `labels`, and how many
    /// were tested (the candidates).
    fn matching(&self, cache: &SelectorCache, labels: &LabelSet) -> (Vec<SelectorId>, u64) {
        let mut candidates: BTreeSet<SelectorId> = self.always.iter().copied().collect();
        let mut has_cidr = false;
        for label in labels.iter() {
            if let Some(list) = self.by_key.get(label.key.as_str()) {
                candidates.extend(list.iter().copied());
            }
            if let Some(list) = self
                .by_value
                .get(label.key.as_str())
                .and_then(|values| values.get(label.value.as_str()))
            {
                candidates.extend(list.iter().copied());
            }
            if let Some(prefix) = label.cidr_prefix() {
                has_cidr = true;
                // The selectors whose prefix contains the label's: its
                // own and its supernets'.
                for len in 0..=prefix.prefix() {
                    if let Ok(outer) = IpNetwork::new(prefix.network(), len)
                        && let Some(list) = self.cidr_by_prefix.get(&canonical_prefix(outer))
                    {
                        candidates.extend(list.iter().copied());
                    }
                }
            }
        }
        if has_cidr {
            candidates.extend(self.cidr.iter().copied());
        }
        let tested = u64::try_from(candidates.len()).unwrap_or(u64::MAX);
        let found: Vec<SelectorId> = candidates
            .into_iter()
            .filter(|id| cache.selector(*id).matches(labels))
            .collect();
        #[cfg(debug_assertions)]
        {
            let every: Vec<SelectorId> = (0..self.indexed)
                .filter(|id| cache.selector(*id).matches(labels))
                .filter(|id| !cache.selector(*id).is_wildcard())
                .collect();
            debug_assert_eq!(found, every, "the peer index misses a selector");
        }
        (found, tested)
    }

    /// Identity `id` with `labels` joins (`add`) or leaves the selections
    /// of the selectors that select `labels` ([`Self::matching`]); the kept
    /// insertion bounds follow the selections' sizes. The selectors.
    fn reselect(
        &self,
        cache: &mut SelectorCache,
        bounds: &mut KeptBounds,
        (labels, id): (&LabelSet, u32),
        add: bool,
    ) -> Vec<SelectorId> {
        let (selectors, tested) = self.matching(cache, labels);
        cache.add_work(tested);
        for &selector in &selectors {
            let before = cache.selection(selector).len();
            if add {
                cache.add_to_selection(selector, id);
            } else {
                cache.remove_from_selection(selector, id);
            }
            let after = cache.selection(selector).len();
            KeptBound::selection_changed(bounds, selector, before, after);
        }
        selectors
    }
}

/// The compiled form of a session's inputs, kept to update.
struct Model {
    lowered: Lowered,
    /// Per-text spans; `None` when lowering texts one by one (against
    /// every text's CIDR groups and log cookies) does not reproduce the
    /// whole lowering: then policy changes recompile in full.
    spans: Option<Vec<TextSpan>>,
    /// How many texts name each log value (the spans' `log_values`
    /// counted; empty without spans): whether a value loses its last use
    /// without a pass over every text.
    log_texts: BTreeMap<String, usize>,
    table: IdentityTable,
    /// Identity numbers by labels, kept with `table` (an added endpoint's
    /// number without a pass over every identity).
    numbers: IdentityNumbers,
    parts: ResolverParts,
    peer_index: PeerIndex,
    /// Rule indices by subject selector (a new identity is tested once per
    /// distinct subject, not once per rule).
    subjects: HashMap<Selector, Vec<usize>>,
    l4: BTreeMap<u32, L4Policy>,
    /// [`FeatureCounts`] of a subject's L4 policy (`l4`), when known: a
    /// rule change corrects them by the touched filters, so the ops' shape
    /// (`ops_shape`) costs the touched filters, not a pass over every
    /// filter. Dropped wherever `l4` changes otherwise.
    features: HashMap<u32, FeatureCounts>,
    /// The distinct states, indexed by the selectors their ops name.
    states: States<StateRecord>,
    /// Rule indices (ascending) by the filters they add to
    /// ([`filter_keys`]): a rule change folds only the touched filters,
    /// from only the rules that add to them.
    filter_rules: BTreeMap<(Direction, FilterKey), Vec<usize>>,
    /// `limits::insertion_bound` of a subject's L4 policy (`l4`) under the
    /// current selections, when known, with its selector weights
    /// ([`KeptBound`]): a rule change corrects it by the touched filters'
    /// terms, an identity change by the selections it changes, instead of
    /// a pass over every filter.
    bounds: KeptBounds,
    /// Whether some endpoint has a namespace (`Resolver::allows_localhost`
    /// reads it).
    any_namespace: bool,
    /// The directions a ClusterNetworkPolicy rule enforces, by endpoint
    /// identity (`Tiers::selects_in`): the batch reports them enforced.
    /// Empty without tier rules; a session with tier rules recompiles
    /// every change in full (`Model::has_tiers`).
    tier_enforced: BTreeMap<u32, (bool, bool)>,
    /// Every endpoint address (an added endpoint's duplicate check and the
    /// automatic addresses `Inventory::finish` gives one without any,
    /// without a scan of the inventory).
    addresses: AddressBook,
    /// The endpoints' storage positions by name (`super::names`): the
    /// inventory is kept in storage order, shown in name order.
    names: EndpointNames,
    /// States whose ops a renumbering of the selectors
    /// ([`Model::renumber_selectors`]) left out of the order the batch
    /// makes them in: the next refold makes them again in full.
    reordered: BTreeSet<StateKey>,
    /// Identities whose part of a state the next refold replays beside
    /// what the change itself touches: a CIDR identity that came or went
    /// with a policy prefix, in the states its selections reach
    /// ([`Session::gain_prefixes`], [`Session::lose_prefixes`]).
    replay: BTreeMap<StateKey, BTreeSet<u32>>,
    /// The CIDR pins this call changed (`Inventory::cidr_identities`:
    /// prefix, pin before), undone before a failed call's restore
    /// ([`Session::restore`]): the restore then numbers every prefix as
    /// before the call. Emptied when a policy call starts.
    pins_undo: Vec<(IpNetwork, Option<u32>)>,
}

impl Model {
    /// Numbers the rules' peer selectors again, in place, so that their
    /// ids follow their first uses in rule order as the batch's do
    /// ([`batch_order_moves`]): the cache, the rules' peer ids, the peer
    /// index, the L4 policies, the kept bounds and the states' ops take the
    /// new ids. A change that makes a selector's first use come before
    /// another's (a rule inserted at the front, a rule's peer changed to a
    /// new selector) rebuilt everything before (~100 ms at 4,096 rules);
    /// this is two passes over the rules' peer ids (the moves, then the
    /// renaming) and one over the filters of the L4 policies, plus the
    /// states whose ops name a moved selector. Those whose ops are then out
    /// of the batch's order (two selectors of one filter and key swapped),
    /// and every state with findings (their order follows the ids, and a
    /// conflicting selector's finding has no op that names it), go to
    /// [`Model::reordered`] and are made again in full by the refold.
    /// `false`, nothing changed, when an id is not the cache's.
    fn renumber_selectors(&mut self, parts: &mut ResolverParts) -> bool {
        let Some((moves, mut used)) = batch_order_moves(parts) else {
            return false;
        };
        if moves.is_empty() {
            return true;
        }
        if !parts.cache.relabel(&moves) {
            return false;
        }
        // A table by id, not the map: the rules' peer ids are thousands of
        // lookups at 4,096 rules.
        let mut table: Vec<SelectorId> = (0..parts.cache.len()).collect();
        for (old, new) in &moves {
            table[*old] = *new;
        }
        let rename = |id: SelectorId| table.get(id).copied().unwrap_or(id);
        let rename_peers = |peers: OpPeers| match peers {
            OpPeers::Selector(id) => OpPeers::Selector(rename(id)),
            fixed @ OpPeers::Fixed(_) => fixed,
        };
        // The second walk of the rules' peer ids, not part of the first
        // (`batch_order_moves`): the moves follow from every rule's first
        // uses, and nothing changes until the cache has taken them.
        for id in parts.peer_ids.iter_mut().flatten().flatten() {
            *id = rename(*id);
        }
        // The used flags by the new ids, without a third walk: the moves
        // are a permutation of valid ids (`relabel` checked), so each
        // moved id's flag goes to its new id and the rest stay.
        let flags: Vec<bool> = moves.iter().map(|(old, _)| used[*old]).collect();
        for ((_, new), flag) in moves.iter().zip(flags) {
            used[*new] = flag;
        }
        debug_assert_eq!(
            Some(&used),
            used_selectors(parts).as_ref(),
            "the used flags"
        );
        let moves: foldhash::HashMap<SelectorId, SelectorId> = moves.into_iter().collect();
        self.peer_index.relabel(&parts.cache, &moves);
        // Only the moved selectors' entries are renamed, in the filters,
        // the ops and their index, each map walking the smaller of its
        // keys and the moves (`moved_among`): two moves
        // (`one_out_of_order`) touch a few entries of a 4,096-selector
        // state, where renaming each op and making the index again was
        // half of a prefix change (session 25); 4,096 moves (a rule
        // inserted first) walk each one-selector filter's key.
        for policy in self.l4.values_mut() {
            for direction in [&mut policy.ingress, &mut policy.egress] {
                for per_selector in direction.filters.values_mut() {
                    rename_keys(per_selector, &rename, &moves);
                }
            }
        }
        self.bounds.relabel(&moves);
        let cache = &parts.cache;
        let reordered = &mut self.reordered;
        self.states.relabel(&moves, |key, record| {
            let by_peers = &record.by_peers;
            let pairs = moved_among(
                (
                    by_peers.len(),
                    by_peers.keys().filter_map(|peers| match peers {
                        OpPeers::Selector(id) => Some(*id),
                        OpPeers::Fixed(_) => None,
                    }),
                ),
                |id| by_peers.contains_key(&OpPeers::Selector(id)),
                &moves,
            );
            for peers in &mut record.zero {
                *peers = rename_peers(*peers);
            }
            if pairs.len() * BULK_RENAME > record.by_peers.len() {
                // Most of its selectors moved (a rule inserted first): one
                // pass renames every op and makes the index again, cheaper
                // than taking a quarter or more of the entries out and
                // putting them back.
                for op in &mut record.ops {
                    op.peers = rename_peers(op.peers);
                }
                record.by_peers = std::mem::take(&mut record.by_peers)
                    .into_iter()
                    .map(|(peers, list)| (rename_peers(peers), list))
                    .collect();
                if !ops_in_selector_order(&record.ops, cache, &used) {
                    reordered.insert(key.clone());
                }
                return;
            }
            let mut renamed: Vec<usize> = Vec::new();
            let mut lists: Vec<(OpPeers, Vec<usize>)> = Vec::new();
            for (old, new) in pairs {
                if let Some(list) = record.by_peers.remove(&OpPeers::Selector(old)) {
                    renamed.extend_from_slice(&list);
                    lists.push((OpPeers::Selector(new), list));
                }
            }
            for (peers, list) in lists {
                for index in &list {
                    record.ops[*index].peers = peers;
                }
                record.by_peers.insert(peers, list);
            }
            // The ops that kept their peers kept their order; only the
            // renamed ones are compared with their neighbours, the
            // nearest kept ones (`ops_in_selector_order`: unused
            // selectors' ops are passed over; they are few, those of the
            // changed rules).
            let ops = &record.ops;
            let in_order = renamed.iter().all(|&index| {
                let Some(op) = ops.get(index).filter(|op| op_used(op, &used)) else {
                    return true;
                };
                let before = ops[..index].iter().rev().find(|op| op_used(op, &used));
                let after = ops[index + 1..].iter().find(|op| op_used(op, &used));
                before.is_none_or(|before| pair_in_selector_order(before, op, cache))
                    && after.is_none_or(|after| pair_in_selector_order(op, after, cache))
            });
            if !in_order {
                reordered.insert(key.clone());
            }
        });
        // Findings are listed in id order too, and a selector whose rules
        // conflict gives a finding but no op (so the selector index above
        // does not reach its state): every state with findings is made
        // again. States with findings are few; this runs only when ids move.
        for (key, record) in self.states.iter() {
            if !record.diagnostics.is_empty() {
                self.reordered.insert(key.clone());
            }
        }
        debug_assert_eq!(
            batch_order_moves(parts).map(|(moves, _)| moves),
            Some(Vec::new()),
            "the selectors renumbered"
        );
        true
    }

    /// Whether ClusterNetworkPolicy tier rules are among the inputs: then
    /// the tiered states are the batch's (`build`), and every change
    /// recompiles in full (no spans, no incremental endpoint change).
    fn has_tiers(&self) -> bool {
        !self.lowered.tier_rules.rules.is_empty()
    }

    /// Replaces rule `index` (the subject index follows it).
    fn set_rule(&mut self, index: usize, rule: PolicyRule) {
        if self.lowered.rules[index] == rule {
            return;
        }
        if let Some(spans) = &mut self.spans {
            let at = spans.partition_point(|span| span.rules.end <= index);
            if let Some(counts) = spans
                .get_mut(at)
                .filter(|span| span.rules.contains(&index))
                .and_then(|span| span.peer_keys.as_mut())
            {
                count_peer_keys(counts, &self.lowered.rules[index], false);
                count_peer_keys(counts, &rule, true);
            }
        }
        index_filters(
            &mut self.filter_rules,
            &self.lowered.rules[index],
            index,
            false,
        );
        index_filters(&mut self.filter_rules, &rule, index, true);
        let old_subject = &self.lowered.rules[index].subject;
        if *old_subject != rule.subject {
            if let Some(list) = self.subjects.get_mut(old_subject) {
                list.retain(|r| *r != index);
                if list.is_empty() {
                    self.subjects.remove(old_subject);
                }
            }
            let list = self.subjects.entry(rule.subject.clone()).or_default();
            let at = list.partition_point(|r| *r < index);
            list.insert(at, index);
        }
        self.lowered.rules[index] = rule;
    }

    /// Counts the requirement keys of the text at `position`
    /// ([`TextSpan::peer_keys`]) if they are not yet.
    fn ensure_peer_keys(&mut self, position: usize) {
        let Some(span) = self
            .spans
            .as_mut()
            .and_then(|spans| spans.get_mut(position))
        else {
            return;
        };
        if span.peer_keys.is_none() {
            let mut counts = PeerKeys::default();
            for rule in &self.lowered.rules[span.rules.clone()] {
                count_peer_keys(&mut counts, rule, true);
            }
            span.peer_keys = Some(counts);
        }
    }
}

/// A live compilation of policy texts against an inventory, updated one
/// change at a time. See the module docs of [`crate::session`] for why
/// every [`Update`] is exact.
///
/// Each call returns the [`Update`]: per endpoint whose map changed, the
/// ordered hole-free writes (`policy_diff` of its state before and after),
/// and whether the change went the incremental way ([`UpdatePath`]). A
/// failed call leaves the session as it was. [`Session::compiled`] is the
/// whole compilation (as `compile::compile` of [`Session::inputs`] and
/// [`Session::inventory`] gives it), for an agent's first fill or a check.
///
/// # Example
///
/// ```
/// use porin_compiler::inventory::{Endpoint, Inventory, SourceLocation};
/// use porin_compiler::limits::CompileLimits;
/// use porin_compiler::session::{Session, UpdatePath};
/// use porin_model::limits::LoadLimits;
/// use porin_model::loader::load_str;
///
/// let pod = |name: &str, labels: &[(&str, &str)], ip: &str| Endpoint {
///     name: name.to_owned(),
///     namespace: Some("prod".to_owned()),
///     labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
///     ips: vec![ip.parse().unwrap()],
///     service_account: None,
///     ports: Vec::new(),
///     identity: None,
///     identity_labels: None,
///     location: SourceLocation::default(),
/// };
/// let policy = |port: u16| {
///     let text = format!(
///         "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\n\
///          metadata: {{name: db, namespace: prod}}\n\
///          spec:\n  endpointSelector: {{matchLabels: {{app: db}}}}\n  ingress:\n\
///          \x20   - fromEndpoints: [{{matchLabels: {{app: api}}}}]\n\
///          \x20     toPorts: [{{ports: [{{port: \"{port}\", protocol: TCP}}]}}]\n"
///     );
///     load_str("db.yaml", &text, &LoadLimits::default())
/// };
/// let mut inventory = Inventory::new();
/// inventory.endpoints.push(pod("db", &[("app", "db")], "10.0.0.1"));
/// let mut session = Session::with_policies(
///     inventory,
///     vec![("db.yaml".to_owned(), policy(5432))],
///     CompileLimits::default(),
/// )?;
///
/// // A pod with new labels that the policy's peer selector matches.
/// let update = session.add_endpoint(pod("api-1", &[("app", "api"), ("pod", "1")], "10.0.0.2"))?;
/// assert_eq!(update.path, UpdatePath::Incremental);
/// let db = update.deltas.iter().find(|d| d.endpoint == "prod/db").unwrap();
/// assert!(!db.changes.is_empty()); // the keys for api-1's identity
///
/// // A one-rule change.
/// let update = session.set_policy("db.yaml", policy(5433))?;
/// assert_eq!(update.path, UpdatePath::Incremental);
/// # Ok::<(), porin_compiler::session::SessionError>(())
/// ```
pub struct Session {
    limits: CompileLimits,
    texts: Vec<PolicyText>,
    inventory: Inventory,
    model: Model,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("texts", &self.texts.len())
            .field("endpoints", &self.inventory.endpoints.len())
            .field("states", &self.model.states.len())
            .finish_non_exhaustive()
    }
}

fn describe(origins: &[Origin], id: u32) -> String {
    usize::try_from(id)
        .ok()
        .and_then(|i| origins.get(i))
        .map_or_else(|| format!("origin {id}"), Origin::describe)
}

fn state_key(endpoint: &Endpoint, identity: u32) -> StateKey {
    (identity, endpoint.ports.clone())
}

impl Session {
    /// A session over `inventory` (finished here) with no policies, under
    /// `limits`.
    pub fn new(mut inventory: Inventory, limits: CompileLimits) -> Result<Self, CompileError> {
        inventory.finish()?;
        let (model, inventory) = build(&[], inventory, &limits)?;
        Ok(Self {
            limits,
            texts: Vec::new(),
            inventory,
            model,
        })
    }

    /// A session over `inventory` with the policy texts `texts` (name,
    /// loaded text), compiled once: adding texts one by one recompiles at
    /// each (a new text is not an incremental change).
    pub fn with_policies(
        inventory: Inventory,
        texts: Vec<(String, LoadOutcome)>,
        limits: CompileLimits,
    ) -> Result<Self, SessionError> {
        let texts = texts
            .into_iter()
            .map(|(name, outcome)| (name, outcome, None))
            .collect();
        Self::with_texts(inventory, texts, limits)
    }

    /// [`Self::with_policies`], each text with how it was loaded when
    /// known (`Session::with_policy_texts`).
    pub(super) fn with_texts(
        mut inventory: Inventory,
        texts: Vec<(String, LoadOutcome, Option<Reparse>)>,
        limits: CompileLimits,
    ) -> Result<Self, SessionError> {
        let mut names = BTreeSet::new();
        let mut kept = Vec::with_capacity(texts.len());
        for (name, outcome, reparse) in texts {
            if outcome.has_errors() {
                return Err(SessionError::Policy(outcome.diagnostics));
            }
            if !names.insert(name.clone()) {
                return Err(SessionError::DuplicateText(name));
            }
            kept.push(PolicyText {
                name,
                outcome,
                reparse,
            });
        }
        inventory.finish()?;
        let inputs: Vec<PolicyInput<'_>> = kept
            .iter()
            .flat_map(|t| PolicyInput::from_outcome(&t.outcome))
            .collect();
        let (model, inventory) = build_with_spans(&kept, &inputs, inventory, &limits)?;
        drop(inputs);
        Ok(Self {
            limits,
            texts: kept,
            inventory,
            model,
        })
    }

    /// The inventory as the session holds it (finished; identity numbers
    /// pinned as given numbers), its endpoints in name order as
    /// `Inventory::finish` leaves them: what a batch compile of
    /// [`Self::inputs`] takes to give [`Self::compiled`]. Borrowed while
    /// the session's storage order (`super::names`: adds append, a removal
    /// moves the last endpoint into the gap) is that order, else a copy
    /// in name order.
    pub fn inventory(&self) -> std::borrow::Cow<'_, Inventory> {
        match self.name_order() {
            None => std::borrow::Cow::Borrowed(&self.inventory),
            Some(order) => std::borrow::Cow::Owned(self.reordered_inventory(&order)),
        }
    }

    /// The storage positions in name order, when that is not the storage
    /// order itself.
    fn name_order(&self) -> Option<Vec<usize>> {
        (!self.model.names.is_sorted()).then(|| self.model.names.in_order().collect())
    }

    /// The inventory with its endpoints in `order` (storage positions).
    fn reordered_inventory(&self, order: &[usize]) -> Inventory {
        let mut inventory = self.inventory.clone();
        let mut slots: Vec<Option<Endpoint>> = std::mem::take(&mut inventory.endpoints)
            .into_iter()
            .map(Some)
            .collect();
        inventory.endpoints = order
            .iter()
            .filter_map(|&index| slots.get_mut(index)?.take())
            .collect();
        inventory
    }

    /// Every policy input of the session, in text order (what a batch
    /// compile of the same policies takes).
    pub fn inputs(&self) -> Vec<PolicyInput<'_>> {
        self.texts
            .iter()
            .flat_map(|t| PolicyInput::from_outcome(&t.outcome))
            .collect()
    }

    /// Names of the policy texts, in order.
    pub fn text_names(&self) -> Vec<&str> {
        self.texts.iter().map(|t| t.name.as_str()).collect()
    }

    /// The current map state of an endpoint (`namespace/name` or `name`).
    pub fn state(&self, reference: &str) -> Option<&Arc<MapState>> {
        let index = self.endpoint_reference(reference)?;
        let endpoint = &self.inventory.endpoints[index];
        let identity = *self.model.table.endpoint_identity.get(index)?;
        self.model
            .states
            .get(&state_key(endpoint, identity))
            .map(|r| &r.state)
    }

    /// The whole compilation as [`crate::compile::compile`] would give it
    /// for [`Self::inputs`] and [`Self::inventory`] (the property test
    /// checks that it does). Linear in the size of the cluster: an agent
    /// applies [`Update::deltas`] instead.
    pub fn compiled(&self) -> Compiled {
        let model = &self.model;
        // In name order, as the batch compile gives it.
        let order = self.name_order();
        let (inventory, table) = match &order {
            None => (
                std::borrow::Cow::Borrowed(&self.inventory),
                std::borrow::Cow::Borrowed(&model.table),
            ),
            Some(order) => (
                std::borrow::Cow::Owned(self.reordered_inventory(order)),
                std::borrow::Cow::Owned(model.table.reordered(order)),
            ),
        };
        let mut endpoints = Vec::with_capacity(inventory.endpoints.len());
        for (index, endpoint) in inventory.endpoints.iter().enumerate() {
            let identity = table.endpoint_identity.get(index).copied().unwrap_or(0);
            let policy = model.l4.get(&identity);
            let record = model.states.get(&state_key(endpoint, identity));
            endpoints.push(EndpointPolicy {
                name: endpoint.name.clone(),
                namespace: endpoint.namespace.clone(),
                identity,
                labels: model
                    .table
                    .get(identity)
                    .map(|i| i.labels.clone())
                    .unwrap_or_default(),
                ips: endpoint.ips.clone(),
                // A ClusterNetworkPolicy rule selecting the endpoint
                // enforces its direction too, as in the batch.
                enforcement: {
                    let (ingress, egress) = model
                        .tier_enforced
                        .get(&identity)
                        .copied()
                        .unwrap_or_default();
                    Enforcement {
                        ingress: ingress || policy.is_some_and(|p| p.ingress.enforced),
                        egress: egress || policy.is_some_and(|p| p.egress.enforced),
                    }
                },
                diagnostics: record.map(|r| r.diagnostics.clone()).unwrap_or_default(),
                state: record.map_or_else(|| Arc::new(MapState::new()), |r| r.state.clone()),
                selected_by: SelectedBy::of(
                    &model.lowered.rules,
                    model
                        .parts
                        .rules_by_identity
                        .get(&identity)
                        .map_or(&[][..], Vec::as_slice),
                ),
            });
        }
        let mut selecting = BTreeSet::new();
        for id in model
            .table
            .endpoint_identity
            .iter()
            .collect::<BTreeSet<_>>()
        {
            if let Some(rules) = model.parts.rules_by_identity.get(id) {
                for rule in rules {
                    selecting.insert(model.lowered.rules[*rule].origin);
                }
            }
        }
        let mut diagnostics = model.lowered.diagnostics.clone();
        diagnostics.extend(selects_nothing(&model.lowered, &selecting));
        Compiled {
            cluster: self.inventory.cluster.clone(),
            identities: table.identities.clone(),
            endpoints,
            ipcache: build_ipcache(&inventory, &table),
            origins: model.lowered.origins.clone(),
            diagnostics,
            nodes: self.inventory.nodes.clone(),
            mutual_auth: self.inventory.settings.mesh_auth_mutual_enabled,
            extended_ip_protocols: self.inventory.settings.enable_extended_ip_protocols,
        }
    }

    /// Adds the policy text `name` (a file's documents), or replaces the
    /// text of that name. A text with errors is refused with its
    /// diagnostics and changes nothing.
    pub fn set_policy(&mut self, name: &str, outcome: LoadOutcome) -> Result<Update, SessionError> {
        self.begin_update();
        if outcome.has_errors() {
            return Err(SessionError::Policy(outcome.diagnostics));
        }
        let position = self.texts.iter().position(|t| t.name == name);
        let text = PolicyText {
            name: name.to_owned(),
            outcome,
            reparse: None,
        };
        let Some(position) = position else {
            self.texts.push(text);
            let added = self.append_text();
            let result = self.or_rebuild(added, "a policy text was added");
            if result.is_err() {
                self.texts.pop();
                // Back to the previous inputs, exactly (fail closed).
                self.restore()?;
            }
            return result;
        };
        let previous = std::mem::replace(&mut self.texts[position], text);
        // A CIDR group's labels reach the CIDR identities of every text
        // (and its prefixes are its own): a text whose groups change is
        // compiled in full. Its other changes read the groups as they were.
        // Log cookies are numbered over every text's log values: a change
        // of which values the texts name renumbers them, in full.
        let log_values = text_log_values(&self.texts[position].outcome);
        let kept = own_groups(&previous.outcome) == own_groups(&self.texts[position].outcome)
            && self.cookies_kept(Some(position), &log_values);
        let result = if kept {
            // The text's values now (every way but success rebuilds).
            self.set_log_values(position, log_values);
            self.change_text(position, &previous.outcome)
        } else {
            Ok(None)
        };
        let result = self.or_rebuild(result, "the change is not local to its rules");
        if result.is_err() {
            self.texts[position] = previous;
            // Back to the previous inputs, exactly (fail closed).
            self.restore()?;
        } else {
            drop_later(previous);
        }
        result
    }

    /// The text at `position` changed from `previous`, its CIDR groups and
    /// the texts' log values as they were ([`Self::set_policy`]): the
    /// changed items replaced, or an item inserted or removed and the later
    /// rules moved, or the whole text lowered again. `None`: not local (the
    /// caller recompiles in full).
    fn change_text(
        &mut self,
        position: usize,
        previous: &LoadOutcome,
    ) -> Result<Option<Update>, SessionError> {
        let items = self.changed_items(position, previous);
        // A rule item inserted or removed: the rules after it move.
        let moved = match items {
            Some(_) => None,
            None => self
                .moved_item(position, previous)
                .map(|moved| self.settle_removal(position, moved)),
        };
        match moved {
            Some(moved) => self.move_item(position, moved).inspect(|update| {
                if update.is_some() {
                    self.debug_check_lowering();
                }
            }),
            None => {
                let lines_moved = items.as_ref().is_some_and(|c| c.lines != Lines::Same);
                self.replace_text(position, items).inspect(|update| {
                    if update.is_some() && lines_moved {
                        self.debug_check_lowering();
                    }
                })
            }
        }
    }

    /// The outcome the session holds for the policy text `name` (as given
    /// to [`Session::set_policy`], or as edits made it), to plan an
    /// in-place edit against ([`porin_model::reparse::plan`]).
    pub fn policy(&self, name: &str) -> Option<&LoadOutcome> {
        self.texts
            .iter()
            .find(|t| t.name == name)
            .map(|t| &t.outcome)
    }

    /// Replaces the policy text `name` by an edit of it, planned by
    /// [`porin_model::reparse::plan`] against [`Session::policy`]: the
    /// outcome becomes the one a full load of the new text gives (the
    /// reparse's guarantee), so the update is the one [`Session::set_policy`]
    /// would give with it, exactly. The edited item is the only one
    /// lowered again (no comparison of the texts); when the edit added or
    /// removed lines, the other items' origins move their lines by the
    /// reparse's shift (`super::items::Lines::Shift`). `None`, with
    /// nothing changed, when there is no such text or the edit does not
    /// fit it (the caller loads the text in full). A text with errors is
    /// refused as by `set_policy` (the reparse never gives one).
    pub fn edit_policy(
        &mut self,
        name: &str,
        edit: porin_model::reparse::Edit,
    ) -> Option<Result<Update, SessionError>> {
        let result = self.edit_text(name, edit)?;
        // The caller planned the edit under limits and a target the
        // session does not know: the text's kept load (and its parse's
        // budget, which the edit changed) no longer describes it.
        self.set_reparse(name, None);
        Some(result)
    }

    /// How the text `name` was loaded, when it was applied as bytes and
    /// not changed otherwise since ([`Session::apply_policy_text`]).
    pub(super) fn reparse_of(&self, name: &str) -> Option<&Reparse> {
        self.texts
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.reparse.as_ref())
    }

    /// Takes out how the text `name` was loaded (it is then not known).
    pub(super) fn take_reparse(&mut self, name: &str) -> Option<Reparse> {
        self.texts
            .iter_mut()
            .find(|t| t.name == name)
            .and_then(|t| t.reparse.take())
    }

    /// Records how the text `name` (which the session holds) was loaded
    /// (`None`: not known).
    pub(super) fn set_reparse(&mut self, name: &str, reparse: Option<Reparse>) {
        if let Some(text) = self.texts.iter_mut().find(|t| t.name == name) {
            text.reparse = reparse;
        }
    }

    /// [`Self::edit_policy`], the text's kept load left as it is (the
    /// caller updates it: [`Session::apply_policy_text`]).
    pub(super) fn edit_text(
        &mut self,
        name: &str,
        edit: porin_model::reparse::Edit,
    ) -> Option<Result<Update, SessionError>> {
        let position = self.texts.iter().position(|t| t.name == name)?;
        self.begin_update();
        if edit.kind() != EditKind::Replace {
            return self.edit_moving(position, edit);
        }
        // The text's rule count and first origin id, when its lowering
        // can take one item in place (not the span's prefix set: this is
        // the agent's per-change path).
        let span = self
            .model
            .spans
            .as_ref()
            .and_then(|spans| spans.get(position))
            .filter(|span| span.diagnostics.is_empty() && span.rules.len() == span.origins.len())
            .map(|span| (span.rules.len(), span.origins.start));
        // The lines after the edited item moved by what the edit added or
        // removed (the reparse's shift of the tree): every other item's
        // origin moves with its node.
        let lines = match edit.shift() {
            Some((from, by)) => Lines::Shift { from, by },
            None => Lines::Same,
        };
        let text = &self.texts[position];
        let prepared = span.and_then(|(rules, _)| {
            super::items::EditedItem::prepare(&text.outcome, edit.at(), self.scope(), rules)
        });
        let lines_moved = lines != Lines::Same;
        let (inverse, line_shift) = edit.apply_deferred(&mut self.texts[position].outcome)?;
        if self.texts[position].outcome.has_errors() {
            // As `set_policy` refuses it (a session's texts have none, and
            // an edit adds none: this is defence in depth).
            line_shift.run(&mut self.texts[position].outcome);
            let _ = inverse.apply(&mut self.texts[position].outcome);
            return Some(Err(SessionError::Policy(
                self.texts[position].outcome.diagnostics.clone(),
            )));
        }
        // The item is lowered before the later lines move (it reads the
        // new item and what comes before it only); the shift then runs
        // beside the rule's replacement when many items follow, as in
        // `Self::edit_moving`. Without an item the whole text is lowered
        // again, which reads every line: the shift comes first.
        let items = match (prepared, span) {
            (Some(prepared), Some((_, first_origin))) => prepared.finish(
                &self.texts[position].outcome,
                self.scope(),
                first_origin,
                lines,
            ),
            _ => None,
        };
        // An item whose prefixes changed may need the text lowered for its
        // prefix set (`Self::item_prefixes`), which reads the outcome that
        // a shift beside the work holds: the shift comes first then.
        let following = match (&items, span) {
            (Some(changed), Some((rules, _)))
                if changed.items.iter().all(|i| i.prefixes == i.named_before) =>
            {
                changed
                    .items
                    .first()
                    .map_or(0, |item| rules.saturating_sub(item.position + 1))
            }
            _ => 0,
        };
        let replaced = self.beside_shift(position, line_shift, following, |session| {
            session.replace_text(position, items)
        });
        if lines_moved && matches!(replaced, Ok(Some(_))) {
            self.debug_check_lowering();
        }
        let result = self.or_rebuild(replaced, "the change is not local to its rules");
        if result.is_err() {
            // Back to the previous inputs, exactly (fail closed). The
            // inverse of an edit applies to the outcome the edit made (the
            // same slots), so this never gives `None`.
            let _ = inverse.apply(&mut self.texts[position].outcome);
            if let Err(e) = self.restore() {
                return Some(Err(e));
            }
        }
        // (The inverse holds the old text: one allocation, freed here.)
        Some(result)
    }

    /// Runs `line_shift` (the re-parse's move of the later lines, on the
    /// outcome of the text at `position`) and `work` (on the compiled
    /// model), `following` items after the edit: side by side, the shift
    /// on a rayon worker, when at least [`PARALLEL_SHIFT_ITEMS`] follow
    /// and the shift moves anything; else the shift first. `work` must
    /// not read that text's outcome, which is taken out meanwhile. It goes
    /// back whatever happens: a panic on either side is raised again only
    /// after that (the C API catches panics and keeps the session; a text
    /// left empty would compile without its rules, its deny rules too).
    fn beside_shift<R>(
        &mut self,
        position: usize,
        line_shift: LineShift,
        following: usize,
        work: impl FnOnce(&mut Self) -> R,
    ) -> R {
        if following < PARALLEL_SHIFT_ITEMS || line_shift.is_empty() {
            line_shift.run(&mut self.texts[position].outcome);
            return work(self);
        }
        let mut outcome = std::mem::take(&mut self.texts[position].outcome);
        // `in_place_scope` returns, or unwinds, once the spawned shift
        // has finished.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rayon::in_place_scope(|scope| {
                scope.spawn(|_| line_shift.run(&mut outcome));
                #[cfg(test)]
                if PANIC_BESIDE_SHIFT.with(std::cell::Cell::get) {
                    panic!("a test's panic beside the shift");
                }
                work(&mut *self)
            })
        }));
        self.texts[position].outcome = outcome;
        result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// [`Self::edit_policy`] for an edit that inserts or removes one rule
    /// item: the move of [`Self::move_item`], its place and inserted item
    /// from the edit ([`MovedByEdit`]) instead of a comparison of every
    /// item, the later origins' lines shifted as the re-parse shifted the
    /// tree. `None`, nothing changed, when the text's items do not each
    /// lower to one rule (the caller loads the text in full).
    fn edit_moving(
        &mut self,
        position: usize,
        edit: porin_model::reparse::Edit,
    ) -> Option<Result<Update, SessionError>> {
        let (items, origin_start) = self.item_span(position)?;
        let inserted = edit.kind() == EditKind::Insert;
        let lines = match edit.shift() {
            Some((from, by)) => Lines::Shift { from, by },
            None => Lines::Same,
        };
        let spot = MovedByEdit::prepare(
            &self.texts[position].outcome,
            edit.at(),
            self.scope(),
            items,
            inserted,
        )?;
        // The tree's later positions move after the item is lowered (it
        // reads the new item and what comes before it only), beside the
        // move of the compiled rules when many items follow: the two
        // passes are each linear in the items after it, on separate data.
        let (inverse, line_shift) = edit.apply_deferred(&mut self.texts[position].outcome)?;
        // (Before the shift: a removal may lower the new text for its
        // prefixes, which reads no position.)
        let moved = spot
            .finish(
                &self.texts[position].outcome,
                self.scope(),
                origin_start,
                lines,
            )
            .map(|moved| self.settle_removal(position, moved));
        // Every later item of the text, in any section or document.
        let following = moved
            .as_ref()
            .map_or(0, |moved| items.saturating_sub(moved.position));
        let moved = self.beside_shift(position, line_shift, following, |session| {
            moved.map(|moved| session.move_item(position, moved))
        });
        if let Some(Ok(Some(_))) = &moved {
            self.debug_check_lowering();
        }
        let result = match moved {
            Some(Ok(Some(update))) => Ok(update),
            Some(Ok(None)) | None => self.rebuild("the change is not local to its rules"),
            Some(Err(e)) => Err(e),
        };
        if result.is_err() {
            // Back to the previous inputs, exactly (fail closed).
            let _ = inverse.apply(&mut self.texts[position].outcome);
            if let Err(e) = self.restore() {
                return Some(Err(e));
            }
        }
        Some(result)
    }

    /// Removes the policy text `name`; `None` when there is none.
    pub fn remove_policy(&mut self, name: &str) -> Option<Result<Update, SessionError>> {
        let position = self.texts.iter().position(|t| t.name == name)?;
        self.begin_update();
        let removed = self.texts.remove(position);
        // A CIDR group's labels reach every text's CIDR identities: a text
        // with groups goes by a full rebuild.
        let cut = if own_groups(&removed.outcome).is_empty()
            && self.cookies_kept(Some(position), &BTreeSet::new())
        {
            self.cut_text(position)
        } else {
            Ok(None)
        };
        let result = self.or_rebuild(cut, "a policy text was removed");
        if result.is_err() {
            self.texts.insert(position, removed);
            let _ = self.restore();
        } else {
            drop_later(removed);
        }
        Some(result)
    }

    /// What every update does first: forgets the last update's pins to
    /// undo, and counts the selector work from zero under the budget
    /// (`CompileLimits::check_update_work`).
    fn begin_update(&mut self) {
        self.model.pins_undo.clear();
        self.model
            .parts
            .cache
            .count_from_now(Some(self.limits.max_selector_evaluations));
    }

    /// Adds one endpoint.
    pub fn add_endpoint(&mut self, endpoint: Endpoint) -> Result<Update, SessionError> {
        if self
            .endpoint_index(endpoint.namespace.as_deref(), &endpoint.name)
            .is_some()
        {
            return Err(SessionError::Inventory(InventoryError::Invalid {
                file: endpoint.location.file.clone(),
                line: endpoint.location.line,
                message: format!("duplicate endpoint `{}`", endpoint.display_name()),
            }));
        }
        self.begin_update();
        let reason = match self.add_endpoint_incrementally(&endpoint) {
            Ok(Some(update)) => return Ok(update),
            Ok(None) => "the endpoint needs a full allocation",
            Err(e) => {
                // Back to the inventory before the call (a namespace entry
                // it added stays: it names no endpoint, so it changes no
                // identity), recompiled in full.
                self.inventory
                    .endpoints
                    .retain(|e| !(e.namespace == endpoint.namespace && e.name == endpoint.name));
                self.rebuild_held()?;
                // The add's own tests counted over the budget (it tests
                // every distinct subject, where the batch's label index
                // narrows them): the batch compile decides.
                if !matches!(
                    e,
                    SessionError::Compile(CompileError::Limit {
                        limit: crate::limits::Limit::SelectorEvaluations,
                        ..
                    })
                ) {
                    return Err(e);
                }
                "the endpoint's selector tests are over the budget"
            }
        };
        let mut inventory = self.inventory.clone();
        inventory.endpoints.push(endpoint);
        self.replace_inventory(inventory, reason)
    }

    /// Removes the endpoint `namespace/name` (or `name`); `None` when there
    /// is none.
    pub fn remove_endpoint(&mut self, reference: &str) -> Option<Result<Update, SessionError>> {
        let index = self.endpoint_reference(reference)?;
        Some(match self.remove_endpoint_incrementally(index) {
            Some(update) => Ok(update),
            None => {
                let mut inventory = self.inventory.clone();
                inventory.endpoints.remove(index);
                self.replace_inventory(inventory, "the removal needs a full allocation")
            }
        })
    }

    /// Replaces the whole inventory (a full recompile).
    pub fn replace_inventory(
        &mut self,
        mut inventory: Inventory,
        reason: &'static str,
    ) -> Result<Update, SessionError> {
        inventory.finish()?;
        if inventory.cidr_identities.is_empty() {
            // A caller's inventory carries no pins (no input format sets
            // them): the prefixes keep their numbers across it.
            inventory
                .cidr_identities
                .clone_from(&self.inventory.cidr_identities);
        }
        let old = self.endpoint_states();
        let previous = std::mem::replace(&mut self.inventory, inventory);
        let result = self.rebuild_from(old, reason, false);
        if result.is_err() {
            self.inventory = previous;
            let _ = self.rebuild_held();
        }
        result
    }

    /// The update an incremental step gave, else (`Ok(None)`) a full
    /// rebuild for `reason`.
    fn or_rebuild(
        &mut self,
        step: Result<Option<Update>, SessionError>,
        reason: &'static str,
    ) -> Result<Update, SessionError> {
        match step {
            Ok(Some(update)) => Ok(update),
            Ok(None) => self.rebuild(reason),
            Err(e) => Err(e),
        }
    }

    /// A failed policy call's way back (its texts already put back): the
    /// CIDR pins it changed are undone, then everything is recompiled, so
    /// every prefix keeps the number it had before the call (the pins of
    /// prefixes it took out would otherwise be gone, and the allocation
    /// would number them afresh).
    fn restore(&mut self) -> Result<Update, SessionError> {
        while let Some((prefix, before)) = self.model.pins_undo.pop() {
            match before {
                Some(id) => self.inventory.cidr_identities.insert(prefix, id),
                None => self.inventory.cidr_identities.remove(&prefix),
            };
        }
        self.rebuild_held()
    }

    /// Recompiles everything and gives the difference to the previous
    /// states.
    fn rebuild(&mut self, reason: &'static str) -> Result<Update, SessionError> {
        let old = self.endpoint_states();
        self.rebuild_from(old, reason, false)
    }

    /// [`Self::rebuild`] of inputs the session held before a failed call
    /// (a restore), without the selector budget: updates are each counted
    /// on their own (`CompileLimits::check_update_work`), so inputs that
    /// came through them may cost a batch compile more than the budget,
    /// and a restore that the budget refused would leave the failed call's
    /// model in place.
    fn rebuild_held(&mut self) -> Result<Update, SessionError> {
        let old = self.endpoint_states();
        self.rebuild_from(old, "restore", true)
    }

    /// [`Self::rebuild`] given the states before the change (`held`: of
    /// inputs the session held before, [`Self::rebuild_held`]).
    fn rebuild_from(
        &mut self,
        old: Vec<(String, u32, Arc<MapState>)>,
        reason: &'static str,
        held: bool,
    ) -> Result<Update, SessionError> {
        let inputs: Vec<PolicyInput<'_>> = self
            .texts
            .iter()
            .flat_map(|t| PolicyInput::from_outcome(&t.outcome))
            .collect();
        // Inputs held before: without the selector budget (`Self::rebuild_held`).
        let unbudgeted;
        let limits = if held {
            unbudgeted = CompileLimits {
                max_selector_evaluations: u64::MAX,
                ..self.limits.clone()
            };
            &unbudgeted
        } else {
            &self.limits
        };
        let (model, inventory) =
            build_with_spans(&self.texts, &inputs, self.inventory.clone(), limits)?;
        drop(inputs);
        self.model = model;
        self.inventory = inventory;
        let new = self.endpoint_states();
        let mut update = Update {
            deltas: whole_differences(&old, &new),
            path: UpdatePath::Full(reason),
            states_folded: self.model.states.len(),
            identities_replayed: 0,
            rules_lowered: self.model.lowered.rules.len(),
            items_compared: 0,
        };
        update.deltas.sort_by_key(|d| !d.removed);
        Ok(update)
    }

    /// Every endpoint's name, identity and state, in name order.
    fn endpoint_states(&self) -> Vec<(String, u32, Arc<MapState>)> {
        self.model
            .names
            .in_order()
            .filter_map(|index| Some((index, self.inventory.endpoints.get(index)?)))
            .map(|(index, endpoint)| {
                let identity = self
                    .model
                    .table
                    .endpoint_identity
                    .get(index)
                    .copied()
                    .unwrap_or(0);
                let state = self
                    .model
                    .states
                    .get(&state_key(endpoint, identity))
                    .map_or_else(|| Arc::new(MapState::new()), |r| r.state.clone());
                (endpoint.display_name(), identity, state)
            })
            .collect()
    }

    /// The items of the text at `position` that differ from `previous`
    /// (its outcome before), lowered, when that is exact
    /// (`items::changed_items`).
    fn changed_items(&self, position: usize, previous: &LoadOutcome) -> Option<ChangedItems> {
        let (items, origin_start) = self.item_span(position)?;
        super::items::changed_items(
            previous,
            &self.texts[position].outcome,
            self.scope(),
            items,
            origin_start,
        )
    }

    /// The number of items and the first origin id of the text at
    /// `position`, when each of its items lowered to one rule and one
    /// origin without findings (what `super::items` compares against).
    fn item_span(&self, position: usize) -> Option<(usize, usize)> {
        let span = self.span(position)?;
        (span.diagnostics.is_empty() && span.rules.len() == span.origins.len())
            .then_some((span.rules.len(), span.origins.start))
    }

    /// The span of the text at `position` in the whole lowering, when the
    /// session keeps spans.
    fn span(&self, position: usize) -> Option<&TextSpan> {
        self.model.spans.as_ref()?.get(position)
    }

    /// The item the text at `position` gained or lost against `previous`
    /// (its outcome before), when that is the only change
    /// (`items::moved_item`).
    fn moved_item(&self, position: usize, previous: &LoadOutcome) -> Option<MovedItem> {
        let (items, origin_start) = self.item_span(position)?;
        super::items::moved_item(
            previous,
            &self.texts[position].outcome,
            self.scope(),
            items,
            origin_start,
        )
    }

    /// The text at `position` changed: recompute only the rules it lowers
    /// to and the states they reach; `items`, when given, are the only
    /// items that may differ, lowered (`changed_items`, `EditedItem`),
    /// else the whole text is lowered again. `None`: not local (the caller
    /// recompiles in full).
    fn replace_text(
        &mut self,
        position: usize,
        items: Option<ChangedItems>,
    ) -> Result<Option<Update>, SessionError> {
        let Some(span) = self.span(position).map(TextSpan::ranges) else {
            return Ok(None);
        };
        let text = &self.texts[position];
        let (items, compared, lines) = match items {
            Some(c) => (Some(c.items), Some(c.compared), c.lines),
            None => (None, None, Lines::Same),
        };
        let mut changed: Vec<usize> = Vec::new();
        // The changed rules whose subject (selector and host flag, all that
        // `Resolver::new` selects subjects by) is the same: they select the
        // same identities as before.
        let mut same_subject: BTreeSet<usize> = BTreeSet::new();
        let same_subjects =
            |a: &PolicyRule, b: &PolicyRule| a.host == b.host && a.subject == b.subject;
        // The filters the changed rules add to, before and after (and the
        // L3-only filters, which the synthetic allow-all and the
        // directions' default deny reach): only these filters of a subject's
        // L4 policy can differ (and in them, the policies of the changed
        // rules' peers only: `old_peers` are those before, while their
        // number is small).
        let mut touched = Touched::l3();
        let mut old_peers = OldPeers::new();
        let mut origins_changed = false;
        let rules_lowered = items.as_ref().map_or(span.rules.len(), Vec::len);
        let prefixes_incremental = self.prefixes_incremental();
        // What the text's prefix set lost and gained, when it changed.
        let mut prefix_change: Option<PrefixDelta> = None;
        let model = &mut self.model;
        if let Some(items) = items {
            // Lines moved: every other item's origin is the same but for
            // its line (`super::items::Lines`); the changed items' origins
            // are replaced below by their lowering's.
            let text_origins = &mut model.lowered.origins[span.origins.clone()];
            match &lines {
                Lines::Same => {}
                Lines::Read(lines) => {
                    for (at, line) in lines {
                        if let Some(origin) = text_origins.get_mut(*at)
                            && origin.line != *line
                        {
                            origin.line = *line;
                            origins_changed = true;
                        }
                    }
                }
                Lines::Shift { .. } => {
                    for origin in text_origins {
                        let line = lines.shifted(origin.line);
                        if origin.line != line {
                            origin.line = line;
                            origins_changed = true;
                        }
                    }
                }
            }
            // The prefixes the changed items named before and name now.
            let (mut named_before, mut named) = (BTreeSet::new(), BTreeSet::new());
            for item in items {
                named_before.extend(item.named_before);
                named.extend(item.prefixes);
                let index = span.rules.start + item.position;
                if model.lowered.rules[index] != item.rule {
                    changed.push(index);
                    if same_subjects(&model.lowered.rules[index], &item.rule) {
                        same_subject.insert(index);
                    }
                    touched
                        .filters
                        .extend(filter_keys(&model.lowered.rules[index]));
                    touched.filters.extend(filter_keys(&item.rule));
                    old_peers.add([&model.lowered.rules[index]]);
                    model.set_rule(index, item.rule);
                }
                let at = span.origins.start + item.position;
                if model.lowered.origins[at] != item.origin {
                    origins_changed = true;
                    model.lowered.origins[at] = item.origin;
                }
            }
            if named_before != named {
                self.model.ensure_peer_keys(position);
                let Some(delta) =
                    self.item_prefixes(position, named_before.difference(&named), &named)
                else {
                    return Ok(None);
                };
                if !delta.removed.is_empty() || !delta.added.is_empty() {
                    if !prefixes_incremental {
                        // Only the rules were replaced; the caller
                        // recompiles in full.
                        return Ok(None);
                    }
                    prefix_change = Some(delta);
                }
            }
        } else {
            let lowering = lower_text(
                text,
                model.lowered.scope(&self.inventory),
                span.origins.start,
            );
            let Some(span_prefixes) = model
                .spans
                .as_ref()
                .and_then(|spans| spans.get(position))
                .map(|span| &span.prefixes)
            else {
                return Ok(None);
            };
            // Tier rules are their own layer: not replaced here (as in
            // `Self::append_text`). The text's CIDR groups are the ones it
            // had (`Session::set_policy`; an in-place edit is inside a
            // rule's item).
            if lowering.rules.iter().any(|rule| rule.tier.is_some())
                || !model.lowered.tier_rules.rules.is_empty()
                || lowering.rules.len() != span.rules.len()
                || lowering.origins.len() != span.origins.len()
                || (lowering.prefixes != *span_prefixes && !prefixes_incremental)
            {
                return Ok(None);
            }
            if lowering.prefixes != *span_prefixes {
                // Their CIDR identities follow once the rules' peers are
                // interned (below).
                prefix_change = Some(PrefixDelta::between(span_prefixes, &lowering.prefixes));
            }
            // The text was lowered alone (bounded by the load limits), so
            // `check_inputs` (which bounds lowering) is not needed; the
            // lowered rules are checked below.
            changed = span
                .rules
                .clone()
                .zip(&lowering.rules)
                .filter(|(index, rule)| model.lowered.rules[*index] != **rule)
                .map(|(index, _)| index)
                .collect();
            origins_changed = model.lowered.origins[span.origins.clone()] != lowering.origins[..];
            for &index in &changed {
                let (before, after) = (
                    &model.lowered.rules[index],
                    &lowering.rules[index - span.rules.start],
                );
                touched.filters.extend(filter_keys(before));
                touched.filters.extend(filter_keys(after));
                old_peers.add([before]);
                if same_subjects(before, after) {
                    same_subject.insert(index);
                }
            }
            // Splice the text's lowering in.
            for (index, rule) in span.rules.clone().zip(lowering.rules) {
                model.set_rule(index, rule);
            }
            for (index, origin) in span.origins.clone().zip(lowering.origins) {
                model.lowered.origins[index] = origin;
            }
            let grown = lowering.diagnostics.len();
            model
                .lowered
                .diagnostics
                .splice(span.diagnostics.clone(), lowering.diagnostics);
            if let Some(spans) = &mut model.spans {
                let delta = grown as isize - span.diagnostics.len() as isize;
                spans[position].diagnostics =
                    span.diagnostics.start..span.diagnostics.start + grown;
                shift_spans(&mut spans[position + 1..], (0, 0, delta));
            }
        }
        let model = &mut self.model;
        self.limits
            .check_lowered(&model.lowered.rules, model.lowered.prefixes.len())?;

        // Peers and subjects of the changed rules.
        let mut parts = std::mem::take(&mut model.parts);
        // Made on first need only (`index_selected`).
        let mut endpoint_ids: Option<BTreeSet<u32>> = None;
        let mut subjects_of_changed: BTreeSet<u32> = BTreeSet::new();
        let mut peers_changed = false;
        for &index in &changed {
            let rule = &model.lowered.rules[index];
            let peers = rule.peers.as_ref().map(|list| {
                list.iter()
                    .map(|s| parts.cache.intern(s, &model.table))
                    .collect::<Vec<_>>()
            });
            if parts.peer_ids[index] != peers {
                peers_changed = true;
                parts.peer_ids[index] = peers;
            }
            if same_subject.contains(&index) {
                // The same identities select it: their lists keep it.
                subjects_of_changed.extend(
                    parts
                        .rules_by_identity
                        .iter()
                        .filter(|(_, list)| list.binary_search(&index).is_ok())
                        .map(|(id, _)| *id),
                );
                continue;
            }
            for (id, list) in parts.rules_by_identity.iter_mut() {
                if let Ok(at) = list.binary_search(&index) {
                    list.remove(at);
                    subjects_of_changed.insert(*id);
                }
            }
            index_selected(
                (&mut parts.cache, &model.table),
                &mut parts.rules_by_identity,
                (rule, index),
                &mut endpoint_ids,
                &mut subjects_of_changed,
            );
        }
        parts.rules_by_identity.retain(|_, list| !list.is_empty());
        model.peer_index.catch_up(&parts.cache);
        if peers_changed && !model.renumber_selectors(&mut parts) {
            model.parts = parts;
            return Ok(None);
        }
        if let Some(delta) = prefix_change {
            let changed = self
                .move_text_prefixes(position, &mut parts, &delta)
                .and_then(|()| {
                    let model = &self.model;
                    Ok(self
                        .limits
                        .check_lowered(&model.lowered.rules, model.lowered.prefixes.len())?)
                });
            if let Err(e) = changed {
                self.model.parts = parts;
                return Err(e);
            }
        }

        // (The callers check the lowering against the texts when lines
        // moved: the text's tree may still be moving its lines,
        // `Session::edit_policy`.)
        let mut update = Update::incremental(Vec::new());
        update.rules_lowered = rules_lowered;
        update.items_compared = match compared {
            Some(Compared::Narrowed | Compared::Edited) => 1,
            Some(Compared::Whole) | None => span.rules.len(),
        };
        // The ops of the untouched filters are spliced back unchanged even
        // when origins changed on the item path: its origins keep their
        // ids (an item's id is its place in the span), and what else
        // changed of an origin (its line, after lines moved) only findings
        // show, which splicing never keeps (`splice_ops` makes every op
        // of a state with findings again).
        let splice = !origins_changed || compared.is_some();
        touched.narrow(&parts, &old_peers, &changed);
        self.refold(
            parts,
            &touched,
            &subjects_of_changed,
            (origins_changed, splice),
            update,
        )
        .map(Some)
    }

    /// The subjects `subjects_of_changed` of changed rules, whose changes
    /// add to the filters `touched`, folded again (only those filters), and
    /// their states distilled again (every state with findings too when
    /// `origins_changed`: the findings describe origins; the ops of only
    /// the touched filters made again when `splice`): the rest of
    /// [`Self::replace_text`] and [`Self::move_item`], given the rules,
    /// their indices and `parts` (taken out of the model) as they are after
    /// the change.
    fn refold(
        &mut self,
        parts: ResolverParts,
        touched: &Touched,
        subjects_of_changed: &BTreeSet<u32>,
        (origins_changed, splice): (bool, bool),
        mut update: Update,
    ) -> Result<Update, SessionError> {
        let model = &mut self.model;
        let narrow = touched.selectors.as_ref();
        let touched = &touched.filters;
        // The rules that add to a touched filter (the rule→filter index);
        // with the selectors narrowed, only those naming one of them (the
        // others add only selectors the fold leaves out).
        let names_narrowed = |index: &usize| {
            narrow.is_none_or(|set| {
                parts
                    .peer_ids
                    .get(*index)
                    .and_then(Option::as_ref)
                    .is_some_and(|peers| peers.iter().any(|id| set.contains(id)))
            })
        };
        let mut adding: Vec<usize> = touched
            .iter()
            .filter_map(|key| model.filter_rules.get(key))
            .flatten()
            .copied()
            .filter(names_narrowed)
            .collect();
        adding.sort_unstable();
        adding.dedup();
        let resolver =
            Resolver::from_parts(&model.lowered.rules, &model.table, &self.inventory, parts);
        let mut changed_identities = Vec::new();
        // Per subject whose L4 policy was folded again by selector: the
        // selectors whose policy changed, per touched filter.
        let mut narrowed_ops: HashMap<u32, ChangedSelectors> = HashMap::new();
        // `touched` per direction, asked without building a key.
        let mut touched_by_direction: [BTreeSet<&FilterKey>; 2] = Default::default();
        for (direction, key) in touched {
            touched_by_direction[usize::from(*direction == Direction::Egress)].insert(key);
        }
        for id in subjects_of_changed {
            let Some(old) = model.l4.get_mut(id) else {
                let policy = resolver.l4_policy(*id);
                model.l4.insert(*id, policy);
                model.bounds.remove(*id);
                model.features.remove(id);
                changed_identities.push(*id);
                continue;
            };
            // Only the touched filters are folded again; the others are the
            // fold of the same unchanged rules (`Resolver::l4_policy_filters`).
            let keep = |d, k: &FilterKey| {
                touched_by_direction[usize::from(d == Direction::Egress)].contains(k)
            };
            let narrowed = narrow.map(|set| move |s: SelectorId| set.contains(&s));
            let part = resolver.l4_policy_filters_of(
                *id,
                &keep,
                &adding,
                narrowed.as_ref().map(|f| f as &dyn Fn(SelectorId) -> bool),
            );
            let cached = model.bounds.take(*id);
            let before = KeptBound::touched(old, touched, narrow);
            let mut counts = model.features.remove(id);
            if let Some(counts) = &mut counts {
                counts.count_touched(old, (touched, narrow), false);
            }
            let (differs, changed_selectors) = replace_filters(old, part, touched, narrow);
            if differs {
                changed_identities.push(*id);
                if let Some(changed) = changed_selectors {
                    narrowed_ops.insert(*id, changed);
                }
            }
            if let Some(mut counts) = counts {
                counts.count_touched(old, (touched, narrow), true);
                model.features.insert(*id, counts);
            }
            let after = KeptBound::touched(old, touched, narrow);
            // The untouched filters' terms are the same (the same filters,
            // the same selections): correct the bound by the touched ones'.
            // Only the touched filters' selectors are reweighed: the
            // bound's selectors change among those alone. A bound that
            // cannot be corrected is made again when next needed
            // (`KeptBound::get`).
            match (cached, before, after) {
                (Some(mut kept), Some((enforced, was)), Some((still, now))) => {
                    let corrected = enforced == still
                        && kept.reweigh(&was, false, &resolver.cache).is_some()
                        && kept.reweigh(&now, true, &resolver.cache).is_some();
                    let changed = was.keys().chain(now.keys()).copied();
                    if corrected {
                        model.bounds.put_back(*id, kept, changed);
                    } else {
                        let held: Vec<SelectorId> = kept.weights.keys().copied().collect();
                        model
                            .bounds
                            .drop_taken(*id, held.into_iter().chain(changed));
                    }
                }
                (Some(kept), _, _) => {
                    let held: Vec<SelectorId> = kept.weights.keys().copied().collect();
                    model.bounds.drop_taken(*id, held.into_iter());
                }
                (None, _, _) => drop(model.bounds.remove(*id)),
            }
        }
        let mut state_changes: Vec<(StateKey, Vec<MapChange>)> = Vec::new();
        // The states of the changed identities (from the states' identity
        // index, not a pass over every state); every state when origins
        // moved (their descriptions are in any state's findings).
        let mut keys: Vec<StateKey> = if origins_changed {
            model.states.keys().cloned().collect()
        } else {
            changed_identities
                .iter()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .flat_map(|id| model.states.keys_of(*id))
                .collect()
        };
        // The states a renumbering of the selectors left out of order, and
        // those with an identity to replay.
        let reordered = std::mem::take(&mut model.reordered);
        let replay = std::mem::take(&mut model.replay);
        if !reordered.is_empty() || !replay.is_empty() {
            let listed: BTreeSet<StateKey> = keys
                .drain(..)
                .chain(reordered.iter().cloned())
                .chain(replay.keys().cloned())
                .collect();
            keys = listed.into_iter().collect();
        }
        for key in keys {
            let full = reordered.contains(&key);
            let extra = replay.get(&key);
            if !full
                && extra.is_none()
                && !changed_identities.contains(&key.0)
                && model
                    .states
                    .get(&key)
                    .is_none_or(|r| r.diagnostics.is_empty())
            {
                // Only the origins' descriptions changed, which only
                // diagnostics show (checked first: with origins changed
                // this runs for every state).
                continue;
            }
            let Some(first) = first_endpoint(&self.inventory, &model.table, &key) else {
                // Not made again: its ops no longer follow the policy.
                if let Some(mut record) = model.states.get_mut(&key) {
                    record.shape = None;
                }
                continue;
            };
            let Some(policy) = model.l4.get(&key.0) else {
                continue;
            };
            let Some(mut record) = model.states.take(&key) else {
                continue;
            };
            let endpoint = &self.inventory.endpoints[first];
            let bound = KeptBound::get(&mut model.bounds, key.0, policy, &resolver.cache);
            debug_assert_eq!(
                bound,
                insertion_bound(policy, &resolver.cache),
                "the kept insertion bound"
            );
            if bound > self.limits.get(Limit::InsertionsPerEndpoint) {
                // Over the limit: the limit's own check, for its error.
                self.limits
                    .check_l4_policy(&endpoint.display_name(), policy, &resolver.cache)?;
            }
            let origins = &model.lowered.origins;
            let describe = |id| describe(origins, id);
            // Only the touched filters' ops are made again when nothing
            // else their ops read changed (`splice_ops`); else all of them.
            // (What every filter's ops read besides the filter: the old ops'
            // is the record's.)
            let shape = model
                .features
                .entry(key.0)
                .or_insert_with(|| FeatureCounts::of(policy))
                .shape(policy);
            debug_assert_eq!(shape, ops_shape(policy), "the counted shape");
            let spliced = (splice && !full && record.shape.as_ref() == Some(&shape))
                .then(|| {
                    splice_ops(
                        &resolver,
                        endpoint,
                        (policy, &shape),
                        &mut record,
                        (touched, narrowed_ops.get(&key.0)),
                        &describe,
                    )
                })
                .flatten();
            // How the selectors its ops name change (the state's index
            // follows, `States::put_back`): the splice knows; made in
            // full, the two lists are compared.
            let (ops, diagnostics, differing, selectors) = match spliced {
                Some(spliced) => (
                    spliced.ops,
                    Vec::new(),
                    Some((spliced.differing, (spliced.by_peers, spliced.zero))),
                    Ok(spliced.selectors),
                ),
                None => {
                    let (ops, diagnostics) = resolver.map_ops(endpoint, policy, &describe);
                    let before = super::states::sorted(record.selectors());
                    (ops, diagnostics, None, Err(before))
                }
            };
            let (table, peer_index) = (&model.table, &model.peer_index);
            let cache = &resolver.cache;
            let selecting = |id: u32| {
                table
                    .get(id)
                    .map(|info| peer_index.matching(cache, &info.labels).0)
                    .unwrap_or_default()
            };
            let (mut new_record, changes, folded, replayed) = redistill(
                &resolver,
                record,
                ops,
                diagnostics,
                (differing, full),
                extra,
                &selecting,
            );
            new_record.shape = Some(shape);
            update.states_folded += usize::from(folded);
            update.identities_replayed += replayed;
            if let Err(e) = self
                .limits
                .budget()
                .charge(&endpoint.display_name(), new_record.state.len())
            {
                model.parts = resolver.into_parts();
                return Err(e.into());
            }
            let (gone, came) = match selectors {
                Ok(change) => change,
                Err(before) => {
                    let after = super::states::sorted(new_record.selectors());
                    (difference(&before, &after), difference(&after, &before))
                }
            };
            model
                .states
                .put_back(key.clone(), new_record, (&gone, &came));
            if !changes.is_empty() {
                state_changes.push((key, changes));
            }
        }
        model.parts = resolver.into_parts();
        model.states.debug_check();
        model.bounds.debug_check();
        // Debug builds: every state made from the policy has its ops in the
        // order the batch makes them under the current selector ids (a
        // renumbering's out-of-order states were made again above).
        #[cfg(debug_assertions)]
        for (key, record) in model.states.iter() {
            debug_assert!(
                record.shape.is_none()
                    || ops_in_selector_order(&record.ops, &model.parts.cache, &[]),
                "the ops of state {key:?} are out of the selectors' order"
            );
        }
        // The update's new selectors were resolved under the budget (here
        // and before): past it, some selected nothing
        // (`SelectorCache::intern`), and the caller restores the session.
        self.limits
            .check_update_work(self.model.table.identities.len(), &self.model.parts.cache)?;
        self.check_total(state_changes.iter().map(|(key, _)| key))?;
        update.deltas = self.deltas_for(&state_changes);
        Ok(update)
    }

    /// The text at `position` gained or lost one rule item
    /// ([`super::items::moved_item`]): a block of one rule and one origin
    /// inserted or removed ([`Self::move_block`]), then the text's origins
    /// take their new lines and indices (from the new tree) and its span
    /// grows or shrinks by one. `Ok(None)`, the model as it was, when the
    /// change is not one the session takes this way.
    fn move_item(
        &mut self,
        position: usize,
        moved: MovedItem,
    ) -> Result<Option<Update>, SessionError> {
        let Some(whole) = self.span(position) else {
            return Ok(None);
        };
        let span = whole.ranges();
        let inserted = moved.inserted.is_some();
        if !span.diagnostics.is_empty()
            || span.rules.len() != span.origins.len()
            || moved.position > span.rules.len()
            || (!inserted && moved.position >= span.rules.len())
        {
            return Ok(None);
        }
        // What the text's prefix set loses or gains by the move, when it
        // changes: the inserted item's new prefixes join it; a removed
        // item's go unless another item names them
        // (`MovedItem::remaining`). Only those are looked at: building
        // the text's new set was a third of a rule inserted into a
        // 4,096-rule CIDR text (session 27).
        let prefix_delta: Option<PrefixDelta> = match (&moved.inserted, &moved.remaining) {
            (Some(item), _) => {
                let added: Vec<IpNetwork> = item
                    .prefixes
                    .iter()
                    .filter(|prefix| !whole.prefixes.contains(prefix))
                    .copied()
                    .collect();
                (!added.is_empty()).then_some(PrefixDelta {
                    removed: Vec::new(),
                    added,
                })
            }
            (None, Some(remaining)) => (*remaining != whole.prefixes)
                .then(|| PrefixDelta::between(&whole.prefixes, remaining)),
            // No other rule of the text has a selector on them
            // (`Self::settle_removal`): the item named them alone.
            (None, None) => {
                let removed: Vec<IpNetwork> = moved
                    .removed_prefixes
                    .iter()
                    .filter(|prefix| whole.prefixes.contains(prefix))
                    .copied()
                    .collect();
                (!removed.is_empty()).then_some(PrefixDelta {
                    removed,
                    added: Vec::new(),
                })
            }
        };
        // The text's requirement counts, when kept, follow the rule that
        // comes or goes (applied once the block has moved).
        let mut keys_moved: Option<(PolicyRule, bool)> = None;
        if whole.peer_keys.is_some() {
            keys_moved = match &moved.inserted {
                Some(item) => Some((item.rule.clone(), true)),
                None => self
                    .model
                    .lowered
                    .rules
                    .get(span.rules.start + moved.position)
                    .map(|rule| (rule.clone(), false)),
            };
        }
        if prefix_delta.is_some() && !self.prefixes_incremental() {
            return Ok(None);
        }
        let change = match moved.inserted {
            Some(item) => BlockChange::Insert {
                rules: vec![item.rule],
                origins: vec![item.origin],
            },
            None => BlockChange::Remove {
                rules: 1,
                origins: 1,
            },
        };
        let block = Block {
            rules_at: span.rules.start + moved.position,
            origins_at: span.origins.start + moved.position,
            change,
        };
        let Some(mut moving) = self.move_block(block) else {
            return Ok(None);
        };
        if let Some(delta) = &prefix_delta
            && let Err(e) = self.move_text_prefixes(position, &mut moving.parts, delta)
        {
            self.model.parts = moving.parts;
            return Err(e);
        }
        let model = &mut self.model;
        // The text's origins after the change: their lines, and the index
        // and route of the items after it in its section.
        match &moved.lines {
            Lines::Same => {}
            Lines::Read(lines) => {
                for (at, line) in lines {
                    if let Some(origin) = model.lowered.origins.get_mut(span.origins.start + at) {
                        origin.line = *line;
                    }
                }
            }
            Lines::Shift { .. } => {
                // The text's origins after the move (its span grew or
                // shrank by one), but the inserted one, which has its line.
                let count = span.origins.len() + usize::from(inserted) - usize::from(!inserted);
                for at in (0..count).filter(|at| !(inserted && *at == moved.position)) {
                    if let Some(origin) = model.lowered.origins.get_mut(span.origins.start + at) {
                        origin.line = moved.lines.shifted(origin.line);
                    }
                }
            }
        }
        for at in moved.reindexed.clone() {
            if let Some(origin) = model.lowered.origins.get_mut(span.origins.start + at) {
                let old = origin.index;
                origin.index = if inserted {
                    old + 1
                } else {
                    old.saturating_sub(1)
                };
                set_last_index(&mut origin.route, old, origin.index);
            }
        }
        if let Some(spans) = &mut model.spans {
            let delta: isize = if inserted { 1 } else { -1 };
            let this = &mut spans[position];
            this.rules = this.rules.start..shift(&this.rules, delta).end;
            this.origins = this.origins.start..shift(&this.origins, delta).end;
            if let (Some(counts), Some((rule, add))) = (&mut this.peer_keys, &keys_moved) {
                count_peer_keys(counts, rule, *add);
            }
            shift_spans(&mut spans[position + 1..], (delta, delta, 0));
        }
        // (The caller checks the lowering against the texts: the text's
        // tree may still be moving its lines, `Session::edit_moving`.)
        // The moved items' origins describe other lines and indices now:
        // every state's findings are rendered again.
        self.finish_move(moving, (usize::from(inserted), moved.compared), true)
            .map(Some)
    }

    /// The text just pushed as the last of [`Self::texts`] added without a
    /// rebuild: its lowering (alone, origin ids after every other text's)
    /// is a block appended to the rules and origins ([`Self::move_block`]),
    /// its findings and span appended too; a CIDR prefix no other text
    /// has gets its CIDR identity ([`Self::gain_prefixes`]). `Ok(None)`,
    /// the model as it was, when the text needs more than that: a log
    /// value no text named (the cookies are numbered over every text's)
    /// or a CIDR group (its labels reach every text's CIDR identities),
    /// tier rules, a new prefix under `policy-cidr-match-mode: nodes`.
    fn append_text(&mut self) -> Result<Option<Update>, SessionError> {
        let Some(position) = self.texts.len().checked_sub(1) else {
            return Ok(None);
        };
        let Some(spans) = self.model.spans.as_ref() else {
            return Ok(None);
        };
        if spans.len() != position {
            return Ok(None);
        }
        let origins_at = spans.last().map_or(2, |span| span.origins.end);
        let (rules_at, diagnostics_at) = (
            self.model.lowered.rules.len(),
            self.model.lowered.diagnostics.len(),
        );
        let text = &self.texts[position];
        if !own_groups(&text.outcome).is_empty() {
            return Ok(None);
        }
        let lowering = lower_text(text, self.scope(), origins_at);
        if !self.cookies_kept(None, &lowering.log_values)
            || lowering.rules.iter().any(|rule| rule.tier.is_some())
        {
            return Ok(None);
        }
        if !lowering.prefixes.is_subset(&self.model.lowered.prefixes)
            && !self.prefixes_incremental()
        {
            return Ok(None);
        }
        let n = lowering.rules.len();
        let span = TextSpan {
            rules: rules_at..rules_at + n,
            origins: origins_at..origins_at + lowering.origins.len(),
            diagnostics: diagnostics_at..diagnostics_at + lowering.diagnostics.len(),
            // Set below, with the model's (`Self::change_text_prefixes`).
            prefixes: BTreeSet::new(),
            log_values: lowering.log_values,
            peer_keys: None,
        };
        let block = Block {
            rules_at,
            origins_at,
            change: BlockChange::Insert {
                rules: lowering.rules,
                origins: lowering.origins,
            },
        };
        let Some(mut moving) = self.move_block(block) else {
            return Ok(None);
        };
        self.model.lowered.diagnostics.extend(lowering.diagnostics);
        if let Some(spans) = &mut self.model.spans {
            count_log_values(&mut self.model.log_texts, &span.log_values, true);
            spans.push(span);
        }
        if let Err(e) = self.change_text_prefixes(position, &mut moving.parts, lowering.prefixes) {
            self.model.parts = moving.parts;
            return Err(e);
        }
        self.debug_check_lowering();
        // The other origins only changed ids (the host allow's), which the
        // states' findings do not show.
        self.finish_move(moving, (n, 0), false).map(Some)
    }

    /// The text at `position`, just taken out of [`Self::texts`] (it had
    /// `span`), removed without a rebuild: its rules and origins are a
    /// block removed ([`Self::move_block`]), its findings and span taken
    /// out; the CIDR identity of a prefix no other text names goes
    /// ([`Self::lose_prefixes`]). `Ok(None)`, the model as it was, when
    /// such a prefix goes under `policy-cidr-match-mode: nodes`.
    fn cut_text(&mut self, position: usize) -> Result<Option<Update>, SessionError> {
        let Some(spans) = self.model.spans.as_ref() else {
            return Ok(None);
        };
        let Some(whole) = spans.get(position) else {
            return Ok(None);
        };
        let span = whole.ranges();
        let names_alone = whole.prefixes.iter().any(|prefix| {
            !spans
                .iter()
                .enumerate()
                .any(|(i, other)| i != position && other.prefixes.contains(prefix))
        });
        if names_alone && !self.prefixes_incremental() {
            return Ok(None);
        }
        let block = Block {
            rules_at: span.rules.start,
            origins_at: span.origins.start,
            change: BlockChange::Remove {
                rules: span.rules.len(),
                origins: span.origins.len(),
            },
        };
        let Some(mut moving) = self.move_block(block) else {
            return Ok(None);
        };
        // Its prefixes go first, while its span is there to empty.
        if let Err(e) = self.change_text_prefixes(position, &mut moving.parts, BTreeSet::new()) {
            self.model.parts = moving.parts;
            return Err(e);
        }
        let model = &mut self.model;
        model.lowered.diagnostics.drain(span.diagnostics.clone());
        if let Some(spans) = &mut model.spans {
            count_log_values(&mut model.log_texts, &spans[position].log_values, false);
            spans.remove(position);
            shift_spans(
                &mut spans[position..],
                (
                    -(span.rules.len() as isize),
                    -(span.origins.len() as isize),
                    -(span.diagnostics.len() as isize),
                ),
            );
        }
        self.debug_check_lowering();
        // The other origins only changed ids, which the states' findings
        // do not show; the states that showed a removed one are of the
        // identities its rules selected, folded again.
        self.finish_move(moving, (0, 0), false).map(Some)
    }

    /// A removed item's prefixes leave the text at `position` unless
    /// another of its items names them. Every prefix an item names is a
    /// requirement of one of its rule's peer selectors
    /// (`cidr_selector_key`), so when no other rule of the text has one on
    /// them, they go (`Session::move_item`); else (the same prefix on two
    /// items, or a selector written on a `cidr:` label) the new text, the
    /// text at `position` now, is lowered for its prefix set
    /// ([`MovedItem::remaining`]): exact either way.
    fn settle_removal(&mut self, position: usize, mut moved: MovedItem) -> MovedItem {
        if moved.inserted.is_some() || moved.removed_prefixes.is_empty() {
            return moved;
        }
        self.model.ensure_peer_keys(position);
        let Some(span) = self.span(position) else {
            return moved;
        };
        let Some(removed) = self
            .model
            .lowered
            .rules
            .get(span.rules.start + moved.position)
            .filter(|_| moved.position < span.rules.len())
        else {
            return moved;
        };
        // The removed rule's own requirements on them do not count.
        let mut own = PeerKeys::default();
        count_peer_keys(&mut own, removed, true);
        let elsewhere = moved.removed_prefixes.iter().any(|prefix| {
            let key = cidr_selector_key(*prefix);
            let all = span
                .peer_keys
                .as_ref()
                .map_or(u32::MAX, |counts| counts.get(&key).copied().unwrap_or(0));
            all > own.get(&key).copied().unwrap_or(0)
        });
        if elsewhere {
            moved.remaining = Some(super::items::text_prefixes(
                &self.texts[position].outcome,
                self.scope(),
            ));
        }
        moved
    }

    /// What the prefix set of the text at `position` (the new text, its
    /// changed items' rules already replaced) lost and gained when items
    /// changed in place: the prefixes `dropped` the items no longer name
    /// go, and those they name (`named`) come. As for a removed item
    /// (`Self::settle_removal`): every prefix an item names is a
    /// requirement of one of its rule's peer selectors, so a dropped
    /// prefix that no rule of the text has a requirement on left the
    /// text; else the text is lowered for its set (exact either way). (A
    /// text holding CIDR groups never takes the item path,
    /// `super::items::changed_items`; another text's groups are in its
    /// own span's set, which `Self::move_text_prefixes` reads.)
    fn item_prefixes<'p>(
        &self,
        position: usize,
        dropped: impl Iterator<Item = &'p IpNetwork>,
        named: &BTreeSet<IpNetwork>,
    ) -> Option<PrefixDelta> {
        let span = self.span(position)?;
        let dropped: Vec<IpNetwork> = dropped.copied().collect();
        // (`Model::ensure_peer_keys` counted them; without the counts,
        // the text is lowered for its set.)
        let elsewhere = dropped.iter().any(|prefix| {
            span.peer_keys
                .as_ref()
                .is_none_or(|counts| counts.contains_key(&cidr_selector_key(*prefix)))
        });
        if elsewhere {
            // (Never beside a shift of the text's lines, which holds its
            // outcome: `Self::edit_text`.)
            let prefixes = super::items::text_prefixes(&self.texts[position].outcome, self.scope());
            return Some(PrefixDelta::between(&span.prefixes, &prefixes));
        }
        Some(PrefixDelta {
            removed: dropped
                .into_iter()
                .filter(|p| span.prefixes.contains(p))
                .collect(),
            added: named
                .iter()
                .filter(|p| !span.prefixes.contains(p))
                .copied()
                .collect(),
        })
    }

    /// The text at `position` now names the policy prefixes `prefixes`:
    /// its span and the model's prefix set follow, the CIDR identities of
    /// prefixes no text names any more go ([`Self::lose_prefixes`]), then
    /// those of prefixes no text named come ([`Self::gain_prefixes`]: a
    /// number just freed is the lowest free one, as in the allocation,
    /// which ignores a pin no policy names). `parts`: as the caller holds
    /// them, the changed rules' peers interned.
    fn change_text_prefixes(
        &mut self,
        position: usize,
        parts: &mut ResolverParts,
        prefixes: BTreeSet<IpNetwork>,
    ) -> Result<(), SessionError> {
        let Some(span) = self.span(position) else {
            return Ok(());
        };
        let delta = PrefixDelta::between(&span.prefixes, &prefixes);
        self.move_text_prefixes(position, parts, &delta)
    }

    /// [`Self::change_text_prefixes`] given what the text's set lost and
    /// gained: the work of the prefixes that changed, not of the text's
    /// whole set (a prefix changed in one of 4,096 `fromCIDR` items).
    fn move_text_prefixes(
        &mut self,
        position: usize,
        parts: &mut ResolverParts,
        delta: &PrefixDelta,
    ) -> Result<(), SessionError> {
        let model = &mut self.model;
        let Some(spans) = &mut model.spans else {
            return Ok(());
        };
        let span = &mut spans[position].prefixes;
        for prefix in &delta.removed {
            span.remove(prefix);
        }
        span.extend(delta.added.iter().copied());
        let spans = &spans[..];
        let named = |prefix: &IpNetwork| spans.iter().any(|span| span.prefixes.contains(prefix));
        let dropped: Vec<IpNetwork> = delta
            .removed
            .iter()
            .filter(|p| !named(p))
            .copied()
            .collect();
        let taken: Vec<IpNetwork> = delta
            .added
            .iter()
            .filter(|p| !model.lowered.prefixes.contains(p))
            .copied()
            .collect();
        for prefix in &dropped {
            model.lowered.prefixes.remove(prefix);
        }
        model.lowered.prefixes.extend(taken.iter().copied());
        let lost = self.unnamed(&dropped);
        self.lose_prefixes(parts, &lost);
        let gained = self.unallocated(&taken);
        self.gain_prefixes(parts, &gained)
    }

    /// Whether a change of the policies' CIDR prefixes may go the
    /// incremental way: not under `policy-cidr-match-mode: nodes` (a node
    /// address's identity carries the labels of the prefixes containing
    /// it). CIDR groups do not stop it: a new prefix's identity gets the
    /// labels of the groups containing it ([`Self::gain_prefixes`]), the
    /// groups being those of the texts the change kept.
    fn prefixes_incremental(&self) -> bool {
        !self.inventory.settings.policy_cidr_match_nodes
    }

    /// What lowering one text reads besides the text: the inventory,
    /// every text's CIDR groups and the log cookies (the model's, as the
    /// last full build made them: a change of either rebuilds).
    fn scope(&self) -> Scope<'_> {
        self.model.lowered.scope(&self.inventory)
    }

    /// Whether the log cookies stay numbered as they are when the text at
    /// `position` (none: a text added) names the log values `values`:
    /// every value is numbered already and every value the text stops
    /// naming is named by another text. Needs spans (each text's values,
    /// counted in `Model::log_texts`).
    fn cookies_kept(&self, position: Option<usize>, values: &BTreeSet<String>) -> bool {
        let Some(spans) = &self.model.spans else {
            return false;
        };
        let cookies = &self.model.lowered.cookies;
        let dropped = position
            .and_then(|p| spans.get(p))
            .into_iter()
            .flat_map(|span| span.log_values.difference(values));
        values.iter().all(|v| cookies.contains_key(v))
            && dropped
                .into_iter()
                .all(|v| self.model.log_texts.get(v).is_some_and(|n| *n > 1))
    }

    /// The text at `position` names the log values `values` now: its span
    /// and the counts follow.
    fn set_log_values(&mut self, position: usize, values: BTreeSet<String>) {
        let model = &mut self.model;
        if let Some(span) = model.spans.as_mut().and_then(|s| s.get_mut(position)) {
            count_log_values(&mut model.log_texts, &span.log_values, false);
            count_log_values(&mut model.log_texts, &values, true);
            span.log_values = values;
        }
    }

    /// The CIDR identity prefixes (canonical, not `/0`, as the allocation
    /// makes them) of the policy prefixes `added` that the table lacks, in
    /// the allocation's order (IPv4 first, by address and length).
    fn unallocated(&self, added: &[IpNetwork]) -> Vec<IpNetwork> {
        let mut prefixes: Vec<IpNetwork> = added
            .iter()
            .map(|p| crate::labels::canonical_prefix(*p))
            .filter(|p| p.prefix() != 0 && !self.model.table.cidr_identity.contains_key(p))
            .collect();
        prefixes.sort_by_key(|p| (p.is_ipv6(), p.network(), p.prefix()));
        prefixes.dedup();
        prefixes
    }

    /// The CIDR identity prefixes of the policy prefixes `removed` (no
    /// longer in the model's lowering) that no remaining policy prefix
    /// gives (another text may write the same prefix with host bits set).
    fn unnamed(&self, removed: &[IpNetwork]) -> Vec<IpNetwork> {
        let gone: BTreeSet<IpNetwork> = removed
            .iter()
            .map(|p| crate::labels::canonical_prefix(*p))
            .filter(|p| p.prefix() != 0)
            .collect();
        // A policy prefix that gives `prefix` has its length and an
        // address inside it: the set's order (address, then length) holds
        // them between these two, so each lookup is a range of the set,
        // not a pass over every prefix (4,096 at one text's 4,096 rules).
        let given = |prefix: &IpNetwork| {
            let (Ok(low), Ok(high)) = (
                IpNetwork::new(prefix.network(), 0),
                IpNetwork::new(prefix.broadcast(), prefix.prefix()),
            ) else {
                return true;
            };
            self.model
                .lowered
                .prefixes
                .range(low..=high)
                .any(|p| p.prefix() == prefix.prefix())
        };
        gone.into_iter().filter(|p| !given(p)).collect()
    }

    /// New CIDR identities for `prefixes` (from [`Self::unallocated`]),
    /// numbered as the allocation numbers a prefix when every other holds
    /// its number as a given one (the lowest free local number; pinned in
    /// the inventory, as a full build pins every prefix's). Each joins the
    /// selections that select it, as a new endpoint identity does
    /// ([`Self::add_endpoint_incrementally`]); the refold that follows
    /// replays its part of every state those selections reach
    /// ([`Model::replay`]), so that one difference covers both the moved
    /// rules and the new identities. `parts`: the resolver parts a block
    /// move holds (its new rules' selectors already interned).
    fn gain_prefixes(
        &mut self,
        parts: &mut ResolverParts,
        prefixes: &[IpNetwork],
    ) -> Result<(), SessionError> {
        if prefixes.is_empty() {
            return Ok(());
        }
        let model = &mut self.model;
        for prefix in prefixes {
            let given = model.table.cidr_identity.len() + 1;
            let exhausted = || CompileError::RangeExhausted {
                range: crate::error::IdentityRange::Cidr,
                given,
                limit: Identity::MAX_INDEX as usize,
            };
            let number = model.table.free_cidr_number().ok_or_else(exhausted)?;
            let id = model
                .table
                .insert_cidr(*prefix, number, &model.lowered.cidr_groups)
                .ok_or_else(exhausted)?;
            let before = self.inventory.cidr_identities.insert(*prefix, id);
            model.pins_undo.push((*prefix, before));
            let Some(info) = model.table.get(id) else {
                continue;
            };
            let gained = model.peer_index.reselect(
                &mut parts.cache,
                &mut model.bounds,
                (&info.labels, id),
                true,
            );
            for key in model.states.reached_by(&gained) {
                model.replay.entry(key).or_default().insert(id);
            }
        }
        parts.cache.forget_index();
        self.limits
            .check_update_work(model.table.identities.len(), &parts.cache)?;
        Ok(())
    }

    /// The CIDR identities of `prefixes` (from [`Self::unnamed`]) go: out
    /// of the table, the inventory's pins and every selection; the refold
    /// that follows replays their (now empty) part of every state those
    /// selections reached, as for [`Self::gain_prefixes`].
    fn lose_prefixes(&mut self, parts: &mut ResolverParts, prefixes: &[IpNetwork]) {
        if prefixes.is_empty() {
            return;
        }
        let model = &mut self.model;
        for prefix in prefixes {
            let Some((id, labels)) = model.table.remove_cidr(*prefix) else {
                continue;
            };
            let before = self.inventory.cidr_identities.remove(prefix);
            model.pins_undo.push((*prefix, before));
            let lost = model.peer_index.reselect(
                &mut parts.cache,
                &mut model.bounds,
                (&labels, id),
                false,
            );
            // Its part of each state goes (its selections no longer hold
            // it, so the replay finds no op for it).
            for key in model.states.reached_by(&lost) {
                model.replay.entry(key).or_default().insert(id);
            }
        }
        parts.cache.forget_index();
    }

    /// Debug builds: the model's lowering is the whole lowering of the
    /// texts (rules, origins, findings, prefixes) and its spans are each
    /// text's.
    fn debug_check_lowering(&self) {
        #[cfg(debug_assertions)]
        {
            let inputs: Vec<PolicyInput<'_>> = self
                .texts
                .iter()
                .flat_map(|t| PolicyInput::from_outcome(&t.outcome))
                .collect();
            let whole = lower(&inputs, &self.inventory);
            let lowered = &self.model.lowered;
            debug_assert_eq!(lowered.rules, whole.rules, "the session's rules");
            debug_assert_eq!(lowered.origins, whole.origins, "the session's origins");
            debug_assert_eq!(
                lowered.diagnostics, whole.diagnostics,
                "the session's lowering findings"
            );
            debug_assert_eq!(lowered.prefixes, whole.prefixes, "the session's prefixes");
            debug_assert_eq!(lowered.localhost_origin, whole.localhost_origin);
            if let Some(spans) = &self.model.spans {
                debug_assert_eq!(spans.len(), self.texts.len(), "a span per text");
                for (span, text) in spans.iter().zip(&self.texts) {
                    let lowering = lower_text(text, self.scope(), span.origins.start);
                    debug_assert_eq!(lowered.rules[span.rules.clone()], lowering.rules[..]);
                    debug_assert_eq!(lowered.origins[span.origins.clone()], lowering.origins[..]);
                    debug_assert_eq!(
                        lowered.diagnostics[span.diagnostics.clone()],
                        lowering.diagnostics[..]
                    );
                    debug_assert_eq!(span.prefixes, lowering.prefixes);
                    debug_assert_eq!(span.log_values, lowering.log_values);
                    if let Some(kept) = &span.peer_keys {
                        let mut counts = PeerKeys::default();
                        for rule in &lowering.rules {
                            count_peer_keys(&mut counts, rule, true);
                        }
                        debug_assert_eq!(*kept, counts, "a text's requirement counts");
                    }
                }
                let mut counts = BTreeMap::new();
                for span in spans {
                    count_log_values(&mut counts, &span.log_values, true);
                }
                debug_assert_eq!(self.model.log_texts, counts, "the log values' counts");
            }
        }
    }

    /// Inserts or removes a block of rules and origins ([`Block`]) in the
    /// model: every rule index and origin id after it moves by the block's
    /// size (the rule lists of subjects, filters and identities, the peer
    /// ids; the origins of rules, L4 policies, ops and state entries, and
    /// the host allow's; a removed origin's id becomes `u32::MAX`, which no
    /// origin has, so that what still names it never equals what a rule
    /// that takes its id gives), and the block's rules go into (or out of)
    /// every index, the identities they select recorded. The spans and the
    /// lowering's findings are the caller's. The work is a pass over the
    /// rules, the subjects' rule lists and every state's entries, without
    /// lowering, resolving or distilling anything.
    ///
    /// When the block changes which peer selector the rules use first,
    /// the selectors are numbered again in place
    /// ([`Model::renumber_selectors`]). `None`, the model as it was, when
    /// the change is not one the session takes this way: tier rules (they
    /// hold rules with origin ids).
    fn move_block(&mut self, block: Block) -> Option<Moving> {
        let model = &mut self.model;
        let (r, o) = (block.rules_at, block.origins_at);
        let (n, m, inserted) = match &block.change {
            BlockChange::Insert { rules, origins } => (rules.len(), origins.len(), true),
            BlockChange::Remove { rules, origins } => (*rules, *origins, false),
        };
        if !model.lowered.tier_rules.rules.is_empty()
            || r > model.lowered.rules.len()
            || (!inserted && r + n > model.lowered.rules.len())
            || o > model.lowered.origins.len()
            || (!inserted && o + m > model.lowered.origins.len())
        {
            return None;
        }
        let (Ok(o_id), Ok(m_id)) = (u32::try_from(o), u32::try_from(m)) else {
            return None;
        };
        if !inserted
            && model.lowered.rules[r..r + n]
                .iter()
                .any(|rule| rule.origin < o_id || rule.origin - o_id >= m_id)
        {
            return None;
        }
        let mut parts = std::mem::take(&mut model.parts);
        // The peers first: the one check that can still refuse, with the
        // model otherwise as it was.
        let removed_peers: Vec<Option<Vec<SelectorId>>> = match &block.change {
            BlockChange::Insert { rules, .. } => {
                let peers: Vec<_> = rules
                    .iter()
                    .map(|rule| {
                        rule.peers.as_ref().map(|list| {
                            list.iter()
                                .map(|s| parts.cache.intern(s, &model.table))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                parts.peer_ids.splice(r..r, peers);
                Vec::new()
            }
            BlockChange::Remove { .. } => parts.peer_ids.drain(r..r + n).collect(),
        };
        model.peer_index.catch_up(&parts.cache);
        if !model.renumber_selectors(&mut parts) {
            if inserted {
                parts.peer_ids.drain(r..r + n);
            } else {
                parts.peer_ids.splice(r..r, removed_peers);
            }
            model.parts = parts;
            return None;
        }

        let mut touched = Touched::l3();
        // The moved rules' peers (the selectors whose policies can change,
        // `Touched::narrow`): an inserted block's are its peer ids (as
        // numbered now), a removed block's its selectors.
        let mut old_peers = OldPeers::new();
        let inserted_at: Vec<usize> = if inserted {
            (r..r + n).collect()
        } else {
            old_peers.add(&model.lowered.rules[r..r + n]);
            Vec::new()
        };
        touched.narrow(&parts, &old_peers, &inserted_at);
        let mut subjects_of_changed: BTreeSet<u32> = BTreeSet::new();
        // Take the removed rules out of every index while their indices
        // are their own.
        if !inserted {
            for (index, old) in model.lowered.rules[r..r + n].iter().enumerate() {
                let index = r + index;
                touched.filters.extend(filter_keys(old));
                index_filters(&mut model.filter_rules, old, index, false);
                if let Some(list) = model.subjects.get_mut(&old.subject) {
                    list.retain(|i| *i != index);
                    if list.is_empty() {
                        model.subjects.remove(&old.subject);
                    }
                }
            }
            for (id, list) in &mut parts.rules_by_identity {
                let from = list.partition_point(|i| *i < r);
                let to = list.partition_point(|i| *i < r + n);
                if from < to {
                    list.drain(from..to);
                    subjects_of_changed.insert(*id);
                }
            }
            parts.rules_by_identity.retain(|_, list| !list.is_empty());
            model.lowered.rules.drain(r..r + n);
            model.lowered.origins.drain(o..o + m);
        }
        // Every rule index from `r` (after the block, for a removal) and
        // every origin id from `o` moves by the block's size.
        let first_moving = if inserted { r } else { r + n };
        let move_index = |i: &mut usize| {
            if *i >= first_moving {
                if inserted {
                    *i += n;
                } else {
                    *i -= n;
                }
            }
        };
        let shift_list = |list: &mut Vec<usize>| {
            let from = list.partition_point(|i| *i < first_moving);
            list[from..].iter_mut().for_each(move_index);
        };
        model.subjects.values_mut().for_each(shift_list);
        model.filter_rules.values_mut().for_each(shift_list);
        parts.rules_by_identity.values_mut().for_each(shift_list);
        let renumber = Renumber {
            from: o_id,
            count: m_id,
            inserted,
        };
        for rule in &mut model.lowered.rules {
            rule.origin = renumber.id(rule.origin);
        }
        for origin in &mut model.lowered.origins[o..] {
            origin.id = renumber.id(origin.id);
        }
        model.lowered.localhost_origin = model.lowered.localhost_origin.map(|id| renumber.id(id));
        parts.localhost_origin = parts.localhost_origin.map(|id| renumber.id(id));
        for policy in model.l4.values_mut() {
            for direction in [&mut policy.ingress, &mut policy.egress] {
                for per_selector in direction.filters.values_mut() {
                    for selector_policy in per_selector.values_mut() {
                        renumber.set(&mut selector_policy.origins);
                    }
                }
            }
        }
        // A state is its ops folded (`Resolver::apply_ops`, or replayed
        // from them), so its entries name only origins its ops name: the
        // ops decide, and the states of the many endpoints no moved rule
        // reaches are not read (at 10,000 such endpoints, reading each
        // state was a third of a rule insertion).
        model.states.for_each_mut(|record| {
            let moves = record
                .ops
                .iter()
                .any(|op| renumber.moves(&op.entry.origins));
            debug_assert!(
                moves || !record.state.iter().any(|(_, e)| renumber.moves(&e.origins)),
                "a state entry names an origin none of its ops names"
            );
            if moves {
                for op in &mut record.ops {
                    renumber.set(&mut op.entry.origins);
                }
                Arc::make_mut(&mut record.state).renumber_origins(&|set| renumber.set(set));
            }
        });
        // The inserted rules into every index at their places.
        if let BlockChange::Insert { rules, origins } = block.change {
            let mut endpoint_ids: Option<BTreeSet<u32>> = None;
            for (index, rule) in rules.iter().enumerate() {
                let index = r + index;
                touched.filters.extend(filter_keys(rule));
                index_filters(&mut model.filter_rules, rule, index, true);
                let list = model.subjects.entry(rule.subject.clone()).or_default();
                let at = list.partition_point(|i| *i < index);
                list.insert(at, index);
                index_selected(
                    (&mut parts.cache, &model.table),
                    &mut parts.rules_by_identity,
                    (rule, index),
                    &mut endpoint_ids,
                    &mut subjects_of_changed,
                );
            }
            model.lowered.rules.splice(r..r, rules);
            model.lowered.origins.splice(o..o, origins);
        }
        Some(Moving {
            parts,
            touched,
            subjects_of_changed,
        })
    }

    /// The rest of a move ([`Self::move_block`]) once the caller has fixed
    /// the spans and the text's origins: the limits on the lowering, then
    /// the subjects of the moved rules folded again ([`Self::refold`]:
    /// every state with findings too when `descriptions_changed`, as some
    /// origin then reads differently; the untouched filters' ops kept, as
    /// their origins were renumbered in place).
    fn finish_move(
        &mut self,
        moving: Moving,
        (rules_lowered, items_compared): (usize, usize),
        descriptions_changed: bool,
    ) -> Result<Update, SessionError> {
        let Moving {
            parts,
            touched,
            subjects_of_changed,
        } = moving;
        let model = &mut self.model;
        if let Err(e) = self
            .limits
            .check_lowered(&model.lowered.rules, model.lowered.prefixes.len())
        {
            model.parts = parts;
            return Err(e.into());
        }
        let mut update = Update::incremental(Vec::new());
        update.rules_lowered = rules_lowered;
        update.items_compared = items_compared;
        let update = self.refold(
            parts,
            &touched,
            &subjects_of_changed,
            (descriptions_changed, true),
            update,
        )?;
        #[cfg(debug_assertions)]
        {
            // Nothing names a removed origin any more.
            let names_none = |set: &Origins| set.contains(&u32::MAX);
            debug_assert!(
                !self.model.l4.values().any(|policy| {
                    [&policy.ingress, &policy.egress].into_iter().any(|d| {
                        d.filters
                            .values()
                            .any(|per| per.values().any(|p| names_none(&p.origins)))
                    })
                }),
                "an L4 policy names a removed origin"
            );
            debug_assert!(
                !self.model.states.iter().any(|(_, record)| {
                    record.ops.iter().any(|op| names_none(&op.entry.origins))
                        || record.state.iter().any(|(_, e)| names_none(&e.origins))
                }),
                "a state names a removed origin"
            );
        }
        Ok(update)
    }

    /// The entry limits over every state, as the batch compiler charges
    /// them, after an update that changed the states `changed`: every
    /// other state was within them before (an update that fails rebuilds
    /// the session), so the kept total and the changed states decide,
    /// without reading every state.
    fn check_total<'k>(
        &self,
        changed: impl IntoIterator<Item = &'k StateKey>,
    ) -> Result<(), SessionError> {
        let per_endpoint = self.limits.get(Limit::EntriesPerEndpoint);
        let states = &self.model.states;
        let within = states.entries() <= self.limits.get(Limit::TotalEntries)
            && changed.into_iter().all(|key| {
                states.get(key).is_none_or(|record| {
                    u64::try_from(record.state.len()).unwrap_or(u64::MAX) <= per_endpoint
                })
            });
        if within {
            return Ok(());
        }
        // Over a limit: charged state by state, naming them, for the
        // limit's error.
        let mut budget = self.limits.budget();
        for ((identity, _), record) in states.iter() {
            budget.charge(&format!("identity {identity}"), record.state.len())?;
        }
        Ok(())
    }

    /// One delta per endpoint of each changed state, in name order.
    /// The endpoints of a state are its identity's holders with its named
    /// ports (`holders`), not a pass over the inventory: an update's
    /// deltas cost the endpoints it changes.
    fn deltas_for(&self, changes: &[(StateKey, Vec<MapChange>)]) -> Vec<EndpointDelta> {
        // (endpoint, change): a key's first change wins, as it would in
        // a search of the changes per endpoint.
        let mut found: Vec<(usize, usize)> = Vec::new();
        for (at, ((identity, ports), _)) in changes.iter().enumerate() {
            for &index in holders(&self.model.table, *identity).iter() {
                if self
                    .inventory
                    .endpoints
                    .get(index)
                    .is_some_and(|e| e.ports == *ports)
                {
                    found.push((index, at));
                }
            }
        }
        let endpoints = &self.inventory.endpoints;
        found.sort_unstable_by(|(a, at_a), (b, at_b)| {
            match (endpoints.get(*a), endpoints.get(*b)) {
                (Some(x), Some(y)) => name_order(x, y),
                _ => a.cmp(b),
            }
            .then(at_a.cmp(at_b))
        });
        found.dedup_by_key(|(index, _)| *index);
        found
            .into_iter()
            .filter_map(|(index, at)| {
                let endpoint = self.inventory.endpoints.get(index)?;
                let ((identity, _), changes) = &changes[at];
                Some(EndpointDelta {
                    endpoint: endpoint.display_name(),
                    identity: *identity,
                    added: false,
                    removed: false,
                    changes: changes.clone(),
                })
            })
            .collect()
    }

    /// The position of endpoint `namespace/name` (or `name`), as
    /// `Inventory::endpoint` reads a reference.
    fn endpoint_reference(&self, reference: &str) -> Option<usize> {
        match reference.split_once('/') {
            Some((namespace, name)) => self.endpoint_index(Some(namespace), name),
            None => self.endpoint_index(None, reference),
        }
    }

    /// The storage position of endpoint `namespace/name`, from the name
    /// index (a scan compared every endpoint's names: in a cold cache ~60
    /// us of a 257-endpoint add, session 12).
    fn endpoint_index(&self, namespace: Option<&str>, name: &str) -> Option<usize> {
        self.model.names.get(namespace, name)
    }

    /// Whether the session holds endpoint `namespace/name` (or `name`),
    /// without the scan `Inventory::endpoint` does.
    pub fn has_endpoint(&self, reference: &str) -> bool {
        self.endpoint_reference(reference).is_some()
    }

    /// Adds an endpoint without a full allocation when its identity is an
    /// endpoint identity and nothing cluster-wide changes; `None`
    /// otherwise (the inventory is then unchanged).
    fn add_endpoint_incrementally(
        &mut self,
        endpoint: &Endpoint,
    ) -> Result<Option<Update>, SessionError> {
        if self.model.has_tiers()
            || endpoint.identity.is_some()
            || endpoint.identity_labels.is_some()
            || !endpoint.ports.is_empty()
            || self.model.any_namespace
                != (self.model.any_namespace || endpoint.namespace.is_some())
        {
            return Ok(None);
        }
        self.limits
            .check_endpoints(self.inventory.endpoints.len() + 1)?;
        if endpoint
            .ips
            .iter()
            .any(|ip| self.model.addresses.contains(ip))
        {
            return Ok(None);
        }
        // An endpoint without addresses gets the ones `Inventory::finish`
        // would give it over the session's inventory (every other endpoint
        // already holds its addresses): the lowest free automatic IPv4 and
        // IPv6 address. One that a node holds makes `finish` refuse the
        // inventory, which the full path reports.
        let mut endpoint = std::borrow::Cow::Borrowed(endpoint);
        if endpoint.ips.is_empty() {
            let ips = self.model.addresses.lowest_free();
            if self
                .inventory
                .nodes
                .iter()
                .any(|n| n.ips.iter().any(|ip| ips.contains(ip)))
            {
                return Ok(None);
            }
            endpoint.to_mut().ips = ips;
        }
        let endpoint = endpoint.as_ref();
        // The namespace entry `Inventory::finish` would add.
        let namespace_added = match &endpoint.namespace {
            Some(ns) if !self.inventory.namespaces.contains_key(ns) => {
                let mut labels = BTreeMap::new();
                labels.insert(crate::labels::NAMESPACE_NAME_LABEL.to_owned(), ns.clone());
                self.inventory.namespaces.insert(ns.clone(), labels);
                Some(ns.clone())
            }
            _ => None,
        };
        let labels = try_endpoint_identity_labels(endpoint, &self.inventory)
            .ok()
            .filter(|labels| !labels.has_source(SOURCE_RESERVED));
        let number = labels.as_ref().and_then(|labels| {
            self.model
                .numbers
                .endpoint_number(&self.model.table, labels)
        });
        let (Some(labels), Some((identity, new_identity))) = (labels, number) else {
            if let Some(ns) = namespace_added {
                self.inventory.namespaces.remove(&ns);
            }
            return Ok(None);
        };
        let inventory = &mut self.inventory;
        // Appended: no other endpoint moves (`super::names`).
        let index = inventory.endpoints.len();
        let mut pinned = endpoint.clone();
        if (crate::allocation::FIRST_ALLOCATED..=crate::allocation::LAST_ALLOCATED)
            .contains(&identity)
        {
            // Kept from now on, as every other endpoint's.
            pinned.identity = Some(identity);
        }
        inventory.endpoints.push(pinned);
        let model = &mut self.model;
        model.names.pushed(endpoint, index);
        model.names.debug_check(&inventory.endpoints);
        for ip in &endpoint.ips {
            model.addresses.insert(*ip);
        }
        model.table.push_endpoint(identity, &labels);
        if new_identity {
            model.numbers.added(&labels, identity);
        }
        model.parts.cache.forget_index();
        if new_identity {
            self.limits
                .check_identities(&[], model.table.identities.len())?;
        }

        let mut update = Update::incremental(Vec::new());
        let mut state_changes: Vec<(StateKey, Vec<MapChange>)> = Vec::new();
        let mut parts = std::mem::take(&mut model.parts);
        if new_identity {
            // Subject side: the rules selecting the new identity, in rule
            // order (`Resolver::new`).
            let mut selecting: Vec<usize> = model
                .subjects
                .iter()
                .filter(|(subject, _)| subject.matches(&labels))
                .flat_map(|(_, rules)| rules.iter().copied())
                .filter(|r| {
                    model
                        .lowered
                        .rules
                        .get(*r)
                        .is_some_and(|rule| rule.may_select(identity))
                })
                .collect();
            selecting.sort_unstable();
            if !selecting.is_empty() {
                parts.rules_by_identity.insert(identity, selecting);
            }
            // Peer side: the selections that gain it.
            let gained = model.peer_index.reselect(
                &mut parts.cache,
                &mut model.bounds,
                (&labels, identity),
                true,
            );
            // Every distinct subject was tested, as the peers' candidates.
            parts
                .cache
                .add_work(u64::try_from(model.subjects.len()).unwrap_or(u64::MAX));
            if let Err(e) = self
                .limits
                .check_update_work(model.table.identities.len(), &parts.cache)
            {
                model.parts = parts;
                return Err(e.into());
            }
            let resolver =
                Resolver::from_parts(&model.lowered.rules, &model.table, &self.inventory, parts);
            // The states whose ops name a gained selector (no other
            // state changes).
            for key in model.states.reached_by(&gained) {
                let Some(mut record) = model.states.get_mut(&key) else {
                    continue;
                };
                let Ok(id) = Identity::new(identity) else {
                    continue;
                };
                if !record.state.identity_entries(id).is_empty() {
                    // A state holding keys of an identity that did not exist
                    // is not what this session computed: fold it again.
                    let mut state = MapState::new();
                    let mut diagnostics = Vec::new();
                    resolver.apply_ops(&record.ops, &mut state, &mut diagnostics, None);
                    update.states_folded += 1;
                    let changes = policy_diff(&record.state, &state);
                    record.state = Arc::new(state);
                    if !changes.is_empty() {
                        state_changes.push((key.clone(), changes));
                    }
                    continue;
                }
                let part = replay(&resolver, &record, identity, &gained);
                update.identities_replayed += 1;
                // The state had no keys of the identity: the writes are
                // those that add its part (the difference of the parts is
                // the whole difference, `crate::diff`), without copying the
                // state to compare.
                let mut added = MapState::new();
                for (k, e) in &part {
                    let _ = added.upsert(*k, e.clone());
                }
                let changes = policy_diff(&MapState::new(), &added);
                let state = Arc::make_mut(&mut record.state);
                for (k, e) in part {
                    let _ = state.upsert(k, e);
                }
                if !changes.is_empty() {
                    state_changes.push((key.clone(), changes));
                }
            }
            parts = resolver.into_parts();
        }
        // The endpoint's own state.
        let key = state_key(endpoint, identity);
        let first = first_endpoint(&self.inventory, &model.table, &key);
        let needs_state = !model.states.contains_key(&key) || first == Some(index);
        let resolver =
            Resolver::from_parts(&model.lowered.rules, &model.table, &self.inventory, parts);
        if !model.l4.contains_key(&identity) {
            model.bounds.remove(identity);
            model.features.remove(&identity);
        }
        model
            .l4
            .entry(identity)
            .or_insert_with(|| resolver.l4_policy(identity));
        let mut own: Option<Arc<MapState>> = None;
        if needs_state && let Some(policy) = model.l4.get(&identity) {
            let endpoint = &self.inventory.endpoints[index];
            if let Err(e) =
                self.limits
                    .check_l4_policy(&endpoint.display_name(), policy, &resolver.cache)
            {
                model.parts = resolver.into_parts();
                return Err(e.into());
            }
            // The labels just derived for the allocation decide the host
            // allow (not derived again).
            let allows = resolver.allows_localhost_with(endpoint, &labels);
            let record =
                StateRecord::fold(&resolver, endpoint, policy, &model.lowered.origins, allows);
            update.states_folded += 1;
            let previous = model.states.get(&key).map(|r| r.state.clone());
            if let Some(previous) = previous {
                // Another endpoint shared the state; a new first endpoint
                // may change its diagnostics only.
                let changes = policy_diff(&previous, &record.state);
                if !changes.is_empty() {
                    state_changes.push((key.clone(), changes));
                }
            }
            own = Some(record.state.clone());
            model.states.insert(key.clone(), record);
        }
        model.parts = resolver.into_parts();
        model.states.debug_check();
        model.bounds.debug_check();
        self.check_total(state_changes.iter().map(|(key, _)| key).chain([&key]))?;
        let own = own.or_else(|| self.model.states.get(&key).map(|r| r.state.clone()));
        let mut deltas = self.deltas_for(&state_changes);
        deltas.retain(|d| d.endpoint != endpoint.display_name());
        deltas.push(EndpointDelta {
            endpoint: endpoint.display_name(),
            identity,
            added: true,
            removed: false,
            changes: policy_diff(&MapState::new(), own.as_deref().unwrap_or(&MapState::new())),
        });
        update.deltas = deltas;
        Ok(Some(update))
    }

    /// Removes the endpoint at `index` without a full allocation; `None`
    /// when that is not exact (nothing changed then).
    fn remove_endpoint_incrementally(&mut self, index: usize) -> Option<Update> {
        let endpoint = self.inventory.endpoints[index].clone();
        let still_namespaced = self.model.names.any_namespaced_except(index);
        if self.model.has_tiers()
            || !endpoint.ports.is_empty()
            || still_namespaced != self.model.any_namespace
        {
            return None;
        }
        let identity = self.model.table.endpoint_identity[index];
        let key = state_key(&endpoint, identity);
        let was_first = first_endpoint(&self.inventory, &self.model.table, &key) == Some(index);
        let labels = match self.model.table.get(identity) {
            Some(info)
                if matches!(info.kind, crate::allocation::IdentityKind::Endpoints { .. }) =>
            {
                info.labels.clone()
            }
            _ => return None,
        };
        let (_, gone) = self.model.table.swap_remove_endpoint(index)?;
        if gone {
            self.model.numbers.removed(&labels, identity);
        }
        // The last endpoint takes its place (`super::names`).
        self.inventory.endpoints.swap_remove(index);
        let model = &mut self.model;
        model
            .names
            .swap_removed(&endpoint, index, self.inventory.endpoints.get(index));
        model.names.debug_check(&self.inventory.endpoints);
        for ip in &endpoint.ips {
            model.addresses.remove(ip);
        }
        model.parts.cache.forget_index();
        let mut update = Update::incremental(vec![EndpointDelta {
            endpoint: endpoint.display_name(),
            identity,
            added: false,
            removed: true,
            changes: Vec::new(),
        }]);
        let mut state_changes: Vec<(StateKey, Vec<MapChange>)> = Vec::new();
        let mut parts = std::mem::take(&mut model.parts);
        if gone {
            parts.rules_by_identity.remove(&identity);
            model.l4.remove(&identity);
            model.features.remove(&identity);
            model.bounds.remove(identity);
            let lost = model.peer_index.reselect(
                &mut parts.cache,
                &mut model.bounds,
                (&labels, identity),
                false,
            );
            let only: BTreeSet<Identity> = Identity::new(identity).into_iter().collect();
            for state_key in model.states.reached_by(&lost) {
                if state_key.0 == identity {
                    continue;
                }
                let Some(mut record) = model.states.get_mut(&state_key) else {
                    continue;
                };
                // Nothing is inserted for a vanished identity: its part of
                // the state goes, the rest is as it was.
                let state = Arc::make_mut(&mut record.state);
                let mut part = MapState::new();
                for id in &only {
                    for (k, e) in state.identity_entries(*id) {
                        state.remove(&k);
                        let _ = part.upsert(k, e);
                    }
                }
                update.identities_replayed += 1;
                // The difference of the parts is the whole one: the part goes.
                let changes = policy_diff(&part, &MapState::new());
                if !changes.is_empty() {
                    state_changes.push((state_key.clone(), changes));
                }
            }
        }
        // A gone identity has no holders left (and no member list: asking
        // `first_endpoint` would scan every endpoint).
        let still_used = if gone {
            None
        } else {
            first_endpoint(&self.inventory, &model.table, &key)
        };
        match still_used {
            None => {
                model.states.remove(&key);
            }
            Some(first) if was_first => {
                // The state's diagnostics name its first endpoint.
                let resolver = Resolver::from_parts(
                    &model.lowered.rules,
                    &model.table,
                    &self.inventory,
                    parts,
                );
                if let Some(policy) = model.l4.get(&identity) {
                    let endpoint = &self.inventory.endpoints[first];
                    let allows = resolver.allows_localhost(endpoint);
                    let record = StateRecord::fold(
                        &resolver,
                        endpoint,
                        policy,
                        &model.lowered.origins,
                        allows,
                    );
                    update.states_folded += 1;
                    if let Some(previous) = model.states.get(&key) {
                        let changes = policy_diff(&previous.state, &record.state);
                        if !changes.is_empty() {
                            state_changes.push((key.clone(), changes));
                        }
                    }
                    model.states.insert(key.clone(), record);
                }
                parts = resolver.into_parts();
            }
            Some(_) => {}
        }
        model.parts = parts;
        model.states.debug_check();
        model.bounds.debug_check();
        update.deltas.extend(self.deltas_for(&state_changes));
        Some(update)
    }
}

/// Puts the `touched` filters and the `enforced` flags of `part` into
/// `policy`; whether anything differed. With `narrow`, `part`'s touched
/// filters hold only those selectors' policies
/// (`Resolver::l4_policy_filters_of`) and only theirs are replaced; the
/// selectors whose policy changed are then given, per touched filter (an
/// unchanged filter has none).
fn replace_filters(
    policy: &mut L4Policy,
    mut part: L4Policy,
    touched: &BTreeSet<(Direction, FilterKey)>,
    narrow: Option<&BTreeSet<SelectorId>>,
) -> (bool, Option<ChangedSelectors>) {
    let mut differs = false;
    let mut changed_selectors = narrow.map(|_| ChangedSelectors::new());
    for direction in Direction::ALL {
        let (old, new) = match direction {
            Direction::Ingress => (&mut policy.ingress, &mut part.ingress),
            Direction::Egress => (&mut policy.egress, &mut part.egress),
        };
        if old.enforced != new.enforced {
            differs = true;
            old.enforced = new.enforced;
        }
        for (_, key) in touched.iter().filter(|(d, _)| *d == direction) {
            let mut fresh = new.filters.remove(key);
            let (Some(set), Some(changed_selectors)) = (narrow, &mut changed_selectors) else {
                if old.filters.get(key) != fresh.as_ref() {
                    differs = true;
                    match fresh {
                        Some(filter) => {
                            old.filters.insert(key.clone(), filter);
                        }
                        None => {
                            old.filters.remove(key);
                        }
                    }
                }
                continue;
            };
            let mut changed: Vec<SelectorId> = Vec::new();
            for selector in set {
                let now = fresh.as_mut().and_then(|filter| filter.remove(selector));
                let was = old.filters.get(key).and_then(|filter| filter.get(selector));
                if was == now.as_ref() {
                    continue;
                }
                changed.push(*selector);
                match now {
                    Some(policy) => {
                        old.filters
                            .entry(key.clone())
                            .or_default()
                            .insert(*selector, policy);
                    }
                    None => {
                        if let Some(filter) = old.filters.get_mut(key) {
                            filter.remove(selector);
                            if filter.is_empty() {
                                old.filters.remove(key);
                            }
                        }
                    }
                }
            }
            debug_assert!(
                fresh.is_none_or(|filter| filter.is_empty()),
                "a narrowed fold gave a selector it was not asked for"
            );
            if !changed.is_empty() {
                differs = true;
                changed_selectors.insert((direction, key.clone()), changed);
            }
        }
    }
    (differs, changed_selectors)
}

/// Per touched filter, the selectors whose policy a narrowed fold changed
/// (ascending): only their ops are made again (`splice_ops`).
type ChangedSelectors = BTreeMap<(Direction, FilterKey), Vec<SelectorId>>;

/// What a rule change can change in its subjects' L4 policies: the
/// filters its rules add to before and after (and the L3-only ones), and,
/// when known, the only selectors whose policy in them can change.
#[derive(Debug, Clone, Default)]
struct Touched {
    filters: BTreeSet<(Direction, FilterKey)>,
    /// The changed rules' peers before and after and the wildcard (the
    /// directions' synthetic allow-all): a selector's policy in a filter
    /// is the merge of the rules adding it there, so no other's changes.
    /// `None`: any selector's (more than [`NARROW_MAX`], or not known).
    selectors: Option<BTreeSet<SelectorId>>,
}

/// Most selectors a change folds again one by one ([`Touched`]); past it,
/// the touched filters are folded whole.
const NARROW_MAX: usize = 64;

impl Touched {
    /// Touches the L3-only filters of both directions (the synthetic
    /// allow-all and the directions' default deny reach them).
    fn l3() -> Self {
        Self {
            filters: Direction::ALL.into_iter().map(|d| (d, L3_FILTER)).collect(),
            selectors: None,
        }
    }

    /// Narrows to the selectors `old` (the changed rules' peers before,
    /// as selectors: their ids may have moved since) and the peers of the
    /// rules at `new` name, with the wildcard; not narrowed when `old`
    /// gave up, one is not interned or there are more than
    /// [`NARROW_MAX`].
    fn narrow(&mut self, parts: &ResolverParts, old: &OldPeers, new: &[usize]) {
        let Some(old) = &old.0 else {
            return;
        };
        let mut set: BTreeSet<SelectorId> = BTreeSet::from([parts.wildcard]);
        for selector in old {
            let Some(id) = parts.cache.id_of(selector) else {
                return;
            };
            set.insert(id);
        }
        for index in new {
            let Some(peers) = parts.peer_ids.get(*index) else {
                return;
            };
            set.extend(peers.iter().flatten().copied());
        }
        if set.len() <= NARROW_MAX {
            self.selectors = Some(set);
        }
    }
}

/// The changed rules' peers before a change, as selectors (their ids may
/// move with it), for [`Touched::narrow`]: gathered rule by rule by
/// [`OldPeers::add`] (a text's changed rules one at a time, as each is
/// replaced; a removed block's at once), until there are more than
/// [`NARROW_MAX`]: then `None`, the touched filters folded whole, and no
/// more are read.
#[derive(Debug)]
struct OldPeers(Option<Vec<Selector>>);

impl OldPeers {
    /// None gathered yet.
    fn new() -> Self {
        Self(Some(Vec::new()))
    }

    /// Adds the peers of `rules` (as they are before the change), or
    /// gives up past [`NARROW_MAX`] in all: then at most one peer more
    /// than that is read and cloned, not every peer of a large removed
    /// block.
    fn add<'r>(&mut self, rules: impl IntoIterator<Item = &'r PolicyRule>) {
        let Some(list) = &mut self.0 else {
            return;
        };
        // While gathering, at most `NARROW_MAX` are kept: reading one
        // more than the room left is enough to know to give up.
        let room = (NARROW_MAX + 1).saturating_sub(list.len());
        list.extend(
            rules
                .into_iter()
                .flat_map(|rule| rule.peers.iter().flatten())
                .take(room)
                .cloned(),
        );
        if list.len() > NARROW_MAX {
            self.0 = None;
        }
    }
}

/// A subject's kept `limits::insertion_bound`: Σ over enforced filters of
/// (port blocks) × Σ over its selectors of max(1, identities selected),
/// plus 1 per direction that is not enforced, regrouped by selector as
/// Σ over selectors of (weight: the port blocks of the enforced filters it
/// is in) × max(1, identities selected), plus the directions' 1s. Exact
/// whenever it does not overflow `u64` (where `insertion_bound` would
/// saturate, nothing is kept): a rule change moves the touched filters'
/// weights, an identity change the term of each selection it changes; no
/// pass over every filter either way. Debug builds check it against
/// `insertion_bound` at every use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct KeptBound {
    bound: u64,
    weights: HashMap<SelectorId, u64>,
}

/// The kept bounds by subject identity, with the identities whose bound
/// weighs each selector: a selection change moves the bounds that weigh
/// it instead of a pass over every subject's (that pass grew with the
/// cluster: ~31,000 instructions of an identity add at 2,257 endpoints,
/// callgrind, session 12).
#[derive(Debug, Clone, Default)]
struct KeptBounds {
    by_identity: HashMap<u32, KeptBound>,
    /// foldhash: the keys are the session's own selector ids.
    weighing: foldhash::HashMap<SelectorId, BTreeSet<u32>>,
    /// The identities of taken bounds ([`KeptBounds::take`]), still in
    /// `weighing` under their selectors until they are put back or
    /// removed.
    taken: HashSet<u32>,
}

impl KeptBounds {
    fn get(&self, identity: u32) -> Option<&KeptBound> {
        self.by_identity.get(&identity)
    }

    /// Keeps `kept` as `identity`'s bound, moving in the index only the
    /// selectors that differ from the replaced bound's (un-indexing and
    /// indexing them all was ~20 % of a one-rule change, callgrind,
    /// session 13). A taken bound goes back through
    /// [`KeptBounds::put_back`]; given here, it is forgotten whole first.
    fn insert(&mut self, identity: u32, kept: KeptBound) {
        let old = match self.by_identity.remove(&identity) {
            Some(previous) => selectors_of(&previous),
            None => {
                self.forget_taken(identity);
                Vec::new()
            }
        };
        reindex(&mut self.weighing, &identity, &old, &selectors_of(&kept));
        self.by_identity.insert(identity, kept);
    }

    /// Takes `identity`'s bound out to be corrected and put back with
    /// [`KeptBounds::put_back`] (or dropped with [`KeptBounds::remove`]);
    /// the index keeps its selectors until then. Nothing is listed: a
    /// bound weighing 4,096 selectors was listed and sorted here and at
    /// the put-back in every one-rule change (session 26).
    fn take(&mut self, identity: u32) -> Option<KeptBound> {
        let kept = self.by_identity.remove(&identity)?;
        self.taken.insert(identity);
        Some(kept)
    }

    /// Puts back `identity`'s taken bound, whose weights changed only on
    /// the selectors `changed`: only those move in the index. A bound not
    /// taken is inserted as by [`KeptBounds::insert`].
    fn put_back(
        &mut self,
        identity: u32,
        kept: KeptBound,
        changed: impl Iterator<Item = SelectorId>,
    ) {
        if !self.taken.remove(&identity) {
            self.insert(identity, kept);
            return;
        }
        for selector in changed {
            let was = self
                .weighing
                .get(&selector)
                .is_some_and(|identities| identities.contains(&identity));
            let now = kept.weights.contains_key(&selector);
            if was && !now {
                unindex(&mut self.weighing, selector, &identity);
            } else if now && !was {
                self.weighing.entry(selector).or_default().insert(identity);
            }
        }
        self.by_identity.insert(identity, kept);
    }

    /// Drops `identity`'s taken bound, whose selectors when taken were
    /// among `held` (its weights' keys then, or now and those a failed
    /// correction reweighed): it leaves the index under each.
    fn drop_taken(&mut self, identity: u32, held: impl Iterator<Item = SelectorId>) {
        if self.taken.remove(&identity) {
            for selector in held {
                unindex(&mut self.weighing, selector, &identity);
            }
        }
    }

    /// A taken bound put back whole or removed: it leaves the index. Its
    /// selectors were not listed ([`KeptBounds::take`]), so every
    /// selector's entry is looked at; the session drops its taken bounds
    /// with [`KeptBounds::drop_taken`] instead.
    fn forget_taken(&mut self, identity: u32) {
        if self.taken.remove(&identity) {
            self.weighing.retain(|_, identities| {
                identities.remove(&identity);
                !identities.is_empty()
            });
        }
    }

    fn remove(&mut self, identity: u32) -> Option<KeptBound> {
        self.forget_taken(identity);
        let kept = self.by_identity.remove(&identity)?;
        for selector in kept.weights.keys() {
            unindex(&mut self.weighing, *selector, &identity);
        }
        Some(kept)
    }

    /// Selectors numbered again (`moves`, a permutation of those ids): the
    /// bounds that weigh a moved selector and the index follow.
    fn relabel(&mut self, moves: &foldhash::HashMap<SelectorId, SelectorId>) {
        debug_assert!(self.taken.is_empty(), "a bound taken during a renumbering");
        for identity in relabel_index(&mut self.weighing, moves) {
            if let Some(kept) = self.by_identity.get_mut(&identity) {
                // The moved selectors' weights only: an identity every
                // CIDR selector weighs has thousands (session 26).
                let weights = &kept.weights;
                let pairs = moved_among(
                    (weights.len(), weights.keys().copied()),
                    |id| weights.contains_key(&id),
                    moves,
                );
                if pairs.len() * BULK_RENAME > weights.len() {
                    kept.weights = std::mem::take(&mut kept.weights)
                        .into_iter()
                        .map(|(s, w)| (moves.get(&s).copied().unwrap_or(s), w))
                        .collect();
                    continue;
                }
                let taken: Vec<(SelectorId, u64)> = pairs
                    .into_iter()
                    .filter_map(|(old, new)| kept.weights.remove(&old).map(|w| (new, w)))
                    .collect();
                kept.weights.extend(taken);
            }
        }
    }

    /// Debug builds: the index equals one made from the kept bounds.
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        {
            let mut weighing: BTreeMap<SelectorId, BTreeSet<u32>> = BTreeMap::new();
            for (identity, kept) in &self.by_identity {
                for selector in kept.weights.keys() {
                    weighing.entry(*selector).or_default().insert(*identity);
                }
            }
            let kept: BTreeMap<SelectorId, BTreeSet<u32>> = self
                .weighing
                .iter()
                .map(|(s, ids)| (*s, ids.clone()))
                .collect();
            debug_assert_eq!(kept, weighing, "the kept bounds' selector index");
            debug_assert!(self.taken.is_empty(), "a bound taken and not put back");
        }
    }
}

/// The selectors a kept bound weighs, sorted.
fn selectors_of(kept: &KeptBound) -> Vec<SelectorId> {
    let mut selectors: Vec<SelectorId> = kept.weights.keys().copied().collect();
    selectors.sort_unstable();
    selectors
}

/// Per direction whether it is enforced, and the selector weights of some
/// of a policy's filters.
type TouchedWeights = ([bool; 2], HashMap<SelectorId, u64>);

impl KeptBound {
    /// The bound of `identity`'s `policy`: the kept one, else computed
    /// (and kept when it does not overflow).
    fn get(
        bounds: &mut KeptBounds,
        identity: u32,
        policy: &L4Policy,
        cache: &SelectorCache,
    ) -> u64 {
        if let Some(kept) = bounds.get(identity) {
            return kept.bound;
        }
        match Self::of(policy, cache) {
            Some(kept) => {
                let bound = kept.bound;
                bounds.insert(identity, kept);
                bound
            }
            None => insertion_bound(policy, cache),
        }
    }

    /// The bound of `policy` under the selections of `cache`; `None` when
    /// it overflows.
    fn of(policy: &L4Policy, cache: &SelectorCache) -> Option<Self> {
        let mut kept = Self::default();
        let mut weights = HashMap::new();
        for direction in Direction::ALL {
            let dir = policy.direction(direction);
            if !dir.enforced {
                kept.bound = kept.bound.checked_add(1)?;
                continue;
            }
            for (filter, per_selector) in &dir.filters {
                Self::weigh(&mut weights, filter, per_selector.keys())?;
            }
        }
        kept.reweigh(&weights, true, cache)?;
        (kept.bound < u64::MAX).then_some(kept)
    }

    /// Adds the weights of one filter's selectors.
    fn weigh<'s>(
        weights: &mut HashMap<SelectorId, u64>,
        filter: &FilterKey,
        selectors: impl Iterator<Item = &'s SelectorId>,
    ) -> Option<()> {
        let blocks = filter_blocks(filter);
        for selector in selectors {
            let weight = weights.entry(*selector).or_insert(0);
            *weight = weight.checked_add(blocks)?;
        }
        Some(())
    }

    /// The weights of the `touched` filters of `policy` in its enforced
    /// directions (of the selectors `narrow` only, when given), with the
    /// directions' enforcement; `None` when they overflow.
    fn touched(
        policy: &L4Policy,
        touched: &BTreeSet<(Direction, FilterKey)>,
        narrow: Option<&BTreeSet<SelectorId>>,
    ) -> Option<TouchedWeights> {
        let mut weights = HashMap::new();
        for (direction, key) in touched {
            let dir = policy.direction(*direction);
            if let Some(per_selector) = dir.filters.get(key)
                && dir.enforced
            {
                match narrow {
                    Some(set) => Self::weigh(
                        &mut weights,
                        key,
                        set.iter().filter(|s| per_selector.contains_key(s)),
                    )?,
                    None => Self::weigh(&mut weights, key, per_selector.keys())?,
                }
            }
        }
        Some(([policy.ingress.enforced, policy.egress.enforced], weights))
    }

    /// Adds (`add`) or takes away `weights` and their terms; `None` (the
    /// bound no longer exact) on overflow.
    fn reweigh(
        &mut self,
        weights: &HashMap<SelectorId, u64>,
        add: bool,
        cache: &SelectorCache,
    ) -> Option<()> {
        for (selector, weight) in weights {
            let selected = u64::try_from(cache.selection(*selector).len().max(1)).ok()?;
            let term = weight.checked_mul(selected)?;
            let kept = self.weights.entry(*selector).or_insert(0);
            if add {
                *kept = kept.checked_add(*weight)?;
                self.bound = self.bound.checked_add(term)?;
            } else {
                *kept = kept.checked_sub(*weight)?;
                self.bound = self.bound.checked_sub(term)?;
            }
            if *kept == 0 {
                self.weights.remove(selector);
            }
        }
        (self.bound < u64::MAX).then_some(())
    }

    /// The selection of `selector` went from `before` to `after`
    /// identities: each kept bound that weighs it moves by its weight per
    /// change of max(1, selected); one that would overflow is dropped.
    fn selection_changed(
        bounds: &mut KeptBounds,
        selector: SelectorId,
        before: usize,
        after: usize,
    ) {
        let wide = |n: usize| u64::try_from(n.max(1)).unwrap_or(u64::MAX);
        let (before, after) = (wide(before), wide(after));
        if before == after {
            return;
        }
        let weighing: Vec<u32> = bounds
            .weighing
            .get(&selector)
            .map(|ids| ids.iter().copied().collect())
            .unwrap_or_default();
        for identity in weighing {
            let Some(kept) = bounds.by_identity.get_mut(&identity) else {
                continue;
            };
            let Some(weight) = kept.weights.get(&selector) else {
                continue;
            };
            let moved = if after > before {
                weight
                    .checked_mul(after - before)
                    .and_then(|d| kept.bound.checked_add(d))
            } else {
                weight
                    .checked_mul(before - after)
                    .and_then(|d| kept.bound.checked_sub(d))
            };
            match moved {
                Some(bound) if bound < u64::MAX => kept.bound = bound,
                _ => {
                    bounds.remove(identity);
                }
            }
        }
    }
}

/// What a filter's ops read besides the filter itself
/// (`Resolver::filter_ops`): per direction whether it is enforced and its
/// features, and the endpoint's proxy ports (the endpoint, the resolver's
/// selectors and the origins are the caller's to keep).
type OpsShape = ([(bool, PolicyFeatures); 2], ProxyPorts);

/// Per direction, how many selector policies of an L4 policy deny, have
/// an L7 parser, have authentication, and have a parser without denying
/// (`DirectionPolicy::features` and `proxy_ports` read exactly these): the
/// ops' shape from them ([`FeatureCounts::shape`]) needs no pass over every
/// filter, and a rule change corrects them by its touched filters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct FeatureCounts([[u64; 4]; 2]);

impl FeatureCounts {
    /// The counts of every filter of `policy`.
    fn of(policy: &L4Policy) -> Self {
        let mut counts = Self::default();
        for direction in Direction::ALL {
            for per_selector in policy.direction(direction).filters.values() {
                counts.count(direction, per_selector.values(), true);
            }
        }
        counts
    }

    /// Adds (or takes away) the selector policies of one filter.
    fn count<'p>(
        &mut self,
        direction: Direction,
        policies: impl Iterator<Item = &'p SelectorPolicy>,
        add: bool,
    ) {
        let counts = &mut self.0[usize::from(direction == Direction::Egress)];
        for policy in policies {
            let redirect = policy.l7.parser != crate::resolve::rule::L7Parser::None;
            let terms = [
                policy.deny,
                redirect,
                policy.auth.is_some(),
                redirect && !policy.deny,
            ];
            for (count, term) in counts.iter_mut().zip(terms) {
                if term {
                    *count = if add {
                        count.saturating_add(1)
                    } else {
                        count.saturating_sub(1)
                    };
                }
            }
        }
    }

    /// Adds (or takes away) the `touched` filters of `policy` (the
    /// policies of the selectors `narrow` only, when given).
    fn count_touched(
        &mut self,
        policy: &L4Policy,
        (touched, narrow): (
            &BTreeSet<(Direction, FilterKey)>,
            Option<&BTreeSet<SelectorId>>,
        ),
        add: bool,
    ) {
        for (direction, key) in touched {
            if let Some(per_selector) = policy.direction(*direction).filters.get(key) {
                match narrow {
                    Some(set) => {
                        self.count(
                            *direction,
                            set.iter().filter_map(|s| per_selector.get(s)),
                            add,
                        );
                    }
                    None => self.count(*direction, per_selector.values(), add),
                }
            }
        }
    }

    /// `ops_shape(policy)` when these are `policy`'s counts: the features
    /// from the counts, the proxy ports computed only when some selector
    /// policy redirects.
    fn shape(&self, policy: &L4Policy) -> OpsShape {
        let direction = |d: Direction| {
            let [deny, redirect, auth, _] = self.0[usize::from(d == Direction::Egress)];
            let mut bits = PolicyFeatures::NONE;
            for (count, bit) in [
                (deny, PolicyFeatures::DENY),
                (redirect, PolicyFeatures::REDIRECT),
                (auth, PolicyFeatures::AUTH),
            ] {
                if count > 0 {
                    bits |= bit;
                }
            }
            (policy.direction(d).enforced, bits)
        };
        let proxies = if self.0.iter().any(|c| c[3] > 0) {
            proxy_ports(policy)
        } else {
            ProxyPorts::new()
        };
        (
            [direction(Direction::Ingress), direction(Direction::Egress)],
            proxies,
        )
    }
}

fn ops_shape(policy: &L4Policy) -> OpsShape {
    let direction = |d: Direction| {
        let dir = policy.direction(d);
        (dir.enforced, dir.features())
    };
    (
        [direction(Direction::Ingress), direction(Direction::Egress)],
        proxy_ports(policy),
    )
}

/// The ops of `policy` made from the old record's by making only the
/// `touched` filters' ops again, when the ops' shape (`ops_shape`) and the
/// origins are unchanged: `Resolver::map_ops` lists per direction either
/// the allow-all op or every filter's ops in filter order, then the
/// localhost op, and a filter's ops read only the filter and the shape. So
/// the untouched filters' ops are the old ones, in the same order: the old
/// ops are taken out of `old` (its `ops` are left empty) and each touched
/// filter's old run of ops (found by binary search: a direction's filter
/// ops are sorted by filter) is replaced in place by its new ops. The work
/// is that of the touched filters plus one move of the ops after them,
/// not a pass over every filter.
///
/// Also the peers whose op sequence differs (`redistill` replays exactly
/// these): a peer's sequence is its ops in filter order, so it is the same
/// when, in every touched filter, its ops before and after are the same
/// list. `None` (make all of them; `old` untouched) when the old record has
/// diagnostics (they would have to be split by filter), a new filter op
/// gives one, or the old ops are not laid out as expected.
fn splice_ops(
    resolver: &Resolver<'_>,
    endpoint: &Endpoint,
    (policy, shape): (&L4Policy, &OpsShape),
    old: &mut StateRecord,
    (touched, narrowed): (&BTreeSet<(Direction, FilterKey)>, Option<&ChangedSelectors>),
    describe: &dyn Fn(u32) -> String,
) -> Option<Spliced> {
    if !old.diagnostics.is_empty() {
        return None;
    }
    let proxy_ports = &shape.1;
    // Per touched filter with ops before or after: the old ops' range and
    // the new ops, ascending and disjoint.
    let mut replaced: Vec<(Range<usize>, Vec<MapOp>)> = Vec::new();
    let mut diagnostics = Vec::new();
    let mut at = 0;
    // Plan and make the touched filters' ops; `old` is only read.
    for direction in Direction::ALL {
        let dir = policy.direction(direction);
        if !dir.enforced {
            let op = old.ops.get(at)?;
            if op.filter.is_some() || op.key.direction() != direction {
                return None;
            }
            at += 1;
            continue;
        }
        // The direction's filter ops are a run at `at`, followed only by
        // ops that are not (the other direction's, the localhost op): a
        // binary search, not a pass over 4,096 ops of a one-rule change.
        let in_run = |op: &MapOp| op.filter.is_some() && op.key.direction() == direction;
        let end = at + old.ops[at..].partition_point(in_run);
        debug_assert_eq!(
            end,
            at + old.ops[at..].iter().take_while(|op| in_run(op)).count(),
            "the direction's filter ops are one run"
        );
        let segment = &old.ops[at..end];
        debug_assert!(
            segment.windows(2).all(|w| w[0].filter <= w[1].filter),
            "a direction's filter ops in filter order"
        );
        let features = shape.0[usize::from(direction == Direction::Egress)].1;
        for touched_filter in touched.iter().filter(|(d, _)| *d == direction) {
            let filter_key = &touched_filter.1;
            // Folded by selector: only the selectors whose policy changed
            // (none: the filter is as it was).
            let changed = match narrowed {
                Some(changed) => match changed.get(touched_filter) {
                    Some(list) => Some(list),
                    None => continue,
                },
                None => None,
            };
            let below = |op: &MapOp| op.filter.as_ref().is_some_and(|k| k < filter_key);
            let up_to = |op: &MapOp| op.filter.as_ref().is_some_and(|k| k <= filter_key);
            let range = at + segment.partition_point(below)..at + segment.partition_point(up_to);
            let cx = FilterContext {
                endpoint,
                direction,
                proxy_ports,
                origins_file: describe,
            };
            let per_selector = dir.filters.get(filter_key);
            if let (Some(changed), Some(per_selector)) = (changed, per_selector)
                && !changed.contains(&resolver.wildcard())
                && !range.is_empty()
            {
                // The wildcard's entry (which suppresses the same entries
                // of other selectors) is as it was: the other selectors'
                // ops stay, and the changed ones' are replaced in place.
                let events = splice_selectors(
                    resolver,
                    (&cx, filter_key, per_selector, features),
                    (&old.ops, &old.by_peers, range),
                    changed,
                )?;
                replaced.extend(events);
                continue;
            }
            let mut ops = Vec::new();
            if let Some(per_selector) = per_selector {
                resolver.filter_ops(
                    &cx,
                    filter_key,
                    per_selector,
                    features,
                    &mut diagnostics,
                    &mut ops,
                );
            }
            if !range.is_empty() || !ops.is_empty() {
                replaced.push((range, ops));
            }
        }
        at = end;
    }
    // The localhost op (or nothing): unchanged.
    if old.ops[at..].iter().any(|op| op.filter.is_some()) || !diagnostics.is_empty() {
        return None;
    }

    // Peers whose sequence differs (see above), compared before anything
    // moves: each peer's replaced ops before and after, over every
    // replacement at once (a selector replaced one by one, by
    // `splice_selectors`, may have its ops in several), in one pass over
    // each (a filter that 4,096 CIDR rules share was 4,096 passes over
    // both: ~30 ms of a prefix change, session 26). A peer's ops in a
    // filter are all replaced or none are, so its sequence is the same
    // when these lists are.
    let mut of_peer: foldhash::HashMap<OpPeers, (Vec<&MapOp>, Vec<&MapOp>)> =
        foldhash::HashMap::default();
    for (range, after) in &replaced {
        let before = &old.ops[range.clone()];
        if before == &after[..] {
            continue;
        }
        for op in before {
            of_peer.entry(op.peers).or_default().0.push(op);
        }
        for op in after {
            of_peer.entry(op.peers).or_default().1.push(op);
        }
    }
    let differing: BTreeSet<OpPeers> = of_peer
        .into_iter()
        .filter(|(_, (was, now))| was != now)
        .map(|(peer, _)| peer)
        .collect();
    // Where each replacement's new ops start, and the shift of the old
    // indices after it (`shifts[j]`: after the first `j` replacements).
    let mut made_at: Vec<Range<usize>> = Vec::with_capacity(replaced.len());
    let mut shifts: Vec<isize> = Vec::with_capacity(replaced.len() + 1);
    shifts.push(0);
    let mut shift = 0isize;
    for (range, new) in &replaced {
        let start = range.start.checked_add_signed(shift)?;
        made_at.push(start..start + new.len());
        shift += new.len() as isize - range.len() as isize;
        shifts.push(shift);
    }
    // Splice in place, last first (earlier ranges keep their indices).
    let ends: Vec<Range<usize>> = replaced.iter().map(|(r, _)| r.clone()).collect();
    // Each list of the op index is ascending: its indices before the first
    // replacement stay, those after the last move by the whole shift
    // (nothing to do when it is 0, as for a changed port), and only the
    // few between are looked at one by one, instead of a search per index
    // of every peer.
    let (first, last) = match (ends.first(), ends.last()) {
        (Some(first), Some(last)) => (first.start, last.end),
        _ => (0, 0),
    };
    let total = shifts.last().copied().unwrap_or(0);
    let old_peers: Vec<OpPeers> = if total == 0 {
        old.ops[first..last].iter().map(|op| op.peers).collect()
    } else {
        Vec::new()
    };
    let mut ops = std::mem::take(&mut old.ops);
    for (range, new) in replaced.into_iter().rev() {
        drop(ops.splice(range, new));
    }
    // The op index: the old one's indices moved by the replacements before
    // them (those inside a replaced range go), the made ops' added (lists
    // stay ascending).
    let mut by_peers = std::mem::take(&mut old.by_peers);
    let moved = |index: usize| -> Option<usize> {
        let j = ends.partition_point(|r| r.end <= index);
        if ends.get(j).is_some_and(|r| r.start <= index) {
            return None;
        }
        index.checked_add_signed(shifts[j])
    };
    let fix = |list: &mut Vec<usize>| {
        let from = list.partition_point(|index| *index < first);
        let to = from + list[from..].partition_point(|index| *index < last);
        let mut kept = from;
        for i in from..to {
            if let Some(index) = moved(list[i]) {
                list[kept] = index;
                kept += 1;
            }
        }
        list.drain(kept..to);
        if total != 0 {
            let mut at = kept;
            for i in kept..list.len() {
                if let Some(index) = list[i].checked_add_signed(total) {
                    list[at] = index;
                    at += 1;
                }
            }
            list.truncate(at);
        }
        !list.is_empty()
    };
    // The peers whose ops are all gone (their selectors may leave the
    // state's index, `States::put_back`).
    let mut emptied: Vec<OpPeers> = Vec::new();
    if total == 0 {
        // Only the lists holding an old index in `first..last` change:
        // those of the old ops there (one list per peer each, and the
        // lists are separate allocations a pass over the whole index
        // would read, cold, for nothing).
        let peers: BTreeSet<OpPeers> = old_peers.into_iter().collect();
        for peers in peers {
            if let Some(list) = by_peers.get_mut(&peers)
                && !fix(list)
            {
                by_peers.remove(&peers);
                emptied.push(peers);
            }
        }
    } else {
        by_peers.retain(|peers, list| {
            let kept = fix(list);
            if !kept {
                emptied.push(*peers);
            }
            kept
        });
    }
    let mut grown: BTreeSet<OpPeers> = BTreeSet::new();
    let mut came: Vec<OpPeers> = Vec::new();
    for range in made_at {
        for index in range {
            let peers = ops[index].peers;
            match by_peers.entry(peers) {
                std::collections::hash_map::Entry::Occupied(mut list) => list.get_mut().push(index),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(vec![index]);
                    came.push(peers);
                }
            }
            grown.insert(peers);
        }
    }
    // A peer emptied and made again keeps its place in the index. (Sets:
    // a filter's thousands of selectors may all be emptied and made
    // again.)
    let selector = |peers: &OpPeers| match peers {
        OpPeers::Selector(id) => Some(*id),
        OpPeers::Fixed(_) => None,
    };
    let (emptied_set, came_set): (HashSet<OpPeers>, HashSet<OpPeers>) = (
        emptied.iter().copied().collect(),
        came.iter().copied().collect(),
    );
    let (gone, came): (Vec<SelectorId>, Vec<SelectorId>) = (
        emptied
            .iter()
            .filter(|p| !came_set.contains(p))
            .filter_map(selector)
            .collect(),
        came.iter()
            .filter(|p| !emptied_set.contains(p))
            .filter_map(selector)
            .collect(),
    );
    // Its identity-0 peers: the old ones still with ops, and the new
    // peers' that select identity 0.
    let mut zero: Vec<OpPeers> = std::mem::take(&mut old.zero)
        .into_iter()
        .filter(|peers| by_peers.contains_key(peers))
        .collect();
    for peers in grown {
        if let Some(list) = by_peers.get_mut(&peers) {
            list.sort_unstable();
        }
        if !zero.contains(&peers) && selects_zero(resolver, peers) {
            zero.push(peers);
        }
    }
    Some(Spliced {
        ops,
        differing,
        by_peers,
        zero,
        selectors: (gone, came),
    })
}

#[cfg(test)]
thread_local! {
    /// Filters spliced by selector on this thread ([`splice_selectors`]):
    /// the tests see that the path ran.
    pub(super) static SPLICED_BY_SELECTOR: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The replacements (ascending, disjoint) that make a filter's old ops,
/// `ops[range]`, those of its policy now when only the selectors `changed`
/// (ascending, not the wildcard) have another policy in it: their old ops
/// (found through the op index) go, and their new ones
/// (`Resolver::filter_ops_of`) go in at their places in the filter's
/// order, by masked port block, then the wildcard, then selector id. The
/// other ops are in that order (a renumbering that leaves a used selector
/// out of place has the state made in full), so each new op's place is a
/// binary search among them: a filter that 4,096 CIDR rules share is not
/// read whole for one rule's change (session 27). `None` when the old ops
/// are not laid out so or a new op gives a finding.
fn splice_selectors(
    resolver: &Resolver<'_>,
    (cx, filter_key, per_selector, features): (
        &FilterContext<'_>,
        &FilterKey,
        &BTreeMap<SelectorId, SelectorPolicy>,
        PolicyFeatures,
    ),
    (ops, by_peers, range): (&[MapOp], &OpIndex, Range<usize>),
    changed: &[SelectorId],
) -> Option<Vec<(Range<usize>, Vec<MapOp>)>> {
    let mut diagnostics = Vec::new();
    let mut made = Vec::new();
    // The masked port blocks the new ops were made for: a named port
    // that does not resolve gives none (and a finding).
    let bases = resolver.filter_ops_of(
        cx,
        (filter_key, per_selector),
        changed,
        features,
        &mut diagnostics,
        &mut made,
    )?;
    #[cfg(test)]
    SPLICED_BY_SELECTOR.with(|count| count.set(count.get() + 1));
    if !diagnostics.is_empty() {
        return None;
    }
    let wildcard = resolver.wildcard();
    let rank = |op: &MapOp| -> Option<(usize, bool, SelectorId)> {
        let OpPeers::Selector(id) = op.peers else {
            return None;
        };
        let block = bases.iter().position(|key| *key == op.key)?;
        Some((block, id != wildcard, id))
    };
    let is_changed = |op: &MapOp| matches!(op.peers, OpPeers::Selector(id) if changed.binary_search(&id).is_ok());
    let old = ops.get(range.clone())?;
    // The changed selectors' old ops in the filter.
    let mut gone: Vec<usize> = Vec::new();
    for id in changed {
        if let Some(list) = by_peers.get(&OpPeers::Selector(*id)) {
            let from = list.partition_point(|index| *index < range.start);
            gone.extend(
                list[from..]
                    .iter()
                    .take_while(|index| **index < range.end)
                    .copied(),
            );
        }
    }
    gone.sort_unstable();
    // The rank of the last op at or before `i` that stays (`Some(None)`:
    // none does); the ops that go are passed over, so the search reads
    // the staying ops' order alone.
    let kept_rank = |i: usize| -> Option<Option<(usize, bool, SelectorId)>> {
        let mut j = i;
        loop {
            if !is_changed(&old[j]) {
                return rank(&old[j]).map(Some);
            }
            if j == 0 {
                return Some(None);
            }
            j -= 1;
        }
    };
    let mut events: Vec<(Range<usize>, Vec<MapOp>)> = Vec::with_capacity(gone.len() + made.len());
    let mut gone = gone.into_iter().peekable();
    for op in made {
        let target = rank(&op)?;
        let (mut low, mut high) = (0, old.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if kept_rank(mid)?.is_none_or(|r| r < target) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        let at = range.start + low;
        while let Some(index) = gone.next_if(|index| *index < at) {
            events.push((index..index + 1, Vec::new()));
        }
        events.push((at..at, vec![op]));
    }
    events.extend(gone.map(|index| (index..index + 1, Vec::new())));
    // Touching events as one (a new op in place of the old one).
    let mut merged: Vec<(Range<usize>, Vec<MapOp>)> = Vec::with_capacity(events.len());
    for (at, new) in events {
        match merged.last_mut() {
            Some((last, last_new)) if at.start <= last.end => {
                last.end = last.end.max(at.end);
                last_new.extend(new);
            }
            _ => merged.push((at, new)),
        }
    }
    // Debug builds: the spliced filter is the filter's ops made whole.
    #[cfg(debug_assertions)]
    {
        let mut whole = Vec::new();
        resolver.filter_ops(
            cx,
            filter_key,
            per_selector,
            features,
            &mut Vec::new(),
            &mut whole,
        );
        let mut spliced: Vec<MapOp> = Vec::new();
        let mut at = range.start;
        for (replaced, new) in &merged {
            spliced.extend_from_slice(&ops[at..replaced.start]);
            spliced.extend(new.iter().cloned());
            at = replaced.end;
        }
        spliced.extend_from_slice(&ops[at..range.end]);
        debug_assert!(spliced == whole, "a filter's ops spliced by selector");
    }
    Some(merged)
}

/// What [`splice_ops`] gives: the new ops, the peers whose sequence
/// differs, the op index of the new ops, and the selectors the ops no
/// longer name and newly name.
struct Spliced {
    ops: Vec<MapOp>,
    differing: BTreeSet<OpPeers>,
    by_peers: OpIndex,
    zero: Vec<OpPeers>,
    selectors: (Vec<SelectorId>, Vec<SelectorId>),
}

/// Frees a replaced policy text off the update's path: a loaded text holds
/// its YAML tree and model, one allocation per node, and freeing a
/// 4,096-rule text takes longer than the rest of a one-rule update (10–45
/// ms). On a thread of its own when one can be started, else here.
///
/// A new thread per text, not one kept by the session and woken through a
/// channel: tried in session 9, that gave one-rule changes of 2–15 ms in
/// some runs instead of 0.4 ms (same minutes, loaded machine), presumably
/// the woken thread taking the updating thread's core before the update
/// returned; starting a thread costs some tens of microseconds.
fn drop_later(text: PolicyText) {
    // When the thread cannot start, the closure (and the text in it) is
    // dropped with the error, here.
    let _ = std::thread::Builder::new()
        .name("porin-session-free".to_owned())
        .spawn(move || drop(text));
}

/// Moves `spans` (the texts after a change) by the given numbers of rules,
/// origins and lowering findings.
fn shift_spans(spans: &mut [TextSpan], (rules, origins, diagnostics): (isize, isize, isize)) {
    for span in spans {
        span.rules = shift(&span.rules, rules);
        span.origins = shift(&span.origins, origins);
        span.diagnostics = shift(&span.diagnostics, diagnostics);
    }
}

fn shift(range: &Range<usize>, delta: isize) -> Range<usize> {
    let move_by = |n: usize| usize::try_from(n as isize + delta).unwrap_or(0);
    move_by(range.start)..move_by(range.end)
}

/// Makes the last `[n]` of `route` (which reads `[old]`) read `[new]`.
/// The rules after an inserted or removed item each take the next or the
/// previous index: unless the last digit carries or borrows, only that
/// digit changes, in place (every later item of a 4,096-rule section goes
/// through here on each insertion).
fn set_last_index(route: &mut String, old: usize, new: usize) {
    // A byte loop: routes are short, and `rfind` sets up a vector search.
    let Some(open) = route.bytes().rposition(|b| b == b'[') else {
        return;
    };
    // Only where the route reads `[old]` (lowering writes the two together
    // and this is the only place that changes them): a route out of step
    // is written again from `new`, as before.
    let last = route.len().saturating_sub(2);
    let reads_old = route.ends_with(']')
        && route.get(open + 1..=last).and_then(|d| d.parse().ok()) == Some(old);
    if reads_old {
        let digit = match route.as_bytes().get(last) {
            Some(&d) if new == old.wrapping_add(1) && d != b'9' => Some(d + 1),
            Some(&d) if new.wrapping_add(1) == old && d != b'0' => Some(d - 1),
            _ => None,
        };
        if let Some(d) = digit {
            // The digit and `]` are ASCII (parsed above), so `last` is a
            // character boundary; cheaper than `replace_range`'s splice.
            route.truncate(last);
            route.push(char::from(d));
            route.push(']');
            return;
        }
    }
    route.truncate(open);
    push_index(route, new);
}

/// Appends `[index]` to `route` (what lowering's `format!` writes, without
/// the formatting machinery: this runs for every item after a moved one).
fn push_index(route: &mut String, index: usize) {
    let mut digits = [0_u8; 20];
    let mut at = digits.len();
    let mut n = index;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    route.push('[');
    // ASCII digits: always UTF-8.
    route.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
    route.push(']');
}

/// Puts rule `index` into the rule list of every endpoint identity it
/// selects (`Resolver::new`'s test: the host flag, then the subject),
/// recording those identities in `selected`. A subject with a positive
/// requirement is tested only against the identities the cache's label
/// index gives for it, as `Resolver::new` does, and only those are
/// looked up among the endpoints': testing every endpoint identity's
/// labels was half of a rule insertion's block move in time (cache
/// misses) with 257 endpoint identities, and grows with the cluster.
/// Other subjects test every endpoint identity (`endpoint_ids`, made
/// here on first need, once for the caller's rules).
fn index_selected(
    (cache, table): (&mut SelectorCache, &IdentityTable),
    rules_by_identity: &mut BTreeMap<u32, Vec<usize>>,
    (rule, index): (&PolicyRule, usize),
    endpoint_ids: &mut Option<BTreeSet<u32>>,
    selected: &mut BTreeSet<u32>,
) {
    let place = |id: u32| {
        let list = rules_by_identity.entry(id).or_default();
        if let Err(at) = list.binary_search(&index) {
            list.insert(at, index);
        }
        selected.insert(id);
    };
    // Building the index reads every identity of the table, the test
    // below every endpoint's: worth it when those are about as many (not
    // beside 65,535 CIDR identities).
    let rebuild = table.identities.len() <= 2 * table.endpoint_identity.len();
    let indexed = (!rule.host)
        .then(|| cache.select_indexed(&rule.subject, table, rebuild))
        .flatten();
    match indexed {
        // Every one of them matches the subject already.
        Some(matching) => matching
            .into_iter()
            .filter(|id| rule.may_select(*id) && !holders(table, *id).is_empty())
            .for_each(place),
        None => endpoint_ids
            .get_or_insert_with(|| table.endpoint_identity.iter().copied().collect())
            .iter()
            .copied()
            .filter(|id| {
                rule.may_select(*id)
                    && table
                        .get(*id)
                        .is_some_and(|info| rule.subject.matches(&info.labels))
            })
            .for_each(place),
    }
}

/// Rules and origins a change inserts or removes at one place
/// ([`Session::move_block`]).
struct Block {
    /// The index of the block's first rule.
    rules_at: usize,
    /// The id of the block's first origin.
    origins_at: usize,
    change: BlockChange,
}

enum BlockChange {
    /// Rules (their origin ids already those from `origins_at`) and
    /// origins inserted.
    Insert {
        rules: Vec<PolicyRule>,
        origins: Vec<Origin>,
    },
    /// That many rules and origins removed.
    Remove { rules: usize, origins: usize },
}

/// A block moved in the model, for [`Session::finish_move`]: the
/// resolver's parts (taken out of the model), the filters the block's
/// rules add to and the identities they select(ed).
struct Moving {
    parts: ResolverParts,
    touched: Touched,
    subjects_of_changed: BTreeSet<u32>,
}

/// Origin ids as a block's insertion or removal moves them
/// ([`Session::move_block`]): from `from` up by `count` for an insertion;
/// past the block down by `count` for a removal, and the removed ids
/// themselves to `u32::MAX` (no origin), so that what still names them
/// (the touched filters, made again) never compares equal to what the
/// rules that take their ids give.
struct Renumber {
    from: u32,
    count: u32,
    inserted: bool,
}

impl Renumber {
    fn id(&self, id: u32) -> u32 {
        if id < self.from || id == u32::MAX {
            id
        } else if self.inserted {
            id.saturating_add(self.count)
        } else if id - self.from < self.count {
            u32::MAX
        } else {
            id - self.count
        }
    }

    /// Whether some id of `set` moves.
    fn moves(&self, set: &Origins) -> bool {
        set.last().is_some_and(|last| *last >= self.from)
    }

    fn set(&self, set: &mut Origins) {
        if self.moves(set) {
            set.map_ids(|id| self.id(id));
        }
    }
}

/// The first endpoint (name order, `super::names`) of a state key: the
/// batch compiler distills a state for the first endpoint that has it.
fn first_endpoint(inventory: &Inventory, table: &IdentityTable, key: &StateKey) -> Option<usize> {
    holders(table, key.0)
        .iter()
        .filter_map(|&index| Some((index, inventory.endpoints.get(index)?)))
        .filter(|(_, e)| e.ports == key.1)
        .min_by(|(_, a), (_, b)| name_order(a, b))
        .map(|(index, _)| index)
}

/// Name order (`Inventory::finish`'s): namespace, then name.
fn name_order(a: &Endpoint, b: &Endpoint) -> std::cmp::Ordering {
    (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))
}

/// The storage positions (ascending) of the endpoints holding
/// `identity`: the table's member list when it keeps one (an endpoint
/// identity, or a reserved identity endpoints carry), so an update reads
/// the endpoints it changes; else (an identity the table does not list
/// with members, as 0 for labels without one) a scan of the table's
/// endpoint identities. Debug builds check the list against the scan.
fn holders(table: &IdentityTable, identity: u32) -> std::borrow::Cow<'_, [usize]> {
    let scan = || -> Vec<usize> {
        (0..table.endpoint_identity.len())
            .filter(|index| table.endpoint_identity[*index] == identity)
            .collect()
    };
    match table.get(identity).map(|info| &info.kind) {
        Some(
            IdentityKind::Endpoints { endpoints }
            | IdentityKind::ReservedEndpoints { endpoints, .. },
        ) => {
            debug_assert_eq!(*endpoints, scan(), "the members of identity {identity}");
            std::borrow::Cow::Borrowed(endpoints)
        }
        _ => std::borrow::Cow::Owned(scan()),
    }
}

/// A renumbering of selectors: `(old id, new id)`, a permutation of
/// those ids ([`batch_order_moves`]).
type Moves = Vec<(SelectorId, SelectorId)>;

/// The batch compiler interns peer selectors in rule order
/// (`Resolver::new`), and a filter's selectors are folded in id order: the
/// session's ids must order the selectors the rules use as the batch's
/// would (the wildcard is folded first whatever its id, so it is left
/// out). The ids that make it so: `(old, new)` for each selector whose id
/// changes (empty when the order holds): two, when one selector alone is
/// out of order and trades ids with an unused one ([`one_out_of_order`]);
/// else the used selectors take the ids they hold among themselves in
/// first-use order (the wildcard and unused selectors keep theirs).
/// With them, one flag per interned selector, by the ids before the
/// moves: whether a rule names it as a peer ([`used_selectors`], from the
/// same walk). `None` when a rule names an id the cache does not hold.
fn batch_order_moves(parts: &ResolverParts) -> Option<(Moves, Vec<bool>)> {
    // One flag per interned selector (a set was a fifth of a moved rule's
    // cost at 1,024 rules).
    let mut seen = vec![false; parts.cache.len()];
    let mut order: Vec<SelectorId> = Vec::new();
    let mut sorted = true;
    for peers in parts.peer_ids.iter().flatten() {
        for id in peers {
            let flag = seen.get_mut(*id)?;
            if *flag {
                continue;
            }
            *flag = true;
            if parts.cache.selector(*id).is_wildcard() {
                continue;
            }
            sorted &= order.last().is_none_or(|last| last < id);
            order.push(*id);
        }
    }
    if sorted {
        return Some((Vec::new(), seen));
    }
    if let Some(swap) = one_out_of_order(&order, &seen, |id| parts.cache.selector(id).is_wildcard())
    {
        return Some((swap, seen));
    }
    let mut ids = order.clone();
    ids.sort_unstable();
    let moves = order
        .into_iter()
        .zip(ids)
        .filter(|(old, new)| old != new)
        .collect();
    Some((moves, seen))
}

/// The two moves that put the used selectors in first-use order when only
/// one of them is out of it and an unused selector's id fits its place:
/// that selector and the unused one trade ids. A rule's peer changed to a
/// new selector (a CIDR rule's prefix edited in place) is the common case:
/// the new selector was interned last, and the one it replaced, now
/// unused, held the id its place needs. Sorting the used ids instead
/// would move every selector between the two (4,096 at the front of a
/// 4,096-rule text, session 25). The wildcard never moves, and `seen`
/// flags the selectors the rules use.
fn one_out_of_order(
    order: &[SelectorId],
    seen: &[bool],
    is_wildcard: impl Fn(SelectorId) -> bool,
) -> Option<Moves> {
    let descent = order.windows(2).position(|pair| pair[0] > pair[1])?;
    // The selector out of place is one side of the first descent.
    [descent, descent + 1].into_iter().find_map(|out| {
        let below = out.checked_sub(1).map(|at| order[at]);
        let above = order.get(out + 1).copied();
        let rest_sorted = order[..out]
            .iter()
            .chain(&order[out + 1..])
            .try_fold(None, |last: Option<SelectorId>, id| {
                last.is_none_or(|last| last < *id).then_some(Some(*id))
            })
            .is_some();
        if !rest_sorted {
            return None;
        }
        let low = below.map_or(0, |id| id + 1);
        let high = above.unwrap_or(seen.len());
        let free =
            (low..high).find(|id| !seen.get(*id).copied().unwrap_or(true) && !is_wildcard(*id))?;
        Some(vec![(order[out], free), (free, order[out])])
    })
}

/// The ids of sorted `a` that sorted `b` lacks.
fn difference(a: &[SelectorId], b: &[SelectorId]) -> Vec<SelectorId> {
    a.iter()
        .filter(|id| b.binary_search(id).is_err())
        .copied()
        .collect()
}

/// One flag per interned selector: whether a rule names it as a peer.
/// `None` when a rule names an id the cache does not hold. (Debug builds
/// check [`Model::renumber_selectors`]'s flags against it.)
fn used_selectors(parts: &ResolverParts) -> Option<Vec<bool>> {
    let mut used = vec![false; parts.cache.len()];
    for id in parts.peer_ids.iter().flatten().flatten() {
        *used.get_mut(*id)? = true;
    }
    Some(used)
}

/// Selectors numbered again (`moves`, a permutation of those ids;
/// `rename`, the same as a function of every id) in a map by selector:
/// the moved ones' values go to their new ids, the rest stay where they
/// are.
fn rename_keys<V>(
    map: &mut BTreeMap<SelectorId, V>,
    rename: &impl Fn(SelectorId) -> SelectorId,
    moves: &foldhash::HashMap<SelectorId, SelectorId>,
) {
    if map.len() <= moves.len() {
        // Its few keys, each by the renumbering's table (thousands of
        // one-selector filters: no hashing, nothing made when none moved).
        if map.keys().any(|id| rename(*id) != *id) {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(id, value)| (rename(id), value))
                .collect();
        }
        return;
    }
    let taken: Vec<(SelectorId, V)> = moves
        .iter()
        .filter_map(|(old, new)| map.remove(old).map(|value| (*new, value)))
        .collect();
    map.extend(taken);
}

/// The moves (`(old, new)`) of the selectors among `keys` (`len` of
/// them, `contains` asking for one): the keys are walked when they are
/// fewer than the moves, else the moves are looked up. Two moves
/// (`one_out_of_order`) among a state's 4,096 selectors, or 4,096 moves
/// (a rule inserted first) among a filter's one: either way the smaller
/// side.
fn moved_among(
    (len, keys): (usize, impl Iterator<Item = SelectorId>),
    contains: impl Fn(SelectorId) -> bool,
    moves: &foldhash::HashMap<SelectorId, SelectorId>,
) -> Vec<(SelectorId, SelectorId)> {
    if len <= moves.len() {
        keys.filter_map(|id| moves.get(&id).map(|new| (id, *new)))
            .collect()
    } else {
        moves
            .iter()
            .filter(|(old, _)| contains(**old))
            .map(|(old, new)| (*old, *new))
            .collect()
    }
}

/// Whether a state's ops are in the order `Resolver::filter_ops` makes
/// them under the current ids: within one filter and key, the wildcard
/// first, then the selectors by id. The ops of a selector whose `used`
/// flag is false are left out (`&[]`: none is), and each other op is
/// compared with the one before it that is kept: skipping only the pairs
/// with an unused selector is not transitive (`[3, 2, 1]` with 2 unused
/// passed, and a splice by selector then kept 3 before 1; session 27's
/// review).
fn ops_in_selector_order(ops: &[MapOp], cache: &SelectorCache, used: &[bool]) -> bool {
    let mut previous: Option<&MapOp> = None;
    for op in ops.iter().filter(|op| op_used(op, used)) {
        if previous.is_some_and(|before| !pair_in_selector_order(before, op, cache)) {
            return false;
        }
        previous = Some(op);
    }
    true
}

/// Whether an op names no selector, or one whose `used` flag is true
/// (`&[]`: every one).
fn op_used(op: &MapOp, used: &[bool]) -> bool {
    match op.peers {
        // A selector no rule uses any more has its ops only in the states
        // the changed rules reach, which the refold makes again
        // (`one_out_of_order` may have given it any id).
        OpPeers::Selector(id) => used.get(id).copied().unwrap_or(true),
        OpPeers::Fixed(_) => true,
    }
}

/// Whether two ops in a row are in [`ops_in_selector_order`]'s order.
fn pair_in_selector_order(a: &MapOp, b: &MapOp, cache: &SelectorCache) -> bool {
    let (OpPeers::Selector(first), OpPeers::Selector(second)) = (a.peers, b.peers) else {
        return true;
    };
    if a.key != b.key || a.filter != b.filter {
        return true;
    }
    !cache.selector(second).is_wildcard() && (cache.selector(first).is_wildcard() || first < second)
}

/// The state's ops changed to `ops`: the new record, the writes, whether
/// it was folded in full and how many identities were replayed.
///
/// A specific identity's part of a state is the fold of the ops for
/// identity 0 and for it, in order (`Resolver::apply_ops`). The order of
/// ops is fixed by (filter, key, selector), so when the ops of every
/// selector that selects an identity (and the identity-0 ops) are the same
/// sequence before and after, its part is the same: only the identities of
/// the selectors whose sequences differ are replayed. When the identity-0
/// ops differ, every part may change and the state is folded in full.
///
/// `differing`, when given, holds exactly the peers whose op sequence
/// differs and the op index of `ops` (`splice_ops` made both; `old.ops`
/// and `old.by_peers` are then empty, moved into the new record);
/// otherwise every peer's sequence is compared. With `full` (the ops'
/// order changed, not only some peers' sequences: `Model::reordered`) the
/// state is folded in full.
fn redistill(
    resolver: &Resolver<'_>,
    old: StateRecord,
    ops: Vec<MapOp>,
    diagnostics: Vec<Diagnostic>,
    (differing, full): (Option<(BTreeSet<OpPeers>, IndexedPeers)>, bool),
    extra: Option<&BTreeSet<u32>>,
    selecting: &dyn Fn(u32) -> Vec<SelectorId>,
) -> (StateRecord, Vec<MapChange>, bool, usize) {
    let (differing, mut record) = match differing {
        Some((differing, index)) => (
            Some(differing),
            StateRecord::with_index(resolver, MapState::new(), diagnostics, ops, index),
        ),
        None => (
            None,
            StateRecord::new(resolver, MapState::new(), diagnostics, ops),
        ),
    };
    let same = |peers: &OpPeers| {
        let empty = Vec::new();
        let a = old.by_peers.get(peers).unwrap_or(&empty);
        let b = record.by_peers.get(peers).unwrap_or(&empty);
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| old.ops[*x] == record.ops[*y])
    };
    let all_peers: BTreeSet<OpPeers> = match differing {
        _ if full => BTreeSet::new(),
        Some(differing) => differing,
        None => old
            .by_peers
            .keys()
            .chain(record.by_peers.keys())
            .copied()
            .filter(|peers| !same(peers))
            .collect(),
    };
    let mut identities: BTreeSet<u32> = BTreeSet::new();
    let mut full = full;
    for peers in &all_peers {
        match peers {
            OpPeers::Fixed(0) => full = true,
            OpPeers::Fixed(id) => {
                identities.insert(*id);
            }
            OpPeers::Selector(s) => {
                let selection = resolver.cache.selection(*s);
                if selection.contains(&0) {
                    full = true;
                }
                identities.extend(selection.iter().copied());
            }
        }
        if full || identities.len() > REPLAY_LIMIT {
            full = true;
            break;
        }
    }
    // Identities whose selections changed without an op changing (a CIDR
    // identity that came or went, `Model::replay`): their parts too.
    if !full && let Some(extra) = extra {
        identities.extend(extra.iter().copied());
        full = identities.len() > REPLAY_LIMIT;
    }
    if full {
        let mut state = MapState::new();
        let mut diagnostics = Vec::new();
        resolver.apply_ops(&record.ops, &mut state, &mut diagnostics, None);
        record.diagnostics.extend(diagnostics);
        let changes = policy_diff(&old.state, &state);
        record.state = Arc::new(state);
        return (record, changes, true, 0);
    }
    // The old state without a copy when no one else holds it.
    let mut shared = old.state;
    let state = Arc::make_mut(&mut shared);
    let (mut before, mut after) = (MapState::new(), MapState::new());
    for id in &identities {
        let Ok(identity) = Identity::new(*id) else {
            continue;
        };
        for (k, e) in state.identity_entries(identity) {
            state.remove(&k);
            let _ = before.upsert(k, e);
        }
        let selectors = selecting(*id);
        for (k, e) in replay(resolver, &record, *id, &selectors) {
            let _ = after.upsert(k, e.clone());
            let _ = state.upsert(k, e);
        }
    }
    // The difference of the replaced parts is the whole difference
    // (`crate::diff`).
    let changes = policy_diff(&before, &after);
    record.state = shared;
    let replayed = identities.len();
    (record, changes, false, replayed)
}

/// The part of a state for one identity: the fold of the identity-0 ops
/// and the ops whose peers include it, in order.
///
/// `selecting` lists the selectors whose selection holds the identity
/// (from the label index, so the cost is that of the identity's ops, not of
/// the state's); the selectors selecting identity 0 are the record's own
/// list.
fn replay(
    resolver: &Resolver<'_>,
    record: &StateRecord,
    identity: u32,
    selecting: &[SelectorId],
) -> Vec<(crate::mapstate::Key, crate::mapstate::Entry)> {
    let mut indices: Vec<usize> = Vec::new();
    let peers = record
        .zero
        .iter()
        .copied()
        .chain(selecting.iter().map(|s| OpPeers::Selector(*s)))
        .chain([OpPeers::Fixed(identity)]);
    let mut seen = BTreeSet::new();
    for peers in peers {
        if seen.insert(peers)
            && let Some(list) = record.by_peers.get(&peers)
        {
            indices.extend_from_slice(list);
        }
    }
    indices.sort_unstable();
    let mut part = MapState::new();
    let mut diagnostics = Vec::new();
    for index in indices {
        resolver.apply_op(
            &record.ops[index],
            &mut part,
            &mut diagnostics,
            Some(identity),
        );
    }
    match Identity::new(identity) {
        Ok(id) => part.identity_entries(id),
        Err(_) => Vec::new(),
    }
}

/// `policy_diff` of every endpoint whose state differs (by name), plus the
/// added and removed endpoints.
fn whole_differences(
    old: &[(String, u32, Arc<MapState>)],
    new: &[(String, u32, Arc<MapState>)],
) -> Vec<EndpointDelta> {
    let before: HashMap<&str, &(String, u32, Arc<MapState>)> =
        old.iter().map(|e| (e.0.as_str(), e)).collect();
    let after: BTreeSet<&str> = new.iter().map(|e| e.0.as_str()).collect();
    let mut deltas = Vec::new();
    for (name, identity, _) in old {
        if !after.contains(name.as_str()) {
            deltas.push(EndpointDelta {
                endpoint: name.clone(),
                identity: *identity,
                added: false,
                removed: true,
                changes: Vec::new(),
            });
        }
    }
    for (name, identity, state) in new {
        let (previous, added) = match before.get(name.as_str()) {
            Some(previous) if Arc::ptr_eq(&previous.2, state) => continue,
            Some(previous) => (previous.2.clone(), false),
            None => (Arc::new(MapState::new()), true),
        };
        let changes = policy_diff(&previous, state);
        if changes.is_empty() && !added {
            continue;
        }
        deltas.push(EndpointDelta {
            endpoint: name.clone(),
            identity: *identity,
            added,
            removed: false,
            changes,
        });
    }
    deltas
}

/// The CiliumCIDRGroups of one text (file and document of each, as the
/// whole lowering records them).
fn own_groups(outcome: &LoadOutcome) -> CidrGroups {
    CidrGroups::from_documents(
        outcome
            .documents
            .iter()
            .map(|d| (d.file.as_str(), d.index, &d.doc)),
    )
}

/// Counts (`add`) or uncounts the texts naming `values` in `counts`
/// (`Model::log_texts`).
fn count_log_values(counts: &mut BTreeMap<String, usize>, values: &BTreeSet<String>, add: bool) {
    for value in values {
        if add {
            *counts.entry(value.clone()).or_default() += 1;
        } else if let Some(n) = counts.get_mut(value) {
            *n -= 1;
            if *n == 0 {
                counts.remove(value);
            }
        }
    }
}

/// The log values of one text (`resolve::lower::log_values`).
fn text_log_values(outcome: &LoadOutcome) -> BTreeSet<String> {
    crate::resolve::lower::log_values(&PolicyInput::from_outcome(outcome))
}

/// Lowers one text alone (its CIDR-group peers against the groups of
/// `scope`, every text's), its origin ids moved to start at `offset`.
fn lower_text(text: &PolicyText, scope: Scope<'_>, offset: usize) -> TextLowering {
    let inputs = PolicyInput::from_outcome(&text.outcome);
    let lowered = lower_part(&inputs, scope);
    // Origins 0 and 1 are the synthetic allow-alls; the last is the host
    // allow's unless `allowLocalhost: policy`.
    let end = lowered.origins.len() - usize::from(lowered.localhost_origin.is_some());
    let shift_by = |id: u32| -> u32 {
        if id < 2 {
            id
        } else {
            id + u32::try_from(offset).unwrap_or(u32::MAX) - 2
        }
    };
    let rules = lowered
        .rules
        .into_iter()
        .map(|mut rule| {
            rule.origin = shift_by(rule.origin);
            rule
        })
        .collect();
    let origins = lowered.origins[2..end]
        .iter()
        .cloned()
        .map(|mut origin| {
            origin.id = shift_by(origin.id);
            origin
        })
        .collect();
    TextLowering {
        rules,
        origins,
        diagnostics: lowered.diagnostics,
        prefixes: lowered.prefixes,
        // The keys of the text's own numbering (`lower_part`).
        log_values: lowered.cookies.into_keys().collect(),
    }
}

/// The full compile, keeping everything an update needs, with the spans
/// of each text when lowering texts one by one reproduces it.
fn build_with_spans(
    texts: &[PolicyText],
    inputs: &[PolicyInput<'_>],
    inventory: Inventory,
    limits: &CompileLimits,
) -> Result<(Model, Inventory), CompileError> {
    let (mut model, inventory) = build(inputs, inventory, limits)?;
    let mut spans = Vec::with_capacity(texts.len());
    let (mut rules, mut origins, mut diagnostics) = (Vec::new(), Vec::new(), Vec::new());
    let mut prefixes = BTreeSet::new();
    let scope = model.lowered.scope(&inventory);
    for text in texts {
        let lowering = lower_text(text, scope, origins.len() + 2);
        spans.push(TextSpan {
            rules: rules.len()..rules.len() + lowering.rules.len(),
            origins: origins.len() + 2..origins.len() + 2 + lowering.origins.len(),
            diagnostics: diagnostics.len()..diagnostics.len() + lowering.diagnostics.len(),
            prefixes: lowering.prefixes.clone(),
            log_values: lowering.log_values,
            peer_keys: None,
        });
        rules.extend(lowering.rules);
        origins.extend(lowering.origins);
        diagnostics.extend(lowering.diagnostics);
        prefixes.extend(lowering.prefixes);
    }
    let whole = &model.lowered;
    let end = whole.origins.len() - usize::from(whole.localhost_origin.is_some());
    // Texts lowered against every text's CIDR groups and log cookies
    // (`lower_text`) give the whole's rules; a change of a text's groups,
    // or of which log values the texts name, rebuilds.
    // A session with ClusterNetworkPolicy tier rules recompiles every
    // change in full (its tiered states are not made of ops).
    let reproduces = !model.has_tiers()
        && whole.rules == rules
        && whole.origins.get(2..end) == Some(&origins[..])
        && whole.diagnostics == diagnostics
        && whole.prefixes == prefixes;
    model.log_texts = BTreeMap::new();
    if reproduces {
        for span in &spans {
            count_log_values(&mut model.log_texts, &span.log_values, true);
        }
    }
    model.spans = reproduces.then_some(spans);
    Ok((model, inventory))
}

/// The batch compile (`compile::drive`'s stages, in its order, under its
/// limits), keeping the model.
fn build(
    inputs: &[PolicyInput<'_>],
    inventory: Inventory,
    limits: &CompileLimits,
) -> Result<(Model, Inventory), CompileError> {
    // A session's inventory is in storage order (`super::names`); the
    // batch compile's first endpoint of a state, its endpoint order and so
    // the model's positions are those of name order (`Inventory::finish`
    // sorts the same way; the sort is stable and names are distinct).
    let mut inventory = inventory;
    inventory
        .endpoints
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    limits.check_endpoints(inventory.endpoints.len())?;
    limits.check_inputs(inputs)?;
    let lowered = lower(inputs, &inventory);
    limits.check_lowered(&lowered.rules, lowered.prefixes.len())?;
    let table =
        IdentityTable::allocate_with_groups(&inventory, &lowered.prefixes, &lowered.cidr_groups)?;
    limits.check_identities(&lowered.rules, table.identities.len())?;
    // Under the batch's selector budget (`Compilation::plan`).
    let resolver = limits
        .budgeted_resolver(&lowered.rules, &table, &inventory)?
        .with_localhost_origin(lowered.localhost_origin);
    // ClusterNetworkPolicy tiers (Cilium 1.20), as the batch compile
    // builds them (`Compilation::run`).
    let tiers = (!lowered.tier_rules.rules.is_empty()).then(|| {
        Tiers::new(
            &lowered.tier_rules,
            Resolver::new(&lowered.tier_rules.rules, &table, &inventory),
        )
    });
    let mut budget = limits.budget();
    let mut l4: BTreeMap<u32, L4Policy> = BTreeMap::new();
    let mut states: States<StateRecord> = States::default();
    // The kept insertion bounds and feature counts (`Model::bounds`,
    // `Model::features`) of every subject, made here rather than by the
    // first update that needs them (a pass over every filter, which would
    // make an agent's first one-rule change several times its next ones).
    let mut bounds = KeptBounds::default();
    let mut features: HashMap<u32, FeatureCounts> = HashMap::new();
    for (index, endpoint) in inventory.endpoints.iter().enumerate() {
        let identity = table.endpoint_identity.get(index).copied().unwrap_or(0);
        let policy = l4
            .entry(identity)
            .or_insert_with(|| resolver.l4_policy(identity));
        let bound = KeptBound::get(&mut bounds, identity, policy, &resolver.cache);
        features
            .entry(identity)
            .or_insert_with(|| FeatureCounts::of(policy));
        let key = state_key(endpoint, identity);
        if states.contains_key(&key) {
            continue;
        }
        let Some(policy) = l4.get(&identity) else {
            continue;
        };
        let name = endpoint.display_name();
        if bound > limits.get(Limit::InsertionsPerEndpoint) {
            // Over the limit: the limit's own check, for its error.
            limits.check_l4_policy(&name, policy, &resolver.cache)?;
        }
        let allows = resolver.allows_localhost(endpoint);
        let mut record = StateRecord::fold(&resolver, endpoint, policy, &lowered.origins, allows);
        if let Some(tiers) = &tiers
            && tiers.selects(identity)
        {
            // The batch's tiered state (`Compilation`'s `tiers.resolve`):
            // the ClusterNetworkPolicy tiers over the NetworkPolicy tier.
            let describe = |id| describe(&lowered.origins, id);
            // The folded state's only holder: taken, not copied.
            let normal = std::mem::take(Arc::make_mut(&mut record.state));
            record.state = Arc::new(tiers.resolve(
                identity,
                endpoint,
                normal,
                &describe,
                &mut record.diagnostics,
            ));
        }
        budget.charge(&name, record.state.len())?;
        states.insert(key, record);
    }
    let mut tier_enforced = BTreeMap::new();
    if let Some(tiers) = &tiers {
        for &identity in &table.endpoint_identity {
            let directions = (
                tiers.selects_in(identity, Direction::Ingress),
                tiers.selects_in(identity, Direction::Egress),
            );
            if directions != (false, false) {
                tier_enforced.insert(identity, directions);
            }
        }
    }
    drop(tiers);
    let parts = resolver.into_parts();
    let mut peer_index = PeerIndex::default();
    peer_index.catch_up(&parts.cache);
    let any_namespace = inventory.endpoints.iter().any(|e| e.namespace.is_some());
    let addresses = AddressBook::new(
        inventory
            .endpoints
            .iter()
            .flat_map(|e| e.ips.iter().copied()),
    );
    let mut filter_rules = BTreeMap::new();
    for (index, rule) in lowered.rules.iter().enumerate() {
        index_filters(&mut filter_rules, rule, index, true);
    }
    let mut subjects: HashMap<Selector, Vec<usize>> = HashMap::new();
    for (index, rule) in lowered.rules.iter().enumerate() {
        subjects
            .entry(rule.subject.clone())
            .or_default()
            .push(index);
    }
    // Keep the numbers (Cilium never renumbers a live identity).
    for (index, endpoint) in inventory.endpoints.iter_mut().enumerate() {
        let id = table.endpoint_identity[index];
        if endpoint.identity.is_none()
            && (crate::allocation::FIRST_ALLOCATED..=crate::allocation::LAST_ALLOCATED)
                .contains(&id)
        {
            endpoint.identity = Some(id);
        }
    }
    // And the CIDR identities' (a prefix added later takes a free number
    // instead of renumbering those after it, `Session::gain_prefixes`).
    inventory.cidr_identities = table.cidr_identity.clone();
    let numbers = IdentityNumbers::new(&table);
    let names = EndpointNames::new(&inventory.endpoints);
    Ok((
        Model {
            lowered,
            spans: None,
            log_texts: BTreeMap::new(),
            table,
            numbers,
            parts,
            peer_index,
            subjects,
            l4,
            states,
            filter_rules,
            bounds,
            features,
            any_namespace,
            tier_enforced,
            addresses,
            names,
            reordered: BTreeSet::new(),
            replay: BTreeMap::new(),
            pins_undo: Vec::new(),
        },
        inventory,
    ))
}

/// Adds rule `index` to (`add`) or removes it from the lists of the
/// filters it adds to.
fn index_filters(
    index_of: &mut BTreeMap<(Direction, FilterKey), Vec<usize>>,
    rule: &PolicyRule,
    index: usize,
    add: bool,
) {
    for key in filter_keys(rule) {
        if add {
            let list = index_of.entry(key).or_default();
            if let Err(at) = list.binary_search(&index) {
                list.insert(at, index);
            }
        } else if let Some(list) = index_of.get_mut(&key) {
            if let Ok(at) = list.binary_search(&index) {
                list.remove(at);
            }
            if list.is_empty() {
                index_of.remove(&key);
            }
        }
    }
}

/// Why an update was refused (the session is as it was before it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The policy text has errors (its diagnostics).
    #[error("the policy text has {} error(s)", .0.iter().filter(|d| d.is_error()).count())]
    Policy(Vec<Diagnostic>),
    /// Two texts of [`Session::with_policies`] have the same name.
    #[error("two policy texts are named `{0}`")]
    DuplicateText(String),
    /// The inventory change is invalid.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// Compiling failed (a limit, an identity range).
    #[error(transparent)]
    Compile(#[from] CompileError),
}

#[cfg(test)]
mod tests {
    /// `(old, new)` moves applied to the first-use order.
    fn moved(order: &[usize], moves: &[(usize, usize)]) -> Vec<usize> {
        order
            .iter()
            .map(|id| moves.iter().find(|(old, _)| old == id).map_or(*id, |m| m.1))
            .collect()
    }

    #[test]
    fn one_selector_out_of_order_trades_ids_with_an_unused_one() {
        // Selectors 0..8: 0 the wildcard, 2 and 6 unused.
        let seen = [true, true, false, true, true, true, false, true, true];
        let wildcard = |id: usize| id == 0;
        type Moves = Option<Vec<(usize, usize)>>;
        let cases: [(&[usize], Moves); 5] = [
            // 8 first used between 1 and 3: it takes 2.
            (&[1, 8, 3, 4, 5, 7], Some(vec![(8, 2), (2, 8)])),
            // 8 first used before 1: only the wildcard's id is below.
            (&[8, 1, 3, 4, 5, 7], None),
            // 3 first used between 5 and 7: it takes 6.
            (&[1, 4, 5, 3, 7, 8], Some(vec![(3, 6), (6, 3)])),
            (&[1, 3, 4, 5, 8, 7], Some(vec![(8, 6), (6, 8)])),
            // Two out of order: no single trade.
            (&[1, 8, 7, 3, 4, 5], None),
        ];
        for (order, expected) in cases {
            let swap = super::one_out_of_order(order, &seen, wildcard);
            assert_eq!(swap, expected, "{order:?}");
            if let Some(moves) = swap {
                let after = moved(order, &moves);
                assert!(after.windows(2).all(|w| w[0] < w[1]), "{after:?}");
            }
        }
    }

    #[test]
    fn set_last_index_writes_what_format_writes() {
        for old in [0_usize, 1, 8, 9, 10, 11, 19, 99, 100, 4095, 4096, 9_999] {
            for new in [old + 1, old.saturating_sub(1), old + 7] {
                let mut route = format!("specs[3].ingress[{old}]");
                super::set_last_index(&mut route, old, new);
                assert_eq!(route, format!("specs[3].ingress[{new}]"), "{old} -> {new}");
                // A route out of step with its index is written again.
                let mut route = format!("specs[3].ingress[{}]", old + 2);
                super::set_last_index(&mut route, old, new);
                assert_eq!(route, format!("specs[3].ingress[{new}]"), "{old} -> {new}");
            }
        }
    }

    #[test]
    fn push_index_writes_what_format_writes() {
        for index in [0, 7, 10, 99, 4096, 65_535, usize::MAX] {
            let mut route = String::from("spec.ingress");
            super::push_index(&mut route, index);
            assert_eq!(route, format!("spec.ingress[{index}]"));
        }
    }
}
