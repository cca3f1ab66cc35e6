//! Several defects in one file are all reported, each at its own place, in
//! source order: structural errors (the loader cuts the bad node and reads
//! on), unknown fields, and Cilium's rule checks across documents.

use porin_model::{LoadLimits, load_str};

fn located(text: &str) -> Vec<(String, u32, u32, String)> {
    let outcome = load_str("many.yaml", text, &LoadLimits::default());
    outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| {
            let at = d.primary.as_ref().expect("located");
            (d.code.to_owned(), at.line, at.column, at.route.clone())
        })
        .collect()
}

#[test]
fn structural_errors_are_all_reported_with_source_indices() {
    let text = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: many, namespace: default}
spec:
  endpointSelector: {}
  ingress:
  - toPorts:
    - ports:
      - port: 80
      - port: \"443\"
        protocol: tcp
  - fromEndpoint: [{}]
  egress:
  - toEntities: [bad1, world, bad2]
";
    let found = located(text);
    let expected = [
        ("PM004", 9, 15, "spec.ingress[0].toPorts[0].ports[0].port"),
        (
            "PM023",
            11,
            19,
            "spec.ingress[0].toPorts[0].ports[1].protocol",
        ),
        ("PM003", 12, 5, "spec.ingress[1].fromEndpoint"),
        ("PM017", 14, 18, "spec.egress[0].toEntities[0]"),
        ("PM017", 14, 31, "spec.egress[0].toEntities[2]"),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(c, l, col, r)| ((*c).to_owned(), *l, *col, (*r).to_owned()))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn a_cut_required_field_is_not_reported_twice() {
    let text = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: auth, namespace: default}
spec:
  endpointSelector: {}
  ingress:
  - fromEntities: [world]
    authentication: {mode: mutual}
";
    let found = located(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "PM006");
}

#[test]
fn rule_checks_report_every_defect_of_every_document() {
    let text = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: one, namespace: default}
spec:
  endpointSelector: {}
  ingress:
  - fromCIDR: [10.0.0.1]
    toPorts: [{ports: [{port: \"99999\", protocol: TCP}]}]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: two, namespace: default}
spec:
  endpointSelector: {}
  egress:
  - toEndpoints: [{}]
    toCIDR: [10.0.0.0/8]
";
    let outcome = load_str("docs.yaml", text, &LoadLimits::default());
    let codes: Vec<(&str, usize)> = outcome
        .diagnostics
        .iter()
        .map(|d| (d.code, d.primary.as_ref().expect("located").document))
        .collect();
    assert_eq!(codes, vec![("PM018", 0), ("PM021", 0), ("PM016", 1)]);
    assert!(outcome.documents.is_empty());
}

/// kubectl's go-yaml applies merge keys, so porin does too: the merged
/// entries count, the mapping's own entries win.
#[test]
fn merge_keys_are_applied() {
    let text = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: merged, namespace: default}
spec:
  endpointSelector: {}
  ingress:
  - &base
    fromEntities: [world]
    toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]
  - <<: *base
    fromEntities: [cluster]
";
    let outcome = load_str("merge.yaml", text, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:#?}", outcome.diagnostics);
    let json = serde_json::to_value(&outcome.documents[0].doc).expect("serializes");
    assert_eq!(
        json["spec"]["ingress"][1]["toPorts"][0]["ports"][0]["port"],
        "80"
    );
    assert_eq!(json["spec"]["ingress"][1]["fromEntities"][0], "cluster");
}
