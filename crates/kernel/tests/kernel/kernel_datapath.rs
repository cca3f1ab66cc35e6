//! porin's emitted object in the real kernel: loaded by porin's loader, maps filled with
//! hand-built entries (DATAPATH.md byte layouts), verdicts read back with BPF_PROG_TEST_RUN.
//! Each case names the Cilium behaviour it mirrors (docs/semantics.md §5.4, `bpf/lib/policy.h`).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::kernel_support;

use std::net::{Ipv4Addr, Ipv6Addr};

use kernel_support::{
    ALLOW, EGRESS, HTTP_REDIRECT, INGRESS, allow, deny, ipcache4, ipcache6, kernel_available,
    policy_entry, policy_key, porin_object,
};
use porin_kernel::packet::{Ipv4, Ipv6Extension, Network, Packet, Transport, echo_rest, proto};
use porin_kernel::{Counter, Datapath, Direction, PolicySlot, Verdict};

const POD: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const FRONTEND: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 20);
const OTHER: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 30);
const INTERNET: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);
const FRONTEND_ID: u32 = 1000;
const OTHER_ID: u32 = 2000;
const TCP: u8 = proto::TCP;
const UDP: u8 = proto::UDP;

fn pod6() -> Ipv6Addr {
    "fd00::a".parse().unwrap()
}
fn frontend6() -> Ipv6Addr {
    "fd00:2::20".parse().unwrap()
}

/// A loaded datapath with the test ipcache: 10.0.2.0/24 -> 1000, 10.0.3.30/32 -> 2000,
/// fd00:2::/64 -> 1000, plus the compiler's world defaults (0/0 -> 9, ::/0 -> 10).
fn datapath(test: &str) -> Option<Datapath> {
    if !kernel_available(test) {
        return None;
    }
    let dp = Datapath::load(&porin_object()).expect("porin's object loads with porin's loader");
    dp.install_ipcache(
        &[
            ipcache4(Ipv4Addr::new(10, 0, 2, 0), 24, FRONTEND_ID),
            ipcache4(OTHER, 32, OTHER_ID),
            ipcache4(Ipv4Addr::UNSPECIFIED, 0, 9),
        ],
        &[
            ipcache6("fd00:2::".parse().unwrap(), 64, FRONTEND_ID),
            ipcache6(Ipv6Addr::UNSPECIFIED, 0, 10),
        ],
    )
    .unwrap();
    Some(dp)
}

fn to_pod(dp: &Datapath, packet: &Packet) -> (Verdict, Counter) {
    let v = dp.decide(Direction::ToEndpoint, &packet.build()).unwrap();
    (v.verdict, v.counter)
}

fn from_pod(dp: &Datapath, packet: &Packet) -> (Verdict, Counter) {
    let v = dp.decide(Direction::FromEndpoint, &packet.build()).unwrap();
    (v.verdict, v.counter)
}

const PASS_NEW: (Verdict, Counter) = (Verdict::Pass, Counter::AllowedNew);
const PASS_EST: (Verdict, Counter) = (Verdict::Pass, Counter::AllowedEstablished);
const PASS_REPLY: (Verdict, Counter) = (Verdict::Pass, Counter::AllowedReply);
const DROP_DEFAULT: (Verdict, Counter) = (Verdict::Drop, Counter::DeniedByDefault);
const DROP_RULE: (Verdict, Counter) = (Verdict::Drop, Counter::DeniedByRule);

#[test]
fn object_matches_the_contract_and_its_btf_is_kernel_valid() {
    let Some(dp) = datapath("object_matches_the_contract_and_its_btf_is_kernel_valid") else {
        return;
    };
    dp.object()
        .verify_btf()
        .expect("the kernel accepts porin's raw BTF");
    assert_eq!(dp.active_slot().unwrap(), PolicySlot::A);
    assert_eq!(dp.read_counters().unwrap().total_packets(), 0);
}

#[test]
fn empty_policy_denies_ip_and_passes_non_ip() {
    let Some(dp) = datapath("empty_policy_denies_ip_and_passes_non_ip") else {
        return;
    };
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(FRONTEND, 40000, POD, 80)),
        DROP_DEFAULT
    );
    assert_eq!(
        from_pod(&dp, &Packet::udp4(POD, 40000, FRONTEND, 53)),
        DROP_DEFAULT
    );
    let arp = Packet::non_ip(0x0806, vec![0; 28]);
    assert_eq!(to_pod(&dp, &arp), (Verdict::Pass, Counter::PassedNonIp));
}

#[test]
fn l4_protocols_match_identity_direction_proto_and_port() {
    let Some(dp) = datapath("l4_protocols_match_identity_direction_proto_and_port") else {
        return;
    };
    dp.install_policy(&[
        allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16)),
        allow(FRONTEND_ID, INGRESS, UDP, 53, Some(16)),
        allow(FRONTEND_ID, INGRESS, proto::SCTP, 3868, Some(16)),
        allow(FRONTEND_ID, EGRESS, TCP, 5432, Some(16)),
    ])
    .unwrap();
    // Ingress: the peer is the source address.
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(FRONTEND, 40000, POD, 80)),
        PASS_NEW
    );
    // Same tuple again: the flow exists, still policy-checked (Cilium re-checks non-replies).
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(FRONTEND, 40000, POD, 80)),
        PASS_EST
    );
    assert_eq!(
        to_pod(&dp, &Packet::udp4(FRONTEND, 40001, POD, 53)),
        PASS_NEW
    );
    assert_eq!(
        to_pod(&dp, &Packet::sctp4(FRONTEND, 40002, POD, 3868)),
        PASS_NEW
    );
    // Wrong port, wrong protocol, wrong identity, world: default deny.
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(FRONTEND, 40000, POD, 81)),
        DROP_DEFAULT
    );
    assert_eq!(
        to_pod(&dp, &Packet::udp4(FRONTEND, 40000, POD, 80)),
        DROP_DEFAULT
    );
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(OTHER, 40000, POD, 80)),
        DROP_DEFAULT
    );
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(INTERNET, 40000, POD, 80)),
        DROP_DEFAULT
    );
    // Ingress entries do not allow egress and vice versa; egress peer = destination.
    assert_eq!(
        from_pod(&dp, &Packet::tcp4(POD, 40000, FRONTEND, 80)),
        DROP_DEFAULT
    );
    assert_eq!(
        from_pod(&dp, &Packet::tcp4(POD, 40000, FRONTEND, 5432)),
        PASS_NEW
    );
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(FRONTEND, 40000, POD, 5432)),
        DROP_DEFAULT
    );
}

