//! The lowered tier rules as allows ([`TierRules`]): what the ordinary
//! resolution computes for them is each rule's match set.

use crate::resolve::rule::PolicyRule;

use super::place::TierRule;

/// The allow copies of the lowered tier rules (their match sets are what
/// the ordinary resolution computes for an allow), with their places, and
/// the origin of each.
#[derive(Debug, Default)]
pub struct TierRules {
    /// One allow rule per tier rule, in lowering order.
    pub rules: Vec<PolicyRule>,
    /// The place of each.
    pub places: Vec<TierRule>,
}

impl TierRules {
    /// The tier rules among `rules`, as allows (a `tier` of `None`, default
    /// deny on so that no allow-all is added beside them).
    pub fn from_rules(rules: &[PolicyRule]) -> TierRules {
        let mut out = TierRules::default();
        for rule in rules {
            let Some(place) = rule.tier else { continue };
            let mut copy = rule.clone();
            copy.deny = false;
            copy.default_deny = true;
            copy.tier = None;
            out.rules.push(copy);
            out.places.push(place);
        }
        out
    }

    /// True when no policy is tiered.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}
