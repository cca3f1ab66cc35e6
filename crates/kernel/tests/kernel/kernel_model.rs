//! Property test: for random policy maps and random packets, the kernel's verdict equals a
//! plain-Rust model of DATAPATH.md §3 (Cilium `__policy_can_access` + `__policy_check`,
//! docs/semantics.md §5.4): LPM lookup with the exact identity, then with identity 0, precedence and
//! prefix-length tie-break, deny, auth (with the equal-precedence inheritance) and redirect.
//!
//! The universe of identities, protocols and ports is small on purpose so that random entries
//! overlap and the tie-break rules are exercised.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::kernel_support;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use kernel_support::{
    ALLOW, DENY, HTTP_REDIRECT, kernel_available, policy_entry, policy_key, porin_object,
};
use porin_ebpf::abi::{PolicyEntry, PolicyKey};
use porin_kernel::packet::Packet;
use porin_kernel::{Counter, Datapath, Direction};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const POD: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
/// Peers and their identities (ipcache below).
const PEERS: [(Ipv4Addr, u32); 3] = [
    (Ipv4Addr::new(10, 0, 2, 20), 1000),
    (Ipv4Addr::new(10, 0, 3, 30), 2000),
    (Ipv4Addr::new(8, 8, 8, 8), 9),
];
const IDENTITIES: [u32; 4] = [0, 1000, 2000, 9];
const PROTOS: [u8; 3] = [0, 6, 17];
const PORTS: [u16; 6] = [0, 79, 80, 81, 8080, 8087];
/// Another allow level between plain allow and the redirect, to vary precedences.
const ALLOW_HIGHER: u32 = 0xFFFF_FF02;

/// Policy key and value bytes (`porin_policy_key`, `porin_policy_entry`).
type KeyBytes = [u8; PolicyKey::SIZE];
type ValueBytes = [u8; PolicyEntry::SIZE];

/// One random policy entry: key fields plus the entry's precedence, proxy port and auth byte.
#[derive(Debug, Clone)]
struct RandomEntry {
    identity: u32,
    direction: u8,
    proto: u8,
    port: u16,
    /// `None` = L3-only (forces proto 0), `Some(n)` = proto + n port bits.
    port_prefix: Option<u8>,
    precedence: u32,
    proxy_port: u16,
    auth: u8,
}

impl RandomEntry {
    fn bytes(&self) -> (KeyBytes, ValueBytes) {
        let key = policy_key(
            self.identity,
            self.direction,
            self.proto,
            self.port,
            self.port_prefix,
        );
        let deny = self.precedence == DENY;
        let proxy = if deny { 0 } else { self.proxy_port };
        let auth = if deny { 0 } else { self.auth };
        let value = policy_entry(&key, self.precedence, proxy, auth);
        (key.to_bytes(), value.to_bytes())
    }
}

fn entry_strategy() -> impl Strategy<Value = RandomEntry> {
    (
        proptest::sample::select(IDENTITIES.to_vec()),
        0u8..2,
        proptest::sample::select(PROTOS.to_vec()),
        proptest::sample::select(PORTS.to_vec()),
        proptest::sample::select(vec![0u8, 13, 15, 16]),
        proptest::sample::select(vec![DENY, ALLOW, ALLOW_HIGHER, HTTP_REDIRECT]),
        proptest::sample::select(vec![0u8, 0u8, 0u8, 0x01, 0x81, 0x02]),
    )
        .prop_map(
            |(identity, direction, proto, port, bits, precedence, auth)| {
                // Keys as the compiler writes them: proto 0 is L3-only; port 0 is proto-only.
                let port_prefix = match (proto, port) {
                    (0, _) => None,
                    (_, 0) => Some(0),
                    _ => Some(bits),
                };
                let port = match port_prefix {
                    None | Some(0) => 0,
                    Some(n) => port & (0xffffu16 << (16 - n)),
                };
                RandomEntry {
                    identity,
                    direction,
                    proto,
                    port,
                    port_prefix,
                    precedence,
                    proxy_port: if precedence == HTTP_REDIRECT {
                        15001
                    } else {
                        0
                    },
                    auth,
                }
            },
        )
}

/// A decoded map value.
#[derive(Debug, Clone, Copy)]
struct Value {
    proxy_port: u16,
    deny: bool,
    lpm: u8,
    auth: u8,
    precedence: u32,
}

fn decode(value: &ValueBytes) -> Value {
    Value {
        proxy_port: u16::from_be_bytes([value[0], value[1]]),
        deny: value[2] & 1 != 0,
        lpm: value[2] >> 3,
        auth: value[3],
        precedence: u32::from_le_bytes([value[4], value[5], value[6], value[7]]),
    }
}

