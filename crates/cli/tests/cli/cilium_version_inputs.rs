//! The Cilium version as an input besides `porin lint --cilium-version`
//! (issue 21): `porin test --cilium-version` overriding a PolicyTest
//! file's `ciliumVersion`, and `ciliumVersion` /
//! `enableK8sClusterNetworkPolicy` of a porin inventory file. The policy
//! is a ClusterNetworkPolicy, which Cilium 1.20 compiles behind
//! `--enable-k8s-cluster-network-policy` (pkg/k8s/cluster_network_policy.go)
//! and 1.19 does not know.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/policy-tests/tiers/admin-deny-over-networkpolicy.yaml")
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-inputs-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn porin(args: &[&str], paths: &[&Path]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .args(paths)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The tiers fixture with its target lines replaced by `header`.
fn retargeted(tag: &str, header: &str) -> PathBuf {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let text = text
        .replace("ciliumVersion: \"1.20\"\n", "")
        .replace("enableK8sClusterNetworkPolicy: true\n", "");
    assert!(
        !text.contains("ciliumVersion"),
        "the fixture's target lines moved"
    );
    let text = text.replacen(
        "kind: PolicyTest\n",
        &format!("kind: PolicyTest\n{header}"),
        1,
    );
    let path = temp_dir(tag).join("tiers.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn test_cilium_version_flag_overrides_the_files_version() {
    // The file asks for 1.20 with the switch: its cases pass.
    let (code, stdout, stderr) = porin(&["test"], &[&fixture()]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    // --cilium-version 1.19 wins over the file's 1.20: the policy is refused.
    let (code, stdout, stderr) = porin(&["test", "--cilium-version", "1.19"], &[&fixture()]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("ClusterNetworkPolicy"), "{stderr}");
    assert!(stderr.contains("the policies do not validate"), "{stderr}");
}

#[test]
fn test_flags_supply_what_the_file_leaves_out() {
    // No target in the file: 1.19 by default, the policy is refused.
    let bare = retargeted("bare", "");
    let (code, stdout, stderr) = porin(&["test"], &[&bare]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("ClusterNetworkPolicy"), "{stderr}");
    // 1.20 without the switch: refused, naming the flag.
    let (code, stdout, stderr) = porin(&["test", "--cilium-version", "1.20"], &[&bare]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("--enable-k8s-cluster-network-policy"),
        "{stderr}"
    );
    // Both on the command line: every case passes.
    let (code, stdout, stderr) = porin(
        &[
            "test",
            "--cilium-version",
            "1.20",
            "--enable-k8s-cluster-network-policy",
        ],
        &[&bare],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("5 passed"), "{stdout}");
    // The file's 1.20 with the switch from the command line.
    let version_only = retargeted("version-only", "ciliumVersion: \"1.20\"\n");
    let (code, stdout, stderr) = porin(
        &["test", "--enable-k8s-cluster-network-policy"],
        &[&version_only],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
}

#[test]
fn test_an_unmodelled_version_is_a_usage_error() {
    let (code, _, stderr) = porin(&["test", "--cilium-version", "1.18"], &[&fixture()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("1.19") && stderr.contains("1.20"),
        "{stderr}"
    );
}
