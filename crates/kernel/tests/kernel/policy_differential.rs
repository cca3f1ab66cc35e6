//! Differential test of the datapath's policy decision against a direct
//! model of docs/semantics.md §5.4 (Cilium 1.19 `__policy_can_access` /
//! `__policy_check`): random policy maps (both directions, identity 0 and
//! specific identities, L3-only / proto-only / port-prefix / exact keys,
//! deny, redirect, tiered precedences, explicit and derived auth) and random
//! packets, decided in the kernel (BPF_PROG_TEST_RUN via the libbpf loader)
//! and by the model. Return code, skb->mark and the verdict counters must
//! agree.
//!
//! The model below is written from the document, not from the generator.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::support;

use std::net::Ipv4Addr;
use std::process::Command;

use porin_compiler::mapstate::Key;
use porin_ebpf::maps::{Direction, MapUpdate, PolicySlot, Verdict, redirect_mark};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use support::*;

/// A rule's key, as the model reads it.
#[derive(Clone, Copy, Debug)]
struct PolicyKey {
    identity: u32,
    direction: Direction,
    proto: u8,
    port: u16,
    port_prefix_len: u8,
}

/// A rule's entry, as the model reads it.
#[derive(Clone, Copy, Debug)]
struct PolicyEntry {
    proxy_port: u16,
    deny: bool,
    auth_type: u8,
    explicit_auth: bool,
    precedence: u32,
}

#[derive(Clone, Debug)]
struct Rule {
    key: PolicyKey,
    entry: PolicyEntry,
}

impl Rule {
    /// The compiler's key of the rule: two rules with the same one share a trie key.
    fn datapath_key(&self) -> Key {
        let k = &self.key;
        policy_key(k.identity, k.direction, k.proto, k.port, k.port_prefix_len)
    }

    /// The map update that writes the rule into slot A.
    fn update(&self) -> MapUpdate {
        let e = &self.entry;
        let entry = policy_entry(e.precedence, e.proxy_port, e.auth_type, e.explicit_auth);
        MapUpdate::policy(PolicySlot::A, &self.datapath_key(), &entry)
    }
}

#[derive(Clone, Debug)]
struct Packet {
    /// Index into `PEERS`.
    peer: usize,
    /// IPv6 instead of IPv4 (peer address from `PEERS6`).
    v6: bool,
    /// Traffic entering the endpoint (`porin_to_endpoint`, peer = source)
    /// instead of leaving it.
    ingress: bool,
    proto: u8,
    dport: u16,
}

const PEERS: [(Ipv4Addr, u32); 3] = [
    (Ipv4Addr::new(10, 0, 0, 1), 1000),
    (Ipv4Addr::new(10, 0, 1, 1), 2000),
    // ipcache miss: world-ipv4 (WORLD_IPV4_ID of a dual-stack agent,
    // bpf/bpf_lxc.c), not reserved:world (2).
    (Ipv4Addr::new(10, 9, 9, 9), 9),
];
// The IPv6 miss is world-ipv6 (WORLD_IPV6_ID).
const PEERS6: [(&str, u32); 3] = [
    ("fd00:1::1", 1000),
    ("fd00:2::1", 2000),
    ("2001:db8::9", 10),
];
const PORTS: [u16; 6] = [80, 443, 7776, 7777, 8080, 0x1f00];

