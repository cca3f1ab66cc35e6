//! `TestMapState_insertWithChanges` of Cilium's `pkg/policy/mapstate_test.go`,
//! re-expressed case by case (same names). Cilium runs every case with
//! `denyRules` as the features; so do we. The Go map literal of test-10a/b
//! lists the same key twice; the later value (the deny) is what Go keeps, so
//! that is the initial state here.

use super::*;

struct Case {
    name: &'static str,
    initial: Vec<(Key, Entry)>,
    key: Key,
    entry: Entry,
    want: Vec<(Key, Entry)>,
    adds: Vec<Key>,
    deletes: Vec<Key>,
    old: Vec<(Key, Entry)>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "test-1 - no KV added, map should remain the same",
            initial: vec![(Key::ingress(), allow())],
            key: Key::ingress(),
            entry: allow(),
            want: vec![(Key::ingress(), allow())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-2a - L3 allow KV should not overwrite deny entry",
            initial: vec![(ik(1, 3, 80, 0), deny())],
            key: il3(1),
            entry: allow(),
            want: vec![(il3(1), allow()), (ik(1, 3, 80, 0), deny())],
            adds: vec![il3(1)],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-2b - L3 port-range allow KV should not overwrite deny entry",
            initial: vec![(ik(1, 3, 80, 0), deny())],
            key: ik(1, 3, 64, 10),
            entry: allow(),
            want: vec![(ik(1, 3, 64, 10), allow()), (ik(1, 3, 80, 0), deny())],
            adds: vec![ik(1, 3, 64, 10)],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-3a - L3-L4 allow KV should not overwrite deny entry",
            initial: vec![(ik(1, 3, 80, 0), deny())],
            key: ik(1, 3, 80, 0),
            entry: allow(),
            want: vec![(ik(1, 3, 80, 0), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-3b - L3-L4 port-range allow KV should not overwrite deny entry",
            initial: vec![(ik(1, 3, 64, 10), deny())],
            key: ik(1, 3, 64, 10),
            entry: allow(),
            want: vec![(ik(1, 3, 64, 10), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-4a - L3-L4 deny KV should overwrite allow entry",
            initial: vec![(ik(1, 3, 80, 0), allow())],
            key: ik(1, 3, 80, 0),
            entry: deny(),
            want: vec![(ik(1, 3, 80, 0), deny())],
            adds: vec![ik(1, 3, 80, 0)],
            deletes: vec![],
            old: vec![(ik(1, 3, 80, 0), allow())],
        },
        Case {
            name: "test-4b - L3-L4 port-range deny KV should overwrite allow entry",
            initial: vec![(ik(1, 3, 80, 0), allow())],
            key: ik(1, 3, 64, 10),
            entry: deny(),
            want: vec![(ik(1, 3, 64, 10), deny())],
            adds: vec![ik(1, 3, 64, 10)],
            deletes: vec![ik(1, 3, 80, 0)],
            old: vec![(ik(1, 3, 80, 0), allow())],
        },
        Case {
            name: "test-5a - L3 deny KV should overwrite all L3-L4 allow and L3 allow entries for the same L3",
            initial: vec![
                (ik(1, 3, 80, 0), allow()),
                (il3(1), allow()),
                (ik(2, 3, 80, 0), allow()),
                (il3(2), allow()),
            ],
            key: il3(1),
            entry: deny(),
            want: vec![
                (il3(1), deny()),
                (ik(2, 3, 80, 0), allow()),
                (il3(2), allow()),
            ],
            adds: vec![il3(1)],
            deletes: vec![ik(1, 3, 80, 0)],
            old: vec![(il3(1), allow()), (ik(1, 3, 80, 0), allow())],
        },
        Case {
            name: "test-5b - L3 port-range deny KV should overwrite all L3-L4 allow and L3 allow entries for the same L3",
            initial: vec![
                (ik(1, 3, 80, 0), allow()),
                (ik(1, 3, 64, 10), allow()),
                (ik(2, 3, 80, 0), allow()),
                (ik(2, 3, 64, 10), allow()),
            ],
            key: ik(1, 3, 64, 10),
            entry: deny(),
            want: vec![
                (ik(1, 3, 64, 10), deny()),
                (ik(2, 3, 80, 0), allow()),
                (ik(2, 3, 64, 10), allow()),
            ],
            adds: vec![ik(1, 3, 64, 10)],
            deletes: vec![ik(1, 3, 80, 0)],
            old: vec![(ik(1, 3, 64, 10), allow()), (ik(1, 3, 80, 0), allow())],
        },
        Case {
            name: "test-6a - L3 egress deny KV should not overwrite any existing ingress allow",
            initial: vec![
                (ik(1, 3, 80, 0), allow()),
                (il3(1), allow()),
                (ik(2, 3, 80, 0), allow()),
                (il3(2), allow()),
            ],
            key: el3(1),
            entry: deny(),
            want: vec![
                (ik(1, 3, 80, 0), allow()),
                (il3(1), allow()),
                (el3(1), deny()),
                (ik(2, 3, 80, 0), allow()),
                (il3(2), allow()),
            ],
            adds: vec![el3(1)],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-6b - L3 egress port-range deny KV should not overwrite any existing ingress allow",
            initial: vec![
                (ik(1, 3, 80, 0), allow()),
                (ik(1, 3, 64, 10), allow()),
                (ik(2, 3, 80, 0), allow()),
                (ik(2, 3, 64, 10), allow()),
            ],
            key: ek(1, 3, 64, 10),
            entry: deny(),
            want: vec![
                (ik(1, 3, 80, 0), allow()),
                (ik(1, 3, 64, 10), allow()),
                (ek(1, 3, 64, 10), deny()),
                (ik(2, 3, 80, 0), allow()),
                (ik(2, 3, 64, 10), allow()),
            ],
            adds: vec![ek(1, 3, 64, 10)],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-7a - L3 ingress deny KV should not be overwritten by a L3-L4 ingress allow",
            initial: vec![(il3(1), deny())],
            key: ik(1, 3, 80, 0),
            entry: allow(),
            want: vec![(il3(1), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-7b - L3 ingress deny KV should not be overwritten by a L3-L4 port-range ingress allow",
            initial: vec![(il3(1), deny())],
            key: ik(1, 3, 64, 10),
            entry: allow(),
            want: vec![(il3(1), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-8a - L3 ingress deny KV should not be overwritten by a L3-L4-L7 ingress allow",
            initial: vec![(il3(1), deny())],
            key: ik(1, 3, 80, 0),
            entry: proxy_prio(8080, 0),
            want: vec![(il3(1), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-8b - L3 ingress deny KV should not be overwritten by a L3-L4-L7 port-range ingress allow",
            initial: vec![(il3(1), deny())],
            key: ik(1, 3, 64, 10),
            entry: proxy_prio(8080, 0),
            want: vec![(il3(1), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-9a - L3 ingress deny KV should overwrite a L3-L4-L7 ingress allow",
            initial: vec![(ik(1, 3, 80, 0), http(8080))],
            key: il3(1),
            entry: deny(),
            want: vec![(il3(1), deny())],
            adds: vec![il3(1)],
            deletes: vec![ik(1, 3, 80, 0)],
            old: vec![(ik(1, 3, 80, 0), http(8080))],
        },
        Case {
            name: "test-9b - L3 ingress deny KV should overwrite a L3-L4-L7 port-range ingress allow",
            initial: vec![(ik(1, 3, 64, 10), http(8080))],
            key: il3(1),
            entry: deny(),
            want: vec![(il3(1), deny())],
            adds: vec![il3(1)],
            deletes: vec![ik(1, 3, 64, 10)],
            old: vec![(ik(1, 3, 64, 10), http(8080))],
        },
        Case {
            name: "test-10a - L3 ingress deny KV should overwrite a L3-L4-L7 ingress allow and a L3-L4 deny",
            initial: vec![(ik(1, 3, 80, 0), deny())],
            key: il3(1),
            entry: deny(),
            want: vec![(il3(1), deny())],
            adds: vec![il3(1)],
            deletes: vec![ik(1, 3, 80, 0)],
            old: vec![(ik(1, 3, 80, 0), deny())],
        },
        Case {
            name: "test-10b - L3 ingress deny KV should overwrite a L3-L4-L7 port-range ingress allow and a L3-L4 port-range deny",
            initial: vec![(ik(1, 3, 64, 10), deny())],
            key: il3(1),
            entry: deny(),
            want: vec![(il3(1), deny())],
            adds: vec![il3(1)],
            deletes: vec![ik(1, 3, 64, 10)],
            old: vec![(ik(1, 3, 64, 10), deny())],
        },
        Case {
            name: "test-11a - L3 ingress allow should not be allowed if there is a L3 'all' deny",
            initial: vec![(ek(1, 3, 80, 0), http(8080)), (Key::ingress(), deny())],
            key: il3(100),
            entry: allow(),
            want: vec![(ek(1, 3, 80, 0), http(8080)), (Key::ingress(), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-11b - L3 ingress allow should not be allowed if there is a L3 'all' deny",
            initial: vec![(ek(1, 3, 64, 10), http(8080)), (Key::ingress(), deny())],
            key: ik(100, 0, 0, 0),
            entry: allow(),
            want: vec![(ek(1, 3, 64, 10), http(8080)), (Key::ingress(), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-12a - inserting a L3 'all' deny should delete all entries for that direction",
            initial: vec![
                (ik(1, 3, 80, 0), http(8080)),
                (ik(1, 3, 5, 0), http(8080)),
                (ek(100, 3, 5, 0), http(8080)),
            ],
            key: Key::ingress(),
            entry: deny(),
            want: vec![(Key::ingress(), deny()), (ek(100, 3, 5, 0), http(8080))],
            adds: vec![Key::ingress()],
            deletes: vec![ik(1, 3, 80, 0), ik(1, 3, 5, 0)],
            old: vec![(ik(1, 3, 80, 0), http(8080)), (ik(1, 3, 5, 0), http(8080))],
        },
        Case {
            name: "test-12b - inserting a L3 'all' deny should delete all entries for that direction (including port ranges)",
            initial: vec![
                (ik(1, 3, 64, 10), http(8080)),
                (ik(1, 3, 4, 14), http(8080)),
                (ek(100, 3, 4, 14), http(8080)),
            ],
            key: Key::ingress(),
            entry: deny(),
            want: vec![(Key::ingress(), deny()), (ek(100, 3, 4, 14), http(8080))],
            adds: vec![Key::ingress()],
            deletes: vec![ik(1, 3, 64, 10), ik(1, 3, 4, 14)],
            old: vec![
                (ik(1, 3, 64, 10), http(8080)),
                (ik(1, 3, 4, 14), http(8080)),
            ],
        },
        Case {
            name: "test-13a - L3-L4-L7 ingress allow should overwrite a L3-L4-L7 ingress allow due to lower priority",
            initial: vec![(ik(1, 3, 80, 0), http(8080))],
            key: ik(1, 3, 80, 0),
            entry: proxy_prio(9090, 1),
            want: vec![(ik(1, 3, 80, 0), proxy_prio(9090, 1))],
            adds: vec![ik(1, 3, 80, 0)],
            deletes: vec![],
            old: vec![(ik(1, 3, 80, 0), http(8080))],
        },
        Case {
            name: "test-13b - L3-L4-L7 port-range ingress allow should overwrite a L3-L4-L7 port-range ingress allow due to lower priority",
            initial: vec![(ik(1, 3, 64, 10), http(8080))],
            key: ik(1, 3, 64, 10),
            entry: proxy_prio(9090, 1),
            want: vec![(ik(1, 3, 64, 10), proxy_prio(9090, 1))],
            adds: vec![ik(1, 3, 64, 10)],
            deletes: vec![],
            old: vec![(ik(1, 3, 64, 10), http(8080))],
        },
        Case {
            name: "test-14a - L3-L4-L7 ingress allow should overwrite a L3-L4-L7 ingress allow due to higher priority on the same port",
            initial: vec![(ik(1, 3, 80, 0), http(8080))],
            key: ik(1, 3, 80, 0),
            entry: proxy_prio(8080, 1),
            want: vec![(ik(1, 3, 80, 0), proxy_prio(8080, 1))],
            adds: vec![ik(1, 3, 80, 0)],
            deletes: vec![],
            old: vec![(ik(1, 3, 80, 0), http(8080))],
        },
        Case {
            name: "test-14b - L3-L4-L7 port-range ingress allow should overwrite a L3-L4-L7 port-range ingress allow due to higher priority on the same port",
            initial: vec![(ik(1, 3, 64, 10), http(8080))],
            key: ik(1, 3, 64, 10),
            entry: proxy_prio(8080, 1),
            want: vec![(ik(1, 3, 64, 10), proxy_prio(8080, 1))],
            adds: vec![ik(1, 3, 64, 10)],
            deletes: vec![],
            old: vec![(ik(1, 3, 64, 10), http(8080))],
        },
        Case {
            name: "test-14c - L3-L4 ingress allow should not overwrite a L3-L4-L7 port-range ingress allow on overlapping port",
            initial: vec![(ik(1, 3, 64, 10), http(8080))],
            key: ik(1, 3, 80, 16),
            entry: allow(),
            want: vec![(ik(1, 3, 64, 10), http(8080))],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-15a - L3 port-range allow KV should not overwrite a wildcard deny entry",
            initial: vec![(ik(0, 3, 80, 0), deny())],
            key: ik(1, 3, 64, 10),
            entry: allow(),
            want: vec![(ik(1, 3, 64, 10), allow()), (ik(0, 3, 80, 0), deny())],
            adds: vec![ik(1, 3, 64, 10)],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-15b-reverse - L3 port-range allow KV should not overwrite a wildcard deny entry",
            initial: vec![(ik(1, 3, 64, 10), allow())],
            key: ik(0, 3, 80, 0),
            entry: deny(),
            want: vec![(ik(1, 3, 64, 10), allow()), (ik(0, 3, 80, 0), deny())],
            adds: vec![ik(0, 3, 80, 16)],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-16a - No added entry for L3 port-range allow + wildcard allow entry",
            initial: vec![(ik(0, 3, 80, 0), http(8080))],
            key: ik(1, 3, 64, 10),
            entry: allow(),
            want: vec![(ik(0, 3, 80, 0), http(8080)), (ik(1, 3, 64, 10), allow())],
            adds: vec![ik(1, 3, 64, 10)],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-17 - Added entry for wildcarded port for the specified protocol",
            initial: vec![],
            key: ik(1, 2, 0, 0),
            entry: allow(),
            want: vec![(ik(1, 2, 0, 0), allow())],
            adds: vec![ik(1, 2, 0, 0)],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-18 - Wildcard port entry should not overwrite deny entry",
            initial: vec![(ik(1, 2, 0, 0), deny())],
            key: ik(1, 2, 0, 0),
            entry: allow(),
            want: vec![(ik(1, 2, 0, 0), deny())],
            adds: vec![],
            deletes: vec![],
            old: vec![],
        },
        Case {
            name: "test-18 - Deny entry overwrites allow wildcard port entry",
            initial: vec![(ik(1, 2, 0, 0), allow())],
            key: ik(1, 2, 0, 0),
            entry: deny(),
            want: vec![(ik(1, 2, 0, 0), deny())],
            adds: vec![ik(1, 2, 0, 0)],
            deletes: vec![],
            old: vec![(ik(1, 2, 0, 0), allow())],
        },
    ]
}

#[test]
fn mapstate_test_go_insert_with_changes() {
    let all = cases();
    assert_eq!(all.len(), 34, "TestMapState_insertWithChanges has 34 cases");
    for case in all {
        let mut ms = state(&case.initial);
        let changes = ms
            .insert_with_features(case.key, case.entry.clone(), PolicyFeatures::DENY)
            .unwrap();
        assert_eq!(ms, state(&case.want), "{}: map state", case.name);
        assert_eq!(
            changes.adds,
            case.adds.iter().copied().collect::<BTreeSet<_>>(),
            "{}: adds",
            case.name
        );
        assert_eq!(
            changes.deletes,
            case.deletes.iter().copied().collect::<BTreeSet<_>>(),
            "{}: deletes",
            case.name
        );
        assert_eq!(
            changes.old,
            case.old.iter().cloned().collect::<BTreeMap<_, _>>(),
            "{}: old values",
            case.name
        );
    }
}

// docs/semantics.md §4.6 consequences: Test_MergeRules #3, #6, #12 and #18 at the
// map level (the resolve stage produces these keys; precedence is ours).
#[test]
fn merge_rules_consequences() {
    const FOO: u32 = 100;
    let tcp80 = |id: u32| ik(id, 6, 80, 16);
    // #3: L3-only allow of foo + L4-only TCP/80 allow coexist.
    let mut ms = MapState::new();
    ms.insert_with_features(il3(FOO), allow(), PolicyFeatures::NONE)
        .unwrap();
    ms.insert_with_features(tcp80(0), allow(), PolicyFeatures::NONE)
        .unwrap();
    assert_eq!(ms, state(&[(il3(FOO), allow()), (tcp80(0), allow())]));
    // #12: an L4-only redirect suppresses foo's plain L3L4 allow on the same
    // port, in either order (redirect feature present).
    for reverse in [false, true] {
        let mut ms = MapState::new();
        let inserts = [(tcp80(0), http(1)), (tcp80(FOO), allow())];
        let order: Vec<_> = if reverse {
            inserts.iter().rev().collect()
        } else {
            inserts.iter().collect()
        };
        for (k, e) in order {
            ms.insert_with_features(*k, e.clone(), PolicyFeatures::REDIRECT)
                .unwrap();
        }
        assert_eq!(ms, state(&[(tcp80(0), http(1))]), "reverse={reverse}");
        assert_eq!(
            flow(&ms, Direction::Ingress, FOO, 6, 80),
            Verdict::Redirect { proxy_port: 1 }
        );
    }
    // #18: foo's redirect and the plain L4-only allow both stay.
    let mut ms = MapState::new();
    ms.insert_with_features(tcp80(FOO), http(1), PolicyFeatures::REDIRECT)
        .unwrap();
    ms.insert_with_features(tcp80(0), allow(), PolicyFeatures::REDIRECT)
        .unwrap();
    assert_eq!(ms, state(&[(tcp80(0), allow()), (tcp80(FOO), http(1))]));
    assert_eq!(
        flow(&ms, Direction::Ingress, FOO, 6, 80),
        Verdict::Redirect { proxy_port: 1 }
    );
    assert_eq!(flow(&ms, Direction::Ingress, FOO + 1, 6, 80), ALLOW);
}

// distillery_test.go TestEgressPortRangePrecedence (docs/semantics.md §6), at the
// map level: A→B egress TCP, B = 200.
#[test]
fn egress_port_range_precedence() {
    const B: u32 = 200;
    let eg = Direction::Egress;
    let insert_range = |ms: &mut MapState, start: u16, end: u16, entry: &Entry| {
        for block in port_range_to_masked_ports(start, end) {
            let key = Key::egress()
                .with_identity(id(B))
                .with_masked_port(6, block)
                .unwrap();
            ms.insert_with_features(key, entry.clone(), PolicyFeatures::DENY)
                .unwrap();
        }
    };
    // 1. allow 80, deny 1-1024 → 79..81 and 1023..1025 denied.
    let mut ms = MapState::new();
    insert_range(&mut ms, 80, 80, &allow());
    insert_range(&mut ms, 1, 1024, &deny());
    for port in [79, 80, 81, 1023, 1024] {
        assert_eq!(flow(&ms, eg, B, 6, port), DENIED, "case 1 port {port}");
    }
    assert_eq!(flow(&ms, eg, B, 6, 1025), NO_ENTRY);
    // 2. deny 80, allow 1-1024 → 1, 2, 1023, 1024 allowed; 1025, 1026 denied.
    let mut ms = MapState::new();
    insert_range(&mut ms, 80, 80, &deny());
    insert_range(&mut ms, 1, 1024, &allow());
    for port in [1, 2, 1023, 1024] {
        assert_eq!(flow(&ms, eg, B, 6, port), ALLOW, "case 2 port {port}");
    }
    assert_eq!(flow(&ms, eg, B, 6, 80), DENIED);
    assert!(!flow(&ms, eg, B, 6, 1025).is_allowed());
    assert!(!flow(&ms, eg, B, 6, 1026).is_allowed());
    // 3. allow 80-90 and 90-100, deny 85-95.
    let mut ms = MapState::new();
    insert_range(&mut ms, 80, 90, &allow());
    insert_range(&mut ms, 90, 100, &allow());
    insert_range(&mut ms, 85, 95, &deny());
    for port in 80..=100 {
        let expected = if (85..=95).contains(&port) {
            DENIED
        } else {
            ALLOW
        };
        assert_eq!(flow(&ms, eg, B, 6, port), expected, "case 3 port {port}");
    }
}

// distillery_test.go Test_EnsureDeniesPrecedeAllows "deny_world_no_labels"
// and "deny_part_of_a_subnet_with_an_ip" at the map level (IPv4-only world
// selections 2, 9, 10 plus the CIDR identities).
#[test]
fn ensure_denies_precede_allows() {
    let ip = Identity::local(16324).unwrap().get(); // 192.0.2.3/32
    let subnet = Identity::local(16325).unwrap().get(); // 192.0.2.0/24
    // deny_world_no_labels: allow-all ingress + deny world (both directions)
    // + allow 192.0.2.3/32.
    let mut ms = MapState::new();
    ms.upsert(Key::ingress(), allow()).unwrap();
    for dir in Direction::ALL {
        for world in [2, 9, 10, subnet, ip] {
            ms.insert_with_features(
                Key::for_direction(dir).with_identity(id(world)),
                deny(),
                PolicyFeatures::DENY,
            )
            .unwrap();
        }
        ms.insert_with_features(
            Key::for_direction(dir).with_identity(id(ip)),
            allow(),
            PolicyFeatures::DENY,
        )
        .unwrap();
    }
    let mut want = vec![(Key::ingress(), allow())];
    for dir in Direction::ALL {
        for world in [2, 9, 10, subnet, ip] {
            want.push((Key::for_direction(dir).with_identity(id(world)), deny()));
        }
    }
    assert_eq!(ms, state(&want));

    // deny_part_of_a_subnet_with_an_ip: deny /32, allow /24 (selects both).
    let mut ms = MapState::new();
    for dir in Direction::ALL {
        let key = |n: u32| Key::for_direction(dir).with_identity(id(n));
        ms.insert_with_features(key(ip), deny(), PolicyFeatures::DENY)
            .unwrap();
        for n in [subnet, ip] {
            ms.insert_with_features(key(n), allow(), PolicyFeatures::DENY)
                .unwrap();
        }
    }
    let mut want = vec![];
    for dir in Direction::ALL {
        want.push((Key::for_direction(dir).with_identity(id(ip)), deny()));
        want.push((Key::for_direction(dir).with_identity(id(subnet)), allow()));
    }
    assert_eq!(ms, state(&want));
}

// Documentation/security/policy/language.rst "Deny Policies" table
// (docs/semantics.md §6), at the map level for the server's ingress: the client
// is allowed L7 HTTP on 80, plain 81 and L3; a deny on 80 wins on 80 only;
// adding an L3 deny of the client denies everything.
#[test]
fn language_rst_deny_policies_table() {
    const CLIENT: u32 = 1000;
    let features = PolicyFeatures::DENY | PolicyFeatures::REDIRECT;
    let mut ms = MapState::new();
    for (key, entry) in [
        (ik(CLIENT, 6, 80, 16), http(15001)),
        (ik(CLIENT, 6, 81, 16), allow()),
        (il3(CLIENT), allow()),
        (ik(CLIENT, 6, 80, 16), deny()),
    ] {
        ms.insert_with_features(key, entry, features).unwrap();
    }
    let ing = Direction::Ingress;
    assert_eq!(flow(&ms, ing, CLIENT, 6, 81), ALLOW, "curl :81");
    assert_eq!(flow(&ms, ing, CLIENT, 6, 80), DENIED, "curl :80");
    assert_eq!(flow(&ms, ing, CLIENT, 1, 8), ALLOW, "ping (echo request)");
    ms.insert_with_features(il3(CLIENT), deny(), features)
        .unwrap();
    assert_eq!(ms, state(&[(il3(CLIENT), deny())]));
    for (proto, port) in [(6, 80), (6, 81), (1, 8)] {
        assert_eq!(flow(&ms, ing, CLIENT, proto, port), DENIED);
    }
}
