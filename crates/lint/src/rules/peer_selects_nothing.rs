//! PR008 `peer-selects-nothing`: a peer selector selects no identity.

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;
use porin_compiler::labels::{SOURCE_CIDR, SOURCE_FQDN};
use porin_compiler::resolve::policy::SelectorCache;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR008",
        name: "peer-selects-nothing",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "A peer selector of an allow or deny rule selects no identity.",
        doc: Some(Doc {
            what: "Matches each `fromEndpoints`/`toEndpoints` selector against every identity \
(endpoints, reserved, CIDR) of the compilation.",
            why: "The rule allows (or denies) nothing for that selector; usually a label typo.",
            example: "ingress:\n- fromEndpoints: [{matchLabels: {app: bakend}}]",
            instead: "Fix the selector or complete the inventory.",
            references: "Cilium `pkg/policy/selectorcache.go`.",
        }),
    },
};

/// Reports peer selectors with an empty selection.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut cache = SelectorCache::default();
    for (index, rule) in cx.rules().iter().enumerate() {
        if !is_user_rule(cx, index) {
            continue;
        }
        let Some(peers) = &rule.peers else { continue };
        for selector in peers {
            // CIDR and FQDN selectors always have their own identity (or
            // are reported by the compiler when an FQDN has no answers).
            if selector.is_wildcard()
                || selector.has_key(|k| k.source == SOURCE_CIDR || k.source == SOURCE_FQDN)
            {
                continue;
            }
            let id = cache.intern(selector, &cx.table);
            if !cache.selection(id).is_empty() {
                continue;
            }
            let Some(origin) = cx.origin(index) else {
                continue;
            };
            out.push(
                Diagnostic::new(RULE.info, format!(
                        "{}: peer selector `{}` selects no identity; the rule {} nothing for it",
                        cx.describe(origin),
                        selector.written(),
                        if rule.deny { "denies" } else { "allows" }
                    ),
                )
                .at(cx.rule_location(origin))
                .help("check the labels and namespace of the peer, or complete the inventory"),
            );
        }
    }
}
