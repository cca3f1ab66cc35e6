//! `TestMapState_AccumulateMapChangesDeny` and `TestMapState_AccumulateMapChanges`
//! of Cilium's `pkg/policy/mapstate_test.go`, at the map level: each `args`
//! row becomes inserts (for added identities) and removals (for deleted
//! ones) of the row's key, with Cilium's entry (`newMapStateEntry(level, …,
//! proxyPort 1 if redirect, listener priority, verdict, authReq)`). Cilium
//! consumes a batch with `denyRules` (the Deny test) or
//! `authRules|denyRules|redirectRules`, and repeats the second test without
//! `authRules` when a test uses no auth; so do we. The selector-bookkeeping
//! cases ("2a".."2f") reduce to plain inserts/removals and are kept too.

use super::*;

#[derive(Clone, Copy, Default)]
struct Arg {
    adds: &'static [u32],
    deletes: &'static [u32],
    port: u16,
    prefix: u8,
    proto: u8,
    ingress: bool,
    redirect: u8,
    deny: bool,
    auth: u8,
    level: u32,
}

const fn arg(adds: &'static [u32], deletes: &'static [u32]) -> Arg {
    Arg {
        adds,
        deletes,
        port: 0,
        prefix: 0,
        proto: 0,
        ingress: false,
        redirect: 0,
        deny: false,
        auth: 0,
        level: 0,
    }
}

impl Arg {
    const fn pp(mut self, proto: u8, port: u16) -> Arg {
        self.proto = proto;
        self.port = port;
        self
    }
    const fn prefix(mut self, prefix: u8) -> Arg {
        self.prefix = prefix;
        self
    }
    const fn ingress(mut self) -> Arg {
        self.ingress = true;
        self
    }
    const fn redirect(mut self, listener: u8) -> Arg {
        self.redirect = listener;
        self
    }
    const fn deny(mut self) -> Arg {
        self.deny = true;
        self
    }
    const fn auth(mut self, auth: u8) -> Arg {
        self.auth = auth;
        self
    }
    const fn level(mut self, level: u32) -> Arg {
        self.level = level;
        self
    }
}

struct Case {
    name: &'static str,
    continued: bool,
    setup: Vec<(Key, Entry)>,
    args: Vec<Arg>,
    state: Vec<(Key, Entry)>,
    adds: Vec<Key>,
    deletes: Vec<Key>,
}

const HTTP: u8 = 101;
const CRD: u8 = 126;
const SPIRE: u8 = 0x81; // AuthTypeSpire.AsExplicitRequirement()
const ALWAYS_FAIL: u8 = 0x82; // AuthTypeAlwaysFail.AsExplicitRequirement()

fn entry_for(a: &Arg) -> Entry {
    Entry::new(
        Priority::new(a.level).unwrap(),
        a.deny,
        if a.redirect != 0 { 1 } else { 0 },
        ListenerPriority::new(a.redirect),
        AuthRequirement::from_byte(a.auth),
    )
}

fn leveled(mut e: Entry, level: u32) -> Entry {
    let low = e.precedence.get() & 0xff;
    e.precedence =
        Precedence::from_raw(Precedence::base(Priority::new(level).unwrap()).get() | low);
    e
}

fn http1() -> Entry {
    http(1)
}
fn crd1() -> Entry {
    Entry::redirect(1, ListenerPriority::CRD)
}
fn explicit(e: Entry, t: AuthType) -> Entry {
    e.with_auth(AuthRequirement::explicit(t))
}
fn derived(e: Entry, t: AuthType) -> Entry {
    e.with_auth(AuthRequirement::derived(t))
}
fn any_ingress() -> Key {
    Key::ingress()
}
fn any_egress() -> Key {
    Key::egress()
}
fn host_ingress() -> Key {
    il3(1)
}
fn http_ingress(n: u32) -> Key {
    ik(n, 6, 80, 16)
}
fn http_egress(n: u32) -> Key {
    ek(n, 6, 80, 16)
}
fn dns_udp_egress(n: u32) -> Key {
    ek(n, 17, 53, 16)
}
fn dns_tcp_egress(n: u32) -> Key {
    ek(n, 6, 53, 16)
}
fn tcp_egress(n: u32) -> Key {
    ek(n, 6, 0, 0)
}

