//! `porin_events`: the verdict event records the programs write into the
//! ring buffer for an agent (`DATAPATH.md` §2.6).
//!
//! The ring buffer itself has no key and no value (`BPF_MAP_TYPE_RINGBUF`);
//! each record is one [`Event`]. The struct is in the object's BTF (as
//! `porin_event`) so `bpftool btf dump` shows it, and its size is in
//! `porin.h`.

use super::{AbiError, CT_ADDR_LEN, abi_struct};
use crate::maps::{Direction, Verdict};

abi_struct! {
    /// `porin_event`: one verdict, written when the packet's verdict is
    /// decided and `porin_config.events` asks for it.
    pub struct Event = "porin_event" {
        /// `bpf_ktime_get_coarse_ns()` when the record was written (the
        /// monotonic clock at the last tick; read only when emitting).
        timestamp_ns @ OFF_TIMESTAMP: u64 = Le,
        /// `skb->ifindex`: the device whose hook ran the program.
        ifindex @ OFF_IFINDEX: u32 = Le,
        /// The peer's security identity from the ipcache (0: the packet was
        /// decided before the ipcache lookup, e.g. a malformed header).
        identity @ OFF_IDENTITY: u32 = Le,
        /// The peer address: IPv6 16 bytes; IPv4 in the first 4 bytes, then
        /// 12 zero bytes (not v4-mapped); all zero before L3 was parsed.
        peer_addr @ OFF_PEER_ADDR: [u8; CT_ADDR_LEN] = Raw,
        /// The policy destination port in network order (ICMP: bytes
        /// `[0, type]`; 0 for protocols without ports or before L4).
        dport_be @ OFF_DPORT: u16 = Be,
        /// Policy direction: 0 ingress (`porin_to_endpoint`), 1 egress
        /// (`porin_from_endpoint`).
        direction @ OFF_DIRECTION: u8 = Raw,
        /// [`Event::ALLOW`] or [`Event::DROP`].
        verdict @ OFF_VERDICT: u8 = Raw,
        /// The verdict ([`Verdict::index`]: the slot of the counter the
        /// packet moved within its direction's block of `porin_verdicts`,
        /// `DATAPATH.md` §2.5): the drop or pass reason.
        reason @ OFF_REASON: u8 = Raw,
        /// IP protocol (0 before L3 was parsed).
        proto @ OFF_PROTO: u8 = Raw,
        /// Address family: 4, 6, or 0 (not IP, or decided before L3).
        family @ OFF_FAMILY: u8 = Raw,
        /// Zero.
        pad @ OFF_PAD: u8 = Raw,
    }
}

impl Event {
    /// `verdict` of a passed packet (`TC_ACT_OK`).
    pub const ALLOW: u8 = 0;
    /// `verdict` of a dropped packet (`TC_ACT_SHOT`).
    pub const DROP: u8 = 1;

    /// Decodes one ring-buffer record (exactly [`Event::SIZE`] bytes),
    /// rejecting values the programs never write.
    pub fn decode(bytes: &[u8]) -> Result<Event, AbiError> {
        let event = Event::from_bytes(bytes)?;
        let known = Verdict::ALL
            .iter()
            .find(|v| v.index() == u32::from(event.reason));
        let consistent = known
            .is_some_and(|v| u8::from(!v.passes()) == event.verdict && event.verdict <= Self::DROP);
        if !consistent || event.direction > 1 || ![0, 4, 6].contains(&event.family) {
            return Err(AbiError::BadEvent {
                verdict: event.verdict,
                reason: event.reason,
                direction: event.direction,
                family: event.family,
            });
        }
        Ok(event)
    }

    /// The verdict counter this event reports.
    pub fn reason_verdict(&self) -> Option<Verdict> {
        Verdict::ALL
            .into_iter()
            .find(|v| v.index() == u32::from(self.reason))
    }

    /// The policy direction of the program that wrote the event.
    pub fn policy_direction(&self) -> Direction {
        if self.direction == 0 {
            Direction::Ingress
        } else {
            Direction::Egress
        }
    }

    /// The peer address, if the packet was IP.
    pub fn peer(&self) -> Option<std::net::IpAddr> {
        match self.family {
            4 => {
                let [a, b, c, d, ..] = self.peer_addr;
                Some(std::net::Ipv4Addr::new(a, b, c, d).into())
            }
            6 => Some(std::net::Ipv6Addr::from(self.peer_addr).into()),
            _ => None,
        }
    }
}