#[test]
fn ipv6_and_icmp_types_are_policy_ports() {
    let Some(dp) = datapath("ipv6_and_icmp_types_are_policy_ports") else {
        return;
    };
    dp.install_policy(&[
        allow(FRONTEND_ID, INGRESS, TCP, 443, Some(16)),
        allow(FRONTEND_ID, INGRESS, UDP, 53, Some(16)),
        // ICMP echo request (type 8) and ICMPv6 echo request (128): dport = type.
        allow(FRONTEND_ID, INGRESS, proto::ICMP, 8, Some(16)),
        allow(FRONTEND_ID, INGRESS, proto::ICMPV6, 128, Some(16)),
    ])
    .unwrap();
    assert_eq!(
        to_pod(&dp, &Packet::tcp6(frontend6(), 1, pod6(), 443)),
        PASS_NEW
    );
    assert_eq!(
        to_pod(&dp, &Packet::udp6(frontend6(), 1, pod6(), 53)),
        PASS_NEW
    );
    assert_eq!(
        to_pod(&dp, &Packet::tcp6(frontend6(), 1, pod6(), 444)),
        DROP_DEFAULT
    );
    // An IPv6 peer outside fd00:2::/64 is world-ipv6 (10).
    let stranger: Ipv6Addr = "2001:db8::1".parse().unwrap();
    assert_eq!(
        to_pod(&dp, &Packet::tcp6(stranger, 1, pod6(), 443)),
        DROP_DEFAULT
    );
    let echo4 = Packet::icmp4(FRONTEND, POD, 8, 0, echo_rest(7, 1));
    assert_eq!(to_pod(&dp, &echo4), PASS_NEW);
    // The ICMP code is never matched (docs/semantics.md §4.4); another type is.
    assert_eq!(
        to_pod(&dp, &Packet::icmp4(FRONTEND, POD, 8, 5, echo_rest(8, 1))),
        PASS_NEW
    );
    assert_eq!(
        to_pod(&dp, &Packet::icmp4(FRONTEND, POD, 13, 0, [0; 4])),
        DROP_DEFAULT
    );
    let echo6 = Packet::icmp6(frontend6(), pod6(), 128, 0, echo_rest(9, 1));
    assert_eq!(to_pod(&dp, &echo6), PASS_NEW);
    assert_eq!(
        to_pod(&dp, &Packet::icmp6(frontend6(), pod6(), 1, 0, [0; 4])),
        DROP_DEFAULT
    );
    // The echo replies leave the pod as replies of the tracked flows (identifier = port).
    assert_eq!(from_pod(&dp, &echo4.reply()), PASS_REPLY);
    assert_eq!(from_pod(&dp, &echo6.reply()), PASS_REPLY);
}

#[test]
fn vlan_tags_and_l2_encapsulations() {
    let Some(dp) = datapath("vlan_tags_and_l2_encapsulations") else {
        return;
    };
    dp.install_policy(&[allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16))])
        .unwrap();
    let tagged = Packet::tcp4(FRONTEND, 1, POD, 80).with_vlan(42);
    assert_eq!(to_pod(&dp, &tagged), PASS_NEW);
    let tagged_denied = Packet::tcp4(FRONTEND, 1, POD, 81).with_vlan(42);
    assert_eq!(to_pod(&dp, &tagged_denied), DROP_DEFAULT);
    let stacked = Packet::tcp4(FRONTEND, 2, POD, 80).with_vlan(1).with_vlan(2);
    assert_eq!(
        to_pod(&dp, &stacked),
        (Verdict::Drop, Counter::DroppedUnsupportedL2)
    );
    let mpls = Packet::non_ip(0x8847, vec![0; 40]);
    assert_eq!(
        to_pod(&dp, &mpls),
        (Verdict::Drop, Counter::DroppedUnsupportedL2)
    );
}

#[test]
fn ipv6_extension_headers_are_walked_and_bounded() {
    let Some(dp) = datapath("ipv6_extension_headers_are_walked_and_bounded") else {
        return;
    };
    dp.install_policy(&[allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16))])
        .unwrap();
    let base = || Packet::tcp6(frontend6(), 1, pod6(), 80);
    // Three extension headers are walked and the port behind them is matched.
    let three = base()
        .with_extension(Ipv6Extension::HopByHop(vec![]))
        .with_extension(Ipv6Extension::Routing {
            routing_type: 4,
            segments_left: 0,
            data: vec![],
        })
        .with_extension(Ipv6Extension::Ah {
            spi: 1,
            seq: 1,
            icv: vec![0; 12],
        });
    assert_eq!(to_pod(&dp, &three), PASS_NEW);
    let mut three_denied = three.clone();
    if let Transport::Tcp { dport, .. } = &mut three_denied.transport {
        *dport = 81;
    }
    assert_eq!(to_pod(&dp, &three_denied), DROP_DEFAULT);
    // A fourth exhausts Cilium's walk: `ipv6_hdrlen_offset` (bpf/lib/ipv6.h) loops
    // IPV6_MAX_HEADERS = 4 times and drops when the 4th iteration still skipped an extension,
    // so at most 3 extension headers pass. Fail closed.
    let four = three.with_extension(Ipv6Extension::DestinationOptions(vec![]));
    assert_eq!(
        to_pod(&dp, &four),
        (Verdict::Drop, Counter::DroppedIpv6Extensions)
    );
    // First fragment (offset 0, M) is decided; a later fragment is dropped.
    let first = Packet::tcp6(frontend6(), 2, pod6(), 80).with_extension(Ipv6Extension::Fragment {
        offset: 0,
        more: true,
        id: 1,
    });
    assert_eq!(to_pod(&dp, &first), PASS_NEW);
    let mut later = Packet::new(
        Network::V6(porin_kernel::packet::Ipv6::new(frontend6(), pod6())),
        Transport::Raw {
            proto: TCP,
            bytes: vec![0; 16],
        },
    );
    later = later.with_extension(Ipv6Extension::Fragment {
        offset: 100,
        more: false,
        id: 1,
    });
    assert_eq!(
        to_pod(&dp, &later),
        (Verdict::Drop, Counter::DroppedFragment)
    );
    // No Next Header (59) straight after the base header: nothing to decide on.
    let none = Packet::new(
        Network::V6(porin_kernel::packet::Ipv6::new(frontend6(), pod6())),
        Transport::Raw {
            proto: proto::NONE,
            bytes: vec![],
        },
    );
    assert_eq!(
        to_pod(&dp, &none),
        (Verdict::Drop, Counter::DroppedIpv6Extensions)
    );
}

