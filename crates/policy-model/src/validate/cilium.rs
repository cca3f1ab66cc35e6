//! `CiliumNetworkPolicy` / `CiliumClusterwideNetworkPolicy` validation:
//! `Rule.Validate` and helpers (`pkg/policy/api/rule_validation.go`,
//! `fqdn.go`, `http.go`, `l7.go`, `icmp.go`), the resource parse
//! (`pkg/k8s/apis/cilium.io/v2/cnp_types.go`) and the CRD schema
//! (`ciliumnetworkpolicies.yaml`). Cilium stops at the first error of a rule;
//! porin reports every one, which changes no verdict.

use super::Findings;
use super::selector::{SelectorKind, selects_reserved_init, validate_selector};
use super::text::{is_dns1123_subdomain, is_iana_svc_name, parse_go_uint16, parse_prefix};
use crate::codes;
use crate::diagnostic::Severity;
use crate::model::{
    CidrRule, EndpointSelector, FqdnSelector, IcmpFamily, IcmpRule, IntOrString, L4Proto, L7Rules,
    ObjectMeta, PortProtocol, PortRule, PortRuleDns, PortRuleHttp, PortRuleKafka, Rule, RuleItem,
    RuleSection, ToPorts,
};
use crate::registry::CodeInfo;
use crate::route::Route;

/// `maxPorts` in rule_validation.go (also the CRD's `maxItems`).
const MAX_PORTS: usize = 40;
/// `maxICMPFields` in rule_validation.go.
const MAX_ICMP_FIELDS: usize = 40;
/// `MaxFQDNLength` in pkg/fqdn/matchpattern/matchpattern.go.
const MAX_FQDN_LENGTH: usize = 255;

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
    let meta = Route::root().key("metadata");
    match metadata.name.as_deref() {
        None | Some("") => {
            findings
                .report(
                    codes::MISSING_NAME,
                    meta.key("name"),
                    format!("{kind} must have name"),
                )
                .help("set `metadata.name`");
        }
        Some(name) if dns_name && !is_dns1123_subdomain(name) => {
            findings.report(
                codes::PATTERN,
                meta.key("name"),
                format!("metadata.name `{name}` must be a lower-case RFC 1123 subdomain (a-z, 0-9, `-`, `.`; at most 253)"),
            );
        }
        Some(name) if name == "." || name == ".." || name.contains(['/', '%']) => {
            findings.report(
                codes::PATTERN,
                meta.key("name"),
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
            meta.key("namespace"),
            format!("metadata.namespace `{namespace}` must be a lower-case RFC 1123 label (a-z, 0-9, `-`; at most 63)"),
        );
    }
}

fn non_empty<T>(list: Option<&Vec<T>>) -> bool {
    list.is_some_and(|l| !l.is_empty())
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
            &at.key("endpointSelector"),
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
            &at.key("nodeSelector"),
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

/// One L3 peer kind of a rule item, for the mixing check.
struct L3Kind<'a> {
    /// Cilium's name in the message (`FromEndpoints`).
    name: &'static str,
    /// YAML key.
    key: &'a str,
    present: bool,
}

