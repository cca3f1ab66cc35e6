//! # Packet crafting for `BPF_PROG_TEST_RUN`
//!
//! The kernel tests drive porin's TC programs with raw Ethernet frames. This module builds those
//! frames from a small typed description: Ethernet (with any number of VLAN tags, so stacked tags
//! can be tested), IPv4 (options, fragments), IPv6 (hop-by-hop, routing, destination options,
//! fragment and AH extension headers), and TCP, UDP, SCTP, ICMP, ICMPv6 or raw L4 bytes.
//!
//! Lengths and checksums are always right (IPv4 header checksum; TCP/UDP/ICMPv6 pseudo-header
//! checksums; ICMP checksum; SCTP CRC32c), so a frame is also a valid frame on a real wire. A
//! malformed frame is made by building a valid one and truncating or editing the bytes.
//!
//! ```
//! use porin_kernel::packet::Packet;
//! use std::net::Ipv4Addr;
//! let frame = Packet::tcp4(Ipv4Addr::new(10, 0, 0, 1), 40000, Ipv4Addr::new(10, 0, 0, 2), 80)
//!     .with_vlan(100)
//!     .build();
//! assert_eq!(frame.len(), 14 + 4 + 20 + 20);
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why a flow cannot be turned into a packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PacketError {
    /// Source and destination are of different address families.
    #[error("source `{src}` and destination `{dst}` are not of the same address family")]
    MixedFamilies {
        /// Source address.
        src: IpAddr,
        /// Destination address.
        dst: IpAddr,
    },
    /// ICMP needs IPv4 peers, ICMPv6 IPv6 peers.
    #[error("{protocol:?} cannot be carried between `{src}` and `{dst}`; use {suggestion}")]
    IcmpFamily {
        /// The protocol asked for.
        protocol: FlowProtocol,
        /// Source address.
        src: IpAddr,
        /// Destination address.
        dst: IpAddr,
        /// The protocol that fits the addresses.
        suggestion: &'static str,
    },
    /// An ICMP type does not fit in a byte.
    #[error("ICMP type `{0}` is larger than 255")]
    IcmpTypeTooLarge(u16),
}

/// The protocols a policy test case names (`docs/policy-tests.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowProtocol {
    /// TCP: a SYN to the port.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
    /// ICMP (IPv4): the port is the ICMP type.
    Icmp,
    /// ICMPv6: the port is the ICMPv6 type.
    Icmpv6,
}

/// IP protocol numbers used by the builder.
pub mod proto {
    /// Hop-by-hop options (IPv6 extension).
    pub const HOPOPTS: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header.
    pub const FRAGMENT: u8 = 44;
    /// ESP.
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 no next header.
    pub const NONE: u8 = 59;
    /// IPv6 destination options.
    pub const DSTOPTS: u8 = 60;
    /// SCTP.
    pub const SCTP: u8 = 132;
}

/// TCP flag bits (byte 13 of the TCP header).
pub mod tcp_flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// Ethertypes.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// 802.1Q VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service tag (QinQ outer).
    pub const QINQ: u16 = 0x88A8;
    /// IPv6.
    pub const IPV6: u16 = 0x86DD;
}

/// One VLAN tag: its TPID (0x8100 or 0x88A8) and TCI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    /// Tag protocol identifier.
    pub tpid: u16,
    /// Tag control information (PCP, DEI, VID).
    pub tci: u16,
}

/// The Ethernet header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ethernet {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// VLAN tags, outermost first.
    pub tags: Vec<VlanTag>,
}

impl Default for Ethernet {
    fn default() -> Self {
        Self {
            dst: [0x02, 0, 0, 0, 0, 0x02],
            src: [0x02, 0, 0, 0, 0, 0x01],
            tags: Vec::new(),
        }
    }
}

/// The IPv4 header fields a test may want to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4 {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Time to live.
    pub ttl: u8,
    /// Identification.
    pub id: u16,
    /// Options, padded with End-of-Options to a multiple of 4 bytes.
    pub options: Vec<u8>,
    /// Fragment offset in 8-byte units (0 = first or unfragmented).
    pub fragment_offset: u16,
    /// More-fragments flag.
    pub more_fragments: bool,
    /// Don't-fragment flag.
    pub dont_fragment: bool,
}

impl Ipv4 {
    /// A plain header between two addresses.
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        Self {
            src,
            dst,
            ttl: 64,
            id: 1,
            options: Vec::new(),
            fragment_offset: 0,
            more_fragments: false,
            dont_fragment: false,
        }
    }
}

