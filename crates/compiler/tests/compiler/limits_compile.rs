//! Every `CompileLimits` limit refuses with a clear `CompileError::Limit`
//! naming the limit, the amount, and the flag that raises it; the same input
//! compiles under the defaults, so each refusal is the limit's doing.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use porin_compiler::compile::{Compiled, compile_with_limits, synthetic};
use porin_compiler::error::CompileError;
use porin_compiler::limits::{CompileLimits, Limit};
use porin_compiler::resolve::lower::PolicyInput;

fn compile_synthetic(limits: &CompileLimits) -> Result<Compiled, CompileError> {
    let cluster = synthetic::cluster(20, 200);
    let outcome = cluster.load();
    assert!(!outcome.has_errors());
    let inputs = PolicyInput::from_outcome(&outcome);
    compile_with_limits(&inputs, &cluster.inventory, limits)
}

/// Compiles with only `limit` set to `value` and checks the refusal.
fn refused_by(limit: Limit, value: u64) -> String {
    let mut limits = CompileLimits::default();
    limits.set(limit, value);
    let Err(error) = compile_synthetic(&limits) else {
        panic!("{limit:?} = {value}: compiled")
    };
    let message = error.to_string();
    match &error {
        CompileError::Limit {
            limit: refused,
            given,
            max,
            ..
        } => {
            assert_eq!(*refused, limit, "{message}");
            assert_eq!(*max, value, "{message}");
            assert!(*given > value, "{message}");
        }
        other => panic!("{limit:?}: expected a limit error, got {other:?}"),
    }
    assert!(message.contains(limit.flag()), "{message}");
    message
}

#[test]
fn the_synthetic_cluster_fits_the_defaults() {
    let compiled = compile_synthetic(&CompileLimits::default()).unwrap();
    assert_eq!(compiled.endpoints.len(), 200);
}

#[test]
fn too_many_endpoints() {
    let message = refused_by(Limit::Endpoints, 199);
    assert!(message.contains("200 needed"), "{message}");
}

#[test]
fn too_many_rules() {
    refused_by(Limit::Rules, 10);
}

#[test]
fn too_many_peer_selectors() {
    refused_by(Limit::PeerSelectors, 10);
}

#[test]
fn too_many_cidr_prefixes() {
    refused_by(Limit::CidrPrefixes, 1);
}

#[test]
fn too_many_identities() {
    refused_by(Limit::Identities, 5);
}

#[test]
fn too_much_selector_evaluation() {
    refused_by(Limit::SelectorEvaluations, 100);
}

#[test]
fn too_many_insertions_for_one_endpoint() {
    refused_by(Limit::InsertionsPerEndpoint, 3);
}

#[test]
fn too_many_entries_for_one_endpoint() {
    refused_by(Limit::EntriesPerEndpoint, 2);
}

#[test]
fn too_many_entries_in_total() {
    let compiled = compile_synthetic(&CompileLimits::default()).unwrap();
    let total: usize = compiled.endpoints.iter().map(|e| e.state.len()).sum();
    let first = compiled.endpoints[0].state.len();
    // Room for the first endpoint, not for all of them.
    let message = refused_by(Limit::TotalEntries, u64::try_from(first).unwrap());
    assert!(
        total > first,
        "the cluster has more than one endpoint's entries"
    );
    assert!(message.contains("--max-total-entries"), "{message}");
}

#[test]
fn limits_exactly_at_the_need_accept() {
    let compiled = compile_synthetic(&CompileLimits::default()).unwrap();
    let total: usize = compiled.endpoints.iter().map(|e| e.state.len()).sum();
    let largest = compiled
        .endpoints
        .iter()
        .map(|e| e.state.len())
        .max()
        .unwrap();
    let limits = CompileLimits {
        max_endpoints: 200,
        max_total_entries: total,
        max_entries_per_endpoint: largest,
        ..CompileLimits::default()
    };
    let again = compile_synthetic(&limits).unwrap();
    assert_eq!(again.to_json(), compiled.to_json());
}

