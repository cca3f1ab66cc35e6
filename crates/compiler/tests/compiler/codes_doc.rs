//! `crates/compiler/CODES.md` lists every `PC0xx` code; its table is
//! generated from the registry (`porin_compiler::codes::ALL`) and this test
//! fails when it is stale (`UPDATE_CODES=1 cargo test -p porin-compiler
//! --test compiler codes_doc::` rewrites it).

use std::path::Path;

use porin_compiler::codes::ALL;
use porin_model::registry::{check_generated, markdown_table};

#[test]
fn codes_document_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("CODES.md");
    check_generated(
        &path,
        &markdown_table(ALL, false),
        "cargo test -p porin-compiler --test compiler codes_doc::",
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
