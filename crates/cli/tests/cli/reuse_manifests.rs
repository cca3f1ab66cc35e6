//! Reusing the manifests in `porin test` (issue 17): a test file's workloads
//! come from the release manifests, through the file's `inventory:` field or
//! `porin test --inventory PATH`, merged with its own `endpoints` (an
//! endpoint defined twice is an error); and a test file whose policy is
//! invalid is a finding (exit 1), not a failure to run (exit 2).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::workspace;

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-reuse-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn porin_test(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_porin"))
        .arg("test")
        .args(args)
        .current_dir(workspace())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn boutique(rel: &str) -> String {
    workspace()
        .join("examples/boutique")
        .join(rel)
        .to_str()
        .unwrap()
        .to_owned()
}

/// A file without endpoints: its workloads are the boutique's Deployments.
fn write_without_endpoints(dir: &Path) -> PathBuf {
    let file = dir.join("checkout.yaml");
    std::fs::write(
        &file,
        format!(
            "kind: PolicyTest
policies:
  - path: {}
cases:
  - {{from: default/frontend, to: default/checkoutservice, port: 5050, expect: allow}}
  - {{from: default/cartservice, to: default/checkoutservice, port: 5050, expect: deny}}
",
            boutique("policies/checkoutservice.yaml")
        ),
    )
    .unwrap();
    file
}

#[test]
fn the_inventory_field_reads_the_boutique_manifests() {
    let out = porin_test(&["examples/boutique/tests"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "PASS examples/boutique/tests/checkout.test.yaml: default/frontend -> default/checkoutservice TCP/5050 => allow
PASS examples/boutique/tests/checkout.test.yaml: default/cartservice -> default/checkoutservice TCP/5050 => deny
2 passed, 0 failed
"
    );
}

#[test]
fn the_inventory_flag_gives_a_test_file_its_workloads() {
    let dir = scratch("flag");
    let file = write_without_endpoints(&dir);
    let file = file.to_str().unwrap();
    // Without the manifests the workloads are unknown: the file is refused.
    let out = porin_test(&[file]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("default/frontend"),
        "{}",
        text(&out.stderr)
    );
    let manifests = boutique("manifests.yaml");
    let out = porin_test(&[file, "--inventory", &manifests]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).ends_with("2 passed, 0 failed\n"),
        "{}",
        text(&out.stdout)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_endpoint_in_the_file_and_in_the_inventory_is_a_duplicate() {
    let dir = scratch("duplicate");
    let file = dir.join("dup.yaml");
    std::fs::write(
        &file,
        "kind: PolicyTest
endpoints:
  - {name: frontend, namespace: default, labels: {app: frontend}}
policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {name: x, namespace: default}
      spec:
        endpointSelector: {}
cases:
  - {from: default/frontend, to: default/checkoutservice, port: 5050, expect: deny}
",
    )
    .unwrap();
    let manifests = boutique("manifests.yaml");
    let out = porin_test(&[file.to_str().unwrap(), "--inventory", &manifests]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("manifests.yaml:15: duplicate endpoint `default/frontend`")
            && stderr.contains("dup.yaml:3"),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("1 file rejected"));
    std::fs::remove_dir_all(&dir).unwrap();
}

const INVALID: &str = "kind: PolicyTest
endpoints:
  - {name: db, namespace: shop, labels: {app: db}}
policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {name: bad, namespace: shop}
      spec:
        endpointSelector: {}
        ingress:
        - toPorts:
          - ports:
            - port: 5432
              protocol: TCP
cases:
  - {from: shop/db, to: shop/db, port: 5432, expect: allow}
";

#[test]
fn a_test_file_with_an_invalid_policy_exits_one() {
    let dir = scratch("invalid");
    std::fs::write(dir.join("bad.yaml"), INVALID).unwrap();
    let bad = dir.join("bad.yaml");
    let out = porin_test(&[bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the policies do not validate") && stderr.contains("error[PM004]"),
        "{stderr}"
    );
    assert_eq!(text(&out.stdout), "0 passed, 0 failed, 1 file rejected\n");
    // A file that cannot run at all beside it still makes the run exit 2.
    std::fs::write(dir.join("unreadable.yaml"), "kind: PolicyTest\ncases: 3\n").unwrap();
    let out = porin_test(&[
        bad.to_str().unwrap(),
        dir.join("unreadable.yaml").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
