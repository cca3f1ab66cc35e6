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

/// A compact, stable view: diagnostics, then each enforced endpoint with
/// its entries and their origins, then the CIDR identities.
fn render(compiled: &Compiled) -> String {
    let mut text = diagnostics_text(&compiled.diagnostics);
    for endpoint in &compiled.endpoints {
        if !endpoint.enforcement.ingress && !endpoint.enforcement.egress {
            continue;
        }
        let _ = writeln!(
            text,
            "endpoint {} identity {} ingress={} egress={}",
            endpoint.display_name(),
            endpoint.identity,
            endpoint.enforcement.ingress,
            endpoint.enforcement.egress
        );
        text.push_str(&diagnostics_text(&endpoint.diagnostics));
        for e in &endpoint.entries {
            let origins: Vec<String> = e
                .origins
                .iter()
                .filter_map(|id| compiled.origin(*id))
                .map(|o| format!("{}:{}", o.name, o.route))
                .collect();
            let _ = writeln!(
                text,
                "  {} id={} {} {}-{}/{} {} prec={:#x} proxy={} auth={}{} cookie={} <- {}",
                e.direction,
                e.identity,
                e.proto,
                e.port,
                e.end_port,
                e.port_prefix_len,
                e.verdict,
                e.precedence,
                e.proxy_port,
                e.auth_type,
                if e.auth_explicit { "!" } else { "" },
                e.cookie,
                origins.join(", ")
            );
        }
    }
    for identity in &compiled.identities {
        if identity.id >= 0x0100_0000 {
            let _ = writeln!(text, "cidr identity {} = {}", identity.id, identity.labels);
        }
    }
    text
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
