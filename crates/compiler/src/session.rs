//! Incremental recompilation for long-lived agents (the C API's sessions).
//!
//! [`crate::compile::compile`] recomputes everything. An agent that watches
//! its inventory change one endpoint at a time wants two more things:
//!
//! 1. **Stable identity numbers.** The batch compiler numbers label sets in
//!    sort order, so a new label set that sorts first would renumber every
//!    other identity (and churn every map and the ipcache). Cilium's
//!    allocator never renumbers a live identity. [`pin_identities`] writes
//!    the numbers of a compilation back into the inventory as given numbers
//!    (`Endpoint::identity`), which the allocator honours; new label sets
//!    get free numbers, numbers of vanished label sets become free.
//! 2. **No redundant distillation.** [`IncrementalCompiler::compile`] runs
//!    the cheap stages again (lowering, identity allocation, rule selection,
//!    the per-identity L4 policy) and reuses an endpoint's *map state*
//!    (the expensive insertion algebra, `Resolver::map_state`) when every
//!    input of that function is unchanged. Those inputs are exactly: the
//!    subject identity number, its resolved [`L4Policy`], the endpoint's
//!    named ports, the cluster-wide named-port table (egress named ports),
//!    each referenced selector with the identities it currently selects, and
//!    the rule origins (entry origin ids and their descriptions). All of
//!    them form a [`Fingerprint`]; equality means the map state would be
//!    recomputed byte for byte, so reusing it is exact, not approximate.
//!
//! So: endpoints whose identity, selection or ports did not change keep
//! their map state; endpoints whose identity's L4 policy or whose peers'
//! selections changed (for example because a new identity matches one of
//! their peer selectors) are distilled again. The ipcache and diagnostics
//! are rebuilt every time (they are linear). The tests compare the
//! incremental result with a batch compile after every step.
//!
//! # Live sessions: work proportional to the change
//!
//! [`IncrementalCompiler`] still runs every cheap stage on each compile.
//! [`Session`] (module `live`) keeps the whole compiled model (lowered
//! rules, identity table, selector cache, per-identity L4 policies, and
//! per map state the *ops* it is the fold of) and applies one change at a
//! time, giving the hole-free writes ([`crate::diff::policy_diff`]) of
//! every endpoint it touched ([`Update::deltas`]). It follows Cilium's
//! design (`pkg/policy/selectorcache.go`: per-selector identity sets
//! updated as identities come and go; `pkg/policy/distillery.go`: a
//! resolved policy per identity, shared by its endpoints;
//! `pkg/policy/mapstate.go` `MapChanges` / `AccumulateMapChanges`: the
//! keys an identity change adds or deletes, applied to the endpoint's map
//! without a regeneration) but keeps one property Cilium gives up: **every
//! update's result is exactly the batch compile's**, map states, entry
//! origins and diagnostics included, and the writes are exactly
//! `policy_diff(before, after)`.
//!
//! An agent gives a changed policy text as its bytes
//! ([`Session::apply_policy_text`], the C API's
//! `porin_session_apply_policy_bytes`): the session keeps how each text
//! was loaded, so a one-rule change is re-parsed in place (the one rule
//! item, `porin_model::reparse`) and goes the edit's way below (~0.2–0.8
//! ms at 4,096 rules, the parse included, against ~25 ms to load the text
//! again). [`Session::check_policy_text`] and
//! [`Session::apply_checked_text`] split that call for a caller that
//! refuses a change of several texts as a whole before touching the
//! session (`porin agent`); [`Session::with_policy_texts`] starts a
//! session from texts as bytes. [`Session::set_policy`] takes a text
//! already loaded and compares it with the one it replaces, item by item;
//! [`Session::edit_policy`] takes an edit the caller planned.
//!
//! Why that holds:
//!
//! 1. **A map state splits by peer identity.** `Resolver::map_ops` lists
//!    the insertions of a state in order, each "this key and entry for
//!    every identity of this selector"; the state is their fold
//!    (`Resolver::apply_ops`). The insertion algebra (`mapstate::insert`)
//!    compares a key with covering and narrower keys of its own identity
//!    and of identity 0, and an identity-0 key with identity-0 keys only
//!    (an identity-0 deny deletes narrower keys of other identities, which
//!    depends on those keys alone). So the keys of identity X are the fold
//!    of the identity-0 ops and the X ops, in order: a *replay* of X.
//! 2. **An identity appears** (a pod with new labels): it gets the number
//!    the batch allocator would give (`IdentityTable::endpoint_number`:
//!    every other endpoint holds its number pinned); each selector that
//!    matches it adds it to its selection (a label-key index narrows the
//!    selectors tested); each state whose ops use one of those selectors
//!    gets the replay of X added (it had no X keys). Ops do not depend on
//!    selections, so nothing else of any state changes. An endpoint
//!    without addresses gets the automatic ones `Inventory::finish` would
//!    give it (the lowest free of each family: every other endpoint holds
//!    its addresses already).
//! 3. **An identity goes**: its keys are removed from every state that
//!    used a selector selecting it; nothing is inserted for it in the
//!    batch, and the other identities' parts do not depend on it.
//! 4. **A policy text changes** (the same number of rules and origins, its
//!    CIDR groups and the texts' log values the same; a CIDR prefix that comes or goes
//!    brings or takes its CIDR identity, as an endpoint's in 2 and 3): when the change lies in one item's
//!    text (every other item where it was, or moved by the lines the change
//!    added or removed; no anchor in the file, since an alias copies its
//!    anchor's node into other items) only that item is compared; when it
//!    keeps every document's frame and item counts, only the
//!    items that differ are lowered again (`session::items`: an item's
//!    lowering reads the item, its rule's and document's frames and its
//!    line, all unchanged for the others); the same when the text was
//!    edited in place ([`Session::edit_policy`]: the caller's
//!    `porin_model::reparse` re-parsed only the one rule item that holds
//!    the change, which is then the only item lowered again). When the
//!    change adds or removes lines (a port added on a line of its own, a
//!    comment line) and keeps the frames and item counts, the items are
//!    compared the same way and every other item's origin only takes its
//!    new line: read from the new tree, or, for an edit in place, shifted
//!    as the re-parse shifted the tree (`session::items::Lines`); the ops
//!    of untouched filters are still spliced (origin ids did not move, and
//!    lines are only in findings). Otherwise the text alone is lowered again
//!    (origin ids moved to its place; at each full build the session checks
//!    that lowering text by text reproduces the whole lowering, else policy
//!    changes always recompile in full), the changed rules' peers and
//!    subjects are updated, and the L4 policy of each identity they select
//!    is updated: only the filters the changed rules add to (before or
//!    after) and the L3-only filters are folded again
//!    (`Resolver::l4_policy_filters`; a filter is the fold of the rules
//!    keyed to it, so the others are unchanged). In those filters, only
//!    the changed rules' peers (before and after) and the wildcard are
//!    folded again (`Resolver::l4_policy_filters_of`; a selector's
//!    policy in a filter is the merge of the rules that add that selector
//!    there), while they are few: a filter that thousands of CIDR rules
//!    share (one port, or the L3-only filter of an allow list) is not
//!    folded whole for one rule. A state whose L4 policy
//!    changed gets its new ops (only the changed selectors' ops of such a
//!    filter, put in their places, unless the wildcard's changed, whose
//!    entry suppresses the identical entries of the others);
//!    the ops of each selector are compared with the old ones as a sequence
//!    (with their filter and key, which fix their place in the fold): the
//!    identities of the selectors whose sequences differ are replayed, the
//!    rest is kept. If the identity-0 ops differ, the state is folded
//!    again in full. Selector ids order a filter's selectors in the fold,
//!    and the batch numbers them by first use in rule order: when a change
//!    makes a selector's first use come before another's that has the
//!    lower id (a rule inserted at the front, the first rule's peer changed
//!    to a new selector), the session numbers the used selectors again in
//!    place (they take the ids they hold among themselves in first-use
//!    order; when one selector alone is out of that order and an unused
//!    selector's id fits its place, as the one a changed peer replaced,
//!    the two trade ids instead; the cache, the rules' peer ids, the peer
//!    index, the L4 policies, the kept bounds and the ops of the states
//!    that name a moved selector follow, each renaming only the moved
//!    selectors' entries), and folds again in full each state whose ops
//!    are then out of the batch's order (two selectors of one filter and
//!    key swapped) or that has findings (their order follows the ids). It
//!    recompiled everything before (~100 ms at 4,096 rules).
//! 5. **A rule item inserted into a text or removed from it**, nothing else
//!    of the text changed (`session::items::moved_item` compares the other
//!    items and the frames): every rule index and origin id after it moves
//!    by one place in the model (the rule lists of subjects, filters and
//!    identities; the origins of L4 policies, ops and entries; a removed
//!    origin's id becomes one no origin has, so what still names it never
//!    equals what the next rule gives), the text's origins take their new
//!    lines and indices from the new tree, and the rule is then added or
//!    taken out as in 4. When the text was edited in place
//!    ([`Session::edit_policy`] with an insertion or removal planned by
//!    `porin_model::reparse`), the edit names the item: nothing is
//!    compared, and the later origins' lines move by the re-parse's shift.
//!    The tree's own shift ([`porin_model::reparse::LineShift`]) then runs
//!    on a rayon worker beside the move of the rules when many items
//!    follow (it touches only the text's tree; the item is lowered
//!    before it, from the new item and what precedes it); so does a
//!    one-item replacement that moves lines (4).
//!    Debug builds check the text's rules and origins against its lowering. An
//!    insertion that makes a selector's first use come before another's
//!    that is numbered earlier numbers the selectors again as in 4.
//! 6. **A policy text added or removed**: the same move of a block, the
//!    text's whole lowering (lowered alone, as in 4) appended after the
//!    other texts' rules and origins or taken out from among them, its
//!    lowering findings and span with it. Debug builds check the whole
//!    lowering against `lower` of every text. A text's CIDR prefixes that
//!    no other text names come with their CIDR identities (the lowest free
//!    local numbers, as the allocation gives them when the others are
//!    pinned) and go with them. A change of a text's own CIDR groups, or
//!    of which log values the texts name, recompiles (a group's labels
//!    reach every text's CIDR identities; the cookies are numbered over
//!    every text's values).
//! 7. **Anything else** (named ports, reserved identities): a full
//!    recompile ([`UpdatePath::Full`] says why), whose writes are still the
//!    exact difference. So is any failure: an update that fails restores
//!    the previous inputs and model, never half-applies.
//!
//! [`Session::compiled`] materialises the whole [`Compiled`]; the property
//! test (`session::live_tests`) checks it, every state and the replayed writes
//! against a batch compile after each random step.

