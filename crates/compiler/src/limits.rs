//! Compile-time resource limits: what one compilation may cost.
//!
//! The loader bounds each *file* ([`porin_model::limits::LoadLimits`]: bytes,
//! YAML nodes after alias expansion, nesting, documents, files). Many files
//! that each pass the loader can still add up to more rules than a node can
//! enforce, and the compiler's work grows with products (rules × identities
//! × port blocks), so this stage has its own budget, [`CompileLimits`].
//!
//! Every check runs *before* the work it bounds, on a number that is cheap
//! to compute, so a hostile input is refused as soon as the capacity is
//! certainly exceeded instead of after building everything:
//!
//! | check | when | bounds |
//! |-------|------|--------|
//! | [`CompileLimits::check_endpoints`] | before lowering | inventory size |
//! | [`CompileLimits::check_inputs`] | before lowering | rules (a lower bound, from the policy documents) |
//! | [`CompileLimits::check_lowered`] | after lowering (linear in the input) | rules, peer selectors, CIDR prefixes |
//! | [`CompileLimits::check_identities`] | after identity allocation | identities |
//! | [`crate::resolve::policy::Resolver::with_selector_budget`] | while selectors are resolved (stops at the budget) | identities tested against selectors |
//! | [`CompileLimits::check_l4_policy`] | before an endpoint's map state | key insertions for that endpoint (upper bound) |
//! | [`EntryBudget::charge`] | after each endpoint's map state | entries of one endpoint and of the whole output |
//!
//! Exceeding a limit is a [`CompileError::Limit`] carrying the [`Limit`],
//! the amount needed, the configured value and the endpoint that needed it;
//! its text names the CLI flag that raises it, and the C API maps the
//! [`Limit`] to its `porin_limit`: porin never emits a truncated map
//! state (fail closed: a truncated allow list would be wrong, and so would a
//! truncated deny list).

pub mod kind;

use rayon::prelude::*;

use crate::allocation::IdentityTable;
use crate::error::CompileError;
use crate::inventory::Inventory;
use crate::ports::port_range_to_masked_ports;
use crate::resolve::lower::PolicyInput;
use crate::resolve::policy::{FilterKey, L4Policy, Resolver, SelectorCache};
use crate::resolve::rule::{PolicyRule, PortRef, proto};
pub use kind::{InventoryLimit, Limit};

/// Bounds on one compilation. [`Default`] is far above any real cluster
/// (see each field) and keeps a hostile input under about 1 GiB and a few
/// seconds; every field is settable from the CLI ([`Limit::flag`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileLimits {
    /// Inventory endpoints. Default 100,000.
    pub max_endpoints: usize,
    /// Rules after lowering (one per `ingress`/`egress`/`...Deny` item of
    /// every policy, plus KNP translations). Default 100,000.
    pub max_rules: usize,
    /// Peer selectors summed over all rules (`fromEndpoints` items,
    /// entities, ...). Default 200,000.
    pub max_peer_selectors: usize,
    /// Distinct CIDR prefixes the policies name (each becomes a CIDR
    /// identity and an ipcache entry). Default 65,536 (porin's default
    /// ipcache map size).
    pub max_cidr_prefixes: usize,
    /// Identities (reserved, endpoint, CIDR). Default 200,000.
    pub max_identities: usize,
    /// Identities tested against selectors (subjects and peers), after the
    /// label index narrowed each selector to its candidates: the work of
    /// computing every selection, counted as it is done and stopped at the
    /// limit. Default 500,000,000 (a few seconds).
    pub max_selector_evaluations: u64,
    /// Upper bound of key insertions for one endpoint (Σ over its filters of
    /// port blocks × selected identities), checked before its map state is
    /// built. Default 4,000,000.
    pub max_insertions_per_endpoint: u64,
    /// Entries of one endpoint's map state. Default 65,536, the largest
    /// policy map (`porin_ebpf::POLICY_MAP_MAX`, Cilium's
    /// `bpf-policy-map-max` bound); a state that cannot fit the map is
    /// refused, never truncated.
    pub max_entries_per_endpoint: usize,
    /// Entries of all distinct map states together, charged only where
    /// every state is held at once ([`crate::compile::Compilation::compiled`],
    /// the whole [`crate::compile::Compiled`]); the streams
    /// ([`crate::compile::Compilation::for_each_unit`],
    /// [`crate::compile::write_json`]) hold a few states at a time and never
    /// need it. Default: no limit (a real cluster of 300 policies × 3,000
    /// pods needs more than the old default of 5,000,000, and what bounds
    /// memory is the per-endpoint limits); set it to bound a caller that
    /// builds the whole output.
    pub max_total_entries: usize,
}

