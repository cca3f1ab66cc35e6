//! DNS names and patterns: `toFQDNs` and DNS L7 rules (`fqdn.go`,
//! `matchpattern.go`).

use crate::codes;
use crate::model::FqdnSelector;
use crate::registry::CodeInfo;
use crate::route::Route;
use crate::validate::Findings;

/// `MaxFQDNLength` in pkg/fqdn/matchpattern/matchpattern.go.
pub(super) const MAX_FQDN_LENGTH: usize = 255;

pub(super) fn validate_fqdns(
    findings: &mut Findings,
    at: &Route,
    list: Option<&Vec<FqdnSelector>>,
) {
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
pub(super) fn validate_name_or_pattern(
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
