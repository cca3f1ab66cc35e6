//! Deliberate choices where Cilium's behaviour is surprising; each test names
//! the Cilium code it mirrors (docs/semantics.md §2.4, §10).

use porin_model::{LoadLimits, PolicyDocument, PortValue, load_str};

fn cnp(rule: &str) -> String {
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: q, namespace: d}}\nspec:\n  endpointSelector: {{}}\n{rule}"
    )
}

fn ccnp(rule: &str) -> String {
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumClusterwideNetworkPolicy\nmetadata: {{name: q}}\nspec:\n  nodeSelector: {{}}\n{rule}"
    )
}

fn codes(text: &str) -> Vec<&'static str> {
    load_str("q.yaml", text, &LoadLimits::default())
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.code)
        .collect()
}

/// rule_validation.go PortProtocol.Validate: strconv.ParseUint(port, 0, 16),
/// so "010" is octal 8 and "1_000" is 1000 (docs/semantics.md §10.2).
#[test]
fn ports_parse_like_go_parseuint_base_zero() {
    let text = cnp(
        "  ingress:\n  - toPorts: [{ports: [{port: \"010\", protocol: TCP}, {port: \"1_000\", protocol: TCP}]}]\n",
    );
    let outcome = load_str("q.yaml", &text, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:#?}", outcome.diagnostics);
    let PolicyDocument::CiliumNetworkPolicy(policy) = &outcome.documents[0].doc else {
        panic!("a CNP")
    };
    let ingress = policy
        .spec
        .as_ref()
        .and_then(|s| s.ingress.as_ref())
        .expect("ingress");
    let ports = ingress[0]
        .to_ports
        .as_ref()
        .and_then(|p| p[0].ports.as_ref())
        .expect("ports");
    assert_eq!(ports[0].port_value(), Some(PortValue::Number(8)));
    assert_eq!(ports[1].port_value(), Some(PortValue::Number(1000)));
}

/// `0x10` is an IANA service name (it has a letter), so a named port, not 16
/// (comment in rule_validation.go).
#[test]
fn hex_looking_ports_are_names() {
    let text = cnp("  ingress:\n  - toPorts: [{ports: [{port: \"0x10\", protocol: TCP}]}]\n");
    let outcome = load_str("q.yaml", &text, &LoadLimits::default());
    assert!(!outcome.has_errors());
    let PolicyDocument::CiliumNetworkPolicy(policy) = &outcome.documents[0].doc else {
        panic!("a CNP")
    };
    let port = &policy
        .spec
        .as_ref()
        .and_then(|s| s.ingress.as_ref())
        .expect("ingress")[0]
        .to_ports
        .as_ref()
        .expect("toPorts")[0]
        .ports
        .as_ref()
        .expect("ports")[0];
    assert_eq!(port.port_value(), Some(PortValue::Named("0x10".to_owned())));
}

/// CIDRRule.Validate checks `prefix.Contains(except.Addr())` only, so an
/// except wider than its cidr but starting inside it is accepted.
#[test]
fn except_is_checked_by_address_only() {
    let text = cnp("  egress:\n  - toCIDRSet: [{cidr: 10.0.0.0/24, except: [10.0.0.0/16]}]\n");
    assert!(codes(&text).is_empty());
}

/// PortRule.Validate compares the protocol with TCP before Sanitize fills in
/// ANY, so HTTP rules with an omitted protocol are rejected.
#[test]
fn l7_needs_an_explicit_tcp() {
    let text = cnp(
        "  ingress:\n  - toPorts: [{ports: [{port: \"80\"}], rules: {http: [{method: GET}]}}]\n",
    );
    assert_eq!(codes(&text), vec!["PM025"]);
}

/// countL7Rules inserts its keys for any non-IsEmpty L7Rules, so even an empty
/// `http: []` makes a host ingress rule "L7" (IngressRule.Validate).
#[test]
fn host_ingress_rejects_even_empty_l7_lists() {
    let text = ccnp(
        "  ingress:\n  - toPorts: [{ports: [{port: \"80\", protocol: TCP}], rules: {http: []}}]\n",
    );
    assert_eq!(codes(&text), vec!["PM032"]);
}

/// Rule.Validate counts items, not keys: `ingress: []` is no direction.
#[test]
fn empty_direction_lists_do_not_count() {
    assert_eq!(codes(&cnp("  ingress: []\n  egress: []\n")), vec!["PM012"]);
}

/// ICMPField.UnmarshalJSON resolves names per family; a numeric string passes
/// the CRD pattern and IntValue() != 0, so it is accepted as a number.
#[test]
fn icmp_numeric_strings_are_numbers() {
    let text = cnp(
        "  ingress:\n  - icmps: [{fields: [{type: \"8\"}, {family: IPv6, type: EchoRequest}]}]\n",
    );
    let outcome = load_str("q.yaml", &text, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:#?}", outcome.diagnostics);
    let PolicyDocument::CiliumNetworkPolicy(policy) = &outcome.documents[0].doc else {
        panic!("a CNP")
    };
    let fields = policy
        .spec
        .as_ref()
        .and_then(|s| s.ingress.as_ref())
        .expect("ingress")[0]
        .icmps
        .as_ref()
        .expect("icmps")[0]
        .fields
        .clone()
        .expect("fields");
    assert_eq!(fields[0].type_number(), Some(8));
    assert_eq!(fields[1].type_number(), Some(128));
}

/// kubectl's go-yaml reads `yes`/`on` as booleans (YAML 1.1), which a string
/// field then refuses; porin says so instead of silently taking the text.
#[test]
fn yaml_1_1_booleans_are_not_strings() {
    let text = cnp("  ingress:\n  - fromEndpoints: [{matchLabels: {enabled: yes}}]\n");
    assert_eq!(codes(&text), vec!["PM004"]);
}
