//! Policies + inventory → load → `porin_compiler::compile`: never a panic,
//! always `Ok` or a typed `CompileError`, and every `Ok` is checked against
//! an independent reading of the policy.
//!
//! Two input shapes:
//! - YAML text (inputs starting with `#`, `---`, `apiVersion` or `kind`,
//!   seeded from `fixtures/` by `fuzz/seed.sh`): loaded and compiled against
//!   a fixed inventory; the checks are no panic and well-formed map entries.
//! - anything else: a structured description ([`Cluster`], via `Arbitrary`)
//!   of endpoints and CiliumNetworkPolicies, rendered to YAML. Because the
//!   fuzz side knows every rule, it checks the compiled map state:
//!   1. every port range a rule names expands (`port_range_to_masked_ports`)
//!      to blocks covering each port of the range exactly once;
//!   2. a direction some rule selects the endpoint in is enforced;
//!   3. every allow entry (identity, proto, port block) is granted by some
//!      allow rule of the endpoint: its peer may select the identity and its
//!      ports cover the whole block (the only exemption: ingress from the
//!      host, Cilium's allow-localhost);
//!   4. brute force over a sample of (peer identity, proto, port) triples
//!      with the datapath lookup: an allowed flow is granted by some allow
//!      rule; a flow some deny rule certainly covers is denied; a flow some
//!      allow rule certainly covers and no deny rule may cover is allowed.
//!
//!   "May select" is deliberately generous (a `world` entity may select any
//!   CIDR identity) and "certainly selects" deliberately narrow, so a
//!   violation is a compiler bug, not a modelling difference.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use arbitrary::{Arbitrary, Unstructured};
use ipnetwork::{IpNetwork, Ipv4Network};
use libfuzzer_sys::{Corpus, fuzz_target};
use porin_compiler::compile::{Compiled, compile};
use porin_compiler::identity::Identity;
use porin_compiler::inventory::{Endpoint, Inventory, SourceLocation};
use porin_compiler::mapstate::Direction;
use porin_compiler::ports::port_range_to_masked_ports;
use porin_compiler::resolve::lower::PolicyInput;
use porin_ebpf::abi::{decode_policy_pair, policy_pair};
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

const NAMESPACES: u8 = 2;
const APPS: u8 = 3;
const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;

#[derive(Arbitrary, Debug)]
struct Cluster {
    endpoints: Vec<FuzzEndpoint>,
    policies: Vec<FuzzPolicy>,
}

#[derive(Arbitrary, Debug)]
struct FuzzEndpoint {
    namespace: u8,
    app: u8,
}

#[derive(Arbitrary, Debug)]
struct FuzzPolicy {
    namespace: u8,
    /// `None`: `endpointSelector: {}` (every endpoint of the namespace).
    subject_app: Option<u8>,
    rules: Vec<FuzzRule>,
}