fn run(cases: Vec<Case>, features_for: impl Fn(bool) -> PolicyFeatures) {
    let mut ms = MapState::new();
    let mut auth_used = false;
    for case in cases {
        if !case.continued {
            ms = state(&case.setup);
            auth_used = false;
        }
        auth_used |= case.args.iter().any(|a| a.auth != 0);
        let features = features_for(auth_used);
        let mut changes = Changes::default();
        for a in &case.args {
            let dir = if a.ingress {
                Direction::Ingress
            } else {
                Direction::Egress
            };
            let base = Key::for_direction(dir);
            let key = if a.proto == 0 && a.port == 0 && a.prefix == 0 {
                base
            } else {
                base.with_port_proto_prefix(a.proto, a.port, a.prefix)
                    .unwrap()
            };
            for n in a.adds {
                ms.insert_recording(
                    key.with_identity(id(*n)),
                    entry_for(a),
                    features,
                    &mut changes,
                )
                .unwrap();
            }
            for n in a.deletes {
                ms.remove_recording(&key.with_identity(id(*n)), &mut changes);
            }
        }
        assert_eq!(
            ms,
            state(&case.state),
            "{} (map state, {features:?})",
            case.name
        );
        assert_eq!(
            changes.adds,
            case.adds.iter().copied().collect::<BTreeSet<_>>(),
            "{} (adds)",
            case.name
        );
        assert_eq!(
            changes.deletes,
            case.deletes.iter().copied().collect::<BTreeSet<_>>(),
            "{} (deletes)",
            case.name
        );
    }
}

