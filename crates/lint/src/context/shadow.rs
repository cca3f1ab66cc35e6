//! The exact effect of removing one rule item, per endpoint unit, without
//! recompiling the unit once per item.
//!
//! The unit of advice is the rule item a user can delete: its *origin*
//! (lowering may split one item into several [`PolicyRule`]s, e.g. one per
//! Kubernetes `from` peer; they are removed together, so an item is never
//! "covered" by its own peers).
//!
//! # Why it is exact: locality of the insertion algebra
//!
//! Every operation of Cilium's insertion algebra (`insertWithChanges`,
//! [`MapState::insert_with_features`]) that changes or removes the entry of
//! a key `K` is triggered by an insertion whose key covers `K`
//! (bail, prune of narrower keys, equal-key merge), with the same identity
//! or identity 0. Keys are masked port prefixes, so two keys either nest or
//! are disjoint. Hence, for a flow point `p`, the entries of the final
//! state that match `p` (the only ones the datapath lookup reads) are a
//! function of the *subsequence of insertions whose key matches `p`*, given
//! the direction's features. One exception: `authPreferredInsert` stops
//! pushing an explicit auth down after the first more specific explicit
//! key even when that key does not match `p`; with the `AUTH` feature the
//! direction is recompiled instead (the fallback below).
//!
//! Removing item X from unit U changes the L4 policy only in the filters X
//! contributes to (`ΔF`, found by re-merging those filters from the other
//! rules that contribute to them). If the direction's enforcement, its
//! synthetic allow-all, its features and the proxy-port numbering are
//! unchanged, every insertion outside `ΔF` is identical, so verdicts can
//! only change at points matched by a key of `ΔF` (the *region*), and
//! there they are decided by the insertions overlapping the region. Those
//! are replayed twice (with and without X) into two small states whose
//! comparison over all their flow classes is the exact answer. Otherwise
//! (X is the last rule of its direction, the only default-deny rule, the
//! only deny / L7 / auth carrier, the only user of a proxy port, or the
//! direction has `AUTH`) the direction alone is recompiled without X.
//!
//! The cost per item is the size of the part of the map state its keys
//! touch, not the size of the unit's state, except in the fallback, which
//! at most a few items per direction take.

use std::collections::{BTreeMap, BTreeSet};

use porin_compiler::identity::Identity;
use porin_compiler::inventory::Endpoint;
use porin_compiler::mapstate::{Direction, Entry, Key, MapState, PolicyFeatures, Verdict};
use porin_compiler::resolve::policy::{
    DirectionPolicy, FilterContext, FilterKey, L4Policy, ProxyPorts, Resolver, allow_all_origin,
    proxy_ports,
};
use porin_compiler::resolve::rule::{L7Parser, PolicyRule};
use porin_connectivity::analysis::{FlowPoint, comparable, decide_entry, equivalent};

/// A flow class of PR017: (direction, protocol, first port, last port).
pub type Class = (Direction, u8, u16, u16);

/// What removing one rule item does, accumulated over the units it
/// selects: computed per unit, then [`RuleEffects::merge`]d, so a streaming
/// pass can fold a unit in and drop the unit's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleEffects {
    /// Some unit is selected by the item.
    pub selected: bool,
    /// Removing the item changes a verdict of some selected unit.
    pub changes: bool,
    /// Flow classes the item allows on its own (summed over units).
    pub flows: usize,
    /// Origins deciding (allowing) those flows without the item.
    pub allows: BTreeSet<u32>,
    /// Origins deciding (denying) those flows without the item.
    pub denies: BTreeSet<u32>,
    /// Per port class (only for items with a port range, PR017): whether
    /// every flow of the class the item allows alone keeps its verdict
    /// without it, and the origins that then decide it.
    pub classes: BTreeMap<Class, (bool, BTreeSet<u32>)>,
}

impl RuleEffects {
    /// Folds the effects in another unit into these.
    pub fn merge(&mut self, other: RuleEffects) {
        self.selected |= other.selected;
        self.changes |= other.changes;
        self.flows += other.flows;
        self.allows.extend(other.allows);
        self.denies.extend(other.denies);
        for (class, (covered, origins)) in other.classes {
            let slot = self
                .classes
                .entry(class)
                .or_insert_with(|| (true, BTreeSet::new()));
            slot.0 &= covered;
            slot.1.extend(origins);
        }
    }

