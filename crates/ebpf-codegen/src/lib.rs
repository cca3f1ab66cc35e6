//! # porin-ebpf: the eBPF object porin emits
//!
//! porin's own eBPF assembler, BTF encoder and ELF writer (no clang), the TC
//! datapath programs that enforce compiled policy maps, and the binary
//! layout of those maps' contents.
//!
//! The object's contract (programs, maps, layouts, verdicts) is
//! `DATAPATH.md` in this crate. Entry point: [`emit`]: an [`ObjectConfig`]
//! in, the ELF bytes out, deterministically (the same config always gives
//! the same bytes; the default one is the committed `include/porin.bpf.o`).
//!
//! Pure and portable: no system calls and no `unsafe`. Loading the object
//! into the kernel and running packets through it is `porin-kernel`.

// No unsafe code: system calls live in porin-kernel, the C ABI in porin-capi.
#![forbid(unsafe_code)]

pub mod abi;
pub mod asm;
pub mod btf;
pub mod compiled;
pub mod disasm;
pub mod elf;
pub mod insn;
pub mod maps;
pub mod program;

use thiserror::Error;

use crate::abi::{
    ConfigValue, Counter, CtKey, CtValue, Ipcache4Key, Ipcache6Key, IpcacheValue, Layout,
    PolicyEntry, PolicyKey,
};
use crate::elf::{ObjectLayout, ProgramCode};
use crate::maps::{
    BPF_F_NO_PREALLOC, BPF_F_RDONLY_PROG, Direction, MapKind, MapPinning, MapSpec,
    VERDICT_COUNTERS, names,
};

/// The ELF section of both programs (aya 0.14 only accepts `classifier`).
pub const PROGRAM_SECTION: &str = "classifier";
/// The object's license.
pub const LICENSE: &str = "GPL";

/// Cilium's bounds for `bpf-policy-map-max` (`option.PolicyMapMin/Max`).
pub const POLICY_MAP_MIN: u32 = 256;
/// Upper bound of the policy map size.
pub const POLICY_MAP_MAX: u32 = 65536;

/// What the emitted object looks like. `ObjectConfig::default()` gives
/// `include/porin.bpf.o`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectConfig {
    /// `max_entries` of each policy map (Cilium default 16384; 256..=65536).
    pub policy_map_max_entries: u32,
    /// `max_entries` of the IPv4 ipcache.
    pub ipcache4_max_entries: u32,
    /// `max_entries` of the IPv6 ipcache.
    pub ipcache6_max_entries: u32,
    /// `max_entries` of the conntrack map.
    pub ct_max_entries: u32,
    /// Conntrack lifetime of TCP flows in seconds (Cilium 21600).
    pub ct_lifetime_tcp_secs: u32,
    /// Conntrack lifetime of other flows in seconds (Cilium 60).
    pub ct_lifetime_other_secs: u32,
    /// Pass IPv4 ICMP fragmentation-needed without policy (Cilium default).
    pub allow_icmp_frag_needed: bool,
    /// Pass IPv6 neighbour discovery (hop limit 255) without policy.
    pub allow_ipv6_ndp: bool,
    /// Map pinning (`ByName` for `tc`, which loads once per filter).
    pub pinning: MapPinning,
}

impl Default for ObjectConfig {
    fn default() -> Self {
        ObjectConfig {
            policy_map_max_entries: 16384,
            ipcache4_max_entries: 65536,
            ipcache6_max_entries: 65536,
            ct_max_entries: 65536,
            ct_lifetime_tcp_secs: 21600,
            ct_lifetime_other_secs: 60,
            allow_icmp_frag_needed: true,
            allow_ipv6_ndp: true,
            pinning: MapPinning::None,
        }
    }
}

impl ObjectConfig {
    pub(crate) fn ct_lifetime_tcp_ns(&self) -> i64 {
        i64::from(self.ct_lifetime_tcp_secs) * 1_000_000_000
    }

    pub(crate) fn ct_lifetime_other_ns(&self) -> i64 {
        i64::from(self.ct_lifetime_other_secs) * 1_000_000_000
    }

