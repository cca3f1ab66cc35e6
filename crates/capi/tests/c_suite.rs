//! Builds the C test suite (`tests/c/*.c`: every function of `porin.h`,
//! every misuse) against the cargo-built `libporin.a` with
//! `-std=c11 -Wall -Wextra -Werror -pedantic` (the header included from two
//! translation units) and runs it under valgrind: no error, no definite or
//! indirect leak.

mod common;

use std::process::Command;

#[test]
fn c_suite_passes_under_valgrind() {
    if !common::have_all(&["gcc", "valgrind"]) {
        return;
    }
    let lib = common::build_libporin();
    let root = common::workspace_root();
    let c_dir = root.join("crates/capi/tests/c");
    let binary = common::scratch("c-suite").join("suite");
    let output = Command::new("gcc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-g",
            "-I",
        ])
        .arg(root.join("include"))
        .arg(c_dir.join("suite.c"))
        .arg(c_dir.join("second_tu.c"))
        .arg(&lib)
        .args(common::NATIVE_LIBS)
        .arg("-o")
        .arg(&binary)
        .output()
        .expect("run gcc");
    assert!(
        output.status.success(),
        "gcc failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = Command::new("valgrind")
        .args([
            "-q",
            "--error-exitcode=9",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
        ])
        .arg(&binary)
        .arg(root.join("fixtures/examples"))
        .output()
        .expect("run valgrind");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "C suite failed (exit {:?}):\n{stdout}\n{stderr}",
        output.status.code()
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
