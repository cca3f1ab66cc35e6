//! Differential test: porin's object in the kernel against the reference
//! evaluator, on random policies, inventories and packets.
//!
//! For each generated scenario (one or two CiliumNetworkPolicies with
//! ingress / egress / ingressDeny / egressDeny items — endpoint, CIDR,
//! CIDR-set-with-except, entity and no-L3 peers; single ports, `endPort`
//! ranges, TCP/UDP/SCTP/ANY, ICMP and ICMPv6 types, L3-only rules;
//! `enableDefaultDeny` variations; host policies, CCNPs with a
//! `nodeSelector` — over a few endpoints with IPv4 and/or IPv6 addresses and
//! labels, and two nodes, the local one's host endpoint `node/n0` being a
//! subject too and both nodes' addresses peers; in some scenarios
//! `policy-cidr-match-mode: nodes`, so CIDR rules also select node addresses;
//! random CiliumCIDRGroups (labelled, possibly empty, either API version)
//! that `cidrGroupRef` / `cidrGroupSelector` peers reference, with or without
//! `except`, sometimes dangling; VRRP ports and VRRP/IGMP packets, with and
//! without `enable-extended-ip-protocols`) the test renders a `PolicyTest` YAML, compiles
//! it with porin exactly as `porin test` does, writes the ipcache and each
//! endpoint's policy map into the kernel, and for many packets (IPv4 and
//! IPv6; TCP, UDP, SCTP, ICMP, ICMPv6; peers at endpoint addresses and
//! inside/outside the CIDRs and their excepts; ports at range edges and at
//! random) compares what `BPF_PROG_TEST_RUN` decides with
//! `MapState::lookup` for the same endpoint, direction, peer identity (the
//! compiler's ipcache longest-prefix match), protocol and port. The
//! comparison is per check and exact: allow, redirect with its proxy port,
//! deny by rule, deny by default, deny for authentication.
//!
//! Size: `PORIN_DIFF_POLICIES` scenarios (default 260) ×
//! `PORIN_DIFF_PACKETS` packets (default 80), at least 20,000 cases;
//! `PORIN_DIFF_SEED` (default fixed, so CI is reproducible) seeds the RNG.
//! The last line printed is `differential: N cases, M mismatches`. A
//! mismatch fails with a reproducer: the PolicyTest YAML (runnable with
//! `porin test --engine both`) and the packet.
//!
//! Needs root (eBPF). In CI (`CI=true`) an unusable kernel fails the test;
//! elsewhere it prints `SKIPPED: <reason>`.

#![allow(
    clippy::unwrap_used,
    reason = "a generator bug should fail the test loudly"
)]

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnetwork::IpNetwork;
use porin_compiler::compile::Compiled;
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::Direction;
use porin_ebpf::compiled::ipcache_of;
use porin_kernel as kernel;
use porin_kernel::engine::{KernelEngine, flow_packet};
use porin_policytest::{CheckOutcome, prepare};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;
const VRRP: u8 = 112;
const IGMP: u8 = 2;

