//! `toPorts` of a rule item: `PortRule.Validate` and `PortProtocol.Validate`
//! (rule_validation.go), TLS server names.

use super::l7::{l7_is_empty, validate_l7_rules};
use super::list::non_empty;
use crate::codes;
use crate::model::{L4Proto, PortProtocol, PortRule};
use crate::route::Route;
use crate::validate::Findings;
use crate::validate::text::{is_iana_svc_name, parse_go_uint16};

/// `maxPorts` in rule_validation.go (also the CRD's `maxItems`).
pub(super) const MAX_PORTS: usize = 40;

/// `PortRule.Validate(ingress)` (rule_validation.go).
/// `at()` makes the rule's route, only for a finding or a check that
/// keeps one (most port rules have none: a route per port rule and per
/// port, each cloning its parents' keys, was a quarter of validating a
/// one-rule CIDR policy).
pub(super) fn validate_port_rule(
    findings: &mut Findings,
    at: &dyn Fn() -> Route,
    rule: &PortRule,
    ingress: bool,
) {
    let has_dns = rule
        .rules
        .as_ref()
        .is_some_and(|r| non_empty(r.dns.as_ref()));
    let rules_empty = l7_is_empty(rule.rules.as_deref());
    if ingress && has_dns {
        findings
            .report(codes::DNS, at().key("rules").key("dns"), "DNS rules are not allowed on ingress")
            .at_key()
            .help("DNS rules belong in an egress rule towards the DNS server (e.g. kube-dns on port 53)");
    }
    if let Some(names) = &rule.server_names {
        if names.is_empty() {
            findings.report(
                codes::SERVER_NAMES,
                at().key("serverNames"),
                "serverNames must list at least one name (CRD minItems: 1)",
            );
        }
        if !names.is_empty() && !rules_empty && rule.terminating_tls.is_none() {
            findings
                .report(
                    codes::SERVER_NAMES,
                    at().key("serverNames"),
                    "ServerNames are not allowed with L7 rules without TLS termination",
                )
                .at_key()
                .help("add `terminatingTLS`, or move the L7 rules to another port rule");
        }
        for (index, name) in names.iter().enumerate() {
            let here = at().key("serverNames").index(index);
            if name.is_empty() {
                findings.report(
                    codes::SERVER_NAMES,
                    here,
                    "empty server name is not allowed",
                );
            } else if name.len() > 255 || !is_server_name(name) {
                findings.report(
                    codes::SERVER_NAMES,
                    here,
                    format!("server name `{name}` does not match the CRD pattern ^(\\*?\\*\\.)?([-a-zA-Z0-9_]+\\.?)+$ (at most 255 characters)"),
                );
            }
        }
    }
    let have_zero_port = validate_ports(findings, at, rule.ports.as_ref(), has_dns);
    if !rules_empty && !has_dns {
        for (index, port) in rule.ports.iter().flatten().enumerate() {
            if port.protocol != Some(L4Proto::Tcp) {
                let (route, shown) = match port.protocol {
                    Some(protocol) => (
                        at().key("ports").index(index).key("protocol"),
                        protocol.as_str().to_owned(),
                    ),
                    None => (at().key("ports").index(index), String::new()),
                };
                let finding = findings.report(
                    codes::L7,
                    route,
                    format!("L7 rules can only apply to TCP (not {shown}) except for DNS rules"),
                );
                finding.help = Some(
                    "set `protocol: TCP` on every port of a port rule with HTTP/Kafka/L7 rules"
                        .to_owned(),
                );
                if port.protocol.is_none() {
                    finding
                        .notes
                        .push("an omitted protocol is not TCP: it means ANY".to_owned());
                }
            }
        }
    }
    if let Some(listener) = &rule.listener {
        let here = at().key("listener");
        if ingress {
            findings.report(
                codes::LISTENER,
                here.clone(),
                format!("Listener is not allowed on ingress ({})", listener.name),
            );
        }
        if !rules_empty {
            findings.report(
                codes::LISTENER,
                here.clone(),
                format!("Listener is not allowed with L7 rules ({})", listener.name),
            );
        }
        if listener.name.is_empty() {
            findings.report(
                codes::LISTENER,
                here.key("name"),
                "listener.name must not be empty (CRD minLength: 1)",
            );
        }
        if listener.envoy_config.name.is_empty() {
            findings.report(
                codes::LISTENER,
                here.key("envoyConfig").key("name"),
                "listener.envoyConfig.name must not be empty (CRD minLength: 1)",
            );
        }
        if let Some(priority) = listener.priority
            && !(1..=100).contains(&priority)
        {
            findings.report(
                codes::LISTENER,
                here.key("priority"),
                format!("listener.priority {priority} must be 1-100"),
            );
        }
    }
    if !rules_empty {
        if have_zero_port {
            findings
                .report(
                    codes::L7,
                    at().key("rules"),
                    "L7 rules can not be used when a port is 0",
                )
                .at_key()
                .help("name the exact port: L7 redirection needs one");
        }
        if let Some(rules) = &rule.rules {
            validate_l7_rules(findings, &at().key("rules"), rules, rule.ports.as_ref());
        }
    }
}

