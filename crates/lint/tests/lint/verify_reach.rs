//! Property test: PR019's fast decision (`unreachable_end_to_end::check`,
//! classes cut by the keys each (subject, peer) pair reads, states shared
//! between units of one Deployment) gives exactly the diagnostics of the
//! brute-force walk over every class of every state
//! (`check_by_brute_force`), on random clusters whose policies select each
//! other's endpoints in both directions. The same clusters check the
//! shared-state shadowing fold against leave-one-out recompilation.

#![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

use std::collections::BTreeSet;

use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_lint::Context;
use porin_lint::config::LintConfig;
use porin_lint::rules::unreachable_end_to_end::{check, check_by_brute_force};
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;
use proptest::prelude::*;

use super::verify_shadowing::{cases, cnp_document};

/// Two pods of `a` with different identities (one has a `pod` label no
/// policy reads), so they share one state; `b` shares `tier` with `a`.
const INVENTORY: &str = r"
kind: Inventory
cluster: default
namespaces: {default: {}, other: {}}
endpoints:
  - {name: a-1, namespace: default, labels: {app: a, tier: x}, ips: [10.0.1.1]}
  - {name: a-2, namespace: default, labels: {app: a, tier: x, pod: a-2}, ips: [10.0.1.2]}
  - {name: b, namespace: default, labels: {app: b, tier: x}, ips: [10.0.1.3]}
  - {name: c, namespace: default, labels: {app: c}, ips: [10.0.1.4]}
  - {name: d, namespace: other, labels: {app: a}, ips: [10.1.0.1]}
";

const SUBJECTS: &[&str] = &["a", "b", "c"];
const PEERS: &[&str] = &[
    "Endpoints: [{matchLabels: {app: a}}]",
    "Endpoints: [{matchLabels: {app: b}}]",
    "Endpoints: [{matchLabels: {app: c}}]",
    "Endpoints: [{matchLabels: {tier: x}}]",
    "Endpoints: [{}]",
    "Entities: [world]",
];
const PORTS: &[(u16, Option<u16>)] = &[(80, None), (81, None), (80, Some(95)), (443, None)];
const PROTOS: &[&str] = &["TCP", "UDP", "ANY"];

#[derive(Debug, Clone)]
struct GenRule {
    subject: usize,
    egress: bool,
    deny: bool,
    peer: usize,
    ports: Option<(usize, usize)>,
    no_default_deny: bool,
}

fn rule_strategy() -> impl Strategy<Value = GenRule> {
    (
        0..SUBJECTS.len(),
        any::<bool>(),
        prop::bool::weighted(0.2),
        0..PEERS.len(),
        prop::option::weighted(0.8, (0..PORTS.len(), 0..PROTOS.len())),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(subject, egress, deny, peer, ports, no_default_deny)| GenRule {
                subject,
                egress,
                deny,
                peer,
                ports,
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
    let way = if rule.egress { "to" } else { "from" };
    let mut fields = vec![format!("{way}{}", PEERS[rule.peer])];
    if let Some((port, proto)) = rule.ports {
        let (number, end) = PORTS[port];
        let end = end.map_or_else(String::new, |e| format!(", endPort: {e}"));
        fields.push(format!(
            "toPorts: [{{ports: [{{port: \"{number}\"{end}, protocol: {}}}]}}]",
            PROTOS[proto]
        ));
    }
    cnp_document(
        index,
        SUBJECTS[rule.subject],
        rule.no_default_deny,
        section,
        &fields,
    )
}

fn inventory() -> Inventory {
    let mut inventory = Inventory::new();
    inventory.add_text("inventory.yaml", INVENTORY).unwrap();
    inventory.finish().unwrap();
    inventory
}

/// The fast and brute-force diagnostics of one rule set, and its text.
fn both(
    rules: &[GenRule],
) -> (
    Vec<porin_model::diagnostic::Diagnostic>,
    Vec<porin_model::diagnostic::Diagnostic>,
    String,
) {
    let text = rules
        .iter()
        .enumerate()
        .map(|(i, r)| yaml(i, r))
        .collect::<Vec<_>>()
        .join("---\n");
    let outcome = load_str("gen.yaml", &text, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{text}\n{:?}", outcome.diagnostics);
    let inputs = PolicyInput::from_outcome(&outcome);
    let inventory = inventory();
    let config = LintConfig::default();
    let cx = Context::new(&inputs, &inventory, true, &config).unwrap();
    let (mut fast, mut brute) = (Vec::new(), Vec::new());
    check(&cx, &mut fast);
    check_by_brute_force(&cx, &mut brute);
    // The shared states: the two pods of `a` are one state.
    let a: BTreeSet<*const _> = cx
        .units
        .iter()
        .filter(|u| {
            u.endpoints
                .iter()
                .any(|e| inventory.endpoints[*e].name.starts_with("a-"))
        })
        .map(|u| std::sync::Arc::as_ptr(&u.state))
        .collect();
    assert_eq!(a.len(), 1, "a-1 and a-2 share a state\n{text}");
    for (origin, effects) in cx.item_effects() {
        let by_recompiling = cx.effects_by_recompiling(*origin, false);
        assert_eq!(effects.changes, by_recompiling.changes, "{text}");
        if !effects.changes {
            assert_eq!(effects.flows, by_recompiling.flows, "{text}");
        }
    }
    (fast, brute, text)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    #[test]
    fn fast_reach_matches_brute_force(rules in prop::collection::vec(rule_strategy(), 1..8)) {
        let (fast, brute, text) = both(&rules);
        prop_assert_eq!(fast, brute, "{}", text);
    }
}

/// A cluster where PR019 fires (a's ingress from b on TCP/80, b's egress
/// allows a on TCP/81 only): both decide it and report the same.
#[test]
fn fast_reach_fires_where_brute_force_does() {
    let rules = [
        GenRule {
            subject: 0,
            egress: false,
            deny: false,
            peer: 1,
            ports: Some((0, 0)),
            no_default_deny: false,
        },
        GenRule {
            subject: 1,
            egress: true,
            deny: false,
            peer: 0,
            ports: Some((1, 0)),
            no_default_deny: false,
        },
    ];
    let (fast, brute, text) = both(&rules);
    assert_eq!(fast, brute, "{text}");
    assert!(fast.iter().any(|d| d.code == "PR019"), "{text}\n{fast:?}");
}
