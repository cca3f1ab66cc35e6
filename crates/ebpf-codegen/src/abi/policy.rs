//! `porin_policy_a` / `porin_policy_b`: Cilium's `struct policy_key` and
//! `struct policy_entry` (`bpf/lib/policy.h`, 1.19 layout; `DATAPATH.md`
//! §2.2, docs/semantics.md §5.1-§5.2), and the conversion from and to the
//! compiler's [`Key`] and [`Entry`].

use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{
    AuthRequirement, AuthType, Direction, Entry, Key, KeyError, MapState, Origins, Precedence,
};

use super::{AbiError, abi_struct};

abi_struct! {
    /// `porin_policy_key`: an LPM-trie key whose first `prefixlen` bits
    /// after the prefix field are matched.
    pub struct PolicyKey = "porin_policy_key" {
        /// LPM prefix length: 40 (identity, direction and the pad bits
        /// Cilium keeps), plus 8 with a protocol, plus the port prefix
        /// bits ([`Key::datapath_prefix_len`]).
        prefixlen @ OFF_PREFIXLEN: u32 = Le,
        /// Peer identity; 0 = any peer (L4-only entries).
        identity @ OFF_IDENTITY: u32 = Le,
        /// [`PolicyKey::INGRESS`] or [`PolicyKey::EGRESS`].
        direction @ OFF_DIRECTION: u8 = Raw,
        /// IP protocol; 0 = any (only with prefix length 40).
        proto @ OFF_PROTO: u8 = Raw,
        /// Destination port, or the ICMP type as bytes `[0, type]`. The
        /// value here is the port number; the map holds it big-endian.
        dport_be @ OFF_DPORT: u16 = Be,
    }
}

impl PolicyKey {
    /// An exact key (prefix length 64: identity, direction, protocol and
    /// the full port): the datapath stores it in the slot's hash, where one
    /// lookup answers it, and every other key in the slot's trie.
    pub const fn is_exact(&self) -> bool {
        self.prefixlen == Key::DATAPATH_FULL_PREFIX
    }
}

impl PolicyKey {
    /// The direction byte of ingress keys (traffic entering the endpoint).
    pub const INGRESS: u8 = 0;
    /// The direction byte of egress keys.
    pub const EGRESS: u8 = 1;
    /// Where the ICMP type goes: the low-order byte of the big-endian
    /// `dport_be` (the datapath matches ICMP types as ports `[0, type]`).
    pub const OFF_ICMP_TYPE: usize = Self::OFF_DPORT + 1;

    /// The direction byte of `direction`.
    pub const fn direction_byte(direction: Direction) -> u8 {
        match direction {
            Direction::Ingress => Self::INGRESS,
            Direction::Egress => Self::EGRESS,
        }
    }

    /// The direction a byte names; anything but 0 or 1 is rejected (the
    /// other bits of Cilium's byte are pad bits that must be zero).
    pub const fn direction_of(byte: u8) -> Result<Direction, AbiError> {
        match byte {
            Self::INGRESS => Ok(Direction::Ingress),
            Self::EGRESS => Ok(Direction::Egress),
            _ => Err(AbiError::InvalidDirection { byte }),
        }
    }

    /// The datapath key of a compiler key. There is one policy-key
    /// encoding: the prefix length is [`Key::datapath_prefix_len`], which
    /// keeps the port bits of a range starting at port 0 (`0/6` → 54)
    /// where Cilium's `NewKeyFromPolicyKey` writes a protocol-only key that
    /// allows every port (docs/semantics.md §4.5): porin fails closed.
    pub const fn from_key(key: &Key) -> PolicyKey {
        PolicyKey {
            prefixlen: key.datapath_prefix_len(),
            identity: key.identity().get(),
            direction: Self::direction_byte(key.direction()),
            proto: key.proto(),
            dport_be: key.port(),
        }
    }

    /// The full-length key the programs look up for a packet (prefix 64;
    /// identity 0 for the L4-only lookup).
    pub const fn lookup(direction: Direction, identity: u32, proto: u8, dport: u16) -> PolicyKey {
        PolicyKey {
            prefixlen: Key::DATAPATH_FULL_PREFIX,
            identity,
            direction: Self::direction_byte(direction),
            proto,
            dport_be: dport,
        }
    }

