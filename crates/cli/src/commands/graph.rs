//! `porin graph POLICIES... --inventory FILE_OR_DIR`: the allowed
//! connectivity between workloads as Graphviz DOT (built with petgraph).
//!
//! A node per endpoint, plus `world` (addresses outside the cluster, as
//! IPv4 identity `world-ipv4`). An edge A → B means a new connection from
//! A to B is allowed by both A's egress policy and B's ingress policy, on
//! the ports in its label (exact: every port class cut by the keys of
//! both maps is evaluated). Edges to and from `world` check one side only
//! (world has no policy). Self-edges are left out.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use petgraph::dot::{Config, Dot};
use petgraph::graph::{DiGraph, NodeIndex};
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::Direction;
use porin_connectivity::flows::{allowed, describe};

use super::compile::load_and_compile;
use crate::limits::LimitArgs;

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
    /// Resource limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// A node: an endpoint or `world`.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    world: bool,
}

/// Runs `porin graph`.
pub fn run(args: &GraphArgs) -> anyhow::Result<ExitCode> {
    let Ok((compiled, _)) =
        load_and_compile(&args.policies, &args.inventory, &args.limits.limits())?
    else {
        return Ok(ExitCode::from(1));
    };
    let mut graph: DiGraph<Node, String> = DiGraph::new();
    let nodes: Vec<NodeIndex> = compiled
        .endpoints
        .iter()
        .map(|e| {
            graph.add_node(Node {
                name: e.display_name(),
                world: false,
            })
        })
        .collect();
    for (i, a) in compiled.endpoints.iter().enumerate() {
        for (j, b) in compiled.endpoints.iter().enumerate() {
            if i == j {
                continue;
            }
            let ranges = allowed(&[
                (&a.state, Direction::Egress, b.identity),
                (&b.state, Direction::Ingress, a.identity),
            ]);
            if !ranges.is_empty() {
                graph.add_edge(nodes[i], nodes[j], describe(&ranges));
            }
        }
    }
    if !args.no_world {
        let world = graph.add_node(Node {
            name: "world".to_owned(),
            world: true,
        });
        let id = Identity::WORLD_IPV4.get();
        for (i, endpoint) in compiled.endpoints.iter().enumerate() {
            let out = allowed(&[(&endpoint.state, Direction::Egress, id)]);
            if !out.is_empty() {
                graph.add_edge(nodes[i], world, describe(&out));
            }
            let inbound = allowed(&[(&endpoint.state, Direction::Ingress, id)]);
            if !inbound.is_empty() {
                graph.add_edge(world, nodes[i], describe(&inbound));
            }
        }
    }
    let dot = render(&graph);
    std::io::stdout()
        .lock()
        .write_all(dot.as_bytes())
        .context("cannot write to standard output")?;
    Ok(ExitCode::SUCCESS)
}

fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn render(graph: &DiGraph<Node, String>) -> String {
    let dot = Dot::with_attr_getters(
        graph,
        &[Config::EdgeNoLabel, Config::NodeNoLabel],
        &|_, edge| format!("label = {}", quote(edge.weight())),
        &|_, (_, node)| {
            let shape = if node.world { "ellipse" } else { "box" };
            format!("label = {} shape = {shape}", quote(&node.name))
        },
    );
    format!("{dot:?}")
}
