//! Renderers of lint findings beyond the model's human and JSON ones:
//! SARIF 2.1.0 ([`sarif`]), JUnit XML ([`junit`]) and GitHub Actions
//! workflow commands ([`github`]); plus terminal colour for the human form.

pub mod github;
pub mod junit;
pub mod sarif;

use std::io::IsTerminal as _;

use clap::ValueEnum;
use porin_model::diagnostic::Severity;

/// Output formats of `porin lint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LintFormat {
    /// Compiler-style text with source excerpts and carets (colour on a terminal).
    #[default]
    Human,
    /// A JSON array of diagnostics.
    Json,
    /// SARIF 2.1.0 (GitHub code scanning).
    Sarif,
    /// JUnit XML: one test case per lint rule.
    Junit,
    /// GitHub Actions workflow commands (`::error file=...::`).
    Github,
}

/// Which severity fails the run (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum FailOn {
    /// Errors only (default).
    #[default]
    Error,
    /// Errors and warnings.
    Warning,
    /// Never (report only).
    Never,
}

impl FailOn {
    /// Whether a finding of this severity fails the run.
    pub fn fails(self, severity: Severity) -> bool {
        match self {
            FailOn::Error => severity == Severity::Error,
            FailOn::Warning => matches!(severity, Severity::Error | Severity::Warning),
            FailOn::Never => false,
        }
    }
}

/// Whether to colour standard output: a terminal, and neither `NO_COLOR`
/// nor `TERM=dumb`.
pub fn use_colour() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none()
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// Colours the severity heading and caret lines of human output with ANSI
/// escapes (red errors, yellow warnings, cyan notes, bold locations).
pub fn colourise(text: &str) -> String {
    const RED: &str = "\x1b[1;31m";
    const YELLOW: &str = "\x1b[1;33m";
    const CYAN: &str = "\x1b[1;36m";
    const BLUE: &str = "\x1b[1;34m";
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let coloured = if let Some(rest) = body.strip_prefix("error[") {
            format!("{RED}error[{rest}{RESET}")
        } else if let Some(rest) = body.strip_prefix("warning[") {
            format!("{YELLOW}warning[{rest}{RESET}")
        } else if let Some(rest) = body.strip_prefix("info[") {
            format!("{CYAN}info[{rest}{RESET}")
        } else if body.trim_start().starts_with("-->") || body.trim_start().starts_with("= ") {
            format!("{BLUE}{body}{RESET}")
        } else if body.contains(" | ") && body.trim_end().ends_with(['^', '-'])
            || body.contains('^') && body.trim_start().starts_with('|')
        {
            format!("{RED}{body}{RESET}")
        } else {
            body.to_owned()
        };
        out.push_str(&coloured);
        out.push_str(newline);
    }
    out
}

/// FNV-1a 64-bit: a tiny, stable, dependency-free hash for fingerprints.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_the_reference_function() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn colour_marks_headings_only_when_asked() {
        let text = "error[PR001]: x\n --> f:1:1\nplain\n";
        let coloured = colourise(text);
        assert!(coloured.starts_with("\x1b[1;31merror[PR001]"));
        assert!(coloured.contains("plain\n"));
    }

    #[test]
    fn fail_on_levels() {
        assert!(FailOn::Error.fails(Severity::Error));
        assert!(!FailOn::Error.fails(Severity::Warning));
        assert!(FailOn::Warning.fails(Severity::Warning));
        assert!(!FailOn::Warning.fails(Severity::Info));
        assert!(!FailOn::Never.fails(Severity::Error));
    }
}
