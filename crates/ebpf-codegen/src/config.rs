//! [`ObjectConfig`]: the knobs of the emitted object (map sizes, conntrack
//! lifetimes, pass-through rules, pinning) and the maps they give.

use crate::abi::{
    ConfigValue, Counter, CtKey, CtValue, Ipcache4Key, Ipcache6Key, IpcacheValue, Layout,
    PolicyEntry, PolicyKey,
};
use crate::error::EmitError;
use crate::maps::{
    BPF_F_NO_PREALLOC, BPF_F_RDONLY_PROG, EVENTS_RING_BYTES, MapKind, MapPinning, MapSpec,
    POLICY_MAP_MAX, POLICY_MAP_MIN, VERDICT_COUNTERS, names,
};

/// What the emitted object looks like. `ObjectConfig::default()` gives
/// `include/porin.bpf.o`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectConfig {
    /// `max_entries` of each policy map (Cilium default 16384; 256..=65536).
    pub policy_map_max_entries: u32,
    /// `max_entries` of the IPv4 ipcache.
    pub ipcache4_max_entries: u32,
    /// `max_entries` of the IPv6 ipcache.
    pub ipcache6_max_entries: u32,
    /// `max_entries` of the conntrack map.
    pub ct_max_entries: u32,
    /// Conntrack lifetime of established TCP flows in seconds (Cilium
    /// `CT_CONNECTION_LIFETIME_TCP`, 21600).
    pub ct_lifetime_tcp_secs: u32,
    /// Conntrack lifetime of a TCP flow that has seen only SYNs (Cilium
    /// `CT_SYN_TIMEOUT`, 60).
    pub ct_lifetime_syn_secs: u32,
    /// Conntrack lifetime of a TCP flow closed in both directions (FIN each
    /// way, or an RST before both SYNs; Cilium `CT_CLOSE_TIMEOUT`, 10).
    pub ct_lifetime_close_secs: u32,
    /// Conntrack lifetime of other flows in seconds (Cilium 60).
    pub ct_lifetime_other_secs: u32,
    /// Pass IPv4 ICMP fragmentation-needed without policy (Cilium default).
    pub allow_icmp_frag_needed: bool,
    /// Pass IPv6 neighbour discovery (hop limit 255) without policy.
    pub allow_ipv6_ndp: bool,
    /// Cilium's `enable-extended-ip-protocols` (default false): VRRP (112)
    /// and IGMP (2) packets go to policy with port 0 and are tracked;
    /// without it they are dropped before policy like every protocol
    /// Cilium's conntrack does not track (`DROP_CT_UNKNOWN_PROTO`,
    /// `DATAPATH.md` §4).
    pub extended_ip_protocols: bool,
    /// Map pinning (`ByName` for `tc`, which loads once per filter).
    pub pinning: MapPinning,
}

impl Default for ObjectConfig {
    fn default() -> Self {
        ObjectConfig {
            policy_map_max_entries: 16384,
            ipcache4_max_entries: 65536,
            ipcache6_max_entries: 65536,
            ct_max_entries: 65536,
            ct_lifetime_tcp_secs: 21600,
            ct_lifetime_syn_secs: 60,
            ct_lifetime_close_secs: 10,
            ct_lifetime_other_secs: 60,
            allow_icmp_frag_needed: true,
            allow_ipv6_ndp: true,
            extended_ip_protocols: false,
            pinning: MapPinning::None,
        }
    }
}

impl ObjectConfig {
    pub(crate) fn ct_lifetime_tcp_ns(&self) -> i64 {
        i64::from(self.ct_lifetime_tcp_secs) * 1_000_000_000
    }

    pub(crate) fn ct_lifetime_other_ns(&self) -> i64 {
        i64::from(self.ct_lifetime_other_secs) * 1_000_000_000
    }

    pub(crate) fn ct_lifetime_syn_ns(&self) -> i64 {
        i64::from(self.ct_lifetime_syn_secs) * 1_000_000_000
    }

    pub(crate) fn ct_lifetime_close_ns(&self) -> i64 {
        i64::from(self.ct_lifetime_close_secs) * 1_000_000_000
    }

