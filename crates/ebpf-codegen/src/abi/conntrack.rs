//! `porin_ct`: conntrack, written by the programs only (`DATAPATH.md`
//! §2.4).

use super::abi_struct;

/// Bytes of a conntrack address (an IPv6 address; IPv4 uses the first 4).
pub const CT_ADDR_LEN: usize = 16;

abi_struct! {
    /// `porin_ct_key`: the tuple of the packet that opened the flow, as
    /// that packet saw it.
    pub struct CtKey = "porin_ct_key" {
        /// Source address; IPv4: 4 bytes then 12 zero bytes.
        saddr @ OFF_SADDR: [u8; CT_ADDR_LEN] = Raw,
        /// Destination address, same.
        daddr @ OFF_DADDR: [u8; CT_ADDR_LEN] = Raw,
        /// Source port (the echo identifier for ICMP echo; else 0).
        sport_be @ OFF_SPORT: u16 = Be,
        /// Destination port (the echo identifier, or `[0, type]` for
        /// other ICMP; else 0).
        dport_be @ OFF_DPORT: u16 = Be,
        /// IP protocol.
        proto @ OFF_PROTO: u8 = Raw,
        /// [`CtKey::FAMILY_V4`] or [`CtKey::FAMILY_V6`].
        family @ OFF_FAMILY: u8 = Raw,
        /// Policy direction of the opening packet (the policy key's byte).
        direction @ OFF_DIRECTION: u8 = Raw,
        /// Zero.
        pad @ OFF_PAD: u8 = Raw,
    }
}

impl CtKey {
    /// `family` of IPv4 flows.
    pub const FAMILY_V4: u8 = 4;
    /// `family` of IPv6 flows.
    pub const FAMILY_V6: u8 = 6;
    /// Where an ICMP type goes: the low-order byte of the big-endian
    /// `dport_be`.
    pub const OFF_ICMP_TYPE: usize = Self::OFF_DPORT + 1;
}

abi_struct! {
    /// `porin_ct_value`.
    pub struct CtValue = "porin_ct_value" {
        /// `bpf_ktime_get_ns()` of the last packet.
        last_seen_ns @ OFF_LAST_SEEN: u64 = Le,
        /// Proxy port of the flow's verdict, host order (0 = none).
        proxy_port @ OFF_PROXY_PORT: u16 = Le,
        /// Zero.
        reserved @ OFF_RESERVED: [u8; 6] = Raw,
    }
}