fn kernel_available(test: &str) -> bool {
    match kernel::probe() {
        Ok(()) => true,
        Err(error) => {
            let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !in_ci,
                "{test}: CI=true but eBPF is unavailable: {error} (run CI as root)"
            );
            println!("SKIPPED: {test}: eBPF unavailable ({error})");
            false
        }
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------
// Scenario model.
// ---------------------------------------------------------------------------

const APPS: [&str; 3] = ["a", "b", "c"];
const TIERS: [&str; 2] = ["front", "back"];

/// Policy prefixes the generator draws from. Some cover endpoint addresses
/// (10.0.0.0/8, fd00::/8): an endpoint's own /32 must still win. Those and
/// `10.0.0.201/32` (the remote node `n1`'s address) cover node addresses,
/// which CIDR rules select under `policy-cidr-match-mode: nodes`.
const V4_CIDRS: [&str; 9] = [
    "192.0.2.0/24",
    "192.0.2.0/25",
    "192.0.2.64/26",
    "192.0.2.7/32",
    "198.51.100.0/24",
    "10.0.0.0/8",
    "0.0.0.0/0",
    "203.0.113.128/25",
    "10.0.0.201/32",
];
const V6_CIDRS: [&str; 5] = [
    "2001:db8::/32",
    "2001:db8:1::/48",
    "2001:db8:1:2::/64",
    "fd00::/8",
    "::/0",
];

#[derive(Debug, Clone)]
struct EndpointSpec {
    app: usize,
    tier: usize,
    /// 0: IPv4 and IPv6, 1: IPv4 only, 2: IPv6 only.
    families: u8,
    /// In namespace `other` instead of `default`.
    other_namespace: bool,
}

#[derive(Debug, Clone)]
enum PeerSpec {
    /// No L3 part (an L4-only rule: every peer).
    None,
    /// `from/toEndpoints` with `matchLabels` (None = `{}`).
    Endpoints(Option<(bool, usize)>),
    /// `from/toCIDR`.
    Cidr(IpNetwork),
    /// `from/toCIDRSet` with excepts.
    CidrSet(IpNetwork, Vec<IpNetwork>),
    /// `from/toEntities`.
    Entity(&'static str),
    /// `from/toCIDRSet: [{cidrGroupRef: g<N>, except}]`; N may name no group
    /// of the scenario (a dangling reference, PC016).
    GroupRef(usize, Vec<ExceptSpec>),
    /// `from/toCIDRSet: [{cidrGroupSelector: {matchLabels: {team: T}}, except}]`.
    GroupSelector(usize, Vec<ExceptSpec>),
}

/// An `except` beside a group peer: a sub-network of the group's `n`th CIDR
/// (modulo its CIDRs), or a CIDR of the pool (which may lie outside it:
/// Cilium does not check excepts of a group reference, rule_validation.go).
#[derive(Debug, Clone)]
enum ExceptSpec {
    Inside(usize, u8, u128),
    Pool(IpNetwork),
}

/// A CiliumCIDRGroup `g<index>` with the label `team: TEAMS[team]`.
#[derive(Debug, Clone)]
struct GroupSpec {
    team: usize,
    cidrs: Vec<IpNetwork>,
    /// `cilium.io/v2alpha1` instead of `cilium.io/v2`.
    v2alpha1: bool,
}

const TEAMS: [&str; 2] = ["red", "blue"];

#[derive(Debug, Clone)]
struct PortSpec {
    port: u16,
    end_port: Option<u16>,
    /// TCP, UDP, SCTP or ANY.
    protocol: &'static str,
}

#[derive(Debug, Clone)]
enum L4Spec {
    /// L3-only.
    None,
    Ports(Vec<PortSpec>),
    /// (type, IPv6?)
    Icmps(Vec<(u8, bool)>),
}

#[derive(Debug, Clone)]
struct RuleSpec {
    /// 0 ingress, 1 egress, 2 ingressDeny, 3 egressDeny.
    section: u8,
    peer: PeerSpec,
    l4: L4Spec,
    /// Allow rules with ports only: HTTP rules (an L7 redirect), on TCP.
    http: bool,
    /// Allow rules only: `authentication: {mode: required}`.
    auth: bool,
}

#[derive(Debug, Clone)]
struct PolicySpec {
    /// `endpointSelector` (None = `{}`); (by tier?, index).
    subject: Option<(bool, usize)>,
    /// A host policy: a CiliumClusterwideNetworkPolicy whose `nodeSelector`
    /// is `subject`, compiled for the local node's host endpoint
    /// (`node/n0`, see [`NODES`]); its items have no HTTP rules (Cilium
    /// refuses L7 in host policies).
    host: bool,
    /// `enableDefaultDeny`: None, or (ingress, egress) each Some(bool) / None.
    default_deny: Option<(Option<bool>, Option<bool>)>,
    rules: Vec<RuleSpec>,
}

#[derive(Debug, Clone)]
struct PacketSpec {
    subject: usize,
    egress: bool,
    /// Pick of family, peer kind, peer, protocol and port; resolved against
    /// the scenario.
    family: u8,
    peer_kind: u8,
    peer_pick: u32,
    proto_pick: u8,
    port_kind: u8,
    port_pick: u32,
}

#[derive(Debug, Clone)]
struct Scenario {
    /// `settings: {policy-cidr-match-mode: nodes}`: CIDR rules also select
    /// the nodes' addresses.
    cidr_nodes: bool,
    /// `settings: {enable-extended-ip-protocols: true}`: VRRP and IGMP
    /// packets reach policy; without it both engines drop them before
    /// policy (`porin_compiler::resolve::rule::proto::tracked`).
    extended: bool,
    endpoints: Vec<EndpointSpec>,
    policies: Vec<PolicySpec>,
    /// The CiliumCIDRGroups among the inputs (`g0`, `g1`, ...).
    groups: Vec<GroupSpec>,
    packets: Vec<PacketSpec>,
}

impl Scenario {
    /// The CIDRs of the groups a peer selects: none for a dangling
    /// reference or a peer that is not a group peer.
    fn group_cidrs(&self, peer: &PeerSpec) -> Vec<IpNetwork> {
        let groups: Vec<&GroupSpec> = match peer {
            PeerSpec::GroupRef(n, _) => self.groups.get(*n).into_iter().collect(),
            PeerSpec::GroupSelector(team, _) => {
                self.groups.iter().filter(|g| g.team == *team).collect()
            }
            _ => Vec::new(),
        };
        groups.iter().flat_map(|g| g.cidrs.clone()).collect()
    }

    /// The prefixes a group peer stands for: its groups' CIDRs and its
    /// excepts.
    fn group_prefixes(&self, peer: &PeerSpec) -> Vec<IpNetwork> {
        let mut out = self.group_cidrs(peer);
        if let PeerSpec::GroupRef(_, excepts) | PeerSpec::GroupSelector(_, excepts) = peer {
            out.extend(excepts.iter().filter_map(|e| self.except_network(peer, e)));
        }
        out
    }

    /// The network an except stands for, if it stands for one (an `Inside`
    /// except of a peer without CIDRs is left out).
    fn except_network(&self, peer: &PeerSpec, except: &ExceptSpec) -> Option<IpNetwork> {
        match except {
            ExceptSpec::Pool(net) => Some(*net),
            ExceptSpec::Inside(n, extra, bits) => {
                let cidrs = self.group_cidrs(peer);
                let net = *cidrs.get(n % cidrs.len().max(1))?;
                let max = if net.is_ipv4() { 32 } else { 128 };
                (net.prefix() < max).then(|| sub_network(net, *extra, *bits))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Strategies.
// ---------------------------------------------------------------------------

fn endpoint_strategy() -> impl Strategy<Value = EndpointSpec> {
    (
        0..APPS.len(),
        0..TIERS.len(),
        prop_oneof![4 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
        prop::bool::weighted(0.2),
    )
        .prop_map(|(app, tier, families, other_namespace)| EndpointSpec {
            app,
            tier,
            families,
            other_namespace,
        })
}

fn selector_strategy() -> impl Strategy<Value = Option<(bool, usize)>> {
    prop_oneof![
        1 => Just(None),
        4 => (any::<bool>(), 0..3usize).prop_map(|(tier, i)| Some((tier, if tier { i % 2 } else { i }))),
    ]
}

fn sub_network(net: IpNetwork, extra: u8, bits: u128) -> IpNetwork {
    match net {
        IpNetwork::V4(n) => {
            let len = (n.prefix() + extra).min(32);
            let host_bits = 32 - u32::from(n.prefix());
            let random = if host_bits == 0 {
                0
            } else {
                (bits as u32) & (u32::MAX >> (32 - host_bits))
            };
            let addr = u32::from(n.network()) | random;
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            IpNetwork::new(IpAddr::V4(Ipv4Addr::from(addr & mask)), len).unwrap()
        }
        IpNetwork::V6(n) => {
            let len = (n.prefix() + extra).min(128);
            let host_bits = 128 - u32::from(n.prefix());
            let random = if host_bits == 0 {
                0
            } else {
                bits & (u128::MAX >> (128 - host_bits))
            };
            let addr = u128::from(n.network()) | random;
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len))
            };
            IpNetwork::new(IpAddr::V6(Ipv6Addr::from(addr & mask)), len).unwrap()
        }
    }
}

fn cidr_strategy() -> impl Strategy<Value = IpNetwork> {
    prop_oneof![
        3 => prop::sample::select(V4_CIDRS.to_vec()).prop_map(|s| s.parse::<IpNetwork>().unwrap()),
        2 => prop::sample::select(V6_CIDRS.to_vec()).prop_map(|s| s.parse::<IpNetwork>().unwrap()),
    ]
}

fn peer_strategy() -> impl Strategy<Value = PeerSpec> {
    prop_oneof![
        2 => Just(PeerSpec::None),
        4 => selector_strategy().prop_map(PeerSpec::Endpoints),
        2 => cidr_strategy().prop_map(PeerSpec::Cidr),
        3 => (cidr_strategy(), prop::collection::vec((1u8..=8, any::<u128>()), 0..=2)).prop_map(
            |(cidr, excepts)| {
                let max = if cidr.is_ipv4() { 32 } else { 128 };
                let excepts: Vec<IpNetwork> = excepts
                    .into_iter()
                    .filter(|_| cidr.prefix() < max)
                    .map(|(extra, bits)| sub_network(cidr, extra, bits))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                PeerSpec::CidrSet(cidr, excepts)
            }
        ),
        1 => prop::sample::select(vec!["world", "all", "cluster"]).prop_map(PeerSpec::Entity),
        // Group index 3 names no group of the scenario (at most 3): dangling.
        2 => (0usize..4, except_strategy()).prop_map(|(n, ex)| PeerSpec::GroupRef(n, ex)),
        1 => (0..TEAMS.len(), except_strategy()).prop_map(|(t, ex)| PeerSpec::GroupSelector(t, ex)),
    ]
}

fn except_strategy() -> impl Strategy<Value = Vec<ExceptSpec>> {
    prop::collection::vec(
        prop_oneof![
            3 => (any::<usize>(), 1u8..=8, any::<u128>())
                .prop_map(|(n, extra, bits)| ExceptSpec::Inside(n, extra, bits)),
            1 => cidr_strategy().prop_map(ExceptSpec::Pool),
        ],
        0..=2,
    )
}

fn group_strategy() -> impl Strategy<Value = GroupSpec> {
    (
        0..TEAMS.len(),
        // An empty group is valid and labels no prefix.
        prop::collection::vec(cidr_strategy(), 0..=2),
        any::<bool>(),
    )
        .prop_map(|(team, cidrs, v2alpha1)| GroupSpec {
            team,
            cidrs: cidrs
                .into_iter()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            v2alpha1,
        })
}

fn port_number() -> impl Strategy<Value = u16> {
    prop_oneof![
        3 => prop::sample::select(vec![1u16, 22, 53, 80, 443, 1023, 1024, 8080, 65534, 65535]),
        2 => any::<u16>().prop_map(|p| p.max(1)),
        1 => Just(0u16),
    ]
}

fn port_spec_strategy() -> impl Strategy<Value = PortSpec> {
    (
        port_number(),
        prop_oneof![
            3 => Just(None),
            2 => prop::sample::select(vec![0u32, 1, 7, 8, 100, 1000, 30000]).prop_map(Some),
        ],
        prop_oneof![
            12 => prop::sample::select(vec!["TCP", "UDP", "SCTP", "ANY"]),
            // `port: "0"` is the one port VRRP takes without the setting.
            1 => Just("VRRP"),
        ],
    )
        .prop_map(|(port, span, protocol)| {
            if protocol == "VRRP" {
                return PortSpec {
                    port: 0,
                    end_port: None,
                    protocol,
                };
            }
            let end_port = span.map(|s| u16::try_from(u32::from(port) + s).unwrap_or(u16::MAX));
            // `port: 0` + `endPort` is a Cilium quirk (docs/semantics.md §10.1)
            // that porin deliberately encodes differently from Cilium; keep
            // it, both porin engines must still agree on it.
            PortSpec {
                port,
                end_port: end_port.filter(|e| *e > port || port != 0),
                protocol,
            }
        })
}

fn l4_strategy() -> impl Strategy<Value = L4Spec> {
    prop_oneof![
        2 => Just(L4Spec::None),
        5 => prop::collection::vec(port_spec_strategy(), 1..=3).prop_map(L4Spec::Ports),
        2 => prop::collection::vec(
            (prop::sample::select(vec![0u8, 3, 8, 11, 13, 128, 129, 135, 1, 2]), any::<bool>()),
            1..=3
        )
        .prop_map(L4Spec::Icmps),
    ]
}

fn rule_strategy() -> impl Strategy<Value = RuleSpec> {
    (
        prop_oneof![3 => Just(0u8), 3 => Just(1u8), 2 => Just(2u8), 2 => Just(3u8)],
        peer_strategy(),
        l4_strategy(),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(section, peer, mut l4, http, auth)| {
            let allow = section < 2;
            let http = allow && http && matches!(l4, L4Spec::Ports(_));
            if http && let L4Spec::Ports(ports) = &mut l4 {
                // HTTP rules need exact TCP ports (Cilium rejects L7 rules
                // on port 0 and on other protocols).
                for p in ports.iter_mut() {
                    p.protocol = "TCP";
                    p.port = p.port.max(1);
                }
            }
            RuleSpec {
                section,
                peer,
                l4,
                http,
                auth: allow && auth,
            }
        })
}

fn policy_strategy() -> impl Strategy<Value = PolicySpec> {
    (
        selector_strategy(),
        prop_oneof![
            3 => Just(None),
            1 => (
                prop::option::of(any::<bool>()),
                prop::option::of(any::<bool>())
            )
                .prop_map(Some),
        ],
        prop::collection::vec(rule_strategy(), 1..=4),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(subject, default_deny, rules, host)| PolicySpec {
            subject,
            default_deny,
            rules,
            host,
        })
}

fn packet_strategy() -> impl Strategy<Value = PacketSpec> {
    (
        any::<usize>(),
        any::<bool>(),
        any::<u8>(),
        0u8..4,
        any::<u32>(),
        any::<u8>(),
        0u8..3,
        any::<u32>(),
    )
        .prop_map(
            |(subject, egress, family, peer_kind, peer_pick, proto_pick, port_kind, port_pick)| {
                PacketSpec {
                    subject,
                    egress,
                    family,
                    peer_kind,
                    peer_pick,
                    proto_pick,
                    port_kind,
                    port_pick,
                }
            },
        )
}

fn scenario_strategy(packets: usize) -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(endpoint_strategy(), 2..=4),
        prop::collection::vec(policy_strategy(), 1..=2),
        prop::collection::vec(packet_strategy(), packets),
        prop::bool::weighted(0.3),
        prop::collection::vec(group_strategy(), 0..=3),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(endpoints, policies, packets, cidr_nodes, groups, extended)| Scenario {
                cidr_nodes,
                extended,
                endpoints,
                policies,
                groups,
                packets,
            },
        )
}

// ---------------------------------------------------------------------------
// Rendering.
// ---------------------------------------------------------------------------

/// The scenario's nodes: the local node `n0`, whose host endpoint
/// `node/n0` is a subject (index `endpoints.len()`), and a remote node; each
/// (name, app, tier, last address byte). Their labels are the endpoints'
/// words, so the same selectors pick them.
const NODES: [(&str, usize, usize, u8); 2] = [("n0", 0, 0, 200), ("n1", 1, 1, 201)];

fn node_ips(last: u8) -> Vec<IpAddr> {
    vec![
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)),
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(last))),
    ]
}

