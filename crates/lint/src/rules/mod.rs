//! One module per lint rule; [`run_all`] runs them in code order.

pub mod allow_shadowed_by_deny;
pub mod allows_all_traffic;
pub mod deny_bypass;
pub mod duplicate_rule;
pub mod egress_blocks_dns;
pub mod ipcache_capacity;
pub mod l7_never_reached;
pub mod map_capacity_exceeded;
pub mod map_capacity_near;
pub mod named_port_unresolved;
pub mod overlapping_ports;
pub mod peer_selects_nothing;
pub mod range_partly_covered;
pub mod redundant_allow;
pub mod rule_allows_nothing;
pub mod subject_selects_nothing;
pub mod unsupported_field;

use porin_model::diagnostic::Diagnostic;

use super::Context;
use super::config::RuleLevel;

/// A rule's check: appends its findings.
pub type Check = fn(&Context<'_>, &mut Vec<Diagnostic>);

/// The checks, by code (the code table in [`super::codes`] documents them).
pub const CHECKS: &[(&str, Check)] = &[
    (
        super::codes::MAP_CAPACITY_EXCEEDED,
        map_capacity_exceeded::check,
    ),
    (super::codes::MAP_CAPACITY_NEAR, map_capacity_near::check),
    (super::codes::IPCACHE_CAPACITY, ipcache_capacity::check),
    (
        super::codes::ALLOW_SHADOWED_BY_DENY,
        allow_shadowed_by_deny::check,
    ),
    (super::codes::REDUNDANT_ALLOW, redundant_allow::check),
    (super::codes::DENY_BYPASS, deny_bypass::check),
    (
        super::codes::SUBJECT_SELECTS_NOTHING,
        subject_selects_nothing::check,
    ),
    (
        super::codes::PEER_SELECTS_NOTHING,
        peer_selects_nothing::check,
    ),
    (super::codes::L7_NEVER_REACHED, l7_never_reached::check),
    (super::codes::OVERLAPPING_PORTS, overlapping_ports::check),
    (super::codes::DUPLICATE_RULE, duplicate_rule::check),
    (
        super::codes::RULE_ALLOWS_NOTHING,
        rule_allows_nothing::check,
    ),
    (super::codes::ALLOWS_ALL_TRAFFIC, allows_all_traffic::check),
    (super::codes::EGRESS_BLOCKS_DNS, egress_blocks_dns::check),
    (
        super::codes::NAMED_PORT_UNRESOLVED,
        named_port_unresolved::check,
    ),
    (super::codes::UNSUPPORTED_FIELD, unsupported_field::check),
    (
        super::codes::RANGE_PARTLY_COVERED,
        range_partly_covered::check,
    ),
];

/// Runs every enabled check (the ones needing an inventory only with one).
pub fn run_all(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (code, check) in CHECKS {
        if cx.config.level(code) == RuleLevel::Off {
            continue;
        }
        let needs_inventory = super::codes::lookup(code).is_some_and(|r| r.needs_inventory);
        if needs_inventory && !cx.has_inventory {
            continue;
        }
        check(cx, out);
    }
    out.extend(super::annotation_problems(cx.inputs));
}

/// `12,345`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Rule indices that are real policy rules (not the synthetic allow-alls).
pub fn is_user_rule(cx: &Context<'_>, rule: usize) -> bool {
    cx.origin(rule).is_some_and(|o| !o.is_synthetic())
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_groups_digits() {
        assert_eq!(super::thousands(14_616), "14,616");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1_000_000), "1,000,000");
    }

    #[test]
    fn every_code_has_a_check_and_every_check_a_code() {
        let codes: Vec<&str> = super::super::codes::ALL.iter().map(|r| r.code).collect();
        let checks: Vec<&str> = super::CHECKS.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes, checks);
    }
}
