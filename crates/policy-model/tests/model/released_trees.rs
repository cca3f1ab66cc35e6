//! `LoadOutcome::release_trees` and `load_paths_lean` (what `porin
//! compile` loads with, issue 14's CIDR target): the compact locator
//! gives the location the full tree gives for every route of every
//! fixture, present or absent, and the lean load the same documents and
//! diagnostics as the ordinary one.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on I/O errors"
)]

use std::path::PathBuf;

use porin_model::loader::load_paths_lean;
use porin_model::route::Route;
use porin_model::yaml::tree::{Node, NodeKind};
use porin_model::{LoadLimits, load_paths};

fn fixtures() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    ["invalid", "examples", "lint"]
        .iter()
        .map(|dir| root.join(dir))
        .collect()
}

/// Every route to a node of `node`, plus, under each, a key and an index
/// that are absent (located at the deepest existing ancestor).
fn routes(node: &Node, here: &Route, out: &mut Vec<Route>) {
    out.push(here.clone());
    out.push(here.key("absent"));
    out.push(here.index(999));
    match &node.kind {
        NodeKind::Scalar(..) => {}
        NodeKind::Sequence(items) => {
            for (index, item) in items.iter().enumerate() {
                routes(item, &here.index(index), out);
            }
        }
        NodeKind::Mapping(pairs) => {
            for (key, value) in pairs {
                if let Some(text) = key.as_scalar() {
                    routes(value, &here.key(text), out);
                }
            }
        }
    }
}

#[test]
fn released_trees_locate_every_route_as_the_trees_do() {
    let limits = LoadLimits::default();
    let kept = load_paths(&fixtures(), &limits).unwrap();
    let mut released = kept.clone();
    released.release_trees();
    assert!(released.trees.is_empty());
    let mut checked = 0;
    for tree in &kept.trees {
        for (document, root) in tree.roots.iter().enumerate() {
            let Some(root) = root else { continue };
            let mut all = Vec::new();
            routes(root, &Route::root(), &mut all);
            for route in &all {
                assert_eq!(
                    kept.locate(&tree.file, document, route),
                    released.locate(&tree.file, document, route),
                    "{}[{document}] {route}",
                    tree.file
                );
                checked += 1;
            }
        }
        assert_eq!(
            released.locate(&tree.file, tree.roots.len(), &Route::root()),
            None
        );
    }
    assert_eq!(released.locate("no-such-file", 0, &Route::root()), None);
    assert!(checked > 10_000, "only {checked} routes checked");
}

#[test]
fn lean_load_has_the_same_documents_and_diagnostics() {
    let limits = LoadLimits::default();
    let kept = load_paths(&fixtures(), &limits).unwrap();
    let lean = load_paths_lean(&fixtures(), &limits).unwrap();
    assert!(lean.trees.is_empty());
    assert!(!kept.diagnostics.is_empty() && !kept.documents.is_empty());
    assert_eq!(kept.documents, lean.documents);
    assert_eq!(kept.diagnostics, lean.diagnostics);
    assert_eq!(kept.omitted, lean.omitted);
    let mut released = kept.clone();
    released.release_trees();
    assert_eq!(released, lean);
}

/// Long sequences (a `List` of 40 policies, 20 CIDRs in a rule, flow and
/// block style) are indexed rather than walked by the locator: every
/// route of them, and an index past their end, is located as the trees
/// locate it.
#[test]
fn released_trees_locate_long_sequences_as_the_trees_do() {
    let mut text = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for item in 0..40 {
        text.push_str(&format!(
            "- apiVersion: cilium.io/v2\n  kind: CiliumNetworkPolicy\n  metadata: {{name: p{item}}}\n  spec:\n    endpointSelector: {{}}\n    egress:\n    - toCIDR: [{}]\n      toPorts:\n"
        ,
            (0..20)
                .map(|i| format!("10.{item}.{i}.0/24"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for port in 0..17 {
            text.push_str(&format!("      - ports: [{{port: \"{}\"}}]\n", 1000 + port));
        }
    }
    let limits = LoadLimits::default();
    let kept = porin_model::load_str("long.yaml", &text, &limits);
    assert!(
        kept.diagnostics.iter().all(|d| !d.is_error()),
        "{:?}",
        kept.diagnostics
    );
    assert_eq!(kept.documents.len(), 40);
    let mut released = kept.clone();
    released.release_trees();
    let root = kept.trees[0].roots[0].as_ref().unwrap();
    let mut all = Vec::new();
    routes(root, &Route::root(), &mut all);
    assert!(all.len() > 40 * 20 * 3);
    for route in &all {
        assert_eq!(
            kept.locate("long.yaml", 0, route),
            released.locate("long.yaml", 0, route),
            "{route}"
        );
    }
}
