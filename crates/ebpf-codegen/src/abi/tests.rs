//! The ABI's byte encodings, hand-computed from `DATAPATH.md` §2 and
//! Cilium's `bpf/lib/policy.h` structs.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use porin_compiler::identity::Identity;
use porin_compiler::ipcache::Ipcache;
use porin_compiler::mapstate::{
    AuthRequirement, AuthType, Direction, Entry, Key, KeyError, ListenerPriority, MapState,
};
use porin_compiler::ports::{MaskedPort, port_range_to_masked_ports};

use super::*;

mod oracle;
mod properties;

fn id(n: u32) -> Identity {
    Identity::new(n).unwrap()
}

/// `ingressKey(identity, proto, port, prefixLen)` of Cilium's `mapstate_test.go`.
fn ik(identity: u32, proto: u8, port: u16, prefix: u8) -> Key {
    Key::ingress()
        .with_identity(id(identity))
        .with_port_proto_prefix(proto, port, prefix)
        .unwrap()
}

/// `egressKey(identity, proto, port, prefixLen)`.
fn ek(identity: u32, proto: u8, port: u16, prefix: u8) -> Key {
    Key::egress()
        .with_identity(id(identity))
        .with_port_proto_prefix(proto, port, prefix)
        .unwrap()
}

/// `ingressL3OnlyKey(identity)`.
fn il3(identity: u32) -> Key {
    Key::ingress().with_identity(id(identity))
}

fn http(proxy_port: u16) -> Entry {
    Entry::redirect(proxy_port, ListenerPriority::HTTP)
}

fn key_bytes(key: &Key) -> [u8; PolicyKey::SIZE] {
    PolicyKey::from_key(key).to_bytes()
}

fn entry_bytes(key: &Key, entry: &Entry) -> [u8; PolicyEntry::SIZE] {
    PolicyEntry::from_entry(key, entry).to_bytes()
}

fn decode_key(bytes: &[u8]) -> Result<Key, AbiError> {
    PolicyKey::from_bytes(bytes)?.to_key()
}

fn decode_entry(key: &Key, bytes: &[u8]) -> Result<Entry, AbiError> {
    PolicyEntry::from_bytes(bytes)?.to_entry(key)
}

#[test]
fn every_struct_has_its_documented_size() {
    let sizes: Vec<(&str, usize)> = ALL
        .iter()
        .map(|layout| match layout {
            Layout::Struct { name, size, .. } => (*name, *size),
            Layout::U32 => ("u32", 4),
            Layout::None => ("none", 0),
        })
        .collect();
    assert_eq!(
        sizes,
        [
            ("porin_ipcache4_key", 8),
            ("porin_ipcache6_key", 20),
            ("porin_ipcache_value", 8),
            ("porin_policy_key", 12),
            ("porin_policy_entry", 12),
            ("porin_config_value", 8),
            ("porin_ct_key", 40),
            ("porin_ct_value", 16),
            ("porin_counter", 16),
            ("porin_event", 40),
        ]
    );
}

#[test]
fn offsets_are_the_c_layout() {
    assert_eq!(
        [
            PolicyKey::OFF_PREFIXLEN,
            PolicyKey::OFF_IDENTITY,
            PolicyKey::OFF_DIRECTION,
            PolicyKey::OFF_PROTO,
            PolicyKey::OFF_DPORT,
            PolicyKey::OFF_ICMP_TYPE,
        ],
        [0, 4, 8, 9, 10, 11]
    );
    assert_eq!(
        [
            PolicyEntry::OFF_PROXY_PORT,
            PolicyEntry::OFF_FLAGS,
            PolicyEntry::OFF_AUTH,
            PolicyEntry::OFF_PRECEDENCE,
            PolicyEntry::OFF_COOKIE,
        ],
        [0, 2, 3, 4, 8]
    );
    assert_eq!(
        [
            CtKey::OFF_PEER_ADDR,
            CtKey::OFF_EP_ADDR,
            CtKey::OFF_PEER_PORT,
            CtKey::OFF_EP_PORT,
            CtKey::OFF_PROTO,
            CtKey::OFF_FAMILY,
            CtKey::OFF_PAD,
        ],
        [0, 16, 32, 34, 36, 37, 38]
    );
    assert_eq!(
        [
            CtValue::OFF_EXPIRES,
            CtValue::OFF_PROXY_PORT,
            CtValue::OFF_OPENED_BY,
            CtValue::OFF_TCP_STATE,
            CtValue::OFF_RESERVED
        ],
        [0, 8, 10, 11, 12]
    );
    assert_eq!([Counter::OFF_PACKETS, Counter::OFF_BYTES], [0, 8]);
    assert_eq!(
        [
            ConfigValue::OFF_ACTIVE_POLICY,
            ConfigValue::OFF_EVENTS,
            ConfigValue::OFF_PREFIX_FREE,
            ConfigValue::OFF_RESERVED
        ],
        [0, 4, 5, 6]
    );
    assert_eq!(
        [
            Event::OFF_TIMESTAMP,
            Event::OFF_IFINDEX,
            Event::OFF_IDENTITY,
            Event::OFF_PEER_ADDR,
            Event::OFF_DPORT,
            Event::OFF_DIRECTION,
            Event::OFF_VERDICT,
            Event::OFF_REASON,
            Event::OFF_PROTO,
            Event::OFF_FAMILY,
            Event::OFF_PAD
        ],
        [0, 8, 12, 16, 32, 34, 35, 36, 37, 38, 39]
    );
    assert_eq!([Ipcache6Key::OFF_PREFIXLEN, Ipcache6Key::OFF_ADDR], [0, 4]);
}