/// The addresses of a subject: an endpoint's, or the local node's host
/// (index `endpoints.len()`).
fn subject_ips(scenario: &Scenario, subject: usize) -> Vec<IpAddr> {
    match scenario.endpoints.get(subject) {
        Some(spec) => endpoint_ips(subject, spec),
        None => node_ips(NODES[0].3),
    }
}

fn endpoint_ips(index: usize, spec: &EndpointSpec) -> Vec<IpAddr> {
    let n = u8::try_from(index + 1).unwrap();
    let v4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, n));
    let v6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(n)));
    match spec.families {
        1 => vec![v4],
        2 => vec![v6],
        _ => vec![v4, v6],
    }
}

fn selector_yaml(selector: Option<(bool, usize)>) -> String {
    match selector {
        None => "{}".to_owned(),
        Some((true, i)) => format!("{{matchLabels: {{tier: {}}}}}", TIERS[i % TIERS.len()]),
        Some((false, i)) => format!("{{matchLabels: {{app: {}}}}}", APPS[i % APPS.len()]),
    }
}

fn policy_yaml(scenario: &Scenario, index: usize, policy: &PolicySpec) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "apiVersion: cilium.io/v2");
    if policy.host {
        let _ = writeln!(out, "kind: CiliumClusterwideNetworkPolicy");
        let _ = writeln!(out, "metadata: {{name: p{index}}}");
        let _ = writeln!(out, "spec:");
        let _ = writeln!(out, "  nodeSelector: {}", selector_yaml(policy.subject));
    } else {
        let _ = writeln!(out, "kind: CiliumNetworkPolicy");
        let _ = writeln!(out, "metadata: {{name: p{index}, namespace: default}}");
        let _ = writeln!(out, "spec:");
        let _ = writeln!(out, "  endpointSelector: {}", selector_yaml(policy.subject));
    }
    if let Some((ingress, egress)) = policy.default_deny {
        let mut parts = Vec::new();
        if let Some(i) = ingress {
            parts.push(format!("ingress: {i}"));
        }
        if let Some(e) = egress {
            parts.push(format!("egress: {e}"));
        }
        let _ = writeln!(out, "  enableDefaultDeny: {{{}}}", parts.join(", "));
    }
    for (section, name) in [
        (0u8, "ingress"),
        (1, "egress"),
        (2, "ingressDeny"),
        (3, "egressDeny"),
    ] {
        let rules: Vec<&RuleSpec> = policy
            .rules
            .iter()
            .filter(|r| r.section == section)
            .collect();
        if rules.is_empty() {
            continue;
        }
        let from = if section % 2 == 0 { "from" } else { "to" };
        let _ = writeln!(out, "  {name}:");
        for rule in rules {
            let mut fields = Vec::new();
            match &rule.peer {
                PeerSpec::None => {}
                PeerSpec::Endpoints(sel) => {
                    fields.push(format!("{from}Endpoints: [{}]", selector_yaml(*sel)));
                }
                PeerSpec::Cidr(net) => fields.push(format!("{from}CIDR: [\"{net}\"]")),
                PeerSpec::CidrSet(net, excepts) => {
                    let excepts: Vec<String> = excepts.iter().map(|e| format!("\"{e}\"")).collect();
                    fields.push(format!(
                        "{from}CIDRSet: [{{cidr: \"{net}\", except: [{}]}}]",
                        excepts.join(", ")
                    ));
                }
                PeerSpec::Entity(entity) => fields.push(format!("{from}Entities: [{entity}]")),
                PeerSpec::GroupRef(_, excepts) | PeerSpec::GroupSelector(_, excepts) => {
                    let group = match &rule.peer {
                        PeerSpec::GroupRef(n, _) => format!("cidrGroupRef: g{n}"),
                        PeerSpec::GroupSelector(team, _) => format!(
                            "cidrGroupSelector: {{matchLabels: {{team: {}}}}}",
                            TEAMS[*team]
                        ),
                        _ => unreachable!(),
                    };
                    let excepts: Vec<String> = excepts
                        .iter()
                        .filter_map(|e| scenario.except_network(&rule.peer, e))
                        .map(|e| format!("\"{e}\""))
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    let except = if excepts.is_empty() {
                        String::new()
                    } else {
                        format!(", except: [{}]", excepts.join(", "))
                    };
                    fields.push(format!("{from}CIDRSet: [{{{group}{except}}}]"));
                }
            }
            match &rule.l4 {
                L4Spec::None => {}
                L4Spec::Ports(ports) => {
                    let ports: Vec<String> = ports
                        .iter()
                        .map(|p| match p.end_port {
                            Some(end) => format!(
                                "{{port: \"{}\", endPort: {end}, protocol: {}}}",
                                p.port, p.protocol
                            ),
                            None => format!("{{port: \"{}\", protocol: {}}}", p.port, p.protocol),
                        })
                        .collect();
                    let rules = if rule.http && !policy.host {
                        ", rules: {http: [{method: GET, path: \"/\"}]}"
                    } else {
                        ""
                    };
                    fields.push(format!(
                        "toPorts: [{{ports: [{}]{rules}}}]",
                        ports.join(", ")
                    ));
                }
                L4Spec::Icmps(types) => {
                    let types: Vec<String> = types
                        .iter()
                        .map(|(t, v6)| {
                            format!(
                                "{{type: {t}, family: {}}}",
                                if *v6 { "IPv6" } else { "IPv4" }
                            )
                        })
                        .collect();
                    fields.push(format!("icmps: [{{fields: [{}]}}]", types.join(", ")));
                }
            }
            if rule.auth {
                fields.push("authentication: {mode: required}".to_owned());
            }
            if fields.is_empty() {
                // An empty rule selects nothing in Cilium; give it an
                // explicit wildcard endpoint peer instead.
                fields.push(format!("{from}Endpoints: [{{}}]"));
            }
            let _ = writeln!(out, "    - {}", fields.join("\n      "));
        }
    }
    out
}

