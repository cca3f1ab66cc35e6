//! `porin test FILE_OR_DIR... [--engine reference|kernel|both]`
//!
//! Runs policy test files (shared/docs/policy-test-format.md): one
//! `PASS`/`FAIL` line per case, then `N passed, M failed`. Exit codes: 0
//! every case passed, 1 a case failed, 2 a file could not be read, parsed
//! or validated (reasons on stderr, with file:line).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args as ClapArgs, ValueEnum};
use porin_compiler::limits::Limits;
use porin_compiler::policytest::{Engine, run_with_limits};

use crate::limits::LimitArgs;

/// The engine deciding the cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// The reference evaluator in user space (default).
    Reference,
    /// porin's eBPF object in the running kernel (root only).
    Kernel,
    /// Both; disagreements fail.
    Both,
}

/// Arguments of `porin test`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Test files, or directories searched for `kind: PolicyTest` files.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Which engine decides the cases.
    #[arg(long, value_enum, default_value_t = EngineArg::Reference)]
    pub engine: EngineArg,
    /// Resource limits (the test file's inventory, its policies, the
    /// compilation).
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Runs `porin test`.
pub fn run(args: &Args) -> ExitCode {
    let engine = match args.engine {
        EngineArg::Reference => Engine::Reference,
        EngineArg::Kernel => Engine::Kernel,
        EngineArg::Both => Engine::Both,
    };
    // The kernel engine lives in porin-ebpf (it loads porin's object);
    // the reference engine is the compiler's runner.
    let limits = args.limits.limits();
    let report = match engine {
        Engine::Reference => run_with_limits(&args.paths, engine, &limits),
        Engine::Kernel | Engine::Both => {
            if limits != Limits::default() {
                // porin-ebpf's engine prepares test files itself, under
                // the default limits; say so rather than ignore a flag.
                eprintln!(
                    "note: the kernel engine compiles under the default limits; the limit flags apply to --engine reference"
                );
            }
            porin_ebpf::engine::run(&args.paths, engine)
        }
    };
    for line in &report.lines {
        println!("{line}");
    }
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    for error in &report.errors {
        eprintln!("error: {error}");
    }
    println!("{}", report.summary());
    ExitCode::from(u8::try_from(report.exit_code()).unwrap_or(2))
}