    /// Records one flow class the item allows alone, with the decision
    /// without it.
    pub fn record(
        &mut self,
        point: &FlowPoint,
        own: Verdict,
        other: (Verdict, Option<&Entry>),
        ranged: bool,
        preserved: bool,
    ) {
        self.flows += 1;
        let (verdict, entry) = other;
        let origins = entry.map(|e| &e.origins).into_iter().flatten().copied();
        if ranged {
            // Narrowing the item keeps it in force: its class is covered
            // only if the others decide it alike *and* removing the item
            // keeps the direction's enforcement, synthetic allow-all and
            // features (else "without it" is not "with it narrowed").
            let covered = preserved && comparable(verdict) == comparable(own);
            let slot = self
                .classes
                .entry((point.direction, point.proto, point.port, point.end_port))
                .or_insert_with(|| (true, BTreeSet::new()));
            slot.0 &= covered;
            if covered {
                slot.1.extend(origins.clone());
            }
        }
        if verdict.is_allowed() {
            self.allows.extend(origins);
        } else {
            self.denies.extend(origins);
        }
    }
}

/// The part of a direction an item's removal can change.
struct Split {
    /// That part with the item.
    full: MapState,
    /// That part without it.
    without: MapState,
    /// The flow points it covers.
    region: Region,
    /// Removing the item keeps the direction's enforcement, synthetic
    /// allow-all and features.
    preserved: bool,
    /// A flow point was found whose verdict removing the item changes
    /// (`full` and `without` are then left empty: the answer is known).
    witnessed: bool,
}

impl Split {
    fn unchanged() -> Split {
        Split {
            full: MapState::new(),
            without: MapState::new(),
            region: Region::default(),
            preserved: true,
            witnessed: false,
        }
    }

    fn witnessed() -> Split {
        Split {
            witnessed: true,
            ..Split::unchanged()
        }
    }
}

/// An item of a unit to analyse.
#[derive(Debug, Clone)]
pub struct Item {
    /// The origin (rule item).
    pub origin: u32,
    /// Whether PR017's per-class record is wanted.
    pub ranged: bool,
}

/// Per (direction, protocol) counts of the keys of a state: identities,
/// protocols and port cuts, as [`porin_connectivity::analysis::flow_points`]
/// derives its classes from them; signed so a state can be patched.
#[derive(Debug, Clone, Default)]
struct KeyStats {
    ids: BTreeMap<u32, isize>,
    protos: BTreeMap<u8, isize>,
    cuts: BTreeMap<u8, BTreeMap<u32, isize>>,
}

impl KeyStats {
    fn of(state: &MapState, direction: Direction, sign: isize, into: &mut KeyStats) {
        for (key, _) in state.iter().filter(|(k, _)| k.direction() == direction) {
            *into.ids.entry(key.identity().get()).or_default() += sign;
            if key.proto() != 0 {
                *into.protos.entry(key.proto()).or_default() += sign;
                let cuts = into.cuts.entry(key.proto()).or_default();
                *cuts.entry(u32::from(key.port())).or_default() += sign;
                *cuts.entry(u32::from(key.end_port()) + 1).or_default() += sign;
            }
        }
    }
}

/// The base counts plus a patch, read together.
struct Patched<'s> {
    base: &'s KeyStats,
    delta: &'s KeyStats,
}

/// The keys of `base` + `delta` with a positive count.
fn present<K: Ord + Copy>(base: &BTreeMap<K, isize>, delta: &BTreeMap<K, isize>) -> BTreeSet<K> {
    let count = |map: &BTreeMap<K, isize>, k: &K| map.get(k).copied().unwrap_or(0);
    base.keys()
        .chain(delta.keys())
        .filter(|k| count(base, k) + count(delta, k) > 0)
        .copied()
        .collect()
}

impl Patched<'_> {
    fn ids(&self) -> BTreeSet<u32> {
        present(&self.base.ids, &self.delta.ids)
    }

    fn protos(&self) -> BTreeSet<u8> {
        present(&self.base.protos, &self.delta.protos)
    }

    /// The cuts of `proto` in `lo..=hi`.
    fn cuts(&self, proto: u8, lo: u32, hi: u32, out: &mut BTreeSet<u32>) {
        let delta = self.delta.cuts.get(&proto);
        let count = |c: &u32| delta.and_then(|d| d.get(c)).copied().unwrap_or(0);
        if let Some(base) = self.base.cuts.get(&proto) {
            for (c, n) in base.range(lo..=hi) {
                if n + count(c) > 0 {
                    out.insert(*c);
                }
            }
        }
        if let Some(delta) = delta {
            let base = self.base.cuts.get(&proto);
            for (c, n) in delta.range(lo..=hi) {
                if base.is_none_or(|b| !b.contains_key(c)) && *n > 0 {
                    out.insert(*c);
                }
            }
        }
    }
}