/// An IPv6 extension header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ipv6Extension {
    /// Hop-by-hop options (the option bytes; padded with Pad1/PadN to 8-byte units).
    HopByHop(Vec<u8>),
    /// Destination options (as above).
    DestinationOptions(Vec<u8>),
    /// Routing header.
    Routing {
        /// Routing type.
        routing_type: u8,
        /// Segments left.
        segments_left: u8,
        /// Type-specific data after the first 4 bytes, zero-padded to 8-byte units.
        data: Vec<u8>,
    },
    /// Fragment header.
    Fragment {
        /// Offset in 8-byte units.
        offset: u16,
        /// More-fragments flag.
        more: bool,
        /// Identification.
        id: u32,
    },
    /// Authentication header.
    Ah {
        /// Security parameters index.
        spi: u32,
        /// Sequence number.
        seq: u32,
        /// Integrity check value (a multiple of 4 bytes; 12 is usual).
        icv: Vec<u8>,
    },
}

impl Ipv6Extension {
    fn next_header_value(&self) -> u8 {
        match self {
            Self::HopByHop(_) => proto::HOPOPTS,
            Self::DestinationOptions(_) => proto::DSTOPTS,
            Self::Routing { .. } => proto::ROUTING,
            Self::Fragment { .. } => proto::FRAGMENT,
            Self::Ah { .. } => proto::AH,
        }
    }

    /// Encodes the header with `next` as its next-header byte.
    fn encode(&self, next: u8) -> Vec<u8> {
        match self {
            Self::HopByHop(options) | Self::DestinationOptions(options) => {
                let mut out = vec![next, 0];
                out.extend_from_slice(options);
                let pad = (8 - out.len() % 8) % 8;
                match pad {
                    0 => {}
                    1 => out.push(0), // Pad1
                    n => {
                        out.push(1); // PadN
                        out.push(u8::try_from(n - 2).unwrap_or(0));
                        out.extend(std::iter::repeat_n(0, n - 2));
                    }
                }
                out[1] = units_minus_one(out.len(), 8);
                out
            }
            Self::Routing {
                routing_type,
                segments_left,
                data,
            } => {
                let mut out = vec![next, 0, *routing_type, *segments_left, 0, 0, 0, 0];
                out.extend_from_slice(data);
                out.resize(out.len().div_ceil(8) * 8, 0);
                out[1] = units_minus_one(out.len(), 8);
                out
            }
            Self::Fragment { offset, more, id } => {
                let field = (offset << 3) | u16::from(*more);
                let mut out = vec![next, 0];
                out.extend_from_slice(&field.to_be_bytes());
                out.extend_from_slice(&id.to_be_bytes());
                out
            }
            Self::Ah { spi, seq, icv } => {
                let mut out = vec![next, 0, 0, 0];
                out.extend_from_slice(&spi.to_be_bytes());
                out.extend_from_slice(&seq.to_be_bytes());
                out.extend_from_slice(icv);
                out.resize(out.len().div_ceil(4) * 4, 0);
                // AH length: 4-byte units minus 2.
                out[1] = u8::try_from(out.len() / 4 - 2).unwrap_or(u8::MAX);
                out
            }
        }
    }
}

/// `len / unit - 1` as a header length byte (saturating for absurd sizes).
fn units_minus_one(len: usize, unit: usize) -> u8 {
    u8::try_from(len / unit - 1).unwrap_or(u8::MAX)
}

/// The IPv6 header fields a test may want to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6 {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Hop limit.
    pub hop_limit: u8,
    /// Extension headers in order.
    pub extensions: Vec<Ipv6Extension>,
}

impl Ipv6 {
    /// A plain header between two addresses.
    pub fn new(src: Ipv6Addr, dst: Ipv6Addr) -> Self {
        Self {
            src,
            dst,
            hop_limit: 64,
            extensions: Vec::new(),
        }
    }
}

/// The network layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// IPv4.
    V4(Ipv4),
    /// IPv6.
    V6(Ipv6),
    /// A non-IP ethertype carrying the L4 section's raw bytes (e.g. ARP).
    Other {
        /// The ethertype.
        ethertype: u16,
    },
}

