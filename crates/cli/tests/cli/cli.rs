//! The `porin` binary: exit codes (0 clean, 1 findings, 2 could not run),
//! formats, stdin, and `porin schema`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn porin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("porin runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}

#[test]
fn clean_examples_exit_zero() {
    let output = porin(&["lint", "fixtures/examples"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    insta::assert_snapshot!(stdout(&output), @r"
    0 errors, 0 warnings
    5 valid policies loaded
    ");
}

#[test]
fn invalid_policy_exits_one_with_located_error() {
    let output = porin(&["lint", "fixtures/invalid/PM004-unquoted-port.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(stdout(&output), @r#"
    error[PM004]: expected a string, found integer `8080`
      --> fixtures/invalid/PM004-unquoted-port.yaml:14:15 (document 0)
       |
    14 |       - port: 8080
       |               ^^^^
       = at: spec.ingress[0].toPorts[0].ports[0].port
       = note: Cilium's rule checks were not run on this document: fix its structure first
       = help: the field is a string; quote the value: "8080"

    1 error, 0 warnings
    0 valid policies loaded
    "#);
}

#[test]
fn invalid_yaml_is_an_error_finding() {
    let output = porin(&["lint", "fixtures/invalid/PM001-yaml-syntax.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("error[PM001]"));
}

#[test]
fn several_files_report_every_error() {
    let output = porin(&[
        "lint",
        "fixtures/invalid/PM018-bare-ip.yaml",
        "fixtures/examples/web-ingress.yaml",
        "fixtures/invalid/PM016-l3-mixing.yaml",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(
        text.contains("error[PM018]") && text.contains("error[PM016]"),
        "{text}"
    );
    assert!(
        text.contains("2 errors, 0 warnings\n1 valid policy loaded"),
        "{text}"
    );
}

#[test]
fn unreadable_path_exits_two() {
    let output = porin(&["lint", "fixtures/does-not-exist.yaml"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read `fixtures/does-not-exist.yaml`"),
        "{stderr}"
    );
}

#[test]
fn bad_arguments_exit_two() {
    assert_eq!(porin(&["lint"]).status.code(), Some(2));
    assert_eq!(
        porin(&["lint", "--format", "xml", "x"]).status.code(),
        Some(2)
    );
    assert_eq!(porin(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn json_format_is_an_array_of_diagnostics() {
    let output = porin(&[
        "lint",
        "--format",
        "json",
        "fixtures/invalid/PM031-from-requires.yaml",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let value: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("valid JSON");
    let diagnostics = value.as_array().expect("an array");
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0]["code"], "PM031");
    assert_eq!(diagnostics[0]["primary"]["line"], 12);
    assert_eq!(
        diagnostics[0]["primary"]["route"],
        "spec.ingress[0].fromRequires"
    );
}

#[test]
fn reads_standard_input() {
    let text =
        std::fs::read(workspace().join("fixtures/invalid/PM023-lowercase-protocol.yaml")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(["lint", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &text).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("--> <stdin>:15:19"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn mixed_manifests_skip_other_kinds_with_a_note() {
    let dir = std::env::temp_dir().join(format!("porin-cli-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("app.yml");
    std::fs::write(
        &file,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n\
         apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: d}\n\
         spec:\n  endpointSelector: {}\n  ingress: [{fromEntities: [world]}]\n",
    )
    .unwrap();
    let quiet = porin(&["lint", dir.to_str().unwrap()]);
    assert_eq!(quiet.status.code(), Some(0));
    assert!(!stdout(&quiet).contains("PM008"));
    let verbose = porin(&["lint", "-v", dir.to_str().unwrap()]);
    let text = stdout(&verbose);
    assert!(
        text.contains("info[PM008]: skipped: `Deployment` is not a policy kind"),
        "{text}"
    );
    assert!(text.contains("1 valid policy loaded"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn schema_command_prints_the_committed_schema() {
    let output = porin(&["schema"]);
    assert_eq!(output.status.code(), Some(0));
    let committed = std::fs::read_to_string(workspace().join("schema/policy.schema.json")).unwrap();
    assert_eq!(stdout(&output), committed);
}
