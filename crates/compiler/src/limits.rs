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
//! | [`CompileLimits::check_identities`] | after identity allocation | identities, selector evaluation work |
//! | [`CompileLimits::check_l4_policy`] | before an endpoint's map state | key insertions for that endpoint (upper bound) |
//! | [`EntryBudget::charge`] | after each endpoint's map state | entries of one endpoint and of the whole output |
//!
//! Exceeding a limit is an error ([`LimitExceeded`], converted to
//! [`CompileError::Capacity`]) naming the limit, the amount needed, the
//! limit and the CLI flag that raises it: porin never emits a truncated map
//! state (fail closed: a truncated allow list would be wrong, and so would a
//! truncated deny list).

use std::collections::BTreeSet;

use crate::error::CompileError;
use crate::ports::port_range_to_masked_ports;
use crate::resolve::lower::PolicyInput;
use crate::resolve::policy::{L4Policy, SelectorCache};
use crate::resolve::rule::{PolicyRule, PortRef, proto};

/// Which limit was exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`CompileLimits::max_endpoints`].
    Endpoints,
    /// [`CompileLimits::max_rules`].
    Rules,
    /// [`CompileLimits::max_peer_selectors`].
    PeerSelectors,
    /// [`CompileLimits::max_cidr_prefixes`].
    CidrPrefixes,
    /// [`CompileLimits::max_identities`].
    Identities,
    /// [`CompileLimits::max_selector_evaluations`].
    SelectorEvaluations,
    /// [`CompileLimits::max_insertions_per_endpoint`].
    InsertionsPerEndpoint,
    /// [`CompileLimits::max_entries_per_endpoint`].
    EntriesPerEndpoint,
    /// [`CompileLimits::max_total_entries`].
    TotalEntries,
}

impl Limit {
    /// Every limit, in check order.
    pub const ALL: [Limit; 9] = [
        Limit::Endpoints,
        Limit::Rules,
        Limit::PeerSelectors,
        Limit::CidrPrefixes,
        Limit::Identities,
        Limit::SelectorEvaluations,
        Limit::InsertionsPerEndpoint,
        Limit::EntriesPerEndpoint,
        Limit::TotalEntries,
    ];

    /// The CLI flag that sets this limit (`porin compile` / `porin lint`).
    pub const fn flag(self) -> &'static str {
        match self {
            Limit::Endpoints => "--max-endpoints",
            Limit::Rules => "--max-rules",
            Limit::PeerSelectors => "--max-peer-selectors",
            Limit::CidrPrefixes => "--max-cidr-prefixes",
            Limit::Identities => "--max-identities",
            Limit::SelectorEvaluations => "--max-selector-evaluations",
            Limit::InsertionsPerEndpoint => "--max-insertions-per-endpoint",
            Limit::EntriesPerEndpoint => "--max-entries-per-endpoint",
            Limit::TotalEntries => "--max-total-entries",
        }
    }

    /// What is counted, with the flag that raises the limit (a static text,
    /// so it fits [`CompileError::Capacity`]).
    pub const fn description(self) -> &'static str {
        match self {
            Limit::Endpoints => "inventory endpoints (raise with `--max-endpoints`)",
            Limit::Rules => "policy rules after lowering (raise with `--max-rules`)",
            Limit::PeerSelectors => {
                "peer selectors in policy rules (raise with `--max-peer-selectors`)"
            }
            Limit::CidrPrefixes => {
                "CIDR prefixes named by policies (raise with `--max-cidr-prefixes`)"
            }
            Limit::Identities => "security identities (raise with `--max-identities`)",
            Limit::SelectorEvaluations => {
                "selector evaluations, distinct selectors × identities (raise with `--max-selector-evaluations`)"
            }
            Limit::InsertionsPerEndpoint => {
                "policy-map key insertions for one endpoint, upper bound (raise with `--max-insertions-per-endpoint`)"
            }
            Limit::EntriesPerEndpoint => {
                "policy-map entries of one endpoint (raise with `--max-entries-per-endpoint`, at most the policy map size)"
            }
            Limit::TotalEntries => {
                "policy-map entries of all distinct map states together (raise with `--max-total-entries`)"
            }
        }
    }
}

