//! Property tests of the policy encoding: keys and entries round-trip, and
//! the compiler's reference lookup (`MapState::lookup`) agrees with the
//! byte-level datapath model of `oracle.rs` on the encoded map.

use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{
    AuthRequirement, Direction, Entry, Key, ListenerPriority, MapState, PolicyFeatures, Priority,
    Verdict,
};
use porin_compiler::ports::MaskedPort;
use proptest::prelude::*;

use super::oracle::can_access;
use crate::abi::{PolicyEntry, PolicyKey, policy_pairs};

fn id(n: u32) -> Identity {
    Identity::new(n).unwrap()
}

fn any_identity() -> impl Strategy<Value = Identity> {
    (0_u32..=2, 0_u32..=0xFF_FFFF).prop_map(|(scope, index)| {
        let index = if scope > 0 && index == 0 { 1 } else { index };
        Identity::new((scope << 24) | index).unwrap()
    })
}

/// A key of `direction` and `identity` for `proto` and a port block
/// (protocol 0: the L3-only key).
fn key_of(egress: bool, identity: Identity, proto: u8, port: u16, prefix: u8) -> Key {
    let dir = if egress {
        Direction::Egress
    } else {
        Direction::Ingress
    };
    let base = Key::for_direction(dir).with_identity(identity);
    if proto == 0 {
        base
    } else {
        base.with_masked_port(proto, MaskedPort::from_prefix(port, prefix))
            .unwrap()
    }
}

fn any_key() -> impl Strategy<Value = Key> {
    (
        any::<bool>(),
        any_identity(),
        any::<u8>(),
        any::<u16>(),
        0_u8..=16,
    )
        .prop_map(|(egress, identity, proto, port, prefix)| {
            key_of(egress, identity, proto, port, prefix)
        })
}

fn any_entry() -> impl Strategy<Value = Entry> {
    (
        0_u32..=Priority::MAX.get(),
        any::<bool>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
        any::<u32>(),
    )
        .prop_map(|(priority, deny, proxy_port, listener, auth, cookie)| {
            Entry::new(
                Priority::new(priority).unwrap(),
                deny,
                proxy_port,
                ListenerPriority::new(listener),
                AuthRequirement::from_byte(auth),
            )
            .with_cookie(cookie)
        })
}

/// Keys drawn from a small universe so that they overlap a lot.
fn small_key() -> impl Strategy<Value = Key> {
    (
        prop::sample::select(vec![0_u32, 2, 100, 0x0100_0005]),
        prop::sample::select(vec![0_u8, 6, 17]),
        prop::sample::select(vec![0_u16, 64, 80, 81, 1023, 65535]),
        prop::sample::select(vec![0_u8, 6, 10, 14, 15, 16]),
        any::<bool>(),
    )
        .prop_map(|(identity, proto, port, prefix, egress)| {
            key_of(egress, id(identity), proto, port, prefix)
        })
}

/// Entries with overlapping precedences: allow/deny/redirect at levels 0-1,
/// a few auth requirements.
fn small_entry() -> impl Strategy<Value = Entry> {
    (
        0_u32..=1,
        prop::sample::select(vec![0_u8, 1, 2]), // allow, deny, redirect
        prop::sample::select(vec![0_u8, 101, 121]),
        prop::sample::select(vec![0_u8, 1, 2, 0x80, 0x81, 0x82]),
        1_u16..=3,
    )
        .prop_map(|(priority, kind, listener, auth, proxy)| {
            Entry::new(
                Priority::new(priority).unwrap(),
                kind == 1,
                if kind == 2 { proxy } else { 0 },
                ListenerPriority::new(listener),
                AuthRequirement::from_byte(auth),
            )
        })
}

fn probes() -> Vec<(Direction, u32, u8, u16)> {
    let mut out = Vec::new();
    for dir in Direction::ALL {
        for identity in [0_u32, 2, 100, 101, 0x0100_0005] {
            for proto in [1_u8, 6, 17] {
                for port in [0_u16, 1, 63, 64, 80, 81, 127, 128, 1023, 1024, 65535] {
                    out.push((dir, identity, proto, port));
                }
            }
        }
    }
    out
}

