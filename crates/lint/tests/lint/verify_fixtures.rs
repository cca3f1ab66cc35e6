//! Every lint rule against its fixtures (`fixtures/lint/PR0xx_name/`):
//! `trigger.yaml` must produce the rule's code, `near_miss.yaml` must not.
//! A directory may hold `porin.yaml` (lint configuration) and
//! `inventory.yaml`; otherwise `fixtures/lint/inventory.yaml` is used.
//! The human and JSON renderings of each trigger are insta snapshots.

#![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

use std::path::{Path, PathBuf};

use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_lint::config::LintConfig;
use porin_lint::{Report, codes, verify};
use porin_model::diagnostic::{render_human_all, render_json};
use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_str};

fn lint_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/lint")
}

fn rule_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(lint_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn load(dir: &Path, file: &str) -> LoadOutcome {
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let display = format!(
        "fixtures/lint/{}/{file}",
        dir.file_name().unwrap().to_string_lossy()
    );
    let outcome = load_str(&display, &text, &LoadLimits::default());
    assert!(
        !outcome.has_errors(),
        "{display} does not load: {:?}",
        outcome.diagnostics
    );
    outcome
}

fn run(dir: &Path, file: &str) -> (Report, LoadOutcome) {
    let outcome = load(dir, file);
    let inventory_path = if dir.join("inventory.yaml").exists() {
        dir.join("inventory.yaml")
    } else {
        lint_dir().join("inventory.yaml")
    };
    let inventory = Inventory::load(&inventory_path).unwrap();
    let config = match std::fs::read_to_string(dir.join("porin.yaml")) {
        Ok(text) => LintConfig::parse("porin.yaml", &text).unwrap(),
        Err(_) => LintConfig::default(),
    };
    // The target the configuration names (a tier rule's fixture enforces
    // ClusterNetworkPolicy with `enableK8sClusterNetworkPolicy`).
    let mut outcome = outcome;
    let (major, minor) = config.cilium_version;
    outcome.apply_target(&porin_model::Target {
        version: porin_model::CiliumVersion::new(major, minor).validation(),
        k8s_cluster_network_policy: config.k8s_cluster_network_policy,
    });
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    let inputs = PolicyInput::from_outcome(&outcome);
    let report = verify(&inputs, Some(&inventory), &config).unwrap();
    (report, outcome)
}

#[test]
fn every_rule_has_a_fixture_directory() {
    let names: Vec<String> = rule_dirs()
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for rule in codes::rules() {
        let expected = format!("{}_{}", rule.code, rule.name.replace('-', "_"));
        assert!(
            names.contains(&expected),
            "missing fixtures/lint/{expected}"
        );
    }
}

#[test]
fn triggers_trigger_and_near_misses_do_not() {
    for dir in rule_dirs() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let code = &name[..5];
        let (report, outcome) = run(&dir, "trigger.yaml");
        assert!(
            report.findings.iter().any(|d| d.code == code),
            "{name}/trigger.yaml does not trigger {code}: {}",
            render_human_all(&report.findings, &outcome.sources)
        );
        insta::assert_snapshot!(
            format!("{name}__human"),
            render_human_all(&report.findings, &outcome.sources)
        );
        insta::assert_snapshot!(format!("{name}__json"), render_json(&report.findings));
        let (near, outcome) = run(&dir, "near_miss.yaml");
        assert!(
            !near.findings.iter().any(|d| d.code == code),
            "{name}/near_miss.yaml triggers {code}: {}",
            render_human_all(&near.findings, &outcome.sources)
        );
    }
}
