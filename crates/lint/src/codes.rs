//! The lint stage's codes (`PR0xx`) and the registry of every stage.
//!
//! Each rule declares its [`CodeInfo`] in its own file
//! (`crates/lint/src/rules/<name>.rs`, listed in [`crate::rules::ALL`]);
//! `PR000` and `PR021` (a stale baseline entry) are the lint codes that are not rules. Codes are stable: a
//! code is never reused for another condition. The table in `docs/ci.md`
//! is generated from the rules (a test fails when it is stale).

use porin_model::diagnostic::Severity;
use porin_model::{CodeInfo, Stage};

use crate::rules;

/// `PR000`: a `porin.dev/ignore` annotation names no lint rule.
pub const UNKNOWN_IGNORED_RULE: CodeInfo = CodeInfo {
    code: "PR000",
    name: "unknown-ignored-rule",
    severity: Severity::Warning,
    stage: Stage::Lint,
    needs_inventory: false,
    summary: "A `porin.dev/ignore` annotation names a code or rule name that is no lint rule, so it suppresses nothing.",
    doc: None,
};

/// The lint codes that are not rules.
const NOT_RULES: &[CodeInfo] = &[UNKNOWN_IGNORED_RULE, crate::baseline::STALE_ENTRY];

/// The lint rule with a code (`PR001`) or name (`map-capacity-exceeded`),
/// case-insensitive.
pub fn lookup(code_or_name: &str) -> Option<&'static CodeInfo> {
    rules().find(|info| info.is(code_or_name))
}

/// Every lint rule's entry, in code order.
pub fn rules() -> impl Iterator<Item = &'static CodeInfo> {
    rules::ALL.iter().map(|rule| &rule.info)
}

/// Every code of every stage in the order `porin explain` lists them:
/// lint (`PR000`, then the rules), model, compiler, flows.
pub fn every_stage() -> impl Iterator<Item = &'static CodeInfo> {
    NOT_RULES
        .iter()
        .chain(rules())
        .chain(porin_model::codes::ALL)
        .chain(porin_compiler::codes::ALL)
        .chain(porin_flows::codes::ALL)
}

/// The code of any stage with this code or name, case-insensitive; a name
/// two stages share (`invalid-port`) finds the first in [`every_stage`]'s
/// order.
pub fn find(code_or_name: &str) -> Option<&'static CodeInfo> {
    every_stage().find(|info| info.is(code_or_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_of_every_stage_is_unique_and_has_its_stage_prefix() {
        let mut seen = std::collections::BTreeSet::new();
        for info in every_stage() {
            assert!(seen.insert(info.code), "{} twice", info.code);
            assert!(info.code.starts_with(info.stage.prefix()), "{}", info.code);
            assert_eq!(find(info.code).map(|i| i.code), Some(info.code));
        }
        assert!(seen.len() > rules::ALL.len());
    }

    #[test]
    fn the_rule_table_of_docs_ci_is_fresh() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ci.md");
        porin_model::registry::check_generated(
            &path,
            &porin_model::registry::markdown_table(rules(), true),
            "cargo test -p porin-lint --lib codes",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn rules_are_numbered_in_order_and_documented() {
        // Increasing, not gap-free: helpers working at the same time get
        // ranges of codes (PR022-PR025 for CIDR groups and nodes while
        // PR021 lands elsewhere), and a code is never reused.
        let mut previous = 0;
        for rule in rules::ALL {
            let info = &rule.info;
            let number: u32 = info
                .code
                .strip_prefix("PR")
                .filter(|n| n.len() == 3)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{} is not PRnnn", info.code));
            assert!(number > previous, "{} is out of order", info.code);
            previous = number;
            assert_eq!(info.stage, porin_model::Stage::Lint, "{}", info.code);
            let doc = info
                .doc
                .unwrap_or_else(|| panic!("{} has no documentation", info.code));
            assert!(
                !doc.what.is_empty() && !doc.why.is_empty() && !doc.references.is_empty(),
                "{}",
                info.code
            );
            assert_eq!(lookup(info.name).map(|r| r.code), Some(info.code));
        }
    }
}
