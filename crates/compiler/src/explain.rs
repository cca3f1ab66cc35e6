//! The reference evaluator: decides a flow from compiled map state and
//! explains the decision.
//!
//! A flow from A to B is checked where Cilium checks it
//! (docs/policy-tests.md, `policy.LookupFlow` in `pkg/policy/lookup.go`):
//! at A's egress when A is an endpoint, and at B's ingress when B is an
//! endpoint, each with the datapath lookup of §5.4
//! ([`crate::mapstate::MapState::lookup`]). The flow is `deny` if either
//! check denies, `redirect` if no check denies and one redirects, `allow`
//! otherwise. A direction no policy selects holds the allow-all key, so it
//! allows.
//!
//! Authentication: a matched entry that requires authentication drops the
//! packet in the datapath until the auth map holds an entry; porin has no
//! auth map, so by default such a flow is `deny`, and the explanation says
//! so. Under the inventory setting `mesh-auth-mutual-enabled: true` (the
//! cluster runs Cilium's SPIRE mutual authentication) it is decided as an
//! authenticated cluster decides it ([`authenticates`]): the handshake
//! succeeds between two cluster endpoints, so the flow passes.

use std::collections::BTreeSet;
use std::fmt;
use std::fmt::Write as _;
use std::net::IpAddr;

use serde::Serialize;

use crate::allocation::IdentityKind;
use crate::compile::{Compiled, EndpointPolicy};
use crate::identity::Identity;
pub use crate::ipcache::Family;
use crate::mapstate::{AuthType, Decision, DenyReason, Direction, MatchedEntry, Verdict};
use crate::resolve::lower::{LOCALHOST_ORIGIN_NAME, Origin};
use crate::resolve::rule::proto;

/// A flow end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// An endpoint of the compilation (index into `Compiled::endpoints`).
    Endpoint(usize),
    /// An address outside the endpoints, with its ipcache identity.
    Address(IpAddr, u32),
    /// A reserved identity (entity word) that the same identity stands
    /// for in every family (`host`, `remote-node`, ...).
    Reserved(String, u32),
    /// The outside world (`world`, `world-ipv4`, `world-ipv6`): traffic
    /// from or to addresses that no endpoint and no policy prefix covers.
    /// Its identity depends on the family (see [`WorldPeer`]).
    World(WorldPeer),
}

/// The outside world as a flow end. Identity 2 (`reserved:world`) is no
/// packet's identity in a dual-stack agent: `0.0.0.0/0` carries
/// world-ipv4 (9) and `::/0` world-ipv6 (10) (`daemon/cmd/hostips-sync.go`;
/// an ipcache miss gives the same, `bpf/bpf_lxc.c`). So the peer is one
/// address per family, picked outside every endpoint and policy prefix
/// ([`Compiled::world_address`]), whose ipcache identity decides, in the
/// reference evaluator and in the kernel alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldPeer {
    /// The word as written.
    pub name: String,
    /// Per family the word stands for (IPv4 first): the address and its
    /// ipcache identity.
    pub addresses: Vec<(IpAddr, u32)>,
    /// Families the word stands for in which every address is inside an
    /// endpoint or a policy prefix: no packet of theirs carries the world
    /// identity, so the peer has no address there.
    pub covered: Vec<Family>,
}

impl WorldPeer {
    /// The address of `family`, if the peer has one.
    pub fn address(&self, family: Family) -> Option<(IpAddr, u32)> {
        self.addresses
            .iter()
            .copied()
            .find(|(ip, _)| Family::of(*ip) == family)
    }
}

/// Why a peer could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPeer(pub String);

impl std::error::Error for UnknownPeer {}

impl fmt::Display for UnknownPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.0.as_str();
        if matches!(word, "all" | "cluster" | "none") {
            // Entities that select sets of identities, not one peer
            // (`EntitySelectorMapping`, pkg/policy/api/entity.go).
            return write!(
                f,
                "`{word}` is an entity of policies (a set of peers), not one peer: name an endpoint, an IP address or one entity (world, host, ...) inside it"
            );
        }
        write!(
            f,
            "unknown peer `{word}`: not an endpoint (namespace/name or name), an IP address or an entity (world, world-ipv4, world-ipv6, host, remote-node, kube-apiserver, health, init, ingress, unmanaged)"
        )
    }
}

/// The families a world word stands for.
fn world_families(word: &str) -> Option<&'static [Family]> {
    match word {
        "world" => Some(&Family::ALL),
        "world-ipv4" => Some(&[Family::V4]),
        "world-ipv6" => Some(&[Family::V6]),
        _ => None,
    }
}