mod addresses;
mod items;
mod live;
#[cfg(test)]
mod live_tests;
mod load;
mod names;
mod numbers;
mod states;
mod text;

pub use live::{EndpointDelta, Session, SessionError, Update, UpdatePath};
pub use load::TextLoad;
pub use text::{AppliedText, CheckedText};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use porin_model::diagnostic::Diagnostic;

use crate::allocation::{FIRST_ALLOCATED, LAST_ALLOCATED};
use crate::compile::{Compiled, DistillRequest, Distilled, Distiller, drive};
use crate::error::CompileError;
use crate::inventory::{Inventory, NamedPort};
use crate::limits::{CompileLimits, EntryBudget};
use crate::mapstate::MapState;
use crate::resolve::lower::{Origin, PolicyInput};
use crate::resolve::policy::{L4Policy, SelectorId};
use crate::selector::Selector;

/// Everything `Resolver::map_state` reads for one endpoint; equal
/// fingerprints give equal map states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    identity: u32,
    policy: L4Policy,
    ports: Vec<NamedPort>,
    cluster_ports: BTreeMap<String, BTreeSet<(u16, u8)>>,
    selectors: Vec<(SelectorId, Selector, Vec<u32>)>,
    /// `Resolver::allows_localhost`: the inventory's `allowLocalhost` may
    /// change between compilations.
    allows_localhost: bool,
}

