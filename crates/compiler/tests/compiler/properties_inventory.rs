//! Property (issue 12): for any inventory the loaders accept — porin YAML,
//! Kubernetes Pod manifests or a `cilium-dbg endpoint list -o json` dump,
//! with adversarial label keys (`cidr:`, `unspec:`, `$`, `reserved.`,
//! reserved labels) and given identity numbers (local scope, reserved,
//! remote-node scope) — every pod's labels have source `k8s`, and no
//! endpoint shares an identity with a CIDR or reserved identity
//! (`porin_compiler::inventory::invariants`, the statement the
//! `inventory_load` fuzz target checks too).

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeSet;

use ipnetwork::IpNetwork;
use porin_compiler::allocation::IdentityTable;
use porin_compiler::inventory::Inventory;
use porin_compiler::inventory::invariants::check_identity_invariants;
use proptest::prelude::*;

/// Key prefixes a user can write; Cilium's `NewLabel` splits each off.
const PREFIXES: [&str; 12] = [
    "",
    "",
    "cidr:",
    "unspec:",
    "container:",
    "any:",
    "k8s:",
    "fqdn:",
    "reserved:",
    "$",
    "reserved.",
    "cidrgroup:",
];
/// Keys, some of them Cilium's own (namespace, service account, cluster).
const KEYS: [&str; 8] = [
    "app",
    "role",
    "host",
    "health",
    "203.0.113.0/24",
    "io.kubernetes.pod.namespace",
    "io.cilium.k8s.policy.cluster",
    "io.cilium.k8s.policy.serviceaccount",
];
const VALUES: [&str; 4] = ["", "a", "b", "kube-system"];
/// Given identities: cluster, well-known, reserved, local and remote-node
/// scope (16777217 is the first CIDR identity below), unknown numbers.
const IDENTITIES: [u32; 12] = [
    300, 70_000, 102, 0, 1, 2, 4, 5, 50, 16_777_217, 16_777_218, 33_554_433,
];
const CIDRS: [&str; 3] = ["203.0.113.0/24", "10.0.0.0/8", "fd00::/8"];

/// A prefix index: plain keys most of the time, so that many generated
/// inventories are accepted and the invariants are checked on them.
fn prefix() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(0usize), 2 => 0..PREFIXES.len()]
}

#[derive(Debug, Clone)]
struct Spec {
    namespace: Option<u8>,
    labels: Vec<(usize, usize, usize)>,
    identity: Option<usize>,
    service_account: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::option::of(0u8..3),
        proptest::collection::vec((prefix(), 0..KEYS.len(), 0..VALUES.len()), 0..4),
        proptest::option::weighted(0.25, 0..IDENTITIES.len()),
        any::<bool>(),
    )
        .prop_map(|(namespace, labels, identity, service_account)| Spec {
            namespace,
            labels,
            identity,
            service_account,
        })
}