impl Peer {
    /// Parses a peer of docs/policy-tests.md: `namespace/name`, `name`,
    /// an IP address, or an entity word.
    pub fn parse(text: &str, compiled: &Compiled) -> Result<Self, UnknownPeer> {
        let text = text.trim();
        if let Ok(ip) = text.parse::<IpAddr>() {
            if let Some(index) = compiled.endpoints.iter().position(|e| e.ips.contains(&ip)) {
                return Ok(Self::Endpoint(index));
            }
            return Ok(Self::Address(ip, compiled.identity_of_ip(ip)));
        }
        let (namespace, name) = match text.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, text),
        };
        if let Some(index) = compiled
            .endpoints
            .iter()
            .position(|e| e.namespace.as_deref() == namespace && e.name == name)
        {
            return Ok(Self::Endpoint(index));
        }
        // `node/NAME`: a node's first address, with the identity the
        // ipcache gives it (host for the local node, remote-node else).
        if namespace == Some("node")
            && let Some(ip) = compiled
                .nodes
                .iter()
                .find(|n| n.name == name)
                .and_then(|n| n.ips.first())
        {
            return Ok(Self::Address(*ip, compiled.identity_of_ip(*ip)));
        }
        if namespace.is_none()
            && let Some(families) = world_families(text)
        {
            let mut world = WorldPeer {
                name: text.to_owned(),
                addresses: Vec::new(),
                covered: Vec::new(),
            };
            for family in families {
                match compiled.world_address(*family) {
                    Some(ip) => world.addresses.push((ip, compiled.identity_of_ip(ip))),
                    None => world.covered.push(*family),
                }
            }
            return Ok(Self::World(world));
        }
        // `host`: the host endpoint when the compilation has one (the
        // local node's, or a cluster dump's), so that the host firewall
        // checks the host's side of the flow.
        if namespace.is_none()
            && text == "host"
            && let Some(index) = compiled
                .endpoints
                .iter()
                .position(|e| e.identity == Identity::HOST.get())
        {
            return Ok(Self::Endpoint(index));
        }
        if namespace.is_none()
            && let Some(identity) = Identity::from_reserved_name(text)
            && text != "overlay-to-encrypt"
        {
            return Ok(Self::Reserved(text.to_owned(), identity.get()));
        }
        Err(UnknownPeer(text.to_owned()))
    }

    /// The families the peer can send from or receive on: an endpoint's
    /// are those of its addresses, an IP's its own, a reserved entity's
    /// both (it stands for any address of its identity), the world's those
    /// it has an address in.
    pub fn families(&self, compiled: &Compiled) -> BTreeSet<Family> {
        match self {
            Self::Endpoint(index) => compiled
                .endpoints
                .get(*index)
                .map(|e| e.ips.iter().map(|ip| Family::of(*ip)).collect())
                .unwrap_or_default(),
            Self::Address(ip, _) => BTreeSet::from([Family::of(*ip)]),
            Self::Reserved(..) => Family::ALL.into_iter().collect(),
            Self::World(world) => world
                .addresses
                .iter()
                .map(|(ip, _)| Family::of(*ip))
                .collect(),
        }
    }

    /// The identity a packet of `family` from or to the peer carries;
    /// `None` when the peer has no address of that family.
    pub fn identity(&self, compiled: &Compiled, family: Family) -> Option<u32> {
        if !self.families(compiled).contains(&family) {
            return None;
        }
        match self {
            Self::Endpoint(index) => compiled.endpoints.get(*index).map(|e| e.identity),
            Self::Address(_, id) | Self::Reserved(_, id) => Some(*id),
            Self::World(world) => world.address(family).map(|(_, id)| id),
        }
    }

    /// Whether the peer's identity depends on the family (the world), so
    /// that a flow with it is decided per family.
    pub fn is_per_family(&self) -> bool {
        matches!(self, Self::World(_))
    }

    /// A display name: `shop/web`, `198.51.100.7 (world-ipv4 identity 9)`,
    /// `host (identity 1)`, `world (IPv4, world-ipv4; IPv6, world-ipv6)`.
    pub fn describe(&self, compiled: &Compiled) -> String {
        match self {
            Self::Endpoint(index) => compiled
                .endpoints
                .get(*index)
                .map_or_else(String::new, EndpointPolicy::display_name),
            Self::Address(ip, id) => {
                format!("{ip} ({} identity {id})", compiled.identity_name(*id))
            }
            Self::Reserved(name, id) => format!("{name} (identity {id})"),
            Self::World(world) => {
                let families: Vec<String> = world
                    .addresses
                    .iter()
                    .map(|(ip, id)| format!("{}, {}", Family::of(*ip), compiled.identity_name(*id)))
                    .collect();
                if families.is_empty() {
                    format!("{} (no address)", world.name)
                } else {
                    format!("{} ({})", world.name, families.join("; "))
                }
            }
        }
    }

    /// The peer as seen by a packet of `family`: `world (IPv4,
    /// world-ipv4)` for the world, [`Self::describe`] otherwise.
    pub fn describe_in(&self, compiled: &Compiled, family: Family) -> String {
        match self {
            Self::World(world) => match world.address(family) {
                Some((_, id)) => {
                    format!("{} ({family}, {})", world.name, compiled.identity_name(id))
                }
                None => format!("{} (no {family} address)", world.name),
            },
            other => other.describe(compiled),
        }
    }
}

