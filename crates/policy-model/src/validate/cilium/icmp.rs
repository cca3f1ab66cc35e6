//! `icmps` of a rule item (`icmp.go`).

use crate::codes;
use crate::model::{IcmpFamily, IcmpRule, IntOrString};
use crate::route::Route;
use crate::validate::Findings;

/// `maxICMPFields` in rule_validation.go.
pub(super) const MAX_ICMP_FIELDS: usize = 40;

/// ICMP: `ICMPRule.Validate`, the `ICMPField` JSON unmarshal (type names per
/// family, icmp.go) and the CRD (`type` 0-255 or a name, at most 40 fields).
pub(super) fn validate_icmps(
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