/// Server names: `^(\*?\*\.)?([-a-zA-Z0-9_]+\.?)+$` (docs/semantics.md §2.2).
pub(super) fn is_server_name(name: &str) -> bool {
    let rest = name
        .strip_prefix("**.")
        .or_else(|| name.strip_prefix("*."))
        .unwrap_or(name);
    !rest.is_empty()
        && !rest.starts_with('.')
        && !rest.contains("..")
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Ports of a port rule: count (`too many ports`) and `PortProtocol.Validate`.
/// Returns whether any port is 0. `at()` makes the rule's route, for a
/// finding only.
pub(super) fn validate_ports(
    findings: &mut Findings,
    at: &dyn Fn() -> Route,
    ports: Option<&Vec<PortProtocol>>,
    has_dns: bool,
) -> bool {
    let Some(ports) = ports else { return false };
    if ports.len() > MAX_PORTS {
        findings
            .report(
                codes::TOO_MANY_PORTS,
                at().key("ports"),
                format!("too many ports, the max is {MAX_PORTS}"),
            )
            .at_key()
            .help("split the ports over several toPorts entries, or use port ranges (endPort)");
    }
    let mut zero = false;
    for (index, port) in ports.iter().enumerate() {
        zero |= validate_port(findings, &|| at().key("ports").index(index), port, has_dns);
    }
    zero
}

/// `PortProtocol.Validate(hasDNSRules)` plus the CRD's endPort range.
pub(super) fn validate_port(
    findings: &mut Findings,
    at: &dyn Fn() -> Route,
    port: &PortProtocol,
    has_dns: bool,
) -> bool {
    if let Some(end) = port.end_port
        && !(0..=65535).contains(&end)
    {
        findings.report(
            codes::END_PORT,
            at().key("endPort"),
            format!("endPort {end} is out of range 0-65535"),
        );
    }
    let value = port.port.as_deref().unwrap_or_default();
    if value.is_empty() && matches!(port.protocol, Some(L4Proto::Vrrp | L4Proto::Igmp)) {
        // `port must be specified` unless the agent runs with
        // enable-extended-ip-protocols (`PortProtocol.Validate`,
        // pkg/policy/api/rule_validation.go), like Cilium's
        // examples/policies/host/allow-extended-protocols.yaml. This stage
        // does not know the agent's settings: the compile stage reports the
        // port (PC033) when the setting is off and compiles it as port 0
        // when it is on.
        return false;
    }
    if value.is_empty() {
        findings
            .report(
                codes::PORT,
                if port.port.is_some() {
                    at().key("port")
                } else {
                    at()
                },
                "port must be specified",
            )
            .help("give a port number (\"0\" for all ports of the protocol) or a port name");
        return false;
    }
    if is_iana_svc_name(value) {
        return false;
    }
    if value != "0" && matches!(port.protocol, Some(L4Proto::Vrrp | L4Proto::Igmp)) {
        findings
            .report(codes::PORT, at().key("port"), "port must be empty or 0")
            .note("VRRP and IGMP have no ports");
        return false;
    }
    match parse_go_uint16(value) {
        Ok(number) => {
            if has_dns && port.end_port.is_some_and(|end| end > i32::from(number)) {
                findings.report(
                    codes::DNS,
                    at().key("endPort"),
                    "DNS rules do not support port ranges",
                );
            }
            number == 0
        }
        Err(problem) => {
            findings
                .report(codes::PORT, at().key("port"), format!("unable to parse port: {problem}"))
                .help("a port is a number 0-65535 or a port name (1-15 letters, digits and inner single dashes, with a letter)");
            false
        }
    }
}
