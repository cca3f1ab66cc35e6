//! Host policies (`nodeSelector`, the host firewall) after Cilium 1.19:
//! a host rule selects host endpoints only and an endpoint rule never
//! does (`pkg/policy/repository.go`: "NodeSelector can only match nodes,
//! EndpointSelector only pods"); the local node's host endpoint is
//! `node/NAME` with the host identity and the node's labels; a host
//! policy that selects no node is PC030 at its `nodeSelector`.

#![allow(clippy::unwrap_used, reason = "tests")]

use porin_compiler::compile::{Compiled, compile};
use porin_compiler::explain::FlowVerdict;
use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

const INVENTORY: &str = r#"
kind: Inventory
nodes:
  - {name: worker-1, local: true, labels: {type: worker}, addresses: [192.168.50.1]}
  - {name: worker-2, labels: {type: ingress}, addresses: [192.168.50.2]}
endpoints:
  - {name: web, namespace: default, labels: {app: web}, ips: [10.0.50.1]}
"#;

/// Cilium's cilium-cli/connectivity/builder/manifests/host-firewall-ingress.yaml
/// with its subject narrowed to one node label, and a clusterwide
/// endpoint policy selecting everything.
const POLICIES: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: host-ingress}
spec:
  nodeSelector: {matchLabels: {type: worker}}
  ingress:
  - fromEntities: [remote-node]
---
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: all-endpoints}
spec:
  endpointSelector: {}
  ingress:
  - fromEntities: [world]
---
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: no-such-node}
spec:
  nodeSelector: {matchLabels: {type: gpu}}
  ingress:
  - fromEntities: [world]
"#;

fn inventory(text: &str) -> Inventory {
    let mut inventory = Inventory::new();
    inventory.add_text("inventory.yaml", text).unwrap();
    inventory.finish().unwrap();
    inventory
}

fn compile_with(inventory: &Inventory) -> Compiled {
    let outcome = load_str("policy.yaml", POLICIES, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    compile(&PolicyInput::from_outcome(&outcome), inventory).unwrap()
}

use crate::support::tcp_verdict as verdict;

#[test]
fn the_local_node_has_a_host_endpoint_with_its_labels() {
    let inventory = inventory(INVENTORY);
    let host = inventory
        .endpoints
        .iter()
        .find(|e| e.display_name() == "node/worker-1")
        .unwrap();
    assert_eq!(host.identity, Some(1));
    let labels = host.identity_labels.as_ref().unwrap().to_string();
    assert!(
        labels.contains("reserved:host") && labels.contains("k8s:type=worker"),
        "{labels}"
    );
    assert!(
        !inventory
            .endpoints
            .iter()
            .any(|e| e.display_name() == "node/worker-2"),
        "only the local node's host is an endpoint; the others are remote-node peers"
    );
    // A second finish derives it again instead of adding a second one.
    let mut again = inventory.clone();
    again.finish().unwrap();
    assert_eq!(again.endpoints, inventory.endpoints);
}

#[test]
fn host_rules_select_the_host_only_and_endpoint_rules_never_do() {
    let compiled = compile_with(&inventory(INVENTORY));
    let host = compiled.endpoint("node/worker-1").unwrap();
    assert!(host.enforcement.ingress && !host.enforcement.egress);
    let web = compiled.endpoint("default/web").unwrap();
    assert!(web.enforcement.ingress);
    // remote-node reaches the host, the world does not (the endpoint rule
    // allowing the world does not select the host), and the host rule does
    // not select the pod.
    for (from, to, port, expected) in [
        ("node/worker-2", "node/worker-1", 22, FlowVerdict::Allow),
        ("world-ipv4", "node/worker-1", 22, FlowVerdict::Deny),
        ("node/worker-2", "default/web", 80, FlowVerdict::Deny),
        ("world-ipv4", "default/web", 80, FlowVerdict::Allow),
    ] {
        assert_eq!(
            verdict(&compiled, from, to, port),
            expected,
            "{from} -> {to}"
        );
    }
}

#[test]
fn a_host_policy_selecting_no_node_is_pc030_at_its_node_selector() {
    let compiled = compile_with(&inventory(INVENTORY));
    let found: Vec<_> = compiled
        .diagnostics
        .iter()
        .filter(|d| d.code == "PC030")
        .collect();
    assert_eq!(found.len(), 1, "{:?}", compiled.diagnostics);
    let at = found[0].primary.as_ref().unwrap();
    assert_eq!((at.line, at.route.as_str()), (22, "spec.nodeSelector"));
    assert!(found[0].message.contains("worker-1, worker-2"));
    // A host policy that selects only a remote node is not "selects nothing".
    assert!(
        !compiled
            .diagnostics
            .iter()
            .any(|d| d.code == "PC007" || d.code == "PC008")
    );
    // Without nodes every host policy selects nothing, and the message says why.
    let bare = compile_with(&inventory(
        "kind: Inventory\nendpoints:\n  - {name: web, namespace: default, labels: {app: web}}\n",
    ));
    let messages: Vec<&str> = bare
        .diagnostics
        .iter()
        .filter(|d| d.code == "PC030")
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(messages.len(), 2);
    assert!(messages[0].contains("lists no nodes"), "{messages:?}");
}

#[test]
fn an_endpoint_named_like_the_host_endpoint_is_refused() {
    let mut clash = Inventory::new();
    clash
        .add_text(
            "inventory.yaml",
            &format!("{INVENTORY}  - {{name: worker-1, namespace: node, labels: {{app: x}}}}\n"),
        )
        .unwrap();
    let error = clash.finish().unwrap_err().to_string();
    assert!(
        error.contains("inventory.yaml:8") && error.contains("host endpoint"),
        "{error}"
    );
}
