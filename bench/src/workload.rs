//! The measured policy: N rules of "this peer address may reach this UDP port", written once and
//! enforced three ways: compiled by porin (CNP YAML → porin_model → porin_compiler → map
//! entries), as an `iptables` chain (nft backend) and as a native `nft` chain.
//!
//! Rules 0..N−1 name peers in 10.216.0.0/14 that never send anything, so they never match; the
//! last rule allows the echo client. A rule list therefore walks every rule for every request,
//! which is the worst case for a list (and the case the issue asks for).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

use anyhow::{Context, Result, bail};
use porin_compiler::compile::compile;
use porin_compiler::identity::Identity;
use porin_compiler::inventory::{Endpoint, Inventory};
use porin_compiler::ipcache::Ipcache;
use porin_compiler::mapstate::Direction;
use porin_compiler::resolve::lower::PolicyInput;
use porin_ebpf::abi::{
    Ipcache4Key, Ipcache4Pair, Ipcache6Pair, IpcacheValue, PolicyKey, PolicyPair, ipcache_pairs,
    policy_pairs,
};
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

/// The echo client's address (client namespace).
pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
/// The echo server's address (server namespace; the filtered endpoint).
pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);
/// The echo server's UDP port.
pub const ECHO_PORT: u16 = 7000;
/// First address of the never-matching peers (10.216.0.0/14 holds 262,144 of them).
const UNUSED_PEERS: u32 = u32::from_be_bytes([10, 216, 0, 0]);
/// The most rules the generator makes (the /14 above).
pub const MAX_RULES: usize = 1 << 18;
/// Kubernetes namespace and name of the server endpoint in the inventory.
pub const SERVER_NAMESPACE: &str = "bench";
/// Name of the server endpoint.
pub const SERVER_NAME: &str = "echo-server";

/// The rules' transport protocol (the UDP echo, or the TCP workloads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Proto {
    /// UDP (the echo rig of issue #7).
    Udp,
    /// TCP (request/response and connection churn).
    Tcp,
}

impl Proto {
    /// The IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Self::Udp => 17,
            Self::Tcp => 6,
        }
    }

    /// The name in a CiliumNetworkPolicy's `toPorts`.
    fn cilium(self) -> &'static str {
        match self {
            Self::Udp => "UDP",
            Self::Tcp => "TCP",
        }
    }

    /// The name in iptables and nft rules.
    pub fn netfilter(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
        }
    }
}

/// One rule: `peer/32` may send `proto` to `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    /// The peer address (matched as a /32).
    pub peer: Ipv4Addr,
    /// The destination port.
    pub port: u16,
    /// The transport protocol.
    pub proto: Proto,
}

/// `count` UDP rules: `count − 1` that never match, then the one that allows the echo client.
/// `variant` shifts the never-matching rules' ports, to make a different policy of the same size.
pub fn rules(count: usize, variant: u16) -> Result<Vec<Rule>> {
    rules_for(count, variant, Proto::Udp)
}

/// As [`rules`], for `proto`.
pub fn rules_for(count: usize, variant: u16, proto: Proto) -> Result<Vec<Rule>> {
    if count == 0 || count > MAX_RULES {
        bail!("rule count {count} is outside 1..={MAX_RULES}");
    }
    let mut rules = Vec::with_capacity(count);
    for index in 0..count - 1 {
        let offset = u32::try_from(index).context("rule index")?;
        let port = 20_000 + u16::try_from(index % 1_000).unwrap_or(0) + variant;
        rules.push(Rule {
            peer: Ipv4Addr::from(UNUSED_PEERS + offset),
            port,
            proto,
        });
    }
    rules.push(Rule {
        peer: CLIENT,
        port: ECHO_PORT,
        proto,
    });
    Ok(rules)
}

/// The rules as one CiliumNetworkPolicy selecting the echo server: one ingress rule each
/// (`fromCIDR: [peer/32]`, `toPorts: [{port, protocol}]`).
pub fn cnp_yaml(rules: &[Rule]) -> String {
    let mut yaml = String::with_capacity(rules.len() * 120 + 256);
    let _ = write!(
        yaml,
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: bench-{}\n  \
         namespace: {SERVER_NAMESPACE}\nspec:\n  endpointSelector:\n    matchLabels:\n      \
         app: {SERVER_NAME}\n  ingress:\n",
        rules.len()
    );
    for rule in rules {
        let _ = write!(
            yaml,
            "  - fromCIDR:\n    - {}/32\n    toPorts:\n    - ports:\n      - port: \"{}\"\n        \
             protocol: {}\n",
            rule.peer,
            rule.port,
            rule.proto.cilium()
        );
    }
    yaml
}

