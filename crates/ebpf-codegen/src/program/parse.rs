//! Packet parsing: Ethernet (+ one 802.1Q tag), IPv4, IPv6 with its
//! extension headers, and the L4 fields policy needs. Every rule here is a
//! line of `DATAPATH.md` §4.

use super::hdr::{eth, icmp, ipv4, ipv6, ports, skb};
use super::{Gen, ethertype, frame, off};
use crate::abi::{
    CtKey, IPV4_ADDR_LEN, IPV6_ADDR_LEN, Ipcache4Key, Ipcache6Key, IpcacheValue, PolicyKey,
};
use crate::asm::Label;
use crate::insn::{AluOp, Cond, Endian, Reg, Size, SwapBits};
use crate::maps::{Direction, Verdict, names};

/// IP protocol numbers.
pub(super) mod proto {
    pub const ICMP: i32 = 1;
    pub const TCP: i32 = 6;
    pub const UDP: i32 = 17;
    pub const ICMPV6: i32 = 58;
    pub const SCTP: i32 = 132;
    pub const IGMP: i32 = 2;
    pub const VRRP: i32 = 112;
}

/// IPv6 extension headers (Cilium `ipv6_hdrlen_offset`, `bpf/lib/ipv6.h`).
mod nexthdr {
    pub const HOP: i32 = 0;
    pub const ROUTING: i32 = 43;
    pub const FRAGMENT: i32 = 44;
    pub const AUTH: i32 = 51;
    pub const NONE: i32 = 59;
    pub const DEST: i32 = 60;
}

/// Cilium's `IPV6_MAX_HEADERS`: iterations of the extension-header walk.
/// Each iteration either finds the L4 header or skips one extension; after
/// the last one the packet is dropped, so at most 3 extensions pass.
const IPV6_MAX_HEADERS: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    /// The identity of a peer address the ipcache does not hold: the
    /// family's world identity of a dual-stack agent, as Cilium's datapath
    /// assigns on a miss (`WORLD_IPV4_ID` 9 / `WORLD_IPV6_ID` 10 in
    /// `bpf/bpf_lxc.c` `handle_ipv4_from_lxc` / `handle_ipv6_from_lxc`),
    /// not reserved:world (2), which no dual-stack packet carries and which
    /// a `fromCIDR: 0.0.0.0/0` deny (reserved:world-ipv4) would miss.
    const fn world_identity(self) -> i32 {
        match self {
            Family::V4 => WORLD_IPV4_ID,
            Family::V6 => WORLD_IPV6_ID,
        }
    }
}

/// `WORLD_IPV4_ID` / `WORLD_IPV6_ID` of a dual-stack agent, as immediates;
/// the compiler's numbering (`pkg/identity/numericidentity.go`) is checked
/// at build time.
const WORLD_IPV4_ID: i32 = 9;
const WORLD_IPV6_ID: i32 = 10;
const _: () = assert!(
    porin_compiler::identity::Identity::WORLD_IPV4.get() == WORLD_IPV4_ID as u32
        && porin_compiler::identity::Identity::WORLD_IPV6.get() == WORLD_IPV6_ID as u32
);

