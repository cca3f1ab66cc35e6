//! `porin explain [CODE]`: the documentation of a diagnostic code (What it
//! does / Why is this bad / Example / Use instead / References for lint
//! rules `PR0xx`; the summary for model codes `PM0xx`), or the list of all
//! codes.

use std::io::Write;

use anyhow::{Context, bail};
use clap::Args;
use porin_lint::codes;

use crate::output::Status;

/// Arguments of `porin explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A code (`PR001`) or rule name (`map-capacity-exceeded`); none lists every code.
    pub code: Option<String>,
}

/// The text `porin explain` prints.
pub fn explain(code: Option<&str>) -> anyhow::Result<String> {
    let Some(code) = code else {
        let mut text = String::from("Lint rules (porin lint):\n");
        for rule in codes::ALL {
            text.push_str(&format!(
                "  {} {:<26} {:<7} {}\n",
                rule.code,
                rule.name,
                rule.severity.as_str(),
                rule.summary
            ));
        }
        text.push_str("\nPolicy validation (porin lint, porin-model):\n");
        for info in porin_model::codes::ALL {
            text.push_str(&format!(
                "  {} {:<26} {}\n",
                info.code, info.name, info.summary
            ));
        }
        text.push_str("\nCompilation (porin compile, porin lint --inventory):\n");
        for (code, name, meaning) in porin_compiler::resolve::codes::ALL {
            text.push_str(&format!("  {code} {name:<26} {meaning}\n"));
        }
        text.push_str("\n`porin explain CODE` prints a rule's documentation.\n");
        return Ok(text);
    };
    if let Some(rule) = codes::lookup(code) {
        return Ok(rule.document());
    }
    if let Some(info) = porin_model::codes::ALL
        .iter()
        .find(|c| c.code.eq_ignore_ascii_case(code) || c.name.eq_ignore_ascii_case(code))
    {
        return Ok(format!("{} {}\n\n{}\n", info.code, info.name, info.summary));
    }
    if let Some((code, name, meaning)) = porin_compiler::resolve::codes::ALL
        .iter()
        .find(|(c, n, _)| c.eq_ignore_ascii_case(code) || n.eq_ignore_ascii_case(code))
    {
        return Ok(format!("{code} {name}\n\n{meaning}\n"));
    }
    bail!("unknown code `{code}`; `porin explain` lists every code")
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
