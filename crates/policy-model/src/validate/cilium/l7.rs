//! L7 rules of a port rule (`l7.go`, `http.go`, cilium/proxy's Kafka
//! rules) and L7 on host policies.

use super::fqdn::validate_name_or_pattern;
use super::list::non_empty;
use crate::codes;
use crate::model::{
    L7Rules, PortProtocol, PortRule, PortRuleDns, PortRuleHttp, PortRuleKafka, RuleSection,
};
use crate::route::Route;
use crate::validate::Findings;

/// L7 on a host policy (a rule with a nodeSelector): `IngressRule.Validate`
/// refuses any L7 on host ingress, `EgressRule.Validate` Kafka and HTTP on
/// host egress.
pub(super) fn validate_host_l7(
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

/// Whether `countL7Rules` returns a non-empty map: it inserts its keys for
/// every port rule whose L7 rules are not `IsEmpty`, even with zero rules
/// (so `http: []` or an `l7proto` list counts), and `IngressRule.Validate`
/// tests the map's length for host policies.
pub(super) fn has_l7(port_rules: &[PortRule]) -> bool {
    port_rules.iter().any(|p| !l7_is_empty(p.rules.as_deref()))
}

/// `L7Rules.IsEmpty`: no http/kafka/dns/l7 list at all (an `l7proto` alone is "empty").
pub(super) fn l7_is_empty(rules: Option<&L7Rules>) -> bool {
    rules.is_none_or(|r| r.http.is_none() && r.kafka.is_none() && r.dns.is_none() && r.l7.is_none())
}

/// `L7Rules.Validate(ports)`.
pub(super) fn validate_l7_rules(
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
pub(super) fn validate_http(findings: &mut Findings, at: &Route, rule: &PortRuleHttp) {
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
pub(super) const KAFKA_API_KEYS: &[&str] = &[
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
pub(super) fn validate_kafka(findings: &mut Findings, at: &Route, rule: &PortRuleKafka) {
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
