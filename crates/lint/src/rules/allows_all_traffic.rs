//! PR013 `allows-all-traffic`: an allow rule with the wildcard peer and no
//! port.

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR013",
        name: "allows-all-traffic",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "An allow rule allows every peer on every port.",
        doc: Some(Doc {
            what: "Finds allow items whose peers include the wildcard (`fromEntities: [all]`, \
`toEntities: [all]`, CIDR `0.0.0.0/0` with `::/0`, KNP `ingress: [{}]`) and that name no port.",
            why: "It disables the direction's policy for the subject; deny rules still apply, but \
every other rule becomes redundant.",
            example: "egress:\n- toEntities: [all]",
            instead: "Name the peers and ports actually needed.",
            references: "semantics.md §3.2, §3.4 (`EntitySelectorMapping[all]`).",
        }),
    },
};

/// Reports allow-everything rules.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (index, rule) in cx.rules().iter().enumerate() {
        // An item with `toPorts` whose port rules list no port has no ports
        // either, but allows nothing (PR018): only an L3-only item allows
        // every port.
        if rule.deny || !rule.l3_only || !rule.ports.is_empty() || !is_user_rule(cx, index) {
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
            Diagnostic::new(RULE.info, format!(
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