fn deny_cases() -> Vec<Case> {
    let base3 = || {
        vec![
            (any_ingress(), allow()),
            (host_ingress(), allow()),
            (ek(42, 0, 0, 0), deny()),
        ]
    };
    vec![
        Case {
            name: "test-0 - Adding L4-only redirect allow key to an existing allow-all with L3-only deny",
            continued: false,
            setup: vec![(any_ingress(), allow()), (il3(41), deny())],
            args: vec![arg(&[0], &[]).pp(6, 80).ingress().redirect(HTTP)],
            state: vec![
                (any_ingress(), allow()),
                (il3(41), deny()),
                (http_ingress(0), http1()),
            ],
            adds: vec![http_ingress(0)],
            deletes: vec![],
        },
        Case {
            name: "test-1a - Adding L3-deny to an existing allow-all with L4-only allow redirect map state entries",
            continued: false,
            setup: vec![(any_ingress(), allow()), (http_ingress(0), http(12345))],
            args: vec![arg(&[41], &[]).ingress().redirect(HTTP).deny()],
            state: vec![
                (any_ingress(), allow()),
                (il3(41), deny()),
                (http_ingress(0), http(12345)),
            ],
            adds: vec![il3(41)],
            deletes: vec![],
        },
        Case {
            name: "test-1b - Adding 2nd identity",
            continued: true,
            setup: vec![],
            args: vec![arg(&[42], &[]).ingress().redirect(HTTP).deny()],
            state: vec![
                (any_ingress(), allow()),
                (il3(41), deny()),
                (il3(42), deny()),
                (http_ingress(0), http(12345)),
            ],
            adds: vec![il3(42)],
            deletes: vec![],
        },
        Case {
            name: "test-1c - Removing the same key",
            continued: true,
            setup: vec![],
            args: vec![arg(&[], &[42]).ingress().redirect(HTTP).deny()],
            state: vec![
                (any_ingress(), allow()),
                (il3(41), deny()),
                (http_ingress(0), http(12345)),
            ],
            adds: vec![],
            deletes: vec![il3(42)],
        },
        Case {
            name: "test-2a - Adding 2 identities, and deleting a nonexisting key on an empty state",
            continued: false,
            setup: vec![],
            args: vec![arg(&[42, 43], &[50]).pp(6, 80).ingress().deny()],
            state: vec![(http_ingress(42), deny()), (http_ingress(43), deny())],
            adds: vec![http_ingress(42), http_ingress(43)],
            deletes: vec![],
        },
        Case {
            name: "test-2b - Adding Bar also selecting 42 (and 44)",
            continued: true,
            setup: vec![],
            args: vec![arg(&[42, 44], &[]).pp(6, 80).ingress().deny()],
            state: vec![
                (http_ingress(42), deny()),
                (http_ingress(43), deny()),
                (http_ingress(44), deny()),
            ],
            adds: vec![http_ingress(44)],
            deletes: vec![],
        },
        Case {
            name: "test-2c - Deleting 42",
            continued: true,
            setup: vec![],
            args: vec![
                arg(&[], &[42]).pp(6, 80).ingress().deny(),
                arg(&[], &[42]).pp(6, 80).ingress().deny(),
            ],
            state: vec![(http_ingress(43), deny()), (http_ingress(44), deny())],
            adds: vec![],
            deletes: vec![http_ingress(42)],
        },
        Case {
            name: "test-2d - Adding an entry that already exists, no adds",
            continued: true,
            setup: vec![],
            args: vec![arg(&[44], &[]).pp(6, 80).ingress().deny()],
            state: vec![(http_ingress(43), deny()), (http_ingress(44), deny())],
            adds: vec![],
            deletes: vec![],
        },
        Case {
            name: "test-3a - egress allow with deny-L3",
            continued: false,
            setup: base3(),
            args: vec![arg(&[42], &[]).pp(17, 53), arg(&[42], &[]).pp(6, 53)],
            state: base3(),
            adds: vec![],
            deletes: vec![],
        },
        Case {
            name: "test-3b - egress allow DNS on another ID with deny-L3",
            continued: true,
            setup: vec![],
            args: vec![arg(&[43], &[]).pp(17, 53), arg(&[43], &[]).pp(6, 53)],
            state: [
                base3(),
                vec![(dns_udp_egress(43), allow()), (dns_tcp_egress(43), allow())],
            ]
            .concat(),
            adds: vec![dns_udp_egress(43), dns_tcp_egress(43)],
            deletes: vec![],
        },
        Case {
            name: "test-3c - egress allow HTTP proxy with deny-L3",
            continued: true,
            setup: vec![],
            args: vec![arg(&[43], &[]).pp(6, 80).redirect(HTTP)],
            state: [
                base3(),
                vec![
                    (dns_udp_egress(43), allow()),
                    (dns_tcp_egress(43), allow()),
                    (http_egress(43), http1()),
                ],
            ]
            .concat(),
            adds: vec![http_egress(43)],
            deletes: vec![],
        },
        Case {
            name: "test-4a - Add L7 skipped due to covering L3 deny",
            continued: false,
            setup: base3(),
            args: vec![arg(&[42], &[]).pp(6, 80).redirect(HTTP)],
            state: base3(),
            adds: vec![],
            deletes: vec![],
        },
        Case {
            name: "test-4b - Add & delete L7 skipped due to covering L3 deny",
            continued: true,
            setup: vec![],
            args: vec![
                arg(&[42], &[]).pp(6, 80).redirect(HTTP),
                arg(&[], &[42]).pp(6, 80).redirect(HTTP),
            ],
            state: base3(),
            adds: vec![],
            deletes: vec![],
        },
        Case {
            name: "test-5 - Adding L3-deny to an existing allow-all",
            continued: false,
            setup: vec![(any_ingress(), allow())],
            args: vec![arg(&[41], &[]).ingress().deny()],
            state: vec![(any_ingress(), allow()), (il3(41), deny())],
            adds: vec![il3(41)],
            deletes: vec![],
        },
        Case {
            name: "test-6 - Multiple entries",
            continued: false,
            setup: vec![
                (any_egress(), allow()),
                (http_egress(0), http(12345)),
                (
                    dns_udp_egress(0),
                    Entry::redirect(12346, ListenerPriority::DNS),
                ),
            ],
            args: vec![arg(&[41], &[]).deny()],
            state: vec![
                (any_egress(), allow()),
                (ek(41, 0, 0, 0), deny()),
                (http_egress(0), http(12345)),
                (
                    dns_udp_egress(0),
                    Entry::redirect(12346, ListenerPriority::DNS),
                ),
            ],
            adds: vec![ek(41, 0, 0, 0)],
            deletes: vec![],
        },
    ]
}

