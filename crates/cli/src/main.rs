//! `porin`: lint, compile, test and emit Cilium-compatible network policy.

mod commands;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// porin: Cilium-compatible network policy, compiled and proven.
#[derive(Debug, Parser)]
#[command(name = "porin", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compile policies against an inventory into per-endpoint map state.
    Compile(commands::compile::Args),
    /// Decide one flow and explain the decision.
    Query(commands::query::Args),
    /// Run policy test files.
    Test(commands::test::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Compile(args) => commands::compile::run(args),
        Command::Query(args) => commands::query::run(args),
        Command::Test(args) => Ok(commands::test::run(args)),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
