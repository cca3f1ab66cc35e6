//! Cilium's `allow-localhost` option and the host ingress allow it adds to
//! every endpoint's map state. Each test names the Cilium source it follows:
//! - `pkg/policy/mapstate.go` `determineAllowLocalhostIngress` and
//!   `localHostKey` (ingress, identity 1, no protocol or port), entry
//!   `newAllowEntryWithLabels(LabelsLocalHostIngress)` (priority 0 allow);
//! - `pkg/policy/resolve.go` `DistillPolicy` (after all policy entries, for
//!   every owner but the host);
//! - `pkg/option/config.go` `AlwaysAllowLocalhost` (only `always` is true);
//! - `daemon/cmd/daemon.go` (Kubernetes mode turns `auto` into `always`).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use porin_compiler::compile::{Compiled, EntryOut, compile};
use porin_compiler::explain::{Flow, FlowVerdict, Peer, evaluate, explain};
use porin_compiler::inventory::{AllowLocalhost, Inventory};
use porin_compiler::resolve::lower::PolicyInput;
use porin_compiler::resolve::rule::proto;
use porin_compiler::session::IncrementalCompiler;
use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_str};

const ENDPOINTS: &str = r#"
endpoints:
  - {name: web, namespace: prod, labels: {app: web}, ips: [10.0.0.1]}
  - {name: quiet, namespace: prod, labels: {app: quiet}, ips: [10.0.0.2]}
  - {name: vm-web, labels: {app: web}, ips: [192.168.0.1]}
  - {name: node, labels: {"reserved:host": ""}, ips: [192.168.0.254]}
"#;

const WEB_POLICY: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: web}
spec:
  endpointSelector: {matchLabels: {app: web}}
  ingress:
    - fromEntities: [world]
      toPorts: [{ports: [{port: "443", protocol: TCP}]}]
"#;

/// A clusterwide policy named `name` selecting `app: web`, with `rules`
/// (YAML lines of its spec, indented by two spaces).
fn web_ccnp(name: &str, rules: &str) -> String {
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumClusterwideNetworkPolicy\nmetadata: {{name: {name}}}\nspec:\n  endpointSelector: {{matchLabels: {{app: web}}}}\n{rules}"
    )
}

/// Precedence of a priority-0 plain allow (docs/semantics.md §4.3).
const ALLOW_PRECEDENCE: u32 = 0xFFFF_FF01;

fn inventory(allow_localhost: Option<&str>) -> Inventory {
    let mut text = String::from("kind: Inventory\n");
    if let Some(value) = allow_localhost {
        text.push_str(&format!("allowLocalhost: {value}\n"));
    }
    text.push_str(ENDPOINTS);
    let mut inventory = Inventory::new();
    inventory.add_text("inventory.yaml", &text).unwrap();
    inventory.finish().unwrap();
    inventory
}

