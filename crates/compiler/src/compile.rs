//! The compiler driver and its output.
//!
//! [`compile`] runs the whole stage: lower policies to rules, allocate
//! identities (endpoint label sets and policy prefixes), resolve each
//! endpoint identity's L4 policy once, distill each endpoint's map state,
//! and build the ipcache. The result, [`Compiled`], is deterministic: the
//! same inputs give byte-identical JSON (every collection is ordered).

#[cfg(feature = "synthetic")]
pub mod synthetic;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ipnetwork::IpNetwork;
use porin_model::diagnostic::Diagnostic;
use serde::Serialize;

use crate::allocation::{IdentityInfo, IdentityKind, IdentityTable};
use crate::codes;
use crate::error::CompileError;
use crate::identity::Identity;
use crate::inventory::{Endpoint, Inventory, NamedPort};
use crate::ipcache::{Family, Ipcache, first_uncovered};
use crate::labels::{LabelSet, host_prefix};
use crate::limits::{CompileLimits, EntryBudget};
use crate::mapstate::{Direction, Entry, Key, MapState};
use crate::resolve::lower::{Lowered, Origin, OriginKind, PolicyInput, lower};
use crate::resolve::policy::{L4Policy, Resolver};
use crate::resolve::rule::proto;

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
    let mut distiller = LimitedDistiller {
        limits,
        budget: limits.budget(),
    };
    drive(policies, inventory, limits, &mut distiller)
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
    pub describe: &'r dyn Fn(u32) -> String,
}

/// A map state with its findings, shared between endpoints with the same
/// identity and named ports.
pub(crate) type Distilled = (Arc<MapState>, Vec<Diagnostic>);

/// How [`drive`] turns a resolved L4 policy into a map state: the batch
/// compiler distills under limits ([`LimitedDistiller`]), the incremental
/// one reuses states whose inputs did not change
/// ([`crate::session::IncrementalCompiler`]). Everything else about a
/// compilation is [`drive`]'s, so the two cannot drift apart.
pub(crate) trait Distiller {
    /// Called once per compilation, after lowering, with the origin table.
    fn start(&mut self, _origins: &[Origin]) {}

    /// The map state of one (identity, named ports) pair; called once per
    /// distinct pair of a compilation, in inventory order.
    fn distill(&mut self, request: DistillRequest<'_, '_>) -> Result<Distilled, CompileError>;
}

/// The batch distiller: bounds the insertions before distilling and
/// charges the entries to the compilation's budget.
struct LimitedDistiller<'l> {
    limits: &'l CompileLimits,
    budget: EntryBudget<'l>,
}

impl Distiller for LimitedDistiller<'_> {
    fn distill(&mut self, request: DistillRequest<'_, '_>) -> Result<Distilled, CompileError> {
        let name = request.endpoint.display_name();
        self.limits
            .check_l4_policy(&name, request.policy, &request.resolver.cache)?;
        let (state, diagnostics) =
            request
                .resolver
                .map_state(request.endpoint, request.policy, request.describe);
        self.budget.charge(&name, state.len())?;
        Ok((Arc::new(state), diagnostics))
    }
}