#[derive(Arbitrary, Debug)]
struct FuzzRule {
    egress: bool,
    deny: bool,
    peer: FuzzPeer,
    ports: Vec<FuzzPort>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum FuzzPeer {
    App(u8),
    AllInNamespace,
    EntityAll,
    EntityWorld,
    /// `10.<second>.<third>.0/<8 + len % 17>`, masked.
    Cidr {
        second: u8,
        third: u8,
        len: u8,
    },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct FuzzPort {
    port: u16,
    end_port: u16,
    proto: FuzzProto,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum FuzzProto {
    Tcp,
    Udp,
    Any,
}

impl FuzzPeer {
    fn cidr(self) -> Option<Ipv4Network> {
        match self {
            FuzzPeer::Cidr { second, third, len } => {
                let prefix = 8 + len % 17;
                let net = Ipv4Network::new([10, second, third, 0].into(), prefix).ok()?;
                Ipv4Network::new(net.network(), prefix).ok()
            }
            _ => None,
        }
    }
}

impl FuzzPort {
    /// The range as written: port 0 is every port.
    fn range(self) -> (u16, u16) {
        if self.port == 0 {
            (0, u16::MAX)
        } else if self.end_port > self.port {
            (self.port, self.end_port)
        } else {
            (self.port, self.port)
        }
    }

    fn protos(self) -> &'static [u8] {
        match self.proto {
            FuzzProto::Tcp => &[TCP],
            FuzzProto::Udp => &[UDP],
            FuzzProto::Any => &[TCP, UDP, SCTP],
        }
    }
}

fn namespace(n: u8) -> String {
    format!("ns-{}", n % NAMESPACES)
}

fn app(a: u8) -> String {
    format!("app-{}", a % APPS)
}

fn render(cluster: &Cluster) -> String {
    let mut yaml = String::new();
    for (index, policy) in cluster.policies.iter().enumerate() {
        let _ = writeln!(
            yaml,
            "---\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy"
        );
        let _ = writeln!(
            yaml,
            "metadata: {{name: p{index}, namespace: {}}}",
            namespace(policy.namespace)
        );
        let _ = writeln!(yaml, "spec:");
        match policy.subject_app {
            Some(a) => {
                let _ = writeln!(
                    yaml,
                    "  endpointSelector: {{matchLabels: {{app: {}}}}}",
                    app(a)
                );
            }
            None => {
                let _ = writeln!(yaml, "  endpointSelector: {{}}");
            }
        }
        for (section, egress, deny) in [
            ("ingress", false, false),
            ("ingressDeny", false, true),
            ("egress", true, false),
            ("egressDeny", true, true),
        ] {
            let rules: Vec<&FuzzRule> = policy
                .rules
                .iter()
                .filter(|r| r.egress == egress && r.deny == deny)
                .collect();
            if rules.is_empty() {
                continue;
            }
            let _ = writeln!(yaml, "  {section}:");
            let way = if egress { "to" } else { "from" };
            for rule in rules {
                let peer = match rule.peer {
                    FuzzPeer::App(a) => {
                        format!("{way}Endpoints: [{{matchLabels: {{app: {}}}}}]", app(a))
                    }
                    FuzzPeer::AllInNamespace => format!("{way}Endpoints: [{{}}]"),
                    FuzzPeer::EntityAll => format!("{way}Entities: [all]"),
                    FuzzPeer::EntityWorld => format!("{way}Entities: [world]"),
                    FuzzPeer::Cidr { .. } => match rule.peer.cidr() {
                        Some(net) => format!("{way}CIDR: [\"{net}\"]"),
                        None => format!("{way}Entities: [all]"),
                    },
                };
                let _ = writeln!(yaml, "  - {peer}");
                if !rule.ports.is_empty() {
                    let _ = writeln!(yaml, "    toPorts:\n    - ports:");
                    for port in &rule.ports {
                        let proto = match port.proto {
                            FuzzProto::Tcp => "TCP",
                            FuzzProto::Udp => "UDP",
                            FuzzProto::Any => "ANY",
                        };
                        let _ =
                            write!(yaml, "      - {{port: \"{}\", protocol: {proto}", port.port);
                        if port.port != 0 && port.end_port > port.port {
                            let _ = write!(yaml, ", endPort: {}", port.end_port);
                        }
                        let _ = writeln!(yaml, "}}");
                    }
                }
            }
        }
    }
    yaml
}

fn inventory(cluster: &Cluster) -> Option<Inventory> {
    let mut inventory = Inventory::new();
    for n in 0..NAMESPACES {
        inventory.namespaces.insert(namespace(n), BTreeMap::new());
    }
    for (index, endpoint) in cluster.endpoints.iter().enumerate() {
        let mut labels = BTreeMap::new();
        labels.insert("app".to_owned(), app(endpoint.app));
        inventory.endpoints.push(Endpoint {
            name: format!("ep{index}"),
            namespace: Some(namespace(endpoint.namespace)),
            labels,
            ips: Vec::new(),
            service_account: None,
            ports: Vec::new(),
            identity: None,
            identity_labels: None,
            location: SourceLocation::default(),
        });
    }
    inventory.finish().ok()?;
    Some(inventory)
}

/// The input index of endpoint `ep<index>` (the compiler orders endpoints
/// by namespace and name, not by input position).
fn input_index(name: &str) -> usize {
    match name.strip_prefix("ep").and_then(|n| n.parse().ok()) {
        Some(index) => index,
        None => panic!("endpoint `{name}` is not one the fuzz input made"),
    }
}

/// The fuzz side's view of the compiled cluster, for peer selection.
struct View<'a> {
    cluster: &'a Cluster,
    /// Identity → (namespace, app) of the endpoints carrying it.
    endpoint_identities: BTreeMap<u32, BTreeSet<(String, String)>>,
    /// Identity → ipcache prefixes mapped to it.
    prefixes: BTreeMap<u32, Vec<IpNetwork>>,
}

impl<'a> View<'a> {
    fn new(cluster: &'a Cluster, compiled: &'a Compiled) -> Self {
        let mut endpoint_identities: BTreeMap<u32, BTreeSet<(String, String)>> = BTreeMap::new();
        for out in &compiled.endpoints {
            let input = &cluster.endpoints[input_index(&out.name)];
            endpoint_identities
                .entry(out.identity)
                .or_default()
                .insert((namespace(input.namespace), app(input.app)));
        }
        let mut prefixes: BTreeMap<u32, Vec<IpNetwork>> = BTreeMap::new();
        for entry in &compiled.ipcache {
            prefixes
                .entry(entry.identity)
                .or_default()
                .push(entry.prefix);
        }
        View {
            cluster,
            endpoint_identities,
            prefixes,
        }
    }

