//! `fixtures/examples/`: the bundled valid examples load with no finding at all.

use std::path::Path;

use porin_model::{LoadLimits, load_path};

#[test]
fn examples_are_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/examples");
    let outcome = load_path(&dir, &LoadLimits::default()).expect("examples are readable");
    assert!(
        outcome.diagnostics.is_empty(),
        "{}",
        porin_model::diagnostic::render_human_all(&outcome.diagnostics, &outcome.sources)
    );
    // web, backend-egress, backend-no-metadata, host-ssh, db.
    assert_eq!(outcome.documents.len(), 5);
}
