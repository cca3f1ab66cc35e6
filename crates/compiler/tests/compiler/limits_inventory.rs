//! Every `InventoryLimits` limit refuses with an `InventoryError::Limit`
//! naming the file, the limit, the amount and the flag that raises it;
//! raising the limit lets the same input load, so each refusal is the
//! limit's doing.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::fmt::Write as _;
use std::path::PathBuf;

use porin_compiler::error::InventoryError;
use porin_compiler::inventory::Inventory;
use porin_compiler::limits::{InventoryLimit, InventoryLimits};

/// A porin inventory document with `endpoints` endpoints.
fn inventory_text(endpoints: usize) -> String {
    let mut text = String::from("kind: Inventory\nendpoints:\n");
    for i in 0..endpoints {
        let _ = writeln!(
            text,
            "  - {{name: pod-{i}, namespace: default, labels: {{app: a{i}}}}}"
        );
    }
    text
}

fn add(text: &str, limits: &InventoryLimits) -> Result<Inventory, InventoryError> {
    let mut inventory = Inventory::new();
    inventory.add_text_with_limits("inv.yaml", text, limits)?;
    Ok(inventory)
}

/// Checks the refusal of `text` by `limit` set to `value`, and that the
/// defaults accept it.
fn refused_by(limit: InventoryLimit, value: u64, text: &str) -> InventoryError {
    let mut limits = InventoryLimits::default();
    limits.set(limit, value);
    let error = add(text, &limits).unwrap_err();
    check(&error, limit, value, "inv.yaml");
    add(text, &InventoryLimits::default()).unwrap();
    error
}

fn check(error: &InventoryError, limit: InventoryLimit, value: u64, file: &str) {
    let message = error.to_string();
    match error {
        InventoryError::Limit {
            file: named,
            limit_kind,
            given,
            limit: max,
        } => {
            assert_eq!(*limit_kind, limit, "{message}");
            assert_eq!(*max, value, "{message}");
            assert!(*given > value, "{message}");
            assert!(named.ends_with(file), "{message}");
        }
        other => panic!("{limit:?}: expected InventoryError::Limit, got {other:?}"),
    }
    assert!(message.contains(limit.flag()), "{message}");
    assert!(message.contains(file), "{message}");
    assert!(
        message.contains(&format!("the limit is `{value}`")),
        "{message}"
    );
}

#[test]
fn flags_are_distinct_and_named_in_the_description() {
    let flags: std::collections::BTreeSet<&str> =
        InventoryLimit::ALL.iter().map(|l| l.flag()).collect();
    assert_eq!(flags.len(), InventoryLimit::ALL.len());
    for limit in InventoryLimit::ALL {
        assert!(limit.description().contains(limit.flag()), "{limit:?}");
    }
}

#[test]
fn every_limit_round_trips_through_get_and_set() {
    let mut limits = InventoryLimits::default();
    for (index, limit) in InventoryLimit::ALL.into_iter().enumerate() {
        let value = 500 + index as u64;
        limits.set(limit, value);
        assert_eq!(limits.get(limit), value, "{limit:?}");
    }
}

#[test]
fn oversized_text_is_refused_before_parsing() {
    let text = inventory_text(100);
    let error = refused_by(InventoryLimit::FileBytes, 1_000, &text);
    let message = error.to_string();
    assert!(
        message.contains(&format!("`{}` needed", text.len())),
        "{message}"
    );
}

#[test]
fn oversized_file_is_refused_before_reading() {
    let dir = tempdir("oversized");
    let path = dir.join("big.yaml");
    std::fs::write(&path, inventory_text(100)).unwrap();
    let limits = InventoryLimits {
        max_file_bytes: 1_000,
        ..InventoryLimits::default()
    };
    let error = Inventory::load_with_limits(&path, &limits).unwrap_err();
    check(&error, InventoryLimit::FileBytes, 1_000, "big.yaml");
    Inventory::load(&path).unwrap();
}

#[test]
fn too_many_endpoints() {
    refused_by(InventoryLimit::Endpoints, 99, &inventory_text(100));
}

#[test]
fn too_many_documents() {
    let text = "kind: Namespace\napiVersion: v1\nmetadata: {name: a}\n---\n".repeat(20);
    refused_by(InventoryLimit::Documents, 10, &text);
}

