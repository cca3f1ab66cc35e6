//! Policy documents → [`PolicyRule`]s (Cilium's `ParseToCiliumRule` +
//! `RulesToPolicyEntries` for CNP/CCNP, `ParseNetworkPolicy` for KNP).
//!
//! Selector rewriting follows docs/semantics.md §3.1 (`pkg/k8s/apis/cilium.io/utils/utils.go`
//! `getEndpointSelector`/`ParseToCiliumRule`, `pkg/k8s/network_policy.go`).
//! Peers porin cannot resolve offline (nodes, groups, CIDR groups, services
//! or FQDNs missing from the inventory) compile to nothing in allow rules
//! and to the wildcard peer in deny rules: fail closed both ways, with a
//! diagnostic saying so.

use std::collections::{BTreeMap, BTreeSet};

use ipnetwork::IpNetwork;
use porin_model::CodeInfo;
use porin_model::diagnostic::{Diagnostic, Location};
use porin_model::loader::LoadOutcome;
use porin_model::model::{
    AuthenticationMode, CidrRule, EgressDenyRule, EgressRule, Entity, FqdnSelector, IcmpFamily,
    IcmpRule, IngressDenyRule, IngressRule, IntOrString, K8sProtocol, L4Proto, LabelSelector,
    NetworkPolicy, NetworkPolicyPeer, PolicyDocument, PortProtocol, PortRule, Rule,
    SelectorOperator, Service as ServiceRef,
};
use porin_model::route::Route;
use serde::Serialize;

use super::matchpattern::MatchPattern;
use super::rule::{
    AuthMode, L7, L7Parser, PolicyRule, PortRef, PortSpec, icmp_type, parse_port_number, proto,
};
use crate::codes;
use crate::inventory::{AllowLocalhost, Inventory};
use crate::labels::{
    CLUSTER_LABEL, NAMESPACE_LABELS_PREFIX, POD_NAMESPACE_LABEL, SOURCE_ANY, SOURCE_K8S,
    SOURCE_RESERVED, canonical_prefix, host_prefix,
};
use crate::mapstate::Direction;
use crate::selector::{Operator, Requirement, Selector, SelectorKey};

/// Where a compiled entry came from: one direction item of one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// The origin id entries carry.
    pub id: u32,
    /// Policy kind (`CiliumNetworkPolicy`, ..., or `Synthetic` for the
    /// allow-all rules Cilium adds itself).
    pub kind: OriginKind,
    /// Policy namespace (none for cluster-wide policies).
    pub namespace: Option<String>,
    /// Policy name.
    pub name: String,
    /// Section: `ingress`, `ingressDeny`, `egress`, `egressDeny`.
    pub section: RuleSection,
    /// Index of the item in its section.
    pub index: usize,
    /// Direction (serialized `ingress`/`egress`).
    #[serde(serialize_with = "serialize_display")]
    pub direction: Direction,
    /// Whether the rule denies.
    pub deny: bool,
    /// Field path of the item, e.g. `spec.ingress[0]`.
    pub route: String,
    /// Display path of the file.
    pub file: String,
    /// Document index in the file.
    pub document: usize,
    /// 1-based line of the item (0 when unknown).
    pub line: u32,
}

/// The kind of policy an [`Origin`] is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum OriginKind {
    /// `CiliumNetworkPolicy`.
    CiliumNetworkPolicy,
    /// `CiliumClusterwideNetworkPolicy`.
    CiliumClusterwideNetworkPolicy,
    /// Kubernetes `NetworkPolicy`.
    NetworkPolicy,
    /// A rule Cilium adds itself (allow-all of an unenforced direction,
    /// the host's localhost allow).
    Synthetic,
}

impl OriginKind {
    /// The kind of a policy document.
    pub fn of(policy: &PolicyDocument) -> Self {
        match policy {
            PolicyDocument::CiliumNetworkPolicy(_) => OriginKind::CiliumNetworkPolicy,
            PolicyDocument::CiliumClusterwideNetworkPolicy(_) => {
                OriginKind::CiliumClusterwideNetworkPolicy
            }
            PolicyDocument::NetworkPolicy(_) => OriginKind::NetworkPolicy,
        }
    }

    /// The name as written in YAML (`Synthetic` for Cilium's own rules).
    pub const fn name(self) -> &'static str {
        match self {
            OriginKind::CiliumNetworkPolicy => "CiliumNetworkPolicy",
            OriginKind::CiliumClusterwideNetworkPolicy => "CiliumClusterwideNetworkPolicy",
            OriginKind::NetworkPolicy => "NetworkPolicy",
            OriginKind::Synthetic => "Synthetic",
        }
    }
}

impl std::fmt::Display for OriginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The rule section of a policy an [`Origin`] is an item of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RuleSection {
    /// `ingress`.
    Ingress,
    /// `ingressDeny`.
    IngressDeny,
    /// `egress`.
    Egress,
    /// `egressDeny`.
    EgressDeny,
}

impl RuleSection {
    /// The field name (`ingressDeny`).
    pub const fn name(self) -> &'static str {
        match self {
            RuleSection::Ingress => "ingress",
            RuleSection::IngressDeny => "ingressDeny",
            RuleSection::Egress => "egress",
            RuleSection::EgressDeny => "egressDeny",
        }
    }

    /// The allow section of a direction (where Cilium's own rules go).
    pub const fn allow(direction: Direction) -> Self {
        match direction {
            Direction::Ingress => RuleSection::Ingress,
            Direction::Egress => RuleSection::Egress,
        }
    }
}

impl std::fmt::Display for RuleSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn serialize_display<S: serde::Serializer>(
    value: &impl std::fmt::Display,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

impl Origin {
    /// Whether the rule is one Cilium adds itself, not a policy's.
    pub fn is_synthetic(&self) -> bool {
        self.kind == OriginKind::Synthetic
    }

    /// `kind namespace/name route (file:line)` for explanations.
    pub fn describe(&self) -> String {
        let name = match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        };
        if self.file.is_empty() {
            format!("{} {name}", self.kind)
        } else {
            format!(
                "{} {name} {} ({}:{})",
                self.kind, self.route, self.file, self.line
            )
        }
    }
}

/// One policy document to lower, with a way to locate its fields.
#[derive(Clone, Copy)]
pub struct PolicyInput<'a> {
    /// Display path of the file.
    pub file: &'a str,
    /// Document index in the file.
    pub document: usize,
    /// Position in a `List` document, if the policy came from one.
    pub item: Option<usize>,
    /// The policy.
    pub policy: &'a PolicyDocument,
    /// The load that produced it, to locate fields (none: line 0).
    pub source: Option<&'a LoadOutcome>,
}

