//! `porin compile --format json-states`: the document validates against
//! the committed contract (`schema/compile-states.schema.json`), names
//! each state once, and expands to the `--format json` document exactly;
//! with `--endpoint`, the one endpoint's state alone.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::path::PathBuf;

use serde_json::Value;

use crate::common::{porin, workspace};

const POLICIES: &str = "examples/boutique/policies";
const INVENTORY: &str = "examples/boutique/manifests.yaml";

fn compile(extra: &[&str]) -> Value {
    compile_with(POLICIES, INVENTORY, extra)
}

fn compile_with(policies: &str, inventory: &str, extra: &[&str]) -> Value {
    let mut args = vec!["compile", policies, "--inventory", inventory];
    args.extend_from_slice(extra);
    let out = porin(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The plain document of a state document: each endpoint's `state`
/// replaced by that state's `entries`, `states` dropped.
fn expand(mut states: Value) -> Value {
    let list = states.as_object_mut().unwrap().remove("states").unwrap();
    for endpoint in states["endpoints"].as_array_mut().unwrap() {
        let endpoint = endpoint.as_object_mut().unwrap();
        let index = endpoint.remove("state").unwrap().as_u64().unwrap();
        let state = &list[usize::try_from(index).unwrap()];
        endpoint.insert("entries".to_owned(), state["entries"].clone());
    }
    states
}

fn validator() -> jsonschema::Validator {
    let text =
        std::fs::read_to_string(workspace().join("schema/compile-states.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

#[test]
fn json_states_follows_its_schema_and_expands_to_the_json_output() {
    let states = compile(&["--format", "json-states"]);
    let errors: Vec<String> = validator()
        .iter_errors(&states)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let endpoints = states["endpoints"].as_array().unwrap().len();
    let distinct = states["states"].as_array().unwrap().len();
    // Every boutique workload has a policy of its own.
    assert_eq!(distinct, endpoints);
    // No two states written for the same unit: each state is used.
    let mut used = vec![false; distinct];
    for endpoint in states["endpoints"].as_array().unwrap() {
        used[usize::try_from(endpoint["state"].as_u64().unwrap()).unwrap()] = true;
    }
    assert!(used.iter().all(|u| *u));
    assert_eq!(expand(states), compile(&[]));
    // The plain output fails the state schema (it has no `states`): the
    // schema is not vacuous.
    assert!(!validator().is_valid(&compile(&["--format", "json"])));
}

#[test]
fn json_states_of_one_endpoint_holds_its_state_alone() {
    let one = compile(&["--format", "json-states", "--endpoint", "default/frontend"]);
    assert_eq!(one["states"].as_array().unwrap().len(), 1);
    assert_eq!(one["endpoints"][0]["state"], 0);
    assert_eq!(
        expand(one),
        compile(&["--format", "json", "--endpoint", "default/frontend"])
    );
}

/// The quickstart with two more `api` replicas (same labels, same
/// identity): the three share one state, written once.
#[test]
fn replicas_share_one_state() {
    let dir = std::env::temp_dir().join(format!("porin-compile-states-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let quickstart = workspace().join("examples/quickstart/inventory.yaml");
    let mut inventory = std::fs::read_to_string(&quickstart).unwrap();
    inventory.push_str(
        "  - {name: api-2, namespace: shop, labels: {app: api}, ips: [10.0.1.21]}\n  \
         - {name: api-3, namespace: shop, labels: {app: api}, ips: [10.0.1.22]}\n",
    );
    let path: PathBuf = dir.join("inventory.yaml");
    std::fs::write(&path, inventory).unwrap();
    let policies = workspace().join("examples/quickstart/policies");
    let (policies, path) = (policies.to_str().unwrap(), path.to_str().unwrap());
    let states = compile_with(policies, path, &["--format", "json-states"]);
    let endpoints = states["endpoints"].as_array().unwrap();
    let state_of = |name: &str| {
        endpoints
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["state"].clone())
            .unwrap()
    };
    assert_eq!(state_of("api"), state_of("api-2"));
    assert_eq!(state_of("api"), state_of("api-3"));
    assert!(states["states"].as_array().unwrap().len() < endpoints.len());
    assert_eq!(expand(states), compile_with(policies, path, &[]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A host-firewall inventory: both documents carry the inventory's
/// `nodes`, the state document validates with them, and it still expands
/// to the plain document.
#[test]
fn json_states_with_nodes_follows_its_schema() {
    let inventory = "fixtures/inventories/corpus-examples.yaml";
    let states = compile_with(POLICIES, inventory, &["--format", "json-states"]);
    assert!(
        states["nodes"].as_array().is_some_and(|n| !n.is_empty()),
        "no nodes in the output"
    );
    let errors: Vec<String> = validator()
        .iter_errors(&states)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(expand(states), compile_with(POLICIES, inventory, &[]));
}
