//! The kernel side of the agent: one porin object per attached endpoint, its maps pinned under
//! `<state dir>/<endpoint>/`, its two programs attached to the endpoint's host-side device with
//! pinned tcx links.
//!
//! Why one object per endpoint: the policy maps are per endpoint (as Cilium's are), and the
//! object's programs read "the" policy map, so each endpoint needs its own maps and programs.
//! The ipcache is copied into each object. One map is shared by all of them: `porin_config`,
//! the A/B switch ([`crate::switch`]).
//!
//! Every policy change goes through the A/B switch of `DATAPATH.md` §2.3, for all endpoints at
//! once ([`Enforcer::install_all`]): each endpoint whose state changed gets its complete new
//! state in its idle slot (an unchanged one its current state, when the idle slot does not hold
//! it already), then one 8-byte write flips every endpoint. Each packet sees the old or the new
//! policy of the whole change, never a mix, on one endpoint or across endpoints; a write that
//! fails (a full map) keeps that endpoint on its current policy, and a failure that leaves an
//! idle slot unknown flips nothing. The ipcache is updated entry by entry, as in Cilium
//! (SECURITY.md, "Not guaranteed yet").
//!
//! Order of a first attach: maps created and pinned, ipcache and the active slot filled,
//! **then** the links created and pinned, so the device never runs the programs over an empty
//! policy. An adoption (the maps are already pinned) loads new programs over the pinned maps
//! and swaps the programs of the pinned links atomically (`BPF_LINK_UPDATE`): conntrack,
//! counters and the enforced policy are never reset, and the new policy follows in the next
//! flip. Pins of an agent that gave each endpoint its own `porin_config` are migrated: the
//! switch's active slot is filled where the old programs do not read it, the directory's
//! `porin_config` becomes the switch, then the programs are swapped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use porin_ebpf::ObjectConfig;
use porin_ebpf::abi::{Ipcache4Pair, Ipcache6Pair, PolicyPair};
use porin_kernel::apply::fill_map;
use porin_kernel::attach::{Hook, TcxLink, interface_index};
use porin_kernel::datapath::{CONFIG, IPCACHE4, IPCACHE6, PolicySlot, RETIRE_GRACE};
use porin_kernel::pin::{open_pinned_maps, pin_maps};
use porin_kernel::{
    Counters, Datapath, DirectWrites, Direction, KernelError, LoadedObject, MapDefinition,
    ObjectFile,
};
use tracing::{info, warn};

use crate::error::AgentError;
use crate::switch::{Switch, lock_config, map_id};

/// The hooks of an endpoint's host-side device and the program each runs (DATAPATH.md §8).
pub const HOOKS: [(Hook, Direction); 2] = [
    (Hook::Ingress, Direction::FromEndpoint),
    (Hook::Egress, Direction::ToEndpoint),
];

/// The pin name of a hook's link.
pub fn link_pin(hook: Hook) -> String {
    format!("link_{}", hook.as_str())
}

/// The directory name of an endpoint under the state directory: `ns:NAMESPACE:NAME` or
/// `ep:NAME` (a namespace holds no `:`, so two endpoints never share a directory).
pub fn endpoint_dir_name(endpoint: &str) -> String {
    match endpoint.split_once('/') {
        Some((namespace, name)) => format!("ns:{namespace}:{name}"),
        None => format!("ep:{endpoint}"),
    }
}

/// The endpoint a directory name stands for (the inverse of [`endpoint_dir_name`]).
pub fn endpoint_of_dir(dir: &str) -> Option<String> {
    if let Some(rest) = dir.strip_prefix("ns:") {
        let (namespace, name) = rest.split_once(':')?;
        Some(format!("{namespace}/{name}"))
    } else {
        dir.strip_prefix("ep:").map(str::to_owned)
    }
}

