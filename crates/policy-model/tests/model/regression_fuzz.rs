//! Replays every minimised fuzz input in `fuzz/regressions/` (each documented
//! in `fuzz/regressions/README.md`) through the fuzz target's checks.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on I/O errors")]

use std::path::Path;

use porin_model::invariants::check_loader_invariants;

#[test]
fn fuzz_regressions_stay_fixed() {
    // Loader inputs live directly in `fuzz/regressions/` or in its
    // `parse_policy_yaml/` folder; other targets' folders are replayed by
    // their own crates' tests.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    let mut files = Vec::new();
    for dir in [root.clone(), root.join("parse_policy_yaml")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_file() && path.file_name().is_some_and(|n| n != "README.md") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut replayed = 0;
    for path in files {
        let data = std::fs::read(&path).unwrap();
        if let Err(violation) = check_loader_invariants(&data) {
            panic!("{}: {violation}", path.display());
        }
        replayed += 1;
    }
    println!("replayed {replayed} fuzz regressions");
}

/// The invariants themselves hold on the bundled fixtures and the fuzz
/// seeds (so the fuzz target starts from inputs that pass).
#[test]
fn fixtures_satisfy_the_fuzz_invariants() {
    for folder in ["fixtures/invalid", "fixtures/examples", "fuzz/seeds"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(folder);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            check_loader_invariants(&data).unwrap_or_else(|v| panic!("{}: {v}", path.display()));
        }
    }
}
