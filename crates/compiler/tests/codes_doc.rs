//! `crates/compiler/CODES.md` lists every `PC0xx` code; it is generated
//! from `porin_compiler::resolve::codes::ALL` and this test fails when it is
//! stale (`UPDATE_CODES=1 cargo test -p porin-compiler --test codes_doc`
//! rewrites it).

use std::path::Path;

use porin_compiler::resolve::codes::ALL;

fn render() -> String {
    let mut text = String::from(
        "# porin-compiler diagnostic codes\n\n\
         Generated from `porin_compiler::resolve::codes::ALL` by `tests/codes_doc.rs`; do not edit.\n\
         Codes are stable: a code is never reused for another condition.\n\n\
         | code | name | meaning |\n|------|------|---------|\n",
    );
    for (code, name, meaning) in ALL {
        text.push_str(&format!(
            "| `{code}` | `{name}` | {} |\n",
            meaning.replace('|', "\\|")
        ));
    }
    text
}

#[test]
fn codes_document_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("CODES.md");
    let expected = render();
    if std::env::var("UPDATE_CODES").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write CODES.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "{} is stale; run `UPDATE_CODES=1 cargo test -p porin-compiler --test codes_doc`",
        path.display()
    );
}

#[test]
fn codes_are_unique_and_ordered() {
    for pair in ALL.windows(2) {
        assert!(pair[0].0 < pair[1].0, "{} then {}", pair[0].0, pair[1].0);
    }
}
