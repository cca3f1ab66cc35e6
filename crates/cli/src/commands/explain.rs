//! `porin explain [CODE]`: the registry entry of a diagnostic code of any
//! stage (title with the default severity, summary and, where written,
//! What it does / Why is this bad / Example / Use instead / References),
//! or the list of every code of every stage.

use std::io::Write;

use anyhow::{Context, anyhow};
use clap::Args;
use porin_lint::codes;
use porin_model::Stage;

use crate::output::Status;

/// Arguments of `porin explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A code (`PR001`) or name (`map-capacity-exceeded`); none lists every code.
    pub code: Option<String>,
}

/// The heading of a stage's codes in the list.
fn heading(stage: Stage) -> &'static str {
    match stage {
        Stage::Lint => "Lint (porin lint)",
        Stage::Flows => "Recorded flows (porin replay, diff --flows, suggest)",
        Stage::Model => "Policy validation (porin lint, porin-model)",
        Stage::Compiler => "Compilation (porin compile, porin lint --inventory)",
    }
}

/// The text `porin explain` prints.
pub fn explain(code: Option<&str>) -> anyhow::Result<String> {
    let Some(code) = code else {
        let mut text = String::new();
        let mut stage = None;
        for info in codes::every_stage() {
            if stage != Some(info.stage) {
                if stage.is_some() {
                    text.push('\n');
                }
                text.push_str(heading(info.stage));
                text.push_str(":\n");
                stage = Some(info.stage);
            }
            text.push_str(&format!(
                "  {} {:<26} {:<7} {}\n",
                info.code,
                info.name,
                info.severity.as_str(),
                info.summary
            ));
        }
        text.push_str("\n`porin explain CODE` prints a code's documentation.\n");
        return Ok(text);
    };
    codes::find(code)
        .map(porin_model::CodeInfo::document)
        .ok_or_else(|| anyhow!("unknown code `{code}`; `porin explain` lists every code"))
}

/// Runs `porin explain`.
pub fn run(args: &ExplainArgs) -> anyhow::Result<Status> {
    let text = explain(args.code.as_deref())?;
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    Ok(Status::Clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list and the entries come from the registry: every code of every
    /// stage is listed once and explains itself (no name of another stage
    /// shadows its code).
    #[test]
    fn every_code_of_every_stage_is_listed_and_explained() {
        let list = explain(None).unwrap();
        for info in codes::every_stage() {
            let line = format!(
                "  {} {:<26} {:<7} ",
                info.code,
                info.name,
                info.severity.as_str()
            );
            assert_eq!(list.matches(&line).count(), 1, "{} in the list", info.code);
            let text = explain(Some(&info.code.to_ascii_lowercase())).unwrap();
            assert!(
                text.starts_with(&format!(
                    "{} {} (default severity: {}",
                    info.code,
                    info.name,
                    info.severity.as_str()
                )),
                "{text}"
            );
        }
        for stage in [Stage::Lint, Stage::Model, Stage::Compiler] {
            assert_eq!(list.matches(&format!("{}:\n", heading(stage))).count(), 1);
        }
        assert!(explain(Some("PR999")).is_err());
    }
}
