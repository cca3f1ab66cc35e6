//! The incremental re-parse (`porin_model::reparse`) against the full load:
//! generated policy texts (one CNP with many rules, several documents,
//! `List`s, `specs`, flow items, comments, texts with errors) and random
//! edits (ports, labels, whole rules inserted or deleted, lines inserted,
//! deleted or re-indented, single characters, anchors and aliases), each
//! loaded both ways and compared field by field (documents, diagnostics
//! with their positions, texts, trees), with route→position answers and
//! the edit's inverse.

#![allow(clippy::unwrap_used, reason = "tests")]

use porin_model::loader::{LoadOutcome, load_str};
use porin_model::reparse::{Budget, plan, reload};
use porin_model::route::Route;
use porin_model::version::{CiliumVersion, Target};
use porin_model::{LoadLimits, PolicyDocument};
use std::cell::Cell;

use proptest::prelude::*;
use proptest::test_runner::TestRunner;

const NAME: &str = "p.yaml";

thread_local! {
    static MOVED: Cell<usize> = const { Cell::new(0) };
}

/// One rule item as the generator writes it.
#[derive(Debug, Clone)]
struct Item {
    role: u8,
    port: u16,
    /// Written in flow style on one line.
    flow: bool,
    /// A comment line after it.
    comment: bool,
    /// A Kafka rule (refused by a Cilium 1.20 target).
    kafka: bool,
    /// Its `-` alone on the line before its keys (block style only): a
    /// deleted line can then merge it into the item before it.
    bare: bool,
}

#[derive(Debug, Clone)]
enum Doc {
    /// A CNP: ingress items, egress items, in `specs` or `spec`, the
    /// sections' items indented under their key or not.
    Cnp {
        name: u8,
        ingress: Vec<Item>,
        egress: Vec<Item>,
        specs: bool,
        indented: bool,
    },
    /// A `List` of one-rule CNPs.
    List(Vec<(u8, Vec<Item>)>),
    /// A Kubernetes NetworkPolicy.
    Knp(u8),
    /// A CNP with an error.
    Broken(u8),
    /// A ClusterNetworkPolicy (a kind of the version table: held back
    /// until a target is known, refused or enforced by it).
    Cluster(u8),
}

fn item_text(out: &mut String, item: &Item, indent: &str) {
    let role = format!("client-{}", item.role);
    if item.flow {
        out.push_str(&format!(
            "{indent}- {{fromEndpoints: [{{matchLabels: {{role: {role}}}}}], toPorts: [{{ports: [{{port: \"{}\", protocol: TCP}}]}}]}}\n",
            item.port
        ));
    } else {
        if item.bare {
            out.push_str(&format!("{indent}-\n"));
        }
        let dash = if item.bare { " " } else { "-" };
        out.push_str(&format!(
            "{indent}{dash} fromEndpoints:\n{indent}  - matchLabels:\n{indent}      role: {role}\n{indent}  toPorts:\n{indent}  - ports:\n{indent}    - port: \"{}\"\n{indent}      protocol: TCP\n",
            item.port
        ));
        if item.kafka {
            out.push_str(&format!(
                "{indent}    rules:\n{indent}      kafka:\n{indent}      - topic: t{}\n",
                item.role
            ));
        }
    }
    if item.comment {
        out.push_str(&format!("{indent}# after {role}\n"));
    }
}

fn egress_text(out: &mut String, item: &Item, indent: &str) {
    out.push_str(&format!(
        "{indent}- toEndpoints:\n{indent}  - matchLabels:\n{indent}      role: server-{}\n{indent}  toPorts:\n{indent}  - ports:\n{indent}    - port: \"{}\"\n",
        item.role, item.port
    ));
}

