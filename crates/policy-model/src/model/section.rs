//! One view of a rule's four sections (`ingress`, `ingressDeny`, `egress`,
//! `egressDeny`). The four item types are 1:1 with Cilium's YAML and differ
//! only in which fields they have; the validator and the compiler treat an
//! item the same whichever section it is in, so they read it through
//! [`RuleItem`] instead of repeating themselves four times.

use serde::Serialize;

use super::cilium::{
    Authentication, CidrRule, EgressDenyRule, EgressRule, Entity, FqdnSelector, Groups, IcmpRule,
    IngressDenyRule, IngressRule, PortDenyRule, PortRule, Rule, Service,
};
use super::selector::EndpointSelector;

/// A rule section.
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

    /// Whether the section is about traffic to the subject.
    pub const fn is_ingress(self) -> bool {
        matches!(self, RuleSection::Ingress | RuleSection::IngressDeny)
    }

    /// Whether the section denies.
    pub const fn is_deny(self) -> bool {
        matches!(self, RuleSection::IngressDeny | RuleSection::EgressDeny)
    }

    /// The prefix of the section's peer fields: `from` (`fromCIDR`) or `to`.
    pub const fn peer_prefix(self) -> &'static str {
        if self.is_ingress() { "from" } else { "to" }
    }
}

impl std::fmt::Display for RuleSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The `toPorts` of an item: allow rules may carry L7, deny rules only ports.
#[derive(Debug, Clone, Copy)]
pub enum ToPorts<'a> {
    /// `toPorts` of `ingress`/`egress`.
    Allow(&'a [PortRule]),
    /// `toPorts` of `ingressDeny`/`egressDeny`.
    Deny(&'a [PortDenyRule]),
}

impl ToPorts<'_> {
    /// Whether the list has no entry.
    pub fn is_empty(self) -> bool {
        match self {
            ToPorts::Allow(list) => list.is_empty(),
            ToPorts::Deny(list) => list.is_empty(),
        }
    }
}

/// One item of any section. Peer fields are named without their
/// `from`/`to` prefix; a field the item type does not have (`toFQDNs` of an
/// `egressDeny` item, `authentication` of a deny item) is `None`, exactly as
/// if it were omitted.
#[derive(Debug, Clone, Copy)]
pub struct RuleItem<'a> {
    /// The section the item is in.
    pub section: RuleSection,
    /// `fromEndpoints`/`toEndpoints`.
    pub endpoints: Option<&'a Vec<EndpointSelector>>,
    /// `fromRequires`/`toRequires` (removed in Cilium 1.19).
    pub requires: Option<&'a Vec<EndpointSelector>>,
    /// `fromCIDR`/`toCIDR`.
    pub cidr: Option<&'a Vec<String>>,
    /// `fromCIDRSet`/`toCIDRSet`.
    pub cidr_set: Option<&'a Vec<CidrRule>>,
    /// `fromEntities`/`toEntities`.
    pub entities: Option<&'a Vec<Entity>>,
    /// `fromGroups`/`toGroups`.
    pub groups: Option<&'a Vec<Groups>>,
    /// `fromNodes`/`toNodes`.
    pub nodes: Option<&'a Vec<EndpointSelector>>,
    /// `toServices` (egress sections only).
    pub services: Option<&'a Vec<Service>>,
    /// `toFQDNs` (`egress` only).
    pub fqdns: Option<&'a Vec<FqdnSelector>>,
    /// `toPorts`.
    pub to_ports: Option<ToPorts<'a>>,
    /// `icmps`.
    pub icmps: Option<&'a Vec<IcmpRule>>,
    /// `authentication` (allow sections only).
    pub authentication: Option<&'a Authentication>,
    /// The obsolete `auth` (allow sections only).
    pub auth: Option<&'a serde_json::Value>,
}

impl<'a> RuleItem<'a> {
    /// An `ingress` item.
    pub fn ingress(item: &'a IngressRule) -> Self {
        RuleItem {
            section: RuleSection::Ingress,
            endpoints: item.from_endpoints.as_ref(),
            requires: item.from_requires.as_ref(),
            cidr: item.from_cidr.as_ref(),
            cidr_set: item.from_cidr_set.as_ref(),
            entities: item.from_entities.as_ref(),
            groups: item.from_groups.as_ref(),
            nodes: item.from_nodes.as_ref(),
            services: None,
            fqdns: None,
            to_ports: item.to_ports.as_deref().map(ToPorts::Allow),
            icmps: item.icmps.as_ref(),
            authentication: item.authentication.as_ref(),
            auth: item.auth.as_ref(),
        }
    }

