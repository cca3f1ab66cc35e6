//! `porin lint` (the verifier) over the whole Cilium example corpus
//! (`../shared/corpus/cilium-examples/`) with the corpus inventory
//! (`fixtures/inventories/corpus-examples.yaml`): it finishes, every
//! finding has a registered code, and every located finding points at a
//! real line. Outside CI the test is skipped when `shared/` is absent; in
//! CI (`CI=true`) that is a failure. The elapsed time is printed
//! (`cargo test -- --nocapture`).

#![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

use std::path::PathBuf;
use std::time::Instant;

use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_lint::config::LintConfig;
use porin_lint::{codes, verify};
use porin_model::limits::LoadLimits;
use porin_model::loader::load_path;

/// The corpus directory; `None` (after printing SKIPPED) when it is absent
/// outside CI, a failure in CI.
pub(crate) fn corpus_dir() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = root.join("../shared/corpus/cilium-examples");
    if corpus.is_dir() {
        return Some(corpus);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI: {} is missing",
        corpus.display()
    );
    println!("SKIPPED: {} is missing", corpus.display());
    None
}

#[test]
fn lint_finishes_over_the_whole_corpus() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(corpus) = corpus_dir() else {
        return;
    };
    let start = Instant::now();
    let outcome = load_path(&corpus, &LoadLimits::default()).unwrap();
    let inventory =
        Inventory::load(&root.join("fixtures/inventories/corpus-examples.yaml")).unwrap();
    let inputs = PolicyInput::from_outcome(&outcome);
    let report = verify(&inputs, Some(&inventory), &LintConfig::default()).unwrap();
    println!(
        "verify over {} policies: {} findings in {:?}",
        inputs.len(),
        report.findings.len(),
        start.elapsed()
    );
    assert!(
        inputs.len() > 150,
        "the corpus has about 180 valid policies"
    );
    for finding in &report.findings {
        assert!(
            codes::find(finding.code).is_some(),
            "unregistered code {}",
            finding.code
        );
        if let Some(location) = &finding.primary {
            assert!(
                location.line > 0,
                "{} without a line: {}",
                finding.code,
                finding.message
            );
        }
        for (location, label) in &finding.related {
            assert!(location.line > 0, "{label} without a line");
        }
    }
}
