//! Hostile inputs are refused within seconds and under 1 GiB of peak memory.
//!
//! Peak memory is the process's `VmHWM` (high-water mark of resident memory,
//! `/proc/self/status`). That is only meaningful if nothing else runs in the
//! process, so this file holds exactly one `#[test]` (cargo builds one
//! process per test file) that runs the scenarios one after the other; the
//! high-water mark after all of them bounds each of them.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_str};

/// 1 GiB, in the kB unit of `/proc/self/status`.
const PEAK_LIMIT_KB: u64 = 1024 * 1024;
/// The slowest refusal (the node budget, about 250,000 rules into the
/// file) parses a quarter of 33 MB: it took 31 s in the unoptimised test
/// build on a loaded 2-core machine (load average 11), hence the generous
/// bound there; optimised builds are many times faster.
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

fn refused(what: &str, text: &str, limits: &LoadLimits, needle: &str) {
    let start = Instant::now();
    let outcome: LoadOutcome = load_str("hostile.yaml", text, limits);
    let elapsed = start.elapsed();
    assert!(
        elapsed < TIME_LIMIT,
        "{what}: took {elapsed:?} to refuse (limit {TIME_LIMIT:?})"
    );
    let limit_errors: Vec<String> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.code == "PM002")
        .map(|d| d.message.clone())
        .collect();
    assert!(
        limit_errors.iter().any(|m| m.contains(needle)),
        "{what}: expected a PM002 mentioning `{needle}`, got {:#?}",
        outcome.diagnostics
    );
    assert!(
        outcome.documents.is_empty(),
        "{what}: a refused file must yield no policy, got {} documents",
        outcome.documents.len()
    );
    println!("{what}: refused in {elapsed:?}: {}", limit_errors[0]);
}

/// One CNP whose ingress list has `rules` items.
fn policy_with_rules(rules: usize) -> String {
    let mut text = String::with_capacity(rules * 24 + 200);
    text.push_str(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: huge, namespace: default}\nspec:\n  endpointSelector: {}\n  ingress:\n",
    );
    for i in 0..rules {
        let _ = writeln!(
            text,
            "  - fromCIDR: [\"10.{}.{}.0/24\"]",
            (i >> 8) & 255,
            i & 255
        );
    }
    text
}

/// Nine levels of ten aliases each: 10^9 nodes once expanded.
fn alias_bomb() -> String {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..9 {
        let prev = format!("*a{}", level - 1);
        let items = [prev.as_str(); 10].join(", ");
        let _ = writeln!(text, "a{level}: &a{level} [{items}]");
    }
    text.push_str("spec: *a8\n");
    text
}

#[test]
fn hostile_inputs_are_refused_quickly_in_bounded_memory() {
    let Some(before) = peak_rss_kb() else {
        println!("SKIPPED: no /proc/self/status VmHWM on this system");
        return;
    };

    // 1,000,000 rules (about 30 MB of text): refused by size before parsing.
    let million = policy_with_rules(1_000_000);
    refused(
        "1,000,000-rule policy, default limits",
        &million,
        &LoadLimits::default(),
        "max_file_bytes",
    );

    // The same text with the size limit lifted: the node budget stops the
    // parser (each rule is several nodes), long before a model is built.
    let no_size_limit = LoadLimits {
        max_file_bytes: u64::MAX,
        ..LoadLimits::default()
    };
    refused(
        "1,000,000-rule policy, size limit lifted",
        &million,
        &no_size_limit,
        "node",
    );
    drop(million);

    refused(
        "alias bomb (10^9 nodes)",
        &alias_bomb(),
        &LoadLimits::default(),
        "node",
    );

    let after = peak_rss_kb().unwrap();
    println!("peak RSS: {before} kB before, {after} kB after");
    assert!(
        after < PEAK_LIMIT_KB,
        "peak RSS {after} kB exceeds {PEAK_LIMIT_KB} kB"
    );
}
