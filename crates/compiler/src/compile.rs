//! The compiler driver and its output.
//!
//! [`compile`] runs the whole stage: lower policies to rules, allocate
//! identities (endpoint label sets and policy prefixes), resolve each
//! endpoint identity's L4 policy once, distill each endpoint's map state,
//! and build the ipcache. The result, [`Compiled`], is deterministic: the
//! same inputs give byte-identical JSON (every collection is ordered).

pub mod capacity;
mod json;
#[cfg(feature = "synthetic")]
pub mod synthetic;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, OnceLock};

use ipnetwork::IpNetwork;
use porin_model::diagnostic::Diagnostic;
use rayon::prelude::*;
use serde::Serialize;

use crate::allocation::{IdentityInfo, IdentityKind, IdentityTable};
use crate::codes;
use crate::error::CompileError;
use crate::identity::Identity;
use crate::inventory::{Endpoint, Inventory, NamedPort};
use crate::ipcache::{Family, Ipcache, first_uncovered};
use crate::labels::{LabelSet, host_prefix};
use crate::limits::{CompileLimits, Limit, insertion_bound};
use crate::mapstate::{Direction, Entry, Key, MapState};
use crate::resolve::lower::{Lowered, Origin, OriginKind, PolicyInput, lower, lower_consuming};
use crate::resolve::policy::{L4Policy, Resolver};
use crate::resolve::rule::{PolicyRule, proto};
use crate::tier::Tiers;

/// Whether each direction is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Enforcement {
    /// Ingress enforced.
    pub ingress: bool,
    /// Egress enforced.
    pub egress: bool,
}

/// One map entry, for output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntryOut {
    /// `ingress` or `egress`.
    pub direction: &'static str,
    /// Peer identity (0 = any).
    pub identity: u32,
    /// Protocol name (`ANY` for L3-only keys).
    pub proto: &'static str,
    /// First port (or ICMP type) covered.
    pub port: u16,
    /// Last port covered.
    pub end_port: u16,
    /// Port prefix length (0..=16).
    pub port_prefix_len: u8,
    /// `allow`, `deny` or `redirect`.
    pub verdict: &'static str,
    /// Precedence (§4.3).
    pub precedence: u32,
    /// Proxy port of a redirect (0 = none).
    pub proxy_port: u16,
    /// Authentication type.
    pub auth_type: u8,
    /// Whether the auth type is explicit.
    pub auth_explicit: bool,
    /// Policy-log cookie.
    pub cookie: u32,
    /// Rule origins (ids into [`Compiled::origins`]).
    pub origins: Vec<u32>,
}

impl EntryOut {
    /// The output form of one map entry.
    pub fn new(key: &Key, entry: &Entry) -> Self {
        let verdict = if entry.is_deny() {
            "deny"
        } else if entry.is_redirect() {
            "redirect"
        } else {
            "allow"
        };
        Self {
            direction: match key.direction() {
                Direction::Ingress => "ingress",
                Direction::Egress => "egress",
            },
            identity: key.identity().get(),
            proto: proto::static_name(key.proto()),
            port: key.port(),
            end_port: key.end_port(),
            port_prefix_len: key.port_prefix_len(),
            verdict,
            precedence: entry.precedence.get(),
            proxy_port: entry.proxy_port,
            auth_type: entry.auth.auth_type().get(),
            auth_explicit: entry.auth.is_explicit(),
            cookie: entry.cookie,
            origins: entry.origins.iter().copied().collect(),
        }
    }
}

/// The compiled policy of one endpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndpointPolicy {
    /// Name.
    pub name: String,
    /// Namespace (none outside Kubernetes).
    pub namespace: Option<String>,
    /// Identity.
    pub identity: u32,
    /// Identity labels.
    pub labels: LabelSet,
    /// Addresses.
    pub ips: Vec<IpAddr>,
    /// Enforcement per direction.
    pub enforcement: Enforcement,
    /// Findings about this endpoint.
    pub diagnostics: Vec<Diagnostic>,
    /// The map state (for evaluation and code generation); shared between
    /// endpoints with the same identity and named ports. Serialised as
    /// `entries`, one [`EntryOut`] per key in key order.
    #[serde(rename = "entries", serialize_with = "serialize_entries")]
    pub state: Arc<MapState>,
    /// The origins of the default-deny rules that select the endpoint, per
    /// direction: the policies that put a direction in default deny, which
    /// explanations of a default-deny verdict and `porin diff` name (no map
    /// entry carries them: a rule that allows nothing adds no key). Not
    /// serialised; the JSON output is the map state's.
    #[serde(skip)]
    pub selected_by: SelectedBy,
}

/// The origins of the default-deny rules selecting an endpoint, per
/// direction, in rule order (see [`EndpointPolicy::selected_by`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectedBy {
    /// Rules of ingress sections.
    pub ingress: Vec<u32>,
    /// Rules of egress sections.
    pub egress: Vec<u32>,
}

impl SelectedBy {
    /// The default-deny rules among `selecting` (indices into `rules`,
    /// in rule order), by direction, each origin once.
    pub fn of(rules: &[PolicyRule], selecting: &[usize]) -> Self {
        let mut selected_by = Self::default();
        for &rule in selecting {
            if let Some(rule) = rules.get(rule)
                && rule.default_deny
            {
                let list = match rule.direction {
                    Direction::Ingress => &mut selected_by.ingress,
                    Direction::Egress => &mut selected_by.egress,
                };
                if !list.contains(&rule.origin) {
                    list.push(rule.origin);
                }
            }
        }
        selected_by
    }

    /// The origins of one direction.
    pub fn direction(&self, direction: Direction) -> &[u32] {
        match direction {
            Direction::Ingress => &self.ingress,
            Direction::Egress => &self.egress,
        }
    }
}

fn serialize_entries<S: serde::Serializer>(
    state: &Arc<MapState>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(state.iter().map(|(k, e)| EntryOut::new(k, e)))
}

impl EndpointPolicy {
    /// The map entries in output form, in key order.
    pub fn entries(&self) -> Vec<EntryOut> {
        self.state
            .iter()
            .map(|(k, e)| EntryOut::new(k, e))
            .collect()
    }

    /// `namespace/name` or `name`.
    pub fn display_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// One ipcache entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct IpcacheEntry {
    /// The prefix.
    #[serde(serialize_with = "crate::labels::serialize_display")]
    pub prefix: IpNetwork,
    /// Its identity.
    pub identity: u32,
}

/// The output of the compiler stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compiled {
    /// Local cluster name.
    pub cluster: String,
    /// Every identity (reserved, endpoint, CIDR).
    pub identities: Vec<IdentityInfo>,
    /// Endpoints in inventory order (namespace, name).
    pub endpoints: Vec<EndpointPolicy>,
    /// The ipcache: endpoint addresses, policy prefixes, world routes;
    /// IPv4 first, then by address and length.
    pub ipcache: Vec<IpcacheEntry>,
    /// Rule origins, indexed by id.
    pub origins: Vec<Origin>,
    /// Findings about the policies.
    pub diagnostics: Vec<Diagnostic>,
    /// The inventory's nodes (their addresses are in the ipcache), for
    /// `node/NAME` peers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<crate::inventory::Node>,
    /// The inventory's `mesh-auth-mutual-enabled` setting, which decides
    /// auth-required verdicts ([`crate::explain::authenticates`]); the map
    /// state keeps its auth entries either way.
    #[serde(skip)]
    pub mutual_auth: bool,
    /// The inventory's `enable-extended-ip-protocols` setting: whether
    /// VRRP/IGMP packets reach policy ([`crate::resolve::rule::proto::tracked`]).
    #[serde(skip)]
    pub extended_ip_protocols: bool,
}

