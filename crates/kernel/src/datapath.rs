//! The datapath object as a whole, driven the way `DATAPATH.md` says an agent drives it.
//!
//! [`Datapath`] wraps a [`LoadedObject`] of porin's emitted object and checks at load time that
//! the maps and programs the contract names exist with the contract's sizes, so a drift between
//! the emitter and this code fails loudly instead of writing bytes into the wrong shape.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use porin_compiler::diff::MapChange;
use porin_compiler::mapstate::Direction as PolicyDirection;
use porin_ebpf::ObjectConfig;
use porin_ebpf::abi::{
    ConfigValue, Ipcache4Pair, Ipcache6Pair, PolicyEntry, PolicyKey, PolicyPair, index_key,
};
use porin_ebpf::maps::{self, MapKind, names};

use super::apply::{DirectWrites, MapWriter, SlotMaps, apply_changes, fill_map};
use super::error::KernelError;
use super::loader::LoadedObject;
use super::map::Map;
use super::program::{Program, SkBuff};
use super::sys::MapType;
use super::{TC_ACT_OK, TC_ACT_SHOT};

/// `porin_ipcache4`: IPv4 LPM ipcache (DATAPATH.md §2.1).
pub const IPCACHE4: &str = names::IPCACHE4;
/// `porin_ipcache6`: IPv6 LPM ipcache.
pub const IPCACHE6: &str = names::IPCACHE6;
/// `porin_ip4hash`: IPv4 /32 ipcache entries (hash, read before the trie).
pub const IPCACHE4_HOSTS: &str = names::IPCACHE4_HOSTS;
/// `porin_ip6hash`: IPv6 /128 ipcache entries.
pub const IPCACHE6_HOSTS: &str = names::IPCACHE6_HOSTS;
/// `porin_policy_a`: policy slot 0, prefix trie.
pub const POLICY_A: &str = names::POLICY_A;
/// `porin_policy_b`: policy slot 1, prefix trie.
pub const POLICY_B: &str = names::POLICY_B;
/// `porin_polhash_a`: policy slot 0, exact keys (hash).
pub const POLICY_A_EXACT: &str = names::POLICY_A_EXACT;
/// `porin_polhash_b`: policy slot 1, exact keys (hash).
pub const POLICY_B_EXACT: &str = names::POLICY_B_EXACT;
/// `porin_config`: the active-slot switch (§2.3).
pub const CONFIG: &str = names::CONFIG;
/// `porin_ct`: conntrack (§2.4).
pub const CONNTRACK: &str = names::CONNTRACK;
/// `porin_verdicts`: per-CPU verdict counters (§2.5).
pub const VERDICTS: &str = names::VERDICTS;
/// `porin_events`: the verdict event ring buffer (§2.6).
pub const EVENTS: &str = names::EVENTS;
/// The program on the endpoint's outbound path (policy direction egress).
pub const FROM_ENDPOINT: &str = porin_ebpf::program::FROM_ENDPOINT;
/// The program on the endpoint's inbound path (policy direction ingress).
pub const TO_ENDPOINT: &str = porin_ebpf::program::TO_ENDPOINT;

/// `MARK_MAGIC_TO_PROXY` in the low 16 bits of `skb->mark` on an L7 redirect (§1).
pub const MARK_MAGIC_TO_PROXY: u32 = maps::MARK_MAGIC_TO_PROXY;

/// The kernel map type of a map kind of the object.
fn map_type(kind: MapKind) -> MapType {
    MapType(kind.number())
}

/// Which of the two programs sees the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `porin_from_endpoint`: packets the endpoint sends; policy direction egress, peer = dst.
    FromEndpoint,
    /// `porin_to_endpoint`: packets delivered to the endpoint; direction ingress, peer = src.
    ToEndpoint,
}

impl Direction {
    /// The ELF symbol name of the program.
    pub fn program_name(self) -> &'static str {
        match self {
            Self::FromEndpoint => FROM_ENDPOINT,
            Self::ToEndpoint => TO_ENDPOINT,
        }
    }

    /// The policy direction this program enforces (egress for packets the
    /// endpoint sends).
    pub fn policy_direction(self) -> PolicyDirection {
        match self {
            Self::FromEndpoint => PolicyDirection::Egress,
            Self::ToEndpoint => PolicyDirection::Ingress,
        }
    }
}