#[test]
fn ipv4_options_fragments_and_malformed_headers() {
    let Some(dp) = datapath("ipv4_options_fragments_and_malformed_headers") else {
        return;
    };
    dp.install_policy(&[allow(FRONTEND_ID, INGRESS, UDP, 53, Some(16))])
        .unwrap();
    let mut ip = Ipv4::new(FRONTEND, POD);
    ip.options = vec![0x94, 0x04, 0, 0]; // router alert: the ports sit after the options
    let with_options = Packet::new(
        Network::V4(ip.clone()),
        Transport::Udp {
            sport: 1,
            dport: 53,
        },
    );
    assert_eq!(to_pod(&dp, &with_options), PASS_NEW);
    let mut denied = with_options.clone();
    denied.transport = Transport::Udp {
        sport: 1,
        dport: 54,
    };
    assert_eq!(to_pod(&dp, &denied), DROP_DEFAULT);
    // First fragment: decided like an unfragmented packet. Later fragment: dropped.
    let mut first = ip.clone();
    first.options.clear();
    first.more_fragments = true;
    let first = Packet::new(
        Network::V4(first),
        Transport::Udp {
            sport: 2,
            dport: 53,
        },
    );
    assert_eq!(to_pod(&dp, &first), PASS_NEW);
    let mut later = Ipv4::new(FRONTEND, POD);
    later.fragment_offset = 185;
    let later = Packet::new(
        Network::V4(later),
        Transport::Raw {
            proto: UDP,
            bytes: vec![0; 8],
        },
    );
    assert_eq!(
        to_pod(&dp, &later),
        (Verdict::Drop, Counter::DroppedFragment)
    );
    // Truncations. test_run itself refuses frames shorter than Ethernet and IPv4 frames
    // shorter than an IPv4 header (EINVAL), so those never reach the program here.
    let frame = Packet::udp4(FRONTEND, 1, POD, 53).build();
    for cut in [10, 14 + 12] {
        let error = dp.decide(Direction::ToEndpoint, &frame[..cut]).unwrap_err();
        assert_eq!(error.errno(), Some(libc::EINVAL), "cut {cut}: {error}");
    }
    let malformed = |bytes: &[u8]| {
        let v = dp.decide(Direction::ToEndpoint, bytes).unwrap();
        (v.verdict, v.counter)
    };
    let dropped_malformed = (Verdict::Drop, Counter::DroppedMalformed);
    // UDP ports cut off.
    assert_eq!(malformed(&frame[..14 + 20 + 2]), dropped_malformed);
    // IHL claims 60 bytes of header in a 28-byte datagram.
    let mut long_ihl = frame.clone();
    long_ihl[14] = 0x4f;
    assert_eq!(malformed(&long_ihl), dropped_malformed);
    // IHL below 5.
    let mut short_ihl = frame.clone();
    short_ihl[14] = 0x44;
    assert_eq!(malformed(&short_ihl), dropped_malformed);
    // Version 6 under the IPv4 ethertype.
    let mut wrong_version = frame.clone();
    wrong_version[14] = 0x65;
    assert_eq!(malformed(&wrong_version), dropped_malformed);
    // TCP with its ports cut.
    let tcp = Packet::tcp4(FRONTEND, 1, POD, 53).build();
    assert_eq!(malformed(&tcp[..14 + 20 + 3]), dropped_malformed);
    // ICMP echo without its identifier.
    let icmp = Packet::icmp4(FRONTEND, POD, 8, 0, echo_rest(1, 1)).build();
    assert_eq!(malformed(&icmp[..14 + 20 + 4]), dropped_malformed);
    // IPv4 ICMP fragmentation-needed passes without policy (allow_icmp_frag_needed).
    let frag_needed = Packet::icmp4(INTERNET, POD, 3, 4, [0, 0, 5, 0xdc]);
    assert_eq!(
        to_pod(&dp, &frag_needed),
        (Verdict::Pass, Counter::AllowedIcmpFragNeeded)
    );
}

#[test]
fn ipv6_neighbour_discovery_needs_hop_limit_255() {
    let Some(dp) = datapath("ipv6_neighbour_discovery_needs_hop_limit_255") else {
        return;
    };
    let mut ns = Packet::icmp6(frontend6(), pod6(), 135, 0, [0; 4]);
    if let Network::V6(ip) = &mut ns.network {
        ip.hop_limit = 255;
    }
    assert_eq!(to_pod(&dp, &ns), (Verdict::Pass, Counter::PassedIpv6Ndp));
    if let Network::V6(ip) = &mut ns.network {
        ip.hop_limit = 64;
    }
    assert_eq!(to_pod(&dp, &ns), DROP_DEFAULT);
}

/// docs/semantics.md §5.4 / `__policy_can_access`: an L3 deny at MAX_PRECEDENCE wins at once; an
/// L4 (identity 0) entry wins over L3 when its precedence is higher, or equal with a longer
/// proto/port prefix.
#[test]
fn deny_and_allow_precedence_follows_policy_can_access() {
    let Some(dp) = datapath("deny_and_allow_precedence_follows_policy_can_access") else {
        return;
    };
    dp.install_policy(&[
        // L3-only deny for OTHER beats an identity-0 allow on TCP 80.
        deny(OTHER_ID, INGRESS, 0, 0, None),
        allow(0, INGRESS, TCP, 80, Some(16)),
        // Identity-0 deny on TCP 22 beats the FRONTEND L3 allow (higher precedence).
        allow(FRONTEND_ID, INGRESS, 0, 0, None),
        deny(0, INGRESS, TCP, 22, Some(16)),
        // Equal precedence (both allow): the L4 entry with the longer proto/port prefix is
        // chosen over the L3-only allow.
        {
            let key = policy_key(0, INGRESS, UDP, 53, Some(16));
            (key, policy_entry(&key, ALLOW, 0, 0))
        },
    ])
    .unwrap();
    assert_eq!(to_pod(&dp, &Packet::tcp4(OTHER, 1, POD, 80)), DROP_RULE);
    assert_eq!(to_pod(&dp, &Packet::tcp4(INTERNET, 1, POD, 80)), PASS_NEW);
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 1, POD, 22)), DROP_RULE);
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 1, POD, 23)), PASS_NEW);
    assert_eq!(to_pod(&dp, &Packet::udp4(FRONTEND, 1, POD, 53)), PASS_NEW);
    // L3-only entries match every protocol, ICMP included.
    assert_eq!(
        to_pod(&dp, &Packet::icmp4(FRONTEND, POD, 8, 0, echo_rest(1, 1))),
        PASS_NEW
    );
    // The exact-identity lookup is longest-prefix: a narrower allow for an identity that also
    // has an L3 deny *is* found first and passes. Cilium never writes that pair: userspace
    // drops allows covered by a broader deny (`insertWithChanges`, pkg/policy/mapstate.go), so
    // the compiler must do the same; the datapath does not re-derive it.
    dp.install_policy(&[
        deny(OTHER_ID, INGRESS, 0, 0, None),
        allow(OTHER_ID, INGRESS, TCP, 80, Some(16)),
    ])
    .unwrap();
    assert_eq!(to_pod(&dp, &Packet::tcp4(OTHER, 1, POD, 80)), PASS_NEW);
    assert_eq!(to_pod(&dp, &Packet::tcp4(OTHER, 1, POD, 81)), DROP_RULE);
}

