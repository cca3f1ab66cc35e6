//! The change in effective connectivity between two compilations of one
//! inventory (the default view of `porin diff`).
//!
//! A connection is a flow from a source to a destination: it passes when
//! the source's egress allows the destination and the destination's
//! ingress allows the source, each decided by that endpoint's map state
//! (an end outside the inventory — the world, a CIDR, the host, ... —
//! has no policy of its own, so only the other end decides). Where
//! [`crate::change`] lists each endpoint's own policy decision per
//! direction, this module lists the end-to-end result, which is what a
//! reviewer asks: which workload can newly reach which, on which ports.
//!
//! - **Workloads**: the endpoints of the inventory, grouped (pods of one
//!   identity and map state in both compilations are one node, with their
//!   count; a Kubernetes manifest's workload is one endpoint already).
//! - **External peers**: the reserved identities (world per family, host,
//!   remote-node, health, init, unmanaged, ...) and the CIDR identities of
//!   either compilation. Identity 2 (`reserved:world`) is left out: no
//!   packet carries it in a dual-stack agent (`bpf/bpf_lxc.c`; world-ipv4
//!   and world-ipv6 stand for the world). External peers whose change is the
//!   same for the same workload are one row ([`Node::members`] lists them):
//!   a world, unmanaged, health and init row each would bury the change.
//! - **Exactness**: for every (source, destination) the port classes cut
//!   by the keys of every map state involved (both ends, both
//!   compilations) are decided once each, as in [`crate::flows`]; the
//!   verdict is constant on a class, so the before and after port sets are
//!   exact, not sampled.
//! - **Attribution**: each changed class names the rule items that made
//!   it change, from the check (egress of the source, ingress of the
//!   destination) whose verdict changed: an allow that no longer allows
//!   (old side), an allow or deny that now decides (new side), or, when
//!   the direction went from not enforced to default deny (or back), the
//!   default-deny rules that select the endpoint
//!   ([`porin_compiler::compile::EndpointPolicy::selected_by`]).
//!
//! - **L7**: a flow that goes through the proxy on one side and not on the
//!   other changed too (its requests are filtered now, or no longer), even
//!   on the same ports; L7 rules themselves (paths, methods) are not
//!   compared.
//!
//! CIDR identities are matched by prefix across compilations; a prefix of
//! one side only is decided on the other with the narrowest identity whose
//! prefix contains it, as in [`crate::change`]. Peers are the identities
//! the compilations know: an identity of another cluster, which no
//! inventory names, is not a row (nor in the per-direction view).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use porin_compiler::allocation::IdentityKind;
use porin_compiler::compile::{Compiled, EndpointPolicy};
use porin_compiler::explain::passes;
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{Decision, Direction, MapState, Verdict};
use porin_compiler::resolve::lower::{Origin, OriginKind};

use crate::change::{Peer, identity_in, peers};
use porin_compiler::resolve::rule::proto;

use crate::flows::{COMMON_PROTOCOLS, OTHER_PROTOCOL, PortRange, merge, port_classes};

/// What a node of the connectivity graph is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeKind {
    /// Endpoints of the inventory.
    Workload,
    /// Peers outside the inventory (reserved entities, CIDRs, the world).
    External,
}

/// One end of a connection.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Node {
    /// Whether it is a workload or an external class.
    pub kind: NodeKind,
    /// The name users know: `default/cartservice`, `default/web-* (3
    /// pods)`, `world`, `CIDR 203.0.113.0/24`, `host, remote-node`.
    pub name: String,
    /// The endpoints (`namespace/name`) of a workload, or the peers of an
    /// external class (`world-ipv4`, `health`, `CIDR 10.0.0.0/8`).
    pub members: Vec<String>,
    /// The identity number of a workload in the new compilation.
    pub identity: Option<u32>,
}

/// How a connection changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeKind {
    /// Nothing passed before; something passes now.
    Opened,
    /// Something passes before and after, on other ports or otherwise
    /// through the L7 proxy.
    Changed,
    /// Something passed before; nothing passes now.
    Closed,
}