#[test]
fn each_field_is_written_in_its_byte_order() {
    let key = PolicyKey {
        prefixlen: 0x0102_0304,
        identity: 0x0506_0708,
        direction: 1,
        proto: 6,
        dport_be: 0x1f90,
    };
    assert_eq!(key.to_bytes(), [4, 3, 2, 1, 8, 7, 6, 5, 1, 6, 0x1f, 0x90]);
    let entry = PolicyEntry {
        proxy_port_be: 0x3a99,
        flags: 0xc1,
        auth: 0x81,
        precedence: 0xFFFF_FF9A,
        cookie: 7,
    };
    assert_eq!(
        entry.to_bytes(),
        [0x3a, 0x99, 0xc1, 0x81, 0x9a, 0xff, 0xff, 0xff, 7, 0, 0, 0]
    );
    let ct = CtValue {
        expires_ns: 0x0102,
        proxy_port: 15001,
        opened_by: PolicyKey::EGRESS,
        tcp_state: CtValue::TCP_SEEN_NON_SYN,
        reserved: [0; 4],
    };
    // The conntrack proxy port is host order, unlike the policy entry's.
    assert_eq!(ct.to_bytes()[8..10], [0x99, 0x3a]);
    assert_eq!(ct.to_bytes()[0..2], [0x02, 0x01]);
    let v6 = Ipcache6Key::new(64, "fd00:1::".parse().unwrap()).unwrap();
    assert_eq!(v6.to_bytes()[0..8], [64, 0, 0, 0, 0xfd, 0, 0, 1]);
}

#[test]
fn bytes_round_trip_and_lengths_are_checked() {
    let key = CtKey {
        peer_addr: [1; CT_ADDR_LEN],
        ep_addr: [2; CT_ADDR_LEN],
        peer_port_be: 40000,
        ep_port_be: 80,
        proto: 6,
        family: CtKey::FAMILY_V6,
        pad: [0; 2],
    };
    assert_eq!(CtKey::from_bytes(&key.to_bytes()), Ok(key));
    assert_eq!(
        CtKey::from_bytes(&key.to_bytes()[..39]),
        Err(AbiError::Length {
            what: "porin_ct_key",
            expected: 40,
            got: 39
        })
    );
    let counter = Counter {
        packets: 3,
        bytes: 260,
    };
    assert_eq!(Counter::from_bytes(&counter.to_bytes()), Ok(counter));
}

#[test]
fn per_cpu_counters_sum() {
    let mut values = Vec::new();
    for (packets, bytes) in [(1u64, 60u64), (2, 200), (0, 0)] {
        values.extend_from_slice(&Counter { packets, bytes }.to_bytes());
    }
    assert_eq!(
        Counter::sum_per_cpu(&values),
        Ok(Counter {
            packets: 3,
            bytes: 260
        })
    );
    assert!(Counter::sum_per_cpu(&values[..20]).is_err());
    assert!(Counter::sum_per_cpu(&[]).is_err());
}

