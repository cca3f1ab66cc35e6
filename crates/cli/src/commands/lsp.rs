//! `porin lsp [--inventory FILE_OR_DIR] [--config FILE] [--policies PATH]...`:
//! the language server (porin-lsp) on standard input and output. Editors
//! start it; see docs/editors.md.

use std::path::PathBuf;

use clap::Args;

use crate::limit_flags::LimitArgs;
use crate::output::Status;

/// Arguments of `porin lsp`.
#[derive(Debug, Args)]
pub struct LspArgs {
    /// Inventory (as `porin lint --inventory`): the whole policy set is
    /// linted with it, and findings are published per file.
    #[arg(long, value_name = "FILE_OR_DIR")]
    pub inventory: Option<PathBuf>,
    /// Lint configuration (default: `.porin.yaml` in the workspace root, else
    /// in the current directory).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// With --inventory: the policy set (files or directories; default: the
    /// workspace root).
    #[arg(long = "policies", value_name = "PATH")]
    pub policies: Vec<PathBuf>,
    /// Also show info-level findings (as `porin lint -v`).
    #[arg(short, long)]
    pub verbose: bool,
    /// A documentation link for each code, `{code}` replaced by the code
    /// (e.g. `https://docs.example/codes/{code}.html`).
    #[arg(long, value_name = "URL")]
    pub docs_url: Option<String>,
    /// Resource limits (a document over --max-file-bytes is refused).
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Runs the server until the client sends `exit`: exit 0 after `shutdown`,
/// 1 otherwise (the protocol's exit codes).
pub fn run(args: &LspArgs) -> anyhow::Result<Status> {
    let absolute = |p: &PathBuf| porin_lsp::server::absolute(p);
    let options = porin_lsp::Options {
        inventory: args.inventory.as_ref().map(absolute),
        config: args.config.as_ref().map(absolute),
        policies: args.policies.iter().map(absolute).collect(),
        verbose: args.verbose,
        docs_url: args.docs_url.clone(),
        limits: args.limits.limits(),
    };
    let clean = porin_lsp::run_stdio(options)?;
    Ok(if clean {
        Status::Clean
    } else {
        Status::Findings
    })
}
