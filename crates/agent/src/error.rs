//! The agent's one error type.

use std::path::PathBuf;

use porin_compiler::error::{CompileError, InventoryError};
use porin_compiler::session::SessionError;
use porin_kernel::KernelError;
use porin_model::loader::LoadError;

/// Why the agent could not start, or why a change was not applied. A change that fails leaves
/// the previous policy enforced on every endpoint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The process lacks a capability the agent needs.
    #[error(
        "porin agent needs {missing} (effective capabilities: {effective:#x}); run it as root or grant \
         CAP_BPF and CAP_NET_ADMIN (the systemd unit under packaging/ does)"
    )]
    Capabilities {
        /// The missing capabilities, by name.
        missing: String,
        /// The effective capability mask read from `/proc/self/status`.
        effective: u64,
    },
    /// The state directory is not on a mounted bpffs.
    #[error(
        "the state directory {} is not on a bpf file system: mount one (`mount -t bpf bpf /sys/fs/bpf`) \
         and use a directory under it, e.g. --state-dir /sys/fs/bpf/porin",
        .0.display()
    )]
    NoBpffs(PathBuf),
    /// Reading a file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The policy directory could not be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A policy file has errors (rendered diagnostics).
    #[error("{0}")]
    Policy(String),
    /// The inventory could not be read.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    /// Compiling failed.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The live session refused the change.
    #[error("{0}")]
    Session(String),
    /// Emitting the object failed.
    #[error("emitting porin's object: {0}")]
    Emit(String),
    /// A kernel operation failed.
    #[error("{context}: {source}")]
    Kernel {
        /// What the agent was doing (names the endpoint).
        context: String,
        /// The kernel's error.
        source: KernelError,
    },
    /// An endpoint names a device that does not exist (yet): it is retried on every change.
    #[error(
        "endpoint `{endpoint}`: interface `{device}` does not exist in this network namespace; not attached"
    )]
    NoDevice {
        /// The endpoint.
        endpoint: String,
        /// The device it names.
        device: String,
    },
    /// Several endpoints name one device: none of them is attached anew (each would enforce its
    /// policy on the others' traffic).
    #[error("interface `{device}` is named by endpoints {}: an interface belongs to one endpoint; none of them is attached to it", .endpoints.join(", "))]
    DeviceShared {
        /// The device.
        device: String,
        /// The endpoints naming it, quoted.
        endpoints: Vec<String>,
    },
    /// An endpoint's policy does not fit its policy map: the endpoint keeps its previous policy.
    #[error(
        "endpoint `{endpoint}`: the policy needs {entries} map entries, the policy map holds {capacity}; the previous policy stays enforced"
    )]
    PolicyTooLarge {
        /// The endpoint.
        endpoint: String,
        /// Entries needed.
        entries: usize,
        /// The map's capacity.
        capacity: u32,
    },
    /// The metrics address is not a loopback address.
    #[error(
        "--metrics {0}: the metrics endpoint listens on loopback addresses only (127.0.0.1:PORT, [::1]:PORT)"
    )]
    MetricsNotLoopback(std::net::SocketAddr),
    /// The file watcher could not be set up.
    #[error("watching {}: {message}", path.display())]
    Watch {
        /// The path watched.
        path: PathBuf,
        /// The watcher's message.
        message: String,
    },
}

impl AgentError {
    pub(crate) fn kernel(context: impl Into<String>, source: KernelError) -> Self {
        Self::Kernel {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<SessionError> for AgentError {
    fn from(error: SessionError) -> Self {
        match error {
            SessionError::Policy(diagnostics) => {
                Self::Policy(porin_model::diagnostic::render_human_all(
                    &diagnostics,
                    &porin_model::diagnostic::SourceMap::default(),
                ))
            }
            SessionError::Compile(e) => Self::Compile(e),
            SessionError::Inventory(e) => Self::Inventory(e),
            other => Self::Session(other.to_string()),
        }
    }
}