fn rule_text(out: &mut String, ingress: &[Item], egress: &[Item], at: &str, indented: bool) {
    let inner = if indented {
        format!("{at}  ")
    } else {
        at.to_owned()
    };
    out.push_str(&format!(
        "{at}endpointSelector:\n{at}  matchLabels:\n{at}    app: server\n"
    ));
    if !ingress.is_empty() {
        out.push_str(&format!("{at}ingress:\n"));
        for item in ingress {
            item_text(out, item, &inner);
        }
    }
    if !egress.is_empty() {
        out.push_str(&format!("{at}egress:\n"));
        for item in egress {
            egress_text(out, item, &inner);
        }
    }
}

fn doc_text(doc: &Doc) -> String {
    let mut out = String::new();
    match doc {
        Doc::Cnp {
            name,
            ingress,
            egress,
            specs,
            indented,
        } => {
            out.push_str(&format!(
                "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: p{name}\n  namespace: default\n"
            ));
            if *specs {
                out.push_str("specs:\n");
                let half = ingress.len() / 2;
                out.push_str("- ");
                let mut first = String::new();
                rule_text(&mut first, &ingress[..half], &[], "  ", *indented);
                if half == 0 {
                    rule_text(&mut first, &[], egress, "  ", *indented);
                }
                out.push_str(first.trim_start());
                out.push_str("- ");
                let mut second = String::new();
                rule_text(&mut second, &ingress[half..], egress, "  ", *indented);
                out.push_str(second.trim_start());
            } else {
                out.push_str("spec:\n");
                rule_text(&mut out, ingress, egress, "  ", *indented);
            }
        }
        Doc::List(items) => {
            out.push_str("apiVersion: v1\nkind: List\nitems:\n");
            for (name, ingress) in items {
                out.push_str(&format!(
                    "- apiVersion: cilium.io/v2\n  kind: CiliumNetworkPolicy\n  metadata:\n    name: l{name}\n  spec:\n"
                ));
                rule_text(&mut out, ingress, &[], "    ", false);
            }
        }
        Doc::Knp(name) => out.push_str(&format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: k{name}\nspec:\n  podSelector: {{}}\n  ingress:\n  - ports:\n    - port: 80\n"
        )),
        Doc::Cluster(name) => out.push_str(&format!(
            "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata:\n  name: c{name}\nspec:\n  tier: Admin\n  priority: 1\n  subject:\n    namespaces: {{}}\n  ingress:\n  - action: Deny\n    from:\n    - namespaces: {{}}\n"
        )),
        Doc::Broken(name) => out.push_str(&format!(
            "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: b{name}\nspec:\n  endpointSelector: {{}}\n  ingress:\n  - toPorts:\n    - ports:\n      - port: \"99999\"\n"
        )),
    }
    out
}

fn text_of(docs: &[Doc]) -> String {
    docs.iter().map(doc_text).collect::<Vec<_>>().join("---\n")
}

fn item() -> impl Strategy<Value = Item> {
    (
        0u8..6,
        1u16..2000,
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(role, port, flow, comment, kafka, bare)| Item {
            role,
            port,
            flow,
            comment,
            kafka,
            bare,
        })
}

fn doc() -> impl Strategy<Value = Doc> {
    prop_oneof![
        10 => (any::<u8>(), prop::collection::vec(item(), 1..10), prop::collection::vec(item(), 0..3), prop::bool::weighted(0.2), any::<bool>())
            .prop_map(|(name, ingress, egress, specs, indented)| Doc::Cnp { name, specs: specs && ingress.len() > 1, ingress, egress, indented }),
        2 => prop::collection::vec((any::<u8>(), prop::collection::vec(item(), 1..4)), 1..4).prop_map(Doc::List),
        1 => any::<u8>().prop_map(Doc::Knp),
        2 => any::<u8>().prop_map(Doc::Broken),
        1 => any::<u8>().prop_map(Doc::Cluster),
    ]
}