impl ChangeKind {
    /// `opened`, `changed` or `closed`.
    pub const fn word(self) -> &'static str {
        match self {
            Self::Opened => "opened",
            Self::Changed => "changed",
            Self::Closed => "closed",
        }
    }
}

/// Which compilation a cause's rule is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// The old policy set.
    Old,
    /// The new policy set.
    New,
}

/// What the rule of a cause does to the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Effect {
    /// It allowed the flow (old side) or allows it now (new side).
    Allows,
    /// It denied the flow (old side) or denies it now (new side).
    Denies,
    /// It selects the endpoint, putting the direction in default deny
    /// (new side), or did (old side).
    DefaultDeny,
    /// Its L7 rules send the flow through the proxy (new side), or did
    /// (old side).
    Proxies,
}

/// How the rule item of a cause differs between the two policy sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleChange {
    /// Its policy is only in the new set.
    PolicyAdded,
    /// Its policy is only in the old set.
    PolicyRemoved,
    /// The policy is in both, the item (field path) only in the new one.
    RuleAdded,
    /// The policy is in both, the item only in the old one.
    RuleRemoved,
    /// The item is in both sets, with another effect on this flow.
    RuleChanged,
}

impl RuleChange {
    /// `policy added`, `rule removed`, ...
    pub const fn words(self) -> &'static str {
        match self {
            Self::PolicyAdded => "policy added",
            Self::PolicyRemoved => "policy removed",
            Self::RuleAdded => "rule added",
            Self::RuleRemoved => "rule removed",
            Self::RuleChanged => "rule changed",
        }
    }
}

/// A rule item that made a connection change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The rule item (policy, field path, file, line), from the
    /// compilation of [`Self::side`].
    pub origin: Origin,
    /// Which compilation the rule is from.
    pub side: Side,
    /// What it does to the flow.
    pub effect: Effect,
    /// How it differs between the sets.
    pub change: RuleChange,
    /// The endpoint and direction whose check it decided
    /// (`default/checkoutservice egress`).
    pub check: String,
}

/// One changed connection: its allowed ports differ, or the ports that go
/// through the L7 proxy do (L7 rules added or removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// How it changed.
    pub change: ChangeKind,
    /// The source.
    pub from: Node,
    /// The destination.
    pub to: Node,
    /// The ports that passed before, merged per protocol.
    pub before: Vec<PortRange>,
    /// The ports that pass now.
    pub after: Vec<PortRange>,
    /// Of [`Self::before`], the ports that went through the L7 proxy.
    pub before_l7: Vec<PortRange>,
    /// Of [`Self::after`], the ports that go through the L7 proxy.
    pub after_l7: Vec<PortRange>,
    /// The rule items that made it change, old side first.
    pub causes: Vec<Cause>,
}

/// A policy of one side only.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PolicyRef {
    /// Its kind.
    pub kind: OriginKind,
    /// Its namespace (none for cluster-wide policies).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The file it is defined in.
    pub file: String,
}

impl PolicyRef {
    /// `CiliumNetworkPolicy default/web`.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// The change in effective connectivity between two compilations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectivityDiff {
    /// The changed connections: opened, then changed, then closed.
    pub connections: Vec<Connection>,
    /// Policies of the new set only.
    pub policies_added: Vec<PolicyRef>,
    /// Policies of the old set only.
    pub policies_removed: Vec<PolicyRef>,
}

