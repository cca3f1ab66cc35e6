//! `TestMapState_orderedMapStateValidation` of Cilium's
//! `pkg/policy/mapstate_test.go`, the cases without PASS verdicts (porin does
//! not model tiers' PASS). As in Cilium, each tier's entries get priority
//! `basePriority + index`, tiers are inserted in the listed order, every
//! permutation of the entries within each tier is tried (with
//! `orderedRules|denyRules`), and the probes check the verdict (Cilium
//! compares the entry without precedence: allow or deny, or not found).

use super::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Probe {
    Allow,
    Deny,
    NotFound,
}

struct Case {
    name: &'static str,
    tiers: Vec<(u32, Vec<(Key, bool)>)>, // (basePriority, [(key, is_deny)])
    want: Vec<(Key, bool, u32)>,         // (key, is_deny, level)
    probes: Vec<(Key, Probe)>,
}

fn l(n: u32) -> u32 {
    Identity::local(n).unwrap().get()
}

fn leveled(is_deny: bool, level: u32) -> Entry {
    Entry::new(
        Priority::new(level).unwrap(),
        is_deny,
        0,
        ListenerPriority::NONE,
        AuthRequirement::NONE,
    )
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for pos in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(pos, n - 1);
            out.push(p);
        }
    }
    out
}

