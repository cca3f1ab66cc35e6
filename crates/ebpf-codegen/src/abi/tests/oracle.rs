//! An independent model of the datapath working on the *encoded bytes*:
//! a literal LPM-trie match over `struct policy_key` bytes and the
//! `__policy_can_access` / `__policy_check` logic over `struct policy_entry`
//! bytes (`bpf/lib/policy.h`, 1.19 layout, docs/semantics.md §5). Used as the
//! brute-force oracle of the property tests, so it shares no code with
//! `MapState::lookup` beyond the encoders under test (`crate::abi`).

use crate::abi::{PolicyEntry, PolicyKey};

/// Policy key bytes.
pub(super) type KeyBytes = [u8; PolicyKey::SIZE];
/// Policy entry bytes.
pub(super) type ValueBytes = [u8; PolicyEntry::SIZE];

/// What the datapath returns: the drop code or 0 (`CTX_ACT_OK`), the proxy
/// port, the match type and the chosen stored key bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) ret: i32,
    pub(super) proxy_port: u16,
    pub(super) auth_type: u8,
    pub(super) match_type: u8,
    pub(super) chosen_key: Option<KeyBytes>,
}

/// `bpf_lpm_trie_key` match: the stored key's first `prefixlen` data bits
/// equal the lookup key's.
fn prefix_matches(stored: &KeyBytes, lookup: &KeyBytes) -> Option<u32> {
    let prefixlen = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    if prefixlen > 64 {
        return None;
    }
    for bit in 0..prefixlen as usize {
        let byte = 4 + bit / 8;
        let mask = 0x80_u8 >> (bit % 8);
        if stored[byte] & mask != lookup[byte] & mask {
            return None;
        }
    }
    Some(prefixlen)
}

fn lpm<'a>(
    map: &'a [(KeyBytes, ValueBytes)],
    lookup: &KeyBytes,
) -> Option<&'a (KeyBytes, ValueBytes)> {
    map.iter()
        .filter_map(|kv| prefix_matches(&kv.0, lookup).map(|p| (p, kv)))
        .max_by_key(|(p, _)| *p)
        .map(|(_, kv)| kv)
}

fn precedence(v: &ValueBytes) -> u32 {
    u32::from_le_bytes([v[4], v[5], v[6], v[7]])
}
fn deny(v: &ValueBytes) -> bool {
    v[2] & 1 == 1
}
fn lpm_len(v: &ValueBytes) -> u8 {
    v[2] >> 3
}
fn auth_type(v: &ValueBytes) -> u8 {
    v[3] & 0x7f
}
fn explicit_auth(v: &ValueBytes) -> bool {
    v[3] & 0x80 != 0
}

pub(super) fn can_access(
    map: &[(KeyBytes, ValueBytes)],
    identity: u32,
    egress: bool,
    proto: u8,
    port: u16,
) -> Outcome {
    let mut key = [0_u8; 12];
    key[0..4].copy_from_slice(&64_u32.to_le_bytes());
    key[4..8].copy_from_slice(&identity.to_le_bytes());
    key[8] = u8::from(egress);
    key[9] = proto;
    key[10..12].copy_from_slice(&port.to_be_bytes());
    let l3 = lpm(map, &key);
    if let Some(l3) = l3
        && precedence(&l3.1) == u32::MAX
    {
        return check(l3, None, true);
    }
    key[4..8].copy_from_slice(&0_u32.to_le_bytes());
    let l4 = lpm(map, &key);
    match (l3, l4) {
        (None, None) => Outcome {
            ret: -133,
            proxy_port: 0,
            auth_type: 0,
            match_type: 0,
            chosen_key: None,
        },
        (Some(l3), None) => check(l3, None, true),
        (None, Some(l4)) => check(l4, None, false),
        (Some(l3), Some(l4)) => {
            if precedence(&l4.1) > precedence(&l3.1)
                || (precedence(&l4.1) == precedence(&l3.1) && lpm_len(&l4.1) > lpm_len(&l3.1))
            {
                check(l4, Some(l3), false)
            } else {
                check(l3, Some(l4), true)
            }
        }
    }
}

fn check(
    chosen: &(KeyBytes, ValueBytes),
    other: Option<&(KeyBytes, ValueBytes)>,
    l3: bool,
) -> Outcome {
    let v = &chosen.1;
    let p_len = lpm_len(v);
    let match_type = match (l3, p_len) {
        (true, 9..) => 2,
        (true, 1..=8) => 5,
        (true, 0) => 1,
        (false, 0) => 4,
        (false, 1..=8) => 6,
        (false, 9..) => 3,
    };
    let mut out = Outcome {
        ret: 0,
        proxy_port: 0,
        auth_type: 0,
        match_type,
        chosen_key: Some(chosen.0),
    };
    if deny(v) {
        out.ret = -181;
        return out;
    }
    out.proxy_port = u16::from_be_bytes([v[0], v[1]]);
    let mut auth = auth_type(v);
    if let Some(o) = other
        && precedence(&o.1) == precedence(v)
        && !explicit_auth(v)
        && auth_type(&o.1) > auth
    {
        auth = auth_type(&o.1);
    }
    if auth != 0 {
        out.ret = -189;
        out.auth_type = auth;
    }
    out
}