/// One random edit of a text.
#[derive(Debug, Clone)]
enum Edit {
    /// The `nth` `port: "..."` gets another value.
    Port(usize, u32),
    /// The `nth` `role: ...` gets another value (text).
    Role(usize, &'static str),
    /// A line inserted before line `nth`.
    InsertLine(usize, &'static str),
    /// Line `nth` deleted.
    DeleteLine(usize),
    /// The `nth` line holding only an entry's `-` deleted (its entry
    /// merges into the item before it).
    DeleteBareDash(usize),
    /// Line `nth` indented by one more space, or one less.
    Indent(usize, bool),
    /// The character at `nth` replaced by one of a set, or one inserted.
    Char(usize, char, bool),
    /// A label line added after the `nth` `role: ...` line, at its
    /// indentation (the item grows by a line).
    Label(usize),
    /// The `nth` `protocol: ...` line deleted (the item shrinks by a line).
    DropProtocol(usize),
    /// The item starting on line `nth` (or the next item start) copied
    /// after itself, or deleted.
    Rule(usize, bool),
    /// A port appended on lines of its own after the `nth` block-style
    /// `protocol: ...` line (at the end of an item: the lines are inserted
    /// before the next item's line).
    AppendPort(usize),
}

const ROLES: &[&str] = &[
    "client-9",
    "client-1",
    "\"client-2\"",
    "a b",
    "&a client-1",
    "*a",
    "x # c",
    "[a]",
    "{}",
    "",
    "x: y",
    "!!str 5",
    "client-3\n        tier: web",
    "|\n        x",
];

const LINES: &[&str] = &[
    "",
    "# comment",
    "      # indented comment",
    "        tier: web",
    "      - port: \"81\"",
    "  - fromEntities: [world]",
    "  - {}",
    "---",
    "...",
    "    foo: bar",
    "\t- x",
    "  - fromEndpoints:\n    - matchLabels:\n        role: new",
    "  egress:",
    "    - toPorts: [{ports: [{port: \"53\"}]}]",
];

const CHARS: &[char] = &[
    '1', '7', ' ', '-', ':', '\n', '#', '&', '*', '"', '{', '[', 'x', 'é',
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        10 => (any::<usize>(), prop_oneof![8 => 1u32..65536, 1 => Just(0u32), 1 => Just(65536u32), 1 => Just(123_456u32)]).prop_map(|(n, v)| Edit::Port(n, v)),
        4 => (any::<usize>(), prop::sample::select(ROLES)).prop_map(|(n, v)| Edit::Role(n, v)),
        2 => (any::<usize>(), prop::sample::select(LINES)).prop_map(|(n, l)| Edit::InsertLine(n, l)),
        1 => any::<usize>().prop_map(Edit::DeleteLine),
        1 => any::<usize>().prop_map(Edit::DeleteBareDash),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(n, more)| Edit::Indent(n, more)),
        2 => (any::<usize>(), prop::sample::select(CHARS), any::<bool>()).prop_map(|(n, c, insert)| Edit::Char(n, c, insert)),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(n, copy)| Edit::Rule(n, copy)),
        3 => any::<usize>().prop_map(Edit::Label),
        2 => any::<usize>().prop_map(Edit::DropProtocol),
        2 => any::<usize>().prop_map(Edit::AppendPort),
    ]
}

fn nth_match(text: &str, needle: &str, n: usize) -> Option<usize> {
    let all: Vec<usize> = text.match_indices(needle).map(|(i, _)| i).collect();
    (!all.is_empty()).then(|| all[n % all.len()] + needle.len())
}