fn assert_matches_oracle(ms: &MapState) -> Result<(), TestCaseError> {
    let encoded: Vec<_> = policy_pairs(ms)
        .iter()
        .map(|(k, v)| (k.to_bytes(), v.to_bytes()))
        .collect();
    for (dir, identity, proto, port) in probes() {
        let d = ms.lookup(dir, id(identity), proto, port);
        let o = can_access(&encoded, identity, dir == Direction::Egress, proto, port);
        let ctx = format!("{dir} id={identity} proto={proto} port={port}: {d:?} vs {o:?}");
        prop_assert_eq!(d.verdict.drop_code().unwrap_or(0), o.ret, "{}", ctx);
        prop_assert_eq!(d.match_type as u8, o.match_type, "{}", ctx);
        prop_assert_eq!(
            d.chosen
                .as_ref()
                .map(|c| PolicyKey::from_key(&c.key).to_bytes()),
            o.chosen_key,
            "{}",
            ctx
        );
        match d.verdict {
            Verdict::Redirect { proxy_port } => {
                prop_assert_eq!(proxy_port, o.proxy_port, "{}", ctx);
            }
            Verdict::Allow => prop_assert_eq!(o.proxy_port, 0, "{}", ctx),
            Verdict::AuthRequired { auth_type } => {
                prop_assert_eq!(auth_type.get(), o.auth_type, "{}", ctx);
            }
            Verdict::Deny { .. } => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn key_bytes_round_trip(key in any_key()) {
        let encoded = PolicyKey::from_key(&key);
        let bytes = encoded.to_bytes();
        prop_assert_eq!(PolicyKey::from_bytes(&bytes).unwrap().to_key().unwrap(), key);
        // The encoded prefix covers exactly the key's meaningful bits.
        prop_assert_eq!(encoded.prefixlen, key.datapath_prefix_len());
        prop_assert!(encoded.prefixlen == 40 || (48..=64).contains(&encoded.prefixlen));
    }

    #[test]
    fn entry_bytes_round_trip(key in any_key(), entry in any_entry()) {
        let encoded = PolicyEntry::from_entry(&key, &entry);
        let decoded = PolicyEntry::from_bytes(&encoded.to_bytes()).unwrap().to_entry(&key).unwrap();
        prop_assert_eq!(decoded, entry.clone());
        prop_assert_eq!(encoded.is_deny(), entry.is_deny());
        prop_assert_eq!(u32::from(encoded.lpm_prefix_length()) + 40, key.datapath_prefix_len());
    }

    /// The evaluator agrees with the byte-level datapath model on arbitrary
    /// states (not only ones the insertion logic would build).
    #[test]
    fn lookup_agrees_with_datapath_oracle(
        pairs in prop::collection::vec((small_key(), small_entry()), 0..12)
    ) {
        let mut ms = MapState::new();
        for (k, e) in pairs {
            ms.upsert(k, e).unwrap();
        }
        assert_matches_oracle(&ms)?;
    }

    /// Insertion results also agree with the oracle (and never panic) under
    /// every feature set.
    #[test]
    fn inserted_states_agree_with_datapath_oracle(
        pairs in prop::collection::vec((small_key(), small_entry()), 0..12),
        features in 0_u8..16,
    ) {
        let features = [PolicyFeatures::DENY, PolicyFeatures::REDIRECT, PolicyFeatures::ORDERED, PolicyFeatures::AUTH]
            .into_iter()
            .enumerate()
            .filter(|(i, _)| features & (1 << i) != 0)
            .fold(PolicyFeatures::NONE, |acc, (_, f)| acc | f);
        let mut ms = MapState::new();
        for (k, e) in pairs {
            ms.insert_with_features(k, e, features).unwrap();
        }
        assert_matches_oracle(&ms)?;
    }
}
