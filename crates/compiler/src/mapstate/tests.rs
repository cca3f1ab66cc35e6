//! Map-state tests. Most re-express Cilium test tables; each names its source.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::identity::Identity;
use crate::ports::{MaskedPort, port_range_to_masked_ports};

mod accumulate_cases;
mod insert_cases;
mod ordered_cases;
mod properties;
mod subnet_cases;

pub(super) fn id(n: u32) -> Identity {
    Identity::new(n).unwrap()
}

/// `ingressKey(identity, proto, port, prefixLen)` of `mapstate_test.go`.
pub(super) fn ik(identity: u32, proto: u8, port: u16, prefix: u8) -> Key {
    Key::ingress()
        .with_identity(id(identity))
        .with_port_proto_prefix(proto, port, prefix)
        .unwrap()
}

/// `egressKey(identity, proto, port, prefixLen)` of `mapstate_test.go`.
pub(super) fn ek(identity: u32, proto: u8, port: u16, prefix: u8) -> Key {
    Key::egress()
        .with_identity(id(identity))
        .with_port_proto_prefix(proto, port, prefix)
        .unwrap()
}

/// `ingressL3OnlyKey(identity)`.
pub(super) fn il3(identity: u32) -> Key {
    Key::ingress().with_identity(id(identity))
}

/// `egressL3OnlyKey(identity)`.
pub(super) fn el3(identity: u32) -> Key {
    Key::egress().with_identity(id(identity))
}

pub(super) fn allow() -> Entry {
    Entry::allow()
}

pub(super) fn deny() -> Entry {
    Entry::deny()
}

/// `allowEntry().withHTTPProxyPort(port)`.
pub(super) fn http(proxy_port: u16) -> Entry {
    Entry::redirect(proxy_port, ListenerPriority::HTTP)
}

/// `allowEntry().withProxyPortPriority(port, priority)`.
pub(super) fn proxy_prio(proxy_port: u16, priority: u8) -> Entry {
    Entry::redirect(proxy_port, ListenerPriority::new(priority))
}

pub(super) fn state(pairs: &[(Key, Entry)]) -> MapState {
    let mut ms = MapState::new();
    for (k, e) in pairs {
        ms.upsert(*k, e.clone()).unwrap();
    }
    ms
}

fn flow(ms: &MapState, dir: Direction, peer: u32, proto: u8, port: u16) -> Verdict {
    ms.lookup(dir, id(peer), proto, port).verdict
}

const ALLOW: Verdict = Verdict::Allow;
const NO_ENTRY: Verdict = Verdict::Deny {
    reason: DenyReason::NoEntry,
};
const DENIED: Verdict = Verdict::Deny {
    reason: DenyReason::Rule,
};

// ---------------------------------------------------------------- precedence

// pkg/policy/types/entry.go: NewMapStateEntry / WithListenerPriority and the
// constants table of docs/semantics.md §4.3.
#[test]
fn precedence_constants_match_entry_go() {
    let p0 = Priority::ZERO;
    assert_eq!(Precedence::deny(p0).get(), 0xFFFF_FFFF);
    assert_eq!(Precedence::deny(p0), Precedence::MAX);
    assert_eq!(Precedence::allow(p0).get(), 0xFFFF_FF01);
    assert_eq!(Precedence::allow(p0), Precedence::MAX_ALLOW);
    let cases = [
        (ListenerPriority::HTTP, 0xFFFF_FF9A_u32), // 255 - 101 = 154
        (ListenerPriority::KAFKA, 0xFFFF_FF95),    // 149
        (ListenerPriority::PROXYLIB, 0xFFFF_FF90), // 144
        (ListenerPriority::TLS, 0xFFFF_FF8B),      // 139
        (ListenerPriority::DNS, 0xFFFF_FF86),      // 134
        (ListenerPriority::CRD, 0xFFFF_FF81),      // 129
        (ListenerPriority::new(1), 0xFFFF_FFFE),   // 254
        (ListenerPriority::new(100), 0xFFFF_FF9B), // 155
        (ListenerPriority::NONE, 0xFFFF_FF02),     // 2: redirect, no priority
        (ListenerPriority::new(200), 0xFFFF_FF81), // clamped to 126
    ];
    for (listener, expected) in cases {
        assert_eq!(
            Precedence::redirect(p0, listener).get(),
            expected,
            "{listener:?}"
        );
        let e = Entry::new(p0, false, 4242, listener, AuthRequirement::NONE);
        assert_eq!(e.precedence.get(), expected);
        assert!(e.is_allow() && e.is_redirect());
    }
    // A plain allow ignores the listener priority (no proxy port).
    let e = Entry::new(p0, false, 0, ListenerPriority::HTTP, AuthRequirement::NONE);
    assert_eq!(e.precedence, Precedence::MAX_ALLOW);
    // A deny clears proxy port, listener priority and auth.
    let e = Entry::new(
        p0,
        true,
        8080,
        ListenerPriority::HTTP,
        AuthRequirement::explicit(AuthType::SPIRE),
    );
    assert_eq!(e, Entry::deny());
}