impl Default for CompileLimits {
    fn default() -> Self {
        CompileLimits {
            max_endpoints: 100_000,
            max_rules: 100_000,
            max_peer_selectors: 200_000,
            max_cidr_prefixes: 65_536,
            max_identities: 200_000,
            max_selector_evaluations: 500_000_000,
            max_insertions_per_endpoint: 4_000_000,
            max_entries_per_endpoint: 65_536,
            max_total_entries: usize::MAX,
        }
    }
}

impl CompileLimits {
    /// No limits at all (trusted, generated input such as benchmarks).
    pub fn unlimited() -> Self {
        CompileLimits {
            max_endpoints: usize::MAX,
            max_rules: usize::MAX,
            max_peer_selectors: usize::MAX,
            max_cidr_prefixes: usize::MAX,
            max_identities: usize::MAX,
            max_selector_evaluations: u64::MAX,
            max_insertions_per_endpoint: u64::MAX,
            max_entries_per_endpoint: usize::MAX,
            max_total_entries: usize::MAX,
        }
    }

    /// The configured value of one limit.
    pub fn get(&self, limit: Limit) -> u64 {
        let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        match limit {
            Limit::Endpoints => wide(self.max_endpoints),
            Limit::Rules => wide(self.max_rules),
            Limit::PeerSelectors => wide(self.max_peer_selectors),
            Limit::CidrPrefixes => wide(self.max_cidr_prefixes),
            Limit::Identities => wide(self.max_identities),
            Limit::SelectorEvaluations => self.max_selector_evaluations,
            Limit::InsertionsPerEndpoint => self.max_insertions_per_endpoint,
            Limit::EntriesPerEndpoint => wide(self.max_entries_per_endpoint),
            Limit::TotalEntries => wide(self.max_total_entries),
        }
    }

    /// Sets one limit (for CLI wiring: one flag per [`Limit`]).
    pub fn set(&mut self, limit: Limit, value: u64) {
        let narrow = usize::try_from(value).unwrap_or(usize::MAX);
        match limit {
            Limit::Endpoints => self.max_endpoints = narrow,
            Limit::Rules => self.max_rules = narrow,
            Limit::PeerSelectors => self.max_peer_selectors = narrow,
            Limit::CidrPrefixes => self.max_cidr_prefixes = narrow,
            Limit::Identities => self.max_identities = narrow,
            Limit::SelectorEvaluations => self.max_selector_evaluations = value,
            Limit::InsertionsPerEndpoint => self.max_insertions_per_endpoint = value,
            Limit::EntriesPerEndpoint => self.max_entries_per_endpoint = narrow,
            Limit::TotalEntries => self.max_total_entries = narrow,
        }
    }

    fn check(&self, limit: Limit, given: u64, endpoint: Option<&str>) -> Result<(), CompileError> {
        let max = self.get(limit);
        if given > max {
            return Err(CompileError::Limit {
                limit,
                given,
                max,
                endpoint: endpoint.map(str::to_owned),
            });
        }
        Ok(())
    }

    /// Before lowering: the inventory's endpoint count.
    pub fn check_endpoints(&self, endpoints: usize) -> Result<(), CompileError> {
        self.check(Limit::Endpoints, wide(endpoints), None)
    }