/// The inventory: the echo server alone, at `server` ([`SERVER`], or the microVM guest's
/// address; the client is a CIDR peer, as an address outside the cluster would be).
pub fn inventory_at(server: Ipv4Addr) -> Result<Inventory> {
    let mut inventory = Inventory::new();
    // The baselines (iptables, nft) hold exactly the N rules; porin's map must hold exactly the
    // N rule entries too, without the host's allow-localhost entry (which Cilium in Kubernetes
    // mode would add, and which the benchmark's traffic never uses).
    inventory.allow_localhost = porin_compiler::inventory::AllowLocalhost::Policy;
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), SERVER_NAME.to_owned());
    inventory.endpoints.push(Endpoint {
        name: SERVER_NAME.to_owned(),
        namespace: Some(SERVER_NAMESPACE.to_owned()),
        labels,
        ips: vec![IpAddr::V4(server)],
        service_account: None,
        ports: Vec::new(),
        identity: None,
        identity_labels: None,
        location: porin_compiler::inventory::SourceLocation::default(),
    });
    inventory.finish().context("inventory")?;
    Ok(inventory)
}

/// A policy-map entry (the datapath ABI's key and value).
pub type PolicyEntry = PolicyPair;
/// An IPv4 ipcache entry.
pub type Ipcache4Entry = Ipcache4Pair;
/// An IPv6 ipcache entry.
pub type Ipcache6Entry = Ipcache6Pair;

/// What porin compiled for the server endpoint.
#[derive(Debug, Clone)]
pub struct PorinPolicy {
    /// The server endpoint's policy-map entries (key order).
    pub policy: Vec<PolicyEntry>,
    /// The IPv4 ipcache.
    pub ipcache4: Vec<Ipcache4Entry>,
    /// The IPv6 ipcache.
    pub ipcache6: Vec<Ipcache6Entry>,
    /// The client's CIDR identity.
    pub client_identity: u32,
}

/// Loads and compiles the rules' CNP with porin; errors if porin reports an error.
pub fn compile_rules(rules: &[Rule]) -> Result<PorinPolicy> {
    compile_rules_at(rules, SERVER)
}

/// As [`compile_rules`], with the server endpoint at `server`.
pub fn compile_rules_at(rules: &[Rule], server: Ipv4Addr) -> Result<PorinPolicy> {
    let yaml = cnp_yaml(rules);
    let limits = LoadLimits {
        max_file_bytes: u64::MAX,
        max_nodes: usize::MAX,
        max_documents: usize::MAX,
        ..LoadLimits::default()
    };
    let outcome = load_str("bench.yaml", &yaml, &limits);
    if outcome.has_errors() {
        bail!(
            "porin_model rejected the generated policy: {:?}",
            outcome.diagnostics.first()
        );
    }
    let inputs = PolicyInput::from_outcome(&outcome);
    let compiled = compile(&inputs, &inventory_at(server)?).context("porin_compiler")?;
    if compiled.has_errors() {
        bail!("porin_compiler reported errors: {:?}", compiled.diagnostics);
    }
    let endpoint = compiled
        .endpoint(&format!("{SERVER_NAMESPACE}/{SERVER_NAME}"))
        .context("the server endpoint is missing from the compiled output")?;
    let mut ipcache = Ipcache::new();
    for entry in &compiled.ipcache {
        let identity = Identity::new(entry.identity)
            .map_err(|e| anyhow::anyhow!("ipcache identity {}: {e}", entry.identity))?;
        ipcache.insert(entry.prefix, identity);
    }
    let client_identity = compiled.identity_of_ip(IpAddr::V4(CLIENT));
    let ipcache = ipcache_pairs(&ipcache);
    Ok(PorinPolicy {
        policy: policy_pairs(&endpoint.state),
        ipcache4: ipcache.v4,
        ipcache6: ipcache.v6,
        client_identity,
    })
}