impl<'a> PolicyInput<'a> {
    /// Every valid document of a load.
    pub fn from_outcome(outcome: &'a LoadOutcome) -> Vec<PolicyInput<'a>> {
        outcome
            .documents
            .iter()
            .map(|doc| PolicyInput {
                file: &doc.file,
                document: doc.index,
                item: doc.item,
                policy: &doc.doc,
                source: Some(outcome),
            })
            .collect()
    }

    /// The (line, column) of a field path of this policy (0, 0 if unknown).
    pub fn locate(&self, route: &str) -> (u32, u32) {
        let full = match self.item {
            Some(item) if route.is_empty() => format!("items[{item}]"),
            Some(item) => format!("items[{item}].{route}"),
            None => route.to_owned(),
        };
        let Some(source) = self.source else {
            return (0, 0);
        };
        Route::parse(&full)
            .and_then(|r| source.locate(self.file, self.document, &r))
            .map_or((0, 0), |l| (l.line, l.column))
    }

    /// The location of a field path of this policy (line and column 0 if
    /// unknown).
    pub fn location(&self, route: &str) -> Location {
        let (line, column) = self.locate(route);
        Location {
            file: self.file.to_owned(),
            document: self.document,
            line,
            column,
            route: route.to_owned(),
        }
    }
}

/// The result of lowering all policies.
#[derive(Debug, Default)]
pub struct Lowered {
    /// The rules, in input order.
    pub rules: Vec<PolicyRule>,
    /// Origin table, indexed by origin id.
    pub origins: Vec<Origin>,
    /// Every prefix the rules name (CIDR identities are made for these).
    pub prefixes: BTreeSet<IpNetwork>,
    /// Findings.
    pub diagnostics: Vec<Diagnostic>,
    /// Log cookie numbers by `log.value`.
    pub cookies: BTreeMap<String, u32>,
    /// Origin id of the synthetic host allow (`allow-localhost-ingress`,
    /// see [`crate::inventory::AllowLocalhost`]); none when the inventory
    /// says `allowLocalhost: policy`. It comes after the policies' origins
    /// so their ids do not depend on the option.
    pub localhost_origin: Option<u32>,
}

/// Origin ids of the synthetic allow-all rules (§3.3): always 0 and 1.
pub const ORIGIN_ALLOW_ANY_INGRESS: u32 = 0;
/// See [`ORIGIN_ALLOW_ANY_INGRESS`].
pub const ORIGIN_ALLOW_ANY_EGRESS: u32 = 1;

/// Name of the synthetic origin of the host allow: Cilium's label
/// `reserved:io.cilium.policy.derived-from=allow-localhost-ingress`
/// (`LabelAllowLocalHostIngress`, `pkg/policy/mapstate.go`).
pub const LOCALHOST_ORIGIN_NAME: &str = "allow-localhost-ingress";

struct Ctx<'a> {
    inventory: &'a Inventory,
    cluster: String,
    out: Lowered,
}

/// Lowers every policy.
///
/// Log cookies are numbered 1.. in sorted order of the distinct
/// `log.value` strings, so they do not depend on input order.
pub fn lower(inputs: &[PolicyInput<'_>], inventory: &Inventory) -> Lowered {
    let mut ctx = Ctx {
        inventory,
        cluster: inventory.cluster.clone(),
        out: Lowered::default(),
    };
    for (id, direction) in [
        (ORIGIN_ALLOW_ANY_INGRESS, Direction::Ingress),
        (ORIGIN_ALLOW_ANY_EGRESS, Direction::Egress),
    ] {
        ctx.out.origins.push(Origin {
            id,
            kind: OriginKind::Synthetic,
            namespace: None,
            name: format!("allow-any-{direction}"),
            section: RuleSection::allow(direction),
            index: 0,
            direction,
            deny: false,
            route: String::new(),
            file: String::new(),
            document: 0,
            line: 0,
        });
    }
    let mut log_values = BTreeSet::new();
    for input in inputs {
        for (_, rule) in input.policy.cilium_rules() {
            if let Some(value) = rule.log.as_ref().and_then(|l| l.value.clone())
                && !value.is_empty()
            {
                log_values.insert(value);
            }
        }
    }
    ctx.out.cookies = log_values
        .into_iter()
        .enumerate()
        .map(|(i, v)| (v, u32::try_from(i + 1).unwrap_or(u32::MAX)))
        .collect();
    for input in inputs {
        match input.policy {
            PolicyDocument::NetworkPolicy(knp) => ctx.lower_knp(input, knp),
            PolicyDocument::CiliumNetworkPolicy(_)
            | PolicyDocument::CiliumClusterwideNetworkPolicy(_) => {
                let namespaced = matches!(input.policy, PolicyDocument::CiliumNetworkPolicy(_));
                let namespace = if namespaced {
                    Some(
                        input
                            .policy
                            .metadata()
                            .namespace
                            .clone()
                            .unwrap_or_else(|| "default".to_owned()),
                    )
                } else {
                    None
                };
                for (spec_route, rule) in input.policy.cilium_rules() {
                    ctx.lower_cilium_rule(input, namespace.as_deref(), &spec_route, rule);
                }
            }
        }
    }
    if inventory.allow_localhost != AllowLocalhost::Policy {
        let id = u32::try_from(ctx.out.origins.len()).unwrap_or(u32::MAX);
        ctx.out.origins.push(Origin {
            id,
            kind: OriginKind::Synthetic,
            namespace: None,
            name: LOCALHOST_ORIGIN_NAME.to_owned(),
            section: RuleSection::Ingress,
            index: 0,
            direction: Direction::Ingress,
            deny: false,
            route: String::new(),
            file: String::new(),
            document: 0,
            line: 0,
        });
        ctx.out.localhost_origin = Some(id);
    }
    ctx.out
}

/// Converts a user label selector to a [`Selector`] with extended keys.
pub fn convert_selector(selector: &LabelSelector) -> Selector {
    let mut out = Selector::wildcard();
    for (key, value) in selector.match_labels.iter().flatten() {
        out.push(Requirement::is_in(
            SelectorKey::extend(key),
            [value.clone()],
        ));
    }
    for expression in selector.match_expressions.iter().flatten() {
        out.push(Requirement {
            key: SelectorKey::extend(&expression.key),
            operator: convert_operator(expression.operator),
            values: expression.values.iter().flatten().cloned().collect(),
        });
    }
    out
}

fn convert_operator(operator: SelectorOperator) -> Operator {
    match operator {
        SelectorOperator::In => Operator::In,
        SelectorOperator::NotIn => Operator::NotIn,
        SelectorOperator::Exists => Operator::Exists,
        SelectorOperator::DoesNotExist => Operator::DoesNotExist,
    }
}

/// A Kubernetes label selector with every key in the `k8s` source
/// (`NewESFromK8sLabelSelector("k8s.", ...)`), keys prefixed by `prefix`.
fn k8s_selector(selector: &LabelSelector, prefix: &str, into: &mut Selector) {
    for (key, value) in selector.match_labels.iter().flatten() {
        into.push(Requirement::is_in(
            SelectorKey::new(SOURCE_K8S, &format!("{prefix}{key}")),
            [value.clone()],
        ));
    }
    for expression in selector.match_expressions.iter().flatten() {
        into.push(Requirement {
            key: SelectorKey::new(SOURCE_K8S, &format!("{prefix}{}", expression.key)),
            operator: convert_operator(expression.operator),
            values: expression.values.iter().flatten().cloned().collect(),
        });
    }
}

/// A KNP pod selector without its `io.kubernetes.pod.namespace` matchLabels
/// entry: `parsePodSelector` (`pkg/k8s/network_policy.go`) overwrites that
/// entry with the policy namespace (matchExpressions are kept and ANDed).
fn without_namespace_match(selector: &LabelSelector) -> LabelSelector {
    let mut out = selector.clone();
    if let Some(labels) = out.match_labels.as_mut() {
        labels.remove(POD_NAMESPACE_LABEL);
    }
    out
}

fn namespace_pin(namespace: &str) -> Requirement {
    Requirement::is_in(
        SelectorKey::new(SOURCE_K8S, POD_NAMESPACE_LABEL),
        [namespace.to_owned()],
    )
}

fn is_pod_namespace_key(key: &SelectorKey) -> bool {
    key.is(&[SOURCE_K8S], POD_NAMESPACE_LABEL)
}

/// `getEndpointSelector` tests `HasKeyPrefix` with
/// `k8s.io.cilium.k8s.namespace.labels` and `any.io.cilium.k8s.namespace.labels`:
/// only those two sources count (a `container:` key does not stop the
/// namespace pinning), and the prefix has no trailing dot.
fn is_namespace_labels_key(key: &SelectorKey) -> bool {
    (key.source == SOURCE_K8S || key.source == SOURCE_ANY)
        && key.key.starts_with(NAMESPACE_LABELS_PREFIX)
}

fn is_cluster_key(key: &SelectorKey) -> bool {
    key.is(&[SOURCE_K8S], CLUSTER_LABEL)
}

/// `pkg/policy/api/entity.go` `EntitySelectorMapping` (dual-stack), plus the
/// cluster entity's pod part `k8s:io.cilium.k8s.policy.cluster=<cluster>`.
fn entity_selectors(entity: Entity, cluster: &str) -> Vec<Selector> {
    let reserved = |names: &[&str]| {
        names
            .iter()
            .map(|n| Selector::reserved(n))
            .collect::<Vec<_>>()
    };
    match entity {
        Entity::All => vec![Selector::wildcard()],
        Entity::World => reserved(&["world", "world-ipv4", "world-ipv6"]),
        Entity::Cluster => {
            let mut list = reserved(&[
                "host",
                "remote-node",
                "init",
                "ingress",
                "health",
                "unmanaged",
                "kube-apiserver",
            ]);
            list.push(Selector::from_requirements([Requirement::is_in(
                SelectorKey::new(SOURCE_K8S, CLUSTER_LABEL),
                [cluster.to_owned()],
            )]));
            list
        }
        Entity::Host => reserved(&["host"]),
        Entity::Init => reserved(&["init"]),
        Entity::Ingress => reserved(&["ingress"]),
        Entity::Unmanaged => reserved(&["unmanaged"]),
        Entity::RemoteNode => reserved(&["remote-node"]),
        Entity::Health => reserved(&["health"]),
        Entity::None => reserved(&["none"]),
        Entity::KubeApiserver => reserved(&["kube-apiserver"]),
    }
}

/// What a rule section is, for routes and origins.
#[derive(Clone, Copy)]
struct Section {
    id: RuleSection,
    direction: Direction,
    deny: bool,
}

const INGRESS: Section = Section {
    id: RuleSection::Ingress,
    direction: Direction::Ingress,
    deny: false,
};
const INGRESS_DENY: Section = Section {
    id: RuleSection::IngressDeny,
    direction: Direction::Ingress,
    deny: true,
};
const EGRESS: Section = Section {
    id: RuleSection::Egress,
    direction: Direction::Egress,
    deny: false,
};
const EGRESS_DENY: Section = Section {
    id: RuleSection::EgressDeny,
    direction: Direction::Egress,
    deny: true,
};

/// The L3 fields of one rule item, common to the four item types.
#[derive(Default)]
struct Peers<'r> {
    endpoints: Option<&'r Vec<LabelSelector>>,
    cidr: Option<&'r Vec<String>>,
    cidr_set: Option<&'r Vec<CidrRule>>,
    entities: Option<&'r Vec<Entity>>,
    nodes: Option<&'r Vec<LabelSelector>>,
    groups: bool,
    services: Option<&'r Vec<ServiceRef>>,
    fqdns: Option<&'r Vec<FqdnSelector>>,
}