    /// Before lowering: the rules lowering will produce at least (one per
    /// `ingress`/`ingressDeny`/`egress`/`egressDeny` item of every CNP and
    /// CCNP rule with an `endpointSelector`; KubernetesNetworkPolicies are
    /// not counted here, [`CompileLimits::check_lowered`] counts them).
    /// Lowering costs a few KiB per rule, so a policy set far over the
    /// limit is refused before it is lowered.
    pub fn check_inputs(&self, policies: &[PolicyInput<'_>]) -> Result<(), CompileError> {
        let items = |input: &PolicyInput<'_>| -> u64 {
            input
                .policy
                .cilium_rules()
                .iter()
                // A node (host) rule: lowering skips it.
                .filter(|(_, rule)| rule.endpoint_selector.is_some())
                .map(|(_, rule)| {
                    wide(
                        rule.ingress.as_ref().map_or(0, Vec::len)
                            + rule.ingress_deny.as_ref().map_or(0, Vec::len)
                            + rule.egress.as_ref().map_or(0, Vec::len)
                            + rule.egress_deny.as_ref().map_or(0, Vec::len),
                    )
                })
                .fold(0, u64::saturating_add)
        };
        // Many policies are counted on rayon's threads (65,535 one-rule
        // policies: ~8 ms alone on the calling thread); a saturating sum
        // is the same in any grouping.
        let rules = if policies.len() >= PARALLEL_INPUT_CHECK {
            policies
                .par_iter()
                .map(items)
                .reduce(|| 0, u64::saturating_add)
        } else {
            policies.iter().map(items).fold(0, u64::saturating_add)
        };
        self.check(Limit::Rules, rules, None)
    }

    /// After lowering (which is linear in the loaded input): rules, peer
    /// selectors and CIDR prefixes, before identities are allocated for the
    /// prefixes and selectors are evaluated.
    pub fn check_lowered(
        &self,
        rules: &[PolicyRule],
        cidr_prefixes: usize,
    ) -> Result<(), CompileError> {
        self.check(Limit::Rules, wide(rules.len()), None)?;
        let peers = rules
            .iter()
            .map(|rule| rule.peers.as_ref().map_or(0, Vec::len))
            .fold(0_u64, |sum, n| sum.saturating_add(wide(n)));
        self.check(Limit::PeerSelectors, peers, None)?;
        self.check(Limit::CidrPrefixes, wide(cidr_prefixes), None)
    }

    /// After identity allocation: the identity count. (The selector work,
    /// [`CompileLimits::max_selector_evaluations`], is counted as the
    /// resolver does it, through the label index, and stops at the budget:
    /// [`crate::resolve::policy::Resolver::with_selector_budget`]. Distinct
    /// selectors × identities, the old estimate, refused 65,535 CIDR rules
    /// that the index resolves in a fraction of a second.)
    pub fn check_identities(
        &self,
        _rules: &[PolicyRule],
        identities: usize,
    ) -> Result<(), CompileError> {
        self.check(Limit::Identities, wide(identities), None)
    }

    /// A resolver of `rules` under
    /// [`CompileLimits::max_selector_evaluations`]
    /// ([`Resolver::with_selector_budget`]), refused when resolution ran
    /// past it: the batch compile's check, and a live session's build's.
    pub fn budgeted_resolver<'a>(
        &self,
        rules: &'a [PolicyRule],
        table: &'a IdentityTable,
        inventory: &'a Inventory,
    ) -> Result<Resolver<'a>, CompileError> {
        let budget = self.max_selector_evaluations;
        let resolver = Resolver::with_selector_budget(rules, table, inventory, Some(budget));
        if resolver.cache.over_budget() {
            return Err(CompileError::Limit {
                limit: Limit::SelectorEvaluations,
                given: resolver.cache.work(),
                max: budget,
                endpoint: None,
            });
        }
        Ok(resolver)
    }

    /// A live session's check within an update: the identity count, and
    /// the identities the update itself tested against selectors (`cache`
    /// counts them from the update's start,
    /// [`SelectorCache::count_from_now`]: the new selectors' resolution
    /// through the label index and a new identity's tests against the
    /// selectors that may select it), under the budget of
    /// [`CompileLimits::max_selector_evaluations`]. The session's build is
    /// counted as a batch compile's. So updates each within the budget can
    /// reach inputs whose batch compile it refuses; the session restores
    /// the inputs it held without it, and an identity add over it goes the
    /// batch way (it tests every distinct subject, which the batch's label
    /// index narrows). (Distinct selectors × identities, the
    /// estimate this check used before, refused the first pod added beside
    /// ~22,400 CIDR rules, which the batch compile and each update resolve
    /// in a small fraction of the budget.)
    pub fn check_update_work(
        &self,
        identities: usize,
        cache: &SelectorCache,
    ) -> Result<(), CompileError> {
        self.check(Limit::Identities, wide(identities), None)?;
        self.check(Limit::SelectorEvaluations, cache.work(), None)
    }

    /// Before an endpoint's map state is built from its resolved L4
    /// policy: an upper bound of the key insertions (each filter inserts at
    /// most one key per port block and selected identity; insertions only
    /// merge or remove keys, so this also bounds the entries).
    pub fn check_l4_policy(
        &self,
        endpoint: &str,
        policy: &L4Policy,
        cache: &SelectorCache,
    ) -> Result<(), CompileError> {
        let bound = insertion_bound(policy, cache);
        self.check(Limit::InsertionsPerEndpoint, bound, Some(endpoint))
    }

    /// A fresh output budget for [`EntryBudget::charge`].
    pub fn budget(&self) -> EntryBudget<'_> {
        EntryBudget {
            limits: self,
            total: 0,
        }
    }
}

