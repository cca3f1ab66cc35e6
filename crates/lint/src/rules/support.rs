//! What the rules share: the [`Rule`] type each declares and the helpers
//! several use. A leaf below the rule table (`mod.rs`), which the rules
//! name through its re-exports.

use porin_model::CodeInfo;
use porin_model::diagnostic::Diagnostic;

use crate::Context;

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
    // ClusterNetworkPolicy rules are decided by the tiers, not the
    // ordinary map state these rules read; PR033-PR035 check them.
    cx.origin(rule).is_some_and(|o| !o.is_synthetic())
        && cx.rules().get(rule).is_some_and(|r| r.tier.is_none())
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_groups_digits() {
        assert_eq!(super::thousands(14_616), "14,616");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1_000_000), "1,000,000");
    }
}
