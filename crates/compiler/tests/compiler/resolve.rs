//! Resolution decisions that need a whole compilation: fail-closed peers,
//! Cilium quirks porin mirrors, merge conflicts, and the explanation text.
//! Each test names the Cilium source it follows.

#![allow(clippy::unwrap_used, reason = "tests")]

use porin_compiler::compile::{Compiled, compile};
use porin_compiler::explain::{Flow, FlowVerdict, Peer, evaluate, explain};
use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_compiler::resolve::rule::proto;
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

const INVENTORY: &str = r#"
kind: Inventory
endpoints:
  - {name: a, namespace: default, labels: {app: a}, ips: [10.0.0.1]}
  - {name: b, namespace: default, labels: {app: b}, ips: [10.0.0.2], ports: [{name: web, port: 8080}]}
  - {name: c, namespace: other, labels: {app: c}, ips: [10.0.0.3]}
fqdns:
  api.example.com: [192.0.2.10]
services:
  - {name: db, namespace: default, selector: {app: b}}
"#;

fn compile_yaml(policies: &str) -> Compiled {
    compile_with_inventory(INVENTORY, policies)
}

fn compile_with_inventory(inventory_yaml: &str, policies: &str) -> Compiled {
    let mut inventory = Inventory::new();
    inventory
        .add_text("inventory.yaml", inventory_yaml)
        .unwrap();
    inventory.finish().unwrap();
    let outcome = load_str("policy.yaml", policies, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    let inputs = PolicyInput::from_outcome(&outcome);
    compile(&inputs, &inventory).unwrap()
}

use crate::support::verdict_of as verdict;

fn codes(compiled: &Compiled) -> Vec<&'static str> {
    let mut all: Vec<&'static str> = compiled.diagnostics.iter().map(|d| d.code).collect();
    for e in &compiled.endpoints {
        all.extend(e.diagnostics.iter().map(|d| d.code));
    }
    all
}

#[test]
fn fqdn_answers_from_the_inventory_and_missing_ones_fail_closed() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: fqdn, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: a}}
  egress:
    - toFQDNs: [{matchName: api.example.com}, {matchName: unknown.example.com}]
"#,
    );
    assert_eq!(
        verdict(&compiled, "default/a", "192.0.2.10", proto::TCP, 443),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/a", "192.0.2.11", proto::TCP, 443),
        FlowVerdict::Deny
    );
    assert!(codes(&compiled).contains(&"PC002"));
}

#[test]
fn dangling_cidr_group_in_a_deny_rule_denies_every_peer() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: deny-svc, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: a}}
  egress:
    - toEntities: [all]
  egressDeny:
    - toCIDRSet: [{cidrGroupRef: missing}]
      toPorts: [{ports: [{port: "5432", protocol: TCP}]}]
"#,
    );
    assert!(codes(&compiled).contains(&"PC016"));
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 5432),
        FlowVerdict::Deny
    );
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 80),
        FlowVerdict::Allow
    );
}

#[test]
fn services_with_selectors_become_endpoint_selectors_pkg_policy_k8s_service_go() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: svc, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: a}}
  egress:
    - toServices: [{k8sService: {serviceName: db, namespace: default}}]
"#,
    );
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 5432),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/a", "other/c", proto::TCP, 5432),
        FlowVerdict::Deny
    );
}

#[test]
fn to_services_in_egress_deny_is_not_translated_pkg_policy_k8s_service_go_process_rule() {
    // processRule rewrites `rule.Egress` only: the deny item keeps an empty
    // L3, which with ports is every peer (RulesToPolicyEntries).
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: deny-svc, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: a}}
  egress:
    - toEntities: [all]
  egressDeny:
    - toServices: [{k8sService: {serviceName: db, namespace: default}}]
      toPorts: [{ports: [{port: "5432", protocol: TCP}]}]
"#,
    );
    assert!(codes(&compiled).contains(&"PC014"));
    assert!(!codes(&compiled).contains(&"PC003"));
    // other/c is not a backend of db, yet the deny covers it.
    assert_eq!(
        verdict(&compiled, "default/a", "other/c", proto::TCP, 5432),
        FlowVerdict::Deny
    );
    assert_eq!(
        verdict(&compiled, "default/a", "other/c", proto::TCP, 80),
        FlowVerdict::Allow
    );
}