impl Compiled {
    /// The endpoint named `namespace/name` (or `name`).
    pub fn endpoint(&self, reference: &str) -> Option<&EndpointPolicy> {
        let (namespace, name) = match reference.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, reference),
        };
        self.endpoints
            .iter()
            .find(|e| e.namespace.as_deref() == namespace && e.name == name)
    }

    /// The endpoint owning an address.
    pub fn endpoint_by_ip(&self, ip: IpAddr) -> Option<&EndpointPolicy> {
        self.endpoints.iter().find(|e| e.ips.contains(&ip))
    }

    /// The identity the ipcache gives an address (longest prefix; world
    /// 9/10 by default).
    pub fn identity_of_ip(&self, ip: IpAddr) -> u32 {
        self.ipcache
            .iter()
            .filter(|e| e.prefix.contains(ip))
            .max_by_key(|e| e.prefix.prefix())
            .map_or(Family::of(ip).world_identity().get(), |e| e.identity)
    }

    /// An address of `family` that stands for the outside world: no
    /// endpoint owns it and no prefix of the ipcache but `0.0.0.0/0` /
    /// `::/0` covers it, so the ipcache gives it the family's world
    /// identity, as real world traffic gets (world-ipv4 / world-ipv6,
    /// `daemon/cmd/hostips-sync.go`). The first such address from
    /// `192.0.2.1` / `2001:db8::1` (documentation ranges) on; `None` when
    /// the policies' prefixes cover the whole family, so that no packet of
    /// it carries the world identity.
    pub fn world_address(&self, family: Family) -> Option<IpAddr> {
        let preferred = match family {
            Family::V4 => IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            Family::V6 => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
        };
        let covered = self
            .ipcache
            .iter()
            .map(|e| e.prefix)
            .filter(|prefix| prefix.prefix() > 0)
            .chain(
                self.endpoints
                    .iter()
                    .flat_map(|e| e.ips.iter().map(|ip| host_prefix(*ip))),
            );
        first_uncovered(covered, preferred)
    }

    /// What an identity stands for, in the words users know: its reserved
    /// name (`world-ipv4`, `host`), the endpoints that carry it
    /// (`shop/web`, at most three named), the prefix of a CIDR identity
    /// (`CIDR 203.0.113.0/24`), `any peer` for 0, or `identity N` when the
    /// compilation does not know it.
    pub fn identity_name(&self, id: u32) -> String {
        if id == 0 {
            return "any peer".to_owned();
        }
        let Some(info) = self.identities.iter().find(|i| i.id == id) else {
            return format!("identity {id}");
        };
        match &info.kind {
            IdentityKind::Reserved { name } => name.clone(),
            // `name` holds the labels (`reserved:health`); users know the word.
            IdentityKind::ReservedEndpoints { name, .. } => Identity::new(id)
                .ok()
                .and_then(Identity::reserved_name)
                .map_or_else(|| name.clone(), str::to_owned),
            IdentityKind::Cidr { prefix } => format!("CIDR {prefix}"),
            IdentityKind::Node { nodes } => format!("node {}", nodes.join(", ")),
            IdentityKind::Endpoints { .. } => {
                let names: Vec<String> = self
                    .endpoints
                    .iter()
                    .filter(|e| e.identity == id)
                    .map(EndpointPolicy::display_name)
                    .collect();
                match names.len() {
                    0 => format!("identity {id}"),
                    1..=3 => names.join(", "),
                    n => format!("{} and {} more", names[..3].join(", "), n - 3),
                }
            }
        }
    }

    /// The ipcache as core's [`Ipcache`] table (for the datapath encoding).
    pub fn ipcache_table(&self) -> Ipcache {
        let mut table = Ipcache::new();
        for entry in &self.ipcache {
            if let Ok(identity) = Identity::new(entry.identity) {
                table.insert(entry.prefix, identity);
            }
        }
        table
    }

    /// The origin of an id.
    pub fn origin(&self, id: u32) -> Option<&Origin> {
        usize::try_from(id).ok().and_then(|i| self.origins.get(i))
    }

    /// Every diagnostic of the compilation: the policy-wide ones, then each
    /// endpoint's in endpoint order. The front ends (CLI, C API, `porin
    /// test`) report this list, so none forgets the endpoints' findings.
    pub fn all_diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics
            .iter()
            .chain(self.endpoints.iter().flat_map(|e| e.diagnostics.iter()))
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.all_diagnostics().any(Diagnostic::is_error)
    }

    /// Deterministic, pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// Compiles policies against an inventory (which must be finished, see
