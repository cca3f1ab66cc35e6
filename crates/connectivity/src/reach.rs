//! End-to-end reach of one allow rule: of the flows a rule grants at its
//! subject, which the peer on the other end also lets through.
//!
//! A new connection from A to B needs A's egress *and* B's ingress to
//! allow it (what `porin graph` draws, [`crate::flows::allowed`]). So an
//! ingress rule of B whose every granted flow A's egress blocks (or an
//! egress rule of A whose every granted flow B's ingress blocks) admits
//! nothing end to end, though B's own map state keeps its entry.
//!
//! Exact like the rest of this crate: the verdicts of the three states
//! involved (the rule alone at the subject, the subject's full state, the
//! peer's state in the other direction) are constant on each port class
//! cut by their keys ([`crate::flows::port_classes`]), so one lookup per
//! class and state decides every flow of the class. Nothing is sampled.

use std::collections::{BTreeMap, BTreeSet};

use porin_compiler::explain::passes;
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{Direction, MapState};

use crate::flows::{
    COMMON_PROTOCOLS, OTHER_PROTOCOL, PortRange, classes_of_cuts, merge, port_classes,
};

/// The other direction: the peer's side of a flow.
pub fn opposite(direction: Direction) -> Direction {
    match direction {
        Direction::Ingress => Direction::Egress,
        Direction::Egress => Direction::Ingress,
    }
}

/// The subject side of one rule: where it is enforced and what it grants.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The direction of the rule at the subject.
    pub direction: Direction,
    /// The origin id of the rule's entries.
    pub origin: u32,
    /// The subject's map state compiled from the rule alone.
    pub alone: &'a MapState,
    /// The subject's full map state.
    pub full: &'a MapState,
    /// The subject's identity (the peer's view of it).
    pub identity: u32,
    /// Whether the cluster runs mutual authentication
    /// (`mesh-auth-mutual-enabled`): an auth-required entry of either side
    /// then passes between two workloads
    /// ([`porin_compiler::explain::passes`]).
    pub mutual_auth: bool,
}

/// The peer side: its state and identity.
#[derive(Debug, Clone, Copy)]
pub struct Peer<'a> {
    /// The peer's full map state (consulted in the opposite direction).
    pub state: &'a MapState,
    /// The peer's identity (the subject's view of it).
    pub identity: u32,
}

/// How the flows one rule grants toward one peer fare end to end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerReach {
    /// Classes the rule grants that the subject's full state lets through
    /// (merged port ranges).
    pub granted: Vec<PortRange>,
    /// Classes the rule grants that the subject's own state blocks (a deny
    /// of the subject's own policy decides them: PR004's concern).
    pub own_blocked: usize,
    /// Of [`Self::granted`], the ranges the peer also lets through: the
    /// rule's end-to-end flows toward this peer.
    pub passing: Vec<PortRange>,
    /// Of [`Self::granted`], the ranges the peer blocks.
    pub blocked: Vec<PortRange>,
    /// Origins of the peer's entries that decide blocked classes (deny
    /// rules of the peer's policy).
    pub deny_origins: BTreeSet<u32>,
    /// Whether some blocked class has no entry at the peer at all (its
    /// default deny decides it).
    pub default_denied: bool,
}

/// How one port class fares for a (subject, peer) pair.
enum Judged<'s> {
    /// The rule alone does not grant it.
    NotGranted,
    /// The rule grants it, the subject's full state blocks it.
    OwnBlocked,
    /// Granted, and the peer lets it through.
    Passing,
    /// Granted, and the peer blocks it, by this entry (`None`: default deny).
    Blocked(Option<&'s porin_compiler::mapstate::Entry>),
}

