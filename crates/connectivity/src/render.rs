//! SVG and HTML renderings of a [`Graph`], laid out without Graphviz: a
//! small layered (Sugiyama-style) layout, deterministic (same graph, same
//! bytes):
//! 1. cycles are broken by reversing the back edges of a depth-first
//!    search from the world, then from the nodes nothing reaches;
//! 2. layers by longest path from the sources, so every kept edge points
//!    down;
//! 3. nodes ordered within each layer by the barycentre of their
//!    neighbours in the layers above, then below (four sweeps; ties keep
//!    the previous order);
//! 4. nodes placed on a grid, layers centred; edges drawn as quadratic
//!    curves, bent aside when they go up, stay in a layer or have a
//!    reverse edge, so that no two edges overlap; labels at the middle of
//!    the curve.
//!
//! Cost: O(sweeps × (nodes + edges) log nodes); a boutique-sized graph
//! (a dozen workloads) is instant.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::graph::{EdgeStyle, Graph, NodeKind, SPECIFIC_COLOUR};

const NODE_HEIGHT: f64 = 32.0;
const CHAR_WIDTH: f64 = 7.2;
const NODE_PADDING: f64 = 24.0;
const H_GAP: f64 = 48.0;
const V_GAP: f64 = 110.0;
const MARGIN: f64 = 40.0;
const SWEEPS: usize = 4;

/// Node positions: per node its layer and its centre.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Per node, its layer (0 at the top).
    pub layer: Vec<usize>,
    /// Per node, the centre of its box.
    pub centre: Vec<(f64, f64)>,
    /// The width of every node box.
    pub node_width: f64,
    /// The drawing's size.
    pub size: (f64, f64),
}

/// Lays a graph out (see the module documentation).
pub fn layout(graph: &Graph) -> Layout {
    let n = graph.nodes.len();
    let edges = acyclic_edges(graph);
    // 2. Longest path layering: relax in topological order (Kahn's
    // algorithm, smallest index first).
    let mut indegree = vec![0usize; n];
    for &(_, to) in &edges {
        indegree[to] += 1;
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut layer = vec![0usize; n];
    while let Some(v) = ready.pop_first() {
        for &(from, to) in &edges {
            if from == v {
                layer[to] = layer[to].max(layer[v] + 1);
                indegree[to] -= 1;
                if indegree[to] == 0 {
                    ready.insert(to);
                }
            }
        }
    }
    let layers = layer.iter().max().map_or(0, |m| m + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layers];
    for v in 0..n {
        rows[layer[v]].push(v);
    }
    // 3. Barycentre ordering.
    let mut position = vec![0f64; n];
    let set_positions = |rows: &[Vec<usize>], position: &mut [f64]| {
        for row in rows {
            for (i, &v) in row.iter().enumerate() {
                position[v] = i as f64;
            }
        }
    };
    set_positions(&rows, &mut position);
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let order: Vec<usize> = if down {
            (1..layers).collect()
        } else {
            (0..layers.saturating_sub(1)).rev().collect()
        };
        for l in order {
            let mut keyed: Vec<(f64, f64, usize)> = rows[l]
                .iter()
                .map(|&v| {
                    let neighbours: Vec<f64> = edges
                        .iter()
                        .filter_map(|&(a, b)| {
                            let other = if a == v {
                                b
                            } else if b == v {
                                a
                            } else {
                                return None;
                            };
                            let above = layer[other] < l;
                            (above == down && layer[other] != l).then_some(position[other])
                        })
                        .collect();
                    let bary = if neighbours.is_empty() {
                        position[v]
                    } else {
                        neighbours.iter().sum::<f64>() / neighbours.len() as f64
                    };
                    (bary, position[v], v)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            rows[l] = keyed.into_iter().map(|(_, _, v)| v).collect();
            set_positions(&rows, &mut position);
        }
    }
    // 4. Coordinates.
    let longest = graph
        .nodes
        .iter()
        .map(|node| node.label.chars().count())
        .max()
        .unwrap_or(0);
    let node_width = longest as f64 * CHAR_WIDTH + NODE_PADDING;
    let widest = rows.iter().map(Vec::len).max().unwrap_or(0) as f64;
    let width = widest * node_width + (widest - 1.0).max(0.0) * H_GAP + 2.0 * MARGIN;
    let height =
        layers as f64 * NODE_HEIGHT + (layers as f64 - 1.0).max(0.0) * V_GAP + 2.0 * MARGIN;
    let mut centre = vec![(0.0, 0.0); n];
    for (l, row) in rows.iter().enumerate() {
        let count = row.len() as f64;
        let row_width = count * node_width + (count - 1.0).max(0.0) * H_GAP;
        let left = (width - row_width) / 2.0;
        for (i, &v) in row.iter().enumerate() {
            centre[v] = (
                left + i as f64 * (node_width + H_GAP) + node_width / 2.0,
                MARGIN + l as f64 * (NODE_HEIGHT + V_GAP) + NODE_HEIGHT / 2.0,
            );
        }
    }
    Layout {
        layer,
        centre,
        node_width,
        size: (width, height),
    }
}

/// Step 1: the edges with each back edge of a depth-first search (from
/// the world, then from the nodes nothing reaches, then in node order)
/// reversed, without duplicates and self-loops: a DAG.
fn acyclic_edges(graph: &Graph) -> Vec<(usize, usize)> {
    let n = graph.nodes.len();
    let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); n];
    for edge in &graph.edges {
        if edge.from != edge.to {
            out_edges[edge.from].push(edge.to);
        }
    }
    // Roots: the world first (traffic comes in from it, so it goes on
    // top), then the nodes nothing reaches, then the others.
    let mut has_in = vec![false; n];
    for edge in &graph.edges {
        if edge.from != edge.to {
            has_in[edge.to] = true;
        }
    }
    let mut roots: Vec<usize> = (0..n).collect();
    roots.sort_by_key(|&v| (graph.nodes[v].kind != NodeKind::World, has_in[v], v));
    // 0 unvisited, 1 on the stack, 2 done.
    let mut state = vec![0u8; n];
    let mut kept: BTreeSet<(usize, usize)> = BTreeSet::new();
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        state[root] = 1;
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if let Some(&w) = out_edges[v].get(*next) {
                *next += 1;
                match state[w] {
                    0 => {
                        kept.insert((v, w));
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => {
                        kept.insert((w, v));
                    }
                    _ => {
                        kept.insert((v, w));
                    }
                }
            } else {
                state[v] = 2;
                stack.pop();
            }
        }
    }
    kept.into_iter().collect()
}

