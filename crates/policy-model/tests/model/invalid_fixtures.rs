//! `fixtures/invalid/<CODE>-<condition>.yaml`: one defect per file. Each must
//! produce exactly one error, with the code its name starts with, rendered
//! (file, line, column, caret, route, help) as the committed snapshot shows.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on I/O errors")]

use std::path::{Path, PathBuf};

use porin_model::diagnostic::{render_human_all, render_json};
use porin_model::{LoadLimits, load_str};

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/invalid");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// The target a fixture's first line names (`# ... --cilium-version 1.20
/// --enable-k8s-cluster-network-policy`), else the default: a fixture of a
/// version-dependent code says which Cilium rejects it.
fn target_of(text: &str) -> porin_model::Target {
    let first = text.lines().next().unwrap_or("");
    let mut target = porin_model::Target::default();
    let mut words = first.split_whitespace();
    while let Some(word) = words.next() {
        match word {
            "--cilium-version" => {
                target.version =
                    porin_model::CiliumVersion::parse_modelled(words.next().unwrap()).unwrap();
            }
            "--enable-k8s-cluster-network-policy" => target.k8s_cluster_network_policy = true,
            _ => {}
        }
    }
    target
}

fn load(path: &Path) -> (String, porin_model::LoadOutcome) {
    let name = format!(
        "fixtures/invalid/{}",
        path.file_name().unwrap().to_string_lossy()
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut outcome = load_str(&name, &text, &LoadLimits::default());
    outcome.apply_target(&target_of(&text));
    (name, outcome)
}

#[test]
fn every_invalid_fixture_is_rejected_with_its_code_and_location() {
    let files = fixtures();
    assert!(
        files.len() >= 40,
        "need at least 40 invalid fixtures, found {}",
        files.len()
    );
    for path in &files {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let code = stem.split('-').next().unwrap();
        let (name, outcome) = load(path);
        let errors: Vec<_> = outcome
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .collect();
        assert_eq!(
            errors.len(),
            1,
            "{name}: expected exactly one error (one defect per fixture), got {errors:#?}"
        );
        assert_eq!(
            errors[0].code, code,
            "{name}: wrong code in {:#?}",
            errors[0]
        );
        let primary = errors[0].primary.as_ref().unwrap();
        assert!(
            primary.line > 1,
            "{name}: the error must point into the policy, not at line 1"
        );
        for loaded in &outcome.documents {
            let prefix = loaded.route_prefix().to_string();
            assert!(
                !(loaded.index == primary.document && primary.route.starts_with(&prefix)),
                "{name}: the invalid policy must not be returned"
            );
        }
        let rendered = render_human_all(&outcome.diagnostics, &outcome.sources);
        insta::with_settings!({
            snapshot_path => "snapshots/invalid",
            prepend_module_to_snapshot => false,
            description => name.clone(),
            omit_expression => true,
        }, {
            insta::assert_snapshot!(stem.clone(), rendered);
        });
    }
}

#[test]
fn json_rendering_is_stable() {
    let path = fixtures()
        .into_iter()
        .find(|p| p.ends_with("PM003-unknown-field-did-you-mean.yaml"))
        .unwrap();
    let (_, outcome) = load(&path);
    insta::assert_snapshot!(render_json(&outcome.diagnostics));
}

/// A fixture of a version-dependent code (its first line names a target)
/// is valid under the default target (Cilium 1.19, no optional settings):
/// the row of `porin_model::version::TABLE` it shows is what makes it
/// invalid, nothing else.
#[test]
fn version_dependent_fixtures_are_valid_under_the_default_target() {
    let mut seen = 0;
    for path in fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        if target_of(&text) == porin_model::Target::default() {
            continue;
        }
        seen += 1;
        let outcome = load_str("fixture.yaml", &text, &LoadLimits::default());
        assert!(
            !outcome.has_errors(),
            "{}: {:#?}",
            path.display(),
            outcome.diagnostics
        );
    }
    assert!(seen >= 1, "no version-dependent fixture");
}
