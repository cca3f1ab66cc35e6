//! A ClusterNetworkPolicy rule's place among the tiers ([`TierRule`]), a
//! leaf the rule IR (`resolve::rule`) names.

use porin_model::model::{ClusterAction, Tier};
use serde::Serialize;

/// Where a ClusterNetworkPolicy rule stands among the tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TierRule {
    /// Admin or Baseline.
    pub tier: Tier,
    /// `spec.priority` (0..=1000).
    pub priority: u32,
    /// The rule's index in its direction's list.
    pub index: u32,
    /// What the rule does.
    pub action: ClusterAction,
}

impl TierRule {
    /// The order within a tier: priority, index, then Deny before Accept
    /// before Pass at an equal place (Cilium's verdict byte).
    pub(crate) fn order(&self) -> (u32, u32, u8) {
        let action = match self.action {
            ClusterAction::Deny => 0,
            ClusterAction::Accept => 1,
            ClusterAction::Pass => 2,
        };
        (self.priority, self.index, action)
    }
}
