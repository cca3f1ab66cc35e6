//! `porin suggest --flows FILE... --inventory INV [--output FILE]`:
//! least-privilege CiliumNetworkPolicies from recorded traffic.
//!
//! One policy per workload of the recording that allows exactly what
//! Cilium forwarded (peers by stable labels, CIDRs of outside addresses,
//! entities; ports as observed; DNS egress through the proxy), default
//! deny where nothing was forwarded ([`porin_flows::suggest`]). Check
//! the result with `porin lint` and `porin replay --flows FILE`.
//!
//! Exit codes: 0 written; 1 a line of a flow file was rejected (the
//! policies are written from the others); 2 an input could not be read.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use porin_flows::observe::record;
use porin_flows::reader::ReadLimits;
use porin_flows::suggest::suggest;
use porin_model::loader::LoadOutcome;

use super::compile::compile_loaded;
use crate::limit_flags::LimitArgs;
use crate::target_flags::TargetArgs;

/// Arguments of `porin suggest`.
#[derive(Debug, Args)]
pub struct SuggestArgs {
    /// A flow file (`hubble observe -o json` or `-o jsonpb`; `-` for
    /// standard input); repeat for more files.
    #[arg(long = "flows", value_name = "FILE", required = true)]
    pub flows: Vec<PathBuf>,
    /// Inventory (porin inventory, Kubernetes manifests or a Cilium dump).
    #[arg(long)]
    pub inventory: PathBuf,
    /// Write the policies here instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Longest line of a flow file, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = ReadLimits::default().max_line_bytes)]
    pub max_flow_line_bytes: usize,
    /// The Cilium the policies are decided for.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Resource limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Runs `porin suggest`.
pub fn run(args: &SuggestArgs) -> anyhow::Result<ExitCode> {
    let limits = args.limits.limits();
    // The inventory alone: its endpoints and ipcache, no policy.
    let Ok((compiled, _)) = compile_loaded(
        LoadOutcome::default(),
        &args.inventory,
        &limits,
        &args.target.choice(),
    )?
    else {
        return Ok(ExitCode::from(1));
    };
    let read_limits = ReadLimits {
        max_line_bytes: args.max_flow_line_bytes,
    };
    let recording = record(&args.flows, &[&compiled], read_limits).map_err(anyhow::Error::msg)?;
    for p in &recording.problems {
        eprintln!(
            "{}:{}:{}: {}[{}]: {}",
            p.file,
            p.line,
            p.column,
            p.code.severity.as_str(),
            p.code.code,
            p.message
        );
    }
    let suggestion = suggest(&recording, &compiled);
    match &args.output {
        Some(path) => std::fs::write(path, &suggestion.yaml)
            .with_context(|| format!("cannot write `{}`", path.display()))?,
        None => std::io::stdout()
            .lock()
            .write_all(suggestion.yaml.as_bytes())
            .context("cannot write to standard output")?,
    }
    eprintln!(
        "porin suggest: {} policies allowing {} forwarded flow events ({} lines read)",
        suggestion.policies, suggestion.flows, recording.stats.lines
    );
    Ok(if recording.stats.rejected == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