impl ConnectivityDiff {
    /// Whether no connection changed.
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty()
    }

    /// The number of connections of a kind.
    pub fn count(&self, kind: ChangeKind) -> usize {
        self.connections.iter().filter(|c| c.change == kind).count()
    }

    /// `2 connections opened, 1 closed, 1 policy added`; `no connectivity
    /// change` (with the policy notices) when no connection changed.
    pub fn summary(&self) -> String {
        let plural = |n: usize, one: &str, many: &str| {
            if n == 1 {
                format!("{n} {one}")
            } else {
                format!("{n} {many}")
            }
        };
        let mut parts = Vec::new();
        if self.is_empty() {
            parts.push("no connectivity change".to_owned());
        } else {
            parts.push(format!(
                "{} opened",
                plural(self.count(ChangeKind::Opened), "connection", "connections")
            ));
            parts.push(format!("{} closed", self.count(ChangeKind::Closed)));
            let changed = self.count(ChangeKind::Changed);
            if changed > 0 {
                parts.push(format!("{changed} changed"));
            }
        }
        if !self.policies_added.is_empty() {
            parts.push(format!(
                "{} added",
                plural(self.policies_added.len(), "policy", "policies")
            ));
        }
        if !self.policies_removed.is_empty() {
            parts.push(format!(
                "{} removed",
                plural(self.policies_removed.len(), "policy", "policies")
            ));
        }
        parts.join(", ")
    }
}

/// Endpoints of one workload: (index in old, index in new), in inventory
/// order.
struct Group {
    members: Vec<(usize, usize)>,
}

/// A node as the flow computation sees it.
enum End<'c> {
    Workload {
        old: &'c EndpointPolicy,
        new: &'c EndpointPolicy,
    },
    External {
        old_id: u32,
        new_id: u32,
    },
}

impl End<'_> {
    fn ids(&self) -> (u32, u32) {
        match self {
            End::Workload { old, new, .. } => (old.identity, new.identity),
            End::External { old_id, new_id, .. } => (*old_id, *new_id),
        }
    }

    /// Whether nothing this end contributes to a flow changed: its
    /// identity, and for a workload its map state.
    fn unchanged(&self) -> bool {
        let (a, b) = self.ids();
        a == b
            && match self {
                End::Workload { old, new } => old.state == new.state,
                End::External { .. } => true,
            }
    }
}

/// The endpoints grouped into workloads: same identity and same map state
/// (shared state object) in both compilations; endpoints matched by name.
fn groups(old: &Compiled, new: &Compiled) -> Vec<Group> {
    type GroupKey = (u32, u32, *const MapState, *const MapState);
    let mut index: BTreeMap<GroupKey, usize> = BTreeMap::new();
    let mut out: Vec<Group> = Vec::new();
    let old_names: BTreeMap<String, usize> = old
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| (e.display_name(), i))
        .collect();
    for (n, endpoint) in new.endpoints.iter().enumerate() {
        let Some(&o) = old_names.get(&endpoint.display_name()) else {
            continue;
        };
        let before = &old.endpoints[o];
        let key = (
            before.identity,
            endpoint.identity,
            Arc::as_ptr(&before.state),
            Arc::as_ptr(&endpoint.state),
        );
        let slot = *index.entry(key).or_insert_with(|| {
            out.push(Group {
                members: Vec::new(),
            });
            out.len() - 1
        });
        out[slot].members.push((o, n));
    }
    out
}

/// `default/cartservice`, or for several pods their shared name prefix
/// (`default/cart-* (3 pods)`) or the first (`default/a and 2 more`).
fn group_name(names: &[String]) -> String {
    let [first, rest @ ..] = names else {
        return String::new();
    };
    if rest.is_empty() {
        return first.clone();
    }
    let mut prefix = first.as_str();
    for name in rest {
        let common = prefix
            .char_indices()
            .zip(name.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((i, a), _)| i + a.len_utf8());
        prefix = &prefix[..common];
    }
    // Cut at the last separator, so that `web-7d9f-abc` and `web-7d9f-xyz`
    // give `web-7d9f-*`, not `web-7d9f-` plus a stray letter.
    let cut = prefix.rfind(['-', '.']).map_or(0, |i| i + 1);
    let prefix = &prefix[..cut];
    if prefix.is_empty() || prefix.ends_with('/') {
        format!("{first} and {} more", rest.len())
    } else {
        format!("{prefix}* ({} pods)", names.len())
    }
}