/// The verdict of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowVerdict {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
    /// Allowed through an L7 proxy.
    Redirect,
}

impl fmt::Display for FlowVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Redirect => "redirect",
        })
    }
}

impl FlowVerdict {
    /// Parses `allow`, `deny` or `redirect`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "allow" => Some(Self::Allow),
            "deny" => Some(Self::Deny),
            "redirect" => Some(Self::Redirect),
            _ => None,
        }
    }

    /// The checks of one packet combined: deny if any denies, redirect if
    /// none denies and one redirects, allow otherwise (also for none).
    pub fn of_checks(verdicts: impl IntoIterator<Item = FlowVerdict>) -> FlowVerdict {
        let verdicts: Vec<FlowVerdict> = verdicts.into_iter().collect();
        if verdicts.contains(&Self::Deny) {
            Self::Deny
        } else if verdicts.contains(&Self::Redirect) {
            Self::Redirect
        } else {
            Self::Allow
        }
    }

    /// The verdicts of alternative packets of one flow (its families)
    /// combined: the most permissive, because *some* packet of the flow
    /// gets it (allow over redirect over deny). `None` for no packet.
    pub fn of_alternatives(verdicts: impl IntoIterator<Item = FlowVerdict>) -> Option<FlowVerdict> {
        verdicts.into_iter().max_by_key(|v| match v {
            Self::Deny => 0,
            Self::Redirect => 1,
            Self::Allow => 2,
        })
    }
}

/// Per-family verdicts as printed: `deny` when the families agree (or
/// there is one), `IPv4 deny, IPv6 allow` when they differ.
pub fn describe_family_verdicts(families: &[(Option<Family>, FlowVerdict)]) -> String {
    let first = families.first().map(|(_, v)| *v);
    if families.iter().all(|(_, v)| Some(*v) == first) {
        return first.map_or_else(|| "no packet".to_owned(), |v| v.to_string());
    }
    families
        .iter()
        .map(|(family, verdict)| match family {
            Some(family) => format!("{family} {verdict}"),
            None => verdict.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A flow to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Source.
    pub from: Peer,
    /// Destination.
    pub to: Peer,
    /// IP protocol number.
    pub proto: u8,
    /// Destination port, or ICMP type for ICMP/ICMPv6.
    pub port: u16,
    /// The one address family to decide the flow in (a test case's
    /// `family:`); `None` for every family both ends have.
    pub family: Option<Family>,
}

/// Why no packet can carry a flow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPacket {
    /// ICMP between ends without IPv4 in common.
    #[error(
        "ICMP travels only over IPv4 and the two ends have no IPv4 address in common; use `protocol: ICMPv6` between IPv6 peers{hint}"
    )]
    IcmpWithoutIpv4 {
        /// Why a world end lacks the family, or empty.
        hint: String,
    },
    /// ICMPv6 between ends without IPv6 in common.
    #[error(
        "ICMPv6 travels only over IPv6 and the two ends have no IPv6 address in common; use `protocol: ICMP` between IPv4 peers{hint}"
    )]
    Icmpv6WithoutIpv6 {
        /// Why a world end lacks the family, or empty.
        hint: String,
    },
    /// No family in common.
    #[error("the two ends have no address family in common; no packet can carry this flow{hint}")]
    NoCommonFamily {
        /// Why a world end lacks the family, or empty.
        hint: String,
    },
    /// The family asked for is not one the flow can travel in.
    #[error("no {family} packet can carry this flow: it travels only over {available}{hint}")]
    FamilyUnavailable {
        /// The family asked for.
        family: Family,
        /// The families it can travel in (`IPv4`, `IPv4 and IPv6`).
        available: String,
        /// Why a world end lacks the family, or empty.
        hint: String,
    },
}

impl Flow {
    /// The families packets of this flow can travel in, IPv4 first: those
    /// both ends have, narrowed to IPv4 for ICMP (IP protocol 1) and to
    /// IPv6 for ICMPv6 (58). A flow no packet can carry is an error:
    /// deciding it would give a verdict the datapath never produces.
    pub fn families(&self, compiled: &Compiled) -> Result<Vec<Family>, NoPacket> {
        let common: BTreeSet<Family> = self
            .from
            .families(compiled)
            .intersection(&self.to.families(compiled))
            .copied()
            .collect();
        let hint = [&self.from, &self.to]
            .iter()
            .filter_map(|peer| match peer {
                Peer::World(world) if !world.covered.is_empty() => Some(
                    world
                        .covered
                        .iter()
                        .map(|family| {
                            format!(
                                " (every {family} address is inside an endpoint or a policy prefix, so no {family} packet carries {}; name an address instead of `{}`)",
                                family.world_identity().reserved_name().unwrap_or("world"),
                                world.name
                            )
                        })
                        .collect::<String>(),
                ),
                _ => None,
            })
            .collect::<String>();
        let families: Vec<Family> = match self.proto {
            proto::ICMP => common.into_iter().filter(|f| *f == Family::V4).collect(),
            proto::ICMPV6 => common.into_iter().filter(|f| *f == Family::V6).collect(),
            _ => common.into_iter().collect(),
        };
        if let (Some(family), false) = (self.family, families.is_empty()) {
            if families.contains(&family) {
                return Ok(vec![family]);
            }
            return Err(NoPacket::FamilyUnavailable {
                family,
                available: families
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" and "),
                hint,
            });
        }
        if !families.is_empty() {
            return Ok(families);
        }
        Err(match self.proto {
            proto::ICMP => NoPacket::IcmpWithoutIpv4 { hint },
            proto::ICMPV6 => NoPacket::Icmpv6WithoutIpv6 { hint },
            _ => NoPacket::NoCommonFamily { hint },
        })
    }
}