/// One of the two policy maps of the atomic replacement scheme (the
/// object's, `porin_ebpf::maps::PolicySlot`).
pub use porin_ebpf::maps::PolicySlot;

/// The verdict counters of DATAPATH.md §2.5, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Counter {
    /// 0: pass, policy allowed, conntrack entry created.
    AllowedNew,
    /// 1: pass, policy allowed, fresh entry for this direction existed.
    AllowedEstablished,
    /// 2: pass, reply of a tracked flow (no policy lookup).
    AllowedReply,
    /// 3: pass with the proxy redirect mark.
    Redirected,
    /// 4: drop, chosen entry has the deny flag.
    DeniedByRule,
    /// 5: drop, no policy entry matched.
    DeniedByDefault,
    /// 6: drop, auth required.
    DeniedAuth,
    /// 7: drop, malformed headers.
    DroppedMalformed,
    /// 8: drop, non-first fragment.
    DroppedFragment,
    /// 9: drop, IPv6 extension chain too long or No-Next-Header.
    DroppedIpv6Extensions,
    /// 10: drop, stacked VLAN / MPLS / PPPoE.
    DroppedUnsupportedL2,
    /// 11: pass, non-IP ethertype.
    PassedNonIp,
    /// 12: drop, bad `active_policy`.
    DroppedBadConfig,
    /// 13: pass, IPv4 ICMP fragmentation-needed.
    AllowedIcmpFragNeeded,
    /// 14: pass, IPv6 neighbour discovery.
    PassedIpv6Ndp,
}

impl Counter {
    /// Every counter, in index order.
    pub const ALL: [Self; 15] = [
        Self::AllowedNew,
        Self::AllowedEstablished,
        Self::AllowedReply,
        Self::Redirected,
        Self::DeniedByRule,
        Self::DeniedByDefault,
        Self::DeniedAuth,
        Self::DroppedMalformed,
        Self::DroppedFragment,
        Self::DroppedIpv6Extensions,
        Self::DroppedUnsupportedL2,
        Self::PassedNonIp,
        Self::DroppedBadConfig,
        Self::AllowedIcmpFragNeeded,
        Self::PassedIpv6Ndp,
    ];

    /// The counter's verdict index (its slot within each direction's block of
    /// `porin_verdicts`; DATAPATH.md §2.5).
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|c| *c == self).unwrap_or(15)
    }

    /// The `porin_verdicts` key of this counter for packets of `direction`.
    pub fn map_index(self, direction: PolicyDirection) -> u32 {
        maps::counter_index(direction, u32::try_from(self.index()).unwrap_or(15))
    }

    /// Whether this counter belongs to a passing verdict.
    pub fn is_pass(self) -> bool {
        matches!(
            self,
            Self::AllowedNew
                | Self::AllowedEstablished
                | Self::AllowedReply
                | Self::Redirected
                | Self::PassedNonIp
                | Self::AllowedIcmpFragNeeded
                | Self::PassedIpv6Ndp
        )
    }
}

/// Packets and bytes of one counter, summed over CPUs (the ABI's
/// `porin_counter`).
pub type CounterValue = porin_ebpf::abi::Counter;

/// Counter slots per policy direction in `porin_verdicts` (15 verdicts and
/// the lost-events slot).
pub const COUNTERS_PER_DIRECTION: usize = maps::COUNTERS_PER_DIRECTION as usize;

/// What one `porin_verdicts` entry counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterSlot {
    /// Packets given this verdict.
    Verdict(Counter),
    /// Verdict events the ring buffer had no room for (DATAPATH.md §2.6).
    EventsLost,
}

/// The policy direction and what is counted of the `porin_verdicts` entry at `index`
/// (DATAPATH.md §2.5: index = direction × 16 + verdict, ingress 0, egress 1); `None` for an
/// index beyond the map. The inverse of [`Counter::map_index`].
pub fn counter_slot(index: u32) -> Option<(PolicyDirection, CounterSlot)> {
    let (direction, slot) = maps::counter_slot(index)?;
    let what = match slot {
        maps::CounterSlot::EventsLost => CounterSlot::EventsLost,
        maps::CounterSlot::Verdict(v) => {
            CounterSlot::Verdict(*Counter::ALL.get(usize::try_from(v.index()).ok()?)?)
        }
    };
    Some((direction, what))
}

