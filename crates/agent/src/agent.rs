//! The agent: inputs → live session → enforcement, and the watch loop.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use porin_compiler::compile::Compiled;
use porin_compiler::inventory::Inventory;
use porin_compiler::limits::Limits;
use porin_compiler::mapstate::{Direction, MapState};
use porin_compiler::session::{Session, SessionError, TextLoad};
use porin_ebpf::ObjectConfig;
use porin_ebpf::abi::{IpcachePairs, PolicyPair, ipcache_pairs, policy_pairs};
use porin_ebpf::compiled::ipcache_of;
use porin_kernel::attach::interface_index;
use serde::Serialize;
use tracing::{error, info, warn};

use crate::enforce::{AttachOutcome, Enforcer, remove_pins};
use crate::error::AgentError;
use crate::inputs::{
    PolicyTexts, load_policy, read_inventory, read_policy_dir, target_of, watched_paths,
};
use crate::metrics::{self, EndpointMetrics, SharedMetrics};
use crate::preflight;

/// How long the watch loop waits for more file events before it applies a change (an editor's
/// save is several events; a `cp -r` of a directory many).
const DEBOUNCE: Duration = Duration::from_millis(150);
/// How often endpoints that could not be attached (their device did not exist) are retried.
const RETRY: Duration = Duration::from_secs(2);

/// What `porin agent run` is given.
#[derive(Debug, Clone)]
pub struct Config {
    /// The policy directory (CNP, CCNP, KNP files).
    pub policies: PathBuf,
    /// The inventory file (or directory).
    pub inventory: PathBuf,
    /// The state directory, on a bpffs: one directory of pins per endpoint.
    pub state_dir: PathBuf,
    /// Where to serve metrics (loopback).
    pub metrics: Option<SocketAddr>,
    /// Limits of loading and compiling.
    pub limits: Limits,
    /// The object's configuration (map sizes).
    pub object: ObjectConfig,
}

impl Config {
    /// A configuration with default limits and object.
    pub fn new(policies: PathBuf, inventory: PathBuf, state_dir: PathBuf) -> Self {
        Self {
            policies,
            inventory,
            state_dir,
            metrics: None,
            limits: Limits::default(),
            object: ObjectConfig::default(),
        }
    }
}

/// One endpoint of a plan (`--dry-run`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PlannedEndpoint {
    /// `namespace/name` or `name`.
    pub endpoint: String,
    /// Its identity.
    pub identity: u32,
    /// The host-side device.
    pub device: String,
    /// The device's index, `None` when it does not exist.
    pub ifindex: Option<u32>,
    /// Policy map entries.
    pub entries: usize,
    /// `attach` (new pins), `adopt` (pins of an earlier run exist) or why it is not attached.
    pub action: String,
}

/// What the agent would do (`--dry-run`) or did on its first apply.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Plan {
    /// Endpoints with an interface.
    pub endpoints: Vec<PlannedEndpoint>,
    /// Endpoints without an interface (peers only).
    pub peers_only: Vec<String>,
    /// ipcache entries (IPv4, IPv6) written into each object.
    pub ipcache: (usize, usize),
    /// Pinned endpoints of an earlier run that are no longer in the inventory (detached).
    pub stale: Vec<String>,
    /// Policy files.
    pub policy_files: Vec<String>,
}

impl Plan {
    /// The human form.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} policy file(s); ipcache {} IPv4 / {} IPv6 entries per object\n",
            self.policy_files.len(),
            self.ipcache.0,
            self.ipcache.1
        );
        for e in &self.endpoints {
            let index = e
                .ifindex
                .map_or_else(|| "missing".to_owned(), |i| format!("ifindex {i}"));
            out.push_str(&format!(
                "  {} (identity {}) on {} ({index}): {}; {} policy entries\n",
                e.endpoint, e.identity, e.device, e.action, e.entries
            ));
        }
        for peer in &self.peers_only {
            out.push_str(&format!(
                "  {peer}: no interface (peer only, not attached)\n"
            ));
        }
        for stale in &self.stale {
            out.push_str(&format!(
                "  {stale}: pinned by an earlier run, no longer in the inventory: detach\n"
            ));
        }
        out
    }
}

