//! The object's maps: their definitions (type, sizes, flags, names), the
//! verdict counter indices and redirect marks, and the updates an agent
//! performs with `bpf_map_update_elem` ([`MapUpdate`], with the JSON and
//! `bpftool` forms). The keys and values themselves, and their bytes, are
//! [`crate::abi`]'s (`DATAPATH.md` §2).

use porin_compiler::mapstate::{Entry, Key};
use serde::Serialize;

use crate::abi::{
    AbiError, ConfigValue, Ipcache4Key, Ipcache6Key, IpcacheValue, Layout, PolicyKey,
    decode_policy_pair, index_key, policy_pair,
};

/// `BPF_F_NO_PREALLOC` (required by LPM tries).
pub const BPF_F_NO_PREALLOC: u32 = 1;
/// `BPF_F_RDONLY_PROG`: programs may only read the map.
pub const BPF_F_RDONLY_PROG: u32 = 1 << 7;

/// Map names (ELF symbols and kernel names; at most 15 characters).
pub mod names {
    /// IPv4 ipcache (LPM trie): the prefixes shorter than /32.
    pub const IPCACHE4: &str = "porin_ipcache4";
    /// IPv6 ipcache (LPM trie): the prefixes shorter than /128.
    pub const IPCACHE6: &str = "porin_ipcache6";
    /// Policy slot A (LPM trie): the keys with a port or protocol prefix.
    pub const POLICY_A: &str = "porin_policy_a";
    /// Policy slot B (LPM trie).
    pub const POLICY_B: &str = "porin_policy_b";
    /// IPv4 ipcache, /32 entries (hash), looked up before the trie.
    pub const IPCACHE4_HOSTS: &str = "porin_ip4hash";
    /// IPv6 ipcache, /128 entries (hash), looked up before the trie.
    pub const IPCACHE6_HOSTS: &str = "porin_ip6hash";
    /// Policy slot A, exact keys (prefix length 64: identity, protocol and
    /// full port; hash), looked up before the trie.
    pub const POLICY_A_EXACT: &str = "porin_polhash_a";
    /// Policy slot B, exact keys (hash).
    pub const POLICY_B_EXACT: &str = "porin_polhash_b";
    /// One-entry config array naming the active policy slot.
    pub const CONFIG: &str = "porin_config";
    /// Conntrack (LRU hash).
    pub const CONNTRACK: &str = "porin_ct";
    /// Verdict counters (per-CPU array).
    pub const VERDICTS: &str = "porin_verdicts";
    /// Verdict event records for the agent (ring buffer of `porin_event`).
    pub const EVENTS: &str = "porin_events";
}

/// Bytes of the `porin_events` ring buffer (256 KiB: a power of two and a
/// multiple of the page size, as `BPF_MAP_TYPE_RINGBUF` requires).
pub const EVENTS_RING_BYTES: u32 = 256 * 1024;

/// The slot, within each direction's block of `porin_verdicts`, that counts
/// events the ring buffer had no room for (`bpf_ringbuf_output` failed). Not
/// a verdict: the packet's verdict counter moved as well, and the verdict
/// never waits for the ring. Its index is
/// `counter_index(direction, EVENTS_LOST_COUNTER)`.
pub const EVENTS_LOST_COUNTER: u32 = 15;

/// Cilium's bounds for `bpf-policy-map-max` (`option.PolicyMapMin/Max`).
pub const POLICY_MAP_MIN: u32 = 256;
/// Upper bound of the policy map size.
pub const POLICY_MAP_MAX: u32 = 65536;