/// The transport layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// TCP.
    Tcp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Flag byte ([`tcp_flags`]).
        flags: u8,
        /// Sequence number.
        seq: u32,
        /// Acknowledgement number.
        ack: u32,
    },
    /// UDP.
    Udp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
    /// SCTP common header.
    Sctp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Verification tag.
        vtag: u32,
    },
    /// ICMP (IPv4).
    Icmp {
        /// Type.
        icmp_type: u8,
        /// Code.
        code: u8,
        /// The 4 "rest of header" bytes (identifier and sequence for echo).
        rest: [u8; 4],
    },
    /// ICMPv6.
    Icmpv6 {
        /// Type.
        icmp_type: u8,
        /// Code.
        code: u8,
        /// The 4 "rest of header" bytes.
        rest: [u8; 4],
    },
    /// Raw bytes under protocol number `proto` (other protocols, non-first fragments, ARP).
    Raw {
        /// The IP protocol number written into the IP header.
        proto: u8,
        /// The bytes.
        bytes: Vec<u8>,
    },
}

impl Transport {
    /// The IP protocol number of this transport.
    pub fn protocol(&self) -> u8 {
        match self {
            Self::Tcp { .. } => proto::TCP,
            Self::Udp { .. } => proto::UDP,
            Self::Sctp { .. } => proto::SCTP,
            Self::Icmp { .. } => proto::ICMP,
            Self::Icmpv6 { .. } => proto::ICMPV6,
            Self::Raw { proto, .. } => *proto,
        }
    }
}

/// A whole frame: Ethernet, network, transport and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Ethernet header.
    pub ethernet: Ethernet,
    /// Network header.
    pub network: Network,
    /// Transport header.
    pub transport: Transport,
    /// Bytes after the transport header.
    pub payload: Vec<u8>,
}

/// Echo identifier and sequence as ICMP "rest of header" bytes.
pub fn echo_rest(identifier: u16, sequence: u16) -> [u8; 4] {
    let id = identifier.to_be_bytes();
    let seq = sequence.to_be_bytes();
    [id[0], id[1], seq[0], seq[1]]
}

impl Packet {
    /// A packet with default Ethernet addresses and no payload.
    pub fn new(network: Network, transport: Transport) -> Self {
        Self {
            ethernet: Ethernet::default(),
            network,
            transport,
            payload: Vec::new(),
        }
    }

