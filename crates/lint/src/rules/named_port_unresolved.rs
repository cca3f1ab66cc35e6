//! PR015 `named-port-unresolved`: a named port resolves to no port, or
//! (egress) to several different ports. Resolution follows Cilium's
//! `GetNamedPort` (`pkg/endpoint/policy.go`, `pkg/types/portmap.go`):
//! ingress from the subject endpoint's container ports, egress from every
//! endpoint's ports.

use std::collections::{BTreeMap, BTreeSet};

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;
use porin_compiler::mapstate::Direction;
use porin_compiler::resolve::rule::{PortRef, proto};

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR015",
        name: "named-port-unresolved",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "A named port resolves to no port, or (egress) to several different ports.",
        doc: Some(Doc {
            what: "Resolves each named port like Cilium: ingress from the subject endpoint's own \
container ports, egress from every endpoint's ports, where two different numbers for one name \
are an error (\"duplicate named ports\").",
            why: "Cilium silently emits no entry for such a port, so the rule allows nothing \
(cilium/cilium#30003, #24779).",
            example: "toPorts: [{ports: [{port: http-alt, protocol: TCP}]}]",
            instead: "Use the number, or give the port one unambiguous name across the cluster.",
            references: "semantics.md §4.4, §9 item 14; Cilium `pkg/types/portmap.go`.",
        }),
    },
};

/// Reports unresolved or ambiguous named ports.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut cluster: BTreeMap<&str, BTreeSet<(u16, u8)>> = BTreeMap::new();
    for endpoint in &cx.inventory.endpoints {
        for port in &endpoint.ports {
            cluster
                .entry(port.name.as_str())
                .or_default()
                .insert((port.port, port.proto));
        }
    }
    let mut reported: BTreeSet<(usize, String, String)> = BTreeSet::new();
    for unit in &cx.units {
        let Some(endpoint) = unit
            .endpoints
            .first()
            .and_then(|i| cx.inventory.endpoints.get(*i))
        else {
            continue;
        };
        for &index in &unit.rules {
            if !is_user_rule(cx, index) {
                continue;
            }
            let rule = &cx.rules()[index];
            for spec in &rule.ports {
                let PortRef::Named(name) = &spec.port else {
                    continue;
                };
                let protos: &[u8] = if spec.proto == proto::ANY {
                    &proto::ANY_EXPANSION
                } else {
                    std::slice::from_ref(&spec.proto)
                };
                let problem = match rule.direction {
                    Direction::Ingress => {
                        let found: Vec<_> =
                            endpoint.ports.iter().filter(|p| &p.name == name).collect();
                        if found.is_empty() {
                            Some(format!(
                                "`{name}` is not a container port of `{}`",
                                endpoint.display_name()
                            ))
                        } else if !found.iter().any(|p| protos.contains(&p.proto)) {
                            Some(format!(
                                "`{name}` of `{}` has another protocol",
                                endpoint.display_name()
                            ))
                        } else {
                            None
                        }
                    }
                    Direction::Egress => {
                        let numbers: BTreeSet<u16> = cluster
                            .get(name.as_str())
                            .map(|s| {
                                s.iter()
                                    .filter(|(_, p)| *p == 0 || protos.contains(p))
                                    .map(|(n, _)| *n)
                                    .collect()
                            })
                            .unwrap_or_default();
                        match numbers.len() {
                            0 => Some(format!("no endpoint has a port named `{name}`")),
                            1 => None,
                            _ => Some(format!(
                                "`{name}` names several ports in the cluster ({}); Cilium skips it as \"duplicate named ports\"",
                                numbers
                                    .iter()
                                    .map(u16::to_string)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )),
                        }
                    }
                };
                let Some(problem) = problem else { continue };
                if !reported.insert((index, name.clone(), problem.clone())) {
                    continue;
                }
                let Some(origin) = cx.origin(index) else {
                    continue;
                };
                out.push(
                    Diagnostic::new(
                        RULE.info,
                        format!(
                            "{}: named port {problem}; the port yields no map entry (as in Cilium)",
                            cx.describe(origin)
                        ),
                    )
                    .at(cx.location(origin, &format!("{}.toPorts", origin.route)))
                    .note(
                        "cilium/cilium#30003, #24779: such ports are skipped silently by the agent",
                    )
                    .help("use the port number, or one unambiguous name"),
                );
            }
        }
    }
}
