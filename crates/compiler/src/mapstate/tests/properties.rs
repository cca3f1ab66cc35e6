//! Property tests: insertion is order independent and keeps deny
//! precedence (docs/semantics.md §4.6). The encodings and the agreement of
//! the lookup with a byte-level datapath model are porin-ebpf's abi tests.

use proptest::prelude::*;

use super::*;

/// Keys drawn from a small universe so that they overlap a lot.
fn small_key() -> impl Strategy<Value = Key> {
    (
        prop::sample::select(vec![0_u32, 2, 100, 0x0100_0005]),
        prop::sample::select(vec![0_u8, 6, 17]),
        prop::sample::select(vec![0_u16, 64, 80, 81, 1023, 65535]),
        prop::sample::select(vec![0_u8, 6, 10, 14, 15, 16]),
        any::<bool>(),
    )
        .prop_map(|(identity, proto, port, prefix, egress)| {
            let dir = if egress {
                Direction::Egress
            } else {
                Direction::Ingress
            };
            let base = Key::for_direction(dir).with_identity(id(identity));
            if proto == 0 {
                base
            } else {
                base.with_masked_port(proto, MaskedPort::from_prefix(port, prefix))
                    .unwrap()
            }
        })
}

fn probes() -> Vec<(Direction, u32, u8, u16)> {
    let mut out = Vec::new();
    for dir in Direction::ALL {
        for identity in [0_u32, 2, 100, 101, 0x0100_0005] {
            for proto in [1_u8, 6, 17] {
                for port in [0_u16, 1, 63, 64, 80, 81, 127, 128, 1023, 1024, 65535] {
                    out.push((dir, identity, proto, port));
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Deny vs allow (priority 0, no redirect): the final state does not
    /// depend on insertion order, and every flow gets the policy's meaning —
    /// denied if any deny key matches, else allowed if any allow key
    /// matches, else default deny.
    #[test]
    fn deny_allow_insertion_is_order_independent_and_deny_wins(
        pairs in prop::collection::vec((small_key(), any::<bool>(), 0_u32..4), 1..14),
        seed in any::<u64>(),
    ) {
        let entries: Vec<(Key, Entry)> = pairs
            .iter()
            .map(|(k, is_deny, origin)| {
                let e = if *is_deny { deny() } else { allow() };
                (*k, e.with_origin(*origin))
            })
            .collect();
        let build = |order: &[(Key, Entry)]| {
            let mut ms = MapState::new();
            for (k, e) in order {
                ms.insert_with_features(*k, e.clone(), PolicyFeatures::DENY).unwrap();
            }
            ms
        };
        let forward = build(&entries);
        let mut reversed = entries.clone();
        reversed.reverse();
        prop_assert_eq!(&build(&reversed), &forward);
        // A seeded rotation as a third order.
        let mut rotated = entries.clone();
        let len = rotated.len();
        rotated.rotate_left((seed as usize) % len);
        prop_assert_eq!(&build(&rotated), &forward);

        for (dir, identity, proto, port) in probes() {
            let matching = |want_deny: bool| {
                entries.iter().any(|(k, e)| {
                    e.is_deny() == want_deny
                        && k.direction() == dir
                        && (k.identity().is_wildcard() || k.identity() == id(identity))
                        && k.matches_port_proto(proto, port)
                })
            };
            let expected = if matching(true) {
                DENIED
            } else if matching(false) {
                ALLOW
            } else {
                NO_ENTRY
            };
            prop_assert_eq!(
                flow(&forward, dir, identity, proto, port),
                expected,
                "{} id={} proto={} port={}", dir, identity, proto, port
            );
        }
    }

    /// With redirects in the mix (precedence features), the state is still
    /// insertion-order independent.
    #[test]
    fn redirect_insertion_is_order_independent(
        pairs in prop::collection::vec((small_key(), prop::sample::select(vec![0_u8, 1, 2, 3])), 1..12),
    ) {
        let entries: Vec<(Key, Entry)> = pairs
            .iter()
            .map(|(k, kind)| {
                let e = match kind {
                    0 => allow(),
                    1 => deny(),
                    2 => http(2),
                    _ => Entry::redirect(1, ListenerPriority::DNS),
                };
                (*k, e)
            })
            .collect();
        let features = PolicyFeatures::DENY | PolicyFeatures::REDIRECT;
        let build = |order: &[(Key, Entry)]| {
            let mut ms = MapState::new();
            for (k, e) in order {
                ms.insert_with_features(*k, e.clone(), features).unwrap();
            }
            ms
        };
        let forward = build(&entries);
        let mut reversed = entries.clone();
        reversed.reverse();
        prop_assert_eq!(build(&reversed), forward);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Port ranges (expanded by `port_range_to_masked_ports`) of allows and
    /// denies on a few identities: every probed port gets the policy's
    /// meaning — denied if any deny range of a matching identity (itself or
    /// 0) contains it, else allowed if an allow range does, else default
    /// deny. Generalises `TestEgressPortRangePrecedence`; both insertion
    /// orders.
    #[test]
    fn port_range_policies_keep_their_meaning(
        rules in prop::collection::vec(
            (prop::sample::select(vec![0_u32, 100]), prop::sample::select(vec![6_u8, 17]),
             any::<u16>(), any::<u16>(), any::<bool>()),
            1..8),
        extra_ports in prop::collection::vec(any::<u16>(), 8),
    ) {
        // Normalise to start <= end; Cilium's inverted-range rule is tested
        // in ports.rs.
        let rules: Vec<(u32, u8, u16, u16, bool)> = rules
            .into_iter()
            .map(|(identity, proto, a, b, is_deny)| (identity, proto, a.min(b), a.max(b), is_deny))
            .collect();
        let build = |order: &mut dyn Iterator<Item = &(u32, u8, u16, u16, bool)>| {
            let mut ms = MapState::new();
            for (identity, proto, start, end, is_deny) in order {
                let entry = if *is_deny { deny() } else { allow() };
                for block in port_range_to_masked_ports(*start, *end) {
                    let key = Key::egress()
                        .with_identity(id(*identity))
                        .with_masked_port(*proto, block)
                        .unwrap();
                    ms.insert_with_features(key, entry.clone(), PolicyFeatures::DENY).unwrap();
                }
            }
            ms
        };
        let forward = build(&mut rules.iter());
        let reverse = build(&mut rules.iter().rev());
        prop_assert_eq!(&forward, &reverse);

        let mut ports: Vec<u16> = extra_ports;
        for (_, _, start, end, _) in &rules {
            for p in [*start, *end] {
                ports.push(p);
                ports.push(p.saturating_sub(1));
                ports.push(p.saturating_add(1));
            }
        }
        for peer in [100_u32, 101] {
            for proto in [6_u8, 17] {
                for port in &ports {
                    let covers = |want_deny: bool| {
                        rules.iter().any(|(identity, p, start, end, is_deny)| {
                            *is_deny == want_deny
                                && (*identity == 0 || *identity == peer)
                                && *p == proto
                                // Cilium: 0-0 and 0-65535 mean every port.
                                && ((*start == 0 && (*end == 0 || *end == 65535))
                                    || (start..=end).contains(&port))
                        })
                    };
                    let expected = if covers(true) {
                        DENIED
                    } else if covers(false) {
                        ALLOW
                    } else {
                        NO_ENTRY
                    };
                    prop_assert_eq!(
                        flow(&forward, Direction::Egress, peer, proto, *port),
                        expected,
                        "peer={} proto={} port={}", peer, proto, port
                    );
                }
            }
        }
    }
}
