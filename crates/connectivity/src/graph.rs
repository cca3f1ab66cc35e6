//! The allowed-connectivity graph of `porin graph`: a node per endpoint
//! (its id is its name, `default/frontend`) plus `world`, an edge A → B
//! when a new connection from A to B passes A's egress and B's ingress,
//! labelled with the ports ([`crate::flows::describe`]).
//!
//! Wildcard edges are marked so that renderings can style them apart
//! from the edges a reviewer reads one by one: an edge to or from the
//! world, an edge on every protocol and port (`any`), and an *any-peer*
//! edge, one of a fan: an endpoint that every other endpoint reaches on
//! the same ports (its ingress admits any peer), or that reaches every
//! other endpoint on the same ports (its egress admits any peer).
//! [`Graph::collapse_wildcards`] replaces each fan by one edge from or to
//! the *every other endpoint* node. Renderings: [`Graph::to_dot`] here,
//! SVG and HTML in [`crate::render`].
//!
//! Edges to and from `world` check one side only (world has no policy),
//! in each family the endpoint has an address in (identity `world-ipv4`
//! over IPv4 and `world-ipv6` over IPv6, as a dual-stack agent maps
//! `0.0.0.0/0` and `::/0`, `daemon/cmd/hostips-sync.go`); when the
//! families differ the label says which is which (`IPv4: TCP/80; IPv6:
//! any`). Self-edges are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use porin_compiler::compile::{Compiled, EndpointPolicy};
use porin_compiler::ipcache::Family;
use porin_compiler::mapstate::Direction;

use crate::flows::{Check, PortRange, allowed, between, describe};

/// The id of the world node. Parentheses are in no Kubernetes name, so
/// no endpoint (`namespace/name`) has this id.
pub const WORLD_ID: &str = "(world)";
/// The id of the node that stands for every other endpoint in a
/// collapsed fan.
pub const ANY_ENDPOINT_ID: &str = "(every other endpoint)";

/// The fewest edges a fan has: with fewer, "every other endpoint" is not
/// shorter than the edges.
const MIN_FAN: usize = 2;

/// What a node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// An endpoint of the compilation.
    Endpoint,
    /// Addresses outside the cluster and every policy prefix.
    World,
    /// Every endpoint but the other end of the edge (collapsed fans).
    AnyEndpoint,
}

/// A node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its id: the endpoint's `namespace/name`, [`WORLD_ID`] or
    /// [`ANY_ENDPOINT_ID`].
    pub id: String,
    /// What it shows: the id, `world`, `every other endpoint`.
    pub label: String,
    /// What it stands for.
    pub kind: NodeKind,
}

/// An edge: connections from `from` to `to` are allowed on `label`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// Source node (index into [`Graph::nodes`]).
    pub from: usize,
    /// Destination node.
    pub to: usize,
    /// The ports (`TCP/80, UDP/53`, `any`).
    pub label: String,
    /// To or from the world.
    pub world: bool,
    /// Every protocol, every port.
    pub any_port: bool,
    /// One edge of a fan (or the collapsed fan itself).
    pub any_peer: bool,
}

impl Edge {
    /// Whether the edge is a wildcard of some kind.
    pub fn is_wildcard(&self) -> bool {
        self.world || self.any_port || self.any_peer
    }

    /// The wildcard kind renderings style the edge by: any peer, then
    /// world, then any port; `None` for a specific edge.
    pub fn style(&self) -> Option<EdgeStyle> {
        if self.any_peer {
            Some(EdgeStyle::AnyPeer)
        } else if self.world {
            Some(EdgeStyle::World)
        } else if self.any_port {
            Some(EdgeStyle::AnyPort)
        } else {
            None
        }
    }
}

/// How a wildcard edge is drawn: dashed, in its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EdgeStyle {
    /// A fan from or to every other endpoint.
    AnyPeer,
    /// To or from the world.
    World,
    /// Every protocol and port.
    AnyPort,
}

impl EdgeStyle {
    /// Every style, in legend order.
    pub const ALL: [EdgeStyle; 3] = [Self::AnyPeer, Self::World, Self::AnyPort];

    /// The colour (colour-blind safe palette, Okabe–Ito).
    pub fn colour(self) -> &'static str {
        match self {
            Self::AnyPeer => "#7f7f7f",
            Self::World => "#0072b2",
            Self::AnyPort => "#d55e00",
        }
    }

    /// What the legend says.
    pub fn legend(self) -> &'static str {
        match self {
            Self::AnyPeer => "any peer: every other endpoint, on the same ports",
            Self::World => "world: addresses outside the cluster",
            Self::AnyPort => "any: every protocol and port",
        }
    }
}

/// The colour of a specific edge.
pub const SPECIFIC_COLOUR: &str = "#000000";

/// The allowed-connectivity graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// Nodes: endpoints in compilation order, then world, then the
    /// every-other-endpoint node when fans are collapsed.
    pub nodes: Vec<Node>,
    /// Edges, by source then destination node.
    pub edges: Vec<Edge>,
}

