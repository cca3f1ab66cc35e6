//! PR002 `map-capacity-near`: an endpoint uses more than the warning
//! fraction of its policy map (and does not exceed it; that is PR001).

use porin_model::diagnostic::{Diagnostic, Severity};

use super::map_capacity_exceeded::finding;
use crate::Context;
use crate::codes;

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
    for unit in &cx.units {
        let count = unit.state.len();
        if count > warn && count <= limit {
            out.push(finding(
                cx,
                unit,
                codes::MAP_CAPACITY_NEAR,
                Severity::Warning,
                limit,
            ));
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