#[test]
fn to_services_without_namespace_matches_every_namespace_service_ref_matches() {
    let services = "  - {name: db, namespace: other, selector: {app: c}}\n  - {name: none, namespace: default}\n";
    let compiled = compile_with_inventory(
        &format!("{INVENTORY}{services}"),
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: svc, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: a}}
  egress:
    - toServices: [{k8sService: {serviceName: db}}]
    - toServices: [{k8sService: {serviceName: none, namespace: default}}]
      toPorts: [{ports: [{port: "443", protocol: TCP}]}]
"#,
    );
    assert_eq!(
        verdict(&compiled, "default/a", "other/c", proto::TCP, 5432),
        FlowVerdict::Allow
    );
    let any_ns = compiled
        .diagnostics
        .iter()
        .find(|d| d.code == "PC013")
        .expect("PC013");
    assert!(any_ns.message.contains("other/db"), "{}", any_ns.message);
    // A selector-less service without backends yields no peer: PC003, and
    // the rule's port stays closed.
    let none = compiled
        .diagnostics
        .iter()
        .find(|d| d.code == "PC003")
        .expect("PC003");
    assert!(
        none.message.contains("allows its ports to every peer"),
        "{}",
        none.message
    );
    assert_eq!(
        verdict(&compiled, "default/a", "192.0.2.99", proto::TCP, 443),
        FlowVerdict::Deny
    );
}

#[test]
fn from_nodes_compiles_to_nothing_with_a_diagnostic() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: nodes, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: b}}
  ingress:
    - fromNodes: [{matchLabels: {role: worker}}]
"#,
    );
    assert!(codes(&compiled).contains(&"PC001"));
    assert_eq!(
        verdict(&compiled, "remote-node", "default/b", proto::TCP, 80),
        FlowVerdict::Deny
    );
}

#[test]
fn conflicting_l7_parsers_fail_closed_rule_go_merge_port_proto() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: conflict, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: b}}
  ingress:
    - fromEndpoints: [{matchLabels: {app: a}}]
      toPorts: [{ports: [{port: "9092", protocol: TCP}], rules: {http: [{method: GET}]}}]
    - fromEndpoints: [{matchLabels: {app: a}}]
      toPorts: [{ports: [{port: "9092", protocol: TCP}], rules: {kafka: [{role: produce}]}}]
"#,
    );
    assert!(codes(&compiled).contains(&"PC006"));
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 9092),
        FlowVerdict::Deny
    );
}

#[test]
fn named_port_failures_yield_no_keys_pkg_policy_l4_go_to_map_state() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: named, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: b}}
  ingress:
    - fromEndpoints: [{matchLabels: {app: a}}]
      toPorts: [{ports: [{port: web, protocol: TCP}, {port: web, protocol: UDP}, {port: nope, protocol: TCP}]}]
"#,
    );
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 8080),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::UDP, 8080),
        FlowVerdict::Deny
    );
    let named: Vec<_> = compiled
        .endpoints
        .iter()
        .flat_map(|e| &e.diagnostics)
        .filter(|d| d.code == "PC004")
        .collect();
    assert_eq!(named.len(), 2, "{named:?}");
}

#[test]
fn icmp_type_zero_is_every_type_in_cilium_1_19_and_porin_says_so() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: icmp0, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: b}}
  ingress:
    - fromEndpoints: [{matchLabels: {app: a}}]
      icmps: [{fields: [{type: EchoReply}]}]
"#,
    );
    assert!(codes(&compiled).contains(&"PC011"));
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::ICMP, 8),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 8),
        FlowVerdict::Deny
    );
}

