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
    assert!(stdout.contains("6 passed"), "{stdout}");
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

// ---- `ciliumVersion` / `enableK8sClusterNetworkPolicy` of a porin
// inventory file, read by every command that loads an inventory.
// Precedence: flag > inventory > `.porin.yaml` > default (1.19, off).

const INVENTORY_TARGET: &str = "ciliumVersion: \"1.20\"\nenableK8sClusterNetworkPolicy: true\n";

/// An Admin Deny from slytherin to gryffindor: Cilium 1.20 with the switch
/// enforces it (the network-policy-api conformance case
/// admin-network-policy-core-integration "Should Deny traffic from
/// slytherin to gryffindor respecting ANP").
const CLUSTER_POLICY: &str = r#"apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: deny-slytherin}
spec:
  tier: Admin
  priority: 10
  subject:
    namespaces: {matchLabels: {house: gryffindor}}
  ingress:
    - name: deny-from-slytherin
      action: Deny
      from: [{namespaces: {matchLabels: {house: slytherin}}}]
"#;

/// A directory with `policy.yaml` (the ClusterNetworkPolicy) and
/// `inventory.yaml` whose target keys are `target`.
fn inventory_case(tag: &str, target: &str) -> PathBuf {
    let dir = temp_dir(tag);
    std::fs::write(dir.join("policy.yaml"), CLUSTER_POLICY).unwrap();
    std::fs::write(
        dir.join("inventory.yaml"),
        format!(
            "kind: Inventory\n{target}namespaces:\n  gryffindor: {{house: gryffindor}}\n  slytherin: {{house: slytherin}}\nendpoints:\n  - {{name: harry-potter-0, namespace: gryffindor, labels: {{app: harry-potter}}}}\n  - {{name: draco-malfoy-0, namespace: slytherin, labels: {{app: draco-malfoy}}}}\n"
        ),
    )
    .unwrap();
    dir
}

/// `porin ARGS` run in `dir` (where a `.porin.yaml` may be).
fn porin_in(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_porin"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const QUERY: &[&str] = &[
    "query",
    "policy.yaml",
    "--inventory",
    "inventory.yaml",
    "--from",
    "slytherin/draco-malfoy-0",
    "--to",
    "gryffindor/harry-potter-0",
    "--port",
    "80",
];

/// `porin query` with `extra` flags: (exit code, stdout, stderr).
fn query(dir: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    porin_in(dir, &[QUERY, extra].concat())
}

fn assert_denied_by_the_tier(result: &(Option<i32>, String, String)) {
    let (code, stdout, stderr) = result;
    assert_eq!(*code, Some(1), "deny is exit 1\n{stdout}{stderr}");
    assert!(stdout.starts_with("deny:"), "{stdout}{stderr}");
    assert!(
        stdout.contains("[tier Admin, priority 10, Deny `deny-from-slytherin`]"),
        "{stdout}"
    );
    assert!(!stderr.contains("PM066"), "{stderr}");
}

fn assert_refused_naming_the_flag(result: &(Option<i32>, String, String)) {
    let (code, stdout, stderr) = result;
    assert_eq!(*code, Some(1), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "no verdict for a refused set: {stdout}");
    assert!(stderr.contains("error[PM066]"), "{stderr}");
    assert!(
        stderr.contains("--enable-k8s-cluster-network-policy"),
        "{stderr}"
    );
    assert!(stderr.contains("policy.yaml:2:7"), "{stderr}");
}