/// The keys of the filters an item's removal changes, indexed for the two
/// questions asked of them: does a flow point fall in the region, and does
/// an insertion's key overlap it.
#[derive(Debug, Default)]
struct Region {
    /// Every point of the direction (the fallback recompiled it whole).
    all: bool,
    /// Region keys by identity.
    keys: BTreeMap<u32, Vec<Key>>,
    /// Distinct port/protocol ranges (identity 0) of the region, all and
    /// per identity.
    ranges: BTreeSet<Key>,
    ranges_by_id: BTreeMap<u32, BTreeSet<Key>>,
}

fn nested(a: &Key, b: &Key) -> bool {
    a.port_proto_covers(b) || b.port_proto_covers(a)
}

fn range_of(key: &Key) -> Key {
    key.with_identity(Identity::WILDCARD)
}

impl Region {
    fn add(&mut self, key: Key) {
        self.ranges.insert(range_of(&key));
        self.ranges_by_id
            .entry(key.identity().get())
            .or_default()
            .insert(range_of(&key));
        self.keys.entry(key.identity().get()).or_default().push(key);
    }

    fn is_empty(&self) -> bool {
        !self.all && self.keys.is_empty()
    }

    /// Whether a key of the region matches the point.
    fn matches(&self, point: &FlowPoint) -> bool {
        if self.all {
            return true;
        }
        let id = Identity::new(point.identity)
            .unwrap_or(Identity::WORLD)
            .get();
        [id, 0].iter().any(|i| {
            self.keys.get(i).is_some_and(|keys| {
                keys.iter().any(|k| {
                    k.direction() == point.direction
                        && k.matches_port_proto(point.proto, point.port)
                })
            })
        })
    }

    /// Whether an insertion's key shares a flow point with the region.
    fn overlaps(&self, key: &Key) -> bool {
        let range = range_of(key);
        let id = key.identity().get();
        if id == 0 {
            return self.ranges.iter().any(|r| nested(r, &range));
        }
        [id, 0].iter().any(|i| {
            self.ranges_by_id
                .get(i)
                .is_some_and(|set| set.iter().any(|r| nested(r, &range)))
        })
    }
}

/// One insertion of a direction: its filter's position (`usize::MAX` for
/// the host's allow, inserted last), its sequence number, key and entry.
type Insertion = (usize, usize, Key, Entry);

/// A direction of the unit's full compilation, split into insertions.
struct FullDirection {
    insertions: Vec<Insertion>,
    /// Insertion indices by key identity.
    by_id: BTreeMap<u32, Vec<usize>>,
    /// Filter key → position in the direction's filters.
    position: BTreeMap<FilterKey, usize>,
    /// Insertion index range per filter position.
    spans: BTreeMap<usize, std::ops::Range<usize>>,
    features: PolicyFeatures,
    /// The key counts of the unit's state in this direction (built on
    /// first use: an item whose removal is witnessed never reads them).
    stats: Option<KeyStats>,
    /// The unit's state restricted to this direction (built on first use).
    restricted: Option<MapState>,
}

/// Per-(selector policy) feature and proxy-tuple counts of a direction, to
/// tell whether removing an item changes the features or the proxy-port
/// numbering without recounting the direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Carriers {
    deny: isize,
    redirect: isize,
    auth: isize,
    proxies: BTreeMap<(String, u8, String, u16), isize>,
}

impl Carriers {
    fn add(
        &mut self,
        key: &FilterKey,
        per: &BTreeMap<usize, porin_compiler::resolve::policy::SelectorPolicy>,
        sign: isize,
    ) {
        for sp in per.values() {
            if sp.deny {
                self.deny += sign;
            }
            if sp.l7.parser != L7Parser::None {
                self.redirect += sign;
            }
            if sp.auth.is_some() {
                self.auth += sign;
            }
            if !sp.deny && sp.l7.parser != L7Parser::None {
                *self
                    .proxies
                    .entry((
                        sp.l7.parser.name(),
                        key.proto,
                        format!("{:?}", key.port),
                        key.end_port,
                    ))
                    .or_default() += sign;
            }
        }
    }
}

