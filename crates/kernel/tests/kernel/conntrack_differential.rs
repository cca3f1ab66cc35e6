//! Differential test of conntrack against a model of DATAPATH.md §2.4
//! (Cilium `bpf_lxc.c`: only replies skip policy): random packet sequences
//! in both directions between one endpoint and two peers (TCP, UDP, ICMP
//! echo request/reply) under a random exact-port policy with allows,
//! redirects and denies. The model keeps the set of opened flows; the kernel
//! must agree on every return code, mark and counter.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::support;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::Command;

use porin_ebpf::maps::{Direction, MapUpdate, PolicySlot, Verdict, redirect_mark};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use support::*;

const EP: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const PEERS: [(Ipv4Addr, u32); 2] = [
    (Ipv4Addr::new(10, 0, 0, 1), 1000),
    (Ipv4Addr::new(10, 0, 1, 1), 2000),
];
const LOCAL_PORTS: [u16; 2] = [1000, 1001];
const REMOTE_PORTS: [u16; 2] = [53, 80];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Tcp,
    Udp,
    EchoRequest,
    EchoReply,
}

#[derive(Clone, Debug)]
struct Packet {
    /// Entering the endpoint (from the peer) instead of leaving it.
    ingress: bool,
    peer: usize,
    kind: Kind,
    local_port: u16,
    remote_port: u16,
}

/// `(identity, ingress, proto, port)` → (deny, proxy port). Port 0 is a
/// proto-only entry.
type Policy = BTreeMap<(u32, bool, u8, u16), (bool, u16)>;

fn policy() -> impl Strategy<Value = Policy> {
    let key = (
        prop::sample::select(vec![1000u32, 2000]),
        any::<bool>(),
        prop::sample::select(vec![
            (6u8, 53u16),
            (6, 80),
            (17, 53),
            (17, 80),
            (1, 8),
            (1, 0),
        ]),
    );
    let value = prop_oneof![
        Just((false, 0u16)),
        Just((false, 15001u16)),
        Just((true, 0u16))
    ];
    prop::collection::btree_map(key, value, 0..10).prop_map(|m| {
        m.into_iter()
            .map(|((id, ingress, (proto, port)), v)| ((id, ingress, proto, port), v))
            .collect()
    })
}

fn packet() -> impl Strategy<Value = Packet> {
    (
        any::<bool>(),
        0..PEERS.len(),
        prop::sample::select(vec![
            Kind::Tcp,
            Kind::Udp,
            Kind::EchoRequest,
            Kind::EchoReply,
        ]),
        prop::sample::select(LOCAL_PORTS.to_vec()),
        prop::sample::select(REMOTE_PORTS.to_vec()),
    )
        .prop_map(|(ingress, peer, kind, local_port, remote_port)| Packet {
            ingress,
            peer,
            kind,
            local_port,
            remote_port,
        })
}

/// The flow tuple as the packet carries it: (src, dst, sport, dport, proto).
type Tuple = (Ipv4Addr, Ipv4Addr, u16, u16, u8);

impl Packet {
    fn proto(&self) -> u8 {
        match self.kind {
            Kind::Tcp => 6,
            Kind::Udp => 17,
            Kind::EchoRequest | Kind::EchoReply => 1,
        }
    }

    fn tuple(&self) -> Tuple {
        let peer = PEERS[self.peer].0;
        let (src, dst) = if self.ingress { (peer, EP) } else { (EP, peer) };
        match self.kind {
            // Echo: both ports are the identifier (DATAPATH.md §2.4).
            Kind::EchoRequest | Kind::EchoReply => (src, dst, self.local_port, self.local_port, 1),
            _ => {
                let (sport, dport) = if self.ingress {
                    (self.remote_port, self.local_port)
                } else {
                    (self.local_port, self.remote_port)
                };
                (src, dst, sport, dport, self.proto())
            }
        }
    }

    /// The policy "port": the destination port, or the ICMP type.
    fn policy_port(&self) -> u16 {
        match self.kind {
            Kind::EchoRequest => 8,
            Kind::EchoReply => 0,
            _ => self.tuple().3,
        }
    }

