//! Shared helpers of the loader and verdict tests: the root/CI skip rule,
//! a tiny packet builder (test input only; the kernel helper owns
//! `src/packet.rs`), and scratch paths.

#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "each test binary uses a subset; a failed unwrap is a failed test"
)]

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{AuthRequirement, AuthType, Direction, Entry, Key, Precedence};
use porin_ebpf::abi::{Ipcache4Key, Ipcache6Key, IpcacheValue};
use porin_ebpf::maps::{MapUpdate, Verdict, counter_index};
use std::process::Command;

/// Whether tests needing root and bpf can run. In CI (`CI=true`) a missing
/// capability is a failure; elsewhere the test prints `SKIPPED` and returns.
pub fn require(what: &str, tools: &[&str]) -> bool {
    let mut missing = Vec::new();
    let uid_zero = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    if !uid_zero {
        missing.push("root (effective uid 0)".to_owned());
    }
    for tool in tools {
        let found = Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}"))
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !found {
            missing.push(format!("tool `{tool}`"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    let reason = format!("{what} needs {}", missing.join(", "));
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but {reason}");
    }
    println!("SKIPPED: {reason}");
    false
}

/// A scratch directory unique to this test process and `name`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-ebpf-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the default object to a scratch file and returns its path.
pub fn object_file(name: &str) -> PathBuf {
    let path = scratch(name).join("porin.bpf.o");
    std::fs::write(
        &path,
        porin_ebpf::emit(&porin_ebpf::ObjectConfig::default()).unwrap(),
    )
    .unwrap();
    path
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---- packets ----

pub const ETH_IPV4: u16 = 0x0800;
pub const ETH_IPV6: u16 = 0x86dd;
pub const ETH_ARP: u16 = 0x0806;
pub const ETH_VLAN: u16 = 0x8100;
pub const ETH_QINQ: u16 = 0x88a8;

pub fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];
    p.extend_from_slice(&ethertype.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// An 802.1Q-tagged frame (VLAN 100).
pub fn eth_vlan(outer: u16, inner: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];
    p.extend_from_slice(&outer.to_be_bytes());
    p.extend_from_slice(&100u16.to_be_bytes());
    p.extend_from_slice(&inner.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// An IPv4 header (no options) + payload; `frag` is the flags/offset field.
pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, frag: u16, payload: &[u8]) -> Vec<u8> {
    let total = 20 + payload.len() as u16;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    p.extend_from_slice(&frag.to_be_bytes());
    p.extend_from_slice(&[64, proto, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(payload);
    p
}

pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    p.push(next);
    p.push(hop_limit);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(payload);
    p
}

/// An options-style IPv6 extension header of 8 bytes followed by `rest`.
pub fn ext8(next: u8, rest: &[u8]) -> Vec<u8> {
    let mut p = vec![next, 0, 1, 4, 0, 0, 0, 0];
    p.extend_from_slice(rest);
    p
}

/// An IPv6 fragment header (offset in 8-byte units, `more` flag).
pub fn frag6(next: u8, offset: u16, more: bool, rest: &[u8]) -> Vec<u8> {
    let field = (offset << 3) | u16::from(more);
    let mut p = vec![next, 0];
    p.extend_from_slice(&field.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 7]);
    p.extend_from_slice(rest);
    p
}

pub fn tcp(sport: u16, dport: u16) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    p
}

pub fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&[0, 8, 0, 0]);
    p
}

pub fn icmp(kind: u8, code: u8, id: u16) -> Vec<u8> {
    let mut p = vec![kind, code, 0, 0];
    p.extend_from_slice(&id.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    p
}

// ---- running tools and the libbpf script loader ----

/// Runs a command; (success, stdout + stderr).
pub fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A libbpf script (see tests/c/load_libbpf.c) and the verdict tally it
/// implies.
#[derive(Default)]
pub struct Script {
    lines: Vec<String>,
    tally: BTreeMap<u32, u64>,
}

impl Script {
    pub fn update(&mut self, update: MapUpdate) {
        self.lines.push(format!(
            "update {} {} {}",
            update.map,
            hex(&update.key),
            hex(&update.value)
        ));
    }

    pub fn run(&mut self, program: &str, packet: Vec<u8>, verdict: Verdict, mark: u32, why: &str) {
        let ret = if verdict.passes() { 0 } else { 2 };
        self.lines.push(format!("# {why}: {verdict:?}"));
        self.lines
            .push(format!("run {program} {} {ret} {mark}", hex(&packet)));
        // The program's policy direction picks the counter block (DATAPATH.md §2.5).
        let direction = if program == porin_ebpf::program::TO_ENDPOINT {
            Direction::Ingress
        } else {
            Direction::Egress
        };
        *self
            .tally
            .entry(counter_index(direction, verdict.index()))
            .or_default() += 1;
    }

    pub fn sleep(&mut self, ms: u32) {
        self.lines.push(format!("sleep {ms}"));
    }

    pub fn finish(mut self) -> String {
        for direction in [Direction::Ingress, Direction::Egress] {
            for verdict in Verdict::ALL {
                let index = counter_index(direction, verdict.index());
                let n = self.tally.get(&index).copied().unwrap_or(0);
                self.lines.push(format!("counter {index} {n}"));
            }
        }
        self.lines.join("\n") + "\n"
    }
}

/// Builds tests/c/load_libbpf.c into `dir`.
pub fn build_libbpf_loader(dir: &Path) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/load_libbpf.c");
    let binary = dir.join("load_libbpf");
    let (ok, log) = run(Command::new("gcc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&binary)
        .arg(&source)
        .arg("-lbpf"));
    assert!(
        ok,
        "gcc load_libbpf.c failed (libbpf-dev installed?):\n{log}"
    );
    binary
}

/// The ipcache update `addr/prefix_len -> identity`.
pub fn v4_update(prefix_len: u8, addr: Ipv4Addr, identity: u32) -> MapUpdate {
    let key = Ipcache4Key::new(prefix_len, addr).expect("prefix fits");
    MapUpdate::ipcache4(
        key,
        IpcacheValue::new(Identity::new(identity).expect("identity")),
    )
}

/// The IPv6 ipcache update `addr/prefix_len -> identity`.
pub fn v6_update(prefix_len: u8, addr: Ipv6Addr, identity: u32) -> MapUpdate {
    let key = Ipcache6Key::new(prefix_len, addr).expect("prefix fits");
    MapUpdate::ipcache6(
        key,
        IpcacheValue::new(Identity::new(identity).expect("identity")),
    )
}

/// A policy key (the compiler's strict constructor: the port is masked to its prefix).
pub fn policy_key(
    identity: u32,
    direction: Direction,
    proto: u8,
    port: u16,
    port_prefix_len: u8,
) -> Key {
    Key::new(
        direction,
        Identity::new(identity).expect("identity"),
        proto,
        port,
        port_prefix_len,
    )
    .expect("a valid key")
}

/// A policy entry from its datapath fields (a deny is precedence `0xFFFFFFFF`).
pub fn policy_entry(precedence: u32, proxy_port: u16, auth_type: u8, explicit_auth: bool) -> Entry {
    let auth_type = AuthType::new(auth_type).expect("7-bit auth type");
    Entry {
        precedence: Precedence::from_raw(precedence),
        proxy_port,
        auth: if explicit_auth {
            AuthRequirement::explicit(auth_type)
        } else {
            AuthRequirement::derived(auth_type)
        },
        // Cookie 0, no origins.
        ..Entry::allow()
    }
}
