//! Faults while applying a policy (issue #8): a policy map too small for the new policy, and an
//! injected error at write k for every k, against porin's object in the real kernel.
//!
//! After every failure the test checks what the agent relies on:
//! - A/B replacement (DATAPATH.md §2.3): the active slot is unchanged, the kernel's verdicts
//!   (`BPF_PROG_TEST_RUN` through `Datapath::decide`) are the OLD policy's as the compiler's
//!   reference lookup (`MapState::lookup`, Cilium `bpf/lib/policy.h` `__policy_can_access`)
//!   computes them, and the error names the map, the entry index, the entry count and the errno.
//! - in-place difference (`porin_compiler::diff::policy_diff`): the live map holds exactly the
//!   old entries again (rolled back) and verdicts are the old policy's.
//!
//! Each scenario also checks the fault-free apply reaches the NEW verdicts, so a test whose
//! "old" and "new" policies decided the same would not pass silently.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::kernel_support;

use std::io;
use std::net::Ipv4Addr;

use kernel_support::{ipcache4, kernel_available};
use porin_compiler::diff::{MapChange, policy_diff};
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{self, Entry, Key, ListenerPriority, MapState};
use porin_ebpf::abi::{PolicyPair, policy_pairs};
use porin_ebpf::{ObjectConfig, emit};
use porin_kernel::packet::Packet;
use porin_kernel::{
    BpfCommand, Datapath, Direction, KernelError, Map, MapWriter, PolicySlot, Verdict,
};

const POD: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const FRONTEND: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 20);
const OTHER: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 30);
const INTERNET: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);
const FRONTEND_ID: u32 = 1000;
const OTHER_ID: u32 = 2000;
const WORLD_V4_ID: u32 = 9;
const TCP: u8 = 6;
const UDP: u8 = 17;
/// The smallest policy map porin's object accepts (`ObjectConfig` allows 256..=65536).
const SMALL_POLICY_MAP: u32 = 256;

/// A [`MapWriter`] that makes the `fail_at`-th write (0-based, counting updates and deletes,
/// rollback writes included) fail as the kernel would, with `errno`, and the `also_fail_at`-th
/// too when set. Every other write goes to the kernel.
struct FailAt {
    fail_at: usize,
    also_fail_at: Option<usize>,
    errno: i32,
    writes: usize,
}

impl FailAt {
    fn new(fail_at: usize, errno: i32) -> Self {
        FailAt {
            fail_at,
            also_fail_at: None,
            errno,
            writes: 0,
        }
    }

    fn injected(&mut self, map: &Map, command: BpfCommand) -> Result<(), KernelError> {
        let this = self.writes;
        self.writes += 1;
        if this == self.fail_at || Some(this) == self.also_fail_at {
            return Err(KernelError::Syscall {
                command,
                object: map.name().to_owned(),
                source: io::Error::from_raw_os_error(self.errno),
            });
        }
        Ok(())
    }
}

impl MapWriter for FailAt {
    fn update(&mut self, map: &Map, key: &[u8], value: &[u8]) -> Result<(), KernelError> {
        self.injected(map, BpfCommand::MapUpdateElem)?;
        map.update(key, value)
    }

    fn delete(&mut self, map: &Map, key: &[u8]) -> Result<bool, KernelError> {
        self.injected(map, BpfCommand::MapDeleteElem)?;
        map.delete(key)
    }
}

fn id(value: u32) -> Identity {
    Identity::new(value).unwrap()
}

fn key(direction: mapstate::Direction, identity: u32, proto: u8, port: u16, prefix: u8) -> Key {
    Key::new(direction, id(identity), proto, port, prefix).unwrap()
}

fn state(entries: &[(Key, Entry)]) -> MapState {
    let mut state = MapState::new();
    for (key, entry) in entries {
        state.upsert(*key, entry.clone()).unwrap();
    }
    state
}

/// The policy-map pairs of a map state, sorted by key bytes (as `Datapath::policy_entries`
/// returns them).
fn raw(state: &MapState) -> Vec<PolicyPair> {
    let mut out = policy_pairs(state);
    out.sort_by_key(|(key, _)| key.to_bytes());
    out
}

fn raw_vec(state: &MapState) -> Vec<PolicyPair> {
    raw(state)
}

/// The policy the endpoint enforces before each apply: frontend may use TCP 80, everyone
/// (wildcard identity) DNS egress, the other pod is denied, HTTP on 8080 goes to the proxy.
fn old_policy() -> MapState {
    use mapstate::Direction::{Egress, Ingress};
    state(&[
        (key(Ingress, FRONTEND_ID, TCP, 80, 16), Entry::allow()),
        (key(Ingress, OTHER_ID, 0, 0, 0), Entry::deny()),
        (key(Egress, 0, UDP, 53, 16), Entry::allow()),
        (
            key(Ingress, FRONTEND_ID, TCP, 8080, 16),
            Entry::redirect(15001, ListenerPriority::HTTP),
        ),
    ])
}