fn cases() -> Vec<Case> {
    let i1111 = l(1111);
    let i1100 = l(1100);
    let foo = 100;
    let world = 2;
    let subnet = l(192_020);
    let subnet_ip = l(192_023);
    let world_ip = l(192_042);
    use Probe::{Allow, Deny, NotFound};
    vec![
        Case {
            name: "allow one.one.one.one, deny everything else on port 80 TAKE 2",
            tiers: vec![(
                1000,
                vec![
                    (ek(i1111, 6, 80, 0), false),
                    (ek(0, 6, 80, 15), true),
                    (ek(i1111, 0, 0, 0), false),
                ],
            )],
            want: vec![
                (ek(i1111, 6, 80, 0), false, 1000),
                (ek(0, 6, 80, 15), true, 1001),
                (ek(i1111, 0, 0, 0), false, 1002),
            ],
            probes: vec![
                (ek(world, 6, 80, 16), Deny),
                (ek(i1111, 6, 80, 16), Allow),
                (ek(i1111, 6, 81, 16), Deny),
                (ek(i1111, 6, 82, 16), Allow),
            ],
        },
        Case {
            name: "allow one.one.one.one, deny everything else on port 80 TAKE 3a",
            tiers: vec![
                (2000, vec![(ek(0, 6, 80, 16), true)]),
                (1000, vec![(ek(i1111, 6, 80, 15), false)]),
                (3000, vec![(ek(i1111, 0, 0, 0), false)]),
            ],
            want: vec![
                (ek(i1111, 6, 80, 15), false, 1000),
                (ek(0, 6, 80, 16), true, 2000),
                (ek(i1111, 0, 0, 0), false, 3000),
            ],
            probes: vec![
                (ek(world, 6, 80, 16), Deny),
                (ek(i1111, 6, 80, 16), Allow),
                (ek(i1111, 6, 81, 16), Allow),
                (ek(i1111, 6, 82, 16), Allow),
            ],
        },
        Case {
            name: "allow one.one.one.one, deny everything else on port 80 TAKE 3",
            tiers: vec![(
                1000,
                vec![
                    (ek(i1111, 6, 80, 15), false),
                    (ek(0, 6, 80, 16), true),
                    (ek(i1111, 0, 0, 0), false),
                ],
            )],
            want: vec![
                (ek(i1111, 6, 80, 15), false, 1000),
                (ek(0, 6, 80, 16), true, 1001),
                (ek(i1111, 0, 0, 0), false, 1002),
            ],
            probes: vec![
                (ek(world, 6, 80, 16), Deny),
                (ek(i1111, 6, 80, 16), Allow),
                (ek(i1111, 6, 81, 16), Allow),
                (ek(i1111, 6, 82, 16), Allow),
            ],
        },
        Case {
            name: "allow one.one.one.one, deny everything else on port 80 TAKE 4",
            tiers: vec![(
                1000,
                vec![
                    (ek(i1111, 6, 80, 15), false),
                    (ek(0, 6, 80, 10), true),
                    (ek(i1111, 0, 0, 0), false),
                ],
            )],
            want: vec![
                (ek(i1111, 6, 80, 15), false, 1000),
                (ek(0, 6, 80, 10), true, 1001),
                (ek(i1111, 0, 0, 0), false, 1002),
            ],
            probes: vec![
                (ek(world, 6, 80, 16), Deny),
                (ek(i1111, 6, 80, 16), Allow),
                (ek(i1111, 6, 81, 16), Allow),
                (ek(i1111, 6, 82, 16), Deny),
                (ek(i1111, 6, 8080, 16), Allow),
            ],
        },
        Case {
            name: "allow one.one.one.one:80-81, deny everything else on ports 80-81, then allow on 1.1.1.1:*",
            tiers: vec![
                (1000, vec![(ek(i1111, 6, 80, 15), false)]),
                (2000, vec![(ek(0, 6, 80, 15), true)]),
                (3000, vec![(ek(i1111, 0, 0, 0), false)]),
            ],
            want: vec![
                (ek(i1111, 6, 80, 15), false, 1000),
                (ek(0, 6, 80, 15), true, 2000),
                (ek(i1111, 0, 0, 0), false, 3000),
            ],
            probes: vec![
                (ek(world, 6, 80, 16), Deny),
                (ek(i1111, 6, 80, 16), Allow),
                (ek(i1111, 6, 81, 16), Allow),
                (ek(i1111, 6, 82, 16), Allow),
                (ek(i1111, 6, 8080, 16), Allow),
            ],
        },
        Case {
            name: "allow one.one.one.one, deny everything else on port 80",
            tiers: vec![(
                1000,
                vec![
                    (ek(i1111, 6, 80, 0), false),
                    (ek(i1111, 17, 80, 0), false),
                    (ek(0, 6, 80, 0), true),
                    (ek(0, 17, 80, 0), true),
                    (ek(i1100, 0, 0, 0), false),
                    (ek(i1111, 0, 0, 0), false),
                ],
            )],
            want: vec![
                (ek(i1111, 6, 80, 0), false, 1000),
                (ek(i1111, 17, 80, 0), false, 1001),
                (ek(0, 6, 80, 0), true, 1002),
                (ek(0, 17, 80, 0), true, 1003),
                (ek(i1100, 0, 0, 0), false, 1004),
                (ek(i1111, 0, 0, 0), false, 1005),
            ],
            probes: vec![
                (ek(world, 6, 80, 16), Deny),
                (ek(i1111, 6, 80, 16), Allow),
                (ek(i1100, 17, 8080, 16), Allow),
                (ek(i1100, 17, 80, 16), Deny),
            ],
        },
        Case {
            name: "ordered test-1a: earlier order allow takes precedence",
            tiers: vec![(
                1000,
                vec![(ik(foo, 6, 80, 15), false), (ik(0, 6, 80, 0), true)],
            )],
            want: vec![
                (ik(foo, 6, 80, 15), false, 1000),
                (ik(0, 6, 80, 16), true, 1001),
            ],
            probes: vec![
                (ik(world, 17, 8080, 16), NotFound),
                (ik(world, 6, 8080, 16), NotFound),
                (ik(world, 6, 79, 16), NotFound),
                (ik(world, 6, 80, 16), Deny),
                (ik(world, 6, 81, 16), NotFound),
                (ik(world, 6, 82, 16), NotFound),
                (ik(foo, 17, 8080, 16), NotFound),
                (ik(foo, 6, 8080, 16), NotFound),
                (ik(foo, 6, 79, 16), NotFound),
                (ik(foo, 6, 80, 16), Allow),
                (ik(foo, 6, 81, 16), Allow),
                (ik(foo, 6, 82, 16), NotFound),
            ],
        },
        Case {
            name: "ordered test-1b: earlier order allow takes precedence",
            tiers: vec![
                (1000, vec![(il3(foo), false)]),
                (2000, vec![(ik(0, 6, 80, 0), true)]),
            ],
            want: vec![(il3(foo), false, 1000), (ik(0, 6, 80, 0), true, 2000)],
            probes: vec![
                (ik(world, 17, 8080, 16), NotFound),
                (ik(world, 6, 8080, 16), NotFound),
                (ik(world, 6, 80, 16), Deny),
                (ik(foo, 17, 8080, 16), Allow),
                (ik(foo, 6, 8080, 16), Allow),
                (ik(foo, 6, 80, 16), Allow),
            ],
        },
        Case {
            name: "ordered test-2a: earlier order deny takes precedence",
            tiers: vec![
                (1000, vec![(il3(foo), true)]),
                (2000, vec![(ik(0, 6, 0, 0), false)]),
            ],
            want: vec![(il3(foo), true, 1000), (ik(0, 6, 0, 0), false, 2000)],
            probes: vec![
                (ik(world, 17, 8080, 16), NotFound),
                (ik(world, 6, 8080, 16), Allow),
                (ik(world, 6, 80, 16), Allow),
                (ik(foo, 17, 8080, 16), Deny),
                (ik(foo, 6, 8080, 16), Deny),
                (ik(foo, 6, 80, 16), Deny),
                (ek(77, 6, 53, 16), NotFound),
                (ek(77, 6, 443, 16), NotFound),
                (ek(77, 6, 80, 16), NotFound),
                (ek(77, 17, 53, 16), NotFound),
                (ek(77, 17, 443, 16), NotFound),
                (ek(77, 17, 80, 16), NotFound),
            ],
        },
        Case {
            name: "ordered test-3a: CIDR deny with an earlier order allow hole",
            tiers: vec![
                (
                    42000,
                    vec![
                        (ek(subnet_ip, 17, 53, 16), false),
                        (el3(subnet_ip), true),
                        (el3(subnet), true),
                        (el3(world_ip), true),
                        (el3(world), true),
                    ],
                ),
                (65000, vec![(el3(0), true), (el3(0), false)]),
            ],
            want: vec![
                (ek(subnet_ip, 17, 53, 16), false, 42000),
                (el3(subnet_ip), true, 42001),
                (el3(subnet), true, 42002),
                (el3(world_ip), true, 42003),
                (el3(world), true, 42004),
                (el3(0), true, 65000),
            ],
            probes: {
                let mut p = vec![
                    (ek(subnet_ip, 6, 53, 16), Deny),
                    (ek(subnet_ip, 17, 53, 16), Allow),
                    (ek(subnet_ip, 132, 53, 16), Deny),
                ];
                for n in [subnet, world, world_ip] {
                    for proto in [6, 17] {
                        for port in [53, 443, 80] {
                            p.push((ek(n, proto, port, 16), Deny));
                        }
                    }
                }
                p
            },
        },
        Case {
            name: "deny 1.1.1.1",
            tiers: vec![
                (0, vec![(ek(i1111, 0, 0, 0), true)]),
                (1000, vec![(ek(i1111, 6, 80, 0), false)]),
            ],
            want: vec![(ek(i1111, 0, 0, 0), true, 0)],
            probes: vec![],
        },
        Case {
            name: "Allow 1.1.1.1",
            tiers: vec![
                (
                    0,
                    vec![(ek(i1111, 0, 0, 0), false), (ek(i1111, 0, 0, 0), true)],
                ),
                (1000, vec![(ek(i1111, 6, 80, 0), false)]),
            ],
            want: vec![(ek(i1111, 0, 0, 0), false, 0)],
            probes: vec![],
        },
    ]
}

