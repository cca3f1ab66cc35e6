//! Inventory loaders: porin YAML, Kubernetes manifests, Cilium dumps, and
//! located errors.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::PathBuf;

use porin_compiler::allocation::{IdentityTable, endpoint_identity_labels};
use porin_compiler::error::InventoryError;
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

/// An inventory of one text, finished.
fn load_text(file: &str, text: &str) -> Result<Inventory, InventoryError> {
    let mut inventory = Inventory::new();
    inventory.add_text(file, text)?;
    inventory.finish()?;
    Ok(inventory)
}

fn labels_of(inventory: &Inventory, name: &str) -> String {
    let endpoint = &inventory.endpoints[inventory.endpoint(name).unwrap()];
    endpoint_identity_labels(endpoint, inventory).to_string()
}

// pkg/labels/labels.go NewLabel via Map2Labels(podLabels, "k8s"): a source a
// pod label key names is dropped, in Pod manifests as in porin YAML.
#[test]
fn pod_label_key_sources_are_dropped_in_manifests_and_yaml() {
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: attacker\n  namespace: evil\n  labels:\n    \"cidr:203.0.113.0/24\": \"\"\n    \"unspec:role\": bad\n    reserved.tier: x\nspec: {}\n";
    let yaml = "kind: Inventory\nendpoints:\n  - {name: attacker, namespace: evil, labels: {\"cidr:203.0.113.0/24\": \"\", \"unspec:role\": bad, \"reserved.tier\": x}}\n";
    for (file, text) in [("pod.yaml", manifest), ("inv.yaml", yaml)] {
        let inventory = load_text(file, text).unwrap();
        let labels = labels_of(&inventory, "evil/attacker");
        assert!(labels.contains("k8s:203.0.113.0/24"), "{file}: {labels}");
        assert!(labels.contains("k8s:role=bad"), "{file}: {labels}");
        assert!(labels.contains("k8s:tier=x"), "{file}: {labels}");
        assert!(
            !labels.contains("cidr:") && !labels.contains("unspec:"),
            "{labels}"
        );
    }
}

// SanitizePodLabels + Map2Labels: two keys that become one label key with
// different values are a label Cilium picks at random (Go map order).
#[test]
fn pod_label_keys_that_collide_after_their_source_is_dropped_are_refused() {
    let text = "kind: Inventory\nendpoints:\n  - {name: a, namespace: x}\n  - {name: sneaky, namespace: prod, labels: {reserved.io.kubernetes.pod.namespace: kube-system}}\n";
    let error = load_text("inv.yaml", text).unwrap_err();
    assert_eq!(error.line(), 4, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("endpoint `prod/sneaky`")
            && message.contains("both become the key `io.kubernetes.pod.namespace`"),
        "{message}"
    );
    // A namespace label key is joined under io.cilium.k8s.namespace.labels
    // first, then split at its `:` like any other key.
    let text = "kind: Inventory\nnamespaces:\n  prod: {\"x:app\": admin}\nendpoints:\n  - {name: web, namespace: prod, labels: {app: web}}\n";
    let error = load_text("ns.yaml", text).unwrap_err();
    assert!(
        error.to_string().contains("both become the key `app`"),
        "{error}"
    );
    // The same label twice is no conflict.
    let text = "kind: Inventory\nendpoints:\n  - {name: web, namespace: prod, labels: {app: web, \"$app\": web}}\n";
    let inventory = load_text("same.yaml", text).unwrap();
    assert!(labels_of(&inventory, "prod/web").contains("k8s:app=web"));
    // A key that becomes one of Cilium's own once its source is split off
    // escapes filterPodLabels (which reads the raw key): Cilium would let
    // the pod claim that namespace label. Refused, not mirrored.
    let text = "kind: Inventory\nnamespaces:\n  prod: {}\nendpoints:\n  - {name: web, namespace: prod, labels: {reserved.io.cilium.k8s.namespace.labels.team: payments}}\n";
    let error = load_text("claim.yaml", text).unwrap_err();
    assert!(
        error.to_string().contains(
            "becomes `k8s:io.cilium.k8s.namespace.labels.team=payments`, a label Cilium sets itself"
        ),
        "{error}"
    );
    // A key with nothing after its source is refused.
    let text =
        "kind: Inventory\nendpoints:\n  - {name: web, namespace: prod, labels: {\"cidr:\": x}}\n";
    let error = load_text("empty.yaml", text).unwrap_err();
    assert!(
        error.to_string().contains("no key after its source"),
        "{error}"
    );
}