    pub(crate) fn validate(&self) -> Result<(), EmitError> {
        if !(POLICY_MAP_MIN..=POLICY_MAP_MAX).contains(&self.policy_map_max_entries) {
            return Err(EmitError::PolicyMapSize(self.policy_map_max_entries));
        }
        for (what, n) in [
            ("ipcache4_max_entries", self.ipcache4_max_entries),
            ("ipcache6_max_entries", self.ipcache6_max_entries),
            ("ct_max_entries", self.ct_max_entries),
        ] {
            if n == 0 {
                return Err(EmitError::ZeroSize(what));
            }
        }
        if self.ct_lifetime_tcp_secs == 0
            || self.ct_lifetime_other_secs == 0
            || self.ct_lifetime_syn_secs == 0
            || self.ct_lifetime_close_secs == 0
        {
            return Err(EmitError::ZeroSize("conntrack lifetime"));
        }
        Ok(())
    }

    /// The object's maps, in `.maps` order (`DATAPATH.md` §2).
    pub fn maps(&self) -> Vec<MapSpec> {
        let lpm = BPF_F_NO_PREALLOC | BPF_F_RDONLY_PROG;
        let spec = |name, kind, key, value, max_entries, flags| MapSpec {
            name,
            kind,
            key,
            value,
            max_entries,
            flags,
            pinning: self.pinning,
        };
        vec![
            spec(
                names::IPCACHE4,
                MapKind::LpmTrie,
                Ipcache4Key::LAYOUT,
                IpcacheValue::LAYOUT,
                self.ipcache4_max_entries,
                lpm,
            ),
            spec(
                names::IPCACHE6,
                MapKind::LpmTrie,
                Ipcache6Key::LAYOUT,
                IpcacheValue::LAYOUT,
                self.ipcache6_max_entries,
                lpm,
            ),
            spec(
                names::POLICY_A,
                MapKind::LpmTrie,
                PolicyKey::LAYOUT,
                PolicyEntry::LAYOUT,
                self.policy_map_max_entries,
                lpm,
            ),
            spec(
                names::POLICY_B,
                MapKind::LpmTrie,
                PolicyKey::LAYOUT,
                PolicyEntry::LAYOUT,
                self.policy_map_max_entries,
                lpm,
            ),
            spec(
                names::CONFIG,
                MapKind::Array,
                Layout::U32,
                ConfigValue::LAYOUT,
                1,
                BPF_F_RDONLY_PROG,
            ),
            spec(
                names::CONNTRACK,
                MapKind::LruHash,
                CtKey::LAYOUT,
                CtValue::LAYOUT,
                self.ct_max_entries,
                0,
            ),
            spec(
                names::VERDICTS,
                MapKind::PercpuArray,
                Layout::U32,
                Counter::LAYOUT,
                VERDICT_COUNTERS,
                0,
            ),
            // Records are `porin_event` (in the BTF on their own; a ring
            // buffer has no key or value).
            spec(
                names::EVENTS,
                MapKind::RingBuf,
                Layout::None,
                Layout::None,
                EVENTS_RING_BYTES,
                0,
            ),
            // The flat lookups (DATAPATH.md §2.1, §2.2): exact keys in
            // hashes, read before the tries; sized like their tries, so a
            // state whose union fits the trie's bound fits both.
            spec(
                names::IPCACHE4_HOSTS,
                MapKind::Hash,
                Ipcache4Key::LAYOUT,
                IpcacheValue::LAYOUT,
                self.ipcache4_max_entries,
                lpm,
            ),
            spec(
                names::IPCACHE6_HOSTS,
                MapKind::Hash,
                Ipcache6Key::LAYOUT,
                IpcacheValue::LAYOUT,
                self.ipcache6_max_entries,
                lpm,
            ),
            spec(
                names::POLICY_A_EXACT,
                MapKind::Hash,
                PolicyKey::LAYOUT,
                PolicyEntry::LAYOUT,
                self.policy_map_max_entries,
                lpm,
            ),
            spec(
                names::POLICY_B_EXACT,
                MapKind::Hash,
                PolicyKey::LAYOUT,
                PolicyEntry::LAYOUT,
                self.policy_map_max_entries,
                lpm,
            ),
        ]
    }
}
