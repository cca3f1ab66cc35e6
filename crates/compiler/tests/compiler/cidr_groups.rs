//! CiliumCIDRGroups: `cidrGroupRef`, `cidrGroupSelector` and `except`
//! resolved the way Cilium 1.19 does (`pkg/policy/k8s/cidr_group.go`
//! labels the group's prefixes, `pkg/policy/types/selector.go`
//! `newCIDRRuleSelector` selects them, `pkg/ipcache/metadata.go`
//! `mergeParentLabels` passes the labels down to narrower prefixes). The
//! policies follow Cilium's connectivity tests
//! (`cilium-cli/connectivity/manifests/client-egress-to-cidrgroup-*.yaml`).

#![allow(clippy::unwrap_used, reason = "tests")]

use porin_compiler::compile::{Compiled, compile};
use porin_compiler::explain::FlowVerdict;
use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

const INVENTORY: &str = r#"
kind: Inventory
endpoints:
  - {name: client, namespace: default, labels: {kind: client}, ips: [10.0.0.1, "fd00::1"]}
  - {name: server, namespace: default, labels: {kind: server}, ips: [10.0.0.2]}
"#;

/// The group of the connectivity test, with a label to select it by.
const GROUP: &str = r#"
apiVersion: cilium.io/v2alpha1
kind: CiliumCIDRGroup
metadata:
  name: cilium-test-external-cidr
  labels: {destination: external}
spec:
  externalCIDRs: [192.0.2.0/24, "2001:db8::/64"]
"#;

fn compile_yaml(policies: &str) -> Compiled {
    let mut inventory = Inventory::new();
    inventory.add_text("inventory.yaml", INVENTORY).unwrap();
    inventory.finish().unwrap();
    let outcome = load_str("policy.yaml", policies, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    let inputs = PolicyInput::from_outcome(&outcome);
    compile(&inputs, &inventory).unwrap()
}

use crate::support::tcp_verdict as verdict;

fn codes(compiled: &Compiled) -> Vec<&'static str> {
    compiled.diagnostics.iter().map(|d| d.code).collect()
}

fn egress(peer: &str) -> String {
    format!(
        r#"{GROUP}
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {{name: client-egress-to-cidrgroup, namespace: default}}
spec:
  endpointSelector: {{matchLabels: {{kind: client}}}}
  egress:
  - toCIDRSet: [{peer}]
"#
    )
}

#[test]
fn cidr_group_ref_allows_the_groups_cidrs_client_egress_to_cidrgroup() {
    let compiled = compile_yaml(&egress("{cidrGroupRef: cilium-test-external-cidr}"));
    assert_eq!(
        verdict(&compiled, "default/client", "192.0.2.7", 443),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/client", "2001:db8::7", 443),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/client", "198.51.100.7", 443),
        FlowVerdict::Deny
    );
    assert_eq!(
        verdict(&compiled, "default/client", "default/server", 443),
        FlowVerdict::Deny
    );
    assert!(
        !codes(&compiled).contains(&"PC016"),
        "{:?}",
        codes(&compiled)
    );
    assert!(
        !codes(&compiled).contains(&"PC001"),
        "{:?}",
        codes(&compiled)
    );
}

#[test]
fn cidr_group_selector_selects_by_group_labels_client_egress_to_cidrgroup_label() {
    let compiled = compile_yaml(&egress(
        "{cidrGroupSelector: {matchLabels: {destination: external}}}",
    ));
    assert_eq!(
        verdict(&compiled, "default/client", "192.0.2.7", 443),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/client", "198.51.100.7", 443),
        FlowVerdict::Deny
    );
    let other = compile_yaml(&egress(
        "{cidrGroupSelector: {matchLabels: {destination: internal}}}",
    ));
    assert_eq!(
        verdict(&other, "default/client", "192.0.2.7", 443),
        FlowVerdict::Deny
    );
    assert!(codes(&other).contains(&"PC016"));
}

#[test]
fn except_beside_a_group_is_a_carve_out_pkg_policy_api_cidr_go() {
    let compiled = compile_yaml(&egress(
        "{cidrGroupRef: cilium-test-external-cidr, except: [192.0.2.128/25]}",
    ));
    assert_eq!(
        verdict(&compiled, "default/client", "192.0.2.7", 443),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/client", "192.0.2.200", 443),
        FlowVerdict::Deny
    );
}

