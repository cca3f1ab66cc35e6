//! Lowering of a Kubernetes `ClusterNetworkPolicy` as Cilium 1.20 translates
//! it (`ParseClusterNetworkPolicy`, `pkg/k8s/cluster_network_policy.go`):
//! one [`PolicyRule`] per peer of each rule, every one carrying its place in
//! the tiers ([`TierRule`]: tier, `spec.priority`, rule index, action) and
//! none putting its subjects into default deny (`r.DefaultDeny = false`).
//!
//! Selectors: a `namespaces` peer or subject selects by namespace labels
//! (`processNamespaceSelector`: an empty selector means every namespace);
//! a `pods` peer adds the pod selector and, when the inventory names a
//! cluster, the cluster label (`kcnpParseNamespacedPod` with the local
//! cluster; the subject gets none). `networks` are CIDR peers,
//! `domainNames` FQDN peers (`*.x` becomes `**.x`, Cilium's recursive
//! wildcard, `kcnpParseFQDNSelectors`), resolved from the inventory's DNS
//! answers as `toFQDNs` is. Each `domainNames` peer also gets the rule
//! Cilium adds for its DNS proxy (`dnsEgress` in `ParseClusterNetworkPolicy`):
//! an Accept of the same tier and priority towards `k8s-app=kube-dns` (label
//! source `any`: every namespace) on the named ports `dns` and `dns-tcp`
//! (any protocol), redirected to the DNS proxy with the names as its DNS
//! rules. `nodes` select the remote nodes' identities under
//! `enable-node-selector-labels` (`kcnpProcessNodeSelector`); without the
//! setting Cilium refuses the whole policy (`ParseClusterNetworkPolicy`
//! returns "egress.to.nodes is not supported since node selector labels are
//! disabled" and `addK8sClusterNetworkPolicy`, pkg/policy/k8s, imports none
//! of its rules), and so does porin: PC031 (an error) and no rule of the
//! policy, its Deny rules included, exactly what the cluster enforces.
//!
//! Precedence across tiers is resolved later, per endpoint
//! ([`crate::tier`]).

use std::collections::BTreeMap;

use porin_model::model::{
    ClusterAction, ClusterNetworkPolicy, ClusterNetworkPolicyPeer, ClusterNetworkPolicyProtocol,
    FqdnSelector, LabelSelector, NamespacedPod, RuleSection,
};

use super::origin::{OriginTier, direction_of};
use super::peers::ItemCtx;
use super::selectors::{k8s_selector, namespace_labels_selector};
use super::{Ctx, PolicyInput};
use crate::codes;
use crate::labels::CLUSTER_LABEL;
use crate::labels::SOURCE_ANY;
use crate::mapstate::Direction;
use crate::resolve::rule::{L7, L7Parser, PolicyRule, PortRef, PortSpec, proto};
use crate::selector::{Requirement, Selector, SelectorKey};
use crate::tier::place::TierRule;