#[test]
fn inventory_cilium_version_enables_cluster_network_policy() {
    let dir = inventory_case("inv-on", INVENTORY_TARGET);
    assert_denied_by_the_tier(&query(&dir, &[]));
    // compile: the Admin Deny is an entry of harry-potter's ingress.
    let (code, stdout, stderr) = porin_in(
        &dir,
        &[
            "compile",
            "policy.yaml",
            "--inventory",
            "inventory.yaml",
            "--format",
            "table",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("deny"), "{stdout}");
    assert!(!stderr.contains("error"), "{stderr}");
    // lint, graph: the set validates (no PM066).
    for args in [
        &["lint", "policy.yaml", "--inventory", "inventory.yaml"][..],
        &["graph", "policy.yaml", "--inventory", "inventory.yaml"],
    ] {
        let (code, stdout, stderr) = porin_in(&dir, args);
        assert_eq!(code, Some(0), "{args:?}\n{stdout}{stderr}");
        assert!(
            !stdout.contains("PM066") && !stderr.contains("PM066"),
            "{args:?}\n{stdout}{stderr}"
        );
    }
    // diff: no policy before, the ClusterNetworkPolicy after: the flow
    // it denies is a change (exit 1), not a refusal (exit 2).
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let (code, stdout, stderr) = porin_in(
        &dir,
        &[
            "diff",
            "empty",
            "policy.yaml",
            "--inventory",
            "inventory.yaml",
        ],
    );
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("slytherin/draco-malfoy-0"), "{stdout}");
}

#[test]
fn without_the_inventory_keys_the_same_files_are_refused() {
    let dir = inventory_case("inv-off", "");
    assert_refused_naming_the_flag(&query(&dir, &[]));
    // 1.20 alone is not enough: the switch is off.
    let dir = inventory_case("inv-version-only", "ciliumVersion: \"1.20\"\n");
    let refused = query(&dir, &[]);
    assert_refused_naming_the_flag(&refused);
    assert!(
        refused.2.contains("Cilium 1.20 enforces it only with"),
        "{}",
        refused.2
    );
    for args in [
        &["lint", "policy.yaml", "--inventory", "inventory.yaml"][..],
        &["graph", "policy.yaml", "--inventory", "inventory.yaml"],
        &["compile", "policy.yaml", "--inventory", "inventory.yaml"],
    ] {
        let (code, stdout, stderr) = porin_in(&dir, args);
        assert_eq!(code, Some(1), "{args:?}\n{stdout}{stderr}");
        assert!(
            stdout.contains("PM066") || stderr.contains("PM066"),
            "{args:?}\n{stdout}{stderr}"
        );
    }
}

#[test]
fn the_flags_override_the_inventory_both_ways() {
    // The inventory turns it on; each flag turns it off again.
    let on = inventory_case("flags-on", INVENTORY_TARGET);
    let refused = query(&on, &["--cilium-version", "1.19"]);
    assert_refused_naming_the_flag(&refused);
    assert!(
        refused.2.contains("Cilium 1.19 does not implement it"),
        "{}",
        refused.2
    );
    assert_refused_naming_the_flag(&query(&on, &["--enable-k8s-cluster-network-policy=false"]));
    // The inventory says 1.19 and off; the flags turn it on.
    let off = inventory_case(
        "flags-off",
        "ciliumVersion: \"1.19\"\nenableK8sClusterNetworkPolicy: false\n",
    );
    assert_refused_naming_the_flag(&query(&off, &[]));
    assert_denied_by_the_tier(&query(
        &off,
        &[
            "--cilium-version",
            "1.20",
            "--enable-k8s-cluster-network-policy",
        ],
    ));
    // diff --cilium-version 1.19 refuses the new side, whatever the inventory says.
    std::fs::create_dir_all(on.join("empty")).unwrap();
    let (code, stdout, stderr) = porin_in(
        &on,
        &[
            "diff",
            "empty",
            "policy.yaml",
            "--inventory",
            "inventory.yaml",
            "--cilium-version",
            "1.19",
        ],
    );
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("PM066"), "{stderr}");
}

#[test]
fn the_inventory_wins_over_porin_yaml_which_wins_over_the_default() {
    // `.porin.yaml` says 1.19 and off, the inventory 1.20 and on.
    let dir = inventory_case("config-below", INVENTORY_TARGET);
    std::fs::write(
        dir.join(".porin.yaml"),
        "ciliumVersion: \"1.19\"\nenableK8sClusterNetworkPolicy: false\n",
    )
    .unwrap();
    assert_denied_by_the_tier(&query(&dir, &[]));
    // A bare inventory: `.porin.yaml` decides.
    let dir = inventory_case("config-only", "");
    std::fs::write(dir.join(".porin.yaml"), INVENTORY_TARGET).unwrap();
    assert_denied_by_the_tier(&query(&dir, &[]));
    let (code, stdout, stderr) = porin_in(
        &dir,
        &["lint", "policy.yaml", "--inventory", "inventory.yaml"],
    );
    assert_eq!(code, Some(0), "{stdout}{stderr}");
}

