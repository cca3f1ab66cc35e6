//! Running the rules of the table: the enabled ones, then the checks of the
//! `porin.dev/ignore` annotations themselves.

use porin_model::diagnostic::Diagnostic;

use super::ALL;
use crate::Context;
use crate::config::{RuleLevel, annotation_problems};

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
    out.extend(annotation_problems(cx.inputs));
}