/// LPM lookup of `{64, identity, direction, proto, dport}` over the map contents: the matching
/// key with the longest prefix (prefix bits cover identity, direction, proto, port in order).
fn lpm_lookup(
    map: &BTreeMap<KeyBytes, ValueBytes>,
    identity: u32,
    direction: u8,
    proto: u8,
    dport: u16,
) -> Option<Value> {
    let mut lookup = [0u8; 8];
    lookup[0..4].copy_from_slice(&identity.to_le_bytes());
    lookup[4] = direction;
    lookup[5] = proto;
    lookup[6..8].copy_from_slice(&dport.to_be_bytes());
    let lookup = u64::from_be_bytes(lookup);
    map.iter()
        .filter_map(|(key, value)| {
            let prefixlen = u32::from_le_bytes([key[0], key[1], key[2], key[3]]);
            let data = u64::from_be_bytes(key[4..12].try_into().unwrap());
            let mask = if prefixlen == 0 {
                0
            } else {
                u64::MAX << (64 - prefixlen)
            };
            (data & mask == lookup & mask).then_some((prefixlen, *value))
        })
        .max_by_key(|(prefixlen, _)| *prefixlen)
        .map(|(_, value)| decode(&value))
}

/// DATAPATH.md §3 steps 2-6: the counter the packet must move (no conntrack involved).
fn model(
    map: &BTreeMap<KeyBytes, ValueBytes>,
    identity: u32,
    direction: u8,
    proto: u8,
    dport: u16,
) -> (Counter, Option<u16>) {
    let l3 = lpm_lookup(map, identity, direction, proto, dport);
    let (chosen, other) = match l3 {
        Some(l3) if l3.precedence == DENY => (l3, None),
        _ => {
            let l4 = lpm_lookup(map, 0, direction, proto, dport);
            match (l3, l4) {
                (None, None) => return (Counter::DeniedByDefault, None),
                (None, Some(l4)) => (l4, None),
                (Some(l3), None) => (l3, None),
                (Some(l3), Some(l4)) => {
                    if l4.precedence > l3.precedence
                        || (l4.precedence == l3.precedence && l4.lpm > l3.lpm)
                    {
                        (l4, Some(l3))
                    } else {
                        (l3, Some(l4))
                    }
                }
            }
        }
    };
    if chosen.deny {
        return (Counter::DeniedByRule, None);
    }
    let mut auth = chosen.auth & 0x7f;
    if let Some(other) = other
        && other.precedence == chosen.precedence
        && chosen.auth & 0x80 == 0
        && other.auth & 0x7f > auth
    {
        auth = other.auth & 0x7f;
    }
    if auth != 0 {
        return (Counter::DeniedAuth, None);
    }
    if chosen.proxy_port != 0 {
        (Counter::Redirected, Some(chosen.proxy_port))
    } else {
        (Counter::AllowedNew, None)
    }
}

#[test]
fn kernel_verdicts_equal_the_policy_model() {
    if !kernel_available("kernel_verdicts_equal_the_policy_model") {
        return;
    }
    let dp = Datapath::load(&porin_object()).unwrap();
    let ipcache: Vec<_> = PEERS
        .iter()
        .map(|(addr, id)| kernel_support::ipcache4(*addr, 32, *id))
        .collect();
    dp.install_ipcache(&ipcache, &[]).unwrap();
    let active = dp.active_slot().unwrap();
    let policy_map = dp.object().map(active.map_name()).unwrap();

    let mut runner = TestRunner::new(Config {
        cases: 200,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        proptest::collection::vec(entry_strategy(), 0..12),
        proptest::collection::vec(
            (
                0usize..3,
                0u8..2,
                proptest::sample::select(vec![6u8, 17]),
                proptest::sample::select(PORTS.to_vec()),
            ),
            1..12,
        ),
    );
    runner
        .run(&strategy, |(entries, packets)| {
            // Tests run sequentially on this datapath, so the active map can be rewritten in
            // place here (a live agent would use the A/B flip instead).
            policy_map.clear().unwrap();
            let mut contents = BTreeMap::new();
            for entry in &entries {
                let (key, value) = entry.bytes();
                policy_map.update(&key, &value).unwrap();
                contents.insert(key, value);
            }
            for (peer, direction, proto, dport) in packets {
                let (addr, identity) = PEERS[peer];
                let (frame, program) = if direction == 0 {
                    let packet = if proto == 6 {
                        Packet::tcp4(addr, 40000, POD, dport)
                    } else {
                        Packet::udp4(addr, 40000, POD, dport)
                    };
                    (packet.build(), Direction::ToEndpoint)
                } else {
                    let packet = if proto == 6 {
                        Packet::tcp4(POD, 40000, addr, dport)
                    } else {
                        Packet::udp4(POD, 40000, addr, dport)
                    };
                    (packet.build(), Direction::FromEndpoint)
                };
                dp.reset_conntrack().unwrap();
                let got = dp.decide(program, &frame).unwrap();
                let want = model(&contents, identity, direction, proto, dport);
                if (got.counter, got.proxy_port) != want {
                    return Err(TestCaseError::fail(format!(
                        "peer identity {identity}, direction {direction}, proto {proto}, dport \
                         {dport}: kernel {:?}/{:?}, model {want:?}; entries {entries:#?}",
                        got.counter, got.proxy_port
                    )));
                }
            }
            Ok(())
        })
        .unwrap();
}