fn load(policies: &str) -> LoadOutcome {
    let outcome = load_str("policy.yaml", policies, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    outcome
}

fn compile_with(allow_localhost: Option<&str>, policies: &str) -> Compiled {
    let outcome = load(policies);
    compile(
        &PolicyInput::from_outcome(&outcome),
        &inventory(allow_localhost),
    )
    .unwrap()
}

/// The entry at `localHostKey` of an endpoint, if any.
fn localhost_entry(compiled: &Compiled, endpoint: &str) -> Option<EntryOut> {
    compiled
        .endpoint(endpoint)
        .unwrap()
        .entries()
        .into_iter()
        .find(|e| {
            e.direction == "ingress"
                && e.identity == 1
                && e.proto == "ANY"
                && e.port_prefix_len == 0
        })
}

fn localhost_origin(compiled: &Compiled) -> Option<u32> {
    compiled
        .origins
        .iter()
        .find(|o| o.is_synthetic() && o.name == "allow-localhost-ingress")
        .map(|o| o.id)
}

fn tcp_flow(compiled: &Compiled, from: &str, to: &str, port: u16) -> Flow {
    Flow {
        from: Peer::parse(from, compiled).unwrap(),
        to: Peer::parse(to, compiled).unwrap(),
        proto: proto::TCP,
        port,
        family: None,
    }
}

fn verdict(compiled: &Compiled, from: &str, to: &str, port: u16) -> FlowVerdict {
    evaluate(compiled, &tcp_flow(compiled, from, to, port)).verdict
}

#[test]
fn inventory_reads_allow_localhost_and_defaults_to_auto_config_go() {
    assert_eq!(inventory(None).allow_localhost, AllowLocalhost::Auto);
    assert_eq!(
        inventory(Some("auto")).allow_localhost,
        AllowLocalhost::Auto
    );
    assert_eq!(
        inventory(Some("always")).allow_localhost,
        AllowLocalhost::Always
    );
    assert_eq!(
        inventory(Some("policy")).allow_localhost,
        AllowLocalhost::Policy
    );
    let mut bad = Inventory::new();
    let error = bad
        .add_text("bad.yaml", "kind: Inventory\nallowLocalhost: sometimes\n")
        .expect_err("an unknown mode is an error");
    assert!(error.to_string().contains("bad.yaml"), "{error}");
}

#[test]
fn auto_pod_gets_localhost_key_as_l3_priority_zero_allow_mapstate_go() {
    let compiled = compile_with(None, WEB_POLICY);
    let origin = localhost_origin(&compiled).expect("synthetic origin");
    let entry = localhost_entry(&compiled, "prod/web").expect("localhost entry");
    assert_eq!(entry.verdict, "allow");
    assert_eq!(entry.precedence, ALLOW_PRECEDENCE);
    assert_eq!((entry.port, entry.end_port), (0, 65535));
    assert_eq!(entry.proxy_port, 0);
    assert_eq!((entry.auth_type, entry.auth_explicit), (0, false));
    assert_eq!(entry.cookie, 0);
    assert_eq!(entry.origins, vec![origin]);
    // The origin comes after the policy's, so policy origin ids do not move.
    assert_eq!(origin as usize, compiled.origins.len() - 1);
    // Only identity 1 gains an entry: the rest is the policy's.
    let web = compiled.endpoint("prod/web").unwrap().entries();
    assert!(
        web.iter()
            .filter(|e| e.identity == 1)
            .all(|e| e.origins == vec![origin])
    );
}

#[test]
fn auto_vm_outside_kubernetes_gets_no_localhost_key_daemon_go() {
    let compiled = compile_with(None, WEB_POLICY);
    assert!(localhost_entry(&compiled, "vm-web").is_none());
    assert_eq!(verdict(&compiled, "host", "vm-web", 22), FlowVerdict::Deny);
    assert_eq!(
        verdict(&compiled, "host", "prod/web", 22),
        FlowVerdict::Allow
    );
}

#[test]
fn always_covers_vms_but_never_the_host_endpoint_resolve_go() {
    let compiled = compile_with(Some("always"), WEB_POLICY);
    assert!(localhost_entry(&compiled, "vm-web").is_some());
    assert!(localhost_entry(&compiled, "prod/web").is_some());
    // DistillPolicy: `if !policyOwner.IsHost()`.
    let node = compiled.endpoint("node").unwrap();
    assert_eq!(node.identity, 1);
    assert!(localhost_entry(&compiled, "node").is_none());
    assert!(node.entries().iter().all(|e| e.identity != 1));
}

#[test]
fn inserted_whether_or_not_ingress_is_enforced_resolve_go() {
    let compiled = compile_with(None, WEB_POLICY);
    let quiet = compiled.endpoint("prod/quiet").unwrap();
    assert!(!quiet.enforcement.ingress);
    let entry = localhost_entry(&compiled, "prod/quiet").expect("inserted after allow-all");
    assert_eq!(entry.precedence, ALLOW_PRECEDENCE);
    // Next to the allow-all key, not merged into it.
    assert!(
        quiet
            .entries()
            .iter()
            .any(|e| e.direction == "ingress" && e.identity == 0 && e.proto == "ANY")
    );
}

#[test]
fn policy_mode_adds_nothing_and_no_origin_config_go() {
    let compiled = compile_with(Some("policy"), WEB_POLICY);
    assert!(localhost_origin(&compiled).is_none());
    for endpoint in ["prod/web", "prod/quiet", "vm-web", "node"] {
        assert!(localhost_entry(&compiled, endpoint).is_none(), "{endpoint}");
    }
    assert_eq!(
        verdict(&compiled, "host", "prod/web", 22),
        FlowVerdict::Deny
    );
}

#[test]
fn covering_host_deny_bails_the_localhost_allow_insert_with_changes() {
    let compiled = compile_with(
        None,
        &web_ccnp("no-host", "  ingressDeny:\n    - fromEntities: [host]\n"),
    );
    let entry = localhost_entry(&compiled, "prod/web").expect("the deny's key");
    assert_eq!(entry.verdict, "deny");
    assert_eq!(entry.precedence, u32::MAX);
    let origin = localhost_origin(&compiled).unwrap();
    assert!(!entry.origins.contains(&origin), "the allow was bailed out");
    assert_eq!(
        verdict(&compiled, "host", "prod/web", 80),
        FlowVerdict::Deny
    );
}

#[test]
fn narrower_host_deny_stays_below_the_l3_allow_insert_with_changes() {
    let compiled = compile_with(
        None,
        &web_ccnp(
            "no-ssh-from-host",
            "  ingressDeny:\n    - fromEntities: [host]\n      toPorts: [{ports: [{port: \"22\", protocol: TCP}]}]\n",
        ),
    );
    assert!(localhost_entry(&compiled, "prod/web").is_some());
    assert_eq!(
        verdict(&compiled, "host", "prod/web", 22),
        FlowVerdict::Deny
    );
    assert_eq!(
        verdict(&compiled, "host", "prod/web", 80),
        FlowVerdict::Allow
    );
}

#[test]
fn explicit_host_allow_merges_origins_like_derived_from_rules() {
    let compiled = compile_with(
        None,
        &web_ccnp("host-allowed", "  ingress:\n    - fromEntities: [host]\n"),
    );
    let entry = localhost_entry(&compiled, "prod/web").unwrap();
    let origin = localhost_origin(&compiled).unwrap();
    assert_eq!(entry.origins.len(), 2);
    assert!(entry.origins.contains(&origin));
}

#[test]
fn explanation_names_allow_localhost_and_the_way_out() {
    let compiled = compile_with(None, WEB_POLICY);
    let flow = tcp_flow(&compiled, "host", "prod/web", 22);
    let text = explain(&compiled, &evaluate(&compiled, &flow));
    assert!(text.contains("allow-localhost"), "{text}");
    assert!(text.contains("allowLocalhost: policy"), "{text}");
    assert!(text.contains("Kubernetes mode"), "{text}");
}

#[test]
fn incremental_session_follows_a_changed_option() {
    let outcome = load(WEB_POLICY);
    let inputs = PolicyInput::from_outcome(&outcome);
    let mut session = IncrementalCompiler::new();
    let (first, _) = session
        .compile(&inputs, &inventory(Some("always")))
        .unwrap();
    assert!(localhost_entry(&first, "vm-web").is_some());
    let (second, _) = session.compile(&inputs, &inventory(None)).unwrap();
    assert!(localhost_entry(&second, "vm-web").is_none());
    assert_eq!(
        second.to_json(),
        compile(&inputs, &inventory(None)).unwrap().to_json()
    );
    let (third, _) = session
        .compile(&inputs, &inventory(Some("policy")))
        .unwrap();
    assert!(localhost_entry(&third, "prod/web").is_none());
    assert_eq!(
        third.to_json(),
        compile(&inputs, &inventory(Some("policy")))
            .unwrap()
            .to_json()
    );
}

#[test]
fn host_on_an_l7_port_is_redirected_and_the_note_says_why_l4_go_host_wildcard_l7() {
    let compiled = compile_with(
        None,
        &web_ccnp(
            "web-http",
            "  ingress:\n    - toPorts:\n        - ports: [{port: \"80\", protocol: TCP}]\n          rules: {http: [{method: GET, path: /good}]}\n",
        ),
    );
    // The identity-0 redirect (0xFFFFFF9A) outranks the host's L3 allow.
    assert_eq!(
        verdict(&compiled, "host", "prod/web", 80),
        FlowVerdict::Redirect
    );
    assert_eq!(
        verdict(&compiled, "host", "prod/web", 81),
        FlowVerdict::Allow
    );
    let text = explain(
        &compiled,
        &evaluate(&compiled, &tcp_flow(&compiled, "host", "prod/web", 80)),
    );
    assert!(
        text.contains("proxy lets every request from the host"),
        "{text}"
    );
    // No localhost entry outside Kubernetes: redirected, and no note.
    assert_eq!(
        verdict(&compiled, "host", "vm-web", 80),
        FlowVerdict::Redirect
    );
    let text = explain(
        &compiled,
        &evaluate(&compiled, &tcp_flow(&compiled, "host", "vm-web", 80)),
    );
    assert!(!text.contains("allow-localhost"), "{text}");
}

#[test]
fn reserved_endpoints_follow_the_inventory_daemon_go() {
    let outcome = load(WEB_POLICY);
    let inputs = PolicyInput::from_outcome(&outcome);
    let compile_beside_health = |other: &str| {
        let mut inventory = Inventory::new();
        let text = format!(
            "kind: Inventory\nendpoints:\n  - {{name: health, labels: {{\"reserved:health\": \"\"}}}}\n  - {other}\n"
        );
        inventory.add_text("inv.yaml", &text).unwrap();
        inventory.finish().unwrap();
        compile(&inputs, &inventory).unwrap()
    };
    let with_pods = compile_beside_health("{name: web, namespace: prod, labels: {app: web}}");
    assert!(localhost_entry(&with_pods, "health").is_some());
    let vms_only = compile_beside_health("{name: vm, labels: {app: web}}");
    assert!(localhost_entry(&vms_only, "health").is_none());
    assert!(localhost_entry(&vms_only, "vm").is_none());
}

#[test]
fn cilium_identity_dumps_keep_auto_and_their_pods_get_the_entry_daemon_go() {
    let dump = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/inventories/cilium-identities.json");
    let inventory = Inventory::load(&dump).unwrap();
    assert_eq!(inventory.allow_localhost, AllowLocalhost::Auto);
    let outcome = load(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: api, namespace: prod}\nspec:\n  endpointSelector: {matchLabels: {app: api}}\n  ingress: [{fromEntities: [world]}]\n",
    );
    let compiled = compile(&PolicyInput::from_outcome(&outcome), &inventory).unwrap();
    let api = compiled
        .endpoints
        .iter()
        .find(|e| e.identity == 31337)
        .expect("identity 31337 of the dump");
    assert!(api.enforcement.ingress);
    assert!(
        api.entries()
            .iter()
            .any(|e| e.direction == "ingress" && e.identity == 1 && e.proto == "ANY")
    );
}
