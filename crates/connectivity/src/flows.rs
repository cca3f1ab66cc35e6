//! Allowed flows between peers, as merged port ranges per protocol: the
//! building block of `porin graph` and `porin diff`. Exact in the same
//! way as [`super::analysis`]: verdicts are evaluated once per port class
//! cut by the keys of every state involved.

use std::collections::{BTreeMap, BTreeSet};

use porin_compiler::compile::EndpointPolicy;
use porin_compiler::explain::passes;
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{Direction, MapState};
use porin_compiler::resolve::rule::proto;

/// Protocols always listed (a state without keys for them still decides
/// them, e.g. through an L3-only allow).
pub const COMMON_PROTOCOLS: [u8; 5] = [
    proto::TCP,
    proto::UDP,
    proto::SCTP,
    proto::ICMP,
    proto::ICMPV6,
];

/// A protocol no key names stands for "every other protocol".
pub const OTHER_PROTOCOL: u8 = 255;

/// An inclusive port range of one protocol.
pub type PortRange = (u8, u16, u16);

/// The port classes of the given (state, direction) pairs: per protocol,
/// the intervals cut by the ranges of every key.
pub fn port_classes(states: &[(&MapState, Direction)]) -> Vec<PortRange> {
    let mut cuts: BTreeMap<u8, BTreeSet<u32>> = COMMON_PROTOCOLS
        .iter()
        .chain(std::iter::once(&OTHER_PROTOCOL))
        .map(|p| (*p, BTreeSet::from([0, 65_536])))
        .collect();
    for (state, direction) in states {
        for (key, _) in state.iter().filter(|(k, _)| k.direction() == *direction) {
            if key.proto() == 0 {
                continue;
            }
            let set = cuts
                .entry(key.proto())
                .or_insert_with(|| BTreeSet::from([0, 65_536]));
            set.insert(u32::from(key.port()));
            set.insert(u32::from(key.end_port()) + 1);
        }
    }
    classes_of_cuts(cuts)
}

/// The intervals between consecutive cuts (each set holds 0 and 65,536),
/// per protocol in order.
pub fn classes_of_cuts(cuts: BTreeMap<u8, BTreeSet<u32>>) -> Vec<PortRange> {
    let mut classes = Vec::new();
    for (p, set) in cuts {
        let bounds: Vec<u32> = set.into_iter().collect();
        for pair in bounds.windows(2) {
            if let (Ok(lo), Ok(hi)) = (u16::try_from(pair[0]), u16::try_from(pair[1] - 1)) {
                classes.push((p, lo, hi));
            }
        }
    }
    classes
}

/// Merges adjacent ranges of the same protocol.
pub fn merge(ranges: impl IntoIterator<Item = PortRange>) -> Vec<PortRange> {
    let mut out: Vec<PortRange> = Vec::new();
    for (p, lo, hi) in ranges {
        if let Some(last) = out.last_mut()
            && last.0 == p
            && u32::from(last.2) + 1 == u32::from(lo)
        {
            last.2 = hi;
            continue;
        }
        out.push((p, lo, hi));
    }
    out
}

/// One check of a flow: an endpoint's map state looked up in `direction`,
/// the endpoint's own identity and the peer's.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The endpoint's map state.
    pub state: &'a MapState,
    /// The direction looked up.
    pub direction: Direction,
    /// The endpoint's identity (the local end of an authentication).
    pub local: u32,
    /// The peer's identity.
    pub peer: u32,
}

