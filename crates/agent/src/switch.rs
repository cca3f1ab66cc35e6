//! One active-slot switch for every endpoint: the objects of all attached endpoints share one
//! `porin_config` map, so a change that touches several endpoints flips them together with one
//! 8-byte write.
//!
//! Why: an endpoint's verdict on a flow is its egress policy AND the peer's ingress policy. With
//! one flip per endpoint, a change that moves a deny from A's egress to B's ingress (both
//! versions deny the flow) opens the flow for the moment A runs the new version and B the old
//! one. With one switch there is no such moment: every endpoint's new state is written into its
//! idle slot first, then the switch flips all of them at once (DATAPATH.md §2.3, for many
//! objects at a time).
//!
//! The switch is pinned at `<state dir>/porin_config` and, as each endpoint's object uses it,
//! under each endpoint's directory too (the same map, several names). Every read-modify-write
//! of it (the agent's flips, `porin agent monitor` switching events on and off) holds the state
//! directory's lock ([`lock_config`]), so a monitor can never write back a slot the agent has
//! flipped away from.

use std::fs::File;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use nix::fcntl::{Flock, FlockArg};
use porin_ebpf::abi::{ConfigValue, index_key};
use porin_kernel::datapath::{CONFIG, PolicySlot, RETIRE_GRACE};
use porin_kernel::{Map, MapDefinition, MapSpec, spec_of};

use crate::error::AgentError;

