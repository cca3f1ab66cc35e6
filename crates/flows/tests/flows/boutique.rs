//! The Online Boutique recording (fixtures/flows/boutique: every call of
//! the demo's call graph, DNS, the world to the frontend, checkout's
//! webhook to an outside address, and drops written from the policies'
//! semantics): 0 fidelity disagreements under examples/boutique/policies,
//! and the tightened checkout policy of examples/boutique/changes closes
//! the webhook edge, reported with its counts and the rule.

use porin_flows::observe::record;
use porin_flows::reader::ReadLimits;
use porin_flows::replay::{Finding, replay};

use crate::common::{compiled, workspace};

const INVENTORY: &str = "examples/boutique/manifests.yaml";
const POLICIES: [&str; 9] = [
    "allow-dns.yaml",
    "backends.yaml",
    "cartservice.yaml",
    "checkoutservice.yaml",
    "default-deny.yaml",
    "frontend.yaml",
    "loadgenerator.yaml",
    "recommendationservice.yaml",
    "redis-cart.yaml",
];

fn policies(tightened: bool) -> Vec<String> {
    POLICIES
        .iter()
        .map(|p| {
            if tightened && *p == "checkoutservice.yaml" {
                "examples/boutique/changes/checkoutservice-tightened.yaml".to_owned()
            } else {
                format!("examples/boutique/policies/{p}")
            }
        })
        .collect()
}

#[test]
fn the_boutique_recording_agrees_with_its_policies_and_the_tightened_checkout_closes_the_webhook() {
    let listed: Vec<String> = std::fs::read_dir(workspace().join("examples/boutique/policies"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed.len(), POLICIES.len(), "{listed:?}");
    let current_paths = policies(false);
    let current = compiled(
        &current_paths.iter().map(String::as_str).collect::<Vec<_>>(),
        INVENTORY,
    );
    let new_paths = policies(true);
    let new = compiled(
        &new_paths.iter().map(String::as_str).collect::<Vec<_>>(),
        INVENTORY,
    );
    let path = workspace().join("fixtures/flows/boutique/observe.jsonpb");
    let recording = record(&[path], &[&new, &current], ReadLimits::default()).unwrap();
    assert!(recording.problems.is_empty(), "{:#?}", recording.problems);
    let report = replay(&recording, &new, Some(&current));
    assert_eq!(
        report.count(Finding::Disagreement),
        0,
        "{:#?}",
        report.findings
    );
    assert!(report.decided > 300);
    let denied = &report.findings[&Finding::NewlyDenied];
    let edges: Vec<String> = denied
        .iter()
        .map(|(e, a)| format!("{} -> {} {} x{}", e.from, e.to, e.ports(), a.flows))
        .collect();
    assert_eq!(edges, ["default/checkoutservice -> world-ipv4 TCP/443 x6"]);
    let rules: Vec<&str> = denied
        .values()
        .next()
        .unwrap()
        .rules
        .iter()
        .map(|r| r.text.as_str())
        .collect();
    assert!(
        rules.iter().any(|r| r.starts_with(
            "in force, allowed by CiliumNetworkPolicy default/checkoutservice spec.egress[1]"
        )),
        "{rules:#?}"
    );
    assert_eq!(report.count(Finding::NewlyAllowed), 0);
}
