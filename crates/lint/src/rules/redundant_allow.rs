//! PR005 `redundant-allow`: an allow rule whose flows other allows already
//! allow (see [`super::allow_shadowed_by_deny`] for the exact analysis).

use porin_model::diagnostic::Diagnostic;

use super::allow_shadowed_by_deny::{coverage, report};
use crate::{Context, codes};

/// Reports allow rules covered only by other allows (a rule partly covered
/// by denies is PR004).
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for rule in 0..cx.rules().len() {
        if let Some(c) = coverage(cx, rule)
            && c.denies.is_empty()
            && let Some(d) = report(cx, rule, &c, codes::REDUNDANT_ALLOW)
        {
            out.push(d);
        }
    }
}