impl Graph {
    /// The graph of a compilation, with the world node unless `world` is
    /// false.
    pub fn build(compiled: &Compiled, world: bool) -> Self {
        let mut graph = Self {
            nodes: compiled
                .endpoints
                .iter()
                .map(|e| Node {
                    id: e.display_name(),
                    label: e.display_name(),
                    kind: NodeKind::Endpoint,
                })
                .collect(),
            edges: Vec::new(),
        };
        for (i, a) in compiled.endpoints.iter().enumerate() {
            for (j, b) in compiled.endpoints.iter().enumerate() {
                if i == j {
                    continue;
                }
                let ranges = between(compiled.mutual_auth, a, b);
                if !ranges.is_empty() {
                    graph.push(i, j, describe(&ranges), false);
                }
            }
        }
        if world {
            let w = graph.nodes.len();
            graph.nodes.push(Node {
                id: WORLD_ID.to_owned(),
                label: "world".to_owned(),
                kind: NodeKind::World,
            });
            for (i, endpoint) in compiled.endpoints.iter().enumerate() {
                if let Some(label) = world_label(compiled, endpoint, Direction::Egress) {
                    graph.push(i, w, label, true);
                }
                if let Some(label) = world_label(compiled, endpoint, Direction::Ingress) {
                    graph.push(w, i, label, true);
                }
            }
        }
        graph.edges.sort_by_key(|e| (e.from, e.to));
        graph.mark_fans();
        graph
    }

    fn push(&mut self, from: usize, to: usize, label: String, world: bool) {
        let any_port = label == "any";
        self.edges.push(Edge {
            from,
            to,
            label,
            world,
            any_port,
            any_peer: false,
        });
    }

    /// The endpoint nodes.
    fn endpoints(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Endpoint)
            .count()
    }

    /// The fans: per (node, direction), the label every edge of its fan
    /// has, for nodes that every other endpoint reaches (ingress) or that
    /// reach every other endpoint (egress) on one label.
    fn fans(&self) -> BTreeMap<(usize, Direction), String> {
        let others = self.endpoints().saturating_sub(1);
        let mut labels: BTreeMap<(usize, Direction), BTreeMap<&str, usize>> = BTreeMap::new();
        for edge in &self.edges {
            let ends = (&self.nodes[edge.from].kind, &self.nodes[edge.to].kind);
            if ends != (&NodeKind::Endpoint, &NodeKind::Endpoint) {
                continue;
            }
            *labels
                .entry((edge.to, Direction::Ingress))
                .or_default()
                .entry(edge.label.as_str())
                .or_default() += 1;
            *labels
                .entry((edge.from, Direction::Egress))
                .or_default()
                .entry(edge.label.as_str())
                .or_default() += 1;
        }
        labels
            .into_iter()
            .filter_map(|(key, by_label)| {
                let mut iter = by_label.into_iter();
                match (iter.next(), iter.next()) {
                    (Some((label, count)), None) if count == others && count >= MIN_FAN => {
                        Some((key, label.to_owned()))
                    }
                    _ => None,
                }
            })
            .collect()
    }

    /// Whether an endpoint-to-endpoint edge belongs to one of `fans`.
    fn in_fan(fans: &BTreeMap<(usize, Direction), String>, edge: &Edge) -> bool {
        fans.contains_key(&(edge.to, Direction::Ingress))
            || fans.contains_key(&(edge.from, Direction::Egress))
    }

    fn mark_fans(&mut self) {
        let fans = self.fans();
        for edge in &mut self.edges {
            if !edge.world && Self::in_fan(&fans, edge) {
                edge.any_peer = true;
            }
        }
    }

    /// The graph with each fan replaced by one edge from (ingress) or to
    /// (egress) the every-other-endpoint node; the same graph when there
    /// is no fan. Each edge left out is one the new edge stands for, with
    /// the same label.
    pub fn collapse_wildcards(&self) -> Self {
        let fans = self.fans();
        if fans.is_empty() {
            return self.clone();
        }
        let mut out = Self {
            nodes: self.nodes.clone(),
            edges: Vec::new(),
        };
        let any = out.nodes.len();
        out.nodes.push(Node {
            id: ANY_ENDPOINT_ID.to_owned(),
            label: "every other endpoint".to_owned(),
            kind: NodeKind::AnyEndpoint,
        });
        out.edges = self
            .edges
            .iter()
            .filter(|e| e.world || !Self::in_fan(&fans, e))
            .cloned()
            .collect();
        for ((node, direction), label) in fans {
            let (from, to) = match direction {
                Direction::Ingress => (any, node),
                Direction::Egress => (node, any),
            };
            out.edges.push(Edge {
                from,
                to,
                any_port: label == "any",
                label,
                world: false,
                any_peer: true,
            });
        }
        out.edges.sort_by_key(|e| (e.from, e.to));
        out
    }

    /// Graphviz DOT: node ids are the names (quoted), wildcard edges
    /// dashed and coloured by [`EdgeStyle`].
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph porin {\n    node [shape = box];\n");
        let styles: BTreeSet<EdgeStyle> = self.edges.iter().filter_map(Edge::style).collect();
        for style in styles {
            let _ = writeln!(
                out,
                "    // {} edges (dashed): {}",
                style.colour(),
                style.legend()
            );
        }
        for node in &self.nodes {
            let attrs = match node.kind {
                NodeKind::Endpoint => String::new(),
                NodeKind::World => " shape = ellipse".to_owned(),
                NodeKind::AnyEndpoint => " style = dashed".to_owned(),
            };
            let _ = writeln!(
                out,
                "    {} [label = {}{attrs}];",
                dot_quote(&node.id),
                dot_quote(&node.label)
            );
        }
        for edge in &self.edges {
            let style = edge.style().map_or_else(String::new, |s| {
                format!(" style = dashed color = {}", dot_quote(s.colour()))
            });
            let _ = writeln!(
                out,
                "    {} -> {} [label = {}{style}];",
                dot_quote(&self.nodes[edge.from].id),
                dot_quote(&self.nodes[edge.to].id),
                dot_quote(&edge.label)
            );
        }
        out.push_str("}\n");
        out
    }
}

