//! PR003 `ipcache-capacity`: the ipcache overflows (error) or is above the
//! warning fraction (warning).

use porin_model::diagnostic::{Diagnostic, Severity};

use super::map_capacity_near::threshold;
use super::thousands;
use crate::Context;
use crate::codes;

/// Compares the ipcache entry count with `ipcacheMapMax`.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let limit = usize::try_from(cx.config.ipcache_map_max).unwrap_or(usize::MAX);
    let count = cx.ipcache_len;
    let severity = if count > limit {
        Severity::Error
    } else if count > threshold(limit, cx.config.warn_fraction) {
        Severity::Warning
    } else {
        return;
    };
    out.push(
        Diagnostic::new(
            codes::IPCACHE_CAPACITY,
            severity,
            format!(
                "the ipcache needs {} entries; the map holds {}",
                thousands(count),
                thousands(limit)
            ),
        )
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
