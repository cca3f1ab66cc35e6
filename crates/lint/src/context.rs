//! Everything the rules share: the lowered rules, identities, each
//! endpoint's compiled state, and the exact per-rule effect analysis.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use rayon::prelude::*;

use porin_model::diagnostic::{Diagnostic, Location};

use crate::settings::LintConfig;
use porin_compiler::allocation::{IdentityKind, IdentityTable};
use porin_compiler::compile::capacity::{Capped, Census, distill_capped};
use porin_compiler::error::CompileError;
use porin_compiler::identity::Identity;
use porin_compiler::inventory::{Inventory, NamedPort};
use porin_compiler::limits::CompileLimits;
use porin_compiler::mapstate::MapState;
use porin_compiler::resolve::lower::{LOCALHOST_ORIGIN_NAME, Lowered, Origin, PolicyInput, lower};
use porin_compiler::resolve::policy::{L4Policy, Resolver};
use porin_compiler::resolve::rule::PolicyRule;
use porin_connectivity::analysis::{self, decide, flow_points};

pub(crate) mod shadow;

pub use shadow::RuleEffects;
use shadow::{Item, UnitAnalysis};

/// What an identity's L4 policy depends on: the rules selecting it, and
/// whether it is the init identity (`Resolver::l4_policy`).
type PolicyKey<'r> = (&'r [usize], bool);

/// Endpoints that share an identity and named ports, hence a map state.
#[derive(Debug, Clone)]
pub struct Unit {
    /// Indices into the inventory's endpoints.
    pub endpoints: Vec<usize>,
    /// The shared identity.
    pub identity: u32,
    /// Indices of the rules selecting the identity, in input order.
    pub rules: Vec<usize>,
    /// The resolved L4 policy (shared by the units whose identities the
    /// same rules select).
    pub policy: Arc<L4Policy>,
    /// The compiled map state (shared by the units with the same policy,
    /// named ports and host allow).
    pub state: Arc<MapState>,
}

/// Endpoints whose state needs more entries than a policy map can hold
/// (`max_entries_per_endpoint`, 65,536): counted, never built
/// ([`porin_compiler::compile::capacity`]); PR001 reports them, and the
/// rules that read map states skip them.
#[derive(Debug, Clone)]
pub struct Overflow {
    /// Indices into the inventory's endpoints.
    pub endpoints: Vec<usize>,
    /// The identity of the first.
    pub identity: u32,
    /// Indices of the rules selecting the identity, in input order.
    pub rules: Vec<usize>,
    /// The exact entry count, per origin (shared by the overflows of one
    /// state).
    pub census: Arc<Census>,
}

/// Who decides the flows a dead allow rule would allow (PR004/PR005).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Origins of deny entries deciding some of them.
    pub denies: BTreeSet<u32>,
    /// Origins of allow entries deciding some of them.
    pub allows: BTreeSet<u32>,
    /// Flow classes the rule would allow on its own.
    pub flows: usize,
}

/// The rule items analysed for PR004/PR005/PR017 (user allow items), by
/// origin, each with whether one of its ports is a range.
fn analysed_items(lowered: &Lowered) -> BTreeMap<u32, bool> {
    let mut out: BTreeMap<u32, bool> = BTreeMap::new();
    for rule in &lowered.rules {
        let Some(o) = usize::try_from(rule.origin)
            .ok()
            .and_then(|i| lowered.origins.get(i))
        else {
            continue;
        };
        if o.is_synthetic() || o.deny {
            continue;
        }
        let ranged = rule.ports.iter().any(|p| {
            matches!(p.port, porin_compiler::resolve::rule::PortRef::Number(n) if n != 0 && p.end_port > n)
        });
        *out.entry(rule.origin).or_default() |= ranged;
    }
    out
}

