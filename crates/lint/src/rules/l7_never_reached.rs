//! PR009 `l7-never-reached`: an L7 rule whose flows are never redirected
//! to the proxy (a deny or another entry decides all of them).

use porin_model::diagnostic::{Diagnostic, Severity};

use super::is_user_rule;
use crate::analysis::{decide, flow_points};
use crate::{Context, codes};
use porin_compiler::mapstate::Verdict;
use porin_compiler::resolve::rule::L7Parser;

/// Reports L7 rules no flow class of any selected endpoint reaches.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (index, rule) in cx.rules().iter().enumerate() {
        if rule.deny || !is_user_rule(cx, index) {
            continue;
        }
        let parsers: Vec<&L7Parser> = rule
            .ports
            .iter()
            .map(|p| &p.l7.parser)
            .filter(|p| **p != L7Parser::None)
            .collect();
        let Some(parser) = parsers.first() else {
            continue;
        };
        let units: Vec<_> = cx
            .units
            .iter()
            .filter(|u| u.rules.contains(&index))
            .collect();
        if units.is_empty() {
            continue;
        }
        let reached = units.iter().any(|unit| {
            flow_points(&[&unit.state]).iter().any(|p| {
                let d = decide(&unit.state, p);
                matches!(d.verdict, Verdict::Redirect { .. })
                    && d.chosen
                        .as_ref()
                        .is_some_and(|c| c.entry.origins.contains(&rule.origin))
            })
        });
        if reached {
            continue;
        }
        let Some(origin) = cx.origin(index) else {
            continue;
        };
        out.push(
            Diagnostic::new(
                codes::L7_NEVER_REACHED,
                Severity::Warning,
                format!(
                    "{}: its {} rules never see traffic; no flow of {} is redirected to the proxy for it",
                    cx.describe(origin),
                    parser.name(),
                    cx.unit_name(units[0])
                ),
            )
            .at(cx.rule_location(origin))
            .note("exact: every flow class of every endpoint the rule selects was looked up")
            .help("a deny (or a broader entry with higher precedence) decides these flows first; remove it or the L7 rule"),
        );
    }
}