/// What an endpoint's two policy slots hold, as the agent knows it (entries sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slots {
    /// The slot the switch selects: what the endpoint enforces.
    pub active: Vec<PolicyPair>,
    /// The other slot; `None` when unknown (adopted, or written by a flip that did not happen).
    pub idle: Option<Vec<PolicyPair>>,
}

/// `entries` in the order [`Slots`] keeps them.
fn canonical(entries: &[PolicyPair]) -> Vec<PolicyPair> {
    let mut sorted = entries.to_vec();
    sorted.sort_unstable();
    sorted
}

/// `slot`'s bits of `porin_config.prefix_free` that hold while it holds `entries` (its trie
/// is empty, no identity-0 key of a direction: [`PolicySlot::free_bits`]).
fn free_bits(slot: PolicySlot, entries: &[PolicyPair]) -> u8 {
    slot.free_bits(entries.iter().map(|(key, _)| key))
}

/// Clears one slot of `datapath` and writes `entries` into it (exact keys into its hash, the
/// others into its trie). Only for a slot no program reads.
fn fill_slot(
    datapath: &Datapath,
    slot: PolicySlot,
    entries: &[PolicyPair],
) -> Result<(), KernelError> {
    let maps = datapath.slot_maps(slot)?;
    maps.exact.clear()?;
    maps.prefix.clear()?;
    fill_map(maps, entries, &mut DirectWrites)
}

/// What one slot of `datapath` holds.
fn read_slot(datapath: &Datapath, slot: PolicySlot) -> Result<Vec<PolicyPair>, KernelError> {
    Ok(canonical(&datapath.policy_entries(slot)?))
}

/// One endpoint whose programs are attached.
#[derive(Debug)]
pub struct Attached {
    /// The host-side device.
    pub device: String,
    /// Its index when attached.
    pub ifindex: u32,
    /// The endpoint's object.
    pub datapath: Datapath,
    /// Policy entries last installed.
    pub entries: usize,
    /// Whether the maps were adopted from an earlier run.
    pub adopted: bool,
    /// What its policy slots hold.
    pub slots: Slots,
    links: Vec<TcxLink>,
}

impl Attached {
    /// The endpoint's tcx links (ingress, egress).
    pub fn links(&self) -> &[TcxLink] {
        &self.links
    }
}

/// What [`Enforcer::install_all`] did.
#[derive(Debug, Default)]
pub struct Flip {
    /// Endpoints that enforce their new policy since the flip.
    pub changed: Vec<String>,
    /// Endpoints of the call that enforce exactly the policy asked for (the changed ones and
    /// those that already did).
    pub up_to_date: Vec<String>,
    /// Endpoints that keep their current policy, and a flip that did not happen, with why.
    pub errors: Vec<AgentError>,
}

/// What [`Enforcer::attach`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachOutcome {
    /// New maps, new links.
    Fresh,
    /// Pinned maps (and links, where still attached) of an earlier run, adopted in place.
    Adopted,
}

/// The attached endpoints and their pins.
#[derive(Debug)]
pub struct Enforcer {
    state_dir: PathBuf,
    object: Vec<u8>,
    definitions: Vec<MapDefinition>,
    /// `max_entries` of each policy map.
    pub capacity: u32,
    endpoints: BTreeMap<String, Attached>,
    switch: Switch,
}

impl Enforcer {
    /// Emits porin's object for `config` and opens (or creates and pins) the shared switch
    /// under `state_dir`; no endpoint is touched yet.
    pub fn new(state_dir: &Path, config: &ObjectConfig) -> Result<Self, AgentError> {
        let object = porin_ebpf::emit(config).map_err(|e| AgentError::Emit(e.to_string()))?;
        let definitions = ObjectFile::parse(&object)
            .map_err(|e| AgentError::kernel("parsing porin's object", e))?
            .maps;
        let switch = Switch::open_or_create(state_dir, &definitions)?;
        Ok(Self {
            state_dir: state_dir.to_path_buf(),
            object,
            definitions,
            capacity: config.policy_map_max_entries,
            endpoints: BTreeMap::new(),
            switch,
        })
    }