#[test]
fn config_values_name_the_slots() {
    use crate::maps::PolicySlot;
    assert_eq!(
        ConfigValue::for_slot(PolicySlot::B).to_bytes(),
        [1, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(ConfigValue::for_slot(PolicySlot::A).to_bytes(), [0; 8]);
    for slot in [PolicySlot::A, PolicySlot::B] {
        assert_eq!(ConfigValue::for_slot(slot).slot(), Ok(slot));
    }
    let bad = ConfigValue {
        active_policy: 7,
        ..ConfigValue::default()
    };
    assert_eq!(bad.slot(), Err(AbiError::BadSlot(7)));
    // Events: the zero value (the kernel's initial one, and what agents written before
    // events existed store) means drops only; bit 7 makes bits 0-1 explicit.
    assert_eq!(ConfigValue::default().emits(), (true, false));
    let explicit = |drops, allows| ConfigValue {
        events: ConfigValue::events_word(drops, allows),
        ..ConfigValue::default()
    };
    assert_eq!(explicit(false, false).emits(), (false, false));
    assert_eq!(explicit(false, true).emits(), (false, true));
    assert_eq!(explicit(true, true).to_bytes(), [0, 0, 0, 0, 0x83, 0, 0, 0]);
    let prefix_free_b = ConfigValue {
        prefix_free: 0b10,
        ..ConfigValue::for_slot(PolicySlot::B)
    };
    assert_eq!(prefix_free_b.to_bytes(), [1, 0, 0, 0, 0, 2, 0, 0]);
    assert_eq!(index_key(ConfigValue::KEY), [0, 0, 0, 0]);
}

#[test]
fn ipcache_prefixes_are_bounded() {
    use std::net::{Ipv4Addr, Ipv6Addr};
    assert_eq!(
        Ipcache4Key::new(24, Ipv4Addr::new(10, 0, 0, 0))
            .unwrap()
            .to_bytes(),
        [24, 0, 0, 0, 10, 0, 0, 0]
    );
    assert_eq!(
        Ipcache4Key::new(33, Ipv4Addr::UNSPECIFIED),
        Err(AbiError::PrefixTooLong {
            prefix_len: 33,
            max: 32
        })
    );
    assert!(Ipcache6Key::new(129, Ipv6Addr::UNSPECIFIED).is_err());
    assert_eq!(
        IpcacheValue::new(porin_compiler::identity::Identity::new(1000).unwrap()).to_bytes(),
        [0xe8, 3, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn field_types_read_as_the_document_writes_them() {
    let names: Vec<String> = PolicyKey::FIELDS.iter().map(Field::type_name).collect();
    assert_eq!(names, ["u32 LE", "u32 LE", "u8", "u8", "u16 BE"]);
    assert_eq!(CtKey::FIELDS[0].type_name(), "u8[16]");
    assert_eq!(CtValue::FIELDS[0].type_name(), "u64 LE");
}

// pkg/maps/policymap/policymap.go NewKeyFromPolicyKey / bpf/lib/policy.h
// struct policy_key, hand-computed (docs/semantics.md §5.1).
#[test]
fn key_bytes_hand_computed() {
    // L3-only: prefix 40, identity 256, ingress.
    assert_eq!(
        key_bytes(&il3(256)),
        [40, 0, 0, 0, 0x00, 0x01, 0, 0, 0, 0, 0, 0]
    );
    // Protocol only: prefix 48, local identity 0x01000005, egress TCP.
    let k = Key::egress()
        .with_identity(Identity::local(5).unwrap())
        .with_port_proto(6, 0)
        .unwrap();
    assert_eq!(key_bytes(&k), [48, 0, 0, 0, 5, 0, 0, 1, 1, 6, 0, 0]);
    // Port prefix: 64/10 (64-127) is prefix 48 + 10, port big-endian.
    assert_eq!(
        key_bytes(&ik(2, 6, 64, 10)),
        [58, 0, 0, 0, 2, 0, 0, 0, 0, 6, 0, 64]
    );
    // Exact: egress 1001 UDP/53 → 64.
    assert_eq!(
        key_bytes(&ek(1001, 17, 53, 16)),
        [64, 0, 0, 0, 0xE9, 3, 0, 0, 1, 17, 0, 53]
    );
    // Large port, big-endian: 8080 = 0x1F90.
    assert_eq!(key_bytes(&ik(0, 6, 8080, 16))[10..12], [0x1F, 0x90]);
    // ICMP type 8 is the "port": bytes [0, 8].
    assert_eq!(key_bytes(&ek(0, 1, 8, 16))[10..12], [0, 8]);
    // The lookup key of a packet is the exact one.
    assert_eq!(
        PolicyKey::lookup(Direction::Egress, 1001, 17, 53),
        PolicyKey::from_key(&ek(1001, 17, 53, 16))
    );
}

// Divergence from Cilium, docs/semantics.md §4.5 quirk / §10.1:
// pkg/maps/policymap/policymap.go NewKeyFromPolicyKey adds the port prefix
// only when DestPort != 0, so the masked range 0/6 (ports 0-1023, from
// `port: "0", endPort: 1023`) would become a proto-only key allowing every
// port. porin fails closed and keeps the prefix.
#[test]
fn port_zero_range_keeps_its_prefix_fail_closed_divergence_from_cilium() {
    let blocks = port_range_to_masked_ports(0, 1023);
    assert_eq!(blocks, vec![MaskedPort::from_prefix(0, 6)]);
    let key = Key::ingress()
        .with_identity(id(7))
        .with_masked_port(6, blocks[0])
        .unwrap();
    // Cilium would write prefixlen 48 here; porin writes 48 + 6.
    assert_eq!(key_bytes(&key), [54, 0, 0, 0, 7, 0, 0, 0, 0, 6, 0, 0]);
    assert_eq!(entry_bytes(&key, &Entry::allow())[2], (8 + 6) << 3);
    assert_eq!(decode_key(&key_bytes(&key)).unwrap(), key);
    // The protocol-only key Cilium would write decodes to a different key:
    // the two can never be confused.
    let cilium = [48, 0, 0, 0, 7, 0, 0, 0, 0, 6, 0, 0];
    assert_eq!(decode_key(&cilium).unwrap().port_prefix_len(), 0);
}

// struct policy_entry (docs/semantics.md §5.2), hand-computed.
#[test]
fn entry_bytes_hand_computed() {
    // Plain allow on an L3-only key: lpm_prefix_length 0.
    assert_eq!(
        entry_bytes(&il3(5), &Entry::allow()),
        [0, 0, 0, 0, 0x01, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]
    );
    // Deny on an exact key with a cookie: flags = deny | 24 << 3.
    assert_eq!(
        entry_bytes(&ek(9, 6, 443, 16), &Entry::deny().with_cookie(0x0102_0304)),
        [
            0, 0, 0xC1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x04, 0x03, 0x02, 0x01
        ]
    );
    // HTTP redirect to 15001 (0x3A99) on a 10-bit port prefix (lpm 18),
    // explicit SPIRE auth.
    let e = http(15001).with_auth(AuthRequirement::explicit(AuthType::SPIRE));
    assert_eq!(
        entry_bytes(&ik(0, 6, 64, 10), &e),
        [
            0x3A,
            0x99,
            18 << 3,
            0x81,
            0x9A,
            0xFF,
            0xFF,
            0xFF,
            0,
            0,
            0,
            0
        ]
    );
    // Derived auth: bit 7 clear.
    let derived = Entry::allow().with_auth(AuthRequirement::derived(AuthType::SPIRE));
    assert_eq!(entry_bytes(&il3(5), &derived)[3], 0x01);
    // Protocol-only key: lpm 8.
    assert_eq!(entry_bytes(&ik(0, 17, 0, 0), &Entry::allow())[2], 8 << 3);
    // A deny built by hand with a proxy port still encodes none.
    let bogus = Entry {
        proxy_port: 8080,
        auth: AuthRequirement::explicit(AuthType::SPIRE),
        ..Entry::deny()
    };
    assert_eq!(entry_bytes(&il3(5), &bogus)[0..4], [0, 0, 1, 0]);
}

#[test]
fn entry_bytes_are_validated_on_decode() {
    let key = ik(3, 6, 80, 16);
    let bytes = entry_bytes(&key, &http(15001));
    assert_eq!(decode_entry(&key, &bytes).unwrap(), http(15001));
    assert_eq!(
        decode_entry(&il3(3), &bytes),
        Err(AbiError::PrefixLengthMismatch { entry: 24, key: 0 })
    );
    let mut bad = bytes;
    bad[2] |= 1; // deny flag on an allow precedence
    assert!(matches!(
        decode_entry(&key, &bad),
        Err(AbiError::DenyFlagMismatch { .. })
    ));
    let mut bad = bytes;
    bad[2] |= 0b10; // reserved
    assert!(matches!(
        decode_entry(&key, &bad),
        Err(AbiError::ReservedFlags { .. })
    ));
    // A deny may not redirect.
    let mut bad = entry_bytes(&key, &Entry::deny());
    bad[1] = 80;
    assert_eq!(
        decode_entry(&key, &bad),
        Err(AbiError::DenyWithRedirectOrAuth)
    );
    assert!(matches!(
        decode_entry(&key, &bytes[..11]),
        Err(AbiError::Length {
            expected: 12,
            got: 11,
            ..
        })
    ));
}

#[test]
fn key_bytes_are_validated_on_decode() {
    assert!(matches!(decode_key(&[0; 11]), Err(AbiError::Length { .. })));
    // Prefix 44 is never written.
    assert_eq!(
        decode_key(&[44, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0]),
        Err(AbiError::InvalidPrefixLength { prefixlen: 44 })
    );
    // Port bits beyond a 48+10 prefix.
    assert_eq!(
        decode_key(&[58, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 65]),
        Err(AbiError::BitsBeyondPrefix { prefixlen: 58 })
    );
    // Protocol set on an L3-only key.
    assert_eq!(
        decode_key(&[40, 0, 0, 0, 1, 0, 0, 0, 0, 6, 0, 0]),
        Err(AbiError::BitsBeyondPrefix { prefixlen: 40 })
    );
    // Protocol 0 with a protocol prefix.
    assert!(matches!(
        decode_key(&[48, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]),
        Err(AbiError::Key(KeyError::PortWithoutProtocol { .. }))
    ));
    // Direction byte 2.
    assert_eq!(
        decode_key(&[40, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]),
        Err(AbiError::InvalidDirection { byte: 2 })
    );
    // Identity with an unknown scope.
    assert!(matches!(
        decode_key(&[40, 0, 0, 0, 1, 0, 0, 7, 0, 0, 0, 0]),
        Err(AbiError::Identity { .. })
    ));
}

#[test]
fn policy_pairs_are_in_key_order_and_decode() {
    let mut ms = MapState::new();
    for (k, e) in [
        (ik(2, 6, 80, 16), Entry::deny()),
        (il3(1), Entry::allow()),
        (ek(0, 17, 53, 16), http(1)),
    ] {
        ms.upsert(k, e).unwrap();
    }
    let decoded: Vec<(Key, Entry)> = policy_pairs(&ms)
        .iter()
        .map(|(k, v)| decode_policy_pair(&k.to_bytes(), &v.to_bytes()).unwrap())
        .collect();
    assert_eq!(
        decoded,
        vec![
            (il3(1), Entry::allow()),
            (ik(2, 6, 80, 16), Entry::deny()),
            (ek(0, 17, 53, 16), http(1)),
        ]
    );
}

#[test]
fn ipcache_encodings_are_exact() {
    let mut cache = Ipcache::new();
    cache.insert(
        "10.1.0.0/16".parse().unwrap(),
        Identity::local(0x0203).unwrap(),
    );
    cache.insert("2001:db8::/32".parse().unwrap(), id(300));
    let pairs = ipcache_pairs(&cache);
    let v4: Vec<_> = pairs
        .v4
        .iter()
        .map(|(k, v)| (k.to_bytes(), v.to_bytes()))
        .collect();
    assert_eq!(
        v4,
        vec![
            ([0, 0, 0, 0, 0, 0, 0, 0], [9, 0, 0, 0, 0, 0, 0, 0]),
            (
                [16, 0, 0, 0, 10, 1, 0, 0],
                [0x03, 0x02, 0x00, 0x01, 0, 0, 0, 0]
            ),
        ]
    );
    assert_eq!(pairs.v6.len(), 2);
    assert_eq!(pairs.v6[0].0.to_bytes(), [0_u8; 20]);
    assert_eq!(pairs.v6[0].1.to_bytes(), [10, 0, 0, 0, 0, 0, 0, 0]);
    let mut key = [0_u8; 20];
    key[0] = 32;
    key[4..8].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    assert_eq!(pairs.v6[1].0.to_bytes(), key);
    assert_eq!(pairs.v6[1].1.to_bytes(), [0x2c, 0x01, 0, 0, 0, 0, 0, 0]);
    assert_eq!(pairs.v6[1].1.to_identity(), Ok(id(300)));
}