fn apply_edit(text: &str, edit: &Edit) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let line_at = |n: usize| n % lines.len().max(1);
    match edit {
        Edit::Port(n, value) => match nth_match(text, "port: \"", *n) {
            Some(at) => {
                let end = at + text[at..].find('"').unwrap_or(0);
                format!("{}{value}{}", &text[..at], &text[end..])
            }
            None => text.to_owned(),
        },
        Edit::Role(n, value) => match nth_match(text, "role: ", *n) {
            Some(at) => {
                let end = at + text[at..].find(['\n', '}']).unwrap_or(0);
                format!("{}{value}{}", &text[..at], &text[end..])
            }
            None => text.to_owned(),
        },
        Edit::InsertLine(n, line) => {
            let at = line_at(*n);
            let mut out: String = lines[..at].concat();
            out.push_str(line);
            out.push('\n');
            out.push_str(&lines[at..].concat());
            out
        }
        Edit::Label(n) | Edit::DropProtocol(n) | Edit::AppendPort(n) => {
            let needle = if matches!(edit, Edit::Label(_)) {
                "role: "
            } else {
                "protocol: "
            };
            let found: Vec<usize> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.trim_start().starts_with(needle))
                .map(|(i, _)| i)
                .collect();
            if found.is_empty() {
                return text.to_owned();
            }
            let at = found[n % found.len()];
            let line = lines[at];
            let indent = line.len() - line.trim_start().len();
            let mut out: String = lines[..at].concat();
            match edit {
                Edit::Label(_) => {
                    out.push_str(line);
                    out.push_str(&" ".repeat(indent));
                    out.push_str("tier: web\n");
                }
                Edit::AppendPort(_) => {
                    out.push_str(line);
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                    out.push_str(&format!(
                        "{}- port: \"82\"\n{}protocol: UDP\n",
                        " ".repeat(indent.saturating_sub(2)),
                        " ".repeat(indent)
                    ));
                }
                _ => {}
            }
            out.push_str(&lines[at + 1..].concat());
            out
        }
        Edit::DeleteLine(n) => {
            let at = line_at(*n);
            let mut out: String = lines[..at].concat();
            out.push_str(&lines[(at + 1).min(lines.len())..].concat());
            out
        }
        Edit::DeleteBareDash(n) => {
            let bare: Vec<usize> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.trim() == "-")
                .map(|(i, _)| i)
                .collect();
            if bare.is_empty() {
                return text.to_owned();
            }
            let at = bare[n % bare.len()];
            let mut out: String = lines[..at].concat();
            out.push_str(&lines[at + 1..].concat());
            out
        }
        Edit::Indent(n, more) => {
            let at = line_at(*n);
            let mut out: String = lines[..at].concat();
            let line = lines.get(at).copied().unwrap_or("");
            if *more {
                out.push(' ');
                out.push_str(line);
            } else {
                out.push_str(line.strip_prefix(' ').unwrap_or(line));
            }
            out.push_str(&lines[(at + 1).min(lines.len())..].concat());
            out
        }
        Edit::Char(n, c, insert) => {
            let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            if bounds.is_empty() {
                return c.to_string();
            }
            let at = bounds[n % bounds.len()];
            let next = text[at..]
                .chars()
                .next()
                .map_or(at, |ch| at + ch.len_utf8());
            let rest = if *insert { &text[at..] } else { &text[next..] };
            format!("{}{c}{rest}", &text[..at])
        }
        Edit::Rule(n, copy) => {
            // An item start: `- from`/`- to`, then its lines up to the next
            // line at its indentation or less.
            let starts: Vec<usize> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| {
                    let t = l.trim_start();
                    t.starts_with("- from") || t.starts_with("- to")
                })
                .map(|(i, _)| i)
                .collect();
            if starts.is_empty() {
                return text.to_owned();
            }
            let start = starts[n % starts.len()];
            let indent = lines[start].len() - lines[start].trim_start().len();
            let end = (start + 1..lines.len())
                .find(|&i| {
                    let l = lines[i];
                    let t = l.trim_start();
                    !t.is_empty() && l.len() - t.len() <= indent
                })
                .unwrap_or(lines.len());
            let mut out: String = lines[..end].concat();
            if *copy {
                out.push_str(&lines[start..end].concat());
            } else {
                out.truncate(lines[..start].concat().len());
            }
            out.push_str(&lines[end..].concat());
            out
        }
    }
}

fn full(text: &str, limits: &LoadLimits, target: Option<&Target>) -> LoadOutcome {
    let mut outcome = load_str(NAME, text, limits);
    if let Some(target) = target {
        outcome.apply_target(target);
    }
    outcome
}