/// One check of a flow (one endpoint, one direction).
#[derive(Debug, Clone)]
pub struct Check {
    /// The endpoint checked.
    pub endpoint: String,
    /// The direction.
    pub direction: Direction,
    /// The family of the packet checked, when the flow is decided per
    /// family (a world end); `None` when the check holds for every family
    /// of the flow.
    pub family: Option<Family>,
    /// The peer identity looked up.
    pub peer_identity: u32,
    /// Whether the direction is enforced.
    pub enforced: bool,
    /// The datapath decision.
    pub decision: Decision,
    /// The packet is dropped before policy: Cilium's conntrack does not
    /// track its IP protocol (`DROP_CT_UNKNOWN_PROTO`; VRRP and IGMP
    /// without `enable-extended-ip-protocols`,
    /// [`crate::resolve::rule::proto::tracked`]). The verdict is deny
    /// whatever the decision says, enforced or not.
    pub untracked_protocol: bool,
    /// The verdict this check contributes.
    pub verdict: FlowVerdict,
}

/// The evaluation of a flow.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The overall verdict: the one every family gets, or, when they
    /// differ, the most permissive ([`FlowVerdict::of_alternatives`]; see
    /// [`Self::families`]). Deny when no packet can carry the flow.
    pub verdict: FlowVerdict,
    /// The verdict of each packet decided: one entry (`None`) when every
    /// family is decided alike, one per family (IPv4 first) for a world
    /// end. Empty when no packet can carry the flow.
    pub families: Vec<(Option<Family>, FlowVerdict)>,
    /// The checks made (zero, one or two per entry of `families`).
    pub checks: Vec<Check>,
    /// Why no packet can carry the flow, if none can.
    pub no_packet: Option<NoPacket>,
}

impl Evaluation {
    /// Whether every family got the same verdict.
    pub fn families_agree(&self) -> bool {
        self.families.windows(2).all(|w| w[0].1 == w[1].1)
    }

    /// The verdict as printed: `deny`, or `IPv4 deny, IPv6 allow` when the
    /// families differ.
    pub fn describe_verdict(&self) -> String {
        if self.no_packet.is_some() {
            return "no packet".to_owned();
        }
        describe_family_verdicts(&self.families)
    }
}

/// Whether an auth-required entry of `local`'s policy lets a flow with
/// `remote` pass in a cluster whose agents run mutual authentication
/// (`mesh-auth-mutual-enabled`, [`Compiled::mutual_auth`]): the agent's
/// auth manager authenticates the pair and fills the auth map, after which
/// the datapath passes the flow. Only the SPIRE type (`required`)
/// authenticates (`test-always-fail` has a handler that always fails,
/// `pkg/auth/always_fail_authhandler.go`), and only between identities of
/// cluster workloads: `handleAuthRequest` (`pkg/auth/manager.go`) skips
/// reserved identities (host, world, health, ...), and CIDR/FQDN
/// identities (local scope) have no SPIFFE identity and no node to
/// handshake with. Never true without the setting (fail closed).
pub fn authenticates(compiled: &Compiled, auth_type: AuthType, local: u32, remote: u32) -> bool {
    authenticates_with(compiled.mutual_auth, auth_type, local, remote)
}

/// [`authenticates`] for callers that hold the setting rather than a
/// compilation (the lint works from the inventory): `mutual_auth` is the
/// value of `mesh-auth-mutual-enabled`.
pub fn authenticates_with(mutual_auth: bool, auth_type: AuthType, local: u32, remote: u32) -> bool {
    let workload = |id: u32| {
        Identity::new(id).is_ok_and(|i| !i.is_wildcard() && !i.is_reserved() && i.is_cluster())
    };
    mutual_auth && auth_type == AuthType::SPIRE && workload(local) && workload(remote)
}

