//! `ClusterNetworkPolicy` validation: what the API server enforces with
//! network-policy-api's CRD (`config/crd/.../policy.networking.k8s.io_clusternetworkpolicies.yaml`,
//! generated from `apis/v1alpha2/clusternetworkpolicy_types.go` and
//! `apis/v1beta1/...`, the same markers): a DNS-subdomain name; `tier`
//! Admin|Baseline (serde: PM006); `priority` 0..=1000; a subject with
//! exactly one field; at most 25 ingress and 25 egress rules; rule names
//! of at most 100 characters; `from`/`to` with 1..=25 peers of exactly one
//! field each; `protocols` with 1..=25 items of exactly one field, TCP/UDP/SCTP
//! ports 1..=65535 with `start < end` ranges; `networks` 1..=25 CIDRs of at
//! most 43 characters; `domainNames` 1..=25 names matching the CRD pattern;
//! no named port with a networks/nodes/domainNames peer (the egress rule's
//! CEL rule).
//!
//! Beyond the CRD, what Cilium 1.20's `ParseClusterNetworkPolicy`
//! (`pkg/k8s/cluster_network_policy.go`) refuses, which leaves the whole
//! policy unenforced: `domainNames` in a rule whose action is not Accept.
//! Ingress peers have only `namespaces` and `pods` (the ingress peer type
//! defines no other field, so the API server's strict field validation
//! rejects them: PM003).

use crate::codes;
use crate::model::{
    ClusterAction, ClusterNetworkPolicy, ClusterNetworkPolicyPeer, ClusterNetworkPolicyProtocol,
    ClusterPort, LabelSelector, NamespacedPod,
};
use crate::route::Route;
use crate::validate::Findings;
use crate::validate::cilium::validate_metadata;
use crate::validate::selector::{SelectorKind, validate_selector};
use crate::validate::text::parse_prefix;

/// The CRD's `maxItems` for rules, peers, protocols, networks and domain
/// names (`+kubebuilder:validation:MaxItems=25`).
pub const MAX_ITEMS: usize = 25;
/// `spec.priority` maximum (`+kubebuilder:validation:Maximum=1000`).
pub const MAX_PRIORITY: i64 = 1000;
/// A rule name's `MaxLength`.
const MAX_RULE_NAME: usize = 100;
/// A CIDR's `MaxLength`.
const MAX_CIDR: usize = 43;

pub(crate) fn validate_cluster_network_policy(
    findings: &mut Findings,
    policy: &ClusterNetworkPolicy,
) {
    validate_metadata(findings, "ClusterNetworkPolicy", &policy.metadata, true);
    let spec = &policy.spec;
    let at = Route::root().key("spec");
    if !(0..=MAX_PRIORITY).contains(&spec.priority) {
        findings
            .report(
                codes::CLUSTER_NETWORK_POLICY,
                at.key("priority"),
                format!(
                    "spec.priority {} is outside 0..=1000 (ClusterNetworkPolicySpec.Priority, Minimum=0, Maximum=1000)",
                    spec.priority
                ),
            )
            .help("use a priority from 0 (checked first) to 1000");
    }
    let subject = at.key("subject");
    let set =
        usize::from(spec.subject.namespaces.is_some()) + usize::from(spec.subject.pods.is_some());
    if set != 1 {
        findings
            .report(
                codes::CLUSTER_NETWORK_POLICY,
                subject.clone(),
                format!("spec.subject must set exactly one of `namespaces`, `pods` (found {set}; MinProperties=1, MaxProperties=1)"),
            )
            .help("`subject: {namespaces: {}}` selects every pod; `pods: {namespaceSelector: ..., podSelector: ...}` some");
    }
    if let Some(namespaces) = &spec.subject.namespaces {
        selector(findings, &subject.key("namespaces"), namespaces);
    }
    if let Some(pods) = &spec.subject.pods {
        namespaced_pod(findings, &subject.key("pods"), pods);
    }
    for (section, rules) in [
        (
            "ingress",
            spec.ingress.as_ref().map(|rules| {
                rules
                    .iter()
                    .map(|r| (r.name.as_deref(), r.action, &r.from, r.protocols.as_ref()))
                    .collect::<Vec<_>>()
            }),
        ),
        (
            "egress",
            spec.egress.as_ref().map(|rules| {
                rules
                    .iter()
                    .map(|r| (r.name.as_deref(), r.action, &r.to, r.protocols.as_ref()))
                    .collect::<Vec<_>>()
            }),
        ),
    ] {
        let Some(rules) = rules else { continue };
        let list = at.key(section);
        if rules.len() > MAX_ITEMS {
            findings
                .report(
                    codes::CLUSTER_NETWORK_POLICY,
                    list.index(MAX_ITEMS),
                    format!(
                        "spec.{section} has {} rules; the CRD allows at most 25 (MaxItems=25)",
                        rules.len()
                    ),
                )
                .help(
                    "split the rules over several ClusterNetworkPolicies with adjacent priorities",
                );
        }
        let egress = section == "egress";
        for (index, (name, action, peers, protocols)) in rules.into_iter().enumerate() {
            let rule = list.index(index);
            if let Some(name) = name
                && name.chars().count() > MAX_RULE_NAME
            {
                findings.report(
                    codes::CLUSTER_NETWORK_POLICY,
                    rule.key("name"),
                    format!(
                        "spec.{section}[{index}].name has {} characters; at most 100 (MaxLength=100)",
                        name.chars().count()
                    ),
                );
            }
            let peers_key = if egress { "to" } else { "from" };
            validate_peers(
                findings,
                &rule.key(peers_key),
                section,
                index,
                action,
                peers,
                egress,
            );
            let mut named_port = false;
            if let Some(protocols) = protocols {
                named_port = validate_protocols(findings, &rule.key("protocols"), protocols);
            }
            if egress
                && named_port
                && peers
                    .iter()
                    .any(|p| p.networks.is_some() || p.nodes.is_some() || p.domain_names.is_some())
            {
                findings.report(
                    codes::CLUSTER_NETWORK_POLICY,
                    rule.key("protocols"),
                    format!("spec.egress[{index}]: networks/nodes/domainNames peer cannot be set with namedPorts since there are no namedPorts for networks/nodes/domainNames (the CRD's rule)"),
                );
            }
        }
    }
}

