//! The bpf(2) layer against the real kernel: every map type porin uses, program load with the
//! verifier log, and BPF_PROG_TEST_RUN with a `__sk_buff` context.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::kernel_support;

use std::os::fd::AsRawFd;

use kernel_support::{exit, insn, kernel_available, mov64_imm, program};
use porin_kernel::{
    BPF_F_NO_PREALLOC, KernelError, Map, MapSpec, MapType, Program, ProgramType, SkBuff,
    UpdateFlags,
};

fn spec(map_type: MapType, key_size: u32, value_size: u32, max: u32, flags: u32) -> MapSpec {
    MapSpec {
        map_type,
        key_size,
        value_size,
        max_entries: max,
        map_flags: flags,
    }
}

/// A minimal Ethernet + IPv4 + UDP frame; the programs here do not parse it.
fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8];
    f[12] = 0x08;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&28u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f
}

#[test]
fn hash_map_update_lookup_delete_iterate() {
    if !kernel_available("hash_map_update_lookup_delete_iterate") {
        return;
    }
    let map = Map::create("t_hash", spec(MapType::HASH, 4, 8, 16, 0)).unwrap();
    assert_eq!(map.lookup(&1u32.to_ne_bytes()).unwrap(), None);
    map.update(&1u32.to_ne_bytes(), &11u64.to_ne_bytes())
        .unwrap();
    map.update(&2u32.to_ne_bytes(), &22u64.to_ne_bytes())
        .unwrap();
    assert_eq!(
        map.lookup(&1u32.to_ne_bytes()).unwrap(),
        Some(11u64.to_ne_bytes().to_vec())
    );
    // NOEXIST on an existing key is EEXIST, with the errno in the typed error.
    let err = map
        .update_with(
            &1u32.to_ne_bytes(),
            &0u64.to_ne_bytes(),
            UpdateFlags::NoExist,
        )
        .unwrap_err();
    assert_eq!(err.errno(), Some(libc::EEXIST), "{err}");
    let mut keys = map.keys().unwrap();
    keys.sort();
    assert_eq!(
        keys,
        vec![1u32.to_ne_bytes().to_vec(), 2u32.to_ne_bytes().to_vec()]
    );
    assert!(map.delete(&1u32.to_ne_bytes()).unwrap());
    assert!(!map.delete(&1u32.to_ne_bytes()).unwrap());
    assert_eq!(map.clear().unwrap(), 1);
    assert_eq!(map.keys().unwrap(), Vec::<Vec<u8>>::new());
}