/// The whole compiler stage, with the map-state step left to `distiller`:
/// lowering, identity allocation, per-identity L4 policies, endpoint
/// output, the "selects nothing" findings and the ipcache.
pub(crate) fn drive(
    policies: &[PolicyInput<'_>],
    inventory: &Inventory,
    limits: &CompileLimits,
    distiller: &mut dyn Distiller,
) -> Result<Compiled, CompileError> {
    limits.check_endpoints(inventory.endpoints.len())?;
    limits.check_inputs(policies)?;
    let lowered = lower(policies, inventory);
    limits.check_lowered(&lowered.rules, lowered.prefixes.len())?;
    let table = IdentityTable::allocate(inventory, &lowered.prefixes)?;
    limits.check_identities(&lowered.rules, table.identities.len())?;
    distiller.start(&lowered.origins);
    let mut resolver = Resolver::new(&lowered.rules, &table, inventory)
        .with_localhost_origin(lowered.localhost_origin);
    let describe = |id: u32| {
        describe_origin(&lowered.origins, id)
            .map_or_else(|| format!("origin {id}"), Origin::describe)
    };

    let mut l4_cache: BTreeMap<u32, L4Policy> = BTreeMap::new();
    let mut state_cache: HashMap<(u32, Vec<NamedPort>), Distilled> = HashMap::new();
    let mut endpoints = Vec::with_capacity(inventory.endpoints.len());
    for (index, endpoint) in inventory.endpoints.iter().enumerate() {
        let identity = table.endpoint_identity.get(index).copied().unwrap_or(0);
        let policy: &L4Policy = l4_cache
            .entry(identity)
            .or_insert_with(|| resolver.l4_policy(identity));
        let cache_key = (identity, endpoint.ports.clone());
        let (state, diagnostics) = match state_cache.get(&cache_key) {
            Some(hit) => hit.clone(),
            None => {
                let computed = distiller.distill(DistillRequest {
                    endpoint,
                    identity,
                    policy,
                    resolver: &resolver,
                    describe: &describe,
                })?;
                state_cache.insert(cache_key, computed.clone());
                computed
            }
        };
        endpoints.push(EndpointPolicy {
            name: endpoint.name.clone(),
            namespace: endpoint.namespace.clone(),
            identity,
            labels: table
                .get(identity)
                .map(|i| i.labels.clone())
                .unwrap_or_default(),
            ips: endpoint.ips.clone(),
            enforcement: Enforcement {
                ingress: policy.ingress.enforced,
                egress: policy.egress.enforced,
            },
            diagnostics,
            state,
        });
    }

    let mut diagnostics = lowered.diagnostics.clone();
    let mut selecting: BTreeSet<u32> = BTreeSet::new();
    for id in table.endpoint_identity.iter().collect::<BTreeSet<_>>() {
        for rule in resolver.rules_of(*id) {
            selecting.insert(lowered.rules[*rule].origin);
        }
    }
    diagnostics.extend(selects_nothing(&lowered, &selecting));

    let ipcache = build_ipcache(inventory, &table);
    Ok(Compiled {
        cluster: inventory.cluster.clone(),
        identities: table.identities.clone(),
        endpoints,
        ipcache,
        origins: lowered.origins,
        diagnostics,
    })
}

fn describe_origin(origins: &[Origin], id: u32) -> Option<&Origin> {
    usize::try_from(id).ok().and_then(|i| origins.get(i))
}

/// Policies none of whose rules select an endpoint of the inventory (info:
/// maybe the inventory is incomplete, maybe the selector is wrong); one
/// finding per policy, in (kind, namespace, name) order. `selecting` holds
/// the origins of the rules that select some endpoint.
pub(crate) fn selects_nothing(lowered: &Lowered, selecting: &BTreeSet<u32>) -> Vec<Diagnostic> {
    let mut policy_selects: BTreeMap<(OriginKind, Option<String>, String, String), bool> =
        BTreeMap::new();
    for rule in &lowered.rules {
        if let Some(origin) = describe_origin(&lowered.origins, rule.origin) {
            let key = (
                origin.kind,
                origin.namespace.clone(),
                origin.name.clone(),
                origin.file.clone(),
            );
            *policy_selects.entry(key).or_default() |= selecting.contains(&rule.origin);
        }
    }
    let mut reported: BTreeSet<(OriginKind, Option<String>, String)> = BTreeSet::new();
    let mut findings = Vec::new();
    for ((kind, namespace, name, file), selects) in policy_selects {
        if !selects && reported.insert((kind, namespace.clone(), name.clone())) {
            let label = match &namespace {
                Some(ns) => format!("{ns}/{name}"),
                None => name.clone(),
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
/// identities; policy prefixes → CIDR identities (an endpoint address wins
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
