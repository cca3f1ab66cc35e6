//! Allowed flows between peers, as merged port ranges per protocol: the
//! building block of `porin graph` and `porin diff`. Exact in the same
//! way as [`super::analysis`]: verdicts are evaluated once per port class
//! cut by the keys of every state involved.

use std::collections::{BTreeMap, BTreeSet};

use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{Direction, MapState, Verdict};
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

/// Whether a verdict lets the flow through (allow or proxy redirect).
fn passes(verdict: Verdict) -> bool {
    verdict.is_allowed()
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

/// The ranges on which every (state, direction, peer) check passes.
pub fn allowed(checks: &[(&MapState, Direction, u32)]) -> Vec<PortRange> {
    let pairs: Vec<(&MapState, Direction)> = checks.iter().map(|(s, d, _)| (*s, *d)).collect();
    merge(port_classes(&pairs).into_iter().filter(|(p, lo, _)| {
        checks.iter().all(|(state, direction, peer)| {
            let identity = Identity::new(*peer).unwrap_or(Identity::WORLD);
            passes(state.lookup(*direction, identity, *p, *lo).verdict)
        })
    }))
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
    use porin_compiler::mapstate::{Entry, Key, PolicyFeatures};

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
        let both = allowed(&[
            (&egress, Direction::Egress, 300),
            (&ingress, Direction::Ingress, 301),
        ]);
        assert_eq!(both, vec![(6, 81, 81)]);
        let out = allowed(&[(&egress, Direction::Egress, 300)]);
        assert_eq!(describe(&out), "TCP/80-95");
        let mut all = MapState::new();
        all.upsert(Key::egress(), Entry::allow()).unwrap();
        assert_eq!(describe(&allowed(&[(&all, Direction::Egress, 5)])), "any");
    }
}
