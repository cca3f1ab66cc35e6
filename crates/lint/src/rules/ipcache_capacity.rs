//! PR003 `ipcache-capacity`: the ipcache overflows (error) or is above the
//! warning fraction (warning).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::map_capacity_near::threshold;
use super::thousands;
use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR003",
        name: "ipcache-capacity",
        severity: Severity::Error,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "The ipcache needs more entries than its map holds (warning above the fraction).",
        doc: Some(Doc {
            what: "Counts the ipcache entries porin would install (endpoint addresses, policy \
prefixes, the two world routes) and compares them with `ipcacheMapMax` (default 512000, the size of Cilium's \
`cilium_ipcache` map). Over the limit is an error, above the warning fraction a \
warning.",
            why: "An address missing from the ipcache resolves to `world`, so policies written for it \
silently stop applying.",
            example: "Thousands of `toCIDR` /32 prefixes in one cluster.",
            instead: "Aggregate prefixes; use FQDN or entity selectors where possible.",
            references: "Cilium `pkg/maps/ipcache/ipcache.go` (MaxEntries).",
        }),
    },
};

/// Compares the ipcache entry count with `ipcacheMapMax`.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let limit = usize::try_from(cx.config.ipcache_map_max).unwrap_or(usize::MAX);
    let count = cx.ipcache_len;
    // Full is the rule's default (an error); above the warning fraction
    // the map still holds every entry, so that finding is a warning.
    let severity = if count > limit {
        RULE.info.severity
    } else if count > threshold(limit, cx.config.warn_fraction) {
        Severity::Warning
    } else {
        return;
    };
    out.push(
        Diagnostic::new(
            RULE.info,
            format!(
                "the ipcache needs {} entries; the map holds {}",
                thousands(count),
                thousands(limit)
            ),
        )
        .with_severity(severity)
        .note(format!(
            "{} endpoint addresses and {} policy prefixes, plus the two world routes",
            cx.inventory
                .endpoints
                .iter()
                .map(|e| e.ips.len())
                .sum::<usize>(),
            cx.table.cidr_identity.len()
        ))
        .help(
            "aggregate CIDR prefixes, or raise the ipcache map size and `ipcacheMapMax` together",
        ),
    );
}
