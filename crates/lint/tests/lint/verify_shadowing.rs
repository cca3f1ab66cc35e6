//! Property test: the verifier's exact "rule R changes no verdict"
//! ([`Context::rule_changes_verdicts`]) equals brute force: compile the
//! policies with and without R's document (the public `compile` driver, not
//! the verifier's code path) and compare the verdict of every endpoint for
//! every (direction, peer identity, protocol, port) with the ports taken
//! from every boundary the generated rules can create (each rule's port
//! ranges are unions of masked prefixes, so verdicts are constant between
//! consecutive range boundaries of all rules).

#![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

use std::collections::BTreeSet;

use porin_compiler::compile::{Compiled, compile};
use porin_compiler::identity::Identity;
use porin_compiler::inventory::Inventory;
use porin_compiler::mapstate::Direction;
use porin_compiler::resolve::lower::PolicyInput;
use porin_connectivity::analysis::comparable;
use porin_lint::Context;
use porin_lint::config::LintConfig;
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;
use proptest::prelude::*;

const INVENTORY: &str = r"
kind: Inventory
cluster: default
namespaces: {default: {}, other: {}}
endpoints:
  - {name: web, namespace: default, labels: {app: web}, ips: [10.0.1.1]}
  - {name: api, namespace: default, labels: {app: api}, ips: [10.0.1.2]}
  - {name: db, namespace: default, labels: {app: db}, ips: [10.0.2.3]}
  - {name: client, namespace: other, labels: {app: client}, ips: [10.1.0.1]}
";

/// Selects nothing but names every prefix the generator uses, so CIDR
/// identities are numbered the same with and without any generated rule.
const ANCHOR: &str = r"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: anchor, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: nobody}}
  egress:
  - toCIDR: [10.0.1.0/24, 10.0.0.0/8, 10.0.1.2/32]
";

const PEERS: &[&str] = &[
    "",
    "Endpoints: [{matchLabels: {app: api}}]",
    "Endpoints: [{}]",
    "Entities: [world]",
    "Entities: [all]",
    "Entities: [cluster]",
    "CIDR: [10.0.1.0/24]",
    "CIDR: [10.0.0.0/8]",
    "CIDR: [10.0.1.2/32]",
];
const PORTS: &[(u16, Option<u16>)] = &[
    (80, None),
    (80, Some(95)),
    (81, None),
    (64, Some(127)),
    (88, Some(90)),
];
const PROTOS: &[&str] = &["TCP", "UDP", "ANY"];

#[derive(Debug, Clone)]
struct GenRule {
    subject: &'static str,
    egress: bool,
    deny: bool,
    peer: usize,
    ports: Option<(usize, usize)>,
    http: bool,
    no_default_deny: bool,
}

fn rule_strategy() -> impl Strategy<Value = GenRule> {
    (
        prop::sample::select(vec!["web", "web", "api"]),
        any::<bool>(),
        prop::bool::weighted(0.35),
        0..PEERS.len(),
        prop::option::weighted(0.7, (0..PORTS.len(), 0..PROTOS.len())),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(subject, egress, deny, peer, ports, http, no_default_deny)| GenRule {
                subject,
                egress,
                deny,
                peer,
                ports,
                http,
                no_default_deny,
            },
        )
}

