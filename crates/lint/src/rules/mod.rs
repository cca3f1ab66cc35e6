//! The lint rules. Each rule is one module: its [`Rule`] constant (code,
//! name, default severity and documentation, next to the check) and its
//! check. [`ALL`] registers them: adding a rule is one line in the
//! `register!` list below. This file only lists the rules: what they share
//! is `support.rs` and running them is `run.rs`, so a rule naming a helper
//! never names the table that names the rule.

mod run;
pub(crate) mod support;
pub(crate) mod tiers;

pub use run::run_all;
pub use support::{Check, Rule, is_user_rule, thousands};

/// Declares each rule's module and lists its [`Rule`] in [`ALL`].
macro_rules! register {
    ($($rule:ident,)*) => {
        $(pub mod $rule;)*
        /// Every lint rule, in code order (a test checks the order).
        pub const ALL: &[Rule] = &[$($rule::RULE),*];
    };
}

// One line per rule, in code order.
register! {
    map_capacity_exceeded,
    map_capacity_near,
    ipcache_capacity,
    allow_shadowed_by_deny,
    redundant_allow,
    deny_bypass,
    subject_selects_nothing,
    peer_selects_nothing,
    l7_never_reached,
    overlapping_ports,
    duplicate_rule,
    rule_allows_nothing,
    allows_all_traffic,
    egress_blocks_dns,
    named_port_unresolved,
    unsupported_field,
    range_partly_covered,
    port_rule_without_ports,
    unreachable_end_to_end,
    cidr_covers_pods,
    empty_cidr_group,
    cidr_group_covers_pods,
    tier_rule_shadowed,
    tier_same_priority_conflict,
    baseline_never_applies,
}
