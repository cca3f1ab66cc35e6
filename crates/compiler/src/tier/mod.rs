//! Tiered precedence (Kubernetes `ClusterNetworkPolicy`, Cilium 1.20),
//! resolved at compile time into an ordinary, Cilium-compatible map state.
//!
//! # Semantics (network-policy-api `apis/v1beta1/clusternetworkpolicy_types.go`, Cilium 1.20)
//!
//! A flow of an endpoint, in one direction, is decided by the first of:
//!
//! 1. the **Admin** tier: its rules in precedence order, `spec.priority`
//!    then the rule index (Cilium: `priority + index/100`,
//!    `ParseClusterNetworkPolicy` in `pkg/k8s/cluster_network_policy.go`);
//!    at an equal place a Deny comes before an Accept before a Pass (the
//!    verdict byte of Cilium's precedence, `pkg/policy/types/entry.go`).
//!    The first matching rule decides: Accept allows, Deny drops, Pass
//!    skips the rest of the tier;
//! 2. the **NetworkPolicy tier** (Kubernetes NetworkPolicy, CNP, CCNP): the
//!    endpoint's ordinary map state. A matching entry decides; so does its
//!    default deny, when a policy of this tier puts the endpoint in default
//!    deny ("v1.NetworkPolicy always makes a final decision for selected
//!    pods"). The allow-all of a direction no such policy enforces, and the
//!    synthetic allow-all of rules that opt out of default deny, decide
//!    nothing: they hand the flow on;
//! 3. the **Baseline** tier, as the Admin tier (a Pass hands on to 4);
//! 4. allow: ClusterNetworkPolicy rules never put an endpoint in default
//!    deny (`r.DefaultDeny = false`).
//!
//! # Into the map
//!
//! The datapath looks up the longest matching key per identity (the
//! exact identity, then identity 0) and picks between the two by
//! precedence (`DATAPATH.md` §3). That lookup cannot skip a Pass or let a
//! broad high-priority Accept beat a narrower low-priority Deny, so the
//! tiers are flattened per endpoint: every key any tier's state has (the
//! ordinary state and one state per selecting tier rule) becomes a key of
//! the result, for identity 0 and for every identity any key names; its
//! entry is the decision above for the flows that key's region holds (the
//! flows it matches that no narrower key matches: the same flows for every
//! tier, so one decision per key is exact). Exact-identity entries get
//! priority 0 and identity-0 entries priority 1, so the exact lookup,
//! which then holds every key identity 0 has, always wins where it
//! matches. An identity whose decisions all equal identity 0's gets no
//! entries of its own. The entry layout is Cilium's (`struct
//! policy_entry`); only the precedences differ from what Cilium's
//! incremental algebra would write.

use std::collections::{BTreeMap, BTreeSet};

use porin_model::model::{ClusterAction, Tier};

use crate::identity::Identity;
use crate::inventory::Endpoint;
use crate::mapstate::{
    AuthRequirement, Direction, Entry, Key, MapState, Origins, Precedence, Priority,
};
use crate::resolve::lower::{ORIGIN_ALLOW_ANY_EGRESS, ORIGIN_ALLOW_ANY_INGRESS};
use crate::resolve::policy::Resolver;

pub mod place;
pub mod rules;

pub use place::TierRule;
pub use rules::TierRules;

/// The tier rules of one compilation, resolved against its identities.
pub struct Tiers<'a> {
    rules: &'a TierRules,
    resolver: Resolver<'a>,
}

/// One selecting tier rule's match set for an endpoint.
struct Matcher<'s> {
    place: TierRule,
    origin: u32,
    direction: Direction,
    state: &'s MapState,
}

