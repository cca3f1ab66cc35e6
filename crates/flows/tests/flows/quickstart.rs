//! Replaying the quickstart recording (fixtures/flows/quickstart, whose
//! verdicts were written from Cilium's semantics, see its README): under
//! the policies in force porin agrees with every recorded verdict; the
//! proposed change closes the frontend's edge to the api and opens the
//! remote nodes' probes, with counts and the rules responsible.

use porin_flows::observe::record;
use porin_flows::reader::ReadLimits;
use porin_flows::replay::{Finding, replay};

use crate::common::{compiled, workspace};

const INVENTORY: &str = "examples/quickstart/inventory.yaml";

#[test]
fn the_policies_in_force_agree_with_every_recorded_verdict() {
    let current = compiled(&["examples/quickstart/policies"], INVENTORY);
    for file in ["observe.json", "observe.jsonpb"] {
        let path = workspace().join("fixtures/flows/quickstart").join(file);
        let recording = record(&[path], &[&current, &current], ReadLimits::default()).unwrap();
        let report = replay(&recording, &current, Some(&current));
        assert!(report.findings.is_empty(), "{file}: {:#?}", report.findings);
        assert_eq!(report.decided, 46, "{file}");
        assert_eq!(recording.unmapped, 1, "coredns is not in the inventory");
        assert!(report.fidelity_checked);
    }
}

#[test]
fn the_proposed_change_closes_an_observed_edge_and_names_the_rule() {
    let current = compiled(&["examples/quickstart/policies"], INVENTORY);
    let proposed = compiled(&["fixtures/flows/quickstart/proposed"], INVENTORY);
    let path = workspace().join("fixtures/flows/quickstart/observe.json");
    let recording = record(&[path], &[&proposed, &current], ReadLimits::default()).unwrap();
    let report = replay(&recording, &proposed, Some(&current));
    assert_eq!(report.count(Finding::Disagreement), 0);
    let denied = &report.findings[&Finding::NewlyDenied];
    let edges: Vec<String> = denied
        .iter()
        .map(|(e, a)| format!("{} -> {} {} x{}", e.from, e.to, e.ports(), a.flows))
        .collect();
    // 6 IPv4 + 3 IPv6 policy verdicts and 2 trace events to the endpoint.
    assert_eq!(edges, ["shop/frontend -> shop/api TCP/8080 x11"]);
    let aggregate = denied.values().next().unwrap();
    assert!(aggregate.first < aggregate.last);
    let located: Vec<(String, u32)> = aggregate
        .rules
        .iter()
        .filter(|r| !r.file.is_empty())
        .map(|r| (r.file.rsplit('/').next().unwrap().to_owned(), r.line))
        .collect();
    assert_eq!(
        located,
        [("api.yaml".to_owned(), 14)],
        "{:#?}",
        aggregate.rules
    );
    assert!(
        aggregate.rules.iter().any(|r| r
            .text
            .starts_with("in force, allowed by CiliumNetworkPolicy shop/api spec.ingress[0]")),
        "{:#?}",
        aggregate.rules
    );
    let allowed = &report.findings[&Finding::NewlyAllowed];
    let edges: Vec<String> = allowed
        .iter()
        .map(|(e, a)| format!("{} -> {} {} x{}", e.from, e.to, e.ports(), a.flows))
        .collect();
    assert_eq!(edges, ["remote-node -> shop/api TCP/8080 x2"]);
}

#[test]
fn without_a_current_set_the_same_change_is_judged_against_the_recording_alone() {
    let proposed = compiled(&["fixtures/flows/quickstart/proposed"], INVENTORY);
    let path = workspace().join("fixtures/flows/quickstart/observe.json");
    let recording = record(&[path], &[&proposed], ReadLimits::default()).unwrap();
    let report = replay(&recording, &proposed, None);
    assert!(!report.fidelity_checked);
    assert_eq!(report.count(Finding::NewlyDenied), 11);
    assert_eq!(report.count(Finding::NewlyAllowed), 2);
    assert_eq!(report.unchanged + 13, report.decided);
}