/// The state directory's lock, held while `porin_config` is read and written back.
#[derive(Debug)]
pub struct ConfigLock(#[allow(dead_code, reason = "held for its Drop")] Flock<File>);

/// Takes the state directory's lock (an exclusive `flock` on the directory; bpffs supports
/// it), waiting for the holder.
pub fn lock_config(state_dir: &Path) -> Result<ConfigLock, AgentError> {
    let dir = File::open(state_dir).map_err(|e| AgentError::io(state_dir, e))?;
    Flock::lock(dir, FlockArg::LockExclusive)
        .map(ConfigLock)
        .map_err(|(_, errno)| AgentError::io(state_dir, std::io::Error::from(errno)))
}

/// The kernel's id of a map (`struct bpf_map_info.id`): two handles name the same map exactly
/// when their ids are equal.
pub fn map_id(fd: BorrowedFd<'_>, what: &str) -> Result<u32, AgentError> {
    let mut info = [0u8; 8];
    porin_kernel::sys::obj_get_info(fd, what, &mut info)
        .map_err(|e| AgentError::kernel(format!("reading the id of {what}"), e))?;
    Ok(u32::from_le_bytes([info[4], info[5], info[6], info[7]]))
}

fn config_error(e: impl std::fmt::Display) -> AgentError {
    AgentError::Session(format!("the shared porin_config: {e}"))
}

/// The shared `porin_config`.
#[derive(Debug)]
pub struct Switch {
    map: Map,
    path: PathBuf,
    spec: MapSpec,
    id: u32,
    last_flip: Option<Instant>,
    flips: u64,
}

impl Switch {
    /// Opens the switch pinned under `state_dir`, or creates and pins it (slot A active, the
    /// kernel's zero value). A pinned map that is not the object's `porin_config` is an error.
    pub fn open_or_create(
        state_dir: &Path,
        definitions: &[MapDefinition],
    ) -> Result<Self, AgentError> {
        let definition = definitions
            .iter()
            .find(|d| d.name == CONFIG)
            .ok_or_else(|| AgentError::Session(format!("the object has no map `{CONFIG}`")))?;
        let spec = spec_of(definition);
        let path = state_dir.join(CONFIG);
        let text = path
            .to_str()
            .ok_or_else(|| config_error(format!("{} is not UTF-8", path.display())))?;
        let map = if path.exists() {
            let found = porin_kernel::pin::pinned_map_spec(&path)
                .map_err(|e| AgentError::kernel(format!("reading {}", path.display()), e))?;
            if found != spec {
                return Err(config_error(format!(
                    "{} is {found:?}; the object declares {spec:?}",
                    path.display()
                )));
            }
            Map::from_pinned(text, CONFIG, spec.clone())
        } else {
            Map::create(CONFIG, spec.clone()).and_then(|map| {
                map.update(
                    &index_key(ConfigValue::KEY),
                    &PolicySlot::A.config_value().to_bytes(),
                )?;
                map.pin(text)?;
                Ok(map)
            })
        }
        .map_err(|e| AgentError::kernel(format!("the switch {}", path.display()), e))?;
        let id = map_id(map.fd(), CONFIG)?;
        Ok(Self {
            map,
            path,
            spec,
            id,
            // An agent killed just after a flip may be restarted within the grace period: the
            // first fill waits it out as if the flip had just happened.
            last_flip: Some(Instant::now()),
            flips: 0,
        })
    }

    /// Flips made by this agent process.
    pub fn flips(&self) -> u64 {
        self.flips
    }

    /// The map's kernel id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Another handle of the map (for an object that is loaded over it).
    pub fn handle(&self) -> Result<Map, AgentError> {
        let text = self.path.to_str().unwrap_or_default();
        Map::from_pinned(text, CONFIG, self.spec.clone())
            .map_err(|e| AgentError::kernel(format!("opening {}", self.path.display()), e))
    }

    /// Pins the switch at `path` too (an endpoint's directory).
    pub fn pin_at(&self, path: &Path) -> Result<(), AgentError> {
        let text = path
            .to_str()
            .ok_or_else(|| config_error(format!("{} is not UTF-8", path.display())))?;
        self.map
            .pin(text)
            .map_err(|e| AgentError::kernel(format!("pinning the switch at {}", path.display()), e))
    }

    /// The value of `porin_config` behind `map` (the switch or an older endpoint's own).
    pub fn read_map(map: &Map) -> Result<ConfigValue, AgentError> {
        let value = map
            .lookup(&index_key(ConfigValue::KEY))
            .map_err(|e| AgentError::kernel("reading porin_config", e))?
            .ok_or_else(|| config_error("no key 0"))?;
        ConfigValue::from_bytes(&value).map_err(config_error)
    }

    /// The slot every endpoint's programs read.
    pub fn active(&self) -> Result<PolicySlot, AgentError> {
        Self::read_map(&self.map)?.slot().map_err(config_error)
    }

    fn write(&self, value: ConfigValue) -> Result<(), AgentError> {
        self.map
            .update(&index_key(ConfigValue::KEY), &value.to_bytes())
            .map_err(|e| AgentError::kernel("writing the shared porin_config", e))
    }

    /// Clears `slot`'s bits of `porin_config.prefix_free` that are not in `keep` (the programs
    /// consult those lookups again: its tries, or a direction's L4-only lookup): always safe,
    /// and needed before an endpoint whose `slot` holds keys a set bit would skip starts
    /// reading it (`keep` = [`PolicySlot::free_bits`] of what it holds). Takes `lock` as proof
    /// that the caller holds the state directory's lock.
    pub fn clear_free_bits(
        &self,
        slot: PolicySlot,
        keep: u8,
        _lock: &ConfigLock,
    ) -> Result<(), AgentError> {
        let mut value = Self::read_map(&self.map)?;
        let cleared = value.prefix_free & !(slot.free_mask() & !keep);
        if cleared != value.prefix_free {
            value.prefix_free = cleared;
            self.write(value)?;
        }
        Ok(())
    }

    /// Sleeps until the retired slot of the last flip can be rewritten (DATAPATH.md §2.3: no
    /// program run that started before the flip still reads it).
    pub fn wait_out_retire_grace(&self) {
        if let Some(flipped) = self.last_flip {
            let ready = flipped + RETIRE_GRACE;
            let now = Instant::now();
            if ready > now {
                std::thread::sleep(ready - now);
            }
        }
    }

    /// The flip: one update of the 8-byte value, `to` active, `to`'s bits of `prefix_free`
    /// set to `free_bits` (what holds for every endpoint's slot `to`:
    /// [`PolicySlot::free_bits`] over each, combined with `&`); the events byte and the other
    /// slot's bits are kept.
    pub fn flip(
        &mut self,
        to: PolicySlot,
        free_bits: u8,
        _lock: &ConfigLock,
    ) -> Result<(), AgentError> {
        let mut value = Self::read_map(&self.map)?;
        value.active_policy = to.config_value().active_policy;
        let mask = to.free_mask();
        value.prefix_free = (value.prefix_free & !mask) | (free_bits & mask);
        self.write(value)?;
        self.last_flip = Some(Instant::now());
        self.flips += 1;
        Ok(())
    }
}
