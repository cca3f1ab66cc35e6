//! `CiliumNetworkPolicy` / `CiliumClusterwideNetworkPolicy` validation:
//! `Rule.Validate` and helpers (`pkg/policy/api/rule_validation.go`,
//! `fqdn.go`, `http.go`, `l7.go`, `icmp.go`), the resource parse
//! (`pkg/k8s/apis/cilium.io/v2/cnp_types.go`) and the CRD schema
//! (`ciliumnetworkpolicies.yaml`). Cilium stops at the first error of a rule;
//! porin reports every one, which changes no verdict.

mod fqdn;
mod icmp;
mod l7;
mod list;
mod peers;
mod ports;

use self::fqdn::validate_fqdns;
use self::icmp::validate_icmps;
use self::l7::validate_host_l7;
use self::peers::validate_peers;
use self::ports::{validate_port_rule, validate_ports};
use crate::codes;
use crate::model::{ObjectMeta, Rule, RuleItem, ToPorts};
use crate::route::Route;
use crate::validate::Findings;
use crate::validate::selector::{SelectorKind, selects_reserved_init, validate_selector};
use crate::validate::text::is_dns1123_subdomain;

/// Which resource the rules belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Namespaced,
    Clusterwide,
}

impl Scope {
    fn kind(self) -> &'static str {
        match self {
            Scope::Namespaced => "CiliumNetworkPolicy",
            Scope::Clusterwide => "CiliumClusterwideNetworkPolicy",
        }
    }
}

/// Validates a CNP/CCNP: metadata, `spec`/`specs`, every rule.
pub(crate) fn validate_cilium_policy(
    findings: &mut Findings,
    scope: Scope,
    metadata: &ObjectMeta,
    spec: Option<&Rule>,
    specs: Option<&Vec<Rule>>,
) {
    validate_metadata(findings, scope.kind(), metadata, false);
    if spec.is_none() && specs.is_none() {
        // cnp_types.go Parse: ErrEmptyCNP / ErrEmptyCCNP.
        findings
            .report(
                codes::EMPTY_POLICY,
                Route::root(),
                format!("Invalid {} spec(s): empty policy", scope.kind()),
            )
            .help("add a `spec` (one rule) or `specs` (a list of rules)");
    }
    if let Some(rule) = spec {
        validate_rule(findings, scope, &Route::root().key("spec"), rule);
    }
    for (index, rule) in specs.into_iter().flatten().enumerate() {
        validate_rule(
            findings,
            scope,
            &Route::root().key("specs").index(index),
            rule,
        );
    }
}

/// `metadata`: name required (cnp_types.go "must have name"; NetworkPolicy:
/// API server), the namespace a DNS label, and for Kubernetes-typed objects
/// the name a DNS subdomain.
pub(crate) fn validate_metadata(
    findings: &mut Findings,
    kind: &str,
    metadata: &ObjectMeta,
    dns_name: bool,
) {
    // Made only for a finding (most objects have none).
    let meta = || Route::root().key("metadata");
    match metadata.name.as_deref() {
        None | Some("") => {
            findings
                .report(
                    codes::MISSING_NAME,
                    meta().key("name"),
                    format!("{kind} must have name"),
                )
                .help("set `metadata.name`");
        }
        Some(name) if dns_name && !is_dns1123_subdomain(name) => {
            findings.report(
                codes::PATTERN,
                meta().key("name"),
                format!("metadata.name `{name}` must be a lower-case RFC 1123 subdomain (a-z, 0-9, `-`, `.`; at most 253)"),
            );
        }
        Some(name) if name == "." || name == ".." || name.contains(['/', '%']) => {
            findings.report(
                codes::PATTERN,
                meta().key("name"),
                format!("metadata.name `{name}` may not be `.` or `..` or contain `/` or `%`"),
            );
        }
        Some(_) => {}
    }
    if let Some(namespace) = metadata.namespace.as_deref()
        && !super::text::is_dns1123_label(namespace)
    {
        findings.report(
            codes::PATTERN,
            meta().key("namespace"),
            format!("metadata.namespace `{namespace}` must be a lower-case RFC 1123 label (a-z, 0-9, `-`; at most 63)"),
        );
    }
}