impl<'a> Tiers<'a> {
    /// Prepares the tier rules of a compilation.
    pub fn new(rules: &'a TierRules, resolver: Resolver<'a>) -> Tiers<'a> {
        Tiers { rules, resolver }
    }

    /// Whether any tier rule selects `identity`.
    pub fn selects(&self, identity: u32) -> bool {
        !self.resolver.rules_of(identity).is_empty()
    }

    /// Whether a tier rule of `direction` selects `identity`.
    pub fn selects_in(&self, identity: u32, direction: Direction) -> bool {
        self.resolver.rules_of(identity).iter().any(|&i| {
            self.rules
                .rules
                .get(i)
                .is_some_and(|r| r.direction == direction)
        })
    }

    /// The tiered map state of an endpoint of `identity` whose ordinary
    /// (NetworkPolicy-tier) state is `normal`; `normal` unchanged when no
    /// tier rule selects it. Diagnostics of the tier rules' resolution
    /// (named ports) are appended to `diagnostics`.
    pub fn resolve(
        &self,
        identity: u32,
        endpoint: &Endpoint,
        normal: MapState,
        describe: &dyn Fn(u32) -> String,
        diagnostics: &mut Vec<porin_model::Diagnostic>,
    ) -> MapState {
        let selecting = self.resolver.rules_of(identity);
        if selecting.is_empty() {
            return normal;
        }
        let mut states = Vec::with_capacity(selecting.len());
        for &index in selecting {
            let policy = self
                .resolver
                .l4_policy_of(identity, &[index], Some([false, false]));
            let (mut state, found) = self.resolver.map_state(endpoint, &policy, describe);
            diagnostics.extend(found);
            // The agent's host allow (`allow-localhost`) is the endpoint's,
            // not the rule's: kept in the state, it would make the rule
            // match the host (an Admin Deny from one namespace denying the
            // kubelet). The ordinary state keeps it.
            let host = Key::for_direction(Direction::Ingress).with_identity(Identity::HOST);
            let localhost = self.resolver.localhost_origin();
            if state
                .get(&host)
                .is_some_and(|entry| entry.origins.iter().all(|o| Some(*o) == localhost))
            {
                state.remove(&host);
            }
            states.push((index, state));
        }
        let mut matchers: Vec<Matcher<'_>> = states
            .iter()
            .map(|(index, state)| {
                let rule = &self.rules.rules[*index];
                Matcher {
                    place: self.rules.places[*index],
                    origin: rule.origin,
                    direction: rule.direction,
                    state,
                }
            })
            .collect();
        matchers.sort_by_key(|m| (m.place.tier, m.place.order()));
        flatten(&normal, &matchers)
    }
}

/// The entry a state's lookup chooses for the flows of `key`'s region
/// (identity `identity`), with the other lookup's entry: `choose` of the
/// reference lookup, over the keys that cover `key`.
fn choose_region<'s>(
    state: &'s MapState,
    direction: Direction,
    identity: Identity,
    key: &Key,
) -> Option<(&'s Entry, Option<&'s Entry>)> {
    let longest = |id: Identity| {
        state
            .identity_keys(direction, id)
            .filter(|(k, _)| k.port_proto_covers(key))
            .max_by_key(|(k, _)| k.datapath_prefix_len())
    };
    let l3 = if identity.is_wildcard() {
        None
    } else {
        longest(identity)
    };
    if let Some((_, entry)) = l3
        && entry.precedence == Precedence::MAX
    {
        return Some((entry, None));
    }
    let l4 = longest(Identity::WILDCARD);
    match (l3, l4) {
        (None, None) => None,
        (None, Some((_, e))) | (Some((_, e)), None) => Some((e, None)),
        (Some((k3, e3)), Some((k4, e4))) => {
            let l4_wins = e4.precedence > e3.precedence
                || (e4.precedence == e3.precedence
                    && k4.lpm_prefix_length() > k3.lpm_prefix_length());
            if l4_wins {
                Some((e4, Some(e3)))
            } else {
                Some((e3, Some(e4)))
            }
        }
    }
}

