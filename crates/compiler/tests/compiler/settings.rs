//! Agent settings (`crate::settings`): read from `settings:` with Cilium's
//! flag names, defaults as Cilium 1.19's, values porin does not model
//! refused with the file and line.

#![allow(clippy::unwrap_used, reason = "tests")]

use porin_compiler::compile::compile;
use porin_compiler::explain::{Flow, FlowVerdict, Peer, evaluate};
use porin_compiler::inventory::{AllowLocalhost, Inventory};
use porin_compiler::resolve::lower::{PolicyInput, lower};
use porin_compiler::resolve::rule::proto;
use porin_compiler::settings::{AgentSettings, SETTINGS};
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

fn inventory(settings: &str) -> Result<Inventory, String> {
    let text = format!(
        "kind: Inventory\ncluster: east\n{settings}\nendpoints:\n  - {{name: a, namespace: default, labels: {{app: a}}, ips: [10.0.0.1]}}\n  - {{name: b, namespace: default, labels: {{app: b}}, ips: [10.0.0.2]}}\n"
    );
    let mut inventory = Inventory::new();
    inventory
        .add_text("inventory.yaml", &text)
        .map_err(|e| e.to_string())?;
    inventory.finish().map_err(|e| e.to_string())?;
    Ok(inventory)
}

#[test]
fn defaults_are_cilium_1_19s() {
    let inventory = inventory("").unwrap();
    assert_eq!(inventory.settings, AgentSettings::default());
    assert!(inventory.settings.policy_default_local_cluster);
    assert!(!inventory.settings.enable_node_selector_labels);
    assert_eq!(inventory.allow_localhost, AllowLocalhost::Auto);
    let flags: Vec<&str> = SETTINGS.iter().map(|s| s.flag).collect();
    assert!(flags.contains(&"policy-cidr-match-mode"));
    assert!(flags.contains(&"enable-extended-ip-protocols"));
}

#[test]
fn allow_localhost_is_a_setting_too_and_must_agree_with_the_old_key() {
    let inventory = inventory("settings: {allow-localhost: policy}").unwrap();
    assert_eq!(inventory.allow_localhost, AllowLocalhost::Policy);
    let refused =
        self::inventory("allowLocalhost: always\nsettings: {allow-localhost: policy}").unwrap_err();
    assert!(refused.contains("disagree"), "{refused}");
}

/// `mesh-auth-mutual-enabled` (pkg/auth/spire/delegate.go): off by
/// default (auth-required flows deny), read from `settings:` when given.
#[test]
fn mutual_authentication_is_a_setting_off_by_default() {
    assert!(!inventory("").unwrap().settings.mesh_auth_mutual_enabled);
    let on = inventory("settings: {mesh-auth-mutual-enabled: true}").unwrap();
    assert!(on.settings.mesh_auth_mutual_enabled);
    let off = inventory("settings: {mesh-auth-mutual-enabled: false}").unwrap();
    assert!(!off.settings.mesh_auth_mutual_enabled);
}

/// `policy-cidr-match-mode` (pkg/option/config.go `PolicyCIDRMatchMode`,
/// a list; Cilium 1.19 knows only `nodes`): off by default, `nodes` as a
/// string, a comma list or a YAML list.
#[test]
fn cidr_match_mode_nodes_is_a_setting_off_by_default() {
    assert!(!inventory("").unwrap().settings.policy_cidr_match_nodes);
    for written in ["nodes", "[nodes]", "\"\""] {
        let on = inventory(&format!("settings: {{policy-cidr-match-mode: {written}}}")).unwrap();
        assert_eq!(
            on.settings.policy_cidr_match_nodes,
            written != "\"\"",
            "{written}"
        );
    }
}

#[test]
fn unmodelled_values_are_refused_with_the_line() {
    for (setting, word) in [
        ("policy-cidr-match-mode: pods", "policy-cidr-match-mode"),
        ("allow-localhost: sometimes", "sometimes"),
        ("no-such-flag: true", "no-such-flag"),
    ] {
        let refused = inventory(&format!("settings:\n  {setting}")).unwrap_err();
        assert!(refused.contains(word), "{refused}");
        assert!(refused.contains("inventory.yaml"), "{refused}");
    }
}

/// `policy-default-local-cluster` (pkg/clustermesh/types/option.go):
/// true pins endpoint selectors to the local cluster; false leaves them
/// open to every cluster of the mesh (Cilium 1.18 and earlier).
#[test]
fn policy_default_local_cluster_pins_endpoint_selectors() {
    let policy = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: b, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: b}}
  ingress:
  - fromEndpoints: [{matchLabels: {app: a}}]
"#;
    let outcome = load_str("policy.yaml", policy, &LoadLimits::default());
    let inputs = PolicyInput::from_outcome(&outcome);
    let peers = |inventory: &Inventory| {
        let lowered = lower(&inputs, inventory);
        lowered
            .rules
            .iter()
            .flat_map(|r| r.peers.iter().flatten())
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let local = inventory("").unwrap();
    assert!(
        peers(&local).contains("io.cilium.k8s.policy.cluster=east"),
        "{}",
        peers(&local)
    );
    let mesh = inventory("settings: {policy-default-local-cluster: false}").unwrap();
    assert!(
        !peers(&mesh).contains("io.cilium.k8s.policy.cluster"),
        "{}",
        peers(&mesh)
    );
    // Both still select the local peer.
    for inventory in [&local, &mesh] {
        let compiled = compile(&inputs, inventory).unwrap();
        let flow = Flow {
            from: Peer::parse("default/a", &compiled).unwrap(),
            to: Peer::parse("default/b", &compiled).unwrap(),
            proto: proto::TCP,
            port: 80,
            family: None,
        };
        assert_eq!(evaluate(&compiled, &flow).verdict, FlowVerdict::Allow);
    }
}