/// The result of one applied change.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// The revision now in force.
    pub revision: u64,
    /// Endpoints whose policy was (re)installed.
    pub installed: Vec<String>,
    /// Endpoints attached (fresh or adopted).
    pub attached: Vec<String>,
    /// Endpoints detached.
    pub detached: Vec<String>,
    /// Per-endpoint problems (the endpoint keeps its previous state).
    pub errors: Vec<String>,
    /// Seconds from the start of the change to its last flip.
    pub seconds: f64,
    /// Policy files whose change was re-parsed in place (the one rule item that changed, not
    /// the whole file).
    pub policies_in_place: Vec<String>,
}

/// A running agent: the live session and the attached endpoints.
pub struct Agent {
    config: Config,
    session: Session,
    texts: PolicyTexts,
    loaded_inventory: Inventory,
    enforcer: Enforcer,
    /// The attached endpoints and the map state each enforces (`None`: adopted pins whose
    /// policy is not yet the files', or a change that could not be installed).
    installed: BTreeMap<String, Option<Arc<MapState>>>,
    compiled: Arc<Compiled>,
    revision: u64,
    metrics: SharedMetrics,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("revision", &self.revision)
            .field("attached", &self.installed.len())
            .finish_non_exhaustive()
    }
}

fn load_all(
    texts: &PolicyTexts,
    limits: &Limits,
    inventory: &Inventory,
) -> Result<Vec<(String, porin_model::loader::LoadOutcome)>, AgentError> {
    let target = target_of(inventory);
    texts
        .iter()
        .map(|(name, text)| Ok((name.clone(), load_policy(name, text, limits, &target)?)))
        .collect()
}

/// The live session over the policy texts, each kept with how it was loaded, so that its next
/// version is re-parsed in place when one rule item changed (`Session::with_policy_texts`). A
/// text that does not validate is reported with the file's lines.
fn live_session(
    texts: &PolicyTexts,
    limits: &Limits,
    inventory: &Inventory,
) -> Result<Session, AgentError> {
    let load = TextLoad {
        limits: limits.load.clone(),
        target: Some(target_of(inventory)),
    };
    let texts_as_bytes = texts.iter().map(|(n, t)| (n.as_str(), t.as_str()));
    match Session::with_policy_texts(
        inventory.clone(),
        texts_as_bytes,
        &load,
        limits.compile.clone(),
    ) {
        Ok(session) => Ok(session),
        Err(SessionError::Policy(found)) => Err(load_all(texts, limits, inventory)
            .err()
            .unwrap_or_else(|| SessionError::Policy(found).into())),
        Err(e) => Err(e.into()),
    }
}

fn ipcache(compiled: &Compiled) -> Result<IpcachePairs, AgentError> {
    Ok(ipcache_pairs(
        &ipcache_of(compiled, &[]).map_err(|e| AgentError::Emit(e.to_string()))?,
    ))
}

/// Reads the inputs and compiles them (what `porin agent monitor` explains verdicts with).
pub fn compile(config: &Config) -> Result<Compiled, AgentError> {
    let texts = read_policy_dir(&config.policies, &config.limits)?;
    let inventory = read_inventory(&config.inventory, &config.limits)?;
    let loaded = load_all(&texts, &config.limits, &inventory)?;
    let session = Session::with_policies(inventory, loaded, config.limits.compile.clone())?;
    Ok(session.compiled())
}