// daemon/cmd/endpoint.go createEndpoint: API labels keep their source, no
// reserved label among others; pkg/identity ScopeForLabels: CIDR/FQDN labels
// are local-scope. SanitizePodLabels alone adds the cluster label.
#[test]
fn endpoints_outside_kubernetes_keep_sources_but_not_reserved_or_derived_ones() {
    let text = "kind: Inventory\nendpoints:\n  - {name: vm, labels: {\"container:app\": x, role: db}}\n  - {name: hc, labels: {\"$health\": \"\"}}\n";
    let inventory = load_text("vm.yaml", text).unwrap();
    assert_eq!(
        labels_of(&inventory, "vm"),
        "container:app=x,unspec:role=db"
    );
    assert_eq!(labels_of(&inventory, "hc"), "reserved:health");
    let table = IdentityTable::allocate(&inventory, &Default::default()).unwrap();
    assert_eq!(
        table.endpoint_identity[inventory.endpoint("hc").unwrap()],
        4
    );

    for (labels, expected) in [
        (
            "{\"reserved:host\": \"\", role: x}",
            "mix a reserved label with others",
        ),
        (
            "{\"reserved:world\": \"\"}",
            "only the reserved labels of agent endpoints",
        ),
        (
            "{\"reserved:health\": yes}",
            "only the reserved labels of agent endpoints",
        ),
        (
            "{\"cidr:10.0.0.0/8\": \"\"}",
            "Cilium derives `cidr:` labels itself",
        ),
        (
            "{\"fqdn:api.example.com\": \"\", app: x}",
            "Cilium derives `fqdn:` labels itself",
        ),
    ] {
        let text = format!(
            "kind: Inventory\nendpoints:\n  - {{name: a, namespace: x}}\n  - {{name: vm, labels: {labels}}}\n"
        );
        let error = load_text("vm.yaml", &text).unwrap_err();
        assert_eq!(error.line(), 4, "{labels}: {error}");
        assert!(error.to_string().contains(expected), "{labels}: {error}");
    }
}

// pkg/identity/numericidentity.go: scopes and reserved numbers.
#[test]
fn given_identities_outside_the_cluster_scope_are_refused_with_their_field() {
    for (id, labels, expected) in [
        ("16777217", "{app: x}", "in the local identity scope"),
        ("33554433", "{app: x}", "in the remote-node identity scope"),
        ("50331649", "{app: x}", "unknown scope"),
        ("0", "{app: x}", "reserved"),
        (
            "1",
            "{app: x}",
            "is reserved:host, but the endpoint's labels",
        ),
        (
            "2",
            "{app: x}",
            "is reserved:world, which no endpoint holds",
        ),
        ("50", "{app: x}", "no identity Cilium allocates"),
    ] {
        let text = format!(
            "kind: Inventory\nendpoints:\n  - {{name: a, namespace: x}}\n  - {{name: p, namespace: x, labels: {labels}, identity: {id}}}\n"
        );
        let error = load_text("id.yaml", &text).unwrap_err();
        let message = error.to_string();
        assert_eq!(error.line(), 4, "{id}: {message}");
        assert!(
            message.starts_with("id.yaml:4: endpoints[1].identity: endpoint `x/p`: identity "),
            "{id}: {message}"
        );
        if id != "0" {
            assert!(message.contains(expected), "{id}: {message}");
        }
    }
    // Cluster, well-known and the reserved endpoint's own number are fine.
    let text = "kind: Inventory\nendpoints:\n  - {name: p, namespace: x, identity: 70000}\n  - {name: dns, namespace: kube-system, labels: {k8s-app: kube-dns}, identity: 102}\n  - {name: hc, labels: {\"reserved:health\": \"\"}, identity: 4}\n";
    let inventory = load_text("ok.yaml", text).unwrap();
    let table = IdentityTable::allocate(&inventory, &Default::default()).unwrap();
    let ids: Vec<u32> = ["x/p", "kube-system/dns", "hc"]
        .iter()
        .map(|n| table.endpoint_identity[inventory.endpoint(n).unwrap()])
        .collect();
    assert_eq!(ids, [70000, 102, 4]);
}

