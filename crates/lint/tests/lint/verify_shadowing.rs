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
use porin_model::loader::{LoadOutcome, load_str};
use proptest::prelude::*;

pub(crate) const INVENTORY: &str = r"
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
pub(crate) const ANCHOR: &str = r"apiVersion: cilium.io/v2
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
pub(crate) struct GenRule {
    subject: &'static str,
    egress: bool,
    deny: bool,
    peer: usize,
    ports: Option<(usize, usize)>,
    http: bool,
    no_default_deny: bool,
    /// `authentication: {mode: required}` (allows only).
    auth: bool,
    /// A second peer: the item lowers to two rules with one origin.
    second_peer: Option<usize>,
}

pub(crate) fn rule_strategy() -> impl Strategy<Value = GenRule> {
    (
        prop::sample::select(vec!["web", "web", "api"]),
        any::<bool>(),
        prop::bool::weighted(0.35),
        0..PEERS.len(),
        prop::option::weighted(0.7, (0..PORTS.len(), 0..PROTOS.len())),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.08),
        prop::option::weighted(0.2, 0..PEERS.len()),
    )
        .prop_map(
            |(subject, egress, deny, peer, ports, http, no_default_deny, auth, second_peer)| {
                GenRule {
                    subject,
                    egress,
                    deny,
                    peer,
                    ports,
                    http,
                    no_default_deny,
                    auth,
                    second_peer,
                }
            },
        )
}

/// Kubernetes NetworkPolicy peers: one item with two of them lowers to two
/// rules sharing one origin.
const KNP_PEERS: &[&str] = &[
    "{podSelector: {matchLabels: {app: api}}}",
    "{podSelector: {}}",
    "{podSelector: {matchLabels: {app: db}}}",
    "{ipBlock: {cidr: 10.0.1.0/24}}",
    "{namespaceSelector: {}}",
];

fn knp_yaml(index: usize, rule: &GenRule, second: usize) -> String {
    let (section, way, kind) = if rule.egress {
        ("egress", "to", "Egress")
    } else {
        ("ingress", "from", "Ingress")
    };
    let first = KNP_PEERS[rule.peer % KNP_PEERS.len()];
    let second = KNP_PEERS[second % KNP_PEERS.len()];
    let ports = match rule.ports {
        Some((port, proto)) if PROTOS[proto] != "ANY" => {
            let (number, end) = PORTS[port];
            let end = end.map_or_else(String::new, |e| format!(", endPort: {e}"));
            format!(
                ", ports: [{{protocol: {}, port: {number}{end}}}]",
                PROTOS[proto]
            )
        }
        _ => String::new(),
    };
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: p{index}, namespace: default}}\nspec:\n  podSelector: {{matchLabels: {{app: {}}}}}\n  policyTypes: [{kind}]\n  {section}:\n  - {{{way}: [{first}, {second}]{ports}}}\n",
        rule.subject
    )
}

pub(crate) fn yaml(index: usize, rule: &GenRule) -> String {
    if let Some(second) = rule.second_peer
        && !rule.deny
    {
        return knp_yaml(index, rule, second);
    }
    let section = match (rule.egress, rule.deny) {
        (false, false) => "ingress",
        (false, true) => "ingressDeny",
        (true, false) => "egress",
        (true, true) => "egressDeny",
    };
    let mut fields = Vec::new();
    let peer = PEERS[rule.peer];
    let way = if rule.egress { "to" } else { "from" };
    if !peer.is_empty() {
        fields.push(format!("{way}{peer}"));
    }
    if rule.auth && !rule.deny {
        fields.push("authentication: {mode: required}".to_owned());
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
    cnp_document(index, rule.subject, rule.no_default_deny, section, &fields)
}

/// A one-rule CNP `p<index>` in `default` selecting `app: <subject>`, with
/// the rule's fields in `section`.
pub(crate) fn cnp_document(
    index: usize,
    subject: &str,
    no_default_deny: bool,
    section: &str,
    fields: &[String],
) -> String {
    let default_deny = if no_default_deny {
        "  enableDefaultDeny: {ingress: false, egress: false}\n"
    } else {
        ""
    };
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: p{index}, namespace: default}}\nspec:\n  endpointSelector: {{matchLabels: {{app: {subject}}}}}\n{default_deny}  {section}:\n  - {{{}}}\n",
        fields.join(", ")
    )
}

