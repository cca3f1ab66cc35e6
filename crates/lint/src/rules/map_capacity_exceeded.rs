//! PR001 `map-capacity-exceeded`: an endpoint's policy map overflows.
//! The contributor analysis is shared with PR002; the counting is
//! porin-compiler's ([`Census`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::thousands;
use crate::{Context, Unit};
use porin_compiler::compile::capacity::Census;
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

/// The finding of `code` (PR001 or PR002) for a state of `census.entries`
/// entries, for the endpoints called `name`, at `limit`. The census is of a
/// built state ([`Census::of`]) or, for a state over the map capacity, of
/// one counted without building it ([`porin_compiler::compile::capacity`]):
/// the same numbers either way.
pub fn finding(
    cx: &Context<'_>,
    name: &str,
    census: &Census,
    code: CodeInfo,
    limit: usize,
) -> Diagnostic {
    let count = usize::try_from(census.entries).unwrap_or(usize::MAX);
    let percent = u128::from(census.entries) * 100 / (limit.max(1) as u128);
    let mut d = Diagnostic::new(
        code,
        format!(
            "endpoint `{name}` needs {} policy-map entries; the map holds {} ({percent}%)",
            thousands(count),
            thousands(limit)
        ),
    );
    let mut hints: BTreeSet<&'static str> = BTreeSet::new();
    for (rank, (origin_id, c)) in census.contributions().into_iter().take(3).enumerate() {
        let Some(origin) = cx.origin_by_id(origin_id) else {
            continue;
        };
        let protos: Vec<String> = c.protos.iter().map(|p| proto::name(*p)).collect();
        let ports_per_proto = c.port_prefixes.len();
        let product = c.identities * ports_per_proto * c.protos.len();
        let mut text = format!(
            "1 rule × {} × {} × {} ({}) = {}",
            plural(c.identities, "identity", "identities"),
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
        if c.identities >= 16 {
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

/// Reports every endpoint whose map overflows: the built states over
/// `policyMapMax`, and the states too large for any policy map, counted
/// without being built ([`crate::Overflow`]).
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let limit = usize::try_from(cx.config.policy_map_max).unwrap_or(usize::MAX);
    let mut censuses = Censuses::default();
    for unit in &cx.units {
        if unit.state.len() > limit {
            let census = censuses.of(unit);
            out.push(finding(cx, &cx.unit_name(unit), census, RULE.info, limit));
        }
    }
    for over in &cx.overflows {
        let mut d = finding(cx, &overflow_name(cx, over), &over.census, RULE.info, limit);
        d.notes.push(
            "the state was counted, not built: the rules that read map states skipped these endpoints"
                .to_owned(),
        );
        out.push(d);
    }
}

/// The census of each distinct state, counted once: the units of one
/// Deployment share their state (`Context::new`).
#[derive(Default)]
pub(crate) struct Censuses(HashMap<*const MapState, Census>);

impl Censuses {
    /// The census of a unit's state.
    pub(crate) fn of(&mut self, unit: &Unit) -> &Census {
        self.0
            .entry(Arc::as_ptr(&unit.state))
            .or_insert_with(|| Census::of(&unit.state))
    }
}

/// The display name of overflowing endpoints (as [`Context::unit_name`]).
fn overflow_name(cx: &Context<'_>, over: &crate::Overflow) -> String {
    let first = over
        .endpoints
        .first()
        .and_then(|i| cx.inventory.endpoints.get(*i))
        .map_or_else(String::new, |e| e.display_name());
    match over.endpoints.len() {
        0 | 1 => first,
        n => format!("{first} (+{} more with identity {})", n - 1, over.identity),
    }
}
