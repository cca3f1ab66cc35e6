//! L3 peers of a rule item: endpoints, CIDRs, entities, nodes, groups,
//! services and FQDNs.

use std::collections::BTreeSet;

use ipnetwork::IpNetwork;
use porin_model::CodeInfo;
use porin_model::model::{
    CidrRule, FqdnSelector, LabelSelector, RuleItem, RuleSection, Service as ServiceRef,
};

use super::selectors::{
    convert_selector, entity_selectors, is_cluster_key, is_namespace_labels_key,
    is_pod_namespace_key, namespace_pin, sourced_selector,
};
use super::{Ctx, PolicyInput};
use crate::cidrgroup::group_name_label;
use crate::codes;
use crate::labels::{
    CLUSTER_LABEL, POD_NAMESPACE_LABEL, SOURCE_CIDRGROUP, SOURCE_K8S, SOURCE_RESERVED,
    canonical_prefix, host_prefix,
};
use crate::resolve::matchpattern::MatchPattern;
use crate::selector::{Requirement, Selector, SelectorKey, cidr_selector_key};

/// Whether an item names any L3 peer field (a `fromGroups`/`toGroups` list
/// counts only when it has an entry; `*Requires` are removed in 1.19).
fn any_peer_set(item: &RuleItem<'_>) -> bool {
    item.endpoints.is_some()
        || item.cidr.is_some()
        || item.cidr_set.is_some()
        || item.entities.is_some()
        || item.nodes.is_some()
        || item.groups.is_some_and(|g| !g.is_empty())
        || item.services.is_some()
        || item.fqdns.is_some()
}

/// Everything about the rule being lowered that peer resolution needs.
pub(super) struct ItemCtx<'x> {
    pub(super) input: &'x PolicyInput<'x>,
    pub(super) namespace: Option<&'x str>,
    pub(super) subject_selects_init: bool,
    pub(super) route: String,
    /// The section of the item (for KNP, the allow section of its direction).
    pub(super) section: RuleSection,
}