/// Reads the inputs and compiles them, touching no kernel state: what `--dry-run` prints.
pub fn plan(config: &Config) -> Result<Plan, AgentError> {
    let texts = read_policy_dir(&config.policies, &config.limits)?;
    let inventory = read_inventory(&config.inventory, &config.limits)?;
    let loaded = load_all(&texts, &config.limits, &inventory)?;
    let session = Session::with_policies(inventory, loaded, config.limits.compile.clone())?;
    let compiled = session.compiled();
    let pairs = ipcache(&compiled)?;
    let inventory = session.inventory();
    let shared = shared_devices(&inventory);
    let mut endpoints = Vec::new();
    let mut peers_only = Vec::new();
    let mut names = BTreeSet::new();
    for endpoint in &compiled.endpoints {
        let name = endpoint.display_name();
        let Some(interface) = inventory.interfaces.get(&name) else {
            peers_only.push(name);
            continue;
        };
        names.insert(name.clone());
        let ifindex = interface_index(&interface.device).ok().flatten();
        let dir = config
            .state_dir
            .join(crate::enforce::endpoint_dir_name(&name));
        let entries = endpoint.state.len();
        let action = if let Some(others) = shared.get(&interface.device) {
            format!("refused: interface shared with {}", others.join(", "))
        } else if ifindex.is_none() {
            "waiting: the interface does not exist".to_owned()
        } else if entries > config.object.policy_map_max_entries as usize {
            format!(
                "refused: {entries} entries exceed the policy map ({})",
                config.object.policy_map_max_entries
            )
        } else if dir.exists() {
            "adopt".to_owned()
        } else {
            "attach".to_owned()
        };
        endpoints.push(PlannedEndpoint {
            endpoint: name,
            identity: endpoint.identity,
            device: interface.device.clone(),
            ifindex,
            entries,
            action,
        });
    }
    let mut stale = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&config.state_dir) {
        for entry in entries.flatten() {
            if let Some(name) = entry
                .file_name()
                .to_str()
                .and_then(crate::enforce::endpoint_of_dir)
                && !names.contains(&name)
            {
                stale.push(name);
            }
        }
    }
    stale.sort();
    Ok(Plan {
        endpoints,
        peers_only,
        ipcache: (pairs.v4.len(), pairs.v6.len()),
        stale,
        policy_files: texts.keys().cloned().collect(),
    })
}

/// Per policy direction, the policies whose default deny selects `endpoint` (each once), as
/// explanations name them.
fn default_deny_policies(
    compiled: &Compiled,
    endpoint: &str,
) -> BTreeMap<&'static str, Vec<String>> {
    let mut out = BTreeMap::new();
    let Some(policy) = compiled.endpoint(endpoint) else {
        return out;
    };
    for (label, direction) in [
        ("ingress", Direction::Ingress),
        ("egress", Direction::Egress),
    ] {
        let mut names = BTreeSet::new();
        for origin in policy
            .selected_by
            .direction(direction)
            .iter()
            .filter_map(|id| compiled.origin(*id))
        {
            names.insert(match &origin.namespace {
                Some(ns) => format!("{} {ns}/{}", origin.kind, origin.name),
                None => format!("{} {}", origin.kind, origin.name),
            });
        }
        if !names.is_empty() {
            out.insert(label, names.into_iter().collect());
        }
    }
    out
}

/// Devices named by more than one endpoint → the endpoints naming each (quoted).
fn shared_devices(inventory: &Inventory) -> BTreeMap<String, Vec<String>> {
    let mut by_device: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (endpoint, interface) in &inventory.interfaces {
        by_device
            .entry(interface.device.as_str())
            .or_default()
            .push(format!("`{endpoint}`"));
    }
    by_device
        .into_iter()
        .filter(|(_, endpoints)| endpoints.len() > 1)
        .map(|(device, endpoints)| (device.to_owned(), endpoints))
        .collect()
}