#[test]
fn wrong_key_and_value_sizes_are_typed_errors() {
    if !kernel_available("wrong_key_and_value_sizes_are_typed_errors") {
        return;
    }
    let map = Map::create("t_sizes", spec(MapType::HASH, 4, 8, 4, 0)).unwrap();
    match map.update(&[0u8; 3], &[0u8; 8]) {
        Err(KernelError::WrongSize {
            what: "key",
            given: 3,
            expected: 4,
            ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
    match map.lookup(&[0u8; 5]) {
        Err(KernelError::WrongSize { what: "key", .. }) => {}
        other => panic!("unexpected {other:?}"),
    }
    match map.update(&[0u8; 4], &[0u8; 4]) {
        Err(KernelError::WrongSize {
            what: "value",
            given: 4,
            expected: 8,
            ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

fn lpm_key(prefix: u32, addr: [u8; 4]) -> Vec<u8> {
    let mut k = prefix.to_le_bytes().to_vec();
    k.extend_from_slice(&addr);
    k
}

#[test]
fn lpm_trie_finds_the_longest_prefix() {
    if !kernel_available("lpm_trie_finds_the_longest_prefix") {
        return;
    }
    // LPM_TRIE requires BPF_F_NO_PREALLOC; without it the kernel says EINVAL.
    let err = Map::create("t_lpm_bad", spec(MapType::LPM_TRIE, 8, 8, 16, 0)).unwrap_err();
    assert_eq!(err.errno(), Some(libc::EINVAL), "{err}");
    let map = Map::create(
        "t_lpm",
        spec(MapType::LPM_TRIE, 8, 8, 16, BPF_F_NO_PREALLOC),
    )
    .unwrap();
    let value = |id: u32| {
        let mut v = id.to_le_bytes().to_vec();
        v.extend_from_slice(&[0; 4]);
        v
    };
    map.update(&lpm_key(0, [0, 0, 0, 0]), &value(2)).unwrap();
    map.update(&lpm_key(8, [10, 0, 0, 0]), &value(100)).unwrap();
    map.update(&lpm_key(24, [10, 1, 2, 0]), &value(200))
        .unwrap();
    // A lookup uses the full prefix length; the trie answers with the longest match.
    assert_eq!(
        map.lookup(&lpm_key(32, [10, 1, 2, 3])).unwrap(),
        Some(value(200))
    );
    assert_eq!(
        map.lookup(&lpm_key(32, [10, 9, 9, 9])).unwrap(),
        Some(value(100))
    );
    assert_eq!(
        map.lookup(&lpm_key(32, [192, 168, 0, 1])).unwrap(),
        Some(value(2))
    );
    assert_eq!(map.keys().unwrap().len(), 3);
    assert!(map.delete(&lpm_key(0, [0, 0, 0, 0])).unwrap());
    assert_eq!(map.lookup(&lpm_key(32, [192, 168, 0, 1])).unwrap(), None);
}

#[test]
fn lru_hash_evicts_instead_of_failing_when_full() {
    if !kernel_available("lru_hash_evicts_instead_of_failing_when_full") {
        return;
    }
    let map = Map::create("t_lru", spec(MapType::LRU_HASH, 8, 8, 64, 0)).unwrap();
    for i in 0u64..1000 {
        map.update(&i.to_ne_bytes(), &i.to_ne_bytes()).unwrap();
    }
    let kept = map.keys().unwrap().len();
    assert!(kept > 0 && kept <= 64, "kept {kept}");
    // The newest entry survives eviction.
    assert_eq!(
        map.lookup(&999u64.to_ne_bytes()).unwrap(),
        Some(999u64.to_ne_bytes().to_vec())
    );
}

#[test]
fn array_and_percpu_array_round_trip() {
    if !kernel_available("array_and_percpu_array_round_trip") {
        return;
    }
    let array = Map::create("t_array", spec(MapType::ARRAY, 4, 4, 2, 0)).unwrap();
    // Arrays exist in full from creation, zeroed.
    assert_eq!(array.lookup(&1u32.to_ne_bytes()).unwrap(), Some(vec![0; 4]));
    array
        .update(&1u32.to_ne_bytes(), &7u32.to_ne_bytes())
        .unwrap();
    assert_eq!(
        array.lookup(&1u32.to_ne_bytes()).unwrap(),
        Some(7u32.to_ne_bytes().to_vec())
    );
    assert_eq!(array.lookup(&2u32.to_ne_bytes()).unwrap(), None);
    array.clear().unwrap();
    assert_eq!(array.lookup(&1u32.to_ne_bytes()).unwrap(), Some(vec![0; 4]));

    let percpu = Map::create("t_percpu", spec(MapType::PERCPU_ARRAY, 4, 12, 1, 0)).unwrap();
    assert!(percpu.cpu_slots() >= 1);
    // 12-byte values occupy 16-byte slots per CPU in userspace.
    assert_eq!(percpu.userspace_value_size(), 16 * percpu.cpu_slots());
    let value = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    percpu.update_all_cpus(&0u32.to_ne_bytes(), &value).unwrap();
    let slots = percpu.lookup_per_cpu(&0u32.to_ne_bytes()).unwrap().unwrap();
    assert_eq!(slots.len(), percpu.cpu_slots());
    assert!(slots.iter().all(|slot| slot == &value));
}

#[test]
fn maps_of_maps_take_inner_map_fds() {
    if !kernel_available("maps_of_maps_take_inner_map_fds") {
        return;
    }
    let inner_spec = spec(MapType::LPM_TRIE, 12, 12, 16, BPF_F_NO_PREALLOC);
    let template = Map::create("t_inner_tpl", inner_spec.clone()).unwrap();
    let inner = Map::create("t_inner", inner_spec).unwrap();
    let outer = Map::create_outer(
        "t_outer_arr",
        spec(MapType::ARRAY_OF_MAPS, 4, 4, 2, 0),
        &template,
    )
    .unwrap();
    outer.set_inner_map(&0u32.to_ne_bytes(), &inner).unwrap();
    // A lookup from userspace yields the inner map's id, not an fd: non-zero and present.
    let id = outer.lookup(&0u32.to_ne_bytes()).unwrap().unwrap();
    assert_ne!(u32::from_ne_bytes(id.try_into().unwrap()), 0);
    assert_eq!(outer.lookup(&1u32.to_ne_bytes()).unwrap(), None);

    let hash_outer = Map::create_outer(
        "t_outer_hash",
        spec(MapType::HASH_OF_MAPS, 4, 4, 2, 0),
        &template,
    )
    .unwrap();
    hash_outer
        .set_inner_map(&7u32.to_ne_bytes(), &inner)
        .unwrap();
    assert!(hash_outer.lookup(&7u32.to_ne_bytes()).unwrap().is_some());
    // An inner map of another shape is refused by the kernel.
    let other = Map::create("t_other", spec(MapType::HASH, 4, 4, 4, 0)).unwrap();
    let err = hash_outer
        .set_inner_map(&8u32.to_ne_bytes(), &other)
        .unwrap_err();
    assert_eq!(err.errno(), Some(libc::EINVAL), "{err}");
}

#[test]
fn hand_encoded_program_returns_its_constant() {
    if !kernel_available("hand_encoded_program_returns_its_constant") {
        return;
    }
    let prog = Program::load(
        "t_ret2",
        ProgramType::SCHED_CLS,
        &program(&[mov64_imm(0, 2), exit()]),
        "GPL",
    )
    .unwrap();
    let out = prog.test_run(&frame(), &SkBuff::default()).unwrap();
    assert_eq!(out.retval, 2);
    assert_eq!(out.packet, frame());
    let out = prog
        .test_run_repeat(&frame(), &SkBuff::default(), 100)
        .unwrap();
    assert_eq!(out.retval, 2);
}

#[test]
fn test_run_reads_back_skb_mark() {
    if !kernel_available("test_run_reads_back_skb_mark") {
        return;
    }
    // r2 = 0xABC; *(u32 *)(r1 + 8) = r2 (skb->mark); r0 = 0; exit
    let code = program(&[
        mov64_imm(2, 0xABC),
        insn(0x63, 1, 2, 8, 0),
        mov64_imm(0, 0),
        exit(),
    ]);
    let prog = Program::load("t_mark", ProgramType::SCHED_CLS, &code, "GPL").unwrap();
    let out = prog
        .test_run(
            &frame(),
            &SkBuff {
                mark: 5,
                ..SkBuff::default()
            },
        )
        .unwrap();
    assert_eq!(out.retval, 0);
    assert_eq!(out.mark, 0xABC);
}

#[test]
fn program_reads_a_map_through_a_patched_ld_imm64() {
    if !kernel_available("program_reads_a_map_through_a_patched_ld_imm64") {
        return;
    }
    let map = Map::create("t_prog_map", spec(MapType::ARRAY, 4, 4, 1, 0)).unwrap();
    map.update(&0u32.to_ne_bytes(), &77u32.to_ne_bytes())
        .unwrap();
    let fd = map.fd().as_raw_fd();
    // *(u32 *)(r10 - 4) = 0; r2 = r10; r2 += -4; r1 = map (ld_imm64, src = BPF_PSEUDO_MAP_FD);
    // call bpf_map_lookup_elem; if r0 == 0 goto +2; r0 = *(u32 *)(r0 + 0); exit; r0 = 99; exit
    let code = program(&[
        insn(0x62, 10, 0, -4, 0),
        insn(0xbf, 2, 10, 0, 0),
        insn(0x07, 2, 0, 0, -4),
        insn(0x18, 1, 1, 0, fd),
        insn(0x00, 0, 0, 0, 0),
        insn(0x85, 0, 0, 0, 1),
        insn(0x15, 0, 0, 2, 0),
        insn(0x61, 0, 0, 0, 0),
        exit(),
        mov64_imm(0, 99),
        exit(),
    ]);
    let prog = Program::load("t_map_read", ProgramType::SCHED_CLS, &code, "GPL").unwrap();
    assert_eq!(
        prog.test_run(&frame(), &SkBuff::default()).unwrap().retval,
        77
    );
    map.update(&0u32.to_ne_bytes(), &13u32.to_ne_bytes())
        .unwrap();
    assert_eq!(
        prog.test_run(&frame(), &SkBuff::default()).unwrap().retval,
        13
    );
}

#[test]
fn verifier_rejection_returns_the_log() {
    if !kernel_available("verifier_rejection_returns_the_log") {
        return;
    }
    // `exit` with r0 never written: the verifier refuses with "R0 !read_ok".
    let err =
        Program::load("t_bad", ProgramType::SCHED_CLS, &program(&[exit()]), "GPL").unwrap_err();
    match &err {
        KernelError::VerifierRejected { program, log, .. } => {
            assert_eq!(program, "t_bad");
            assert!(log.contains("R0 !read_ok"), "log: {log}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(err.errno(), Some(libc::EACCES));
    assert!(!err.is_unavailable());
    // Code that is not whole instructions never reaches the kernel.
    assert!(matches!(
        Program::load("t_odd", ProgramType::SCHED_CLS, &[0u8; 12], "GPL"),
        Err(KernelError::Object(_))
    ));
}

#[test]
fn verifier_statistics_are_reported_on_success() {
    if !kernel_available("verifier_statistics_are_reported_on_success") {
        return;
    }
    let (_fd, stats) = porin_kernel::sys::prog_load_with_stats(
        "t_stats",
        ProgramType::SCHED_CLS,
        &program(&[mov64_imm(0, 2), exit()]),
        "GPL",
    )
    .unwrap();
    assert!(stats.contains("processed 2 insns"), "{stats}");
    // A rejected program still returns the full verifier log in the error.
    let err = porin_kernel::sys::prog_load_with_stats(
        "t_stats_bad",
        ProgramType::SCHED_CLS,
        &program(&[exit()]),
        "GPL",
    )
    .unwrap_err();
    assert!(matches!(err, KernelError::VerifierRejected { .. }), "{err}");
}

/// A private bpffs mount, unmounted and removed on drop.
struct PrivateBpffs(std::path::PathBuf);

impl Drop for PrivateBpffs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn pinned_maps_and_programs_reopen_as_the_same_objects() {
    if !kernel_available("pinned_maps_and_programs_reopen_as_the_same_objects") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("porin-sys-bpffs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "bpf", "bpf"])
        .arg(&dir)
        .status()
        .is_ok_and(|s| s.success());
    let _guard = PrivateBpffs(dir.clone());
    if !mounted {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "cannot mount bpffs in CI"
        );
        println!("SKIPPED: pinned_maps_and_programs_reopen_as_the_same_objects: no bpffs mount");
        return;
    }
    let spec_hash = spec(MapType::HASH, 4, 4, 4, 0);
    let map = Map::create("t_pin", spec_hash.clone()).unwrap();
    let map_path = dir.join("map").to_string_lossy().into_owned();
    map.pin(&map_path).unwrap();
    let reopened = Map::from_pinned(&map_path, "t_pin", spec_hash).unwrap();
    reopened
        .update(&1u32.to_ne_bytes(), &5u32.to_ne_bytes())
        .unwrap();
    assert_eq!(
        map.lookup(&1u32.to_ne_bytes()).unwrap(),
        Some(5u32.to_ne_bytes().to_vec())
    );
    // Pinning twice at one path is EEXIST.
    assert_eq!(map.pin(&map_path).unwrap_err().errno(), Some(libc::EEXIST));

    let prog = Program::load(
        "t_pin_prog",
        ProgramType::SCHED_CLS,
        &program(&[mov64_imm(0, 2), exit()]),
        "GPL",
    )
    .unwrap();
    let prog_path = dir.join("prog").to_string_lossy().into_owned();
    prog.pin(&prog_path).unwrap();
    drop(prog);
    let again = Program::from_pinned(&prog_path, "t_pin_prog", ProgramType::SCHED_CLS).unwrap();
    assert_eq!(
        again.test_run(&frame(), &SkBuff::default()).unwrap().retval,
        2
    );
    // A path that holds nothing is ENOENT.
    let missing = dir.join("nothing").to_string_lossy().into_owned();
    let err = Program::from_pinned(&missing, "x", ProgramType::SCHED_CLS).unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENOENT));
}
