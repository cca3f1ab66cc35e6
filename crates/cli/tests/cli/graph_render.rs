//! `porin graph` on Online Boutique (`examples/boutique`): node ids are
//! workload names, wildcard edges (world, any port, a fan from every
//! other endpoint) are dashed and coloured, `--collapse wildcards` draws
//! each fan as one edge, and `--format svg` / `--format html` lay the
//! graph out without Graphviz as well-formed XML.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use crate::common::porin;

const POLICIES: &str = "examples/boutique/policies";
const INVENTORY: &str = "examples/boutique/manifests.yaml";

fn graph(extra: &[&str]) -> String {
    let mut args = vec!["graph", POLICIES, "--inventory", INVENTORY];
    args.extend_from_slice(extra);
    let out = porin(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn edges(dot: &str) -> Vec<&str> {
    dot.lines().filter(|l| l.contains(" -> ")).collect()
}

#[test]
fn dot_names_nodes_and_styles_wildcards() {
    let dot = graph(&[]);
    assert!(dot.starts_with("digraph porin {"), "{dot}");
    assert!(
        dot.contains(
            "    \"default/cartservice\" -> \"default/redis-cart\" [label = \"TCP/6379\"];"
        ),
        "{dot}"
    );
    // The world, a DNS fan (every workload reaches coredns alike), any port.
    assert!(
        dot.contains("\"(world)\" -> \"default/frontend\" [label = \"TCP/8080\" style = dashed color = \"#0072b2\"];"),
        "{dot}"
    );
    assert!(
        dot.contains("\"default/frontend\" -> \"kube-system/coredns\" [label = \"TCP/53, UDP/53\" style = dashed color = \"#7f7f7f\"];"),
        "{dot}"
    );
    insta::assert_snapshot!("graph_boutique_dot", dot);
}

#[test]
fn collapse_draws_a_fan_as_one_edge() {
    let full = graph(&[]);
    let collapsed = graph(&["--collapse", "wildcards"]);
    let into_dns = |dot: &str| {
        edges(dot)
            .into_iter()
            .filter(|l| l.contains("-> \"kube-system/coredns\""))
            .count()
    };
    // 12 workloads and the world reach coredns; collapsed: the world and
    // one edge from every other endpoint.
    assert_eq!(into_dns(&full), 13, "{full}");
    assert_eq!(into_dns(&collapsed), 2, "{collapsed}");
    assert!(
        collapsed.contains("\"(every other endpoint)\" -> \"kube-system/coredns\" [label = \"TCP/53, UDP/53\" style = dashed color = \"#7f7f7f\"];"),
        "{collapsed}"
    );
    // The specific edges stay.
    assert!(collapsed.contains("\"default/cartservice\" -> \"default/redis-cart\""));
    assert_eq!(edges(&full).len() - 12 + 1, edges(&collapsed).len());
    insta::assert_snapshot!("graph_boutique_collapsed_dot", collapsed);
}

#[test]
fn svg_is_well_formed_and_draws_every_node_and_edge() {
    let dot = graph(&["--collapse", "wildcards"]);
    let svg = graph(&["--collapse", "wildcards", "--format", "svg"]);
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let class = |c: &str| {
        doc.descendants()
            .filter(|n| n.attribute("class") == Some(c))
            .count()
    };
    let nodes = dot
        .lines()
        .filter(|l| l.contains(" [label = ") && !l.contains(" -> "))
        .count();
    assert_eq!(class("node"), nodes);
    assert_eq!(class("edge"), edges(&dot).len());
    assert!(
        doc.descendants()
            .any(|n| n.attribute("id") == Some("default/frontend")),
        "node ids are the names"
    );
    // Wildcard edges are dashed.
    let dashed = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "path" && n.attribute("stroke-dasharray").is_some())
        .count();
    assert_eq!(
        dashed,
        edges(&dot).iter().filter(|l| l.contains("dashed")).count()
    );
    // Deterministic.
    assert_eq!(svg, graph(&["--collapse", "wildcards", "--format", "svg"]));
    insta::assert_snapshot!("graph_boutique_collapsed_svg", svg);
}

#[test]
fn html_embeds_the_svg_with_a_legend() {
    let html = graph(&["--format", "html"]);
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(&html, options)
        .unwrap_or_else(|e| panic!("{e}\n{html}"));
    let text: String = doc.descendants().filter_map(|n| n.text()).collect();
    for legend in [
        "any peer: every other endpoint, on the same ports",
        "world: addresses outside the cluster",
        "any: every protocol and port",
    ] {
        assert!(text.contains(legend), "{legend}");
    }
    assert!(
        doc.descendants()
            .any(|n| n.tag_name().name() == "svg" && n.attribute("viewBox").is_some())
    );
}