/// Whether a lookup `verdict` at `local`'s side toward `remote` lets the
/// flow pass, as [`evaluate`] decides each check: allow and proxy redirect pass, an
/// auth-required entry passes when the pair authenticates
/// ([`authenticates_with`]; never without the setting), a deny does not.
/// The connectivity analyses (`porin diff`, `porin graph`, the lint's
/// end-to-end reach) decide every lookup through this.
pub fn passes(mutual_auth: bool, verdict: Verdict, local: u32, remote: u32) -> bool {
    match verdict {
        Verdict::Allow | Verdict::Redirect { .. } => true,
        Verdict::AuthRequired { auth_type } => {
            authenticates_with(mutual_auth, auth_type, local, remote)
        }
        Verdict::Deny { .. } => false,
    }
}

fn check_verdict(compiled: &Compiled, decision: &Decision, local: u32, remote: u32) -> FlowVerdict {
    match decision.verdict {
        Verdict::Redirect { .. } => FlowVerdict::Redirect,
        verdict if passes(compiled.mutual_auth, verdict, local, remote) => FlowVerdict::Allow,
        _ => FlowVerdict::Deny,
    }
}

/// Where a flow is checked: the source endpoint's egress and the
/// destination endpoint's ingress. Traffic of the host to itself is never
/// checked: it stays in the host's stack (loopback) and never passes
/// `bpf_host`, whose host firewall sees only packets from host addresses
/// leaving and packets to host addresses arriving (`bpf/lib/host_firewall.h`
/// `ipv4_host_policy_egress_lookup` / `ipv4_host_policy_ingress_lookup`).
/// The kernel engine checks the same sides.
pub fn checked_sides(compiled: &Compiled, flow: &Flow) -> Vec<(usize, Direction)> {
    let host = |peer: &Peer| match peer {
        Peer::Endpoint(index) => compiled
            .endpoints
            .get(*index)
            .is_some_and(|e| e.identity == Identity::HOST.get()),
        Peer::Reserved(_, id) => *id == Identity::HOST.get(),
        _ => false,
    };
    if host(&flow.from) && host(&flow.to) {
        return Vec::new();
    }
    let mut sides = Vec::new();
    if let Peer::Endpoint(index) = flow.from {
        sides.push((index, Direction::Egress));
    }
    if let Peer::Endpoint(index) = flow.to {
        sides.push((index, Direction::Ingress));
    }
    sides
}

/// Decides a flow: once for every family when both ends have the same
/// identity in each (endpoints, addresses, reserved entities), once per
/// family when an end is the world (world-ipv4 in IPv4, world-ipv6 in
/// IPv6). A flow no packet can carry is denied with
/// [`Evaluation::no_packet`] set; callers that take flows from users
/// refuse those first ([`Flow::families`]).
pub fn evaluate(compiled: &Compiled, flow: &Flow) -> Evaluation {
    let families = match flow.families(compiled) {
        Ok(families) => families,
        Err(no_packet) => {
            return Evaluation {
                verdict: FlowVerdict::Deny,
                families: Vec::new(),
                checks: Vec::new(),
                no_packet: Some(no_packet),
            };
        }
    };
    // A flow asked for in one family is decided, and explained, in it.
    let groups: Vec<Option<Family>> =
        if flow.from.is_per_family() || flow.to.is_per_family() || flow.family.is_some() {
            families.iter().copied().map(Some).collect()
        } else {
            vec![None]
        };
    let mut checks = Vec::new();
    let mut verdicts = Vec::new();
    for group in groups {
        // The identities of a group's packet (any family of the flow when
        // the group holds them all: they are the same in each).
        let family = group.or_else(|| families.first().copied());
        let (Some(family), Some(from), Some(to)) = (
            family,
            family.and_then(|f| flow.from.identity(compiled, f)),
            family.and_then(|f| flow.to.identity(compiled, f)),
        ) else {
            continue;
        };
        let first = checks.len();
        for (index, direction) in checked_sides(compiled, flow) {
            let peer_identity = match direction {
                Direction::Egress => to,
                Direction::Ingress => from,
            };
            let Some(endpoint) = compiled.endpoints.get(index) else {
                continue;
            };
            let identity = Identity::new(peer_identity).unwrap_or(family.world_identity());
            let decision = endpoint
                .state
                .lookup(direction, identity, flow.proto, flow.port);
            let enforced = match direction {
                Direction::Ingress => endpoint.enforcement.ingress,
                Direction::Egress => endpoint.enforcement.egress,
            };
            let untracked_protocol = !proto::tracked(
                flow.proto,
                family == Family::V6,
                compiled.extended_ip_protocols,
            );
            checks.push(Check {
                endpoint: endpoint.display_name(),
                direction,
                family: group,
                peer_identity,
                enforced,
                untracked_protocol,
                verdict: if untracked_protocol {
                    FlowVerdict::Deny
                } else {
                    check_verdict(compiled, &decision, endpoint.identity, peer_identity)
                },
                decision,
            });
        }
        let verdict = FlowVerdict::of_checks(checks[first..].iter().map(|c| c.verdict));
        verdicts.push((group, verdict));
    }
    Evaluation {
        verdict: FlowVerdict::of_alternatives(verdicts.iter().map(|(_, v)| *v))
            // Unreachable (every family of the flow is decided); fail closed.
            .unwrap_or(FlowVerdict::Deny),
        families: verdicts,
        checks,
        no_packet: None,
    }
}

