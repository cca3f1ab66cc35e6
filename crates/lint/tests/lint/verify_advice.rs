//! Property: lint advice is safe to follow. For every finding that advises
//! deleting a rule item (PR004, PR005, and PR011's duplicate of a pair) or
//! narrowing one (PR017: drop the ports of its range other rules already
//! allow), the advised change is applied to the lowered policy set, every
//! endpoint unit is recompiled, and every flow class of every endpoint must
//! keep its verdict ([`porin_connectivity::analysis::equivalent`]; the
//! endpoints the item does not select have the same inputs, hence the same
//! state, and are skipped). Over
//! every lint fixture, the bundled examples, the Cilium example corpus and
//! random policy sets (`PROPTEST_CASES`, default 1,000).
//!
//! The change is applied to the lowered rules: deleting an item removes
//! every rule lowered from it (its origin). That is what deleting the YAML
//! item does, except that deleting the *last* item of a Kubernetes
//! NetworkPolicy direction keeps the direction enforced through
//! `policyTypes`; the lowered removal then un-enforces it, which can only
//! make the verdicts differ more, so this test is the stricter one.

#![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

use std::path::{Path, PathBuf};

use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::{Origin, PolicyInput};
use porin_compiler::resolve::policy::Resolver;
use porin_compiler::resolve::rule::{PolicyRule, PortRef, PortSpec, proto};
use porin_connectivity::analysis::equivalent;
use porin_lint::config::LintConfig;
use porin_lint::{Context, verify};
use porin_model::diagnostic::Diagnostic;
use porin_model::limits::LoadLimits;
use porin_model::loader::{load_path, load_str};
use proptest::prelude::*;

use super::verify_corpus::corpus_dir;
use super::verify_shadowing::{cases, generated, inventory as random_inventory, rule_strategy};

/// The codes whose advice changes the policy.
const ADVISING: &[&str] = &["PR004", "PR005", "PR011", "PR017"];

/// The item a finding is about: same file, document and route (PR017
/// points at the item's `toPorts`).
fn item_of<'c>(cx: &'c Context<'_>, finding: &Diagnostic) -> Option<&'c Origin> {
    let at = finding.primary.as_ref()?;
    cx.rules()
        .iter()
        .filter_map(|r| cx.origin_by_id(r.origin))
        .find(|o| {
            o.file == at.file
                && o.document == at.document
                && (at.route == o.route || at.route == format!("{}.toPorts", o.route))
        })
}

/// `TCP/80-90, UDP/5` (the ports a PR017 message names) → ranges.
fn parse_ports(text: &str) -> Vec<(u8, u16, u16)> {
    text.split(", ")
        .filter_map(|part| {
            let (name, ports) = part.split_once('/')?;
            let number = (0..=255u8).find(|p| proto::name(*p) == name)?;
            let (lo, hi) = match ports.split_once('-') {
                Some((lo, hi)) => (lo.parse().ok()?, hi.parse().ok()?),
                None => {
                    let p = ports.parse().ok()?;
                    (p, p)
                }
            };
            Some((number, lo, hi))
        })
        .collect()
}

/// The ports of a PR017 message: "...: ports X of its range are ...".
fn pr017_ports(message: &str) -> Vec<(u8, u16, u16)> {
    let Some(rest) = message.split(": ports ").nth(1) else {
        return Vec::new();
    };
    let Some(ports) = rest.split(" of its range").next() else {
        return Vec::new();
    };
    parse_ports(ports)
}