/// Every combination of per-tier permutations (a cartesian product).
fn orders(tiers: &[(u32, Vec<(Key, bool)>)]) -> Vec<Vec<(Key, Entry)>> {
    let mut all: Vec<Vec<(Key, Entry)>> = vec![vec![]];
    for (base, entries) in tiers {
        let leveled_entries: Vec<(Key, Entry)> = entries
            .iter()
            .enumerate()
            .map(|(i, (k, is_deny))| (*k, leveled(*is_deny, base + i as u32)))
            .collect();
        let mut next = Vec::new();
        for prefix in &all {
            for perm in permutations(leveled_entries.len()) {
                let mut order = prefix.clone();
                order.extend(perm.iter().map(|&i| leveled_entries[i].clone()));
                next.push(order);
            }
        }
        all = next;
    }
    all
}

#[test]
fn mapstate_test_go_ordered_map_state_validation() {
    for case in cases() {
        let want = state(
            &case
                .want
                .iter()
                .map(|(k, is_deny, level)| (*k, leveled(*is_deny, *level)))
                .collect::<Vec<_>>(),
        );
        let all_orders = orders(&case.tiers);
        assert!(!all_orders.is_empty());
        for order in all_orders {
            let mut ms = MapState::new();
            for (k, e) in &order {
                ms.insert_with_features(
                    *k,
                    e.clone(),
                    PolicyFeatures::ORDERED | PolicyFeatures::DENY,
                )
                .unwrap();
            }
            assert_eq!(ms, want, "{}: order {order:?}", case.name);
            for (probe, expected) in &case.probes {
                let verdict = ms
                    .lookup(
                        probe.direction(),
                        probe.identity(),
                        probe.proto(),
                        probe.port(),
                    )
                    .verdict;
                let got = match verdict {
                    Verdict::Allow => Probe::Allow,
                    Verdict::Deny {
                        reason: DenyReason::Rule,
                    } => Probe::Deny,
                    Verdict::Deny {
                        reason: DenyReason::NoEntry,
                    } => Probe::NotFound,
                    other => panic!("{}: unexpected verdict {other:?}", case.name),
                };
                assert_eq!(got, *expected, "{}: probe {probe}", case.name);
            }
        }
    }
}
