//! `schema/policy.schema.json` is the committed output of
//! `porin_model::schema::policy_schema_json()`. This test fails when it is
//! stale; `UPDATE_SCHEMA=1 cargo test -p porin-model --test model schema::` rewrites it.

use std::path::Path;

use porin_model::schema::{policy_schema, policy_schema_json};

#[test]
fn committed_schema_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/policy.schema.json");
    let expected = policy_schema_json();
    if std::env::var("UPDATE_SCHEMA").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &expected).expect("write schema");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "{} is stale; run `UPDATE_SCHEMA=1 cargo test -p porin-model --test model schema::` and commit it",
        path.display()
    );
}

#[test]
fn schema_pins_kinds_and_rejects_unknown_fields() {
    let schema = policy_schema();
    assert_eq!(schema["oneOf"].as_array().map(Vec::len), Some(4));
    let kcnp = &schema["definitions"]["ClusterNetworkPolicy"];
    assert_eq!(kcnp["properties"]["kind"]["const"], "ClusterNetworkPolicy");
    assert_eq!(
        kcnp["properties"]["apiVersion"]["enum"],
        serde_json::json!([
            "policy.networking.k8s.io/v1alpha2",
            "policy.networking.k8s.io/v1beta1"
        ])
    );
    let tier = schema["definitions"]["Tier"].to_string();
    assert!(
        tier.contains("\"Admin\"") && tier.contains("\"Baseline\""),
        "{tier}"
    );
    let cnp = &schema["definitions"]["CiliumNetworkPolicy"];
    assert_eq!(cnp["properties"]["kind"]["const"], "CiliumNetworkPolicy");
    assert_eq!(cnp["properties"]["apiVersion"]["const"], "cilium.io/v2");
    assert_eq!(
        schema["definitions"]["IngressRule"]["additionalProperties"],
        false
    );
    let port = &schema["definitions"]["PortProtocol"]["properties"]["port"];
    assert!(
        port.to_string().contains("string"),
        "port must be typed as a string: {port}"
    );
}
