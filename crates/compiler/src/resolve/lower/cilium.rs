//! Lowering of one CNP/CCNP rule.

use porin_model::model::{AuthenticationMode, Rule};

use super::peers::{
    ItemCtx, Peers, egress_deny_peers, egress_peers, ingress_deny_peers, ingress_peers,
};
use super::ports::has_l4;
use super::selectors::{convert_selector, namespace_pin};
use super::{Ctx, EGRESS, EGRESS_DENY, INGRESS, INGRESS_DENY, PolicyInput, Section};
use crate::codes;
use crate::labels::{POD_NAMESPACE_LABEL, SOURCE_K8S, SOURCE_RESERVED};
use crate::resolve::rule::{AuthMode, PolicyRule, PortSpec};
use crate::selector::SelectorKey;

impl Ctx<'_> {
    pub(super) fn lower_cilium_rule(
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
}

pub(super) fn auth_of(mode: Option<AuthenticationMode>) -> Option<AuthMode> {
    mode.map(|m| match m {
        AuthenticationMode::Disabled => AuthMode::Disabled,
        AuthenticationMode::Required => AuthMode::Required,
        AuthenticationMode::TestAlwaysFail => AuthMode::TestAlwaysFail,
    })
}