fn describe_key(compiled: &Compiled, matched: &MatchedEntry) -> String {
    let key = &matched.key;
    let peer = describe_identity(compiled, key.identity().get());
    format!("{} key ({peer}, {})", key.direction(), describe_ports(key))
}

/// A key's protocol and ports: `any protocol`, `TCP any port`, `TCP/80`,
/// `TCP/8000-8080`.
fn describe_ports(key: &crate::mapstate::Key) -> String {
    if key.proto() == 0 {
        "any protocol".to_owned()
    } else if key.port_prefix_len() == 0 {
        format!("{} any port", proto::name(key.proto()))
    } else if key.port_prefix_len() == 16 {
        format!("{}/{}", proto::name(key.proto()), key.port())
    } else {
        format!(
            "{}/{}-{}",
            proto::name(key.proto()),
            key.port(),
            key.end_port()
        )
    }
}

/// An identity as explanations name it: the workloads or entity behind
/// it, then the number: `default/checkoutservice (identity 258)`,
/// `world-ipv4 (identity 9)`, `any peer` for 0.
pub fn describe_identity(compiled: &Compiled, id: u32) -> String {
    if id == 0 {
        return "any peer".to_owned();
    }
    format!("{} (identity {id})", compiled.identity_name(id))
}

/// Why a direction is in default deny: the policies whose default-deny
/// rules select the endpoint, each once with its first such rule's file
/// and line (`: default deny, set by NetworkPolicy default/deny-all
/// (deny.yaml:9)`), at most three named; ` (default deny)` when none is
/// known.
fn default_deny_by(compiled: &Compiled, endpoint: &str, direction: Direction) -> String {
    let Some(endpoint) = compiled.endpoint(endpoint) else {
        return " (default deny)".to_owned();
    };
    let mut policies: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for origin in endpoint
        .selected_by
        .direction(direction)
        .iter()
        .filter_map(|id| compiled.origin(*id))
    {
        if !seen.insert((origin.kind, origin.namespace.clone(), origin.name.clone())) {
            continue;
        }
        let name = match &origin.namespace {
            Some(ns) => format!("{ns}/{}", origin.name),
            None => origin.name.clone(),
        };
        policies.push(if origin.file.is_empty() {
            format!("{} {name}", origin.kind)
        } else {
            format!("{} {name} ({}:{})", origin.kind, origin.file, origin.line)
        });
    }
    match policies.len() {
        0 => " (default deny)".to_owned(),
        1..=3 => format!(": default deny, set by {}", policies.join(", ")),
        n => format!(
            ": default deny, set by {} and {} more policies",
            policies[..3].join(", "),
            n - 3
        ),
    }
}

/// Why a pod inside a CIDR an allow rule names is denied all the same,
/// when that is so: `; CIDR 10.0.1.0/24 is allowed (TCP/8080) by
/// NetworkPolicy default/x spec.egress[0] and covers default/db's address
/// 10.0.1.3, but Cilium never matches a pod by its address: ...`, empty
/// otherwise. The peer is a pod of the compilation; its address resolves
/// to its own identity, so an entry for the CIDR identity its address
/// would have without the pod (the longest policy prefix of the ipcache
/// holding it, else the family's world identity, as `except` entries
/// leave it) never decides its packets (cilium/cilium#9209; lint rule
/// PR020 `cidr-covers-pods` reports the rule).
fn cidr_covers_pod_note(compiled: &Compiled, check: &Check) -> String {
    let Some(endpoint) = compiled.endpoint(&check.endpoint) else {
        return String::new();
    };
    let is_address_identity = |id: u32| {
        compiled.identities.iter().any(|info| {
            info.id == id
                && matches!(
                    &info.kind,
                    IdentityKind::Cidr { .. } | IdentityKind::Reserved { .. }
                )
        })
    };
    let world_origins: BTreeSet<u32> = endpoint
        .state
        .iter()
        .filter(|(key, _)| key.direction() == check.direction && key.identity() == Identity::WORLD)
        .flat_map(|(_, entry)| entry.origins.iter().copied())
        .collect();
    let mut notes = Vec::new();
    for pod in compiled
        .endpoints
        .iter()
        .filter(|e| e.identity == check.peer_identity)
    {
        for ip in &pod.ips {
            if check.family.is_some_and(|f| f != Family::of(*ip)) {
                continue;
            }
            let address_identity = compiled
                .ipcache
                .iter()
                .filter(|e| e.prefix.contains(*ip) && is_address_identity(e.identity))
                .max_by_key(|e| e.prefix.prefix())
                .map_or(Family::of(*ip).world_identity().get(), |e| e.identity);
            let is_world = Identity::new(address_identity).is_ok_and(|i| i.is_reserved());
            let allows: Vec<String> = endpoint
                .state
                .iter()
                .filter(|(key, entry)| {
                    key.direction() == check.direction
                        && key.identity().get() == address_identity
                        && !entry.is_deny()
                })
                .filter_map(|(key, entry)| {
                    // Only a policy's rule is a CIDR the user wrote (not
                    // the allow-all of an unenforced direction).
                    // A world identity comes from `0.0.0.0/0` or from
                    // `toEntities: [world]`, which also names
                    // `reserved:world` (identity 2): only the block is a
                    // CIDR.
                    let origins: Vec<String> = entry
                        .origins
                        .iter()
                        .filter(|id| !is_world || !world_origins.contains(id))
                        .filter_map(|id| compiled.origin(*id))
                        .filter(|o| !o.is_synthetic())
                        .map(Origin::describe)
                        .collect();
                    (!origins.is_empty())
                        .then(|| format!("{} by {}", describe_ports(key), origins.join(", ")))
                })
                .collect();
            if allows.is_empty() {
                continue;
            }
            notes.push(format!(
                "{} is allowed ({}) and covers {}'s address {ip}",
                compiled.identity_name(address_identity),
                allows.join("; "),
                pod.display_name()
            ));
        }
    }
    if notes.is_empty() {
        return String::new();
    }
    format!(
        "; {}, but Cilium never matches a pod by its address: the pod keeps its own security identity (cilium/cilium#9209, lint rule PR020 cidr-covers-pods); select it by label",
        notes.join("; ")
    )
}

