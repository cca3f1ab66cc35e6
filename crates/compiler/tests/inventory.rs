//! Inventory loaders: porin YAML, Kubernetes manifests, Cilium dumps, and
//! located errors.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::PathBuf;

use porin_compiler::error::InventoryError;
use porin_compiler::identities::{IdentityTable, endpoint_identity_labels};
use porin_compiler::inventory::Inventory;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/inventories")
}

#[test]
fn kubernetes_manifests_directory_becomes_endpoints() {
    let inventory = Inventory::load(&fixtures().join("k8s-manifests")).unwrap();
    let names: Vec<String> = inventory
        .endpoints
        .iter()
        .map(|e| e.display_name())
        .collect();
    assert_eq!(names, ["shop/backup", "shop/db", "shop/frontend"]);
    let frontend = &inventory.endpoints[inventory.endpoint("shop/frontend").unwrap()];
    assert_eq!(frontend.service_account.as_deref(), Some("web"));
    assert_eq!(frontend.ports[0].name, "http");
    assert_eq!(frontend.ports[0].port, 8080);
    assert_eq!(frontend.ips.len(), 2, "addresses are assigned");
    // pod-template-hash is not an identity label (pkg/labelsfilter).
    let labels = endpoint_identity_labels(frontend, &inventory).to_string();
    assert!(!labels.contains("pod-template-hash"), "{labels}");
    assert!(
        labels.contains("k8s:io.cilium.k8s.namespace.labels.team=web"),
        "{labels}"
    );
    assert!(
        labels.contains("k8s:io.cilium.k8s.policy.serviceaccount=web"),
        "{labels}"
    );
    assert_eq!(inventory.services.len(), 1);
    assert_eq!(inventory.namespaces["shop"]["team"], "web");
}

#[test]
fn cilium_identity_and_endpoint_dumps_keep_given_numbers() {
    let mut inventory = Inventory::new();
    for file in ["cilium-identities.json", "cilium-endpoints.json"] {
        let text = std::fs::read_to_string(fixtures().join(file)).unwrap();
        inventory.add_text(file, &text).unwrap();
    }
    inventory.finish().unwrap();
    let table = IdentityTable::allocate(&inventory, &Default::default()).unwrap();
    let api = inventory.endpoint("prod/api-7d9f").unwrap();
    assert_eq!(table.endpoint_identity[api], 31337);
    assert_eq!(inventory.endpoints[api].ips[0].to_string(), "10.0.5.17");
    let worker = inventory.endpoint("prod/identity-40000").unwrap();
    assert_eq!(table.endpoint_identity[worker], 40000);
    assert!(
        inventory.endpoint("identity-2").is_none(),
        "reserved identities are porin's own"
    );
}

#[test]
fn automatic_addresses_are_deterministic_and_skip_given_ones() {
    let text = "kind: Inventory\nendpoints:\n  - {name: b, namespace: x}\n  - {name: a, namespace: x, ips: [10.244.0.1]}\n";
    let mut inventory = Inventory::new();
    inventory.add_text("inv.yaml", text).unwrap();
    inventory.finish().unwrap();
    let b = &inventory.endpoints[inventory.endpoint("x/b").unwrap()];
    assert_eq!(b.ips[0].to_string(), "10.244.0.2");
    assert_eq!(b.ips[1].to_string(), "fd00:10:244::1");
}

#[test]
fn errors_are_located() {
    let mut inventory = Inventory::new();
    let text = "kind: Inventory\nendpoints:\n  - {name: a, namespace: x}\n  - {name: b, namespace: x, ips: [not-an-ip]}\n";
    let error = inventory.add_text("bad.yaml", text).unwrap_err();
    assert!(
        matches!(error, InventoryError::Invalid { line: 4, .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "bad.yaml:4: `not-an-ip` is not an IP address"
    );

    let mut inventory = Inventory::new();
    let text =
        "kind: Inventory\nendpoints:\n  - {name: a, namespace: x}\n  - {name: a, namespace: x}\n";
    inventory.add_text("dup.yaml", text).unwrap();
    let error = inventory.finish().unwrap_err();
    assert_eq!(error.line(), 4, "{error}");

    let mut inventory = Inventory::new();
    let error = inventory
        .add_text("syntax.yaml", "kind: Inventory\nendpoints: [\n")
        .unwrap_err();
    assert!(matches!(error, InventoryError::Syntax { .. }), "{error}");
}