impl Ctx<'_> {
    pub(super) fn lower_cluster_network_policy(
        &mut self,
        input: &PolicyInput<'_>,
        policy: &ClusterNetworkPolicy,
    ) {
        let spec = &policy.spec;
        let subject = match (&spec.subject.namespaces, &spec.subject.pods) {
            (Some(namespaces), _) => namespace_labels_selector(namespaces),
            (None, Some(pods)) => self.pods_selector(pods, false),
            // Validation requires exactly one; an empty subject selects
            // nothing rather than everything.
            (None, None) => return,
        };
        if !self.inventory.settings.enable_node_selector_labels
            && let Some(route) = first_nodes_peer(policy)
        {
            let message = format!(
                "ClusterNetworkPolicy `{}` {route}: a `nodes` peer needs the agent setting `enable-node-selector-labels: true`; without it Cilium refuses the whole policy (\"egress.to.nodes is not supported since node selector labels are disabled\") and enforces none of its rules, Deny included; porin compiles none either",
                policy.metadata.name.as_deref().unwrap_or_default()
            );
            let at = self.diag(
                input,
                codes::CLUSTER_NETWORK_POLICY_REFUSED,
                &route,
                message,
            );
            if let Some(d) = self.out.diagnostics.get_mut(at) {
                d.notes.push("pkg/k8s/cluster_network_policy.go: ParseClusterNetworkPolicy returns an error; pkg/policy/k8s/cluster_network_policy.go: addK8sClusterNetworkPolicy then adds no rule".to_owned());
                d.help = Some("set `enable-node-selector-labels: true` in `settings:` (if the agents run with it), or select the nodes with `networks` (their addresses)".to_owned());
            }
            return;
        }
        let priority = u32::try_from(spec.priority.clamp(0, 1000)).unwrap_or(1000);
        let ingress = spec.ingress.iter().flatten().map(|r| {
            (
                RuleSection::Ingress,
                r.action,
                r.name.as_deref(),
                &r.from,
                r.protocols.as_ref(),
            )
        });
        let egress = spec.egress.iter().flatten().map(|r| {
            (
                RuleSection::Egress,
                r.action,
                r.name.as_deref(),
                &r.to,
                r.protocols.as_ref(),
            )
        });
        let mut index_of: BTreeMap<RuleSection, usize> = BTreeMap::new();
        for (section, action, name, peers, protocols) in ingress.chain(egress) {
            let index = {
                let next = index_of.entry(section).or_insert(0);
                *next += 1;
                *next - 1
            };
            let direction = direction_of(section);
            let route = format!("spec.{section}[{index}]");
            let tier = TierRule {
                tier: spec.tier,
                priority,
                index: u32::try_from(index).unwrap_or(u32::MAX),
                action,
            };
            let origin_section = match (action, section) {
                (ClusterAction::Deny, RuleSection::Ingress) => RuleSection::IngressDeny,
                (ClusterAction::Deny, RuleSection::Egress) => RuleSection::EgressDeny,
                _ => section,
            };
            let origin = self.new_origin(input, None, origin_section, index, &route);
            if let Some(o) = self.out.origins.get_mut(origin as usize) {
                o.tier = Some(OriginTier {
                    tier: spec.tier,
                    priority,
                    action,
                    rule_name: name.map(str::to_owned),
                });
            }
            let ports = cluster_ports(protocols);
            let l3_only = protocols.is_none_or(|p| p.is_empty());
            let peer_key = if direction == Direction::Ingress {
                "from"
            } else {
                "to"
            };
            for (j, peer) in peers.iter().enumerate() {
                let peer_route = format!("{route}.{peer_key}[{j}]");
                let (selectors, action) =
                    self.cluster_peer(input, &peer_route, origin_section, action, peer);
                self.out.rules.push(PolicyRule {
                    origin,
                    subject: subject.clone(),
                    direction,
                    deny: action == ClusterAction::Deny,
                    default_deny: false,
                    peers: Some(selectors),
                    l3_only,
                    ports: ports.clone(),
                    auth: None,
                    cookie: 0,
                    host: false,
                    tier: Some(TierRule { action, ..tier }),
                });
                if let Some(names) = peer.domain_names.as_ref().filter(|n| !n.is_empty()) {
                    self.out.rules.push(PolicyRule {
                        origin,
                        subject: subject.clone(),
                        direction,
                        deny: false,
                        default_deny: false,
                        peers: Some(vec![kube_dns_selector()]),
                        l3_only: false,
                        ports: dns_proxy_ports(names.len()),
                        auth: None,
                        cookie: 0,
                        host: false,
                        tier: Some(TierRule {
                            action: ClusterAction::Accept,
                            ..tier
                        }),
                    });
                }
            }
        }
    }

    /// A `pods` peer or subject (`kcnpParseNamespacedPod`).
    fn pods_selector(&self, pods: &NamespacedPod, pin_cluster: bool) -> Selector {
        let mut selector = namespace_labels_selector(&pods.namespace_selector);
        k8s_selector(&pods.pod_selector, "", &mut selector);
        let selects_cluster = pods
            .pod_selector
            .match_labels
            .as_ref()
            .is_some_and(|m| m.contains_key(CLUSTER_LABEL))
            || pods
                .pod_selector
                .match_expressions
                .iter()
                .flatten()
                .any(|e| e.key == CLUSTER_LABEL);
        if pin_cluster && !self.cluster.is_empty() && !selects_cluster {
            let mut pin = LabelSelector::default();
            pin.match_labels
                .get_or_insert_with(porin_model::MatchLabels::new)
                .insert(CLUSTER_LABEL.to_owned(), self.cluster.clone());
            k8s_selector(&pin, "", &mut selector);
        }
        selector
    }

    /// The selectors of one peer, and the action the rule keeps for it (a
    /// Deny of every peer where a Pass cannot be resolved: fail closed).
    fn cluster_peer(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        section: RuleSection,
        action: ClusterAction,
        peer: &ClusterNetworkPolicyPeer,
    ) -> (Vec<Selector>, ClusterAction) {
        let mut selectors = Vec::new();
        if let Some(namespaces) = &peer.namespaces {
            selectors.push(namespace_labels_selector(namespaces));
        } else if let Some(pods) = &peer.pods {
            selectors.push(self.pods_selector(pods, true));
        } else if let Some(networks) = &peer.networks {
            let item = item_ctx(input, route, section);
            for (k, cidr) in networks.iter().enumerate() {
                self.add_cidr(
                    &item,
                    &format!("{route}.networks[{k}]"),
                    cidr,
                    &[],
                    &mut selectors,
                );
            }
        } else if let Some(names) = &peer.domain_names {
            let item = item_ctx(input, route, section);
            for (k, name) in names.iter().enumerate() {
                let fqdn = if name.starts_with('*') && !name.starts_with("**") {
                    FqdnSelector {
                        match_name: None,
                        match_pattern: Some(format!("*{name}")),
                    }
                } else if name.starts_with('*') {
                    FqdnSelector {
                        match_name: None,
                        match_pattern: Some(name.clone()),
                    }
                } else {
                    FqdnSelector {
                        match_name: Some(name.clone()),
                        match_pattern: None,
                    }
                };
                self.fqdn_peer(
                    &item,
                    &format!("{route}.domainNames[{k}]"),
                    &fqdn,
                    &mut selectors,
                );
            }
        } else if let Some(nodes) = &peer.nodes {
            // `kcnpProcessNodeSelector` (pkg/k8s/cluster_network_policy.go):
            // the node labels plus `reserved:remote-node` and the local
            // cluster, the selector a CNP's toNodes gets. Without
            // `enable-node-selector-labels` the policy was refused before
            // any peer was lowered.
            selectors.push(self.node_peer(nodes));
        }
        (selectors, action)
    }
}

