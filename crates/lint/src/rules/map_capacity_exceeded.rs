//! PR001 `map-capacity-exceeded`: an endpoint's policy map overflows.
//! The contributor analysis is shared with PR002.

use std::collections::{BTreeMap, BTreeSet};

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::thousands;
use crate::{Context, Unit};
use porin_compiler::mapstate::MapState;
use porin_compiler::resolve::rule::proto;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR001",
        name: "map-capacity-exceeded",
        severity: Severity::Error,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "An endpoint needs more policy-map entries than its map holds.",
        doc: Some(Doc {
            what: "Compiles every endpoint of the inventory and compares the number of policy-map \
entries with the map size (`policyMapMax`, default 16384 like Cilium's `bpf-policy-map-max`, \
clamped to 256..65536 like Cilium). It names the rules, selectors and port ranges that contribute \
most entries, as `rules × identities × port prefixes × protocols`.",
            why: "When the map is full the kernel refuses further entries: some desired entries are \
missing and drops look random (cilium/cilium#46189, #45788), or, with \
`enable-endpoint-lockdown-on-policy-overflow`, the endpoint is locked down entirely.",
            example: "egress:\n- toCIDRSet: [{cidr: 10.0.0.0/8, except: [...812 prefixes...]}]\n  toPorts:\n  - ports: [{port: \"1000\", endPort: 1999, protocol: ANY}]",
            instead: "Select peers with fewer identities (an entity, one wider CIDR, a namespace \
selector), and align port ranges to power-of-two prefixes (1024-2047 is one prefix; 1000-1999 \
is 6). Or raise `bpf-policy-map-max` and `policyMapMax` in `.porin.yaml` together.",
            references: "semantics.md §4.8, §5.5; Cilium `pkg/endpoint/bpf.go` \
(`shouldLockdownLocked`), `pkg/option/config.go` (`bpf-policy-map-max`, `PolicyMapMin/Max`); \
cilium/cilium#8060, #28337, #41121, #46189.",
        }),
    },
};

/// How many entries one rule contributes to one endpoint's map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contribution {
    /// Entries carrying the rule's origin.
    pub entries: usize,
    /// Distinct peer identities.
    pub identities: BTreeSet<u32>,
    /// Distinct (protocol, port, prefix length) port prefixes.
    pub port_prefixes: BTreeSet<(u16, u8)>,
    /// Distinct protocols.
    pub protos: BTreeSet<u8>,
}

/// Contributions per origin id, largest first.
pub fn contributions(state: &MapState) -> Vec<(u32, Contribution)> {
    let mut by_origin: BTreeMap<u32, Contribution> = BTreeMap::new();
    for (key, entry) in state.iter() {
        for origin in &entry.origins {
            let c = by_origin.entry(*origin).or_default();
            c.entries += 1;
            c.identities.insert(key.identity().get());
            c.port_prefixes.insert((key.port(), key.port_prefix_len()));
            c.protos.insert(key.proto());
        }
    }
    let mut list: Vec<(u32, Contribution)> = by_origin.into_iter().collect();
    list.sort_by(|a, b| b.1.entries.cmp(&a.1.entries).then(a.0.cmp(&b.0)));
    list
}

/// The finding of `code` (PR001 or PR002) for one unit at `limit`.
pub fn finding(cx: &Context<'_>, unit: &Unit, code: CodeInfo, limit: usize) -> Diagnostic {
    let count = unit.state.len();
    let percent = count * 100 / limit.max(1);
    let mut d = Diagnostic::new(
        code,
        format!(
            "endpoint `{}` needs {} policy-map entries; the map holds {} ({percent}%)",
            cx.unit_name(unit),
            thousands(count),
            thousands(limit)
        ),
    );
    let mut hints: BTreeSet<&'static str> = BTreeSet::new();
    for (rank, (origin_id, c)) in contributions(&unit.state).into_iter().take(3).enumerate() {
        let Some(origin) = cx.origin_by_id(origin_id) else {
            continue;
        };
        let protos: Vec<String> = c.protos.iter().map(|p| proto::name(*p)).collect();
        let ports_per_proto = c.port_prefixes.len();
        let product = c.identities.len() * ports_per_proto * c.protos.len();
        let mut text = format!(
            "1 rule × {} × {} × {} ({}) = {}",
            plural(c.identities.len(), "identity", "identities"),
            plural(ports_per_proto, "port prefix", "port prefixes"),
            plural(c.protos.len(), "protocol", "protocols"),
            protos.join(", "),
            plural(product, "entry", "entries")
        );
        if product != c.entries {
            text.push_str(&format!(
                " ({} after merging with other rules)",
                thousands(c.entries)
            ));
        }
        let location = cx.rule_location(origin);
        if rank == 0 && !origin.is_synthetic() {
            d.primary = Some(location);
            d.notes.push(format!(
                "largest contributor {}: {text}",
                cx.describe(origin)
            ));
        } else if !origin.is_synthetic() {
            d.related.push((location, text));
        } else {
            d.notes.push(format!("{}: {text}", cx.describe(origin)));
        }
        if c.identities.len() >= 16 {
            hints.insert(
                "select the peers with a wider selector (an entity, a namespace selector or one covering CIDR): a selector that matches every identity costs one identity-0 entry per port",
            );
        }
        if ports_per_proto > 1 {
            hints.insert(
                "align port ranges to power-of-two prefixes (e.g. 1024-2047 is 1 entry, 1000-1999 is 6)",
            );
        }
        if c.protos.len() >= 3 {
            hints.insert("name the protocol instead of `ANY`, which expands to TCP, UDP and SCTP");
        }
    }
    if !hints.is_empty() {
        d.help = Some(hints.into_iter().collect::<Vec<_>>().join("; "));
    }
    d.notes.push(format!(
        "the limit is `policyMapMax` ({}), Cilium's `bpf-policy-map-max`",
        thousands(limit)
    ));
    d
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// Reports every endpoint whose map overflows.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let limit = usize::try_from(cx.config.policy_map_max).unwrap_or(usize::MAX);
    for unit in &cx.units {
        if unit.state.len() > limit {
            out.push(finding(cx, unit, RULE.info, limit));
        }
    }
}