/// docs/policy-tests.md lists every setting as `crate::settings` defines
/// it (the table is `settings::markdown_table()`, pasted).
#[test]
fn the_format_document_lists_every_setting() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/policy-tests.md");
    let text = std::fs::read_to_string(path).unwrap();
    let table = porin_compiler::settings::markdown_table();
    assert!(
        text.contains(&table),
        "docs/policy-tests.md must contain the settings table:\n{table}"
    );
}

/// `enable-extended-ip-protocols` (pkg/option/config.go
/// EnableExtendedIPProtocols): a `protocol: VRRP` port without a number is
/// valid only with it (pkg/policy/api/rule_validation.go
/// PortProtocol.Validate: "port must be specified") and then the L4 filter
/// `0/vrrp` (pkg/policy/rule_test.go TestIPProtocolsWithNoTransportPorts);
/// without it VRRP/IGMP packets never reach policy (DROP_CT_UNKNOWN_PROTO).
#[test]
fn extended_ip_protocols_decide_portless_ports_and_vrrp_packets() {
    let policy = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: vrrp, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: a}}
  egress:
  - toPorts:
    - ports:
      - protocol: VRRP
      - {port: "0", protocol: IGMP}
"#;
    let outcome = load_str("policy.yaml", policy, &LoadLimits::default());
    // The model stage does not know the setting: no finding for the port.
    assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
    assert!(
        outcome.diagnostics.iter().all(|d| d.code != "PM021"),
        "{:?}",
        outcome.diagnostics
    );
    let inputs = PolicyInput::from_outcome(&outcome);
    let flow = |compiled: &porin_compiler::compile::Compiled, protocol: u8| Flow {
        from: Peer::parse("default/a", compiled).unwrap(),
        to: Peer::parse("default/b", compiled).unwrap(),
        proto: protocol,
        port: 0,
        family: None,
    };

    let off = compile(&inputs, &inventory("").unwrap()).unwrap();
    let pc033: Vec<_> = off
        .diagnostics
        .iter()
        .filter(|d| d.code == "PC033")
        .collect();
    assert_eq!(pc033.len(), 1, "{:?}", off.diagnostics);
    assert!(pc033[0].message.contains("enable-extended-ip-protocols"));
    assert!(pc033[0].message.contains("VRRP"));
    let at = pc033[0].primary.as_ref().unwrap();
    assert_eq!((at.file.as_str(), at.line), ("policy.yaml", 10), "{at:?}");
    for protocol in [proto::VRRP, proto::IGMP] {
        let evaluation = evaluate(&off, &flow(&off, protocol));
        assert_eq!(evaluation.verdict, FlowVerdict::Deny, "{protocol}");
        assert!(evaluation.checks.iter().all(|c| c.untracked_protocol));
    }

    let on = compile(
        &inputs,
        &inventory("settings: {enable-extended-ip-protocols: true}").unwrap(),
    )
    .unwrap();
    assert!(
        on.diagnostics.iter().all(|d| d.code != "PC033"),
        "{:?}",
        on.diagnostics
    );
    for protocol in [proto::VRRP, proto::IGMP] {
        let evaluation = evaluate(&on, &flow(&on, protocol));
        assert_eq!(evaluation.verdict, FlowVerdict::Allow, "{protocol}");
        assert!(evaluation.checks.iter().all(|c| !c.untracked_protocol));
    }
    // TCP is not in the policy: default deny, decided by policy.
    let tcp = evaluate(&on, &flow(&on, proto::TCP));
    assert_eq!(tcp.verdict, FlowVerdict::Deny);
    assert!(tcp.checks.iter().all(|c| !c.untracked_protocol));
}

/// PM037 is retired: the model stage does not know the agent's settings,
/// so it no longer warns about fromNodes/toNodes; the compile stage reports
/// PC001 when `enable-node-selector-labels` is off (Cilium refuses the
/// rule, ErrFromToNodesRequiresNodeSelectorOption) and nothing when it is
/// on, so a cluster with the setting sees no false warning.
#[test]
fn from_nodes_is_reported_only_when_the_setting_is_off() {
    let policy = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: nodes, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: a}}
  ingress:
  - fromNodes: [{matchLabels: {type: worker}}]
"#;
    let outcome = load_str("policy.yaml", policy, &LoadLimits::default());
    assert!(
        outcome.diagnostics.iter().all(|d| d.code != "PM037"),
        "{:?}",
        outcome.diagnostics
    );
    let inputs = PolicyInput::from_outcome(&outcome);
    let codes = |settings: &str| {
        compile(&inputs, &inventory(settings).unwrap())
            .unwrap()
            .diagnostics
            .iter()
            .map(|d| d.code.to_string())
            .collect::<Vec<_>>()
    };
    let off = codes("");
    assert!(off.iter().any(|c| c == "PC001"), "{off:?}");
    let on = codes("settings: {enable-node-selector-labels: true}");
    assert!(on.iter().all(|c| c != "PC001" && c != "PM037"), "{on:?}");
}