/// `combining %s and %s is not supported yet` (IngressCommonRule.Validate /
/// EgressCommonRule.Validate): one L3 kind per rule item.
fn check_l3_mixing(findings: &mut Findings, at: &Route, kinds: &[L3Kind<'_>]) {
    let mut present = kinds.iter().filter(|k| k.present);
    let Some(first) = present.next() else { return };
    for other in present {
        let finding = findings.report(
            codes::L3_MIXING,
            at.key(other.key),
            format!(
                "combining {} and {} is not supported yet",
                first.name, other.name
            ),
        );
        finding.at_key = true;
        finding
            .related
            .push((at.key(first.key), format!("`{}` is set here", first.key)));
        finding.help = Some(format!(
            "split this item in two: one with `{}`, one with `{}`",
            first.key, other.key
        ));
    }
}

fn validate_endpoint_selectors(
    findings: &mut Findings,
    at: &Route,
    key: &str,
    list: Option<&Vec<EndpointSelector>>,
) {
    for (index, selector) in list.into_iter().flatten().enumerate() {
        validate_selector(
            findings,
            &at.key(key).index(index),
            selector,
            SelectorKind::Cilium,
        );
    }
}

fn nodes_need_flag(
    findings: &mut Findings,
    at: &Route,
    key: &str,
    list: Option<&Vec<EndpointSelector>>,
) {
    if non_empty(list) {
        findings
            .report(codes::NODES_FLAG, at.key(key),
                "FromNodes/ToNodes rules can only be applied when the \"enable-node-selector-labels\" flag is set")

            .at_key()
            .note("the flag defaults to false; without it Cilium rejects this rule")
            .help("make sure the cluster runs with --enable-node-selector-labels=true, or select nodes with `fromEntities: [remote-node, host]`");
    }
}

fn requires_removed<T>(findings: &mut Findings, at: &Route, key: &str, list: Option<&Vec<T>>) {
    if non_empty(list) {
        findings
            .report(codes::REQUIRES_REMOVED, at.key(key), format!("`{key}` was removed in Cilium 1.19"))
            .at_key()
            .note("the CRD keeps the field only with maxItems: 0, so the API server rejects any entry")
            .help("add the required labels to every fromEndpoints/toEndpoints selector instead, or use a deny rule");
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

fn validate_cidrs(findings: &mut Findings, at: &Route, key: &str, list: Option<&Vec<String>>) {
    for (index, cidr) in list.into_iter().flatten().enumerate() {
        validate_cidr(findings, &at.key(key).index(index), cidr);
    }
}

/// `fromCIDR`/`toCIDR` entries: CRD `format: cidr` (prefix notation required;
/// a bare IP is refused at admission, cilium/cilium#32814) plus `CIDR.Validate`.
fn validate_cidr(findings: &mut Findings, at: &Route, cidr: &str) {
    if cidr.is_empty() {
        findings.report(codes::CIDR, at.clone(), "IP must be specified");
        return;
    }
    if let Err(problem) = parse_prefix(cidr) {
        let finding = findings.report(
            codes::CIDR,
            at.clone(),
            format!("unable to parse CIDR: {problem}"),
        );
        if !cidr.contains('/') && cidr.parse::<std::net::IpAddr>().is_ok() {
            finding.message = format!("`{cidr}` is an address, not a CIDR");
            finding.notes.push(
                "the CRD declares `format: cidr`, so the API server rejects a bare IP (since Cilium 1.16)".to_owned(),
            );
            let suffix = if cidr.contains(':') { "/128" } else { "/32" };
            finding.help = Some(format!("write `{cidr}{suffix}`"));
        }
    }
}

fn validate_cidr_rules(
    findings: &mut Findings,
    at: &Route,
    key: &str,
    list: Option<&Vec<CidrRule>>,
) {
    for (index, rule) in list.into_iter().flatten().enumerate() {
        validate_cidr_rule(findings, &at.key(key).index(index), rule);
    }
}

/// `CIDRRule.Validate` (rule_validation.go) plus the CRD's `oneOf` and
/// `cidrGroupRef` pattern.
fn validate_cidr_rule(findings: &mut Findings, at: &Route, rule: &CidrRule) {
    let has_cidr = rule.cidr.as_deref().is_some_and(|c| !c.is_empty());
    let has_ref = rule
        .cidr_group_ref
        .as_deref()
        .is_some_and(|c| !c.is_empty());
    let has_selector = rule.cidr_group_selector.is_some();
    if let Some(selector) = &rule.cidr_group_selector {
        // Validated as a plain Kubernetes selector (ValidateAsK8sLabelSelector).
        let before = findings.list.len();
        validate_selector(
            findings,
            &at.key("cidrGroupSelector"),
            selector,
            SelectorKind::Kubernetes,
        );
        for finding in &mut findings.list[before..] {
            finding.message = format!("failed to sanitize cidrGroupSelector: {}", finding.message);
        }
    }
    if let Some(group) = rule.cidr_group_ref.as_deref()
        && !group.is_empty()
        && !is_dns1123_subdomain(group)
    {
        findings.report(
            codes::PATTERN,
            at.key("cidrGroupRef"),
            format!("cidrGroupRef `{group}` must be a lower-case RFC 1123 subdomain of at most 253 characters"),
        );
    }
    match usize::from(has_cidr) + usize::from(has_ref) + usize::from(has_selector) {
        0 => {
            findings
                .report(
                    codes::CIDR_RULE,
                    at.clone(),
                    "one of cidr, cidrGroupRef, or cidrGroupSelector is required",
                )
                .help("add `cidr: 10.0.0.0/8` (or a cidrGroupRef)");
            return;
        }
        1 => {}
        _ => {
            findings.report(
                codes::CIDR_RULE,
                at.clone(),
                "more than one of cidr, cidrGroupRef, or cidrGroupSelector may not be set",
            );
            return;
        }
    }
    if !has_cidr {
        if non_empty(rule.except.as_ref()) {
            findings
                .report(
                    codes::CIDR_RULE,
                    at.key("except"),
                    "`except` is not supported together with a CIDR group; Cilium ignores it",
                )
                .with_severity(Severity::Warning)
                .at_key()
                .note("the excluded ranges stay allowed");
        }
        return;
    }
    let cidr = rule.cidr.as_deref().unwrap_or_default();
    let prefix = match parse_prefix(cidr) {
        Ok(prefix) => prefix,
        Err(problem) => {
            let finding = findings.report(
                codes::CIDR,
                at.key("cidr"),
                format!("unable to parse CIDRRule \"{cidr}\": {problem}"),
            );
            if !cidr.contains('/') {
                finding.help = Some("use prefix notation, e.g. `192.0.2.1/32`".to_owned());
            }
            return;
        }
    };
    for (index, except) in rule.except.iter().flatten().enumerate() {
        let here = at.key("except").index(index);
        match parse_prefix(except) {
            Err(problem) => {
                findings.report(
                    codes::CIDR_RULE,
                    here,
                    format!("invalid except CIDR: {problem}"),
                );
            }
            Ok(excluded) if !prefix.contains(excluded.addr) => {
                findings
                    .report(
                        codes::CIDR_RULE,
                        here,
                        format!(
                            "allow CIDR prefix {cidr} does not contain exclude CIDR prefix {except}"
                        ),
                    )
                    .help(format!("every `except` entry must lie inside `{cidr}`"));
            }
            Ok(_) => {}
        }
    }
}

fn validate_fqdns(findings: &mut Findings, at: &Route, list: Option<&Vec<FqdnSelector>>) {
    for (index, selector) in list.into_iter().flatten().enumerate() {
        validate_name_or_pattern(
            findings,
            &at.key("toFQDNs").index(index),
            selector.match_name.as_deref(),
            selector.match_pattern.as_deref(),
            codes::FQDN,
        );
    }
}

/// `FQDNSelector.Validate` (fqdn.go, matchpattern.go) and the CRD patterns:
/// matchName `^([-a-zA-Z0-9_]+[.]?)+$`, matchPattern `^([-a-zA-Z0-9_*]+[.]?)+$`,
/// each at most 255 characters; exactly one of the two.
fn validate_name_or_pattern(
    findings: &mut Findings,
    at: &Route,
    name: Option<&str>,
    pattern: Option<&str>,
    code: CodeInfo,
) {
    match (name, pattern) {
        (Some(_), Some(_)) => {
            findings.report(
                code,
                at.clone(),
                "only one of MatchName or MatchPattern is allowed in an FQDNSelector",
            );
        }
        (None, None) => {
            findings.report(
                code,
                at.clone(),
                "one of matchName or matchPattern is required",
            );
        }
        _ => {}
    }
    let dns_shaped = |s: &str, star: bool| {
        !s.is_empty()
            && !s.starts_with('.')
            && !s.contains("..")
            && s.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || (star && c == '*')
            })
    };
    if let Some(name) = name {
        if name.len() > MAX_FQDN_LENGTH {
            findings.report(
                code,
                at.key("matchName"),
                format!("matchName must be at most {MAX_FQDN_LENGTH} characters"),
            );
        } else if !dns_shaped(name, false) {
            findings.report(
                code,
                at.key("matchName"),
                format!("Invalid characters in MatchName: \"{name}\". Only 0-9, a-z, A-Z and ., -, _ characters are allowed"),
            );
        }
    }
    if let Some(pattern) = pattern {
        if pattern.len() > MAX_FQDN_LENGTH {
            findings.report(
                code,
                at.key("matchPattern"),
                format!("Invalid MatchPattern: {pattern:?}. Must be <= {MAX_FQDN_LENGTH} characters long."),
            );
        } else if !dns_shaped(pattern, true) {
            findings.report(
                code,
                at.key("matchPattern"),
                format!("Invalid characters in MatchPattern: \"{pattern}\". Only 0-9, a-z, A-Z and ., -, _ and * characters are allowed"),
            );
        }
    }
}

/// ICMP: `ICMPRule.Validate`, the `ICMPField` JSON unmarshal (type names per
/// family, icmp.go) and the CRD (`type` 0-255 or a name, at most 40 fields).
fn validate_icmps(
    findings: &mut Findings,
    at: &Route,
    icmps: Option<&Vec<IcmpRule>>,
    has_ports: bool,
) {
    let Some(icmps) = icmps else { return };
    if !icmps.is_empty() && has_ports {
        findings
            .report(
                codes::ICMP,
                at.key("icmps"),
                "the ICMPs block may only be present without ToPorts. Define a separate rule to use ToPorts",
            )
            .at_key();
    }
    for (index, rule) in icmps.iter().enumerate() {
        let here = at.key("icmps").index(index);
        let fields = rule.fields.as_deref().unwrap_or_default();
        if fields.len() > MAX_ICMP_FIELDS {
            findings.report(
                codes::ICMP,
                here.key("fields"),
                format!("too many types, the max is {MAX_ICMP_FIELDS}"),
            );
        }
        for (field_index, field) in fields.iter().enumerate() {
            let family = field.family.unwrap_or(IcmpFamily::IPv4);
            let type_at = here.key("fields").index(field_index).key("type");
            match &field.icmp_type {
                IntOrString::Int(n) if !(0..=255).contains(n) => {
                    findings.report(
                        codes::ICMP,
                        type_at,
                        format!("ICMP type {n} is out of range; it must be 0-255"),
                    );
                }
                IntOrString::Int(_) => {}
                IntOrString::String(name) => {
                    if crate::model::icmp_type_number(family, name).is_none() {
                        let family_name = match family {
                            IcmpFamily::IPv4 => "IPv4",
                            IcmpFamily::IPv6 => "IPv6",
                        };
                        findings
                            .report(
                                codes::ICMP,
                                type_at,
                                format!("ICMP type {name} not found in {family_name}"),
                            )
                            .help(format!(
                                "use a number 0-255 or one of: {}",
                                crate::model::icmp_type_names(family).join(", ")
                            ));
                    }
                }
            }
        }
    }
}

/// The L3 kinds of an item in the order of Cilium's mixing check:
/// `IngressCommonRule.Validate` (`pkg/policy/api/ingress.go`) and
/// `EgressCommonRule.Validate` (`pkg/policy/api/egress.go`) test them in
/// different orders, which decides which field a message blames. A kind the
/// item type lacks (`toFQDNs` of a deny rule) is never present, so it cannot
/// take part in a mixing error.
fn l3_kinds(item: &RuleItem<'_>) -> Vec<L3Kind<'static>> {
    let kind = |name, key, present| L3Kind { name, key, present };
    if item.section.is_ingress() {
        vec![
            kind("FromEndpoints", "fromEndpoints", non_empty(item.endpoints)),
            kind("FromCIDR", "fromCIDR", non_empty(item.cidr)),
            kind("FromCIDRSet", "fromCIDRSet", non_empty(item.cidr_set)),
            kind("FromEntities", "fromEntities", non_empty(item.entities)),
            kind("FromNodes", "fromNodes", non_empty(item.nodes)),
            kind("FromGroups", "fromGroups", non_empty(item.groups)),
        ]
    } else {
        vec![
            kind("ToCIDR", "toCIDR", non_empty(item.cidr)),
            kind("ToCIDRSet", "toCIDRSet", non_empty(item.cidr_set)),
            kind("ToEndpoints", "toEndpoints", non_empty(item.endpoints)),
            kind("ToEntities", "toEntities", non_empty(item.entities)),
            kind("ToServices", "toServices", non_empty(item.services)),
            kind("ToFQDNs", "toFQDNs", non_empty(item.fqdns)),
            kind("ToGroups", "toGroups", non_empty(item.groups)),
            kind("ToNodes", "toNodes", non_empty(item.nodes)),
        ]
    }
}

/// The peer fields every section shares (Cilium's `IngressCommonRule` /
/// `EgressCommonRule`), checked in the same order for allow and deny items.
fn validate_peers(findings: &mut Findings, at: &Route, item: &RuleItem<'_>) {
    check_l3_mixing(findings, at, &l3_kinds(item));
    let from = item.section.peer_prefix();
    let key = |field: &str| format!("{from}{field}");
    requires_removed(findings, at, &key("Requires"), item.requires);
    nodes_need_flag(findings, at, &key("Nodes"), item.nodes);
    validate_endpoint_selectors(findings, at, &key("Endpoints"), item.endpoints);
    validate_endpoint_selectors(findings, at, &key("Nodes"), item.nodes);
    validate_cidrs(findings, at, &key("CIDR"), item.cidr);
    validate_cidr_rules(findings, at, &key("CIDRSet"), item.cidr_set);
    validate_services(findings, at, item.services);
}

/// One item of any section. Fields the item type lacks are `None` in the
/// view, so their checks find nothing.
fn validate_item(findings: &mut Findings, at: &Route, item: &RuleItem<'_>, host: bool) {
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
                let at = at.key("toPorts").index(index);
                validate_port_rule(findings, &at, port_rule, item.section.is_ingress());
            }
        }
        Some(ToPorts::Deny(port_rules)) => {
            for (index, port_rule) in port_rules.iter().enumerate() {
                let at = at.key("toPorts").index(index);
                validate_ports(findings, &at, port_rule.ports.as_ref(), false);
            }
        }
        None => {}
    }
}