/// Escapes XML text and attribute values. Characters XML 1.0 cannot carry
/// at all (controls other than tab, newline and carriage return) become
/// U+FFFD: even as character references they would make the document
/// ill-formed. (`porin lint --format junit` uses it too.)
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\r' | '\t' => out.push(c),
            c if (c as u32) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => {
                out.push('\u{FFFD}');
            }
            c => out.push(c),
        }
    }
    out
}

/// Where the segment from a box's centre towards `towards` leaves the box.
fn clip(centre: (f64, f64), half: (f64, f64), towards: (f64, f64)) -> (f64, f64) {
    let (dx, dy) = (towards.0 - centre.0, towards.1 - centre.1);
    if dx.abs() < f64::EPSILON && dy.abs() < f64::EPSILON {
        return centre;
    }
    let tx = if dx.abs() > f64::EPSILON {
        half.0 / dx.abs()
    } else {
        f64::INFINITY
    };
    let ty = if dy.abs() > f64::EPSILON {
        half.1 / dy.abs()
    } else {
        f64::INFINITY
    };
    let t = tx.min(ty).min(1.0);
    (centre.0 + dx * t, centre.1 + dy * t)
}

fn colour_of(style: Option<EdgeStyle>) -> &'static str {
    style.map_or(SPECIFIC_COLOUR, EdgeStyle::colour)
}

fn marker_id(style: Option<EdgeStyle>) -> &'static str {
    match style {
        None => "arrow",
        Some(EdgeStyle::AnyPeer) => "arrow-any-peer",
        Some(EdgeStyle::World) => "arrow-world",
        Some(EdgeStyle::AnyPort) => "arrow-any-port",
    }
}