fn rule() -> impl Strategy<Value = Rule> {
    (
        // 2 (reserved:world) keys must match no packet: misses are 9 / 10.
        prop::sample::select(vec![0u32, 0, 1000, 1000, 2000, 9, 10, 2]),
        prop::bool::weighted(0.8),
        prop::sample::select(vec![0u8, 6, 17]),
        prop::sample::select(PORTS.to_vec()),
        prop::sample::select(vec![0u8, 8, 12, 15, 16, 16]),
        prop::sample::select(vec![
            0xFFFF_FFFFu32,
            0xFFFF_FF01,
            0xFFFF_FF9A,
            0xFFFF_FE01,
            0xFFFF_FEFF,
        ]),
        prop::sample::select(vec![0u8, 0, 0, 1, 2]),
        any::<bool>(),
        1u16..1000,
    )
        .prop_map(
            |(identity, egress, proto, port, plen, precedence, auth, explicit, proxy)| {
                let (port, plen) = if proto == 0 {
                    (0, 0)
                } else {
                    let mask = if plen == 0 {
                        0
                    } else {
                        u16::MAX << (16 - plen)
                    };
                    (port & mask, plen)
                };
                let deny = precedence & 0xff == 0xff;
                Rule {
                    key: PolicyKey {
                        identity,
                        direction: if egress {
                            Direction::Egress
                        } else {
                            Direction::Ingress
                        },
                        proto,
                        port,
                        port_prefix_len: plen,
                    },
                    entry: PolicyEntry {
                        // Cilium clears proxy and auth on deny entries.
                        proxy_port: if !deny && precedence & 0xff == 0x9a {
                            15000 + proxy
                        } else {
                            0
                        },
                        deny,
                        auth_type: if deny { 0 } else { auth },
                        explicit_auth: !deny && explicit,
                        precedence,
                    },
                }
            },
        )
}

fn packet() -> impl Strategy<Value = Packet> {
    (
        0..PEERS.len(),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![6u8, 17]),
        prop_oneof![prop::sample::select(PORTS.to_vec()), any::<u16>()],
    )
        .prop_map(|(peer, v6, ingress, proto, dport)| Packet {
            peer,
            v6,
            ingress,
            proto,
            dport,
        })
}

/// Prefix length in the trie: 40 any proto, 48 + n for the top n port bits
/// (48 proto only). Unlike Cilium's NewKeyFromPolicyKey
/// (pkg/maps/policymap/policymap.go), a range starting at port 0 keeps its
/// port bits: porin's one key encoding fails closed (docs/semantics.md §4.5).
fn model_prefix(key: &PolicyKey) -> u32 {
    if key.proto == 0 {
        40
    } else {
        48 + u32::from(key.port_prefix_len)
    }
}

/// The kernel LPM trie: among entries for this (identity, direction), the
/// longest prefix whose proto and top port bits match. Later updates of the
/// same key replace earlier ones.
fn lpm<'r>(rules: &'r [Rule], identity: u32, packet: &Packet) -> Option<&'r Rule> {
    let mut best: Option<&Rule> = None;
    for rule in rules {
        let k = &rule.key;
        let direction = if packet.ingress {
            Direction::Ingress
        } else {
            Direction::Egress
        };
        if k.identity != identity || k.direction != direction {
            continue;
        }
        let prefix = model_prefix(k);
        if prefix >= 48 && k.proto != packet.proto {
            continue;
        }
        let port_bits = prefix.saturating_sub(48);
        if port_bits > 0 {
            let mask = u16::MAX << (16 - port_bits);
            if packet.dport & mask != k.port & mask {
                continue;
            }
        }
        if best.is_none_or(|b| model_prefix(&b.key) <= prefix) {
            best = Some(rule);
        }
    }
    best
}