/// A limit of [`CompileLimits`] was exceeded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} exceeded: `{given}` needed{}, the limit is `{limit}`", limit_kind.description(), context.as_ref().map(|c| format!(" by {c}")).unwrap_or_default())]
pub struct LimitExceeded {
    /// Which limit.
    pub limit_kind: Limit,
    /// How much was needed (at least this much; for
    /// [`Limit::InsertionsPerEndpoint`] an upper bound of the work).
    pub given: u64,
    /// The configured limit.
    pub limit: u64,
    /// What needed it (an endpoint name), when one thing did.
    pub context: Option<String>,
}

impl From<LimitExceeded> for CompileError {
    fn from(error: LimitExceeded) -> Self {
        CompileError::Capacity {
            what: error.limit_kind.description(),
            given: usize::try_from(error.given).unwrap_or(usize::MAX),
            limit: usize::try_from(error.limit).unwrap_or(usize::MAX),
        }
    }
}

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
    /// Distinct selectors × identities: the work of computing every
    /// selector's selection. Default 500,000,000 (a few seconds).
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
    /// Entries of all distinct map states together (endpoints with the
    /// same identity and named ports share one state, which is charged
    /// once). Default 5,000,000 (well under 1 GiB).
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
            max_total_entries: 5_000_000,
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

    fn check(&self, limit: Limit, given: u64, context: Option<&str>) -> Result<(), LimitExceeded> {
        let max = self.get(limit);
        if given > max {
            return Err(LimitExceeded {
                limit_kind: limit,
                given,
                limit: max,
                context: context.map(str::to_owned),
            });
        }
        Ok(())
    }

    /// Before lowering: the inventory's endpoint count.
    pub fn check_endpoints(&self, endpoints: usize) -> Result<(), LimitExceeded> {
        self.check(Limit::Endpoints, wide(endpoints), None)
    }

    /// Before lowering: the rules lowering will produce at least (one per
    /// `ingress`/`ingressDeny`/`egress`/`egressDeny` item of every CNP and
    /// CCNP rule with an `endpointSelector`; KubernetesNetworkPolicies are
    /// not counted here, [`CompileLimits::check_lowered`] counts them).
    /// Lowering costs a few KiB per rule, so a policy set far over the
    /// limit is refused before it is lowered.
    pub fn check_inputs(&self, policies: &[PolicyInput<'_>]) -> Result<(), LimitExceeded> {
        let mut rules: u64 = 0;
        for input in policies {
            for (_, rule) in input.policy.cilium_rules() {
                if rule.endpoint_selector.is_none() {
                    continue; // a node (host) rule: lowering skips it
                }
                let items = rule.ingress.as_ref().map_or(0, Vec::len)
                    + rule.ingress_deny.as_ref().map_or(0, Vec::len)
                    + rule.egress.as_ref().map_or(0, Vec::len)
                    + rule.egress_deny.as_ref().map_or(0, Vec::len);
                rules = rules.saturating_add(wide(items));
            }
        }
        self.check(Limit::Rules, rules, None)
    }

    /// After lowering (which is linear in the loaded input): rules, peer
    /// selectors and CIDR prefixes, before identities are allocated for the
    /// prefixes and selectors are evaluated.
    pub fn check_lowered(
        &self,
        rules: &[PolicyRule],
        cidr_prefixes: usize,
    ) -> Result<(), LimitExceeded> {
        self.check(Limit::Rules, wide(rules.len()), None)?;
        let peers = rules
            .iter()
            .map(|rule| rule.peers.as_ref().map_or(0, Vec::len))
            .fold(0_u64, |sum, n| sum.saturating_add(wide(n)));
        self.check(Limit::PeerSelectors, peers, None)?;
        self.check(Limit::CidrPrefixes, wide(cidr_prefixes), None)
    }

    /// After identity allocation: the identity count, and the work of
    /// evaluating every distinct selector (subjects and peers) against every
    /// identity, before the resolver does it.
    pub fn check_identities(
        &self,
        rules: &[PolicyRule],
        identities: usize,
    ) -> Result<(), LimitExceeded> {
        self.check(Limit::Identities, wide(identities), None)?;
        let mut distinct = BTreeSet::new();
        for rule in rules {
            distinct.insert(&rule.subject);
            for peer in rule.peers.iter().flatten() {
                distinct.insert(peer);
            }
        }
        let work = wide(distinct.len()).saturating_mul(wide(identities));
        self.check(Limit::SelectorEvaluations, work, None)
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
    ) -> Result<(), LimitExceeded> {
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
            let blocks = match &filter.port {
                _ if filter.proto == proto::ANY => 1,
                PortRef::Named(_) => 1,
                PortRef::Number(port) => {
                    wide(port_range_to_masked_ports(*port, filter.end_port).len())
                }
            };
            let identities = per_selector
                .keys()
                .map(|selector| wide(cache.selection(*selector).len().max(1)))
                .fold(0_u64, u64::saturating_add);
            bound = bound.saturating_add(blocks.saturating_mul(identities));
        }
    }
    bound
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
    pub fn charge(&mut self, endpoint: &str, entries: usize) -> Result<(), LimitExceeded> {
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

/// Which inventory limit was exceeded ([`InventoryLimits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InventoryLimit {
    /// [`InventoryLimits::max_file_bytes`].
    FileBytes,
    /// [`InventoryLimits::max_files`].
    Files,
    /// [`InventoryLimits::max_endpoints`].
    Endpoints,
    /// [`InventoryLimits::max_documents`].
    Documents,
    /// [`InventoryLimits::max_depth`].
    Depth,
    /// [`InventoryLimits::max_nodes`].
    Nodes,
    /// [`InventoryLimits::max_alias_expansions`].
    AliasExpansions,
}

