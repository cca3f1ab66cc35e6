//! L3 peers of a rule item (`IngressCommonRule` / `EgressCommonRule`
//! `Validate`, `pkg/policy/api/ingress.go`, `egress.go`): the mixing check,
//! selectors, CIDRs and CIDR sets, nodes, removed `*Requires`, services.

use super::list::non_empty;
use crate::codes;
use crate::model::{CidrRule, EndpointSelector, RuleItem};
use crate::route::Route;
use crate::validate::Findings;
use crate::validate::selector::{SelectorKind, validate_selector};
use crate::validate::text::{is_dns1123_subdomain, parse_prefix};

/// One L3 peer kind of a rule item, for the mixing check.
pub(super) struct L3Kind<'a> {
    /// Cilium's name in the message (`FromEndpoints`).
    name: &'static str,
    /// YAML key.
    key: &'a str,
    present: bool,
}

/// `combining %s and %s is not supported yet` (IngressCommonRule.Validate /
/// EgressCommonRule.Validate): one L3 kind per rule item.
pub(super) fn check_l3_mixing(findings: &mut Findings, at: &Route, kinds: &[L3Kind<'_>]) {
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

/// The L3 kinds of an item in the order of Cilium's mixing check:
/// `IngressCommonRule.Validate` (`pkg/policy/api/ingress.go`) and
/// `EgressCommonRule.Validate` (`pkg/policy/api/egress.go`) test them in
/// different orders, which decides which field a message blames. A kind the
/// item type lacks (`toFQDNs` of a deny rule) is never present, so it cannot
/// take part in a mixing error.
pub(super) fn l3_kinds(item: &RuleItem<'_>) -> Vec<L3Kind<'static>> {
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
pub(super) fn validate_peers(findings: &mut Findings, at: &Route, item: &RuleItem<'_>) {
    check_l3_mixing(findings, at, &l3_kinds(item));
    // The field names in the item's direction, `fromCIDR` or `toCIDR`
    // ([`crate::model::RuleSection::peer_prefix`] and the field): static
    // names rather than one `format!` per field and item (a fifth of
    // validating a one-rule CIDR policy).
    let ingress = item.section.is_ingress();
    let key = |from: &'static str, to: &'static str| if ingress { from } else { to };
    requires_removed(
        findings,
        at,
        key("fromRequires", "toRequires"),
        item.requires,
    );
    validate_endpoint_selectors(
        findings,
        at,
        key("fromEndpoints", "toEndpoints"),
        item.endpoints,
    );
    validate_endpoint_selectors(findings, at, key("fromNodes", "toNodes"), item.nodes);
    validate_cidrs(findings, at, key("fromCIDR", "toCIDR"), item.cidr);
    validate_cidr_rules(findings, at, key("fromCIDRSet", "toCIDRSet"), item.cidr_set);
    validate_services(findings, at, item.services);
}

pub(super) fn validate_endpoint_selectors(
    findings: &mut Findings,
    at: &Route,
    key: &str,
    list: Option<&Vec<EndpointSelector>>,
) {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return;
    };
    let at = at.key(key);
    for (index, selector) in list.iter().enumerate() {
        validate_selector(
            findings,
            &|| at.index(index),
            selector,
            SelectorKind::Cilium,
        );
    }
}

pub(super) fn requires_removed<T>(
    findings: &mut Findings,
    at: &Route,
    key: &str,
    list: Option<&Vec<T>>,
) {
    if non_empty(list) {
        findings
            .report(codes::REQUIRES_REMOVED, at.key(key), format!("`{key}` was removed in Cilium 1.19"))
            .at_key()
            .note("the CRD keeps the field only with maxItems: 0, so the API server rejects any entry")
            .help("add the required labels to every fromEndpoints/toEndpoints selector instead, or use a deny rule");
    }
}

pub(super) fn validate_cidrs(
    findings: &mut Findings,
    at: &Route,
    key: &str,
    list: Option<&Vec<String>>,
) {
    for (index, cidr) in list.into_iter().flatten().enumerate() {
        validate_cidr(findings, || at.key(key).index(index), cidr);
    }
}

/// `fromCIDR`/`toCIDR` entries: CRD `format: cidr` (prefix notation required;
/// a bare IP is refused at admission, cilium/cilium#32814) plus `CIDR.Validate`.
/// `at` makes the entry's route, only for a finding (most entries have
/// none, and a route per entry was a tenth of validating a CIDR policy).
pub(super) fn validate_cidr(findings: &mut Findings, at: impl Fn() -> Route, cidr: &str) {
    if cidr.is_empty() {
        findings.report(codes::CIDR, at(), "IP must be specified");
        return;
    }
    if let Err(problem) = parse_prefix(cidr) {
        let finding = findings.report(
            codes::CIDR,
            at(),
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

pub(super) fn validate_cidr_rules(
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
pub(super) fn validate_cidr_rule(findings: &mut Findings, at: &Route, rule: &CidrRule) {
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
            &|| at.key("cidrGroupSelector"),
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
        // A group with `except`: Cilium 1.19 applies each entry as a
        // `!cidr:<except>` requirement beside the group's label
        // (`CIDRRuleSlice.GetAsEndpointSelectors`, pkg/policy/api/cidr.go;
        // `newCIDRRuleSelector`, pkg/policy/types/selector.go), a carve-out
        // by longest-prefix match. `sanitize` checks nothing more for
        // selectors ("these are selectors"), but the CRD's `format: cidr`
        // still applies to every entry.
        for (index, except) in rule.except.iter().flatten().enumerate() {
            if let Err(problem) = parse_prefix(except) {
                findings.report(
                    codes::CIDR_RULE,
                    at.key("except").index(index),
                    format!("invalid except CIDR: {problem}"),
                );
            }
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

pub(super) fn validate_services(
    findings: &mut Findings,
    at: &Route,
    services: Option<&Vec<crate::model::Service>>,
) {
    for (index, service) in services.into_iter().flatten().enumerate() {
        if let Some(selector) = &service.k8s_service_selector {
            validate_selector(
                findings,
                &|| {
                    at.key("toServices")
                        .index(index)
                        .key("k8sServiceSelector")
                        .key("selector")
                },
                &selector.selector,
                SelectorKind::Kubernetes,
            );
        }
    }
}