/// The routes of every rule item's port of every document, and each
/// document's root and name, for comparing route→position answers.
fn routes(outcome: &LoadOutcome) -> Vec<(usize, Route)> {
    let mut out = Vec::new();
    for (at, loaded) in outcome.documents.iter().enumerate() {
        out.push((at, Route::root()));
        out.push((at, Route::root().key("metadata").key("name")));
        for (rule, r) in loaded.doc.cilium_rules() {
            let base = Route::parse(&rule).unwrap();
            for (section, items) in r.sections() {
                for index in 0..items.len() {
                    let item = base.key(section.name()).index(index);
                    out.push((at, item.clone()));
                    out.push((
                        at,
                        item.key("toPorts")
                            .index(0)
                            .key("ports")
                            .index(0)
                            .key("port"),
                    ));
                    out.push((at, item.key("nonexistent")));
                }
            }
        }
    }
    out
}

/// Loads `new` both ways from `old`'s outcome, compares, and checks the
/// inverse edit; returns the incremental outcome and whether it was one.
fn check(
    base: &LoadOutcome,
    new: &str,
    limits: &LoadLimits,
    target: Option<&Target>,
) -> Result<(LoadOutcome, bool), TestCaseError> {
    let expected = full(new, limits, target);
    let mut got = base.clone();
    let incremental = reload(&mut got, NAME, new, limits, target);
    prop_assert_eq!(&got.documents, &expected.documents);
    prop_assert_eq!(&got.diagnostics, &expected.diagnostics);
    prop_assert_eq!(&got.trees, &expected.trees);
    prop_assert_eq!(&got, &expected);
    for (at, route) in routes(&expected) {
        prop_assert_eq!(
            got.locate_in(&got.documents[at], &route),
            expected.locate_in(&expected.documents[at], &route)
        );
    }
    if incremental {
        let edit = plan(
            base,
            NAME,
            new,
            limits,
            target,
            Budget::of(base, NAME).unwrap(),
        )
        .unwrap();
        if edit.moves_lines() && !base.diagnostics.is_empty() {
            MOVED.with(|m| m.set(m.get() + 1));
        }
        // The inverse gives the base back.
        let edit = plan(
            base,
            NAME,
            new,
            limits,
            target,
            Budget::of(base, NAME).unwrap(),
        )
        .unwrap();
        let mut there = base.clone();
        let inverse = edit.apply(&mut there).unwrap();
        prop_assert_eq!(&there, &expected);
        inverse.apply(&mut there).unwrap();
        prop_assert_eq!(&there, base);
    }
    Ok((got, incremental))
}

fn targets() -> impl Strategy<Value = Option<Target>> {
    prop_oneof![
        Just(None),
        Just(Some(Target::new(CiliumVersion::V1_19))),
        Just(Some(Target::new(CiliumVersion::V1_20))),
    ]
}

/// Chains of up to four edits, each loaded incrementally from the
/// previous incremental outcome and compared with the full load. At least
/// a tenth of the edits must take the incremental path, or the comparison
/// would be of the fallback with itself.
#[test]
fn reparse_equals_full_load() {
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 600,
        ..ProptestConfig::default()
    });
    let (edits_seen, incremental_seen) = (Cell::new(0usize), Cell::new(0usize));
    let strategy = (
        prop::collection::vec(doc(), 1..5),
        prop::collection::vec(edit(), 1..5),
        targets(),
        prop::bool::weighted(0.1),
    );
    runner
        .run(&strategy, |(docs, edits, target, tight)| {
            let limits = if tight {
                LoadLimits {
                    max_depth: 7,
                    max_nodes: 400,
                    max_scalar_bytes: 1500,
                    ..LoadLimits::default()
                }
            } else {
                LoadLimits::default()
            };
            let mut text = text_of(&docs);
            let mut base = full(&text, &limits, target.as_ref());
            for edit in &edits {
                let new = apply_edit(&text, edit);
                let (next, incremental) = check(&base, &new, &limits, target.as_ref())?;
                edits_seen.set(edits_seen.get() + 1);
                incremental_seen.set(incremental_seen.get() + usize::from(incremental));
                base = next;
                text = new;
            }
            Ok(())
        })
        .unwrap();
    let (all, incremental) = (edits_seen.get(), incremental_seen.get());
    eprintln!(
        "{incremental} of {all} edits incremental, {} moving lines with diagnostics",
        MOVED.with(Cell::get)
    );
    assert!(
        incremental * 10 >= all,
        "{incremental} of {all} edits incremental"
    );
}

