//! Policy-map keys (`types.Key` in Cilium's `pkg/policy/types/types.go`).

use std::fmt;

use crate::identity::Identity;
use crate::ports::{MaskedPort, prefix_mask};

use super::error::KeyError;

/// Traffic direction of a policy key (Cilium's `trafficdirection`; its
/// datapath byte is `porin-ebpf`'s `abi::PolicyKey::direction_byte`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    /// Traffic entering the endpoint; the peer is the source.
    Ingress,
    /// Traffic leaving the endpoint; the peer is the destination.
    Egress,
}

impl Direction {
    /// Both directions, ingress first.
    pub const ALL: [Direction; 2] = [Direction::Ingress, Direction::Egress];
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        })
    }
}

/// A policy-map key: (direction, peer identity, protocol, masked port).
///
/// Invariants (every constructor keeps them, so a `Key` is always valid):
/// - `port_prefix_len <= 16` and `port` has no bits below the prefix;
/// - protocol 0 ("any") implies port 0 and prefix 0 (the datapath can only
///   wildcard the protocol when the port is fully wildcarded, `bpf/lib/policy.h`).
///
/// Field order gives the deterministic `Ord` used by [`super::MapState`]:
/// direction, identity, protocol, port, prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    direction: Direction,
    identity: Identity,
    proto: u8,
    port: u16,
    port_prefix_len: u8,
}

impl Key {
    /// Datapath prefix length of an L3-only key (identity + direction + pad
    /// bits; `StaticPrefixBits` in `pkg/maps/policymap/policymap.go`).
    pub const DATAPATH_STATIC_PREFIX: u32 = 40;
    /// Datapath prefix length of an exact key (`POLICY_FULL_PREFIX`).
    pub const DATAPATH_FULL_PREFIX: u32 = 64;

    /// A strict constructor: rejects anything that is not already a
    /// normalised key (used by the datapath ABI's decoder, `porin-ebpf`'s
    /// `abi::PolicyKey::to_key`, and by callers holding raw fields). The
    /// builder methods below mirror Cilium's normalising ones.
    pub fn new(
        direction: Direction,
        identity: Identity,
        proto: u8,
        port: u16,
        port_prefix_len: u8,
    ) -> Result<Key, KeyError> {
        if port_prefix_len > 16 {
            return Err(KeyError::PortPrefixTooLong { port_prefix_len });
        }
        if proto == 0 && (port != 0 || port_prefix_len != 0) {
            return Err(KeyError::PortWithoutProtocol {
                port,
                port_prefix_len,
            });
        }
        if port & !prefix_mask(port_prefix_len) != 0 {
            return Err(KeyError::UnmaskedPort {
                port,
                port_prefix_len,
            });
        }
        Ok(Key {
            direction,
            identity,
            proto,
            port,
            port_prefix_len,
        })
    }

    /// `IngressKey()`: ingress, any identity, any protocol, any port.
    pub const fn ingress() -> Key {
        Key::for_direction(Direction::Ingress)
    }

    /// `EgressKey()`: egress, any identity, any protocol, any port.
    pub const fn egress() -> Key {
        Key::for_direction(Direction::Egress)
    }

    /// `KeyForDirection(d)`.
    pub const fn for_direction(direction: Direction) -> Key {
        Key {
            direction,
            identity: Identity::WILDCARD,
            proto: 0,
            port: 0,
            port_prefix_len: 0,
        }
    }

    /// `WithIdentity(id)`.
    #[must_use]
    pub const fn with_identity(mut self, identity: Identity) -> Key {
        self.identity = identity;
        self
    }

    /// `WithPortProto(proto, port)`: a non-zero port gets prefix 16, port 0
    /// means all ports of `proto`.
    ///
    /// Unlike Cilium, a non-zero port with protocol 0 is an error instead of a
    /// key no packet can match: protocol 0 is "any", and there is no "any
    /// protocol, port P" key in the datapath.
    pub fn with_port_proto(self, proto: u8, port: u16) -> Result<Key, KeyError> {
        let prefix = if port != 0 { 16 } else { 0 };
        self.with_port_proto_prefix(proto, port, prefix)
    }

    /// `WithPortProtoPrefix(proto, port, prefixLen)`: a prefix above 16, or a
    /// non-zero port with prefix 0, becomes 16; the port is masked with
    /// `0xffff << (16 - prefixLen)`.
    ///
    /// Protocol 0 with any port bits is rejected (see [`Key::with_port_proto`]).
    pub fn with_port_proto_prefix(
        mut self,
        proto: u8,
        port: u16,
        port_prefix_len: u8,
    ) -> Result<Key, KeyError> {
        let mut prefix = port_prefix_len;
        if prefix > 16 || (port != 0 && prefix == 0) {
            prefix = 16;
        }
        if proto == 0 && (port != 0 || prefix != 0) {
            return Err(KeyError::PortWithoutProtocol {
                port,
                port_prefix_len,
            });
        }
        self.proto = proto;
        self.port = port & prefix_mask(prefix);
        self.port_prefix_len = prefix;
        Ok(self)
    }

    /// The key for one [`MaskedPort`] of a port range (the resolve stage calls
    /// this for each result of [`crate::ports::port_range_to_masked_ports`]).
    ///
    /// Unlike [`Key::with_port_proto_prefix`], the masked port's prefix is kept
    /// as is: the wildcard `{0, 0}` gives a protocol-only key, and a block
    /// starting at port 0 (e.g. `0/6`, ports 0–1023) keeps its prefix.
    pub fn with_masked_port(mut self, proto: u8, masked: MaskedPort) -> Result<Key, KeyError> {
        if proto == 0 && !masked.is_wildcard() {
            return Err(KeyError::PortWithoutProtocol {
                port: masked.port(),
                port_prefix_len: masked.prefix_len(),
            });
        }
        self.proto = proto;
        self.port = masked.port();
        self.port_prefix_len = masked.prefix_len();
        Ok(self)
    }

