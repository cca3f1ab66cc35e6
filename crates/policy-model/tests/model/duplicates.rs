//! Two policy documents with the same kind, namespace and name (issue 12,
//! item 5). A cluster keeps one object per kind, namespace and name — a
//! second `kubectl apply` replaces the first — so applying both is an
//! over-allow. porin refuses the set with `PM042` at the later copy, naming
//! the earlier one, within a file, across files and directories, and when
//! separately loaded outcomes are merged (policy tests, the C API).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on I/O errors"
)]

use std::path::{Path, PathBuf};

use porin_model::{Diagnostic, LoadLimits, LoadOutcome, load_paths, load_str};

const CODE: &str = "PM042";

fn cnp(namespace: Option<&str>, name: &str, port: u16) -> String {
    let namespace = namespace.map_or(String::new(), |ns| format!(", namespace: {ns}"));
    format!(
        "apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {{name: {name}{namespace}}}
spec:
  endpointSelector: {{matchLabels: {{app: s2}}}}
  ingress:
  - toPorts: [{{ports: [{{port: \"{port}\", protocol: TCP}}]}}]
"
    )
}

fn ccnp(namespace: Option<&str>, name: &str) -> String {
    let namespace = namespace.map_or(String::new(), |ns| format!(", namespace: {ns}"));
    format!(
        "apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {{name: {name}{namespace}}}
spec:
  endpointSelector: {{matchLabels: {{app: s2}}}}
  ingress:
  - fromEntities: [world]
"
    )
}

fn knp(namespace: &str, name: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  podSelector: {{matchLabels: {{app: s2}}}}
  policyTypes: [Ingress]
"
    )
}

fn duplicates(outcome: &LoadOutcome) -> Vec<&Diagnostic> {
    outcome
        .diagnostics
        .iter()
        .filter(|d| d.code == CODE)
        .collect()
}

fn stream(documents: &[String]) -> String {
    documents.join("---\n")
}

#[test]
fn the_same_cnp_twice_in_one_file_is_an_error_at_both_places() {
    let text = stream(&[
        cnp(Some("default"), "s2", 80),
        cnp(Some("default"), "s2", 443),
    ]);
    let outcome = load_str("s2.yaml", &text, &LoadLimits::default());
    let found = duplicates(&outcome);
    assert_eq!(found.len(), 1, "{:#?}", outcome.diagnostics);
    let diagnostic = found[0];
    assert!(diagnostic.is_error());
    assert!(
        diagnostic
            .message
            .contains("CiliumNetworkPolicy `default/s2`"),
        "{}",
        diagnostic.message
    );
    let primary = diagnostic.primary.as_ref().unwrap();
    assert_eq!(
        (primary.file.as_str(), primary.document, primary.line),
        ("s2.yaml", 1, 11)
    );
    assert_eq!(primary.route, "metadata.name");
    let (first, _) = &diagnostic.related[0];
    assert_eq!(
        (first.file.as_str(), first.document, first.line),
        ("s2.yaml", 0, 3)
    );
    // The later copy is not loaded; the set has an error, so no consumer
    // compiles any of it.
    assert!(outcome.has_errors());
    assert_eq!(outcome.documents.len(), 1);
    assert_eq!(outcome.documents[0].index, 0);
}

#[test]
fn an_omitted_namespace_is_the_default_namespace() {
    let text = stream(&[cnp(None, "s2", 80), cnp(Some("default"), "s2", 443)]);
    let outcome = load_str("s2.yaml", &text, &LoadLimits::default());
    assert_eq!(duplicates(&outcome).len(), 1, "{:#?}", outcome.diagnostics);
}

#[test]
fn clusterwide_policies_clash_whatever_their_metadata_namespace() {
    let text = stream(&[ccnp(None, "c1"), ccnp(Some("other"), "c1")]);
    let outcome = load_str("c1.yaml", &text, &LoadLimits::default());
    let found = duplicates(&outcome);
    assert_eq!(found.len(), 1, "{:#?}", outcome.diagnostics);
    assert!(
        found[0]
            .message
            .contains("CiliumClusterwideNetworkPolicy `c1`"),
        "{}",
        found[0].message
    );
}

#[test]
fn network_policies_clash_too() {
    let text = stream(&[knp("prod", "k1"), knp("prod", "k1")]);
    let outcome = load_str("k1.yaml", &text, &LoadLimits::default());
    assert_eq!(duplicates(&outcome).len(), 1, "{:#?}", outcome.diagnostics);
}

#[test]
fn other_kinds_or_namespaces_with_the_same_name_are_distinct_objects() {
    let text = stream(&[
        cnp(Some("default"), "s2", 80),
        // another namespace
        cnp(Some("prod"), "s2", 443),
        // a NetworkPolicy and a CCNP are other kinds
        knp("default", "s2"),
        ccnp(None, "s2"),
    ]);
    let outcome = load_str("mixed.yaml", &text, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:#?}", outcome.diagnostics);
    assert_eq!(outcome.documents.len(), 4);
}

#[test]
fn three_copies_are_two_errors_naming_the_first() {
    let text = stream(&[
        cnp(Some("default"), "s2", 80),
        cnp(Some("default"), "s2", 443),
        cnp(Some("default"), "s2", 8080),
    ]);
    let outcome = load_str("s2.yaml", &text, &LoadLimits::default());
    let found = duplicates(&outcome);
    assert_eq!(found.len(), 2, "{:#?}", outcome.diagnostics);
    for diagnostic in found {
        assert_eq!(diagnostic.related[0].0.document, 0);
    }
}

#[test]
fn a_list_item_is_located_inside_its_list() {
    let text = "apiVersion: v1
kind: List
items:
- apiVersion: cilium.io/v2
  kind: CiliumNetworkPolicy
  metadata: {name: s2, namespace: default}
  spec: {endpointSelector: {}, ingress: [{}]}
- apiVersion: cilium.io/v2
  kind: CiliumNetworkPolicy
  metadata: {name: s2, namespace: default}
  spec: {endpointSelector: {}, ingress: [{}]}
";
    let outcome = load_str("list.yaml", text, &LoadLimits::default());
    let found = duplicates(&outcome);
    assert_eq!(found.len(), 1, "{:#?}", outcome.diagnostics);
    let primary = found[0].primary.as_ref().unwrap();
    assert_eq!(
        (primary.line, primary.route.as_str()),
        (10, "items[1].metadata.name")
    );
    assert_eq!(found[0].related[0].0.line, 6);
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "porin-model-duplicates-{}-{test}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("nested")).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn copies_in_two_files_of_a_directory_clash() {
    let dir = scratch("dir");
    write(&dir.join("a.yaml"), &cnp(Some("default"), "s2", 80));
    write(&dir.join("nested/b.yaml"), &cnp(Some("default"), "s2", 443));
    let outcome = load_paths(std::slice::from_ref(&dir), &LoadLimits::default()).unwrap();
    let found = duplicates(&outcome);
    assert_eq!(found.len(), 1, "{:#?}", outcome.diagnostics);
    let primary = found[0].primary.as_ref().unwrap();
    assert!(primary.file.ends_with("nested/b.yaml"), "{primary:?}");
    assert!(found[0].related[0].0.file.ends_with("a.yaml"));
    // Two paths given separately clash the same way.
    let outcome = load_paths(
        &[dir.join("a.yaml"), dir.join("nested/b.yaml")],
        &LoadLimits::default(),
    )
    .unwrap();
    assert_eq!(duplicates(&outcome).len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn merged_outcomes_clash() {
    let limits = LoadLimits::default();
    let mut outcome = load_str("first.yaml", &cnp(Some("default"), "s2", 80), &limits);
    outcome.merge(load_str(
        "second.yaml",
        &cnp(Some("default"), "s2", 443),
        &limits,
    ));
    let found = duplicates(&outcome);
    assert_eq!(found.len(), 1, "{:#?}", outcome.diagnostics);
    assert_eq!(found[0].primary.as_ref().unwrap().file, "second.yaml");
    assert_eq!(found[0].related[0].0.file, "first.yaml");
    assert_eq!(outcome.documents.len(), 1);
}

/// A load large enough to parse its files on rayon's threads (over 256 KiB)
/// merges them in input order while they are parsed: the outcome is the
/// one of loading each file alone and merging them one after the other,
/// repeats across files, within a file and invalid documents included,
/// both with trees kept and released.
#[test]
fn a_parallel_load_is_the_files_merged_in_order() {
    parallel_load_equals_merging_one_by_one("parallel", true);
}

/// The same without any repeated object: the load then only appends each
/// file's documents (moved on the pool), which must give the same outcome.
#[test]
fn a_parallel_load_without_repeats_is_the_files_merged_in_order() {
    parallel_load_equals_merging_one_by_one("parallel-unique", false);
}

fn parallel_load_equals_merging_one_by_one(test: &str, repeats: bool) {
    let dir = scratch(test);
    let mut files = Vec::new();
    for file in 0..48 {
        let mut documents: Vec<String> = (0..40)
            .map(|i| cnp(Some("default"), &format!("p-{file}-{i}"), 80))
            .collect();
        if repeats {
            // A copy of a policy of an earlier file and one of the same file.
            documents.push(cnp(Some("default"), &format!("p-{}-3", file / 2), 443));
            documents.push(cnp(Some("default"), &format!("p-{file}-5"), 443));
        }
        // An invalid document.
        documents.push(format!(
            "apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {{name: bad-{file}, namespace: default}}
spec:
  endpointSelector: {{}}
  egress:
  - toCIDR: [10.0.0.300/8]
"
        ));
        let path = dir.join(format!("f{file:02}.yaml"));
        write(&path, &stream(&documents));
        files.push(path);
    }
    let limits = LoadLimits::default();
    let mut one_by_one = LoadOutcome::default();
    for file in &files {
        one_by_one.merge(porin_model::loader::load_path(file, &limits).unwrap());
    }
    let whole = load_paths(std::slice::from_ref(&dir), &limits).unwrap();
    assert!(whole.documents.len() > 1000, "{}", whole.documents.len());
    if repeats {
        assert!(duplicates(&whole).len() >= 48 + 24);
    } else {
        assert!(duplicates(&whole).is_empty());
        assert!(whole.has_errors(), "the invalid documents are reported");
    }
    assert_eq!(whole, one_by_one);
    let lean = porin_model::loader::load_paths_lean(&files, &limits).unwrap();
    assert_eq!(lean.documents, one_by_one.documents);
    assert_eq!(lean.diagnostics, one_by_one.diagnostics);
    std::fs::remove_dir_all(&dir).unwrap();
}