/// The three lookups of one class (the class's first port decides it).
fn judge<'s>(subject: &Subject<'_>, peer: &Peer<'s>, (proto, lo, _): PortRange) -> Judged<'s> {
    let back = opposite(subject.direction);
    let peer_id = Identity::new(peer.identity).unwrap_or(Identity::WORLD);
    let subject_id = Identity::new(subject.identity).unwrap_or(Identity::WORLD);
    let pass = |verdict, local, remote| passes(subject.mutual_auth, verdict, local, remote);
    let (verdict, entry) = subject
        .alone
        .lookup_entry(subject.direction, peer_id, proto, lo);
    if !(pass(verdict, subject.identity, peer.identity)
        && entry.is_some_and(|e| e.origins.contains(&subject.origin)))
    {
        return Judged::NotGranted;
    }
    let (own, _) = subject
        .full
        .lookup_entry(subject.direction, peer_id, proto, lo);
    if !pass(own, subject.identity, peer.identity) {
        return Judged::OwnBlocked;
    }
    let (verdict, entry) = peer.state.lookup_entry(back, subject_id, proto, lo);
    if pass(verdict, peer.identity, subject.identity) {
        Judged::Passing
    } else {
        Judged::Blocked(entry)
    }
}

/// What the rule of `subject` grants toward `peer`, and how much of it the
/// peer's own policy (opposite direction, toward the subject's identity)
/// lets through; every port class of every protocol is decided.
pub fn rule_reach(subject: &Subject<'_>, peer: &Peer<'_>) -> PeerReach {
    let back = opposite(subject.direction);
    let classes = port_classes(&[
        (subject.alone, subject.direction),
        (subject.full, subject.direction),
        (peer.state, back),
    ]);
    fold(subject, peer, classes, |_| 1)
}

/// Judges each class and collects [`PeerReach`]; `own_count` is the number
/// of [`rule_reach`] classes a class stands for (for
/// [`PeerReach::own_blocked`]).
fn fold(
    subject: &Subject<'_>,
    peer: &Peer<'_>,
    classes: Vec<PortRange>,
    own_count: impl Fn(PortRange) -> usize,
) -> PeerReach {
    let mut reach = PeerReach::default();
    let (mut granted, mut passing, mut blocked) = (Vec::new(), Vec::new(), Vec::new());
    for class in classes {
        match judge(subject, peer, class) {
            Judged::NotGranted => {}
            Judged::OwnBlocked => reach.own_blocked += own_count(class),
            Judged::Passing => {
                granted.push(class);
                passing.push(class);
            }
            Judged::Blocked(entry) => {
                granted.push(class);
                blocked.push(class);
                match entry {
                    Some(entry) => reach.deny_origins.extend(entry.origins.iter().copied()),
                    None => reach.default_denied = true,
                }
            }
        }
    }
    reach.granted = merge(granted);
    reach.passing = merge(passing);
    reach.blocked = merge(blocked);
    reach
}

/// The cut points of the keys of one state in one direction, per protocol
/// (each key's first port and last port + 1; protocol-0 keys cut nothing):
/// what [`rule_reach`] cuts its classes with, kept per state so that
/// [`rule_reach_indexed`] need not walk the state again.
pub type Cuts = BTreeMap<u8, BTreeSet<u32>>;

/// The [`Cuts`] of `state` in `direction`.
pub fn key_cuts(state: &MapState, direction: Direction) -> Cuts {
    let mut cuts = Cuts::new();
    for (key, _) in state.iter().filter(|(k, _)| k.direction() == direction) {
        add_cuts(&mut cuts, key);
    }
    cuts
}

fn add_cuts(cuts: &mut Cuts, key: &porin_compiler::mapstate::Key) {
    if key.proto() == 0 {
        return;
    }
    let set = cuts.entry(key.proto()).or_default();
    set.insert(u32::from(key.port()));
    set.insert(u32::from(key.end_port()) + 1);
}

