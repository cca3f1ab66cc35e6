//! The object's maps: their definitions (type, layouts, sizes, BTF shape)
//! and the bytes an agent writes into them with `bpf_map_update_elem`.
//!
//! Every layout here is the one in `DATAPATH.md` §2; the tests pin each one
//! byte by byte.

use std::net::{Ipv4Addr, Ipv6Addr};

use porin_compiler::identity::{Identity, IdentityError};
use porin_compiler::mapstate::{Key, KeyError};
use serde::Serialize;
use thiserror::Error;

use crate::abi::Layout;

/// `BPF_F_NO_PREALLOC` (required by LPM tries).
pub const BPF_F_NO_PREALLOC: u32 = 1;
/// `BPF_F_RDONLY_PROG`: programs may only read the map.
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;

/// Map names (ELF symbols and kernel names; at most 15 characters).
pub mod names {
    /// IPv4 ipcache (LPM trie).
    pub const IPCACHE4: &str = "porin_ipcache4";
    /// IPv6 ipcache (LPM trie).
    pub const IPCACHE6: &str = "porin_ipcache6";
    /// Policy slot A (LPM trie).
    pub const POLICY_A: &str = "porin_policy_a";
    /// Policy slot B (LPM trie).
    pub const POLICY_B: &str = "porin_policy_b";
    /// One-entry config array naming the active policy slot.
    pub const CONFIG: &str = "porin_config";
    /// Conntrack (LRU hash).
    pub const CONNTRACK: &str = "porin_ct";
    /// Verdict counters (per-CPU array).
    pub const VERDICTS: &str = "porin_verdicts";
}