/// A YAML flow mapping of the spec's labels (duplicates are a YAML error,
/// which the loader must refuse like any other).
fn label_map(spec: &Spec) -> String {
    let entries: Vec<String> = spec
        .labels
        .iter()
        .map(|(p, k, v)| {
            format!(
                "{:?}: {:?}",
                format!("{}{}", PREFIXES[*p], KEYS[*k]),
                VALUES[*v]
            )
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

fn porin_yaml(specs: &[Spec], namespace_labels: &[(usize, usize, usize)]) -> String {
    let mut text = String::from("kind: Inventory\nnamespaces:\n  ns0: {");
    let ns: Vec<String> = namespace_labels
        .iter()
        .map(|(p, k, v)| {
            format!(
                "{:?}: {:?}",
                format!("{}{}", PREFIXES[*p], KEYS[*k]),
                VALUES[*v]
            )
        })
        .collect();
    text.push_str(&ns.join(", "));
    text.push_str("}\nendpoints:\n");
    for (i, spec) in specs.iter().enumerate() {
        text.push_str(&format!("  - {{name: e{i}, labels: {}", label_map(spec)));
        if let Some(ns) = spec.namespace {
            text.push_str(&format!(", namespace: ns{ns}"));
        }
        if spec.service_account {
            text.push_str(", serviceAccount: sa");
        }
        if let Some(id) = spec.identity {
            text.push_str(&format!(", identity: {}", IDENTITIES[id]));
        }
        text.push_str("}\n");
    }
    text
}

fn manifests(specs: &[Spec]) -> String {
    let mut text = String::new();
    for (i, spec) in specs.iter().enumerate() {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: ns{}\n  labels: {}\nspec: {{}}\n",
            spec.namespace.unwrap_or(0),
            label_map(spec)
        ));
    }
    text
}

fn dump(specs: &[Spec]) -> String {
    let items: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let mut labels: Vec<String> = spec
                .labels
                .iter()
                .map(|(p, k, v)| {
                    let value = VALUES[*v];
                    let text = format!("{}{}", PREFIXES[*p], KEYS[*k]);
                    if value.is_empty() {
                        text
                    } else {
                        format!("{text}={value}")
                    }
                })
                .collect();
            if let Some(ns) = spec.namespace {
                labels.push(format!("k8s:io.kubernetes.pod.namespace=ns{ns}"));
            }
            let id = spec.identity.map_or(40_000 + i as u32, |n| IDENTITIES[n]);
            format!(
                "{{\"id\": {i}, \"status\": {{\"identity\": {{\"id\": {id}, \"labels\": {}}}}}}}",
                serde_json::to_string(&labels).unwrap()
            )
        })
        .collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

fn check(text: &str) -> Result<(), TestCaseError> {
    let mut inventory = Inventory::new();
    if inventory.add_text("prop.yaml", text).is_err() || inventory.finish().is_err() {
        return Ok(());
    }
    let prefixes: BTreeSet<IpNetwork> = CIDRS.iter().map(|p| p.parse().unwrap()).collect();
    let table = match IdentityTable::allocate(&inventory, &prefixes) {
        Ok(table) => table,
        Err(error) => {
            // Only two endpoints claiming one number with different labels
            // may get past finish(); everything else finish() refuses.
            prop_assert!(
                error.to_string().contains("but also to labels"),
                "{error}\n{text}"
            );
            return Ok(());
        }
    };
    if let Err(violation) = check_identity_invariants(&inventory, &table) {
        return Err(TestCaseError::fail(format!("{violation}\n{text}")));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn accepted_porin_yaml_inventories_keep_the_identity_invariants(
        specs in proptest::collection::vec(spec(), 1..6),
        namespace_labels in proptest::collection::vec((prefix(), 0..KEYS.len(), 0..VALUES.len()), 0..3),
    ) {
        check(&porin_yaml(&specs, &namespace_labels))?;
    }

    #[test]
    fn accepted_pod_manifests_keep_the_identity_invariants(
        specs in proptest::collection::vec(spec(), 1..6),
    ) {
        check(&manifests(&specs))?;
    }

    #[test]
    fn accepted_endpoint_dumps_keep_the_identity_invariants(
        specs in proptest::collection::vec(spec(), 1..6),
    ) {
        check(&dump(&specs))?;
    }
}

/// The property can fail: the attacker, were it accepted, breaks
/// it (the check is not vacuous).
#[test]
fn the_invariants_catch_a_merged_cidr_identity() {
    let text =
        "kind: Inventory\nendpoints:\n  - {name: attacker, namespace: evil, labels: {app: x}}\n";
    let mut inventory = Inventory::new();
    inventory.add_text("t.yaml", text).unwrap();
    inventory.finish().unwrap();
    // What the loader now refuses, forced past it.
    inventory.endpoints[0].identity = Some(16_777_217);
    let prefixes: BTreeSet<IpNetwork> = CIDRS.iter().map(|p| p.parse().unwrap()).collect();
    assert!(IdentityTable::allocate(&inventory, &prefixes).is_err());
    inventory.endpoints[0].identity = None;
    let mut table = IdentityTable::allocate(&inventory, &prefixes).unwrap();
    table.endpoint_identity[0] = 16_777_217;
    let violation = check_identity_invariants(&inventory, &table).unwrap_err();
    assert!(
        violation.to_string().contains("outside the cluster scope"),
        "{violation}"
    );
}
