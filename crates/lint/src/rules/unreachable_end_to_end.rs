//! PR019 `unreachable-end-to-end`: an allow rule that admits no flow end
//! to end, because the policy on the other side blocks every flow it
//! grants: an ingress rule whose peers' egress never allows it, an egress
//! rule whose destinations' ingress never allows it.
//!
//! A new connection between two endpoints passes the sender's egress
//! policy and then the receiver's ingress policy (Cilium 1.19
//! `bpf/bpf_lxc.c`: `handle_ipv4_from_lxc` → `policy_can_egress4` on the
//! source, `ipv4_policy` → `policy_can_access_ingress` on the destination;
//! the userspace oracle `pkg/policy/lookup.go` `LookupFlow` checks both
//! ends the same way, docs/semantics.md §4.7).
//! The rule's own map entries are live (PR004/PR005 do not see it), yet no
//! packet they allow can arrive.
//!
//! Judged only when the answer does not depend on what porin cannot see:
//! every peer selector of the rule item selects at least one identity and
//! only identities of inventory endpoints (world, CIDR and entity peers,
//! reserved identities, and selectors with no inventory endpoint, which
//! stand for endpoints outside the inventory, are never judged), and every
//! such peer endpoint has the relevant direction enforced in default deny.
//! Exact: [`porin_connectivity::reach`] decides every port class of every
//! protocol of the three states involved, for every (subject, peer) pair
//! (cut by the keys the pair's lookups read, `rule_reach_indexed`, so the
//! cost per pair does not grow with the states).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use porin_compiler::allocation::IdentityKind;
use porin_compiler::mapstate::{Direction, MapState};
use porin_compiler::resolve::lower::Origin;
use porin_compiler::resolve::policy::{Resolver, SelectorCache};
use porin_compiler::resolve::rule::PolicyRule;
use porin_connectivity::flows::{PortRange, describe};
use porin_connectivity::reach::{
    Cuts, Peer, Subject, key_cuts, opposite, rule_reach, rule_reach_indexed,
};
use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::{Context, Unit};

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR019",
        name: "unreachable-end-to-end",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "An allow rule admits no flow end to end: the peers' own policy blocks every flow it grants.",
        doc: Some(Doc {
            what: "For an allow rule whose every peer is an inventory endpoint with the other direction \
enforced (an ingress rule's sources with egress policy, an egress rule's destinations with ingress \
policy), porin decides every flow class the rule grants on its own at each endpoint it selects, and \
the same flow at the peer's side. If no flow passes both, this fires and names the policies on the \
other side that block it. World, CIDR and entity peers, and selectors that select no inventory \
endpoint, are never judged: their other side is not known.",
            why: "A connection needs the sender's egress and the receiver's ingress. A rule whose peers \
never send (or receive) what it allows is dead code that looks live: the reviewer believes a path \
exists, and the map entries cost capacity. Usually the two policies disagree on a port or a label.",
            example: "# shop/db\ningress:\n- from: [{podSelector: {matchLabels: {app: api}}}]\n  ports: [{protocol: TCP, port: 5432}]\n# shop/api\npolicyTypes: [Egress]\negress:\n- to: [{podSelector: {matchLabels: {app: db}}}]\n  ports: [{protocol: TCP, port: 5433}]",
            instead: "Make the two sides agree (allow the same port on the peer's egress, or fix the \
port here), or delete the rule if the path is not wanted.",
            references: "semantics.md §4.7 (Cilium `pkg/policy/lookup.go` `LookupFlow`: the source's \
egress, then the destination's ingress; `bpf/bpf_lxc.c`); `porin graph` (the same end-to-end \
model); np-guard network-config-analyzer `nca --sanity` reports such rules as redundant.",
        }),
    },
};

/// One rule item (an origin): its lowered rules (a KNP item lowers to one
/// rule per peer), all allows of one direction.
struct Item<'r> {
    origin: u32,
    rules: Vec<(usize, &'r PolicyRule)>,
}

/// The rule items of user allow rules, by origin, in rule order.
fn items<'c>(cx: &'c Context<'_>) -> Vec<Item<'c>> {
    let mut by_origin: BTreeMap<u32, usize> = BTreeMap::new();
    let mut out: Vec<Item<'c>> = Vec::new();
    for (index, rule) in cx.rules().iter().enumerate() {
        if rule.deny || !is_user_rule(cx, index) {
            continue;
        }
        let slot = *by_origin.entry(rule.origin).or_insert_with(|| {
            out.push(Item {
                origin: rule.origin,
                rules: Vec::new(),
            });
            out.len() - 1
        });
        if let Some(item) = out.get_mut(slot) {
            item.rules.push((index, rule));
        }
    }
    out
}