/// The effects of every item of one unit.
pub struct UnitAnalysis<'r, 'a, 'u> {
    resolver: &'r Resolver<'a>,
    rules: &'u [PolicyRule],
    identity: u32,
    endpoint: &'u Endpoint,
    unit_rules: &'u [usize],
    policy: L4Policy,
    ports: ProxyPorts,
    state: &'u MapState,
    /// The host's allow the agent inserts for this endpoint, if any.
    localhost: Option<(Key, Entry)>,
    directions: [Option<FullDirection>; 2],
    carriers: [Carriers; 2],
    /// Filter keys each rule contributes to.
    rule_filters: BTreeMap<usize, BTreeSet<FilterKey>>,
    /// Rules contributing to each filter, per direction.
    filter_rules: [BTreeMap<FilterKey, BTreeSet<usize>>; 2],
}

fn slot(direction: Direction) -> usize {
    usize::from(direction == Direction::Egress)
}

fn no_origin(_: u32) -> String {
    String::new()
}

impl<'r, 'a, 'u> UnitAnalysis<'r, 'a, 'u> {
    /// Prepares the analysis of a unit (identity, a representative
    /// endpoint, the indices of its rules and its map state). The L4
    /// policy is resolved again with `resolver`, so that selector ids agree
    /// with every policy this analysis resolves.
    pub fn new(
        resolver: &'r Resolver<'a>,
        rules: &'u [PolicyRule],
        identity: u32,
        endpoint: &'u Endpoint,
        unit_rules: &'u [usize],
        state: &'u MapState,
    ) -> Self {
        let policy = resolver.l4_policy_of(identity, unit_rules, None);
        let ports = proxy_ports(&policy);
        let localhost = resolver.localhost_insertion(endpoint);
        let mut rule_filters = BTreeMap::new();
        let mut filter_rules: [BTreeMap<FilterKey, BTreeSet<usize>>; 2] = Default::default();
        for &r in unit_rules {
            let Some(rule) = rules.get(r) else { continue };
            let alone = resolver.l4_policy_of(identity, &[r], Some([false, false]));
            let keys: BTreeSet<FilterKey> = alone
                .direction(rule.direction)
                .filters
                .keys()
                .cloned()
                .collect();
            for key in &keys {
                filter_rules[slot(rule.direction)]
                    .entry(key.clone())
                    .or_default()
                    .insert(r);
            }
            rule_filters.insert(r, keys);
        }
        let mut carriers: [Carriers; 2] = Default::default();
        for direction in Direction::ALL {
            for (key, per) in &policy.direction(direction).filters {
                carriers[slot(direction)].add(key, per, 1);
            }
        }
        Self {
            resolver,
            rules,
            identity,
            endpoint,
            unit_rules,
            policy,
            ports,
            state,
            localhost,
            directions: [None, None],
            carriers,
            rule_filters,
            filter_rules,
        }
    }

    fn full(&mut self, direction: Direction) -> &mut FullDirection {
        let slot = slot(direction);
        if self.directions[slot].is_none() {
            let dir = self.policy.direction(direction);
            let ports = &self.ports;
            let mut insertions: Vec<Insertion> = Vec::new();
            let mut position = BTreeMap::new();
            let mut spans = BTreeMap::new();
            let mut buffer = Vec::new();
            let mut sink = Vec::new();
            if dir.enforced {
                let cx = FilterContext {
                    endpoint: self.endpoint,
                    direction,
                    proxy_ports: ports,
                    origins_file: &no_origin,
                };
                for (ord, (key, per)) in dir.filters.iter().enumerate() {
                    position.insert(key.clone(), ord);
                    buffer.clear();
                    self.resolver
                        .filter_insertions(&cx, key, per, &mut sink, &mut buffer);
                    let start = insertions.len();
                    for (k, e) in buffer.drain(..) {
                        insertions.push((ord, insertions.len(), k, e));
                    }
                    spans.insert(ord, start..insertions.len());
                }
            }
            if direction == Direction::Ingress
                && let Some((k, e)) = self.localhost.clone()
            {
                insertions.push((usize::MAX, insertions.len(), k, e));
            }
            let mut by_id: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for (i, (_, _, k, _)) in insertions.iter().enumerate() {
                by_id.entry(k.identity().get()).or_default().push(i);
            }
            self.directions[slot] = Some(FullDirection {
                insertions,
                by_id,
                position,
                spans,
                features: dir.features(),
                stats: None,
                restricted: None,
            });
        }
        // Filled above when missing.
        self.directions[slot].get_or_insert_with(empty_direction)
    }

