//! The stack frame both programs use: fixed, 8-byte aligned slots below
//! `r10`. The whole frame is zeroed on entry, so every map key built here
//! is fully initialised (the verifier requires it) and unused key bytes are
//! zero (the conntrack key's address padding relies on it).

use crate::abi::{ConfigValue, CtKey, CtValue, Event, Ipcache4Key, Ipcache6Key, PolicyKey};

/// Conntrack key of this packet (40 bytes, `porin_ct_key`).
pub const CT_KEY: i16 = -48;
/// The conntrack entry of this packet's flow, when fresh (a spilled map value
/// pointer, u64).
pub const CT_ENTRY: i16 = -56;
/// The TCP header's flags byte (u32; 0 for other protocols).
pub const TCP_FLAGS: i16 = -64;
/// Header scratch buffer for `bpf_skb_load_bytes` (40 bytes: an IPv6 header).
pub const HEADER: i16 = -128;
/// Small scratch buffer (8 bytes: an L4 or extension header prefix).
pub const SCRATCH: i16 = -136;
/// Conntrack value for a new entry (16 bytes).
pub const CT_VALUE: i16 = -152;
/// Policy key (12 bytes used of 16).
pub const POLICY_KEY: i16 = -168;
/// ipcache key (20 bytes used of 24).
pub const IPCACHE_KEY: i16 = -192;
/// A u32 zero key (`porin_config` index 0).
pub const ZERO_KEY: i16 = -200;
/// Verdict counter index (u32).
pub const COUNTER_INDEX: i16 = -208;
/// Active policy slot (u32, 0 or 1).
pub const POLICY_SLOT: i16 = -216;
/// Offset of the L3 header in the packet (u32).
pub const L3_OFFSET: i16 = -224;
/// Offset of the L4 header (u32), advanced over IPv6 extension headers.
pub const L4_OFFSET: i16 = -232;
/// L4 protocol / IPv6 next header (u8).
pub const PROTO: i16 = -240;
/// IPv6 hop limit (u8).
pub const HOP_LIMIT: i16 = -248;
/// Peer identity (u32).
pub const IDENTITY: i16 = -256;
/// Proxy port of the verdict, host order (u32).
pub const PROXY_PORT: i16 = -264;
/// 1 when a fresh conntrack entry existed in this direction (u32).
pub const ESTABLISHED: i16 = -272;
/// `bpf_ktime_get_coarse_ns()` of this packet (u64).
pub const NOW: i16 = -280;
/// 1 when the active slot holds no key an L4-only (identity 0) lookup of
/// this program's direction can match (`porin_config.prefix_free`, bits
/// 2-5): that lookup is skipped (u32).
pub const WILDCARD_SKIP: i16 = -288;
/// Which verdict events to write (u32: `ConfigValue::EVENTS_DROPS` /
/// `EVENTS_ALLOWS`, the default already applied).
pub const EVENT_MASK: i16 = -296;
/// 1 when the active slot's prefix trie is empty (`porin_config.prefix_free`):
/// policy lookups stop at the exact-key hash (u32).
pub const TRIE_SKIP: i16 = -304;
/// 1 once `IDENTITY` holds the peer's ipcache identity (u32). The lookup is
/// made where policy or an event needs it, not while parsing: a reply never
/// reads the ipcache.
pub const IDENTITY_DONE: i16 = -312;
/// Bytes of stack zeroed on entry (every slot above).
pub const SIZE: i16 = 312;
/// The `porin_event` record, built only when one is written (every byte
/// stored then, so it is below the zeroed area).
pub const EVENT: i16 = -352;

/// Bytes from `slot` up to the next slot above it.
const fn room(slot: i16, above: i16) -> usize {
    (above - slot) as usize
}

// Each map key or value built on the stack fits its slot (a field added to
// `crate::abi` that outgrows one fails the build here, not in the verifier).
const _: () = {
    assert!(CtKey::SIZE <= room(CT_KEY, 0));
    assert!(CT_ENTRY + 8 <= CT_KEY && TCP_FLAGS + 4 <= CT_ENTRY);
    assert!(CtValue::SIZE <= room(CT_VALUE, SCRATCH));
    assert!(PolicyKey::SIZE <= room(POLICY_KEY, CT_VALUE));
    assert!(Ipcache4Key::SIZE <= room(IPCACHE_KEY, POLICY_KEY));
    assert!(Ipcache6Key::SIZE <= room(IPCACHE_KEY, POLICY_KEY));
    // `porin_config`'s key is index 0, which the zeroed slot already holds.
    assert!(ConfigValue::KEY == 0 && 4 <= room(ZERO_KEY, IPCACHE_KEY));
    assert!(Event::SIZE <= room(EVENT, IDENTITY_DONE));
    // The event's peer address is copied from the ipcache key: 16 bytes
    // from the address, inside the slot (IPv4's tail is zeroed frame).
    assert!(Ipcache6Key::OFF_ADDR + 16 <= room(IPCACHE_KEY, POLICY_KEY));
    assert!(Ipcache4Key::OFF_ADDR == Ipcache6Key::OFF_ADDR);
    // `Gen::peer_identity` reads either key's prefix length at one offset.
    assert!(Ipcache4Key::OFF_PREFIXLEN == Ipcache6Key::OFF_PREFIXLEN);
};
