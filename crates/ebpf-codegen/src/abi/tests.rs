//! The ABI's byte encodings, hand-computed from `DATAPATH.md` §2 and
//! Cilium's `bpf/lib/policy.h` structs.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use super::*;

#[test]
fn every_struct_has_its_documented_size() {
    let sizes: Vec<(&str, usize)> = ALL
        .iter()
        .map(|layout| match layout {
            Layout::Struct { name, size, .. } => (*name, *size),
            Layout::U32 => ("u32", 4),
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
            CtKey::OFF_SADDR,
            CtKey::OFF_DADDR,
            CtKey::OFF_SPORT,
            CtKey::OFF_DPORT,
            CtKey::OFF_PROTO,
            CtKey::OFF_FAMILY,
            CtKey::OFF_DIRECTION,
            CtKey::OFF_PAD,
        ],
        [0, 16, 32, 34, 36, 37, 38, 39]
    );
    assert_eq!(
        [
            CtValue::OFF_LAST_SEEN,
            CtValue::OFF_PROXY_PORT,
            CtValue::OFF_RESERVED
        ],
        [0, 8, 10]
    );
    assert_eq!([Counter::OFF_PACKETS, Counter::OFF_BYTES], [0, 8]);
    assert_eq!(
        [ConfigValue::OFF_ACTIVE_POLICY, ConfigValue::OFF_RESERVED],
        [0, 4]
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
        last_seen_ns: 0x0102,
        proxy_port: 15001,
        reserved: [0; 6],
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
        saddr: [1; CT_ADDR_LEN],
        daddr: [2; CT_ADDR_LEN],
        sport_be: 40000,
        dport_be: 80,
        proto: 6,
        family: CtKey::FAMILY_V6,
        direction: PolicyKey::EGRESS,
        pad: 0,
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
        reserved: 0,
    };
    assert_eq!(bad.slot(), Err(AbiError::BadSlot(7)));
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
