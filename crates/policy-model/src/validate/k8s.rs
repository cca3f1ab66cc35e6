//! Kubernetes `NetworkPolicy` validation as the API server does it
//! (`pkg/apis/networking/validation/validation.go` `ValidateNetworkPolicySpec`),
//! plus the single check Cilium adds (protocol, `pkg/k8s/network_policy.go`,
//! enforced by the model's enum).

use super::Findings;
use super::cilium::validate_metadata;
use super::selector::{SelectorKind, validate_selector};
use super::text::{is_k8s_port_name, parse_prefix};
use crate::codes;
use crate::diagnostic::Severity;
use crate::model::{IntOrString, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use crate::route::Route;

pub(crate) fn validate_network_policy(findings: &mut Findings, policy: &NetworkPolicy) {
    validate_metadata(findings, "NetworkPolicy", &policy.metadata, true);
    let spec_at = Route::root().key("spec");
    let Some(spec) = &policy.spec else {
        findings
            .report(codes::NETWORK_POLICY, Route::root(),
                "NetworkPolicy has no spec: it selects every pod of the namespace and denies all their ingress")
.with_severity(Severity::Warning)
            .help("add a `spec` with a `podSelector`");
        return;
    };
    match &spec.pod_selector {
        Some(selector) => validate_selector(
            findings,
            &|| spec_at.key("podSelector"),
            selector,
            SelectorKind::Kubernetes,
        ),
        None => {
            findings
                .report(codes::NETWORK_POLICY, spec_at.clone(),
                    "spec.podSelector is missing; Kubernetes reads it as `{}`, every pod of the namespace")
.with_severity(Severity::Warning)
                .help("write `podSelector: {}` to say so explicitly");
        }
    }
    if let Some(types) = &spec.policy_types
        && types.len() > 2
    {
        findings.report(
            codes::NETWORK_POLICY,
            spec_at.key("policyTypes"),
            "may not specify more than two policyTypes",
        );
    }
    for (index, rule) in spec.ingress.iter().flatten().enumerate() {
        let at = spec_at.key("ingress").index(index);
        validate_ports(findings, &at, rule.ports.as_ref());
        validate_peers(findings, &at, "from", rule.from.as_ref());
    }
    for (index, rule) in spec.egress.iter().flatten().enumerate() {
        let at = spec_at.key("egress").index(index);
        validate_ports(findings, &at, rule.ports.as_ref());
        validate_peers(findings, &at, "to", rule.to.as_ref());
    }
}

fn validate_ports(findings: &mut Findings, at: &Route, ports: Option<&Vec<NetworkPolicyPort>>) {
    for (index, port) in ports.into_iter().flatten().enumerate() {
        let here = at.key("ports").index(index);
        let number = match &port.port {
            Some(IntOrString::Int(n)) => {
                if !(1..=65535).contains(n) {
                    findings.report(
                        codes::PORT,
                        here.key("port"),
                        format!("port {n} must be between 1 and 65535, inclusive"),
                    );
                }
                Some(*n)
            }
            Some(IntOrString::String(name)) => {
                if !is_k8s_port_name(name) {
                    findings
                        .report(codes::PORT, here.key("port"), format!("`{name}` is not a valid port name"))
                        .help("a port name has 1-15 lower-case letters, digits and inner single dashes, with at least one letter; a number must not be quoted");
                }
                None
            }
            None => None,
        };
        if let Some(end) = port.end_port {
            match (&port.port, number) {
                (None, _) => {
                    findings.report(
                        codes::END_PORT,
                        here.key("endPort"),
                        "endPort may not be specified when port is not specified",
                    );
                }
                (Some(IntOrString::String(_)), _) => {
                    findings.report(
                        codes::END_PORT,
                        here.key("endPort"),
                        "endPort may not be specified when port is non-numeric",
                    );
                }
                (_, Some(start)) if i64::from(end) < start => {
                    findings
                        .report(
                            codes::END_PORT,
                            here.key("endPort"),
                            format!("endPort {end} must be greater than or equal to port {start}"),
                        )
                        .note("the API server enforces endPort >= port for NetworkPolicy");
                }
                _ => {}
            }
            if !(1..=65535).contains(&end) {
                findings.report(
                    codes::END_PORT,
                    here.key("endPort"),
                    format!("endPort {end} must be between 1 and 65535, inclusive"),
                );
            }
        }
    }
}

fn validate_peers(
    findings: &mut Findings,
    at: &Route,
    key: &str,
    peers: Option<&Vec<NetworkPolicyPeer>>,
) {
    for (index, peer) in peers.into_iter().flatten().enumerate() {
        let here = at.key(key).index(index);
        let selectors = peer.pod_selector.is_some() || peer.namespace_selector.is_some();
        if !selectors && peer.ip_block.is_none() {
            findings.report(codes::NETWORK_POLICY, here.clone(), "must specify a peer").help(
                "give a podSelector, a namespaceSelector or an ipBlock (an empty `from`/`to` list means every peer)",
            );
        }
        if selectors && peer.ip_block.is_some() {
            findings
                .report(
                    codes::NETWORK_POLICY,
                    here.key("ipBlock"),
                    "may not specify both podSelector/namespaceSelector and ipBlock",
                )
                .at_key();
        }
        if let Some(selector) = &peer.pod_selector {
            validate_selector(
                findings,
                &|| here.key("podSelector"),
                selector,
                SelectorKind::Kubernetes,
            );
        }
        if let Some(selector) = &peer.namespace_selector {
            validate_selector(
                findings,
                &|| here.key("namespaceSelector"),
                selector,
                SelectorKind::Kubernetes,
            );
        }
        if let Some(block) = &peer.ip_block {
            let block_at = here.key("ipBlock");
            match parse_prefix(&block.cidr) {
                Err(problem) => {
                    findings.report(
                        codes::CIDR,
                        block_at.key("cidr"),
                        format!("invalid CIDR `{}`: {problem}", block.cidr),
                    );
                }
                Ok(cidr) => {
                    for (except_index, except) in block.except.iter().flatten().enumerate() {
                        let except_at = block_at.key("except").index(except_index);
                        match parse_prefix(except) {
                            Err(problem) => {
                                findings.report(
                                    codes::CIDR,
                                    except_at,
                                    format!("invalid CIDR `{except}`: {problem}"),
                                );
                            }
                            Ok(excluded)
                                if !(cidr.contains(excluded.addr) && cidr.len < excluded.len) =>
                            {
                                findings.report(
                                    codes::CIDR_RULE,
                                    except_at,
                                    format!(
                                        "`{except}` must be a strict subset of `cidr` ({})",
                                        block.cidr
                                    ),
                                );
                            }
                            Ok(_) => {}
                        }
                    }
                }
            }
        }
    }
}