/// Cached map states by (identity, named ports), with their fingerprint.
type StateCache = HashMap<(u32, Vec<NamedPort>), (Fingerprint, Arc<MapState>, Vec<Diagnostic>)>;

/// What the last [`IncrementalCompiler::compile`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IncrementalStats {
    /// Endpoints compiled.
    pub endpoints: usize,
    /// Map states taken from the cache (fingerprint unchanged).
    pub map_states_reused: usize,
    /// Map states distilled again.
    pub map_states_computed: usize,
}

/// A compiler that remembers map states between compilations.
#[derive(Debug, Default)]
pub struct IncrementalCompiler {
    origins: Vec<Origin>,
    cache: StateCache,
    limits: CompileLimits,
}

impl IncrementalCompiler {
    /// An empty cache: the first compilation distills everything.
    pub fn new() -> Self {
        Self::default()
    }

    /// The limits every compile runs under ([`CompileLimits::default`]
    /// unless set).
    pub fn limits(&self) -> &CompileLimits {
        &self.limits
    }

    /// Sets the limits of the next compiles (as
    /// [`crate::compile::compile_with_limits`]: each is checked before the
    /// work it bounds). The cache stays valid: limits change what is
    /// refused, never what a map state is.
    pub fn set_limits(&mut self, limits: CompileLimits) {
        self.limits = limits;
    }