    /// The compiler key these fields encode, fail-closed: rejects prefix
    /// lengths porin never writes (below 40, 41-47, above 64), a protocol-0
    /// key with a prefix other than 40, set bits beyond the prefix (the trie
    /// would ignore them, so the key would match more than it says), a bad
    /// direction byte and an invalid identity. The result encodes back to
    /// exactly `self`.
    pub fn to_key(&self) -> Result<Key, AbiError> {
        let identity = Identity::new(self.identity).map_err(|source| AbiError::Identity {
            identity: self.identity,
            source,
        })?;
        let direction = Self::direction_of(self.direction)?;
        let (proto, port, prefixlen) = (self.proto, self.dport_be, self.prefixlen);
        let proto_prefix = Key::DATAPATH_STATIC_PREFIX + 8;
        let port_prefix_len = if prefixlen == Key::DATAPATH_STATIC_PREFIX {
            if proto != 0 || port != 0 {
                return Err(AbiError::BitsBeyondPrefix { prefixlen });
            }
            0
        } else if (proto_prefix..=Key::DATAPATH_FULL_PREFIX).contains(&prefixlen) {
            let port_prefix_len = (prefixlen - proto_prefix) as u8;
            if proto == 0 {
                return Err(AbiError::Key(KeyError::PortWithoutProtocol {
                    port,
                    port_prefix_len,
                }));
            }
            port_prefix_len
        } else {
            return Err(AbiError::InvalidPrefixLength { prefixlen });
        };
        let key =
            Key::new(direction, identity, proto, port, port_prefix_len).map_err(
                |error| match error {
                    KeyError::UnmaskedPort { .. } => AbiError::BitsBeyondPrefix { prefixlen },
                    other => AbiError::Key(other),
                },
            )?;
        if PolicyKey::from_key(&key) != *self {
            // Unreachable by the checks above; kept so that decoding can
            // never accept bytes porin would encode differently.
            return Err(AbiError::BitsBeyondPrefix { prefixlen });
        }
        Ok(key)
    }
}

impl From<&Key> for PolicyKey {
    fn from(key: &Key) -> PolicyKey {
        PolicyKey::from_key(key)
    }
}

abi_struct! {
    /// `porin_policy_entry`: what a matching key decides.
    pub struct PolicyEntry = "porin_policy_entry" {
        /// L7 proxy port, 0 = no redirect. The value here is the port
        /// number; the map holds it big-endian.
        proxy_port_be @ OFF_PROXY_PORT: u16 = Be,
        /// Bit 0 deny ([`PolicyEntry::FLAG_DENY`]); bits 1-2 zero; bits 3-7
        /// `lpm_prefix_length` = the key's prefix length − 40.
        flags @ OFF_FLAGS: u8 = Raw,
        /// Bits 0-6 auth type, bit 7 explicit.
        auth @ OFF_AUTH: u8 = Raw,
        /// Higher wins; a deny is `0xFFFFFFFF` (`MAX_PRECEDENCE`).
        precedence @ OFF_PRECEDENCE: u32 = Le,
        /// Policy-log cookie (not read by the datapath).
        cookie @ OFF_COOKIE: u32 = Le,
    }
}

impl PolicyEntry {
    /// `flags` bit 0: the entry denies.
    pub const FLAG_DENY: u8 = 1;
    /// `flags` bits 1-2: reserved, zero.
    pub const FLAGS_RESERVED: u8 = 0b110;
    /// `flags >> LPM_SHIFT` is `lpm_prefix_length`.
    pub const LPM_SHIFT: u32 = 3;
    /// `auth` bits 0-6: the auth type.
    pub const AUTH_TYPE_MASK: u8 = 0x7f;
    /// `auth` bit 7: the requirement is explicit (not derived).
    pub const AUTH_EXPLICIT: u8 = 0x80;