/// The external peers of both compilations: reserved identities but
/// reserved:world (2) and those endpoints carry, then CIDR prefixes; with
/// their identity in each compilation.
fn externals(old: &Compiled, new: &Compiled) -> Vec<(String, u32, u32)> {
    let old_peers = peers(old);
    let new_peers = peers(new);
    let mut all: BTreeSet<Peer> = old_peers.keys().cloned().collect();
    all.extend(new_peers.keys().cloned());
    let mut out = Vec::new();
    for peer in all {
        let old_id = identity_in(old, &old_peers, &peer);
        let new_id = identity_in(new, &new_peers, &peer);
        let name = match &peer {
            Peer::Cidr(prefix) => format!("CIDR {prefix}"),
            Peer::Identity(id) => {
                let kind = new
                    .identities
                    .iter()
                    .chain(&old.identities)
                    .find(|i| i.id == *id)
                    .map(|i| &i.kind);
                if *id == Identity::WORLD.get()
                    || !matches!(kind, Some(IdentityKind::Reserved { .. }))
                {
                    continue;
                }
                new.identity_name(*id)
            }
        };
        out.push((name, old_id, new_id));
    }
    // The world first: the peer reviewers look for.
    out.sort_by_key(|(name, _, _)| !name.starts_with("world"));
    out
}

/// The check of one end: the endpoint in each compilation, the direction
/// and the peer identity in each.
struct CheckRef<'c> {
    old: &'c EndpointPolicy,
    new: &'c EndpointPolicy,
    direction: Direction,
    old_peer: Identity,
    new_peer: Identity,
}

impl CheckRef<'_> {
    /// The causes `ids` of `side`, naming this check.
    fn causes(&self, side: Side, ids: Vec<u32>, effect: Effect) -> Vec<RawCause> {
        let subject = format!("{} {}", self.new.display_name(), self.direction);
        ids.into_iter()
            .map(|id| (side, id, effect, subject.clone()))
            .collect()
    }

    /// Whether the check passes before and after
    /// ([`porin_compiler::explain::passes`]: an auth-required entry passes
    /// when the compilation's cluster authenticates the pair).
    fn passes(
        &self,
        (old, new): (&Compiled, &Compiled),
        (o, n): &(Decision, Decision),
    ) -> (bool, bool) {
        (
            passes(
                old.mutual_auth,
                o.verdict,
                self.old.identity,
                self.old_peer.get(),
            ),
            passes(
                new.mutual_auth,
                n.verdict,
                self.new.identity,
                self.new_peer.get(),
            ),
        )
    }

    fn decide(&self, proto: u8, port: u16) -> (Decision, Decision) {
        (
            self.old
                .state
                .lookup(self.direction, self.old_peer, proto, port),
            self.new
                .state
                .lookup(self.direction, self.new_peer, proto, port),
        )
    }
}

/// A cause before it is resolved against the origin tables.
type RawCause = (Side, u32, Effect, String);

fn policy_origins(decision: &Decision, compiled: &Compiled) -> Vec<u32> {
    decision
        .chosen
        .iter()
        .flat_map(|m| m.entry.origins.iter().copied())
        .filter(|id| compiled.origin(*id).is_some_and(|o| !o.is_synthetic()))
        .collect()
}

/// Why a check's verdict changed: `denied` is the side on which it denies
/// (old for an opened flow, new for a closed one). A rule deciding there
/// (a deny, or an allow requiring authentication) is the cause: an allow
/// cannot outrank a deny. Else the allow of the other side is (it went
/// away, or it came). Else the other side's allow is Cilium's allow-all of
/// an unenforced direction, and the cause is the default-deny rules that
/// select the endpoint on the denying side.
fn cause_of(
    check: &CheckRef<'_>,
    (old, new): (&Compiled, &Compiled),
    (was, is): &(Decision, Decision),
    denied: Side,
) -> Vec<RawCause> {
    let (deny, allow, allowed) = match denied {
        Side::Old => ((was, old), (is, new), Side::New),
        Side::New => ((is, new), (was, old), Side::Old),
    };
    let deny_rule = policy_origins(deny.0, deny.1);
    if !deny_rule.is_empty() {
        return check.causes(denied, deny_rule, Effect::Denies);
    }
    let allow_rule = policy_origins(allow.0, allow.1);
    if !allow_rule.is_empty() {
        return check.causes(allowed, allow_rule, Effect::Allows);
    }
    let endpoint = match denied {
        Side::Old => check.old,
        Side::New => check.new,
    };
    check.causes(
        denied,
        endpoint.selected_by.direction(check.direction).to_vec(),
        Effect::DefaultDeny,
    )
}