/// A rule with the covered ports removed from its ranges.
fn narrowed(rule: &PolicyRule, covered: &[(u8, u16, u16)]) -> PolicyRule {
    let mut out = rule.clone();
    let mut specs: Vec<PortSpec> = Vec::new();
    for spec in &rule.ports {
        let PortRef::Number(n) = spec.port else {
            specs.push(spec.clone());
            continue;
        };
        if n == 0 || spec.end_port <= n {
            specs.push(spec.clone());
            continue;
        }
        let protos: Vec<u8> = if spec.proto == proto::ANY {
            proto::ANY_EXPANSION.to_vec()
        } else {
            vec![spec.proto]
        };
        for p in protos {
            let mut start = u32::from(n);
            let end = u32::from(spec.end_port);
            let mut keep: Vec<(u32, u32)> = Vec::new();
            let mut cuts: Vec<(u32, u32)> = covered
                .iter()
                .filter(|(q, _, _)| *q == p)
                .map(|(_, lo, hi)| (u32::from(*lo), u32::from(*hi)))
                .collect();
            cuts.sort_unstable();
            for (lo, hi) in cuts {
                if hi < start || lo > end {
                    continue;
                }
                if lo > start {
                    keep.push((start, lo - 1));
                }
                start = start.max(hi + 1);
            }
            if start <= end {
                keep.push((start, end));
            }
            for (lo, hi) in keep {
                let (Ok(lo), Ok(hi)) = (u16::try_from(lo), u16::try_from(hi)) else {
                    continue;
                };
                specs.push(PortSpec {
                    port: PortRef::Number(lo),
                    end_port: if hi > lo { hi } else { 0 },
                    proto: p,
                    l7: spec.l7.clone(),
                });
            }
        }
    }
    out.ports = specs;
    out
}

/// Applies every advising finding's change, one at a time, and checks
/// that every endpoint keeps every verdict. Returns how many were checked.
fn check_advice(
    inputs: &[PolicyInput<'_>],
    inventory: &Inventory,
    config: &LintConfig,
    what: &str,
) -> usize {
    let report = verify(inputs, Some(inventory), config).unwrap();
    let cx = Context::new(inputs, inventory, true, config).unwrap();
    let mut checked = 0;
    for finding in report
        .findings
        .iter()
        .filter(|f| ADVISING.contains(&f.code))
    {
        let origin = item_of(&cx, finding).unwrap_or_else(|| {
            panic!(
                "{what}: {} names no rule item: {}",
                finding.code, finding.message
            )
        });
        let id = origin.id;
        let rules: Vec<PolicyRule> = if finding.code == "PR017" {
            let covered = pr017_ports(&finding.message);
            assert!(!covered.is_empty(), "{what}: unparsed {}", finding.message);
            cx.rules()
                .iter()
                .map(|r| {
                    if r.origin == id {
                        narrowed(r, &covered)
                    } else {
                        r.clone()
                    }
                })
                .collect()
        } else {
            cx.rules()
                .iter()
                .filter(|r| r.origin != id)
                .cloned()
                .collect()
        };
        let resolver = Resolver::new(&rules, &cx.table, cx.inventory)
            .with_localhost_origin(cx.lowered.localhost_origin);
        // Only the units the item's rules select can change: every other
        // unit has the same rules, identities and named ports as before.
        let item: Vec<usize> = cx.item_rules(id);
        for unit in cx
            .units
            .iter()
            .filter(|u| u.rules.iter().any(|r| item.contains(r)))
        {
            let policy = resolver.l4_policy(unit.identity);
            let endpoint = &cx.inventory.endpoints[unit.endpoints[0]];
            let after = resolver.map_state(endpoint, &policy, &|_| String::new()).0;
            assert!(
                equivalent(&unit.state, &after),
                "{what}: following {} ({}) changes verdicts of {}\n{}",
                finding.code,
                finding.message,
                cx.unit_name(unit),
                finding.help.clone().unwrap_or_default()
            );
        }
        checked += 1;
    }
    if std::env::var_os("PORIN_ADVICE_COUNT").is_some() {
        eprintln!("advice: {checked} findings followed in {what:.40}");
    }
    checked
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check_file(path: &Path, inventory: &Inventory, config: &LintConfig) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let display = path.display().to_string();
    let outcome = load_str(&display, &text, &LoadLimits::default());
    let inputs = PolicyInput::from_outcome(&outcome);
    check_advice(&inputs, inventory, config, &display)
}

#[test]
fn advice_holds_on_every_lint_fixture_and_example() {
    let lint = root().join("fixtures/lint");
    let shared = Inventory::load(&lint.join("inventory.yaml")).unwrap();
    let mut checked = 0;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&lint)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let own = dir.join("inventory.yaml");
        let inventory = if own.exists() {
            Inventory::load(&own).unwrap()
        } else {
            shared.clone()
        };
        let config = match std::fs::read_to_string(dir.join("porin.yaml")) {
            Ok(text) => LintConfig::parse("porin.yaml", &text).unwrap(),
            Err(_) => LintConfig::default(),
        };
        for file in ["trigger.yaml", "near_miss.yaml"] {
            if dir.join(file).exists() {
                checked += check_file(&dir.join(file), &inventory, &config);
            }
        }
    }
    for entry in std::fs::read_dir(root().join("fixtures/examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            checked += check_file(&path, &shared, &LintConfig::default());
        }
    }
    // PR004, PR005, PR017 triggers at least (PR011's pair too).
    assert!(checked >= 4, "only {checked} advising findings checked");
}

