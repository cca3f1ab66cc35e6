//! Targeted verifier semantics, each naming its Cilium reference.

#![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_lint::config::LintConfig;
use porin_lint::{Report, verify};
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

const INVENTORY: &str = r"
kind: Inventory
cluster: default
namespaces: {default: {}}
endpoints:
  - {name: web, namespace: default, labels: {app: web}, ips: [10.0.1.1]}
  - {name: db, namespace: default, labels: {app: db}, ips: [10.0.1.3]}
";

fn lint(policies: &str, with_inventory: bool) -> Report {
    let outcome = load_str("p.yaml", policies, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    let mut inventory = Inventory::new();
    inventory.add_text("inventory.yaml", INVENTORY).unwrap();
    inventory.finish().unwrap();
    let inputs = PolicyInput::from_outcome(&outcome);
    verify(
        &inputs,
        with_inventory.then_some(&inventory),
        &LintConfig::default(),
    )
    .unwrap()
}

fn codes(report: &Report) -> Vec<&'static str> {
    report.findings.iter().map(|d| d.code).collect()
}

const HEADER: &str = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: default}\nspec:\n  endpointSelector: {matchLabels: {app: web}}\n";

#[test]
fn covered_cidr_denies_are_not_flagged_pr_33719() {
    // docs/semantics.md §4.6: Cilium keeps a deny covered by a broader CIDR
    // deny (cilium/cilium PR #33719); the verifier reports no deny rule as
    // redundant.
    let report = lint(
        &format!(
            "{HEADER}  egressDeny:\n  - toCIDR: [10.0.0.0/8]\n  - toCIDR: [10.1.0.0/16]\n  egress:\n  - toEntities: [all]\n"
        ),
        true,
    );
    assert!(
        !report
            .findings
            .iter()
            .any(|d| d.message.contains("egressDeny[1]")),
        "{:#?}",
        report.findings
    );
}

#[test]
fn narrow_cidr_allow_under_world_deny_is_shadowed_not_a_bypass_ghsa_3wwx_63fv_pfq6() {
    // The advisory's shape: a narrower CIDR allow under a world deny. In
    // fixed Cilium the CIDR identity carries reserved:world, so the deny
    // wins: the allow is dead (PR004), not a bypass (PR006).
    let report = lint(
        &format!(
            "{HEADER}  egressDeny:\n  - toEntities: [world]\n  egress:\n  - toCIDR: [1.2.3.4/32]\n  - toEndpoints: [{{matchLabels: {{app: db}}}}]\n"
        ),
        true,
    );
    let found = codes(&report);
    assert!(found.contains(&"PR004"), "{found:?}");
    assert!(!found.contains(&"PR006"), "{found:?}");
}

#[test]
fn default_allow_re_opening_a_cidr_for_pods_is_a_bypass() {
    // enableDefaultDeny: false adds the wildcard allow (§3.3,
    // computePolicyEnforcementAndRules); db's address is inside the denied
    // CIDR but db's identity is not a CIDR identity.
    let report = lint(
        &format!(
            "{HEADER}  enableDefaultDeny: {{egress: false, ingress: false}}\n  egressDeny:\n  - toCIDR: [10.0.0.0/8]\n"
        ),
        true,
    );
    let bypass: Vec<_> = report
        .findings
        .iter()
        .filter(|d| d.code == "PR006")
        .collect();
    assert_eq!(bypass.len(), 1, "{:#?}", report.findings);
    assert!(bypass[0].message.contains("10.0.1.3"));
    assert!(
        bypass[0]
            .notes
            .iter()
            .any(|n| n.contains("allow-all of egress"))
    );
}

#[test]
fn annotations_suppress_and_are_counted() {
    let policy = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: default, annotations: {porin.dev/ignore: \"rule-allows-nothing, PR007\"}}\nspec:\n  endpointSelector: {matchLabels: {app: web}}\n  ingress: [{}]\n";
    let report = lint(policy, true);
    assert!(!codes(&report).contains(&"PR012"));
    assert_eq!(report.suppressed.get("PR012"), Some(&1));
    let unknown = policy.replace("PR007", "PR999");
    let report = lint(&unknown, true);
    assert!(codes(&report).contains(&"PR000"), "{:?}", codes(&report));
}

#[test]
fn without_inventory_only_static_rules_run() {
    let report = lint(&format!("{HEADER}  ingress: [{{}}]\n"), false);
    assert_eq!(codes(&report), vec!["PR012"]);
    for code in ["PR001", "PR004", "PR005", "PR006", "PR014"] {
        assert!(report.skipped.contains(&code));
    }
    assert!(!report.skipped.contains(&"PR012"));
}
