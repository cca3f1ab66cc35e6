//! PR005 `redundant-allow`: an allow rule whose flows other allows already
//! allow (see [`super::allow_shadowed_by_deny`] for the exact analysis).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::allow_shadowed_by_deny::{report, reported};
use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR005",
        name: "redundant-allow",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "An allow rule grants nothing new: other allow rules already grant all of it.",
        doc: Some(Doc {
            what: "Same exact comparison as PR004; fires when the flows the rule allows on its own are \
all allowed by other rules, which it names.",
            why: "Redundant rules make policies harder to review and let a later edit of the covering \
rule change behaviour unexpectedly. They also cost map entries.",
            example: "ingress:\n- fromEndpoints: [{}]\n  toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]\n- fromEndpoints: [{matchLabels: {app: web}}]\n  toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]",
            instead: "Delete the redundant rule, or narrow the broader one if it allows too much.",
            references: "semantics.md §4.6, §5.4.",
        }),
    },
};

/// Reports allow rules covered only by other allows (a rule partly covered
/// by denies is PR004).
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (rule, c) in reported(cx) {
        if c.denies.is_empty()
            && let Some(d) = report(cx, rule, &c, RULE.info)
        {
            out.push(d);
        }
    }
}