/// The upper bound [`CompileLimits::check_l4_policy`] compares: Σ over
/// enforced filters of (port blocks of the filter's range; 1 for a named
/// port or protocol-any filter) × (Σ over its selectors of the identities
/// selected, at least 1), plus one allow-all key per unenforced direction.
pub fn insertion_bound(policy: &L4Policy, cache: &SelectorCache) -> u64 {
    let mut bound: u64 = 0;
    for direction in crate::mapstate::Direction::ALL {
        let dir = policy.direction(direction);
        if !dir.enforced {
            bound = bound.saturating_add(1);
            continue;
        }
        for (filter, per_selector) in &dir.filters {
            let blocks = filter_blocks(filter);
            let identities = per_selector
                .keys()
                .map(|selector| wide(cache.selection(*selector).len().max(1)))
                .fold(0_u64, u64::saturating_add);
            bound = bound.saturating_add(blocks.saturating_mul(identities));
        }
    }
    bound
}

/// The keys one selected identity of `filter` can get: its port blocks (1
/// for a named port or a protocol-any filter).
pub(crate) fn filter_blocks(filter: &FilterKey) -> u64 {
    match &filter.port {
        _ if filter.proto == proto::ANY => 1,
        PortRef::Named(_) => 1,
        PortRef::Number(port) => wide(port_range_to_masked_ports(*port, filter.end_port).len()),
    }
}

/// Counts output entries as endpoints are compiled; the driver charges each
/// newly computed map state as soon as it exists (a state shared through the
/// driver's cache is charged once), so an oversized output stops at the
/// first endpoint that crosses a limit.
#[derive(Debug)]
pub struct EntryBudget<'a> {
    limits: &'a CompileLimits,
    total: u64,
}

impl EntryBudget<'_> {
    /// Charges `entries` for `endpoint`: refused if that endpoint alone
    /// exceeds [`CompileLimits::max_entries_per_endpoint`] or the running
    /// total exceeds [`CompileLimits::max_total_entries`].
    pub fn charge(&mut self, endpoint: &str, entries: usize) -> Result<(), CompileError> {
        self.limits
            .check(Limit::EntriesPerEndpoint, wide(entries), Some(endpoint))?;
        self.total = self.total.saturating_add(wide(entries));
        self.limits
            .check(Limit::TotalEntries, self.total, Some(endpoint))
    }

    /// Entries charged so far.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// Every limit of one run of porin: loading policies, reading the
/// inventory, compiling. The CLI's flags and the C API's `porin_limit`
/// values set these fields; [`Default`] is the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Limits {
    /// Loading policy files ([`porin_model::limits::LoadLimits`]).
    pub load: porin_model::limits::LoadLimits,
    /// Reading the inventory.
    pub inventory: InventoryLimits,
    /// Compiling.
    pub compile: CompileLimits,
}

