//! PR002 `map-capacity-near`: an endpoint uses more than the warning
//! fraction of its policy map (and does not exceed it; that is PR001).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::map_capacity_exceeded::{Censuses, finding};
use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR002",
        name: "map-capacity-near",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "An endpoint uses more than the warning fraction of its policy map.",
        doc: Some(Doc {
            what: "Like PR001, but fires when the entry count is above `capacityWarnFraction` \
(default 0.8) of the map size without exceeding it.",
            why: "A few more identities (new pods with new label sets, new CIDR prefixes) will \
overflow the map; the failure then happens at runtime, not in review.",
            example: "A policy producing 14,000 entries against the default 16,384.",
            instead: "The same as PR001: fewer identities per selector, aligned port ranges, or a \
larger map.",
            references: "semantics.md §4.8; Cilium `pkg/endpointmanager/policymap_pressure.go` \
(`bpf_map_pressure`).",
        }),
    },
};

/// The entry count above which PR002 warns.
pub fn threshold(limit: usize, fraction: f64) -> usize {
    // Exact integer arithmetic on per-mille to stay deterministic.
    let per_mille = (fraction * 1000.0).round().clamp(0.0, 1000.0);
    let per_mille = per_mille as usize;
    limit.saturating_mul(per_mille) / 1000
}

/// Reports endpoints above the warning fraction.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let limit = usize::try_from(cx.config.policy_map_max).unwrap_or(usize::MAX);
    let warn = threshold(limit, cx.config.warn_fraction);
    let mut censuses = Censuses::default();
    for unit in &cx.units {
        let count = unit.state.len();
        if count > warn && count <= limit {
            let census = censuses.of(unit);
            out.push(finding(cx, &cx.unit_name(unit), census, RULE.info, limit));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn default_threshold_is_80_percent_of_16384() {
        assert_eq!(super::threshold(16_384, 0.8), 13_107);
        assert_eq!(super::threshold(256, 1.0), 256);
    }
}