impl Agent {
    /// Checks privileges and bpffs, reads and compiles the inputs and enforces them on every
    /// endpoint that has an interface: adopting the pins an earlier run left (no flush), attaching
    /// the others, detaching pinned endpoints that are gone from the inventory. Endpoints that
    /// cannot be attached are reported ([`Applied::errors`]) and retried; the others are enforced.
    pub fn start(config: Config) -> Result<(Self, Applied), AgentError> {
        preflight::check_capabilities()?;
        preflight::check_bpffs(&config.state_dir)?;
        std::fs::create_dir_all(&config.state_dir)
            .map_err(|e| AgentError::io(&config.state_dir, e))?;
        let started = Instant::now();
        let texts = read_policy_dir(&config.policies, &config.limits)?;
        let inventory = read_inventory(&config.inventory, &config.limits)?;
        let session = live_session(&texts, &config.limits, &inventory)?;
        // The object decides before policy whether VRRP/IGMP packets reach
        // it at all (`enable-extended-ip-protocols`, DATAPATH.md §4), so it
        // is emitted with the inventory's setting: an object that disagreed
        // with the compiled policy would either drop what the policy allows
        // or hand the policy packets Cilium drops.
        let mut object = config.object.clone();
        object.extended_ip_protocols = inventory.settings.enable_extended_ip_protocols;
        let enforcer = Enforcer::new(&config.state_dir, &object)?;
        let compiled = Arc::new(session.compiled());
        let metrics: SharedMetrics = Arc::default();
        metrics::lock(&metrics).capacity = enforcer.capacity;
        let mut agent = Self {
            config,
            session,
            texts,
            loaded_inventory: inventory,
            enforcer,
            installed: BTreeMap::new(),
            compiled,
            revision: 0,
            metrics,
        };
        let mut applied = agent.reconcile(started)?;
        // Pinned endpoints of an earlier run that the inventory no longer has.
        for stale in agent.enforcer.pinned_endpoints()? {
            if !agent.installed.contains_key(&stale)
                && !agent.session.inventory().interfaces.contains_key(&stale)
            {
                info!(endpoint = %stale, "detaching an endpoint pinned by an earlier run and gone from the inventory");
                remove_pins(&agent.enforcer.endpoint_dir(&stale))?;
                applied.detached.push(stale);
            }
        }
        if let Some(addr) = agent.config.metrics {
            let listener = metrics::bind(addr)?;
            metrics::serve(
                listener,
                agent.metrics.clone(),
                agent.config.state_dir.clone(),
            );
            info!(%addr, "serving metrics");
        }
        Ok((agent, applied))
    }

