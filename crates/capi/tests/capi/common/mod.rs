//! Shared by the integration tests that drive C and Go programs: building
//! `libporin.a` with cargo, locating the repository, and the CI/SKIPPED
//! policy (in CI, `CI=true`, a test that cannot run fails; elsewhere it
//! prints `SKIPPED: <reason>` and passes).

#![allow(dead_code, reason = "each test binary uses a subset")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// True when running in CI.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Fails in CI, prints SKIPPED elsewhere. Returns so the test can `return`.
pub fn skip(reason: &str) {
    assert!(!in_ci(), "CI=true but this test cannot run: {reason}");
    println!("SKIPPED: {reason}");
}

/// Whether a program is on PATH (runs `prog --version`).
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// True when every program of `tools` is on PATH; otherwise reports the
/// first missing one through [`skip`] (fails in CI) and returns false.
pub fn have_all(tools: &[&str]) -> bool {
    match tools.iter().find(|tool| !have(tool)) {
        Some(missing) => {
            skip(&format!("{missing} is not installed"));
            false
        }
        None => true,
    }
}

/// The target directory and profile of the running test binary
/// (`<target>/<profile>/deps/<test>-<hash>`).
fn target_and_profile() -> (PathBuf, String) {
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary lives in <target>/<profile>/deps");
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_owned();
    let target = profile_dir.parent().expect("target dir").to_path_buf();
    (target, profile)
}

/// Builds the staticlib with cargo into the test's own target directory
/// (a no-op when fresh) and returns the path of `libporin.a`.
pub fn build_libporin() -> PathBuf {
    let (target, profile) = target_and_profile();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace_root())
        .args(["build", "-q", "-p", "porin-capi", "--lib", "--target-dir"])
        .arg(&target);
    if profile == "release" {
        command.arg("--release");
    }
    let status = command.status().expect("run cargo build");
    assert!(status.success(), "cargo build -p porin-capi failed");
    let lib = target.join(&profile).join("libporin.a");
    assert!(lib.exists(), "{} missing after the build", lib.display());
    lib
}

/// The system libraries a Rust staticlib needs
/// (`--print native-static-libs`).
pub const NATIVE_LIBS: [&str; 7] = [
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// Compiles C `sources` (plus `extra` objects or libraries) against
/// `include/porin.h` with `-std=c11 -Wall -Wextra -Werror -pedantic -g
/// -pthread` and the system libraries of the staticlib; panics with gcc's
/// output on failure.
pub fn compile_c(sources: &[PathBuf], extra: &[&Path], binary: &Path) {
    let output = Command::new("gcc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-g",
            "-pthread",
            "-I",
        ])
        .arg(workspace_root().join("include"))
        .args(sources)
        .args(extra)
        .args(NATIVE_LIBS)
        .arg("-o")
        .arg(binary)
        .output()
        .expect("run gcc");
    assert!(
        output.status.success(),
        "gcc failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `binary` under valgrind's memcheck: exit 9 on any error or on a
/// definite or indirect leak.
pub fn run_memcheck(binary: &Path, args: &[PathBuf]) -> std::process::Output {
    Command::new("valgrind")
        .args([
            "-q",
            "--error-exitcode=9",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
        ])
        .arg(binary)
        .args(args)
        .output()
        .expect("run valgrind")
}

/// A scratch directory under the target dir.
pub fn scratch(name: &str) -> PathBuf {
    let (target, _) = target_and_profile();
    let dir = target.join("porin-capi-tests").join(name);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Whether the process may load BPF programs (root, and bpf(2) works).
pub fn can_bpf() -> Result<(), String> {
    // SAFETY-free check: geteuid through /proc (no libc dependency here).
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .is_some_and(|euid| euid == "0");
    if !root {
        return Err("not root: BPF_PROG_LOAD needs CAP_BPF/CAP_SYS_ADMIN".to_owned());
    }
    Ok(())
}

/// The example data shared by both agents.
pub fn example_data() -> PathBuf {
    workspace_root().join("examples/data")
}

/// Runs an example agent (C or Go) on the example data:
/// `AGENT INVENTORY POLICY_V1 POLICY_V2 FLOWS`; `fail_at_write` sets the
/// agents' test hook `PORIN_AGENT_FAIL_AT_WRITE=K`, which makes write K of
/// every difference fail.
pub fn run_example_agent(binary: &Path, fail_at_write: Option<usize>) -> Output {
    let data = example_data();
    let mut command = Command::new(binary);
    command
        .arg(data.join("inventory.yaml"))
        .arg(data.join("policy-v1.yaml"))
        .arg(data.join("policy-v2.yaml"))
        .arg(data.join("flows.txt"));
    if let Some(k) = fail_at_write {
        command.env("PORIN_AGENT_FAIL_AT_WRITE", k.to_string());
    }
    command
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", binary.display()))
}

/// Checks an agent's output against `porin test`: every
/// `verdict vN SRC DST PROTO PORT kernel=K reference=R` line becomes a case
/// `expect: K` of a PolicyTest file with version N's policy and the example
/// inventory, and the policy-test runner (the engine of `porin test`,
/// reference evaluator) must pass all of them. Returns the number of cases.
pub fn check_verdicts_with_porin_test(output: &str, name: &str) -> usize {
    use porin_policytest::{Reference, run};
    let data = example_data();
    let dir = scratch(name);
    let inventory = std::fs::read_to_string(data.join("inventory.yaml")).expect("inventory");
    let endpoints = inventory
        .split_once("endpoints:")
        .map(|(_, rest)| rest)
        .expect("inventory lists endpoints");
    let mut total = 0;
    for version in ["v1", "v2"] {
        let policy = format!("policy-{version}.yaml");
        std::fs::copy(data.join(&policy), dir.join(&policy)).expect("copy policy");
        let mut cases = String::new();
        for line in output.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() != 8 || fields[0] != "verdict" || fields[1] != version {
                continue;
            }
            let kernel = fields[6].strip_prefix("kernel=").expect("kernel=");
            let reference = fields[7].strip_prefix("reference=").expect("reference=");
            assert_eq!(kernel, reference, "agent disagrees with itself: {line}");
            let port = match fields[4] {
                "icmp" => format!("icmpType: {}", fields[5]),
                _ => format!("port: {}", fields[5]),
            };
            cases.push_str(&format!(
                "  - {{from: \"{}\", to: \"{}\", protocol: {}, {port}, expect: {kernel}}}\n",
                fields[2],
                fields[3],
                fields[4].to_uppercase()
            ));
            total += 1;
        }
        assert!(!cases.is_empty(), "no {version} verdicts in:\n{output}");
        let test = format!(
            "kind: PolicyTest\nname: {name} {version}\nendpoints:{endpoints}\npolicies:\n  - path: {policy}\ncases:\n{cases}"
        );
        let path = dir.join(format!("{version}.test.yaml"));
        std::fs::write(&path, test).expect("write test file");
        let report = run(&[path], &mut Reference);
        assert!(
            report.errors.is_empty() && report.failed == 0 && report.passed > 0,
            "porin test disagrees with the agent ({version}):\n{}\n{:?}",
            report.lines.join("\n"),
            report.errors
        );
    }
    total
}