    /// IPv4 TCP SYN.
    pub fn tcp4(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Self {
        Self::new(
            Network::V4(Ipv4::new(src, dst)),
            Transport::Tcp {
                sport,
                dport,
                flags: tcp_flags::SYN,
                seq: 1,
                ack: 0,
            },
        )
    }

    /// IPv4 UDP.
    pub fn udp4(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Self {
        Self::new(
            Network::V4(Ipv4::new(src, dst)),
            Transport::Udp { sport, dport },
        )
    }

    /// IPv4 SCTP.
    pub fn sctp4(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Self {
        Self::new(
            Network::V4(Ipv4::new(src, dst)),
            Transport::Sctp {
                sport,
                dport,
                vtag: 0,
            },
        )
    }

    /// IPv4 ICMP with the given type/code and rest-of-header bytes.
    pub fn icmp4(src: Ipv4Addr, dst: Ipv4Addr, icmp_type: u8, code: u8, rest: [u8; 4]) -> Self {
        Self::new(
            Network::V4(Ipv4::new(src, dst)),
            Transport::Icmp {
                icmp_type,
                code,
                rest,
            },
        )
    }

    /// IPv6 TCP SYN.
    pub fn tcp6(src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16) -> Self {
        Self::new(
            Network::V6(Ipv6::new(src, dst)),
            Transport::Tcp {
                sport,
                dport,
                flags: tcp_flags::SYN,
                seq: 1,
                ack: 0,
            },
        )
    }

    /// IPv6 UDP.
    pub fn udp6(src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16) -> Self {
        Self::new(
            Network::V6(Ipv6::new(src, dst)),
            Transport::Udp { sport, dport },
        )
    }

    /// IPv6 SCTP.
    pub fn sctp6(src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16) -> Self {
        Self::new(
            Network::V6(Ipv6::new(src, dst)),
            Transport::Sctp {
                sport,
                dport,
                vtag: 0,
            },
        )
    }

    /// ICMPv6 with the given type/code and rest-of-header bytes.
    pub fn icmp6(src: Ipv6Addr, dst: Ipv6Addr, icmp_type: u8, code: u8, rest: [u8; 4]) -> Self {
        Self::new(
            Network::V6(Ipv6::new(src, dst)),
            Transport::Icmpv6 {
                icmp_type,
                code,
                rest,
            },
        )
    }

    /// The first packet of a flow `src -> dst` as a policy test case describes it:
    /// `port_or_type` is the destination port (TCP/UDP/SCTP) or the ICMP/ICMPv6 type, and
    /// `source_port` the source port (or, for ICMP echo, the identifier). Both addresses must
    /// be of one family, ICMP needs IPv4 and ICMPv6 needs IPv6.
    pub fn for_flow(
        src: IpAddr,
        dst: IpAddr,
        protocol: FlowProtocol,
        port_or_type: u16,
        source_port: u16,
    ) -> Result<Self, PacketError> {
        let icmp_type =
            || u8::try_from(port_or_type).map_err(|_| PacketError::IcmpTypeTooLarge(port_or_type));
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Ok(match protocol {
                FlowProtocol::Tcp => Self::tcp4(s, source_port, d, port_or_type),
                FlowProtocol::Udp => Self::udp4(s, source_port, d, port_or_type),
                FlowProtocol::Sctp => Self::sctp4(s, source_port, d, port_or_type),
                FlowProtocol::Icmp => Self::icmp4(s, d, icmp_type()?, 0, echo_rest(source_port, 1)),
                FlowProtocol::Icmpv6 => {
                    return Err(PacketError::IcmpFamily {
                        protocol,
                        src,
                        dst,
                        suggestion: "ICMP for IPv4 peers",
                    });
                }
            }),
            (IpAddr::V6(s), IpAddr::V6(d)) => Ok(match protocol {
                FlowProtocol::Tcp => Self::tcp6(s, source_port, d, port_or_type),
                FlowProtocol::Udp => Self::udp6(s, source_port, d, port_or_type),
                FlowProtocol::Sctp => Self::sctp6(s, source_port, d, port_or_type),
                FlowProtocol::Icmpv6 => {
                    Self::icmp6(s, d, icmp_type()?, 0, echo_rest(source_port, 1))
                }
                FlowProtocol::Icmp => {
                    return Err(PacketError::IcmpFamily {
                        protocol,
                        src,
                        dst,
                        suggestion: "ICMPv6 for IPv6 peers",
                    });
                }
            }),
            _ => Err(PacketError::MixedFamilies { src, dst }),
        }
    }

    /// A non-IP frame (e.g. ARP) with `bytes` after the ethertype.
    pub fn non_ip(ethertype: u16, bytes: Vec<u8>) -> Self {
        Self::new(
            Network::Other { ethertype },
            Transport::Raw { proto: 0, bytes },
        )
    }

    /// Adds an 802.1Q tag (appended inside any existing tags).
    pub fn with_vlan(mut self, vid: u16) -> Self {
        self.ethernet.tags.push(VlanTag {
            tpid: ethertype::VLAN,
            tci: vid & 0x0fff,
        });
        self
    }

    /// Sets the payload.
    pub fn with_payload(mut self, payload: &[u8]) -> Self {
        self.payload = payload.to_vec();
        self
    }

    /// Appends an IPv6 extension header (no effect on IPv4).
    pub fn with_extension(mut self, extension: Ipv6Extension) -> Self {
        if let Network::V6(ip) = &mut self.network {
            ip.extensions.push(extension);
        }
        self
    }

    /// The same packet with the TCP flag byte `flags` ([`tcp_flags`]); other transports are
    /// unchanged.
    pub fn with_tcp_flags(mut self, flags: u8) -> Self {
        if let Transport::Tcp { flags: f, .. } = &mut self.transport {
            *f = flags;
        }
        self
    }

    /// The reply direction of this packet: addresses, MACs and ports swapped; echo requests
    /// become echo replies (ICMP 8 → 0, ICMPv6 128 → 129); TCP flags become SYN|ACK for a SYN.
    pub fn reply(&self) -> Self {
        let mut reply = self.clone();
        std::mem::swap(&mut reply.ethernet.src, &mut reply.ethernet.dst);
        match &mut reply.network {
            Network::V4(ip) => std::mem::swap(&mut ip.src, &mut ip.dst),
            Network::V6(ip) => std::mem::swap(&mut ip.src, &mut ip.dst),
            Network::Other { .. } => {}
        }
        match &mut reply.transport {
            Transport::Tcp {
                sport,
                dport,
                flags,
                ..
            } => {
                std::mem::swap(sport, dport);
                if *flags & tcp_flags::SYN != 0 {
                    *flags = tcp_flags::SYN | tcp_flags::ACK;
                } else {
                    *flags |= tcp_flags::ACK;
                }
            }
            Transport::Udp { sport, dport } | Transport::Sctp { sport, dport, .. } => {
                std::mem::swap(sport, dport);
            }
            Transport::Icmp { icmp_type, .. } if *icmp_type == 8 => *icmp_type = 0,
            Transport::Icmpv6 { icmp_type, .. } if *icmp_type == 128 => *icmp_type = 129,
            _ => {}
        }
        reply
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut frame = Vec::with_capacity(128);
        frame.extend_from_slice(&self.ethernet.dst);
        frame.extend_from_slice(&self.ethernet.src);
        for tag in &self.ethernet.tags {
            frame.extend_from_slice(&tag.tpid.to_be_bytes());
            frame.extend_from_slice(&tag.tci.to_be_bytes());
        }
        let protocol = self.transport.protocol();
        match &self.network {
            Network::V4(ip) => {
                frame.extend_from_slice(&ethertype::IPV4.to_be_bytes());
                let l4 = self.transport_bytes(&PseudoHeader::V4 {
                    src: ip.src,
                    dst: ip.dst,
                });
                frame.extend_from_slice(&ipv4_header(ip, protocol, l4.len()));
                frame.extend_from_slice(&l4);
            }
            Network::V6(ip) => {
                frame.extend_from_slice(&ethertype::IPV6.to_be_bytes());
                let l4 = self.transport_bytes(&PseudoHeader::V6 {
                    src: ip.src,
                    dst: ip.dst,
                });
                let mut extensions = Vec::new();
                for (index, extension) in ip.extensions.iter().enumerate() {
                    let next = ip
                        .extensions
                        .get(index + 1)
                        .map_or(protocol, Ipv6Extension::next_header_value);
                    extensions.extend_from_slice(&extension.encode(next));
                }
                let first = ip
                    .extensions
                    .first()
                    .map_or(protocol, Ipv6Extension::next_header_value);
                let payload_len = u16::try_from(extensions.len() + l4.len()).unwrap_or(u16::MAX);
                frame.extend_from_slice(&[0x60, 0, 0, 0]);
                frame.extend_from_slice(&payload_len.to_be_bytes());
                frame.push(first);
                frame.push(ip.hop_limit);
                frame.extend_from_slice(&ip.src.octets());
                frame.extend_from_slice(&ip.dst.octets());
                frame.extend_from_slice(&extensions);
                frame.extend_from_slice(&l4);
            }
            Network::Other { ethertype } => {
                frame.extend_from_slice(&ethertype.to_be_bytes());
                if let Transport::Raw { bytes, .. } = &self.transport {
                    frame.extend_from_slice(bytes);
                }
                frame.extend_from_slice(&self.payload);
            }
        }
        frame
    }

    /// Transport header plus payload, with the checksum filled in.
    fn transport_bytes(&self, pseudo: &PseudoHeader) -> Vec<u8> {
        let mut out = Vec::new();
        match &self.transport {
            Transport::Tcp {
                sport,
                dport,
                flags,
                seq,
                ack,
            } => {
                out.extend_from_slice(&sport.to_be_bytes());
                out.extend_from_slice(&dport.to_be_bytes());
                out.extend_from_slice(&seq.to_be_bytes());
                out.extend_from_slice(&ack.to_be_bytes());
                out.extend_from_slice(&[5 << 4, *flags, 0xff, 0xff, 0, 0, 0, 0]);
                out.extend_from_slice(&self.payload);
                let sum = pseudo.checksum(proto::TCP, &out);
                out[16..18].copy_from_slice(&sum.to_be_bytes());
            }
            Transport::Udp { sport, dport } => {
                let len = u16::try_from(8 + self.payload.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&sport.to_be_bytes());
                out.extend_from_slice(&dport.to_be_bytes());
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&self.payload);
                // RFC 768: a computed zero is sent as all ones.
                let sum = match pseudo.checksum(proto::UDP, &out) {
                    0 => 0xffff,
                    sum => sum,
                };
                out[6..8].copy_from_slice(&sum.to_be_bytes());
            }
            Transport::Sctp { sport, dport, vtag } => {
                out.extend_from_slice(&sport.to_be_bytes());
                out.extend_from_slice(&dport.to_be_bytes());
                out.extend_from_slice(&vtag.to_be_bytes());
                out.extend_from_slice(&[0, 0, 0, 0]);
                out.extend_from_slice(&self.payload);
                // RFC 4960 appendix B: CRC32c, stored little-endian.
                let crc = crc32c(&out);
                out[8..12].copy_from_slice(&crc.to_le_bytes());
            }
            Transport::Icmp {
                icmp_type,
                code,
                rest,
            } => {
                out.extend_from_slice(&[*icmp_type, *code, 0, 0]);
                out.extend_from_slice(rest);
                out.extend_from_slice(&self.payload);
                let sum = internet_checksum(&out, 0);
                out[2..4].copy_from_slice(&sum.to_be_bytes());
            }
            Transport::Icmpv6 {
                icmp_type,
                code,
                rest,
            } => {
                out.extend_from_slice(&[*icmp_type, *code, 0, 0]);
                out.extend_from_slice(rest);
                out.extend_from_slice(&self.payload);
                let sum = pseudo.checksum(proto::ICMPV6, &out);
                out[2..4].copy_from_slice(&sum.to_be_bytes());
            }
            Transport::Raw { bytes, .. } => {
                out.extend_from_slice(bytes);
                out.extend_from_slice(&self.payload);
            }
        }
        out
    }
}

/// The IPv4 header with options, lengths and checksum.
fn ipv4_header(ip: &Ipv4, protocol: u8, l4_len: usize) -> Vec<u8> {
    let mut options = ip.options.clone();
    options.resize(options.len().div_ceil(4) * 4, 0);
    let header_len = 20 + options.len();
    let ihl = u8::try_from(header_len / 4).unwrap_or(0x0f) & 0x0f;
    let total = u16::try_from(header_len + l4_len).unwrap_or(u16::MAX);
    let flags_fragment = (u16::from(ip.dont_fragment) << 14)
        | (u16::from(ip.more_fragments) << 13)
        | (ip.fragment_offset & 0x1fff);
    let mut out = vec![0x40 | ihl, 0];
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&ip.id.to_be_bytes());
    out.extend_from_slice(&flags_fragment.to_be_bytes());
    out.extend_from_slice(&[ip.ttl, protocol, 0, 0]);
    out.extend_from_slice(&ip.src.octets());
    out.extend_from_slice(&ip.dst.octets());
    out.extend_from_slice(&options);
    let sum = internet_checksum(&out, 0);
    out[10..12].copy_from_slice(&sum.to_be_bytes());
    out
}

