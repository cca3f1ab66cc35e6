//! Exact verdict analysis of map states.
//!
//! A map state decides a flow from (direction, peer identity, protocol,
//! port) only (§5.4). Within one direction, every identity that no key
//! names behaves like every other such identity (only identity-0 keys
//! apply to it), every protocol no key names behaves like every other, and
//! the verdict is constant between consecutive port boundaries of the keys
//! of a protocol. So comparing two states at one representative of each
//! class — the identities of the keys plus one fresh identity, the
//! protocols of the keys plus one fresh protocol, the starts of the port
//! intervals cut by every key's range — compares them on *every* flow.
//! Nothing is sampled.

use std::collections::{BTreeMap, BTreeSet};

use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{Decision, Direction, Entry, MapState, Verdict};

/// One representative flow of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowPoint {
    /// Direction of the policy.
    pub direction: Direction,
    /// Peer identity.
    pub identity: u32,
    /// Protocol.
    pub proto: u8,
    /// First port of the class.
    pub port: u16,
    /// Last port of the class.
    pub end_port: u16,
}

/// The representative flows that decide every flow of the states.
pub fn flow_points(states: &[&MapState]) -> Vec<FlowPoint> {
    let mut points = Vec::new();
    for direction in Direction::ALL {
        let mut identities: BTreeSet<u32> = BTreeSet::new();
        let mut protos: BTreeSet<u8> = BTreeSet::new();
        let mut cuts: BTreeMap<u8, BTreeSet<u32>> = BTreeMap::new();
        for state in states {
            for (key, _) in state.iter().filter(|(k, _)| k.direction() == direction) {
                identities.insert(key.identity().get());
                if key.proto() != 0 {
                    protos.insert(key.proto());
                    let set = cuts.entry(key.proto()).or_default();
                    set.insert(u32::from(key.port()));
                    set.insert(u32::from(key.end_port()) + 1);
                }
            }
        }
        identities.insert(fresh_identity(&identities));
        if let Some(p) = (1..=255u8).rev().find(|p| !protos.contains(p)) {
            protos.insert(p);
        }
        for &identity in &identities {
            for &proto in &protos {
                let mut bounds: Vec<u32> = cuts
                    .get(&proto)
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .collect();
                bounds.push(0);
                bounds.push(65_536);
                bounds.sort_unstable();
                bounds.dedup();
                for pair in bounds.windows(2) {
                    let (Ok(port), Ok(end_port)) =
                        (u16::try_from(pair[0]), u16::try_from(pair[1] - 1))
                    else {
                        continue;
                    };
                    points.push(FlowPoint {
                        direction,
                        identity,
                        proto,
                        port,
                        end_port,
                    });
                }
            }
        }
    }
    points
}

/// An identity number no key of the direction names (identity 0 stands
/// for "any" and is never a peer).
fn fresh_identity(taken: &BTreeSet<u32>) -> u32 {
    (Identity::MINIMAL_NUMERIC..)
        .find(|id| !taken.contains(id))
        .unwrap_or(u32::MAX)
}

/// Decides one representative flow.
pub fn decide(state: &MapState, point: &FlowPoint) -> Decision {
    let identity = Identity::new(point.identity).unwrap_or(Identity::WORLD);
    state.lookup(point.direction, identity, point.proto, point.port)
}

/// Decides one representative flow without copying entries: the verdict
/// and the entry that decided (`None` for default deny).
pub fn decide_entry<'m>(state: &'m MapState, point: &FlowPoint) -> (Verdict, Option<&'m Entry>) {
    let identity = Identity::new(point.identity).unwrap_or(Identity::WORLD);
    state.lookup_entry(point.direction, identity, point.proto, point.port)
}

/// The verdict as compared between states. Proxy port *numbers* are
/// allocated per endpoint in filter order, so removing one L7 rule can
/// renumber another's port without changing what happens to the flow: a
/// redirect compares equal to any redirect.
pub fn comparable(verdict: Verdict) -> Verdict {
    match verdict {
        Verdict::Redirect { .. } => Verdict::Redirect { proxy_port: 0 },
        Verdict::Deny { .. } => Verdict::Deny {
            reason: porin_compiler::mapstate::DenyReason::Rule,
        },
        other => other,
    }
}

/// The flows whose verdict differs between two states (empty = the states
/// are equivalent on every flow).
pub fn differing_points(a: &MapState, b: &MapState) -> Vec<FlowPoint> {
    flow_points(&[a, b])
        .into_iter()
        .filter(|p| comparable(decide_entry(a, p).0) != comparable(decide_entry(b, p).0))
        .collect()
}

/// Whether two states give the same verdict on every flow.
pub fn equivalent(a: &MapState, b: &MapState) -> bool {
    flow_points(&[a, b])
        .iter()
        .all(|p| comparable(decide_entry(a, p).0) == comparable(decide_entry(b, p).0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use porin_compiler::mapstate::{Key, PolicyFeatures};

    #[test]
    fn classes_cover_every_port() {
        let mut s = MapState::new();
        let key = Key::ingress()
            .with_identity(Identity::new(300).unwrap())
            .with_port_proto(6, 80)
            .unwrap();
        s.insert_with_features(key, Entry::allow(), PolicyFeatures::NONE)
            .unwrap();
        let points = flow_points(&[&s]);
        let tcp300: Vec<_> = points
            .iter()
            .filter(|p| p.identity == 300 && p.proto == 6 && p.direction == Direction::Ingress)
            .map(|p| (p.port, p.end_port))
            .collect();
        assert_eq!(tcp300, vec![(0, 79), (80, 80), (81, 65_535)]);
    }

    #[test]
    fn deny_reasons_compare_equal_redirect_ports_too() {
        use porin_compiler::mapstate::DenyReason;
        assert_eq!(
            comparable(Verdict::Deny {
                reason: DenyReason::NoEntry
            }),
            comparable(Verdict::Deny {
                reason: DenyReason::Rule
            })
        );
        assert_eq!(
            comparable(Verdict::Redirect { proxy_port: 1 }),
            comparable(Verdict::Redirect { proxy_port: 2 })
        );
    }
}
