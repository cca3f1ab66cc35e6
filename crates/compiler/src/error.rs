//! Errors of the compiler stage.
//!
//! Errors stop a stage; findings that let compilation go on are
//! [`porin_model::diagnostic::Diagnostic`]s instead (codes `PC0xx`).

use std::path::PathBuf;

use crate::limits::kind::{InventoryLimit, Limit};

/// An inventory could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InventoryError {
    /// The file or directory could not be read.
    #[error("cannot read `{path}`: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML or JSON, or has the wrong shape.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// Display path.
        file: String,
        /// 1-based line (0 when unknown).
        line: u32,
        /// 1-based column (0 when unknown).
        column: u32,
        /// What is wrong.
        message: String,
    },
    /// The content is well-formed but wrong (duplicate endpoint, bad IP, ...).
    #[error("{file}:{line}: {message}")]
    Invalid {
        /// Display path.
        file: String,
        /// 1-based line of the offending item (0 when unknown).
        line: u32,
        /// What is wrong.
        message: String,
    },
    /// An inventory limit ([`crate::limits::InventoryLimits`]) was exceeded;
    /// nothing of the inventory is used.
    #[error("{file}: {} exceeded: `{given}` needed, the limit is `{limit}`", limit_kind.description())]
    Limit {
        /// Display path of the file (or directory) that crossed the limit.
        file: String,
        /// Which limit.
        limit_kind: InventoryLimit,
        /// How much was needed (at least this much: counting stops at the
        /// first item over the limit).
        given: u64,
        /// The configured limit.
        limit: u64,
    },
}

impl InventoryError {
    /// The display path of the file the error is about.
    pub fn file(&self) -> String {
        match self {
            Self::Read { path, .. } => path.display().to_string(),
            Self::Syntax { file, .. } | Self::Invalid { file, .. } | Self::Limit { file, .. } => {
                file.clone()
            }
        }
    }

    /// The line the error is about, 0 when unknown.
    pub fn line(&self) -> u32 {
        match self {
            Self::Read { .. } | Self::Limit { .. } => 0,
            Self::Syntax { line, .. } | Self::Invalid { line, .. } => *line,
        }
    }
}

/// Compilation could not proceed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The inventory is invalid.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// Two inventory entries claim the same identity number with different
    /// labels, or a given identity number lies in a reserved range.
    #[error("identity {identity}: {message}")]
    Identity {
        /// The identity number.
        identity: u32,
        /// What is wrong.
        message: String,
    },
    /// A compile limit ([`crate::limits::CompileLimits`]) was exceeded;
    /// nothing is emitted (fail closed: no truncated map state). Each front
    /// end maps [`Limit`] to its own knob: the CLI to its flag, the C API to
    /// its `porin_limit`.
    #[error(
        "{}: {given} needed{}, the limit is {max}",
        limit.description(),
        endpoint.as_ref().map(|e| format!(" by `{e}`")).unwrap_or_default()
    )]
    Limit {
        /// Which limit.
        limit: Limit,
        /// How much was needed (at least this much; for
        /// [`Limit::InsertionsPerEndpoint`] an upper bound of the work).
        given: u64,
        /// The configured limit.
        max: u64,
        /// The endpoint (`namespace/name`) that needed it, when one did.
        endpoint: Option<String>,
    },
    /// A numeric identity range ran out. Not a settable limit: the ranges
    /// are Cilium's.
    #[error("{range}: {given} needed, the limit is {limit}")]
    RangeExhausted {
        /// Which range ran out.
        range: IdentityRange,
        /// How many were needed.
        given: usize,
        /// How many numbers the range holds.
        limit: usize,
    },
    /// An `--endpoint` or peer name does not exist.
    #[error("unknown endpoint `{0}`")]
    UnknownEndpoint(String),
}

/// A numeric identity range of [`CompileError::RangeExhausted`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdentityRange {
    /// Cluster-allocated endpoint identities (256..=65535).
    Endpoint,
    /// Local-scope CIDR identities (`0x01000000 | n`).
    Cidr,
}

impl std::fmt::Display for IdentityRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IdentityRange::Endpoint => "endpoint identities",
            IdentityRange::Cidr => "CIDR identities",
        })
    }
}