/// Above this many rules the policy is not compiled but synthesised ([`synthesise_rules_at`]).
/// Originally because the compiler did not finish 65,535 CIDR rules within 13 minutes
/// (selector resolution grew with N²); since the selection index it takes seconds
/// (BENCHMARKS.md, "CIDR rules"), but `compile`'s default limits still refuse 65,535 CIDR rules
/// (`max_selector_evaluations`, selectors × identities), and the synthesised points keep the
/// earlier tables comparable.
pub const COMPILE_LIMIT_RULES: usize = 10_000;

/// Compiles the rules with porin, or above [`COMPILE_LIMIT_RULES`] synthesises them.
/// Returns whether the result was synthesised.
pub fn porin_policy(rules: &[Rule]) -> Result<(PorinPolicy, bool)> {
    porin_policy_at(rules, SERVER)
}

/// As [`porin_policy`], with the server endpoint at `server`.
pub fn porin_policy_at(rules: &[Rule], server: Ipv4Addr) -> Result<(PorinPolicy, bool)> {
    if rules.len() > COMPILE_LIMIT_RULES {
        Ok((synthesise_rules_at(rules, server)?, true))
    } else {
        Ok((compile_rules_at(rules, server)?, false))
    }
}

/// The policy porin would compile for `rules`, built without the resolver: the last (client)
/// rule is compiled by porin and gives the entry template (value bytes, fixed entries,
/// ipcache); every other rule gets its own local-scope CIDR identity, an ipcache /32 and one
/// exact `(identity, ingress, protocol, port)` entry with the template's value, exactly the shape
/// `compile_rules` produces for smaller N (checked by a test).
pub fn synthesise_rules_at(rules: &[Rule], server: Ipv4Addr) -> Result<PorinPolicy> {
    let (client_rule, others) = rules.split_last().context("no rules")?;
    let mut policy = compile_rules_at(std::slice::from_ref(client_rule), server)?;
    let template = policy
        .policy
        .iter()
        .find(|(k, _)| is_client_ingress(k, policy.client_identity))
        .map(|(_, v)| *v)
        .context("no client entry in the compiled template")?;
    let first = policy
        .ipcache4
        .iter()
        .map(|(_, v)| v.identity)
        .filter(|id| id & Identity::SCOPE_MASK == Identity::SCOPE_LOCAL)
        .max()
        .unwrap_or(Identity::SCOPE_LOCAL)
        + 1;
    for (next, rule) in (first..).zip(others) {
        let identity = Identity::new(next).map_err(|e| anyhow::anyhow!("identity {next}: {e}"))?;
        let key = PolicyKey::lookup(Direction::Ingress, next, rule.proto.number(), rule.port);
        policy.policy.push((key, template));
        let prefix = Ipcache4Key::new(32, rule.peer)?;
        policy.ipcache4.push((prefix, IpcacheValue::new(identity)));
    }
    // In map byte order, as the kernel lists them.
    policy.policy.sort_by_key(|(k, _)| k.to_bytes());
    policy.ipcache4.sort_by_key(|(k, _)| k.to_bytes());
    Ok(policy)
}

/// Whether `key` is the client's exact ingress key.
pub fn is_client_ingress(key: &PolicyKey, client_identity: u32) -> bool {
    key.direction == PolicyKey::INGRESS && key.identity == client_identity
}

/// Name of the iptables chain's table and of the nft table.
pub const NFT_TABLE: &str = "porin_bench";

/// Where the chains sit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainAt {
    /// The server namespace's INPUT hook (the namespace rigs: the endpoint is local).
    Input,
    /// The FORWARD hook of the host namespace, for traffic routed out of the tap `dev` (the
    /// microVM rig, as a host firewall for microVMs filters its guests): packets from the
    /// guest (`-i dev`) are accepted, as porin's policy does not enforce egress, packets to the
    /// guest (`-o dev`) jump to [`VM_CHAIN`], which walks the rules and falls back to drop.
    ForwardTo(String),
}

/// The per-guest chain of [`ChainAt::ForwardTo`] (iptables and nft).
pub const VM_CHAIN: &str = "porin_vm";