    /// The revision in force.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The compilation in force (for explanations).
    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.compiled
    }

    /// The metrics state.
    pub fn metrics(&self) -> &SharedMetrics {
        &self.metrics
    }

    /// The kernel side.
    pub fn enforcer(&self) -> &Enforcer {
        &self.enforcer
    }

    fn count_error(&self, kind: &'static str) {
        let mut state = metrics::lock(&self.metrics);
        *state.errors.entry(kind).or_default() += 1;
        state.last_change_ok = false;
    }

    /// Rereads the policy directory and the inventory and applies what changed. A change that
    /// does not load, validate or compile is refused as a whole: the session and every endpoint
    /// keep the previous revision (the error is logged and counted).
    pub fn reload(&mut self) -> Result<Applied, AgentError> {
        let started = Instant::now();
        let result = self.stage_change();
        match result {
            Ok(Some(in_place)) => self.reconcile(started).map(|applied| Applied {
                policies_in_place: in_place,
                ..applied
            }),
            Ok(None) => Ok(Applied {
                revision: self.revision,
                ..Applied::default()
            }),
            Err((kind, e)) => {
                self.count_error(kind);
                error!(kind, error = %e, "change refused; the previous policy stays enforced");
                Err(e)
            }
        }
    }

    /// Brings the session to the files: the texts re-parsed in place, `None` when nothing
    /// changed.
    fn stage_change(&mut self) -> Result<Option<Vec<String>>, (&'static str, AgentError)> {
        let limits = self.config.limits.clone();
        let texts = read_policy_dir(&self.config.policies, &limits).map_err(|e| ("policy", e))?;
        let inventory =
            read_inventory(&self.config.inventory, &limits).map_err(|e| ("inventory", e))?;
        let loaded_extended = self.loaded_inventory.settings.enable_extended_ip_protocols;
        if inventory.settings.enable_extended_ip_protocols != loaded_extended {
            return Err((
                "inventory",
                AgentError::Policy(format!(
                    "{}: `enable-extended-ip-protocols` changed from {loaded_extended} to {}: the \
                     loaded datapath object was emitted for {loaded_extended} and the agent does \
                     not swap objects at run time; restart the agent to apply it",
                    self.config.inventory.display(),
                    inventory.settings.enable_extended_ip_protocols,
                )),
            ));
        }
        // A new ciliumVersion / enableK8sClusterNetworkPolicy revalidates every text.
        let retarget = inventory.target != self.loaded_inventory.target;
        let target = target_of(&inventory);
        let changed: Vec<(&String, &String)> = texts
            .iter()
            .filter(|(name, text)| retarget || self.texts.get(*name) != Some(*text))
            .collect();
        let removed: Vec<String> = self
            .texts
            .keys()
            .filter(|n| !texts.contains_key(*n))
            .cloned()
            .collect();
        let inventory_changed = inventory != self.loaded_inventory;
        if changed.is_empty() && removed.is_empty() && !inventory_changed {
            return Ok(None);
        }
        // Every changed file is checked before the session is touched, so one that does not
        // validate refuses the change as a whole (`Session::check_policy_text`: a file whose
        // change lies in one rule item is checked by re-parsing that item, which the apply
        // below does again in place; any other is loaded here, and that load is applied).
        let load = TextLoad {
            limits: limits.load.clone(),
            target: Some(target),
        };
        let mut checked = Vec::with_capacity(changed.len());
        for (name, text) in changed {
            match self.session.check_policy_text(name, text, &load) {
                Ok(text) => checked.push(text),
                Err(e) => {
                    // Rendered with the file's lines, as a load gives them (the session's
                    // error carries the findings without the text).
                    let e = load_policy(name, text, &limits, &target)
                        .err()
                        .unwrap_or_else(|| e.into());
                    return Err(("policy", e));
                }
            }
        }
        let mut in_place = Vec::new();
        let mut outcome: Result<(), (&'static str, AgentError)> = Ok(());
        // Whether a call before the one that failed changed the session (a failed call changes
        // nothing): then the session goes back to the last good inputs.
        let mut touched = false;
        for name in &removed {
            match self.session.remove_policy(name) {
                Some(Err(e)) => {
                    outcome = Err(("compile", e.into()));
                    break;
                }
                Some(Ok(_)) => touched = true,
                None => {}
            }
        }
        if outcome.is_ok() {
            // Each changed file as checked: the session re-parses and lowers only the rule item
            // that changed when that is all, instead of a load of the whole file (~25 ms at
            // 4,096 rules) and a comparison of every item.
            for text in checked {
                let name = text.name().to_owned();
                match self.session.apply_checked_text(text) {
                    Ok(applied) => {
                        touched = true;
                        if applied.in_place {
                            in_place.push(name);
                        }
                    }
                    Err(e) => {
                        outcome = Err(("compile", e.into()));
                        break;
                    }
                }
            }
        }
        if outcome.is_ok() && inventory_changed {
            outcome = self
                .session
                .replace_inventory(inventory.clone(), "inventory file changed")
                .map(drop)
                .map_err(|e| ("compile", AgentError::from(e)));
        }
        if let Err((kind, e)) = outcome {
            if !touched {
                return Err((kind, e));
            }
            // Part of the change is in the session: rebuild it from the last good inputs.
            match live_session(&self.texts, &limits, &self.loaded_inventory) {
                Ok(session) => self.session = session,
                Err(restore) => warn!(error = %restore, "could not rebuild the previous session"),
            }
            return Err((kind, e));
        }
        self.texts = texts;
        self.loaded_inventory = inventory;
        Ok(Some(in_place))
    }

    /// Makes the kernel match the session: detach, attach, one flip, ipcache.
    fn reconcile(&mut self, started: Instant) -> Result<Applied, AgentError> {
        let compiled = Arc::new(self.session.compiled());
        let pairs = ipcache(&compiled)?;
        let inventory = self.session.inventory();
        let shared = shared_devices(&inventory);
        let mut applied = Applied::default();
        let mut wanted: BTreeMap<String, (String, Arc<MapState>)> = BTreeMap::new();
        for endpoint in &compiled.endpoints {
            let name = endpoint.display_name();
            if let Some(interface) = inventory.interfaces.get(&name) {
                wanted.insert(name, (interface.device.clone(), endpoint.state.clone()));
            }
        }
        // 1. Endpoints gone (or moved to another device): detach.
        let attached: Vec<(String, String)> = self
            .enforcer
            .attached()
            .iter()
            .map(|(name, a)| (name.clone(), a.device.clone()))
            .collect();
        for (name, device) in attached {
            let keep = wanted.get(&name).is_some_and(|(d, _)| *d == device);
            if !keep {
                info!(endpoint = %name, device = %device, "detaching");
                if let Err(e) = self.enforcer.detach(&name) {
                    applied.errors.push(e.to_string());
                }
                self.installed.remove(&name);
                applied.detached.push(name);
            }
        }
        // 2. Endpoints to attach (new, moved, or waiting for their device): a fresh one gets its
        // policy and the ipcache before its links exist; an adopted one keeps enforcing what its
        // pins hold until the flip below.
        let mut shared_reported = BTreeSet::new();
        for (name, (device, state)) in &wanted {
            if self.installed.contains_key(name) {
                continue;
            }
            if let Some(endpoints) = shared.get(device) {
                if shared_reported.insert(device.clone()) {
                    let e = AgentError::DeviceShared {
                        device: device.clone(),
                        endpoints: endpoints.clone(),
                    };
                    error!(error = %e, "not attached");
                    self.count_error("attach");
                    applied.errors.push(e.to_string());
                }
                continue;
            }
            match self
                .enforcer
                .attach(name, device, &policy_pairs(state), (&pairs.v4, &pairs.v6))
            {
                Ok(outcome) => {
                    let adopted = outcome == AttachOutcome::Adopted;
                    info!(endpoint = %name, device = %device, adopted, "attached");
                    self.installed
                        .insert(name.clone(), (!adopted).then(|| state.clone()));
                    applied.attached.push(name.clone());
                }
                Err(e) => {
                    error!(endpoint = %name, error = %e, "not attached");
                    self.count_error("attach");
                    applied.errors.push(e.to_string());
                }
            }
        }
        // 3. Every attached endpoint whose policy changed (or whose adopted pins may hold
        // another): one flip for all of them, before the ipcache moves (a new peer's keys exist
        // before its address maps to it).
        let changes: BTreeMap<String, Vec<PolicyPair>> = wanted
            .iter()
            .filter_map(|(name, (_, state))| match self.installed.get(name)? {
                Some(previous) if Arc::ptr_eq(previous, state) || **previous == **state => None,
                _ => Some((name.clone(), policy_pairs(state))),
            })
            .collect();
        let flip = self.enforcer.install_all(&changes);
        for name in flip.up_to_date {
            if let Some((_, state)) = wanted.get(&name) {
                self.installed.insert(name.clone(), Some(state.clone()));
            }
        }
        applied.installed = flip.changed;
        for e in flip.errors {
            error!(error = %e, "policy not installed; the previous one stays enforced");
            self.count_error("apply");
            applied.errors.push(e.to_string());
        }
        // 4. The ipcache of every attached object.
        for e in self.enforcer.sync_ipcache(&pairs.v4, &pairs.v6) {
            self.count_error("apply");
            applied.errors.push(e.to_string());
        }
        self.revision += 1;
        self.compiled = compiled;
        applied.revision = self.revision;
        applied.seconds = started.elapsed().as_secs_f64();
        self.publish(&wanted, &pairs, &applied);
        info!(
            revision = applied.revision,
            installed = applied.installed.len(),
            attached = applied.attached.len(),
            detached = applied.detached.len(),
            errors = applied.errors.len(),
            seconds = applied.seconds,
            "applied"
        );
        Ok(applied)
    }

    fn publish(
        &self,
        wanted: &BTreeMap<String, (String, Arc<MapState>)>,
        pairs: &IpcachePairs,
        applied: &Applied,
    ) {
        let mut state = metrics::lock(&self.metrics);
        state.revision = self.revision;
        state.ipcache = (pairs.v4.len(), pairs.v6.len());
        state.endpoints = wanted
            .iter()
            .map(|(name, (device, _))| {
                let attached = self.enforcer.attached().get(name);
                (
                    name.clone(),
                    EndpointMetrics {
                        device: device.clone(),
                        entries: attached.map_or(0, |a| a.entries),
                        attached: attached.is_some(),
                        default_deny: default_deny_policies(&self.compiled, name),
                    },
                )
            })
            .collect();
        state.last_apply_seconds = applied.seconds;
        state.apply_seconds_sum += applied.seconds;
        state.apply_count += 1;
        state.last_change_ok = applied.errors.is_empty();
    }

    /// Endpoints that have an interface but are not attached (retried by the watch loop).
    pub fn waiting(&self) -> usize {
        self.session
            .inventory()
            .interfaces
            .keys()
            .filter(|name| !self.installed.contains_key(*name))
            .count()
    }

    /// Retries the endpoints that are not attached (their device may exist now).
    pub fn retry_waiting(&mut self) -> Result<Applied, AgentError> {
        self.reconcile(Instant::now())
    }

    /// Watches the inputs and applies each change until `stop` is set; then leaves every pin in
    /// place (enforcement continues) unless `detach`, which removes them all.
    pub fn watch(mut self, stop: &AtomicBool, detach: bool) -> Result<(), AgentError> {
        let (tx, rx) = channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Reading the files raises access events; only changes (and errors) count.
                if !matches!(&event, Ok(e) if matches!(e.kind, notify::EventKind::Access(_))) {
                    let _ = tx.send(());
                }
            })
            .map_err(|e| AgentError::Watch {
                path: self.config.policies.clone(),
                message: e.to_string(),
            })?;
        for path in watched_paths(&self.config.policies, &self.config.inventory) {
            watcher
                .watch(&path, RecursiveMode::Recursive)
                .map_err(|e| AgentError::Watch {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
        }
        let mut last_retry = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(_) => {
                    // Gather the rest of the burst.
                    let until = Instant::now() + DEBOUNCE;
                    while let Some(left) = until.checked_duration_since(Instant::now()) {
                        if rx.recv_timeout(left).is_err() {
                            break;
                        }
                    }
                    let _ = self.reload();
                }
                Err(RecvTimeoutError::Timeout) => {
                    if self.waiting() > 0 && last_retry.elapsed() >= RETRY {
                        last_retry = Instant::now();
                        let _ = self.retry_waiting();
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        drop(watcher);
        self.shutdown(detach)
    }

    /// Stops: keeps every endpoint enforcing (pins stay) unless `detach`.
    pub fn shutdown(mut self, detach: bool) -> Result<(), AgentError> {
        let names: Vec<String> = self.enforcer.attached().keys().cloned().collect();
        if detach {
            for name in &names {
                self.enforcer.detach(name)?;
            }
            for stale in self.enforcer.pinned_endpoints()? {
                remove_pins(&self.enforcer.endpoint_dir(&stale))?;
            }
            self.enforcer.remove_switch_pin()?;
            info!(
                endpoints = names.len(),
                "stopped and detached every endpoint"
            );
        } else {
            for name in &names {
                self.enforcer.release(name);
            }
            info!(
                endpoints = names.len(),
                "stopped; the pinned programs keep enforcing"
            );
        }
        Ok(())
    }
}

/// Removes every endpoint's pins under `state_dir` (`porin agent stop --detach` when the agent
/// is not running). Returns the endpoints detached.
pub fn detach_all(state_dir: &std::path::Path) -> Result<Vec<String>, AgentError> {
    let mut detached = Vec::new();
    let entries = match std::fs::read_dir(state_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(detached),
        Err(e) => return Err(AgentError::io(state_dir, e)),
    };
    for entry in entries.flatten() {
        if let Some(name) = entry
            .file_name()
            .to_str()
            .and_then(crate::enforce::endpoint_of_dir)
        {
            remove_pins(&entry.path())?;
            detached.push(name);
        }
    }
    crate::enforce::remove_switch_pin(state_dir)?;
    detached.sort();
    Ok(detached)
}
