//! PR020 `cidr-covers-pods`: an allow rule's CIDR peer (`toCIDR`,
//! `toCIDRSet`, `fromCIDR*`, a NetworkPolicy `ipBlock`) covers addresses
//! of inventory pods, which it never allows.
//!
//! In Kubernetes' model an `ipBlock` matches any address in it, pods
//! included; Cilium matches a packet by its sender's or receiver's
//! security identity, and a pod's address resolves to the pod's identity,
//! never to a CIDR identity (`pkg/ipcache`, the endpoint's /32 outranks
//! every policy prefix; CIDR selectors select CIDR identities only,
//! `pkg/policy/types/selector.go`, `labels.GetCIDRLabels`). So the block
//! allows none of the pods inside it (cilium/cilium#9209; the reason
//! Cilium's CI skips the upstream NetworkPolicy e2e tests "should allow
//! egress access to server in CIDR block", "should enforce except clause
//! while egress access to server in CIDR block" and "should ensure an IP
//! overlapping both IPBlock.CIDR and IPBlock.Except is allowed",
//! `test/kubernetes-test.sh`).
//!
//! Exact on the compilation's identities: a pod is covered when the CIDR
//! identity its address would have without the pod (the longest policy
//! prefix containing it, else the family's world identity) is selected by
//! the peer, so an `except` that removes the address removes the pod. A
//! pod that a label selector of an allow rule in the same direction
//! selects, for an endpoint the CIDR rule applies to, is left out: the
//! policies allow it anyway. Deny rules
//! are PR006's (`deny-bypass`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use porin_compiler::ipcache::Family;
use porin_compiler::labels::{SOURCE_CIDR, SOURCE_RESERVED, parse_cidr_label_key};
use porin_compiler::resolve::policy::{SelectorCache, SelectorId};
use porin_compiler::selector::{Operator, Selector};
use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR020",
        name: "cidr-covers-pods",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "An allow rule's CIDR peer (ipBlock, toCIDR, fromCIDRSet...) covers pod addresses \
of the inventory, but Cilium never matches a pod by its address.",
        doc: Some(Doc {
            what: "For every CIDR peer of an allow rule, porin lists the inventory pods whose \
addresses the block covers (after its `except` entries) and that no label selector of an allow \
rule in the same direction, for an endpoint the rule applies to, selects anyway.",
            why: "In Kubernetes' model an `ipBlock` matches every address in it, pods included, and \
other network plugins enforce it that way. Cilium decides by security identity: a pod's address \
resolves to the pod's own identity, never to a CIDR identity, so the block allows none of the \
pods inside it and their flows are denied (cilium/cilium#9209). Cilium's CI skips three upstream \
NetworkPolicy e2e tests for this reason.",
            example: "egress:\n- to:\n  - ipBlock: {cidr: 10.0.0.0/8}   # the pod network: the pods are not matched",
            instead: "Select the pods by label as well (`podSelector`/`namespaceSelector`, \
`toEndpoints`/`fromEndpoints`, or `toEntities: [cluster]`), and keep the CIDR for addresses \
outside the cluster.",
            references: "cilium/cilium#9209; Cilium `test/kubernetes-test.sh` (the skipped e2e \
tests \"should allow egress access to server in CIDR block\", \"should enforce except clause while \
egress access to server in CIDR block\", \"should ensure an IP overlapping both IPBlock.CIDR and \
IPBlock.Except is allowed\"); Cilium docs, Kubernetes NetworkPolicy known missing features; \
`labels.GetCIDRLabels` (pkg/labels/cidr.go).",
        }),
    },
};

/// How many pods a message names before `and N more`.
const NAMED: usize = 5;

