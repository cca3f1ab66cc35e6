//! `crates/compiler/CODES.md` lists every `PC0xx` code; its table is
//! generated from the registry (`porin_compiler::codes::ALL`) and this test
//! fails when it is stale (`UPDATE_CODES=1 cargo test -p porin-compiler
//! --test codes_doc` rewrites it).

use std::path::Path;

use porin_compiler::codes::ALL;
use porin_model::registry::{markdown_table, refresh};

#[test]
fn codes_document_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("CODES.md");
    let update = std::env::var("UPDATE_CODES").is_ok_and(|v| v == "1");
    let fresh = refresh(&path, &markdown_table(ALL, false), update).expect("CODES.md");
    assert!(
        fresh,
        "{} is stale; run `UPDATE_CODES=1 cargo test -p porin-compiler --test codes_doc`",
        path.display()
    );
}
