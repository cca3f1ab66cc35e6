//! `porin lint PATH...`: load and validate policies, print the findings.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use porin_model::diagnostic::{render_human_all, render_json};
use porin_model::{Diagnostic, LoadLimits, Severity, load_paths};

use crate::output::{Format, Status};

/// Arguments of `porin lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// Files or directories (searched recursively for *.yaml, *.yml, *.json); `-` reads standard input.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Also print notes (e.g. documents skipped because they are not policies).
    #[arg(short, long)]
    pub verbose: bool,
    /// Largest input file, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = LoadLimits::default().max_file_bytes)]
    pub max_file_bytes: u64,
}

/// Runs the lint: exit 0 when no error was found, 1 otherwise, 2 when a path
/// cannot be read.
pub fn run(args: &LintArgs) -> anyhow::Result<Status> {
    let limits = LoadLimits {
        max_file_bytes: args.max_file_bytes,
        ..LoadLimits::default()
    };
    let outcome = load_paths(&args.paths, &limits)?;
    let status = if outcome.has_errors() {
        Status::Findings
    } else {
        Status::Clean
    };
    let text = match args.format {
        Format::Json => {
            let mut text = render_json(&outcome.diagnostics);
            text.push('\n');
            text
        }
        Format::Human => {
            let shown: Vec<Diagnostic> = outcome
                .diagnostics
                .iter()
                .filter(|d| args.verbose || d.severity != Severity::Info)
                .cloned()
                .collect();
            let mut text = render_human_all(&shown, &outcome.sources);
            let policies = outcome.documents.len();
            text.push_str(&format!(
                "{policies} valid {} loaded\n",
                if policies == 1 { "policy" } else { "policies" }
            ));
            text
        }
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    Ok(status)
}