/// Bounds on reading an inventory (files, Kubernetes manifests, cluster
/// dumps). The policy loader has its own ([`porin_model::limits::LoadLimits`]);
/// an inventory is typically much larger than the policies (a cluster dump
/// of every endpoint), hence separate, larger defaults. Exceeding one is an
/// [`crate::error::InventoryError::Limit`] naming the file and the limit;
/// nothing of a refused inventory is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryLimits {
    /// Largest inventory file, in bytes, refused before it is read.
    /// Default 64 MiB.
    pub max_file_bytes: u64,
    /// Most files read from an inventory directory (recursively), refused
    /// before any is read. Default 10,000.
    pub max_files: usize,
    /// Most endpoints in the whole inventory, checked after each file.
    /// Default 100,000 (as [`CompileLimits::max_endpoints`]).
    pub max_endpoints: usize,
    /// Most YAML documents in one file. Default 100,000.
    pub max_documents: usize,
    /// Deepest nesting of mappings and sequences. Default 64 (the deepest
    /// real inventory, a Kubernetes pod template, is about 12).
    pub max_depth: usize,
    /// Most YAML nodes (mappings, sequences, scalars) in one file, counted
    /// as the parser reads them, before any value is built. Default
    /// 5,000,000 (about 250,000 endpoints of porin YAML).
    pub max_nodes: usize,
    /// Most events aliases replay in one file (what stops "billion laughs"
    /// alias bombs). Default 1,000,000.
    pub max_alias_expansions: usize,
}

impl Default for InventoryLimits {
    fn default() -> Self {
        InventoryLimits {
            max_file_bytes: 64 * 1024 * 1024,
            max_files: 10_000,
            max_endpoints: 100_000,
            max_documents: 100_000,
            max_depth: 64,
            max_nodes: 5_000_000,
            max_alias_expansions: 1_000_000,
        }
    }
}

impl InventoryLimits {
    /// No limits (trusted, generated input).
    pub fn unlimited() -> Self {
        InventoryLimits {
            max_file_bytes: u64::MAX,
            max_files: usize::MAX,
            max_endpoints: usize::MAX,
            max_documents: usize::MAX,
            max_depth: usize::MAX,
            max_nodes: usize::MAX,
            max_alias_expansions: usize::MAX,
        }
    }

    /// The configured value of one limit.
    pub fn get(&self, limit: InventoryLimit) -> u64 {
        match limit {
            InventoryLimit::FileBytes => self.max_file_bytes,
            InventoryLimit::Files => wide(self.max_files),
            InventoryLimit::Endpoints => wide(self.max_endpoints),
            InventoryLimit::Documents => wide(self.max_documents),
            InventoryLimit::Depth => wide(self.max_depth),
            InventoryLimit::Nodes => wide(self.max_nodes),
            InventoryLimit::AliasExpansions => wide(self.max_alias_expansions),
        }
    }

    /// Sets one limit.
    pub fn set(&mut self, limit: InventoryLimit, value: u64) {
        let narrow = usize::try_from(value).unwrap_or(usize::MAX);
        match limit {
            InventoryLimit::FileBytes => self.max_file_bytes = value,
            InventoryLimit::Files => self.max_files = narrow,
            InventoryLimit::Endpoints => self.max_endpoints = narrow,
            InventoryLimit::Documents => self.max_documents = narrow,
            InventoryLimit::Depth => self.max_depth = narrow,
            InventoryLimit::Nodes => self.max_nodes = narrow,
            InventoryLimit::AliasExpansions => self.max_alias_expansions = narrow,
        }
    }
}

/// From how many policies [`CompileLimits::check_inputs`] counts on
/// rayon's threads.
const PARALLEL_INPUT_CHECK: usize = 4096;

