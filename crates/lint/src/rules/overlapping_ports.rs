//! PR010 `overlapping-ports`: port ranges of one rule item overlap.

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;
use porin_compiler::resolve::rule::{PortRef, proto};

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR010",
        name: "overlapping-ports",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "Port ranges of one rule overlap (part of a range is already covered).",
        doc: Some(Doc {
            what: "Compares the numeric ports and ranges of each rule item per protocol (`ANY` \
expands to TCP, UDP and SCTP).",
            why: "Overlapping ranges are a sign of a mistake, and overlapping ranges with different \
`endPort` crashed cilium-envoy (cilium/cilium#45811).",
            example: "toPorts:\n- ports: [{port: \"8000\", endPort: 8100, protocol: TCP}, {port: \"8080\", protocol: TCP}]",
            instead: "Merge the ranges into one.",
            references: "cilium/cilium#45811; semantics.md §4.5.",
        }),
    },
};

fn range(port: u16, end: u16) -> (u16, u16) {
    if port == 0 {
        (0, u16::MAX)
    } else {
        (port, end.max(port))
    }
}

/// Reports overlapping numeric port ranges within one rule item.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for (index, rule) in cx.rules().iter().enumerate() {
        if !is_user_rule(cx, index) {
            continue;
        }
        let mut expanded: Vec<(u8, u16, u16)> = Vec::new();
        for spec in &rule.ports {
            let PortRef::Number(port) = spec.port else {
                continue;
            };
            let protos: &[u8] = if spec.proto == proto::ANY {
                &proto::ANY_EXPANSION
            } else {
                std::slice::from_ref(&spec.proto)
            };
            if matches!(spec.proto, proto::ICMP | proto::ICMPV6) {
                continue;
            }
            let (lo, hi) = range(port, spec.end_port);
            for &p in protos {
                expanded.push((p, lo, hi));
            }
        }
        let mut reported = false;
        for (i, a) in expanded.iter().enumerate() {
            for b in &expanded[i + 1..] {
                if reported || a.0 != b.0 || a.1 > b.2 || b.1 > a.2 {
                    continue;
                }
                let Some(origin) = cx.origin(index) else {
                    continue;
                };
                let show = |r: &(u8, u16, u16)| {
                    if r.1 == r.2 {
                        format!("{}/{}", r.1, proto::name(r.0))
                    } else {
                        format!("{}-{}/{}", r.1, r.2, proto::name(r.0))
                    }
                };
                out.push(
                    Diagnostic::new(RULE.info, format!(
                            "{}: ports {} and {} overlap; part of one range is already covered",
                            cx.describe(origin),
                            show(a),
                            show(b)
                        ),
                    )
                    .at(cx.location(origin, &format!("{}.toPorts", origin.route)))
                    .note("overlapping ranges with different endPort crashed cilium-envoy (cilium/cilium#45811)")
                    .help("merge the overlapping ports into one range"),
                );
                reported = true;
            }
        }
    }
}