/// Folds the effects of every analysed item of every unit (a unit's state
/// is not needed after its items are folded in).
fn fold_effects(
    resolver: &Resolver<'_>,
    lowered: &Lowered,
    inventory: &Inventory,
    units: &[Unit],
) -> BTreeMap<u32, RuleEffects> {
    let analysed = analysed_items(lowered);
    // Units sharing a state share its rules, policy and endpoint ports
    // (`Context::new`), which is all the analysis reads: each distinct
    // state is analysed once (in parallel, rayon), and its effects folded
    // in once per unit. `RuleEffects::merge` is commutative and
    // associative, so the result does not depend on the order.
    let mut distinct: HashMap<*const MapState, usize> = HashMap::new();
    let mut firsts: Vec<&Unit> = Vec::new();
    let mut unit_state: Vec<usize> = Vec::with_capacity(units.len());
    for unit in units {
        let next = firsts.len();
        let index = *distinct.entry(Arc::as_ptr(&unit.state)).or_insert(next);
        if index == next {
            firsts.push(unit);
        }
        unit_state.push(index);
    }
    let analyse = |unit: &&Unit| -> Vec<(u32, RuleEffects)> {
        let Some(endpoint) = unit
            .endpoints
            .first()
            .and_then(|i| inventory.endpoints.get(*i))
        else {
            return Vec::new();
        };
        let items: BTreeMap<u32, bool> = unit
            .rules
            .iter()
            .filter_map(|r| lowered.rules.get(*r))
            .filter_map(|r| Some((r.origin, *analysed.get(&r.origin)?)))
            .collect();
        if items.is_empty() {
            return Vec::new();
        }
        let mut analysis = UnitAnalysis::new(
            resolver,
            &lowered.rules,
            unit.identity,
            endpoint,
            &unit.rules,
            &unit.state,
        );
        items
            .into_iter()
            .map(|(origin, ranged)| (origin, analysis.effects(&Item { origin, ranged })))
            .collect()
    };
    let effects: Vec<Vec<(u32, RuleEffects)>> = firsts.par_iter().map(analyse).collect();
    let mut out: BTreeMap<u32, RuleEffects> = BTreeMap::new();
    for index in unit_state {
        for (origin, effects) in effects.get(index).into_iter().flatten() {
            out.entry(*origin).or_default().merge(effects.clone());
        }
    }
    out
}

/// An endpoint unit to be: endpoints sharing an identity and named ports,
/// in inventory order.
struct Candidate<'r> {
    endpoints: Vec<usize>,
    identity: u32,
    rules: &'r [usize],
    /// What its map state depends on: (index into
    /// [`Plan::policy_identities`], named ports, host allow).
    shared: (usize, &'r [NamedPort], bool),
}

/// The units of a lint run and what they share, found in one walk over the
/// inventory before anything is resolved or distilled.
struct Plan<'r> {
    candidates: Vec<Candidate<'r>>,
    /// The first identity of each distinct L4 policy (its selecting rules
    /// and whether it is init: `Resolver::l4_policy` reads nothing else).
    policy_identities: Vec<u32>,
    /// Per candidate: whether it is the first with its `shared` key.
    first_of_state: Vec<bool>,
}

impl<'r> Plan<'r> {
    fn of(resolver: &'r Resolver<'_>, inventory: &'r Inventory, table: &IdentityTable) -> Self {
        let mut by_key: HashMap<(u32, &[NamedPort]), usize> = HashMap::new();
        // One L4 policy per (selecting rules, init) and one map state per
        // (L4 policy, named ports, host allow): resolution reads nothing
        // else of the identity, distillation nothing else of the endpoint
        // (`Compilation::plan` shares them the same way), so identities of
        // one Deployment share one state.
        let mut policies: HashMap<PolicyKey<'r>, usize> = HashMap::new();
        let mut seen: HashSet<(usize, &[NamedPort], bool)> = HashSet::new();
        let mut plan = Plan {
            candidates: Vec::new(),
            policy_identities: Vec::new(),
            first_of_state: Vec::new(),
        };
        for (index, endpoint) in inventory.endpoints.iter().enumerate() {
            let identity = table.endpoint_identity.get(index).copied().unwrap_or(0);
            if let Some(at) = by_key.get(&(identity, endpoint.ports.as_slice())) {
                plan.candidates[*at].endpoints.push(index);
                continue;
            }
            let rules = resolver.rules_of(identity);
            let next = plan.policy_identities.len();
            let policy = *policies
                .entry((rules, identity == Identity::INIT.get()))
                .or_insert(next);
            if policy == next {
                plan.policy_identities.push(identity);
            }
            let shared = (
                policy,
                endpoint.ports.as_slice(),
                resolver.allows_localhost(endpoint),
            );
            plan.first_of_state.push(seen.insert(shared));
            by_key.insert((identity, endpoint.ports.as_slice()), plan.candidates.len());
            plan.candidates.push(Candidate {
                endpoints: vec![index],
                identity,
                rules,
                shared,
            });
        }
        plan
    }
}