#[test]
fn precedence_priority_levels_use_the_top_24_bits() {
    let p = Priority::new(1000).unwrap();
    assert_eq!(Precedence::allow(p).priority(), p);
    assert_eq!(Precedence::deny(p).get(), ((0xFF_FFFF - 1000) << 8) | 0xFF);
    assert_eq!(
        Precedence::deny(Priority::new(5).unwrap()).get(),
        0xFFFF_FAFF
    );
    // A lower priority number wins even against a deny.
    assert!(Precedence::allow(Priority::ZERO) > Precedence::deny(Priority::new(1).unwrap()));
    assert!(Priority::new(0x100_0000).is_err());
    assert_eq!(Precedence::base(Priority::MAX).get(), 0);
    let pass = Precedence::base(Priority::ZERO);
    assert!(pass.is_pass() && !pass.is_allow() && !pass.is_deny());
    // ProxyPortPrecedenceMayDiffer: same level and deny-ness only.
    let http = Precedence::redirect(Priority::ZERO, ListenerPriority::HTTP);
    assert!(http.may_differ_only_in_proxy_byte(Precedence::MAX_ALLOW));
    assert!(!http.may_differ_only_in_proxy_byte(Precedence::MAX));
    assert!(!Precedence::allow(p).may_differ_only_in_proxy_byte(Precedence::MAX_ALLOW));
    assert_eq!(http.allow_precedence(), Precedence::MAX_ALLOW);
}

#[test]
fn auth_requirement_byte() {
    let explicit = AuthRequirement::explicit(AuthType::SPIRE);
    assert_eq!(explicit.to_byte(), 0x81);
    assert!(explicit.is_explicit());
    assert_eq!(explicit.auth_type(), AuthType::SPIRE);
    assert_eq!(
        explicit.as_derived(),
        AuthRequirement::derived(AuthType::SPIRE)
    );
    assert_eq!(AuthRequirement::derived(AuthType::ALWAYS_FAIL).to_byte(), 2);
    assert!(AuthType::new(128).is_err());
    assert_eq!(AuthType::new(127).unwrap().get(), 127);
}

// entry.go MapStateEntry.Merge.
#[test]
fn merge_prefers_higher_redirect_then_lower_port_then_explicit_auth() {
    let mut e = http(9000);
    e.merge_same_level(&http(8000));
    assert_eq!(
        e.proxy_port, 8000,
        "tie on precedence: lower proxy port wins"
    );
    e.merge_same_level(&proxy_prio(9500, 1));
    assert_eq!((e.proxy_port, e.precedence.low_byte()), (9500, 254));
    e.merge_same_level(&allow());
    assert_eq!(
        e.proxy_port, 9500,
        "a non-redirect never replaces a redirect"
    );
    let mut e = allow().with_auth(AuthRequirement::derived(AuthType::ALWAYS_FAIL));
    e.merge_same_level(&allow().with_auth(AuthRequirement::explicit(AuthType::SPIRE)));
    assert_eq!(
        e.auth,
        AuthRequirement::explicit(AuthType::SPIRE),
        "explicit beats derived"
    );
    e.merge_same_level(&allow().with_auth(AuthRequirement::derived(AuthType::ALWAYS_FAIL)));
    assert_eq!(e.auth, AuthRequirement::explicit(AuthType::SPIRE));
    e.merge_same_level(&allow().with_auth(AuthRequirement::explicit(AuthType::ALWAYS_FAIL)));
    assert_eq!(
        e.auth,
        AuthRequirement::explicit(AuthType::ALWAYS_FAIL),
        "higher type wins"
    );
}

