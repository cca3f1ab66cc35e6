//! `porin schema`: print the JSON Schema of the policy model.

use std::io::Write;

use anyhow::Context;
use clap::Args;

use crate::output::Status;

/// Arguments of `porin schema` (none yet).
#[derive(Debug, Args)]
pub struct SchemaArgs {}

/// Prints `schema/policy.schema.json` as generated from the model.
pub fn run(_args: &SchemaArgs) -> anyhow::Result<Status> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(porin_model::schema::policy_schema_json().as_bytes())
        .context("cannot write to standard output")?;
    Ok(Status::Clean)
}