/// The peer identities of an item, if every selector selects at least
/// one identity and only identities of inventory endpoints.
fn judged_peers(cx: &Context<'_>, cache: &mut SelectorCache, item: &Item<'_>) -> Option<BTreeSet<u32>> {
    let mut peers = BTreeSet::new();
    for (_, rule) in &item.rules {
        let selectors = rule.peers.as_ref()?;
        if selectors.is_empty() {
            return None;
        }
        for selector in selectors {
            let id = cache.intern(selector, &cx.table);
            let selection = cache.selection(id);
            if selection.is_empty() {
                // Names no inventory endpoint: maybe endpoints outside it.
                return None;
            }
            for identity in selection {
                let is_endpoint = cx
                    .table
                    .get(*identity)
                    .is_some_and(|info| matches!(info.kind, IdentityKind::Endpoints { .. }));
                if !is_endpoint {
                    return None;
                }
                peers.insert(*identity);
            }
        }
    }
    Some(peers)
}

/// The user rules of `unit` that put `direction` into default deny: the
/// policy on that side. Empty when the direction is not enforced in
/// default deny (then the rule is not judged).
fn enforcing(cx: &Context<'_>, unit: &Unit, direction: Direction) -> Vec<u32> {
    let rules: Vec<&PolicyRule> = unit
        .rules
        .iter()
        .filter(|r| is_user_rule(cx, **r))
        .filter_map(|r| cx.rules().get(*r))
        .filter(|r| r.direction == direction)
        .collect();
    if !rules.iter().any(|r| r.default_deny) {
        return Vec::new();
    }
    let mut origins: Vec<u32> = rules.iter().filter(|r| !r.deny).map(|r| r.origin).collect();
    origins.dedup();
    origins
}

/// `Kind ns/name` of an origin's policy.
fn policy_name(origin: &Origin) -> String {
    match &origin.namespace {
        Some(ns) => format!("{} `{ns}/{}`", origin.kind, origin.name),
        None => format!("{} `{}`", origin.kind, origin.name),
    }
}

/// One blocked (subject, peer) pair: the units (sender, receiver), the
/// ranges, the blocking origins.
struct Blocked<'c> {
    from: &'c Unit,
    to: &'c Unit,
    ranges: Vec<PortRange>,
    /// Origins on the peer's side (the first of each policy is kept).
    origins: BTreeSet<u32>,
}

/// The units of each rule and of each identity, built once instead of
/// scanning the units per item, and each state's [`Cuts`] per direction
/// (on first use; units of one Deployment share a state).
struct Index {
    by_rule: Vec<Vec<usize>>,
    by_identity: BTreeMap<u32, Vec<usize>>,
    cuts: RefCell<HashMap<(*const MapState, bool), Rc<Cuts>>>,
}

impl Index {
    fn new(cx: &Context<'_>) -> Index {
        let mut by_rule: Vec<Vec<usize>> = vec![Vec::new(); cx.rules().len()];
        let mut by_identity: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (u, unit) in cx.units.iter().enumerate() {
            for r in &unit.rules {
                if let Some(list) = by_rule.get_mut(*r)
                    && list.last() != Some(&u)
                {
                    list.push(u);
                }
            }
            by_identity.entry(unit.identity).or_default().push(u);
        }
        Index {
            by_rule,
            by_identity,
            cuts: RefCell::default(),
        }
    }

    fn cuts(&self, unit: &Unit, direction: Direction) -> Rc<Cuts> {
        let key = (Arc::as_ptr(&unit.state), direction == Direction::Egress);
        Rc::clone(
            self.cuts
                .borrow_mut()
                .entry(key)
                .or_insert_with(|| Rc::new(key_cuts(&unit.state, direction))),
        )
    }