/// The policy being applied: 80 moves to 443, the deny of the other pod is lifted to a TCP
/// 80 allow, DNS stays, the redirect is removed, and `extra` exact TCP ports (2000, 2001, ...)
/// of the frontend are allowed (to make the policy as large as a test needs).
fn new_policy(extra: u16) -> MapState {
    use mapstate::Direction::{Egress, Ingress};
    let mut entries = vec![
        (key(Ingress, FRONTEND_ID, TCP, 443, 16), Entry::allow()),
        (key(Ingress, OTHER_ID, TCP, 80, 16), Entry::allow()),
        (key(Egress, 0, UDP, 53, 16), Entry::allow()),
        (key(Egress, WORLD_V4_ID, TCP, 443, 16), Entry::allow()),
    ];
    for port in 0..extra {
        entries.push((
            key(Ingress, FRONTEND_ID, TCP, 2000 + port, 16),
            Entry::allow(),
        ));
    }
    state(&entries)
}

/// The flows every check decides: both directions, three peers, ports both policies mention.
fn flows() -> Vec<(Direction, Ipv4Addr, u32, u8, u16)> {
    let mut out = Vec::new();
    for direction in [Direction::ToEndpoint, Direction::FromEndpoint] {
        for (peer, identity) in [
            (FRONTEND, FRONTEND_ID),
            (OTHER, OTHER_ID),
            (INTERNET, WORLD_V4_ID),
        ] {
            for (proto, port) in [(TCP, 80), (TCP, 443), (TCP, 8080), (TCP, 2000), (UDP, 53)] {
                out.push((direction, peer, identity, proto, port));
            }
        }
    }
    out
}

/// Asserts the kernel decides every flow as the reference lookup over `expected` does.
fn assert_verdicts(dp: &Datapath, expected: &MapState, context: &str) {
    for (direction, peer, identity, proto, port) in flows() {
        let packet = match (direction, proto) {
            (Direction::ToEndpoint, TCP) => Packet::tcp4(peer, 40000, POD, port),
            (Direction::ToEndpoint, _) => Packet::udp4(peer, 40000, POD, port),
            (Direction::FromEndpoint, TCP) => Packet::tcp4(POD, 40000, peer, port),
            (Direction::FromEndpoint, _) => Packet::udp4(POD, 40000, peer, port),
        };
        dp.reset_conntrack().unwrap();
        let kernel = dp.decide(direction, &packet.build()).unwrap();
        let policy_direction = match direction {
            Direction::ToEndpoint => mapstate::Direction::Ingress,
            Direction::FromEndpoint => mapstate::Direction::Egress,
        };
        let reference = expected
            .lookup(policy_direction, id(identity), proto, port)
            .verdict;
        let want = match reference {
            mapstate::Verdict::Allow => (Verdict::Pass, None),
            mapstate::Verdict::Redirect { proxy_port } => (Verdict::Pass, Some(proxy_port)),
            _ => (Verdict::Drop, None),
        };
        assert_eq!(
            (kernel.verdict, kernel.proxy_port),
            want,
            "{context}: {direction:?} {peer} proto {proto} port {port}: kernel {kernel:?}, \
             reference {reference:?}"
        );
    }
}

/// porin's object with a policy map of `policy_map_max_entries`, loaded, ipcache filled.
fn datapath(test: &str, policy_map_max_entries: u32) -> Option<Datapath> {
    if !kernel_available(test) {
        return None;
    }
    let object = emit(&ObjectConfig {
        policy_map_max_entries,
        ..ObjectConfig::default()
    })
    .unwrap();
    let dp = Datapath::load(&object).unwrap();
    dp.install_ipcache(
        &[
            ipcache4(Ipv4Addr::new(10, 0, 2, 0), 24, FRONTEND_ID),
            ipcache4(OTHER, 32, OTHER_ID),
            ipcache4(Ipv4Addr::UNSPECIFIED, 0, WORLD_V4_ID),
        ],
        &[],
    )
    .unwrap();
    Some(dp)
}

/// The errno the test expects at the bottom of an apply error.
fn errno_of(error: &KernelError) -> Option<i32> {
    error.errno()
}

