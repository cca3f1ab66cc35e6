//! The C API's shared handles used from several threads at once
//! (`tests/c/threads.c`), checked for data races by valgrind's helgrind and
//! drd: no reported race, and every thread's results equal the
//! single-threaded ones. The suppressions (`tests/c/threads.supp`) cover
//! one documented false positive (Rust's futex-based `std::sync::Mutex`
//! around porin's handle registry, which neither tool can see); a negative
//! control (`tests/c/racy.c`) proves a real race is still reported with
//! them loaded.
//!
//! In CI (`CI=true`) a missing gcc or valgrind fails the test; elsewhere it
//! prints `SKIPPED: <reason>`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// valgrind's exit status when it found an error (`--error-exitcode`).
const RACE_EXIT: i32 = 9;

fn valgrind(tool: &str, binary: &Path, args: &[PathBuf]) -> Output {
    let suppressions = common::workspace_root().join("crates/capi/tests/c/threads.supp");
    Command::new("valgrind")
        .arg(format!("--tool={tool}"))
        .arg(format!("--error-exitcode={RACE_EXIT}"))
        .arg("--num-callers=50")
        .arg(format!("--suppressions={}", suppressions.display()))
        .arg(binary)
        .args(args)
        .output()
        .expect("run valgrind")
}

fn describe(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn shared_handles_have_no_race_under_helgrind_and_drd() {
    if !common::have_all(&["gcc", "valgrind"]) {
        return;
    }
    let lib = common::build_libporin();
    let c_dir = common::workspace_root().join("crates/capi/tests/c");
    let scratch = common::scratch("c-threads");
    let threads = scratch.join("threads");
    let racy = scratch.join("racy");
    common::compile_c(&[c_dir.join("threads.c")], &[&lib], &threads);
    common::compile_c(&[c_dir.join("racy.c")], &[], &racy);
    let data = vec![common::example_data()];

    // Natively first: a wrong result is reported without valgrind's noise.
    let native = Command::new(&threads)
        .args(&data)
        .output()
        .expect("run threads");
    assert!(native.status.success(), "{}", describe(&native));
    assert!(
        String::from_utf8_lossy(&native.stdout).contains("threads: all checks passed"),
        "{}",
        describe(&native)
    );

    for tool in ["helgrind", "drd"] {
        // The negative control: the same tool and suppressions catch a real race.
        let control = valgrind(tool, &racy, &[]);
        assert_eq!(
            control.status.code(),
            Some(RACE_EXIT),
            "{tool} did not report the race of racy.c:\n{}",
            describe(&control)
        );
        let stderr = String::from_utf8_lossy(&control.stderr);
        assert!(
            stderr.contains("data race") || stderr.contains("Conflicting"),
            "{tool}: {stderr}"
        );

        let output = valgrind(tool, &threads, &data);
        assert!(
            output.status.success(),
            "{tool} reported a problem with porin's C API used from several threads:\n{}",
            describe(&output)
        );
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("threads: all checks passed"),
            "{tool}: {}",
            describe(&output)
        );
    }
}