fn items(n: usize) -> Vec<Item> {
    (0..n)
        .map(|i| Item {
            role: (i % 5) as u8,
            port: 1000 + i as u16,
            flow: false,
            comment: false,
            kafka: false,
            bare: false,
        })
        .collect()
}

/// The edits an agent makes are taken incrementally (so the property test
/// above compares the incremental path, not only the fallback), and
/// equal the full load.
#[test]
fn agent_edits_are_incremental() {
    let limits = LoadLimits::default();
    let cnp = Doc::Cnp {
        name: 1,
        ingress: items(40),
        egress: items(2),
        specs: false,
        indented: true,
    };
    let list = Doc::List(vec![(2, items(3)), (3, items(3))]);
    let specs = Doc::Cnp {
        name: 4,
        ingress: items(6),
        egress: items(1),
        specs: true,
        indented: false,
    };
    // A document with an error after the edits: its diagnostic moves
    // with the lines they add or remove.
    let text = text_of(&[
        cnp.clone(),
        Doc::Knp(9),
        list,
        specs,
        Doc::Broken(5),
        Doc::Cluster(6),
    ]);
    let base = full(&text, &limits, None);
    assert_eq!(base.documents.len(), 5, "{:?}", base.diagnostics);
    assert!(base.has_errors());
    assert_eq!(base.versioned_kinds.len(), 1);
    let cases: Vec<(&str, String)> = vec![
        ("port of the first rule", text.replacen("port: \"1000\"", "port: \"1001\"", 1)),
        ("port, longer", text.replacen("port: \"1005\"", "port: \"65000\"", 1)),
        (
            "a label added (lines move)",
            text.replacen("role: client-3\n", "role: client-3\n          tier: web\n", 1),
        ),
        (
            "a port appended on lines of its own at an item's end (lines move)",
            text.replacen(
                "        - port: \"1002\"\n          protocol: TCP\n",
                "        - port: \"1002\"\n          protocol: TCP\n        - port: \"1102\"\n          protocol: UDP\n",
                1,
            ),
        ),
        (
            "a port removed (lines move)",
            text.replacen("      toPorts:\n      - ports:\n        - port: \"1002\"\n          protocol: TCP\n", "", 1),
        ),
        (
            "a rule inserted before the third (its first lines repeat the next rule's)",
            text.replacen(
                "    - fromEndpoints:\n      - matchLabels:\n          role: client-2\n",
                "    - fromEndpoints:\n      - matchLabels:\n          role: client-9\n      toPorts:\n      - ports:\n        - port: \"9000\"\n          protocol: TCP\n    - fromEndpoints:\n      - matchLabels:\n          role: client-2\n",
                1,
            ),
        ),
        (
            "the third rule removed",
            text.replacen(
                "    - fromEndpoints:\n      - matchLabels:\n          role: client-2\n      toPorts:\n      - ports:\n        - port: \"1002\"\n          protocol: TCP\n",
                "",
                1,
            ),
        ),
        (
            "a rule inserted first in its section (the sequence starts where it does)",
            text.replacen(
                "    - fromEndpoints:\n      - matchLabels:\n          role: client-0\n",
                "    - fromEntities: [world]\n    - fromEndpoints:\n      - matchLabels:\n          role: client-0\n",
                1,
            ),
        ),
        (
            "the first rule removed",
            text.replacen(
                "    - fromEndpoints:\n      - matchLabels:\n          role: client-0\n      toPorts:\n      - ports:\n        - port: \"1000\"\n          protocol: TCP\n",
                "",
                1,
            ),
        ),
        ("in a List item", {
            let list = text.find("kind: List").unwrap();
            let at = list + text[list..].find("port: \"1001\"").unwrap();
            format!("{}port: \"2001\"{}", &text[..at], &text[at + 12..])
        }),
        ("in specs", {
            let at = text.rfind("port: \"1004\"").unwrap();
            format!("{}port: \"3004\"{}", &text[..at], &text[at + 12..])
        }),
    ];
    let last = text_of(&[Doc::Knp(9), cnp]);
    let last_base = full(&last, &limits, None);
    let at = last.rfind("port: \"1000\"").unwrap();
    let last_edit = format!("{}port: \"4000\"{}", &last[..at], &last[at + 12..]);
    let mut got = last_base.clone();
    assert!(
        reload(&mut got, NAME, &last_edit, &limits, None),
        "the last item: not incremental"
    );
    assert_eq!(got, full(&last_edit, &limits, None), "the last item");
    for (what, new) in cases {
        assert_ne!(new, text, "{what}: the edit changed nothing");
        let expected = full(&new, &limits, None);
        let mut got = base.clone();
        assert!(
            reload(&mut got, NAME, &new, &limits, None),
            "{what}: not incremental"
        );
        assert_eq!(got, expected, "{what}");
    }
}

