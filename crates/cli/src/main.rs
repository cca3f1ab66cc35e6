//! `porin`: lint, compile, test and emit Cilium-compatible network policy.
//!
//! One module per subcommand under [`commands`]; output formats and exit
//! codes are shared in [`output`].
//!
//! # Exit codes
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | ran, and found no error (warnings and notes may be printed) |
//! | 1 | ran, and found at least one error (invalid YAML, invalid policy, ...) |
//! | 2 | could not run: bad arguments, unreadable path, output failure |

mod allocator;
mod commands;
mod limit_flags;
mod output;
mod project_config;
mod render;
mod target_flags;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// porin compiles Cilium-compatible network policy and proves what it compiled.
#[derive(Debug, Parser)]
#[command(name = "porin", version, about, long_about = None)]
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
    /// Validate policy files the way a Cilium 1.19 cluster would.
    Lint(commands::lint::LintArgs),
    /// Print the JSON Schema of the policy model (for yaml-language-server).
    Schema(commands::schema::SchemaArgs),
    /// Print the documentation of a diagnostic code (`porin explain PR001`).
    Explain(commands::explain::ExplainArgs),
    /// Write the allowed connectivity between workloads as Graphviz DOT.
    Graph(commands::graph::GraphArgs),
    /// Show how connectivity changes between two policy versions.
    Diff(commands::diff::DiffArgs),
    /// Replay recorded Hubble flows under policies: what they would break or open.
    Replay(commands::replay::ReplayArgs),
    /// Write least-privilege policies from recorded Hubble flows.
    Suggest(commands::suggest::SuggestArgs),
    /// Run the language server on standard input and output (for editors).
    Lsp(commands::lsp::LspArgs),
    /// Enforce policies on this host's interfaces (microVM taps, container veths), live.
    Agent(commands::agent::AgentArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Compile(args) => commands::compile::run(args),
        Command::Query(args) => commands::query::run(args),
        Command::Test(args) => Ok(commands::test::run(args)),
        Command::Lint(args) => commands::lint::run(args).map(ExitCode::from),
        Command::Schema(args) => commands::schema::run(args).map(ExitCode::from),
        Command::Explain(args) => commands::explain::run(args).map(ExitCode::from),
        Command::Graph(args) => commands::graph::run(args),
        Command::Diff(args) => commands::diff::run(args),
        Command::Replay(args) => commands::replay::run(args),
        Command::Suggest(args) => commands::suggest::run(args),
        Command::Lsp(args) => commands::lsp::run(args).map(ExitCode::from),
        Command::Agent(args) => commands::agent::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("porin: error: {}", error_chain(&error));
            output::Status::CouldNotRun.into()
        }
    }
}

/// The error and its causes, `: `-separated like anyhow's `{:#}`, but
/// without a cause that the message before it already ends with (library
/// errors such as `cannot read `x`: No such file or directory` print their
/// source themselves, which would otherwise appear twice).
fn error_chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.is_empty() {
            text = cause;
        } else if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let inner = anyhow::Error::new(io).context("cannot read `x`: No such file");
        let outer = inner.context("cannot load the inventory x");
        assert_eq!(
            error_chain(&outer),
            "cannot load the inventory x: cannot read `x`: No such file"
        );
        let plain = anyhow::anyhow!("root cause").context("while doing y");
        assert_eq!(error_chain(&plain), "while doing y: root cause");
    }
}