#[test]
fn knp_ingress_ip_block_quirk_is_mirrored_and_reported_network_policy_go() {
    let compiled = compile_yaml(
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: ipblock, namespace: default}
spec:
  podSelector: {matchLabels: {app: b}}
  ingress:
    - from: [{ipBlock: {cidr: 192.0.2.0/24}}]
  egress:
    - to: [{ipBlock: {cidr: 192.0.2.0/24}}]
  policyTypes: [Ingress, Egress]
"#,
    );
    assert!(codes(&compiled).contains(&"PC005"));
    // Ingress: the namespace's own pods are admitted too (the quirk).
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 80),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "other/c", "default/b", proto::TCP, 80),
        FlowVerdict::Deny
    );
    // Egress has no such quirk.
    assert_eq!(
        verdict(&compiled, "default/b", "default/a", proto::TCP, 80),
        FlowVerdict::Deny
    );
    assert_eq!(
        verdict(&compiled, "default/b", "192.0.2.7", proto::TCP, 80),
        FlowVerdict::Allow
    );
}

#[test]
fn explanations_name_the_rule_and_location() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: explain, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: b}}
  ingress:
    - fromEndpoints: [{matchLabels: {app: a}}]
      toPorts: [{ports: [{port: "80", protocol: TCP}]}]
"#,
    );
    let flow = Flow {
        from: Peer::parse("default/a", &compiled).unwrap(),
        to: Peer::parse("default/b", &compiled).unwrap(),
        proto: proto::TCP,
        port: 80,
        family: None,
    };
    let text = explain(&compiled, &evaluate(&compiled, &flow));
    assert!(
        text.contains("CiliumNetworkPolicy default/explain spec.ingress[0] (policy.yaml:8)"),
        "{text}"
    );
    let flow = Flow { port: 81, ..flow };
    let text = explain(&compiled, &evaluate(&compiled, &flow));
    assert!(text.contains("default deny"), "{text}");
}

#[test]
fn log_cookies_are_numbered_by_sorted_log_value() {
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: logs, namespace: default}
specs:
  - endpointSelector: {matchLabels: {app: b}}
    log: {value: zeta}
    ingress: [{fromEndpoints: [{matchLabels: {app: a}}]}]
  - endpointSelector: {matchLabels: {app: a}}
    log: {value: alpha}
    ingress: [{fromEndpoints: [{matchLabels: {app: b}}]}]
"#,
    );
    let cookie = |name: &str| {
        let e = compiled.endpoint(name).unwrap();
        // Skip the host allow (identity 1, allow-localhost in Kubernetes
        // mode): it carries no cookie.
        e.entries()
            .iter()
            .find(|x| x.direction == "ingress" && x.identity != 1)
            .unwrap()
            .cookie
    };
    assert_eq!(cookie("default/a"), 1, "alpha");
    assert_eq!(cookie("default/b"), 2, "zeta");
}

#[test]
fn init_identity_is_default_deny_both_ways_repository_go() {
    let mut inventory = Inventory::new();
    inventory
        .add_text(
            "inv.yaml",
            "kind: Inventory\nendpoints:\n  - {name: starting, labels: {\"reserved:init\": \"\"}}\n  - {name: h, labels: {\"reserved:host\": \"\"}}\n",
        )
        .unwrap();
    inventory.finish().unwrap();
    let outcome = load_str(
        "p.yaml",
        "apiVersion: cilium.io/v2\nkind: CiliumClusterwideNetworkPolicy\nmetadata: {name: all}\nspec:\n  endpointSelector: {}\n  ingress: [{fromEntities: [world]}]\n",
        &LoadLimits::default(),
    );
    let compiled = compile(&PolicyInput::from_outcome(&outcome), &inventory).unwrap();
    let init = compiled.endpoint("starting").unwrap();
    assert_eq!(init.identity, 5);
    assert!(init.enforcement.ingress && init.enforcement.egress);
    assert_eq!(
        verdict(&compiled, "starting", "198.51.100.1", proto::TCP, 80),
        FlowVerdict::Deny
    );
    assert_eq!(
        verdict(&compiled, "198.51.100.1", "starting", proto::TCP, 80),
        FlowVerdict::Allow
    );
    // The host is not a subject of endpointSelector rules.
    let host = compiled.endpoint("h").unwrap();
    assert_eq!(host.identity, 1);
    assert!(!host.enforcement.ingress);
}