// --------------------------------------------------------------------- keys

// pkg/policy/types/types.go: WithPortProtoPrefix, EndPort, PrefixLength.
#[test]
fn key_constructors_mirror_types_go() {
    let k = ik(1, 6, 80, 0);
    assert_eq!((k.port(), k.port_prefix_len(), k.end_port()), (80, 16, 80));
    let k = ik(1, 6, 100, 10);
    assert_eq!((k.port(), k.port_prefix_len(), k.end_port()), (64, 10, 127));
    let k = ik(1, 6, 80, 40);
    assert_eq!(k.port_prefix_len(), 16, "prefix above 16 becomes 16");
    let k = ik(1, 6, 0, 0);
    assert_eq!((k.port(), k.port_prefix_len(), k.end_port()), (0, 0, 65535));
    assert_eq!(k.userspace_prefix_len(), 9);
    assert_eq!(il3(1).userspace_prefix_len(), 1);
    assert_eq!(ik(1, 6, 64, 10).userspace_prefix_len(), 19);
    let k = Key::egress().with_port_proto(17, 53).unwrap();
    assert_eq!((k.proto(), k.port(), k.port_prefix_len()), (17, 53, 16));
    assert_eq!(k.direction(), Direction::Egress);
    assert!(k.has_wildcard_identity());
    // Fail closed: no "any protocol, some port" key.
    assert!(Key::ingress().with_port_proto(0, 80).is_err());
    assert!(Key::ingress().with_port_proto_prefix(0, 0, 6).is_err());
    assert!(Key::new(Direction::Ingress, id(1), 6, 65, 10).is_err());
    assert!(Key::new(Direction::Ingress, id(1), 6, 64, 17).is_err());
    assert!(Key::new(Direction::Ingress, id(1), 6, 64, 10).is_ok());
}

// pkg/policy/l4.go L4Filter.toMapState: one key per masked port.
#[test]
fn port_range_keys_expand_like_to_map_state() {
    let base = Key::egress().with_identity(id(200));
    let keys = base.port_range_keys(6, 10000, 20000).unwrap();
    assert_eq!(keys.len(), 11);
    assert_eq!(keys[0], ek(200, 6, 0x2710, 12));
    assert_eq!(keys[10], ek(200, 6, 20000, 16));
    assert_eq!(
        base.port_range_keys(6, 0, 0).unwrap(),
        vec![ek(200, 6, 0, 0)]
    );
    assert_eq!(
        base.port_range_keys(6, 0, 65535).unwrap(),
        vec![ek(200, 6, 0, 0)]
    );
    assert_eq!(base.port_range_keys(0, 0, 0).unwrap(), vec![el3(200)]);
    assert!(base.port_range_keys(0, 80, 80).is_err());
    assert_eq!(
        base.port_range_keys(17, 90, 80).unwrap(),
        vec![ek(200, 17, 90, 16)]
    );
}

// types.go PortProtoIsBroader / PortIsBroader, mapstate.go BroaderOrEqualKeys.
#[test]
fn broader_and_narrower_relations() {
    let any = il3(1);
    let tcp = ik(1, 6, 0, 0);
    let r64 = ik(1, 6, 64, 10);
    let p80 = ik(1, 6, 80, 16);
    let p200 = ik(1, 6, 200, 16);
    let udp80 = ik(1, 17, 80, 16);
    assert!(any.port_proto_is_broader(&tcp));
    assert!(any.port_proto_is_broader(&p80));
    assert!(tcp.port_proto_is_broader(&r64));
    assert!(r64.port_proto_is_broader(&p80));
    assert!(!r64.port_proto_is_broader(&p200));
    assert!(!r64.port_proto_is_broader(&r64), "equal is not broader");
    assert!(r64.port_proto_covers(&r64));
    assert!(!tcp.port_proto_is_broader(&udp80));
    assert!(!p80.port_proto_is_broader(&r64));
    assert!(
        !ik(1, 6, 80, 16).port_proto_covers(&ek(1, 6, 80, 16)),
        "directions differ"
    );

    // Only the same identity or identity 0 cover each other.
    let ms = state(&[
        (il3(0), allow()),
        (il3(1), allow()),
        (il3(2), allow()),
        (ik(2, 6, 80, 16), allow()),
        (ik(1, 6, 80, 16), allow()),
    ]);
    let covering: BTreeSet<Key> = ms.covering_keys(&p80).into_iter().map(|(k, _)| k).collect();
    assert_eq!(covering, BTreeSet::from([il3(0), il3(1), ik(1, 6, 80, 16)]));
    let narrower: BTreeSet<Key> = ms
        .narrower_keys(&il3(1))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(narrower, BTreeSet::from([il3(1), ik(1, 6, 80, 16)]));
    let narrower_any: BTreeSet<Key> = ms
        .narrower_keys(&il3(0))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(narrower_any.len(), 5, "identity 0 covers every identity");
}