/// Explains one check in a sentence or two. A check of one family of a
/// world flow names it: `default/s1 ingress (IPv4, world-ipv4): ...`.
pub fn explain_check(compiled: &Compiled, check: &Check) -> String {
    let subject = match check.family {
        Some(family) => format!(
            "{} {} ({family}, {})",
            check.endpoint,
            check.direction,
            compiled.identity_name(check.peer_identity)
        ),
        None => format!("{} {}", check.endpoint, check.direction),
    };
    if check.untracked_protocol {
        let hint = if matches!(check.decision.verdict, Verdict::Allow) && check.enforced {
            " (policy would allow it)"
        } else {
            ""
        };
        let setting = if compiled.extended_ip_protocols {
            ""
        } else {
            "; `enable-extended-ip-protocols: true` lets VRRP and IGMP through to policy"
        };
        return format!(
            "{subject}: dropped before policy{hint}: Cilium's conntrack does not track these packets (DROP_CT_UNKNOWN_PROTO){setting}"
        );
    }
    if !check.enforced {
        return format!("{subject}: not enforced (no policy selects it), allowed");
    }
    let Some(chosen) = &check.decision.chosen else {
        return format!(
            "{subject}: no rule allows {}{}{}",
            describe_identity(compiled, check.peer_identity),
            default_deny_by(compiled, &check.endpoint, check.direction),
            cidr_covers_pod_note(compiled, check)
        );
    };
    // ClusterNetworkPolicy Pass rules that handed the flow to a later tier
    // (`crate::tier`) are named apart from the rule that decided.
    let is_pass = |o: &&crate::resolve::lower::Origin| {
        o.tier
            .as_ref()
            .is_some_and(|t| t.action == porin_model::model::ClusterAction::Pass)
    };
    let passes: Vec<String> = chosen
        .entry
        .origins
        .iter()
        .filter_map(|id| compiled.origin(*id))
        .filter(is_pass)
        .map(|o| o.describe())
        .collect();
    let handed_on = if passes.is_empty() {
        String::new()
    } else {
        format!(
            "; {} handed the flow on to the next tier (Pass)",
            passes.join(", ")
        )
    };
    let mut origins: Vec<String> = chosen
        .entry
        .origins
        .iter()
        .filter_map(|id| compiled.origin(*id))
        .filter(|o| !is_pass(o))
        .map(|o| o.describe())
        .collect();
    if origins.is_empty() && chosen.entry.is_deny() {
        // The tiers' explicit form of a default deny (`crate::tier`).
        return format!(
            "{subject}: no rule allows {}{}{handed_on}",
            describe_identity(compiled, check.peer_identity),
            default_deny_by(compiled, &check.endpoint, check.direction),
        );
    }
    if origins.is_empty() {
        origins.push("an unknown rule".to_owned());
    }
    let what = match check.decision.verdict {
        Verdict::Allow => "allowed".to_owned(),
        Verdict::Redirect { proxy_port } => format!("redirected to proxy port {proxy_port}"),
        Verdict::Deny {
            reason: DenyReason::Rule,
        } => "denied".to_owned(),
        Verdict::Deny {
            reason: DenyReason::NoEntry,
        } => "denied (no entry)".to_owned(),
        Verdict::AuthRequired { auth_type } => {
            let local = compiled.endpoint(&check.endpoint).map_or(0, |e| e.identity);
            if authenticates(compiled, auth_type, local, check.peer_identity) {
                format!(
                    "allowed after mutual authentication (type {}: with mesh-auth-mutual-enabled the agents authenticate this pair of workloads)",
                    auth_type.get()
                )
            } else if compiled.mutual_auth {
                format!(
                    "dropped: authentication type {} required, which never succeeds here (only type 1 between two cluster workloads authenticates; reserved and CIDR identities do not, pkg/auth/manager.go)",
                    auth_type.get()
                )
            } else {
                format!(
                    "dropped: authentication type {} required (porin has no auth map; the setting mesh-auth-mutual-enabled: true decides it as a cluster running mutual authentication)",
                    auth_type.get()
                )
            }
        }
    };
    let mut sentence = format!(
        "{subject}: {what} by {} from {}{handed_on}",
        describe_key(compiled, chosen),
        origins.join("; ")
    );
    // The origins of the chosen allow key are allow rules that cover this
    // peer and port, so each alone allows the flow (another rule's less
    // specific key may allow it too, hence no claim about removing all):
    // the lint's duplicate pair (PR011) is one finding, not two
    // deletable rules.
    let policy_rules = chosen
        .entry
        .origins
        .iter()
        .filter_map(|id| compiled.origin(*id))
        .filter(|o| !o.is_synthetic())
        .count();
    if policy_rules >= 2
        && matches!(
            check.decision.verdict,
            Verdict::Allow | Verdict::Redirect { .. }
        )
    {
        let _ = write!(
            sentence,
            " (each of these {policy_rules} rules alone allows this flow: removing one of them keeps it)"
        );
    }
    // An explicit deny rule is the reason itself; a deny for want of an
    // allow (or an auth drop) may be a CIDR that does not match the pod.
    if matches!(
        check.decision.verdict,
        Verdict::Deny {
            reason: DenyReason::NoEntry
        }
    ) {
        sentence.push_str(&cidr_covers_pod_note(compiled, check));
    }
    if chosen
        .entry
        .origins
        .iter()
        .filter_map(|id| compiled.origin(*id))
        .any(is_localhost_origin)
    {
        sentence.push_str(" (");
        sentence.push_str(LOCALHOST_REASON);
        sentence.push(')');
    } else if check.direction == Direction::Ingress
        && check.peer_identity == Identity::HOST.get()
        && matches!(check.decision.verdict, Verdict::Redirect { .. })
        && has_localhost_entry(compiled, &check.endpoint)
    {
        sentence.push_str(" (");
        sentence.push_str(LOCALHOST_L7_NOTE);
        sentence.push(')');
    }
    sentence
}