    /// An `ingressDeny` item.
    pub fn ingress_deny(item: &'a IngressDenyRule) -> Self {
        RuleItem {
            section: RuleSection::IngressDeny,
            endpoints: item.from_endpoints.as_ref(),
            requires: item.from_requires.as_ref(),
            cidr: item.from_cidr.as_ref(),
            cidr_set: item.from_cidr_set.as_ref(),
            entities: item.from_entities.as_ref(),
            groups: item.from_groups.as_ref(),
            nodes: item.from_nodes.as_ref(),
            services: None,
            fqdns: None,
            to_ports: item.to_ports.as_deref().map(ToPorts::Deny),
            icmps: item.icmps.as_ref(),
            authentication: None,
            auth: None,
        }
    }

    /// An `egress` item.
    pub fn egress(item: &'a EgressRule) -> Self {
        RuleItem {
            section: RuleSection::Egress,
            endpoints: item.to_endpoints.as_ref(),
            requires: item.to_requires.as_ref(),
            cidr: item.to_cidr.as_ref(),
            cidr_set: item.to_cidr_set.as_ref(),
            entities: item.to_entities.as_ref(),
            groups: item.to_groups.as_ref(),
            nodes: item.to_nodes.as_ref(),
            services: item.to_services.as_ref(),
            fqdns: item.to_fqdns.as_ref(),
            to_ports: item.to_ports.as_deref().map(ToPorts::Allow),
            icmps: item.icmps.as_ref(),
            authentication: item.authentication.as_ref(),
            auth: item.auth.as_ref(),
        }
    }

    /// An `egressDeny` item.
    pub fn egress_deny(item: &'a EgressDenyRule) -> Self {
        RuleItem {
            section: RuleSection::EgressDeny,
            endpoints: item.to_endpoints.as_ref(),
            requires: item.to_requires.as_ref(),
            cidr: item.to_cidr.as_ref(),
            cidr_set: item.to_cidr_set.as_ref(),
            entities: item.to_entities.as_ref(),
            groups: item.to_groups.as_ref(),
            nodes: item.to_nodes.as_ref(),
            services: item.to_services.as_ref(),
            fqdns: None,
            to_ports: item.to_ports.as_deref().map(ToPorts::Deny),
            icmps: item.icmps.as_ref(),
            authentication: None,
            auth: None,
        }
    }

    /// Whether `toPorts` has an entry.
    pub fn has_ports(&self) -> bool {
        self.to_ports.is_some_and(|p| !p.is_empty())
    }

    /// Whether the item has an L4 part (`toPorts` or `icmps` non-empty, as
    /// `len(ToPorts) > 0 || len(ICMPs) > 0` in `pkg/policy/rule.go`). An item
    /// whose ports all fail to parse is still an L4 rule: it allows nothing
    /// rather than everything.
    pub fn has_l4(&self) -> bool {
        self.has_ports() || self.icmps.is_some_and(|l| !l.is_empty())
    }
}

impl Rule {
    /// The four sections in YAML order (`ingress`, `ingressDeny`, `egress`,
    /// `egressDeny`), each with its items in order; an omitted section has
    /// no items.
    pub fn sections(&self) -> [(RuleSection, Vec<RuleItem<'_>>); 4] {
        fn items<'a, T>(
            list: Option<&'a Vec<T>>,
            view: fn(&'a T) -> RuleItem<'a>,
        ) -> Vec<RuleItem<'a>> {
            list.into_iter().flatten().map(view).collect()
        }
        [
            (
                RuleSection::Ingress,
                items(self.ingress.as_ref(), RuleItem::ingress),
            ),
            (
                RuleSection::IngressDeny,
                items(self.ingress_deny.as_ref(), RuleItem::ingress_deny),
            ),
            (
                RuleSection::Egress,
                items(self.egress.as_ref(), RuleItem::egress),
            ),
            (
                RuleSection::EgressDeny,
                items(self.egress_deny.as_ref(), RuleItem::egress_deny),
            ),
        ]
    }
}
