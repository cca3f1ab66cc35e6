//! PR008 `peer-selects-nothing`: a peer selector selects no identity.

use porin_model::diagnostic::{Diagnostic, Severity};

use super::is_user_rule;
use crate::{Context, codes};
use porin_compiler::labels::{SOURCE_CIDR, SOURCE_FQDN};
use porin_compiler::resolve::policy::SelectorCache;

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
                Diagnostic::new(
                    codes::PEER_SELECTS_NOTHING,
                    Severity::Warning,
                    format!(
                        "{}: peer selector `{selector}` selects no identity; the rule {} nothing for it",
                        cx.describe(origin),
                        if rule.deny { "denies" } else { "allows" }
                    ),
                )
                .at(cx.rule_location(origin))
                .help("check the labels and namespace of the peer, or complete the inventory"),
            );
        }
    }
}