#[test]
fn narrower_prefixes_inherit_group_labels_test_metadata_merge_parent_labels() {
    // Another policy names 192.0.2.64/26, so that prefix gets its own CIDR
    // identity; the ipcache still gives it the group's labels.
    let yaml = format!(
        r#"{}
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {{name: server-narrow, namespace: default}}
spec:
  endpointSelector: {{matchLabels: {{kind: server}}}}
  egress:
  - toCIDR: [192.0.2.64/26]
"#,
        egress("{cidrGroupRef: cilium-test-external-cidr}")
    );
    let compiled = compile_yaml(&yaml);
    assert_eq!(
        verdict(&compiled, "default/client", "192.0.2.70", 443),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/server", "192.0.2.70", 443),
        FlowVerdict::Allow
    );
    assert_eq!(
        verdict(&compiled, "default/server", "192.0.2.7", 443),
        FlowVerdict::Deny
    );
}

#[test]
fn dangling_cidr_group_ref_allows_nothing_with_a_located_warning() {
    let compiled = compile_yaml(&egress("{cidrGroupRef: no-such-group}"));
    assert_eq!(
        verdict(&compiled, "default/client", "192.0.2.7", 443),
        FlowVerdict::Deny
    );
    let finding = compiled
        .diagnostics
        .iter()
        .find(|d| d.code == "PC016")
        .unwrap();
    let at = finding.primary.as_ref().unwrap();
    assert!(
        at.route.ends_with("toCIDRSet[0].cidrGroupRef"),
        "{}",
        at.route
    );
    assert!(at.line > 0);
    assert!(finding.message.contains("no-such-group"));
}

#[test]
fn cidr_group_in_egress_deny_denies_the_group_client_egress_to_cidrgroup_deny() {
    let yaml = format!(
        r#"{GROUP}
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {{name: client-egress-to-cidrgroup-deny, namespace: default}}
spec:
  endpointSelector: {{matchLabels: {{kind: client}}}}
  egress:
  - toEntities: [all]
  egressDeny:
  - toCIDRSet: [{{cidrGroupRef: cilium-test-external-cidr}}]
"#
    );
    let compiled = compile_yaml(&yaml);
    assert_eq!(
        verdict(&compiled, "default/client", "192.0.2.7", 443),
        FlowVerdict::Deny
    );
    assert_eq!(
        verdict(&compiled, "default/client", "198.51.100.7", 443),
        FlowVerdict::Allow
    );
}

#[test]
fn v2_cidr_group_and_group_lists_load_too() {
    let yaml = r#"
apiVersion: v1
kind: List
items:
- apiVersion: cilium.io/v2
  kind: CiliumCIDRGroup
  metadata: {name: partners}
  spec: {externalCIDRs: [203.0.113.0/24]}
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: to-partners, namespace: default}
spec:
  endpointSelector: {matchLabels: {kind: client}}
  egress:
  - toCIDRSet: [{cidrGroupRef: partners}]
"#;
    let compiled = compile_yaml(yaml);
    assert_eq!(
        verdict(&compiled, "default/client", "203.0.113.9", 80),
        FlowVerdict::Allow
    );
}

#[test]
fn invalid_cidr_group_is_refused_with_its_location() {
    let outcome = load_str(
        "groups.yaml",
        "apiVersion: cilium.io/v2alpha1\nkind: CiliumCIDRGroup\nmetadata: {name: bad}\nspec:\n  externalCIDRs: [192.0.2.1]\n",
        &LoadLimits::default(),
    );
    assert!(outcome.documents.is_empty());
    let error = outcome.diagnostics.iter().find(|d| d.is_error()).unwrap();
    assert_eq!(error.code, "PM018");
    let at = error.primary.as_ref().unwrap();
    assert_eq!((at.line, at.route.as_str()), (5, "spec.externalCIDRs[0]"));
    let outcome = load_str(
        "groups.yaml",
        "apiVersion: cilium.io/v1\nkind: CiliumCIDRGroup\nmetadata: {name: bad}\nspec: {externalCIDRs: []}\n",
        &LoadLimits::default(),
    );
    assert_eq!(outcome.diagnostics[0].code, "PM009");
}