/// The counters, summed over CPUs: per policy direction, and both directions added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Both directions added, indexed by [`Counter::index`]; slot 15 is events lost.
    pub slots: [CounterValue; COUNTERS_PER_DIRECTION],
    /// Per policy direction (`[0]` ingress, `[1]` egress), each indexed as `slots`.
    pub by_direction: [[CounterValue; COUNTERS_PER_DIRECTION]; 2],
}

impl Counters {
    /// Reads every entry of a `porin_verdicts` map (e.g. a pinned one, opened with
    /// [`Map::from_pinned`]). An object from before per-direction counters has 16 entries,
    /// read as ingress.
    pub fn read(map: &Map) -> Result<Counters, KernelError> {
        let mut counters = Counters::default();
        for index in 0..maps::VERDICT_COUNTERS {
            let Some((direction, _)) = counter_slot(index) else {
                continue;
            };
            let block = usize::from(PolicyKey::direction_byte(direction));
            let slot = index as usize % COUNTERS_PER_DIRECTION;
            for cpu in map.lookup_per_cpu(&index_key(index))?.unwrap_or_default() {
                let value = CounterValue::from_bytes(&cpu).map_err(|e| contract(VERDICTS, &e))?;
                let entry = &mut counters.by_direction[block][slot];
                *entry = entry.add(&value);
                counters.slots[slot] = counters.slots[slot].add(&value);
            }
        }
        Ok(counters)
    }

    /// The value of one counter, both directions added.
    pub fn get(&self, counter: Counter) -> CounterValue {
        self.slots[counter.index()]
    }

    /// The value of one counter for packets of one policy direction.
    pub fn get_in(&self, direction: PolicyDirection, counter: Counter) -> CounterValue {
        self.by_direction[usize::from(PolicyKey::direction_byte(direction))][counter.index()]
    }

    /// Total packets over all verdict counters.
    pub fn total_packets(&self) -> u64 {
        Counter::ALL.iter().map(|c| self.get(*c).packets).sum()
    }

    /// Events the ring buffer had no room for (slot 15 of each direction, `DATAPATH.md` §2.6).
    pub fn events_lost(&self) -> u64 {
        self.slots[maps::EVENTS_LOST_COUNTER as usize].packets
    }
}

/// Pass or drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// `TC_ACT_OK`.
    Pass,
    /// `TC_ACT_SHOT`.
    Drop,
}

/// What the kernel decided for one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelVerdict {
    /// Pass or drop.
    pub verdict: Verdict,
    /// `skb->mark` after the run.
    pub mark: u32,
    /// The proxy port when the mark is a porin redirect mark.
    pub proxy_port: Option<u16>,
    /// The one counter this packet incremented.
    pub counter: Counter,
}

impl KernelVerdict {
    /// True for [`Verdict::Pass`].
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }
}

/// Decodes porin's redirect mark: `(proxy_port << 16) | 0x0200` (DATAPATH.md §1).
pub fn proxy_port_from_mark(mark: u32) -> Option<u16> {
    maps::proxy_port_of_mark(mark)
}

/// A map holding bytes that are no key or value of the ABI.
fn contract(map: &str, error: &porin_ebpf::abi::AbiError) -> KernelError {
    KernelError::Contract(format!("map `{map}`: {error}"))
}

/// porin's object, loaded, with the agent-side operations of DATAPATH.md.
#[derive(Debug)]
pub struct Datapath {
    object: LoadedObject,
    /// When the active slot last changed: the now-inactive map may still be read by program
    /// runs that started before, so it is not rewritten until [`RETIRE_GRACE`] has passed.
    last_flip: Mutex<Option<Instant>>,
}

/// How long a retired policy map is left alone after a flip (DATAPATH.md §2.3: at least one RCU
/// grace period; porin's agent waits 100 ms).
pub const RETIRE_GRACE: Duration = Duration::from_millis(100);

impl Datapath {
    /// Loads porin's object with porin's loader and checks it against the contract.
    pub fn load(bytes: &[u8]) -> Result<Self, KernelError> {
        Self::from_object(LoadedObject::load(bytes)?)
    }