#[test]
fn port_prefix_and_proto_only_entries() {
    let Some(dp) = datapath("port_prefix_and_proto_only_entries") else {
        return;
    };
    dp.install_policy(&[
        // 8080-8087 = 8080/13 (PortRangeToMaskedPorts).
        allow(FRONTEND_ID, INGRESS, TCP, 8080, Some(13)),
        // Proto-only: every UDP port.
        allow(FRONTEND_ID, INGRESS, UDP, 0, Some(0)),
    ])
    .unwrap();
    for port in [8080, 8083, 8087] {
        assert_eq!(
            to_pod(&dp, &Packet::tcp4(FRONTEND, port, POD, port)),
            PASS_NEW,
            "{port}"
        );
    }
    for port in [8079, 8088] {
        assert_eq!(
            to_pod(&dp, &Packet::tcp4(FRONTEND, port, POD, port)),
            DROP_DEFAULT,
            "{port}"
        );
    }
    assert_eq!(to_pod(&dp, &Packet::udp4(FRONTEND, 1, POD, 1)), PASS_NEW);
    assert_eq!(
        to_pod(&dp, &Packet::udp4(FRONTEND, 1, POD, 65535)),
        PASS_NEW
    );
    assert_eq!(
        to_pod(&dp, &Packet::sctp4(FRONTEND, 1, POD, 1)),
        DROP_DEFAULT
    );
}

#[test]
fn identity_zero_entries_match_every_peer_including_world() {
    let Some(dp) = datapath("identity_zero_entries_match_every_peer_including_world") else {
        return;
    };
    dp.install_policy(&[allow(0, INGRESS, TCP, 443, Some(16))])
        .unwrap();
    for peer in [FRONTEND, OTHER, INTERNET] {
        assert_eq!(
            to_pod(&dp, &Packet::tcp4(peer, 1, POD, 443)),
            PASS_NEW,
            "{peer}"
        );
    }
    // With an empty ipcache the peer is world-ipv4 (9) by the miss rule
    // (bpf/bpf_lxc.c WORLD_IPV4_ID of a dual-stack agent), still matched by
    // id 0; an entry for reserved:world (2) does not match it, one for 9
    // does.
    dp.install_ipcache(&[], &[]).unwrap();
    assert_eq!(to_pod(&dp, &Packet::tcp4(INTERNET, 2, POD, 443)), PASS_NEW);
    dp.install_policy(&[allow(2, INGRESS, TCP, 80, Some(16))])
        .unwrap();
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(INTERNET, 2, POD, 80)),
        DROP_DEFAULT
    );
    dp.install_policy(&[allow(9, INGRESS, TCP, 80, Some(16))])
        .unwrap();
    assert_eq!(to_pod(&dp, &Packet::tcp4(INTERNET, 2, POD, 80)), PASS_NEW);
    // An IPv6 miss is world-ipv6 (10), not world-ipv4.
    let stranger: Ipv6Addr = "2001:db8::1".parse().unwrap();
    assert_eq!(
        to_pod(&dp, &Packet::tcp6(stranger, 2, pod6(), 80)),
        DROP_DEFAULT
    );
    dp.install_policy(&[allow(10, INGRESS, TCP, 80, Some(16))])
        .unwrap();
    assert_eq!(
        to_pod(&dp, &Packet::tcp6(stranger, 2, pod6(), 80)),
        PASS_NEW
    );
}

#[test]
fn redirect_sets_the_proxy_mark_and_auth_fails_closed() {
    let Some(dp) = datapath("redirect_sets_the_proxy_mark_and_auth_fails_closed") else {
        return;
    };
    let key = policy_key(FRONTEND_ID, INGRESS, TCP, 80, Some(16));
    let auth_key = policy_key(FRONTEND_ID, INGRESS, TCP, 8443, Some(16));
    dp.install_policy(&[
        (key, policy_entry(&key, HTTP_REDIRECT, 15001, 0)),
        (auth_key, policy_entry(&auth_key, ALLOW, 0, 0x81)),
    ])
    .unwrap();
    let syn = Packet::tcp4(FRONTEND, 40000, POD, 80);
    let v = dp.decide(Direction::ToEndpoint, &syn.build()).unwrap();
    assert_eq!(v.verdict, Verdict::Pass);
    assert_eq!(v.counter, Counter::Redirected);
    assert_eq!(v.mark, (15001 << 16) | 0x0200);
    assert_eq!(v.proxy_port, Some(15001));
    // The reply of a redirected flow carries the same mark.
    let reply = dp
        .decide(Direction::FromEndpoint, &syn.reply().build())
        .unwrap();
    assert_eq!((reply.verdict, reply.counter), PASS_REPLY);
    assert_eq!(reply.proxy_port, Some(15001));
    // A plain allow leaves an incoming mark untouched.
    dp.install_policy(&[allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16))])
        .unwrap();
    dp.reset_conntrack().unwrap();
    let v = dp
        .decide_with_mark(Direction::ToEndpoint, &syn.build(), 0x1234)
        .unwrap();
    assert_eq!(
        (v.verdict, v.mark, v.proxy_port),
        (Verdict::Pass, 0x1234, None)
    );
    // Auth required: porin has no auth agent, so it drops (fail closed).
    dp.install_policy(&[(auth_key, policy_entry(&auth_key, ALLOW, 0, 0x81))])
        .unwrap();
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(FRONTEND, 1, POD, 8443)),
        (Verdict::Drop, Counter::DeniedAuth)
    );
}