    /// The switch every attached endpoint's programs read.
    pub fn switch(&self) -> &Switch {
        &self.switch
    }

    /// The pin directory of an endpoint.
    pub fn endpoint_dir(&self, endpoint: &str) -> PathBuf {
        self.state_dir.join(endpoint_dir_name(endpoint))
    }

    /// The attached endpoints.
    pub fn attached(&self) -> &BTreeMap<String, Attached> {
        &self.endpoints
    }

    /// The endpoints that have pins under the state directory (attached now or left by an
    /// earlier run).
    pub fn pinned_endpoints(&self) -> Result<BTreeSet<String>, AgentError> {
        let mut found = BTreeSet::new();
        let entries = match std::fs::read_dir(&self.state_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(AgentError::io(&self.state_dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| AgentError::io(&self.state_dir, e))?;
            if let Some(endpoint) = entry.file_name().to_str().and_then(endpoint_of_dir) {
                found.insert(endpoint);
            }
        }
        Ok(found)
    }

    /// Refuses a policy that does not fit the endpoint's map, naming the endpoint (nothing is
    /// written: the endpoint keeps its previous policy).
    pub fn check_fits(&self, endpoint: &str, entries: usize) -> Result<(), AgentError> {
        if entries > self.capacity as usize {
            return Err(AgentError::PolicyTooLarge {
                endpoint: endpoint.to_owned(),
                entries,
                capacity: self.capacity,
            });
        }
        Ok(())
    }

    /// Attaches `endpoint` to `device` (adopting its pins when they exist) with `policy` and the
    /// ipcache. On error nothing of this endpoint is attached anew (pins of an earlier run stay
    /// as they were).
    pub fn attach(
        &mut self,
        endpoint: &str,
        device: &str,
        policy: &[PolicyPair],
        ipcache: (&[Ipcache4Pair], &[Ipcache6Pair]),
    ) -> Result<AttachOutcome, AgentError> {
        let context = |what: &str| format!("endpoint `{endpoint}` ({device}): {what}");
        self.check_fits(endpoint, policy.len())?;
        let ifindex = interface_index(device)
            .map_err(|e| AgentError::kernel(context("device lookup"), e))?
            .ok_or_else(|| AgentError::NoDevice {
                endpoint: endpoint.to_owned(),
                device: device.to_owned(),
            })?;
        let dir = self.endpoint_dir(endpoint);
        let pinned = open_pinned_maps(&self.definitions, &dir)
            .map_err(|e| AgentError::kernel(context("opening pinned maps"), e))?;
        let adopted = pinned.is_some();
        let mut maps = pinned.unwrap_or_default();
        // Pins of an agent that gave each endpoint its own porin_config: the slot its programs
        // read until they are swapped.
        let own_slot = match maps.remove(CONFIG) {
            Some(own) if map_id(own.fd(), CONFIG)? != self.switch.id() => Some(
                Switch::read_map(&own)?
                    .slot()
                    .map_err(|e| AgentError::Session(context(&format!("porin_config: {e}"))))?,
            ),
            _ => None,
        };
        maps.insert(CONFIG.to_owned(), self.switch.handle()?);
        let object = LoadedObject::load_with_maps(&self.object, maps)
            .map_err(|e| AgentError::kernel(context("loading porin's object"), e))?;
        let datapath = Datapath::from_object(object)
            .map_err(|e| AgentError::kernel(context("checking the object"), e))?;
        // The pinned links still attached to this device: while one is, programs read the maps.
        let mut existing = Vec::with_capacity(HOOKS.len());
        for (hook, _) in HOOKS {
            existing.push(pinned_link(&dir, endpoint, device, ifindex, hook)?);
        }
        let enforcing = existing.iter().any(Option::is_some);
        let wanted = canonical(policy);
        let lock = lock_config(&self.state_dir)?;
        let active = self.switch.active()?;
        let slots = match own_slot {
            _ if !enforcing => {
                // No program reads these maps (fresh, or pins whose links are gone: a run that
                // stopped before attaching, or a device that went away): the ipcache and the
                // active slot are written directly, before any link exists.
                if !adopted {
                    std::fs::create_dir_all(&dir).map_err(|e| AgentError::io(&dir, e))?;
                    // (Pins the switch under the endpoint's directory too.)
                    pin_maps(datapath.object(), &dir)
                        .map_err(|e| AgentError::kernel(context("pinning maps"), e))?;
                }
                sync_ipcache(&datapath, ipcache.0, ipcache.1)
                    .map_err(|e| AgentError::kernel(context("writing the ipcache"), e))?;
                fill_slot(&datapath, active, &wanted)
                    .map_err(|e| AgentError::kernel(context("installing the policy"), e))?;
                Slots {
                    active: wanted,
                    idle: (!adopted).then(Vec::new),
                }
            }
            Some(own) if own != active => {
                // The old programs read `own`; the switch's slot is read by nobody yet (the
                // retired slot of the old programs' last flip: wait out its grace).
                std::thread::sleep(RETIRE_GRACE);
                fill_slot(&datapath, active, &wanted)
                    .map_err(|e| AgentError::kernel(context("installing the policy"), e))?;
                Slots {
                    active: wanted,
                    idle: None,
                }
            }
            // The slot the programs read holds what they enforce (complete: links are only
            // made after a complete fill, and later changes go through the idle slot): nothing
            // is written; the policy of the files follows in the next flip, the ipcache after it.
            _ => Slots {
                active: read_slot(&datapath, active)
                    .map_err(|e| AgentError::kernel(context("reading the policy"), e))?,
                idle: None,
            },
        };
        self.switch
            .clear_free_bits(active, free_bits(active, &slots.active), &lock)?;
        if own_slot.is_some() {
            // After the fill: an agent killed before this point sees the old layout again and
            // redoes the migration; one killed after it finds the switch's slot complete.
            let path = dir.join(CONFIG);
            std::fs::remove_file(&path).map_err(|e| AgentError::io(&path, e))?;
            self.switch.pin_at(&path)?;
            info!(endpoint, "migrated to the shared porin_config");
        }
        let mut links = Vec::with_capacity(HOOKS.len());
        for ((hook, direction), existing) in HOOKS.into_iter().zip(existing) {
            let program = datapath
                .program(direction)
                .map_err(|e| AgentError::kernel(context("program"), e))?;
            let link = match existing {
                Some(link) => {
                    link.update_program(program).map_err(|e| {
                        AgentError::kernel(context("replacing the link's program"), e)
                    })?;
                    link
                }
                None => {
                    let link = TcxLink::attach(program, ifindex, hook).map_err(|e| {
                        AgentError::kernel(
                            context(&format!("attaching to tcx {}", hook.as_str())),
                            e,
                        )
                    })?;
                    link.pin(&dir.join(link_pin(hook)))
                        .map_err(|e| AgentError::kernel(context("pinning the link"), e))?;
                    link
                }
            };
            links.push(link);
        }
        drop(lock);
        self.endpoints.insert(
            endpoint.to_owned(),
            Attached {
                device: device.to_owned(),
                ifindex,
                datapath,
                entries: slots.active.len(),
                adopted,
                slots,
                links,
            },
        );
        Ok(if adopted {
            AttachOutcome::Adopted
        } else {
            AttachOutcome::Fresh
        })
    }

    /// Installs the policies of `wanted` (attached endpoints not named keep theirs) with one
    /// flip for all endpoints: every endpoint's target state is written into its idle slot
    /// (skipped where the slot holds it already), then the switch flips. An endpoint whose new
    /// state does not fit or cannot be written keeps its current one (its error is in
    /// [`Flip::errors`]); when even that cannot be written, nothing flips.
    pub fn install_all(&mut self, wanted: &BTreeMap<String, Vec<PolicyPair>>) -> Flip {
        let mut flip = Flip::default();
        let mut targets: BTreeMap<String, Vec<PolicyPair>> = BTreeMap::new();
        let mut changing = BTreeSet::new();
        for (name, attached) in &self.endpoints {
            let mut target = attached.slots.active.clone();
            if let Some(policy) = wanted.get(name) {
                let policy = canonical(policy);
                if policy == attached.slots.active {
                    flip.up_to_date.push(name.clone());
                } else {
                    match self.check_fits(name, policy.len()) {
                        Ok(()) => {
                            changing.insert(name.clone());
                            target = policy;
                        }
                        Err(e) => flip.errors.push(e),
                    }
                }
            }
            targets.insert(name.clone(), target);
        }
        if changing.is_empty() {
            return flip;
        }
        let lock = match lock_config(&self.state_dir) {
            Ok(lock) => lock,
            Err(e) => {
                flip.errors.push(e);
                return flip;
            }
        };
        self.switch.wait_out_retire_grace();
        let idle = match self.switch.active() {
            Ok(active) => active.other(),
            Err(e) => {
                flip.errors.push(e);
                return flip;
            }
        };
        for (name, attached) in &mut self.endpoints {
            let Some(target) = targets.get_mut(name) else {
                continue;
            };
            if attached.slots.idle.as_ref() == Some(target) {
                continue;
            }
            attached.slots.idle = None;
            let Err(e) = fill_slot(&attached.datapath, idle, target) else {
                attached.slots.idle = Some(target.clone());
                continue;
            };
            flip.errors.push(AgentError::kernel(
                format!("endpoint `{name}`: installing the policy (it keeps its current one)"),
                e,
            ));
            changing.remove(name);
            target.clone_from(&attached.slots.active);
            if let Err(e) = fill_slot(&attached.datapath, idle, target) {
                flip.errors.push(AgentError::kernel(
                    format!(
                        "endpoint `{name}`: rewriting its current policy into the idle slot; \
                         no endpoint flips"
                    ),
                    e,
                ));
                return flip;
            }
            attached.slots.idle = Some(target.clone());
        }
        if changing.is_empty() {
            return flip;
        }
        let free = targets
            .values()
            .fold(idle.free_mask(), |bits, t| bits & free_bits(idle, t));
        if let Err(e) = self.switch.flip(idle, free, &lock) {
            flip.errors.push(e);
            return flip;
        }
        drop(lock);
        for (name, attached) in &mut self.endpoints {
            if let Some(target) = targets.remove(name) {
                let previous = std::mem::replace(&mut attached.slots.active, target);
                attached.slots.idle = Some(previous);
                attached.entries = attached.slots.active.len();
            }
        }
        flip.changed = changing.into_iter().collect();
        flip.up_to_date.extend(flip.changed.iter().cloned());
        flip.up_to_date.sort();
        flip
    }

    /// Brings every attached endpoint's ipcache to `v4`/`v6`.
    pub fn sync_ipcache(&self, v4: &[Ipcache4Pair], v6: &[Ipcache6Pair]) -> Vec<AgentError> {
        let mut errors = Vec::new();
        for (endpoint, attached) in &self.endpoints {
            if let Err(e) = sync_ipcache(&attached.datapath, v4, v6) {
                errors.push(AgentError::kernel(
                    format!("endpoint `{endpoint}`: writing the ipcache"),
                    e,
                ));
            }
        }
        errors
    }

    /// Detaches an endpoint: removes its link and map pins (the links detach when their last
    /// reference goes) and forgets it.
    pub fn detach(&mut self, endpoint: &str) -> Result<(), AgentError> {
        let dir = self.endpoint_dir(endpoint);
        self.endpoints.remove(endpoint);
        remove_pins(&dir)
    }

    /// Removes the switch's pin (after every endpoint is detached).
    pub fn remove_switch_pin(&self) -> Result<(), AgentError> {
        remove_switch_pin(&self.state_dir)
    }

    /// Forgets an endpoint without touching its pins (it keeps enforcing).
    pub fn release(&mut self, endpoint: &str) {
        self.endpoints.remove(endpoint);
    }

    /// The verdict counters of an attached endpoint.
    pub fn counters(&self, endpoint: &str) -> Option<Counters> {
        self.endpoints
            .get(endpoint)
            .and_then(|a| a.datapath.read_counters().ok())
    }
}

/// The link pinned for `hook` under `dir` when it is attached to device `ifindex` at that hook;
/// a pin of a detached link (the device went away) or of another device is removed.
fn pinned_link(
    dir: &Path,
    endpoint: &str,
    device: &str,
    ifindex: u32,
    hook: Hook,
) -> Result<Option<TcxLink>, AgentError> {
    let path = dir.join(link_pin(hook));
    if !path.exists() {
        return Ok(None);
    }
    match TcxLink::from_pinned(&path).and_then(|link| Ok((link.info()?, link))) {
        Ok((info, link)) if info.ifindex == ifindex && info.hook() == Some(hook) => Ok(Some(link)),
        Ok((info, _)) => {
            info!(
                endpoint,
                device,
                hook = hook.as_str(),
                stale_ifindex = info.ifindex,
                "replacing a stale pinned link"
            );
            std::fs::remove_file(&path).map_err(|e| AgentError::io(&path, e))?;
            Ok(None)
        }
        Err(e) => Err(AgentError::kernel(
            format!("endpoint `{endpoint}` ({device}): opening a pinned link"),
            e,
        )),
    }
}

/// Removes `<state dir>/porin_config`, the switch's own pin.
pub fn remove_switch_pin(state_dir: &Path) -> Result<(), AgentError> {
    let path = state_dir.join(CONFIG);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(AgentError::io(&path, e)),
    }
}