/// [`Inventory::finish`]).
pub fn compile(
    policies: &[PolicyInput<'_>],
    inventory: &Inventory,
) -> Result<Compiled, CompileError> {
    compile_with_limits(policies, inventory, &CompileLimits::default())
}

/// [`compile`] under explicit resource limits ([`crate::limits`]): each
/// check runs before the work it bounds, and exceeding one is a
/// [`CompileError::Limit`], never a truncated map state.
pub fn compile_with_limits(
    policies: &[PolicyInput<'_>],
    inventory: &Inventory,
    limits: &CompileLimits,
) -> Result<Compiled, CompileError> {
    Compilation::run(policies, inventory, limits, |compilation| {
        compilation.check()?;
        compilation.compiled()
    })
}

/// What a [`Distiller`] gets for one endpoint whose map state is needed.
pub(crate) struct DistillRequest<'r, 'a> {
    /// The endpoint (its named ports feed the map state).
    pub endpoint: &'r Endpoint,
    /// Its identity.
    pub identity: u32,
    /// The resolved L4 policy of that identity.
    pub policy: &'r L4Policy,
    /// The resolver (selector cache, named-port tables, `map_state`).
    pub resolver: &'r Resolver<'a>,
    /// Origin id → description, for the map state's diagnostics.
    pub describe: &'r (dyn Fn(u32) -> String + Sync),
}

/// A map state with its findings, shared between endpoints with the same
/// identity and named ports.
pub(crate) type Distilled = (Arc<MapState>, Vec<Diagnostic>);

/// How [`drive`] turns a resolved L4 policy into a map state when it is not
/// the batch compiler's parallel distillation: the incremental compiler
/// reuses states whose inputs did not change
/// ([`crate::session::IncrementalCompiler`]). Everything else about a
/// compilation is [`Compilation`]'s, so the two cannot drift apart.
pub(crate) trait Distiller {
    /// Called once per compilation, after lowering, with the origin table.
    fn start(&mut self, _origins: &[Origin]) {}

    /// The map state of one identity group of a unit (the endpoints of one
    /// identity that share a state); called once per group of a
    /// compilation, in inventory order.
    fn distill(&mut self, request: DistillRequest<'_, '_>) -> Result<Distilled, CompileError>;
}

/// The whole compiler stage with the map-state step left to `distiller`
/// (used by the incremental compiler; sequential).
pub(crate) fn drive(
    policies: &[PolicyInput<'_>],
    inventory: &Inventory,
    limits: &CompileLimits,
    distiller: &mut dyn Distiller,
) -> Result<Compiled, CompileError> {
    // Sequential, and once per identity group: the incremental compiler
    // caches per (identity, named ports), so a unit whose first identity is
    // new (an endpoint that sorts first) still reuses its other identities'
    // states; and no thread pool starts inside the C API's calls.
    Compilation::run_with(policies, inventory, limits, false, |compilation| {
        distiller.start(&compilation.lowered.origins);
        let mut states = Vec::with_capacity(compilation.units.len());
        for unit in &compilation.units {
            let mut diagnostics = Vec::with_capacity(unit.groups.len());
            let mut group_states = Vec::with_capacity(unit.groups.len());
            for &(identity, endpoint) in &unit.groups {
                let (state, mut found) = distiller.distill(DistillRequest {
                    endpoint: &inventory.endpoints[endpoint],
                    identity,
                    policy: &compilation.policies[unit.policy],
                    resolver: &compilation.resolver,
                    describe: &compilation.describe(),
                })?;
                let state = if compilation.tiers.selects(identity) {
                    Arc::new(compilation.tiers.resolve(
                        identity,
                        &inventory.endpoints[endpoint],
                        (*state).clone(),
                        &compilation.describe(),
                        &mut found,
                    ))
                } else {
                    state
                };
                group_states.push(state);
                diagnostics.push(found);
            }
            states.push(UnitState {
                state: group_states.first().cloned().unwrap_or_default(),
                group_states,
                diagnostics,
            });
        }
        Ok(compilation.assemble(states))
    })
}

/// Endpoints that share one map state: the same rules select their
/// identities (so their L4 policies are equal), with the same named ports
/// and the same host allow. Cilium shares a `selectorPolicy` per identity;
/// porin also shares across identities whose selecting rules are equal
/// (one pod label each: 10,000 identities, 1,000 distinct states), which
/// changes no entry: the map state is a function of exactly these inputs
/// ([`Resolver::map_state`] reads the L4 policy, the endpoint's named ports
/// and whether the host allow applies, besides the shared tables).
#[derive(Debug, Clone)]
pub struct UnitPlan {
    /// Inventory indices of the endpoints, ascending.
    pub endpoints: Vec<usize>,
    /// (identity, first endpoint) of each identity among them, in order of
    /// first appearance. The state's findings name an endpoint, so each
    /// identity gets its first endpoint's findings (as when states were
    /// shared per identity only).
    pub groups: Vec<(u32, usize)>,
    /// Index of the L4 policy ([`Compilation::policy`]).
    pub policy: usize,
}

impl UnitPlan {
    /// The identity of the unit's first endpoint.
    pub fn identity(&self) -> u32 {
        self.groups.first().map_or(0, |g| g.0)
    }

    /// The unit's first endpoint.
    pub fn first_endpoint(&self) -> usize {
        self.groups.first().map_or(0, |g| g.1)
    }

    /// The group (index into [`UnitPlan::groups`]) of an identity.
    fn group_of(&self, identity: u32) -> usize {
        self.groups
            .iter()
            .position(|g| g.0 == identity)
            .unwrap_or(0)
    }
}

/// A unit's distilled state and the findings of each of its identity
/// groups.
#[derive(Debug, Clone)]
struct UnitState {
    state: Arc<MapState>,
    /// Per identity group, when each was distilled on its own (the
    /// incremental compiler); empty when all share `state`.
    group_states: Vec<Arc<MapState>>,
    diagnostics: Vec<Vec<Diagnostic>>,
}

/// A unit as the streaming visitors see it ([`Compilation::for_each_unit`]).
#[derive(Debug)]
pub struct UnitView<'v> {
    /// Position of the unit in the compilation's deterministic order
    /// (order of first endpoint).
    pub index: usize,
    /// The plan: endpoints and identities.
    pub plan: &'v UnitPlan,
    /// The resolved L4 policy shared by the unit's identities.
    pub policy: &'v L4Policy,
    /// The rules selecting the unit's identities, in input order.
    pub rules: &'v [usize],
    /// The map state, or its census when it is over the capacity
    /// ([`UnitOutcome::Over`]).
    pub outcome: UnitOutcome,
}

// What distilling one unit gave: defined beside the census it may hold.
pub use capacity::UnitOutcome;

/// Units distilled per parallel batch per thread: enough to keep every
/// core busy, few enough that only a handful of states exist at once.
const UNITS_PER_THREAD: usize = 4;

/// Entries of cached map states the endpoint stream keeps for endpoints
/// still to come (a few hundred MiB at most); a state evicted for lack of
/// room is distilled again when one of its endpoints comes.
const STREAM_CACHE_ENTRIES: usize = 1 << 20;

/// Bytes of rendered `entries` arrays [`write_json`] keeps for endpoints
/// still to come (~650,000 entries); as with `STREAM_CACHE_ENTRIES`, an
/// evicted unit is distilled and rendered again when needed.
const STREAM_CACHE_BYTES: usize = 256 << 20;

/// Bytes of rendered `entries` arrays [`write_json`] aims to prepare in
/// one parallel window (at least one unit per thread).
const STREAM_WINDOW_BYTES: usize = 32 << 20;

/// One compilation: lowering, identity allocation, the resolver, each
/// identity's L4 policy and the plan of units, with the map states
/// distilled on demand: all at once ([`Compilation::compiled`]) or
/// streamed, unit by unit ([`Compilation::for_each_unit`]) or endpoint by
/// endpoint ([`Compilation::for_each_endpoint`]), in parallel (rayon) but
/// in a deterministic order, so the output is byte-identical whatever the
/// number of threads.
pub struct Compilation<'c> {
    inventory: &'c Inventory,
    limits: &'c CompileLimits,
    lowered: &'c Lowered,
    table: &'c IdentityTable,
    resolver: Resolver<'c>,
    policies: Vec<L4Policy>,
    identity_policy: HashMap<u32, usize>,
    units: Vec<UnitPlan>,
    endpoint_unit: Vec<usize>,
    /// ClusterNetworkPolicy precedence ([`crate::tier`]).
    tiers: Tiers<'c>,
    /// The labels of an endpoint without an identity entry (none).
    no_labels: LabelSet,
    /// The policy-wide findings ([`Summary::diagnostics`]), computed on
    /// first use: a caller that reports them and then streams the output
    /// (`porin compile --format json`) needs them twice.
    policy_diagnostics: OnceLock<Vec<Diagnostic>>,
}

/// An endpoint's fields in the JSON output before `entries`, in
/// [`EndpointPolicy`]'s order (the streamed writers serialise this and
/// append the entries, or the state's index).
#[derive(Serialize)]
struct EndpointHead<'h> {
    name: &'h str,
    namespace: &'h Option<String>,
    identity: u32,
    labels: &'h LabelSet,
    ips: &'h [IpAddr],
    enforcement: Enforcement,
    diagnostics: &'h [Diagnostic],
}