#[test]
fn conntrack_lets_replies_through_and_only_replies() {
    let Some(dp) = datapath("conntrack_lets_replies_through_and_only_replies") else {
        return;
    };
    dp.install_policy(&[allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16))])
        .unwrap();
    let syn = Packet::tcp4(FRONTEND, 40000, POD, 80);
    // A reply without a flow is evaluated by policy: egress has no entry -> denied.
    assert_eq!(from_pod(&dp, &syn.reply()), DROP_DEFAULT);
    assert_eq!(to_pod(&dp, &syn), PASS_NEW);
    assert_eq!(dp.conntrack_len().unwrap(), 1);
    assert_eq!(from_pod(&dp, &syn.reply()), PASS_REPLY);
    // The same reversed tuple in the *same* direction is not a reply.
    assert_eq!(to_pod(&dp, &syn.reply()), DROP_DEFAULT);
    // Another source port is another flow.
    let mut other_flow = syn.reply();
    if let Transport::Tcp { dport, .. } = &mut other_flow.transport {
        *dport = 40001;
    }
    assert_eq!(from_pod(&dp, &other_flow), DROP_DEFAULT);
    // Denied packets never create entries.
    assert_eq!(to_pod(&dp, &Packet::tcp4(OTHER, 1, POD, 80)), DROP_DEFAULT);
    assert_eq!(dp.conntrack_len().unwrap(), 1);
    // Forward packets of the established flow are re-checked: removing the allow stops them,
    // while replies still pass (Cilium bpf_lxc.c).
    dp.install_policy(&[]).unwrap();
    assert_eq!(to_pod(&dp, &syn), DROP_DEFAULT);
    assert_eq!(from_pod(&dp, &syn.reply()), PASS_REPLY);
    assert_eq!(dp.reset_conntrack().unwrap(), 1);
    assert_eq!(from_pod(&dp, &syn.reply()), DROP_DEFAULT);
}

#[test]
fn counters_count_packets_and_bytes_per_verdict() {
    let Some(dp) = datapath("counters_count_packets_and_bytes_per_verdict") else {
        return;
    };
    dp.install_policy(&[allow(FRONTEND_ID, INGRESS, UDP, 53, Some(16))])
        .unwrap();
    let allowed = Packet::udp4(FRONTEND, 1, POD, 53)
        .with_payload(&[0; 100])
        .build();
    let denied = Packet::udp4(FRONTEND, 1, POD, 54).build();
    dp.decide(Direction::ToEndpoint, &allowed).unwrap();
    dp.decide(Direction::ToEndpoint, &allowed).unwrap();
    dp.decide(Direction::ToEndpoint, &denied).unwrap();
    let counters = dp.read_counters().unwrap();
    assert_eq!(counters.get(Counter::AllowedNew).packets, 1);
    assert_eq!(counters.get(Counter::AllowedEstablished).packets, 1);
    assert_eq!(counters.get(Counter::DeniedByDefault).packets, 1);
    assert_eq!(
        counters.get(Counter::AllowedNew).bytes,
        allowed.len() as u64
    );
    assert_eq!(
        counters.get(Counter::DeniedByDefault).bytes,
        denied.len() as u64
    );
    assert_eq!(counters.total_packets(), 3);
    dp.reset_counters().unwrap();
    assert_eq!(dp.read_counters().unwrap().total_packets(), 0);
}

#[test]
fn atomic_switch_changes_verdicts_only_when_flipped() {
    let Some(dp) = datapath("atomic_switch_changes_verdicts_only_when_flipped") else {
        return;
    };
    let generation_a = [allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16))];
    let generation_b = [allow(FRONTEND_ID, INGRESS, TCP, 81, Some(16))];
    assert_eq!(dp.install_policy(&generation_a).unwrap(), PolicySlot::B);
    let a_slot = dp.active_slot().unwrap();
    let before = dp.policy_entries(a_slot).unwrap();
    let p80 = Packet::tcp4(FRONTEND, 1, POD, 80);
    let p81 = Packet::tcp4(FRONTEND, 1, POD, 81);
    assert_eq!(to_pod(&dp, &p80), PASS_NEW);
    assert_eq!(to_pod(&dp, &p81), DROP_DEFAULT);
    // Fill the inactive slot: nothing changes, and the active map is untouched.
    let b_slot = dp.write_inactive_policy(&generation_b).unwrap();
    assert_eq!(b_slot, a_slot.other());
    assert_eq!(dp.active_slot().unwrap(), a_slot);
    assert_eq!(to_pod(&dp, &p80), PASS_EST);
    assert_eq!(to_pod(&dp, &p81), DROP_DEFAULT);
    assert_eq!(dp.policy_entries(a_slot).unwrap(), before);
    // Flip: the new generation decides.
    dp.activate(b_slot).unwrap();
    assert_eq!(to_pod(&dp, &p80), DROP_DEFAULT);
    assert_eq!(to_pod(&dp, &p81), PASS_NEW);
    // The old generation is still intact until the next write reuses it.
    assert_eq!(dp.policy_entries(a_slot).unwrap(), before);
    // A corrupt slot number fails closed.
    dp.set_active_policy_raw(7).unwrap();
    assert_eq!(
        to_pod(&dp, &p81),
        (Verdict::Drop, Counter::DroppedBadConfig)
    );
    // The slot is read before the frame is parsed, so non-IP frames drop too (stricter than
    // DATAPATH.md §2.3's "drops every IP packet"; fail-closed either way).
    let arp = Packet::non_ip(0x0806, vec![0; 28]);
    assert_eq!(
        to_pod(&dp, &arp),
        (Verdict::Drop, Counter::DroppedBadConfig)
    );
    // Flipping back to a valid slot restores service.
    dp.activate(b_slot).unwrap();
    assert_eq!(to_pod(&dp, &p81).0, Verdict::Pass);
}

#[test]
fn ipcache_longest_prefix_selects_the_identity() {
    let Some(dp) = datapath("ipcache_longest_prefix_selects_the_identity") else {
        return;
    };
    dp.install_policy(&[
        allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16)),
        allow(3000, INGRESS, TCP, 80, Some(16)),
        allow(9, INGRESS, TCP, 9, Some(16)),
    ])
    .unwrap();
    let special = Ipv4Addr::new(10, 0, 2, 99);
    assert_eq!(to_pod(&dp, &Packet::tcp4(special, 1, POD, 80)), PASS_NEW);
    dp.install_ipcache(
        &[
            ipcache4(Ipv4Addr::new(10, 0, 2, 0), 24, FRONTEND_ID),
            ipcache4(special, 32, 4000),
            ipcache4(Ipv4Addr::UNSPECIFIED, 0, 9),
        ],
        &[],
    )
    .unwrap();
    // The /32 overrides the /24: identity 4000 has no entry.
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(special, 2, POD, 80)),
        DROP_DEFAULT
    );
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 2, POD, 80)), PASS_NEW);
    // 0.0.0.0/0 -> world-ipv4 (9).
    assert_eq!(to_pod(&dp, &Packet::tcp4(INTERNET, 2, POD, 9)), PASS_NEW);
}

