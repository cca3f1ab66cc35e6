//! Shared helpers of the kernel tests: skip-or-fail policy and a tiny instruction encoder.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use porin_ebpf::abi::{
    Ipcache4Key, Ipcache4Pair, Ipcache6Key, Ipcache6Pair, IpcacheValue, PolicyEntry, PolicyKey,
    PolicyPair,
};
use porin_kernel as kernel;

/// True when the kernel can be used. Without it: in CI (`CI=true`) the test fails loudly;
/// elsewhere it prints `SKIPPED: <test>: <reason>` and the caller returns.
pub fn kernel_available(test: &str) -> bool {
    match kernel::probe() {
        Ok(()) => true,
        Err(error) => {
            let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !in_ci,
                "{test}: CI=true but eBPF is unavailable: {error} (run CI as root)"
            );
            println!("SKIPPED: {test}: eBPF unavailable ({error})");
            false
        }
    }
}

/// One raw instruction: opcode, dst, src, off, imm.
pub fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[0] = code;
    out[1] = (dst & 0x0f) | (src << 4);
    out[2..4].copy_from_slice(&off.to_le_bytes());
    out[4..8].copy_from_slice(&imm.to_le_bytes());
    out
}

/// `dst = imm` (64-bit).
pub fn mov64_imm(dst: u8, imm: i32) -> [u8; 8] {
    insn(0xb7, dst, 0, 0, imm)
}

/// `exit`.
pub fn exit() -> [u8; 8] {
    insn(0x95, 0, 0, 0, 0)
}

/// Concatenates instructions.
pub fn program(insns: &[[u8; 8]]) -> Vec<u8> {
    insns.iter().flatten().copied().collect()
}

/// Policy precedence of a deny entry (docs/semantics.md §4.3).
pub const DENY: u32 = 0xFFFF_FFFF;
/// Precedence of a plain allow.
pub const ALLOW: u32 = 0xFFFF_FF01;
/// Precedence of an HTTP redirect (listener priority 101 → low byte 154).
pub const HTTP_REDIRECT: u32 = 0xFFFF_FF9A;

/// Policy direction bytes.
pub const INGRESS: u8 = PolicyKey::INGRESS;
/// Egress.
pub const EGRESS: u8 = PolicyKey::EGRESS;

/// A policy key per DATAPATH.md §2.2, field by field (independently of the compiler's key
/// encoding): `port_prefix` of `None` means L3-only (prefix 40, proto must be 0), `Some(0)`
/// proto-only (48), `Some(n)` proto + top n port bits.
pub fn policy_key(
    identity: u32,
    direction: u8,
    proto: u8,
    dport: u16,
    port_prefix: Option<u8>,
) -> PolicyKey {
    let prefixlen: u32 = match port_prefix {
        None => 40,
        Some(n) => 48 + u32::from(n.min(16)),
    };
    let mask: u16 = match port_prefix {
        None | Some(0) => 0,
        Some(n) if n >= 16 => 0xffff,
        Some(n) => 0xffff << (16 - n),
    };
    PolicyKey {
        prefixlen,
        identity,
        direction,
        proto,
        dport_be: dport & mask,
    }
}

/// A policy entry for `key` per DATAPATH.md §2.2 (the LPM prefix length is derived from the key).
pub fn policy_entry(key: &PolicyKey, precedence: u32, proxy_port: u16, auth: u8) -> PolicyEntry {
    let lpm = u8::try_from(key.prefixlen - 40).expect("prefix >= 40");
    let deny = u8::from(precedence == DENY);
    PolicyEntry {
        proxy_port_be: proxy_port,
        flags: (lpm << PolicyEntry::LPM_SHIFT) | (deny * PolicyEntry::FLAG_DENY),
        auth,
        precedence,
        ..PolicyEntry::default()
    }
}

/// An allow entry for (identity, direction, proto, port/prefix).
pub fn allow(
    identity: u32,
    direction: u8,
    proto: u8,
    dport: u16,
    port_prefix: Option<u8>,
) -> PolicyPair {
    let key = policy_key(identity, direction, proto, dport, port_prefix);
    (key, policy_entry(&key, ALLOW, 0, 0))
}

/// A deny entry.
pub fn deny(
    identity: u32,
    direction: u8,
    proto: u8,
    dport: u16,
    port_prefix: Option<u8>,
) -> PolicyPair {
    let key = policy_key(identity, direction, proto, dport, port_prefix);
    (key, policy_entry(&key, DENY, 0, 0))
}

/// An IPv4 ipcache entry `addr/prefix -> identity`.
pub fn ipcache4(addr: std::net::Ipv4Addr, prefix: u32, identity: u32) -> Ipcache4Pair {
    let key = Ipcache4Key {
        prefixlen: prefix,
        addr: addr.octets(),
    };
    (key, ipcache_value(identity))
}

/// An IPv6 ipcache entry `addr/prefix -> identity`.
pub fn ipcache6(addr: std::net::Ipv6Addr, prefix: u32, identity: u32) -> Ipcache6Pair {
    let key = Ipcache6Key {
        prefixlen: prefix,
        addr: addr.octets(),
    };
    (key, ipcache_value(identity))
}

fn ipcache_value(identity: u32) -> IpcacheValue {
    IpcacheValue {
        identity,
        ..IpcacheValue::default()
    }
}

/// porin's datapath object with the default configuration (`include/porin.bpf.o`).
pub fn porin_object() -> Vec<u8> {
    porin_ebpf::emit(&porin_ebpf::ObjectConfig::default()).expect("porin emits its object")
}