impl Gen<'_> {
    /// Ethernet and VLAN: jumps to `ipv4` / `ipv6` with
    /// `frame::L3_OFFSET` set, or ends in a verdict.
    pub(super) fn ethernet(&mut self, ipv4: Label, ipv6: Label) {
        let unsupported = self.verdict(Verdict::DroppedUnsupportedL2);
        let non_ip = self.verdict(Verdict::PassedNonIp);
        let untagged = self.a.new_label();

        self.a
            .store_imm(Size::U32, Reg::R10, frame::L3_OFFSET, eth::HEADER_LEN);
        self.load_bytes(None, eth::ETHERTYPE, frame::HEADER, eth::ETHERTYPE_LEN);
        self.ethertype_to_r7();
        self.a.jmp_imm(Cond::Ne, Reg::R7, ethertype::VLAN, untagged);
        // One 802.1Q tag: the inner ethertype follows the 4-byte tag.
        self.a.store_imm(
            Size::U32,
            Reg::R10,
            frame::L3_OFFSET,
            eth::HEADER_LEN + eth::VLAN_TAG_LEN,
        );
        self.load_bytes(
            None,
            eth::ETHERTYPE + eth::VLAN_TAG_LEN,
            frame::HEADER,
            eth::ETHERTYPE_LEN,
        );
        self.ethertype_to_r7();
        self.a
            .jmp_imm(Cond::Eq, Reg::R7, ethertype::VLAN, unsupported);

        self.a.bind(untagged);
        for stacked in [
            ethertype::QINQ,
            ethertype::MPLS_UC,
            ethertype::MPLS_MC,
            ethertype::PPPOE_SESSION,
        ] {
            self.a.jmp_imm(Cond::Eq, Reg::R7, stacked, unsupported);
        }
        self.a.jmp_imm(Cond::Eq, Reg::R7, ethertype::IPV4, ipv4);
        self.a.jmp_imm(Cond::Eq, Reg::R7, ethertype::IPV6, ipv6);
        self.a.ja(non_ip);
    }

    fn ethertype_to_r7(&mut self) {
        self.a.load(Size::U16, Reg::R7, Reg::R10, frame::HEADER);
        self.a.endian(Endian::Big, SwapBits::B16, Reg::R7);
    }

    /// IPv4 header, the ipcache key, then L4; ends at `track`.
    pub(super) fn ipv4(&mut self, track: Label) {
        let malformed = self.verdict(Verdict::DroppedMalformed);
        let fragment = self.verdict(Verdict::DroppedFragment);
        const H: i16 = frame::HEADER;

        self.load_bytes(Some(frame::L3_OFFSET), 0, H, ipv4::MIN_LEN);
        let a = &mut self.a;
        a.load(Size::U8, Reg::R1, Reg::R10, H);
        a.mov64_reg(Reg::R2, Reg::R1);
        a.alu64_imm(AluOp::Rsh, Reg::R2, ipv4::VERSION_SHIFT);
        a.jmp_imm(Cond::Ne, Reg::R2, ipv4::VERSION, malformed);
        a.alu64_imm(AluOp::And, Reg::R1, ipv4::IHL_MASK);
        a.jmp_imm(Cond::Lt, Reg::R1, ipv4::MIN_IHL, malformed);
        a.alu64_imm(AluOp::Lsh, Reg::R1, ipv4::IHL_SHIFT);
        a.load(Size::U32, Reg::R2, Reg::R10, frame::L3_OFFSET);
        a.alu64_reg(AluOp::Add, Reg::R2, Reg::R1);
        a.store(Size::U32, Reg::R10, frame::L4_OFFSET, Reg::R2);
        // The options must be in the packet too. `bpf_skb_load_bytes` of
        // their last byte succeeds exactly when `offset + 1 <= skb->len`, so
        // comparing with `skb->len` is the same check without a helper call.
        a.load(Size::U32, Reg::R1, Reg::R6, skb::LEN);
        a.jmp_reg(Cond::Lt, Reg::R1, Reg::R2, malformed);

        let a = &mut self.a;
        // Fragment offset (13 bits after the flags) must be zero.
        a.load(Size::U16, Reg::R1, Reg::R10, H + ipv4::FRAG_OFF);
        a.endian(Endian::Big, SwapBits::B16, Reg::R1);
        a.alu64_imm(AluOp::And, Reg::R1, ipv4::FRAG_OFFSET_MASK);
        a.jmp_imm(Cond::Ne, Reg::R1, 0, fragment);

        a.load(Size::U8, Reg::R1, Reg::R10, H + ipv4::PROTO);
        a.store(Size::U8, Reg::R10, frame::PROTO, Reg::R1);
        self.addresses_and_ipcache_key(Family::V4);
        self.l4(Family::V4, track);
    }

    /// IPv6 header, the ipcache key, extension headers, then L4; ends at
    /// `track`.
    pub(super) fn ipv6(&mut self, track: Label) {
        let malformed = self.verdict(Verdict::DroppedMalformed);
        let fragment = self.verdict(Verdict::DroppedFragment);
        let extensions = self.verdict(Verdict::DroppedIpv6Extensions);
        const H: i16 = frame::HEADER;

        self.load_bytes(Some(frame::L3_OFFSET), 0, H, ipv6::LEN);
        let a = &mut self.a;
        a.load(Size::U8, Reg::R1, Reg::R10, H);
        a.alu64_imm(AluOp::Rsh, Reg::R1, ipv6::VERSION_SHIFT);
        a.jmp_imm(Cond::Ne, Reg::R1, ipv6::VERSION, malformed);
        a.load(Size::U8, Reg::R1, Reg::R10, H + ipv6::HOP_LIMIT);
        a.store(Size::U8, Reg::R10, frame::HOP_LIMIT, Reg::R1);
        a.load(Size::U8, Reg::R1, Reg::R10, H + ipv6::NEXT_HEADER);
        a.store(Size::U8, Reg::R10, frame::PROTO, Reg::R1);
        self.addresses_and_ipcache_key(Family::V6);

        let a = &mut self.a;
        a.load(Size::U32, Reg::R1, Reg::R10, frame::L3_OFFSET);
        a.alu64_imm(AluOp::Add, Reg::R1, ipv6::LEN);
        a.store(Size::U32, Reg::R10, frame::L4_OFFSET, Reg::R1);

        // The extension-header walk, unrolled.
        let found = self.a.new_label();
        for _ in 0..IPV6_MAX_HEADERS {
            let options = self.a.new_label();
            let auth = self.a.new_label();
            let frag = self.a.new_label();
            let advance = self.a.new_label();
            let a = &mut self.a;
            a.load(Size::U8, Reg::R1, Reg::R10, frame::PROTO);
            a.jmp_imm(Cond::Eq, Reg::R1, nexthdr::NONE, extensions);
            a.jmp_imm(Cond::Eq, Reg::R1, nexthdr::HOP, options);
            a.jmp_imm(Cond::Eq, Reg::R1, nexthdr::ROUTING, options);
            a.jmp_imm(Cond::Eq, Reg::R1, nexthdr::DEST, options);
            a.jmp_imm(Cond::Eq, Reg::R1, nexthdr::AUTH, auth);
            a.jmp_imm(Cond::Eq, Reg::R1, nexthdr::FRAGMENT, frag);
            a.ja(found);

            // Options-style headers: length in 8-byte units, excluding the first 8.
            self.a.bind(options);
            self.load_bytes(
                Some(frame::L4_OFFSET),
                0,
                frame::SCRATCH,
                ipv6::EXT_PREFIX_LEN,
            );
            let a = &mut self.a;
            a.load(Size::U8, Reg::R2, Reg::R10, frame::SCRATCH + ipv6::EXT_LEN);
            a.alu64_imm(AluOp::Add, Reg::R2, ipv6::OPTIONS_LEN_BIAS);
            a.alu64_imm(AluOp::Lsh, Reg::R2, ipv6::OPTIONS_LEN_SHIFT);
            a.ja(advance);

            // AH: length in 4-byte units, excluding the first 8 bytes.
            self.a.bind(auth);
            self.load_bytes(
                Some(frame::L4_OFFSET),
                0,
                frame::SCRATCH,
                ipv6::EXT_PREFIX_LEN,
            );
            let a = &mut self.a;
            a.load(Size::U8, Reg::R2, Reg::R10, frame::SCRATCH + ipv6::EXT_LEN);
            a.alu64_imm(AluOp::Add, Reg::R2, ipv6::AH_LEN_BIAS);
            a.alu64_imm(AluOp::Lsh, Reg::R2, ipv6::AH_LEN_SHIFT);
            a.ja(advance);

            // Fragment header: 8 bytes; a non-zero offset is a non-first fragment.
            self.a.bind(frag);
            self.load_bytes(
                Some(frame::L4_OFFSET),
                0,
                frame::SCRATCH,
                ipv6::FRAG_PREFIX_LEN,
            );
            let a = &mut self.a;
            a.load(
                Size::U16,
                Reg::R1,
                Reg::R10,
                frame::SCRATCH + ipv6::FRAG_OFF,
            );
            a.endian(Endian::Big, SwapBits::B16, Reg::R1);
            a.alu64_imm(AluOp::And, Reg::R1, ipv6::FRAG_OFFSET_MASK);
            a.jmp_imm(Cond::Ne, Reg::R1, 0, fragment);
            a.mov64_imm(Reg::R2, ipv6::FRAG_HEADER_LEN);

            // r2 = header length; the next header is the first byte.
            a.bind(advance);
            a.load(Size::U8, Reg::R1, Reg::R10, frame::SCRATCH);
            a.store(Size::U8, Reg::R10, frame::PROTO, Reg::R1);
            a.load(Size::U32, Reg::R1, Reg::R10, frame::L4_OFFSET);
            a.alu64_reg(AluOp::Add, Reg::R1, Reg::R2);
            a.store(Size::U32, Reg::R10, frame::L4_OFFSET, Reg::R1);
        }
        self.a.ja(extensions);
        self.a.bind(found);
        self.l4(Family::V6, track);
    }

    /// From the L3 header at `frame::HEADER`: the conntrack key's family and
    /// addresses (IPv4 fills the first 4 bytes of each; the zeroed frame
    /// supplies the rest), then the ipcache key of the peer's address (its
    /// lookup is [`Gen::peer_identity`], after conntrack).
    fn addresses_and_ipcache_key(&mut self, family: Family) {
        const H: i16 = frame::HEADER;
        let (saddr, daddr, len, ct_family) = match family {
            Family::V4 => (ipv4::SADDR, ipv4::DADDR, IPV4_ADDR_LEN, CtKey::FAMILY_V4),
            Family::V6 => (ipv6::SADDR, ipv6::DADDR, IPV6_ADDR_LEN, CtKey::FAMILY_V6),
        };
        let (prefixlen_at, addr_at, full_prefix) = match family {
            Family::V4 => (
                Ipcache4Key::OFF_PREFIXLEN,
                Ipcache4Key::OFF_ADDR,
                Ipcache4Key::FULL_PREFIX,
            ),
            Family::V6 => (
                Ipcache6Key::OFF_PREFIXLEN,
                Ipcache6Key::OFF_ADDR,
                Ipcache6Key::FULL_PREFIX,
            ),
        };
        self.a.store_imm(
            Size::U8,
            Reg::R10,
            frame::CT_KEY + off(CtKey::OFF_FAMILY),
            i32::from(ct_family),
        );
        // The conntrack key orders the tuple by role: the peer first.
        let (peer, endpoint) = match self.direction {
            Direction::Egress => (daddr, saddr),
            Direction::Ingress => (saddr, daddr),
        };
        self.copy_stack(
            H + peer,
            frame::CT_KEY + off(CtKey::OFF_PEER_ADDR),
            off(len),
        );
        self.copy_stack(
            H + endpoint,
            frame::CT_KEY + off(CtKey::OFF_EP_ADDR),
            off(len),
        );
        self.a.store_imm(
            Size::U32,
            Reg::R10,
            frame::IPCACHE_KEY + off(prefixlen_at),
            full_prefix as i32,
        );
        self.copy_stack(H + peer, frame::IPCACHE_KEY + off(addr_at), off(len));
    }

    /// `frame::IDENTITY` = the peer's identity, looked up once the ipcache
    /// key is built (`addresses_and_ipcache_key`), where it is needed: before
    /// policy and for an event. A reply passes without it. `always`: the
    /// caller knows the key is built and the identity not yet looked up
    /// (the policy path); otherwise a built key and `IDENTITY_DONE` are
    /// checked first, and a frame without a key keeps identity 0.
    pub(super) fn peer_identity(&mut self, always: bool) {
        let done = self.a.new_label();
        let v6 = self.a.new_label();
        let set = self.a.new_label();
        let a = &mut self.a;
        if !always {
            a.load(Size::U32, Reg::R1, Reg::R10, frame::IDENTITY_DONE);
            a.jmp_imm(Cond::Ne, Reg::R1, 0, done);
            a.load(
                Size::U32,
                Reg::R1,
                Reg::R10,
                frame::IPCACHE_KEY + off(Ipcache4Key::OFF_PREFIXLEN),
            );
            a.jmp_imm(Cond::Eq, Reg::R1, 0, done);
        }
        a.load(
            Size::U8,
            Reg::R1,
            Reg::R10,
            frame::CT_KEY + off(CtKey::OFF_FAMILY),
        );
        a.jmp_imm(Cond::Eq, Reg::R1, i32::from(CtKey::FAMILY_V6), v6);
        self.identity_from(names::IPCACHE4_HOSTS, names::IPCACHE4, Family::V4);
        self.a.ja(set);
        self.a.bind(v6);
        self.identity_from(names::IPCACHE6_HOSTS, names::IPCACHE6, Family::V6);
        let a = &mut self.a;
        a.bind(set);
        a.store_imm(Size::U32, Reg::R10, frame::IDENTITY_DONE, 1);
        a.bind(done);
    }

    /// `frame::IDENTITY` = the ipcache's identity for the full-length key
    /// `frame::IPCACHE_KEY`: the host hash first (a /32 or /128 is the
    /// longest match there can be), then the trie's longest prefix, else
    /// the family's world identity (9 / 10).
    fn identity_from(&mut self, hosts: &str, trie: &str, family: Family) {
        let have = self.a.new_label();
        let found = self.a.new_label();
        self.lookup(hosts, frame::IPCACHE_KEY);
        self.a.jmp_imm(Cond::Ne, Reg::R0, 0, found);
        self.lookup(trie, frame::IPCACHE_KEY);
        let a = &mut self.a;
        a.mov64_imm(Reg::R1, family.world_identity());
        a.jmp_imm(Cond::Eq, Reg::R0, 0, have);
        a.bind(found);
        a.load(Size::U32, Reg::R1, Reg::R0, off(IpcacheValue::OFF_IDENTITY));
        a.bind(have);
        a.store(Size::U32, Reg::R10, frame::IDENTITY, Reg::R1);
    }

    /// Where the packet's source and destination port go in the conntrack
    /// key (ordered by role: the peer's port first).
    fn ct_port_slots(&self) -> (i16, i16) {
        let peer = frame::CT_KEY + off(CtKey::OFF_PEER_PORT);
        let endpoint = frame::CT_KEY + off(CtKey::OFF_EP_PORT);
        match self.direction {
            Direction::Ingress => (peer, endpoint),
            Direction::Egress => (endpoint, peer),
        }
    }

    /// L4 fields: the policy dport (`PolicyKey::OFF_DPORT`, BE), the
    /// conntrack ports (BE, by role) and the TCP flags. Protocols without
    /// ports keep the zeroes of the prologue.
    fn l4(&mut self, family: Family, track: Label) {
        let (ct_sport, ct_dport) = self.ct_port_slots();
        let tcp = self.a.new_label();
        let ports = self.a.new_label();
        let have_ports = self.a.new_label();
        let icmp = self.a.new_label();
        let a = &mut self.a;
        a.load(Size::U8, Reg::R1, Reg::R10, frame::PROTO);
        a.jmp_imm(Cond::Eq, Reg::R1, proto::TCP, tcp);
        a.jmp_imm(Cond::Eq, Reg::R1, proto::UDP, ports);
        a.jmp_imm(Cond::Eq, Reg::R1, proto::SCTP, ports);
        let icmp_proto = match family {
            Family::V4 => proto::ICMP,
            Family::V6 => proto::ICMPV6,
        };
        a.jmp_imm(Cond::Eq, Reg::R1, icmp_proto, icmp);
        // Protocols without ports: only VRRP and IGMP, and only with
        // Cilium's enable-extended-ip-protocols, reach policy (port 0, the
        // prologue's zeroes). Cilium's conntrack drops every other protocol
        // before policy (DROP_CT_UNKNOWN_PROTO, bpf/lib/conntrack.h), ICMP
        // in IPv6 and ICMPv6 in IPv4 included; counted as malformed, the
        // counter of the conntrack's other refusal (DROP_CT_INVALID_HDR).
        if self.config.extended_ip_protocols {
            a.jmp_imm(Cond::Eq, Reg::R1, proto::VRRP, track);
            a.jmp_imm(Cond::Eq, Reg::R1, proto::IGMP, track);
        }
        let unknown = self.verdict(Verdict::DroppedMalformed);
        self.a.ja(unknown);

        // TCP: the ports and the flags byte (Cilium's conntrack loads the
        // flags too and drops a header without them, DROP_CT_INVALID_HDR).
        self.a.bind(tcp);
        self.load_bytes(Some(frame::L4_OFFSET), 0, frame::HEADER, ports::TCP_LEN);
        let a = &mut self.a;
        a.load(
            Size::U8,
            Reg::R1,
            Reg::R10,
            frame::HEADER + ports::TCP_FLAGS,
        );
        a.store(Size::U32, Reg::R10, frame::TCP_FLAGS, Reg::R1);
        a.load(Size::U32, Reg::R1, Reg::R10, frame::HEADER);
        a.store(Size::U32, Reg::R10, frame::SCRATCH, Reg::R1);
        a.ja(have_ports);

        // UDP/SCTP: source and destination port, kept in network order.
        self.a.bind(ports);
        self.load_bytes(Some(frame::L4_OFFSET), 0, frame::SCRATCH, ports::LEN);
        let a = &mut self.a;
        a.bind(have_ports);
        a.load(Size::U16, Reg::R1, Reg::R10, frame::SCRATCH + ports::SPORT);
        a.store(Size::U16, Reg::R10, ct_sport, Reg::R1);
        a.load(Size::U16, Reg::R1, Reg::R10, frame::SCRATCH + ports::DPORT);
        a.store(Size::U16, Reg::R10, ct_dport, Reg::R1);
        a.store(
            Size::U16,
            Reg::R10,
            frame::POLICY_KEY + off(PolicyKey::OFF_DPORT),
            Reg::R1,
        );
        a.ja(track);

        // ICMP / ICMPv6: the type is the policy "port" (bytes [0, type]).
        // Cilium's `__policy_can_access` loads the whole 8-byte `icmphdr`
        // for ICMPv4 (DROP_INVALID if short) and only the type byte for
        // ICMPv6; echo identifiers need 8 bytes either way.
        self.a.bind(icmp);
        let header = match family {
            Family::V4 => icmp::HEADER_LEN,
            Family::V6 => icmp::TYPE_LEN,
        };
        self.load_bytes(Some(frame::L4_OFFSET), 0, frame::SCRATCH, header);
        let echo = self.a.new_label();
        let a = &mut self.a;
        a.load(Size::U8, Reg::R1, Reg::R10, frame::SCRATCH + icmp::TYPE);
        match family {
            Family::V4 => {
                if self.config.allow_icmp_frag_needed {
                    let not_frag_needed = self.a.new_label();
                    let allow = self.verdict(Verdict::AllowedIcmpFragNeeded);
                    let a = &mut self.a;
                    a.jmp_imm(Cond::Ne, Reg::R1, icmp::V4_DEST_UNREACH, not_frag_needed);
                    a.load(Size::U8, Reg::R2, Reg::R10, frame::SCRATCH + icmp::CODE);
                    a.jmp_imm(Cond::Eq, Reg::R2, icmp::V4_FRAG_NEEDED, allow);
                    a.bind(not_frag_needed);
                }
                self.a
                    .jmp_imm(Cond::Eq, Reg::R1, icmp::V4_ECHO_REQUEST, echo);
                self.a.jmp_imm(Cond::Eq, Reg::R1, icmp::V4_ECHO_REPLY, echo);
            }
            Family::V6 => {
                if self.config.allow_ipv6_ndp {
                    let not_ndp = self.a.new_label();
                    let pass = self.verdict(Verdict::PassedIpv6Ndp);
                    let a = &mut self.a;
                    // Neighbour solicitation/advertisement only, as Cilium's
                    // `is_icmp6_ndp` (bpf/lib/icmp6.h); RS, RA and redirects go
                    // through policy.
                    a.jmp_imm(Cond::Lt, Reg::R1, icmp::V6_NEIGHBOUR_SOLICITATION, not_ndp);
                    a.jmp_imm(Cond::Gt, Reg::R1, icmp::V6_NEIGHBOUR_ADVERTISEMENT, not_ndp);
                    a.load(Size::U8, Reg::R2, Reg::R10, frame::HOP_LIMIT);
                    a.jmp_imm(Cond::Eq, Reg::R2, icmp::NDP_HOP_LIMIT, pass);
                    a.bind(not_ndp);
                }
                self.a
                    .jmp_imm(Cond::Eq, Reg::R1, icmp::V6_ECHO_REQUEST, echo);
                self.a.jmp_imm(Cond::Eq, Reg::R1, icmp::V6_ECHO_REPLY, echo);
            }
        }
        let a = &mut self.a;
        // Not an echo: conntrack ports (0, type).
        a.store(
            Size::U8,
            Reg::R10,
            frame::POLICY_KEY + off(PolicyKey::OFF_ICMP_TYPE),
            Reg::R1,
        );
        // The type in the low byte of the packet's destination-port role.
        a.store(Size::U8, Reg::R10, ct_dport + 1, Reg::R1);
        a.ja(track);

        // Echo request/reply: both conntrack ports are the identifier, so
        // the reversed tuple of a reply is the request's tuple.
        a.bind(echo);
        a.store(
            Size::U8,
            Reg::R10,
            frame::POLICY_KEY + off(PolicyKey::OFF_ICMP_TYPE),
            Reg::R1,
        );
        self.load_bytes(Some(frame::L4_OFFSET), 0, frame::SCRATCH, icmp::HEADER_LEN);
        let a = &mut self.a;
        a.load(Size::U16, Reg::R1, Reg::R10, frame::SCRATCH + icmp::ECHO_ID);
        a.store(Size::U16, Reg::R10, ct_sport, Reg::R1);
        a.store(Size::U16, Reg::R10, ct_dport, Reg::R1);
        a.ja(track);
    }
}