/// Kernel map types used by the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MapKind {
    /// `BPF_MAP_TYPE_ARRAY` (2).
    Array,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY` (6).
    PercpuArray,
    /// `BPF_MAP_TYPE_LRU_HASH` (9).
    LruHash,
    /// `BPF_MAP_TYPE_LPM_TRIE` (11).
    LpmTrie,
}

impl MapKind {
    /// The `BPF_MAP_TYPE_*` number.
    pub const fn number(self) -> u32 {
        match self {
            MapKind::Array => 2,
            MapKind::PercpuArray => 6,
            MapKind::LruHash => 9,
            MapKind::LpmTrie => 11,
        }
    }
}

/// How loaders pin a map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
pub enum MapPinning {
    /// Not pinned (`LIBBPF_PIN_NONE`): loaders need no bpffs.
    #[default]
    None,
    /// `LIBBPF_PIN_BY_NAME`: libbpf/tc pin under their root (tc:
    /// `/sys/fs/bpf/tc/globals/<name>`), so two `tc filter` loads share maps.
    ByName,
}

/// One map of the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSpec {
    /// Symbol / kernel name.
    pub name: &'static str,
    /// Map type.
    pub kind: MapKind,
    /// Key layout.
    pub key: Layout,
    /// Value layout.
    pub value: Layout,
    /// `max_entries`.
    pub max_entries: u32,
    /// `map_flags`.
    pub flags: u32,
    /// Pinning.
    pub pinning: MapPinning,
}

/// Number of verdict counters (`porin_verdicts` max_entries).
pub const VERDICT_COUNTERS: u32 = 16;

/// The verdict counter indices (`DATAPATH.md` §2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[repr(u32)]
pub enum Verdict {
    /// Allowed by policy; conntrack entry created.
    AllowedNew = 0,
    /// Allowed by policy; a fresh conntrack entry already existed.
    AllowedEstablished = 1,
    /// Reply of a tracked flow, no policy lookup.
    AllowedReply = 2,
    /// Allowed with an L7 proxy redirect mark.
    Redirected = 3,
    /// The chosen entry is a deny.
    DeniedByRule = 4,
    /// No entry matched.
    DeniedByDefault = 5,
    /// The chosen entry requires authentication.
    DeniedAuth = 6,
    /// Truncated or invalid header.
    DroppedMalformed = 7,
    /// Non-first fragment.
    DroppedFragment = 8,
    /// IPv6 extension chain too long or No-Next-Header.
    DroppedIpv6Extensions = 9,
    /// Stacked VLAN, MPLS or PPPoE.
    DroppedUnsupportedL2 = 10,
    /// ARP and other non-IP frames.
    PassedNonIp = 11,
    /// `porin_config.active_policy` is neither 0 nor 1.
    DroppedBadConfig = 12,
    /// IPv4 ICMP fragmentation-needed.
    AllowedIcmpFragNeeded = 13,
    /// IPv6 neighbour discovery.
    PassedIpv6Ndp = 14,
}

impl Verdict {
    /// Every counter, in index order.
    pub const ALL: [Verdict; 15] = [
        Verdict::AllowedNew,
        Verdict::AllowedEstablished,
        Verdict::AllowedReply,
        Verdict::Redirected,
        Verdict::DeniedByRule,
        Verdict::DeniedByDefault,
        Verdict::DeniedAuth,
        Verdict::DroppedMalformed,
        Verdict::DroppedFragment,
        Verdict::DroppedIpv6Extensions,
        Verdict::DroppedUnsupportedL2,
        Verdict::PassedNonIp,
        Verdict::DroppedBadConfig,
        Verdict::AllowedIcmpFragNeeded,
        Verdict::PassedIpv6Ndp,
    ];

    /// The counter index.
    pub const fn index(self) -> u32 {
        self as u32
    }

    /// Whether the packet passes (`TC_ACT_OK`) under this verdict.
    pub const fn passes(self) -> bool {
        matches!(
            self,
            Verdict::AllowedNew
                | Verdict::AllowedEstablished
                | Verdict::AllowedReply
                | Verdict::Redirected
                | Verdict::PassedNonIp
                | Verdict::AllowedIcmpFragNeeded
                | Verdict::PassedIpv6Ndp
        )
    }
}

/// `TC_ACT_OK`.
pub const TC_ACT_OK: i32 = 0;
/// `TC_ACT_SHOT`.
pub const TC_ACT_SHOT: i32 = 2;
/// Cilium's `MARK_MAGIC_TO_PROXY`; the low half of a redirect mark.
pub const MARK_MAGIC_TO_PROXY: u32 = 0x0200;

/// A redirect mark carries the proxy port (host order) in its upper half.
pub const MARK_PORT_SHIFT: u32 = 16;

/// The `skb->mark` of a packet redirected to `proxy_port` (host order).
pub const fn redirect_mark(proxy_port: u16) -> u32 {
    ((proxy_port as u32) << MARK_PORT_SHIFT) | MARK_MAGIC_TO_PROXY
}

/// The proxy port a mark carries, if it is a porin redirect mark.
pub const fn proxy_port_of_mark(mark: u32) -> Option<u16> {
    let low_half = (1 << MARK_PORT_SHIFT) - 1;
    if mark & low_half == MARK_MAGIC_TO_PROXY && mark >> MARK_PORT_SHIFT != 0 {
        Some((mark >> MARK_PORT_SHIFT) as u16)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// Map contents.
// ---------------------------------------------------------------------------

/// Why map contents could not be serialised.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MapContentError {
    /// An ipcache prefix longer than the address.
    #[error("ipcache prefix length {prefix_len} exceeds {max} bits")]
    PrefixTooLong {
        /// Given length.
        prefix_len: u8,
        /// Address bits.
        max: u8,
    },
    /// A port prefix length above 16.
    #[error("port prefix length {0} exceeds 16")]
    PortPrefixTooLong(u8),
    /// A port with protocol 0 (any): Cilium only wildcards the protocol
    /// when the port is fully wildcarded.
    #[error("protocol 0 (any) with port {port}/{port_prefix_len}: a port needs a protocol")]
    PortWithoutProtocol {
        /// Port.
        port: u16,
        /// Prefix length.
        port_prefix_len: u8,
    },
    /// Port bits set beyond the prefix.
    #[error("port {port} has bits outside its /{port_prefix_len} prefix")]
    PortNotMasked {
        /// Port.
        port: u16,
        /// Prefix length.
        port_prefix_len: u8,
    },
    /// A raw key or value of the wrong length.
    #[error("{what}: expected {expected} bytes, got {got}")]
    Length {
        /// What was being parsed.
        what: &'static str,
        /// Expected length.
        expected: usize,
        /// Actual length.
        got: usize,
    },
    /// A raw policy entry whose lpm_prefix_length disagrees with its key.
    #[error(
        "policy entry lpm_prefix_length {entry} does not match key prefixlen {key_prefixlen} - 40"
    )]
    PrefixMismatch {
        /// From the entry flags.
        entry: u8,
        /// From the key.
        key_prefixlen: u32,
    },
    /// A raw policy key with a prefixlen outside 40..=64.
    #[error("policy key prefixlen {0} is outside 40..=64")]
    BadPolicyPrefix(u32),
    /// A policy key whose peer identity is not a valid identity number.
    #[error("policy key identity: {0}")]
    Identity(IdentityError),
    /// Any other policy key the compiler's key constructor rejects.
    #[error("policy key: {0}")]
    Key(KeyError),
}

/// Traffic direction of a policy key, from the endpoint's point of view
/// (ingress: `porin_to_endpoint`; egress: `porin_from_endpoint`). The
/// compiler's; its key byte is `abi::PolicyKey::direction_byte`.
pub use porin_compiler::mapstate::Direction;

/// An IPv4 ipcache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipcache4Key {
    /// Prefix length 0..=32.
    pub prefix_len: u8,
    /// Address (host bits are not cleared; the trie ignores them).
    pub addr: Ipv4Addr,
}

impl Ipcache4Key {
    /// The 8 key bytes.
    pub fn to_bytes(&self) -> Result<[u8; 8], MapContentError> {
        if self.prefix_len > 32 {
            return Err(MapContentError::PrefixTooLong {
                prefix_len: self.prefix_len,
                max: 32,
            });
        }
        let mut out = [0u8; 8];
        out[0..4].copy_from_slice(&u32::from(self.prefix_len).to_le_bytes());
        out[4..8].copy_from_slice(&self.addr.octets());
        Ok(out)
    }
}

/// An IPv6 ipcache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipcache6Key {
    /// Prefix length 0..=128.
    pub prefix_len: u8,
    /// Address.
    pub addr: Ipv6Addr,
}

impl Ipcache6Key {
    /// The 20 key bytes.
    pub fn to_bytes(&self) -> Result<[u8; 20], MapContentError> {
        if self.prefix_len > 128 {
            return Err(MapContentError::PrefixTooLong {
                prefix_len: self.prefix_len,
                max: 128,
            });
        }
        let mut out = [0u8; 20];
        out[0..4].copy_from_slice(&u32::from(self.prefix_len).to_le_bytes());
        out[4..20].copy_from_slice(&self.addr.octets());
        Ok(out)
    }
}

/// An ipcache value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcacheValue {
    /// Numeric security identity.
    pub identity: u32,
}

impl IpcacheValue {
    /// The 8 value bytes (flags 0).
    pub fn to_bytes(&self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[0..4].copy_from_slice(&self.identity.to_le_bytes());
        out
    }
}

/// A policy key in userspace form (docs/semantics.md §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyKey {
    /// Peer identity; 0 = any.
    pub identity: u32,
    /// Direction.
    pub direction: Direction,
    /// IP protocol; 0 = any (then port and prefix must be 0).
    pub proto: u8,
    /// Destination port (ICMP type), host order.
    pub port: u16,
    /// Number of leading port bits matched (0..=16).
    pub port_prefix_len: u8,
}

impl PolicyKey {
    /// The compiler's key for these fields
    /// ([`porin_compiler::mapstate::Key::new`], the strict constructor).
    /// Policy keys have one encoding, the compiler's
    /// ([`Key::to_bytes`]); this type only carries the fields.
    pub fn to_key(&self) -> Result<Key, MapContentError> {
        let identity = Identity::new(self.identity).map_err(MapContentError::Identity)?;
        Key::new(
            self.direction,
            identity,
            self.proto,
            self.port,
            self.port_prefix_len,
        )
        .map_err(|error| match error {
            KeyError::PortPrefixTooLong { port_prefix_len } => {
                MapContentError::PortPrefixTooLong(port_prefix_len)
            }
            KeyError::PortWithoutProtocol {
                port,
                port_prefix_len,
            } => MapContentError::PortWithoutProtocol {
                port,
                port_prefix_len,
            },
            KeyError::UnmaskedPort {
                port,
                port_prefix_len,
            } => MapContentError::PortNotMasked {
                port,
                port_prefix_len,
            },
            other => MapContentError::Key(other),
        })
    }

    /// The LPM prefix length of the datapath key
    /// ([`Key::datapath_prefix_len`]): 40 any protocol; 48 + n for a
    /// protocol and the top n port bits (48 protocol only, 64 exact). A
    /// masked range starting at port 0 keeps its n bits (`0/6` → 54), where
    /// Cilium's `NewKeyFromPolicyKey` would write a protocol-only key that
    /// allows every port (docs/semantics.md §4.5 quirk): porin fails closed.
    pub fn prefixlen(&self) -> Result<u32, MapContentError> {
        Ok(self.to_key()?.datapath_prefix_len())
    }

    /// The 12 key bytes ([`Key::to_bytes`]).
    pub fn to_bytes(&self) -> Result<[u8; 12], MapContentError> {
        Ok(self.to_key()?.to_bytes())
    }
}

/// A policy entry in userspace form (docs/semantics.md §4.3, §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyEntry {
    /// L7 proxy port (host order), 0 = none.
    pub proxy_port: u16,
    /// Deny entry.
    pub deny: bool,
    /// Auth type (bits 0-6).
    pub auth_type: u8,
    /// The auth requirement is explicit (bit 7).
    pub explicit_auth: bool,
    /// Precedence (higher wins; deny = `0xFFFF_FFFF`).
    pub precedence: u32,
    /// Policy-log cookie.
    pub cookie: u32,
}

impl PolicyEntry {
    /// The 12 value bytes for a key with `key_prefixlen` (the entry stores
    /// `key_prefixlen - 40`).
    pub fn to_bytes(&self, key_prefixlen: u32) -> Result<[u8; 12], MapContentError> {
        if !(40..=64).contains(&key_prefixlen) {
            return Err(MapContentError::BadPolicyPrefix(key_prefixlen));
        }
        let lpm = (key_prefixlen - 40) as u8;
        let mut out = [0u8; 12];
        out[0..2].copy_from_slice(&self.proxy_port.to_be_bytes());
        out[2] = (lpm << 3) | u8::from(self.deny);
        out[3] = (self.auth_type & 0x7f) | (u8::from(self.explicit_auth) << 7);
        out[4..8].copy_from_slice(&self.precedence.to_le_bytes());
        out[8..12].copy_from_slice(&self.cookie.to_le_bytes());
        Ok(out)
    }
}

/// The two policy slots of the atomic-replacement scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum PolicySlot {
    /// `porin_policy_a` (config value 0).
    A,
    /// `porin_policy_b` (config value 1).
    B,
}

impl PolicySlot {
    /// The map of this slot.
    pub const fn map_name(self) -> &'static str {
        match self {
            PolicySlot::A => names::POLICY_A,
            PolicySlot::B => names::POLICY_B,
        }
    }

    /// The other slot.
    pub const fn other(self) -> PolicySlot {
        match self {
            PolicySlot::A => PolicySlot::B,
            PolicySlot::B => PolicySlot::A,
        }
    }

    /// The `porin_config` value selecting this slot.
    pub fn config_value(self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[0] = match self {
            PolicySlot::A => 0,
            PolicySlot::B => 1,
        };
        out
    }
}

/// One `bpf_map_update_elem` an agent performs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapUpdate {
    /// Map name.
    pub map: &'static str,
    /// Key bytes.
    #[serde(serialize_with = "hex")]
    pub key: Vec<u8>,
    /// Value bytes.
    #[serde(serialize_with = "hex")]
    pub value: Vec<u8>,
}

fn hex<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex_string(bytes))
}

fn hex_string(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl MapUpdate {
    /// An ipcache update for an IPv4 prefix.
    pub fn ipcache4(key: Ipcache4Key, value: IpcacheValue) -> Result<MapUpdate, MapContentError> {
        Ok(MapUpdate {
            map: names::IPCACHE4,
            key: key.to_bytes()?.to_vec(),
            value: value.to_bytes().to_vec(),
        })
    }

    /// An ipcache update for an IPv6 prefix.
    pub fn ipcache6(key: Ipcache6Key, value: IpcacheValue) -> Result<MapUpdate, MapContentError> {
        Ok(MapUpdate {
            map: names::IPCACHE6,
            key: key.to_bytes()?.to_vec(),
            value: value.to_bytes().to_vec(),
        })
    }

    /// A policy update into `slot`.
    pub fn policy(
        slot: PolicySlot,
        key: PolicyKey,
        entry: PolicyEntry,
    ) -> Result<MapUpdate, MapContentError> {
        let prefixlen = key.prefixlen()?;
        Ok(MapUpdate {
            map: slot.map_name(),
            key: key.to_bytes()?.to_vec(),
            value: entry.to_bytes(prefixlen)?.to_vec(),
        })
    }

    /// A policy update from the compiler's raw 12/12 bytes, checked for the
    /// invariants the datapath relies on (prefixlen 40..=64, entry
    /// lpm_prefix_length = prefixlen − 40).
    pub fn policy_raw(
        slot: PolicySlot,
        key: &[u8],
        value: &[u8],
    ) -> Result<MapUpdate, MapContentError> {
        let key: [u8; 12] = key.try_into().map_err(|_| MapContentError::Length {
            what: "policy key",
            expected: 12,
            got: key.len(),
        })?;
        let value: [u8; 12] = value.try_into().map_err(|_| MapContentError::Length {
            what: "policy entry",
            expected: 12,
            got: value.len(),
        })?;
        let prefixlen = u32::from_le_bytes([key[0], key[1], key[2], key[3]]);
        if !(40..=64).contains(&prefixlen) {
            return Err(MapContentError::BadPolicyPrefix(prefixlen));
        }
        let lpm = value[2] >> 3;
        if u32::from(lpm) != prefixlen - 40 {
            return Err(MapContentError::PrefixMismatch {
                entry: lpm,
                key_prefixlen: prefixlen,
            });
        }
        Ok(MapUpdate {
            map: slot.map_name(),
            key: key.to_vec(),
            value: value.to_vec(),
        })
    }

    /// The config update that makes `slot` active.
    pub fn activate(slot: PolicySlot) -> MapUpdate {
        MapUpdate {
            map: names::CONFIG,
            key: 0u32.to_le_bytes().to_vec(),
            value: slot.config_value().to_vec(),
        }
    }

    /// The same update as `bpftool map update` arguments, for the map
    /// pinned at `pin_path`.
    pub fn bpftool_args(&self, pin_path: &str) -> Vec<String> {
        let mut args = vec![
            "map".to_owned(),
            "update".to_owned(),
            "pinned".to_owned(),
            pin_path.to_owned(),
            "key".to_owned(),
            "hex".to_owned(),
        ];
        args.extend(self.key.iter().map(|b| format!("{b:02x}")));
        args.push("value".to_owned());
        args.push("hex".to_owned());
        args.extend(self.value.iter().map(|b| format!("{b:02x}")));
        args
    }
}

/// One verdict counter summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counter {
    /// Packets.
    pub packets: u64,
    /// Bytes (`skb->len`).
    pub bytes: u64,
}

impl Counter {
    /// Sums the per-CPU values of one `porin_verdicts` entry, as
    /// `bpf_map_lookup_elem` returns them (16 bytes per possible CPU:
    /// packets u64 LE, bytes u64 LE).
    pub fn sum_per_cpu(values: &[u8]) -> Result<Counter, MapContentError> {
        if values.is_empty() || !values.len().is_multiple_of(16) {
            return Err(MapContentError::Length {
                what: "per-CPU counter values",
                expected: 16,
                got: values.len(),
            });
        }
        let mut sum = Counter::default();
        for cpu in values.chunks_exact(16) {
            let mut packets = [0u8; 8];
            let mut bytes = [0u8; 8];
            packets.copy_from_slice(&cpu[0..8]);
            bytes.copy_from_slice(&cpu[8..16]);
            sum.packets = sum.packets.wrapping_add(u64::from_le_bytes(packets));
            sum.bytes = sum.bytes.wrapping_add(u64::from_le_bytes(bytes));
        }
        Ok(sum)
    }
}

/// Serialises updates as a JSON array of `{"map", "key", "value"}` with
/// space-separated hex bytes.
pub fn updates_to_json(updates: &[MapUpdate]) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(updates)
}

/// The full sequence for an atomic policy replacement: every entry into the
/// inactive slot, then the flip (`DATAPATH.md` §2.3). The caller clears the
/// inactive map first.
pub fn policy_replacement(
    currently_active: PolicySlot,
    entries: &[(PolicyKey, PolicyEntry)],
) -> Result<Vec<MapUpdate>, MapContentError> {
    let target = currently_active.other();
    let mut out = entries
        .iter()
        .map(|(k, e)| MapUpdate::policy(target, *k, *e))
        .collect::<Result<Vec<_>, _>>()?;
    out.push(MapUpdate::activate(target));
    Ok(out)
}