fn wide(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The limit, amount, configured value and endpoint of a limit error.
    fn parts(error: &CompileError) -> (Limit, u64, u64, Option<&str>) {
        match error {
            CompileError::Limit {
                limit,
                given,
                max,
                endpoint,
            } => (*limit, *given, *max, endpoint.as_deref()),
            other => panic!("expected a limit error, got {other:?}"),
        }
    }

    /// The input count sums the items of every endpoint rule (not node
    /// rules), the same on the calling thread and, past
    /// [`PARALLEL_INPUT_CHECK`] policies, on rayon's threads.
    #[test]
    fn check_inputs_counts_the_same_on_one_thread_and_in_parallel() {
        let text = "apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: p}
specs:
- endpointSelector: {}
  ingress: [{fromEntities: [world]}, {fromEntities: [host]}]
  egressDeny: [{toEntities: [world]}]
- nodeSelector: {}
  ingress: [{fromEntities: [world]}]
";
        let outcome = porin_model::load_str("p.yaml", text, &porin_model::LoadLimits::default());
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        let one = PolicyInput::from_outcome(&outcome);
        assert_eq!(one.len(), 1);
        for count in [10, PARALLEL_INPUT_CHECK + 3] {
            let inputs = vec![one[0]; count];
            let given = u64::try_from(3 * count).unwrap();
            let mut limits = CompileLimits::default();
            limits.set(Limit::Rules, given);
            limits.check_inputs(&inputs).unwrap();
            limits.set(Limit::Rules, given - 1);
            let error = limits.check_inputs(&inputs).unwrap_err();
            assert_eq!(parts(&error), (Limit::Rules, given, given - 1, None));
        }
    }

    #[test]
    fn every_limit_round_trips_through_get_and_set() {
        let mut limits = CompileLimits::default();
        for (index, limit) in Limit::ALL.into_iter().enumerate() {
            let value = 1000 + index as u64;
            limits.set(limit, value);
            assert_eq!(limits.get(limit), value, "{limit:?}");
        }
        // Distinct values: each setter wrote its own field.
        let values: BTreeSet<u64> = Limit::ALL.iter().map(|l| limits.get(*l)).collect();
        assert_eq!(values.len(), Limit::ALL.len());
    }

    #[test]
    fn flags_are_distinct_and_named_in_the_description() {
        let flags: BTreeSet<&str> = Limit::ALL.iter().map(|l| l.flag()).collect();
        assert_eq!(flags.len(), Limit::ALL.len());
        for limit in Limit::ALL {
            assert!(
                limit.description().contains(limit.flag()),
                "{limit:?}: {}",
                limit.description()
            );
        }
    }

    #[test]
    fn budget_stops_at_the_endpoint_that_crosses_the_total() {
        let limits = CompileLimits {
            max_entries_per_endpoint: 10,
            max_total_entries: 25,
            ..CompileLimits::default()
        };
        let mut budget = limits.budget();
        budget.charge("a", 10).unwrap();
        budget.charge("b", 10).unwrap();
        let error = budget.charge("c", 6).unwrap_err();
        assert_eq!(parts(&error), (Limit::TotalEntries, 26, 25, Some("c")));
        let message = error.to_string();
        assert!(message.contains("26 needed by `c`"), "{message}");
        assert!(message.contains("--max-total-entries"), "{message}");
    }

    #[test]
    fn one_endpoint_larger_than_the_policy_map_is_refused() {
        let limits = CompileLimits::default();
        let mut budget = limits.budget();
        let error = budget.charge("ns/big", 65_537).unwrap_err();
        assert_eq!(parts(&error).0, Limit::EntriesPerEndpoint);
        assert_eq!(budget.total(), 0, "a refused endpoint is not charged");
        let message = error.to_string();
        assert!(
            message.contains("65537 needed by `ns/big`, the limit is 65536"),
            "{message}"
        );
        assert!(message.contains("--max-entries-per-endpoint"), "{message}");
    }

    #[test]
    fn unlimited_accepts_the_largest_counts() {
        let limits = CompileLimits::unlimited();
        limits.check_endpoints(usize::MAX).unwrap();
        limits.check_lowered(&[], usize::MAX).unwrap();
        limits.check_identities(&[], usize::MAX).unwrap();
        let mut budget = limits.budget();
        budget.charge("x", usize::MAX).unwrap();
        budget.charge("y", usize::MAX).unwrap();
    }

    #[test]
    fn limits_are_inclusive() {
        let limits = CompileLimits {
            max_endpoints: 3,
            max_cidr_prefixes: 2,
            ..CompileLimits::default()
        };
        limits.check_endpoints(3).unwrap();
        assert_eq!(
            parts(&limits.check_endpoints(4).unwrap_err()).0,
            Limit::Endpoints
        );
        limits.check_lowered(&[], 2).unwrap();
        assert_eq!(
            parts(&limits.check_lowered(&[], 3).unwrap_err()).0,
            Limit::CidrPrefixes
        );
    }
}