/// (kind, namespace, name) of a policy.
type PolicyKey = (OriginKind, Option<String>, String);

fn policy_key(origin: &Origin) -> PolicyKey {
    (origin.kind, origin.namespace.clone(), origin.name.clone())
}

/// The policies of a compilation, with the file of their first rule.
fn policies(compiled: &Compiled) -> BTreeMap<PolicyKey, String> {
    let mut out = BTreeMap::new();
    for origin in compiled.origins.iter().filter(|o| !o.is_synthetic()) {
        out.entry(policy_key(origin))
            .or_insert_with(|| origin.file.clone());
    }
    out
}

fn resolve(raw: &BTreeSet<RawCause>, old: &Compiled, new: &Compiled) -> Vec<Cause> {
    let mut out = Vec::new();
    for (side, id, effect, check) in raw {
        let (this, other) = match side {
            Side::Old => (old, new),
            Side::New => (new, old),
        };
        let Some(origin) = this.origin(*id) else {
            continue;
        };
        let key = policy_key(origin);
        let in_other: Vec<&Origin> = other
            .origins
            .iter()
            .filter(|o| policy_key(o) == key)
            .collect();
        let change = match (side, in_other.is_empty()) {
            (Side::Old, true) => RuleChange::PolicyRemoved,
            (Side::New, true) => RuleChange::PolicyAdded,
            _ if in_other.iter().any(|o| o.route == origin.route) => RuleChange::RuleChanged,
            (Side::Old, false) => RuleChange::RuleRemoved,
            (Side::New, false) => RuleChange::RuleAdded,
        };
        let cause = Cause {
            origin: origin.clone(),
            side: *side,
            effect: *effect,
            change,
            check: check.clone(),
        };
        if !out.contains(&cause) {
            out.push(cause);
        }
    }
    out
}

/// One (source, destination) before merging external classes.
struct Raw {
    change: ChangeKind,
    from: usize,
    to: usize,
    before: Vec<PortRange>,
    after: Vec<PortRange>,
    before_l7: Vec<PortRange>,
    after_l7: Vec<PortRange>,
    causes: BTreeSet<RawCause>,
}