/// L7 on a host policy (a rule with a nodeSelector): `IngressRule.Validate`
/// refuses any L7 on host ingress, `EgressRule.Validate` Kafka and HTTP on
/// host egress.
fn validate_host_l7(
    findings: &mut Findings,
    at: &Route,
    section: RuleSection,
    port_rules: &[PortRule],
) {
    if section.is_ingress() {
        if has_l7(port_rules) {
            findings
                .report(
                    codes::HOST_L7,
                    at.key("toPorts"),
                    "L7 policy is not supported on host ingress yet",
                )
                .at_key()
                .note("this rule has a nodeSelector, so it is a host policy");
        }
        return;
    }
    for (index, port_rule) in port_rules.iter().enumerate() {
        let Some(rules) = &port_rule.rules else {
            continue;
        };
        for (present, name, key) in [
            (non_empty(rules.http.as_ref()), "HTTP", "http"),
            (non_empty(rules.kafka.as_ref()), "Kafka", "kafka"),
        ] {
            if present {
                findings
                    .report(
                        codes::HOST_L7,
                        at.key("toPorts").index(index).key("rules").key(key),
                        format!("L7 protocol {name} is not supported on host egress yet"),
                    )
                    .at_key()
                    .note("this rule has a nodeSelector, so it is a host policy");
            }
        }
    }
}