    fn validate(&self) -> Result<(), EmitError> {
        if !(POLICY_MAP_MIN..=POLICY_MAP_MAX).contains(&self.policy_map_max_entries) {
            return Err(EmitError::PolicyMapSize(self.policy_map_max_entries));
        }
        for (what, n) in [
            ("ipcache4_max_entries", self.ipcache4_max_entries),
            ("ipcache6_max_entries", self.ipcache6_max_entries),
            ("ct_max_entries", self.ct_max_entries),
        ] {
            if n == 0 {
                return Err(EmitError::ZeroSize(what));
            }
        }
        if self.ct_lifetime_tcp_secs == 0 || self.ct_lifetime_other_secs == 0 {
            return Err(EmitError::ZeroSize("conntrack lifetime"));
        }
        Ok(())
    }

    /// The object's maps, in `.maps` order (`DATAPATH.md` §2).
    pub fn maps(&self) -> Vec<MapSpec> {
        let lpm = BPF_F_NO_PREALLOC | BPF_F_RDONLY_PROG;
        let spec = |name, kind, key, value, max_entries, flags| MapSpec {
            name,
            kind,
            key,
            value,
            max_entries,
            flags,
            pinning: self.pinning,
        };
        vec![
            spec(
                names::IPCACHE4,
                MapKind::LpmTrie,
                Ipcache4Key::LAYOUT,
                IpcacheValue::LAYOUT,
                self.ipcache4_max_entries,
                lpm,
            ),
            spec(
                names::IPCACHE6,
                MapKind::LpmTrie,
                Ipcache6Key::LAYOUT,
                IpcacheValue::LAYOUT,
                self.ipcache6_max_entries,
                lpm,
            ),
            spec(
                names::POLICY_A,
                MapKind::LpmTrie,
                PolicyKey::LAYOUT,
                PolicyEntry::LAYOUT,
                self.policy_map_max_entries,
                lpm,
            ),
            spec(
                names::POLICY_B,
                MapKind::LpmTrie,
                PolicyKey::LAYOUT,
                PolicyEntry::LAYOUT,
                self.policy_map_max_entries,
                lpm,
            ),
            spec(
                names::CONFIG,
                MapKind::Array,
                Layout::U32,
                ConfigValue::LAYOUT,
                1,
                BPF_F_RDONLY_PROG,
            ),
            spec(
                names::CONNTRACK,
                MapKind::LruHash,
                CtKey::LAYOUT,
                CtValue::LAYOUT,
                self.ct_max_entries,
                0,
            ),
            spec(
                names::VERDICTS,
                MapKind::PercpuArray,
                Layout::U32,
                Counter::LAYOUT,
                VERDICT_COUNTERS,
                0,
            ),
        ]
    }
}

/// Why the object could not be emitted.
#[derive(Debug, Error)]
pub enum EmitError {
    /// Policy map size outside Cilium's bounds.
    #[error("policy map size {0} is outside {POLICY_MAP_MIN}..={POLICY_MAP_MAX}")]
    PolicyMapSize(u32),
    /// A size or lifetime of zero.
    #[error("{0} must not be zero")]
    ZeroSize(&'static str),
    /// The program generator produced invalid assembly (a porin bug).
    #[error("assembling {program}: {source}")]
    Assemble {
        /// Program name.
        program: &'static str,
        /// The assembler error.
        source: asm::AsmError,
    },
    /// Writing the ELF failed.
    #[error(transparent)]
    Elf(#[from] elf::ElfError),
}

/// The generated programs, in section order.
pub fn programs(config: &ObjectConfig) -> Result<Vec<ProgramCode>, EmitError> {
    let mut out = Vec::new();
    for (name, direction) in [
        (program::FROM_ENDPOINT, Direction::Egress),
        (program::TO_ENDPOINT, Direction::Ingress),
    ] {
        let code = program::generate(direction, config).map_err(|source| EmitError::Assemble {
            program: name,
            source,
        })?;
        out.push(ProgramCode {
            name: name.to_owned(),
            code,
        });
    }
    Ok(out)
}

/// Emits the datapath object (ELF bytes). Deterministic: the same config
/// always gives the same bytes.
pub fn emit(config: &ObjectConfig) -> Result<Vec<u8>, EmitError> {
    config.validate()?;
    let programs = programs(config)?;
    let maps = config.maps();
    Ok(elf::write_object(&ObjectLayout {
        section: PROGRAM_SECTION,
        programs: &programs,
        maps: &maps,
        license: LICENSE,
    })?)
}
