//! `porin graph POLICIES... --inventory FILE_OR_DIR`: the allowed
//! connectivity between workloads as Graphviz DOT (built with petgraph).
//!
//! A node per endpoint, plus `world` (addresses outside the cluster and
//! every policy prefix: identity `world-ipv4` over IPv4 and `world-ipv6`
//! over IPv6, as a dual-stack agent maps `0.0.0.0/0` and `::/0`,
//! `daemon/cmd/hostips-sync.go`). An edge A → B means a new connection from
//! A to B is allowed by both A's egress policy and B's ingress policy, on
//! the ports in its label (exact: every port class cut by the keys of
//! both maps is evaluated). Edges to and from `world` check one side only
//! (world has no policy), in each family the endpoint has an address in;
//! when the families differ the label says which is which (`IPv4: TCP/80;
//! IPv6: any`). Self-edges are left out.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use petgraph::dot::{Config, Dot};
use petgraph::graph::{DiGraph, NodeIndex};
use porin_compiler::compile::EndpointPolicy;
use porin_compiler::ipcache::Family;
use porin_compiler::mapstate::Direction;
use porin_connectivity::flows::{PortRange, allowed, describe};

use super::compile::load_and_compile;
use crate::limit_flags::LimitArgs;

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
        for (i, endpoint) in compiled.endpoints.iter().enumerate() {
            if let Some(label) = world_label(endpoint, Direction::Egress) {
                graph.add_edge(nodes[i], world, label);
            }
            if let Some(label) = world_label(endpoint, Direction::Ingress) {
                graph.add_edge(world, nodes[i], label);
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

/// The label of the edge between an endpoint and `world` in `direction`:
/// what the world identity of each family the endpoint has an address in
/// may do (world-ipv4 over IPv4, world-ipv6 over IPv6). One description
/// when the families agree, `IPv4: ...; IPv6: ...` when they differ;
/// `None` when no family passes.
fn world_label(endpoint: &EndpointPolicy, direction: Direction) -> Option<String> {
    let families: BTreeSet<Family> = endpoint.ips.iter().map(|ip| Family::of(*ip)).collect();
    let per_family: Vec<(Family, Vec<PortRange>)> = families
        .into_iter()
        .map(|family| {
            let id = family.world_identity().get();
            (family, allowed(&[(&endpoint.state, direction, id)]))
        })
        .collect();
    if per_family.iter().all(|(_, ranges)| ranges.is_empty()) {
        return None;
    }
    if per_family.windows(2).all(|w| w[0].1 == w[1].1) {
        return per_family.first().map(|(_, ranges)| describe(ranges));
    }
    Some(
        per_family
            .iter()
            .filter(|(_, ranges)| !ranges.is_empty())
            .map(|(family, ranges)| format!("{family}: {}", describe(ranges)))
            .collect::<Vec<_>>()
            .join("; "),
    )
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
