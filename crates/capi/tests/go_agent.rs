//! Builds `examples/go-agent` (Go 1.19, cgo with `libporin.a`, Debian's
//! cilium/ebpf 0.9.1 through `replace`, no network) and runs it as root;
//! its verdicts must equal those of `porin test` (same flows and policies
//! as the C agent).

mod common;

use std::process::Command;

#[test]
fn go_agent_verdicts_match_porin_test() {
    if !common::have("gcc") {
        common::skip("gcc is not installed (cgo)");
        return;
    }
    if Command::new("go").arg("version").output().is_err() {
        common::skip("go is not installed (golang-go)");
        return;
    }
    if !std::path::Path::new("/usr/share/gocode/src/github.com/cilium/ebpf/go.mod").exists() {
        common::skip("golang-github-cilium-ebpf-dev is not installed");
        return;
    }
    if let Err(reason) = common::can_bpf() {
        common::skip(&reason);
        return;
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
    let data = common::example_data();
    let output = Command::new(&binary)
        .arg(data.join("inventory.yaml"))
        .arg(data.join("policy-v1.yaml"))
        .arg(data.join("policy-v2.yaml"))
        .arg(data.join("flows.txt"))
        .output()
        .expect("run the Go agent");
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
