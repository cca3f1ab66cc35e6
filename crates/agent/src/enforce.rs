//! The kernel side of the agent: one porin object per attached endpoint, its maps pinned under
//! `<state dir>/<endpoint>/`, its two programs attached to the endpoint's host-side device with
//! pinned tcx links.
//!
//! Why one object per endpoint: the policy maps are per endpoint (as Cilium's are), and the
//! object's programs read "the" policy map, so each endpoint needs its own maps and programs.
//! The ipcache is copied into each object.
//!
//! Every policy change goes through the A/B switch of `DATAPATH.md` §2.3
//! ([`Datapath::install_policy`]): the endpoint's complete new map state is written into the
//! idle slot and one 8-byte write flips the programs to it, so each packet sees the old or the
//! new policy of its endpoint, never a mix, and a write that fails (a full map) flips nothing.
//! The ipcache is updated entry by entry, as in Cilium (SECURITY.md, "Not guaranteed yet").
//!
//! Order of a first attach: maps created and pinned, ipcache and policy filled, **then** the
//! links created and pinned, so the device never runs the programs over an empty policy. An
//! adoption (the maps are already pinned) loads new programs over the pinned maps, installs the
//! current policy through the switch, then swaps the programs of the pinned links atomically
//! (`BPF_LINK_UPDATE`): conntrack, counters and the enforced policy are never reset.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use porin_ebpf::ObjectConfig;
use porin_ebpf::abi::{Ipcache4Pair, Ipcache6Pair, PolicyPair};
use porin_kernel::attach::{Hook, TcxLink, interface_index};
use porin_kernel::datapath::{IPCACHE4, IPCACHE6};
use porin_kernel::pin::{open_pinned_maps, pin_maps};
use porin_kernel::{Counters, Datapath, Direction, LoadedObject, MapDefinition, ObjectFile};
use tracing::{info, warn};

use crate::error::AgentError;

/// The hooks of an endpoint's host-side device and the program each runs (DATAPATH.md §8).
pub const HOOKS: [(Hook, Direction); 2] = [
    (Hook::Ingress, Direction::FromEndpoint),
    (Hook::Egress, Direction::ToEndpoint),
];

/// The pin name of a hook's link.
fn link_pin(hook: Hook) -> String {
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
    links: Vec<TcxLink>,
}

impl Attached {
    /// The endpoint's tcx links (ingress, egress).
    pub fn links(&self) -> &[TcxLink] {
        &self.links
    }
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
}

impl Enforcer {
    /// Emits porin's object for `config`; nothing touches the kernel yet.
    pub fn new(state_dir: &Path, config: &ObjectConfig) -> Result<Self, AgentError> {
        let object = porin_ebpf::emit(config).map_err(|e| AgentError::Emit(e.to_string()))?;
        let definitions = ObjectFile::parse(&object)
            .map_err(|e| AgentError::kernel("parsing porin's object", e))?
            .maps;
        Ok(Self {
            state_dir: state_dir.to_path_buf(),
            object,
            definitions,
            capacity: config.policy_map_max_entries,
            endpoints: BTreeMap::new(),
        })
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
        let object = match pinned {
            Some(maps) => LoadedObject::load_with_maps(&self.object, maps),
            None => LoadedObject::load(&self.object),
        }
        .map_err(|e| AgentError::kernel(context("loading porin's object"), e))?;
        let datapath = Datapath::from_object(object)
            .map_err(|e| AgentError::kernel(context("checking the object"), e))?;
        if !adopted {
            std::fs::create_dir_all(&dir).map_err(|e| AgentError::io(&dir, e))?;
            pin_maps(datapath.object(), &dir)
                .map_err(|e| AgentError::kernel(context("pinning maps"), e))?;
        }
        sync_ipcache(&datapath, ipcache.0, ipcache.1)
            .map_err(|e| AgentError::kernel(context("writing the ipcache"), e))?;
        datapath
            .install_policy(policy)
            .map_err(|e| AgentError::kernel(context("installing the policy"), e))?;
        let mut links = Vec::with_capacity(HOOKS.len());
        for (hook, direction) in HOOKS {
            let program = datapath
                .program(direction)
                .map_err(|e| AgentError::kernel(context("program"), e))?;
            let path = dir.join(link_pin(hook));
            let existing = if path.exists() {
                match TcxLink::from_pinned(&path).and_then(|link| Ok((link.info()?, link))) {
                    Ok((info, link)) if info.ifindex == ifindex && info.hook() == Some(hook) => {
                        Some(link)
                    }
                    // Detached (the device went away) or on another device: replaced below.
                    Ok((info, _)) => {
                        info!(
                            endpoint,
                            device,
                            hook = hook.as_str(),
                            stale_ifindex = info.ifindex,
                            "replacing a stale pinned link"
                        );
                        std::fs::remove_file(&path).map_err(|e| AgentError::io(&path, e))?;
                        None
                    }
                    Err(e) => return Err(AgentError::kernel(context("opening a pinned link"), e)),
                }
            } else {
                None
            };
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
                    link.pin(&path)
                        .map_err(|e| AgentError::kernel(context("pinning the link"), e))?;
                    link
                }
            };
            links.push(link);
        }
        self.endpoints.insert(
            endpoint.to_owned(),
            Attached {
                device: device.to_owned(),
                ifindex,
                datapath,
                entries: policy.len(),
                adopted,
                links,
            },
        );
        Ok(if adopted {
            AttachOutcome::Adopted
        } else {
            AttachOutcome::Fresh
        })
    }

    /// Installs `policy` for an attached endpoint through the A/B switch.
    pub fn install(&mut self, endpoint: &str, policy: &[PolicyPair]) -> Result<(), AgentError> {
        self.check_fits(endpoint, policy.len())?;
        let attached = self
            .endpoints
            .get_mut(endpoint)
            .ok_or_else(|| AgentError::Session(format!("endpoint `{endpoint}` is not attached")))?;
        attached.datapath.install_policy(policy).map_err(|e| {
            AgentError::kernel(format!("endpoint `{endpoint}`: installing the policy"), e)
        })?;
        attached.entries = policy.len();
        Ok(())
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
