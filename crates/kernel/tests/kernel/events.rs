//! The verdict event ring buffer `porin_events` (DATAPATH.md §2.6): a dropped packet run
//! through BPF_PROG_TEST_RUN produces exactly one record with the packet's fields, allows are
//! silent until asked for, and the switches survive a policy flip.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::kernel_support::{INGRESS, allow, ipcache4, ipcache6, kernel_available, porin_object};
use porin_ebpf::abi::Event;
use porin_ebpf::maps::Verdict as CounterIndex;
use porin_kernel::packet::{Packet, proto};
use porin_kernel::{Counter, Datapath, Direction, EventReader, EventSelection};

const POD: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 20);
const PEER_ID: u32 = 1000;

fn loaded(test: &str) -> Option<(Datapath, EventReader)> {
    if !kernel_available(test) {
        return None;
    }
    let dp = Datapath::load(&porin_object()).unwrap();
    dp.install_ipcache(
        &[
            ipcache4(PEER, 32, PEER_ID),
            ipcache4(Ipv4Addr::UNSPECIFIED, 0, 9),
        ],
        &[ipcache6(Ipv6Addr::UNSPECIFIED, 0, 10)],
    )
    .unwrap();
    // Identity 1000 may reach TCP 80.
    dp.install_policy_unattached(&[allow(PEER_ID, INGRESS, proto::TCP, 80, Some(16))])
        .unwrap();
    let reader = EventReader::for_datapath(&dp).unwrap();
    Some((dp, reader))
}

#[test]
fn a_dropped_packet_writes_one_event_with_its_fields() {
    let Some((dp, mut reader)) = loaded("a_dropped_packet_writes_one_event_with_its_fields") else {
        return;
    };
    assert_eq!(dp.events().unwrap(), EventSelection::default());
    let denied = Packet::tcp4(PEER, 40000, POD, 443);
    let verdict = dp.decide(Direction::ToEndpoint, &denied.build()).unwrap();
    assert_eq!(verdict.counter, Counter::DeniedByDefault);
    let events = reader.poll().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = events[0];
    assert_eq!(event.verdict, Event::DROP);
    assert_eq!(event.reason_verdict(), Some(CounterIndex::DeniedByDefault));
    assert_eq!(event.identity, PEER_ID);
    assert_eq!(event.direction, INGRESS);
    assert_eq!(event.proto, proto::TCP);
    assert_eq!(event.dport_be, 443);
    assert_eq!(event.family, 4);
    assert_eq!(event.peer(), Some(IpAddr::V4(PEER)));
    assert_eq!(&event.peer_addr[4..], &[0; 12]);
    assert_ne!(event.timestamp_ns, 0);
    // BPF_PROG_TEST_RUN runs the skb on the loopback device of the test's namespace.
    assert_ne!(event.ifindex, 0);
    // Nothing left: exactly one record per dropped packet.
    assert!(reader.poll().unwrap().is_empty());
    assert_eq!(dp.read_counters().unwrap().events_lost(), 0);
}

#[test]
fn allows_are_silent_by_default_and_written_when_switched_on() {
    let Some((dp, mut reader)) =
        loaded("allows_are_silent_by_default_and_written_when_switched_on")
    else {
        return;
    };
    let allowed = Packet::tcp4(PEER, 40001, POD, 80);
    assert!(
        dp.decide(Direction::ToEndpoint, &allowed.build())
            .unwrap()
            .passed()
    );
    assert!(reader.poll().unwrap().is_empty());

    dp.set_events(EventSelection {
        drops: false,
        allows: true,
    })
    .unwrap();
    // A flip keeps the switches.
    dp.install_policy_unattached(&[allow(PEER_ID, INGRESS, proto::TCP, 80, Some(16))])
        .unwrap();
    assert_eq!(
        dp.events().unwrap(),
        EventSelection {
            drops: false,
            allows: true
        }
    );
    let v6 = Packet::tcp6(
        "fd00:2::20".parse().unwrap(),
        40002,
        "fd00::a".parse().unwrap(),
        80,
    );
    assert!(
        !dp.decide(Direction::ToEndpoint, &v6.build())
            .unwrap()
            .passed()
    );
    assert!(
        dp.decide(Direction::ToEndpoint, &allowed.build())
            .unwrap()
            .passed()
    );
    let events = reader.poll().unwrap();
    assert_eq!(events.len(), 1, "only the allow: {events:?}");
    assert_eq!(events[0].verdict, Event::ALLOW);
    assert_eq!(
        events[0].reason_verdict(),
        Some(CounterIndex::AllowedEstablished)
    );
    assert_eq!(events[0].dport_be, 80);
}
