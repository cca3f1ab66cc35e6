//! Offsets and lengths of the packet headers and of `struct __sk_buff`
//! that the programs read (the map layouts are `crate::abi`'s). Values are
//! the wire formats': IEEE 802.3/802.1Q, RFC 791 (IPv4), RFC 8200 (IPv6 and
//! its extension headers), RFC 4302 (AH), RFC 793/768/9260 (ports),
//! RFC 792/4443 (ICMP), and `include/uapi/linux/bpf.h`.

/// Ethernet.
pub(super) mod eth {
    /// Header length without a tag.
    pub const HEADER_LEN: i32 = 14;
    /// Offset of the ethertype.
    pub const ETHERTYPE: i32 = 12;
    /// Length of the ethertype.
    pub const ETHERTYPE_LEN: i32 = 2;
    /// Length of one 802.1Q tag (it precedes the inner ethertype).
    pub const VLAN_TAG_LEN: i32 = 4;
}

/// IPv4 header.
pub(super) mod ipv4 {
    /// Minimum header length (IHL 5).
    pub const MIN_LEN: i32 = 20;
    /// The version a valid header has in its top nibble.
    pub const VERSION: i32 = 4;
    /// The version is the top nibble of byte 0.
    pub const VERSION_SHIFT: i32 = 4;
    /// The IHL is the low nibble of byte 0.
    pub const IHL_MASK: i32 = 0x0f;
    /// The smallest valid IHL (in 4-byte words).
    pub const MIN_IHL: i32 = 5;
    /// IHL words to bytes.
    pub const IHL_SHIFT: i32 = 2;
    /// Flags and fragment offset (u16 BE).
    pub const FRAG_OFF: i16 = 6;
    /// The fragment-offset bits of `FRAG_OFF`.
    pub const FRAG_OFFSET_MASK: i32 = 0x1fff;
    /// Protocol.
    pub const PROTO: i16 = 9;
    /// Source address.
    pub const SADDR: i16 = 12;
    /// Destination address.
    pub const DADDR: i16 = 16;
}

/// IPv6 header.
pub(super) mod ipv6 {
    /// Header length.
    pub const LEN: i32 = 40;
    /// The version a valid header has in its top nibble.
    pub const VERSION: i32 = 6;
    /// The version is the top nibble of byte 0.
    pub const VERSION_SHIFT: i32 = 4;
    /// Next header.
    pub const NEXT_HEADER: i16 = 6;
    /// Hop limit.
    pub const HOP_LIMIT: i16 = 7;
    /// Source address.
    pub const SADDR: i16 = 8;
    /// Destination address.
    pub const DADDR: i16 = 24;
    /// Offset of an extension header's length byte (after its next-header byte).
    pub const EXT_LEN: i16 = 1;
    /// Bytes read of an extension header: next header and length.
    pub const EXT_PREFIX_LEN: i32 = 2;
    /// Fragment header length.
    pub const FRAG_HEADER_LEN: i32 = 8;
    /// Offset of the fragment offset (u16 BE, top 13 bits) in a fragment header.
    pub const FRAG_OFF: i16 = 2;
    /// Bytes read of a fragment header.
    pub const FRAG_PREFIX_LEN: i32 = 4;
    /// The fragment-offset bits of `FRAG_OFF`.
    pub const FRAG_OFFSET_MASK: i32 = 0xfff8;
    /// Options headers count their length in 8-byte units after the first 8.
    pub const OPTIONS_LEN_SHIFT: i32 = 3;
    /// Options headers' length is `(len + 1) * 8`.
    pub const OPTIONS_LEN_BIAS: i32 = 1;
    /// AH counts its length in 4-byte units after the first 8 (RFC 4302).
    pub const AH_LEN_SHIFT: i32 = 2;
    /// AH's length is `(len + 2) * 4`.
    pub const AH_LEN_BIAS: i32 = 2;
}

/// TCP, UDP and SCTP: the port pair leads the header.
pub(super) mod ports {
    /// Source port (u16 BE).
    pub const SPORT: i16 = 0;
    /// Destination port (u16 BE).
    pub const DPORT: i16 = 2;
    /// Bytes read: both ports.
    pub const LEN: i32 = 4;
    /// TCP: the flags byte (FIN 0x01, SYN 0x02, RST 0x04, ...).
    pub const TCP_FLAGS: i16 = 13;
    /// TCP bytes read: the ports through the flags.
    pub const TCP_LEN: i32 = 14;
    /// TCP flag bits.
    pub const FIN: i32 = 0x01;
    /// SYN.
    pub const SYN: i32 = 0x02;
    /// RST.
    pub const RST: i32 = 0x04;
}

/// ICMP and ICMPv6.
pub(super) mod icmp {
    /// Type.
    pub const TYPE: i16 = 0;
    /// Code.
    pub const CODE: i16 = 1;
    /// Echo identifier (u16 BE) of echo request/reply.
    pub const ECHO_ID: i16 = 4;
    /// The whole ICMPv4 header (Cilium loads `struct icmphdr`).
    pub const HEADER_LEN: i32 = 8;
    /// Bytes read of an ICMPv6 header before the type is known: the type.
    pub const TYPE_LEN: i32 = 1;
    /// IPv4: destination unreachable.
    pub const V4_DEST_UNREACH: i32 = 3;
    /// IPv4 destination unreachable: fragmentation needed.
    pub const V4_FRAG_NEEDED: i32 = 4;
    /// IPv4 echo reply.
    pub const V4_ECHO_REPLY: i32 = 0;
    /// IPv4 echo request.
    pub const V4_ECHO_REQUEST: i32 = 8;
    /// ICMPv6 echo request.
    pub const V6_ECHO_REQUEST: i32 = 128;
    /// ICMPv6 echo reply.
    pub const V6_ECHO_REPLY: i32 = 129;
    /// ICMPv6 neighbour solicitation.
    pub const V6_NEIGHBOUR_SOLICITATION: i32 = 135;
    /// ICMPv6 neighbour advertisement.
    pub const V6_NEIGHBOUR_ADVERTISEMENT: i32 = 136;
    /// The hop limit of valid neighbour discovery (RFC 4861 §7.1).
    pub const NDP_HOP_LIMIT: i32 = 255;
}

/// `struct __sk_buff` (`include/uapi/linux/bpf.h`).
pub(super) mod skb {
    /// `len`.
    pub const LEN: i16 = 0;
    /// `mark`.
    pub const MARK: i16 = 8;
    /// `ifindex`.
    pub const IFINDEX: i16 = 40;
}
