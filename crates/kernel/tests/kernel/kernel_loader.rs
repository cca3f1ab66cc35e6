//! porin's ELF loader against an object built by another producer: clang compiles a small TC
//! program with BTF-defined maps (the layout libbpf, aya, cilium/ebpf and tc load), and porin's
//! loader must create the maps, patch the `ld_imm64` map references and give the same verdicts.
//! clang is installed in CI (`.ci/run`); outside CI a missing clang is a SKIPPED.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::kernel_support;

use std::process::Command;

use kernel_support::kernel_available;
use porin_kernel::packet::Packet;
use porin_kernel::{
    KernelError, LoadedObject, MapType, ObjectFile, SkBuff, TC_ACT_OK, TC_ACT_SHOT,
};

const SOURCE: &str = r#"
typedef unsigned int __u32; typedef unsigned short __u16; typedef unsigned char __u8;
#define SEC(n) __attribute__((section(n), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
struct key4 { __u32 prefixlen; __u8 addr[4]; };
struct ident { __u32 identity; __u32 flags; };
struct { __uint(type, 11); __type(key, struct key4); __type(value, struct ident);
         __uint(max_entries, 64); __uint(map_flags, 1); } ipc SEC(".maps");
struct { __uint(type, 2); __uint(key_size, 4); __uint(value_size, 4);
         __uint(max_entries, 4); } allowed SEC(".maps");
static void *(*lookup)(void *map, const void *key) = (void *)1;
struct __sk_buff { __u32 len, pkt_type, mark, queue_mapping, protocol, vlan_present, vlan_tci,
  vlan_proto, priority, ingress_ifindex, ifindex, tc_index, cb[5], hash, tc_classid, data,
  data_end; };
/* Drop unless the source's identity (from the LPM ipcache) is listed in allowed[0..3]. */
SEC("classifier") int check_source(struct __sk_buff *skb) {
  __u8 *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
  if (data + 34 > end) return 2;
  if (data[12] != 0x08 || data[13] != 0x00) return 0;
  struct key4 k = { .prefixlen = 32 };
  __builtin_memcpy(k.addr, data + 26, 4);
  struct ident *id = lookup(&ipc, &k);
  if (!id) return 2;
  for (__u32 i = 0; i < 4; i++) {
    __u32 idx = i; __u32 *v = lookup(&allowed, &idx);
    if (v && *v == id->identity) { skb->mark = id->identity; return 0; }
  }
  return 2;
}
SEC("classifier") int always_drop(struct __sk_buff *skb) { return 2; }
char _license[] SEC("license") = "GPL";
"#;

/// Compiles SOURCE with clang; `None` (after printing SKIPPED) when clang is absent outside CI.
fn compile(test: &str) -> Option<Vec<u8>> {
    let dir = std::env::temp_dir().join(format!("porin-loader-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let source = dir.join("fixture.bpf.c");
    let object = dir.join("fixture.bpf.o");
    std::fs::write(&source, SOURCE).expect("write fixture");
    let status = Command::new("clang")
        .args(["-target", "bpf", "-O2", "-g", "-c"])
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .status();
    let ok = matches!(status, Ok(s) if s.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: clang could not build the fixture ({status:?}); CI installs clang"
        );
        println!("SKIPPED: {test}: clang unavailable ({status:?})");
        let _ = std::fs::remove_dir_all(&dir);
        return None;
    }
    let bytes = std::fs::read(&object).expect("read object");
    let _ = std::fs::remove_dir_all(&dir);
    Some(bytes)
}

#[test]
fn parses_a_clang_object_without_privileges() {
    let Some(bytes) = compile("parses_a_clang_object_without_privileges") else {
        return;
    };
    let parsed = ObjectFile::parse(&bytes).unwrap();
    assert_eq!(parsed.license, "GPL");
    let names: Vec<_> = parsed.maps.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["ipc", "allowed"]);
    let ipc = &parsed.maps[0];
    assert_eq!(ipc.map_type, MapType::LPM_TRIE);
    assert_eq!((ipc.key_size, ipc.value_size), (8, 8));
    assert_eq!((ipc.max_entries, ipc.map_flags), (64, 1));
    let allowed = &parsed.maps[1];
    assert_eq!(allowed.map_type, MapType::ARRAY);
    assert_eq!(
        (allowed.key_size, allowed.value_size, allowed.max_entries),
        (4, 4, 4)
    );
    let programs: Vec<_> = parsed.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(programs, ["check_source", "always_drop"]);
    let check = &parsed.programs[0];
    assert!(check.relocations.iter().any(|r| r.map == "ipc"));
    assert!(check.relocations.iter().any(|r| r.map == "allowed"));
    assert!(parsed.programs[1].relocations.is_empty());
}