/// The incremental compiler (the C API's sessions) enforces the same
/// limits as the batch compiler, with the same error; a refused compile
/// leaves its cache usable, and restoring the limits compiles the same
/// result as the batch compiler. (A map state reused from the cache is
/// charged against the entry limits but not the insertion bound: reusing
/// it inserts nothing.)
#[test]
fn the_incremental_compiler_refuses_like_the_batch_compiler() {
    use porin_compiler::session::IncrementalCompiler;
    let cluster = synthetic::cluster(20, 200);
    let outcome = cluster.load();
    let inputs = PolicyInput::from_outcome(&outcome);
    let batch =
        compile_with_limits(&inputs, &cluster.inventory, &CompileLimits::default()).unwrap();
    let first = u64::try_from(batch.endpoints[0].state.len()).unwrap();
    let mut warm = IncrementalCompiler::new();
    warm.compile(&inputs, &cluster.inventory).unwrap();
    for (limit, value) in [
        (Limit::Endpoints, 199),
        (Limit::Rules, 10),
        (Limit::PeerSelectors, 10),
        (Limit::CidrPrefixes, 1),
        (Limit::Identities, 5),
        (Limit::SelectorEvaluations, 100),
        (Limit::InsertionsPerEndpoint, 3),
        (Limit::EntriesPerEndpoint, 2),
        (Limit::TotalEntries, first),
    ] {
        let mut limits = CompileLimits::default();
        limits.set(limit, value);
        let expected = match compile_with_limits(&inputs, &cluster.inventory, &limits) {
            Ok(_) => panic!("{limit:?}: batch compiled"),
            Err(error) => error.to_string(),
        };
        let mut cold = IncrementalCompiler::new();
        cold.set_limits(limits.clone());
        assert_eq!(cold.limits().get(limit), value);
        match cold.compile(&inputs, &cluster.inventory) {
            Ok((_, stats)) => panic!("{limit:?}: incremental compiled ({stats:?})"),
            Err(error) => assert_eq!(error.to_string(), expected, "{limit:?}"),
        }
        if limit != Limit::InsertionsPerEndpoint {
            warm.set_limits(limits);
            match warm.compile(&inputs, &cluster.inventory) {
                Ok((_, stats)) => panic!("{limit:?}: warm incremental compiled ({stats:?})"),
                Err(error) => assert_eq!(error.to_string(), expected, "{limit:?}"),
            }
        }
    }
    warm.set_limits(CompileLimits::default());
    let (again, stats) = warm.compile(&inputs, &cluster.inventory).unwrap();
    assert_eq!(
        stats.map_states_computed, 0,
        "the cache survived the refusals"
    );
    assert_eq!(again.to_json(), batch.to_json());
}

/// A unit whose insertion bound is over `max_entries_per_endpoint` while
/// its entries fit is distilled through the capacity census
/// (`capacity::distill_capped`); that state must still get the
/// ClusterNetworkPolicy tiers over it. Before, it kept the NetworkPolicy
/// tier's state alone: an Admin Deny from slytherin was missing from
/// harry's map while a NetworkPolicy allowed slytherin on eight ports (five
/// peers selecting the same pods make the bound five times the entries). Found
/// by review of the live session's tier fix.
#[test]
fn a_unit_counted_by_the_census_keeps_its_tiers() {
    let mut inventory = porin_compiler::inventory::Inventory::new();
    porin_compiler::inventory::yaml::add_inventory_text(
        &mut inventory,
        "inventory.yaml",
        "kind: Inventory\nciliumVersion: \"1.20\"\nenableK8sClusterNetworkPolicy: true\nnamespaces:\n  gryffindor: {house: gryffindor}\n  slytherin: {house: slytherin}\nendpoints:\n  - {name: harry, namespace: gryffindor, labels: {app: harry}}\n  - {name: draco, namespace: slytherin, labels: {app: draco}}\n",
    )
    .unwrap();
    inventory.finish().unwrap();
    let text = "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {name: deny-slytherin}\nspec:\n  tier: Admin\n  priority: 10\n  subject:\n    namespaces: {matchLabels: {house: gryffindor}}\n  ingress:\n    - name: deny-from-slytherin\n      action: Deny\n      from: [{namespaces: {matchLabels: {house: slytherin}}}]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: allow-slytherin, namespace: gryffindor}\nspec:\n  podSelector: {}\n  policyTypes: [Ingress]\n  ingress:\n    - from:\n        - namespaceSelector: {matchLabels: {house: slytherin}}\n        - podSelector: {}\n          namespaceSelector: {matchLabels: {house: slytherin}}\n        - namespaceSelector: {}\n          podSelector: {matchLabels: {app: draco}}\n        - namespaceSelector: {matchExpressions: [{key: house, operator: Exists}]}\n          podSelector: {matchLabels: {app: draco}}\n        - namespaceSelector: {matchExpressions: [{key: house, operator: In, values: [slytherin]}]}\n      ports: [{port: 80}, {port: 81}, {port: 82}, {port: 83}, {port: 84}, {port: 85}, {port: 86}, {port: 87}]\n";
    let mut outcome = porin_model::loader::load_str(
        "tiers.yaml",
        text,
        &porin_model::limits::LoadLimits::default(),
    );
    outcome.apply_target(&inventory.target.choice().target());
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    let inputs = PolicyInput::from_outcome(&outcome);
    let harry = |compiled: &Compiled| {
        let draco = compiled
            .endpoints
            .iter()
            .find(|e| e.name == "draco")
            .unwrap()
            .identity;
        let state = &compiled
            .endpoints
            .iter()
            .find(|e| e.name == "harry")
            .unwrap()
            .state;
        let denied = state.iter().any(|(key, entry)| {
            key.identity().get() == draco
                && key.port() == 0
                && entry.datapath_eq(&porin_compiler::mapstate::Entry::deny())
        });
        (denied, state.len())
    };
    let (denied, entries) =
        harry(&compile_with_limits(&inputs, &inventory, &CompileLimits::default()).unwrap());
    assert!(denied, "the Admin Deny under the default limits");
    // A capacity between the entries and the bound: the census path.
    let mut limits = CompileLimits::default();
    limits.set(
        Limit::EntriesPerEndpoint,
        u64::try_from(entries).unwrap() + 1,
    );
    let compiled = compile_with_limits(&inputs, &inventory, &limits).unwrap();
    assert_eq!(
        harry(&compiled),
        (true, entries),
        "the census path keeps the tiers"
    );
}
