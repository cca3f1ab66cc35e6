//! The lint rules. Each rule is one module: its [`Rule`] constant (code,
//! name, default severity and documentation, next to the check) and its
//! check. [`ALL`] registers them: adding a rule is one line in the
//! `register!` list below.

use porin_model::CodeInfo;
use porin_model::diagnostic::Diagnostic;

use super::Context;
use super::config::RuleLevel;

/// A rule's check: appends its findings.
pub type Check = fn(&Context<'_>, &mut Vec<Diagnostic>);

/// A lint rule: its entry in the code registry and its check.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Code, name, default severity, documentation.
    pub info: CodeInfo,
    /// The check.
    pub check: Check,
}

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
}

/// Runs every enabled check (the ones needing an inventory only with one).
pub fn run_all(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for rule in ALL {
        if cx.config.level(rule.info.code) == RuleLevel::Off {
            continue;
        }
        if rule.info.needs_inventory && !cx.has_inventory {
            continue;
        }
        (rule.check)(cx, out);
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
    fn rules_are_numbered_in_order_and_documented() {
        for (i, rule) in super::ALL.iter().enumerate() {
            let info = &rule.info;
            assert_eq!(info.code, format!("PR{:03}", i + 1));
            assert_eq!(info.stage, porin_model::Stage::Lint, "{}", info.code);
            let doc = info
                .doc
                .unwrap_or_else(|| panic!("{} has no documentation", info.code));
            assert!(
                !doc.what.is_empty() && !doc.why.is_empty() && !doc.references.is_empty(),
                "{}",
                info.code
            );
            assert_eq!(
                crate::codes::lookup(info.name).map(|r| r.code),
                Some(info.code)
            );
        }
    }
}
