//! Output formats and exit statuses shared by every subcommand.

use std::process::ExitCode;

use clap::ValueEnum;

/// How findings are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Format {
    /// Compiler-style: `error[PM021]: ...`, `--> file:line:col`, the source line and a caret.
    #[default]
    Human,
    /// A JSON array of diagnostics (`code`, `severity`, `message`, `primary`, `related`, `notes`, `help`).
    Json,
}

/// The process outcome; see the exit-code table in `main.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exit 0: no error found.
    Clean,
    /// Exit 1: at least one error finding.
    Findings,
    /// Exit 2: porin could not do its job (arguments, I/O).
    CouldNotRun,
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> ExitCode {
        match status {
            Status::Clean => ExitCode::from(0),
            Status::Findings => ExitCode::from(1),
            Status::CouldNotRun => ExitCode::from(2),
        }
    }
}
