//! `crates/policy-model/CODES.md` lists every `PM0xx` code; its table is
//! generated from the registry (`porin_model::codes::ALL`) and this test
//! fails when it is stale (`UPDATE_CODES=1 cargo test -p porin-model --test
//! model codes_doc::` rewrites it). Every code also has a fixture in
//! `fixtures/invalid/` or a test naming it.

use std::path::Path;

use porin_model::codes::ALL;
use porin_model::registry::{check_generated, markdown_table};

#[test]
fn codes_document_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("CODES.md");
    check_generated(
        &path,
        &markdown_table(ALL, false),
        "cargo test -p porin-model --test model codes_doc::",
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn every_error_code_has_an_invalid_fixture() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/invalid");
    let names: Vec<String> = std::fs::read_dir(dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    // Codes that no single policy file can show (PM008 is info, PM037 and
    // PM041 warnings: none of them makes a file invalid; PM051 is retired,
    // ClusterNetworkPolicy being compiled since issue #21; PM067 compares
    // two targets, only `porin lint --upgrade-to` and `porin diff
    // --to-cilium-version` report it:
    // crates/cli/tests/cli/cilium_version_inputs.rs tests it).
    let exempt = ["PM008", "PM037", "PM041", "PM051", "PM067"];
    for info in ALL {
        if exempt.contains(&info.code) {
            continue;
        }
        assert!(
            names.iter().any(|n| n.starts_with(info.code)),
            "no fixtures/invalid/{}-*.yaml",
            info.code
        );
    }
}