/// The structs these tests build field by field from DATAPATH.md agree with the ABI's encoding
/// of the compiler's keys and entries (`porin_ebpf::abi`), so the kernel tests and the agent
/// speak the same layout.
#[test]
fn hand_built_structs_equal_the_abi_encoding() {
    use porin_compiler::identity::Identity;
    use porin_compiler::mapstate::{
        AuthRequirement, Direction as KeyDirection, Entry, Key, Precedence,
    };
    use porin_ebpf::abi::{Ipcache4Key, Ipcache6Key, IpcacheValue, PolicyEntry, PolicyKey};
    let cases = [
        (
            FRONTEND_ID,
            INGRESS,
            TCP,
            80u16,
            Some(16u8),
            ALLOW,
            0u16,
            0u8,
        ),
        (0, EGRESS, UDP, 0, Some(0), ALLOW, 0, 0),
        (OTHER_ID, INGRESS, 0, 0, None, kernel_support::DENY, 0, 0),
        (
            FRONTEND_ID,
            INGRESS,
            TCP,
            8080,
            Some(13),
            HTTP_REDIRECT,
            15001,
            0,
        ),
        (
            FRONTEND_ID,
            EGRESS,
            proto::ICMPV6,
            128,
            Some(16),
            ALLOW,
            0,
            0x81,
        ),
    ];
    for (identity, direction, protocol, port, prefix, precedence, proxy_port, auth) in cases {
        let ours_key = policy_key(identity, direction, protocol, port, prefix);
        let key = Key::new(
            if direction == EGRESS {
                KeyDirection::Egress
            } else {
                KeyDirection::Ingress
            },
            Identity::new(identity).unwrap(),
            protocol,
            port,
            prefix.unwrap_or(0),
        )
        .unwrap();
        assert_eq!(ours_key, PolicyKey::from_key(&key), "{key:?}");
        let ours_entry = policy_entry(&ours_key, precedence, proxy_port, auth);
        let entry = Entry {
            precedence: Precedence::from_raw(precedence),
            proxy_port,
            auth: AuthRequirement::from_byte(auth),
            // Cookie 0, no origins.
            ..Entry::allow()
        };
        assert_eq!(ours_entry, PolicyEntry::from_entry(&key, &entry), "{key:?}");
        assert_eq!(ours_entry.to_entry(&key), Ok(entry), "{key:?}");
    }
    let (key4, value4) = ipcache4(FRONTEND, 24, FRONTEND_ID);
    assert_eq!(key4, Ipcache4Key::new(24, FRONTEND).unwrap());
    assert_eq!(
        value4,
        IpcacheValue::new(Identity::new(FRONTEND_ID).unwrap())
    );
    let (key6, _) = ipcache6(frontend6(), 64, FRONTEND_ID);
    assert_eq!(key6, Ipcache6Key::new(64, frontend6()).unwrap());
}

/// DATAPATH.md §2.3 step 3: the retired map is not rewritten until a grace period after the
/// flip, so a program run that read the old slot never sees it change under it.
#[test]
fn retired_policy_map_waits_out_the_grace_period() {
    let Some(dp) = datapath("retired_policy_map_waits_out_the_grace_period") else {
        return;
    };
    dp.install_policy(&[allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16))])
        .unwrap();
    let started = std::time::Instant::now();
    dp.install_policy(&[allow(FRONTEND_ID, INGRESS, TCP, 81, Some(16))])
        .unwrap();
    assert!(
        started.elapsed() >= porin_kernel::datapath::RETIRE_GRACE,
        "rewrote the retired map after {:?}",
        started.elapsed()
    );
}

/// The flat lookups (DATAPATH.md §2.1, §2.2): exact keys are answered by the slot's hash, the
/// trie is skipped when `prefix_free` says it is empty, consulted otherwise, and a trie write
/// through the in-place difference makes it consulted again. An agent that writes every key
/// into the trie (the layout before the hashes) is answered by the trie.
#[test]
fn exact_keys_use_the_hash_and_the_trie_only_when_it_can_hold_something() {
    let Some(dp) = datapath("exact_keys_use_the_hash_and_the_trie_only_when_it_can_hold_something")
    else {
        return;
    };
    let exact = allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16));
    let slot = dp.install_policy(&[exact]).unwrap();
    let maps = dp.slot_maps(slot).unwrap();
    assert_eq!(maps.exact.keys().unwrap().len(), 1);
    assert_eq!(maps.prefix.keys().unwrap().len(), 0);
    let p80 = Packet::tcp4(FRONTEND, 2, POD, 80);
    let p1024 = Packet::tcp4(FRONTEND, 2, POD, 1024);
    assert_eq!(to_pod(&dp, &p80), PASS_NEW);
    // A range entry written behind the datapath's back into the trie of a slot marked
    // prefix-free is not consulted: the flag is what skips the trie.
    let range = allow(FRONTEND_ID, INGRESS, TCP, 1024, Some(6));
    maps.prefix
        .update(&range.0.to_bytes(), &range.1.to_bytes())
        .unwrap();
    assert_eq!(to_pod(&dp, &p1024), DROP_DEFAULT);
    // The same entry through the in-place difference clears the flag first.
    let key = range.0.to_key().unwrap();
    let entry = range.1.to_entry(&key).unwrap();
    dp.apply_policy_diff(&[porin_compiler::diff::MapChange {
        kind: porin_compiler::diff::ChangeKind::Add,
        phase: porin_compiler::diff::Phase::Settle,
        key,
        entry: Some(entry),
    }])
    .unwrap();
    assert_eq!(to_pod(&dp, &p1024), PASS_NEW);
    // A policy with a prefix goes to the trie of the next slot, which is consulted.
    let next = dp.install_policy(&[exact, range]).unwrap();
    let maps = dp.slot_maps(next).unwrap();
    assert_eq!(maps.exact.keys().unwrap().len(), 1);
    assert_eq!(maps.prefix.keys().unwrap().len(), 1);
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 3, POD, 1025)), PASS_NEW);
    // Every key in the trie, none in the hash (an agent of the old layout): same verdicts.
    maps.exact.clear().unwrap();
    maps.prefix
        .update(&exact.0.to_bytes(), &exact.1.to_bytes())
        .unwrap();
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 4, POD, 80)), PASS_NEW);
    assert_eq!(
        to_pod(&dp, &Packet::tcp4(FRONTEND, 4, POD, 81)),
        DROP_DEFAULT
    );
}