#[test]
fn too_deep() {
    let depth = 40;
    // A manifest of a kind the inventory ignores: the depth limit applies
    // while parsing, before anything looks at the kind (an `Inventory`
    // refuses unknown fields, so it cannot carry the nesting).
    let text = format!(
        "kind: ConfigMap\ndata: {}x{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let error = refused_by(InventoryLimit::Depth, 20, &text);
    println!("{error}");
}

#[test]
fn ten_thousand_deep_is_refused_by_the_default_depth() {
    let depth = 10_000;
    let mut text = String::from("kind: Inventory\nextra:\n");
    for level in 0..depth {
        let _ = writeln!(text, "{}- ", " ".repeat(level));
    }
    let error = add(&text, &InventoryLimits::default()).unwrap_err();
    check(&error, InventoryLimit::Depth, 64, "inv.yaml");
    // Flow style, which the parser nests separately.
    let flow = format!("extra: {}{}\n", "[".repeat(depth), "]".repeat(depth));
    let error = add(&flow, &InventoryLimits::default()).unwrap_err();
    assert!(
        matches!(
            error,
            InventoryError::Limit {
                limit_kind: InventoryLimit::Depth,
                ..
            } | InventoryError::Syntax { .. }
        ),
        "{error}"
    );
    println!("{error}");
}

#[test]
fn too_many_nodes() {
    refused_by(InventoryLimit::Nodes, 300, &inventory_text(100));
}

/// Nine levels of ten aliases each: 10^9 nodes once expanded.
fn alias_bomb() -> String {
    let mut text = String::from("kind: Inventory\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..9 {
        let prev = format!("*a{}", level - 1);
        let items = [prev.as_str(); 10].join(", ");
        let _ = writeln!(text, "a{level}: &a{level} [{items}]");
    }
    text.push_str("extra: *a8\n");
    text
}

#[test]
fn alias_bomb_is_refused_by_the_replay_budget() {
    let error = add(&alias_bomb(), &InventoryLimits::default()).unwrap_err();
    check(
        &error,
        InventoryLimit::AliasExpansions,
        1_000_000,
        "inv.yaml",
    );
}

#[test]
fn aliases_within_the_budget_load() {
    // Labels shared through an anchor: a legitimate use of aliases,
    // refused only when the replay limit is lowered below its cost.
    let mut text = String::from(
        "kind: Inventory\nendpoints:\n  - {name: p0, namespace: default, labels: &l {app: web, tier: front}}\n",
    );
    for i in 1..200 {
        let _ = writeln!(text, "  - {{name: p{i}, namespace: default, labels: *l}}");
    }
    let inventory = add(&text, &InventoryLimits::default()).unwrap();
    assert_eq!(inventory.endpoints.len(), 200);
    assert_eq!(inventory.endpoints[150].labels["tier"], "front");
    refused_by(InventoryLimit::AliasExpansions, 100, &text);
}

#[test]
fn too_many_files_in_a_directory() {
    let dir = tempdir("files");
    for i in 0..12 {
        std::fs::write(
            dir.join(format!("ns-{i:02}.yaml")),
            format!("kind: Namespace\napiVersion: v1\nmetadata: {{name: ns{i}}}\n"),
        )
        .unwrap();
    }
    // Other names do not count.
    std::fs::write(dir.join("README.md"), "not inventory").unwrap();
    let limits = InventoryLimits {
        max_files: 11,
        ..InventoryLimits::default()
    };
    let error = Inventory::load_with_limits(&dir, &limits).unwrap_err();
    check(&error, InventoryLimit::Files, 11, "files");
    let limits = InventoryLimits {
        max_files: 12,
        ..InventoryLimits::default()
    };
    let inventory = Inventory::load_with_limits(&dir, &limits).unwrap();
    assert_eq!(inventory.namespaces.len(), 12);
}

#[test]
fn endpoints_are_counted_over_the_whole_directory() {
    let dir = tempdir("endpoints");
    for i in 0..3 {
        std::fs::write(
            dir.join(format!("inv-{i}.yaml")),
            inventory_text(40).replace("pod-", &format!("f{i}-pod-")),
        )
        .unwrap();
    }
    let limits = InventoryLimits {
        max_endpoints: 100,
        ..InventoryLimits::default()
    };
    let error = Inventory::load_with_limits(&dir, &limits).unwrap_err();
    check(&error, InventoryLimit::Endpoints, 100, "inv-2.yaml");
    assert!(error.to_string().contains("`120` needed"), "{error}");
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "porin-limits-inventory-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