    /// Wraps an already loaded object after checking it against the contract.
    pub fn from_object(object: LoadedObject) -> Result<Self, KernelError> {
        // The contract's maps are the emitter's (names, types and the ABI's
        // key and value sizes); sizes do not depend on the configuration.
        for required in ObjectConfig::default().maps() {
            let name = required.name;
            let map_type = map_type(required.kind);
            let (key_size, value_size) = (required.key.size(), required.value.size());
            let spec = object.map(name)?.spec();
            if spec.map_type != map_type
                || usize::try_from(spec.key_size).ok() != Some(key_size)
                || usize::try_from(spec.value_size).ok() != Some(value_size)
            {
                return Err(KernelError::Contract(format!(
                    "map `{name}` is {:?} with key {} / value {} bytes; DATAPATH.md says \
                     {map_type:?} with {key_size} / {value_size}",
                    spec.map_type, spec.key_size, spec.value_size
                )));
            }
        }
        object.program(FROM_ENDPOINT)?;
        object.program(TO_ENDPOINT)?;
        Ok(Self {
            object,
            last_flip: Mutex::new(None),
        })
    }

    /// The loaded object (maps and programs by name).
    pub fn object(&self) -> &LoadedObject {
        &self.object
    }

    fn map(&self, name: &str) -> Result<&Map, KernelError> {
        self.object.map(name)
    }

    /// The program for `direction`.
    pub fn program(&self, direction: Direction) -> Result<&Program, KernelError> {
        self.object.program(direction.program_name())
    }

    /// The slot the programs currently read.
    pub fn active_slot(&self) -> Result<PolicySlot, KernelError> {
        self.read_config()?
            .slot()
            .map_err(|e| KernelError::Contract(format!("`porin_config`: {e}")))
    }

    /// The whole `porin_config` value (the active slot, the event switches, the lookup-skip
    /// bits of `prefix_free`).
    pub fn config(&self) -> Result<ConfigValue, KernelError> {
        self.read_config()
    }

    /// The whole `porin_config` value.
    pub(crate) fn read_config(&self) -> Result<ConfigValue, KernelError> {
        let value = self
            .map(CONFIG)?
            .lookup(&index_key(ConfigValue::KEY))?
            .ok_or_else(|| KernelError::Contract("`porin_config` has no key 0".to_owned()))?;
        ConfigValue::from_bytes(&value)
            .map_err(|e| KernelError::Contract(format!("`porin_config`: {e}")))
    }

    /// Writes a raw `active_policy` value (tests of the bad-config fail-closed rule use this),
    /// keeping the other config fields.
    pub fn set_active_policy_raw(&self, active_policy: u32) -> Result<(), KernelError> {
        let mut config = self.read_config()?;
        config.active_policy = active_policy;
        self.write_config(config)
    }

    fn write_config(&self, value: ConfigValue) -> Result<(), KernelError> {
        self.map(CONFIG)?
            .update(&index_key(ConfigValue::KEY), &value.to_bytes())
    }

    /// Step 1 of the atomic replacement: clears the inactive policy map and writes `entries`
    /// (the ABI's key and value structs) into it. Returns the slot written. The programs keep
    /// reading the active slot meanwhile. Waits until [`RETIRE_GRACE`] has passed since the last
    /// flip, because program runs that started before it may still read the retired map.
    ///
    /// On error nothing is activated; when a write fails (e.g. `ENOSPC` from a policy map too
    /// small for `entries`) the error is [`KernelError::PolicyWrite`], naming the map, the
    /// entry index, the entry count and the errno. The inactive slot then holds a partial
    /// policy that is never enforced: the next write clears it first.
    pub fn write_inactive_policy(&self, entries: &[PolicyPair]) -> Result<PolicySlot, KernelError> {
        self.write_inactive_policy_with(entries, &mut DirectWrites)
    }

    /// [`Datapath::write_inactive_policy`] with every entry write going through `writer`.
    pub fn write_inactive_policy_with<W: MapWriter>(
        &self,
        entries: &[PolicyPair],
        writer: &mut W,
    ) -> Result<PolicySlot, KernelError> {
        self.wait_out_retire_grace();
        self.fill_inactive_slot(entries, writer)
    }

    /// Sleeps until [`RETIRE_GRACE`] has passed since the last flip.
    fn wait_out_retire_grace(&self) {
        let last_flip = *self
            .last_flip
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(flipped) = last_flip {
            let ready = flipped + RETIRE_GRACE;
            let now = Instant::now();
            if ready > now {
                std::thread::sleep(ready - now);
            }
        }
    }

