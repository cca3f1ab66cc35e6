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