/// The change of one (source, destination), if any.
fn connection(
    ends: &[End<'_>],
    from: usize,
    to: usize,
    old: &Compiled,
    new: &Compiled,
) -> Option<Raw> {
    let (src, dst) = (&ends[from], &ends[to]);
    let mut checks = Vec::new();
    let (src_old, src_new) = src.ids();
    let (dst_old, dst_new) = dst.ids();
    let id = |n: u32| Identity::new(n).ok();
    if let End::Workload { old: o, new: n, .. } = src {
        checks.push(CheckRef {
            old: o,
            new: n,
            direction: Direction::Egress,
            old_peer: id(dst_old)?,
            new_peer: id(dst_new)?,
        });
    }
    if let End::Workload { old: o, new: n, .. } = dst {
        checks.push(CheckRef {
            old: o,
            new: n,
            direction: Direction::Ingress,
            old_peer: id(src_old)?,
            new_peer: id(src_new)?,
        });
    }
    let pairs: Vec<(&MapState, Direction)> = checks
        .iter()
        .flat_map(|c| [(&*c.old.state, c.direction), (&*c.new.state, c.direction)])
        .collect();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    let (mut before_l7, mut after_l7) = (Vec::new(), Vec::new());
    let mut causes = BTreeSet::new();
    let mut changed = false;
    let proxied = |d: &Decision| matches!(d.verdict, Verdict::Redirect { .. });
    for (p, lo, hi) in port_classes(&pairs) {
        let decisions: Vec<(Decision, Decision)> = checks.iter().map(|c| c.decide(p, lo)).collect();
        let passing: Vec<(bool, bool)> = checks
            .iter()
            .zip(&decisions)
            .map(|(c, d)| c.passes((old, new), d))
            .collect();
        let was = passing.iter().all(|(o, _)| *o);
        let is = passing.iter().all(|(_, n)| *n);
        // A flow that passes through the L7 proxy is filtered per request:
        // a connection that starts or stops going through it changed.
        let was_l7 = was && decisions.iter().any(|(o, _)| proxied(o));
        let is_l7 = is && decisions.iter().any(|(_, n)| proxied(n));
        if was {
            before.push((p, lo, hi));
        }
        if is {
            after.push((p, lo, hi));
        }
        if was_l7 {
            before_l7.push((p, lo, hi));
        }
        if is_l7 {
            after_l7.push((p, lo, hi));
        }
        if was == is && was_l7 == is_l7 {
            continue;
        }
        changed = true;
        if was == is {
            // Passes before and after; the proxy is what changed, at the
            // checks whose redirect came or went.
            for (check, (o, n)) in checks.iter().zip(&decisions) {
                if proxied(n) && !proxied(o) {
                    causes.extend(check.causes(Side::New, policy_origins(n, new), Effect::Proxies));
                } else if proxied(o) && !proxied(n) {
                    causes.extend(check.causes(Side::Old, policy_origins(o, old), Effect::Proxies));
                }
            }
            continue;
        }
        for ((check, d), (o, n)) in checks.iter().zip(&decisions).zip(&passing) {
            if is && !o {
                causes.extend(cause_of(check, (old, new), d, Side::Old));
            } else if was && !n {
                causes.extend(cause_of(check, (old, new), d, Side::New));
            }
        }
    }
    if !changed {
        return None;
    }
    let change = match (before.is_empty(), after.is_empty()) {
        (true, _) => ChangeKind::Opened,
        (_, true) => ChangeKind::Closed,
        _ => ChangeKind::Changed,
    };
    Some(Raw {
        change,
        from,
        to,
        before: merge(before),
        after: merge(after),
        before_l7: merge(before_l7),
        after_l7: merge(after_l7),
        causes,
    })
}

/// `world` for both world families, then the other names; at most four
/// named.
fn class_name(members: &[String]) -> String {
    let mut names: Vec<String> = Vec::new();
    let v4 = members.iter().any(|m| m == "world-ipv4");
    let v6 = members.iter().any(|m| m == "world-ipv6");
    for member in members {
        if v4 && v6 && (member == "world-ipv4" || member == "world-ipv6") {
            if !names.iter().any(|n| n == "world") {
                names.insert(0, "world".to_owned());
            }
            continue;
        }
        names.push(member.clone());
    }
    if names.len() > 4 {
        let more = names.len() - 3;
        names.truncate(3);
        return format!("{} and {more} more", names.join(", "));
    }
    names.join(", ")
}

/// How effective connectivity changes from `old` to `new` (two
/// compilations of one inventory): every connection between workloads,
/// and between a workload and an external class, whose allowed ports
/// differ; opened first, then changed, then closed, each in source order.
pub fn connectivity_diff(old: &Compiled, new: &Compiled) -> ConnectivityDiff {
    let groups = groups(old, new);
    let mut ends: Vec<End<'_>> = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    for group in &groups {
        let Some(&(o, n)) = group.members.first() else {
            continue;
        };
        let names: Vec<String> = group
            .members
            .iter()
            .map(|(_, n)| new.endpoints[*n].display_name())
            .collect();
        nodes.push(Node {
            kind: NodeKind::Workload,
            name: group_name(&names),
            members: names,
            identity: Some(new.endpoints[n].identity),
        });
        ends.push(End::Workload {
            old: &old.endpoints[o],
            new: &new.endpoints[n],
        });
    }
    for (name, old_id, new_id) in externals(old, new) {
        nodes.push(Node {
            kind: NodeKind::External,
            members: vec![name.clone()],
            name,
            identity: None,
        });
        ends.push(End::External { old_id, new_id });
    }
    // Computed once per end, not per pair: comparing map states is linear
    // in their entries.
    let unchanged: Vec<bool> = ends.iter().map(End::unchanged).collect();
    let mut raws = Vec::new();
    for from in 0..ends.len() {
        for to in 0..ends.len() {
            let workload = |e: &End<'_>| matches!(e, End::Workload { .. });
            if !workload(&ends[from]) && !workload(&ends[to]) {
                continue;
            }
            // Nothing that decides this connection changed: no lookups.
            if unchanged[from] && unchanged[to] {
                continue;
            }
            raws.extend(connection(&ends, from, to, old, new));
        }
    }

    // External peers that change alike for one workload are one row.
    let mut merged: Vec<(Raw, Vec<usize>)> = Vec::new();
    for raw in raws {
        let external_end = |i: usize| matches!(ends[i], End::External { .. });
        let found = merged.iter_mut().find(|(m, _)| {
            m.change == raw.change
                && m.before == raw.before
                && m.after == raw.after
                && m.before_l7 == raw.before_l7
                && m.after_l7 == raw.after_l7
                && ((external_end(raw.to) && external_end(m.to) && m.from == raw.from)
                    || (external_end(raw.from) && external_end(m.from) && m.to == raw.to))
        });
        match found {
            Some((m, members)) => {
                members.push(if external_end(raw.to) {
                    raw.to
                } else {
                    raw.from
                });
                m.causes.extend(raw.causes);
            }
            None => merged.push((raw, Vec::new())),
        }
    }
    let external_names: Vec<&str> = ends
        .iter()
        .zip(&nodes)
        .filter(|(e, _)| matches!(e, End::External { .. }))
        .map(|(_, n)| n.name.as_str())
        .collect();
    let node_of = |i: usize, extra: &[usize]| -> Node {
        let mut node = nodes[i].clone();
        if let End::External { .. } = ends[i]
            && !extra.is_empty()
        {
            node.members
                .extend(extra.iter().map(|e| nodes[*e].name.clone()));
            let missing: Vec<String> = external_names
                .iter()
                .filter(|n| !node.members.iter().any(|m| m == *n))
                .map(|n| (*n).to_owned())
                .collect();
            node.name = if missing.is_empty() {
                // Every peer outside the inventory behaves alike here.
                "any peer outside the workloads".to_owned()
            } else if missing.len() <= 2 && node.members.len() > 4 {
                format!(
                    "any peer outside the workloads but {}",
                    class_name(&missing)
                )
            } else {
                class_name(&node.members)
            };
        }
        node
    };
    let mut connections: Vec<Connection> = merged
        .into_iter()
        .map(|(raw, extra)| Connection {
            change: raw.change,
            from: node_of(raw.from, &extra),
            to: node_of(raw.to, &extra),
            before: raw.before,
            after: raw.after,
            before_l7: raw.before_l7,
            after_l7: raw.after_l7,
            causes: resolve(&raw.causes, old, new),
        })
        .collect();
    // Stable: source order within a kind.
    connections.sort_by_key(|c| c.change);

    let (before, after) = (policies(old), policies(new));
    let notice = |(key, file): (&PolicyKey, &String)| PolicyRef {
        kind: key.0,
        namespace: key.1.clone(),
        name: key.2.clone(),
        file: file.clone(),
    };
    ConnectivityDiff {
        connections,
        policies_added: after
            .iter()
            .filter(|(k, _)| !before.contains_key(*k))
            .map(notice)
            .collect(),
        policies_removed: before
            .iter()
            .filter(|(k, _)| !after.contains_key(*k))
            .map(notice)
            .collect(),
    }
}

