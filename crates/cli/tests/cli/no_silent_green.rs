//! No silent green: a test file that cannot be loaded shows in the summary
//! line, its parse error reads like `porin lint`'s, `porin query` reads a
//! PolicyTest file with its policies and endpoints instead of answering
//! `allow` as if no policy existed, input without any policy is refused,
//! and an invalid policy is a finding (exit 1), not a failure to run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::common::{porin, workspace};

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-green-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn porin_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

const REJECTED: &str = "kind: PolicyTest
endpoints:
  - name: web
    labels: {app: web}
    replicas: 3
cases:
  - {from: web, to: world, port: 80, expect: allow}
";

#[test]
fn a_rejected_test_file_is_counted_and_rendered_like_lint() {
    let dir = scratch("rejected");
    std::fs::write(dir.join("rejected.yaml"), REJECTED).unwrap();
    let quickstart = workspace().join("examples/quickstart/shop.policytest.yaml");
    let out = porin_in(
        &dir,
        &["test", quickstart.to_str().unwrap(), "rejected.yaml"],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert_eq!(
        stdout.lines().last(),
        Some("11 passed, 0 failed, 1 file rejected"),
        "{stdout}"
    );
    // The lint format: code, message, the location once, the source line.
    insta::assert_snapshot!("rejected_test_file", stderr);
    assert_eq!(stderr.matches("rejected.yaml:5:5").count(), 1, "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `porin query` of shop/api -> shop/db TCP/9060 with `inputs`.
fn query_api_db(inputs: &[&str]) -> Output {
    let mut args = vec![
        "query", "--from", "shop/api", "--to", "shop/db", "--port", "9060",
    ];
    args.extend_from_slice(inputs);
    porin(&args)
}

#[test]
fn query_reads_a_policy_test_file_with_its_policies_and_endpoints() {
    let file = "examples/quickstart/shop.policytest.yaml";
    // A case the file expects `deny` for: the file's policies decide it.
    let out = query_api_db(&[file]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("deny: shop/api -> shop/db TCP/9060"),
        "{stdout}"
    );
    assert!(stdout.contains("spec.ingressDeny[0]"), "{stdout}");
    // The same answer as from its policies and an inventory.
    let inventory = ["--inventory", "examples/quickstart/inventory.yaml"];
    let via_inventory = query_api_db(&["examples/quickstart/policies", inventory[0], inventory[1]]);
    assert_eq!(via_inventory.status.code(), Some(1));
    assert_eq!(
        text(&via_inventory.stdout).lines().next(),
        stdout.lines().next()
    );
    // With --inventory as well, porin refuses to pick one.
    let out = query_api_db(&[file, inventory[0], inventory[1]]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("drop --inventory"));
}

#[test]
fn query_refuses_input_without_policies_unless_asked() {
    let dir = scratch("empty");
    std::fs::write(
        dir.join("notes.yaml"),
        "kind: ConfigMap\nmetadata: {name: x}\n",
    )
    .unwrap();
    let inventory = workspace().join("examples/quickstart/inventory.yaml");
    let args = [
        "query",
        "--from",
        "shop/frontend",
        "--to",
        "shop/db",
        "--port",
        "5432",
        "notes.yaml",
        "--inventory",
        inventory.to_str().unwrap(),
    ];
    let out = porin_in(&dir, &args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("no policy loaded from `notes.yaml`"),
        "{}",
        text(&out.stderr)
    );
    let mut allowed = args.to_vec();
    allowed.push("--allow-empty");
    let out = porin_in(&dir, &allowed);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("allow: "));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_invalid_policy_exits_one_in_compile_and_query() {
    let dir = scratch("invalid");
    std::fs::write(
        dir.join("bad.yaml"),
        "apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: bad, namespace: shop}
spec:
  endpointSelector: {matchLabels: {app: db}}
  ingress:
  - toPorts:
    - ports:
      - port: 5432
        protocol: TCP
",
    )
    .unwrap();
    let inventory = workspace().join("examples/quickstart/inventory.yaml");
    let inventory = inventory.to_str().unwrap();
    let out = porin_in(&dir, &["compile", "bad.yaml", "--inventory", inventory]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("bad.yaml:9:"),
        "{}",
        text(&out.stderr)
    );
    let out = porin_in(
        &dir,
        &[
            "query",
            "--from",
            "shop/api",
            "--to",
            "shop/db",
            "--port",
            "5432",
            "bad.yaml",
            "--inventory",
            inventory,
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    // A path that does not exist: porin could not run.
    let out = porin_in(&dir, &["compile", "missing.yaml", "--inventory", inventory]);
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}