impl Peers<'_> {
    fn any_set(&self) -> bool {
        self.endpoints.is_some()
            || self.cidr.is_some()
            || self.cidr_set.is_some()
            || self.entities.is_some()
            || self.nodes.is_some()
            || self.groups
            || self.services.is_some()
            || self.fqdns.is_some()
    }
}

/// Everything about the rule being lowered that peer resolution needs.
struct ItemCtx<'x> {
    input: &'x PolicyInput<'x>,
    namespace: Option<&'x str>,
    subject_selects_init: bool,
    route: String,
    deny: bool,
    direction: Direction,
}

impl Ctx<'_> {
    fn new_origin(
        &mut self,
        input: &PolicyInput<'_>,
        namespace: Option<&str>,
        section: Section,
        index: usize,
        route: &str,
    ) -> u32 {
        let id = u32::try_from(self.out.origins.len()).unwrap_or(u32::MAX);
        let (line, _) = input.locate(route);
        self.out.origins.push(Origin {
            id,
            kind: OriginKind::of(input.policy),
            namespace: namespace.map(str::to_owned),
            name: input.policy.name().to_owned(),
            section: section.id,
            index,
            direction: section.direction,
            deny: section.deny,
            route: route.to_owned(),
            file: input.file.to_owned(),
            document: input.document,
            line,
        });
        id
    }

    fn diag(
        &mut self,
        input: &PolicyInput<'_>,
        code: CodeInfo,
        route: &str,
        message: String,
    ) -> usize {
        let location = input.location(route);
        self.out
            .diagnostics
            .push(Diagnostic::new(code, message).at(location));
        self.out.diagnostics.len() - 1
    }

    /// A peer that cannot be resolved: nothing for allow rules, the wildcard
    /// for deny rules (fail closed), and a diagnostic saying which.
    fn unresolved(
        &mut self,
        item: &ItemCtx<'_>,
        route: &str,
        code: CodeInfo,
        what: String,
        selectors: &mut Vec<Selector>,
    ) {
        let consequence = if item.deny {
            selectors.push(Selector::wildcard());
            "porin denies these ports to every peer instead (fail closed)"
        } else {
            "porin allows nothing for this peer (fail closed)"
        };
        let index = self.diag(item.input, code, route, format!("{what}; {consequence}"));
        if let Some(d) = self.out.diagnostics.get_mut(index) {
            d.help = Some(
                "describe the peer in the inventory (fqdns, services) or use toCIDRSet/toEndpoints"
                    .to_owned(),
            );
        }
    }

    fn add_cidr(
        &mut self,
        item: &ItemCtx<'_>,
        route: &str,
        cidr: &str,
        except: &[String],
        selectors: &mut Vec<Selector>,
    ) {
        let Ok(prefix) = cidr.trim().parse::<IpNetwork>() else {
            self.unresolved(
                item,
                route,
                codes::INVALID_PEER,
                format!("`{cidr}` is not a CIDR"),
                selectors,
            );
            return;
        };
        let prefix = canonical_prefix(prefix);
        let mut excepts = Vec::with_capacity(except.len());
        for (i, text) in except.iter().enumerate() {
            match text.trim().parse::<IpNetwork>() {
                Ok(p) => excepts.push(canonical_prefix(p)),
                Err(_) => {
                    let r = format!("{route}.except[{i}]");
                    self.unresolved(
                        item,
                        &r,
                        codes::INVALID_PEER,
                        format!("`{text}` is not a CIDR"),
                        selectors,
                    );
                    return;
                }
            }
        }
        self.out.prefixes.insert(prefix);
        self.out.prefixes.extend(excepts.iter().copied());
        selectors.push(Selector::cidr(prefix, &excepts));
    }

    /// The selector of a `fromEndpoints`/`toEndpoints` item after
    /// `getEndpointSelector` (namespace and cluster pinning).
    fn endpoint_peer(&self, item: &ItemCtx<'_>, selector: &LabelSelector) -> Selector {
        let mut out = convert_selector(selector);
        if out.has_key(|k| k.source == SOURCE_RESERVED) {
            return out;
        }
        if !out.has_key(is_pod_namespace_key) && !out.has_key(is_namespace_labels_key) {
            match item.namespace {
                Some(ns) => out.push(namespace_pin(ns)),
                None => {
                    if !item.subject_selects_init {
                        out.push(Requirement::exists(SelectorKey::new(
                            SOURCE_K8S,
                            POD_NAMESPACE_LABEL,
                        )));
                    }
                }
            }
        }
        if !self.cluster.is_empty() && !out.has_key(is_cluster_key) {
            out.push(Requirement::is_in(
                SelectorKey::new(SOURCE_K8S, CLUSTER_LABEL),
                [self.cluster.clone()],
            ));
        }
        out
    }

    fn peers(
        &mut self,
        item: &ItemCtx<'_>,
        peers: &Peers<'_>,
        has_ports: bool,
    ) -> Option<Vec<Selector>> {
        if !peers.any_set() {
            // Only toPorts: every peer on those ports; nothing at all: the
            // rule allows nothing but still enforces (§3.2).
            return has_ports.then(|| vec![Selector::wildcard()]);
        }
        let from = if item.direction == Direction::Ingress {
            "from"
        } else {
            "to"
        };
        let base = &item.route;
        let mut selectors = Vec::new();
        for sel in peers.endpoints.iter().flat_map(|l| l.iter()) {
            selectors.push(self.endpoint_peer(item, sel));
        }
        for (i, cidr) in peers.cidr.iter().flat_map(|l| l.iter()).enumerate() {
            let route = format!("{base}.{from}CIDR[{i}]");
            self.add_cidr(item, &route, cidr, &[], &mut selectors);
        }
        for (i, rule) in peers.cidr_set.iter().flat_map(|l| l.iter()).enumerate() {
            let route = format!("{base}.{from}CIDRSet[{i}]");
            match &rule.cidr {
                Some(cidr) => {
                    let except = rule.except.clone().unwrap_or_default();
                    self.add_cidr(item, &route, cidr, &except, &mut selectors);
                }
                None => self.unresolved(
                    item,
                    &route,
                    codes::UNSUPPORTED_PEER,
                    "CIDR groups (cidrGroupRef/cidrGroupSelector) are not defined offline"
                        .to_owned(),
                    &mut selectors,
                ),
            }
        }
        for entity in peers.entities.iter().flat_map(|l| l.iter()) {
            selectors.extend(entity_selectors(*entity, &self.cluster));
        }
        if peers.nodes.is_some_and(|n| !n.is_empty()) {
            let route = format!("{base}.{from}Nodes");
            self.unresolved(
                item,
                &route,
                codes::UNSUPPORTED_PEER,
                format!("{from}Nodes selects nodes, which the inventory does not describe"),
                &mut selectors,
            );
        }
        if peers.groups {
            let route = format!("{base}.{from}Groups");
            self.unresolved(
                item,
                &route,
                codes::UNSUPPORTED_PEER,
                format!("{from}Groups needs a cloud provider, which porin does not query"),
                &mut selectors,
            );
        }
        if let Some(services) = peers.services {
            self.services_peers(item, base, services, has_ports, &mut selectors);
        }
        for (i, fqdn) in peers.fqdns.iter().flat_map(|l| l.iter()).enumerate() {
            let route = format!("{base}.toFQDNs[{i}]");
            self.fqdn_peer(item, &route, fqdn, &mut selectors);
        }
        Some(selectors)
    }

    /// `toServices`, as `processRule` (pkg/policy/k8s/service.go) rewrites
    /// it. Cilium rewrites `egress` items only: in `egressDeny` the field
    /// stays, `RulesToPolicyEntries` ignores it, and the item's L3 is empty,
    /// which is every peer on its ports and nothing without ports. porin
    /// denies every peer on the ports as Cilium does, and without ports still
    /// denies the services' backends (fail closed).
    fn services_peers(
        &mut self,
        item: &ItemCtx<'_>,
        base: &str,
        services: &[ServiceRef],
        has_ports: bool,
        selectors: &mut Vec<Selector>,
    ) {
        if item.deny {
            let consequence = if has_ports {
                selectors.push(Selector::wildcard());
                "with its ports, Cilium denies them to every peer, and so does porin"
            } else {
                "without ports, Cilium denies nothing; porin denies the services' backends instead (fail closed)"
            };
            self.diag(
                item.input,
                codes::SERVICE_IN_DENY,
                &format!("{base}.toServices"),
                format!(
                    "Cilium translates toServices only in egress rules (processRule, pkg/policy/k8s/service.go), so this egressDeny item has no peer; {consequence}"
                ),
            );
            if has_ports {
                return;
            }
        }
        let before = selectors.len();
        let mut failures = Vec::new();
        for (i, service) in services.iter().enumerate() {
            let route = format!("{base}.toServices[{i}]");
            if let Some(what) = self.service_peer(item, &route, service, selectors) {
                failures.push((route, what));
            }
        }
        // processRule appends nothing for these; if nothing else of the
        // rule's toServices yields a peer, Cilium's rule has an empty L3,
        // which with ports is every peer.
        let rule_has_no_peer = selectors.len() == before && has_ports && !item.deny;
        if services.is_empty() && rule_has_no_peer {
            failures.push((
                format!("{base}.toServices"),
                "an empty toServices list".to_owned(),
            ));
        }
        for (route, what) in failures {
            let what = if rule_has_no_peer {
                format!(
                    "{what}, so this rule has no peer and Cilium allows its ports to every peer (an empty L3 in RulesToPolicyEntries)"
                )
            } else {
                what
            };
            self.unresolved(item, &route, codes::UNKNOWN_SERVICE, what, selectors);
        }
    }

    /// One `toServices` item: the services it matches (`serviceRefMatches`,
    /// `serviceSelectorMatches`) and what each becomes. Returns what is
    /// missing when the item yields no peer.
    fn service_peer(
        &mut self,
        item: &ItemCtx<'_>,
        route: &str,
        service: &ServiceRef,
        selectors: &mut Vec<Selector>,
    ) -> Option<String> {
        let inventory = self.inventory;
        // `ref.Namespace == svcID.Namespace || ref.Namespace == ""`: a
        // reference without a namespace matches every namespace, for a CNP
        // as for a CCNP (nothing defaults it to the policy's namespace).
        let namespace_ok = |wanted: Option<&String>, have: &str| match wanted {
            Some(ns) if !ns.is_empty() => ns == have,
            _ => true,
        };
        let mut matched: Vec<&crate::inventory::Service> = Vec::new();
        let description;
        let namespace_given;
        // Cilium's function deciding which services the reference matches.
        let matcher;
        if let Some(by_name) = &service.k8s_service {
            let name = by_name.service_name.clone().unwrap_or_default();
            description = format!("service `{name}`");
            matcher = "serviceRefMatches";
            namespace_given = by_name.namespace.as_ref().is_some_and(|n| !n.is_empty());
            matched.extend(inventory.services.iter().filter(|s| {
                s.name == name && namespace_ok(by_name.namespace.as_ref(), &s.namespace)
            }));
        } else if let Some(by_selector) = &service.k8s_service_selector {
            let selector = convert_selector(&by_selector.selector);
            description = format!("services selected by {selector}");
            matcher = "serviceSelectorMatches";
            namespace_given = by_selector
                .namespace
                .as_ref()
                .is_some_and(|n| !n.is_empty());
            matched.extend(inventory.services.iter().filter(|s| {
                let labels: crate::labels::LabelSet = s
                    .labels
                    .iter()
                    .map(|(k, v)| crate::labels::Label::k8s(k, v))
                    .collect();
                namespace_ok(by_selector.namespace.as_ref(), &s.namespace)
                    && selector.matches(&labels)
            }));
        } else {
            description = "an empty toServices item".to_owned();
            matcher = "";
            namespace_given = true;
        }
        if matched.is_empty() {
            return Some(format!("{description} is not in the inventory"));
        }
        if let Some(policy_ns) = item.namespace
            && !namespace_given
        {
            let elsewhere: Vec<String> = matched
                .iter()
                .filter(|s| s.namespace != policy_ns)
                .map(|s| format!("{}/{}", s.namespace, s.name))
                .collect();
            if !elsewhere.is_empty() {
                self.diag(
                    item.input,
                    codes::SERVICE_ANY_NAMESPACE,
                    route,
                    format!(
                        "{description}: the reference has no namespace, so Cilium matches services of every namespace ({matcher}, pkg/policy/k8s/service.go), not only of `{policy_ns}`: here also {}",
                        elsewhere.join(", ")
                    ),
                );
            }
        }
        let before = selectors.len();
        for svc in &matched {
            match &svc.selector {
                // `len(svc.Selector) == 0` is a selector-less service.
                Some(pod_selector) if !pod_selector.is_empty() => {
                    // appendSelector: the service selector plus the
                    // service's namespace, as generated toEndpoints.
                    let mut sel = Selector::from_requirements(pod_selector.iter().map(|(k, v)| {
                        Requirement::is_in(SelectorKey::new(SOURCE_K8S, k), [v.clone()])
                    }));
                    sel.push(namespace_pin(&svc.namespace));
                    selectors.push(sel);
                }
                _ => {
                    // appendEndpoints: a generated toCIDRSet of the backends.
                    for ip in &svc.backends {
                        let prefix = host_prefix(*ip);
                        self.out.prefixes.insert(prefix);
                        selectors.push(Selector::cidr(prefix, &[]));
                    }
                }
            }
        }
        if selectors.len() > before {
            return None;
        }
        let names: Vec<String> = matched
            .iter()
            .map(|s| format!("{}/{}", s.namespace, s.name))
            .collect();
        Some(format!(
            "{description} matches only selector-less services without backends ({})",
            names.join(", ")
        ))
    }

    fn fqdn_peer(
        &mut self,
        item: &ItemCtx<'_>,
        route: &str,
        fqdn: &FqdnSelector,
        selectors: &mut Vec<Selector>,
    ) {
        let inventory = self.inventory;
        let mut ips = BTreeSet::new();
        let description;
        if let Some(name) = &fqdn.match_name {
            let wanted = name.to_ascii_lowercase();
            let wanted = wanted.trim_end_matches('.');
            description = format!("matchName `{name}`");
            if let Some(answers) = inventory.fqdns.get(wanted) {
                ips.extend(answers.iter().copied());
            }
        } else if let Some(pattern) = &fqdn.match_pattern {
            description = format!("matchPattern `{pattern}`");
            let pattern = MatchPattern::new(pattern);
            for (name, answers) in &inventory.fqdns {
                if pattern.matches(name) {
                    ips.extend(answers.iter().copied());
                }
            }
        } else {
            description = "an empty toFQDNs item".to_owned();
        }
        if ips.is_empty() {
            self.unresolved(
                item,
                route,
                codes::UNKNOWN_FQDN,
                format!("toFQDNs {description} has no DNS answers in the inventory"),
                selectors,
            );
            return;
        }
        for ip in ips {
            let prefix = host_prefix(ip);
            self.out.prefixes.insert(prefix);
            selectors.push(Selector::cidr(prefix, &[]));
        }
    }

    fn port_rules(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        to_ports: Option<&Vec<PortRule>>,
        icmps: Option<&Vec<IcmpRule>>,
    ) -> Vec<PortSpec> {
        let mut specs = Vec::new();
        for (i, port_rule) in to_ports.iter().flat_map(|l| l.iter()).enumerate() {
            let l7 = l7_of(port_rule);
            for (j, pp) in port_rule.ports.iter().flat_map(|l| l.iter()).enumerate() {
                let r = format!("{route}.toPorts[{i}].ports[{j}]");
                if let Some(spec) = self.port_spec(input, &r, pp, l7.clone(), false) {
                    specs.push(spec);
                }
            }
        }
        self.icmp_specs(input, route, icmps, &mut specs);
        specs
    }

    fn deny_port_rules(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        to_ports: Option<&Vec<porin_model::model::PortDenyRule>>,
        icmps: Option<&Vec<IcmpRule>>,
    ) -> Vec<PortSpec> {
        let mut specs = Vec::new();
        for (i, port_rule) in to_ports.iter().flat_map(|l| l.iter()).enumerate() {
            for (j, pp) in port_rule.ports.iter().flat_map(|l| l.iter()).enumerate() {
                let r = format!("{route}.toPorts[{i}].ports[{j}]");
                if let Some(spec) = self.port_spec(input, &r, pp, L7::none(), true) {
                    specs.push(spec);
                }
            }
        }
        self.icmp_specs(input, route, icmps, &mut specs);
        specs
    }

    fn icmp_specs(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        icmps: Option<&Vec<IcmpRule>>,
        specs: &mut Vec<PortSpec>,
    ) {
        for (i, rule) in icmps.iter().flat_map(|l| l.iter()).enumerate() {
            for (j, field) in rule.fields.iter().flat_map(|l| l.iter()).enumerate() {
                let ipv6 = field.family == Some(IcmpFamily::IPv6);
                let text = match &field.icmp_type {
                    IntOrString::Int(n) => n.to_string(),
                    IntOrString::String(s) => s.clone(),
                };
                match icmp_type(&text, ipv6) {
                    Some(0) => {
                        let r = format!("{route}.icmps[{i}].fields[{j}].type");
                        let index = self.diag(
                            input,
                            codes::CILIUM_QUIRK,
                            &r,
                            format!(
                                "ICMP type 0 ({}) becomes port \"0\" in Cilium 1.19, which means every {} type; porin mirrors this",
                                if ipv6 { "0" } else { "EchoReply" },
                                if ipv6 { "ICMPv6" } else { "ICMP" }
                            ),
                        );
                        if let Some(d) = self.out.diagnostics.get_mut(index) {
                            d.notes.push("pkg/policy/api/icmp.go ICMPField.PortProtocol; cilium/cilium#41304, fixed after 1.19 by PR #44338".to_owned());
                        }
                        specs.push(PortSpec {
                            port: PortRef::Number(0),
                            end_port: 0,
                            proto: if ipv6 { proto::ICMPV6 } else { proto::ICMP },
                            l7: L7::none(),
                        });
                    }
                    Some(code) => specs.push(PortSpec {
                        port: PortRef::Number(u16::from(code)),
                        end_port: 0,
                        proto: if ipv6 { proto::ICMPV6 } else { proto::ICMP },
                        l7: L7::none(),
                    }),
                    None => {
                        let r = format!("{route}.icmps[{i}].fields[{j}].type");
                        self.diag(
                            input,
                            codes::INVALID_PORT,
                            &r,
                            format!("ICMP type `{text}` is not known; the field is ignored"),
                        );
                    }
                }
            }
        }
    }

    fn port_spec(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        pp: &PortProtocol,
        l7: L7,
        deny: bool,
    ) -> Option<PortSpec> {
        let proto = match pp.protocol {
            None | Some(L4Proto::Any) => proto::ANY,
            Some(L4Proto::Tcp) => proto::TCP,
            Some(L4Proto::Udp) => proto::UDP,
            Some(L4Proto::Sctp) => proto::SCTP,
            Some(L4Proto::Vrrp) => proto::VRRP,
            Some(L4Proto::Igmp) => proto::IGMP,
        };
        let text = pp.port.clone().unwrap_or_default();
        let port = if text.trim().is_empty() {
            PortRef::Number(0)
        } else if let Some(n) = parse_port_number(&text) {
            PortRef::Number(n)
        } else if text.chars().all(|c| c.is_ascii_digit()) {
            self.diag(
                input,
                codes::INVALID_PORT,
                route,
                format!("port `{text}` is out of range; the port is ignored"),
            );
            return None;
        } else {
            PortRef::Named(text.to_ascii_lowercase())
        };
        let mut end_port = pp
            .end_port
            .map(|e| u16::try_from(e.clamp(0, 65_535)).unwrap_or(u16::MAX))
            .unwrap_or(0);
        if port == PortRef::Number(0) && end_port != 0 && end_port != u16::MAX {
            // policymap.go NewKeyFromPolicyKey adds port prefix bits only
            // when DestPort != 0, so the masked port 0/n of such a range is
            // an all-ports key in the datapath. Failing closed means the
            // narrow range for an allow, but every port for a deny (keeping
            // the range would allow what Cilium denies).
            let consequence = if deny {
                "porin denies every port of the protocol, like Cilium's datapath"
            } else {
                "porin keeps the range (fail closed)"
            };
            self.diag(
                input,
                codes::PORT_ZERO_RANGE,
                route,
                format!(
                    "port \"0\" with endPort {end_port}: Cilium writes this as an all-ports key in the datapath (semantics.md §4.5); {consequence}"
                ),
            );
            if deny {
                end_port = 0;
            }
        }
        Some(PortSpec {
            port,
            end_port,
            proto,
            l7,
        })
    }

    fn lower_cilium_rule(
        &mut self,
        input: &PolicyInput<'_>,
        namespace: Option<&str>,
        spec_route: &str,
        rule: &Rule,
    ) {
        let Some(endpoint_selector) = &rule.endpoint_selector else {
            if rule.node_selector.is_some() {
                self.diag(
                    input,
                    codes::HOST_POLICY,
                    &format!("{spec_route}.nodeSelector"),
                    "rules with a nodeSelector apply to nodes (host firewall), not to inventory endpoints; porin skips them".to_owned(),
                );
            }
            return;
        };
        let mut subject = convert_selector(endpoint_selector);
        // matchesPodInit: `HasKey("reserved.init")`, the exact key with any
        // operator; `any.init` does not count.
        let subject_selects_init =
            subject.has_key(|k| k.source == SOURCE_RESERVED && k.key == "init");
        if let Some(ns) = namespace {
            // ParseToCiliumRule: `AddMatch(k8s.io.kubernetes.pod.namespace, ns)`
            // replaces only the matchLabels entry with exactly that extended
            // key. An `any.` namespace key or a matchExpression on the
            // namespace stays and is ANDed (then the subject may select
            // nothing).
            let mut user = endpoint_selector.clone();
            if let Some(labels) = user.match_labels.as_mut() {
                labels.retain(|key, _| {
                    let key = SelectorKey::extend(key);
                    !(key.source == SOURCE_K8S && key.key == POD_NAMESPACE_LABEL)
                });
            }
            subject = convert_selector(&user);
            subject.push(namespace_pin(ns));
        }
        let default_deny = rule.enable_default_deny.as_ref();
        let ingress_dd = default_deny.and_then(|d| d.ingress).unwrap_or(true);
        let egress_dd = default_deny.and_then(|d| d.egress).unwrap_or(true);
        let cookie = rule
            .log
            .as_ref()
            .and_then(|l| l.value.as_ref())
            .and_then(|v| self.out.cookies.get(v).copied())
            .unwrap_or(0);

        let push = |ctx: &mut Self,
                    section: Section,
                    index: usize,
                    peers: Peers<'_>,
                    l4_present: bool,
                    ports: &dyn Fn(&mut Self, &str) -> Vec<PortSpec>,
                    auth: Option<AuthMode>,
                    dd: bool| {
            let route = format!("{spec_route}.{}[{index}]", section.id);
            let origin = ctx.new_origin(input, namespace, section, index, &route);
            let ports = ports(ctx, &route);
            let item = ItemCtx {
                input,
                namespace,
                subject_selects_init,
                route: route.clone(),
                deny: section.deny,
                direction: section.direction,
            };
            let peers = ctx.peers(&item, &peers, l4_present);
            ctx.out.rules.push(PolicyRule {
                origin,
                subject: subject.clone(),
                direction: section.direction,
                deny: section.deny,
                default_deny: dd,
                peers,
                l3_only: !l4_present,
                ports,
                auth,
                cookie,
            });
        };

        for (i, item) in rule.ingress.iter().flatten().enumerate() {
            let peers = ingress_peers(item);
            push(
                self,
                INGRESS,
                i,
                peers,
                has_l4(item.to_ports.as_ref(), item.icmps.as_ref()),
                &|c, r| c.port_rules(input, r, item.to_ports.as_ref(), item.icmps.as_ref()),
                auth_of(item.authentication.as_ref().map(|a| a.mode)),
                ingress_dd,
            );
        }
        for (i, item) in rule.ingress_deny.iter().flatten().enumerate() {
            let peers = ingress_deny_peers(item);
            push(
                self,
                INGRESS_DENY,
                i,
                peers,
                has_l4(item.to_ports.as_ref(), item.icmps.as_ref()),
                &|c, r| c.deny_port_rules(input, r, item.to_ports.as_ref(), item.icmps.as_ref()),
                None,
                ingress_dd,
            );
        }
        for (i, item) in rule.egress.iter().flatten().enumerate() {
            let peers = egress_peers(item);
            push(
                self,
                EGRESS,
                i,
                peers,
                has_l4(item.to_ports.as_ref(), item.icmps.as_ref()),
                &|c, r| c.port_rules(input, r, item.to_ports.as_ref(), item.icmps.as_ref()),
                auth_of(item.authentication.as_ref().map(|a| a.mode)),
                egress_dd,
            );
        }
        for (i, item) in rule.egress_deny.iter().flatten().enumerate() {
            let peers = egress_deny_peers(item);
            push(
                self,
                EGRESS_DENY,
                i,
                peers,
                has_l4(item.to_ports.as_ref(), item.icmps.as_ref()),
                &|c, r| c.deny_port_rules(input, r, item.to_ports.as_ref(), item.icmps.as_ref()),
                None,
                egress_dd,
            );
        }
    }

    fn lower_knp(&mut self, input: &PolicyInput<'_>, knp: &NetworkPolicy) {
        let namespace = knp
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let spec = knp.spec.clone().unwrap_or_default();
        let mut subject = Selector::wildcard();
        if let Some(pod_selector) = &spec.pod_selector {
            k8s_selector(&without_namespace_match(pod_selector), "", &mut subject);
        }
        subject.push(namespace_pin(&namespace));
        let policy_types = spec.policy_types.clone().unwrap_or_default();
        let mut ingress_count = 0usize;
        let mut egress_count = 0usize;

        for (section, items) in [
            (
                INGRESS,
                spec.ingress.as_ref().map(|l| {
                    l.iter()
                        .map(|r| (r.from.as_ref(), r.ports.as_ref()))
                        .collect::<Vec<_>>()
                }),
            ),
            (
                EGRESS,
                spec.egress.as_ref().map(|l| {
                    l.iter()
                        .map(|r| (r.to.as_ref(), r.ports.as_ref()))
                        .collect::<Vec<_>>()
                }),
            ),
        ] {
            for (index, (peers, ports)) in items.unwrap_or_default().into_iter().enumerate() {
                let route = format!("spec.{}[{index}]", section.id);
                let origin = self.new_origin(input, Some(&namespace), section, index, &route);
                let port_specs = self.knp_ports(input, &route, ports);
                let peer_lists: Vec<Vec<Selector>> = match peers.filter(|p| !p.is_empty()) {
                    None => vec![vec![Selector::wildcard()]],
                    Some(list) => list
                        .iter()
                        .enumerate()
                        .map(|(j, peer)| {
                            let peer_route = format!(
                                "{route}.{}[{j}]",
                                if section.direction == Direction::Ingress {
                                    "from"
                                } else {
                                    "to"
                                }
                            );
                            self.knp_peer(input, &namespace, section.direction, &peer_route, peer)
                        })
                        .collect(),
                };
                for selectors in peer_lists {
                    if section.direction == Direction::Ingress {
                        ingress_count += 1;
                    } else {
                        egress_count += 1;
                    }
                    self.out.rules.push(PolicyRule {
                        origin,
                        subject: subject.clone(),
                        direction: section.direction,
                        deny: false,
                        default_deny: true,
                        peers: Some(selectors),
                        l3_only: ports.is_none_or(|p| p.is_empty()),
                        ports: port_specs.clone(),
                        auth: None,
                        cookie: 0,
                    });
                }
            }
        }
        use porin_model::model::PolicyType;
        let has = |t: PolicyType| policy_types.contains(&t);
        let default_deny = |ctx: &mut Self, section: Section| {
            let route = "spec.policyTypes".to_owned();
            let origin = ctx.new_origin(input, Some(&namespace), section, 0, &route);
            ctx.out.rules.push(PolicyRule {
                origin,
                subject: subject.clone(),
                direction: section.direction,
                deny: false,
                default_deny: true,
                peers: None,
                l3_only: true,
                ports: Vec::new(),
                auth: None,
                cookie: 0,
            });
        };
        if ingress_count == 0 && (has(PolicyType::Ingress) || !has(PolicyType::Egress)) {
            default_deny(self, INGRESS);
        }
        if egress_count == 0 && has(PolicyType::Egress) {
            default_deny(self, EGRESS);
        }
    }

    fn knp_ports(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        ports: Option<&Vec<porin_model::model::NetworkPolicyPort>>,
    ) -> Vec<PortSpec> {
        let mut specs = Vec::new();
        for (i, port) in ports.iter().flat_map(|l| l.iter()).enumerate() {
            let proto = match port.protocol {
                None | Some(K8sProtocol::Tcp) => proto::TCP,
                Some(K8sProtocol::Udp) => proto::UDP,
                Some(K8sProtocol::Sctp) => proto::SCTP,
            };
            let port_ref = match &port.port {
                None => PortRef::Number(0),
                Some(IntOrString::Int(n)) => match u16::try_from(*n) {
                    Ok(n) => PortRef::Number(n),
                    Err(_) => {
                        self.diag(
                            input,
                            codes::INVALID_PORT,
                            &format!("{route}.ports[{i}].port"),
                            format!("port `{n}` is out of range; the port is ignored"),
                        );
                        continue;
                    }
                },
                Some(IntOrString::String(s)) => match parse_port_number(s) {
                    Some(n) => PortRef::Number(n),
                    None => PortRef::Named(s.to_ascii_lowercase()),
                },
            };
            let end_port = port
                .end_port
                .map(|e| u16::try_from(e.clamp(0, 65_535)).unwrap_or(u16::MAX))
                .unwrap_or(0);
            specs.push(PortSpec {
                port: port_ref,
                end_port,
                proto,
                l7: L7::none(),
            });
        }
        specs
    }

    /// `parseNetworkPolicyPeer` + ipBlock handling of `ParseNetworkPolicy`.
    fn knp_peer(
        &mut self,
        input: &PolicyInput<'_>,
        namespace: &str,
        direction: Direction,
        route: &str,
        peer: &NetworkPolicyPeer,
    ) -> Vec<Selector> {
        let mut selectors = Vec::new();
        // Egress only parses label selectors when one is present; ingress
        // always does (network_policy.go), which is the ipBlock quirk below.
        let parse_labels = direction == Direction::Ingress
            || peer.namespace_selector.is_some()
            || peer.pod_selector.is_some();
        if parse_labels {
            let mut pod = peer.pod_selector.clone();
            let selects_cluster = pod.as_ref().is_some_and(|p| {
                p.match_labels
                    .as_ref()
                    .is_some_and(|m| m.get(CLUSTER_LABEL).is_some_and(|v| !v.is_empty()))
                    || p.match_expressions
                        .as_ref()
                        .is_some_and(|e| e.iter().any(|x| x.key == CLUSTER_LABEL))
            });
            if !self.cluster.is_empty() && !selects_cluster {
                let p = pod.get_or_insert_with(LabelSelector::default);
                p.match_labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(CLUSTER_LABEL.to_owned(), self.cluster.clone());
            }
            if let Some(ns_selector) = &peer.namespace_selector {
                let mut sel = Selector::wildcard();
                k8s_selector(
                    ns_selector,
                    &format!("{NAMESPACE_LABELS_PREFIX}."),
                    &mut sel,
                );
                if sel.is_wildcard() {
                    sel.push(Requirement::exists(SelectorKey::new(
                        SOURCE_K8S,
                        POD_NAMESPACE_LABEL,
                    )));
                }
                if let Some(p) = &pod {
                    k8s_selector(p, "", &mut sel);
                }
                selectors.push(sel);
            } else if let Some(p) = &pod {
                let mut sel = Selector::wildcard();
                k8s_selector(&without_namespace_match(p), "", &mut sel);
                sel.push(namespace_pin(namespace));
                if peer.pod_selector.is_none() && peer.ip_block.is_some() {
                    self.diag(
                        input,
                        codes::KNP_IPBLOCK_QUIRK,
                        route,
                        format!(
                            "Cilium also admits every pod of namespace `{namespace}` through an ingress peer that has only an ipBlock; porin mirrors this"
                        ),
                    );
                    if let Some(d) = self.out.diagnostics.last_mut() {
                        d.notes.push("pkg/k8s/network_policy.go: parseNetworkPolicyPeer adds the cluster label to a missing podSelector, which then gets the policy namespace".to_owned());
                    }
                }
                selectors.push(sel);
            }
        }
        if let Some(block) = &peer.ip_block {
            let item = ItemCtx {
                input,
                namespace: Some(namespace),
                subject_selects_init: false,
                route: route.to_owned(),
                deny: false,
                direction,
            };
            let except = block.except.clone().unwrap_or_default();
            self.add_cidr(
                &item,
                &format!("{route}.ipBlock"),
                &block.cidr,
                &except,
                &mut selectors,
            );
        }
        selectors
    }
}