fn selector(findings: &mut Findings, route: &Route, selector: &LabelSelector) {
    validate_selector(
        findings,
        &|| route.clone(),
        selector,
        SelectorKind::Kubernetes,
    );
}

fn namespaced_pod(findings: &mut Findings, route: &Route, pods: &NamespacedPod) {
    selector(
        findings,
        &route.key("namespaceSelector"),
        &pods.namespace_selector,
    );
    selector(findings, &route.key("podSelector"), &pods.pod_selector);
}

fn validate_peers(
    findings: &mut Findings,
    route: &Route,
    section: &str,
    index: usize,
    action: ClusterAction,
    peers: &[ClusterNetworkPolicyPeer],
    egress: bool,
) {
    let field = if egress { "to" } else { "from" };
    if peers.is_empty() || peers.len() > MAX_ITEMS {
        findings.report(
            codes::CLUSTER_NETWORK_POLICY,
            route.clone(),
            format!(
                "spec.{section}[{index}].{field} has {} peers; the CRD wants 1 to 25 (MinItems=1, MaxItems=25)",
                peers.len()
            ),
        );
    }
    for (j, peer) in peers.iter().enumerate() {
        let at = route.index(j);
        if peer.fields_set() != 1 {
            let fields = if egress {
                "`namespaces`, `pods`, `nodes`, `networks`, `domainNames`"
            } else {
                "`namespaces`, `pods`"
            };
            findings.report(
                codes::CLUSTER_NETWORK_POLICY,
                at.clone(),
                format!(
                    "spec.{section}[{index}].{field}[{j}] must set exactly one of {fields} (found {}; MinProperties=1, MaxProperties=1)",
                    peer.fields_set()
                ),
            );
        }
        if let Some(namespaces) = &peer.namespaces {
            selector(findings, &at.key("namespaces"), namespaces);
        }
        if let Some(pods) = &peer.pods {
            namespaced_pod(findings, &at.key("pods"), pods);
        }
        if !egress {
            for (name, set) in [
                ("nodes", peer.nodes.is_some()),
                ("networks", peer.networks.is_some()),
                ("domainNames", peer.domain_names.is_some()),
            ] {
                if set {
                    findings
                        .report(
                            codes::UNKNOWN_FIELD,
                            at.key(name),
                            format!("unknown field \"{name}\": an ingress peer of a ClusterNetworkPolicy has only `namespaces` and `pods` (ClusterNetworkPolicyIngressPeer)"),
                        )
                        .at_key();
                }
            }
            continue;
        }
        if let Some(nodes) = &peer.nodes {
            selector(findings, &at.key("nodes"), nodes);
        }
        if let Some(networks) = &peer.networks {
            bounded(findings, &at.key("networks"), "networks", networks.len());
            for (k, cidr) in networks.iter().enumerate() {
                let problem = if cidr.len() > MAX_CIDR {
                    Some(format!(
                        "is longer than {MAX_CIDR} characters (MaxLength=43)"
                    ))
                } else {
                    parse_prefix(cidr)
                        .err()
                        .map(|e| format!("is not a CIDR: {e}"))
                };
                if let Some(problem) = problem {
                    findings
                        .report(
                            codes::CIDR,
                            at.key("networks").index(k),
                            format!("networks[{k}] `{cidr}` {problem} (the CRD's `isCIDR(self)`)"),
                        )
                        .help("use prefix notation, e.g. `10.0.0.0/8` or `fd00::/8`");
                }
            }
        }
        if let Some(names) = &peer.domain_names {
            bounded(findings, &at.key("domainNames"), "domainNames", names.len());
            for (k, name) in names.iter().enumerate() {
                if !is_domain_name(name) {
                    findings
                        .report(
                            codes::FQDN,
                            at.key("domainNames").index(k),
                            format!("domainNames[{k}] `{name}` is not a domain name the CRD accepts (`kubernetes.io`, or `*.kubernetes.io` with `*` only as the whole first label)"),
                        );
                }
            }
            if action != ClusterAction::Accept {
                findings
                    .report(
                        codes::CLUSTER_NETWORK_POLICY,
                        at.key("domainNames"),
                        format!("spec.egress[{index}]: domainNames is only supported for Accept rules, this rule is {} (Cilium 1.20 refuses the whole policy: `egress.to.domainNames is only supported for egress.action=Accept`)", action.name()),
                    )
                    .help("allow the domains with an Accept rule and deny the rest with a later Deny rule");
            }
        }
    }
}