/// The codes that read [`Context::item_effects`].
const SHADOWING_CODES: [&str; 3] = ["PR004", "PR005", "PR017"];

/// The shared state of one lint run.
pub struct Context<'a> {
    /// The policies.
    pub inputs: &'a [PolicyInput<'a>],
    /// The inventory (empty when none was given).
    pub inventory: &'a Inventory,
    /// Whether an inventory was given.
    pub has_inventory: bool,
    /// The configuration.
    pub config: &'a LintConfig,
    /// Lowered rules and origins.
    pub lowered: Lowered,
    /// Identities.
    pub table: IdentityTable,
    /// Endpoint units (empty without inventory).
    pub units: Vec<Unit>,
    /// Endpoints over the map capacity (not in `units`).
    pub overflows: Vec<Overflow>,
    /// The ipcache entry count.
    pub ipcache_len: usize,
    /// The compiler's diagnostics (lowering and map-state distillation).
    pub compile_diagnostics: Vec<Diagnostic>,
    /// Per rule item (origin), the effects of removing it (computed on
    /// first use, see `context/shadow.rs`).
    effects: OnceCell<BTreeMap<u32, RuleEffects>>,
}

impl<'a> Context<'a> {
    /// Lowers and compiles everything once.
    pub fn new(
        inputs: &'a [PolicyInput<'a>],
        inventory: &'a Inventory,
        has_inventory: bool,
        config: &'a LintConfig,
    ) -> Result<Self, CompileError> {
        let lowered = lower(inputs, inventory);
        let table = IdentityTable::allocate_with_groups(
            inventory,
            &lowered.prefixes,
            &lowered.cidr_groups,
        )?;
        let mut units: Vec<Unit> = Vec::new();
        let mut overflows: Vec<Overflow> = Vec::new();
        let mut compile_diagnostics = lowered.diagnostics.clone();
        let mut ipcache_len = 0;
        let effects = OnceCell::new();
        if has_inventory {
            let resolver = Resolver::new(&lowered.rules, &table, inventory)
                .with_localhost_origin(lowered.localhost_origin);
            let describe = |id: u32| {
                usize::try_from(id)
                    .ok()
                    .and_then(|i| lowered.origins.get(i))
                    .map_or_else(|| format!("origin {id}"), Origin::describe)
            };
            let cap = CompileLimits::default().max_entries_per_endpoint;
            let plan = Plan::of(&resolver, inventory, &table);
            // The distinct L4 policies, then the distinct map states, each
            // computed once and in parallel (rayon); `Plan::assemble` then
            // walks the units in inventory order, so units, overflows and
            // diagnostics come out as a one-thread run makes them.
            let policies: Vec<Arc<L4Policy>> = plan
                .policy_identities
                .par_iter()
                .map(|identity| Arc::new(resolver.l4_policy(*identity)))
                .collect();
            let distill = |candidate: &Candidate<'_>| {
                let endpoint = inventory.endpoints.get(candidate.endpoints[0])?;
                let policy = policies.get(candidate.shared.0)?;
                Some(distill_capped(&resolver, endpoint, policy, &describe, cap))
            };
            let mut distilled: Vec<Option<Capped>> = plan
                .candidates
                .par_iter()
                .enumerate()
                .map(|(at, candidate)| {
                    if plan.first_of_state[at] {
                        distill(candidate)
                    } else {
                        None
                    }
                })
                .collect();
            // A first state with diagnostics (they name the endpoint) is not
            // shared: the other units of that state distil their own, as the
            // one-thread walk does. A census over the cap is shared like a
            // state: it is a function of the same (policy, named ports, host
            // allow), and counting it again for every pod of a 30,000-pod
            // cluster (one identity each) is what kept such a lint from
            // finishing.
            let unshared: BTreeSet<(usize, &[NamedPort], bool)> = plan
                .candidates
                .iter()
                .zip(&distilled)
                .filter(|(_, result)| match result {
                    Some(Capped::Fits(_, diagnostics) | Capped::Over(_, diagnostics)) => {
                        !diagnostics.is_empty()
                    }
                    None => false,
                })
                .map(|(candidate, _)| candidate.shared)
                .collect();
            if !unshared.is_empty() {
                let again: Vec<(usize, Option<Capped>)> = plan
                    .candidates
                    .par_iter()
                    .enumerate()
                    .filter(|(at, candidate)| {
                        !plan.first_of_state[*at] && unshared.contains(&candidate.shared)
                    })
                    .map(|(at, candidate)| (at, distill(candidate)))
                    .collect();
                for (at, result) in again {
                    distilled[at] = result;
                }
            }
            // What one distillation gave, kept for the next units of its
            // (policy, named ports, host allow) when it had no diagnostics
            // (they name the endpoint: with some, the next one distils its
            // own).
            #[derive(Clone)]
            enum Shared {
                State(Arc<MapState>),
                Over(Arc<Census>),
            }
            let mut shared: HashMap<(usize, &[NamedPort], bool), Shared> = HashMap::new();
            for (candidate, result) in plan.candidates.into_iter().zip(distilled) {
                let outcome = match shared.get(&candidate.shared) {
                    Some(outcome) => outcome.clone(),
                    None => {
                        let (outcome, diagnostics) = match result {
                            Some(Capped::Fits(state, d)) => (Shared::State(Arc::new(state)), d),
                            Some(Capped::Over(census, d)) => (Shared::Over(Arc::new(census)), d),
                            None => continue,
                        };
                        if diagnostics.is_empty() {
                            shared.insert(candidate.shared, outcome.clone());
                        }
                        compile_diagnostics.extend(diagnostics);
                        outcome
                    }
                };
                match outcome {
                    Shared::State(state) => units.push(Unit {
                        endpoints: candidate.endpoints,
                        identity: candidate.identity,
                        rules: candidate.rules.to_vec(),
                        policy: policies
                            .get(candidate.shared.0)
                            .map_or_else(|| Arc::new(L4Policy::default()), Arc::clone),
                        state,
                    }),
                    Shared::Over(census) => overflows.push(Overflow {
                        endpoints: candidate.endpoints,
                        identity: candidate.identity,
                        rules: candidate.rules.to_vec(),
                        census,
                    }),
                }
            }
            ipcache_len = porin_compiler::compile::build_ipcache(inventory, &table).len();
            if SHADOWING_CODES
                .iter()
                .any(|code| config.level(code) != crate::config::RuleLevel::Off)
            {
                // With the resolver that compiled the units (building
                // another one matches every subject against every
                // identity again).
                let computed = fold_effects(&resolver, &lowered, inventory, &units);
                let _ = effects.set(computed);
            }
        }
        Ok(Self {
            inputs,
            inventory,
            has_inventory,
            config,
            lowered,
            table,
            units,
            overflows,
            ipcache_len,
            compile_diagnostics,
            effects,
        })
    }

    /// The rules.
    pub fn rules(&self) -> &[PolicyRule] {
        &self.lowered.rules
    }

    /// The origin of a rule.
    pub fn origin(&self, rule: usize) -> Option<&Origin> {
        self.rules()
            .get(rule)
            .and_then(|r| self.origin_by_id(r.origin))
    }

    /// An origin by id.
    pub fn origin_by_id(&self, id: u32) -> Option<&Origin> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.lowered.origins.get(i))
    }

    /// The input a rule came from.
    pub fn input_of(&self, origin: &Origin) -> Option<&PolicyInput<'a>> {
        self.inputs.iter().find(|input| {
            input.file == origin.file
                && input.document == origin.document
                && input.policy.name() == origin.name
                && input.policy.kind() == origin.kind.name()
        })
    }

    /// The location of a field path (relative to an origin's policy).
    pub fn location(&self, origin: &Origin, route: &str) -> Location {
        let (line, column) = self
            .input_of(origin)
            .map_or((origin.line, 1), |input| input.locate(route));
        let (line, column) = if line == 0 {
            (origin.line, 1)
        } else {
            (line, column)
        };
        Location {
            file: origin.file.clone(),
            document: origin.document,
            line,
            column,
            route: route.to_owned(),
        }
    }

    /// The location of a rule item.
    pub fn rule_location(&self, origin: &Origin) -> Location {
        self.location(origin, &origin.route)
    }

    /// `Kind ns/name section[i]` for messages.
    pub fn describe(&self, origin: &Origin) -> String {
        if origin.is_synthetic() && origin.name == LOCALHOST_ORIGIN_NAME {
            return "the host's ingress allow (`allowLocalhost`: Cilium in Kubernetes mode lets the host reach local pods; `allowLocalhost: policy` removes it)".to_owned();
        }
        if origin.is_synthetic() {
            return format!(
                "the allow-all of {} (the direction is not enforced without this rule, or every rule selecting the endpoint sets `enableDefaultDeny: false`)",
                origin.direction
            );
        }
        let name = match &origin.namespace {
            Some(ns) => format!("{ns}/{}", origin.name),
            None => origin.name.clone(),
        };
        format!("{} `{name}` {}", origin.kind, origin.route)
    }

    /// The display name of a unit (its first endpoint, `+N` for more).
    pub fn unit_name(&self, unit: &Unit) -> String {
        let first = unit
            .endpoints
            .first()
            .and_then(|i| self.inventory.endpoints.get(*i))
            .map_or_else(String::new, |e| e.display_name());
        match unit.endpoints.len() {
            0 | 1 => first,
            n => format!("{first} (+{} more with identity {})", n - 1, unit.identity),
        }
    }

    /// The rule indices of the rule item (origin) of `rule`: lowering may
    /// split one item into several rules (one per Kubernetes peer, ...),
    /// and the item is what a user deletes.
    pub fn item_rules(&self, origin: u32) -> Vec<usize> {
        self.rules()
            .iter()
            .enumerate()
            .filter(|(_, r)| r.origin == origin)
            .map(|(i, _)| i)
            .collect()
    }

    /// The effects of removing each analysed rule item, by origin: one
    /// pass over the units, each folding its items' effects in (exact, see
    /// `context/shadow.rs`). Computed in [`Context::new`] when a rule needs it.
    pub fn item_effects(&self) -> &BTreeMap<u32, RuleEffects> {
        self.effects.get_or_init(|| {
            let resolver = Resolver::new(&self.lowered.rules, &self.table, self.inventory)
                .with_localhost_origin(self.lowered.localhost_origin);
            fold_effects(&resolver, &self.lowered, self.inventory, &self.units)
        })
    }

    /// The effects of removing the item of `rule` (default if it is not
    /// analysed or selects nothing).
    pub fn effects_of(&self, rule: usize) -> RuleEffects {
        self.rules()
            .get(rule)
            .and_then(|r| self.item_effects().get(&r.origin))
            .cloned()
            .unwrap_or_default()
    }

    /// Whether removing the item of `rule` changes any verdict of any
    /// endpoint it selects (exact; see `context/shadow.rs`). Deny and synthetic
    /// items are not analysed: recompiles them (for tests).
    pub fn rule_changes_verdicts(&self, rule: usize) -> bool {
        let Some(origin) = self.rules().get(rule).map(|r| r.origin) else {
            return false;
        };
        if let Some(effects) = self.item_effects().get(&origin) {
            return effects.changes;
        }
        if analysed_items(&self.lowered).contains_key(&origin) {
            // Analysed, but it selects no unit.
            return false;
        }
        self.effects_by_recompiling(origin, false).changes
    }

    /// The map state of a unit under exactly `rules` (a recompilation with
    /// a fresh resolver: the reference the fast analysis is tested against).
    pub fn state_of_rules(&self, unit: &Unit, rules: &[PolicyRule]) -> MapState {
        self.state_with(&self.resolver_of(rules), unit)
    }

    /// A resolver over exactly `rules` (building one matches every subject
    /// against the table: callers asking for many units under the same
    /// rules build it once and call [`Context::state_with`]).
    pub fn resolver_of<'r>(&'r self, rules: &'r [PolicyRule]) -> Resolver<'r> {
        Resolver::new(rules, &self.table, self.inventory)
            .with_localhost_origin(self.lowered.localhost_origin)
    }

    /// The map state of a unit under the rules of `resolver`
    /// ([`Context::resolver_of`]).
    pub fn state_with(&self, resolver: &Resolver<'_>, unit: &Unit) -> MapState {
        let policy = resolver.l4_policy(unit.identity);
        let Some(endpoint) = unit
            .endpoints
            .first()
            .and_then(|i| self.inventory.endpoints.get(*i))
        else {
            return MapState::new();
        };
        resolver
            .map_state(endpoint, &policy, &|id| format!("origin {id}"))
            .0
    }

    /// The effects of removing a rule item, by leave-one-out recompilation
    /// of every unit it selects (the brute-force reference of
    /// [`Context::item_effects`], for tests; `ranged` fills the classes).
    #[doc(hidden)]
    pub fn effects_by_recompiling(&self, origin: u32, ranged: bool) -> RuleEffects {
        let mut total = RuleEffects::default();
        for unit in &self.units {
            if !unit
                .rules
                .iter()
                .any(|r| self.rules().get(*r).is_some_and(|x| x.origin == origin))
            {
                continue;
            }
            let mut effects = RuleEffects {
                selected: true,
                ..RuleEffects::default()
            };
            let (own, others): (Vec<PolicyRule>, Vec<PolicyRule>) = unit
                .rules
                .iter()
                .filter_map(|r| self.rules().get(*r).cloned())
                .partition(|r| r.origin == origin);
            let without = self.state_of_rules(unit, &others);
            effects.changes = !analysis::equivalent(&unit.state, &without);
            let preserved = own.first().is_none_or(|r| {
                let direction = r.direction;
                let shape = |rules: &[PolicyRule]| {
                    let resolver = Resolver::new(rules, &self.table, self.inventory);
                    let policy = resolver.l4_policy(unit.identity);
                    let dir = policy.direction(direction);
                    let synthetic = dir.filters.values().flat_map(|per| per.values()).any(|sp| {
                        sp.origins
                            .contains(&porin_compiler::resolve::policy::allow_all_origin(
                                direction,
                            ))
                    });
                    (dir.enforced, dir.features(), synthetic)
                };
                let all: Vec<PolicyRule> = own.iter().chain(&others).cloned().collect();
                shape(&all) == shape(&others)
            });
            let alone = self.state_of_rules(unit, &own);
            for point in flow_points(&[&alone, &without]) {
                let decision = decide(&alone, &point);
                let granted = decision.verdict.is_allowed()
                    && decision
                        .chosen
                        .as_ref()
                        .is_some_and(|c| c.entry.origins.contains(&origin));
                if granted {
                    let other = decide(&without, &point);
                    let entry = other.chosen.as_ref().map(|c| &c.entry);
                    effects.record(
                        &point,
                        decision.verdict,
                        (other.verdict, entry),
                        ranged,
                        preserved,
                    );
                }
            }
            total.merge(effects);
        }
        total
    }

    /// Prefixes of CIDR identities, by identity.
    pub fn cidr_prefix(&self, identity: u32) -> Option<ipnetwork::IpNetwork> {
        self.table.get(identity).and_then(|info| match &info.kind {
            IdentityKind::Cidr { prefix } => Some(*prefix),
            _ => None,
        })
    }
}