    fn frame(&self) -> Vec<u8> {
        let (src, dst, sport, dport, proto) = self.tuple();
        let l4 = match self.kind {
            Kind::Tcp => tcp(sport, dport),
            Kind::Udp => udp(sport, dport),
            Kind::EchoRequest => icmp(8, 0, self.local_port),
            Kind::EchoReply => icmp(0, 0, self.local_port),
        };
        eth(ETH_IPV4, &ipv4(src, dst, proto, 0, &l4))
    }
}

#[derive(Default)]
struct Model {
    /// Opened flows: (tuple, ingress) → proxy port.
    flows: BTreeMap<(Tuple, bool), u16>,
}

impl Model {
    fn decide(&mut self, policy: &Policy, p: &Packet) -> (Verdict, u32) {
        let (src, dst, sport, dport, proto) = p.tuple();
        let reversed = ((dst, src, dport, sport, proto), !p.ingress);
        if let Some(&proxy) = self.flows.get(&reversed) {
            let mark = if proxy != 0 { redirect_mark(proxy) } else { 0 };
            return (Verdict::AllowedReply, mark);
        }
        let identity = PEERS[p.peer].1;
        // Port 0 is a proto-only key (all ports / ICMP types); the exact key,
        // being longer, wins in the trie.
        let exact = policy.get(&(identity, p.ingress, proto, p.policy_port()));
        match exact.or_else(|| policy.get(&(identity, p.ingress, proto, 0))) {
            None => (Verdict::DeniedByDefault, 0),
            Some((true, _)) => (Verdict::DeniedByRule, 0),
            Some((false, proxy)) => {
                let existed = self.flows.insert((p.tuple(), p.ingress), *proxy).is_some();
                if *proxy != 0 {
                    (Verdict::Redirected, redirect_mark(*proxy))
                } else if existed {
                    (Verdict::AllowedEstablished, 0)
                } else {
                    (Verdict::AllowedNew, 0)
                }
            }
        }
    }
}

#[test]
fn conntrack_agrees_with_the_model() {
    if !require("conntrack differential test", &["gcc"]) {
        return;
    }
    let dir = scratch("ct-differential");
    let loader = build_libbpf_loader(&dir);
    let object = dir.join("porin.bpf.o");
    std::fs::write(
        &object,
        porin_ebpf::emit(&porin_ebpf::ObjectConfig::default()).unwrap(),
    )
    .unwrap();
    let script_path = dir.join("case.script");
    let mut runner = TestRunner::new(Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (policy(), prop::collection::vec(packet(), 1..40));
    let result = runner.run(&strategy, |(policy, packets)| {
        let mut s = Script::default();
        for (addr, identity) in PEERS {
            s.update(v4_update(32, addr, identity));
        }
        for (&(identity, ingress, proto, port), &(deny, proxy_port)) in &policy {
            let direction = if ingress {
                Direction::Ingress
            } else {
                Direction::Egress
            };
            let key = policy_key(
                identity,
                direction,
                proto,
                port,
                if port == 0 { 0 } else { 16 },
            );
            let precedence = if deny {
                u32::MAX
            } else if proxy_port != 0 {
                0xFFFF_FF9A
            } else {
                0xFFFF_FF01
            };
            let entry = policy_entry(precedence, proxy_port, 0, false);
            s.update(MapUpdate::policy(PolicySlot::A, &key, &entry));
        }
        let mut model = Model::default();
        for p in &packets {
            let (verdict, mark) = model.decide(&policy, p);
            let program = if p.ingress {
                "porin_to_endpoint"
            } else {
                "porin_from_endpoint"
            };
            s.run(program, p.frame(), verdict, mark, &format!("{p:?}"));
        }
        std::fs::write(&script_path, s.finish()).unwrap();
        let (ok, log) = run(Command::new(&loader).arg(&object).arg(&script_path));
        prop_assert!(ok, "kernel and model disagree\npolicy: {policy:?}\n{log}");
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
    result.unwrap();
}