fn validate_services(
    findings: &mut Findings,
    at: &Route,
    services: Option<&Vec<crate::model::Service>>,
) {
    for (index, service) in services.into_iter().flatten().enumerate() {
        if let Some(selector) = &service.k8s_service_selector {
            validate_selector(
                findings,
                &at.key("toServices")
                    .index(index)
                    .key("k8sServiceSelector")
                    .key("selector"),
                &selector.selector,
                SelectorKind::Kubernetes,
            );
        }
    }
}

/// Whether `countL7Rules` returns a non-empty map: it inserts its keys for
/// every port rule whose L7 rules are not `IsEmpty`, even with zero rules
/// (so `http: []` or an `l7proto` list counts), and `IngressRule.Validate`
/// tests the map's length for host policies.
fn has_l7(port_rules: &[PortRule]) -> bool {
    port_rules.iter().any(|p| !l7_is_empty(p.rules.as_ref()))
}

/// `L7Rules.IsEmpty`: no http/kafka/dns/l7 list at all (an `l7proto` alone is "empty").
fn l7_is_empty(rules: Option<&L7Rules>) -> bool {
    rules.is_none_or(|r| r.http.is_none() && r.kafka.is_none() && r.dns.is_none() && r.l7.is_none())
}

/// `PortRule.Validate(ingress)` (rule_validation.go).
fn validate_port_rule(findings: &mut Findings, at: &Route, rule: &PortRule, ingress: bool) {
    let has_dns = rule
        .rules
        .as_ref()
        .is_some_and(|r| non_empty(r.dns.as_ref()));
    let rules_empty = l7_is_empty(rule.rules.as_ref());
    if ingress && has_dns {
        findings
            .report(codes::DNS, at.key("rules").key("dns"), "DNS rules are not allowed on ingress")
            .at_key()
            .help("DNS rules belong in an egress rule towards the DNS server (e.g. kube-dns on port 53)");
    }
    if let Some(names) = &rule.server_names {
        if names.is_empty() {
            findings.report(
                codes::SERVER_NAMES,
                at.key("serverNames"),
                "serverNames must list at least one name (CRD minItems: 1)",
            );
        }
        if !names.is_empty() && !rules_empty && rule.terminating_tls.is_none() {
            findings
                .report(
                    codes::SERVER_NAMES,
                    at.key("serverNames"),
                    "ServerNames are not allowed with L7 rules without TLS termination",
                )
                .at_key()
                .help("add `terminatingTLS`, or move the L7 rules to another port rule");
        }
        for (index, name) in names.iter().enumerate() {
            let here = at.key("serverNames").index(index);
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
                        at.key("ports").index(index).key("protocol"),
                        protocol.as_str().to_owned(),
                    ),
                    None => (at.key("ports").index(index), String::new()),
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
        let here = at.key("listener");
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
                    at.key("rules"),
                    "L7 rules can not be used when a port is 0",
                )
                .at_key()
                .help("name the exact port: L7 redirection needs one");
        }
        if let Some(rules) = &rule.rules {
            validate_l7_rules(findings, &at.key("rules"), rules, rule.ports.as_ref());
        }
    }
}

