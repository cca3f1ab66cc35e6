//! The code registry: the one shape in which every stage documents its
//! diagnostic codes, and the generated tables built from it.
//!
//! A code is a [`CodeInfo`]: the stable code, a kebab-case name, the default
//! severity (stated here once: [`crate::Diagnostic::new`] takes it from the
//! registry, emit sites do not repeat it), the stage, whether it needs an
//! inventory, a one-line summary and, where written, the full
//! documentation ([`Doc`]) that `porin explain CODE` prints.
//!
//! Each stage owns its table: `porin_model::codes::ALL` (`PM0xx`),
//! `porin_compiler::codes::ALL` (`PC0xx`) and the lint rules, each declared
//! in its own file under `crates/lint/src/rules/` and listed in
//! `porin_lint::rules::ALL` (`PR0xx`). The Markdown tables of the
//! repository (`crates/policy-model/CODES.md`, `crates/compiler/CODES.md`,
//! the lint table in `docs/ci.md`) are [`markdown_table`]s spliced between
//! [`BEGIN`] and [`END`]; a test per stage fails when one is stale
//! (`UPDATE_CODES=1` rewrites it, see [`check_generated`]).

use std::io;
use std::path::Path;

use serde::Serialize;
use thiserror::Error;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The input is invalid or unsafe; exit code 1.
    Error,
    /// Probably a mistake; does not change the exit code.
    Warning,
    /// Informational (e.g. a skipped document).
    Info,
}

impl Severity {
    /// Lower-case name used by the renderers.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// The pipeline stage that reports a code; the code's prefix names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// `PM0xx`: loading and validating policy files (porin-model).
    Model,
    /// `PC0xx`: compiling policies against an inventory (porin-compiler).
    Compiler,
    /// `PR0xx`: lint rules (porin-lint).
    Lint,
    /// `PF0xx`: reading and replaying recorded flows (porin-flows).
    Flows,
}

impl Stage {
    /// The prefix of the stage's codes.
    pub const fn prefix(self) -> &'static str {
        match self {
            Stage::Model => "PM",
            Stage::Compiler => "PC",
            Stage::Lint => "PR",
            Stage::Flows => "PF",
        }
    }
}

/// The full documentation of a code, in the sections `porin explain`
/// prints (the layout of ruff's and clippy's rule pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doc {
    /// What the check does.
    pub what: &'static str,
    /// Why the finding matters.
    pub why: &'static str,
    /// A policy that triggers it.
    pub example: &'static str,
    /// What to write instead.
    pub instead: &'static str,
    /// Cilium sources and issues behind it.
    pub references: &'static str,
}

/// One diagnostic code of one stage. Codes are stable: a code is never
/// reused for another condition; retired codes stay listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeInfo {
    /// The code, e.g. `PM021`.
    pub code: &'static str,
    /// Kebab-case name, e.g. `invalid-port`.
    pub name: &'static str,
    /// The severity of its findings unless the configuration (lint rules)
    /// overrides it. A few conditions are milder than their code's default
    /// and say so where they are reported ([`crate::Diagnostic::with_severity`]).
    pub severity: Severity,
    /// The stage that reports it.
    pub stage: Stage,
    /// Whether it is only reported with an inventory (a lint run without
    /// one skips the rule).
    pub needs_inventory: bool,
    /// One sentence, with the Cilium or Kubernetes source where it helps.
    pub summary: &'static str,
    /// The full documentation, where written (every lint rule has one).
    pub doc: Option<Doc>,
}

impl CodeInfo {
    /// Whether `code_or_name` is this code (`PR001`) or its name
    /// (`map-capacity-exceeded`), case-insensitive.
    pub fn is(&self, code_or_name: &str) -> bool {
        self.code.eq_ignore_ascii_case(code_or_name) || self.name.eq_ignore_ascii_case(code_or_name)
    }

    /// The text `porin explain CODE` prints: a title with the default
    /// severity, the summary, then the documentation's sections.
    pub fn document(&self) -> String {
        let mut text = format!(
            "{} {} (default severity: {}{})\n\n{}\n",
            self.code,
            self.name,
            self.severity.as_str(),
            if self.needs_inventory {
                "; needs --inventory"
            } else {
                ""
            },
            self.summary,
        );
        if let Some(doc) = &self.doc {
            text.push_str(&format!(
                "\n## What it does\n\n{}\n\n## Why is this bad\n\n{}\n\n\
                 ## Example\n\n{}\n\n## Use instead\n\n{}\n\n## References\n\n{}\n",
                doc.what.trim(),
                doc.why.trim(),
                doc.example.trim_end(),
                doc.instead.trim_end(),
                doc.references.trim(),
            ));
        }
        text
    }
}