impl<'c> Compilation<'c> {
    /// Lowers, allocates identities and plans the units (with the limit
    /// checks that come before that work), then runs `f` on the
    /// compilation.
    pub fn run<R>(
        policies: &[PolicyInput<'_>],
        inventory: &Inventory,
        limits: &CompileLimits,
        f: impl FnOnce(&Compilation<'_>) -> Result<R, CompileError>,
    ) -> Result<R, CompileError> {
        Self::run_with(policies, inventory, limits, true, f)
    }

    /// [`Compilation::run`], planning on one thread when `parallel` is
    /// false.
    fn run_with<R>(
        policies: &[PolicyInput<'_>],
        inventory: &Inventory,
        limits: &CompileLimits,
        parallel: bool,
        f: impl FnOnce(&Compilation<'_>) -> Result<R, CompileError>,
    ) -> Result<R, CompileError> {
        limits.check_endpoints(inventory.endpoints.len())?;
        limits.check_inputs(policies)?;
        let lowered = lower(policies, inventory);
        Self::run_lowered(lowered, inventory, limits, parallel, f)
    }

    /// [`Compilation::run`] over every document of `outcome`
    /// ([`PolicyInput::from_outcome`]), freeing the loaded models as they
    /// are lowered ([`lower_consuming`]) and the rest of the outcome (the
    /// positions that locate their fields) on the pool once all are: the
    /// compilation reads only the lowered rules, so the models need not
    /// live through the compile's peak (the rendered output), and the
    /// lowered rules and the compilation reuse their memory. For 65,535
    /// small policies that is ~100 MiB of models and ~20 MiB of positions
    /// (BENCHMARKS.md, "Session 10, branch `s10-mem`", "Session 11, the
    /// lead"). Keep the findings and source texts elsewhere
    /// (`porin_model::loader::LoadOutcome::split_off_documents`).
    pub fn run_consuming<R>(
        mut outcome: porin_model::loader::LoadOutcome,
        inventory: &Inventory,
        limits: &CompileLimits,
        f: impl FnOnce(&Compilation<'_>) -> Result<R, CompileError>,
    ) -> Result<R, CompileError> {
        limits.check_endpoints(inventory.endpoints.len())?;
        limits.check_inputs(&PolicyInput::from_outcome(&outcome))?;
        let documents = std::mem::take(&mut outcome.documents);
        let lowered = lower_consuming(documents, &outcome, inventory);
        // Freeing the positions one allocation at a time is milliseconds:
        // off the calling thread, beside the planning.
        rayon::spawn(move || drop(outcome));
        Self::run_lowered(lowered, inventory, limits, true, f)
    }

    /// The part of [`Compilation::run`] after lowering.
    fn run_lowered<R>(
        lowered: Lowered,
        inventory: &Inventory,
        limits: &CompileLimits,
        parallel: bool,
        f: impl FnOnce(&Compilation<'_>) -> Result<R, CompileError>,
    ) -> Result<R, CompileError> {
        limits.check_lowered(&lowered.rules, lowered.prefixes.len())?;
        let table = IdentityTable::allocate_with_groups(
            inventory,
            &lowered.prefixes,
            &lowered.cidr_groups,
        )?;
        limits.check_identities(&lowered.rules, table.identities.len())?;
        let compilation = Compilation::plan(inventory, limits, &lowered, &table, parallel)?;
        f(&compilation)
    }

    fn plan(
        inventory: &'c Inventory,
        limits: &'c CompileLimits,
        lowered: &'c Lowered,
        table: &'c IdentityTable,
        parallel: bool,
    ) -> Result<Self, CompileError> {
        let resolver = limits
            .budgeted_resolver(&lowered.rules, table, inventory)?
            .with_localhost_origin(lowered.localhost_origin);
        // One L4 policy per distinct (selecting rules, init): resolution
        // reads nothing else of the identity (`Resolver::l4_policy`).
        let mut policy_keys: HashMap<(&[usize], bool), usize> = HashMap::new();
        let mut identity_policy: HashMap<u32, usize> = HashMap::new();
        let mut to_resolve: Vec<u32> = Vec::new();
        let distinct: BTreeSet<u32> = table.endpoint_identity.iter().copied().collect();
        for identity in distinct {
            let key = (
                resolver.rules_of(identity),
                identity == Identity::INIT.get(),
            );
            let next = policy_keys.len();
            let index = *policy_keys.entry(key).or_insert(next);
            if index == next {
                to_resolve.push(identity);
            }
            identity_policy.insert(identity, index);
        }
        let (policies, localhost): (Vec<L4Policy>, Vec<bool>) = if parallel {
            (
                to_resolve
                    .par_iter()
                    .map(|identity| resolver.l4_policy(*identity))
                    .collect(),
                inventory
                    .endpoints
                    .par_iter()
                    .map(|endpoint| resolver.allows_localhost(endpoint))
                    .collect(),
            )
        } else {
            (
                to_resolve
                    .iter()
                    .map(|identity| resolver.l4_policy(*identity))
                    .collect(),
                inventory
                    .endpoints
                    .iter()
                    .map(|endpoint| resolver.allows_localhost(endpoint))
                    .collect(),
            )
        };
        let mut unit_keys: HashMap<(usize, &[NamedPort], bool), usize> = HashMap::new();
        let mut units: Vec<UnitPlan> = Vec::new();
        let mut endpoint_unit = Vec::with_capacity(inventory.endpoints.len());
        for (index, endpoint) in inventory.endpoints.iter().enumerate() {
            let identity = table.endpoint_identity.get(index).copied().unwrap_or(0);
            let policy = identity_policy.get(&identity).copied().unwrap_or(0);
            let key = (
                policy,
                endpoint.ports.as_slice(),
                localhost.get(index).copied().unwrap_or(false),
            );
            let next = units.len();
            let unit = *unit_keys.entry(key).or_insert(next);
            if unit == next {
                units.push(UnitPlan {
                    endpoints: Vec::new(),
                    groups: Vec::new(),
                    policy,
                });
            }
            let plan = &mut units[unit];
            plan.endpoints.push(index);
            if !plan.groups.iter().any(|g| g.0 == identity) {
                plan.groups.push((identity, index));
            }
            endpoint_unit.push(unit);
        }
        let tiers = Tiers::new(
            &lowered.tier_rules,
            Resolver::new(&lowered.tier_rules.rules, table, inventory),
        );
        Ok(Compilation {
            inventory,
            limits,
            lowered,
            table,
            resolver,
            policies,
            identity_policy,
            units,
            endpoint_unit,
            tiers,
            no_labels: LabelSet::default(),
            policy_diagnostics: OnceLock::new(),
        })
    }

    /// The units, in deterministic order (of first endpoint).
    pub fn units(&self) -> &[UnitPlan] {
        &self.units
    }

    /// An L4 policy by index ([`UnitPlan::policy`]).
    pub fn policy(&self, index: usize) -> Option<&L4Policy> {
        self.policies.get(index)
    }

    /// The lowered rules and origins.
    pub fn lowered(&self) -> &Lowered {
        self.lowered
    }

    /// The identity table.
    pub fn table(&self) -> &IdentityTable {
        self.table
    }

    /// The resolver.
    pub fn resolver(&self) -> &Resolver<'c> {
        &self.resolver
    }

    fn describe(&self) -> impl Fn(u32) -> String + Sync + '_ {
        |id: u32| {
            describe_origin(&self.lowered.origins, id)
                .map_or_else(|| format!("origin {id}"), Origin::describe)
        }
    }

    fn endpoint_name(&self, index: usize) -> String {
        self.inventory
            .endpoints
            .get(index)
            .map_or_else(String::new, Endpoint::display_name)
    }

    /// The upper bound of key insertions of a unit
    /// ([`crate::limits::insertion_bound`]).
    fn bound(&self, unit: &UnitPlan) -> u64 {
        insertion_bound(&self.policies[unit.policy], &self.resolver.cache)
    }

    /// The checks before distilling, for every unit in order: the
    /// insertion bound ([`CompileLimits::check_l4_policy`]) and, when that
    /// bound exceeds `max_entries_per_endpoint`, the exact entry count
    /// (`capacity`'s census, one group of peer identities at a time), so
    /// a state that cannot fit the map is refused before anything is
    /// built or written. Returns the first failure in unit order.
    pub fn check(&self) -> Result<(), CompileError> {
        self.check_insertions()?;
        let max = self.limits.max_entries_per_endpoint;
        for unit in &self.units {
            if self.bound(unit) > wide(max)
                && let UnitOutcome::Over(census) = self.census_outcome(unit)
            {
                return Err(CompileError::Limit {
                    limit: Limit::EntriesPerEndpoint,
                    given: census.entries,
                    max: wide(max),
                    endpoint: Some(self.endpoint_name(unit.first_endpoint())),
                });
            }
        }
        Ok(())
    }

    /// The insertion-bound check of every unit, in order (what `porin
    /// lint` checks before its rules compile: the capacity itself is a
    /// finding there, PR001).
    pub fn check_insertions(&self) -> Result<(), CompileError> {
        let max = self.limits.max_insertions_per_endpoint;
        for unit in &self.units {
            let bound = self.bound(unit);
            if bound > max {
                return Err(CompileError::Limit {
                    limit: Limit::InsertionsPerEndpoint,
                    given: bound,
                    max,
                    endpoint: Some(self.endpoint_name(unit.first_endpoint())),
                });
            }
        }
        Ok(())
    }

    fn census_outcome(&self, unit: &UnitPlan) -> UnitOutcome {
        let endpoint = &self.inventory.endpoints[unit.first_endpoint()];
        capacity::distill_capped(
            &self.resolver,
            endpoint,
            &self.policies[unit.policy],
            &self.describe(),
            self.limits.max_entries_per_endpoint,
        )
        .into_outcome(unit.groups.len())
    }

    /// Distills one unit: its state, with the findings of its first
    /// identity group, and of the others only when there are findings
    /// (they name the endpoint). A unit whose insertion bound exceeds the
    /// capacity is counted first ([`capacity::distill_capped`]).
    fn distill(&self, unit: &UnitPlan) -> UnitOutcome {
        let describe = self.describe();
        let policy = &self.policies[unit.policy];
        let endpoint = &self.inventory.endpoints[unit.first_endpoint()];
        let mut outcome = if self.bound(unit) > wide(self.limits.max_entries_per_endpoint) {
            self.census_outcome(unit)
        } else {
            let (state, found) = self.resolver.map_state(endpoint, policy, &describe);
            UnitOutcome::State(Arc::new(state), vec![found])
        };
        if let UnitOutcome::State(state, diagnostics) = &mut outcome {
            diagnostics.truncate(1);
            // The ClusterNetworkPolicy tiers over the NetworkPolicy tier's
            // state, however that was made: the census's state too (a unit
            // whose insertion bound is over the capacity but whose entries
            // fit had lost its Admin and Baseline rules, an over-allow).
            if self.tiers.selects(unit.identity())
                && let Some(found) = diagnostics.first_mut()
            {
                let normal = std::mem::take(Arc::make_mut(state));
                *state = Arc::new(self.tiers.resolve(
                    unit.identity(),
                    endpoint,
                    normal,
                    &describe,
                    found,
                ));
            }
            let any = diagnostics.iter().any(|d| !d.is_empty());
            for &(identity, first) in unit.groups.iter().skip(1) {
                if any {
                    // Each identity's findings, its tiers' included (as
                    // `drive`, per identity group, and the live session
                    // give them).
                    let endpoint = &self.inventory.endpoints[first];
                    let (state, mut found) = self.resolver.map_state(endpoint, policy, &describe);
                    if self.tiers.selects(identity) {
                        self.tiers
                            .resolve(identity, endpoint, state, &describe, &mut found);
                    }
                    diagnostics.push(found);
                } else {
                    diagnostics.push(Vec::new());
                }
            }
        }
        outcome
    }

    /// Streams the units in order: each is distilled (in parallel batches
    /// of a few units per thread), given to `visit` and dropped, so at most
    /// one batch of states exists at a time. `visit` returning `false`
    /// stops the stream.
    pub fn for_each_unit(&self, mut visit: impl FnMut(UnitView<'_>) -> bool) {
        let batch = rayon::current_num_threads().max(1) * UNITS_PER_THREAD;
        for (chunk_index, chunk) in self.units.chunks(batch).enumerate() {
            let outcomes: Vec<UnitOutcome> =
                chunk.par_iter().map(|unit| self.distill(unit)).collect();
            for (offset, (unit, outcome)) in chunk.iter().zip(outcomes).enumerate() {
                let view = UnitView {
                    index: chunk_index * batch + offset,
                    plan: unit,
                    policy: &self.policies[unit.policy],
                    rules: self.resolver.rules_of(unit.identity()),
                    outcome,
                };
                if !visit(view) {
                    return;
                }
            }
        }
    }

    fn endpoint_policy(&self, index: usize, state: &UnitState) -> EndpointPolicy {
        let head = self.endpoint_head(index, &state.diagnostics);
        let identity = head.identity;
        let unit = &self.units[self.endpoint_unit[index]];
        // The default-deny rules selecting the endpoint, for explanations
        // that name who put it in default deny.
        let selected_by = SelectedBy::of(&self.lowered.rules, self.resolver.rules_of(identity));
        EndpointPolicy {
            name: head.name.to_owned(),
            namespace: head.namespace.clone(),
            identity,
            labels: head.labels.clone(),
            ips: head.ips.to_vec(),
            enforcement: head.enforcement,
            diagnostics: head.diagnostics.to_vec(),
            state: state
                .group_states
                .get(unit.group_of(identity))
                .unwrap_or(&state.state)
                .clone(),
            selected_by,
        }
    }

    /// An endpoint's output fields besides its map state, with the findings
    /// of its identity group among its unit's `diagnostics`.
    fn endpoint_head<'h>(
        &'h self,
        index: usize,
        diagnostics: &'h [Vec<Diagnostic>],
    ) -> EndpointHead<'h> {
        let endpoint = &self.inventory.endpoints[index];
        let identity = self
            .table
            .endpoint_identity
            .get(index)
            .copied()
            .unwrap_or(0);
        let unit = &self.units[self.endpoint_unit[index]];
        let policy = &self.policies[unit.policy];
        EndpointHead {
            name: &endpoint.name,
            namespace: &endpoint.namespace,
            identity,
            labels: self
                .table
                .get(identity)
                .map_or(&self.no_labels, |i| &i.labels),
            ips: &endpoint.ips,
            // A ClusterNetworkPolicy rule selecting the endpoint enforces
            // its direction too (its tiers decide), without default deny.
            enforcement: Enforcement {
                ingress: policy.ingress.enforced
                    || self.tiers.selects_in(identity, Direction::Ingress),
                egress: policy.egress.enforced
                    || self.tiers.selects_in(identity, Direction::Egress),
            },
            diagnostics: diagnostics
                .get(unit.group_of(identity))
                .map_or(&[][..], Vec::as_slice),
        }
    }

    fn unit_state(&self, unit: &UnitPlan) -> Result<UnitState, CompileError> {
        match self.distill(unit) {
            UnitOutcome::State(state, diagnostics) => Ok(UnitState {
                state,
                group_states: Vec::new(),
                diagnostics,
            }),
            UnitOutcome::Over(census) => Err(CompileError::Limit {
                limit: Limit::EntriesPerEndpoint,
                given: census.entries,
                max: wide(self.limits.max_entries_per_endpoint),
                endpoint: Some(self.endpoint_name(unit.first_endpoint())),
            }),
        }
    }

    /// Streams the endpoints that `select` keeps, in inventory order, as
    /// [`Compiled::endpoints`] would hold them. States are distilled in
    /// parallel windows of endpoints and kept only while endpoints still to
    /// come need them (within `STREAM_CACHE_ENTRIES`; farthest next use
    /// evicted first, distilled again if needed), so memory stays bounded
    /// whatever the number of endpoints. `visit` returning `false` stops.
    pub fn for_each_endpoint(
        &self,
        select: &dyn Fn(&Endpoint) -> bool,
        mut visit: impl FnMut(EndpointPolicy) -> bool,
    ) -> Result<(), CompileError> {
        self.stream_endpoints(
            select,
            |state| {
                let weight = state.state.len();
                (state, weight)
            },
            (STREAM_CACHE_ENTRIES, usize::MAX),
            |index, state| visit(self.endpoint_policy(index, state)),
        )
    }

    /// The endpoint stream under [`Compilation::for_each_endpoint`] and
    /// [`write_json`]: each needed unit is distilled and turned into a `T`
    /// by `prepare` (in parallel, one window of endpoints at a time), kept
    /// while endpoints still to come need it and while the kept weights
    /// (`prepare`'s second value) stay within `room`, and given to `visit`
    /// with each of its endpoints in inventory order. `window_room` bounds
    /// the weight one window prepares (`usize::MAX`: the widest window).
    fn stream_endpoints<T: Send>(
        &self,
        select: &dyn Fn(&Endpoint) -> bool,
        prepare: impl Fn(UnitState) -> (T, usize) + Sync,
        (room, window_room): (usize, usize),
        mut visit: impl FnMut(usize, &T) -> bool,
    ) -> Result<(), CompileError> {
        let threads = rayon::current_num_threads().max(1);
        let widest = threads * UNITS_PER_THREAD * 16;
        // A window (at most `widest` endpoints) prepares its missing units
        // all at once, so what they weigh together is held at once: with
        // `window_room` bounded, a window starts at one unit per thread and
        // then takes as many units as those prepared so far say fit
        // (65,535 CIDR rules over ten endpoints: ten rendered arrays of
        // ~9 MB each were prepared together, a fifth of the peak memory).
        // Units are counted, not endpoints: a unit shared by ten endpoints
        // weighs once, and narrower windows would leave a core idle at
        // each window's end.
        let mut window_units = if window_room == usize::MAX {
            widest
        } else {
            threads
        };
        let (mut prepared_weight, mut prepared_units) = (0usize, 0usize);
        let wanted: Vec<usize> = (0..self.inventory.endpoints.len())
            .filter(|i| select(&self.inventory.endpoints[*i]))
            .collect();
        // Per unit, its wanted endpoints in order and how many were emitted.
        let mut uses: HashMap<usize, (Vec<usize>, usize)> = HashMap::new();
        for &index in &wanted {
            uses.entry(self.endpoint_unit[index])
                .or_default()
                .0
                .push(index);
        }
        let mut cache: HashMap<usize, (T, usize)> = HashMap::new();
        let mut cached = 0usize;
        let mut start = 0usize;
        while start < wanted.len() {
            let mut missing: Vec<usize> = Vec::new();
            let mut end = start;
            while end < wanted.len() && end - start < widest {
                let unit = self.endpoint_unit[wanted[end]];
                if !cache.contains_key(&unit) && !missing.contains(&unit) {
                    if missing.len() >= window_units {
                        break;
                    }
                    missing.push(unit);
                }
                end += 1;
            }
            let chunk = &wanted[start..end];
            start = end;
            let prepared: Vec<Result<(T, usize), CompileError>> = missing
                .par_iter()
                .map(|unit| self.unit_state(&self.units[*unit]).map(&prepare))
                .collect();
            for (unit, prepared) in missing.into_iter().zip(prepared) {
                let prepared = prepared?;
                cached += prepared.1;
                prepared_weight = prepared_weight.saturating_add(prepared.1);
                prepared_units += 1;
                cache.insert(unit, prepared);
            }
            if window_room != usize::MAX && prepared_units > 0 {
                let average = (prepared_weight / prepared_units).max(1);
                window_units = (window_room / average).clamp(threads, widest);
            }
            for &index in chunk {
                let unit = self.endpoint_unit[index];
                let Some((value, _)) = cache.get(&unit) else {
                    continue;
                };
                if !visit(index, value) {
                    return Ok(());
                }
                if let Some((list, done)) = uses.get_mut(&unit) {
                    *done += 1;
                    if *done == list.len()
                        && let Some((_, weight)) = cache.remove(&unit)
                    {
                        cached -= weight;
                    }
                }
            }
            // Over the room: drop the states needed farthest ahead.
            while cached > room && cache.len() > 1 {
                let farthest = cache
                    .keys()
                    .copied()
                    .max_by_key(|unit| {
                        uses.get(unit)
                            .and_then(|(list, done)| list.get(*done).copied())
                            .unwrap_or(usize::MAX)
                    })
                    .unwrap_or(0);
                if let Some((_, weight)) = cache.remove(&farthest) {
                    cached -= weight;
                }
            }
        }
        Ok(())
    }

    /// Everything but the endpoints: what [`Compiled`] holds besides
    /// [`Compiled::endpoints`].
    pub fn summary(&self) -> Summary<'_> {
        Summary {
            cluster: &self.inventory.cluster,
            identities: &self.table.identities,
            ipcache: build_ipcache(self.inventory, self.table),
            origins: &self.lowered.origins,
            diagnostics: self.policy_diagnostics().to_vec(),
            nodes: &self.inventory.nodes,
        }
    }

    /// The policy-wide findings: lowering's, then the policies that select
    /// no endpoint ([`Summary::diagnostics`]).
    pub fn policy_diagnostics(&self) -> &[Diagnostic] {
        self.policy_diagnostics.get_or_init(|| {
            let mut diagnostics = self.lowered.diagnostics.clone();
            let mut selecting: BTreeSet<u32> = BTreeSet::new();
            for id in self.table.endpoint_identity.iter().collect::<BTreeSet<_>>() {
                for rule in self.resolver.rules_of(*id) {
                    selecting.insert(self.lowered.rules[*rule].origin);
                }
            }
            diagnostics.extend(selects_nothing(self.lowered, &selecting));
            diagnostics
        })
    }

    /// Every unit distilled (in parallel), every endpoint output: the
    /// whole [`Compiled`]. The first unit (in order) over a limit fails it.
    pub fn compiled(&self) -> Result<Compiled, CompileError> {
        let states: Vec<Result<UnitState, CompileError>> = self
            .units
            .par_iter()
            .map(|unit| self.unit_state(unit))
            .collect();
        let states = states.into_iter().collect::<Result<Vec<_>, _>>()?;
        // The opt-in bound on everything held at once (only this path holds
        // every state; the streams never do).
        let mut budget = self.limits.budget();
        for (unit, state) in self.units.iter().zip(&states) {
            budget.charge(
                &self.endpoint_name(unit.first_endpoint()),
                state.state.len(),
            )?;
        }
        Ok(self.assemble(states))
    }

    fn assemble(&self, states: Vec<UnitState>) -> Compiled {
        let endpoints = (0..self.inventory.endpoints.len())
            .map(|index| self.endpoint_policy(index, &states[self.endpoint_unit[index]]))
            .collect();
        let summary = self.summary();
        Compiled {
            cluster: summary.cluster.clone(),
            identities: summary.identities.to_vec(),
            endpoints,
            ipcache: summary.ipcache,
            origins: summary.origins.to_vec(),
            diagnostics: summary.diagnostics,
            nodes: self.inventory.nodes.clone(),
            mutual_auth: self.inventory.settings.mesh_auth_mutual_enabled,
            extended_ip_protocols: self.inventory.settings.enable_extended_ip_protocols,
        }
    }

    /// The identity → L4 policy index map (for consumers that resolve
    /// per identity).
    pub fn policy_of_identity(&self, identity: u32) -> Option<&L4Policy> {
        self.identity_policy
            .get(&identity)
            .and_then(|i| self.policies.get(*i))
    }
}

/// What a compilation holds besides its endpoints ([`Compilation::summary`]).
#[derive(Debug, Clone)]
pub struct Summary<'s> {
    /// Local cluster name.
    pub cluster: &'s String,
    /// Every identity.
    pub identities: &'s [IdentityInfo],
    /// The ipcache.
    pub ipcache: Vec<IpcacheEntry>,
    /// Rule origins.
    pub origins: &'s [Origin],
    /// Policy-wide findings.
    pub diagnostics: Vec<Diagnostic>,
    /// The inventory's nodes ([`Compiled::nodes`]; written only when there
    /// are any, as `Compiled` serialises them).
    pub nodes: &'s [crate::inventory::Node],
}

/// Writes the compilation as [`Compiled::to_json`] would, byte for byte,
/// endpoint by endpoint ([`Compilation::for_each_endpoint`]'s stream)
/// instead of building the whole [`Compiled`]: the output of `porin compile
/// --format json` for clusters whose map states do not fit in memory
/// together. Each unit's `entries` array is rendered once, on the rayon
/// pool (the private `compile::json` module), and copied for each of its endpoints, in inventory
/// order. Returns the endpoints' findings (in endpoint order) for the
/// caller to report. Run [`Compilation::check`] first, or a limit error
/// may come after part of the output was written.
pub fn write_json(
    compilation: &Compilation<'_>,
    select: &dyn Fn(&Endpoint) -> bool,
    out: &mut dyn std::io::Write,
) -> Result<Vec<Diagnostic>, StreamError> {
    let summary = write_prologue_beside_summary(compilation, out)?;
    out.write_all(b",\n  \"endpoints\": ")?;
    let mut findings = Vec::new();
    let mut failed: Option<std::io::Error> = None;
    let mut first = true;
    compilation.stream_endpoints(
        select,
        |state| {
            let mut entries = Vec::new();
            json::render_entries(&state.state, &mut entries);
            let weight = entries.len();
            ((entries, state.diagnostics), weight)
        },
        (STREAM_CACHE_BYTES, STREAM_WINDOW_BYTES),
        |index, (entries, diagnostics)| {
            let head = compilation.endpoint_head(index, diagnostics);
            findings.extend(head.diagnostics.iter().cloned());
            let written = (|| {
                out.write_all(if first { b"[\n    " } else { b",\n    " })?;
                json::write_head(out, &head)?;
                out.write_all(b",\n      \"entries\": ")?;
                out.write_all(entries)?;
                out.write_all(b"\n    }")
            })();
            first = false;
            match written {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        },
    )?;
    if let Some(error) = failed {
        return Err(StreamError::Write(error.to_string()));
    }
    write_close_list(out, first)?;
    write_epilogue(out, &summary)?;
    Ok(findings)
}

/// Writes the compilation with each unit's map state once: `porin compile
/// --format json-states`. The document is [`Compiled::to_json`]'s with a
/// `states` array before `endpoints` (each state `{"entries": [...]}`, its
/// entries as in the plain output) and each endpoint's `entries` replaced
/// by `state`, the index of its state in that array; replacing every
/// `state` by that state's `entries` (and dropping `states`) gives the
/// plain output exactly. States are written in order of their first
/// selected endpoint, distilled and rendered in parallel batches of units
/// and dropped once written; only each unit's findings are kept for the
/// endpoints that follow. Returns the endpoints' findings in endpoint
/// order. Run [`Compilation::check`] first.
pub fn write_json_states(
    compilation: &Compilation<'_>,
    select: &dyn Fn(&Endpoint) -> bool,
    out: &mut dyn std::io::Write,
) -> Result<Vec<Diagnostic>, StreamError> {
    let summary = write_prologue_beside_summary(compilation, out)?;
    let wanted: Vec<usize> = (0..compilation.inventory.endpoints.len())
        .filter(|i| select(&compilation.inventory.endpoints[*i]))
        .collect();
    // Each used unit's state index, in order of first selected endpoint.
    let mut state_of: HashMap<usize, usize> = HashMap::new();
    let mut order: Vec<usize> = Vec::new();
    for &index in &wanted {
        let unit = compilation.endpoint_unit[index];
        state_of.entry(unit).or_insert_with(|| {
            order.push(unit);
            order.len() - 1
        });
    }
    let batch = rayon::current_num_threads().max(1) * UNITS_PER_THREAD;
    let mut diagnostics: Vec<Vec<Vec<Diagnostic>>> = Vec::with_capacity(order.len());
    out.write_all(b",\n  \"states\": ")?;
    for chunk in order.chunks(batch) {
        let rendered: Vec<Result<Rendered, CompileError>> = chunk
            .par_iter()
            .map(|unit| {
                compilation
                    .unit_state(&compilation.units[*unit])
                    .map(|state| {
                        let mut entries = Vec::new();
                        json::render_entries(&state.state, &mut entries);
                        (entries, state.diagnostics)
                    })
            })
            .collect();
        for item in rendered {
            let (entries, found) = item?;
            out.write_all(if diagnostics.is_empty() {
                b"[\n    {\n      \"entries\": "
            } else {
                b",\n    {\n      \"entries\": "
            })?;
            out.write_all(&entries)?;
            out.write_all(b"\n    }")?;
            diagnostics.push(found);
        }
    }
    write_close_list(out, diagnostics.is_empty())?;
    out.write_all(b",\n  \"endpoints\": ")?;
    let mut findings = Vec::new();
    let mut numbers = itoa::Buffer::new();
    for (position, &index) in wanted.iter().enumerate() {
        let state = state_of
            .get(&compilation.endpoint_unit[index])
            .copied()
            .unwrap_or(0);
        let head = compilation.endpoint_head(index, &diagnostics[state]);
        findings.extend(head.diagnostics.iter().cloned());
        out.write_all(if position == 0 {
            b"[\n    "
        } else {
            b",\n    "
        })?;
        json::write_head(out, &head)?;
        out.write_all(b",\n      \"state\": ")?;
        out.write_all(numbers.format(state).as_bytes())?;
        out.write_all(b"\n    }")?;
    }
    write_close_list(out, wanted.is_empty())?;
    write_epilogue(out, &summary)?;
    Ok(findings)
}

/// A unit's `entries` array rendered ([`json::render_entries`]) and the
/// findings of each of its identity groups.
type Rendered = (Vec<u8>, Vec<Vec<Diagnostic>>);

/// `{`, `cluster` and `identities` of a streamed document (the caller
/// writes the next field, `states` or `endpoints`).
fn write_prologue(
    out: &mut dyn std::io::Write,
    cluster: &String,
    identities: &[IdentityInfo],
) -> std::io::Result<()> {
    out.write_all(b"{\n  \"cluster\": ")?;
    json::write_nested(out, cluster, 1)?;
    out.write_all(b",\n  \"identities\": ")?;
    json::write_field_seq(out, identities)
}

/// Writes the prologue ([`write_prologue`]) to `out` on the calling thread
/// while the summary is made on the pool, and returns the summary: its
/// policy-wide findings (`selects_nothing`, one look-up per rule) were ~3 %
/// of a compile of 65,535 CIDR policies on the calling thread alone. The
/// prologue goes straight to `out`, a window of pieces at a time
/// ([`json::write_field_seq`]): rendered whole into a buffer first, the
/// 65,535 CIDR identities were 12 MB of JSON (more with the buffer's
/// doubling) held on top of the compilation.
fn write_prologue_beside_summary<'s>(
    compilation: &'s Compilation<'_>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<Summary<'s>> {
    let mut summary = None;
    let written = rayon::in_place_scope(|scope| {
        scope.spawn(|_| summary = Some(compilation.summary()));
        write_prologue(
            out,
            &compilation.inventory.cluster,
            &compilation.table.identities,
        )
    });
    written?;
    // The scope waited for the spawned summary; made here only if it
    // panicked, which the scope would have propagated.
    Ok(summary.unwrap_or_else(|| compilation.summary()))
}

/// Closes a list of second-level objects: `[]` if nothing was written,
/// else the newline and `]`.
fn write_close_list(out: &mut dyn std::io::Write, empty: bool) -> std::io::Result<()> {
    out.write_all(if empty { b"[]" } else { b"\n  ]" })
}

/// `ipcache`, `origins`, `diagnostics` and the closing brace.
fn write_epilogue(out: &mut dyn std::io::Write, summary: &Summary<'_>) -> std::io::Result<()> {
    out.write_all(b",\n  \"ipcache\": ")?;
    json::write_field_seq(out, &summary.ipcache)?;
    out.write_all(b",\n  \"origins\": ")?;
    json::write_field_seq(out, summary.origins)?;
    out.write_all(b",\n  \"diagnostics\": ")?;
    json::write_nested(out, &summary.diagnostics, 1)?;
    // `Compiled::nodes` is skipped when empty; the stream follows it so
    // that host-firewall inventories get the same bytes as `to_json`.
    if !summary.nodes.is_empty() {
        out.write_all(b",\n  \"nodes\": ")?;
        json::write_nested(out, &summary.nodes, 1)?;
    }
    out.write_all(b"\n}")
}

/// Why [`write_json`] stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// A limit of the compilation.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The output could not be written.
    #[error("cannot write the output: {0}")]
    Write(String),
}