/// The L4-only lookup (identity 0) is skipped when the slot's wildcard-free bit of the
/// packet's direction says no key can match it (DATAPATH.md §2.3, `prefix_free` bits 2-5):
/// the bit is what skips it (an identity-0 deny written behind the datapath's back is not
/// seen), the in-place difference clears it before writing such a key, the next fill derives
/// it again, and an identity-0 key of the other direction leaves it set.
#[test]
fn l4_only_lookup_is_skipped_only_where_no_identity_zero_key_exists() {
    use porin_ebpf::maps::Direction as PolicyDirection;
    let Some(dp) = datapath("l4_only_lookup_is_skipped_only_where_no_identity_zero_key_exists")
    else {
        return;
    };
    let exact = allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16));
    let egress_any = allow(0, EGRESS, 0, 0, None);
    let slot = dp.install_policy(&[exact, egress_any]).unwrap();
    let bits = dp.config().unwrap().prefix_free;
    let ingress_bit = slot.wildcard_free_bit(PolicyDirection::Ingress);
    let egress_bit = slot.wildcard_free_bit(PolicyDirection::Egress);
    assert_eq!(bits & slot.free_mask(), ingress_bit, "{bits:#b}");
    let p80 = Packet::tcp4(FRONTEND, 7, POD, 80);
    assert_eq!(to_pod(&dp, &p80), PASS_NEW);
    // An identity-0 deny on TCP 80 written straight into the hash is not consulted while
    // the bit is set: the bit is what skips the lookup.
    let deny0 = deny(0, INGRESS, TCP, 80, Some(16));
    let maps = dp.slot_maps(slot).unwrap();
    maps.exact
        .update(&deny0.0.to_bytes(), &deny0.1.to_bytes())
        .unwrap();
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 8, POD, 80)), PASS_NEW);
    // The same key through the in-place difference clears the bit before the write.
    let key = deny0.0.to_key().unwrap();
    let entry = deny0.1.to_entry(&key).unwrap();
    dp.apply_policy_diff(&[porin_compiler::diff::MapChange {
        kind: porin_compiler::diff::ChangeKind::Add,
        phase: porin_compiler::diff::Phase::Fence,
        key,
        entry: Some(entry),
    }])
    .unwrap();
    assert_eq!(dp.config().unwrap().prefix_free & ingress_bit, 0);
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 9, POD, 80)), DROP_RULE);
    // A fill derives the bits from what the slot holds: with the deny, ingress is consulted.
    let next = dp.install_policy(&[exact, egress_any, deny0]).unwrap();
    assert_ne!(next, slot);
    let bits = dp.config().unwrap().prefix_free;
    assert_eq!(bits & next.free_mask(), 0, "{bits:#b}");
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 10, POD, 80)), DROP_RULE);
    // Only egress identity-0 keys: egress's bit clear, ingress's set; `PolicySlot::B`'s and
    // `A`'s bits are distinct.
    let third = dp.install_policy(&[exact, egress_any]).unwrap();
    assert_eq!(third, slot);
    assert_eq!(
        dp.config().unwrap().prefix_free & (ingress_bit | egress_bit),
        ingress_bit
    );
    assert_ne!(
        PolicySlot::A.free_mask() & PolicySlot::B.free_mask(),
        PolicySlot::A.free_mask()
    );
    assert_eq!(to_pod(&dp, &Packet::tcp4(FRONTEND, 11, POD, 80)), PASS_NEW);
}

/// The one conntrack entry of a flow (DATAPATH.md §2.4), decoded.
fn ct_entries(dp: &Datapath) -> Vec<(porin_ebpf::abi::CtKey, porin_ebpf::abi::CtValue)> {
    let map = dp.object().map(porin_kernel::datapath::CONNTRACK).unwrap();
    map.keys()
        .unwrap()
        .into_iter()
        .map(|k| {
            let v = map.lookup(&k).unwrap().unwrap();
            (
                porin_ebpf::abi::CtKey::from_bytes(&k).unwrap(),
                porin_ebpf::abi::CtValue::from_bytes(&v).unwrap(),
            )
        })
        .collect()
}

/// TCP state as Cilium's `bpf/lib/conntrack.h` keeps it: a SYN-only flow has the SYN
/// lifetime, the first non-SYN packet gives the TCP lifetime, a FIN each way closes it (the
/// close lifetime, no refresh after), a SYN reopens it; an RST before both SYNs closes both
/// directions at once. One entry per flow, whichever side sends; IPv6 the same as IPv4.
#[test]
fn tcp_state_follows_syn_established_and_closing() {
    use porin_ebpf::abi::CtValue;
    use porin_kernel::packet::tcp_flags::{ACK, FIN, RST};
    let Some(dp) = datapath("tcp_state_follows_syn_established_and_closing") else {
        return;
    };
    dp.install_policy(&[
        allow(FRONTEND_ID, INGRESS, TCP, 80, Some(16)),
        allow(FRONTEND_ID, INGRESS, TCP, 81, Some(16)),
    ])
    .unwrap();
    // Lifetimes are compared between entries written microseconds apart: SYN 60 s,
    // established 21,600 s, closed 10 s.
    let s = 1_000_000_000u64;
    for (syn, what) in [
        (Packet::tcp4(FRONTEND, 5000, POD, 80), "v4"),
        (Packet::tcp6(frontend6(), 5000, pod6(), 80), "v6"),
    ] {
        dp.reset_conntrack().unwrap();
        assert_eq!(to_pod(&dp, &syn), PASS_NEW, "{what}");
        let entries = ct_entries(&dp);
        assert_eq!(entries.len(), 1, "{what}");
        let (key, value) = entries[0];
        assert_eq!(key.peer_port_be, 5000);
        assert_eq!(key.ep_port_be, 80);
        assert_eq!(value.opened_by, INGRESS);
        assert_eq!(value.tcp_state, CtValue::TCP_RX_SYN, "{what}");
        let syn_expiry = value.expires_ns;
        // SYN|ACK from the pod: a reply, the same entry.
        let synack = syn.reply();
        assert_eq!(
            from_pod(&dp, &synack),
            (Verdict::Pass, Counter::AllowedReply)
        );
        let ack = syn.clone().with_tcp_flags(ACK);
        assert_eq!(to_pod(&dp, &ack), PASS_EST);
        let (_, value) = ct_entries(&dp)[0];
        assert_eq!(
            value.tcp_state,
            CtValue::TCP_RX_SYN | CtValue::TCP_TX_SYN | CtValue::TCP_SEEN_NON_SYN
        );
        assert!(
            value.expires_ns > syn_expiry + 21_000 * s,
            "{what}: established"
        );
        // FIN from the peer, FIN from the pod: closed both ways.
        assert_eq!(
            to_pod(&dp, &syn.clone().with_tcp_flags(FIN | ACK)),
            PASS_EST
        );
        let (_, value) = ct_entries(&dp)[0];
        assert_eq!(
            value.tcp_state & CtValue::TCP_CLOSED,
            CtValue::TCP_RX_CLOSING
        );
        assert!(
            value.expires_ns > syn_expiry + 21_000 * s,
            "{what}: half-closed keeps the TCP lifetime"
        );
        assert_eq!(
            from_pod(&dp, &synack.clone().with_tcp_flags(FIN | ACK)),
            (Verdict::Pass, Counter::AllowedReply)
        );
        let (_, value) = ct_entries(&dp)[0];
        assert_eq!(value.tcp_state & CtValue::TCP_CLOSED, CtValue::TCP_CLOSED);
        assert!(
            value.expires_ns + 40 * s < syn_expiry,
            "{what}: close lifetime"
        );
        // The last ACK still passes as a reply, without refreshing the entry.
        let closing = ct_entries(&dp)[0].1.expires_ns;
        assert_eq!(
            from_pod(&dp, &synack.clone().with_tcp_flags(ACK)),
            (Verdict::Pass, Counter::AllowedReply)
        );
        assert_eq!(ct_entries(&dp)[0].1.expires_ns, closing);
        // A new SYN on the closed flow reopens it.
        assert_eq!(to_pod(&dp, &syn), PASS_EST);
        let (_, value) = ct_entries(&dp)[0];
        assert_eq!(value.tcp_state & CtValue::TCP_CLOSED, 0, "{what}: reopened");
        assert_eq!(ct_entries(&dp).len(), 1);
    }
    // Connection refused: SYN, then RST from the pod before its SYN: closed both ways.
    dp.reset_conntrack().unwrap();
    let syn = Packet::tcp4(FRONTEND, 5001, POD, 81);
    assert_eq!(to_pod(&dp, &syn), PASS_NEW);
    assert_eq!(
        from_pod(&dp, &syn.reply().with_tcp_flags(RST | ACK)),
        (Verdict::Pass, Counter::AllowedReply)
    );
    let (_, value) = ct_entries(&dp)[0];
    assert_eq!(value.tcp_state & CtValue::TCP_CLOSED, CtValue::TCP_CLOSED);
    assert_eq!(
        value.tcp_state & (CtValue::TCP_RX_SYN | CtValue::TCP_TX_SYN),
        CtValue::TCP_RX_SYN
    );
}