    /// Compiles like [`crate::compile::compile`] (same result for the same
    /// inputs; the same driver, `compile::drive`, under [`Self::limits`]), reusing
    /// cached map states whose fingerprint is unchanged.
    pub fn compile(
        &mut self,
        policies: &[PolicyInput<'_>],
        inventory: &Inventory,
    ) -> Result<(Compiled, IncrementalStats), CompileError> {
        // The distiller borrows the compiler (its cache) mutably; the limits
        // are read through a copy.
        let limits = self.limits.clone();
        let mut distiller = ReusingDistiller {
            compiler: self,
            limits: &limits,
            budget: limits.budget(),
            fresh: HashMap::new(),
            stats: IncrementalStats {
                endpoints: inventory.endpoints.len(),
                ..IncrementalStats::default()
            },
        };
        let compiled = drive(policies, inventory, &limits, &mut distiller)?;
        let ReusingDistiller { fresh, stats, .. } = distiller;
        // Only states of endpoints that still exist stay cached.
        self.cache = fresh;
        Ok((compiled, stats))
    }
}

/// The incremental distiller: a state whose fingerprint equals the cached
/// one is reused, anything else is distilled again.
struct ReusingDistiller<'c> {
    compiler: &'c mut IncrementalCompiler,
    /// The compilation's limits.
    limits: &'c CompileLimits,
    /// Entries of every state, reused or not: the budget bounds the output.
    budget: EntryBudget<'c>,
    /// The states of this compilation (the next cache).
    fresh: StateCache,
    stats: IncrementalStats,
}

impl Distiller for ReusingDistiller<'_> {
    fn start(&mut self, origins: &[Origin]) {
        if self.compiler.origins != origins {
            // Entry origins (and their descriptions in diagnostics) come from
            // here: a different policy set invalidates every map state.
            self.compiler.cache.clear();
            self.compiler.origins = origins.to_vec();
        }
    }

    fn distill(&mut self, request: DistillRequest<'_, '_>) -> Result<Distilled, CompileError> {
        let DistillRequest {
            endpoint,
            identity,
            policy,
            resolver,
            describe,
        } = request;
        let fingerprint = Fingerprint {
            identity,
            selectors: referenced_selectors(policy, &resolver.cache),
            policy: policy.clone(),
            ports: endpoint.ports.clone(),
            cluster_ports: resolver.cluster_ports().clone(),
            allows_localhost: resolver.allows_localhost(endpoint),
        };
        let cache_key = (identity, endpoint.ports.clone());
        let computed = match self.compiler.cache.get(&cache_key) {
            Some((cached, state, diagnostics)) if *cached == fingerprint => {
                self.stats.map_states_reused += 1;
                (state.clone(), diagnostics.clone())
            }
            _ => {
                self.stats.map_states_computed += 1;
                // Only a state distilled again inserts keys: a reused one is
                // not bounded by the insertion limit, only charged below.
                self.limits
                    .check_l4_policy(&endpoint.display_name(), policy, &resolver.cache)?;
                let (state, diagnostics) = resolver.map_state(endpoint, policy, describe);
                (Arc::new(state), diagnostics)
            }
        };
        self.budget
            .charge(&endpoint.display_name(), computed.0.len())?;
        self.fresh.insert(
            cache_key,
            (fingerprint, computed.0.clone(), computed.1.clone()),
        );
        Ok(computed)
    }
}

/// Every selector the L4 policy references, with its current selection.
fn referenced_selectors(
    policy: &L4Policy,
    cache: &crate::resolve::policy::SelectorCache,
) -> Vec<(SelectorId, Selector, Vec<u32>)> {
    let mut ids: BTreeSet<SelectorId> = BTreeSet::new();
    for direction in [&policy.ingress, &policy.egress] {
        for per_selector in direction.filters.values() {
            ids.extend(per_selector.keys().copied());
        }
    }
    ids.into_iter()
        .map(|id| (id, cache.selector(id).clone(), cache.selection(id).to_vec()))
        .collect()
}

