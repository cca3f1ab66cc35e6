//! Where compiled entries come from: [`Origin`] and its enums.

use porin_model::model::PolicyDocument;
pub use porin_model::model::RuleSection;
use serde::Serialize;

use crate::mapstate::Direction;

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
    /// A ClusterNetworkPolicy rule's place among the tiers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<OriginTier>,
}

/// Where a ClusterNetworkPolicy rule stands, for explanations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OriginTier {
    /// Admin or Baseline.
    pub tier: porin_model::model::Tier,
    /// `spec.priority`.
    pub priority: u32,
    /// The rule's action.
    pub action: porin_model::model::ClusterAction,
    /// The rule's `name`, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
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
    /// Kubernetes `ClusterNetworkPolicy` (tiered).
    ClusterNetworkPolicy,
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
            // A CIDR group has no rules, so no origin is ever made from
            // one; its CIDRs become identity labels (`crate::cidrgroup`).
            PolicyDocument::CiliumCidrGroup(_) => OriginKind::Synthetic,
            PolicyDocument::ClusterNetworkPolicy(_) => OriginKind::ClusterNetworkPolicy,
        }
    }

    /// The name as written in YAML (`Synthetic` for Cilium's own rules).
    pub const fn name(self) -> &'static str {
        match self {
            OriginKind::CiliumNetworkPolicy => "CiliumNetworkPolicy",
            OriginKind::CiliumClusterwideNetworkPolicy => "CiliumClusterwideNetworkPolicy",
            OriginKind::NetworkPolicy => "NetworkPolicy",
            OriginKind::ClusterNetworkPolicy => "ClusterNetworkPolicy",
            OriginKind::Synthetic => "Synthetic",
        }
    }
}

impl std::fmt::Display for OriginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The direction of a section's traffic.
pub(super) const fn direction_of(section: RuleSection) -> Direction {
    if section.is_ingress() {
        Direction::Ingress
    } else {
        Direction::Egress
    }
}

/// The allow section of a direction (where Cilium's own rules go).
pub(super) const fn allow_section(direction: Direction) -> RuleSection {
    match direction {
        Direction::Ingress => RuleSection::Ingress,
        Direction::Egress => RuleSection::Egress,
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
        let tier = self.tier.as_ref().map_or(String::new(), |t| {
            let rule = t
                .rule_name
                .as_ref()
                .map_or(String::new(), |n| format!(" `{n}`"));
            format!(
                " [tier {}, priority {}, {}{rule}]",
                t.tier.name(),
                t.priority,
                t.action.name()
            )
        });
        if self.file.is_empty() {
            format!("{} {name}{tier}", self.kind)
        } else {
            format!(
                "{} {name} {}{tier} ({}:{})",
                self.kind, self.route, self.file, self.line
            )
        }
    }
}