pub(crate) fn inventory() -> Inventory {
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

/// The documents of a generated policy set (the anchor first), their text
/// and what loading them gives (checked to load without errors).
pub(crate) fn generated(rules: &[GenRule]) -> (Vec<String>, String, LoadOutcome) {
    let mut docs: Vec<String> = vec![ANCHOR.to_owned()];
    docs.extend(rules.iter().enumerate().map(|(i, r)| yaml(i, r)));
    let text = docs.join("---\n");
    let outcome = load_str("gen.yaml", &text, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{text}\n{:?}", outcome.diagnostics);
    (docs, text, outcome)
}

/// `PROPTEST_CASES` if set, else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn context_of<'a>(
    inputs: &'a [PolicyInput<'a>],
    inventory: &'a Inventory,
    config: &'a LintConfig,
) -> Context<'a> {
    Context::new(inputs, inventory, true, config).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(1000)))]

    /// The one-pass analysis ([`Context::item_effects`]) equals
    /// leave-one-out recompilation of every unit, for every analysed item:
    /// whether a verdict changes, and (when none does) the classes it
    /// allows alone and who decides them without it, per port class too.
    #[test]
    fn fast_effects_match_recompilation(rules in prop::collection::vec(rule_strategy(), 1..7)) {
        let inventory = inventory();
        let (_, text, outcome) = generated(&rules);
        let inputs = PolicyInput::from_outcome(&outcome);
        let config = LintConfig::default();
        let cx = context_of(&inputs, &inventory, &config);
        let origins: BTreeSet<u32> = cx.rules().iter().map(|r| r.origin).collect();
        for origin in origins {
            let Some(fast) = cx.item_effects().get(&origin) else {
                continue;
            };
            let brute = cx.effects_by_recompiling(origin, true);
            let o = cx.origin_by_id(origin).unwrap();
            prop_assert_eq!(fast.selected, brute.selected, "{} in\n{}", o.route, text);
            prop_assert_eq!(fast.changes, brute.changes, "{} of {} in\n{}", o.route, o.name, text);
            if !fast.changes {
                prop_assert_eq!(fast.flows, brute.flows, "{} of {} in\n{}", o.route, o.name, text);
                prop_assert_eq!(&fast.allows, &brute.allows, "{} of {} in\n{}", o.route, o.name, text);
                prop_assert_eq!(&fast.denies, &brute.denies, "{} of {} in\n{}", o.route, o.name, text);
            }
            let ranged = cx.rules().iter().filter(|r| r.origin == origin).any(|r| {
                r.ports.iter().any(|p| matches!(p.port, porin_compiler::resolve::rule::PortRef::Number(n) if n != 0 && p.end_port > n))
            });
            if ranged {
                prop_assert_eq!(&fast.classes, &brute.classes, "{} of {} in\n{}", o.route, o.name, text);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(96)))]

    #[test]
    fn verifier_matches_brute_force(rules in prop::collection::vec(rule_strategy(), 1..5)) {
        let inventory = inventory();
        let (docs, _, outcome) = generated(&rules);
        let inputs = PolicyInput::from_outcome(&outcome);
        let config = LintConfig::default();
        let cx = Context::new(&inputs, &inventory, true, &config).unwrap();
        let full = compile_docs(&docs, &inventory);
        for (rule_index, rule) in cx.rules().iter().enumerate() {
            let origin = cx.origin_by_id(rule.origin).unwrap();
            // The policyTypes default deny of a NetworkPolicy is a second
            // item of its document (kept beside the items since the nca
            // differential test); removing the whole document is the
            // oracle of single-item documents only. The fast-vs-recompile
            // property test (verify_advice) covers that item.
            if origin.name == "anchor" || origin.is_synthetic() || origin.route.ends_with("policyTypes") {
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

/// The one-pass analysis equals leave-one-out recompilation for every
/// analysed item of the Cilium example corpus (L7, auth, deny, CIDR and
/// entity rules that the generator does not produce).
#[test]
fn fast_effects_match_recompilation_on_the_corpus() {
    let Some(corpus) = super::verify_corpus::corpus_dir() else {
        return;
    };
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let outcome = porin_model::loader::load_path(&corpus, &LoadLimits::default()).unwrap();
    let inventory =
        Inventory::load(&root.join("fixtures/inventories/corpus-examples.yaml")).unwrap();
    let inputs = PolicyInput::from_outcome(&outcome);
    let config = LintConfig::default();
    let cx = context_of(&inputs, &inventory, &config);
    let mut compared = 0;
    for (origin, fast) in cx.item_effects() {
        let ranged = !fast.classes.is_empty();
        let brute = cx.effects_by_recompiling(*origin, ranged);
        let o = cx.origin_by_id(*origin).unwrap();
        let what = format!("{} {} {}", o.file, o.name, o.route);
        assert_eq!(fast.changes, brute.changes, "{what}");
        if !fast.changes {
            assert_eq!(
                (fast.flows, &fast.allows, &fast.denies),
                (brute.flows, &brute.allows, &brute.denies),
                "{what}"
            );
        }
        if ranged {
            assert_eq!(fast.classes, brute.classes, "{what}");
        }
        compared += 1;
    }
    assert!(compared > 100, "only {compared} items compared");
}