fn scenario_yaml(scenario: &Scenario, case: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "kind: PolicyTest");
    let _ = writeln!(out, "name: porin differential");
    let mut settings = Vec::new();
    if scenario.cidr_nodes {
        settings.push("policy-cidr-match-mode: nodes");
    }
    if scenario.extended {
        settings.push("enable-extended-ip-protocols: true");
    }
    if !settings.is_empty() {
        let _ = writeln!(out, "settings: {{{}}}", settings.join(", "));
    }
    let _ = writeln!(out, "nodes:");
    for (i, (name, app, tier, last)) in NODES.iter().enumerate() {
        let ips: Vec<String> = node_ips(*last)
            .iter()
            .map(|ip| format!("\"{ip}\""))
            .collect();
        let _ = writeln!(
            out,
            "  - {{name: {name}, local: {}, labels: {{app: {}, tier: {}}}, addresses: [{}]}}",
            i == 0,
            APPS[*app],
            TIERS[*tier],
            ips.join(", ")
        );
    }
    let _ = writeln!(out, "endpoints:");
    for (i, e) in scenario.endpoints.iter().enumerate() {
        let ips: Vec<String> = endpoint_ips(i, e)
            .iter()
            .map(|ip| format!("\"{ip}\""))
            .collect();
        let _ = writeln!(
            out,
            "  - {{name: e{i}, namespace: {}, labels: {{app: {}, tier: {}}}, ips: [{}]}}",
            if e.other_namespace {
                "other"
            } else {
                "default"
            },
            APPS[e.app],
            TIERS[e.tier],
            ips.join(", ")
        );
    }
    let _ = writeln!(out, "policies:");
    for (i, p) in scenario.policies.iter().enumerate() {
        let _ = writeln!(out, "  - inline: |");
        for line in policy_yaml(scenario, i, p).lines() {
            let _ = writeln!(out, "      {line}");
        }
    }
    for (i, g) in scenario.groups.iter().enumerate() {
        let cidrs: Vec<String> = g.cidrs.iter().map(|c| format!("\"{c}\"")).collect();
        let _ = writeln!(out, "  - inline: |");
        let _ = writeln!(
            out,
            "      apiVersion: cilium.io/{}",
            if g.v2alpha1 { "v2alpha1" } else { "v2" }
        );
        let _ = writeln!(out, "      kind: CiliumCIDRGroup");
        let _ = writeln!(
            out,
            "      metadata: {{name: g{i}, labels: {{team: {}}}}}",
            TEAMS[g.team]
        );
        let _ = writeln!(out, "      spec: {{externalCIDRs: [{}]}}", cidrs.join(", "));
    }
    match case {
        Some(case) => {
            let _ = writeln!(out, "cases:\n  - {case}");
        }
        None => {
            let _ = writeln!(out, "cases: []");
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Packets.
// ---------------------------------------------------------------------------

/// Interesting addresses of a family: around every prefix and except of
/// the policies (first, last, just outside on both sides, one inside), and
/// a few fixed outside addresses.
fn address_pool(scenario: &Scenario, v6: bool, pick: u32) -> Vec<IpAddr> {
    let bits: u32 = if v6 { 128 } else { 32 };
    let mut out = Vec::new();
    for policy in &scenario.policies {
        for rule in &policy.rules {
            let nets: Vec<IpNetwork> = match &rule.peer {
                PeerSpec::Cidr(n) => vec![*n],
                PeerSpec::CidrSet(n, ex) => std::iter::once(*n).chain(ex.clone()).collect(),
                peer @ (PeerSpec::GroupRef(..) | PeerSpec::GroupSelector(..)) => {
                    scenario.group_prefixes(peer)
                }
                _ => Vec::new(),
            };
            for net in nets.into_iter().filter(|n| n.is_ipv6() == v6) {
                let first: u128 = match net.network() {
                    IpAddr::V4(a) => u128::from(u32::from(a)),
                    IpAddr::V6(a) => u128::from(a),
                };
                let host_bits = bits - u32::from(net.prefix());
                let span = if host_bits == 128 {
                    u128::MAX
                } else {
                    (1u128 << host_bits) - 1
                };
                let last = first.wrapping_add(span);
                let inside = first
                    + if span == 0 {
                        0
                    } else {
                        u128::from(pick) % span
                    };
                let all = if v6 { u128::MAX } else { u128::from(u32::MAX) };
                for a in [
                    first,
                    last,
                    first.wrapping_sub(1) & all,
                    last.wrapping_add(1) & all,
                    inside,
                ] {
                    out.push(if v6 {
                        IpAddr::V6(Ipv6Addr::from(a))
                    } else {
                        IpAddr::V4(Ipv4Addr::from(u32::try_from(a & all).unwrap()))
                    });
                }
            }
        }
    }
    if v6 {
        out.push("2001:db8:1:2::99".parse().unwrap());
        out.push("2606:4700::1111".parse().unwrap());
    } else {
        out.push("192.0.2.7".parse().unwrap());
        out.push("8.8.8.8".parse().unwrap());
    }
    out
}

fn port_edges(scenario: &Scenario) -> Vec<u16> {
    let mut edges = BTreeSet::new();
    for policy in &scenario.policies {
        for rule in &policy.rules {
            if let L4Spec::Ports(ports) = &rule.l4 {
                for p in ports {
                    for v in [p.port.saturating_sub(1), p.port, p.port.saturating_add(1)] {
                        edges.insert(v);
                    }
                    if let Some(end) = p.end_port {
                        for v in [end.saturating_sub(1), end, end.saturating_add(1)] {
                            edges.insert(v);
                        }
                    }
                }
            }
        }
    }
    edges.into_iter().collect()
}

fn icmp_types(scenario: &Scenario, v6: bool) -> Vec<u8> {
    let mut types = BTreeSet::from([0u8, 8, 128, 129]);
    for policy in &scenario.policies {
        for rule in &policy.rules {
            if let L4Spec::Icmps(list) = &rule.l4 {
                for (t, fam) in list {
                    if *fam == v6 {
                        types.insert(*t);
                        types.insert(t.wrapping_add(1));
                    }
                }
            }
        }
    }
    types.into_iter().collect()
}

/// A concrete packet of a scenario.
#[derive(Debug, Clone)]
struct Probe {
    subject: usize,
    direction: Direction,
    subject_ip: IpAddr,
    peer_ip: IpAddr,
    proto: u8,
    port: u16,
}

fn resolve_packet(scenario: &Scenario, spec: &PacketSpec) -> Probe {
    // The endpoints and the local node's host endpoint.
    let n = scenario.endpoints.len() + 1;
    let subject = spec.subject % n;
    let subject_ips = subject_ips(scenario, subject);
    let subject_ip = subject_ips[usize::from(spec.family) % subject_ips.len()];
    let v6 = subject_ip.is_ipv6();
    let pick = spec.peer_pick as usize;
    let peer_ip = match spec.peer_kind {
        // Another endpoint (or itself) or a node, in the same family.
        0 | 1 => {
            let candidates: Vec<IpAddr> = scenario
                .endpoints
                .iter()
                .enumerate()
                .flat_map(|(i, e)| endpoint_ips(i, e))
                .chain(NODES.iter().flat_map(|node| node_ips(node.3)))
                .filter(|ip| ip.is_ipv6() == v6)
                .collect();
            candidates[pick % candidates.len()]
        }
        // Around the policy prefixes.
        _ => {
            let pool = address_pool(scenario, v6, spec.peer_pick);
            pool[pick % pool.len()]
        }
    };
    let protos: &[u8] = if v6 {
        &[TCP, UDP, SCTP, ICMPV6]
    } else {
        &[TCP, UDP, SCTP, ICMP]
    };
    // One packet in 16 is VRRP or IGMP (no ports: port 0).
    let proto = match spec.proto_pick % 16 {
        15 if spec.proto_pick & 0x80 == 0 => VRRP,
        15 => IGMP,
        pick => protos[usize::from(pick) % protos.len()],
    };
    let port = if proto == VRRP || proto == IGMP {
        0
    } else if proto == ICMP || proto == ICMPV6 {
        let types = icmp_types(scenario, v6);
        match spec.port_kind {
            0 => u16::from(u8::try_from(spec.port_pick % 256).unwrap()),
            _ => u16::from(types[spec.port_pick as usize % types.len()]),
        }
    } else {
        let edges = port_edges(scenario);
        match spec.port_kind {
            0 => u16::try_from(spec.port_pick % 65536).unwrap(),
            _ if edges.is_empty() => [80u16, 443, 53, 0][spec.port_pick as usize % 4],
            _ => edges[spec.port_pick as usize % edges.len()],
        }
    };
    Probe {
        subject,
        direction: if spec.egress {
            Direction::Egress
        } else {
            Direction::Ingress
        },
        subject_ip,
        peer_ip,
        proto,
        port,
    }
}

fn case_line(scenario: &Scenario, probe: &Probe) -> String {
    let subject = match scenario.endpoints.get(probe.subject) {
        Some(endpoint) => format!(
            "{}/e{}",
            if endpoint.other_namespace {
                "other"
            } else {
                "default"
            },
            probe.subject
        ),
        None => format!("node/{}", NODES[0].0),
    };
    let (from, to) = match probe.direction {
        Direction::Egress => (subject, probe.peer_ip.to_string()),
        Direction::Ingress => (probe.peer_ip.to_string(), subject),
    };
    let l4 = match probe.proto {
        ICMP => format!("protocol: ICMP, icmpType: {}", probe.port),
        ICMPV6 => format!("protocol: ICMPv6, icmpType: {}", probe.port),
        TCP => format!("protocol: TCP, port: {}", probe.port),
        UDP => format!("protocol: UDP, port: {}", probe.port),
        VRRP => "protocol: VRRP".to_owned(),
        IGMP => "protocol: IGMP".to_owned(),
        _ => format!("protocol: SCTP, port: {}", probe.port),
    };
    format!("{{from: \"{from}\", to: \"{to}\", {l4}, expect: allow}}")
}

// ---------------------------------------------------------------------------
// The comparison.
// ---------------------------------------------------------------------------

fn compile_scenario(dir: &std::path::Path, yaml: &str) -> Result<Compiled, String> {
    let path = dir.join("scenario.yaml");
    std::fs::write(&path, yaml).map_err(|e| e.to_string())?;
    prepare(&path).map(|p| p.compiled)
}

struct Counts {
    cases: Cell<u64>,
    /// Cases whose subject is the host endpoint in a direction a host
    /// policy enforces.
    host_enforced: Cell<u64>,
    /// Cases whose peer address lies in a CIDR of a group that a
    /// `cidrGroupRef`/`cidrGroupSelector` peer of the scenario selects.
    group_peer: Cell<u64>,
    mismatches: Cell<u64>,
    /// VRRP/IGMP packets that reached policy (enable-extended-ip-protocols).
    portless_tracked: Cell<u64>,
    /// allow, redirect, deny (rule), deny (default), deny (auth), other,
    /// dropped before policy (untracked protocol).
    outcomes: RefCell<[u64; 7]>,
}

fn outcome_slot(outcome: &CheckOutcome) -> usize {
    match outcome {
        CheckOutcome::Allow => 0,
        CheckOutcome::Redirect(_) => 1,
        CheckOutcome::DenyRule => 2,
        CheckOutcome::DenyDefault => 3,
        CheckOutcome::DenyAuth => 4,
        // Authenticated comes only from settling a decision under
        // mesh-auth-mutual-enabled, which the differential never does.
        CheckOutcome::Other { .. } | CheckOutcome::Authenticated => 5,
        CheckOutcome::UntrackedProtocol => 6,
    }
}

fn check_scenario(
    engine: &RefCell<KernelEngine>,
    dir: &std::path::Path,
    counts: &Counts,
    scenario: &Scenario,
) -> Result<(), TestCaseError> {
    let yaml = scenario_yaml(scenario, None);
    let compiled = compile_scenario(dir, &yaml)
        .map_err(|e| TestCaseError::fail(format!("porin cannot compile:\n{e}\n{yaml}")))?;
    if compiled.has_errors() {
        return Err(TestCaseError::fail(format!(
            "compile diagnostics: {:?}\n{yaml}",
            compiled.diagnostics
        )));
    }
    let ipcache = ipcache_of(&compiled, &[])
        .map_err(|e| TestCaseError::fail(format!("ipcache: {e}\n{yaml}")))?;
    let mut engine = engine.borrow_mut();
    engine
        .load(&compiled, &[])
        .map_err(|e| TestCaseError::fail(format!("loading maps: {e}\n{yaml}")))?;
    // Endpoint order of the compilation (sorted by namespace, name).
    let index_of = |probe: &Probe| {
        compiled
            .endpoints
            .iter()
            .position(|e| e.ips.contains(&probe.subject_ip))
    };
    let mut probes: Vec<Probe> = scenario
        .packets
        .iter()
        .map(|p| resolve_packet(scenario, p))
        .collect();
    let group_cidrs: Vec<IpNetwork> = scenario
        .policies
        .iter()
        .flat_map(|p| &p.rules)
        .flat_map(|r| scenario.group_cidrs(&r.peer))
        .collect();
    // Fewer policy switches: group by subject (order does not matter, the
    // conntrack table is reset before every packet).
    probes.sort_by_key(|p| p.subject);
    for probe in &probes {
        let Some(endpoint_index) = index_of(probe) else {
            return Err(TestCaseError::fail(format!(
                "no compiled endpoint owns {}\n{yaml}",
                probe.subject_ip
            )));
        };
        let endpoint = &compiled.endpoints[endpoint_index];
        let identity = ipcache.lookup(probe.peer_ip);
        let reference = endpoint.state.lookup(
            probe.direction,
            Identity::new(identity.get()).unwrap_or(Identity::WORLD),
            probe.proto,
            probe.port,
        );
        // Packets Cilium's conntrack does not track never reach policy;
        // the datapath counts that drop as malformed (DATAPATH.md §4).
        let tracked = porin_compiler::resolve::rule::proto::tracked(
            probe.proto,
            probe.subject_ip.is_ipv6(),
            compiled.extended_ip_protocols,
        );
        let expected = if tracked {
            CheckOutcome::from_reference(&reference.verdict)
        } else {
            CheckOutcome::UntrackedProtocol
        };
        let (src, dst) = match probe.direction {
            Direction::Egress => (probe.subject_ip, probe.peer_ip),
            Direction::Ingress => (probe.peer_ip, probe.subject_ip),
        };
        let packet = flow_packet(src, dst, probe.proto, probe.port).build();
        let kernel = engine
            .check(endpoint_index, probe.direction, &packet)
            .map_err(|e| TestCaseError::fail(format!("kernel: {e}\n{yaml}")))?;
        let seen = match CheckOutcome::from(&kernel) {
            _ if !tracked && kernel.counter == kernel::Counter::DroppedMalformed => {
                CheckOutcome::UntrackedProtocol
            }
            seen => seen,
        };
        counts.cases.set(counts.cases.get() + 1);
        let enforced = match probe.direction {
            Direction::Ingress => endpoint.enforcement.ingress,
            Direction::Egress => endpoint.enforcement.egress,
        };
        if endpoint.identity == Identity::HOST.get() && enforced {
            counts.host_enforced.set(counts.host_enforced.get() + 1);
        }
        if tracked && matches!(probe.proto, VRRP | IGMP) {
            counts
                .portless_tracked
                .set(counts.portless_tracked.get() + 1);
        }
        if group_cidrs.iter().any(|c| c.contains(probe.peer_ip)) {
            counts.group_peer.set(counts.group_peer.get() + 1);
        }
        counts.outcomes.borrow_mut()[outcome_slot(&expected)] += 1;
        if seen != expected {
            counts.mismatches.set(counts.mismatches.get() + 1);
            let case = case_line(scenario, probe);
            return Err(TestCaseError::fail(format!(
                "MISMATCH: endpoint {} {} peer {} (identity {}) proto {} port {}: \
                 kernel {seen} (counter {:?}, mark {:#x}), reference {expected} \
                 (chosen {:?})\npacket {src} -> {dst} ({} bytes): {}\n\
                 reproducer (porin test --engine both FILE):\n{}",
                endpoint.display_name(),
                probe.direction,
                probe.peer_ip,
                identity,
                probe.proto,
                probe.port,
                kernel.counter,
                kernel.mark,
                reference
                    .chosen
                    .as_ref()
                    .map(|c| (c.key, c.entry.precedence)),
                packet.len(),
                porin_ebpf::compiled::hex(&packet),
                scenario_yaml(scenario, Some(&case)),
            )));
        }
    }
    Ok(())
}

#[test]
fn kernel_and_reference_agree_on_random_policies() {
    if !kernel_available("kernel_and_reference_agree_on_random_policies") {
        return;
    }
    let policies = u32::try_from(env_number("PORIN_DIFF_POLICIES", 260)).unwrap();
    let packets = usize::try_from(env_number("PORIN_DIFF_PACKETS", 80)).unwrap();
    let seed = env_number("PORIN_DIFF_SEED", 0x706f_7269_6e21);
    let dir: PathBuf =
        std::env::temp_dir().join(format!("porin-differential-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let engine = RefCell::new(KernelEngine::new().expect("the kernel engine loads"));
    let counts = Counts {
        cases: Cell::new(0),
        host_enforced: Cell::new(0),
        group_peer: Cell::new(0),
        portless_tracked: Cell::new(0),
        mismatches: Cell::new(0),
        outcomes: RefCell::new([0; 7]),
    };
    let config = Config {
        cases: policies,
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    };
    let mut seed_bytes = [0u8; 32];
    seed_bytes[0..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let result = runner.run(&scenario_strategy(packets), |scenario| {
        check_scenario(&engine, &dir, &counts, &scenario)
    });
    std::fs::remove_dir_all(&dir).ok();
    let outcomes = *counts.outcomes.borrow();
    println!(
        "differential outcomes (reference): allow {}, redirect {}, deny by rule {}, \
         deny by default {}, deny for auth {}, other {}, dropped before policy (untracked protocol) {}",
        outcomes[0], outcomes[1], outcomes[2], outcomes[3], outcomes[4], outcomes[5], outcomes[6]
    );
    println!(
        "differential: {} cases ({} at a host endpoint a host policy enforces, {} with a peer in a CIDR group a policy references, {} VRRP/IGMP packets decided by policy), {} mismatches (seed {seed:#x}, {policies} policies x {packets} packets)",
        counts.cases.get(),
        counts.host_enforced.get(),
        counts.group_peer.get(),
        counts.portless_tracked.get(),
        counts.mismatches.get()
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, _)) => {
            panic!("kernel and reference disagree (shrunk case):\n{reason}")
        }
        Err(TestError::Abort(reason)) => panic!("differential test aborted: {reason}"),
    }
    assert!(
        counts.host_enforced.get() > 0,
        "no case checked a host endpoint under a host policy"
    );
    assert!(
        counts.group_peer.get() > 0,
        "no case had a peer in a referenced CIDR group"
    );
    assert!(
        counts.portless_tracked.get() > 0 && outcomes[6] > 0,
        "VRRP/IGMP packets were not decided both ways"
    );
    let minimum = u64::from(policies) * packets as u64;
    assert!(
        counts.cases.get() >= minimum,
        "only {} cases ran, expected {minimum}",
        counts.cases.get()
    );
}
