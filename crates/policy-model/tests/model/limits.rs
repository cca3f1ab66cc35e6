//! Hostile inputs end in a clear `PM002` (or `PM001`) error within seconds
//! and bounded memory; every bound is a `LoadLimits` field.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on I/O errors")]

use std::time::{Duration, Instant};

use porin_model::{LoadLimits, LoadOutcome, load_path, load_str};

/// Generous for a debug build on a shared 2-core machine; each case takes
/// milliseconds when it works and hours (or the machine's memory) when not.
const DEADLINE: Duration = Duration::from_secs(10);

fn timed(load: impl FnOnce() -> LoadOutcome) -> LoadOutcome {
    let start = Instant::now();
    let outcome = load();
    let elapsed = start.elapsed();
    assert!(elapsed < DEADLINE, "took {elapsed:?}");
    outcome
}

fn assert_limit(outcome: &LoadOutcome, needle: &str) {
    let limit = outcome
        .diagnostics
        .iter()
        .find(|d| d.code == "PM002")
        .unwrap_or_else(|| panic!("expected a PM002 error, got {:#?}", outcome.diagnostics));
    assert!(limit.is_error());
    assert!(
        limit.message.contains(needle),
        "`{}` lacks `{needle}`",
        limit.message
    );
    assert!(outcome.documents.is_empty());
}

/// "Billion laughs": nine levels of nine aliases each, 9^9 nodes if expanded.
#[test]
fn alias_bomb_stops_at_the_node_budget() {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..=9 {
        let previous = format!("*a{}", level - 1);
        let items = vec![previous; 9].join(", ");
        text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    let outcome = timed(|| load_str("bomb.yaml", &text, &LoadLimits::default()));
    assert_limit(&outcome, "LoadLimits::max_nodes");
}

/// One large anchored string copied by many aliases: few nodes, many bytes.
#[test]
fn alias_of_a_large_string_stops_at_the_byte_budget() {
    let mut text = format!("big: &big \"{}\"\ncopies:\n", "x".repeat(1 << 20));
    for _ in 0..100 {
        text.push_str("- *big\n");
    }
    let outcome = timed(|| load_str("strings.yaml", &text, &LoadLimits::default()));
    assert_limit(&outcome, "LoadLimits::max_scalar_bytes");
}

/// Aliases can grow depth without growing size much; depth is checked too.
#[test]
fn alias_cannot_nest_deeper_than_the_limit() {
    let deep = |inner: &str| format!("{}{inner}{}", "[".repeat(40), "]".repeat(40));
    let text = format!("a: &a {}\nb: {}\n", deep("x"), deep("*a"));
    let outcome = timed(|| load_str("deep-alias.yaml", &text, &LoadLimits::default()));
    assert_limit(&outcome, "LoadLimits::max_depth");
}

#[test]
fn fifty_megabyte_file_is_refused_before_parsing() {
    let path = std::env::temp_dir().join(format!("porin-50mb-{}.yaml", std::process::id()));
    let line = "# padding padding padding padding padding padding padding padding\n";
    let text = line.repeat(50 * 1024 * 1024 / line.len() + 1);
    std::fs::write(&path, &text).unwrap();
    let outcome = timed(|| load_path(&path, &LoadLimits::default()).unwrap());
    std::fs::remove_file(&path).unwrap();
    assert_limit(&outcome, "LoadLimits::max_file_bytes");
    let outcome = timed(|| load_str("in-memory.yaml", &text, &LoadLimits::default()));
    assert_limit(&outcome, "LoadLimits::max_file_bytes");
}

#[test]
fn ten_thousand_deep_nesting_is_refused() {
    let cases = [
        (
            "flow sequences",
            format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
        ),
        (
            "flow mappings",
            format!("{}x{}", "{a: ".repeat(10_000), "}".repeat(10_000)),
        ),
        ("block sequences", format!("{}x\n", "- ".repeat(10_000))),
        // 10,000 levels of block mappings need 50 MB of indentation (refused
        // by size, above); 1,000 levels are 500 KB and reach the depth limit.
        (
            "block mappings",
            (0..1_000)
                .map(|depth| format!("{}k:\n", " ".repeat(depth)))
                .collect::<String>(),
        ),
    ];
    for (what, text) in cases {
        let outcome = timed(|| load_str("deep.yaml", &text, &LoadLimits::default()));
        let error = outcome
            .diagnostics
            .iter()
            .find(|d| d.is_error())
            .unwrap_or_else(|| panic!("{what}: no error"));
        assert!(
            error.code == "PM002" && error.message.contains("nesting"),
            "{what}: expected the depth limit, got {error:#?}"
        );
    }
}

#[test]
fn too_many_documents_are_refused() {
    let text = "---\na: 1\n".repeat(10_001);
    let outcome = timed(|| load_str("many.yaml", &text, &LoadLimits::default()));
    assert_limit(&outcome, "LoadLimits::max_documents");
}

#[test]
fn limits_are_configurable() {
    let text = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: a, namespace: b}\n\
                spec: {endpointSelector: {}, ingress: [{fromEntities: [world]}]}\n";
    assert!(!load_str("ok.yaml", text, &LoadLimits::default()).has_errors());
    let tight = LoadLimits {
        max_nodes: 10,
        ..LoadLimits::default()
    };
    assert_limit(&load_str("ok.yaml", text, &tight), "LoadLimits::max_nodes");
    let shallow = LoadLimits {
        max_depth: 3,
        ..LoadLimits::default()
    };
    assert_limit(
        &load_str("ok.yaml", text, &shallow),
        "LoadLimits::max_depth",
    );
    let small = LoadLimits {
        max_file_bytes: 16,
        ..LoadLimits::default()
    };
    assert_limit(
        &load_str("ok.yaml", text, &small),
        "LoadLimits::max_file_bytes",
    );
}

#[test]
fn findings_per_file_are_capped() {
    let mut text = String::from(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: a, namespace: b}\nspec:\n  endpointSelector: {}\n  ingress: [{fromEntities: [world]}]\n",
    );
    for index in 0..1_000 {
        text.push_str(&format!("  unknown{index}: 1\n"));
    }
    let outcome = timed(|| load_str("noisy.yaml", &text, &LoadLimits::default()));
    assert_eq!(outcome.diagnostics.len(), 201);
    assert_eq!(outcome.omitted, 800);
    assert_limit(&outcome, "800 more findings");
}

#[test]
fn total_bytes_of_many_files_are_bounded() {
    let dir = std::env::temp_dir().join(format!("porin-total-bytes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: default}\nspec:\n  endpointSelector: {}\n";
    for i in 0..3 {
        std::fs::write(dir.join(format!("p{i}.yaml")), text).unwrap();
    }
    let size = u64::try_from(text.len()).unwrap();
    let limits = LoadLimits {
        max_total_bytes: 2 * size + 1,
        ..LoadLimits::default()
    };
    let error = porin_model::loader::load_path(&dir, &limits).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("p2.yaml"), "{message}");
    assert!(message.contains("--max-total-bytes"), "{message}");
    let limits = LoadLimits {
        max_total_bytes: 3 * size,
        ..LoadLimits::default()
    };
    let outcome = porin_model::loader::load_path(&dir, &limits).unwrap();
    assert_eq!(outcome.sources.total_bytes(), 3 * size, "all three read");
    let _ = std::fs::remove_dir_all(&dir);
}