/// Why the host is redirected although it may reach the endpoint: the
/// redirect outranks the host allow by precedence, and the agent gives the
/// host an L7 allow-all instead (`createL4IngressFilter`'s `hostWildcardL7`,
/// `pkg/policy/l4.go`; test `TestL7WithLocalHostWildcard`).
pub const LOCALHOST_L7_NOTE: &str = "allow-localhost: the proxy lets every request from the host through unless a rule names the host (reserved:host) at L7 itself; porin does not evaluate L7 requests";

/// Whether the endpoint's map state holds the host allow of
/// `allow-localhost` (possibly merged with policy origins).
fn has_localhost_entry(compiled: &Compiled, endpoint: &str) -> bool {
    compiled.endpoint(endpoint).is_some_and(|e| {
        e.state.iter().any(|(key, entry)| {
            key.direction() == Direction::Ingress
                && key.identity() == Identity::HOST
                && key.proto() == proto::ANY
                && entry
                    .origins
                    .iter()
                    .filter_map(|id| compiled.origin(*id))
                    .any(is_localhost_origin)
        })
    })
}

/// Why the host reaches an endpoint its ingress policy does not allow it
/// into (`determineAllowLocalhostIngress`, `pkg/policy/mapstate.go`;
/// `daemon/cmd/daemon.go` turns `allow-localhost=auto` into `always` in
/// Kubernetes mode).
pub const LOCALHOST_REASON: &str = "allow-localhost: Cilium in Kubernetes mode (allow-localhost=auto) or with allow-localhost=always lets the host reach local endpoints whatever their ingress policy; set `allowLocalhost: policy` in the inventory or test file if the agent runs with --allow-localhost=policy";

fn is_localhost_origin(origin: &Origin) -> bool {
    origin.is_synthetic() && origin.name == LOCALHOST_ORIGIN_NAME
}

/// Explains an evaluation: one sentence per check.
pub fn explain(compiled: &Compiled, evaluation: &Evaluation) -> String {
    if let Some(no_packet) = &evaluation.no_packet {
        return format!("no packet can carry this flow: {no_packet}");
    }
    if evaluation.checks.is_empty() {
        return "neither end is an endpoint of the inventory: nothing checks this flow".to_owned();
    }
    evaluation
        .checks
        .iter()
        .map(|c| explain_check(compiled, c))
        .collect::<Vec<_>>()
        .join("; ")
}