/// The addresses that enter TCP/UDP/ICMPv6 checksums.
enum PseudoHeader {
    V4 { src: Ipv4Addr, dst: Ipv4Addr },
    V6 { src: Ipv6Addr, dst: Ipv6Addr },
}

impl PseudoHeader {
    fn checksum(&self, protocol: u8, segment: &[u8]) -> u16 {
        let len = segment.len() as u64;
        let initial = match self {
            Self::V4 { src, dst } => {
                ones_sum(&src.octets()) + ones_sum(&dst.octets()) + u64::from(protocol) + len
            }
            Self::V6 { src, dst } => {
                ones_sum(&src.octets()) + ones_sum(&dst.octets()) + u64::from(protocol) + len
            }
        };
        internet_checksum(segment, initial)
    }
}

/// Sum of big-endian 16-bit words (an odd last byte is padded with zero).
fn ones_sum(bytes: &[u8]) -> u64 {
    bytes
        .chunks(2)
        .map(|pair| {
            u64::from(u16::from_be_bytes([
                pair[0],
                pair.get(1).copied().unwrap_or(0),
            ]))
        })
        .sum()
}

/// RFC 1071 internet checksum of `bytes`, starting from `initial`.
pub fn internet_checksum(bytes: &[u8], initial: u64) -> u16 {
    let mut sum = initial + ones_sum(bytes);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(u16::try_from(sum).unwrap_or(u16::MAX))
}