/// A DOT double-quoted string: `"` and `\` escaped, newlines as `\n`.
pub fn dot_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The label of the edge between an endpoint and `world` in `direction`:
/// what the world identity of each family the endpoint has an address in
/// may do (world-ipv4 over IPv4, world-ipv6 over IPv6). One description
/// when the families agree, `IPv4: ...; IPv6: ...` when they differ;
/// `None` when no family passes.
fn world_label(
    compiled: &Compiled,
    endpoint: &EndpointPolicy,
    direction: Direction,
) -> Option<String> {
    let families: BTreeSet<Family> = endpoint.ips.iter().map(|ip| Family::of(*ip)).collect();
    let per_family: Vec<(Family, Vec<PortRange>)> = families
        .into_iter()
        .map(|family| {
            let id = family.world_identity().get();
            let check = Check {
                state: &endpoint.state,
                direction,
                local: endpoint.identity,
                peer: id,
            };
            (family, allowed(compiled.mutual_auth, &[check]))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str) -> Node {
        Node {
            id: id.to_owned(),
            label: id.to_owned(),
            kind: NodeKind::Endpoint,
        }
    }

    fn edge(from: usize, to: usize, label: &str) -> Edge {
        Edge {
            from,
            to,
            label: label.to_owned(),
            world: false,
            any_port: label == "any",
            any_peer: false,
        }
    }

    /// a, b, c all reach d on TCP/80: one fan into d; a → b is alone.
    fn sample() -> Graph {
        let mut graph = Graph {
            nodes: ["a", "b", "c", "d"].into_iter().map(node).collect(),
            edges: vec![
                edge(0, 1, "TCP/1"),
                edge(0, 3, "TCP/80"),
                edge(1, 3, "TCP/80"),
                edge(2, 3, "TCP/80"),
            ],
        };
        graph.mark_fans();
        graph
    }

    #[test]
    fn a_fan_is_marked_and_collapses_into_one_edge() {
        let graph = sample();
        let marked: Vec<bool> = graph.edges.iter().map(|e| e.any_peer).collect();
        assert_eq!(marked, [false, true, true, true]);
        let collapsed = graph.collapse_wildcards();
        assert_eq!(collapsed.edges.len(), 2);
        let fan = &collapsed.edges[1];
        assert_eq!(collapsed.nodes[fan.from].id, ANY_ENDPOINT_ID);
        assert_eq!(
            (fan.to, fan.label.as_str(), fan.any_peer),
            (3, "TCP/80", true)
        );
    }

    #[test]
    fn a_fan_needs_every_other_endpoint_on_one_label() {
        let mut graph = sample();
        graph.edges[3].label = "TCP/81".to_owned();
        graph.edges.iter_mut().for_each(|e| e.any_peer = false);
        graph.mark_fans();
        assert!(graph.edges.iter().all(|e| !e.any_peer));
        assert_eq!(graph.collapse_wildcards(), graph);
    }

    #[test]
    fn dot_ids_are_quoted_names() {
        let mut graph = sample();
        graph.nodes[0].id = "de\"fault/a\\b".to_owned();
        let dot = graph.to_dot();
        assert!(
            dot.contains("\"de\\\"fault/a\\\\b\" -> \"b\" [label = \"TCP/1\"];"),
            "{dot}"
        );
        assert!(
            dot.contains("\"c\" -> \"d\" [label = \"TCP/80\" style = dashed color = \"#7f7f7f\"];"),
            "{dot}"
        );
    }
}
