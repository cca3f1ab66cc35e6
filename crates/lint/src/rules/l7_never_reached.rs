//! PR009 `l7-never-reached`: an L7 rule whose flows are never redirected
//! to the proxy (a deny or another entry decides all of them).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;
use porin_connectivity::analysis::{decide, flow_points};
use porin_compiler::mapstate::Verdict;
use porin_compiler::resolve::rule::L7Parser;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR009",
        name: "l7-never-reached",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "An L7 rule never sees traffic: no flow is redirected to its proxy.",
        doc: Some(Doc {
            what: "Looks up every flow class of every endpoint the rule selects; fires when no \
verdict is a redirect carrying the rule, because a deny or a higher-precedence entry decides \
all of its flows.",
            why: "HTTP/Kafka/DNS rules that never see traffic give a false sense of L7 filtering.",
            example: "ingressDeny:\n- toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]\ningress:\n- toPorts: [{ports: [{port: \"80\", protocol: TCP}], rules: {http: [{method: GET}]}}]",
            instead: "Remove the deny on that port or the L7 rule.",
            references: "semantics.md §4.3 (precedence), §4.6; Cilium `pkg/policy/l4.go`.",
        }),
    },
};

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
            Diagnostic::new(RULE.info, format!(
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
