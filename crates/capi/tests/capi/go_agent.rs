//! Builds `examples/go-agent` (Go 1.19, cgo with `libporin.a`, Debian's
//! cilium/ebpf 0.9.1 through `replace`, no network) and runs it as root;
//! its verdicts must equal those of `porin test` (same flows and policies
//! as the C agent).

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// Builds the Go agent once for every test of this file; `None` (with a
/// SKIPPED line, or a failure in CI) when a prerequisite is missing.
fn go_agent() -> Option<&'static PathBuf> {
    static BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();
    BINARY.get_or_init(build_go_agent).as_ref()
}

fn build_go_agent() -> Option<PathBuf> {
    if !common::have("gcc") {
        common::skip("gcc is not installed (cgo)");
        return None;
    }
    if Command::new("go").arg("version").output().is_err() {
        common::skip("go is not installed (golang-go)");
        return None;
    }
    if !std::path::Path::new("/usr/share/gocode/src/github.com/cilium/ebpf/go.mod").exists() {
        common::skip("golang-github-cilium-ebpf-dev is not installed");
        return None;
    }
    if let Err(reason) = common::can_bpf() {
        common::skip(&reason);
        return None;
    }
    let lib = common::build_libporin();
    let root = common::workspace_root();
    let scratch = common::scratch("go-agent");
    let binary = scratch.join("go-agent");
    let output = Command::new("go")
        .current_dir(root.join("examples/go-agent"))
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=mod")
        .env("GOSUMDB", "off")
        .env("GOCACHE", scratch.join("gocache"))
        .env("GOPATH", scratch.join("gopath"))
        .env("CGO_ENABLED", "1")
        .env(
            "CGO_CFLAGS",
            format!("-I{}", root.join("include").display()),
        )
        .env(
            "CGO_LDFLAGS",
            format!("{} {}", lib.display(), common::NATIVE_LIBS.join(" ")),
        )
        .output()
        .expect("run go build");
    assert!(
        output.status.success(),
        "building the Go agent failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(binary)
}

#[test]
fn go_agent_verdicts_match_porin_test() {
    let Some(binary) = go_agent() else {
        return;
    };
    let output = common::run_example_agent(binary, None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "Go agent failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("0 mismatch(es)"), "{stdout}");
    assert!(stdout.contains("diff shop/api:"), "{stdout}");
    let cases = common::check_verdicts_with_porin_test(&stdout, "go-agent");
    assert_eq!(cases, 24, "{stdout}");
}

/// Issue #8, faults while applying, for the Go twin of the C agent
/// (cilium/ebpf): write K of the difference fails; the agent undoes the
/// writes before it, the live map equals v1 again, v1's verdicts hold in
/// the kernel (0 mismatches against the reference) and it exits 3.
#[test]
fn go_agent_rolls_back_a_difference_that_fails_part_way() {
    let Some(binary) = go_agent() else {
        return;
    };
    for k in [0, 1, 3] {
        let output = common::run_example_agent(binary, Some(k));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "K={k}:\n{stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!("the {k} write(s) before it were rolled back")),
            "K={k}:\n{stderr}"
        );
        assert!(
            stdout.contains("rollback shop/api: live map equals v1"),
            "K={k}:\n{stdout}"
        );
        assert!(stdout.contains("v1 stays in force"), "K={k}:\n{stdout}");
        assert!(stdout.contains("\n0 mismatch(es)"), "K={k}:\n{stdout}");
        assert!(
            !stdout.contains("verdict v2 "),
            "K={k}: v2 verdicts after a rollback"
        );
    }
}
