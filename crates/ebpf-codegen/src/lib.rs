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
mod config;
pub mod disasm;
pub mod elf;
mod error;
pub mod insn;
pub mod maps;
pub mod program;

pub use crate::config::ObjectConfig;
pub use crate::error::EmitError;
pub use crate::maps::{POLICY_MAP_MAX, POLICY_MAP_MIN};

use crate::elf::{ObjectLayout, ProgramCode};
use crate::maps::Direction;

/// The ELF section of both programs (aya 0.14 only accepts `classifier`).
pub const PROGRAM_SECTION: &str = "classifier";
/// The object's license.
pub const LICENSE: &str = "GPL";

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