    /// One key per masked port of `start..=end` (Cilium's
    /// `PortRangeToMaskedPorts` conventions: `0..=0` and `0..=65535` are all
    /// ports, an inverted range is the single port `start`), in port order.
    /// Protocol 0 accepts only the all-ports range (an L3-only key).
    pub fn port_range_keys(self, proto: u8, start: u16, end: u16) -> Result<Vec<Key>, KeyError> {
        crate::ports::port_range_to_masked_ports(start, end)
            .into_iter()
            .map(|masked| self.with_masked_port(proto, masked))
            .collect()
    }

    /// Traffic direction.
    pub const fn direction(&self) -> Direction {
        self.direction
    }

    /// Peer identity (0 = any).
    pub const fn identity(&self) -> Identity {
        self.identity
    }

    /// IP protocol number (0 = any).
    pub const fn proto(&self) -> u8 {
        self.proto
    }

    /// First port of the key's port block (or the ICMP type), host order.
    pub const fn port(&self) -> u16 {
        self.port
    }

    /// Port prefix length 0..=16 (16 = exact port, 0 = all ports).
    pub const fn port_prefix_len(&self) -> u8 {
        self.port_prefix_len
    }

    /// The port mask (`0xffff << (16 - prefix)`).
    pub const fn port_mask(&self) -> u16 {
        prefix_mask(self.port_prefix_len)
    }

    /// `EndPort() = DestPort + (0xffff >> prefixLen)`: the last port covered.
    pub const fn end_port(&self) -> u16 {
        self.port | !self.port_mask()
    }

    /// The key's port block as a [`MaskedPort`].
    pub const fn masked_port(&self) -> MaskedPort {
        MaskedPort::from_prefix(self.port, self.port_prefix_len)
    }

    /// True if the identity is the wildcard (an "L4-only" key).
    pub const fn has_wildcard_identity(&self) -> bool {
        self.identity.is_wildcard()
    }

    /// Userspace trie prefix length (`LPMKey.PrefixLength`): 1 when protocol
    /// is 0 (direction bit only), else `9 + port prefix`.
    pub const fn userspace_prefix_len(&self) -> u32 {
        if self.proto == 0 {
            1
        } else {
            9 + self.port_prefix_len as u32
        }
    }

    /// Datapath LPM prefix length of the key: 40 for protocol 0, else
    /// `48 + port prefix` (48 protocol-only, 64 exact).
    ///
    /// **Divergence from Cilium (fail closed).** Cilium's
    /// `policymap.NewKeyFromPolicyKey` (`pkg/maps/policymap/policymap.go`)
    /// adds the port prefix bits only when `DestPort != 0`, so a masked range
    /// starting at port 0 (e.g. `0/6` = ports 0–1023, from `port: "0",
    /// endPort: 1023`) is written as a *protocol-only* key that allows every
    /// port (docs/semantics.md §4.5 quirk, §10.1). porin encodes the prefix it
    /// means (`48 + 6`); the LPM trie matches port 0 with a prefix like any
    /// other value.
    pub const fn datapath_prefix_len(&self) -> u32 {
        if self.proto == 0 {
            Self::DATAPATH_STATIC_PREFIX
        } else {
            Self::DATAPATH_STATIC_PREFIX + 8 + self.port_prefix_len as u32
        }
    }

    /// The entry's `lpm_prefix_length` for this key (`prefixlen - 40`, 0..=24).
    pub const fn lpm_prefix_length(&self) -> u8 {
        (self.datapath_prefix_len() - Self::DATAPATH_STATIC_PREFIX) as u8
    }

    /// True if the key's protocol/port block contains packet `(proto, port)`
    /// (same direction assumed; identity not considered).
    pub const fn matches_port_proto(&self, proto: u8, port: u16) -> bool {
        if self.proto == 0 {
            return true;
        }
        self.proto == proto && port & self.port_mask() == self.port
    }

    /// `PortProtoIsEqual`: same protocol, port and prefix (direction and
    /// identity ignored).
    pub const fn port_proto_is_equal(&self, other: &Key) -> bool {
        self.proto == other.proto
            && self.port == other.port
            && self.port_prefix_len == other.port_prefix_len
    }

    /// `PortProtoIsBroader`: strictly broader protocol/port. Protocol 0 is
    /// broader than any protocol; with the same protocol, a shorter port
    /// prefix whose common bits agree is broader.
    pub const fn port_proto_is_broader(&self, other: &Key) -> bool {
        (self.proto == 0 && other.proto != 0)
            || (self.proto == other.proto
                && self.port_prefix_len < other.port_prefix_len
                && (self.port ^ other.port) & self.port_mask() == 0)
    }

    /// Broader or equal protocol/port, same direction (the userspace trie's
    /// ancestor relation; identity not considered).
    pub const fn port_proto_covers(&self, other: &Key) -> bool {
        self.direction as u8 == other.direction as u8
            && (self.port_proto_is_equal(other) || self.port_proto_is_broader(other))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} id={} ", self.direction, self.identity)?;
        if self.proto == 0 {
            return f.write_str("any");
        }
        write!(f, "proto={} ", self.proto)?;
        match self.port_prefix_len {
            0 => f.write_str("port=any"),
            16 => write!(f, "port={}", self.port),
            _ => write!(
                f,
                "port={}-{} ({}/{})",
                self.port,
                self.end_port(),
                self.port,
                self.port_prefix_len
            ),
        }
    }
}