/// Reports allow rules whose CIDR peers cover inventory pods.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    if cx.inventory.endpoints.is_empty() {
        return;
    }
    let mut cache = SelectorCache::default();
    for (index, rule) in cx.rules().iter().enumerate() {
        if rule.deny || !is_user_rule(cx, index) {
            continue;
        }
        let Some(peers) = &rule.peers else { continue };
        // `toEntities: [world]` lowers to world, world-ipv4 and world-ipv6:
        // those are the entity, not a `0.0.0.0/0` block.
        let has_world_entity = peers
            .iter()
            .any(|s| s == &Selector::reserved("world"));
        let mut label_peers: Option<Vec<SelectorId>> = None;
        for selector in peers {
            let Some(written) = written_block(selector, has_world_entity) else {
                continue;
            };
            let id = cache.intern(selector, &cx.table);
            let selection = cache.selection(id).to_vec();
            let mut covered: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
            for (endpoint_index, endpoint) in cx.inventory.endpoints.iter().enumerate() {
                let ips: Vec<IpAddr> = endpoint
                    .ips
                    .iter()
                    .filter(|ip| {
                        let address_identity = cx
                            .table
                            .cidr_identity_of(**ip)
                            .map_or_else(|| Family::of(**ip).world_identity().get(), |(_, id)| id);
                        selection.contains(&address_identity)
                    })
                    .copied()
                    .collect();
                if ips.is_empty() {
                    continue;
                }
                let identity = cx
                    .table
                    .endpoint_identity
                    .get(endpoint_index)
                    .copied()
                    .unwrap_or(0);
                // Only for covered pods, once per rule.
                let label_peers = label_peers
                    .get_or_insert_with(|| label_peers_of(cx, &mut cache, index));
                if label_peers
                    .iter()
                    .any(|id| cache.selection(*id).contains(&identity))
                {
                    continue;
                }
                covered
                    .entry(endpoint.display_name())
                    .or_default()
                    .extend(ips);
            }
            if covered.is_empty() {
                continue;
            }
            let Some(origin) = cx.origin(index) else {
                continue;
            };
            let mut names: Vec<String> = covered
                .iter()
                .take(NAMED)
                .map(|(name, ips)| {
                    let ips: Vec<String> = ips.iter().map(ToString::to_string).collect();
                    format!("{name} ({})", ips.join(", "))
                })
                .collect();
            if covered.len() > NAMED {
                names.push(format!("and {} more", covered.len() - NAMED));
            }
            let pods = if covered.len() == 1 { "pod" } else { "pods" };
            out.push(
                Diagnostic::new(
                    RULE.info,
                    format!(
                        "{}: CIDR peer `{written}` covers the addresses of {} {pods} of the inventory: {}; \
Cilium never matches a pod by its address (a pod keeps its own security identity), so this rule \
allows none of them",
                        cx.describe(origin),
                        covered.len(),
                        names.join(", ")
                    ),
                )
                .at(cx.rule_location(origin))
                .note(
                    "cilium/cilium#9209: ipBlock/CIDR peers select addresses outside the cluster only; \
Cilium's CI skips the upstream NetworkPolicy e2e tests that expect otherwise",
                )
                .help(
                    "select the pods by label as well (podSelector/namespaceSelector, \
toEndpoints/fromEndpoints, or toEntities: [cluster])",
                ),
            );
        }
    }
}

/// The block a CIDR peer selector stands for, as written
/// (`10.0.0.0/8 except 10.0.1.0/24`, `0.0.0.0/0`); `None` for any other
/// selector (labels, entities).
fn written_block(selector: &Selector, has_world_entity: bool) -> Option<String> {
    let mut block = None;
    let mut except = Vec::new();
    for requirement in selector.requirements() {
        let key = &requirement.key;
        let prefix = if key.source == SOURCE_CIDR {
            parse_cidr_label_key(&key.key).map(|p| p.to_string())
        } else if key.source == SOURCE_RESERVED && !has_world_entity {
            // A zero-length prefix is the family's world label
            // (`cidr_selector_key`).
            match key.key.as_str() {
                "world-ipv4" => Some("0.0.0.0/0".to_owned()),
                "world-ipv6" => Some("::/0".to_owned()),
                _ => return None,
            }
        } else {
            return None;
        };
        let prefix = prefix?;
        match requirement.operator {
            Operator::Exists if block.is_none() => block = Some(prefix),
            Operator::DoesNotExist => except.push(prefix),
            _ => return None,
        }
    }
    let block = block?;
    Some(if except.is_empty() {
        block
    } else {
        format!("{block} except {}", except.join(", "))
    })
}

/// The label peer selectors of the allow rules in the direction of rule
/// `index` whose subject shares an identity with its subject: a pod one of
/// them selects is allowed whatever the CIDR does, to some endpoint the
/// rule applies to.
fn label_peers_of(cx: &Context<'_>, cache: &mut SelectorCache, index: usize) -> Vec<SelectorId> {
    let Some(rule) = cx.rules().get(index) else {
        return Vec::new();
    };
    let subject = cache.intern(&rule.subject, &cx.table);
    let subjects: Vec<u32> = cache.selection(subject).to_vec();
    let mut out = Vec::new();
    for (other, candidate) in cx.rules().iter().enumerate() {
        if candidate.deny || candidate.direction != rule.direction || !is_user_rule(cx, other) {
            continue;
        }
        let id = cache.intern(&candidate.subject, &cx.table);
        if !cache.selection(id).iter().any(|s| subjects.contains(s)) {
            continue;
        }
        for peer in candidate.peers.iter().flatten() {
            if !peer.has_key(|k| k.source == SOURCE_CIDR) {
                out.push(cache.intern(peer, &cx.table));
            }
        }
    }
    out
}