#[test]
fn inventory_keys_are_checked_and_two_files_must_agree() {
    // An unmodelled version names the file, line and the modelled ones.
    let dir = inventory_case("bad-version", "ciliumVersion: \"1.18\"\n");
    let (code, stdout, stderr) = query(&dir, &[]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("inventory.yaml:2"), "{stderr}");
    assert!(stderr.contains("ciliumVersion"), "{stderr}");
    assert!(stderr.contains("1.19, 1.20"), "{stderr}");
    // A test file asks for 1.20, the inventory file it reads for 1.19.
    let dir = inventory_case("disagree", "ciliumVersion: \"1.19\"\n");
    std::fs::write(
        dir.join("test.yaml"),
        "kind: PolicyTest\nciliumVersion: \"1.20\"\nenableK8sClusterNetworkPolicy: true\ninventory: [inventory.yaml]\npolicies: [{path: policy.yaml}]\ncases:\n  - {from: slytherin/draco-malfoy-0, to: gryffindor/harry-potter-0, port: 80, expect: deny}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = porin_in(&dir, &["test", "test.yaml"]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("disagrees with ciliumVersion `1.20`"), "{all}");
    assert!(all.contains("test.yaml:2"), "{all}");
    // The same test file with an inventory that agrees passes.
    let dir = inventory_case("agree", INVENTORY_TARGET);
    std::fs::write(
        dir.join("test.yaml"),
        "kind: PolicyTest\nciliumVersion: \"1.20\"\ninventory: [inventory.yaml]\npolicies: [{path: policy.yaml}]\ncases:\n  - {from: slytherin/draco-malfoy-0, to: gryffindor/harry-potter-0, port: 80, expect: deny}\n",
    )
    .unwrap();
    let (code, stdout, stderr) = porin_in(&dir, &["test", "test.yaml"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// A `nodes` peer without `enable-node-selector-labels`: Cilium 1.20's
/// `ParseClusterNetworkPolicy` returns an error and the watcher
/// (`addK8sClusterNetworkPolicy`, pkg/policy/k8s/cluster_network_policy.go)
/// imports none of the policy's rules; porin reports the policy (PC031, an
/// error) and compiles none of them, its Deny of slytherin included.
#[test]
fn a_nodes_peer_without_node_selector_labels_refuses_the_whole_policy() {
    let policy = CLUSTER_POLICY.replace(
        "  ingress:\n",
        "  egress:\n    - {action: Deny, to: [{nodes: {matchLabels: {role: db}}}]}\n  ingress:\n",
    );
    for (tag, settings, refused) in [
        ("nodes-off", "", true),
        (
            "nodes-on",
            "settings: {enable-node-selector-labels: true}\n",
            false,
        ),
    ] {
        let dir = inventory_case(tag, &format!("{INVENTORY_TARGET}{settings}"));
        std::fs::write(dir.join("policy.yaml"), &policy).unwrap();
        let result = query(&dir, &[]);
        let (code, stdout, stderr) = &result;
        if refused {
            assert!(stderr.contains("error[PC031]"), "{stderr}");
            assert!(
                stderr.contains("ClusterNetworkPolicy `deny-slytherin` spec.egress[0].to[0].nodes"),
                "{stderr}"
            );
            assert!(stderr.contains("enable-node-selector-labels"), "{stderr}");
            // The cluster enforces no rule of it: the flow its ingress Deny
            // names is allowed.
            assert_eq!(*code, Some(0), "{stdout}{stderr}");
            assert!(stdout.starts_with("allow:"), "{stdout}");
        } else {
            assert!(!stderr.contains("PC031"), "{stderr}");
            assert_denied_by_the_tier(&result);
        }
    }
}

/// `porin agent` reads the inventory's keys too (no flags of its own): with
/// them the ClusterNetworkPolicy is planned; without them the agent
/// refuses to start rather than run without its Deny rules.
#[test]
fn the_agent_validates_for_the_inventorys_target() {
    for (tag, target, ok) in [
        ("agent-on", INVENTORY_TARGET, true),
        ("agent-off", "", false),
    ] {
        let dir = inventory_case(tag, target);
        std::fs::create_dir_all(dir.join("policies")).unwrap();
        std::fs::write(dir.join("policies/cnp.yaml"), CLUSTER_POLICY).unwrap();
        let (code, stdout, stderr) = porin_in(
            &dir,
            &[
                "agent",
                "run",
                "--policies",
                "policies",
                "--inventory",
                "inventory.yaml",
                "--dry-run",
            ],
        );
        if ok {
            assert_eq!(code, Some(0), "{stdout}{stderr}");
            assert!(stdout.contains("1 policy file(s)"), "{stdout}");
        } else {
            assert_ne!(code, Some(0), "{stdout}{stderr}");
            assert!(stderr.contains("error[PM066]"), "{stderr}");
        }
    }
}

/// `porin lint --upgrade-to 1.20` on a ClusterNetworkPolicy the current
/// target ignores: PM067, backed by row `cluster-network-policy`, when the
/// new target enforces it (1.20 with the switch); nothing without the
/// switch or without --upgrade-to.
#[test]
fn the_upgrade_check_names_cluster_policies_the_upgrade_enforces() {
    let dir = inventory_case("upgrade", "");
    let lint = |extra: &[&str]| {
        let (_, stdout, stderr) = porin_in(&dir, &[&["lint", "policy.yaml"][..], extra].concat());
        format!("{stdout}{stderr}")
    };
    let out = lint(&[
        "--upgrade-to",
        "1.20",
        "--enable-k8s-cluster-network-policy",
    ]);
    assert!(out.contains("warning[PM067]"), "{out}");
    assert!(
        out.contains("ClusterNetworkPolicy `deny-slytherin` starts to be enforced"),
        "{out}"
    );
    assert!(out.contains("the row is `cluster-network-policy`"), "{out}");
    assert!(out.contains("ignored by Cilium 1.19"), "{out}");
    for extra in [
        &["--upgrade-to", "1.20"][..],
        &["--enable-k8s-cluster-network-policy"],
    ] {
        let out = lint(extra);
        assert!(!out.contains("PM067"), "{extra:?}: {out}");
    }
}

/// `porin diff --cilium-version 1.19 --to-cilium-version 1.20
/// --enable-k8s-cluster-network-policy` with the same ClusterNetworkPolicy
/// on both sides: the old side runs without it (PM067, as the 1.19
/// cluster does), so the diff shows the flow its Deny closes, and only
/// that one (the host keeps its allow-localhost entry).
#[test]
fn the_upgrade_diff_shows_what_enforcing_a_cluster_policy_closes() {
    let dir = inventory_case("upgrade-diff", "");
    let (code, stdout, stderr) = porin_in(
        &dir,
        &[
            "diff",
            "policy.yaml",
            "policy.yaml",
            "--inventory",
            "inventory.yaml",
            "--cilium-version",
            "1.19",
            "--to-cilium-version",
            "1.20",
            "--enable-k8s-cluster-network-policy",
        ],
    );
    assert_eq!(code, Some(1), "a change: {stdout}{stderr}");
    assert!(stderr.contains("warning[PM067]"), "{stderr}");
    assert!(!stderr.contains("PM066"), "{stderr}");
    assert!(
        stdout.starts_with("0 connections opened, 1 closed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("closed  slytherin/draco-malfoy-0 → gryffindor/harry-potter-0"),
        "{stdout}"
    );
    // Without the switch the new side does not enforce it either: the old
    // side refuses it as before (exit 2).
    let (code, _, stderr) = porin_in(
        &dir,
        &[
            "diff",
            "policy.yaml",
            "policy.yaml",
            "--inventory",
            "inventory.yaml",
            "--to-cilium-version",
            "1.20",
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("error[PM066]"), "{stderr}");
}
