//! `porin suggest` allows exactly the recorded forwarded traffic: replaying
//! the recording under the suggestion denies none of it (and opens no
//! recorded drop), and every port or peer never observed is denied.

use std::collections::BTreeSet;

use porin_compiler::explain::{Flow, FlowVerdict, Peer, evaluate};
use porin_flows::observe::record;
use porin_flows::reader::ReadLimits;
use porin_flows::record::Recorded;
use porin_flows::replay::{Finding, replay};
use porin_flows::resolve::PeerKey;
use porin_flows::suggest::suggest;

use crate::common::{compiled_text, inventory_only, workspace};

/// Suggests from `flows`, then checks the suggestion against the
/// recording and against probes of every endpoint pair on `probe_ports`
/// besides the observed ones. Returns the suggestion's YAML.
fn check(flows: &str, inventory: &str, probe_ports: &[u16]) -> String {
    let path = workspace().join(flows);
    let bare = inventory_only(inventory);
    let recording = record(std::slice::from_ref(&path), &[&bare], ReadLimits::default()).unwrap();
    let suggestion = suggest(&recording, &bare);
    assert!(suggestion.policies > 0);
    let suggested = compiled_text("suggested.yaml", &suggestion.yaml, inventory);

    // 1. The recording under the suggestion: every forwarded flow still
    // passes, every recorded drop stays dropped.
    let again = record(&[path], &[&suggested], ReadLimits::default()).unwrap();
    let report = replay(&again, &suggested, None);
    assert_eq!(
        report.count(Finding::NewlyDenied),
        0,
        "{:#?}\n{}",
        report.findings,
        suggestion.yaml
    );
    assert_eq!(
        report.count(Finding::NewlyAllowed),
        0,
        "{:#?}",
        report.findings
    );
    assert!(report.unchanged > 0);

    // 2. Nothing never observed: endpoint pairs on observed and other ports.
    // Between endpoints: forwarded, and never dropped on the way (a flow
    // forwarded at egress and dropped at ingress never got through).
    let mut forwarded = BTreeSet::new();
    let mut dropped = BTreeSet::new();
    let mut ports: BTreeSet<(u8, u16)> = BTreeSet::new();
    for key in recording.flows.keys() {
        ports.insert((key.proto, key.port));
        if let (PeerKey::Endpoint(a), PeerKey::Endpoint(b)) = (key.from[0], key.to[0]) {
            match key.recorded {
                Recorded::Allowed => forwarded.insert((a, b, key.proto, key.port)),
                Recorded::Denied => dropped.insert((a, b, key.proto, key.port)),
            };
        }
    }
    let forwarded: BTreeSet<_> = forwarded.difference(&dropped).copied().collect();
    for port in probe_ports {
        ports.insert((6, *port));
        ports.insert((17, *port));
    }
    let n = suggested.endpoints.len();
    let mut probes = 0;
    for a in 0..n {
        for b in 0..n {
            if a == b {
                continue;
            }
            for (proto, port) in &ports {
                if matches!(proto, 1 | 58) {
                    continue;
                }
                let flow = Flow {
                    from: Peer::Endpoint(a),
                    to: Peer::Endpoint(b),
                    proto: *proto,
                    port: *port,
                    family: None,
                };
                let verdict = evaluate(&suggested, &flow).verdict;
                probes += 1;
                assert_eq!(
                    verdict != FlowVerdict::Deny,
                    forwarded.contains(&(a, b, *proto, *port)),
                    "{} -> {} {proto}/{port}: {verdict}",
                    suggested.endpoints[a].display_name(),
                    suggested.endpoints[b].display_name()
                );
            }
        }
    }
    assert!(probes > 0);
    // 3. An outside address never observed reaches nothing and is
    // reached by nothing.
    let stranger: std::net::IpAddr = "192.0.2.99".parse().unwrap();
    let id = suggested.identity_of_ip(stranger);
    for e in 0..n {
        for (proto, port) in &ports {
            if matches!(proto, 1 | 58) {
                continue;
            }
            for (from, to) in [
                (Peer::Address(stranger, id), Peer::Endpoint(e)),
                (Peer::Endpoint(e), Peer::Address(stranger, id)),
            ] {
                let flow = Flow {
                    from,
                    to,
                    proto: *proto,
                    port: *port,
                    family: None,
                };
                assert_eq!(
                    evaluate(&suggested, &flow).verdict,
                    FlowVerdict::Deny,
                    "{} {proto}/{port} with 192.0.2.99",
                    suggested.endpoints[e].display_name()
                );
            }
        }
    }
    suggestion.yaml
}

#[test]
fn the_quickstart_suggestion_allows_exactly_the_forwarded_flows() {
    let yaml = check(
        "fixtures/flows/quickstart/observe.json",
        "examples/quickstart/inventory.yaml",
        &[1, 22, 81, 443, 5433, 8081, 9050, 65535],
    );
    // Peers by stable labels, with their namespace; the payment provider
    // by its one observed address.
    assert!(
        yaml.contains("\"k8s:io.kubernetes.pod.namespace\": \"shop\""),
        "{yaml}"
    );
    assert!(yaml.contains("- 203.0.113.10/32"), "{yaml}");
    assert!(!yaml.contains("pod-template-hash"), "{yaml}");
}

#[test]
fn the_boutique_suggestion_allows_exactly_the_forwarded_flows() {
    let yaml = check(
        "fixtures/flows/boutique/observe.jsonpb",
        "examples/boutique/manifests.yaml",
        &[22, 80, 443, 3306, 5432, 6380, 9090],
    );
    // DNS egress is kept through the proxy; checkout's webhook by address.
    assert!(yaml.contains("matchPattern: \"*\""), "{yaml}");
    assert!(yaml.contains("- 203.0.113.50/32"), "{yaml}");
    // checkout -> redis-cart was forwarded at egress and dropped at
    // ingress: never allowed.
    let checkout = yaml
        .split("---\n")
        .find(|doc| doc.contains("name: \"checkoutservice-observed\""))
        .expect("checkout's policy");
    assert!(!checkout.contains("\"app\": \"redis-cart\""), "{checkout}");
}