/// The ranges on which every check passes. `mutual_auth` is the
/// compilation's `mesh-auth-mutual-enabled` ([`Compiled::mutual_auth`]):
/// an auth-required entry passes exactly when `porin query` says it does
/// ([`passes`]).
///
/// [`Compiled::mutual_auth`]: porin_compiler::compile::Compiled::mutual_auth
pub fn allowed(mutual_auth: bool, checks: &[Check<'_>]) -> Vec<PortRange> {
    let pairs: Vec<(&MapState, Direction)> =
        checks.iter().map(|c| (c.state, c.direction)).collect();
    merge(port_classes(&pairs).into_iter().filter(|(p, lo, _)| {
        checks.iter().all(|check| {
            let identity = Identity::new(check.peer).unwrap_or(Identity::WORLD);
            let verdict = check
                .state
                .lookup(check.direction, identity, *p, *lo)
                .verdict;
            passes(mutual_auth, verdict, check.local, check.peer)
        })
    }))
}

/// The ranges on which a connection from endpoint `from` to endpoint `to`
/// passes: `from`'s egress toward `to` and `to`'s ingress from `from`
/// (what `porin graph` draws between two endpoints).
pub fn between(mutual_auth: bool, from: &EndpointPolicy, to: &EndpointPolicy) -> Vec<PortRange> {
    allowed(
        mutual_auth,
        &[
            Check {
                state: &from.state,
                direction: Direction::Egress,
                local: from.identity,
                peer: to.identity,
            },
            Check {
                state: &to.state,
                direction: Direction::Ingress,
                local: to.identity,
                peer: from.identity,
            },
        ],
    )
}

/// `TCP/80, TCP/8000-8100, UDP/*` or `any` (every protocol, every port).
pub fn describe(ranges: &[PortRange]) -> String {
    let full: BTreeSet<u8> = ranges
        .iter()
        .filter(|(_, lo, hi)| *lo == 0 && *hi == u16::MAX)
        .map(|r| r.0)
        .collect();
    if COMMON_PROTOCOLS
        .iter()
        .chain(std::iter::once(&OTHER_PROTOCOL))
        .all(|p| full.contains(p))
    {
        return "any".to_owned();
    }
    ranges
        .iter()
        .map(|(p, lo, hi)| {
            let name = if *p == OTHER_PROTOCOL {
                "other".to_owned()
            } else {
                proto::name(*p)
            };
            if *lo == 0 && *hi == u16::MAX {
                format!("{name}/*")
            } else if lo == hi {
                format!("{name}/{lo}")
            } else {
                format!("{name}/{lo}-{hi}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use porin_compiler::mapstate::{AuthRequirement, AuthType, Entry, Key, PolicyFeatures};

    #[test]
    fn allowed_ranges_intersect_egress_and_ingress() {
        let peer = Identity::new(300).unwrap();
        let me = Identity::new(301).unwrap();
        let mut egress = MapState::new();
        let key = Key::egress()
            .with_identity(peer)
            .with_port_proto_prefix(6, 80, 12)
            .unwrap();
        egress
            .insert_with_features(key, Entry::allow(), PolicyFeatures::NONE)
            .unwrap();
        let mut ingress = MapState::new();
        let key = Key::ingress()
            .with_identity(me)
            .with_port_proto(6, 81)
            .unwrap();
        ingress
            .insert_with_features(key, Entry::allow(), PolicyFeatures::NONE)
            .unwrap();
        let check = |state, direction, local, peer| Check {
            state,
            direction,
            local,
            peer,
        };
        let both = allowed(
            false,
            &[
                check(&egress, Direction::Egress, 301, 300),
                check(&ingress, Direction::Ingress, 300, 301),
            ],
        );
        assert_eq!(both, vec![(6, 81, 81)]);
        let out = allowed(false, &[check(&egress, Direction::Egress, 301, 300)]);
        assert_eq!(describe(&out), "TCP/80-95");
        let mut all = MapState::new();
        all.upsert(Key::egress(), Entry::allow()).unwrap();
        let any = allowed(false, &[check(&all, Direction::Egress, 301, 5)]);
        assert_eq!(describe(&any), "any");
    }

    /// An auth-required entry passes only with mutual authentication and
    /// only between two workload identities (`pkg/auth/manager.go`
    /// handleAuthRequest skips reserved ones); `test-always-fail` never.
    #[test]
    fn auth_required_entries_pass_as_an_authenticated_cluster_decides() {
        let mut state = MapState::new();
        let auth = |t| Entry::allow().with_auth(AuthRequirement::explicit(t));
        state.upsert(Key::egress(), auth(AuthType::SPIRE)).unwrap();
        let key = Key::egress()
            .with_identity(Identity::new(302).unwrap())
            .with_port_proto(6, 80)
            .unwrap();
        state.upsert(key, auth(AuthType::ALWAYS_FAIL)).unwrap();
        let to = |peer| {
            [Check {
                state: &state,
                direction: Direction::Egress,
                local: 301,
                peer,
            }]
        };
        assert!(allowed(false, &to(300)).is_empty());
        assert_eq!(describe(&allowed(true, &to(300))), "any");
        assert!(allowed(true, &to(Identity::WORLD.get())).is_empty());
        assert!(allowed(true, &to(Identity::HOST.get())).is_empty());
        // The always-failing port is cut out of the workload's any.
        let ports = allowed(true, &to(302));
        assert!(
            ports.contains(&(6, 0, 79)) && ports.contains(&(6, 81, 65_535)),
            "{ports:?}"
        );
        assert!(
            !ports
                .iter()
                .any(|(p, lo, hi)| *p == 6 && *lo <= 80 && 80 <= *hi)
        );
    }
}
