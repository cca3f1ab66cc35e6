//! Two documents naming one object (issue 12, item 5): two CNPs
//! `default/s2`, one allowing TCP/80 and one TCP/443, in two files of a
//! directory. A cluster keeps one of them; applying both allows both ports.
//! Every command refuses the set like any other invalid policy: `lint`
//! reports PM042 at both places (exit 1), `compile`, `query` and `test`
//! load nothing and exit 2 (the C API session: `tests/c/suite.c`
//! `check_duplicate_policy`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on I/O errors"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cnp(port: u16) -> String {
    format!(
        "apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: s2
  namespace: default
spec:
  endpointSelector: {{matchLabels: {{app: s2}}}}
  ingress:
  - toPorts: [{{ports: [{{port: \"{port}\", protocol: TCP}}]}}]
"
    )
}

const INVENTORY: &str = "kind: Inventory
endpoints:
  - {name: s2, namespace: default, labels: {app: s2}, ips: [10.0.0.2]}
  - {name: client, namespace: default, labels: {app: client}, ips: [10.0.0.3]}
";

/// A fresh directory with `policies/a.yaml` (TCP/80),
/// `policies/more/b.yaml` (TCP/443), `inventory.yaml` and a policy test.
fn setup(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-cli-dup-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("policies/more")).unwrap();
    std::fs::write(dir.join("policies/a.yaml"), cnp(80)).unwrap();
    std::fs::write(dir.join("policies/more/b.yaml"), cnp(443)).unwrap();
    std::fs::write(dir.join("inventory.yaml"), INVENTORY).unwrap();
    std::fs::write(
        dir.join("s2-test.yaml"),
        format!(
            "kind: PolicyTest
{}policies:
  - path: policies/a.yaml
  - inline: |
{}cases:
  - {{from: default/client, to: default/s2, port: 443, expect: deny}}
",
            INVENTORY.trim_start_matches("kind: Inventory\n"),
            cnp(443)
                .lines()
                .map(|l| format!("      {l}\n"))
                .collect::<String>()
        ),
    )
    .unwrap();
    dir
}

fn porin(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("porin runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn lint_reports_both_copies() {
    let dir = setup("lint");
    let out = porin(&dir, &["lint", "policies"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "error[PM042]: CiliumNetworkPolicy `default/s2` is defined twice (first at policies/a.yaml:4)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("--> policies/more/b.yaml:4:9 (document 0)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("--> policies/a.yaml:4:9 (document 0)"),
        "{stdout}"
    );
    // The same with the files named one by one.
    let out = porin(&dir, &["lint", "policies/a.yaml", "policies/more/b.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("error[PM042]"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compile_and_query_refuse_the_set() {
    let dir = setup("compile");
    let out = porin(
        &dir,
        &["compile", "policies", "--inventory", "inventory.yaml"],
    );
    // An invalid policy set is a finding (exit 1), not a failure to run.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("error[PM042]"));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let out = porin(
        &dir,
        &[
            "query",
            "--from",
            "default/client",
            "--to",
            "default/s2",
            "--port",
            "443",
            "policies",
            "--inventory",
            "inventory.yaml",
        ],
    );
    // An invalid policy set is a finding (exit 1), not a failure to run.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("error[PM042]"));
    assert!(
        !text(&out.stdout).contains("allow"),
        "{}",
        text(&out.stdout)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_policy_test_with_both_copies_is_refused_as_invalid() {
    let dir = setup("test");
    let out = porin(&dir, &["test", "s2-test.yaml"]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    // Its policies do not validate: a finding (exit 1), as in every command.
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("error[PM042]"), "{all}");
    assert!(all.contains("s2-test.yaml#policies[1]"), "{all}");
    assert!(!all.contains("PASS"), "{all}");
    std::fs::remove_dir_all(&dir).unwrap();
}
