//! Cross-check of porin's loader against aya 0.14: the same object, loaded once by each, filled
//! with the same entries, must give the same verdict and mark for the same packet sequence.
//! aya does not expose BPF_PROG_TEST_RUN in 0.14, so the aya-loaded programs are run through
//! porin's `kernel::sys::prog_test_run` on aya's program fds.

// aya builds only for Linux (a Linux-only dev-dependency).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::kernel_support;

use std::net::Ipv4Addr;
use std::os::fd::AsFd;

use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::programs::SchedClassifier;
use kernel_support::{EGRESS, HTTP_REDIRECT, INGRESS, allow, deny, ipcache4, kernel_available};
use kernel_support::{policy_entry, policy_key, porin_object};
use porin_ebpf::abi::{IpcacheValue, PolicyEntry, PolicyKey};
use porin_kernel::packet::{Packet, echo_rest};
use porin_kernel::{Datapath, Direction, SkBuff, sys};

const POD: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const FRONTEND: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 20);
const OTHER: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 30);

#[test]
fn aya_and_porin_loaders_give_identical_verdicts() {
    if !kernel_available("aya_and_porin_loaders_give_identical_verdicts") {
        return;
    }
    let object = porin_object();
    let ipcache = [
        ipcache4(Ipv4Addr::new(10, 0, 2, 0), 24, 1000),
        ipcache4(OTHER, 32, 2000),
        ipcache4(Ipv4Addr::UNSPECIFIED, 0, 9),
    ];
    let redirect_key = policy_key(1000, INGRESS, 6, 8080, Some(16));
    let policy = [
        allow(1000, INGRESS, 6, 80, Some(16)),
        allow(1000, INGRESS, 17, 53, Some(16)),
        allow(0, INGRESS, 1, 8, Some(16)),
        deny(2000, INGRESS, 0, 0, None),
        allow(1000, EGRESS, 6, 5432, Some(13)),
        (
            redirect_key,
            policy_entry(&redirect_key, HTTP_REDIRECT, 15001, 0),
        ),
    ];

    // porin's loader, policy in slot A directly (config 0 = A on a fresh object).
    let porin = Datapath::load(&object).unwrap();
    porin.install_ipcache(&ipcache, &[]).unwrap();
    for (key, value) in &policy {
        porin
            .object()
            .map("porin_policy_a")
            .unwrap()
            .update(&key.to_bytes(), &value.to_bytes())
            .unwrap();
    }

    // aya.
    let mut aya = aya::Ebpf::load(&object).expect("aya 0.14 loads porin's object");
    {
        let mut ipc: LpmTrie<_, [u8; 4], [u8; IpcacheValue::SIZE]> =
            LpmTrie::try_from(aya.map_mut("porin_ipcache4").unwrap()).unwrap();
        for (key, value) in &ipcache {
            ipc.insert(&Key::new(key.prefixlen, key.addr), value.to_bytes(), 0)
                .unwrap();
        }
    }
    {
        let mut pol: LpmTrie<_, [u8; 8], [u8; PolicyEntry::SIZE]> =
            LpmTrie::try_from(aya.map_mut("porin_policy_a").unwrap()).unwrap();
        for (key, value) in &policy {
            // aya's LPM key is the prefix length and the bytes after it.
            let data: [u8; 8] = key.to_bytes()[PolicyKey::OFF_IDENTITY..]
                .try_into()
                .unwrap();
            pol.insert(&Key::new(key.prefixlen, data), value.to_bytes(), 0)
                .unwrap();
        }
    }
    for name in ["porin_to_endpoint", "porin_from_endpoint"] {
        let program: &mut SchedClassifier = aya.program_mut(name).unwrap().try_into().unwrap();
        program.load().expect("aya loads the program");
    }

    let syn = Packet::tcp4(FRONTEND, 40000, POD, 80);
    let sequence: Vec<(Direction, Packet)> = vec![
        (Direction::ToEndpoint, syn.clone()),
        (Direction::FromEndpoint, syn.reply()),
        (
            Direction::ToEndpoint,
            Packet::tcp4(FRONTEND, 40000, POD, 81),
        ),
        (Direction::ToEndpoint, Packet::udp4(FRONTEND, 1, POD, 53)),
        (Direction::ToEndpoint, Packet::tcp4(OTHER, 1, POD, 80)),
        (
            Direction::ToEndpoint,
            Packet::icmp4(OTHER, POD, 8, 0, echo_rest(1, 1)),
        ),
        (
            Direction::ToEndpoint,
            Packet::icmp4(FRONTEND, POD, 8, 0, echo_rest(1, 1)),
        ),
        (
            Direction::FromEndpoint,
            Packet::tcp4(POD, 1, FRONTEND, 5439),
        ),
        (
            Direction::FromEndpoint,
            Packet::tcp4(POD, 1, FRONTEND, 5440),
        ),
        (Direction::ToEndpoint, Packet::tcp4(FRONTEND, 2, POD, 8080)),
        (
            Direction::ToEndpoint,
            Packet::non_ip(0x0806, vec![0; 28]).with_vlan(3),
        ),
    ];
    let mut passes = 0;
    for (index, (direction, packet)) in sequence.iter().enumerate() {
        let frame = packet.build();
        let ours = porin.decide(*direction, &frame).unwrap();
        let name = direction.program_name();
        let program: &SchedClassifier = aya.program(name).unwrap().try_into().unwrap();
        let ctx = SkBuff::default().to_bytes();
        let theirs =
            sys::prog_test_run(program.fd().unwrap().as_fd(), name, &frame, Some(&ctx), 1).unwrap();
        let theirs_mark = SkBuff::from_bytes(&theirs.ctx_out).mark;
        let ours_retval = if ours.passed() { 0 } else { 2 };
        assert_eq!(
            (ours_retval, ours.mark),
            (theirs.retval, theirs_mark),
            "packet {index} ({direction:?}) differs between porin's loader and aya"
        );
        passes += usize::from(ours.passed());
    }
    // The sequence exercises both outcomes.
    assert!(passes > 2 && passes < sequence.len(), "passes {passes}");
}