    /// The units selected by the item's rules, in unit order.
    fn subjects<'c>(&self, cx: &'c Context<'_>, item: &Item<'_>) -> Vec<&'c Unit> {
        let mut units: Vec<usize> = item
            .rules
            .iter()
            .filter_map(|(r, _)| self.by_rule.get(*r))
            .flatten()
            .copied()
            .collect();
        units.sort_unstable();
        units.dedup();
        units.iter().filter_map(|u| cx.units.get(*u)).collect()
    }

    /// The units of the peer identities, in unit order.
    fn peers<'c>(&self, cx: &'c Context<'_>, peers: &BTreeSet<u32>) -> Vec<&'c Unit> {
        let mut units: Vec<usize> = peers
            .iter()
            .filter_map(|id| self.by_identity.get(id))
            .flatten()
            .copied()
            .collect();
        units.sort_unstable();
        units.iter().filter_map(|u| cx.units.get(*u)).collect()
    }
}

/// How the pairs of one item are walked: class by class over every key of
/// the three states ([`rule_reach`]), or over the keys each pair reads
/// ([`rule_reach_indexed`], same result).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    Indexed,
    BruteForce,
}

/// Reports allow rule items that admit no flow end to end.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    run(cx, out, Walk::Indexed);
}

/// [`check`] with every (subject, peer) pair walked over every class of
/// the three states ([`rule_reach`]) and the units found by scanning: the
/// reference [`check`] is tested against on random clusters.
#[doc(hidden)]
pub fn check_by_brute_force(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    run(cx, out, Walk::BruteForce);
}

fn run(cx: &Context<'_>, out: &mut Vec<Diagnostic>, walk: Walk) {
    let index = Index::new(cx);
    // One resolver over every rule: an item's state alone is its rules'
    // L4 policy under it (`Resolver::l4_policy_of`), the same as under a
    // resolver of the item's rules only, without matching every subject
    // against every identity again per item.
    let all = cx.resolver_of(cx.rules());
    let mut cache = SelectorCache::default();
    for item in items(cx) {
        let Some(peers) = judged_peers(cx, &mut cache, &item) else {
            continue;
        };
        if let Some(d) = judge_item(cx, &index, &all, &item, &peers, walk) {
            out.push(d);
        }
    }
}

/// One item judged over every (subject, peer) pair: its diagnostic if no
/// flow it grants passes end to end.
fn judge_item(
    cx: &Context<'_>,
    index: &Index,
    all: &Resolver<'_>,
    item: &Item<'_>,
    peers: &BTreeSet<u32>,
    walk: Walk,
) -> Option<Diagnostic> {
    let &(_, first) = item.rules.first()?;
    let direction = first.direction;
    let back = opposite(direction);
    let (subjects, peer_units): (Vec<&Unit>, Vec<&Unit>) = match walk {
        Walk::Indexed => (index.subjects(cx, item), index.peers(cx, peers)),
        Walk::BruteForce => {
            let rule_indices: Vec<usize> = item.rules.iter().map(|(i, _)| *i).collect();
            (
                cx.units
                    .iter()
                    .filter(|u| u.rules.iter().any(|r| rule_indices.contains(r)))
                    .collect(),
                cx.units
                    .iter()
                    .filter(|u| peers.contains(&u.identity))
                    .collect(),
            )
        }
    };
    let peer_policies: Vec<Vec<u32>> = peer_units
        .iter()
        .map(|u| Some(enforcing(cx, u, back)).filter(|o| !o.is_empty()))
        .collect::<Option<_>>()?;
    if peer_units.is_empty() {
        return None;
    }
    let rule_indices: Vec<usize> = item.rules.iter().map(|(i, _)| *i).collect();
    let own_rules: Vec<PolicyRule> = item.rules.iter().map(|(_, r)| (*r).clone()).collect();
    let mut granted = 0usize;
    let mut own_blocked = 0usize;
    let mut blocked: Vec<Blocked<'_>> = Vec::new();
    // The brute force compiles the item alone with a resolver of its own
    // rules; the item alone at units that share a state (same rules, ports
    // and host allow: `Context::new`) is one state too.
    let own = match walk {
        Walk::Indexed => None,
        Walk::BruteForce => Some(cx.resolver_of(&own_rules)),
    };
    let alone_at = |unit: &Unit| match &own {
        Some(own) => cx.state_with(own, unit),
        None => {
            let selecting: Vec<usize> = unit
                .rules
                .iter()
                .filter(|r| rule_indices.contains(r))
                .copied()
                .collect();
            let policy = all.l4_policy_of(unit.identity, &selecting, None);
            unit.endpoints
                .first()
                .and_then(|i| cx.inventory.endpoints.get(*i))
                .map(|endpoint| all.map_state(endpoint, &policy, &|id| format!("origin {id}")).0)
                .unwrap_or_default()
        }
    };
    let mut alones: HashMap<*const (), (MapState, Cuts)> = HashMap::new();
    for unit in subjects {
        let shared = match walk {
            Walk::Indexed => Arc::as_ptr(&unit.state).cast::<()>(),
            // Every unit on its own.
            Walk::BruteForce => std::ptr::from_ref(unit).cast::<()>(),
        };
        let (alone, alone_cuts) = alones.entry(shared).or_insert_with(|| {
            let alone = alone_at(unit);
            let cuts = key_cuts(&alone, direction);
            (alone, cuts)
        });
        let subject = Subject {
            direction,
            origin: item.origin,
            alone,
            full: &unit.state,
            identity: unit.identity,
            mutual_auth: cx.inventory.settings.mesh_auth_mutual_enabled,
        };
        let full_cuts = index.cuts(unit, direction);
        for (peer_unit, policies) in peer_units.iter().zip(&peer_policies) {
            let peer = Peer {
                state: &peer_unit.state,
                identity: peer_unit.identity,
            };
            let reach = match walk {
                Walk::Indexed => {
                    let peer_cuts = index.cuts(peer_unit, back);
                    rule_reach_indexed(&subject, &peer, [alone_cuts, &full_cuts, &peer_cuts])
                }
                Walk::BruteForce => rule_reach(&subject, &peer),
            };
            own_blocked += reach.own_blocked;
            if !reach.passing.is_empty() {
                // Some flow passes.
                return None;
            }
            if reach.granted.is_empty() {
                continue;
            }
            granted += reach.granted.len();
            let mut origins = reach.deny_origins;
            if reach.default_denied {
                origins.extend(policies.iter().copied());
            }
            // Named in the flow's direction: sender → receiver.
            let (from, to) = match direction {
                Direction::Ingress => (*peer_unit, unit),
                Direction::Egress => (unit, *peer_unit),
            };
            blocked.push(Blocked {
                from,
                to,
                ranges: reach.blocked,
                origins,
            });
        }
    }
    if granted == 0 {
        // The rule grants nothing its own side lets through (PR004,
        // PR005, PR012 speak about those).
        return None;
    }
    report(cx, item, direction, &blocked, own_blocked)
}

