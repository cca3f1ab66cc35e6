//! A compile that fails through the C ABI (`tests/c/compile_failure.c`):
//! an invalid policy next to a valid one, a YAML nesting limit exceeded,
//! and a failure of the compile stage (a reserved identity number). Each
//! time the caller gets the error code, the message and (for policy
//! errors) the diagnostics; the output handle is not written, so no object
//! or map entries exist for any endpoint; and the previous compilation
//! handle stays valid with the same object, entries, ipcache and decisions.
//! Run under valgrind (memcheck): no error, no definite or indirect leak.

use crate::common;

#[test]
fn a_failed_compile_emits_nothing_and_keeps_the_previous_compilation() {
    if !common::have_all(&["gcc", "valgrind"]) {
        return;
    }
    let lib = common::build_libporin();
    let root = common::workspace_root();
    let binary = common::scratch("c-compile-failure").join("compile_failure");
    common::compile_c(
        &[root.join("crates/capi/tests/c/compile_failure.c")],
        &[&lib],
        &binary,
    );
    let output = common::run_memcheck(&binary, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "exit {:?}:\n{stdout}\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("compile failure: all checks passed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("conflicting identity: identity 300: given to `prod/other`"),
        "the compile-stage error must reach the caller: {stdout}"
    );
}