    fn endpoints_of(&self, identity: u32) -> Option<&BTreeSet<(String, String)>> {
        self.endpoint_identities.get(&identity)
    }

    fn is_cidr_identity(identity: u32) -> bool {
        identity & Identity::SCOPE_MASK == Identity::SCOPE_LOCAL
    }

    /// Generous: could a correct compiler let this peer select `identity`?
    fn peer_may_select(&self, policy_ns: &str, peer: FuzzPeer, identity: u32) -> bool {
        match peer {
            FuzzPeer::EntityAll => true,
            FuzzPeer::App(a) => self
                .endpoints_of(identity)
                .is_some_and(|set| set.iter().any(|(ns, ap)| ns == policy_ns && *ap == app(a))),
            FuzzPeer::AllInNamespace => self
                .endpoints_of(identity)
                .is_some_and(|set| set.iter().any(|(ns, _)| ns == policy_ns)),
            FuzzPeer::EntityWorld => {
                matches!(identity, 2 | 9 | 10) || Self::is_cidr_identity(identity)
            }
            FuzzPeer::Cidr { .. } => {
                let Some(net) = peer.cidr() else { return true };
                Self::is_cidr_identity(identity)
                    && self.prefixes.get(&identity).is_some_and(|list| {
                        list.iter().all(|p| match p {
                            IpNetwork::V4(p) => {
                                net.contains(p.network()) && p.prefix() >= net.prefix()
                            }
                            IpNetwork::V6(_) => false,
                        })
                    })
            }
        }
    }

    /// Narrow: must a correct compiler let this peer select `identity`?
    fn peer_surely_selects(&self, policy_ns: &str, peer: FuzzPeer, identity: u32) -> bool {
        match peer {
            FuzzPeer::EntityAll => true,
            FuzzPeer::App(_) | FuzzPeer::AllInNamespace => {
                // Endpoint identities are shared by equal label sets only, so
                // "may" and "surely" agree here.
                self.endpoints_of(identity).is_some()
                    && self.peer_may_select(policy_ns, peer, identity)
            }
            FuzzPeer::EntityWorld => matches!(identity, 9 | 10),
            FuzzPeer::Cidr { .. } => {
                let Some(net) = peer.cidr() else { return true };
                self.prefixes
                    .get(&identity)
                    .is_some_and(|list| list.contains(&IpNetwork::V4(net)))
                    && Self::is_cidr_identity(identity)
            }
        }
    }