    /// The two maps of `slot`.
    pub fn slot_maps(&self, slot: PolicySlot) -> Result<SlotMaps<'_>, KernelError> {
        Ok(SlotMaps {
            exact: self.map(slot.exact_map_name())?,
            prefix: self.map(slot.map_name())?,
        })
    }

    /// Clears the inactive slot and fills it (exact keys into its hash, the others into its
    /// trie), then records in `porin_config.prefix_free` whether its trie stayed empty (a
    /// write of byte 5 only; the slot is not read yet); no grace period.
    fn fill_inactive_slot<W: MapWriter>(
        &self,
        entries: &[PolicyPair],
        writer: &mut W,
    ) -> Result<PolicySlot, KernelError> {
        let slot = self.active_slot()?.other();
        let maps = self.slot_maps(slot)?;
        maps.exact.clear()?;
        maps.prefix.clear()?;
        fill_map(maps, entries, writer)?;
        self.set_free_bits(slot, slot.free_bits(entries.iter().map(|(key, _)| key)))?;
        Ok(slot)
    }

    /// Sets `slot`'s bits of `porin_config.prefix_free` (its trie is empty, it holds no
    /// identity-0 key of a direction: [`PolicySlot::free_bits`]) to `bits`, keeping every
    /// other field and the other slot's bits.
    fn set_free_bits(&self, slot: PolicySlot, bits: u8) -> Result<(), KernelError> {
        let config = self.read_config()?;
        let mask = slot.free_mask();
        let wanted = (config.prefix_free & !mask) | (bits & mask);
        self.write_free_bits(config, wanted)
    }

    /// Clears every bit of `slot`'s `porin_config.prefix_free` that `keys` would make false
    /// (the programs consult those lookups again); the others are kept.
    fn clear_free_bits_for<'k>(
        &self,
        slot: PolicySlot,
        keys: impl IntoIterator<Item = &'k PolicyKey>,
    ) -> Result<(), KernelError> {
        let config = self.read_config()?;
        let keep = slot.free_bits(keys) | !slot.free_mask();
        self.write_free_bits(config, config.prefix_free & keep)
    }

    fn write_free_bits(&self, mut config: ConfigValue, wanted: u8) -> Result<(), KernelError> {
        if wanted != config.prefix_free {
            config.prefix_free = wanted;
            self.write_config(config)?;
        }
        Ok(())
    }

    /// Step 2: flips `porin_config` to `slot` with one 8-byte update that changes only
    /// `active_policy` (the event switches and the prefix flags are kept).
    pub fn activate(&self, slot: PolicySlot) -> Result<(), KernelError> {
        let mut config = self.read_config()?;
        config.active_policy = slot.config_value().active_policy;
        self.write_config(config)?;
        *self
            .last_flip
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        Ok(())
    }

    /// Replaces the whole policy atomically (write the inactive slot, then flip). Returns the
    /// new active slot. On error the previously active slot stays active (see
    /// [`Datapath::write_inactive_policy`]).
    pub fn install_policy(&self, entries: &[PolicyPair]) -> Result<PolicySlot, KernelError> {
        self.install_policy_with(entries, &mut DirectWrites)
    }

    /// [`Datapath::install_policy`] with every entry write going through `writer`.
    pub fn install_policy_with<W: MapWriter>(
        &self,
        entries: &[PolicyPair],
        writer: &mut W,
    ) -> Result<PolicySlot, KernelError> {
        let slot = self.write_inactive_policy_with(entries, writer)?;
        self.activate(slot)?;
        Ok(slot)
    }

    /// [`Datapath::install_policy`] without waiting for [`RETIRE_GRACE`] before rewriting the
    /// retired slot.
    ///
    /// Only safe when no program run can still be reading the retired map: the programs are
    /// attached nowhere and every run is a synchronous `BPF_PROG_TEST_RUN` issued by the caller,
    /// which has returned. That is the situation of porin's test engines, which switch policies
    /// many times a second; an agent whose programs are attached to interfaces must use
    /// [`Datapath::install_policy`].
    pub fn install_policy_unattached(
        &self,
        entries: &[PolicyPair],
    ) -> Result<PolicySlot, KernelError> {
        let slot = self.fill_inactive_slot(entries, &mut DirectWrites)?;
        self.activate(slot)?;
        Ok(slot)
    }

    /// Applies a policy difference (the hole-free write list of
    /// `porin_compiler::diff::policy_diff`, which the C ABI exposes as
    /// `porin_compilation_policy_diff`) to the **active** policy map in place, without a flip.
    /// When a write fails, the writes before it are undone in reverse order and the error is
    /// [`KernelError::DiffRolledBack`]: the map holds exactly its previous entries (see
    /// [`apply_changes`] for why the undo cannot run out of map space).
    pub fn apply_policy_diff(&self, changes: &[MapChange]) -> Result<(), KernelError> {
        self.apply_policy_diff_with(changes, &mut DirectWrites)
    }

    /// [`Datapath::apply_policy_diff`] with every write (forward and undo) going through
    /// `writer`.
    pub fn apply_policy_diff_with<W: MapWriter>(
        &self,
        changes: &[MapChange],
        writer: &mut W,
    ) -> Result<(), KernelError> {
        let slot = self.active_slot()?;
        // A write into the trie, or of an identity-0 key, must be visible at once: consult
        // the trie / that direction's L4-only lookup from now on (a bit is only set again by
        // the next fill of this slot). Before the first write.
        let keys: Vec<PolicyKey> = changes
            .iter()
            .map(|change| PolicyKey::from_key(&change.key))
            .collect();
        self.clear_free_bits_for(slot, &keys)?;
        apply_changes(self.slot_maps(slot)?, changes, writer)
    }

    /// The entries of one policy slot (both its maps), sorted by key bytes (raw structs: a
    /// map holding bytes porin would never write is still read back).
    pub fn policy_entries(&self, slot: PolicySlot) -> Result<Vec<PolicyPair>, KernelError> {
        let mut entries = Vec::new();
        for name in [slot.exact_map_name(), slot.map_name()] {
            let map = self.map(name)?;
            for key in map.keys()? {
                if let Some(value) = map.lookup(&key)? {
                    entries.push((key, value, name));
                }
            }
        }
        entries.sort();
        entries
            .iter()
            .map(|(key, value, name)| {
                Ok((
                    PolicyKey::from_bytes(key).map_err(|e| contract(name, &e))?,
                    PolicyEntry::from_bytes(value).map_err(|e| contract(name, &e))?,
                ))
            })
            .collect()
    }

    /// Replaces the ipcache contents (both families) with the given prefixes: /32 and /128
    /// entries into the host hashes, the others into the tries (DATAPATH.md §2.1).
    pub fn install_ipcache(
        &self,
        v4: &[Ipcache4Pair],
        v6: &[Ipcache6Pair],
    ) -> Result<(), KernelError> {
        for name in [IPCACHE4, IPCACHE4_HOSTS, IPCACHE6, IPCACHE6_HOSTS] {
            self.map(name)?.clear()?;
        }
        for (key, value) in v4 {
            self.map(key.map_name())?
                .update(&key.to_bytes(), &value.to_bytes())?;
        }
        for (key, value) in v6 {
            self.map(key.map_name())?
                .update(&key.to_bytes(), &value.to_bytes())?;
        }
        Ok(())
    }

    /// Empties the conntrack table; returns how many entries were removed.
    pub fn reset_conntrack(&self) -> Result<usize, KernelError> {
        self.map(CONNTRACK)?.clear()
    }

    /// The number of conntrack entries.
    pub fn conntrack_len(&self) -> Result<usize, KernelError> {
        Ok(self.map(CONNTRACK)?.keys()?.len())
    }

    /// The verdict counters, summed over CPUs.
    pub fn read_counters(&self) -> Result<Counters, KernelError> {
        Counters::read(self.map(VERDICTS)?)
    }

    /// Zeroes every counter.
    pub fn reset_counters(&self) -> Result<(), KernelError> {
        self.map(VERDICTS)?.clear().map(drop)
    }

    /// Runs the program for `direction` on `packet` once and reports the verdict, the mark and
    /// the counter it incremented (checked: exactly one counter moves per packet). The counter
    /// is found by reading the counters before and after, so this assumes no other traffic runs
    /// through this object at the same time (true for test runs; not for an attached object).
    /// Conntrack state carries over between calls; use [`Datapath::reset_conntrack`] or distinct
    /// source ports to decide every packet as a new flow.
    pub fn decide(
        &self,
        direction: Direction,
        packet: &[u8],
    ) -> Result<KernelVerdict, KernelError> {
        self.decide_with_mark(direction, packet, 0)
    }

    /// As [`Datapath::decide`], with an incoming `skb->mark`.
    pub fn decide_with_mark(
        &self,
        direction: Direction,
        packet: &[u8],
        mark: u32,
    ) -> Result<KernelVerdict, KernelError> {
        let before = self.read_counters()?;
        let output = self.program(direction)?.test_run(
            packet,
            &SkBuff {
                mark,
                ..SkBuff::default()
            },
        )?;
        let after = self.read_counters()?;
        // Slot 15 of each block counts lost events, not verdicts.
        let moved: Vec<(usize, usize)> = (0..2)
            .flat_map(|block| (0..Counter::ALL.len()).map(move |i| (block, i)))
            .filter(|&(b, i)| after.by_direction[b][i].packets != before.by_direction[b][i].packets)
            .collect();
        let counter = match moved.as_slice() {
            [(block, index)]
                if after.by_direction[*block][*index].packets
                    == before.by_direction[*block][*index].packets + 1 =>
            {
                // Objects from before per-direction counters count both programs in block 0.
                let per_direction =
                    self.map(VERDICTS)?.spec().max_entries >= maps::VERDICT_COUNTERS;
                let wanted = usize::from(PolicyKey::direction_byte(direction.policy_direction()));
                if per_direction && *block != wanted {
                    return Err(KernelError::Contract(format!(
                        "{} moved a counter of the other direction's block ({block})",
                        direction.program_name()
                    )));
                }
                Counter::ALL.get(*index).copied().ok_or_else(|| {
                    KernelError::Contract(format!("reserved counter {index} was incremented"))
                })?
            }
            _ => {
                return Err(KernelError::Contract(format!(
                    "one packet moved counters {moved:?} (direction block, verdict), expected \
                     exactly one by one"
                )));
            }
        };
        let verdict = match output.retval {
            TC_ACT_OK => Verdict::Pass,
            TC_ACT_SHOT => Verdict::Drop,
            other => {
                return Err(KernelError::Contract(format!(
                    "program returned {other}, only 0 (TC_ACT_OK) and 2 (TC_ACT_SHOT) are allowed"
                )));
            }
        };
        if counter.is_pass() != (verdict == Verdict::Pass) {
            return Err(KernelError::Contract(format!(
                "verdict {verdict:?} disagrees with counter {counter:?}"
            )));
        }
        Ok(KernelVerdict {
            verdict,
            mark: output.mark,
            proxy_port: proxy_port_from_mark(output.mark),
            counter,
        })
    }

    /// Runs `packet` `repeat` times through `direction` and returns the kernel's average
    /// nanoseconds per run (the counters and conntrack see every repetition).
    pub fn bench(
        &self,
        direction: Direction,
        packet: &[u8],
        repeat: u32,
    ) -> Result<u32, KernelError> {
        Ok(self
            .program(direction)?
            .test_run_repeat(packet, &SkBuff::default(), repeat)?
            .duration_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_marks_decode_only_with_the_magic() {
        assert_eq!(proxy_port_from_mark(0x3a99_0200), Some(15001));
        assert_eq!(proxy_port_from_mark(0x3a99_0300), None);
        assert_eq!(proxy_port_from_mark(0x0000_0200), None);
        assert_eq!(proxy_port_from_mark(0), None);
    }

    #[test]
    fn counters_are_indexed_as_the_contract_lists_them() {
        assert_eq!(Counter::AllowedNew.index(), 0);
        assert_eq!(Counter::Redirected.index(), 3);
        assert_eq!(Counter::DeniedByDefault.index(), 5);
        assert_eq!(Counter::PassedNonIp.index(), 11);
        assert_eq!(Counter::PassedIpv6Ndp.index(), 14);
        assert!(Counter::AllowedReply.is_pass());
        assert!(!Counter::DeniedAuth.is_pass());
    }

    #[test]
    fn counter_slots_are_direction_blocks_of_sixteen() {
        use PolicyDirection::{Egress, Ingress};
        assert_eq!(Counter::DeniedByDefault.map_index(Ingress), 5);
        assert_eq!(Counter::DeniedByDefault.map_index(Egress), 21);
        assert_eq!(
            counter_slot(21),
            Some((Egress, CounterSlot::Verdict(Counter::DeniedByDefault)))
        );
        assert_eq!(counter_slot(15), Some((Ingress, CounterSlot::EventsLost)));
        assert_eq!(counter_slot(31), Some((Egress, CounterSlot::EventsLost)));
        assert_eq!(counter_slot(32), None);
        for direction in [Ingress, Egress] {
            for counter in Counter::ALL {
                let index = counter.map_index(direction);
                assert_eq!(
                    counter_slot(index),
                    Some((direction, CounterSlot::Verdict(counter)))
                );
            }
        }
    }
}