fn validate_rule(findings: &mut Findings, scope: Scope, at: &Route, rule: &Rule) {
    // Rule.Validate, rule_validation.go, in its order.
    let sections = rule.sections();
    if sections.iter().all(|(_, items)| items.is_empty()) {
        findings
            .report(
                codes::NO_DIRECTION,
                at.clone(),
                "rule must have at least one of Ingress, IngressDeny, Egress, EgressDeny",
            )
            .note("enableDefaultDeny alone is rejected too (cilium/cilium#35558); `ingress: []` counts as none")
            .help("add an `ingress`, `ingressDeny`, `egress` or `egressDeny` list with at least one item");
    }
    match (&rule.endpoint_selector, &rule.node_selector) {
        (None, None) => {
            findings
                .report(codes::SUBJECT_SELECTOR, at.clone(), "rule must have one of EndpointSelector or NodeSelector")
                .help("add `endpointSelector: {}` to select every endpoint (in the namespace, for a CNP)");
        }
        (Some(_), Some(_)) => {
            findings
                .report(
                    codes::SUBJECT_SELECTOR,
                    at.key("nodeSelector"),
                    "rule cannot have both EndpointSelector and NodeSelector",
                )
                .at_key()
                .help("split the rule: one for endpoints, one (in a CiliumClusterwideNetworkPolicy) for nodes");
        }
        _ => {}
    }
    if let Some(selector) = &rule.endpoint_selector {
        validate_selector(
            findings,
            &|| at.key("endpointSelector"),
            selector,
            SelectorKind::Cilium,
        );
        if scope == Scope::Namespaced && selects_reserved_init(selector) {
            // pkg/k8s/apis/cilium.io/v2/validator: ErrInitLabelInCNP.
            findings
                .report(
                    codes::RESERVED_INIT_CNP,
                    at.key("endpointSelector"),
                    "CiliumNetworkPolicy incorrectly matches reserved:init label",
                )
                .help("select init endpoints from a CiliumClusterwideNetworkPolicy");
        }
    }
    let host = rule.node_selector.is_some();
    if let Some(selector) = &rule.node_selector {
        if scope == Scope::Namespaced {
            // cnp_types.go Parse.
            findings
                .report(
                    codes::NODE_SELECTOR_IN_CNP,
                    at.key("nodeSelector"),
                    "Invalid CiliumNetworkPolicy spec: rule cannot have NodeSelector",
                )
                .at_key()
                .help("host policies (nodeSelector) must be CiliumClusterwideNetworkPolicy");
        }
        validate_selector(
            findings,
            &|| at.key("nodeSelector"),
            selector,
            SelectorKind::Cilium,
        );
    }
    for (section, items) in sections {
        for (index, item) in items.iter().enumerate() {
            validate_item(findings, &at.key(section.name()).index(index), item, host);
        }
    }
    if let Some(value) = rule.log.as_ref().and_then(|l| l.value.as_deref()) {
        validate_log(findings, &at.key("log").key("value"), value);
    }
}

/// CRD `log.value`: `maxLength: 32`, `pattern: ^\PC*$` (no control, format,
/// surrogate or private-use characters).
fn validate_log(findings: &mut Findings, at: &Route, value: &str) {
    let count = value.chars().count();
    if count > 32 {
        findings.report(
            codes::LOG,
            at.clone(),
            format!("log.value has {count} characters; at most 32 are allowed"),
        );
    }
    let is_other = |c: char| {
        c.is_control()
            || matches!(u32::from(c), 0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF)
    };
    if value.chars().any(is_other) {
        findings.report(
            codes::LOG,
            at.clone(),
            "log.value may contain only printable characters (CRD pattern ^\\PC*$)",
        );
    }
}

/// One item of any section. Fields the item type lacks are `None` in the
/// view, so their checks find nothing.
pub(crate) fn validate_item(findings: &mut Findings, at: &Route, item: &RuleItem<'_>, host: bool) {
    validate_peers(findings, at, item);
    validate_fqdns(findings, at, item.fqdns);
    obsolete_auth(findings, at, item.auth);
    if host && let Some(ToPorts::Allow(port_rules)) = item.to_ports {
        validate_host_l7(findings, at, item.section, port_rules);
    }
    validate_icmps(findings, at, item.icmps, item.has_ports());
    match item.to_ports {
        Some(ToPorts::Allow(port_rules)) => {
            for (index, port_rule) in port_rules.iter().enumerate() {
                validate_port_rule(
                    findings,
                    &|| at.key("toPorts").index(index),
                    port_rule,
                    item.section.is_ingress(),
                );
            }
        }
        Some(ToPorts::Deny(port_rules)) => {
            for (index, port_rule) in port_rules.iter().enumerate() {
                validate_ports(
                    findings,
                    &|| at.key("toPorts").index(index),
                    port_rule.ports.as_ref(),
                    false,
                );
            }
        }
        None => {}
    }
}

fn obsolete_auth(findings: &mut Findings, at: &Route, auth: Option<&serde_json::Value>) {
    if auth.is_some() {
        findings
            .report(codes::OBSOLETE_FIELD, at.key("auth"),
                "`auth` is not a field of Cilium 1.19 policies; the API server prunes it and it has no effect")

            .at_key()
            .help("use `authentication: {mode: required}`");
    }
}