fn bounded(findings: &mut Findings, route: &Route, field: &str, len: usize) {
    if len == 0 || len > MAX_ITEMS {
        findings.report(
            codes::CLUSTER_NETWORK_POLICY,
            route.clone(),
            format!("{field} has {len} items; the CRD wants 1 to 25 (MinItems=1, MaxItems=25)"),
        );
    }
}

/// Validates `protocols`; true if one names a destination port by name.
fn validate_protocols(
    findings: &mut Findings,
    route: &Route,
    protocols: &[ClusterNetworkPolicyProtocol],
) -> bool {
    bounded(findings, route, "protocols", protocols.len());
    let mut named = false;
    for (j, protocol) in protocols.iter().enumerate() {
        let at = route.index(j);
        let ports = [
            ("tcp", protocol.tcp.as_ref()),
            ("udp", protocol.udp.as_ref()),
            ("sctp", protocol.sctp.as_ref()),
        ];
        let set = ports.iter().filter(|(_, p)| p.is_some()).count()
            + usize::from(protocol.destination_named_port.is_some());
        if set != 1 {
            findings.report(
                codes::CLUSTER_NETWORK_POLICY,
                at.clone(),
                format!("protocols[{j}] must set exactly one of `tcp`, `udp`, `sctp`, `destinationNamedPort` (found {set})"),
            );
        }
        if let Some(name) = &protocol.destination_named_port {
            named = true;
            if name.is_empty() {
                findings.report(
                    codes::PORT,
                    at.key("destinationNamedPort"),
                    format!("protocols[{j}].destinationNamedPort is empty"),
                );
            }
        }
        for (proto, port) in ports {
            let Some(port) = port else { continue };
            let port_at = at.key(proto).key("destinationPort");
            match &port.destination_port {
                None => {
                    findings.report(
                        codes::MISSING_FIELD,
                        port_at,
                        format!("protocols[{j}].{proto} needs `destinationPort` (MinProperties=1)"),
                    );
                }
                Some(port) => validate_port(findings, &port_at, port),
            }
        }
    }
    named
}

fn validate_port(findings: &mut Findings, route: &Route, port: &ClusterPort) {
    let set = usize::from(port.number.is_some()) + usize::from(port.range.is_some());
    if set != 1 {
        findings.report(
            codes::CLUSTER_NETWORK_POLICY,
            route.clone(),
            format!("destinationPort must set exactly one of `number`, `range` (found {set})"),
        );
    }
    let valid = |n: i64| (1..=65535).contains(&n);
    if let Some(number) = port.number
        && !valid(number)
    {
        findings.report(
            codes::PORT,
            route.key("number"),
            format!("destinationPort.number {number} is outside 1..=65535"),
        );
    }
    if let Some(range) = &port.range {
        for (name, value) in [("start", range.start), ("end", range.end)] {
            if !valid(value) {
                findings.report(
                    codes::PORT,
                    route.key("range").key(name),
                    format!("destinationPort.range.{name} {value} is outside 1..=65535"),
                );
            }
        }
        if range.start >= range.end {
            findings.report(
                codes::PORT,
                route.key("range"),
                format!(
                    "destinationPort.range {}-{}: Start port must be less than End port (the CRD's rule)",
                    range.start, range.end
                ),
            );
        }
    }
}

/// The CRD's `DomainName` pattern,
/// `^(\*\.)?([a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\.)+[a-zA-Z0-9]([-a-zA-Z0-9_]*[a-zA-Z0-9])?\.?$`:
/// an optional `*.`, then at least two labels, an optional final dot.
pub fn is_domain_name(name: &str) -> bool {
    let rest = name.strip_prefix("*.").unwrap_or(name);
    let rest = rest.strip_suffix('.').unwrap_or(rest);
    let labels: Vec<&str> = rest.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes[0].is_ascii_alphanumeric()
                && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_names_follow_the_crd_pattern() {
        assert!(is_domain_name("kubernetes.io"));
        assert!(is_domain_name("*.kubernetes.io"));
        assert!(is_domain_name("blog.kubernetes.io."));
        assert!(!is_domain_name("localhost"));
        assert!(!is_domain_name("*kubernetes.io"));
        assert!(!is_domain_name("a.*.io"));
        assert!(!is_domain_name("-a.io"));
        assert!(!is_domain_name("**.kubernetes.io"));
    }
}