impl ChainAt {
    /// The chain holding the rules (`input` in nft, `INPUT` in iptables, or [`VM_CHAIN`]).
    pub fn rule_chain(&self, iptables: bool) -> &'static str {
        match (self, iptables) {
            (Self::Input, true) => "INPUT",
            (Self::Input, false) => "input",
            (Self::ForwardTo(_), _) => VM_CHAIN,
        }
    }
}

/// `iptables-restore` input: INPUT drops by default and walks the rules in order.
pub fn iptables_restore(rules: &[Rule]) -> String {
    iptables_restore_at(rules, &ChainAt::Input)
}

/// `iptables-restore` input for the chains at `at` (see [`ChainAt`]).
pub fn iptables_restore_at(rules: &[Rule], at: &ChainAt) -> String {
    let mut text = String::with_capacity(rules.len() * 64 + 256);
    let chain = at.rule_chain(true);
    match at {
        ChainAt::Input => text
            .push_str("*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"),
        ChainAt::ForwardTo(dev) => {
            let _ = write!(
                text,
                "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n\
                 :{chain} - [0:0]\n-A FORWARD -i {dev} -j ACCEPT\n-A FORWARD -o {dev} -j {chain}\n"
            );
        }
    }
    for rule in rules {
        let proto = rule.proto.netfilter();
        let _ = writeln!(
            text,
            "-A {chain} -s {}/32 -p {proto} -m {proto} --dport {} -j ACCEPT",
            rule.peer, rule.port
        );
    }
    text.push_str("COMMIT\n");
    text
}

/// `nft -f` input: one base chain on the input hook, default drop, the same rules in order; the
/// last rule counts, so the run can check the traffic really went through the chain.
pub fn nft_script(rules: &[Rule]) -> String {
    nft_script_at(rules, &ChainAt::Input)
}