#[test]
fn to_ports_without_ports_allows_nothing_rule_go_merge_l4_filter() {
    // An item with toPorts is an L4 rule even when no port survives: it
    // must never become an L3-only (all ports) allow.
    let compiled = compile_yaml(
        r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: empty-ports, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: b}}
  ingress:
    - fromEndpoints: [{matchLabels: {app: a}}]
      toPorts: [{}]
"#,
    );
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 80),
        FlowVerdict::Deny
    );
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::ICMP, 8),
        FlowVerdict::Deny
    );
}

/// The map state of endpoint `name` under `rules` (what porin-lint's
/// "without this rule" compiles).
fn state_under(
    inventory: &Inventory,
    rules: &[porin_compiler::resolve::rule::PolicyRule],
    prefixes: &std::collections::BTreeSet<ipnetwork::IpNetwork>,
    name: &str,
) -> porin_compiler::mapstate::MapState {
    use porin_compiler::allocation::IdentityTable;
    use porin_compiler::resolve::policy::Resolver;
    let table = IdentityTable::allocate(inventory, prefixes).unwrap();
    let index = inventory
        .endpoints
        .iter()
        .position(|e| e.display_name() == name)
        .unwrap();
    let resolver = Resolver::new(rules, &table, inventory);
    let policy = resolver.l4_policy(table.endpoint_identity[index]);
    resolver
        .map_state(&inventory.endpoints[index], &policy, &|id| id.to_string())
        .0
}

/// Issue 15 (found by the nca differential test): deleting the only item
/// of a NetworkPolicy with `policyTypes: [Ingress]` leaves the policy's
/// default deny (Kubernetes: the policy still isolates its pods). The
/// lowered rules without the item must compile to what the YAML without
/// the item compiles to, or a lint rule's "delete this rule" is advice
/// that opens the endpoint. Egress without policyTypes is the other case:
/// the API server defaults Egress only when `egress` has an item
/// (pkg/apis/networking/v1/defaults.go), so deleting the last one opens it.
#[test]
fn knp_rules_without_an_item_compile_like_the_yaml_without_it() {
    use porin_compiler::resolve::lower::lower;
    let with = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b, namespace: default}
spec:
  podSelector: {matchLabels: {app: b}}
  policyTypes: [Ingress]
  ingress: [{}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a, namespace: default}
spec:
  podSelector: {matchLabels: {app: a}}
  egress: [{to: [{podSelector: {}}]}]
"#;
    let without = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b, namespace: default}
spec:
  podSelector: {matchLabels: {app: b}}
  policyTypes: [Ingress]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a, namespace: default}
spec:
  podSelector: {matchLabels: {app: a}}
"#;
    let mut inventory = Inventory::new();
    inventory.add_text("inventory.yaml", INVENTORY).unwrap();
    inventory.finish().unwrap();
    let load = |text: &str| load_str("policy.yaml", text, &LoadLimits::default());
    let (with, without) = (load(with), load(without));
    let lowered = lower(&PolicyInput::from_outcome(&with), &inventory);
    let items_removed: Vec<_> = lowered
        .rules
        .iter()
        .filter(|r| {
            let route = &lowered.origins[r.origin as usize].route;
            !route.starts_with("spec.ingress[") && !route.starts_with("spec.egress[")
        })
        .cloned()
        .collect();
    let reference = lower(&PolicyInput::from_outcome(&without), &inventory);
    for name in ["default/a", "default/b"] {
        let edited = state_under(&inventory, &items_removed, &lowered.prefixes, name);
        let yaml = state_under(&inventory, &reference.rules, &reference.prefixes, name);
        assert_eq!(
            edited, yaml,
            "{name}: the rules without the items compile differently from the YAML without them"
        );
    }
    // And b is in default deny for ingress: nothing reaches it.
    let compiled = compile(&PolicyInput::from_outcome(&without), &inventory).unwrap();
    assert_eq!(
        verdict(&compiled, "default/a", "default/b", proto::TCP, 80),
        FlowVerdict::Deny
    );
}
