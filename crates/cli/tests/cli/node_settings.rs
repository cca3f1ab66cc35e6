//! Agent settings in `.porin.yaml` (`settings:`, Cilium flag names,
//! `porin_compiler::settings`) and host endpoints on the command line:
//! `porin query` with a node as an end, `porin compile --endpoint
//! node/NAME`. The settings of `.porin.yaml` are the defaults of every
//! inventory the CLI loads; an inventory's own `settings:` override them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::{Path, PathBuf};

const INVENTORY: &str = r#"kind: Inventory
nodes:
  - {name: worker-1, local: true, labels: {role: worker}, addresses: [192.168.70.1]}
  - {name: cp-1, labels: {role: control-plane}, addresses: [192.168.70.2]}
endpoints:
  - {name: web, namespace: default, labels: {app: web}, ips: [10.0.70.1]}
"#;

/// Cilium's examples/policies/l3/entities/customnodes.yaml with the
/// inventory's node label, and a host policy after
/// examples/policies/host/lock-down-ingress.yaml.
const POLICIES: &str = r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: from-control-plane, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress:
    - fromNodes: [{matchLabels: {role: control-plane}}]
---
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: host-ssh}
spec:
  nodeSelector: {matchLabels: {role: worker}}
  ingress:
    - toPorts: [{ports: [{port: "22", protocol: TCP}]}]
"#;

fn project(tag: &str, config: Option<&str>) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("porin-node-settings-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("inventory.yaml"), INVENTORY).unwrap();
    std::fs::write(dir.join("policies.yaml"), POLICIES).unwrap();
    match config {
        Some(text) => std::fs::write(dir.join(".porin.yaml"), text).unwrap(),
        None => {
            let _ = std::fs::remove_file(dir.join(".porin.yaml"));
        }
    }
    dir
}

fn porin(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = crate::common::porin_in(dir, args);
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn query(dir: &Path, from: &str, to: &str, port: &str) -> String {
    let (_, out, err) = porin(
        dir,
        &[
            "query",
            "--from",
            from,
            "--to",
            to,
            "--port",
            port,
            "policies.yaml",
            "--inventory",
            "inventory.yaml",
        ],
    );
    format!("{out}{err}")
}

#[test]
fn porin_yaml_settings_turn_on_node_selector_labels() {
    let without = project("without", None);
    let text = query(&without, "node/cp-1", "default/web", "80");
    assert!(text.contains("deny"), "{text}");
    assert!(text.contains("enable-node-selector-labels"), "{text}");

    let with = project(
        "with",
        Some("settings:\n  enable-node-selector-labels: true\n"),
    );
    let text = query(&with, "node/cp-1", "default/web", "80");
    assert!(text.contains("allow"), "{text}");
    assert!(!text.contains("PC001"), "{text}");
}

#[test]
fn a_setting_porin_does_not_model_is_refused_naming_porin_yaml() {
    let dir = project(
        "refused",
        Some("settings:\n  policy-cidr-match-mode: pods\n"),
    );
    let (code, out, err) = porin(
        &dir,
        &["compile", "policies.yaml", "--inventory", "inventory.yaml"],
    );
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(
        err.contains(".porin.yaml") && err.contains("policy-cidr-match-mode"),
        "{err}"
    );
}

#[test]
fn query_and_compile_take_the_local_node_s_host_endpoint() {
    let dir = project("host", None);
    let ssh = query(&dir, "world", "node/worker-1", "22");
    let kubelet = query(&dir, "world", "node/worker-1", "10250");
    assert!(ssh.contains("allow"), "{ssh}");
    assert!(kubelet.contains("deny"), "{kubelet}");
    assert!(kubelet.contains("node/worker-1"), "{kubelet}");
    let (code, out, err) = porin(
        &dir,
        &[
            "compile",
            "policies.yaml",
            "--inventory",
            "inventory.yaml",
            "--endpoint",
            "node/worker-1",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let text = json.to_string();
    assert!(text.contains("\"identity\":1"), "{text}");
}

/// `enable-extended-ip-protocols` from `.porin.yaml`: VRRP (no port) from a
/// pod whose egress no policy enforces. Without the setting Cilium's
/// conntrack drops the packet before policy (DROP_CT_UNKNOWN_PROTO), with it
/// the packet reaches policy, which does not enforce that direction.
#[test]
fn query_decides_vrrp_by_the_extended_protocols_setting() {
    let vrrp = |dir: &Path| {
        let (code, out, err) = porin(
            dir,
            &[
                "query",
                "--from",
                "default/web",
                "--to",
                "192.0.2.1",
                "--protocol",
                "VRRP",
                "policies.yaml",
                "--inventory",
                "inventory.yaml",
            ],
        );
        (code, format!("{out}{err}"))
    };
    let (_, off) = vrrp(&project("vrrp-off", None));
    assert!(off.starts_with("deny"), "{off}");
    assert!(off.contains("dropped before policy"), "{off}");
    assert!(off.contains("enable-extended-ip-protocols"), "{off}");
    let (_, on) = vrrp(&project(
        "vrrp-on",
        Some("settings:\n  enable-extended-ip-protocols: true\n"),
    ));
    assert!(on.starts_with("allow"), "{on}");
    assert!(!on.contains("dropped before policy"), "{on}");
}
