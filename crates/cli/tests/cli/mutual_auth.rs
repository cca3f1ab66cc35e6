//! Mutual authentication (issue 17), on Online Boutique's release
//! manifests: with `settings: {mesh-auth-mutual-enabled: true}` (Cilium's
//! flag; the cluster runs SPIRE mutual authentication) an
//! `authentication.mode: required` flow between two workloads is decided
//! as an authenticated cluster decides it (allow), while the world, CIDR
//! peers and `test-always-fail` stay denied (`pkg/auth/manager.go`
//! handleAuthRequest skips reserved identities); without the setting (the
//! default) the same file fails closed and says which setting would
//! change it. `porin test` (reference and `--engine both`, see
//! porin-kernel's fixtures_both_engines) and `porin query` agree, and so
//! do the connectivity analyses: `porin diff`, `porin graph` and the
//! lint's end-to-end reach (PR019) with the setting in the inventory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{porin, workspace};

const FIXTURE: &str = "fixtures/policy-tests/auth/boutique-mutual-auth.yaml";

fn query(file: &str, from: &str) -> (Option<i32>, String) {
    let out = porin(&[
        "query",
        "--from",
        from,
        "--to",
        "default/paymentservice",
        "--port",
        "50051",
        file,
    ]);
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn with_the_setting_workloads_authenticate_and_reserved_peers_do_not() {
    let out = porin(&["test", FIXTURE]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.ends_with("6 passed, 0 failed\n"), "{text}");
    insta::assert_snapshot!("mutual_auth_test", text);
    let (code, allowed) = query(FIXTURE, "default/checkoutservice");
    assert_eq!(code, Some(0), "{allowed}");
    assert!(
        allowed.contains("default/paymentservice ingress: allowed after mutual authentication"),
        "{allowed}"
    );
    let (code, world) = query(FIXTURE, "world");
    assert_eq!(code, Some(1), "{world}");
    assert!(world.contains("which never succeeds here"), "{world}");
    insta::assert_snapshot!("mutual_auth_query", format!("{allowed}{world}"));
}

#[test]
fn without_the_setting_the_same_flows_fail_closed_and_name_it() {
    let dir = std::env::temp_dir().join(format!("porin-mutual-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The fixture without its `settings:` block, its paths made absolute.
    let text = std::fs::read_to_string(workspace().join(FIXTURE)).unwrap();
    let base = workspace().join("fixtures/policy-tests/auth");
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("settings:") && !l.contains("mesh-auth-mutual-enabled: true"))
        .map(|l| l.replace("../../../", &format!("{}/../../../", base.display())))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!text.contains("mesh-auth-mutual-enabled: true"));
    let file = dir.join("default.yaml");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    let out = porin(&["test", file]);
    let report = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{report}");
    // The two workload cases fail; the four denials still hold.
    assert!(report.ends_with("4 passed, 2 failed\n"), "{report}");
    assert!(
        report.contains("dropped: authentication type 1 required (porin has no auth map; the setting mesh-auth-mutual-enabled: true decides it as a cluster running mutual authentication)"),
        "{report}"
    );
    let (code, denied) = query(file, "default/checkoutservice");
    assert_eq!(code, Some(1), "{denied}");
    assert!(denied.starts_with("deny: "), "{denied}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Checkout's egress to payment and payment's ingress from checkout, both
/// `authentication.mode: required` (the fixture's rules, one per side).
const MTLS: &str = r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: paymentservice-mtls, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: paymentservice}}
  ingress:
    - fromEndpoints: [{matchLabels: {app: checkoutservice}}]
      toPorts: [{ports: [{port: "50051", protocol: TCP}]}]
      authentication: {mode: required}
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: checkoutservice-egress, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: checkoutservice}}
  egress:
    - toEndpoints: [{matchLabels: {app: paymentservice}}]
      toPorts: [{ports: [{port: "50051", protocol: TCP}]}]
      authentication: {mode: required}
"#;

