//! [`EmitError`]: why the object could not be emitted.

use thiserror::Error;

use crate::maps::{POLICY_MAP_MAX, POLICY_MAP_MIN};
use crate::{asm, elf};

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
