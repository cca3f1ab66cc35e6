//! The `world` peer in `porin query` and `porin graph` (issue 12 item 3):
//! world traffic is world-ipv4 (9) over IPv4 and world-ipv6 (10) over IPv6
//! in a dual-stack agent (`daemon/cmd/hostips-sync.go` maps `0.0.0.0/0` and
//! `::/0` so), never identity 2. A deny of `0.0.0.0/0` alone denies one
//! half of the world; the output must say which family got which verdict,
//! in names.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const INVENTORY: &str = r#"kind: Inventory
endpoints:
  - {name: dual, namespace: default, labels: {app: web}, ips: [10.0.13.2, "fd00::13:2"]}
  - {name: v4, namespace: default, labels: {app: web}, ips: [10.0.13.3]}
"#;

const POLICY: &str = r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: web, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress: [{fromEntities: [world]}]
  ingressDeny: [{fromCIDR: ["0.0.0.0/0"]}]
"#;

/// A directory of its own holding the inventory and the policy.
fn files(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-world-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("inventory.yaml"), INVENTORY).unwrap();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    dir
}

fn porin(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .arg("--inventory")
        .arg(dir.join("inventory.yaml"))
        .arg(dir.join("policy.yaml"))
        .output()
        .expect("porin runs")
}

fn query(dir: &Path, from: &str, to: &str) -> (Option<i32>, String, String) {
    let out = porin(
        dir,
        &["query", "--from", from, "--to", to, "--port", "80/tcp"],
    );
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn query_names_the_family_and_identity_that_decided() {
    let dir = files("query");
    // IPv4-only endpoint: only world-ipv4 reaches it, and it is denied.
    let (code, out, err) = query(&dir, "world", "default/v4");
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.starts_with("deny: world (IPv4, world-ipv4; IPv6, world-ipv6) -> default/v4 TCP/80"),
        "{out}"
    );
    assert!(
        out.contains("default/v4 ingress (IPv4, world-ipv4): denied by ingress key (world-ipv4 (identity 9), any protocol)"),
        "{out}"
    );
    assert!(!out.contains("ingress (IPv6"), "{out}");
    assert!(!out.contains("identity 2,"), "{out}");

    // Dual-stack: the families differ; both are printed and the exit code
    // is that of the most permissive (some world packet gets in).
    let (code, out, err) = query(&dir, "world", "default/dual");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("IPv4 deny, IPv6 allow: world"), "{out}");
    assert!(
        out.contains("default/dual ingress (IPv4, world-ipv4): denied"),
        "{out}"
    );
    assert!(
        out.contains("default/dual ingress (IPv6, world-ipv6): allowed by ingress key (world-ipv6 (identity 10)"),
        "{out}"
    );

    // One half of the world towards an endpoint without that family: no
    // packet, so no verdict (exit 2), as `porin test` refuses such a case.
    let (code, out, err) = query(&dir, "world-ipv6", "default/v4");
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("no address family in common"), "{err}");

    // An outside address is named by its identity, not a bare number.
    let (code, out, _) = query(&dir, "198.51.100.7", "default/dual");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.starts_with("deny: 198.51.100.7 (world-ipv4 identity 9)"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The `world` node stood for world-ipv4 only, so a graph hid that IPv6
/// world traffic reaches `default/dual`.
#[test]
fn graph_shows_each_family_of_the_world() {
    let dir = files("graph");
    let out = porin(&dir, &["graph"]);
    assert_eq!(out.status.code(), Some(0));
    let dot = String::from_utf8(out.stdout).unwrap();
    assert!(
        dot.contains("\"(world)\" -> \"default/dual\" [label = \"IPv6: any\""),
        "world -> default/dual over IPv6 only:\n{dot}"
    );
    assert!(
        !dot.contains("\"(world)\" -> \"default/v4\""),
        "no world packet reaches the IPv4-only endpoint:\n{dot}"
    );
    assert!(
        dot.contains("\"default/v4\" -> \"(world)\" [label = \"any\""),
        "{dot}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