#[test]
fn ab_switch_into_a_too_small_map_keeps_the_old_policy_enforced() {
    let test = "ab_switch_into_a_too_small_map_keeps_the_old_policy_enforced";
    let Some(dp) = datapath(test, SMALL_POLICY_MAP) else {
        return;
    };
    let old = old_policy();
    let active = dp.install_policy(&raw(&old)).unwrap();
    assert_verdicts(&dp, &old, "old policy installed");

    // 4 + 300 entries cannot fit a 256-entry map: the kernel refuses entry 256 with ENOSPC.
    let too_big = new_policy(300);
    let count = too_big.iter().count();
    let error = dp.install_policy(&raw(&too_big)).unwrap_err();
    match &error {
        KernelError::PolicyWrite {
            map,
            index,
            count: reported,
            ..
        } => {
            // The slot's exact keys and prefixes are in two maps of SMALL_POLICY_MAP each:
            // the one that fills first refuses the entry that does not fit.
            let target = active.other();
            assert!(
                [target.map_name(), target.exact_map_name()].contains(&map.as_str()),
                "{map}"
            );
            assert!(*index >= SMALL_POLICY_MAP as usize, "{error}");
            assert_eq!(*reported, count);
        }
        other => panic!("expected PolicyWrite, got {other:?}"),
    }
    assert!(full_map_errno(&error), "{error}");
    let message = error.to_string();
    for needle in [
        "porin_pol",
        &format!("of {count}"),
        "previously enforced policy stays in force",
        "BPF_MAP_UPDATE_ELEM",
        "os error",
    ] {
        assert!(message.contains(needle), "`{needle}` not in: {message}");
    }
    assert_eq!(dp.active_slot().unwrap(), active);
    assert_eq!(dp.policy_entries(active).unwrap(), raw_vec(&old));
    assert_verdicts(&dp, &old, "after ENOSPC");

    // The failure left nothing behind that blocks the next apply: a policy that fits works.
    let fits = new_policy(100);
    let slot = dp.install_policy(&raw(&fits)).unwrap();
    assert_eq!(slot, active.other());
    assert_eq!(dp.policy_entries(slot).unwrap(), raw_vec(&fits));
    assert_verdicts(&dp, &fits, "after a policy that fits");
}

#[test]
fn ab_switch_with_a_failure_at_every_write_keeps_the_old_policy_enforced() {
    let test = "ab_switch_with_a_failure_at_every_write_keeps_the_old_policy_enforced";
    let Some(dp) = datapath(test, SMALL_POLICY_MAP) else {
        return;
    };
    let old = old_policy();
    let new = new_policy(12);
    let entries = raw(&new);
    // Start from slot B so that both slots get exercised by the two halves below.
    dp.install_policy(&raw(&old)).unwrap();
    assert_eq!(dp.active_slot().unwrap(), PolicySlot::B);
    for fail_at in 0..entries.len() {
        let error = dp
            .install_policy_with(&entries, &mut FailAt::new(fail_at, libc::EIO))
            .unwrap_err();
        match &error {
            KernelError::PolicyWrite {
                map, index, count, ..
            } => {
                let (key, _) = &entries[fail_at];
                assert_eq!(map, PolicySlot::A.map_for(key));
                assert_eq!((*index, *count), (fail_at, entries.len()));
            }
            other => panic!("write {fail_at}: expected PolicyWrite, got {other:?}"),
        }
        assert_eq!(errno_of(&error), Some(libc::EIO));
        assert!(
            error
                .to_string()
                .contains(&format!("entry {fail_at} of {}", entries.len())),
            "{error}"
        );
        assert_eq!(dp.active_slot().unwrap(), PolicySlot::B, "write {fail_at}");
        assert_eq!(
            dp.policy_entries(PolicySlot::B).unwrap(),
            raw_vec(&old),
            "write {fail_at}: the enforced slot was touched"
        );
        assert_verdicts(
            &dp,
            &old,
            &format!("A/B, injected failure at write {fail_at}"),
        );
    }
    // The same writer past the last write changes nothing: the apply succeeds.
    let slot = dp
        .install_policy_with(&entries, &mut FailAt::new(entries.len(), libc::EIO))
        .unwrap();
    assert_eq!(slot, PolicySlot::A);
    assert_verdicts(&dp, &new, "A/B, no failure");
}