    /// The unit's state restricted to one direction.
    fn restricted(&mut self, direction: Direction) -> MapState {
        let state = self.state;
        let full = self.full(direction);
        full.restricted
            .get_or_insert_with(|| {
                let mut out = MapState::new();
                for (k, e) in state.iter().filter(|(k, _)| k.direction() == direction) {
                    // Entries of a compiled state are normalised; upsert
                    // refuses only PASS entries, which it never holds.
                    let _ = out.upsert(*k, e.clone());
                }
                out
            })
            .clone()
    }

    /// The direction recompiled from scratch under `rules` (the fallback),
    /// and whether it keeps the direction's enforcement and features.
    fn recompile(&mut self, direction: Direction, rules: &[usize]) -> (MapState, bool) {
        let policy = self.resolver.l4_policy_of(self.identity, rules, None);
        let dir = policy.direction(direction);
        let full_dir = self.policy.direction(direction);
        let preserved = dir.enforced == full_dir.enforced && dir.features() == full_dir.features();
        (self.replay(&policy, direction), preserved)
    }

    /// One direction of the map state of `policy` (what
    /// [`Resolver::map_state`] builds for it: directions do not interact).
    fn replay(&self, policy: &L4Policy, direction: Direction) -> MapState {
        let dir = policy.direction(direction);
        let mut state = MapState::new();
        if dir.enforced {
            let ports = proxy_ports(policy);
            let cx = FilterContext {
                endpoint: self.endpoint,
                direction,
                proxy_ports: &ports,
                origins_file: &no_origin,
            };
            let features = dir.features();
            let mut buffer = Vec::new();
            let mut sink = Vec::new();
            for (key, per) in &dir.filters {
                self.resolver
                    .filter_insertions(&cx, key, per, &mut sink, &mut buffer);
            }
            for (k, e) in buffer {
                let _ = state.insert_with_features(k, e, features);
            }
        } else {
            let _ = state.upsert(
                Key::for_direction(direction),
                Entry::allow().with_origin(allow_all_origin(direction)),
            );
        }
        if direction == Direction::Ingress
            && let Some((k, e)) = self.localhost.clone()
        {
            let _ = state.insert_with_features(k, e, policy.ingress.features());
        }
        state
    }

    /// The item's direction of the unit's state under exactly its rules.
    fn alone(&mut self, rules: &[usize], direction: Direction) -> MapState {
        let policy = self.resolver.l4_policy_of(self.identity, rules, None);
        self.replay(&policy, direction)
    }

    /// The effects of removing `item` from this unit.
    pub fn effects(&mut self, item: &Item) -> RuleEffects {
        let item_rules: Vec<usize> = self
            .unit_rules
            .iter()
            .copied()
            .filter(|r| self.rules.get(*r).is_some_and(|x| x.origin == item.origin))
            .collect();
        let Some(direction) = item_rules
            .first()
            .and_then(|r| self.rules.get(*r))
            .map(|r| r.direction)
        else {
            return RuleEffects::default();
        };
        let Split {
            full: full_part,
            without: without_part,
            region,
            preserved,
            witnessed,
        } = self.split(direction, &item_rules, !item.ranged);
        let mut effects = RuleEffects {
            selected: true,
            changes: witnessed || !equivalent(&full_part, &without_part),
            ..RuleEffects::default()
        };
        if effects.changes && !item.ranged {
            return effects;
        }
        let alone = self.alone(&item_rules, direction);
        let mut delta = KeyStats::default();
        KeyStats::of(&full_part, direction, -1, &mut delta);
        KeyStats::of(&without_part, direction, 1, &mut delta);
        let state = self.state;
        let full = self.full(direction);
        let without = Patched {
            base: full.stats.get_or_insert_with(|| {
                let mut stats = KeyStats::default();
                KeyStats::of(state, direction, 1, &mut stats);
                stats
            }),
            delta: &delta,
        };
        for_each_point(&alone, direction, &without, &mut |point| {
            let (own, chosen) = decide_entry(&alone, &point);
            let granted =
                own.is_allowed() && chosen.is_some_and(|e| e.origins.contains(&item.origin));
            if !granted {
                return;
            }
            let other = if region.matches(&point) {
                decide_entry(&without_part, &point)
            } else {
                decide_entry(state, &point)
            };
            effects.record(&point, own, other, item.ranged, preserved);
        });
        effects
    }