/// Whether a rule item has an L4 part (`toPorts` or `icmps` non-empty, as
/// `len(ToPorts) > 0 || len(ICMPs) > 0` in `pkg/policy/rule.go`). An item
/// whose ports all fail to parse is still an L4 rule: it allows nothing
/// rather than everything.
fn has_l4<P, I>(to_ports: Option<&Vec<P>>, icmps: Option<&Vec<I>>) -> bool {
    to_ports.is_some_and(|l| !l.is_empty()) || icmps.is_some_and(|l| !l.is_empty())
}

fn auth_of(mode: Option<AuthenticationMode>) -> Option<AuthMode> {
    mode.map(|m| match m {
        AuthenticationMode::Disabled => AuthMode::Disabled,
        AuthenticationMode::Required => AuthMode::Required,
        AuthenticationMode::TestAlwaysFail => AuthMode::TestAlwaysFail,
    })
}

/// The L7 side of a port rule (`createL4Filter` in `pkg/policy/l4.go`).
fn l7_of(rule: &PortRule) -> L7 {
    let mut l7 = L7::none();
    if let Some(rules) = &rule.rules {
        if let Some(http) = &rules.http {
            l7.parser = L7Parser::Http;
            l7.rule_count = http.len();
        } else if let Some(kafka) = &rules.kafka {
            l7.parser = L7Parser::Kafka;
            l7.rule_count = kafka.len();
        } else if let Some(dns) = &rules.dns {
            l7.parser = L7Parser::Dns;
            l7.rule_count = dns.len();
        } else if let Some(name) = &rules.l7proto {
            l7.parser = L7Parser::Proxylib(name.clone());
            l7.rule_count = rules.l7.as_ref().map_or(0, Vec::len);
        }
    }
    if let Some(listener) = &rule.listener {
        l7.parser = L7Parser::Crd;
        l7.listener = Some(format!("{}/{}", listener.envoy_config.name, listener.name));
        l7.listener_priority = listener
            .priority
            .and_then(|p| u8::try_from(p.clamp(1, 126)).ok());
    }
    if l7.parser == L7Parser::None
        && (rule.terminating_tls.is_some()
            || rule.originating_tls.is_some()
            || rule.server_names.as_ref().is_some_and(|s| !s.is_empty()))
    {
        l7.parser = L7Parser::Tls;
    }
    l7
}

