//! PR018 `port-rule-without-ports`: a `toPorts` entry of a Cilium rule that
//! lists no port. It reads as "every port" (as `ports: []` does in a
//! Kubernetes NetworkPolicy), but Cilium applies a port rule only to the
//! ports it lists, and an item with `toPorts` is no L3-only rule either:
//! the entry adds nothing, and an item of nothing else allows (or denies)
//! nothing (docs/semantics.md §3.2).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};
use serde_json::Value;

use super::Rule;
use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR018",
        name: "port-rule-without-ports",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "A `toPorts` entry lists no port, so it adds none: not every port, as it reads.",
        doc: Some(Doc {
            what: "Finds `toPorts` entries of Cilium allow and deny items that list no port \
(`toPorts: [{}]`, `toPorts: [{ports: []}]`). Cilium merges one L4 filter per listed port, so \
such an entry contributes nothing, and an item with `toPorts` is not an L3-only (every port) \
rule either. An item whose port rules are all empty, and that has no `icmps`, allows or \
denies nothing.",
            why: "The entry reads as \"every port\", which is what `ports: []` means in a \
Kubernetes NetworkPolicy. In Cilium it means no port: an allow item of this shape allows \
nothing yet puts its endpoints' direction into default deny, and a deny item denies nothing, \
so the traffic its author meant to block stays allowed.",
            example: "ingressDeny:\n- fromEntities: [world]\n  toPorts: [{ports: []}]    # denies nothing",
            instead: "To cover every port, leave out `toPorts` (an L3-only item); otherwise list \
the ports: `toPorts: [{ports: [{port: \"443\", protocol: TCP}]}]`.",
            references: "semantics.md §3.2; Cilium `pkg/policy/rule.go` (`mergeIngress`, \
`mergeEgress`: an item is L3-only only when `toPorts.Len() == 0 && icmp.Len() == 0`, then \
each port rule merges one filter per entry of `GetPortProtocols()`).",
        }),
    },
};

/// Whether a `toPorts` entry lists a port (`ports` present and non-empty).
fn lists_a_port(entry: &Value) -> bool {
    entry
        .get("ports")
        .and_then(Value::as_array)
        .is_some_and(|ports| !ports.is_empty())
}

/// Reports every `toPorts` entry without ports, saying what the item is
/// left with.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for input in cx.inputs {
        let policy = input.policy.object_key();
        for (prefix, rule) in input.policy.cilium_rules() {
            let Ok(rule) = serde_json::to_value(rule) else {
                continue;
            };
            for section in ["ingress", "ingressDeny", "egress", "egressDeny"] {
                let items = rule.get(section).and_then(Value::as_array);
                for (i, item) in items.into_iter().flatten().enumerate() {
                    let entries = item.get("toPorts").and_then(Value::as_array);
                    let entries = entries.map_or(&[][..], Vec::as_slice);
                    let has_icmps = item
                        .get("icmps")
                        .and_then(Value::as_array)
                        .is_some_and(|l| !l.is_empty());
                    let item_has_l4 = has_icmps || entries.iter().any(lists_a_port);
                    let deny = section.ends_with("Deny");
                    for (j, entry) in entries.iter().enumerate() {
                        if lists_a_port(entry) {
                            continue;
                        }
                        let route = format!("{prefix}.{section}[{i}].toPorts[{j}]");
                        let consequence = match (item_has_l4, deny) {
                            (true, _) => "it adds nothing to the item's other ports".to_owned(),
                            (false, true) => "this deny item denies nothing".to_owned(),
                            (false, false) => format!(
                                "this item allows nothing, yet puts the endpoints' {} into default deny",
                                if section.starts_with("ingress") {
                                    "ingress"
                                } else {
                                    "egress"
                                }
                            ),
                        };
                        out.push(
                            Diagnostic::new(
                                RULE.info,
                                format!(
                                    "{policy} {route} lists no port, so {consequence}; it does not mean every port"
                                ),
                            )
                            .at(input.location(&route))
                            .note("Cilium applies a port rule to the ports it lists only, and an item with `toPorts` is not L3-only (`mergeIngress`/`mergeEgress`, pkg/policy/rule.go)")
                            .help("to cover every port, remove `toPorts`; otherwise list the ports, e.g. `ports: [{port: \"443\", protocol: TCP}]`"),
                        );
                    }
                }
            }
        }
    }
}