/// A set of ports in the words of a policy: `TCP/6379`, `TCP/8080-8090,
/// UDP/53`, `TCP any port`, `any port`, `none`; a set that is everything
/// but a few ports is `any port except TCP/22` (never the complement's
/// pieces, `TCP/0-21, TCP/23-65535, UDP any port, ...`).
pub fn describe_ports(ranges: &[PortRange]) -> String {
    if ranges.is_empty() {
        return "none".to_owned();
    }
    let mut protocols: BTreeSet<u8> = COMMON_PROTOCOLS.into_iter().collect();
    protocols.insert(OTHER_PROTOCOL);
    protocols.extend(ranges.iter().map(|r| r.0));
    let mut complement = Vec::new();
    for p in &protocols {
        let mut next: u32 = 0;
        for (_, lo, hi) in ranges.iter().filter(|r| r.0 == *p) {
            if u32::from(*lo) > next {
                complement.push((*p, next, u32::from(*lo) - 1));
            }
            next = u32::from(*hi) + 1;
        }
        if next <= u32::from(u16::MAX) {
            complement.push((*p, next, u32::from(u16::MAX)));
        }
    }
    let complement: Vec<PortRange> = complement
        .into_iter()
        .filter_map(|(p, lo, hi)| Some((p, u16::try_from(lo).ok()?, u16::try_from(hi).ok()?)))
        .collect();
    if complement.is_empty() {
        return "any port".to_owned();
    }
    let list = |ranges: &[PortRange]| {
        ranges
            .iter()
            .map(|&(p, lo, hi)| {
                let name = if p == OTHER_PROTOCOL {
                    return "other protocols".to_owned();
                } else {
                    proto::name(p)
                };
                if lo == 0 && hi == u16::MAX {
                    format!("{name} any port")
                } else if lo == hi {
                    format!("{name}/{lo}")
                } else {
                    format!("{name}/{lo}-{hi}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if complement.len() < ranges.len() {
        format!("any port except {}", list(&complement))
    } else {
        list(ranges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_described_as_policies_write_them() {
        let tcp = proto::TCP;
        assert_eq!(describe_ports(&[]), "none");
        assert_eq!(describe_ports(&[(tcp, 6379, 6379)]), "TCP/6379");
        assert_eq!(
            describe_ports(&[(tcp, 8080, 8090), (proto::UDP, 53, 53)]),
            "TCP/8080-8090, UDP/53"
        );
        assert_eq!(describe_ports(&[(tcp, 0, u16::MAX)]), "TCP any port");
        let everything: Vec<PortRange> = COMMON_PROTOCOLS
            .into_iter()
            .chain([OTHER_PROTOCOL])
            .map(|p| (p, 0, u16::MAX))
            .collect();
        assert_eq!(describe_ports(&everything), "any port");
        let mut but_ssh: Vec<PortRange> = vec![(tcp, 0, 21), (tcp, 23, u16::MAX)];
        but_ssh.extend(everything.iter().filter(|r| r.0 != tcp));
        but_ssh.sort_unstable();
        assert_eq!(describe_ports(&but_ssh), "any port except TCP/22");
    }

    #[test]
    fn pods_of_one_workload_are_named_by_their_prefix() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(group_name(&names(&["default/web"])), "default/web");
        assert_eq!(
            group_name(&names(&["default/web-7d9f-abc", "default/web-7d9f-xyz"])),
            "default/web-7d9f-* (2 pods)"
        );
        assert_eq!(
            group_name(&names(&["default/a", "default/b", "default/c"])),
            "default/a and 2 more"
        );
    }

    #[test]
    fn world_families_collapse_into_one_class_name() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(class_name(&names(&["world-ipv4", "world-ipv6"])), "world");
        assert_eq!(
            class_name(&names(&["host", "world-ipv4", "world-ipv6", "health"])),
            "world, host, health"
        );
        assert_eq!(
            class_name(&names(&["a", "b", "c", "d", "e"])),
            "a, b, c and 2 more"
        );
    }
}