/// Removes an endpoint's pin directory (links first, so the device stops running the programs
/// before their maps lose their names).
pub fn remove_pins(dir: &Path) -> Result<(), AgentError> {
    for (hook, _) in HOOKS {
        let path = dir.join(link_pin(hook));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(AgentError::io(&path, e)),
        }
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => {
            warn!(dir = %dir.display(), error = %e, "could not remove pins");
            Err(AgentError::io(dir, e))
        }
    }
}

/// Writes the ipcache difference into one object: entries that are new or changed first, then
/// the deletions (a deleted prefix falls back to its covering prefix, never to nothing).
fn sync_ipcache(
    datapath: &Datapath,
    v4: &[Ipcache4Pair],
    v6: &[Ipcache6Pair],
) -> Result<(), porin_kernel::KernelError> {
    let wanted4: BTreeMap<Vec<u8>, Vec<u8>> = v4
        .iter()
        .map(|(k, v)| (k.to_bytes().to_vec(), v.to_bytes().to_vec()))
        .collect();
    let wanted6: BTreeMap<Vec<u8>, Vec<u8>> = v6
        .iter()
        .map(|(k, v)| (k.to_bytes().to_vec(), v.to_bytes().to_vec()))
        .collect();
    for (name, wanted) in [(IPCACHE4, wanted4), (IPCACHE6, wanted6)] {
        let map = datapath.object().map(name)?;
        let stored: BTreeSet<Vec<u8>> = map.keys()?.into_iter().collect();
        for (key, value) in &wanted {
            // A stored key's lookup is exact; an absent key's would return a covering prefix.
            if !stored.contains(key) || map.lookup(key)?.as_deref() != Some(value.as_slice()) {
                map.update(key, value)?;
            }
        }
        for key in stored.iter().filter(|k| !wanted.contains_key(*k)) {
            map.delete(key)?;
        }
    }
    Ok(())
}