fn report(
    cx: &Context<'_>,
    item: &Item<'_>,
    direction: Direction,
    blocked: &[Blocked<'_>],
    own_blocked: usize,
) -> Option<Diagnostic> {
    let origin = cx.origin_by_id(item.origin)?;
    let back = opposite(direction);
    let (side, peers) = match direction {
        Direction::Ingress => ("egress", "sources"),
        Direction::Egress => ("ingress", "destinations"),
    };
    // The blocking policies, once each, in origin order.
    let mut policies: BTreeMap<String, &Origin> = BTreeMap::new();
    for b in blocked {
        for id in &b.origins {
            if let Some(o) = cx.origin_by_id(*id) {
                policies.entry(policy_name(o)).or_insert(o);
            }
        }
    }
    let names: Vec<String> = policies.keys().cloned().collect();
    let mut d = Diagnostic::new(
        RULE.info,
        format!(
            "{} admits no flow end to end: the {side} policy of its {peers} blocks every flow it allows ({})",
            cx.describe(origin),
            names.join(", ")
        ),
    )
    .at(cx.rule_location(origin));
    for (name, other) in &policies {
        d.related.push((
            cx.rule_location(other),
            format!("{name} enforces the {back} of the peer and blocks these flows"),
        ));
    }
    const SHOWN: usize = 5;
    for b in blocked.iter().take(SHOWN) {
        d.notes.push(format!(
            "{} → {}: {} blocked at the peer's {back}",
            cx.unit_name(b.from),
            cx.unit_name(b.to),
            describe(&b.ranges)
        ));
    }
    if blocked.len() > SHOWN {
        d.notes.push(format!(
            "and {} more (subject, peer) pairs, all blocked",
            blocked.len() - SHOWN
        ));
    }
    if own_blocked > 0 {
        d.notes.push(format!(
            "{own_blocked} more flow classes it grants are denied on its own side (PR004)"
        ));
    }
    d.notes.push(
        "exact: every port class of every protocol the rule grants, for every endpoint it selects and every peer, is blocked by the peer's policy; a connection needs the sender's egress and the receiver's ingress (Cilium `bpf/bpf_lxc.c`)".to_owned(),
    );
    Some(d.help(format!(
        "allow these flows in the peer's {back} policy, fix the ports or selector here, or delete this rule if the path is not wanted"
    )))
}
