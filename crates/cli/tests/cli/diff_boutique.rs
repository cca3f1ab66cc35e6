//! `porin diff` from a reviewer's side, on Online Boutique
//! (`examples/boutique`: its Deployments and Services, thirteen
//! NetworkPolicies and CiliumNetworkPolicies): the default view lists the
//! end-to-end connections that change, attributed to the rule items that
//! changed them. Three pull requests: tightening one service's egress,
//! deleting one policy, adding one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::workspace;

/// A scratch directory holding `old/` (the example's policies) and `new/`
/// (the same, changed by `edit`), so that the files are named `old/...`
/// and `new/...` in the output whatever the temporary directory is.
fn scratch(test: &str, edit: impl FnOnce(&Path)) -> PathBuf {
    let root =
        std::env::temp_dir().join(format!("porin-diff-boutique-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let policies = workspace().join("examples/boutique/policies");
    for side in ["old", "new"] {
        std::fs::create_dir_all(root.join(side)).unwrap();
        for entry in std::fs::read_dir(&policies).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, root.join(side).join(path.file_name().unwrap())).unwrap();
        }
    }
    edit(&root.join("new"));
    root
}

/// `porin diff old new` in `root`: (exit code, stdout).
fn diff(root: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let inventory = workspace().join("examples/boutique/manifests.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(["diff", "old", "new", "--inventory"])
        .arg(&inventory)
        .args(extra)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

fn change(file: &str) -> impl FnOnce(&Path) {
    move |new: &Path| {
        let text = workspace().join("examples/boutique/changes").join(file);
        let target = match file {
            "checkoutservice-tightened.yaml" => "checkoutservice.yaml",
            other => other,
        };
        std::fs::copy(text, new.join(target)).unwrap();
    }
}

/// Checkout's egress goes from "any pod, any port, and the Internet" to
/// its six calls. Per direction that is 15 rows of complements; end to end
/// exactly two connections change: checkout → email (whose ingress lets
/// checkout in on any port) narrows to TCP/8080, and checkout → world
/// closes. Every other callee's ingress already allowed only its port.
#[test]
fn tightening_one_egress_lists_the_real_edges_only() {
    let root = scratch("tighten", change("checkoutservice-tightened.yaml"));
    let (code, human) = diff(&root, &[]);
    assert_eq!(code, Some(1));
    insta::assert_snapshot!("boutique_tighten_human", human);
    let (_, markdown) = diff(&root, &["--format", "markdown"]);
    insta::assert_snapshot!("boutique_tighten_markdown", markdown);
    let (_, json) = diff(&root, &["--format", "json"]);
    insta::assert_snapshot!("boutique_tighten_json", json);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["summary"]["closed"], 1);
    assert_eq!(value["summary"]["changed"], 1);
    // The per-direction view is still there, behind its flag.
    let (code, per_direction) = diff(&root, &["--per-direction"]);
    assert_eq!(code, Some(1));
    assert!(
        per_direction.contains("- egress to default/emailservice: now denied ICMP/*, TCP/0-8079"),
        "{per_direction}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// Deleting redis-cart's ingress policy: the one critical row (the cart
/// loses its store), and the notice.
#[test]
fn deleting_a_policy_shows_the_edge_it_carried() {
    let root = scratch("delete", |new| {
        std::fs::remove_file(new.join("redis-cart.yaml")).unwrap();
    });
    let (code, human) = diff(&root, &[]);
    assert_eq!(code, Some(1));
    insta::assert_snapshot!("boutique_delete_human", human);
    let (_, markdown) = diff(&root, &["--format", "markdown"]);
    insta::assert_snapshot!("boutique_delete_markdown", markdown);
    std::fs::remove_dir_all(&root).unwrap();
}

/// Adding a policy that lets the front end reach a CDN: one connection
/// opened, to the CIDR (not to the world: the rest of the Internet stays
/// closed).
#[test]
fn adding_a_policy_opens_its_edge() {
    let root = scratch("add", change("frontend-cdn.yaml"));
    let (code, human) = diff(&root, &[]);
    assert_eq!(code, Some(1));
    insta::assert_snapshot!("boutique_add_human", human);
    let (_, markdown) = diff(&root, &["--format", "markdown"]);
    insta::assert_snapshot!("boutique_add_markdown", markdown);
    std::fs::remove_dir_all(&root).unwrap();
}

/// Removing the namespace's default deny: the only workload without an
/// ingress policy of its own (the load generator) opens to every peer
/// that could send to it, peers outside the workloads as one class, each
/// row naming the policy that put it in default deny.
#[test]
fn removing_default_deny_names_the_policy_that_enforced_it() {
    let root = scratch("default-deny", |new| {
        std::fs::remove_file(new.join("default-deny.yaml")).unwrap();
    });
    let (code, human) = diff(&root, &[]);
    assert_eq!(code, Some(1));
    insta::assert_snapshot!("boutique_default_deny_human", human);
    std::fs::remove_dir_all(&root).unwrap();
}

/// An L7 rule added to the front end's Internet ingress: the same port
/// passes, but through the proxy now (requests are filtered), which the
/// diff says instead of calling the policy sets equal.
#[test]
fn an_added_l7_rule_is_a_change() {
    let root = scratch("l7", |new| {
        let path = new.join("frontend.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let world = "  - fromEntities: [world]\n    toPorts:\n    - ports:\n      - port: \"8080\"\n        protocol: TCP\n";
        assert!(text.contains(world));
        let l7 = format!("{world}      rules:\n        http:\n        - method: GET\n");
        std::fs::write(&path, text.replace(world, &l7)).unwrap();
    });
    let (code, human) = diff(&root, &[]);
    assert_eq!(code, Some(1));
    insta::assert_snapshot!("boutique_l7_human", human);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_unchanged_policy_set_exits_zero() {
    let root = scratch("same", |_| {});
    let (code, human) = diff(&root, &[]);
    assert_eq!(
        (code, human.as_str()),
        (Some(0), "no connectivity change\n")
    );
    std::fs::remove_dir_all(&root).unwrap();
}