/// Edits whose equality with a full load the re-parse cannot show fall
/// back (and still equal the full load).
#[test]
fn structural_edits_fall_back() {
    let limits = LoadLimits::default();
    let text = text_of(&[Doc::Cnp {
        name: 1,
        ingress: items(5),
        egress: Vec::new(),
        specs: false,
        indented: false,
    }]);
    let base = full(&text, &limits, None);
    let cases: Vec<(&str, String)> = vec![
        (
            "an anchor",
            text.replacen("role: client-1", "role: &a client-1", 1),
        ),
        (
            "an error",
            text.replacen("port: \"1001\"", "port: \"99999\"", 1),
        ),
        (
            "a rule inserted first with more blanks after its `-` (a sequence at its key's indentation starts at its first entry's content)",
            text.replacen(
                "  - fromEndpoints:\n",
                "  -   fromEntities: [world]\n  - fromEndpoints:\n",
                1,
            ),
        ),
        (
            "an item's indentation",
            text.replacen(
                "  - fromEndpoints:\n    - matchLabels:\n        role: client-1",
                "   - fromEndpoints:\n    - matchLabels:\n        role: client-1",
                1,
            ),
        ),
        (
            "an item's first line",
            text.replacen(
                "  - fromEndpoints:\n    - matchLabels:\n        role: client-1",
                "  -  fromEndpoints:\n    - matchLabels:\n        role: client-1",
                1,
            ),
        ),
        ("the selector", text.replacen("app: server", "app: web", 1)),
        (
            "a block scalar",
            text.replacen("role: client-1", "role: |\n          client-1", 1),
        ),
    ];
    for (what, new) in cases {
        assert_ne!(new, text, "{what}: the edit changed nothing");
        let mut got = base.clone();
        assert!(
            !reload(&mut got, NAME, &new, &limits, None),
            "{what}: incremental"
        );
        assert_eq!(got, full(&new, &limits, None), "{what}");
    }
    // The first entry removed where it had more blanks after its `-` than
    // the next one (a sequence at its key's indentation starts at its first
    // entry's content: the column would change): it falls back too.
    let blanks = text.replacen(
        "  - fromEndpoints:\n",
        "  -   fromEntities: [world]\n  - fromEndpoints:\n",
        1,
    );
    let mut got = full(&blanks, &limits, None);
    assert!(!got.has_errors(), "{:?}", got.diagnostics);
    assert!(
        !reload(&mut got, NAME, &text, &limits, None),
        "the first entry removed, other blanks: incremental"
    );
    assert_eq!(got, base, "the first entry removed, other blanks");
    // An anchor on an ancestor of the edited item, its alias elsewhere
    // (the copy must follow the edit): the whole text falls back.
    let anchored = format!(
        "{}status: {{copy: *i}}\n",
        text.replacen("  ingress:\n", "  ingress: &i\n", 1)
    );
    let anchored_base = full(&anchored, &limits, None);
    assert!(
        !anchored_base.has_errors(),
        "{:?}",
        anchored_base.diagnostics
    );
    let edited = anchored.replacen("port: \"1001\"", "port: \"1002\"", 1);
    let mut got = anchored_base.clone();
    assert!(
        !reload(&mut got, NAME, &edited, &limits, None),
        "an aliased ancestor: incremental"
    );
    assert_eq!(got, full(&edited, &limits, None), "an aliased ancestor");
    // A carriage return outside a CRLF before the edit: the parser counts
    // it as a line break, the plan's byte-derived lines do not (the plan
    // replaced the item before the edited one: found by review). Loaded in
    // full, for a replaced item and an inserted one.
    let cr = "# policy\r# owner: a\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: ns}\nspec:\n  endpointSelector: {}\n  ingress:\n  - toPorts: [{ports: [{port: \"22\", protocol: TCP}]}]\n  - toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]\n  - toPorts: [{ports: [{port: \"443\", protocol: TCP}]}]\n";
    let cr_base = full(cr, &limits, None);
    assert!(!cr_base.has_errors(), "{:?}", cr_base.diagnostics);
    for edited in [
        cr.replacen("\"80\"", "\"81\"", 1),
        cr.replacen(
            "  - toPorts: [{ports: [{port: \"443\"",
            "  - toPorts: [{ports: [{port: \"8080\", protocol: TCP}]}]\n  - toPorts: [{ports: [{port: \"443\"",
            1,
        ),
    ] {
        assert_ne!(edited, cr);
        let mut got = cr_base.clone();
        assert!(
            !reload(&mut got, NAME, &edited, &limits, None),
            "a lone CR: incremental"
        );
        assert_eq!(got, full(&edited, &limits, None), "a lone CR");
    }
    // Sanity: the documents are the CNP.
    assert!(matches!(
        base.documents[0].doc,
        PolicyDocument::CiliumNetworkPolicy(_)
    ));
}