/// Applies `diff` to a live map holding `old` with a failure at every write position, then
/// without failure; returns how many positions were tested.
fn diff_fails_everywhere(dp: &Datapath, old: &MapState, new: &MapState, context: &str) -> usize {
    let slot = dp.install_policy_unattached(&raw(old)).unwrap();
    let changes: Vec<MapChange> = policy_diff(old, new);
    assert!(!changes.is_empty(), "{context}: the difference is empty");
    for fail_at in 0..changes.len() {
        let error = dp
            .apply_policy_diff_with(&changes, &mut FailAt::new(fail_at, libc::ENOMEM))
            .unwrap_err();
        match &error {
            KernelError::DiffRolledBack {
                map, index, count, ..
            } => {
                let key = porin_ebpf::abi::PolicyKey::from_key(&changes[fail_at].key);
                assert_eq!(map, slot.map_for(&key));
                assert_eq!((*index, *count), (fail_at, changes.len()));
            }
            other => panic!("{context}: write {fail_at}: expected DiffRolledBack, got {other:?}"),
        }
        assert_eq!(errno_of(&error), Some(libc::ENOMEM));
        let message = error.to_string();
        assert!(
            message.contains(&format!("write {fail_at} of {}", changes.len()))
                && (message.contains(slot.map_name()) || message.contains(slot.exact_map_name()))
                && message.contains("rolled back")
                && message.contains("os error 12"),
            "{message}"
        );
        assert_eq!(dp.active_slot().unwrap(), slot);
        assert_eq!(
            dp.policy_entries(slot).unwrap(),
            raw_vec(old),
            "{context}: write {fail_at}: the live map was not restored exactly"
        );
        assert_verdicts(dp, old, &format!("{context}: failure at write {fail_at}"));
    }
    dp.apply_policy_diff(&changes).unwrap();
    assert_eq!(
        dp.active_slot().unwrap(),
        slot,
        "an in-place diff never flips"
    );
    assert_eq!(dp.policy_entries(slot).unwrap(), raw_vec(new));
    assert_verdicts(dp, new, &format!("{context}: no failure"));
    changes.len()
}

#[test]
fn in_place_diff_rolls_back_a_failure_at_every_write() {
    let test = "in_place_diff_rolls_back_a_failure_at_every_write";
    let Some(dp) = datapath(test, SMALL_POLICY_MAP) else {
        return;
    };
    // Adds, changes (the other pod's deny is replaced by its TCP 80 allow: a delete of the
    // L3 key plus an add), deletes (80, 8080) and an unchanged key (DNS).
    let tested = diff_fails_everywhere(&dp, &old_policy(), &new_policy(6), "old -> new");
    assert!(tested >= 10, "only {tested} writes");
    // And back: the reverse difference re-adds what was deleted (undo of deletes).
    diff_fails_everywhere(&dp, &new_policy(6), &old_policy(), "new -> old");
}

#[test]
fn in_place_diff_that_overflows_the_map_is_rolled_back() {
    let test = "in_place_diff_that_overflows_the_map_is_rolled_back";
    let Some(dp) = datapath(test, SMALL_POLICY_MAP) else {
        return;
    };
    // 4 + 246 = 250 entries, then a policy of 4 + 300: the fence phase writes the new keys
    // (and fences the removed ones without deleting them), so the live map fills up and the
    // kernel refuses an insert with ENOSPC part-way.
    let old = new_policy(246);
    let new = new_policy(300);
    let slot = dp.install_policy(&raw(&old)).unwrap();
    let changes = policy_diff(&old, &new);
    let error = dp.apply_policy_diff(&changes).unwrap_err();
    match &error {
        KernelError::DiffRolledBack { index, count, .. } => {
            assert!(*index > 0 && *index < *count, "{error}");
        }
        other => panic!("expected DiffRolledBack, got {other:?}"),
    }
    assert!(full_map_errno(&error), "{error}");
    assert_eq!(dp.policy_entries(slot).unwrap(), raw_vec(&old));
    assert_verdicts(&dp, &old, "after ENOSPC in the live map");
}

#[test]
fn a_failing_rollback_is_reported_as_such() {
    let test = "a_failing_rollback_is_reported_as_such";
    let Some(dp) = datapath(test, SMALL_POLICY_MAP) else {
        return;
    };
    let old = old_policy();
    let new = new_policy(6);
    dp.install_policy(&raw(&old)).unwrap();
    let changes = policy_diff(&old, &new);
    // Write 5 fails; the rollback then undoes writes 4, 3, ...: the first undo is overall
    // write 6 (undoing write 4), the second (undoing write 3) is made to fail as well.
    let mut writer = FailAt::new(5, libc::EIO);
    writer.also_fail_at = Some(7);
    let error = dp
        .apply_policy_diff_with(&changes, &mut writer)
        .unwrap_err();
    match &error {
        KernelError::RollbackFailed {
            index, undo_index, ..
        } => assert_eq!((*index, *undo_index), (5, 3)),
        other => panic!("expected RollbackFailed, got {other:?}"),
    }
    assert!(
        error
            .to_string()
            .contains("a mix of the old and new policy"),
        "{error}"
    );
}

/// A full LPM trie refuses an insert with `ENOSPC`, a full hash map with `E2BIG`
/// (`kernel/bpf/lpm_trie.c`, `kernel/bpf/hashtab.c`).
fn full_map_errno(error: &KernelError) -> bool {
    matches!(errno_of(error), Some(libc::ENOSPC | libc::E2BIG))
}