/// docs/semantics.md §5.4 steps 3-5.
fn model(rules: &[Rule], packet: &Packet) -> (Verdict, u32) {
    let identity = if packet.v6 {
        PEERS6[packet.peer].1
    } else {
        PEERS[packet.peer].1
    };
    let l3 = lpm(rules, identity, packet);
    let (chosen, other) = match l3 {
        Some(l3) if l3.entry.precedence == u32::MAX => (l3, None),
        _ => {
            let l4 = lpm(rules, 0, packet);
            match (l3, l4) {
                (None, None) => return (Verdict::DeniedByDefault, 0),
                (None, Some(l4)) => (l4, None),
                (Some(l3), None) => (l3, None),
                (Some(l3), Some(l4)) => {
                    let lpm_len = |r: &Rule| model_prefix(&r.key) - 40;
                    if l4.entry.precedence > l3.entry.precedence
                        || (l4.entry.precedence == l3.entry.precedence && lpm_len(l4) > lpm_len(l3))
                    {
                        (l4, Some(l3))
                    } else {
                        (l3, Some(l4))
                    }
                }
            }
        }
    };
    if chosen.entry.deny {
        return (Verdict::DeniedByRule, 0);
    }
    let mut auth = chosen.entry.auth_type;
    if let Some(other) = other
        && other.entry.precedence == chosen.entry.precedence
        && !chosen.entry.explicit_auth
        && other.entry.auth_type > auth
    {
        auth = other.entry.auth_type;
    }
    if auth != 0 {
        return (Verdict::DeniedAuth, 0);
    }
    if chosen.entry.proxy_port != 0 {
        return (Verdict::Redirected, redirect_mark(chosen.entry.proxy_port));
    }
    (Verdict::AllowedNew, 0)
}

#[test]
fn datapath_decides_like_the_model() {
    if !require("policy differential test", &["gcc"]) {
        return;
    }
    let dir = scratch("differential");
    let loader = build_libbpf_loader(&dir);
    let object = dir.join("porin.bpf.o");
    std::fs::write(
        &object,
        porin_ebpf::emit(&porin_ebpf::ObjectConfig::default()).unwrap(),
    )
    .unwrap();
    let script_path = dir.join("case.script");
    let ep = Ipv4Addr::new(10, 1, 0, 5);
    let ep6: std::net::Ipv6Addr = "fd00:9::5".parse().unwrap();

    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        prop::collection::vec(rule(), 1..14),
        prop::collection::vec(packet(), 1..24),
    );
    let result = runner.run(&strategy, |(rules, packets)| {
        // Later rules replace earlier ones with the same trie key.
        let mut effective: Vec<Rule> = Vec::new();
        for rule in &rules {
            let key = rule.datapath_key();
            effective.retain(|r| r.datapath_key() != key);
            effective.push(rule.clone());
        }
        let mut s = Script::default();
        for (peer, identity) in PEERS.iter().take(2) {
            s.update(v4_update(32, *peer, *identity));
        }
        for (peer, identity) in PEERS6.iter().take(2) {
            s.update(v6_update(64, peer.parse().unwrap(), *identity));
        }
        for rule in &rules {
            s.update(rule.update());
        }
        for (i, p) in packets.iter().enumerate() {
            let (verdict, mark) = model(&effective, p);
            let sport = 20000 + i as u16; // a new flow each time: no conntrack effects
            let l4 = if p.proto == 6 {
                tcp(sport, p.dport)
            } else {
                udp(sport, p.dport)
            };
            let peer6 = || PEERS6[p.peer].0.parse().unwrap();
            let frame = match (p.v6, p.ingress) {
                (false, false) => eth(ETH_IPV4, &ipv4(ep, PEERS[p.peer].0, p.proto, 0, &l4)),
                (false, true) => eth(ETH_IPV4, &ipv4(PEERS[p.peer].0, ep, p.proto, 0, &l4)),
                (true, false) => eth(ETH_IPV6, &ipv6(ep6, peer6(), p.proto, 64, &l4)),
                (true, true) => eth(ETH_IPV6, &ipv6(peer6(), ep6, p.proto, 64, &l4)),
            };
            let program = if p.ingress {
                "porin_to_endpoint"
            } else {
                "porin_from_endpoint"
            };
            s.run(program, frame, verdict, mark, &format!("{p:?}"));
        }
        std::fs::write(&script_path, s.finish()).unwrap();
        let (ok, log) = run(Command::new(&loader).arg(&object).arg(&script_path));
        prop_assert!(ok, "kernel and model disagree\nrules: {rules:#?}\n{log}");
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    result.unwrap();
}