/// `nft -f` input for the chains at `at` (see [`ChainAt`]); the last rule counts.
pub fn nft_script_at(rules: &[Rule], at: &ChainAt) -> String {
    let mut text = String::with_capacity(rules.len() * 56 + 256);
    let chain = at.rule_chain(false);
    match at {
        ChainAt::Input => {
            let _ = writeln!(
                text,
                "table ip {NFT_TABLE} {{\n  chain input {{\n    type filter hook input priority filter; policy drop;"
            );
        }
        ChainAt::ForwardTo(dev) => {
            let _ = writeln!(
                text,
                "table ip {NFT_TABLE} {{\n  chain forward {{\n    type filter hook forward priority filter; policy drop;\n    \
                 iifname \"{dev}\" accept\n    oifname \"{dev}\" jump {chain}\n  }}\n  chain {chain} {{"
            );
        }
    }
    let last = rules.len().saturating_sub(1);
    for (index, rule) in rules.iter().enumerate() {
        let counter = if index == last { "counter " } else { "" };
        let _ = writeln!(
            text,
            "    ip saddr {} {} dport {} {counter}accept",
            rule.peer,
            rule.proto.netfilter(),
            rule.port
        );
    }
    text.push_str("  }\n}\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_rule_names_the_client() {
        let rules = rules(100, 0).unwrap();
        assert_eq!(rules.len(), 100);
        assert_eq!(rules.iter().filter(|r| r.peer == CLIENT).count(), 1);
        assert_eq!(rules[99].port, ECHO_PORT);
        let mut distinct = rules.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 100);
        assert!(super::rules(0, 0).is_err());
    }

    #[test]
    fn porin_compiles_one_exact_entry_per_rule() {
        let compiled = compile_rules(&rules(10, 0).unwrap()).unwrap();
        // Ingress: one exact (identity, UDP, port) entry per rule.
        let ingress: Vec<_> = compiled
            .policy
            .iter()
            .filter(|(k, _)| k.direction == PolicyKey::INGRESS)
            .collect();
        assert_eq!(ingress.len(), 10, "{:?}", compiled.policy);
        assert!(
            ingress
                .iter()
                .all(|(k, _)| k.prefixlen == 64 && k.proto == 17)
        );
        let client = ingress
            .iter()
            .find(|(k, _)| is_client_ingress(k, compiled.client_identity))
            .unwrap();
        assert_eq!(client.0.dport_be, ECHO_PORT);
        // ipcache: the 10 peers, the server, 0.0.0.0/0.
        assert_eq!(compiled.ipcache4.len(), 12);
        // Egress is not enforced (no egress rules): the one other entry is an L3-only egress
        // allow for every peer (identity 0), which BENCHMARKS.md's "skip the egress program" relies on.
        let others: Vec<_> = compiled
            .policy
            .iter()
            .filter(|(k, _)| k.direction != PolicyKey::INGRESS)
            .collect();
        assert_eq!(others.len(), 1, "{others:?}");
        let (key, entry) = others[0];
        assert_eq!(
            (key.prefixlen, key.identity, key.direction),
            (40, 0, PolicyKey::EGRESS)
        );
        assert!(!entry.is_deny(), "allow, not deny");
    }

    #[test]
    fn synthesised_policies_have_the_compiled_shape() {
        let rules = rules(50, 0).unwrap();
        let compiled = compile_rules(&rules).unwrap();
        let synthesised = synthesise_rules_at(&rules, SERVER).unwrap();
        // Same number of entries, same keys apart from the identity numbers, same values.
        assert_eq!(compiled.policy.len(), synthesised.policy.len());
        assert_eq!(compiled.ipcache4.len(), synthesised.ipcache4.len());
        let shape = |p: &PorinPolicy| {
            let mut v: Vec<_> = p
                .policy
                .iter()
                .map(|(k, v)| (k.prefixlen, k.direction, k.proto, k.dport_be, *v))
                .collect();
            v.sort();
            v
        };
        assert_eq!(shape(&compiled), shape(&synthesised));
        let prefixes = |p: &PorinPolicy| p.ipcache4.iter().map(|(k, _)| *k).collect::<Vec<_>>();
        let mut a = prefixes(&compiled);
        let mut b = prefixes(&synthesised);
        a.sort();
        b.sort();
        assert_eq!(a, b);
        // Distinct identities per peer.
        let ids: std::collections::BTreeSet<_> =
            synthesised.ipcache4.iter().map(|(_, v)| *v).collect();
        assert_eq!(ids.len(), synthesised.ipcache4.len());
    }

    #[test]
    fn chains_list_every_rule_in_order() {
        let rules = rules(3, 0).unwrap();
        let ipt = iptables_restore(&rules);
        assert_eq!(ipt.matches("-A INPUT").count(), 3);
        assert!(ipt.contains(":INPUT DROP"));
        assert!(ipt.trim_end().ends_with("COMMIT"));
        let last = ipt.lines().rev().nth(1).unwrap();
        assert_eq!(
            last,
            "-A INPUT -s 10.213.0.1/32 -p udp -m udp --dport 7000 -j ACCEPT"
        );
        let nft = nft_script(&rules);
        assert_eq!(nft.matches(" accept").count(), 3);
        assert!(nft.contains("ip saddr 10.213.0.1 udp dport 7000 counter accept"));
        assert!(nft.contains("policy drop"));
    }

    #[test]
    fn tap_chains_accept_the_guest_and_walk_the_rules_towards_it() {
        let rules = rules_for(3, 0, Proto::Tcp).unwrap();
        let at = ChainAt::ForwardTo("pbt1".to_owned());
        let ipt = iptables_restore_at(&rules, &at);
        assert!(ipt.contains(":FORWARD DROP"), "{ipt}");
        assert!(ipt.contains("-A FORWARD -i pbt1 -j ACCEPT\n-A FORWARD -o pbt1 -j porin_vm\n"));
        assert_eq!(ipt.matches("-A porin_vm ").count(), 3, "{ipt}");
        assert!(ipt.contains("-A porin_vm -s 10.213.0.1/32 -p tcp -m tcp --dport 7000 -j ACCEPT"));
        let nft = nft_script_at(&rules, &at);
        assert!(nft.contains("type filter hook forward priority filter; policy drop;"));
        assert!(nft.contains("oifname \"pbt1\" jump porin_vm"), "{nft}");
        assert!(nft.contains("ip saddr 10.213.0.1 tcp dport 7000 counter accept"));
        assert_eq!(nft.matches(" accept").count(), 4, "{nft}");
        // porin compiles the TCP rules to TCP keys.
        let compiled = compile_rules(&rules).unwrap();
        assert!(
            compiled
                .policy
                .iter()
                .filter(|(k, _)| k.direction == PolicyKey::INGRESS)
                .all(|(k, _)| k.proto == 6)
        );
    }
}
