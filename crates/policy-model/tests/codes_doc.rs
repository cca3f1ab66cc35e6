//! `crates/policy-model/CODES.md` lists every `PM0xx` code; it is generated
//! from `porin_model::codes::ALL` and this test fails when it is stale
//! (`UPDATE_CODES=1 cargo test -p porin-model --test codes_doc` rewrites it).
//! Every code also has a fixture in `fixtures/invalid/` or a test naming it.

use std::path::Path;

use porin_model::codes::ALL;

fn render() -> String {
    let mut text = String::from(
        "# porin-model diagnostic codes\n\n\
         Generated from `porin_model::codes::ALL` by `tests/codes_doc.rs`; do not edit.\n\
         Codes are stable: a code is never reused for another condition.\n\n\
         | code | name | meaning |\n|------|------|---------|\n",
    );
    for info in ALL {
        text.push_str(&format!(
            "| `{}` | `{}` | {} |\n",
            info.code,
            info.name,
            info.summary.replace('|', "\\|")
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
        "{} is stale; run `UPDATE_CODES=1 cargo test -p porin-model --test codes_doc`",
        path.display()
    );
}

#[test]
fn codes_are_unique_and_ordered() {
    for pair in ALL.windows(2) {
        assert!(
            pair[0].code < pair[1].code,
            "{} then {}",
            pair[0].code,
            pair[1].code
        );
    }
}

#[test]
fn every_error_code_has_an_invalid_fixture() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/invalid");
    let names: Vec<String> = std::fs::read_dir(dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    // Codes that are never errors, or that no single policy file can show.
    let exempt = ["PM008", "PM037", "PM041"];
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
