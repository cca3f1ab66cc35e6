//! PR012 `rule-allows-nothing`: `ingress: [{}]` (no peer, no port) and
//! explicitly empty peer lists (`fromEndpoints: []`) in Cilium policies:
//! they select nothing yet put the subject in default deny (docs/semantics.md
//! §3.2). Kubernetes NetworkPolicy is different (`ingress: [{}]` allows
//! all there) and is not checked.

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use serde_json::Value;

use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR012",
        name: "rule-allows-nothing",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "`ingress: [{}]` or an explicitly empty peer list: allows nothing, yet enforces default deny.",
        doc: Some(Doc {
            what: "Finds allow items with no peer and no port (`ingress: [{}]`, `egress: [{}]` in \
Cilium policies) and items with an explicitly empty peer list (`fromEndpoints: []`, \
`toCIDR: []`, ...), which select nothing even with `toPorts`.",
            why: "Users read `ingress: [{}]` as \"allow everything\" (it is in Kubernetes \
NetworkPolicy); in Cilium it allows nothing and puts the endpoint in default deny, so all \
traffic in that direction is dropped. Intended?",
            example: "spec:\n  endpointSelector: {}\n  ingress: [{}]",
            instead: "To deny all: keep it, and say so with `porin.dev/ignore: PR012`. To allow all: \
`ingress: [{fromEntities: [all]}]`.",
            references: "semantics.md §3.2 (`mergeL4Filter`, `distillery_test.go rule____NoAllow`); \
§9 items 15 and 17; UKGovernmentBEIS/inspect_k8s_sandbox PR #228.",
        }),
    },
};

/// Peer fields of Cilium rule items (JSON names).
const PEER_FIELDS: &[&str] = &[
    "fromEndpoints",
    "fromCIDR",
    "fromCIDRSet",
    "fromEntities",
    "fromGroups",
    "fromNodes",
    "toEndpoints",
    "toCIDR",
    "toCIDRSet",
    "toEntities",
    "toServices",
    "toFQDNs",
    "toGroups",
    "toNodes",
];

/// Fields that make an item non-empty besides peers.
const PORT_FIELDS: &[&str] = &["toPorts", "icmps"];

/// Reports empty items and explicitly empty peer lists.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    for input in cx.inputs {
        for (prefix, rule) in input.policy.cilium_rules() {
            let Ok(Value::Object(rule_json)) = serde_json::to_value(rule) else {
                continue;
            };
            for section in ["ingress", "egress", "ingressDeny", "egressDeny"] {
                let Some(Value::Array(items)) = rule_json.get(section) else {
                    continue;
                };
                for (i, item) in items.iter().enumerate() {
                    let Value::Object(fields) = item else {
                        continue;
                    };
                    let route = format!("{prefix}.{section}[{i}]");
                    let deny = section.ends_with("Deny");
                    let present = |name: &str| fields.get(name).is_some_and(|v| !v.is_null());
                    let has_peer = PEER_FIELDS.iter().any(|f| present(f));
                    let has_port = PORT_FIELDS.iter().any(|f| present(f));
                    if !has_peer && !has_port {
                        let direction = if section.starts_with("ingress") {
                            "ingress"
                        } else {
                            "egress"
                        };
                        let message = if deny {
                            format!(
                                "`{section}: [{{}}]` denies nothing, but puts the endpoint's {direction} into default deny"
                            )
                        } else {
                            format!(
                                "`{section}: [{{}}]` allows nothing, but puts the endpoint's {direction} into default deny: all {direction} traffic is dropped. Intended?"
                            )
                        };
                        out.push(
                            Diagnostic::new(RULE.info, message)
                                .at(input.location(&route))
                                .note("an item with no peer and no port selects nothing in Cilium (semantics.md §3.2); in a Kubernetes NetworkPolicy the same item would allow everything")
                                .help(format!("to allow all, write `{section}: [{{{}: [all]}}]`; to deny all on purpose, annotate the policy with `porin.dev/ignore: PR012`", if section.starts_with("ingress") { "fromEntities" } else { "toEntities" })),
                        );
                        continue;
                    }
                    for field in PEER_FIELDS {
                        if let Some(Value::Array(list)) = fields.get(*field)
                            && list.is_empty()
                        {
                            let verb = if deny { "denies" } else { "allows" };
                            out.push(
                                Diagnostic::new(RULE.info, format!("`{field}: []` selects no peer: this item {verb} nothing{}", if has_port { ", even with `toPorts`" } else { "" }),
                                )
                                .at(input.location(&format!("{route}.{field}")))
                                .note("an explicitly empty peer list selects nothing (`mergeEndpointSelectors` returns nil), unlike an omitted field (semantics.md §3.2)")
                                .help(format!("remove `{field}` to apply the ports to every peer, or list the peers")),
                            );
                        }
                    }
                }
            }
        }
    }
}
