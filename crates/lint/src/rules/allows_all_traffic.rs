//! PR013 `allows-all-traffic`: an allow rule with the wildcard peer and no
//! port.

use porin_model::diagnostic::{Diagnostic, Severity};

use super::is_user_rule;
use crate::{Context, codes};

/// Reports allow-everything rules.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (index, rule) in cx.rules().iter().enumerate() {
        if rule.deny || !rule.ports.is_empty() || !is_user_rule(cx, index) {
            continue;
        }
        let wildcard = rule
            .peers
            .as_ref()
            .is_some_and(|p| p.iter().any(|s| s.is_wildcard()));
        if !wildcard {
            continue;
        }
        let Some(origin) = cx.origin(index) else {
            continue;
        };
        out.push(
            Diagnostic::new(
                codes::ALLOWS_ALL_TRAFFIC,
                Severity::Warning,
                format!(
                    "{} allows all {} traffic: every peer, every protocol and port",
                    cx.describe(origin),
                    rule.direction
                ),
            )
            .at(cx.rule_location(origin))
            .note("deny rules still apply; every other allow rule of this direction becomes redundant")
            .help("name the peers and ports that are needed"),
        );
    }
}