    /// The part of the direction that removing the item can change, with
    /// and without the item, and the region it covers.
    ///
    /// With `changes_only` (the caller needs no more than whether removing
    /// the item changes a verdict), a flow point where the item's own keys
    /// decide differently with and without it ends the analysis early
    /// ([`witness`]).
    fn split(&mut self, direction: Direction, item_rules: &[usize], changes_only: bool) -> Split {
        let s = slot(direction);
        let in_direction: Vec<usize> = self
            .unit_rules
            .iter()
            .copied()
            .filter(|r| self.rules.get(*r).is_some_and(|x| x.direction == direction))
            .collect();
        let remaining_all: Vec<usize> = self
            .unit_rules
            .iter()
            .copied()
            .filter(|r| !item_rules.contains(r))
            .collect();
        let init = self.identity == Identity::INIT.get();
        let flags = |rules: &[usize]| {
            let enforced = init || !rules.is_empty();
            let default_deny = init
                || rules
                    .iter()
                    .any(|r| self.rules.get(*r).is_some_and(|x| x.default_deny));
            (enforced, enforced && !default_deny)
        };
        let remaining_dir: Vec<usize> = in_direction
            .iter()
            .copied()
            .filter(|r| !item_rules.contains(r))
            .collect();
        let (_, synthetic_full) = flags(&in_direction);
        let (enforced_without, synthetic_without) = flags(&remaining_dir);
        let full_features = self.full(direction).features;
        let fallback = !enforced_without
            || synthetic_full != synthetic_without
            || full_features.intersects(PolicyFeatures::AUTH);
        let same_synthetic = synthetic_full == synthetic_without;
        if fallback {
            return self.fallback(direction, &remaining_all, same_synthetic);
        }
        // The filters the item contributes to, and the other rules there.
        let mut filters: BTreeSet<FilterKey> = BTreeSet::new();
        for r in item_rules {
            if let Some(keys) = self.rule_filters.get(r) {
                filters.extend(keys.iter().cloned());
            }
        }
        let mut contributors: BTreeSet<usize> = BTreeSet::new();
        for key in &filters {
            if let Some(rules) = self.filter_rules[s].get(key) {
                contributors.extend(rules.iter().copied().filter(|r| !item_rules.contains(r)));
            }
        }
        let contributors: Vec<usize> = contributors.into_iter().collect();
        let mut synthetic = [false, false];
        synthetic[s] = synthetic_full;
        let reduced = self
            .resolver
            .l4_policy_of(self.identity, &contributors, Some(synthetic));
        let full_dir: &DirectionPolicy = self.policy.direction(direction);
        let reduced_dir = reduced.direction(direction);
        let changed: Vec<FilterKey> = filters
            .into_iter()
            .filter(|key| full_dir.filters.get(key) != reduced_dir.filters.get(key))
            .collect();
        if changed.is_empty() {
            return Split::unchanged();
        }
        // Features and proxy numbering without the item.
        let mut delta = Carriers::default();
        for key in &changed {
            if let Some(per) = full_dir.filters.get(key) {
                delta.add(key, per, -1);
            }
            if let Some(per) = reduced_dir.filters.get(key) {
                delta.add(key, per, 1);
            }
        }
        let carriers = &self.carriers[s];
        // A feature or proxy tuple that appears or disappears (a merge
        // conflict resolved by the removal can switch a parser).
        let flips = |full: isize, change: isize| (full > 0) != (full + change > 0);
        let features_change = flips(carriers.deny, delta.deny)
            || flips(carriers.redirect, delta.redirect)
            || flips(carriers.auth, delta.auth);
        let proxies_change = delta.proxies.iter().any(|(tuple, change)| {
            flips(carriers.proxies.get(tuple).copied().unwrap_or(0), *change)
        });
        if features_change || proxies_change {
            return self.fallback(direction, &remaining_all, same_synthetic);
        }
        // Regenerate the changed filters' insertions without the item.
        self.full(direction);
        let Some(full) = self.directions[s].as_ref() else {
            return self.fallback(direction, &remaining_all, same_synthetic);
        };
        let cx = FilterContext {
            endpoint: self.endpoint,
            direction,
            proxy_ports: &self.ports,
            origins_file: &no_origin,
        };
        let mut fresh: Vec<(usize, usize, Key, Entry)> = Vec::new();
        let mut changed_positions = BTreeSet::new();
        let mut buffer = Vec::new();
        let mut sink = Vec::new();
        for key in &changed {
            let Some(ord) = full.position.get(key) else {
                continue;
            };
            changed_positions.insert(*ord);
            let Some(per) = reduced_dir.filters.get(key) else {
                continue;
            };
            buffer.clear();
            self.resolver
                .filter_insertions(&cx, key, per, &mut sink, &mut buffer);
            for (k, e) in buffer.drain(..) {
                fresh.push((*ord, fresh.len(), k, e));
            }
        }
        if changes_only && witness(full, &changed_positions, &fresh, direction) {
            return Split::witnessed();
        }
        let mut region = Region::default();
        for ord in &changed_positions {
            if let Some(span) = full.spans.get(ord) {
                for (_, _, k, _) in &full.insertions[span.clone()] {
                    region.add(*k);
                }
            }
        }
        for (_, _, k, _) in &fresh {
            region.add(*k);
        }
        if region.is_empty() {
            return Split::unchanged();
        }
        let candidates: Vec<usize> = if region.keys.contains_key(&0) {
            (0..full.insertions.len()).collect()
        } else {
            let mut set: BTreeSet<usize> = BTreeSet::new();
            for id in region.keys.keys().chain(std::iter::once(&0)) {
                if let Some(list) = full.by_id.get(id) {
                    set.extend(list.iter().copied());
                }
            }
            set.into_iter().collect()
        };
        let features = full.features;
        let mut full_part = MapState::new();
        let mut without: Vec<(usize, usize, Key, Entry)> = fresh;
        for i in candidates {
            let Some(insertion) = full.insertions.get(i) else {
                continue;
            };
            if !region.overlaps(&insertion.2) {
                continue;
            }
            let _ = full_part.insert_with_features(insertion.2, insertion.3.clone(), features);
            if !changed_positions.contains(&insertion.0) {
                without.push(insertion.clone());
            }
        }
        // Within a changed filter the fresh insertions keep their order;
        // other filters keep theirs (sequence numbers of one filter are
        // from one source, so sorting by (filter, sequence) is exact).
        without.sort_by_key(|(ord, seq, _, _)| (*ord, *seq));
        let mut without_part = MapState::new();
        for (_, _, k, e) in without {
            let _ = without_part.insert_with_features(k, e, features);
        }
        Split {
            full: full_part,
            without: without_part,
            region,
            preserved: true,
            witnessed: false,
        }
    }