impl From<std::io::Error> for StreamError {
    fn from(error: std::io::Error) -> Self {
        StreamError::Write(error.to_string())
    }
}

/// `usize` → `u64`, saturating.
fn wide(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn describe_origin(origins: &[Origin], id: u32) -> Option<&Origin> {
    usize::try_from(id).ok().and_then(|i| origins.get(i))
}

/// Policies none of whose rules select an endpoint of the inventory (info:
/// maybe the inventory is incomplete, maybe the selector is wrong); one
/// finding per policy, in (kind, namespace, name) order. `selecting` holds
/// the origins of the rules that select some endpoint.
pub(crate) fn selects_nothing(lowered: &Lowered, selecting: &BTreeSet<u32>) -> Vec<Diagnostic> {
    // Keys borrowed from the origins, in a hash map (one per rule, 65,535
    // of them for as many CIDR policies); only the policies that select
    // nothing are sorted, below.
    let mut policy_selects: HashMap<(OriginKind, Option<&str>, &str, &str), bool> =
        HashMap::with_capacity(lowered.rules.len());
    // Host policies are checked against the nodes instead (PC030, at
    // lowering): one that selects only remote nodes applies on their
    // agents, not nowhere.
    for rule in lowered.rules.iter().filter(|r| !r.host) {
        if let Some(origin) = describe_origin(&lowered.origins, rule.origin) {
            let key = (
                origin.kind,
                origin.namespace.as_deref(),
                origin.name.as_str(),
                origin.file.as_str(),
            );
            *policy_selects.entry(key).or_default() |= selecting.contains(&rule.origin);
        }
    }
    let mut reported: BTreeSet<(OriginKind, Option<&str>, &str)> = BTreeSet::new();
    let mut findings = Vec::new();
    // Not one policy selects anything: the inventory is not the one the
    // policies are for, and every verdict is "no policy" (issue 17: no
    // silent green). A warning, beside the per-policy infos.
    if !policy_selects.is_empty() && policy_selects.values().all(|selects| !selects) {
        findings.push(Diagnostic::new(
            codes::INVENTORY_SELECTS_NOTHING,
            format!(
                "none of the {} loaded policies selects an endpoint of the inventory: nothing is enforced and every flow is allowed",
                policy_selects.len()
            ),
        ).help("give the inventory the workloads these policies are for (their manifests: --inventory, or `inventory:` in a test file)"));
    }
    let mut unselected: Vec<_> = policy_selects
        .into_iter()
        .filter_map(|(key, selects)| (!selects).then_some(key))
        .collect();
    // In (kind, namespace, name, file) order, as the keys are distinct.
    unselected.sort_unstable();
    for (kind, namespace, name, file) in unselected {
        if reported.insert((kind, namespace, name)) {
            let label = match namespace {
                Some(ns) => format!("{ns}/{name}"),
                None => name.to_owned(),
            };
            findings.push(
                Diagnostic::new(
                    codes::SELECTS_NOTHING,
                    format!("{kind} `{label}` selects no endpoint of the inventory"),
                )
                .note(format!("defined in {file}")),
            );
        }
    }
    findings
}

/// The ipcache of a compilation: endpoint addresses (/32, /128) → endpoint
/// identities; node addresses → host (local node) or remote-node; policy prefixes → CIDR identities (an endpoint address wins
/// over an equal policy prefix); `0.0.0.0/0` → 9 and `::/0` → 10. IPv4
/// first, then by address and length.
pub fn build_ipcache(inventory: &Inventory, table: &IdentityTable) -> Vec<IpcacheEntry> {
    let mut map: BTreeMap<IpNetwork, u32> = BTreeMap::new();
    for (prefix, id) in &table.cidr_identity {
        map.insert(*prefix, *id);
    }
    for (index, endpoint) in inventory.endpoints.iter().enumerate() {
        let id = table.endpoint_identity.get(index).copied().unwrap_or(0);
        for ip in &endpoint.ips {
            map.insert(host_prefix(*ip), id);
        }
    }
    // Node addresses: the local node's are the host, the others'
    // remote-node (`NodeUpdated`, pkg/node/manager/manager.go); the
    // inventory refuses a node address an endpoint also has.
    // Under `enable-node-selector-labels` a remote node's addresses carry
    // its own identity ([`IdentityTable::node_identity`]).
    for node in &inventory.nodes {
        let id = if node.local {
            Identity::HOST.get()
        } else {
            table
                .node_identity
                .get(&node.name)
                .copied()
                .unwrap_or(Identity::REMOTE_NODE.get())
        };
        for ip in &node.ips {
            // `policy-cidr-match-mode: nodes`: each remote address has an
            // identity of its own ([`IdentityTable::node_address_identity`]).
            let id = table.node_address_identity.get(ip).copied().unwrap_or(id);
            map.insert(host_prefix(*ip), id);
        }
    }
    if let Ok(v4) = "0.0.0.0/0".parse() {
        map.insert(v4, Identity::WORLD_IPV4.get());
    }
    if let Ok(v6) = "::/0".parse() {
        map.insert(v6, Identity::WORLD_IPV6.get());
    }
    let mut entries: Vec<IpcacheEntry> = map
        .into_iter()
        .map(|(prefix, identity)| IpcacheEntry { prefix, identity })
        .collect();
    entries.sort_by_key(|e| (e.prefix.is_ipv6(), e.prefix.network(), e.prefix.prefix()));
    entries
}

/// Directions, for iteration in output code.
pub const DIRECTIONS: [Direction; 2] = Direction::ALL;
