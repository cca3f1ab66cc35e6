//! Diagnostics: the data model every stage reports findings in, and the
//! renderers (human, compiler-like; JSON).
//!
//! A diagnostic is data: a stable code, a severity, a one-phrase
//! message, a primary location, related locations, notes and help. Stages
//! produce them; the CLI and the C API render them. Codes are `PM0xx`
//! (model), `PC0xx` (compiler), `PR0xx` (lint), each documented once in the
//! code registry ([`crate::registry`]), which also gives a finding its
//! default severity.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

// Severity is the registry's (each code states its default there); the
// diagnostics type re-exports it, where users look for it.
use crate::registry::CodeInfo;
pub use crate::registry::Severity;

/// A place in an input file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Location {
    /// Display path of the file (`<stdin>` for standard input).
    pub file: String,
    /// 0-based index of the YAML document in the file.
    pub document: usize,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    /// Field path inside the document, e.g. `spec.ingress[0].toPorts[1].ports[0].port`.
    pub route: String,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Stable code, e.g. `PM021`.
    pub code: &'static str,
    /// Severity.
    pub severity: Severity,
    /// One-phrase message.
    pub message: String,
    /// Where the problem is; `None` for findings about no particular place.
    pub primary: Option<Location>,
    /// Other places that explain the finding, each with a label.
    pub related: Vec<(Location, String)>,
    /// Background facts (e.g. the Cilium rule being applied).
    pub notes: Vec<String>,
    /// What would be valid.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A finding of `code` with its message, at the code's default
    /// severity (from the registry).
    pub fn new(code: CodeInfo, message: impl Into<String>) -> Self {
        Diagnostic {
            code: code.code,
            severity: code.severity,
            message: message.into(),
            primary: None,
            related: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    /// Sets a severity other than the code's default, for the few
    /// conditions that are milder (or graver) than the rest of their code,
    /// e.g. an ipcache above the warning fraction (PR003, an error when
    /// full). The caller says why.
    #[must_use]
    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }

    /// Sets the primary location.
    #[must_use]
    pub fn at(mut self, location: Location) -> Self {
        self.primary = Some(location);
        self
    }

    /// Adds a note.
    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    /// Sets the help text.
    #[must_use]
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// True for [`Severity::Error`].
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The text of every input file, so renderers can quote source lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceMap {
    files: BTreeMap<String, String>,
}

impl SourceMap {
    /// Records (or replaces) the text of a file.
    pub fn insert(&mut self, file: impl Into<String>, text: impl Into<String>) {
        self.files.insert(file.into(), text.into());
    }

    /// Replaces the text of a recorded file, giving the old one back
    /// (`None`, and nothing recorded, when there is no such file): the
    /// incremental re-parse swaps texts without copying them.
    pub(crate) fn replace(&mut self, file: &str, text: String) -> Option<String> {
        self.files
            .get_mut(file)
            .map(|old| std::mem::replace(old, text))
    }

    /// The bytes of every recorded text together (what a load read).
    pub fn total_bytes(&self) -> u64 {
        self.files
            .values()
            .map(|text| u64::try_from(text.len()).unwrap_or(u64::MAX))
            .fold(0, u64::saturating_add)
    }

    /// The text of a file.
    pub fn get(&self, file: &str) -> Option<&str> {
        self.files.get(file).map(String::as_str)
    }

    /// Line `line` (1-based) of a file, without its line break.
    pub fn line(&self, file: &str, line: u32) -> Option<&str> {
        let index = usize::try_from(line).ok()?.checked_sub(1)?;
        self.get(file)?
            .split('\n')
            .nth(index)
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
    }

    /// Merges another map into this one.
    pub fn extend(&mut self, other: SourceMap) {
        self.files.extend(other.files);
    }
}

/// Width of the token starting at `column` (1-based, in characters) on `line`,
/// for the caret underline: a quoted string to its closing quote, otherwise
/// up to the next blank or YAML flow indicator. At least 1. (Public for
/// renderers that mark a range instead of a point, e.g. the language server.)
pub fn token_width(line: &str, column: u32) -> usize {
    let start = usize::try_from(column.saturating_sub(1)).unwrap_or(usize::MAX);
    let rest: Vec<char> = line.chars().skip(start).collect();
    let Some(&first) = rest.first() else {
        return 1;
    };
    let width = if first == '"' || first == '\'' {
        rest.iter()
            .skip(1)
            .position(|&c| c == first)
            .map_or(rest.len(), |end| end + 2)
    } else {
        rest.iter()
            .position(|&c| c.is_whitespace() || matches!(c, ',' | ']' | '}' | '#'))
            .unwrap_or(rest.len())
    };
    let width = if first != '"' && first != '\'' {
        // A key's underline stops before its colon.
        rest.iter()
            .take(width)
            .position(|&c| c == ':')
            .filter(|&colon| colon > 0)
            .unwrap_or(width)
    } else {
        width
    };
    width.max(1)
}

fn render_snippet(
    out: &mut String,
    sources: &SourceMap,
    location: &Location,
    marker: char,
    label: &str,
    width: usize,
) {
    let number = format!("{:>width$}", location.line);
    let gutter = " ".repeat(width);
    let _ = writeln!(
        out,
        "{gutter}--> {}:{}:{} (document {})",
        location.file, location.line, location.column, location.document
    );
    if let Some(text) = sources.line(&location.file, location.line) {
        let pad = " ".repeat(usize::try_from(location.column.saturating_sub(1)).unwrap_or(0));
        let underline: String =
            std::iter::repeat_n(marker, token_width(text, location.column)).collect();
        let _ = writeln!(out, "{gutter} |");
        let _ = writeln!(out, "{number} | {text}");
        if label.is_empty() {
            let _ = writeln!(out, "{gutter} | {pad}{underline}");
        } else {
            let _ = writeln!(out, "{gutter} | {pad}{underline} {label}");
        }
    }
    if !location.route.is_empty() {
        let _ = writeln!(out, "{gutter} = at: {}", location.route);
    }
}

/// Renders one diagnostic like a compiler does:
///
/// ```text
/// error[PM021]: unable to parse port: ... value out of range
///   --> policy.yaml:12:19 (document 0)
///    |
/// 12 |       - port: "99999"
///    |               ^^^^^^^
///    = at: spec.ingress[0].toPorts[0].ports[0].port
///    = help: a port is a number 0-65535 or a port name
/// ```
pub fn render_human(diagnostic: &Diagnostic, sources: &SourceMap) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}[{}]: {}",
        diagnostic.severity.as_str(),
        diagnostic.code,
        diagnostic.message
    );
    // One gutter width for the whole diagnostic, as wide as the widest line number.
    let width = diagnostic
        .primary
        .iter()
        .chain(diagnostic.related.iter().map(|(location, _)| location))
        .map(|location| location.line.to_string().len())
        .max()
        .unwrap_or(1);
    if let Some(location) = &diagnostic.primary {
        render_snippet(&mut out, sources, location, '^', "", width);
    }
    for (location, label) in &diagnostic.related {
        render_snippet(&mut out, sources, location, '-', label, width);
    }
    let gutter = " ".repeat(width);
    for note in &diagnostic.notes {
        let _ = writeln!(out, "{gutter} = note: {note}");
    }
    if let Some(help) = &diagnostic.help {
        let _ = writeln!(out, "{gutter} = help: {help}");
    }
    out
}

/// Renders every diagnostic in human form, separated by blank lines, with a
/// closing summary line (`2 errors, 1 warning`).
pub fn render_human_all(diagnostics: &[Diagnostic], sources: &SourceMap) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        out.push_str(&render_human(diagnostic, sources));
        out.push('\n');
    }
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .count();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let _ = writeln!(
        out,
        "{}, {}",
        plural(errors, "error"),
        plural(warnings, "warning")
    );
    out
}

/// Renders diagnostics as a JSON array (stable field names: `code`,
/// `severity`, `message`, `primary`, `related`, `notes`, `help`).
pub fn render_json(diagnostics: &[Diagnostic]) -> String {
    serde_json::to_string_pretty(diagnostics).unwrap_or_else(|error| {
        format!("[{{\"code\":\"PM000\",\"severity\":\"error\",\"message\":\"cannot render diagnostics: {error}\"}}]")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_covers_quoted_token() {
        assert_eq!(token_width("  - port: \"99999\"", 11), 7);
        assert_eq!(token_width("  fromEndpoint:", 3), 12);
        assert_eq!(token_width("x", 5), 1);
    }
}