/// The graph as a standalone SVG document.
pub fn to_svg(graph: &Graph) -> String {
    let layout = layout(graph);
    let (width, height) = layout.size;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    out.push_str("<title>porin graph: allowed connectivity</title>\n<defs>\n");
    for style in std::iter::once(None).chain(EdgeStyle::ALL.into_iter().map(Some)) {
        let _ = writeln!(
            out,
            "<marker id=\"{}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" markerHeight=\"8\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"{}\"/></marker>",
            marker_id(style),
            colour_of(style)
        );
    }
    out.push_str(
        "</defs>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n<g class=\"edges\">\n",
    );
    let pairs: BTreeSet<(usize, usize)> = graph.edges.iter().map(|e| (e.from, e.to)).collect();
    let half = (layout.node_width / 2.0, NODE_HEIGHT / 2.0);
    for edge in &graph.edges {
        let (a, b) = (layout.centre[edge.from], layout.centre[edge.to]);
        let (la, lb) = (layout.layer[edge.from], layout.layer[edge.to]);
        // Bend: none for a lone downward edge; aside (to the edge's own
        // right, so a reverse pair parts) otherwise.
        let bend = if la == lb {
            0.6 * V_GAP
        } else if lb < la || pairs.contains(&(edge.to, edge.from)) {
            0.25 * V_GAP
        } else {
            0.0
        };
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let length = (dx * dx + dy * dy).sqrt().max(1.0);
        let (nx, ny) = (-dy / length, dx / length);
        let control = ((a.0 + b.0) / 2.0 + nx * bend, (a.1 + b.1) / 2.0 + ny * bend);
        let start = clip(a, half, control);
        let end = clip(b, half, control);
        let mid = (
            (start.0 + 2.0 * control.0 + end.0) / 4.0,
            (start.1 + 2.0 * control.1 + end.1) / 4.0,
        );
        let style = edge.style();
        let colour = colour_of(style);
        let dash = if style.is_some() {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let from = &graph.nodes[edge.from];
        let to = &graph.nodes[edge.to];
        let _ = writeln!(
            out,
            "<g class=\"edge\"><title>{} → {}: {}</title><path d=\"M {:.1} {:.1} Q {:.1} {:.1} {:.1} {:.1}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.4\"{dash} marker-end=\"url(#{})\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{colour}\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text></g>",
            xml_escape(&from.label),
            xml_escape(&to.label),
            xml_escape(&edge.label),
            start.0,
            start.1,
            control.0,
            control.1,
            end.0,
            end.1,
            marker_id(style),
            mid.0,
            mid.1 + 4.0,
            xml_escape(&edge.label)
        );
    }
    out.push_str("</g>\n<g class=\"nodes\">\n");
    for (node, &(x, y)) in graph.nodes.iter().zip(&layout.centre) {
        let (x0, y0) = (x - half.0, y - half.1);
        let shape = match node.kind {
            NodeKind::Endpoint => format!(
                "<rect x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{NODE_HEIGHT:.1}\" rx=\"4\" fill=\"#f4f4f4\" stroke=\"#333333\"/>",
                layout.node_width
            ),
            NodeKind::World => format!(
                "<ellipse cx=\"{x:.1}\" cy=\"{y:.1}\" rx=\"{:.1}\" ry=\"{:.1}\" fill=\"#e8f1f8\" stroke=\"{}\"/>",
                half.0,
                half.1,
                EdgeStyle::World.colour()
            ),
            NodeKind::AnyEndpoint => format!(
                "<rect x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{NODE_HEIGHT:.1}\" rx=\"4\" fill=\"#ffffff\" stroke=\"{}\" stroke-dasharray=\"6 4\"/>",
                layout.node_width,
                EdgeStyle::AnyPeer.colour()
            ),
        };
        let _ = writeln!(
            out,
            "<g class=\"node\" id=\"{}\"><title>{}</title>{shape}<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></g>",
            xml_escape(&node.id),
            xml_escape(&node.id),
            y + 4.0,
            xml_escape(&node.label)
        );
    }
    out.push_str("</g>\n</svg>\n");
    out
}

/// A standalone HTML page: the SVG and a legend of the edge styles. The
/// page is well-formed XML as well (XHTML syntax).
pub fn to_html(graph: &Graph, title: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>{}</title>\n</head>\n<body style=\"font-family: sans-serif\">\n<h1>{}</h1>\n<p>An edge A → B: a new connection from A to B passes A's egress and B's ingress policy, on the ports of its label.</p>\n<table>\n",
        xml_escape(title),
        xml_escape(title)
    );
    let _ = writeln!(
        out,
        "<tr><td><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"10\"><line x1=\"0\" y1=\"5\" x2=\"40\" y2=\"5\" stroke=\"{SPECIFIC_COLOUR}\" stroke-width=\"2\"/></svg></td><td>specific peer and ports</td></tr>"
    );
    for style in EdgeStyle::ALL {
        let _ = writeln!(
            out,
            "<tr><td><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"40\" height=\"10\"><line x1=\"0\" y1=\"5\" x2=\"40\" y2=\"5\" stroke=\"{}\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/></svg></td><td>{}</td></tr>",
            style.colour(),
            xml_escape(style.legend())
        );
    }
    out.push_str("</table>\n");
    out.push_str(&to_svg(graph));
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Edge, Node};

    fn graph(edges: &[(usize, usize)]) -> Graph {
        let n = edges.iter().map(|&(a, b)| a.max(b) + 1).max().unwrap_or(0);
        Graph {
            nodes: (0..n)
                .map(|i| Node {
                    id: format!("n{i}"),
                    label: format!("n{i}"),
                    kind: NodeKind::Endpoint,
                })
                .collect(),
            edges: edges
                .iter()
                .map(|&(from, to)| Edge {
                    from,
                    to,
                    label: "TCP/80".to_owned(),
                    world: false,
                    any_port: false,
                    any_peer: false,
                })
                .collect(),
        }
    }

    #[test]
    fn layers_follow_edges_and_cycles_are_broken() {
        // 0 → 1 → 2 → 0 (a cycle), 0 → 3.
        let g = graph(&[(0, 1), (1, 2), (2, 0), (0, 3)]);
        let l = layout(&g);
        assert_eq!(l.layer, [0, 1, 2, 1]);
        // Same graph, same layout.
        assert_eq!(layout(&g), l);
    }

    #[test]
    fn barycentre_orders_children_under_their_parents() {
        // 0 → 3, 1 → 2: the second layer, first [2, 3], is reordered
        // so that each node sits under its parent.
        let g = graph(&[(0, 3), (1, 2)]);
        let l = layout(&g);
        assert!(l.centre[3].0 < l.centre[2].0, "{l:?}");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(xml_escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