// A real `cilium-dbg endpoint list -o json` has the host (1) and health (4)
// endpoints; identity list entries and endpoint identities are checked.
#[test]
fn agent_endpoint_dumps_load_with_the_host_and_health_endpoints() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/policy-tests/security/dump-agent-endpoints.json");
    let inventory = Inventory::load(&dir).unwrap();
    let table = IdentityTable::allocate(&inventory, &Default::default()).unwrap();
    let health = inventory.endpoint("health-1781").unwrap();
    assert_eq!(table.endpoint_identity[health], 4);
    assert_eq!(inventory.endpoints[health].location.line, 21);
    let host = inventory.endpoint("host-42").unwrap();
    assert_eq!(table.endpoint_identity[host], 1);
    let host_labels = table.get(1).unwrap().labels.to_string();
    assert!(
        host_labels.contains("reserved:kube-apiserver"),
        "{host_labels}"
    );
    assert!(host_labels.contains("reserved:host"), "{host_labels}");

    let local = "[\n  {\"id\": 300, \"labels\": [\"k8s:app=a\"]},\n  {\"id\": 301, \"labels\": [\"reserved:host\"]}\n]\n";
    let error = load_text("ids.json", local).unwrap_err();
    assert_eq!(error.line(), 3, "{error}");
    assert!(
        error.to_string().starts_with(
            "ids.json:3: [1].id: 301 is a cluster identity, but its labels carry `reserved:host`"
        ),
        "{error}"
    );
    let endpoint =
        "[{\"id\": 7, \"status\": {\"identity\": {\"id\": 2, \"labels\": [\"reserved:world\"]}}}]";
    let error = load_text("eps.json", endpoint).unwrap_err();
    assert!(
        error.to_string().starts_with(
            "eps.json:1: [0].status.identity.id: endpoint 7: identity 2 is reserved:world"
        ),
        "{error}"
    );
    let health_impostor = "[{\"id\": 7, \"status\": {\"identity\": {\"id\": 4, \"labels\": [\"reserved:health\", \"k8s:app=x\"]}}}]";
    let error = load_text("eps.json", health_impostor).unwrap_err();
    assert!(
        error.to_string().contains("does not carry `k8s:app=x`"),
        "{error}"
    );
}

// pkg/policy/api/entity.go InitEntities + SanitizePodLabels: only pods carry
// the cluster label the `cluster` entity selects.
#[test]
fn only_pods_carry_the_cluster_label() {
    let text = "kind: Inventory\ncluster: east\nendpoints:\n  - {name: vm, labels: {role: db}}\n  - {name: web, namespace: prod, labels: {app: web}}\n";
    let inventory = load_text("c.yaml", text).unwrap();
    assert!(!labels_of(&inventory, "vm").contains("io.cilium.k8s.policy.cluster"));
    assert!(labels_of(&inventory, "prod/web").contains("k8s:io.cilium.k8s.policy.cluster=east"));
}

/// A misspelt top-level field of an `Inventory` (`endpoint:`) would leave
/// the inventory empty without a word; it is a located error instead.
#[test]
fn an_unknown_top_level_inventory_field_is_a_located_error() {
    let mut inventory = Inventory::new();
    let error = porin_compiler::inventory::yaml::add_inventory_text(
        &mut inventory,
        "inv.yaml",
        "kind: Inventory\nnamespaces: {prod: {}}\nendpoint:\n  - {name: a, namespace: prod}\n",
    )
    .unwrap_err();
    assert_eq!(error.line(), 3, "{error}");
    assert!(
        error.to_string().contains("unknown field `endpoint`"),
        "{error}"
    );
}

/// `endpoints[].interface` names the host-side device `porin agent` attaches to; it is kept
/// beside the endpoints (by display name) and changes nothing the compiler reads.
#[test]
fn endpoint_interfaces_are_kept_by_endpoint_name() {
    let with = load_text(
        "inv.yaml",
        "kind: Inventory\nendpoints:\n  - {name: vm-1, labels: {role: db}, ips: [192.0.2.10], interface: tap3}\n  - {name: web, namespace: prod, labels: {app: web}, interface: veth9}\n  - {name: other, labels: {role: x}}\n",
    )
    .unwrap();
    assert_eq!(with.interfaces.len(), 2);
    assert_eq!(with.interfaces["vm-1"].device, "tap3");
    assert_eq!(with.interfaces["prod/web"].device, "veth9");
    assert_eq!(with.interfaces["prod/web"].location.line, 4);
    let without = load_text(
        "inv.yaml",
        "kind: Inventory\nendpoints:\n  - {name: vm-1, labels: {role: db}, ips: [192.0.2.10]}\n  - {name: web, namespace: prod, labels: {app: web}}\n  - {name: other, labels: {role: x}}\n",
    )
    .unwrap();
    assert_eq!(with.endpoints, without.endpoints);
}

#[test]
fn bad_interface_names_are_located_errors_naming_the_endpoint() {
    for (device, problem) in [
        ("\"\"", "is empty"),
        ("a-name-longer-than-15", "longer than 15 bytes"),
        ("\"eth0:1\"", "contains"),
        ("\"..\"", "is not a device name"),
    ] {
        let text = format!(
            "kind: Inventory\nendpoints:\n  - {{name: ok, labels: {{a: b}}}}\n  - {{name: vm-1, labels: {{role: db}}, interface: {device}}}\n"
        );
        let message = load_text("inv.yaml", &text).unwrap_err().to_string();
        assert!(message.contains("inv.yaml:4"), "{message}");
        assert!(message.contains("endpoints[1].interface"), "{message}");
        assert!(message.contains("`vm-1`"), "{message}");
        assert!(message.contains(problem), "{message}");
    }
}