// ------------------------------------------------------- datapath prefixes

// Divergence from Cilium, docs/semantics.md §4.5 quirk / §10.1:
// pkg/maps/policymap/policymap.go NewKeyFromPolicyKey adds the port prefix
// only when DestPort != 0, so the masked range 0/6 (ports 0-1023, from
// `port: "0", endPort: 1023`) would become a proto-only key allowing every
// port. porin fails closed and keeps the prefix (the bytes are checked in
// porin-ebpf's abi tests).
#[test]
fn port_zero_range_keeps_its_prefix_fail_closed_divergence_from_cilium() {
    let blocks = port_range_to_masked_ports(0, 1023);
    assert_eq!(blocks, vec![MaskedPort::from_prefix(0, 6)]);
    let key = Key::ingress()
        .with_identity(id(7))
        .with_masked_port(6, blocks[0])
        .unwrap();
    assert_eq!(
        (key.port(), key.port_prefix_len(), key.end_port()),
        (0, 6, 1023)
    );
    // Cilium would write prefixlen 48 here; porin writes 48 + 6.
    assert_eq!(key.datapath_prefix_len(), 54);
    assert_eq!(key.lpm_prefix_length(), 8 + 6);
    // And the evaluator allows 0-1023 only.
    let ms = state(&[(key, allow())]);
    assert_eq!(flow(&ms, Direction::Ingress, 7, 6, 1023), ALLOW);
    assert_eq!(flow(&ms, Direction::Ingress, 7, 6, 1024), NO_ENTRY);
    assert_eq!(flow(&ms, Direction::Ingress, 7, 6, 8080), NO_ENTRY);
}

// ------------------------------------------------------------------- lookup

// bpf/tests/network_policy.c, network_policy_egress_allow_check: each TEST
// block re-expressed with REMOTE_IDENTITY = 112233.
#[test]
fn network_policy_c_egress_cases() {
    const REMOTE: u32 = 112_233;
    const TCP: u8 = 6;
    const UDP: u8 = 17;
    let eg = Direction::Egress;

    // "deny by default"
    let ms = MapState::new();
    assert_eq!(
        flow(&ms, eg, REMOTE, UDP, 80).drop_code(),
        Some(DROP_POLICY)
    );
    assert_eq!(
        flow(&ms, eg, REMOTE, TCP, 80).drop_code(),
        Some(DROP_POLICY)
    );

    // "L3+L4 policy"
    let ms = state(&[(ek(REMOTE, UDP, 80, 16), allow())]);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 80), ALLOW);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 81), NO_ENTRY);
    assert_eq!(flow(&ms, eg, REMOTE, TCP, 80), NO_ENTRY);

    // "wildcarded L4"
    let ms = state(&[(ek(REMOTE, UDP, 0, 0), allow())]);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 80), ALLOW);
    assert_eq!(flow(&ms, eg, REMOTE, TCP, 80), NO_ENTRY);

    // "wildcarded L3+L4"
    let ms = state(&[(el3(REMOTE), allow())]);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 80), ALLOW);
    assert_eq!(flow(&ms, eg, REMOTE, TCP, 80), ALLOW);

    // "L3+L4 policy, any identity"
    let ms = state(&[(ek(0, UDP, 80, 16), allow())]);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 80), ALLOW);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 81), NO_ENTRY);
    assert_eq!(flow(&ms, eg, REMOTE, TCP, 80), NO_ENTRY);

    // "wildcarded L4, any-identity"
    let ms = state(&[(ek(0, UDP, 0, 0), allow())]);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 80), ALLOW);
    assert_eq!(flow(&ms, eg, REMOTE, TCP, 80), NO_ENTRY);

    // "wildcarded L3+L4, any identity [allow-all]"
    let ms = state(&[(el3(0), allow())]);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 80), ALLOW);
    assert_eq!(flow(&ms, eg, REMOTE, TCP, 80), ALLOW);

    // The port-range case of the newer network_policy.c (docs/semantics.md §6):
    // {REMOTE, UDP, 80, 2 wildcard bits} → 80-83 allowed, 79 and 84 not.
    let ms = state(&[(ek(REMOTE, UDP, 80, 14), allow())]);
    for port in 80..=83 {
        assert_eq!(flow(&ms, eg, REMOTE, UDP, port), ALLOW, "{port}");
    }
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 79), NO_ENTRY);
    assert_eq!(flow(&ms, eg, REMOTE, UDP, 84), NO_ENTRY);
    assert_eq!(flow(&ms, eg, REMOTE, TCP, 80), NO_ENTRY);
}