/// CRC32c (Castagnoli, reflected polynomial 0x82F63B78), as SCTP uses it.
pub fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    const A4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn a6() -> Ipv6Addr {
        "fd00::1".parse().unwrap()
    }
    fn b6() -> Ipv6Addr {
        "fd00::2".parse().unwrap()
    }

    #[test]
    fn ethernet_header_with_and_without_vlan() {
        let plain = Packet::udp4(A4, 1, B4, 2).build();
        assert_eq!(&plain[0..6], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(&plain[6..12], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&plain[12..14], &[0x08, 0x00]);
        let tagged = Packet::udp4(A4, 1, B4, 2).with_vlan(0x123).build();
        assert_eq!(&tagged[12..18], &[0x81, 0x00, 0x01, 0x23, 0x08, 0x00]);
        assert_eq!(tagged.len(), plain.len() + 4);
        let qinq = Packet::udp4(A4, 1, B4, 2).with_vlan(1).with_vlan(2).build();
        assert_eq!(&qinq[12..22], &[0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x08, 0]);
    }

    #[test]
    fn ipv4_udp_exact_bytes() {
        let frame = Packet::udp4(A4, 0x1234, B4, 53).with_payload(b"hi").build();
        let ip = &frame[14..34];
        assert_eq!(
            ip,
            &[
                0x45, 0, 0, 30, 0, 1, 0, 0, 64, 17, 0x66, 0xcc, 10, 0, 0, 1, 10, 0, 0, 2
            ]
        );
        // A correct header sums to zero.
        assert_eq!(internet_checksum(ip, 0), 0);
        let udp = &frame[34..];
        assert_eq!(&udp[..6], &[0x12, 0x34, 0, 53, 0, 10]);
        assert_eq!(&udp[8..], b"hi");
        // Pseudo-header check: recomputing over the segment including its checksum gives 0.
        let pseudo = PseudoHeader::V4 { src: A4, dst: B4 };
        assert_eq!(pseudo.checksum(17, udp), 0);
    }

    #[test]
    fn ipv4_options_and_fragments() {
        let mut ip = Ipv4::new(A4, B4);
        ip.options = vec![0x94, 0x04, 0, 0, 1]; // router alert + 1 byte, padded to 8
        ip.fragment_offset = 0;
        ip.more_fragments = true;
        let frame = Packet::new(
            Network::V4(ip.clone()),
            Transport::Udp { sport: 1, dport: 2 },
        )
        .build();
        assert_eq!(frame[14], 0x47); // IHL 7 = 28 bytes
        assert_eq!(&frame[20..22], &[0x20, 0x00]); // MF, offset 0
        assert_eq!(&frame[34..42], &[0x94, 4, 0, 0, 1, 0, 0, 0]);
        assert_eq!(internet_checksum(&frame[14..42], 0), 0);
        ip.options.clear();
        ip.more_fragments = false;
        ip.fragment_offset = 185; // 1480 bytes
        let later = Packet::new(
            Network::V4(ip),
            Transport::Raw {
                proto: proto::UDP,
                bytes: vec![0xaa; 8],
            },
        )
        .build();
        assert_eq!(&later[20..22], &[0x00, 185]);
        assert_eq!(later[23], 17);
        assert_eq!(&later[34..], &[0xaa; 8]);
    }

    #[test]
    fn tcp_header_exact_bytes() {
        let frame = Packet::tcp4(A4, 40000, B4, 80).build();
        let tcp = &frame[34..];
        assert_eq!(tcp.len(), 20);
        assert_eq!(&tcp[0..4], &[0x9c, 0x40, 0, 80]);
        assert_eq!(&tcp[4..8], &[0, 0, 0, 1]);
        assert_eq!(tcp[12], 0x50);
        assert_eq!(tcp[13], tcp_flags::SYN);
        assert_eq!(PseudoHeader::V4 { src: A4, dst: B4 }.checksum(6, tcp), 0);
        let reply = Packet::tcp4(A4, 40000, B4, 80).reply().build();
        assert_eq!(&reply[26..30], &[10, 0, 0, 2]);
        assert_eq!(&reply[34..38], &[0, 80, 0x9c, 0x40]);
        assert_eq!(reply[47], tcp_flags::SYN | tcp_flags::ACK);
    }

    #[test]
    fn sctp_uses_crc32c() {
        // RFC 3720 B.4 test vector: 32 bytes of zeros -> 0x8A9136AA.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        let frame = Packet::sctp4(A4, 5000, B4, 6000).build();
        let sctp = &frame[34..];
        assert_eq!(&sctp[0..8], &[0x13, 0x88, 0x17, 0x70, 0, 0, 0, 0]);
        let mut zeroed = sctp.to_vec();
        zeroed[8..12].fill(0);
        assert_eq!(&sctp[8..12], &crc32c(&zeroed).to_le_bytes());
        assert_eq!(frame[23], 132);
    }

    #[test]
    fn icmp_echo_exact_bytes() {
        let frame = Packet::icmp4(A4, B4, 8, 0, echo_rest(0x1234, 1)).build();
        let icmp = &frame[34..];
        assert_eq!(icmp, &[8, 0, 0xe5, 0xca, 0x12, 0x34, 0, 1]);
        assert_eq!(internet_checksum(icmp, 0), 0);
        let reply = Packet::icmp4(A4, B4, 8, 0, echo_rest(0x1234, 1)).reply();
        assert!(matches!(
            reply.transport,
            Transport::Icmp { icmp_type: 0, .. }
        ));
    }

    #[test]
    fn ipv6_header_and_icmpv6() {
        let frame = Packet::icmp6(a6(), b6(), 128, 0, echo_rest(7, 1)).build();
        assert_eq!(&frame[12..14], &[0x86, 0xdd]);
        let ip = &frame[14..54];
        assert_eq!(&ip[0..8], &[0x60, 0, 0, 0, 0, 8, 58, 64]);
        assert_eq!(&ip[8..24], &a6().octets());
        assert_eq!(&ip[24..40], &b6().octets());
        let icmp = &frame[54..];
        assert_eq!(icmp[0], 128);
        assert_eq!(
            PseudoHeader::V6 {
                src: a6(),
                dst: b6()
            }
            .checksum(58, icmp),
            0
        );
    }

    #[test]
    fn ipv6_extension_chain_exact_bytes() {
        let frame = Packet::udp6(a6(), 1, b6(), 2)
            .with_extension(Ipv6Extension::HopByHop(vec![5, 2, 0, 0])) // router alert
            .with_extension(Ipv6Extension::Routing {
                routing_type: 4,
                segments_left: 0,
                data: vec![],
            })
            .with_extension(Ipv6Extension::DestinationOptions(vec![]))
            .with_extension(Ipv6Extension::Fragment {
                offset: 0,
                more: true,
                id: 0xdeadbeef,
            })
            .with_extension(Ipv6Extension::Ah {
                spi: 0x100,
                seq: 1,
                icv: vec![0xcc; 12],
            })
            .build();
        assert_eq!(frame[14 + 6], proto::HOPOPTS);
        let ext = &frame[54..];
        // Hop-by-hop: next routing, len 0, router alert, PadN(0).
        assert_eq!(&ext[0..8], &[43, 0, 5, 2, 0, 0, 1, 0]);
        // Routing: next dstopts, len 0, type 4, segments 0, reserved.
        assert_eq!(&ext[8..16], &[60, 0, 4, 0, 0, 0, 0, 0]);
        // Destination options: next fragment, len 0, PadN(4).
        assert_eq!(&ext[16..24], &[44, 0, 1, 4, 0, 0, 0, 0]);
        // Fragment: next AH, offset 0 + M, id.
        assert_eq!(&ext[24..32], &[51, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef]);
        // AH: next UDP, len (24 / 4) - 2 = 4.
        assert_eq!(&ext[32..36], &[17, 4, 0, 0]);
        assert_eq!(&ext[36..44], &[0, 0, 1, 0, 0, 0, 0, 1]);
        assert_eq!(&ext[56..60], &[0, 1, 0, 2]);
        // Payload length counts extensions and UDP.
        assert_eq!(&frame[18..20], &(56u16 + 8).to_be_bytes());
    }

    #[test]
    fn flows_become_first_packets_or_typed_errors() {
        let v4 = |a| IpAddr::V4(a);
        let tcp = Packet::for_flow(v4(A4), v4(B4), FlowProtocol::Tcp, 8080, 40000).unwrap();
        assert_eq!(tcp, Packet::tcp4(A4, 40000, B4, 8080));
        let ping = Packet::for_flow(v4(A4), v4(B4), FlowProtocol::Icmp, 8, 7).unwrap();
        assert_eq!(ping, Packet::icmp4(A4, B4, 8, 0, echo_rest(7, 1)));
        let ping6 =
            Packet::for_flow(a6().into(), b6().into(), FlowProtocol::Icmpv6, 128, 7).unwrap();
        assert_eq!(ping6, Packet::icmp6(a6(), b6(), 128, 0, echo_rest(7, 1)));
        let sctp6 = Packet::for_flow(a6().into(), b6().into(), FlowProtocol::Sctp, 9, 1).unwrap();
        assert_eq!(sctp6, Packet::sctp6(a6(), 1, b6(), 9));
        assert!(matches!(
            Packet::for_flow(v4(A4), b6().into(), FlowProtocol::Udp, 53, 1),
            Err(PacketError::MixedFamilies { .. })
        ));
        assert!(matches!(
            Packet::for_flow(a6().into(), b6().into(), FlowProtocol::Icmp, 8, 1),
            Err(PacketError::IcmpFamily { .. })
        ));
        assert!(matches!(
            Packet::for_flow(v4(A4), v4(B4), FlowProtocol::Icmpv6, 128, 1),
            Err(PacketError::IcmpFamily { .. })
        ));
        assert_eq!(
            Packet::for_flow(v4(A4), v4(B4), FlowProtocol::Icmp, 300, 1),
            Err(PacketError::IcmpTypeTooLarge(300))
        );
    }

    #[test]
    fn non_ip_frames_carry_their_ethertype() {
        let frame = Packet::non_ip(ethertype::ARP, vec![0, 1, 8, 0]).build();
        assert_eq!(&frame[12..], &[0x08, 0x06, 0, 1, 8, 0]);
    }
}