impl InventoryLimit {
    /// Every inventory limit.
    pub const ALL: [InventoryLimit; 7] = [
        InventoryLimit::FileBytes,
        InventoryLimit::Files,
        InventoryLimit::Endpoints,
        InventoryLimit::Documents,
        InventoryLimit::Depth,
        InventoryLimit::Nodes,
        InventoryLimit::AliasExpansions,
    ];

    /// The CLI flag that sets this limit. The endpoint limit is the
    /// compiler's ([`Limit::Endpoints`]): one number bounds both the
    /// inventory read and the compilation.
    pub const fn flag(self) -> &'static str {
        match self {
            InventoryLimit::FileBytes => "--max-inventory-file-bytes",
            InventoryLimit::Files => "--max-inventory-files",
            InventoryLimit::Endpoints => Limit::Endpoints.flag(),
            InventoryLimit::Documents => "--max-inventory-documents",
            InventoryLimit::Depth => "--max-inventory-depth",
            InventoryLimit::Nodes => "--max-inventory-nodes",
            InventoryLimit::AliasExpansions => "--max-inventory-alias-expansions",
        }
    }

    /// What is counted, with the flag that raises the limit.
    pub const fn description(self) -> &'static str {
        match self {
            InventoryLimit::FileBytes => {
                "inventory file size in bytes (raise with `--max-inventory-file-bytes`)"
            }
            InventoryLimit::Files => {
                "inventory files under the given directory (raise with `--max-inventory-files`)"
            }
            InventoryLimit::Endpoints => "inventory endpoints (raise with `--max-endpoints`)",
            InventoryLimit::Documents => {
                "YAML documents in one inventory file (raise with `--max-inventory-documents`)"
            }
            InventoryLimit::Depth => {
                "YAML nesting depth of an inventory file (raise with `--max-inventory-depth`)"
            }
            InventoryLimit::Nodes => {
                "YAML nodes in one inventory file (raise with `--max-inventory-nodes`)"
            }
            InventoryLimit::AliasExpansions => {
                "YAML nodes replayed by aliases in one inventory file (raise with `--max-inventory-alias-expansions`)"
            }
        }
    }
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

fn wide(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(error.limit_kind, Limit::TotalEntries);
        assert_eq!((error.given, error.limit), (26, 25));
        assert_eq!(error.context.as_deref(), Some("c"));
        let message = error.to_string();
        assert!(message.contains("`26` needed by c"), "{message}");
        assert!(message.contains("--max-total-entries"), "{message}");
    }

    #[test]
    fn one_endpoint_larger_than_the_policy_map_is_refused() {
        let limits = CompileLimits::default();
        let mut budget = limits.budget();
        let error = budget.charge("ns/big", 65_537).unwrap_err();
        assert_eq!(error.limit_kind, Limit::EntriesPerEndpoint);
        assert_eq!(budget.total(), 0, "a refused endpoint is not charged");
        let compile_error = CompileError::from(error);
        let message = compile_error.to_string();
        assert!(
            message.contains("65537 needed, the limit is 65536"),
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
            limits.check_endpoints(4).unwrap_err().limit_kind,
            Limit::Endpoints
        );
        limits.check_lowered(&[], 2).unwrap();
        assert_eq!(
            limits.check_lowered(&[], 3).unwrap_err().limit_kind,
            Limit::CidrPrefixes
        );
    }
}