    /// The rules that apply to endpoint `index` in `direction`, with their
    /// policy's namespace.
    fn rules_of(&self, index: usize, direction: Direction) -> Vec<(String, &'a FuzzRule)> {
        let endpoint = &self.cluster.endpoints[index];
        let mut out = Vec::new();
        for policy in &self.cluster.policies {
            if policy.namespace % NAMESPACES != endpoint.namespace % NAMESPACES {
                continue;
            }
            if policy
                .subject_app
                .is_some_and(|a| a % APPS != endpoint.app % APPS)
            {
                continue;
            }
            for rule in &policy.rules {
                if rule.egress == (direction == Direction::Egress) {
                    out.push((namespace(policy.namespace), rule));
                }
            }
        }
        out
    }
}

/// Do the rule's ports cover every port of `[low, high]` for `proto`
/// (`proto` 0: every protocol)?
fn ports_cover(rule: &FuzzRule, proto: u8, low: u16, high: u16) -> bool {
    if rule.ports.is_empty() {
        return true;
    }
    rule.ports.iter().any(|port| {
        let (start, end) = port.range();
        if proto == 0 {
            return port.proto == FuzzProto::Any && port.port == 0;
        }
        port.protos().contains(&proto) && start <= low && high <= end
    })
}

fn check_port_expansion(cluster: &Cluster) {
    for policy in &cluster.policies {
        for rule in &policy.rules {
            for port in &rule.ports {
                let (start, end) = port.range();
                let blocks = port_range_to_masked_ports(start, end);
                let mut covered: u64 = 0;
                for block in &blocks {
                    let (low, high) = (block.port(), block.end_port());
                    assert!(
                        start <= low && high <= end,
                        "block {low}-{high} leaves range {start}-{end}"
                    );
                    covered += u64::from(high - low) + 1;
                }
                // Inside the range and summing to its size: each port once.
                assert_eq!(
                    covered,
                    u64::from(end - start) + 1,
                    "range {start}-{end} expands to {blocks:?}"
                );
            }
        }
    }
}

fn check_compiled(cluster: &Cluster, compiled: &Compiled) {
    let view = View::new(cluster, compiled);
    let mut identities: BTreeSet<u32> = compiled.identities.iter().map(|i| i.id).collect();
    identities.extend([1, 2, 9, 10]);
    for endpoint in &compiled.endpoints {
        for direction in Direction::ALL {
            let rules = view.rules_of(input_index(&endpoint.name), direction);
            let enforced = match direction {
                Direction::Ingress => endpoint.enforcement.ingress,
                Direction::Egress => endpoint.enforcement.egress,
            };
            assert!(
                rules.is_empty() || enforced,
                "{}: {direction} selected by a rule but not enforced",
                endpoint.display_name()
            );
            if !enforced {
                continue;
            }
            let exempt = |identity: u32| direction == Direction::Ingress && identity == 1;

            // 3. every allow entry is granted by an allow rule
            for (key, entry) in endpoint.state.iter() {
                if key.direction() != direction || entry.is_deny() {
                    continue;
                }
                let identity = key.identity().get();
                let granted = exempt(identity)
                    || rules.iter().any(|(ns, rule)| {
                        !rule.deny
                            && (identity == 0 && rule.peer_is_all()
                                || identity != 0 && view.peer_may_select(ns, rule.peer, identity))
                            && ports_cover(rule, key.proto(), key.port(), key.end_port())
                    });
                assert!(
                    granted,
                    "{}: allow entry {key:?} -> {entry:?} is granted by no allow rule",
                    endpoint.display_name()
                );
            }

            // 4. brute force over sampled flows
            let mut ports: BTreeSet<u16> = [1, 80, 65535].into_iter().collect();
            for (_, rule) in &rules {
                for port in &rule.ports {
                    let (start, end) = port.range();
                    for p in [start.saturating_sub(1), start, end, end.saturating_add(1)] {
                        if p != 0 {
                            ports.insert(p);
                        }
                    }
                }
            }
            for &identity in &identities {
                let Ok(peer) = Identity::new(identity) else {
                    continue;
                };
                for proto in [TCP, UDP] {
                    for &port in &ports {
                        let decision = endpoint.state.lookup(direction, peer, proto, port);
                        let allowed = decision.verdict.is_allowed();
                        let may_allow = exempt(identity)
                            || rules.iter().any(|(ns, rule)| {
                                !rule.deny
                                    && view.peer_may_select(ns, rule.peer, identity)
                                    && ports_cover(rule, proto, port, port)
                            });
                        let must_deny = rules.iter().any(|(ns, rule)| {
                            rule.deny
                                && view.peer_surely_selects(ns, rule.peer, identity)
                                && ports_cover(rule, proto, port, port)
                        });
                        let may_deny = rules.iter().any(|(ns, rule)| {
                            rule.deny
                                && view.peer_may_select(ns, rule.peer, identity)
                                && ports_cover(rule, proto, port, port)
                        });
                        let must_allow = rules.iter().any(|(ns, rule)| {
                            !rule.deny
                                && view.peer_surely_selects(ns, rule.peer, identity)
                                && ports_cover(rule, proto, port, port)
                        });
                        let flow = format!(
                            "{}: {direction} peer {identity} proto {proto} port {port}",
                            endpoint.display_name()
                        );
                        assert!(
                            !allowed || may_allow,
                            "{flow}: allowed but no allow rule grants it ({decision})"
                        );
                        assert!(
                            !allowed || !must_deny,
                            "{flow}: allowed but a deny rule covers it ({decision})"
                        );
                        assert!(
                            allowed || !must_allow || may_deny,
                            "{flow}: denied but an allow rule grants it and no deny rule covers it ({decision})"
                        );
                    }
                }
            }
        }
    }
}

impl FuzzRule {
    fn peer_is_all(&self) -> bool {
        matches!(self.peer, FuzzPeer::EntityAll)
    }
}

fn structured(data: &[u8]) -> Corpus {
    let Ok(cluster) = Cluster::arbitrary_take_rest(Unstructured::new(data)) else {
        return Corpus::Reject;
    };
    if cluster.endpoints.len() > 8
        || cluster.policies.len() > 6
        || cluster
            .policies
            .iter()
            .any(|p| p.rules.len() > 6 || p.rules.iter().any(|r| r.ports.len() > 4))
    {
        return Corpus::Reject;
    }
    check_port_expansion(&cluster);
    let Some(inventory) = inventory(&cluster) else {
        return Corpus::Reject;
    };
    let yaml = render(&cluster);
    let outcome = load_str("fuzz.yaml", &yaml, &LoadLimits::default());
    if outcome.has_errors() {
        // The renderer writes valid policies except for shapes the loader
        // rightly refuses (e.g. a policy with no rules); nothing to check.
        return Corpus::Reject;
    }
    let inputs = PolicyInput::from_outcome(&outcome);
    match compile(&inputs, &inventory) {
        Ok(compiled) => {
            check_compiled(&cluster, &compiled);
            Corpus::Keep
        }
        Err(error) => {
            let _ = error.to_string();
            Corpus::Keep
        }
    }
}

fn yaml_text(text: &str) -> Corpus {
    let outcome = load_str("fuzz.yaml", text, &porin_model::invariants::fuzz_limits());
    let mut inventory = Inventory::new();
    inventory
        .namespaces
        .insert("default".to_owned(), BTreeMap::new());
    for (index, app_name) in ["web", "db", "backend", "client", "frontend"]
        .into_iter()
        .enumerate()
    {
        let mut labels = BTreeMap::new();
        labels.insert("app".to_owned(), app_name.to_owned());
        inventory.endpoints.push(Endpoint {
            name: format!("ep{index}"),
            namespace: Some("default".to_owned()),
            labels,
            ips: Vec::new(),
            service_account: None,
            ports: Vec::new(),
            identity: None,
            identity_labels: None,
            location: SourceLocation::default(),
        });
    }
    // DNS answers, so toFQDNs patterns are matched against names; a 60-byte
    // label made the old backtracking matchPattern glob exponential
    // (issue 12: 46 s for `*a*a*a*a*a*a*a*a*b.com`).
    let label = "a".repeat(60);
    for (name, ip) in [
        (format!("{label}.com"), [203, 0, 113, 20]),
        (format!("{label}b.com"), [203, 0, 113, 21]),
        ("api.example.com".to_owned(), [203, 0, 113, 10]),
        (format!("x.{label}.example.org"), [203, 0, 113, 22]),
    ] {
        inventory
            .fqdns
            .insert(name, vec![std::net::IpAddr::from(ip)]);
    }
    if inventory.finish().is_err() {
        return Corpus::Reject;
    }
    let inputs = PolicyInput::from_outcome(&outcome);
    if let Ok(compiled) = compile(&inputs, &inventory) {
        for endpoint in &compiled.endpoints {
            for (key, entry) in endpoint.state.iter() {
                let (raw_key, raw_value) = policy_pair(key, entry);
                let (key_bytes, value_bytes) = (raw_key.to_bytes(), raw_value.to_bytes());
                match decode_policy_pair(&key_bytes, &value_bytes) {
                    Ok((back, _)) => assert_eq!(back, *key, "key bytes do not round-trip"),
                    Err(error) => panic!("{key:?} encodes to invalid bytes {key_bytes:?}: {error}"),
                }
            }
        }
        let _ = compiled.to_json();
    }
    Corpus::Keep
}

fuzz_target!(|data: &[u8]| -> Corpus {
    let is_text = [b"#".as_slice(), b"---", b"apiVersion", b"kind"]
        .iter()
        .any(|prefix| data.starts_with(prefix));
    if is_text {
        match std::str::from_utf8(data) {
            Ok(text) => yaml_text(text),
            Err(_) => Corpus::Reject,
        }
    } else {
        structured(data)
    }
});
