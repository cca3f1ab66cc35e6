//! `fixtures/examples/`: the bundled valid examples load with no finding at all.

use std::path::Path;

use porin_model::{LoadLimits, load_path};

#[test]
fn examples_are_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/examples");
    let outcome = load_path(&dir, &LoadLimits::default()).expect("examples are readable");
    assert!(
        outcome.diagnostics.is_empty(),
        "{}",
        porin_model::diagnostic::render_human_all(&outcome.diagnostics, &outcome.sources)
    );
    // web, backend-egress, backend-no-metadata, host-ssh, db.
    assert_eq!(outcome.documents.len(), 5);
}

/// Later stages report by route; `LoadOutcome::locate` turns a route into a
/// line and column (falling back to the deepest existing ancestor).
#[test]
fn routes_resolve_to_lines_and_columns() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/examples/web-ingress.yaml");
    let outcome = load_path(&dir, &LoadLimits::default()).expect("readable");
    let file = &outcome.documents[0].file;
    let route =
        porin_model::Route::parse("spec.ingress[0].toPorts[0].ports[0].port").expect("route");
    let location = outcome.locate(file, 0, &route).expect("located");
    assert_eq!((location.line, location.column), (18, 15));
    assert_eq!(location.route, "spec.ingress[0].toPorts[0].ports[0].port");
    let absent =
        porin_model::Route::parse("spec.ingress[0].toPorts[0].ports[0].endPort").expect("route");
    let fallback = outcome.locate(file, 0, &absent).expect("located");
    assert_eq!(
        (fallback.line, fallback.column),
        (18, 9),
        "falls back to the port entry"
    );
}

/// `locate_in` adds a `List`'s `items[i]` prefix itself.
#[test]
fn routes_inside_list_items_resolve() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/examples/kubernetes-networkpolicy.yaml");
    let outcome = load_path(&path, &LoadLimits::default()).expect("readable");
    let db = &outcome.documents[0];
    assert_eq!(db.item, Some(0));
    let route = porin_model::Route::parse("spec.egress[0].ports[0].endPort").expect("route");
    let location = outcome.locate_in(db, &route).expect("located");
    assert_eq!((location.line, location.column), (33, 18));
    assert_eq!(location.route, "items[0].spec.egress[0].ports[0].endPort");
}

/// The model types are strict with any serde format, not only through the
/// loader: other stages (e.g. the C API reading JSON) cannot silently drop
/// a misspelt field.
#[test]
fn model_types_reject_unknown_fields_with_serde_json() {
    let json = r#"{"apiVersion":"cilium.io/v2","kind":"CiliumNetworkPolicy","metadata":{"name":"a"},
        "spec":{"endpointSelector":{},"ingress":[{"fromEndpoint":[{}]}]}}"#;
    let error = serde_json::from_str::<porin_model::CiliumNetworkPolicy>(json).expect_err("strict");
    assert!(
        error.to_string().contains("unknown field `fromEndpoint`"),
        "{error}"
    );
}