/// Exactly [`rule_reach`], at a cost that grows with the keys of the
/// pair, not with the states: a lookup toward identity X reads only the
/// keys of X and of identity 0 (`MapState::lookup`), so the verdicts are
/// decided on classes cut by those keys alone (each a union of
/// [`rule_reach`]'s classes, on which the three verdicts are constant;
/// merged ranges and origins come out the same). The one count that
/// depends on the finer cut, [`PeerReach::own_blocked`], is counted from
/// `cuts`: the [`key_cuts`] of `subject.alone` and `subject.full` in the
/// rule's direction and of `peer.state` in the other.
pub fn rule_reach_indexed(subject: &Subject<'_>, peer: &Peer<'_>, cuts: [&Cuts; 3]) -> PeerReach {
    let back = opposite(subject.direction);
    let peer_id = Identity::new(peer.identity).unwrap_or(Identity::WORLD);
    let subject_id = Identity::new(subject.identity).unwrap_or(Identity::WORLD);
    let mut coarse: Cuts = COMMON_PROTOCOLS
        .iter()
        .chain(std::iter::once(&OTHER_PROTOCOL))
        .chain(cuts.iter().flat_map(|c| c.keys()))
        .map(|p| (*p, BTreeSet::from([0, 65_536])))
        .collect();
    for (state, direction, identity) in [
        (subject.alone, subject.direction, peer_id),
        (subject.full, subject.direction, peer_id),
        (peer.state, back, subject_id),
    ] {
        for id in [identity, Identity::WILDCARD] {
            for (key, _) in state.identity_keys(direction, id) {
                add_cuts(&mut coarse, key);
            }
        }
    }
    fold(subject, peer, classes_of_cuts(coarse), |(proto, lo, hi)| {
        // The finer classes inside: one more per cut point in (lo, hi] of
        // any of the three states.
        let mut inner: Vec<u32> = cuts
            .iter()
            .filter_map(|c| c.get(&proto))
            .flat_map(|set| set.range(u32::from(lo) + 1..u32::from(hi) + 1))
            .copied()
            .collect();
        inner.sort_unstable();
        inner.dedup();
        1 + inner.len()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use porin_compiler::mapstate::{Entry, Key, PolicyFeatures};

    fn allow(state: &mut MapState, key: Key, origin: u32) {
        let mut entry = Entry::allow();
        entry.origins = [origin].into();
        state
            .insert_with_features(key, entry, PolicyFeatures::NONE)
            .unwrap();
    }

    /// db's ingress rule (origin 7) grants api TCP/5432 and TCP/6000; api's
    /// egress allows db TCP/6000 only: one range passes, one is blocked by
    /// api's default deny.
    #[test]
    fn reach_intersects_the_peer_side_per_class() {
        let (db, api) = (Identity::new(300).unwrap(), Identity::new(301).unwrap());
        let mut alone = MapState::new();
        for port in [5432, 6000] {
            let key = Key::ingress()
                .with_identity(api)
                .with_port_proto(6, port)
                .unwrap();
            allow(&mut alone, key, 7);
        }
        let mut egress = MapState::new();
        let key = Key::egress()
            .with_identity(db)
            .with_port_proto(6, 6000)
            .unwrap();
        allow(&mut egress, key, 9);
        let subject = Subject {
            direction: Direction::Ingress,
            origin: 7,
            alone: &alone,
            full: &alone,
            identity: 300,
            mutual_auth: false,
        };
        let peer = Peer {
            state: &egress,
            identity: 301,
        };
        let reach = rule_reach(&subject, &peer);
        assert_eq!(reach.granted, vec![(6, 5432, 5432), (6, 6000, 6000)]);
        assert_eq!(reach.passing, vec![(6, 6000, 6000)]);
        assert_eq!(reach.blocked, vec![(6, 5432, 5432)]);
        assert!(reach.default_denied);
        assert!(reach.deny_origins.is_empty());
        // Another origin's entries are not the rule's grant.
        let other = Subject {
            origin: 8,
            ..subject
        };
        assert_eq!(rule_reach(&other, &peer), PeerReach::default());
    }
}
