//! `porin diff` (human, json, markdown; directories and git revisions) and
//! `porin graph` (DOT) over the lint fixtures.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

const INVENTORY: &str = "fixtures/lint/inventory.yaml";

#[test]
fn diff_lists_flows_that_change_in_every_format() {
    let old = "fixtures/lint/PR014_egress_blocks_dns/trigger.yaml";
    let new = "fixtures/lint/PR014_egress_blocks_dns/near_miss.yaml";
    for format in ["human", "json", "markdown"] {
        let out = porin(&[
            "diff",
            old,
            new,
            "--inventory",
            INVENTORY,
            "--format",
            format,
            "--per-direction",
        ]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        insta::assert_snapshot!(
            format!("diff_dns_{format}"),
            String::from_utf8(out.stdout).unwrap()
        );
    }
    // A deny added: flows become denied, and the map shrinks.
    let out = porin(&[
        "diff",
        "fixtures/lint/PR004_allow_shadowed_by_deny/near_miss.yaml",
        "fixtures/lint/PR004_allow_shadowed_by_deny/trigger.yaml",
        "--inventory",
        INVENTORY,
        "--per-direction",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("- ingress from default/api: now denied TCP/80"),
        "{text}"
    );
}

#[test]
fn diff_of_identical_sets_is_empty_and_exits_zero() {
    let dir = "fixtures/lint/PR006_deny_bypass";
    let out = porin(&["diff", dir, dir, "--inventory", INVENTORY]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "no connectivity change\n"
    );
}

#[test]
fn diff_reads_git_revisions() {
    // Only meaningful inside a git checkout (CI clones the repository).
    let inside = Command::new("git")
        .args(["rev-parse", "--is-inside-work-tree"])
        .current_dir(workspace())
        .output()
        .is_ok_and(|o| o.status.success());
    if !inside {
        println!("SKIPPED: not a git work tree");
        return;
    }
    let dir = "fixtures/lint/PR001_map_capacity_exceeded";
    let rev_path = format!("HEAD:{dir}");
    let committed = Command::new("git")
        .args(["cat-file", "-e", &rev_path])
        .current_dir(workspace())
        .status()
        .is_ok_and(|s| s.success());
    if !committed {
        println!("SKIPPED: {dir} is not committed yet");
        return;
    }
    let out = porin(&["diff", &rev_path, dir, "--inventory", INVENTORY]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = porin(&[
        "diff",
        "no-such-rev-xyz:fixtures",
        dir,
        "--inventory",
        INVENTORY,
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn graph_writes_dot() {
    let out = porin(&[
        "graph",
        "fixtures/lint/PR014_egress_blocks_dns/near_miss.yaml",
        "--inventory",
        INVENTORY,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dot = String::from_utf8(out.stdout).unwrap();
    assert!(dot.starts_with("digraph porin {"));
    insta::assert_snapshot!("graph_dns", dot);
}

fn git_in(repo: &Path, args: &[&str]) {
    let status = Command::new("git")
        .current_dir(repo)
        .args([
            "-c",
            "user.name=porin",
            "-c",
            "user.email=porin@example.invalid",
        ])
        .args(args)
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

fn web_policy(port: &str) -> String {
    format!(
        "apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {{name: web, namespace: default}}
spec:
  endpointSelector: {{matchLabels: {{app: web}}}}
  ingress:
  - fromEndpoints: [{{matchLabels: {{app: api}}}}]
    toPorts:
    - ports:
      - port: {port}
        protocol: TCP
"
    )
}

/// `REV:PATH` is read from git into memory (issue 12, item 8): a change
/// against the work tree is found, and a finding in the old revision is
/// located as `REV:path:line:column` in porin's output.
#[test]
fn diff_of_a_revision_reads_blobs_and_names_them() {
    let repo = std::env::temp_dir().join(format!("porin-cli-diff-git-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&repo);
    std::fs::create_dir_all(repo.join("policies")).unwrap();
    std::fs::copy(workspace().join(INVENTORY), repo.join("inventory.yaml")).unwrap();
    std::fs::write(repo.join("policies/web.yaml"), web_policy("\"80\"")).unwrap();
    git_in(&repo, &["init", "-q"]);
    git_in(&repo, &["add", "."]);
    git_in(&repo, &["commit", "-q", "-m", "port 80"]);
    std::fs::write(repo.join("policies/web.yaml"), web_policy("\"443\"")).unwrap();
    let run = |old: &str| {
        Command::new(env!("CARGO_BIN_EXE_porin"))
            .args(["diff", old, "policies", "--inventory", "inventory.yaml"])
            .current_dir(&repo)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let out = run("HEAD:policies");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("default/api → default/web: TCP/80 → TCP/443"),
        "{stdout}"
    );

    // An invalid policy in the old revision: located in the blob.
    std::fs::write(repo.join("policies/web.yaml"), web_policy("8080")).unwrap();
    git_in(&repo, &["commit", "-q", "-a", "-m", "unquoted port"]);
    let out = run("HEAD:policies");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--> HEAD:policies/web.yaml:10:15 (document 0)"),
        "{stderr}"
    );
    assert!(stderr.contains("10 |       - port: 8080"), "{stderr}");
    std::fs::remove_dir_all(&repo).unwrap();
}