// bpf/lib/policy.h __policy_can_access (1.19): precedence and match types.
#[test]
fn lookup_precedence_rules_of_policy_h() {
    let ing = Direction::Ingress;
    // 1. L3 deny at MAX precedence decides without the L4 lookup.
    let ms = state(&[(il3(100), deny()), (ik(0, 6, 80, 16), http(15001))]);
    let d = ms.lookup(ing, id(100), 6, 80);
    assert_eq!(d.verdict, DENIED);
    assert_eq!(d.verdict.drop_code(), Some(DROP_POLICY_DENY));
    assert_eq!(d.match_type, MatchType::L3Only);
    assert!(d.other.is_none());
    // Another identity gets the L4 redirect.
    let d = ms.lookup(ing, id(101), 6, 80);
    assert_eq!(d.verdict, Verdict::Redirect { proxy_port: 15001 });
    assert_eq!(d.match_type, MatchType::L4Only);

    // 2. L4-only deny beats an L3 allow (higher precedence).
    let ms = state(&[(ik(100, 6, 0, 0), allow()), (ik(0, 6, 80, 16), deny())]);
    let d = ms.lookup(ing, id(100), 6, 80);
    assert_eq!(d.verdict, DENIED);
    assert_eq!(d.match_type, MatchType::L4Only);
    assert_eq!(flow(&ms, ing, 100, 6, 81), ALLOW);
    assert_eq!(
        ms.lookup(ing, id(100), 6, 81).match_type,
        MatchType::L3Proto
    );

    // 3. Equal precedence: the longer L4 prefix wins, else L3.
    let ms = state(&[(il3(100), allow()), (ik(0, 6, 80, 16), allow())]);
    let d = ms.lookup(ing, id(100), 6, 80);
    assert_eq!((d.verdict, d.match_type), (ALLOW, MatchType::L4Only));
    let ms = state(&[(ik(100, 6, 80, 16), allow()), (ik(0, 6, 80, 16), allow())]);
    assert_eq!(ms.lookup(ing, id(100), 6, 80).match_type, MatchType::L3L4);
    let ms = state(&[(il3(0), allow())]);
    assert_eq!(ms.lookup(ing, id(5), 1, 8).match_type, MatchType::All);
    let ms = state(&[(ik(0, 1, 0, 0), allow())]);
    assert_eq!(ms.lookup(ing, id(5), 1, 8).match_type, MatchType::ProtoOnly);

    // 4. Redirect precedence beats a plain allow regardless of prefix.
    let ms = state(&[(ik(100, 6, 80, 16), allow()), (ik(0, 6, 0, 0), http(15001))]);
    assert_eq!(
        flow(&ms, ing, 100, 6, 80),
        Verdict::Redirect { proxy_port: 15001 }
    );

    // 5. Priority levels: a lower priority number wins over a deny.
    let ordered_allow = Entry::new(
        Priority::ZERO,
        false,
        0,
        ListenerPriority::NONE,
        AuthRequirement::NONE,
    );
    let later_deny = Entry::new(
        Priority::new(1).unwrap(),
        true,
        0,
        ListenerPriority::NONE,
        AuthRequirement::NONE,
    );
    let ms = state(&[
        (ik(100, 6, 80, 16), ordered_allow),
        (ik(0, 6, 0, 0), later_deny),
    ]);
    assert_eq!(flow(&ms, ing, 100, 6, 80), ALLOW);
    assert_eq!(flow(&ms, ing, 100, 6, 81), DENIED);
    // A deny below MAX precedence does not short-circuit.
    let ms = state(&[(il3(100), later_deny_at(1)), (ik(0, 6, 80, 16), allow())]);
    assert_eq!(flow(&ms, ing, 100, 6, 80), ALLOW);
    assert_eq!(flow(&ms, ing, 100, 6, 81), DENIED);

    // Human-readable form, for explanations.
    let ms = state(&[(ik(0, 6, 64, 10), http(15001))]);
    assert_eq!(
        ms.lookup(ing, id(7), 6, 80).to_string(),
        "redirect to proxy port 15001 [L4_ONLY] by {ingress id=0 proto=6 port=64-127 (64/10)}: \
         allow priority=0 listener-byte=154 proxy-port=15001"
    );
    assert_eq!(
        MapState::new().lookup(ing, id(7), 6, 80).to_string(),
        "deny (no matching entry) [NONE]"
    );

    // Origins travel with the decision.
    let ms = state(&[(il3(7), allow().with_origin(42))]);
    let d = ms.lookup(ing, id(7), 17, 53);
    assert_eq!(d.chosen.unwrap().entry.origins, Origins::from([42]));
}