#[test]
fn advice_holds_on_the_corpus() {
    let Some(corpus) = corpus_dir() else {
        return;
    };
    let outcome = load_path(&corpus, &LoadLimits::default()).unwrap();
    let inventory =
        Inventory::load(&root().join("fixtures/inventories/corpus-examples.yaml")).unwrap();
    let inputs = PolicyInput::from_outcome(&outcome);
    let checked = check_advice(&inputs, &inventory, &LintConfig::default(), "corpus");
    println!("corpus: {checked} advising findings followed");
}

/// issue 15: a NetworkPolicy item with two podSelector peers that select
/// the same pod lowers to two rules of one origin; each covers the other,
/// but the item is the only path from api to db.
#[test]
fn an_item_is_never_redundant_with_its_own_peers() {
    const POLICY: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: shop}
spec:
  podSelector: {matchLabels: {app: db}}
  policyTypes: [Ingress]
  ingress:
    - from:
        - podSelector: {matchLabels: {app: api}}
        - podSelector: {matchLabels: {tier: backend}}
      ports: [{protocol: TCP, port: 5432}]
";
    const INVENTORY: &str = "kind: Inventory
cluster: default
namespaces: {shop: {}}
endpoints:
  - {name: db, namespace: shop, labels: {app: db}, ips: [10.0.0.1]}
  - {name: api, namespace: shop, labels: {app: api, tier: backend}, ips: [10.0.0.2]}
";
    let mut inventory = Inventory::new();
    inventory.add_text("inventory.yaml", INVENTORY).unwrap();
    inventory.finish().unwrap();
    let outcome = load_str("db.yaml", POLICY, &LoadLimits::default());
    let inputs = PolicyInput::from_outcome(&outcome);
    let config = LintConfig::default();
    let report = verify(&inputs, Some(&inventory), &config).unwrap();
    let codes: Vec<&str> = report.findings.iter().map(|f| f.code).collect();
    assert!(!codes.contains(&"PR005"), "{:?}", report.findings);
    let cx = Context::new(&inputs, &inventory, true, &config).unwrap();
    // The item's rules (the policyTypes default deny is an item of its own).
    let item: Vec<usize> = (0..cx.rules().len())
        .filter(|&r| {
            cx.origin(r)
                .is_some_and(|o| o.route.ends_with("ingress[0]"))
        })
        .collect();
    assert!(
        item.len() >= 2
            && item
                .iter()
                .all(|&r| cx.rules()[r].origin == cx.rules()[item[0]].origin),
        "the item lowers to one rule per peer, sharing one origin"
    );
    assert!(cx.rule_changes_verdicts(item[0]));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(1000)))]

    #[test]
    fn advice_holds_on_random_policy_sets(rules in prop::collection::vec(rule_strategy(), 1..7)) {
        let inventory = random_inventory();
        let (_, text, outcome) = generated(&rules);
        let inputs = PolicyInput::from_outcome(&outcome);
        check_advice(&inputs, &inventory, &LintConfig::default(), &text);
    }
}
