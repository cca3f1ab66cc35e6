//! Map contents an agent writes: each layout of DATAPATH.md §2, byte by
//! byte, with Cilium's key/entry rules (docs/semantics.md §5.1/§5.2,
//! `pkg/maps/policymap/policymap.go NewKeyFromPolicyKey/NewEntryFromPolicyEntry`),
//! and the contract document kept in sync with the code.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::net::{Ipv4Addr, Ipv6Addr};

use porin_ebpf::maps::{
    self, Direction, Ipcache4Key, Ipcache6Key, IpcacheValue, MapContentError, MapUpdate,
    PolicyEntry, PolicyKey, PolicySlot, Verdict, names, policy_replacement, proxy_port_of_mark,
    redirect_mark, updates_to_json,
};

fn key(
    identity: u32,
    direction: Direction,
    proto: u8,
    port: u16,
    port_prefix_len: u8,
) -> PolicyKey {
    PolicyKey {
        identity,
        direction,
        proto,
        port,
        port_prefix_len,
    }
}

#[test]
fn ipcache_keys_and_values() {
    let k = Ipcache4Key {
        prefix_len: 24,
        addr: Ipv4Addr::new(10, 0, 0, 0),
    };
    assert_eq!(k.to_bytes().unwrap(), [24, 0, 0, 0, 10, 0, 0, 0]);
    let k6 = Ipcache6Key {
        prefix_len: 64,
        addr: "fd00:1::".parse::<Ipv6Addr>().unwrap(),
    };
    let b = k6.to_bytes().unwrap();
    assert_eq!(&b[0..4], &[64, 0, 0, 0]);
    assert_eq!(&b[4..8], &[0xfd, 0, 0, 1]);
    assert_eq!(
        IpcacheValue { identity: 1000 }.to_bytes(),
        [0xe8, 3, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        Ipcache4Key {
            prefix_len: 33,
            addr: Ipv4Addr::UNSPECIFIED
        }
        .to_bytes(),
        Err(MapContentError::PrefixTooLong {
            prefix_len: 33,
            max: 32
        })
    );
    assert!(
        Ipcache6Key {
            prefix_len: 129,
            addr: Ipv6Addr::UNSPECIFIED
        }
        .to_bytes()
        .is_err()
    );
}

#[test]
fn policy_key_prefix_lengths_follow_cilium_except_port_zero_ranges() {
    // docs/semantics.md §5.1: 40 L3-only, 48 proto only, 48+n, 64 exact.
    assert_eq!(key(7, Direction::Ingress, 0, 0, 0).prefixlen(), Ok(40));
    assert_eq!(key(7, Direction::Ingress, 6, 0, 0).prefixlen(), Ok(48));
    assert_eq!(key(7, Direction::Ingress, 17, 7776, 15).prefixlen(), Ok(63));
    assert_eq!(key(7, Direction::Ingress, 6, 80, 16).prefixlen(), Ok(64));
    // pkg/maps/policymap/policymap.go NewKeyFromPolicyKey adds port bits
    // only for a non-zero port (docs/semantics.md §4.5 quirk), so Cilium writes
    // port 0/6 as protocol-only (48) and allows every port. porin fails
    // closed and keeps the range it means (PC012): 48 + 6.
    assert_eq!(key(7, Direction::Ingress, 6, 0, 6).prefixlen(), Ok(54));
}

/// There is one policy-key encoding, the compiler's: `PolicyKey` bytes are
/// `porin_compiler::mapstate::Key::to_bytes` for every valid field set,
/// including port-0 ranges.
#[test]
fn policy_key_bytes_are_the_compilers() {
    use porin_compiler::identity::Identity;
    use porin_compiler::mapstate::{Direction as KeyDirection, Key};
    for (direction, key_direction) in [
        (Direction::Ingress, KeyDirection::Ingress),
        (Direction::Egress, KeyDirection::Egress),
    ] {
        for (proto, port, plen) in [
            (0, 0, 0),
            (6, 0, 0),
            (6, 0, 6),
            (17, 0, 15),
            (17, 7776, 15),
            (6, 80, 16),
            (1, 8, 16),
        ] {
            let ours = key(1000, direction, proto, port, plen).to_bytes().unwrap();
            let compilers = Key::new(
                key_direction,
                Identity::new(1000).unwrap(),
                proto,
                port,
                plen,
            )
            .unwrap()
            .to_bytes();
            assert_eq!(ours, compilers, "{proto}/{port}/{plen}");
        }
    }
}

#[test]
fn policy_key_bytes() {
    let b = key(1000, Direction::Egress, 6, 8080, 16)
        .to_bytes()
        .unwrap();
    assert_eq!(b, [64, 0, 0, 0, 0xe8, 3, 0, 0, 1, 6, 0x1f, 0x90]);
    let l3 = key(2000, Direction::Ingress, 0, 0, 0).to_bytes().unwrap();
    assert_eq!(l3, [40, 0, 0, 0, 0xd0, 7, 0, 0, 0, 0, 0, 0]);
    // ICMP type 8 is the "port": bytes [0, 8].
    let icmp = key(0, Direction::Egress, 1, 8, 16).to_bytes().unwrap();
    assert_eq!(&icmp[10..12], &[0, 8]);
}

#[test]
fn invalid_policy_keys_are_typed_errors() {
    assert_eq!(
        key(1, Direction::Ingress, 0, 80, 16).to_bytes(),
        Err(MapContentError::PortWithoutProtocol {
            port: 80,
            port_prefix_len: 16
        })
    );
    assert_eq!(
        key(1, Direction::Ingress, 6, 80, 17).to_bytes(),
        Err(MapContentError::PortPrefixTooLong(17))
    );
    // 7777 has its low bit set; a /15 entry would silently widen it.
    assert_eq!(
        key(1, Direction::Ingress, 17, 7777, 15).to_bytes(),
        Err(MapContentError::PortNotMasked {
            port: 7777,
            port_prefix_len: 15
        })
    );
}

#[test]
fn policy_entry_bytes() {
    let redirect = PolicyEntry {
        proxy_port: 15001,
        deny: false,
        auth_type: 0,
        explicit_auth: false,
        precedence: 0xFFFF_FF9A,
        cookie: 7,
    };
    assert_eq!(
        redirect.to_bytes(64).unwrap(),
        [0x3a, 0x99, 24 << 3, 0, 0x9a, 0xff, 0xff, 0xff, 7, 0, 0, 0]
    );
    let deny = PolicyEntry {
        proxy_port: 0,
        deny: true,
        auth_type: 0,
        explicit_auth: false,
        precedence: 0xFFFF_FFFF,
        cookie: 0,
    };
    assert_eq!(
        deny.to_bytes(40).unwrap(),
        [0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]
    );
    let auth = PolicyEntry {
        proxy_port: 0,
        deny: false,
        auth_type: 1,
        explicit_auth: true,
        precedence: 0xFFFF_FF01,
        cookie: 0,
    };
    let b = auth.to_bytes(48).unwrap();
    assert_eq!((b[2], b[3]), (8 << 3, 0x81));
    assert_eq!(deny.to_bytes(39), Err(MapContentError::BadPolicyPrefix(39)));
    assert_eq!(deny.to_bytes(65), Err(MapContentError::BadPolicyPrefix(65)));
}

#[test]
fn raw_policy_bytes_are_checked() {
    let k = key(1, Direction::Egress, 6, 80, 16).to_bytes().unwrap();
    let mut v = PolicyEntry {
        proxy_port: 0,
        deny: false,
        auth_type: 0,
        explicit_auth: false,
        precedence: 0xFFFF_FF01,
        cookie: 0,
    }
    .to_bytes(64)
    .unwrap();
    let update = MapUpdate::policy_raw(PolicySlot::B, &k, &v).unwrap();
    assert_eq!(update.map, names::POLICY_B);
    v[2] = 8 << 3; // claims prefix 48 for a /64 key
    assert_eq!(
        MapUpdate::policy_raw(PolicySlot::A, &k, &v),
        Err(MapContentError::PrefixMismatch {
            entry: 8,
            key_prefixlen: 64
        })
    );
    assert!(matches!(
        MapUpdate::policy_raw(PolicySlot::A, &k[..11], &v),
        Err(MapContentError::Length {
            expected: 12,
            got: 11,
            ..
        })
    ));
}

#[test]
fn replacement_fills_the_inactive_slot_then_flips() {
    let entry = PolicyEntry {
        proxy_port: 0,
        deny: false,
        auth_type: 0,
        explicit_auth: false,
        precedence: 0xFFFF_FF01,
        cookie: 0,
    };
    let updates = policy_replacement(
        PolicySlot::A,
        &[(key(1, Direction::Egress, 6, 80, 16), entry)],
    )
    .unwrap();
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0].map, names::POLICY_B);
    assert_eq!(updates[1].map, names::CONFIG);
    assert_eq!(updates[1].key, vec![0, 0, 0, 0]);
    assert_eq!(updates[1].value, vec![1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(MapUpdate::activate(PolicySlot::A).value, vec![0; 8]);
}

#[test]
fn json_and_bpftool_forms() {
    let update = MapUpdate::ipcache4(
        Ipcache4Key {
            prefix_len: 24,
            addr: Ipv4Addr::new(10, 0, 0, 0),
        },
        IpcacheValue { identity: 1000 },
    )
    .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&updates_to_json(std::slice::from_ref(&update)).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!([{"map": "porin_ipcache4", "key": "18 00 00 00 0a 00 00 00", "value": "e8 03 00 00 00 00 00 00"}])
    );
    let args = update.bpftool_args("/sys/fs/bpf/tc/globals/porin_ipcache4");
    assert_eq!(
        args.join(" "),
        "map update pinned /sys/fs/bpf/tc/globals/porin_ipcache4 key hex 18 00 00 00 0a 00 00 00 value hex e8 03 00 00 00 00 00 00"
    );
}