/// The code in `table` with this code or name, case-insensitive.
pub fn lookup<'a>(table: &'a [CodeInfo], code_or_name: &str) -> Option<&'a CodeInfo> {
    table.iter().find(|info| info.is(code_or_name))
}

/// Whether `a` sorts before `b`, byte by byte (usable in constants).
const fn sorts_before(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    a.len() < b.len()
}

/// Whether `code` starts with `prefix` (usable in constants).
const fn starts_with(code: &str, prefix: &str) -> bool {
    let (code, prefix) = (code.as_bytes(), prefix.as_bytes());
    if code.len() < prefix.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if code[i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Fails (at compile time: [`crate::code_table!`] calls it in a constant) unless
/// every code of `table` carries its stage's prefix and the codes ascend,
/// each once.
pub const fn assert_table(table: &[CodeInfo]) {
    let mut i = 0;
    while i < table.len() {
        assert!(
            starts_with(table[i].code, table[i].stage.prefix()),
            "a code lacks its stage's prefix"
        );
        assert!(
            i == 0 || sorts_before(table[i - 1].code, table[i].code),
            "the codes of a table must ascend, each once"
        );
        i += 1;
    }
}

/// Defines a stage's code table: one `pub const NAME: CodeInfo` per code
/// and `pub const ALL: &[CodeInfo]`, every code in order (checked when it
/// compiles), with the stage and `needs_inventory` given once for the
/// table.
///
/// ```
/// porin_model::code_table! {
///     stage: Compiler, needs_inventory: true;
///     /// A peer porin cannot resolve offline.
///     UNSUPPORTED_PEER = "PC001", "unsupported-peer", Warning,
///         "A peer porin cannot resolve offline: allow rules allow nothing for it.";
/// }
/// assert_eq!(ALL[0].code, UNSUPPORTED_PEER.code);
/// ```
#[macro_export]
macro_rules! code_table {
    (
        stage: $stage:ident, needs_inventory: $inventory:literal;
        $($(#[$doc:meta])* $ident:ident = $code:literal, $name:literal, $severity:ident, $summary:literal;)*
    ) => {
        $(
            $(#[$doc])*
            pub const $ident: $crate::registry::CodeInfo = $crate::registry::CodeInfo {
                code: $code,
                name: $name,
                severity: $crate::diagnostic::Severity::$severity,
                stage: $crate::registry::Stage::$stage,
                needs_inventory: $inventory,
                summary: $summary,
                doc: None,
            };
        )*
        /// Every code of this table, in code order.
        pub const ALL: &[$crate::registry::CodeInfo] = &[$($ident),*];
        const _: () = $crate::registry::assert_table(ALL);
    };
}

/// The line before a generated table in a Markdown file.
pub const BEGIN: &str = "<!-- codes:begin (generated from the code registry; do not edit) -->";
/// The line after it.
pub const END: &str = "<!-- codes:end -->";

/// The Markdown table of `codes`: code, name, default severity, whether
/// it needs an inventory (with `inventory_column`), summary.
pub fn markdown_table<'a>(
    codes: impl IntoIterator<Item = &'a CodeInfo>,
    inventory_column: bool,
) -> String {
    let mut text = if inventory_column {
        String::from(
            "| code | name | default severity | needs inventory | summary |\n\
             |------|------|------------------|-----------------|---------|\n",
        )
    } else {
        String::from(
            "| code | name | default severity | summary |\n\
             |------|------|------------------|---------|\n",
        )
    };
    for info in codes {
        let inventory = match (inventory_column, info.needs_inventory) {
            (false, _) => "",
            (true, true) => " yes |",
            (true, false) => " no |",
        };
        text.push_str(&format!(
            "| `{}` | `{}` | {} |{inventory} {} |\n",
            info.code,
            info.name,
            info.severity.as_str(),
            info.summary.replace('|', "\\|")
        ));
    }
    text
}

/// `document` with the lines between [`BEGIN`] and [`END`] replaced by
/// `table`; `None` when the markers are missing or out of order.
pub fn splice(document: &str, table: &str) -> Option<String> {
    let begin = document.find(BEGIN)? + BEGIN.len();
    let end = begin + document[begin..].find(END)?;
    Some(format!(
        "{}\n{table}{}",
        &document[..begin],
        &document[end..]
    ))
}

/// Why a generated table is not fresh.
#[derive(Debug, Error)]
pub enum GeneratedError {
    /// The file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The reason.
        source: io::Error,
    },
    /// The file lacks [`BEGIN`] or [`END`].
    #[error("{path} lacks the lines `{BEGIN}` and `{END}` around its table")]
    NoMarkers {
        /// The file.
        path: String,
    },
    /// The table differs from the registry.
    #[error("the code table in {path} is stale; run `UPDATE_CODES=1 {regenerate}`")]
    Stale {
        /// The file.
        path: String,
        /// The command that rewrites it.
        regenerate: String,
    },
}

/// Checks that the generated region of the Markdown file at `path` holds
/// `table`, for the freshness test of each table; with the environment
/// variable `UPDATE_CODES=1`, rewrites it instead. `regenerate` is the
/// test's command, for the message.
pub fn check_generated(path: &Path, table: &str, regenerate: &str) -> Result<(), GeneratedError> {
    let io_error = |source| GeneratedError::Io {
        path: path.display().to_string(),
        source,
    };
    let committed = std::fs::read_to_string(path).map_err(io_error)?;
    let expected = splice(&committed, table).ok_or_else(|| GeneratedError::NoMarkers {
        path: path.display().to_string(),
    })?;
    if committed == expected {
        return Ok(());
    }
    if std::env::var("UPDATE_CODES").is_ok_and(|v| v == "1") {
        return std::fs::write(path, expected).map_err(io_error);
    }
    Err(GeneratedError::Stale {
        path: path.display().to_string(),
        regenerate: regenerate.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: CodeInfo = CodeInfo {
        code: "PR001",
        name: "sample-rule",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "A | in a summary.",
        doc: None,
    };

    #[test]
    fn splice_replaces_only_the_marked_region() {
        let document = format!("# Title\n\nprose\n{BEGIN}\nold\nrows\n{END}\nafter\n");
        let table = markdown_table([&SAMPLE], true);
        let spliced = splice(&document, &table).unwrap_or_default();
        assert_eq!(
            spliced,
            format!(
                "# Title\n\nprose\n{BEGIN}\n| code | name | default severity | needs inventory | summary |\n\
                 |------|------|------------------|-----------------|---------|\n\
                 | `PR001` | `sample-rule` | warning | yes | A \\| in a summary. |\n{END}\nafter\n"
            )
        );
        // Splicing is idempotent, and refuses a document without markers.
        assert_eq!(splice(&spliced, &table).as_deref(), Some(spliced.as_str()));
        assert_eq!(splice("no markers", &table), None);
        assert_eq!(splice(&format!("{END}\n{BEGIN}\n"), &table), None);
    }

    #[test]
    fn tables_must_ascend_and_carry_their_prefix() {
        assert!(sorts_before("PM009", "PM010") && !sorts_before("PM010", "PM010"));
        assert!(sorts_before("PM01", "PM010") && !sorts_before("PM010", "PM01"));
        assert!(
            starts_with("PR001", "PR") && !starts_with("PC001", "PR") && !starts_with("P", "PR")
        );
        let second = CodeInfo {
            code: "PR002",
            ..SAMPLE
        };
        assert_table(&[SAMPLE, second]);
        let refused =
            |table: &'static [CodeInfo]| std::panic::catch_unwind(|| assert_table(table)).is_err();
        assert!(refused(&[SAMPLE, SAMPLE]));
        assert!(refused(&[
            CodeInfo {
                code: "PR002",
                ..SAMPLE
            },
            SAMPLE
        ]));
        assert!(refused(&[CodeInfo {
            stage: Stage::Model,
            ..SAMPLE
        }]));
    }

    #[test]
    fn the_document_shows_severity_inventory_and_sections() {
        assert_eq!(
            SAMPLE.document(),
            "PR001 sample-rule (default severity: warning; needs --inventory)\n\nA | in a summary.\n"
        );
        let documented = CodeInfo {
            doc: Some(Doc {
                what: "w\n",
                why: "y",
                example: "e\n",
                instead: "i",
                references: "r",
            }),
            needs_inventory: false,
            ..SAMPLE
        };
        assert!(documented.document().starts_with(
            "PR001 sample-rule (default severity: warning)\n\nA | in a summary.\n\n## What it does\n\nw\n\n## Why"
        ));
        assert!(documented.is("pr001") && documented.is("SAMPLE-RULE") && !documented.is("PR00"));
    }
}
