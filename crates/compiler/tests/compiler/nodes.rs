//! Nodes in the inventory (`crate::inventory::Node`): Kubernetes `Node`
//! manifests as `kubectl get nodes -o yaml` prints them, `localNode`, and
//! the refusals (pkg/k8s/node.go `ParseNode` reads InternalIP/ExternalIP;
//! pkg/node/manager/manager.go gives the local node's addresses the host
//! identity and the others' remote-node).

#![allow(clippy::unwrap_used, reason = "tests")]

use porin_compiler::compile::compile;
use porin_compiler::inventory::Inventory;

const NODES: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: kind-control-plane
    labels: {node-role.kubernetes.io/control-plane: ""}
  status:
    addresses:
    - {type: InternalIP, address: 172.18.0.2}
    - {type: Hostname, address: kind-control-plane}
- apiVersion: v1
  kind: Node
  metadata: {name: kind-worker}
  status:
    addresses:
    - {type: InternalIP, address: 172.18.0.3}
    - {type: ExternalIP, address: "fc00:f853:ccd:e793::3"}
"#;

fn load(extra: &str) -> Result<Inventory, String> {
    let mut inventory = Inventory::new();
    inventory
        .add_text("nodes.yaml", NODES)
        .map_err(|e| e.to_string())?;
    inventory
        .add_text("inventory.yaml", &format!("kind: Inventory\n{extra}"))
        .map_err(|e| e.to_string())?;
    inventory.finish().map_err(|e| e.to_string())?;
    Ok(inventory)
}

#[test]
fn node_manifests_give_addresses_and_local_node_the_host_identity() {
    let inventory = load("localNode: kind-worker\n").unwrap();
    assert_eq!(inventory.nodes.len(), 2);
    let worker = inventory
        .nodes
        .iter()
        .find(|n| n.name == "kind-worker")
        .unwrap();
    assert!(worker.local);
    assert_eq!(
        worker.ips.len(),
        2,
        "InternalIP and ExternalIP, not Hostname"
    );
    let compiled = compile(&[], &inventory).unwrap();
    assert_eq!(compiled.identity_of_ip("172.18.0.3".parse().unwrap()), 1);
    assert_eq!(
        compiled.identity_of_ip("fc00:f853:ccd:e793::3".parse().unwrap()),
        1
    );
    assert_eq!(compiled.identity_of_ip("172.18.0.2".parse().unwrap()), 6);
    assert_eq!(compiled.identity_of_ip("172.18.0.4".parse().unwrap()), 9);
}

#[test]
fn without_a_local_node_every_node_is_remote() {
    let inventory = load("").unwrap();
    let compiled = compile(&[], &inventory).unwrap();
    assert_eq!(compiled.identity_of_ip("172.18.0.3".parse().unwrap()), 6);
}

#[test]
fn bad_nodes_are_refused_with_their_location() {
    let unknown = load("localNode: nope\n").unwrap_err();
    assert!(unknown.contains("localNode `nope`"), "{unknown}");
    let twice = load("nodes:\n  - {name: kind-worker, addresses: [172.18.0.9]}\n").unwrap_err();
    assert!(twice.contains("duplicate node `kind-worker`"), "{twice}");
    let two_local = load(
        "nodes:\n  - {name: a, local: true, addresses: [10.9.0.1]}\n  - {name: b, local: true, addresses: [10.9.0.2]}\n",
    )
    .unwrap_err();
    assert!(two_local.contains("both local"), "{two_local}");
    let shared =
        load("endpoints:\n  - {name: web, namespace: default, ips: [172.18.0.2]}\n").unwrap_err();
    assert!(shared.contains("172.18.0.2"), "{shared}");
    let empty = load("nodes:\n  - {name: c}\n").unwrap_err();
    assert!(
        empty.contains("inventory.yaml:3") && empty.contains("no addresses"),
        "{empty}"
    );
}

#[test]
fn the_node_list_fixture_loads_as_remote_nodes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/inventories/k8s-nodes.yaml");
    let inventory = Inventory::load(&path).unwrap();
    let names: Vec<&str> = inventory.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["kind-control-plane", "kind-worker"]);
    let compiled = compile(&[], &inventory).unwrap();
    assert_eq!(
        compiled.identity_of_ip("fc00:f853:ccd:e793::3".parse().unwrap()),
        6
    );
}
