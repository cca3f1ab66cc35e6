//! PR006 `deny-bypass` (security): addresses inside a denied CIDR that the
//! ipcache gives another identity, allowed by another rule.
//!
//! CIDR selectors select CIDR identities only (the prefix's and every
//! narrower policy prefix's), never endpoint identities: a pod whose
//! address lies in a denied `10.0.0.0/8` keeps its own identity, and an
//! allow for it (or the default allow of `enableDefaultDeny: false`)
//! decides its flows. This is the shape of GHSA-3wwx-63fv-pfq6
//! (docs/semantics.md §9 item 12). Covered CIDR denies that Cilium needs (§4.6,
//! PR #33719) are not reported: only an *allowed* address is.

use std::collections::{BTreeMap, BTreeSet};

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;
use porin_connectivity::analysis::flow_points;
use porin_compiler::identity::Identity;
use porin_compiler::labels::SOURCE_CIDR;
use porin_compiler::mapstate::Direction;
use porin_compiler::resolve::policy::SelectorCache;
use porin_compiler::resolve::rule::{PortRef, proto};

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR006",
        name: "deny-bypass",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "Security: addresses inside a denied CIDR are still allowed, because the ipcache \
gives them another identity.",
        doc: Some(Doc {
            what: "For every CIDR deny rule and every endpoint it applies to, porin looks for \
addresses inside the denied prefixes that the ipcache resolves to an identity the deny does \
not select (a pod or node address inside `10.0.0.0/8`, say), and checks whether another rule \
(or the default allow of `enableDefaultDeny: false`) allows them on the denied ports. It reports \
both rules.",
            why: "This is the shape of advisory GHSA-3wwx-63fv-pfq6: a broad CIDR deny the author \
thought covered everything in the range, re-opened for one identity by a narrower allow. CIDR \
selectors never select endpoint identities, so the deny does not apply to pods in the range.",
            example: "egressDeny:\n- toCIDR: [10.0.0.0/8]\negress:\n- toEndpoints: [{matchLabels: {app: db}}]   # db pods live in 10.0.0.0/8",
            instead: "Deny the workloads by selector as well (`toEndpoints`/`toEntities: [cluster]`), \
or make the intent explicit with a porin annotation if the exception is wanted.",
            references: "semantics.md §9 item 12; GHSA-3wwx-63fv-pfq6; cilium/cilium#15198, \
#22314, #22966; semantics.md §4.6 and PR #33719 (covered CIDR denies are kept, not flagged).",
        }),
    },
};