#[test]
fn loads_a_clang_object_and_its_verdicts_follow_the_maps() {
    let test = "loads_a_clang_object_and_its_verdicts_follow_the_maps";
    if !kernel_available(test) {
        return;
    }
    let Some(bytes) = compile(test) else {
        return;
    };
    let object = LoadedObject::load(&bytes).unwrap();
    // clang leaves DATASEC `.maps` with size 0 (libbpf patches it before BTF_LOAD), so the
    // raw BTF is refused by the kernel: verify_btf reports it with the kernel's BTF log.
    match object.verify_btf() {
        Err(KernelError::BtfRejected { log, .. }) => assert!(log.contains("size == 0"), "{log}"),
        other => panic!("clang's raw BTF should be rejected, got {other:?}"),
    }
    let ipc = object.map("ipc").unwrap();
    let allowed = object.map("allowed").unwrap();
    let check = object.program("check_source").unwrap();
    let src = std::net::Ipv4Addr::new(10, 1, 2, 3);
    let frame = Packet::udp4(src, 1000, std::net::Ipv4Addr::new(10, 0, 0, 9), 53).build();

    // Empty ipcache: no identity, drop.
    let out = check.test_run(&frame, &SkBuff::default()).unwrap();
    assert_eq!(out.retval, TC_ACT_SHOT);
    // 10.1.0.0/16 -> identity 1234, not yet allowed.
    let mut key = 16u32.to_le_bytes().to_vec();
    key.extend_from_slice(&[10, 1, 0, 0]);
    let mut value = 1234u32.to_le_bytes().to_vec();
    value.extend_from_slice(&[0; 4]);
    ipc.update(&key, &value).unwrap();
    assert_eq!(
        check.test_run(&frame, &SkBuff::default()).unwrap().retval,
        TC_ACT_SHOT
    );
    allowed
        .update(&2u32.to_ne_bytes(), &1234u32.to_ne_bytes())
        .unwrap();
    let out = check.test_run(&frame, &SkBuff::default()).unwrap();
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(out.mark, 1234);
    // Non-IPv4 passes; the second program always drops.
    let arp = Packet::non_ip(0x0806, vec![0; 28]).build();
    assert_eq!(
        check.test_run(&arp, &SkBuff::default()).unwrap().retval,
        TC_ACT_OK
    );
    let drop = object.program("always_drop").unwrap();
    assert_eq!(
        drop.test_run(&frame, &SkBuff::default()).unwrap().retval,
        TC_ACT_SHOT
    );
    assert!(matches!(
        object.program("nope"),
        Err(KernelError::Missing {
            kind: "program",
            ..
        })
    ));
}

#[test]
fn rejects_objects_it_cannot_load_faithfully() {
    // Not an ELF, and an ELF with no BTF: clear errors, no panic, no kernel needed.
    assert!(matches!(
        ObjectFile::parse(b"garbage"),
        Err(KernelError::Object(_))
    ));
    let Some(bytes) = compile("rejects_objects_it_cannot_load_faithfully") else {
        return;
    };
    for cut in [16, 64, bytes.len() / 2] {
        assert!(ObjectFile::parse(&bytes[..cut]).is_err());
    }
}