impl Ctx<'_> {
    /// A peer that cannot be resolved: nothing for allow rules, the wildcard
    /// for deny rules (fail closed), and a diagnostic saying which.
    pub(super) fn unresolved(
        &mut self,
        item: &ItemCtx<'_>,
        route: &str,
        code: CodeInfo,
        what: String,
        selectors: &mut Vec<Selector>,
    ) {
        let consequence = if item.section.is_deny() {
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

    pub(super) fn add_cidr(
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
    pub(super) fn endpoint_peer(&self, item: &ItemCtx<'_>, selector: &LabelSelector) -> Selector {
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
        self.pin_local_cluster(&mut out);
        out
    }

    /// `addClusterFilterByDefault`: the local cluster unless the selector
    /// names one. `policy-default-local-cluster` (true in 1.19): without it
    /// getEndpointSelector leaves the cluster open
    /// (pkg/k8s/apis/cilium.io/utils/utils.go, `PolicyAnyCluster`).
    fn pin_local_cluster(&self, out: &mut Selector) {
        if self.inventory.settings.policy_default_local_cluster
            && !self.cluster.is_empty()
            && !out.has_key(is_cluster_key)
        {
            out.push(Requirement::is_in(
                SelectorKey::new(SOURCE_K8S, CLUSTER_LABEL),
                [self.cluster.clone()],
            ));
        }
    }

    /// A `fromNodes`/`toNodes` selector as `parseToCiliumIngressCommonRule`
    /// builds it (`pkg/k8s/apis/cilium.io/utils/utils.go`): the node labels
    /// (keys without a source match any), `reserved:remote-node` required,
    /// and the local cluster unless the selector names one
    /// (`addClusterFilterByDefault`). So it selects the remote nodes' own
    /// identities ([`crate::inventory::Node::remote_identity_labels`]),
    /// never the local host.
    pub(super) fn node_peer(&self, selector: &LabelSelector) -> Selector {
        let mut out = convert_selector(selector);
        out.push(Requirement::exists(SelectorKey::new(
            SOURCE_RESERVED,
            "remote-node",
        )));
        self.pin_local_cluster(&mut out);
        out
    }

    pub(super) fn peers(
        &mut self,
        item: &ItemCtx<'_>,
        peers: &RuleItem<'_>,
        has_ports: bool,
    ) -> Option<Vec<Selector>> {
        if !any_peer_set(peers) {
            // Only toPorts: every peer on those ports; nothing at all: the
            // rule allows nothing but still enforces (§3.2).
            return has_ports.then(|| vec![Selector::wildcard()]);
        }
        let from = item.section.peer_prefix();
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
                None => self.cidr_group_peer(item, &route, rule, &mut selectors),
            }
        }
        for entity in peers.entities.iter().flat_map(|l| l.iter()) {
            selectors.extend(entity_selectors(*entity, &self.cluster));
        }
        if let Some(nodes) = peers.nodes.filter(|n| !n.is_empty()) {
            if self.inventory.settings.enable_node_selector_labels {
                selectors.extend(nodes.iter().map(|n| self.node_peer(n)));
            } else {
                let route = format!("{base}.{from}Nodes");
                self.unresolved(
                    item,
                    &route,
                    codes::UNSUPPORTED_PEER,
                    format!("{from}Nodes needs the agent setting `enable-node-selector-labels: true` (Cilium refuses the rule without it: ErrFromToNodesRequiresNodeSelectorOption, pkg/policy/api/ingress.go)"),
                    &mut selectors,
                );
            }
        }
        if peers.groups.is_some_and(|g| !g.is_empty()) {
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
        // Kept for the whole compilation, one per rule item: not at the
        // capacity of four that the first push gives (65,535 CIDR rules).
        selectors.shrink_to_fit();
        Some(selectors)
    }

    /// A `cidrGroupRef`/`cidrGroupSelector` entry, as `newCIDRRuleSelector`
    /// (pkg/policy/types/selector.go) builds it: the group's name label, or
    /// the selector over `cidrgroup:` labels, and `!cidr:<except>` for every
    /// `except` (pkg/policy/api/cidr.go `GetAsEndpointSelectors`). The
    /// group's prefixes carry those labels (`crate::cidrgroup`).
    ///
    /// A reference no loaded group answers: Cilium selects nothing. An
    /// allow rule then allows nothing, as in Cilium; a deny rule denies
    /// every peer on its ports instead of nothing (fail closed: the group
    /// may exist in the cluster but not among porin's inputs).
    fn cidr_group_peer(
        &mut self,
        item: &ItemCtx<'_>,
        route: &str,
        rule: &CidrRule,
        selectors: &mut Vec<Selector>,
    ) {
        let mut excepts = Vec::new();
        for (i, text) in rule.except.iter().flatten().enumerate() {
            match text.trim().parse::<IpNetwork>() {
                Ok(p) => excepts.push(canonical_prefix(p)),
                Err(_) => {
                    self.unresolved(
                        item,
                        &format!("{route}.except[{i}]"),
                        codes::INVALID_PEER,
                        format!("`{text}` is not a CIDR"),
                        selectors,
                    );
                    return;
                }
            }
        }
        let mut selector = Selector::wildcard();
        let (field, missing) = if let Some(name) = rule.cidr_group_ref.as_deref() {
            let label = group_name_label(name);
            selector.push(Requirement::exists(SelectorKey::new(
                SOURCE_CIDRGROUP,
                &label.key,
            )));
            let missing = self.cidr_groups.get(name).is_none().then(|| {
                format!("cidrGroupRef `{name}` names no CiliumCIDRGroup among the inputs")
            });
            ("cidrGroupRef", missing)
        } else if let Some(group_selector) = &rule.cidr_group_selector {
            sourced_selector(group_selector, SOURCE_CIDRGROUP, "", &mut selector);
            let missing = self.cidr_groups.selected_by(&selector).is_empty().then(|| {
                format!("cidrGroupSelector {selector} selects no CiliumCIDRGroup among the inputs")
            });
            ("cidrGroupSelector", missing)
        } else {
            // Validation requires one of cidr/cidrGroupRef/cidrGroupSelector.
            return;
        };
        if let Some(what) = missing {
            let route = format!("{route}.{field}");
            let consequence = if item.section.is_deny() {
                selectors.push(Selector::wildcard());
                "Cilium denies nothing for it; porin denies these ports to every peer instead (fail closed), until the group is among the inputs"
            } else {
                "Cilium selects nothing for it (no prefix carries the label), and this peer allows nothing"
            };
            let index = self.diag(
                item.input,
                codes::UNKNOWN_CIDR_GROUP,
                &route,
                format!("{what}: {consequence}"),
            );
            if let Some(d) = self.out.diagnostics.get_mut(index) {
                d.help = Some(
                    "add the CiliumCIDRGroup manifest to the policy paths (or the test file)"
                        .to_owned(),
                );
            }
            if item.section.is_deny() {
                return;
            }
        }
        for excepted in &excepts {
            self.out.prefixes.insert(*excepted);
            selector.push(Requirement::does_not_exist(cidr_selector_key(*excepted)));
        }
        selectors.push(selector);
    }

    /// `toServices`, as `processRule` (pkg/policy/k8s/service.go) rewrites
    /// it. Cilium rewrites `egress` items only: in `egressDeny` the field
    /// stays, `RulesToPolicyEntries` ignores it, and the item's L3 is empty,
    /// which is every peer on its ports and nothing without ports. porin
    /// denies every peer on the ports as Cilium does, and without ports still
    /// denies the services' backends (fail closed).
    pub(super) fn services_peers(
        &mut self,
        item: &ItemCtx<'_>,
        base: &str,
        services: &[ServiceRef],
        has_ports: bool,
        selectors: &mut Vec<Selector>,
    ) {
        if item.section.is_deny() {
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
        let rule_has_no_peer = selectors.len() == before && has_ports && !item.section.is_deny();
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
    pub(super) fn service_peer(
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

    pub(super) fn fqdn_peer(
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
}
