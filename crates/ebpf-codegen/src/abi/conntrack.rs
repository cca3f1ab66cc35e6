//! `porin_ct`: conntrack, written by the programs only (`DATAPATH.md`
//! §2.4).
//!
//! One entry per flow, found with one lookup from either direction: the
//! key orders the tuple by role (the peer's address and port first, then
//! the endpoint's), which both hooks know without comparing addresses
//! (`porin_to_endpoint`'s peer is the source, `porin_from_endpoint`'s the
//! destination); the value says which direction opened the flow, so a
//! packet of the other direction is its reply (Cilium's `CT_REPLY`,
//! `bpf/lib/conntrack.h`, which finds the same with two lookups of
//! direction-flagged tuples).

use super::abi_struct;

/// Bytes of a conntrack address (an IPv6 address; IPv4 uses the first 4).
pub const CT_ADDR_LEN: usize = 16;

abi_struct! {
    /// `porin_ct_key`: the flow's tuple by role.
    pub struct CtKey = "porin_ct_key" {
        /// The peer's address; IPv4: 4 bytes then 12 zero bytes.
        peer_addr @ OFF_PEER_ADDR: [u8; CT_ADDR_LEN] = Raw,
        /// The endpoint's address, same.
        ep_addr @ OFF_EP_ADDR: [u8; CT_ADDR_LEN] = Raw,
        /// The peer's port (ICMP echo: the identifier; other ICMP: see
        /// `DATAPATH.md` §2.4; else 0).
        peer_port_be @ OFF_PEER_PORT: u16 = Be,
        /// The endpoint's port, same.
        ep_port_be @ OFF_EP_PORT: u16 = Be,
        /// IP protocol.
        proto @ OFF_PROTO: u8 = Raw,
        /// [`CtKey::FAMILY_V4`] or [`CtKey::FAMILY_V6`].
        family @ OFF_FAMILY: u8 = Raw,
        /// Zero.
        pad @ OFF_PAD: [u8; 2] = Raw,
    }
}

impl CtKey {
    /// `family` of IPv4 flows.
    pub const FAMILY_V4: u8 = 4;
    /// `family` of IPv6 flows.
    pub const FAMILY_V6: u8 = 6;
}

abi_struct! {
    /// `porin_ct_value`.
    pub struct CtValue = "porin_ct_value" {
        /// `bpf_ktime_get_coarse_ns()` (`CLOCK_MONOTONIC_COARSE`) after which
        /// the entry is expired (treated as absent, and overwritten by the
        /// next allowed packet).
        expires_ns @ OFF_EXPIRES: u64 = Le,
        /// Proxy port of the flow's verdict, host order (0 = none).
        proxy_port @ OFF_PROXY_PORT: u16 = Le,
        /// Policy direction of the packet that opened the flow (the
        /// policy key's byte): a packet of the other direction is a reply.
        opened_by @ OFF_OPENED_BY: u8 = Raw,
        /// TCP state bits ([`CtValue::TCP_SEEN_NON_SYN`], ...).
        tcp_state @ OFF_TCP_STATE: u8 = Raw,
        /// Zero.
        reserved @ OFF_RESERVED: [u8; 4] = Raw,
    }
}

impl CtValue {
    /// A TCP packet without SYN was seen: the connection is established
    /// and gets the long lifetime (Cilium `seen_non_syn`).
    pub const TCP_SEEN_NON_SYN: u8 = 1;
    /// A FIN (or RST) was seen in the ingress direction (Cilium
    /// `rx_closing`).
    pub const TCP_RX_CLOSING: u8 = 1 << 1;
    /// A FIN (or RST) was seen in the egress direction (`tx_closing`).
    pub const TCP_TX_CLOSING: u8 = 1 << 2;
    /// A SYN was seen in the ingress direction (`rx_flags_seen & SYN`).
    pub const TCP_RX_SYN: u8 = 1 << 3;
    /// A SYN was seen in the egress direction.
    pub const TCP_TX_SYN: u8 = 1 << 4;
    /// Both directions closing: the entry lives for the close timeout and
    /// is no longer refreshed.
    pub const TCP_CLOSED: u8 = Self::TCP_RX_CLOSING | Self::TCP_TX_CLOSING;
}