fn ingress_peers(item: &IngressRule) -> Peers<'_> {
    Peers {
        endpoints: item.from_endpoints.as_ref(),
        cidr: item.from_cidr.as_ref(),
        cidr_set: item.from_cidr_set.as_ref(),
        entities: item.from_entities.as_ref(),
        nodes: item.from_nodes.as_ref(),
        groups: item.from_groups.as_ref().is_some_and(|g| !g.is_empty()),
        ..Peers::default()
    }
}

fn ingress_deny_peers(item: &IngressDenyRule) -> Peers<'_> {
    Peers {
        endpoints: item.from_endpoints.as_ref(),
        cidr: item.from_cidr.as_ref(),
        cidr_set: item.from_cidr_set.as_ref(),
        entities: item.from_entities.as_ref(),
        nodes: item.from_nodes.as_ref(),
        groups: item.from_groups.as_ref().is_some_and(|g| !g.is_empty()),
        ..Peers::default()
    }
}

fn egress_peers(item: &EgressRule) -> Peers<'_> {
    Peers {
        endpoints: item.to_endpoints.as_ref(),
        cidr: item.to_cidr.as_ref(),
        cidr_set: item.to_cidr_set.as_ref(),
        entities: item.to_entities.as_ref(),
        nodes: item.to_nodes.as_ref(),
        groups: item.to_groups.as_ref().is_some_and(|g| !g.is_empty()),
        services: item.to_services.as_ref(),
        fqdns: item.to_fqdns.as_ref(),
    }
}

fn egress_deny_peers(item: &EgressDenyRule) -> Peers<'_> {
    Peers {
        endpoints: item.to_endpoints.as_ref(),
        cidr: item.to_cidr.as_ref(),
        cidr_set: item.to_cidr_set.as_ref(),
        entities: item.to_entities.as_ref(),
        nodes: item.to_nodes.as_ref(),
        groups: item.to_groups.as_ref().is_some_and(|g| !g.is_empty()),
        services: item.to_services.as_ref(),
        fqdns: None,
    }
}