/// An entry whose `-` stands alone on its line (its keys on the next
/// lines) starts on the `-`'s line, not at its first key: deleting that
/// line merges the entry into the item before it. The re-parse read only
/// the lines up to the first key and kept the two items apart (found by
/// the session's property test, session 12: the policy the session held
/// allowed every port to one peer and one port to every peer where the
/// text allows one port to one peer). It now falls back.
#[test]
fn deleting_a_bare_entry_marker_falls_back() {
    let limits = LoadLimits::default();
    let head = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: prod}\nspec:\n  endpointSelector: {matchLabels: {app: c}}\n  egress:\n    - toEndpoints: [{matchLabels: {app: a}}]\n";
    let ports = "      toPorts: [{ports: [{port: \"443\", protocol: TCP}]}]\n";
    let two = format!("{head}    -\n{ports}");
    let one = format!("{head}{ports}");
    for (from, to, what) in [
        (&two, &one, "the bare `-` deleted"),
        (&one, &two, "a bare `-` inserted"),
    ] {
        let base = full(from, &limits, None);
        assert!(!base.has_errors(), "{what}: {:?}", base.diagnostics);
        let mut got = base.clone();
        assert!(
            !reload(&mut got, NAME, to, &limits, None),
            "{what}: incremental"
        );
        let expected = full(to, &limits, None);
        assert_eq!(got, expected, "{what}");
    }
    // A port changed inside the entry after the bare `-`, and one in the
    // item before it: each equals its full load, whichever way it goes.
    for changed in [
        two.replacen("\"443\"", "\"444\"", 1),
        two.replacen("app: a", "app: b", 1),
    ] {
        let mut got = full(&two, &limits, None);
        reload(&mut got, NAME, &changed, &limits, None);
        assert_eq!(got, full(&changed, &limits, None));
    }
}
