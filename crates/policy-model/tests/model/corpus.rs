//! Every policy file of Cilium's examples (`shared/corpus/cilium-examples`)
//! loads and validates, except `examples/policies/l3/requires/requires.yaml`,
//! which uses `fromRequires` (removed in Cilium 1.19); and each round-trips.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on I/O errors")]

use std::path::{Path, PathBuf};

use porin_model::{LoadLimits, PolicyDocument, load_path, load_str};

const REQUIRES: &str = "examples/policies/l3/requires/requires.yaml";

/// Test manifests that Cilium's e2e harness fills in before applying them:
/// as committed they hold the placeholder `NODE_WITHOUT_CILIUM_IP/32` where
/// the API server (`format: cidr`) and `CIDR.Validate` require a CIDR, so
/// they are invalid as written and must be rejected (PM018) — by the
/// placeholder and nothing else.
const TEMPLATES: &[&str] = &[
    "test/k8s/manifests/ccnp-host-ingress-from-cidr-to-ports.yaml",
    "test/k8s/manifests/ccnp-host-policy-nodeport-tests.yaml",
    "test/k8s/manifests/cnp-ingress-from-cidr-to-ports.yaml",
];

fn corpus_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/cilium-examples");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("CI").is_err(),
        "corpus missing at {} (CI must provide ../shared)",
        dir.display()
    );
    println!("SKIPPED: corpus not found at {}", dir.display());
    None
}

fn policy_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn corpus_loads_and_validates() {
    let Some(dir) = corpus_dir() else { return };
    let files = policy_files(&dir);
    assert!(
        files.len() >= 180,
        "expected the 186 corpus files, found {}",
        files.len()
    );
    let limits = LoadLimits::default();
    let mut failures = Vec::new();
    let mut policies = 0usize;
    for file in &files {
        let relative = file
            .strip_prefix(&dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let outcome = load_path(file, &limits).unwrap();
        let errors: Vec<_> = outcome
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .collect();
        if relative == REQUIRES {
            assert!(
                errors.iter().any(|d| d.code == "PM031"),
                "{relative} must be rejected for fromRequires, got {errors:#?}"
            );
            continue;
        }
        if TEMPLATES.contains(&relative.as_str()) {
            assert!(
                !errors.is_empty()
                    && errors
                        .iter()
                        .all(|d| d.code == "PM018" && d.message.contains("NODE_WITHOUT_CILIUM_IP")),
                "{relative} must be rejected for its unfilled placeholder only, got {errors:#?}"
            );
            continue;
        }
        if !errors.is_empty() {
            failures.push(format!(
                "{relative}:\n{}",
                porin_model::diagnostic::render_human_all(&outcome.diagnostics, &outcome.sources)
            ));
        }
        policies += outcome.documents.len();
    }
    assert!(
        failures.is_empty(),
        "{} files failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // INDEX.tsv lists 150 CNP + 28 CCNP + 9 KNP documents; requires.yaml holds one.
    assert!(policies >= 180, "only {policies} policies loaded");
}

#[test]
fn corpus_round_trips() {
    let Some(dir) = corpus_dir() else { return };
    let limits = LoadLimits::default();
    for file in policy_files(&dir) {
        let outcome = load_path(&file, &limits).unwrap();
        for loaded in &outcome.documents {
            let json = serde_json::to_string(&loaded.doc).unwrap();
            let again = load_str("roundtrip.json", &json, &limits);
            assert!(
                !again.has_errors(),
                "{}: reloading the serialized model failed: {:#?}\n{json}",
                file.display(),
                again.diagnostics
            );
            let reloaded: Vec<&PolicyDocument> = again.documents.iter().map(|d| &d.doc).collect();
            assert_eq!(
                reloaded,
                vec![&loaded.doc],
                "{}: round trip changed the model",
                file.display()
            );
        }
    }
}
