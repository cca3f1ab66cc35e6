//! Snapshots of `porin compile` for every policy file of the Cilium example
//! corpus (`../shared/corpus/cilium-examples/examples/`), against
//! `fixtures/inventories/corpus-examples.yaml`, which gives every example
//! something to select. Outside CI the test is skipped when `shared/` is
//! absent; in CI (`CI=true`) that is a failure.

#![allow(clippy::unwrap_used, reason = "test helpers panic on broken fixtures")]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use porin_compiler::compile::{Compiled, compile};
use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_model::diagnostic::Diagnostic;
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect(&entry, out);
        } else if entry
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(entry);
        }
    }
}

fn diagnostics_text(diagnostics: &[Diagnostic]) -> String {
    let mut text = String::new();
    for d in diagnostics {
        let at = d
            .primary
            .as_ref()
            .map(|l| format!("{}:{}", l.line, l.route))
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "{}[{}] {} @ {at}",
            d.severity.as_str(),
            d.code,
            d.message
        );
    }
    text
}

/// The `porin compile` JSON, trimmed to what the example changes: the
/// diagnostics, the endpoints with an enforced direction, the CIDR
/// identities and the ipcache entries of policy prefixes, and the origins.
fn render(compiled: &Compiled) -> String {
    let mut value: serde_json::Value = serde_json::from_str(&compiled.to_json()).unwrap();
    let object = value.as_object_mut().unwrap();
    // The inventory's nodes (with their file's path) are the same in every
    // snapshot; the host endpoint they give is among the endpoints.
    object.remove("nodes");
    if let Some(serde_json::Value::Array(endpoints)) = object.get_mut("endpoints") {
        endpoints.retain(|e| {
            e["enforcement"]["ingress"].as_bool() == Some(true)
                || e["enforcement"]["egress"].as_bool() == Some(true)
        });
        for endpoint in endpoints.iter_mut() {
            if let Some(map) = endpoint.as_object_mut() {
                // The labels are the inventory's; the identity number names them.
                map.remove("labels");
                map.remove("ips");
            }
        }
    }
    // CIDR identities (local scope) only: the nodes' own identities
    // (remote-node scope, 0x02xxxxxx) are the inventory's, the same in
    // every snapshot; map entries name their numbers.
    let cidr = |id: Option<u64>| id.is_some_and(|id| (0x0100_0000..0x0200_0000).contains(&id));
    if let Some(serde_json::Value::Array(identities)) = object.get_mut("identities") {
        identities.retain(|i| cidr(i["id"].as_u64()));
    }
    if let Some(serde_json::Value::Array(ipcache)) = object.get_mut("ipcache") {
        ipcache.retain(|e| cidr(e["identity"].as_u64()));
    }
    let mut text = String::new();
    write_json(&value, 0, &mut text);
    text
}

/// Pretty JSON with one line per "flat" object (all fields scalars or
/// lists of scalars), so each map entry is one line in the snapshot.
fn write_json(value: &serde_json::Value, indent: usize, out: &mut String) {
    use serde_json::Value;
    let flat = |v: &Value| match v {
        Value::Object(map) => map.values().all(|f| match f {
            Value::Array(items) => items.iter().all(|i| !i.is_object() && !i.is_array()),
            Value::Object(_) => false,
            _ => true,
        }),
        Value::Array(items) => items.iter().all(|i| !i.is_object() && !i.is_array()),
        _ => true,
    };
    if flat(value) {
        out.push_str(&serde_json::to_string(value).unwrap());
        return;
    }
    let pad = "  ".repeat(indent + 1);
    match value {
        Value::Object(map) => {
            out.push_str("{\n");
            for (i, (key, field)) in map.iter().enumerate() {
                let _ = write!(out, "{pad}{}: ", serde_json::to_string(key).unwrap());
                write_json(field, indent + 1, out);
                out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
            }
            let _ = write!(out, "{}}}", "  ".repeat(indent));
        }
        Value::Array(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad);
                write_json(item, indent + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            let _ = write!(out, "{}]", "  ".repeat(indent));
        }
        other => out.push_str(&serde_json::to_string(other).unwrap()),
    }
}

#[test]
fn corpus_examples_compile_snapshots() {
    let examples = workspace().join("../shared/corpus/cilium-examples/examples");
    if !examples.is_dir() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{} is missing in CI", examples.display());
        }
        println!("SKIPPED: {} is absent (outside CI)", examples.display());
        return;
    }
    let inventory_path = workspace().join("fixtures/inventories/corpus-examples.yaml");
    let inventory = Inventory::load(&inventory_path).unwrap();
    let mut files = Vec::new();
    collect(&examples, &mut files);
    assert!(
        files.len() > 50,
        "corpus looks incomplete: {} files",
        files.len()
    );
    let mut selected_nothing = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(examples.parent().unwrap())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&file).unwrap();
        let outcome = load_str(&relative, &text, &LoadLimits::default());
        let rendered = if outcome.has_errors() {
            format!("load errors:\n{}", diagnostics_text(&outcome.diagnostics))
        } else {
            let inputs = PolicyInput::from_outcome(&outcome);
            let compiled = compile(&inputs, &inventory).unwrap();
            let again = compile(&inputs, &inventory).unwrap();
            assert_eq!(
                compiled.to_json(),
                again.to_json(),
                "{relative}: not deterministic"
            );
            if !outcome.documents.is_empty()
                && compiled.diagnostics.iter().any(|d| d.code == "PC008")
            {
                selected_nothing.push(relative.clone());
            }
            render(&compiled)
        };
        let name = relative
            .trim_end_matches(".yaml")
            .trim_end_matches(".json")
            .replace('/', "__");
        insta::assert_snapshot!(name, rendered);
    }
    assert!(
        selected_nothing.is_empty(),
        "examples selecting no endpoint: {selected_nothing:?}"
    );
}