/// Server names: `^(\*?\*\.)?([-a-zA-Z0-9_]+\.?)+$` (docs/semantics.md §2.2).
fn is_server_name(name: &str) -> bool {
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
/// Returns whether any port is 0.
fn validate_ports(
    findings: &mut Findings,
    at: &Route,
    ports: Option<&Vec<PortProtocol>>,
    has_dns: bool,
) -> bool {
    let Some(ports) = ports else { return false };
    if ports.len() > MAX_PORTS {
        findings
            .report(
                codes::TOO_MANY_PORTS,
                at.key("ports"),
                format!("too many ports, the max is {MAX_PORTS}"),
            )
            .at_key()
            .help("split the ports over several toPorts entries, or use port ranges (endPort)");
    }
    let mut zero = false;
    for (index, port) in ports.iter().enumerate() {
        zero |= validate_port(findings, &at.key("ports").index(index), port, has_dns);
    }
    zero
}

/// `PortProtocol.Validate(hasDNSRules)` plus the CRD's endPort range.
fn validate_port(findings: &mut Findings, at: &Route, port: &PortProtocol, has_dns: bool) -> bool {
    if let Some(end) = port.end_port
        && !(0..=65535).contains(&end)
    {
        findings.report(
            codes::END_PORT,
            at.key("endPort"),
            format!("endPort {end} is out of range 0-65535"),
        );
    }
    let value = port.port.as_deref().unwrap_or_default();
    if value.is_empty() && matches!(port.protocol, Some(L4Proto::Vrrp | L4Proto::Igmp)) {
        // Valid only with enable-extended-ip-protocols (default false), like
        // Cilium's examples/policies/host/allow-extended-protocols.yaml.
        findings
            .report(
                codes::PORT,
                at.clone(),
                "port must be specified unless the \"enable-extended-ip-protocols\" flag is set",
            )
            .with_severity(Severity::Warning)
            .note("the flag defaults to false; without it Cilium rejects this rule");
        return false;
    }
    if value.is_empty() {
        findings
            .report(
                codes::PORT,
                if port.port.is_some() {
                    at.key("port")
                } else {
                    at.clone()
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
            .report(codes::PORT, at.key("port"), "port must be empty or 0")
            .note("VRRP and IGMP have no ports");
        return false;
    }
    match parse_go_uint16(value) {
        Ok(number) => {
            if has_dns && port.end_port.is_some_and(|end| end > i32::from(number)) {
                findings.report(
                    codes::DNS,
                    at.key("endPort"),
                    "DNS rules do not support port ranges",
                );
            }
            number == 0
        }
        Err(problem) => {
            findings
                .report(codes::PORT, at.key("port"), format!("unable to parse port: {problem}"))
                .help("a port is a number 0-65535 or a port name (1-15 letters, digits and inner single dashes, with a letter)");
            false
        }
    }
}

/// `L7Rules.Validate(ports)`.
fn validate_l7_rules(
    findings: &mut Findings,
    at: &Route,
    rules: &L7Rules,
    ports: Option<&Vec<PortProtocol>>,
) {
    let mut kinds = 0usize;
    if let Some(http) = &rules.http {
        kinds += 1;
        for (index, rule) in http.iter().enumerate() {
            validate_http(findings, &at.key("http").index(index), rule);
        }
    }
    if let Some(kafka) = &rules.kafka {
        kinds += 1;
        for (index, rule) in kafka.iter().enumerate() {
            validate_kafka(findings, &at.key("kafka").index(index), rule);
        }
    }
    if let Some(dns) = &rules.dns {
        if ports.is_none_or(Vec::is_empty) {
            findings
                .report(
                    codes::DNS,
                    at.key("dns"),
                    "port 53 must be specified for DNS rules",
                )
                .at_key()
                .help("add `ports: [{port: \"53\", protocol: ANY}]` to this port rule");
        }
        kinds += 1;
        for (index, rule) in dns.iter().enumerate() {
            let PortRuleDns {
                match_name,
                match_pattern,
            } = rule;
            validate_name_or_pattern(
                findings,
                &at.key("dns").index(index),
                match_name.as_deref(),
                match_pattern.as_deref(),
                codes::DNS,
            );
        }
    }
    let l7proto = rules.l7proto.as_deref().unwrap_or_default();
    if rules.l7.is_some() && l7proto.is_empty() {
        findings
            .report(
                codes::L7,
                at.key("l7"),
                "'l7' may only be specified when a 'l7proto' is also specified",
            )
            .at_key();
    }
    if !l7proto.is_empty() {
        kinds += 1;
        for (index, entry) in rules.l7.iter().flatten().enumerate() {
            if entry.contains_key("") {
                findings.report(
                    codes::L7,
                    at.key("l7").index(index),
                    "Empty key not allowed",
                );
            }
        }
    }
    if kinds > 1 {
        findings
            .report(
                codes::L7,
                at.clone(),
                "multiple L7 protocol rule types specified in single rule",
            )
            .help("use one of http, kafka, dns or l7proto per port rule");
    }
}

/// `PortRuleHTTP.Validate` (http.go): path and method are Go regexps; header
/// matches need a name, secrets a name.
fn validate_http(findings: &mut Findings, at: &Route, rule: &PortRuleHttp) {
    for (key, value) in [("path", &rule.path), ("method", &rule.method)] {
        if let Some(pattern) = value
            && let Err(error) = regex_syntax::Parser::new().parse(pattern)
        {
            let detail = error.to_string();
            let last = detail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid regular expression")
                .trim();
            let last = last.strip_prefix("error: ").unwrap_or(last);
            findings.report(
                codes::HTTP,
                at.key(key),
                format!("invalid regular expression `{pattern}`: {last}"),
            );
        }
    }
    for (index, header) in rule.header_matches.iter().flatten().enumerate() {
        let here = at.key("headerMatches").index(index);
        if header.name.is_empty() {
            findings.report(codes::HTTP, here.key("name"), "Header name missing");
        }
        if let Some(secret) = &header.secret
            && secret.name.is_empty()
        {
            findings.report(
                codes::HTTP,
                here.key("secret").key("name"),
                "Secret name missing",
            );
        }
    }
}

/// Kafka API keys accepted by `cilium/proxy` `kafka.PortRule.Sanitize`.
const KAFKA_API_KEYS: &[&str] = &[
    "produce",
    "fetch",
    "offsets",
    "metadata",
    "leaderandisr",
    "stopreplica",
    "updatemetadata",
    "controlledshutdown",
    "offsetcommit",
    "offsetfetch",
    "findcoordinator",
    "joingroup",
    "heartbeat",
    "leavegroup",
    "syncgroup",
    "describegroups",
    "listgroups",
    "saslhandshake",
    "apiversions",
    "createtopics",
    "deletetopics",
    "deleterecords",
    "initproducerid",
    "offsetforleaderepoch",
    "addpartitionstotxn",
    "addoffsetstotxn",
    "endtxn",
    "writetxnmarkers",
    "txnoffsetcommit",
    "describeacls",
    "createacls",
    "deleteacls",
    "describeconfigs",
    "alterconfigs",
];

/// `kafka.PortRule.Sanitize` (cilium/proxy `pkg/policy/api/kafka`): role is
/// produce/consume and excludes apiKey; apiKey is a known key; apiVersion a
/// number; topic at most 255 of `[a-zA-Z0-9._-]`.
fn validate_kafka(findings: &mut Findings, at: &Route, rule: &PortRuleKafka) {
    let role = rule.role.as_deref().unwrap_or_default();
    let api_key = rule.api_key.as_deref().unwrap_or_default();
    if !role.is_empty() && !api_key.is_empty() {
        findings.report(
            codes::L7,
            at.key("role"),
            "Cannot set both Role and APIKey in a Kafka rule",
        );
    }
    if !role.is_empty() && !matches!(role.to_ascii_lowercase().as_str(), "produce" | "consume") {
        findings
            .report(
                codes::L7,
                at.key("role"),
                format!("invalid Kafka role `{role}`"),
            )
            .help("use `produce` or `consume`");
    }
    if !api_key.is_empty() && !KAFKA_API_KEYS.contains(&api_key.to_ascii_lowercase().as_str()) {
        findings.report(
            codes::L7,
            at.key("apiKey"),
            format!("unknown Kafka apiKey `{api_key}`"),
        );
    }
    if let Some(version) = rule.api_version.as_deref()
        && !version.is_empty()
        && version.parse::<i16>().is_err()
    {
        findings.report(
            codes::L7,
            at.key("apiVersion"),
            format!("invalid Kafka apiVersion `{version}`: must be a number"),
        );
    }
    if let Some(topic) = rule.topic.as_deref()
        && !topic.is_empty()
        && (topic.len() > 255
            || !topic
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        findings.report(
            codes::L7,
            at.key("topic"),
            format!("invalid Kafka topic `{topic}`: at most 255 of a-z, A-Z, 0-9, `.`, `_`, `-`"),
        );
    }
}
