//! Lowering of one CNP/CCNP rule.

use porin_model::model::{AuthenticationMode, Rule, RuleItem, RuleSection};

use super::origin::direction_of;
use super::peers::ItemCtx;
use super::selectors::{convert_selector, namespace_pin};
use super::{Ctx, PolicyInput};
use crate::codes;
use crate::labels::{POD_NAMESPACE_LABEL, SOURCE_K8S, SOURCE_RESERVED};
use crate::resolve::rule::{AuthMode, PolicyRule};
use crate::selector::SelectorKey;

impl Ctx<'_> {
    pub(super) fn lower_cilium_rule(
        &mut self,
        input: &PolicyInput<'_>,
        namespace: Option<&str>,
        spec_route: &str,
        rule: &Rule,
        only: Option<(RuleSection, usize)>,
    ) {
        // A host policy (`nodeSelector`, CCNP only: validation refuses it
        // in a CNP) selects host endpoints by node labels; no namespace is
        // pinned (`ParseToCiliumRule`: `NewESFromK8sLabelSelector("", ..)`,
        // keys without a source match any source).
        let host = rule.endpoint_selector.is_none();
        let mut subject_selects_init = false;
        let subject = if let Some(node_selector) = &rule.node_selector
            && host
        {
            let subject = convert_selector(node_selector);
            self.check_host_subject(input, spec_route, &subject);
            subject
        } else if let Some(endpoint_selector) = &rule.endpoint_selector {
            let mut subject = convert_selector(endpoint_selector);
            // matchesPodInit: `HasKey("reserved.init")`, the exact key with
            // any operator; `any.init` does not count.
            subject_selects_init =
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
            subject
        } else {
            return;
        };
        let default_deny = rule.enable_default_deny.as_ref();
        let ingress_dd = default_deny.and_then(|d| d.ingress).unwrap_or(true);
        let egress_dd = default_deny.and_then(|d| d.egress).unwrap_or(true);
        let cookie = rule
            .log
            .as_ref()
            .and_then(|l| l.value.as_ref())
            .and_then(|v| self.cookies.get(v).copied())
            .unwrap_or(0);

        // One item (a session re-lowering it) without viewing the others.
        let items: Vec<(RuleSection, usize, RuleItem<'_>)> = match only {
            Some((section, index)) => one_item(rule, section, index)
                .map(|item| (section, index, item))
                .into_iter()
                .collect(),
            None => rule
                .sections()
                .into_iter()
                .flat_map(|(section, items)| {
                    items
                        .into_iter()
                        .enumerate()
                        .map(move |(index, item)| (section, index, item))
                })
                .collect(),
        };
        for (section, index, rule_item) in items {
            let dd = if section.is_ingress() {
                ingress_dd
            } else {
                egress_dd
            };
            let rule_item = &rule_item;
            let l4_present = rule_item.has_l4();
            let route = format!("{spec_route}.{section}[{index}]");
            let origin = self.new_origin(input, namespace, section, index, &route);
            let ports = self.port_rules(input, &route, rule_item);
            let item = ItemCtx {
                input,
                namespace,
                subject_selects_init,
                route: route.clone(),
                section,
            };
            let peers = self.peers(&item, rule_item, l4_present);
            self.out.rules.push(PolicyRule {
                origin,
                subject: subject.clone(),
                host,
                direction: direction_of(section),
                deny: section.is_deny(),
                default_deny: dd,
                peers,
                l3_only: !l4_present,
                ports,
                auth: auth_of(rule_item.authentication.map(|a| a.mode)),
                cookie,
                tier: None,
            });
        }
    }
}

impl Ctx<'_> {
    /// A host policy whose `nodeSelector` matches no node of the inventory
    /// (by [`crate::inventory::Node::host_labels`], on any node, local or
    /// not) applies nowhere: a warning at the selector, as a policy that
    /// selects no endpoint gets.
    fn check_host_subject(
        &mut self,
        input: &PolicyInput<'_>,
        spec_route: &str,
        subject: &crate::selector::Selector,
    ) {
        let nodes = &self.inventory.nodes;
        if nodes.iter().any(|n| subject.matches(&n.host_labels())) {
            return;
        }
        let message = if nodes.is_empty() {
            "this host policy (nodeSelector) selects no node: the inventory lists no nodes (add `nodes:` to the inventory, or Node manifests, with the local node marked `local: true` or `localNode: NAME`)".to_owned()
        } else {
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            format!(
                "this host policy (nodeSelector) selects none of the inventory's nodes ({}): it applies to no host",
                names.join(", ")
            )
        };
        let at = self.diag(
            input,
            codes::HOST_POLICY_SELECTS_NO_NODE,
            &format!("{spec_route}.nodeSelector"),
            message,
        );
        if let Some(d) = self.out.diagnostics.get_mut(at) {
            d.notes.push("a nodeSelector matches node labels (`pkg/policy/repository.go`: host policies select host endpoints only; a host endpoint carries reserved:host and its node's labels)".to_owned());
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

/// Item `index` of `section` of `rule` (what `Rule::sections` would give
/// there), without viewing the rule's other items.
fn one_item(rule: &Rule, section: RuleSection, index: usize) -> Option<RuleItem<'_>> {
    match section {
        RuleSection::Ingress => rule.ingress.as_ref()?.get(index).map(RuleItem::ingress),
        RuleSection::IngressDeny => rule
            .ingress_deny
            .as_ref()?
            .get(index)
            .map(RuleItem::ingress_deny),
        RuleSection::Egress => rule.egress.as_ref()?.get(index).map(RuleItem::egress),
        RuleSection::EgressDeny => rule
            .egress_deny
            .as_ref()?
            .get(index)
            .map(RuleItem::egress_deny),
    }
}