fn later_deny_at(priority: u32) -> Entry {
    Entry::new(
        Priority::new(priority).unwrap(),
        true,
        0,
        ListenerPriority::NONE,
        AuthRequirement::NONE,
    )
}

// bpf/lib/policy.h __policy_check: auth_type borrowing.
#[test]
fn lookup_auth_rules_of_policy_check() {
    let ing = Direction::Ingress;
    let spire = AuthRequirement::explicit(AuthType::SPIRE);
    // The chosen L4 entry (longer prefix, equal precedence) has no explicit
    // auth: it borrows the L3 entry's greater auth type.
    let ms = state(&[
        (il3(100), allow().with_auth(spire)),
        (ik(0, 6, 80, 16), allow()),
    ]);
    let d = ms.lookup(ing, id(100), 6, 80);
    assert_eq!(
        d.verdict,
        Verdict::AuthRequired {
            auth_type: AuthType::SPIRE
        }
    );
    assert_eq!(d.verdict.drop_code(), Some(DROP_POLICY_AUTH_REQUIRED));
    assert_eq!(d.match_type, MatchType::L4Only);
    // Explicitly "no auth" (explicit bit, type 0) does not borrow.
    let no_auth = AuthRequirement::explicit(AuthType::DISABLED);
    let ms = state(&[
        (il3(100), allow().with_auth(spire)),
        (ik(0, 6, 80, 16), allow().with_auth(no_auth)),
    ]);
    assert_eq!(flow(&ms, ing, 100, 6, 80), ALLOW);
    // Different precedence: no borrowing (the redirect wins and keeps none).
    let ms = state(&[
        (il3(100), allow().with_auth(spire)),
        (ik(0, 6, 80, 16), http(15001)),
    ]);
    assert_eq!(
        flow(&ms, ing, 100, 6, 80),
        Verdict::Redirect { proxy_port: 15001 }
    );
    // Auth on the chosen entry itself.
    let ms = state(&[(
        il3(100),
        http(15001).with_auth(AuthRequirement::derived(AuthType::ALWAYS_FAIL)),
    )]);
    assert_eq!(
        flow(&ms, ing, 100, 6, 80),
        Verdict::AuthRequired {
            auth_type: AuthType::ALWAYS_FAIL
        }
    );
}

#[test]
fn pass_entries_are_rejected() {
    let mut ms = MapState::new();
    let pass = Entry {
        precedence: Precedence::base(Priority::ZERO),
        ..allow()
    };
    assert!(matches!(
        ms.insert_with_features(il3(1), pass, PolicyFeatures::ALL),
        Err(MapStateError::PassNotSupported { .. })
    ));
    assert!(ms.is_empty());
    let pass = Entry {
        precedence: Precedence::base(Priority::ZERO),
        ..allow()
    };
    assert!(ms.upsert(il3(1), pass).is_err());
    assert!(ms.is_empty());
}
