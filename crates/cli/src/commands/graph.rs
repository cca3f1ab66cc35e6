//! `porin graph POLICIES... --inventory FILE_OR_DIR`: the allowed
//! connectivity between workloads ([`porin_connectivity::graph`]) as
//! Graphviz DOT (node ids are the workload names), a standalone SVG, or
//! an HTML page with the SVG and a legend (laid out by
//! [`porin_connectivity::render`], no Graphviz needed).
//!
//! Wildcard edges (to or from the world, every port, a fan from or to
//! every other endpoint) are dashed and coloured; `--collapse wildcards`
//! draws each fan as one edge from or to an "every other endpoint" node.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use porin_connectivity::graph::Graph;
use porin_connectivity::render::{to_html, to_svg};

use super::compile::load_and_compile;
use crate::limit_flags::LimitArgs;
use crate::target_flags::TargetArgs;

/// Arguments of `porin graph`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Policy files or directories.
    #[arg(required = true)]
    pub policies: Vec<PathBuf>,
    /// Inventory (porin inventory, Kubernetes manifests or a Cilium dump).
    #[arg(long)]
    pub inventory: PathBuf,
    /// Leave out the `world` node.
    #[arg(long)]
    pub no_world: bool,
    /// Output format: Graphviz DOT, SVG, or an HTML page (SVG and legend).
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    pub format: GraphFormat,
    /// `wildcards`: draw each fan (an endpoint every other endpoint
    /// reaches, or that reaches every other endpoint, on the same ports)
    /// as one edge from or to an "every other endpoint" node.
    #[arg(long, value_enum)]
    pub collapse: Option<Collapse>,
    /// The Cilium the policies are for.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Resource limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Output formats of `porin graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT.
    Dot,
    /// A standalone SVG document.
    Svg,
    /// An HTML page with the SVG and a legend.
    Html,
}

/// What `--collapse` collapses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Collapse {
    /// Fans of any-peer edges.
    Wildcards,
}

/// Runs `porin graph`.
pub fn run(args: &GraphArgs) -> anyhow::Result<ExitCode> {
    let Ok((compiled, _)) = load_and_compile(
        &args.policies,
        &args.inventory,
        &args.limits.limits(),
        &args.target.choice(),
    )?
    else {
        return Ok(ExitCode::from(1));
    };
    let mut graph = Graph::build(&compiled, !args.no_world);
    if args.collapse == Some(Collapse::Wildcards) {
        graph = graph.collapse_wildcards();
    }
    let text = match args.format {
        GraphFormat::Dot => graph.to_dot(),
        GraphFormat::Svg => to_svg(&graph),
        GraphFormat::Html => to_html(&graph, "porin graph: allowed connectivity"),
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    Ok(ExitCode::SUCCESS)
}