    fn fallback(
        &mut self,
        direction: Direction,
        remaining: &[usize],
        same_synthetic: bool,
    ) -> Split {
        let full = self.restricted(direction);
        let (without, preserved) = self.recompile(direction, remaining);
        Split {
            full,
            without,
            region: Region {
                all: true,
                ..Region::default()
            },
            preserved: preserved && same_synthetic,
            witnessed: false,
        }
    }
}

/// How many of the changed filters' old keys [`witness`] probes before
/// leaving the question to the whole comparison.
const WITNESS_PROBES: usize = 8;

/// Whether one of the first [`WITNESS_PROBES`] keys the changed filters
/// inserted (with a concrete identity and protocol) names a flow point
/// whose verdict differs with and without the item.
///
/// Exact by the locality argument of this module's documentation: the
/// entries matching a point are a function of the insertions whose keys
/// match it, all of which are nested with the probed key and share its
/// identity or have identity 0, so replaying those insertions (in their
/// order, with the direction's features, which the caller has checked
/// the removal keeps) with and without the item decides the point as the
/// whole direction does. A point that differs is a flow class on which
/// `equivalent(full_part, without_part)` fails, so the answer is the one
/// the whole comparison gives; when no probe differs, the caller runs it.
fn witness(
    full: &FullDirection,
    changed: &BTreeSet<usize>,
    fresh: &[Insertion],
    direction: Direction,
) -> bool {
    let probes = changed
        .iter()
        .filter_map(|ord| full.spans.get(ord))
        .flat_map(|span| full.insertions.get(span.clone()).unwrap_or_default())
        .map(|(_, _, k, _)| *k)
        .filter(|k| k.identity().get() != 0 && k.proto() != 0)
        .take(WITNESS_PROBES);
    let nested_with = |probe: &Key, k: &Key| {
        (k.identity() == probe.identity() || k.identity().get() == 0) && nested(probe, k)
    };
    for probe in probes {
        let mut with: MapState = MapState::new();
        let mut without: Vec<&Insertion> = fresh
            .iter()
            .filter(|(_, _, k, _)| nested_with(&probe, k))
            .collect();
        let ids = [probe.identity().get(), 0];
        let mut indices: Vec<usize> = ids
            .iter()
            .filter_map(|id| full.by_id.get(id))
            .flatten()
            .copied()
            .collect();
        indices.sort_unstable();
        for i in indices {
            let Some(insertion) = full.insertions.get(i) else {
                continue;
            };
            if !nested_with(&probe, &insertion.2) {
                continue;
            }
            let _ = with.insert_with_features(insertion.2, insertion.3.clone(), full.features);
            if !changed.contains(&insertion.0) {
                without.push(insertion);
            }
        }
        without.sort_by_key(|(ord, seq, _, _)| (*ord, *seq));
        let mut without_state = MapState::new();
        for (_, _, k, e) in without {
            let _ = without_state.insert_with_features(*k, e.clone(), full.features);
        }
        let point = FlowPoint {
            direction,
            identity: probe.identity().get(),
            proto: probe.proto(),
            port: probe.port(),
            end_port: probe.port(),
        };
        if comparable(decide_entry(&with, &point).0)
            != comparable(decide_entry(&without_state, &point).0)
        {
            return true;
        }
    }
    false
}