#[test]
fn mapstate_test_go_accumulate_map_changes_deny() {
    run(deny_cases(), |_| PolicyFeatures::DENY);
}

fn accumulate_cases() -> Vec<Case> {
    let af = AuthType::ALWAYS_FAIL;
    let sp = AuthType::SPIRE;
    let redirect_auth_states_5b = || {
        vec![
            (ek(43, 6, 0, 0), http1()),
            (ek(43, 6, 80, 16), explicit(http1(), sp)),
            (ek(43, 6, 81, 16), explicit(http1(), sp)),
        ]
    };
    let states_5c = || {
        vec![
            (ek(43, 6, 0, 0), crd1()),
            (ek(43, 6, 80, 12), http1()),
            (ek(43, 6, 80, 16), explicit(http1(), sp)),
            (ek(43, 6, 81, 16), explicit(http1(), sp)),
        ]
    };
    let states_5d = || {
        vec![
            (ek(43, 6, 0, 0), http1()),
            (ek(43, 6, 80, 12), explicit(http1(), sp)),
            (ek(43, 6, 80, 16), explicit(http1(), sp)),
            (ek(43, 6, 81, 16), explicit(http1(), sp)),
        ]
    };
    let states_5e = || {
        vec![
            (ek(43, 6, 0, 0), http1()),
            (ek(43, 6, 80, 12), explicit(http1(), sp)),
        ]
    };
    let keys_5c = || {
        vec![
            ek(43, 6, 0, 0),
            ek(43, 6, 80, 12),
            ek(43, 6, 80, 16),
            ek(43, 6, 81, 16),
        ]
    };
    vec![
        Case {
            name: "test-2a - Adding 2 identities, and deleting a nonexisting key on an empty state",
            continued: false,
            setup: vec![],
            args: vec![arg(&[42, 43], &[50]).pp(6, 80).ingress()],
            state: vec![(http_ingress(42), allow()), (http_ingress(43), allow())],
            adds: vec![http_ingress(42), http_ingress(43)],
            deletes: vec![],
        },
        Case {
            name: "test-2b - Adding Bar also selecting 42",
            continued: true,
            setup: vec![],
            args: vec![arg(&[42, 44], &[]).pp(6, 80).ingress()],
            state: vec![
                (http_ingress(42), allow()),
                (http_ingress(43), allow()),
                (http_ingress(44), allow()),
            ],
            adds: vec![http_ingress(44)],
            deletes: vec![],
        },
        Case {
            name: "test-2c - Deleting 42",
            continued: true,
            setup: vec![],
            args: vec![
                arg(&[], &[42]).pp(6, 80).ingress(),
                arg(&[], &[42]).pp(6, 80).ingress(),
            ],
            state: vec![(http_ingress(43), allow()), (http_ingress(44), allow())],
            adds: vec![],
            deletes: vec![http_ingress(42)],
        },
        Case {
            name: "test-2f - Adding an entry that already exists, no adds",
            continued: true,
            setup: vec![],
            args: vec![arg(&[44], &[]).pp(6, 80).ingress()],
            state: vec![(http_ingress(43), allow()), (http_ingress(44), allow())],
            adds: vec![],
            deletes: vec![],
        },
        Case {
            name: "test-3a - egress HTTP proxy (setup)",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[0], &[]).ingress(),
                arg(&[1], &[]).ingress(),
                arg(&[42], &[]).pp(17, 53),
                arg(&[42], &[]).pp(6, 53),
            ],
            state: vec![
                (any_ingress(), allow()),
                (host_ingress(), allow()),
                (dns_udp_egress(42), allow()),
                (dns_tcp_egress(42), allow()),
            ],
            adds: vec![
                any_ingress(),
                host_ingress(),
                dns_udp_egress(42),
                dns_tcp_egress(42),
            ],
            deletes: vec![],
        },
        Case {
            name: "test-3b - egress HTTP proxy (incremental update)",
            continued: true,
            setup: vec![],
            args: vec![arg(&[43], &[]).pp(6, 80).redirect(HTTP)],
            state: vec![
                (any_ingress(), allow()),
                (host_ingress(), allow()),
                (dns_udp_egress(42), allow()),
                (dns_tcp_egress(42), allow()),
                (http_egress(43), http1()),
            ],
            adds: vec![http_egress(43)],
            deletes: vec![],
        },
        Case {
            name: "test-4a - Add & delete; delete cancels the add in reply",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[44], &[]).pp(6, 80).redirect(HTTP),
                arg(&[], &[44]).pp(6, 80).redirect(HTTP),
            ],
            state: vec![],
            adds: vec![],
            deletes: vec![],
        },
        Case {
            name: "test-4b - Add, delete, & add; delete suppressed",
            continued: true,
            setup: vec![],
            args: vec![
                arg(&[44], &[]).pp(6, 80).redirect(HTTP),
                arg(&[], &[44]).pp(6, 80).redirect(HTTP),
                arg(&[44], &[]).pp(6, 80).redirect(HTTP),
            ],
            state: vec![(http_egress(44), http1())],
            adds: vec![http_egress(44)],
            deletes: vec![],
        },
        Case {
            name: "test-4c - Later order deny all does not prevent allow",
            continued: true,
            setup: vec![],
            args: vec![arg(&[0], &[]).level(2).deny()],
            state: vec![
                (any_egress(), leveled(deny(), 2)),
                (http_egress(44), http1()),
            ],
            adds: vec![any_egress()],
            deletes: vec![],
        },
        Case {
            name: "test-4d - Later order deny does not override allow",
            continued: true,
            setup: vec![],
            args: vec![arg(&[44], &[]).pp(6, 0).level(1).deny()],
            state: vec![
                (any_egress(), leveled(deny(), 2)),
                (tcp_egress(44), leveled(deny(), 1)),
                (http_egress(44), http1()),
            ],
            adds: vec![tcp_egress(44)],
            deletes: vec![],
        },
        Case {
            name: "test-4e - deleting 0-order allow leaves the deny in place",
            continued: true,
            setup: vec![],
            args: vec![
                arg(&[], &[44]).pp(6, 80).redirect(HTTP),
                arg(&[43], &[]).pp(6, 80).level(1).deny(),
            ],
            state: vec![
                (any_egress(), leveled(deny(), 2)),
                (tcp_egress(44), leveled(deny(), 1)),
                (http_egress(43), leveled(deny(), 1)),
            ],
            adds: vec![http_egress(43)],
            deletes: vec![http_egress(44)],
        },
        Case {
            name: "test-4f - earlier order allow overrides later order deny",
            continued: true,
            setup: vec![],
            args: vec![arg(&[43], &[]).pp(6, 80).redirect(HTTP)],
            state: vec![
                (any_egress(), leveled(deny(), 2)),
                (tcp_egress(44), leveled(deny(), 1)),
                (http_egress(43), http1()),
            ],
            adds: vec![http_egress(43)],
            deletes: vec![],
        },
        Case {
            name: "test-5a - auth type propagation from the most specific covering key",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).auth(ALWAYS_FAIL),
                arg(&[0], &[]).pp(6, 0).auth(SPIRE),
                arg(&[43], &[]).pp(6, 80).redirect(HTTP),
            ],
            state: vec![
                (ek(43, 0, 0, 0), explicit(allow(), af)),
                (ek(0, 6, 0, 0), explicit(allow(), sp)),
                (ek(43, 6, 80, 0), derived(http1(), af)),
            ],
            adds: vec![ek(43, 0, 0, 0), ek(0, 6, 0, 0), ek(43, 6, 80, 0)],
            deletes: vec![],
        },
        Case {
            name: "test-5a-r - auth type propagation from the most specific covering key - reverse",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 80).redirect(HTTP),
                arg(&[0], &[]).pp(6, 0).auth(SPIRE),
                arg(&[43], &[]).auth(ALWAYS_FAIL),
            ],
            state: vec![
                (ek(43, 0, 0, 0), explicit(allow(), af)),
                (ek(0, 6, 0, 0), explicit(allow(), sp)),
                (ek(43, 6, 80, 0), derived(http1(), af)),
            ],
            adds: vec![ek(43, 0, 0, 0), ek(0, 6, 0, 0), ek(43, 6, 80, 0)],
            deletes: vec![],
        },
        Case {
            name: "test-5b - higher priority proxy port override with auth entries",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 0).redirect(HTTP),
                arg(&[43], &[]).pp(6, 80).prefix(12).redirect(CRD),
                arg(&[43], &[]).pp(6, 80).prefix(16).auth(SPIRE),
                arg(&[43], &[]).pp(6, 81).prefix(16).auth(SPIRE),
            ],
            state: redirect_auth_states_5b(),
            adds: vec![ek(43, 6, 0, 0), ek(43, 6, 80, 16), ek(43, 6, 81, 16)],
            deletes: vec![],
        },
        Case {
            name: "test-5b-r - higher priority proxy port override with auth entries - reverse",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 80).prefix(16).auth(SPIRE),
                arg(&[43], &[]).pp(6, 80).prefix(12).redirect(HTTP),
            ],
            state: vec![
                (ek(43, 6, 80, 12), http1()),
                (ek(43, 6, 80, 0), explicit(http1(), sp)),
            ],
            adds: vec![ek(43, 6, 80, 12), ek(43, 6, 80, 0)],
            deletes: vec![],
        },
        Case {
            name: "test-5c - higher priority proxy port not overridden with auth entries",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 0).redirect(CRD),
                arg(&[43], &[]).pp(6, 80).prefix(12).redirect(HTTP),
                arg(&[43], &[]).pp(6, 80).prefix(16).auth(SPIRE),
                arg(&[43], &[]).pp(6, 81).prefix(16).auth(SPIRE),
            ],
            state: states_5c(),
            adds: keys_5c(),
            deletes: vec![],
        },
        Case {
            name: "test-5c-r - higher priority proxy port not overridden with auth entries - reverse",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 81).prefix(16).auth(SPIRE),
                arg(&[43], &[]).pp(6, 80).prefix(16).auth(SPIRE),
                arg(&[43], &[]).pp(6, 80).prefix(12).redirect(HTTP),
                arg(&[43], &[]).pp(6, 0).redirect(CRD),
            ],
            state: states_5c(),
            adds: keys_5c(),
            deletes: vec![],
        },
        Case {
            name: "test-5d - higher priority proxy port propagation to auth entries",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 0).redirect(HTTP),
                arg(&[43], &[])
                    .pp(6, 80)
                    .prefix(12)
                    .redirect(CRD)
                    .auth(SPIRE),
                arg(&[43], &[]).pp(6, 80).prefix(16).auth(SPIRE),
                arg(&[43], &[]).pp(6, 81).prefix(16).auth(SPIRE),
            ],
            state: states_5d(),
            adds: keys_5c(),
            deletes: vec![],
        },
        Case {
            name: "test-5d-r - higher priority proxy port propagation to auth entries - reverse",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 81).prefix(16).auth(SPIRE),
                arg(&[43], &[]).pp(6, 80).prefix(16).auth(SPIRE),
                arg(&[43], &[])
                    .pp(6, 80)
                    .prefix(12)
                    .redirect(CRD)
                    .auth(SPIRE),
                arg(&[43], &[]).pp(6, 0).redirect(HTTP),
            ],
            state: states_5d(),
            adds: keys_5c(),
            deletes: vec![],
        },
        Case {
            name: "test-5e - higher priority proxy port propagation to auth proxy entry",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 0).redirect(HTTP),
                arg(&[43], &[])
                    .pp(6, 80)
                    .prefix(12)
                    .redirect(CRD)
                    .auth(SPIRE),
                arg(&[43], &[]).pp(6, 80).prefix(16),
                arg(&[43], &[]).pp(6, 81).prefix(16),
            ],
            state: states_5e(),
            adds: vec![ek(43, 6, 0, 0), ek(43, 6, 80, 12)],
            deletes: vec![],
        },
        Case {
            name: "test-5e-r - higher priority proxy port propagation to auth proxy entry - reverse",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 81).prefix(16),
                arg(&[43], &[]).pp(6, 80).prefix(16),
                arg(&[43], &[])
                    .pp(6, 80)
                    .prefix(12)
                    .redirect(CRD)
                    .auth(SPIRE),
                arg(&[43], &[]).pp(6, 0).redirect(HTTP),
            ],
            state: states_5e(),
            adds: vec![ek(43, 6, 0, 0), ek(43, 6, 80, 12)],
            deletes: vec![],
        },
        Case {
            name: "test-6a - L3-only explicit auth type and L4-only without",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).auth(SPIRE),
                arg(&[0], &[]).pp(6, 80).redirect(HTTP),
            ],
            state: vec![
                (ek(43, 0, 0, 0), explicit(allow(), sp)),
                (ek(0, 6, 80, 0), http1()),
            ],
            adds: vec![ek(43, 0, 0, 0), ek(0, 6, 80, 0)],
            deletes: vec![],
        },
        Case {
            name: "test-6a-r - L3-only explicit auth type and L4-only without - reverse",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[0], &[]).pp(6, 80).redirect(HTTP),
                arg(&[43], &[]).auth(SPIRE),
            ],
            state: vec![
                (ek(43, 0, 0, 0), explicit(allow(), sp)),
                (ek(0, 6, 80, 0), http1()),
            ],
            adds: vec![ek(43, 0, 0, 0), ek(0, 6, 80, 0)],
            deletes: vec![],
        },
        Case {
            name: "test-7a - L3/proto explicit auth type and L4-only without",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[43], &[]).pp(6, 0).auth(SPIRE),
                arg(&[0], &[]).pp(6, 80).redirect(HTTP),
            ],
            state: vec![
                (ek(43, 6, 0, 0), explicit(allow(), sp)),
                (ek(0, 6, 80, 0), http1()),
            ],
            adds: vec![ek(43, 6, 0, 0), ek(0, 6, 80, 0)],
            deletes: vec![],
        },
        Case {
            name: "test-7a-1 - L3/proto explicit auth type and L4-only without - reverse",
            continued: false,
            setup: vec![],
            args: vec![
                arg(&[0], &[]).pp(6, 80).redirect(HTTP),
                arg(&[43], &[]).pp(6, 0).auth(SPIRE),
            ],
            state: vec![
                (ek(43, 6, 0, 0), explicit(allow(), sp)),
                (ek(0, 6, 80, 0), http1()),
            ],
            adds: vec![ek(43, 6, 0, 0), ek(0, 6, 80, 0)],
            deletes: vec![],
        },
    ]
}

#[test]
fn mapstate_test_go_accumulate_map_changes() {
    let all = PolicyFeatures::AUTH | PolicyFeatures::DENY | PolicyFeatures::REDIRECT;
    run(accumulate_cases(), |_| all);
}

#[test]
fn mapstate_test_go_accumulate_map_changes_without_auth_feature() {
    run(accumulate_cases(), |auth_used| {
        let features = PolicyFeatures::DENY | PolicyFeatures::REDIRECT;
        if auth_used {
            features | PolicyFeatures::AUTH
        } else {
            features
        }
    });
}
