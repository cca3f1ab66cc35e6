//! The replacement each diagnostic suggests (`suggested_replacement`, the
//! language server's quick fixes), from real loads: the phrases it reads
//! are the loader's own, so a change of wording fails here.

use porin_model::suggested_replacement;

fn replacements(yaml: &str) -> Vec<(&'static str, Option<String>)> {
    let outcome = porin_model::load_str("t.yaml", yaml, &porin_model::LoadLimits::default());
    outcome
        .diagnostics
        .iter()
        .map(|d| (d.code, suggested_replacement(d)))
        .collect()
}

#[test]
fn the_loaders_own_suggestions_are_recognised() {
    let head = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: a, namespace: b}\nspec:\n  endpointSelector: {}\n";
    let typo = format!("{head}  ingress:\n  - fromEndpoint: [{{}}]\n");
    assert_eq!(
        replacements(&typo),
        [("PM003", Some("fromEndpoints".to_owned()))]
    );
    let unquoted =
        format!("{head}  ingress:\n  - toPorts: [{{ports: [{{port: 8080, protocol: TCP}}]}}]\n");
    assert_eq!(
        replacements(&unquoted),
        [("PM004", Some("\"8080\"".to_owned()))]
    );
    let lower =
        format!("{head}  ingress:\n  - toPorts: [{{ports: [{{port: \"80\", protocol: tcp}}]}}]\n");
    assert_eq!(replacements(&lower), [("PM023", Some("TCP".to_owned()))]);
    let entity = format!("{head}  ingress:\n  - fromEntities: [worl]\n");
    assert_eq!(replacements(&entity), [("PM017", Some("world".to_owned()))]);
    let far = format!("{head}  ingress:\n  - fromEntities: [zzzzzzzz]\n");
    assert_eq!(replacements(&far), [("PM017", None)]);
}
