//! Oversized compilations are refused within seconds and under 1 GiB of
//! peak memory, before the work they would need is done.
//!
//! Peak memory is the process's `VmHWM` (`/proc/self/status`); it is only
//! meaningful if nothing else runs in the process, so this file holds
//! exactly one `#[test]` (one process per test file) running the scenarios
//! in turn.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use porin_compiler::compile::compile_with_limits;
use porin_compiler::error::CompileError;
use porin_compiler::inventory::{Endpoint, Inventory, SourceLocation};
use porin_compiler::limits::{CompileLimits, Limit};
use porin_compiler::resolve::lower::PolicyInput;
use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_str};

/// 1 GiB in kB.
const PEAK_LIMIT_KB: u64 = 1024 * 1024;
/// Generous for the unoptimised test build on a loaded machine.
const TIME_LIMIT: Duration = if cfg!(debug_assertions) {
    Duration::from_secs(120)
} else {
    Duration::from_secs(10)
};

fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn endpoint(name: String, labels: BTreeMap<String, String>) -> Endpoint {
    Endpoint {
        name,
        namespace: Some("default".to_owned()),
        labels,
        ips: Vec::new(),
        service_account: None,
        ports: Vec::new(),
        identity: None,
        identity_labels: None,
        location: SourceLocation::default(),
    }
}

/// `endpoints` endpoints, each with its own label set (so its own identity).
fn inventory(endpoints: usize) -> Inventory {
    let mut inventory = Inventory::new();
    inventory
        .namespaces
        .insert("default".to_owned(), BTreeMap::new());
    for i in 0..endpoints {
        let mut labels = BTreeMap::new();
        labels.insert("app".to_owned(), format!("app-{i}"));
        inventory
            .endpoints
            .push(endpoint(format!("pod-{i}"), labels));
    }
    inventory.finish().unwrap();
    inventory
}

/// `files` files of `per_file` single-rule CNPs; each file is within the
/// loader's limits, together they exceed the compiler's rule limit.
fn many_rules(files: usize, per_file: usize) -> Vec<LoadOutcome> {
    (0..files)
        .map(|f| {
            let mut text = String::new();
            for p in 0..per_file {
                let _ = write!(
                    text,
                    "---\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: p{p}, namespace: default}}\nspec:\n  endpointSelector: {{matchLabels: {{app: app-{}}}}}\n  ingress:\n  - fromEntities: [world]\n  - fromEntities: [cluster]\n  - fromEntities: [host]\n  - fromEntities: [all]\n  - fromEntities: [health]\n  - fromEntities: [remote-node]\n  - fromEntities: [kube-apiserver]\n  - fromEntities: [init]\n  - fromEntities: [ingress]\n  - fromEntities: [unmanaged]\n",
                    p % 10
                );
            }
            load_str(&format!("rules-{f}.yaml"), &text, &LoadLimits::default())
        })
        .collect()
}

fn refused(what: &str, limit: Limit, run: impl FnOnce() -> Result<(), CompileError>) {
    let start = Instant::now();
    let result = run();
    let elapsed = start.elapsed();
    assert!(elapsed < TIME_LIMIT, "{what}: took {elapsed:?}");
    match result {
        Err(CompileError::Limit { limit: refused, .. }) if refused == limit => {
            println!("{what}: refused in {elapsed:?}");
        }
        other => panic!("{what}: expected {limit:?} to refuse, got {other:?}"),
    }
}

#[test]
fn oversized_compilations_are_refused_quickly_in_bounded_memory() {
    let Some(before) = peak_rss_kb() else {
        println!("SKIPPED: no /proc/self/status VmHWM on this system");
        return;
    };

    // 110,000 rules in 11 files of 1,000 ten-rule policies: every file
    // passes the loader, the compiler refuses the total after lowering.
    refused("110,000 rules over 11 files", Limit::Rules, || {
        let outcomes = many_rules(11, 1_000);
        for outcome in &outcomes {
            assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics.first());
        }
        let inputs: Vec<PolicyInput<'_>> = outcomes
            .iter()
            .flat_map(PolicyInput::from_outcome)
            .collect();
        compile_with_limits(&inputs, &inventory(10), &CompileLimits::default()).map(|_| ())
    });

    // An expansion bomb: 2,000 endpoints with distinct identities, each
    // allowing every other on 1-65535 over TCP, UDP and SCTP: about 2,000
    // identities × 16 port blocks × 3 protocols = 96,000 keys per endpoint,
    // 192 million in all.
    let bomb = |limits: CompileLimits| {
        let policy = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: bomb, namespace: default}\nspec:\n  endpointSelector: {}\n  ingress:\n  - fromEndpoints: [{}]\n    toPorts: [{ports: [{port: \"1\", endPort: 65535, protocol: ANY}]}]\n";
        let outcome = load_str("bomb.yaml", policy, &LoadLimits::default());
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        let inputs = PolicyInput::from_outcome(&outcome);
        compile_with_limits(&inputs, &inventory(2_000), &limits).map(|_| ())
    };
    // With the defaults, the first map state (96,001 entries) does not fit
    // the largest policy map: refused after one endpoint, not 2,000.
    refused(
        "all-to-all on every port, default limits",
        Limit::EntriesPerEndpoint,
        || bomb(CompileLimits::default()),
    );
    // With a tighter work bound, refused before any map state is built.
    refused(
        "all-to-all on every port, insertion bound 50,000",
        Limit::InsertionsPerEndpoint,
        || {
            bomb(CompileLimits {
                max_insertions_per_endpoint: 50_000,
                ..CompileLimits::default()
            })
        },
    );

    let after = peak_rss_kb().unwrap();
    println!("peak RSS: {before} kB before, {after} kB after");
    assert!(
        after < PEAK_LIMIT_KB,
        "peak RSS {after} kB exceeds {PEAK_LIMIT_KB} kB"
    );
}