/// Reports allowed addresses inside denied CIDRs.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let mut cache = SelectorCache::default();
    // (deny rule, allowing origin) → (addresses, endpoints)
    let mut found: BTreeMap<(usize, u32), (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for (rule_index, rule) in cx.rules().iter().enumerate() {
        if !rule.deny || !is_user_rule(cx, rule_index) {
            continue;
        }
        let Some(peers) = &rule.peers else { continue };
        let mut selected: BTreeSet<u32> = BTreeSet::new();
        let mut denied_prefixes = Vec::new();
        for selector in peers {
            let id = cache.intern(selector, &cx.table);
            selected.extend(cache.selection(id).iter().copied());
            if selector.has_key(|k| k.source == SOURCE_CIDR) {
                for identity in cache.selection(id) {
                    if let Some(prefix) = cx.cidr_prefix(*identity)
                        && prefix.prefix() > 0
                    {
                        denied_prefixes.push(prefix);
                    }
                }
            }
        }
        if denied_prefixes.is_empty() {
            continue;
        }
        // Addresses in the denied prefixes with an identity the deny does
        // not select.
        let mut bypass: Vec<(String, u32)> = Vec::new();
        for (index, endpoint) in cx.inventory.endpoints.iter().enumerate() {
            let identity = cx.table.endpoint_identity.get(index).copied().unwrap_or(0);
            if selected.contains(&identity) {
                continue;
            }
            for ip in &endpoint.ips {
                if denied_prefixes.iter().any(|p| p.contains(*ip)) {
                    bypass.push((format!("{ip} ({})", endpoint.display_name()), identity));
                }
            }
        }
        if bypass.is_empty() {
            continue;
        }
        for unit in cx.units.iter().filter(|u| u.rules.contains(&rule_index)) {
            let ports = denied_ports(rule, &unit.state);
            for (address, identity) in &bypass {
                let Ok(peer) = Identity::new(*identity) else {
                    continue;
                };
                for (proto_number, port) in &ports {
                    let decision = unit
                        .state
                        .lookup(rule.direction, peer, *proto_number, *port);
                    if !decision.verdict.is_allowed() {
                        continue;
                    }
                    let origins = decision
                        .chosen
                        .as_ref()
                        .map(|c| c.entry.origins.clone())
                        .unwrap_or_default();
                    for origin in origins {
                        let slot = found.entry((rule_index, origin)).or_default();
                        slot.0.insert(address.clone());
                        slot.1.insert(cx.unit_name(unit));
                    }
                    break;
                }
            }
        }
    }
    for ((deny_rule, allow_origin), (addresses, endpoints)) in found {
        let (Some(deny), Some(allow)) = (cx.origin(deny_rule), cx.origin_by_id(allow_origin))
        else {
            continue;
        };
        let direction = if deny.direction == Direction::Egress {
            "to"
        } else {
            "from"
        };
        let shown: Vec<&String> = addresses.iter().take(5).collect();
        let mut d = Diagnostic::new(
            RULE.info,
            format!(
                "security: {} denies a CIDR, but traffic {direction} {} inside it is allowed by {}",
                cx.describe(deny),
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                cx.describe(allow)
            ),
        )
        .at(cx.rule_location(deny));
        if allow.is_synthetic() {
            d.notes.push(format!("allowed by {}", cx.describe(allow)));
        } else {
            d.related.push((
                cx.rule_location(allow),
                "re-opens the denied range for another identity".to_owned(),
            ));
        }
        if addresses.len() > shown.len() {
            d.notes.push(format!(
                "and {} more addresses",
                addresses.len() - shown.len()
            ));
        }
        d.notes.push(format!(
            "on endpoints: {}",
            endpoints.into_iter().collect::<Vec<_>>().join(", ")
        ));
        d.notes.push(
            "a CIDR selector selects CIDR identities only; these addresses belong to endpoints with their own identity (GHSA-3wwx-63fv-pfq6)".to_owned(),
        );
        out.push(d.help(
            "deny the workloads by selector too (`toEndpoints`, `toEntities: [cluster]`), or mark the exception with `porin.dev/ignore: PR006`",
        ));
    }
}

/// One representative (protocol, port) of every flow class of `state`
/// (in the rule's direction) that the deny rule covers: exact, since the
/// verdict is constant on a class (see [`porin_connectivity::analysis`]).
fn denied_ports(
    rule: &porin_compiler::resolve::rule::PolicyRule,
    state: &porin_compiler::mapstate::MapState,
) -> Vec<(u8, u16)> {
    let classes: BTreeSet<(u8, u16, u16)> = flow_points(&[state])
        .into_iter()
        .filter(|p| p.direction == rule.direction)
        .map(|p| (p.proto, p.port, p.end_port))
        .collect();
    // Every port only for an L3-only deny; one whose port rules list no
    // port denies none (PR018), and the loop below finds none.
    if rule.l3_only {
        return classes.into_iter().map(|(p, port, _)| (p, port)).collect();
    }
    let mut out = BTreeSet::new();
    for spec in &rule.ports {
        let protos: &[u8] = if spec.proto == proto::ANY {
            &proto::ANY_EXPANSION
        } else {
            std::slice::from_ref(&spec.proto)
        };
        let PortRef::Number(port) = spec.port else {
            continue;
        };
        let (start, end) = if port == 0 {
            (0, u16::MAX)
        } else {
            (port, spec.end_port.max(port))
        };
        for &(p, lo, hi) in &classes {
            if protos.contains(&p) && lo <= end && hi >= start {
                out.insert((p, lo.max(start)));
            }
        }
        for &p in protos {
            // A protocol no key names is one class of its own.
            if !classes.iter().any(|c| c.0 == p) {
                out.insert((p, start));
            }
        }
    }
    out.into_iter().collect()
}
