//! Builds the C test suite (`tests/c/*.c`: every function of `porin.h`,
//! every misuse) against the cargo-built `libporin.a` with
//! `-std=c11 -Wall -Wextra -Werror -pedantic` (the header included from two
//! translation units) and runs it under valgrind: no error, no definite or
//! indirect leak.

use crate::common;

#[test]
fn c_suite_passes_under_valgrind() {
    if !common::have_all(&["gcc", "valgrind"]) {
        return;
    }
    let lib = common::build_libporin();
    let root = common::workspace_root();
    let c_dir = root.join("crates/capi/tests/c");
    let binary = common::scratch("c-suite").join("suite");
    common::compile_c(
        &[c_dir.join("suite.c"), c_dir.join("second_tu.c")],
        &[&lib],
        &binary,
    );
    let output = common::run_memcheck(&binary, &[root.join("fixtures/examples")]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "C suite failed (exit {:?}):\n{stdout}\n{stderr}",
        output.status.code()
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