fn empty_direction() -> FullDirection {
    FullDirection {
        insertions: Vec::new(),
        by_id: BTreeMap::new(),
        position: BTreeMap::new(),
        spans: BTreeMap::new(),
        features: PolicyFeatures::NONE,
        stats: None,
        restricted: None,
    }
}

/// An identity number no key names (as `flow_points` picks it).
fn fresh_identity(taken: &BTreeSet<u32>) -> u32 {
    (Identity::MINIMAL_NUMERIC..)
        .find(|id| !taken.contains(id))
        .unwrap_or(u32::MAX)
}

/// Calls `f` on every class of `flow_points(&[alone, without])` in
/// `direction` that a key of `alone` matches (the only ones `alone` can
/// allow), where `without`'s keys are given by their counts.
fn for_each_point(
    alone: &MapState,
    direction: Direction,
    without: &Patched<'_>,
    f: &mut dyn FnMut(FlowPoint),
) {
    let keys: Vec<&Key> = alone
        .iter()
        .map(|(k, _)| k)
        .filter(|k| k.direction() == direction)
        .collect();
    if keys.is_empty() {
        return;
    }
    let own_ids: BTreeSet<u32> = keys.iter().map(|k| k.identity().get()).collect();
    let own_protos: BTreeSet<u8> = keys.iter().map(|k| k.proto()).filter(|p| *p != 0).collect();
    let any_identity = own_ids.contains(&0);
    let any_proto = keys.iter().any(|k| k.proto() == 0);
    let identities: Vec<u32> = if any_identity {
        let mut all = without.ids();
        all.extend(own_ids.iter().copied());
        let fresh = fresh_identity(&all);
        all.insert(fresh);
        all.into_iter().collect()
    } else {
        own_ids.iter().copied().collect()
    };
    let protos: Vec<u8> = if any_proto {
        let mut all = without.protos();
        all.extend(own_protos.iter().copied());
        if let Some(p) = (1..=255u8).rev().find(|p| !all.contains(p)) {
            all.insert(p);
        }
        all.into_iter().collect()
    } else {
        own_protos.iter().copied().collect()
    };
    for proto in protos {
        // The port ranges of alone's keys that match this protocol.
        let mut ranges: Vec<(u32, u32)> = if any_proto {
            vec![(0, 65_535)]
        } else {
            keys.iter()
                .filter(|k| k.proto() == proto)
                .map(|k| (u32::from(k.port()), u32::from(k.end_port())))
                .collect()
        };
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        let mut segments: Vec<(u16, u16)> = Vec::new();
        for (lo, hi) in merged {
            let mut bounds: BTreeSet<u32> = BTreeSet::new();
            without.cuts(proto, lo + 1, hi + 1, &mut bounds);
            for k in &keys {
                if k.proto() == proto {
                    for c in [u32::from(k.port()), u32::from(k.end_port()) + 1] {
                        if c > lo && c <= hi + 1 {
                            bounds.insert(c);
                        }
                    }
                }
            }
            bounds.insert(hi + 1);
            let mut start = lo;
            for b in bounds {
                let (Ok(port), Ok(end_port)) = (u16::try_from(start), u16::try_from(b - 1)) else {
                    continue;
                };
                segments.push((port, end_port));
                start = b;
            }
        }
        for &identity in &identities {
            for &(port, end_port) in &segments {
                f(FlowPoint {
                    direction,
                    identity,
                    proto,
                    port,
                    end_port,
                });
            }
        }
    }
}