/// Kernel map types used by the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MapKind {
    /// `BPF_MAP_TYPE_HASH` (1).
    Hash,
    /// `BPF_MAP_TYPE_ARRAY` (2).
    Array,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY` (6).
    PercpuArray,
    /// `BPF_MAP_TYPE_LRU_HASH` (9).
    LruHash,
    /// `BPF_MAP_TYPE_LPM_TRIE` (11).
    LpmTrie,
    /// `BPF_MAP_TYPE_RINGBUF` (27).
    RingBuf,
}

impl MapKind {
    /// The `BPF_MAP_TYPE_*` number.
    pub const fn number(self) -> u32 {
        match self {
            MapKind::Hash => 1,
            MapKind::Array => 2,
            MapKind::PercpuArray => 6,
            MapKind::LruHash => 9,
            MapKind::LpmTrie => 11,
            MapKind::RingBuf => 27,
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

/// Counter slots per policy direction: the verdicts (0-14) and
/// [`EVENTS_LOST_COUNTER`] (15).
pub const COUNTERS_PER_DIRECTION: u32 = 16;

/// Number of counters (`porin_verdicts` max_entries): one block of
/// [`COUNTERS_PER_DIRECTION`] per policy direction (`DATAPATH.md` §2.5).
pub const VERDICT_COUNTERS: u32 = 2 * COUNTERS_PER_DIRECTION;

/// The `porin_verdicts` index of `slot` (a [`Verdict::index`] or
/// [`EVENTS_LOST_COUNTER`]) for packets of `direction`: the direction's key
/// byte (`abi::PolicyKey::direction_byte`: 0 ingress, 1 egress) times
/// [`COUNTERS_PER_DIRECTION`], plus the slot.
pub const fn counter_index(direction: Direction, slot: u32) -> u32 {
    PolicyKey::direction_byte(direction) as u32 * COUNTERS_PER_DIRECTION + slot
}

/// What one `porin_verdicts` slot counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum CounterSlot {
    /// Packets given this verdict.
    Verdict(Verdict),
    /// Events the ring buffer had no room for ([`EVENTS_LOST_COUNTER`]).
    EventsLost,
}

/// The policy direction and the counted reason of the `porin_verdicts`
/// entry at `index` (the inverse of [`counter_index`]); `None` beyond
/// [`VERDICT_COUNTERS`].
pub fn counter_slot(index: u32) -> Option<(Direction, CounterSlot)> {
    let direction = match index / COUNTERS_PER_DIRECTION {
        0 => Direction::Ingress,
        1 => Direction::Egress,
        _ => return None,
    };
    let slot = index % COUNTERS_PER_DIRECTION;
    let what = if slot == EVENTS_LOST_COUNTER {
        CounterSlot::EventsLost
    } else {
        CounterSlot::Verdict(Verdict::ALL.into_iter().find(|v| v.index() == slot)?)
    };
    Some((direction, what))
}

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

/// Traffic direction of a policy key, from the endpoint's point of view
/// (ingress: `porin_to_endpoint`; egress: `porin_from_endpoint`). The
/// compiler's; its key byte is `abi::PolicyKey::direction_byte`.
pub use porin_compiler::mapstate::Direction;

/// The two policy slots of the atomic-replacement scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum PolicySlot {
    /// `porin_policy_a` (config value 0).
    A,
    /// `porin_policy_b` (config value 1).
    B,
}

impl PolicySlot {
    /// The prefix trie of this slot (`porin_policy_a` / `_b`: Cilium's
    /// layout; an agent that writes every key here stays correct, only
    /// slower, DATAPATH.md §2.2).
    pub const fn map_name(self) -> &'static str {
        match self {
            PolicySlot::A => names::POLICY_A,
            PolicySlot::B => names::POLICY_B,
        }
    }

    /// The exact-key hash of this slot.
    pub const fn exact_map_name(self) -> &'static str {
        match self {
            PolicySlot::A => names::POLICY_A_EXACT,
            PolicySlot::B => names::POLICY_B_EXACT,
        }
    }

    /// The map of this slot that holds `key`: the hash for exact keys
    /// (prefix length 64), the trie for every other.
    pub const fn map_for(self, key: &PolicyKey) -> &'static str {
        if key.is_exact() {
            self.exact_map_name()
        } else {
            self.map_name()
        }
    }

    /// This slot's bit of `porin_config.prefix_free`: the slot's trie is
    /// empty.
    pub const fn prefix_free_bit(self) -> u8 {
        match self {
            PolicySlot::A => 1,
            PolicySlot::B => 2,
        }
    }

    /// This slot's bit of `porin_config.prefix_free` for `direction`: the
    /// slot holds no key an L4-only lookup (identity 0) of that direction
    /// can match, so the programs skip that lookup (`DATAPATH.md` §2.3):
    /// bits 2 and 3 for slot A (ingress, egress), 4 and 5 for slot B.
    pub const fn wildcard_free_bit(self, direction: Direction) -> u8 {
        let slot = match self {
            PolicySlot::A => 0,
            PolicySlot::B => 1,
        };
        let dir = match direction {
            Direction::Ingress => 0,
            Direction::Egress => 1,
        };
        1 << (2 + 2 * slot + dir)
    }

    /// Every bit of `porin_config.prefix_free` that describes this slot.
    pub const fn free_mask(self) -> u8 {
        self.prefix_free_bit()
            | self.wildcard_free_bit(Direction::Ingress)
            | self.wildcard_free_bit(Direction::Egress)
    }

    /// This slot's bits of `porin_config.prefix_free` that stay true while
    /// the slot holds `keys` (and nothing else): the trie bit unless a key
    /// is not exact; a direction's wildcard bit unless a key can match an
    /// identity-0 lookup of that direction (identity 0, or a prefix too
    /// short to cover the identity and direction: fail closed, such a key
    /// clears both). A set bit makes the programs skip a lookup, so a bit
    /// is only ever derived from every key the slot holds.
    pub fn free_bits<'k>(self, keys: impl IntoIterator<Item = &'k PolicyKey>) -> u8 {
        let mut bits = self.free_mask();
        for key in keys {
            if !key.is_exact() {
                bits &= !self.prefix_free_bit();
            }
            let direction = match key.direction {
                PolicyKey::INGRESS => Some(Direction::Ingress),
                PolicyKey::EGRESS => Some(Direction::Egress),
                _ => None,
            };
            let covers_identity = key.prefixlen >= Key::DATAPATH_STATIC_PREFIX;
            match direction {
                Some(d) if covers_identity => {
                    if key.identity == 0 {
                        bits &= !self.wildcard_free_bit(d);
                    }
                }
                _ => {
                    bits &= !(self.wildcard_free_bit(Direction::Ingress)
                        | self.wildcard_free_bit(Direction::Egress));
                }
            }
        }
        bits
    }

    /// The other slot.
    pub const fn other(self) -> PolicySlot {
        match self {
            PolicySlot::A => PolicySlot::B,
            PolicySlot::B => PolicySlot::A,
        }
    }

    /// The `porin_config` value selecting this slot.
    pub const fn config_value(self) -> ConfigValue {
        ConfigValue::for_slot(self)
    }
}

// The slot conversions of `ConfigValue` live with the slot, so that
// `abi` never names `maps`.
impl ConfigValue {
    /// The value that makes `slot` active.
    pub const fn for_slot(slot: PolicySlot) -> ConfigValue {
        ConfigValue {
            active_policy: match slot {
                PolicySlot::A => Self::SLOT_A,
                PolicySlot::B => Self::SLOT_B,
            },
            events: 0,
            prefix_free: 0,
            reserved: 0,
        }
    }

    /// The slot this value makes active.
    pub const fn slot(&self) -> Result<PolicySlot, AbiError> {
        match self.active_policy {
            Self::SLOT_A => Ok(PolicySlot::A),
            Self::SLOT_B => Ok(PolicySlot::B),
            other => Err(AbiError::BadSlot(other)),
        }
    }
}

// Which ipcache map holds a key is the maps' knowledge, kept here so that
// `abi` never names `maps`.
impl Ipcache4Key {
    /// The map that holds this key: a /32 is a host, in the hash the
    /// programs read first; shorter prefixes are in the trie.
    pub const fn map_name(&self) -> &'static str {
        if self.prefixlen == Self::FULL_PREFIX {
            names::IPCACHE4_HOSTS
        } else {
            names::IPCACHE4
        }
    }
}

impl Ipcache6Key {
    /// The map that holds this key (a /128 in the host hash).
    pub const fn map_name(&self) -> &'static str {
        if self.prefixlen == Self::FULL_PREFIX {
            names::IPCACHE6_HOSTS
        } else {
            names::IPCACHE6
        }
    }
}

/// One `bpf_map_update_elem` an agent performs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapUpdate {
    /// Map name.
    pub map: &'static str,
    /// Key bytes.
    #[serde(serialize_with = "serialize_hex")]
    pub key: Vec<u8>,
    /// Value bytes.
    #[serde(serialize_with = "serialize_hex")]
    pub value: Vec<u8>,
}

fn serialize_hex<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex(bytes))
}

/// Space-separated lower-case hex bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl MapUpdate {
    /// An ipcache update for an IPv4 prefix (a /32 goes to the host hash).
    pub fn ipcache4(key: Ipcache4Key, value: IpcacheValue) -> MapUpdate {
        MapUpdate {
            map: key.map_name(),
            key: key.to_bytes().to_vec(),
            value: value.to_bytes().to_vec(),
        }
    }

    /// An ipcache update for an IPv6 prefix (a /128 goes to the host hash).
    pub fn ipcache6(key: Ipcache6Key, value: IpcacheValue) -> MapUpdate {
        MapUpdate {
            map: key.map_name(),
            key: key.to_bytes().to_vec(),
            value: value.to_bytes().to_vec(),
        }
    }

    /// A policy update into `slot`: the compiler's key and entry, encoded
    /// by [`crate::abi::policy_pair`].
    pub fn policy(slot: PolicySlot, key: &Key, entry: &Entry) -> MapUpdate {
        let (key, value) = policy_pair(key, entry);
        MapUpdate {
            map: slot.map_for(&key),
            key: key.to_bytes().to_vec(),
            value: value.to_bytes().to_vec(),
        }
    }

    /// A policy update from raw key and value bytes (e.g. from the C API),
    /// accepted only if they decode to a key and entry porin would write
    /// ([`crate::abi::decode_policy_pair`]: prefixlen 40 or 48..=64, no
    /// bits beyond the prefix, `lpm_prefix_length` = prefixlen − 40, ...).
    pub fn policy_raw(slot: PolicySlot, key: &[u8], value: &[u8]) -> Result<MapUpdate, AbiError> {
        let (key, entry) = decode_policy_pair(key, value)?;
        Ok(MapUpdate::policy(slot, &key, &entry))
    }

    /// The config update that makes `slot` active (events at their
    /// default, every prefix trie consulted).
    pub fn activate(slot: PolicySlot) -> MapUpdate {
        MapUpdate::config(slot.config_value())
    }

    /// The update that writes `value` into `porin_config`.
    pub fn config(value: ConfigValue) -> MapUpdate {
        MapUpdate {
            map: names::CONFIG,
            key: index_key(ConfigValue::KEY).to_vec(),
            value: value.to_bytes().to_vec(),
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

/// Serialises updates as a JSON array of `{"map", "key", "value"}` with
/// space-separated hex bytes.
pub fn updates_to_json(updates: &[MapUpdate]) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(updates)
}

/// The full sequence for an atomic policy replacement: every entry into the
/// inactive slot (exact keys into its hash, the others into its trie), then
/// the flip (`DATAPATH.md` §2.3), which also says whether the new slot's
/// trie is empty. The caller clears both maps of the inactive slot first.
/// The flip writes the whole config value: events return to their default.
pub fn policy_replacement(
    currently_active: PolicySlot,
    entries: &[(Key, Entry)],
) -> Vec<MapUpdate> {
    let target = currently_active.other();
    let mut out: Vec<MapUpdate> = entries
        .iter()
        .map(|(key, entry)| MapUpdate::policy(target, key, entry))
        .collect();
    let keys: Vec<PolicyKey> = entries
        .iter()
        .map(|(key, _)| PolicyKey::from_key(key))
        .collect();
    let mut config = target.config_value();
    config.prefix_free = target.free_bits(&keys);
    out.push(MapUpdate::config(config));
    out
}