/// A raw IPv4 packet of IP protocol `proto` with 8 payload bytes (VRRP, IGMP and GRE have no
/// ports; the datapath reads nothing after the IP header).
fn portless4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8) -> Packet {
    Packet::new(
        Network::V4(Ipv4::new(src, dst)),
        Transport::Raw {
            proto,
            bytes: vec![0; 8],
        },
    )
}

/// Cilium's conntrack tracks TCP, UDP, SCTP, ICMP (IPv4) and ICMPv6 (IPv6); VRRP (112) and
/// IGMP (2) only with `enable-extended-ip-protocols`, looked up and tracked with ports 0;
/// everything else is dropped before policy with DROP_CT_UNKNOWN_PROTO (bpf/lib/conntrack.h;
/// Cilium's host-firewall IGMP test in bpf/tests drops IGMP under an allow-all egress entry
/// without TEST_EXTENDED_PROTOCOLS, and with it creates a conntrack entry with ports 0 that lets
/// the reply through). porin counts that drop as malformed (DATAPATH.md §4).
#[test]
fn extended_ip_protocols_reach_policy_only_with_the_setting() {
    const VRRP: u8 = 112;
    const IGMP: u8 = 2;
    const GRE: u8 = 47;
    const UNKNOWN: (Verdict, Counter) = (Verdict::Drop, Counter::DroppedMalformed);
    let policy = [
        allow(FRONTEND_ID, INGRESS, VRRP, 0, Some(0)),
        allow(OTHER_ID, INGRESS, 0, 0, None),
        allow(FRONTEND_ID, INGRESS, GRE, 0, Some(0)),
    ];
    let Some(default) = datapath("extended_ip_protocols_reach_policy_only_with_the_setting") else {
        return;
    };
    default.install_policy(&policy).unwrap();
    for proto in [VRRP, IGMP, GRE] {
        assert_eq!(
            to_pod(&default, &portless4(FRONTEND, POD, proto)),
            UNKNOWN,
            "{proto}"
        );
        // An L3-only allow admits every tracked protocol, not these.
        assert_eq!(
            to_pod(&default, &portless4(OTHER, POD, proto)),
            UNKNOWN,
            "{proto}"
        );
    }
    assert_eq!(to_pod(&default, &Packet::tcp4(OTHER, 1, POD, 80)), PASS_NEW);
    // ICMP carried in IPv6 is not ICMPv6: not tracked either.
    let icmp_in_v6 = Packet::new(
        Network::V6(porin_kernel::packet::Ipv6::new(frontend6(), pod6())),
        Transport::Raw {
            proto: proto::ICMP,
            bytes: vec![8, 0, 0, 0, 0, 0, 0, 0],
        },
    );
    assert_eq!(to_pod(&default, &icmp_in_v6), UNKNOWN);
    drop(default);

    let object = porin_ebpf::emit(&porin_ebpf::ObjectConfig {
        extended_ip_protocols: true,
        ..porin_ebpf::ObjectConfig::default()
    })
    .unwrap();
    let dp = Datapath::load(&object).unwrap();
    dp.install_ipcache(
        &[
            ipcache4(Ipv4Addr::new(10, 0, 2, 0), 24, FRONTEND_ID),
            ipcache4(OTHER, 32, OTHER_ID),
            ipcache4(Ipv4Addr::UNSPECIFIED, 0, 9),
        ],
        &[ipcache6(Ipv6Addr::UNSPECIFIED, 0, 10)],
    )
    .unwrap();
    dp.install_policy(&policy).unwrap();
    let vrrp = portless4(FRONTEND, POD, VRRP);
    assert_eq!(to_pod(&dp, &vrrp), PASS_NEW);
    assert_eq!(to_pod(&dp, &vrrp), PASS_EST);
    // Tracked with ports 0: the pod's answer is a reply, no egress policy needed.
    assert_eq!(from_pod(&dp, &vrrp.reply()), PASS_REPLY);
    // IGMP reaches policy: no entry for FRONTEND, the L3-only allow for OTHER.
    assert_eq!(to_pod(&dp, &portless4(FRONTEND, POD, IGMP)), DROP_DEFAULT);
    assert_eq!(to_pod(&dp, &portless4(OTHER, POD, IGMP)), PASS_NEW);
    // Other protocols stay untracked whatever the policy.
    assert_eq!(to_pod(&dp, &portless4(FRONTEND, POD, GRE)), UNKNOWN);
    assert_eq!(to_pod(&dp, &icmp_in_v6), UNKNOWN);
}