/// The route of the first `nodes` peer of a policy's egress rules (the
/// CRD allows `nodes` in egress peers only), if any.
fn first_nodes_peer(policy: &ClusterNetworkPolicy) -> Option<String> {
    policy
        .spec
        .egress
        .iter()
        .flatten()
        .enumerate()
        .find_map(|(i, rule)| {
            rule.to
                .iter()
                .position(|peer| peer.nodes.is_some())
                .map(|j| format!("spec.egress[{i}].to[{j}].nodes"))
        })
}

/// The peer of the DNS rule Cilium adds for `domainNames`:
/// `NewESFromLabels(ParseSelectLabel("k8s-app=kube-dns"))`, a label without
/// a source, so `any:k8s-app=kube-dns` (pods of every namespace).
fn kube_dns_selector() -> Selector {
    Selector::from_requirements([Requirement::is_in(
        SelectorKey::new(SOURCE_ANY, "k8s-app"),
        ["kube-dns".to_owned()],
    )])
}

/// The ports of that rule: `{Port: "dns"}` and `{Port: "dns-tcp"}` without
/// a protocol (any), with the domain names as DNS rules (the DNS proxy
/// redirect).
fn dns_proxy_ports(names: usize) -> Vec<PortSpec> {
    ["dns", "dns-tcp"]
        .into_iter()
        .map(|name| PortSpec {
            port: PortRef::Named(name.to_owned()),
            end_port: 0,
            proto: proto::ANY,
            l7: L7 {
                parser: L7Parser::Dns,
                rule_count: names,
                ..L7::none()
            },
        })
        .collect()
}

fn item_ctx<'x>(input: &'x PolicyInput<'x>, route: &str, section: RuleSection) -> ItemCtx<'x> {
    ItemCtx {
        input,
        namespace: None,
        subject_selects_init: false,
        route: route.to_owned(),
        section,
    }
}

/// `kcnpParseProtocols`: TCP/UDP/SCTP ports and ranges, named ports for any
/// protocol.
fn cluster_ports(protocols: Option<&Vec<ClusterNetworkPolicyProtocol>>) -> Vec<PortSpec> {
    let mut specs = Vec::new();
    for protocol in protocols.iter().flat_map(|p| p.iter()) {
        let numbered = [
            (proto::TCP, protocol.tcp.as_ref()),
            (proto::UDP, protocol.udp.as_ref()),
            (proto::SCTP, protocol.sctp.as_ref()),
        ];
        for (number, port) in numbered {
            let Some(port) = port.and_then(|p| p.destination_port.as_ref()) else {
                continue;
            };
            let clamp = |n: i64| u16::try_from(n.clamp(0, 65_535)).unwrap_or(u16::MAX);
            let (start, end) = match (&port.number, &port.range) {
                (Some(n), _) => (clamp(*n), 0),
                (None, Some(range)) => (clamp(range.start), clamp(range.end)),
                (None, None) => continue,
            };
            specs.push(PortSpec {
                port: PortRef::Number(start),
                end_port: end,
                proto: number,
                l7: L7::none(),
            });
        }
        if let Some(name) = &protocol.destination_named_port {
            specs.push(PortSpec {
                port: PortRef::Named(name.to_ascii_lowercase()),
                end_port: 0,
                proto: proto::ANY,
                l7: L7::none(),
            });
        }
    }
    specs
}