    /// The datapath value of `entry` under `key`. A deny carries no proxy
    /// port or auth (Cilium's `NewEntryFromPolicyEntry`).
    pub const fn from_entry(key: &Key, entry: &Entry) -> PolicyEntry {
        let deny = entry.is_deny();
        let (proxy_port, auth) = if deny {
            (0, 0)
        } else {
            let explicit = if entry.auth.is_explicit() {
                Self::AUTH_EXPLICIT
            } else {
                0
            };
            (
                entry.proxy_port,
                (entry.auth.auth_type().get() & Self::AUTH_TYPE_MASK) | explicit,
            )
        };
        let deny_flag = if deny { Self::FLAG_DENY } else { 0 };
        PolicyEntry {
            proxy_port_be: proxy_port,
            flags: deny_flag | (key.lpm_prefix_length() << Self::LPM_SHIFT),
            auth,
            precedence: entry.precedence.get(),
            cookie: entry.cookie,
        }
    }

    /// The deny flag.
    pub const fn is_deny(&self) -> bool {
        self.flags & Self::FLAG_DENY != 0
    }

    /// `lpm_prefix_length` (the key's prefix length − 40).
    pub const fn lpm_prefix_length(&self) -> u8 {
        self.flags >> Self::LPM_SHIFT
    }

    /// The auth type (bits 0-6 of `auth`).
    pub const fn auth_type(&self) -> u8 {
        self.auth & Self::AUTH_TYPE_MASK
    }

    /// Whether the auth requirement is explicit (bit 7 of `auth`).
    pub const fn explicit_auth(&self) -> bool {
        self.auth & Self::AUTH_EXPLICIT != 0
    }

    /// The compiler entry this value encodes under `key` (origins empty),
    /// fail-closed: rejects reserved flag bits, an `lpm_prefix_length` that
    /// disagrees with the key (Cilium's `PolicyEntry.IsValid`), a deny flag
    /// that disagrees with the precedence, and a deny with a proxy port or
    /// an auth requirement.
    pub fn to_entry(&self, key: &Key) -> Result<Entry, AbiError> {
        if self.flags & Self::FLAGS_RESERVED != 0 {
            return Err(AbiError::ReservedFlags { flags: self.flags });
        }
        if self.lpm_prefix_length() != key.lpm_prefix_length() {
            return Err(AbiError::PrefixLengthMismatch {
                entry: self.lpm_prefix_length(),
                key: key.lpm_prefix_length(),
            });
        }
        let precedence = Precedence::from_raw(self.precedence);
        if self.is_deny() != precedence.is_deny() {
            return Err(AbiError::DenyFlagMismatch {
                precedence: self.precedence,
            });
        }
        let auth_type = AuthType::new(self.auth_type()).map_err(AbiError::Entry)?;
        let auth = if self.explicit_auth() {
            AuthRequirement::explicit(auth_type)
        } else {
            AuthRequirement::derived(auth_type)
        };
        if self.is_deny() && (self.proxy_port_be != 0 || auth != AuthRequirement::NONE) {
            return Err(AbiError::DenyWithRedirectOrAuth);
        }
        Ok(Entry {
            precedence,
            proxy_port: self.proxy_port_be,
            auth,
            cookie: self.cookie,
            origins: Origins::new(),
        })
    }
}

/// One policy-map pair.
pub type PolicyPair = (PolicyKey, PolicyEntry);

/// The datapath pair of one map-state entry.
pub const fn policy_pair(key: &Key, entry: &Entry) -> PolicyPair {
    (
        PolicyKey::from_key(key),
        PolicyEntry::from_entry(key, entry),
    )
}

/// Every entry of a map state as policy-map pairs, in the map state's key
/// order.
pub fn policy_pairs(state: &MapState) -> Vec<PolicyPair> {
    state
        .iter()
        .map(|(key, entry)| policy_pair(key, entry))
        .collect()
}

/// Decodes a policy-map pair from its bytes (fail-closed, see
/// [`PolicyKey::to_key`] and [`PolicyEntry::to_entry`]).
pub fn decode_policy_pair(key: &[u8], value: &[u8]) -> Result<(Key, Entry), AbiError> {
    let key = PolicyKey::from_bytes(key)?.to_key()?;
    let entry = PolicyEntry::from_bytes(value)?.to_entry(&key)?;
    Ok((key, entry))
}