/// Writes the allocated identity numbers of `compiled` back into
/// `inventory` as given numbers, so the next compilation keeps them
/// (Cilium never renumbers a live identity). Reserved and given numbers are
/// left alone; endpoints are matched by namespace and name.
pub fn pin_identities(inventory: &mut Inventory, compiled: &Compiled) {
    for endpoint in &mut inventory.endpoints {
        if endpoint.identity.is_some() {
            continue;
        }
        if let Some(policy) = compiled
            .endpoints
            .iter()
            .find(|e| e.namespace == endpoint.namespace && e.name == endpoint.name)
            && (FIRST_ALLOCATED..=LAST_ALLOCATED).contains(&policy.identity)
        {
            endpoint.identity = Some(policy.identity);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::compile;
    use porin_model::limits::LoadLimits;
    use porin_model::loader::load_str;

    const POLICY: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: allow-frontend, namespace: prod}
spec:
  endpointSelector: {matchLabels: {app: payment}}
  ingress:
    - fromEndpoints: [{matchLabels: {tier: web}}]
      toPorts: [{ports: [{port: "8080", protocol: TCP}]}]
  egress:
    - toEndpoints: [{matchLabels: {app: db}}]
      toPorts: [{ports: [{port: "5432", protocol: TCP}]}]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: db, namespace: prod}
spec:
  endpointSelector: {matchLabels: {app: db}}
  ingress:
    - fromEndpoints: [{matchLabels: {app: payment}}]
"#;

    const INVENTORY: &str = r#"
kind: Inventory
endpoints:
  - {name: frontend, namespace: prod, labels: {app: frontend, tier: web}, ips: [10.0.1.10]}
  - {name: payment, namespace: prod, labels: {app: payment}, ips: [10.0.1.20]}
  - {name: db, namespace: prod, labels: {app: db}, ips: [10.0.1.30]}
"#;

    fn endpoint(name: &str, labels: &[(&str, &str)], ip: &str) -> crate::inventory::Endpoint {
        crate::inventory::Endpoint {
            name: name.to_owned(),
            namespace: Some("prod".to_owned()),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ips: vec![ip.parse().unwrap()],
            service_account: None,
            ports: Vec::new(),
            identity: None,
            identity_labels: None,
            location: crate::inventory::SourceLocation::default(),
        }
    }

    /// Each step: incremental result == batch result on the same (pinned)
    /// inventory, identities of untouched endpoints never change, and only
    /// endpoints whose policy inputs changed are distilled again.
    #[test]
    fn incremental_equals_batch_and_reuses_unchanged_endpoints() {
        let outcome = load_str("p.yaml", POLICY, &LoadLimits::default());
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        let inputs = PolicyInput::from_outcome(&outcome);
        let mut inventory = Inventory::new();
        inventory.add_text("inv.yaml", INVENTORY).unwrap();
        inventory.finish().unwrap();
        let mut compiler = IncrementalCompiler::new();

        let (first, stats) = compiler.compile(&inputs, &inventory).unwrap();
        assert_eq!(first, compile(&inputs, &inventory).unwrap());
        assert_eq!(stats.map_states_computed, 3);
        pin_identities(&mut inventory, &first);
        let db_identity = first.endpoint("prod/db").unwrap().identity;

        // Same label set as `db`: nobody's inputs change (db2 shares db's
        // cached state; the ipcache gains one address).
        inventory
            .endpoints
            .push(endpoint("db2", &[("app", "db")], "10.0.1.31"));
        inventory.finish().unwrap();
        let (second, stats) = compiler.compile(&inputs, &inventory).unwrap();
        assert_eq!(second, compile(&inputs, &inventory).unwrap());
        assert_eq!((stats.map_states_reused, stats.map_states_computed), (3, 0));
        assert_eq!(second.endpoint("prod/db2").unwrap().identity, db_identity);

        // A new label set selected by payment's ingress (tier=web) whose
        // labels sort before every other: payment is distilled again, the
        // others are not, and no identity is renumbered.
        inventory.endpoints.push(endpoint(
            "aaa",
            &[("aaa", "1"), ("tier", "web")],
            "10.0.1.40",
        ));
        inventory.finish().unwrap();
        pin_identities(&mut inventory, &second);
        let (third, stats) = compiler.compile(&inputs, &inventory).unwrap();
        assert_eq!(third, compile(&inputs, &inventory).unwrap());
        assert_eq!(third.endpoint("prod/db").unwrap().identity, db_identity);
        assert!(stats.map_states_computed >= 2, "{stats:?}");
        assert!(stats.map_states_reused >= 2, "{stats:?}");
        let payment = third.endpoint("prod/payment").unwrap();
        assert_ne!(
            payment.entries(),
            second.endpoint("prod/payment").unwrap().entries()
        );

        // Removing it restores the earlier map state of payment.
        inventory.endpoints.retain(|e| e.name != "aaa");
        let (fourth, _) = compiler.compile(&inputs, &inventory).unwrap();
        assert_eq!(fourth, compile(&inputs, &inventory).unwrap());
        assert_eq!(
            fourth.endpoint("prod/payment").unwrap().entries(),
            second.endpoint("prod/payment").unwrap().entries()
        );
    }
}