/// Whether a tier rule's state matches the flows of `key`'s region.
fn matches(state: &MapState, direction: Direction, identity: Identity, key: &Key) -> bool {
    let covers = |id: Identity| {
        state
            .identity_keys(direction, id)
            .any(|(k, _)| k.port_proto_covers(key))
    };
    covers(Identity::WILDCARD) || (!identity.is_wildcard() && covers(identity))
}

/// An entry whose only origins are the allow-all of an unenforced
/// direction or of rules without default deny: the NetworkPolicy tier has
/// not decided.
fn is_fallback(entry: &Entry) -> bool {
    !entry.origins.is_empty()
        && entry
            .origins
            .iter()
            .all(|o| *o == ORIGIN_ALLOW_ANY_INGRESS || *o == ORIGIN_ALLOW_ANY_EGRESS)
}

/// The decision for the flows of `key`'s region (identity `identity`):
/// `None` is the NetworkPolicy tier's default deny.
fn decide(
    normal: &MapState,
    matchers: &[Matcher<'_>],
    direction: Direction,
    identity: Identity,
    key: &Key,
) -> Option<Entry> {
    let mut passed = Origins::new();
    let tier_decision = |tier: Tier, passed: &mut Origins| -> Option<Entry> {
        for m in matchers
            .iter()
            .filter(|m| m.place.tier == tier && m.direction == direction)
        {
            if !matches(m.state, direction, identity, key) {
                continue;
            }
            let entry = match m.place.action {
                // The rule's own entry for the region: an allow, or a
                // redirect where its ports carry L7 rules (the DNS-proxy
                // rule of `domainNames`, `dnsEgress` in
                // `ParseClusterNetworkPolicy`).
                ClusterAction::Accept => choose_region(m.state, direction, identity, key)
                    .map(|(chosen, _)| chosen.clone())
                    .filter(|chosen| !chosen.is_deny())
                    .unwrap_or_else(Entry::allow),
                ClusterAction::Deny => Entry::deny(),
                ClusterAction::Pass => {
                    passed.insert(m.origin);
                    return None;
                }
            };
            let mut entry = entry.with_origin(m.origin);
            entry.origins.extend(passed.iter().copied());
            return Some(entry);
        }
        None
    };
    if let Some(entry) = tier_decision(Tier::Admin, &mut passed) {
        return Some(entry);
    }
    match choose_region(normal, direction, identity, key) {
        // The NetworkPolicy tier's default deny; a Pass that handed the
        // flow to it is remembered on an explicit deny (same verdict).
        None if passed.is_empty() => return None,
        None => {
            let mut entry = Entry::deny();
            entry.origins = passed;
            return Some(entry);
        }
        Some((chosen, _)) if is_fallback(chosen) => {}
        Some((chosen, other)) => {
            let mut entry = chosen.clone();
            if !entry.is_deny() {
                // The auth type the datapath would lend from the other
                // lookup (`__policy_check`), made the entry's own.
                if let Some(other) = other
                    && other.precedence == chosen.precedence
                    && !chosen.auth.is_explicit()
                    && other.auth.auth_type() > chosen.auth.auth_type()
                {
                    entry.auth = AuthRequirement::explicit(other.auth.auth_type());
                }
            }
            entry.origins.extend(passed.iter().copied());
            return Some(entry);
        }
    }
    if let Some(entry) = tier_decision(Tier::Baseline, &mut passed) {
        return Some(entry);
    }
    let fallback = match direction {
        Direction::Ingress => ORIGIN_ALLOW_ANY_INGRESS,
        Direction::Egress => ORIGIN_ALLOW_ANY_EGRESS,
    };
    let mut entry = Entry::allow().with_origin(fallback);
    entry.origins.extend(passed);
    Some(entry)
}

/// `entry` with its priority level set to `level` (verdict byte kept).
fn at_level(mut entry: Entry, level: Priority) -> Entry {
    let byte = u32::from(entry.precedence.low_byte());
    entry.precedence = Precedence::from_raw(Precedence::base(level).get() + byte);
    entry
}

/// The flattened state (module docs).
fn flatten(normal: &MapState, matchers: &[Matcher<'_>]) -> MapState {
    let exact = Priority::ZERO;
    let wildcard = Priority::new(1).unwrap_or(Priority::MAX);
    let mut out = MapState::new();
    for direction in Direction::ALL {
        // Every key of the direction, by identity.
        let mut keys: BTreeMap<Identity, BTreeSet<Key>> = BTreeMap::new();
        let states = std::iter::once(normal).chain(
            matchers
                .iter()
                .filter(|m| m.direction == direction)
                .map(|m| m.state),
        );
        for state in states {
            for (key, _) in state.iter().filter(|(k, _)| k.direction() == direction) {
                keys.entry(key.identity()).or_default().insert(*key);
            }
        }
        let wildcard_keys: BTreeSet<Key> = keys.remove(&Identity::WILDCARD).unwrap_or_default();
        let wildcard_decisions: BTreeMap<Key, Option<Entry>> = wildcard_keys
            .iter()
            .map(|k| {
                (
                    *k,
                    decide(normal, matchers, direction, Identity::WILDCARD, k),
                )
            })
            .collect();
        for (key, entry) in &wildcard_decisions {
            if let Some(entry) = entry {
                insert(&mut out, *key, at_level(entry.clone(), wildcard));
            }
        }
        for (identity, own) in keys {
            // The identity's keys: its own and identity 0's, as its own.
            let region_keys: BTreeSet<Key> = own
                .iter()
                .copied()
                .chain(wildcard_keys.iter().map(|k| k.with_identity(identity)))
                .collect();
            let decisions: Vec<(Key, Option<Entry>)> = region_keys
                .iter()
                .map(|k| (*k, decide(normal, matchers, direction, identity, k)))
                .collect();
            let same_as_wildcard = decisions.iter().all(|(k, d)| {
                let general = decide(
                    normal,
                    matchers,
                    direction,
                    Identity::WILDCARD,
                    &k.with_identity(Identity::WILDCARD),
                );
                match (d, &general) {
                    (None, None) => true,
                    (Some(a), Some(b)) => a.datapath_eq(b) && a.origins == b.origins,
                    _ => false,
                }
            });
            if same_as_wildcard {
                continue;
            }
            for (key, decision) in decisions {
                // The exact lookup wins wherever it matches, so a default
                // deny there must be written down.
                let entry = decision.unwrap_or_else(Entry::deny);
                insert(&mut out, key, at_level(entry, exact));
            }
        }
    }
    out
}

fn insert(out: &mut MapState, key: Key, entry: Entry) {
    // Precedences here are never PASS (low byte 0): a deny (255), an allow
    // (1) or a redirect (2..=254), so `upsert` cannot refuse them.
    let _ = out.upsert(key, entry);
}

#[cfg(test)]
mod tests {
    //! The flattened state against a per-flow evaluation of the tiers (the
    //! module docs' semantics, each tier's state looked up flow by flow with
    //! the reference lookup): the regions argument is what makes one
    //! decision per key exact, and this checks it.
    #![allow(clippy::unwrap_used, reason = "tests")]

    use proptest::prelude::*;

    use super::*;
    use crate::mapstate::PolicyFeatures;
    use crate::ports::MaskedPort;

    fn id(n: u32) -> Identity {
        Identity::new(n).unwrap()
    }

    /// Keys of one direction from a small universe, so that they overlap.
    fn key() -> impl Strategy<Value = Key> {
        (
            prop::sample::select(vec![0_u32, 2, 100]),
            prop::sample::select(vec![0_u8, 6, 17]),
            prop::sample::select(vec![0_u16, 64, 80, 81, 1023]),
            prop::sample::select(vec![0_u8, 6, 10, 14, 16]),
        )
            .prop_map(|(identity, proto, port, prefix)| {
                let base = Key::ingress().with_identity(id(identity));
                if proto == 0 {
                    base
                } else {
                    base.with_masked_port(proto, MaskedPort::from_prefix(port, prefix))
                        .unwrap()
                }
            })
    }

    fn place() -> impl Strategy<Value = TierRule> {
        (
            any::<bool>(),
            0_u32..3,
            0_u32..2,
            prop::sample::select(vec![
                ClusterAction::Accept,
                ClusterAction::Deny,
                ClusterAction::Pass,
            ]),
        )
            .prop_map(|(admin, priority, index, action)| TierRule {
                tier: if admin { Tier::Admin } else { Tier::Baseline },
                priority,
                index,
                action,
            })
    }

    /// The per-flow evaluation.
    fn evaluate(
        normal: &MapState,
        matchers: &[Matcher<'_>],
        identity: Identity,
        proto: u8,
        port: u16,
    ) -> bool {
        let tier = |tier: Tier| -> Option<bool> {
            for m in matchers.iter().filter(|m| m.place.tier == tier) {
                if m.state
                    .lookup(Direction::Ingress, identity, proto, port)
                    .verdict
                    .is_allowed()
                {
                    return match m.place.action {
                        ClusterAction::Accept => Some(true),
                        ClusterAction::Deny => Some(false),
                        ClusterAction::Pass => None,
                    };
                }
            }
            None
        };
        if let Some(verdict) = tier(Tier::Admin) {
            return verdict;
        }
        let decision = normal.lookup(Direction::Ingress, identity, proto, port);
        match &decision.chosen {
            None => return false,
            Some(chosen) if is_fallback(&chosen.entry) => {}
            Some(_) => return decision.verdict.is_allowed(),
        }
        tier(Tier::Baseline).unwrap_or(true)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn the_flattened_state_decides_every_flow_as_the_tiers_do(
            normal_keys in prop::collection::vec((key(), any::<bool>()), 0..5),
            fallback in any::<bool>(),
            rules in prop::collection::vec((place(), prop::collection::vec(key(), 1..3)), 1..5),
        ) {
            let mut normal = MapState::new();
            if fallback {
                normal
                    .upsert(Key::ingress(), Entry::allow().with_origin(ORIGIN_ALLOW_ANY_INGRESS))
                    .unwrap();
            }
            for (i, (key, deny)) in normal_keys.iter().enumerate() {
                let entry = if *deny { Entry::deny() } else { Entry::allow() };
                let origin = 10 + u32::try_from(i).unwrap();
                normal
                    .insert_with_features(*key, entry.with_origin(origin), PolicyFeatures::DENY)
                    .unwrap();
            }
            let states: Vec<(TierRule, MapState)> = rules
                .iter()
                .map(|(place, keys)| {
                    let mut state = MapState::new();
                    for key in keys {
                        state
                            .insert_with_features(*key, Entry::allow(), PolicyFeatures::NONE)
                            .unwrap();
                    }
                    (*place, state)
                })
                .collect();
            let mut matchers: Vec<Matcher<'_>> = states
                .iter()
                .enumerate()
                .map(|(i, (place, state))| Matcher {
                    place: *place,
                    origin: 100 + u32::try_from(i).unwrap(),
                    direction: Direction::Ingress,
                    state,
                })
                .collect();
            matchers.sort_by_key(|m| (m.place.tier, m.place.order()));
            let flat = flatten(&normal, &matchers);
            for identity in [0_u32, 2, 100, 101] {
                for proto in [6_u8, 17, 1] {
                    for port in [0_u16, 1, 63, 64, 80, 81, 127, 1023, 1024, 65535] {
                        let expected = evaluate(&normal, &matchers, id(identity), proto, port);
                        let got = flat
                            .lookup(Direction::Ingress, id(identity), proto, port)
                            .verdict
                            .is_allowed();
                        prop_assert_eq!(got, expected, "identity {} proto {} port {}", identity, proto, port);
                    }
                }
            }
        }
    }
}