#[test]
fn redirect_mark_round_trips() {
    assert_eq!(redirect_mark(15001), 0x3a99_0200);
    assert_eq!(proxy_port_of_mark(redirect_mark(15001)), Some(15001));
    assert_eq!(proxy_port_of_mark(0), None);
    assert_eq!(proxy_port_of_mark(0x3a99_0201), None);
    for port in [1u16, 80, 15001, 65535] {
        assert_eq!(proxy_port_of_mark(redirect_mark(port)), Some(port));
    }
}

fn screaming(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// DATAPATH.md is the contract: its counter table must list exactly the
/// `Verdict` indices and names, and its map table every map.
#[test]
fn datapath_md_matches_the_code() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/DATAPATH.md")).unwrap();
    for verdict in Verdict::ALL {
        let name = screaming(&format!("{verdict:?}"));
        let row = format!("| {} | `{}` |", verdict.index(), name);
        assert!(doc.contains(&row), "DATAPATH.md lacks counter row {row:?}");
    }
    let indices: std::collections::BTreeSet<u32> = Verdict::ALL.iter().map(|v| v.index()).collect();
    assert_eq!(indices.len(), Verdict::ALL.len());
    assert!(indices.iter().all(|i| *i < maps::VERDICT_COUNTERS));
    for spec in porin_ebpf::ObjectConfig::default().maps() {
        let row = format!("| `{}` |", spec.name);
        assert!(
            doc.contains(&row),
            "DATAPATH.md lacks map row for {}",
            spec.name
        );
        assert!(
            spec.name.len() <= 15,
            "{} exceeds the kernel's 15 characters",
            spec.name
        );
    }
}

#[test]
fn verdict_pass_set_matches_the_return_codes() {
    let passing: Vec<Verdict> = Verdict::ALL.into_iter().filter(|v| v.passes()).collect();
    assert_eq!(
        passing,
        [
            Verdict::AllowedNew,
            Verdict::AllowedEstablished,
            Verdict::AllowedReply,
            Verdict::Redirected,
            Verdict::PassedNonIp,
            Verdict::AllowedIcmpFragNeeded,
            Verdict::PassedIpv6Ndp
        ]
    );
}

#[test]
fn per_cpu_counters_sum() {
    let mut values = Vec::new();
    for (packets, bytes) in [(1u64, 60u64), (2, 200), (0, 0)] {
        values.extend_from_slice(&packets.to_le_bytes());
        values.extend_from_slice(&bytes.to_le_bytes());
    }
    assert_eq!(
        maps::Counter::sum_per_cpu(&values),
        Ok(maps::Counter {
            packets: 3,
            bytes: 260
        })
    );
    assert!(maps::Counter::sum_per_cpu(&values[..20]).is_err());
    assert!(maps::Counter::sum_per_cpu(&[]).is_err());
}