/// A scratch directory (named files in the output stay relative to it):
/// `plain/` the boutique manifests, `mutual/` the same plus an inventory
/// file with the setting; `old/` the boutique's default deny, `new/` the
/// same plus [`MTLS`]; `lint/` the default deny plus [`MTLS`] without
/// payment's authentication.
fn scratch(test: &str) -> PathBuf {
    let root =
        std::env::temp_dir().join(format!("porin-mutual-auth-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let boutique = workspace().join("examples/boutique");
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let manifests = std::fs::read_to_string(boutique.join("manifests.yaml")).unwrap();
    let deny = std::fs::read_to_string(boutique.join("policies/default-deny.yaml")).unwrap();
    write("plain/manifests.yaml", &manifests);
    write("mutual/manifests.yaml", &manifests);
    write(
        "mutual/settings.yaml",
        "kind: Inventory\nsettings: {mesh-auth-mutual-enabled: true}\n",
    );
    for dir in ["old", "new", "lint"] {
        write(&format!("{dir}/default-deny.yaml"), &deny);
    }
    write("new/mtls.yaml", MTLS);
    // Payment admits checkout without authentication; checkout's egress
    // requires it. Without the setting the egress never passes, so
    // payment's rule admits nothing end to end (PR019); with it the pair
    // authenticates.
    let egress_auth = MTLS
        .replacen("      authentication: {mode: required}\n", "", 1)
        .replace("paymentservice-mtls", "paymentservice-ingress");
    // Checkout's DNS egress requires authentication too: kube-dns is a
    // workload, so only the setting lets checkout resolve names (PR014).
    let dns = "---\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: checkoutservice-dns, namespace: default}\nspec:\n  endpointSelector: {matchLabels: {app: checkoutservice}}\n  egress:\n    - toEndpoints: [{matchLabels: {k8s:io.kubernetes.pod.namespace: kube-system, k8s-app: kube-dns}}]\n      toPorts: [{ports: [{port: \"53\", protocol: ANY}]}]\n      authentication: {mode: required}\n";
    write("lint/mtls.yaml", &format!("{egress_auth}{dns}"));
    root
}

/// `porin ARGS...` in `root`: (exit code, stdout); stderr must be empty.
fn run(root: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn diff_opens_the_authenticated_edge_only_under_the_setting() {
    let root = scratch("diff");
    // Without the setting the auth-required rules admit nothing: adding
    // them changes no connection (fail closed, as `porin test` decides).
    let (code, plain) = run(&root, &["diff", "old", "new", "--inventory", "plain"]);
    assert_eq!(code, Some(0), "{plain}");
    assert!(
        plain.starts_with("no connectivity change, 2 policies added\n"),
        "{plain}"
    );
    // With it checkout → payment opens on the rules' port, attributed to
    // both rules (checkout's egress and payment's ingress).
    let (code, mutual) = run(&root, &["diff", "old", "new", "--inventory", "mutual"]);
    assert_eq!(code, Some(1), "{mutual}");
    assert!(
        mutual.starts_with("1 connection opened, 0 closed, 2 policies added\n"),
        "{mutual}"
    );
    assert!(
        mutual
            .contains("opened  default/checkoutservice → default/paymentservice: none → TCP/50051"),
        "{mutual}"
    );
    let (_, per_direction) = run(
        &root,
        &[
            "diff",
            "old",
            "new",
            "--inventory",
            "mutual",
            "--per-direction",
        ],
    );
    insta::assert_snapshot!(
        "mutual_auth_diff",
        format!("{mutual}\n--- --per-direction\n{per_direction}")
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn graph_draws_the_authenticated_edge_only_under_the_setting() {
    let root = scratch("graph");
    let edge = r#""default/checkoutservice" -> "default/paymentservice" [label = "TCP/50051"];"#;
    let (code, plain) = run(&root, &["graph", "--inventory", "plain", "new"]);
    assert_eq!(code, Some(0), "{plain}");
    // No edge reaches payment: its only ingress rule requires auth.
    assert!(!plain.contains("-> \"default/paymentservice\""), "{plain}");
    let (code, mutual) = run(&root, &["graph", "--inventory", "mutual", "new"]);
    assert_eq!(code, Some(0), "{mutual}");
    assert!(mutual.contains(edge), "{mutual}");
    insta::assert_snapshot!("mutual_auth_graph", mutual);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn lint_reach_counts_an_authenticated_peer_only_under_the_setting() {
    let root = scratch("lint");
    let finding = "warning[PR019]: CiliumNetworkPolicy `default/paymentservice-ingress` spec.ingress[0] admits no flow end to end";
    let (code, plain) = run(&root, &["lint", "--inventory", "plain", "lint"]);
    assert_eq!(code, Some(0), "{plain}");
    assert!(plain.contains(finding), "{plain}");
    assert!(
        plain.contains("CiliumNetworkPolicy `default/checkoutservice-egress` enforces the egress of the peer and blocks these flows"),
        "{plain}"
    );
    let (code, mutual) = run(&root, &["lint", "--inventory", "mutual", "lint"]);
    assert_eq!(code, Some(0), "{mutual}");
    assert!(!mutual.contains("PR019"), "{mutual}");
    // Checkout's authenticated DNS egress resolves names under the
    // setting only; every other endpoint keeps its PR014.
    let checkout_dns =
        "endpoint `default/checkoutservice` has egress policy but cannot reach kube-dns";
    assert!(plain.contains(checkout_dns), "{plain}");
    assert!(!mutual.contains(checkout_dns), "{mutual}");
    let dns = |text: &str| text.matches("warning[PR014]").count();
    assert_eq!(dns(&plain), 12, "{plain}");
    assert_eq!(dns(&mutual), 11, "{mutual}");
    let _ = std::fs::remove_dir_all(&root);
}