fn yaml(index: usize, rule: &GenRule) -> String {
    let section = match (rule.egress, rule.deny) {
        (false, false) => "ingress",
        (false, true) => "ingressDeny",
        (true, false) => "egress",
        (true, true) => "egressDeny",
    };
    let mut fields = Vec::new();
    let peer = PEERS[rule.peer];
    if !peer.is_empty() {
        fields.push(format!("{}{peer}", if rule.egress { "to" } else { "from" }));
    }
    if let Some((port, proto)) = rule.ports {
        let (number, end) = PORTS[port];
        let end = end.map_or_else(String::new, |e| format!(", endPort: {e}"));
        let http = if rule.http && !rule.deny && PROTOS[proto] == "TCP" && end.is_empty() {
            ", rules: {http: [{method: GET}]}"
        } else {
            ""
        };
        fields.push(format!(
            "toPorts: [{{ports: [{{port: \"{number}\"{end}, protocol: {}}}]{http}}}]",
            PROTOS[proto]
        ));
    }
    let default_deny = if rule.no_default_deny {
        "  enableDefaultDeny: {ingress: false, egress: false}\n"
    } else {
        ""
    };
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: p{index}, namespace: default}}\nspec:\n  endpointSelector: {{matchLabels: {{app: {}}}}}\n{default_deny}  {section}:\n  - {{{}}}\n",
        rule.subject,
        fields.join(", ")
    )
}

fn inventory() -> Inventory {
    let mut inventory = Inventory::new();
    inventory.add_text("inventory.yaml", INVENTORY).unwrap();
    inventory.finish().unwrap();
    inventory
}

fn compile_docs(docs: &[String], inventory: &Inventory) -> Compiled {
    let text = docs.join("---\n");
    let outcome = load_str("gen.yaml", &text, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{text}\n{:?}", outcome.diagnostics);
    let inputs = PolicyInput::from_outcome(&outcome);
    compile(&inputs, inventory).unwrap()
}

fn brute_force_changes(with: &Compiled, without: &Compiled) -> bool {
    let mut ports: BTreeSet<u16> = [0, 1, 65_534, 65_535].into();
    for (p, e) in PORTS {
        for q in [
            p.saturating_sub(1),
            *p,
            p + 1,
            e.unwrap_or(*p),
            e.unwrap_or(*p) + 1,
        ] {
            ports.insert(q);
        }
    }
    let mut identities: BTreeSet<u32> = with.identities.iter().map(|i| i.id).collect();
    identities.extend(without.identities.iter().map(|i| i.id));
    identities.insert(60_000);
    for (a, b) in with.endpoints.iter().zip(&without.endpoints) {
        for direction in Direction::ALL {
            for id in &identities {
                let Ok(peer) = Identity::new(*id) else {
                    continue;
                };
                for proto in [6u8, 17, 132, 1, 99] {
                    for port in &ports {
                        let va = a.state.lookup(direction, peer, proto, *port).verdict;
                        let vb = b.state.lookup(direction, peer, proto, *port).verdict;
                        if comparable(va) != comparable(vb) {
                            return true;
                        }
                    }
                }
            }
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn verifier_matches_brute_force(rules in prop::collection::vec(rule_strategy(), 1..5)) {
        let inventory = inventory();
        let mut docs: Vec<String> = vec![ANCHOR.to_owned()];
        docs.extend(rules.iter().enumerate().map(|(i, r)| yaml(i, r)));
        let text = docs.join("---\n");
        let outcome = load_str("gen.yaml", &text, &LoadLimits::default());
        prop_assert!(!outcome.has_errors(), "{}\n{:?}", text, outcome.diagnostics);
        let inputs = PolicyInput::from_outcome(&outcome);
        let config = LintConfig::default();
        let cx = Context::new(&inputs, &inventory, true, &config).unwrap();
        let full = compile_docs(&docs, &inventory);
        for (rule_index, rule) in cx.rules().iter().enumerate() {
            let origin = cx.origin_by_id(rule.origin).unwrap();
            if origin.name == "anchor" || origin.is_synthetic() {
                continue;
            }
            let document = origin.document;
            let reduced: Vec<String> = docs
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != document)
                .map(|(_, d)| d.clone())
                .collect();
            let without = compile_docs(&reduced, &inventory);
            prop_assert_eq!(full.identities.len(), without.identities.len());
            let brute = brute_force_changes(&full, &without);
            let verifier = cx.rule_changes_verdicts(rule_index);
            prop_assert_eq!(verifier, brute, "rule {} of\n{}", origin.route, docs[document]);
        }
    }
}
