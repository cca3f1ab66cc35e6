//! `porin lint --context`, `--inventory -` and the machine formats without
//! the PM008 notes: the options the pre-commit hook and the Action rely on.
//! Data: `data/context/` (egress.yaml alone reports PR014; with dns.yaml the
//! set does not; open.yaml has its own PR012).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::dist::Scratch;
use crate::common::{porin, workspace};

const DATA: &str = "crates/cli/tests/cli/data/context";

fn lint(args: &[&str]) -> (i32, String, String) {
    let mut full = vec!["lint"];
    full.extend_from_slice(args);
    let output = porin(&full);
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn data(path: &str) -> String {
    format!("{DATA}/{path}")
}

/// `porin ARGS...` with `input` on standard input.
fn porin_stdin(args: &[&str], input: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(workspace())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("porin runs");
    let written = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes());
    // porin may refuse before it reads (stdin named twice): a closed pipe.
    if let Err(error) = written {
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::BrokenPipe,
            "write stdin: {error}"
        );
    }
    let output = child.wait_with_output().expect("porin exits");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_file_linted_alone_reports_what_its_context_resolves() {
    let inventory = data("inventory.yaml");
    let egress = data("policies/egress.yaml");
    let alone = lint(&[&egress, "--inventory", &inventory, "--fail-on", "warning"]);
    assert_eq!(alone.0, 1, "{alone:?}");
    assert!(alone.1.contains("warning[PR014]"), "{}", alone.1);

    let policies = data("policies");
    let with = lint(&[
        &egress,
        "--inventory",
        &inventory,
        "--context",
        &policies,
        "--fail-on",
        "warning",
    ]);
    assert_eq!(with.0, 0, "{with:?}");
    assert!(!with.1.contains("PR014"), "{}", with.1);
    assert!(with.1.contains("2 valid policies loaded"), "{}", with.1);
}

#[test]
fn findings_in_context_files_are_not_reported_but_in_named_files_are() {
    let inventory = data("inventory.yaml");
    let open = data("open.yaml");
    let policies = data("policies");
    let egress = data("policies/egress.yaml");
    // open.yaml's PR012 as context: not reported.
    let (code, out, err) = lint(&[
        &egress,
        "--inventory",
        &inventory,
        "--context",
        &policies,
        "--context",
        &open,
        "--fail-on",
        "warning",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let findings: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(findings.as_array().map(Vec::len), Some(0), "{out}");
    // The same file named as PATH (and also under a context directory, in
    // another spelling): reported once, not loaded twice (no PM042).
    let dotted = format!("./{open}");
    let (code, out, err) = lint(&[
        &open,
        "--inventory",
        &inventory,
        "--context",
        &dotted,
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let findings: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let codes: Vec<&str> = findings
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|d| d["code"].as_str())
        .collect();
    assert_eq!(codes, ["PR012"], "{out}");
}

#[test]
fn an_invalid_context_file_is_still_an_error() {
    let scratch = Scratch::new("lint-context-invalid");
    let egress =
        std::fs::read_to_string(workspace().join(data("policies/egress.yaml"))).expect("egress");
    let broken = scratch.join("broken.yaml");
    std::fs::write(
        &broken,
        egress
            .replace("frontend-egress", "broken")
            .replace("port: \"8080\"", "port: 8080"),
    )
    .expect("write");
    let broken = broken.display().to_string();
    let (code, out, err) = lint(&[&data("policies/dns.yaml"), "--context", &broken]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("broken.yaml:"), "{out}");
    let (code, _, err) = lint(&[&data("policies/dns.yaml"), "--context", "no/such/dir"]);
    assert_eq!(code, 2);
    assert!(err.contains("no/such/dir"), "{err}");
}

#[test]
fn the_inventory_can_come_from_standard_input() {
    let text =
        std::fs::read_to_string(workspace().join(data("inventory.yaml"))).expect("inventory");
    let egress = data("policies/egress.yaml");
    let (code, out, err) = porin_stdin(
        &["lint", &egress, "--inventory", "-", "--fail-on", "warning"],
        &text,
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("PR014"), "the inventory was read: {out}{err}");

    let policies = data("policies");
    let (code, out, err) = porin_stdin(
        &[
            "compile",
            &policies,
            "--inventory",
            "-",
            "--endpoint",
            "shop/frontend",
            "--format",
            "table",
        ],
        &text,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("shop/frontend"), "{out}");

    let (code, out, err) = porin_stdin(
        &[
            "query",
            "--from",
            "shop/frontend",
            "--to",
            "shop/api",
            "--port",
            "8080/tcp",
            "--inventory",
            "-",
            &policies,
        ],
        &text,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("allow"), "{out}");

    // Standard input once only.
    let (code, _, err) = porin_stdin(&["lint", "-", "--inventory", "-"], &text);
    assert_eq!(code, 2);
    assert!(err.contains("can be read once"), "{err}");
    let (code, _, err) = porin_stdin(&["diff", &policies, &policies, "--inventory", "-"], &text);
    assert_eq!(code, 2);
    assert!(err.contains("not `-`"), "{err}");
}

#[test]
fn machine_formats_leave_skipped_documents_out_unless_verbose() {
    let scratch = Scratch::new("lint-skipped");
    let file = scratch.join("app.yaml");
    std::fs::write(
        &file,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n\
         apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: d}\n\
         spec:\n  endpointSelector: {}\n  ingress: [{fromEntities: [world]}]\n",
    )
    .expect("write");
    let file = file.display().to_string();
    for format in ["sarif", "github", "junit", "json"] {
        let (code, out, err) = lint(&[&file, "--format", format]);
        assert_eq!(code, 0, "{format}: {out}{err}");
        assert!(!out.contains("PM008"), "{format} without -v:\n{out}");
        let (code, out, err) = lint(&[&file, "--format", format, "-v"]);
        assert_eq!(code, 0, "{format}: {out}{err}");
        assert!(out.contains("PM008"), "{format} with -v:\n{out}");
    }
}
