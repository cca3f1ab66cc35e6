//! Lowering of a Kubernetes NetworkPolicy (`ParseNetworkPolicy`,
//! `pkg/k8s/network_policy.go`).

use porin_model::model::{
    IntOrString, K8sProtocol, LabelSelector, NetworkPolicy, NetworkPolicyPeer, RuleSection,
};

use super::origin::{allow_section, direction_of};
use super::peers::ItemCtx;
use super::selectors::{
    k8s_selector, namespace_labels_selector, namespace_pin, without_namespace_match,
};
use super::{Ctx, PolicyInput};
use crate::codes;
use crate::labels::CLUSTER_LABEL;
use crate::mapstate::Direction;
use crate::resolve::rule::{L7, PolicyRule, PortRef, PortSpec, parse_port_number, proto};
use crate::selector::Selector;

impl Ctx<'_> {
    pub(super) fn lower_knp(&mut self, input: &PolicyInput<'_>, knp: &NetworkPolicy) {
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

        for (section, items) in [
            (
                RuleSection::Ingress,
                spec.ingress.as_ref().map(|l| {
                    l.iter()
                        .map(|r| (r.from.as_ref(), r.ports.as_ref()))
                        .collect::<Vec<_>>()
                }),
            ),
            (
                RuleSection::Egress,
                spec.egress.as_ref().map(|l| {
                    l.iter()
                        .map(|r| (r.to.as_ref(), r.ports.as_ref()))
                        .collect::<Vec<_>>()
                }),
            ),
        ] {
            for (index, (peers, ports)) in items.unwrap_or_default().into_iter().enumerate() {
                let route = format!("spec.{section}[{index}]");
                let direction = direction_of(section);
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
                                if direction == Direction::Ingress {
                                    "from"
                                } else {
                                    "to"
                                }
                            );
                            self.knp_peer(input, &namespace, direction, &peer_route, peer)
                        })
                        .collect(),
                };
                for selectors in peer_lists {
                    self.out.rules.push(PolicyRule {
                        origin,
                        subject: subject.clone(),
                        host: false,
                        direction,
                        deny: false,
                        default_deny: true,
                        peers: Some(selectors),
                        l3_only: ports.is_none_or(|p| p.is_empty()),
                        ports: port_specs.clone(),
                        auth: None,
                        cookie: 0,
                        tier: None,
                    });
                }
            }
        }
        use porin_model::model::PolicyType;
        let has = |t: PolicyType| policy_types.contains(&t);
        let default_deny = |ctx: &mut Self, section: RuleSection| {
            let direction = direction_of(section);
            let route = "spec.policyTypes".to_owned();
            let origin = ctx.new_origin(input, Some(&namespace), section, 0, &route);
            ctx.out.rules.push(PolicyRule {
                origin,
                subject: subject.clone(),
                host: false,
                direction,
                deny: false,
                default_deny: true,
                peers: None,
                l3_only: true,
                ports: Vec::new(),
                auth: None,
                cookie: 0,
                tier: None,
            });
        };
        // The default deny a direction gets from policyTypes, as a rule of
        // its own even when items enforce the direction too: it changes no
        // map state then, but deleting every item keeps it, as deleting them
        // from the YAML does (the lint rules' "without this rule" is that
        // edit). An item-less `egress` without policyTypes has no such
        // rule: the API server's defaulting gives Egress only when `egress`
        // has an item (pkg/apis/networking/v1/defaults.go).
        if has(PolicyType::Ingress) || !has(PolicyType::Egress) {
            default_deny(self, RuleSection::Ingress);
        }
        if has(PolicyType::Egress) {
            default_deny(self, RuleSection::Egress);
        }
    }

    pub(super) fn knp_ports(
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
    pub(super) fn knp_peer(
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
                    .get_or_insert_with(porin_model::MatchLabels::new)
                    .insert(CLUSTER_LABEL.to_owned(), self.cluster.clone());
            }
            if let Some(ns_selector) = &peer.namespace_selector {
                let mut sel = namespace_labels_selector(ns_selector);
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
                section: allow_section(direction),
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
