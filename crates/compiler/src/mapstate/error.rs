//! Errors of the map-state stage: invalid keys and entries.

use thiserror::Error;

/// An invalid policy-map key (from a constructor; datapath bytes are
/// decoded by `porin-ebpf`'s `abi`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Port prefix lengths are 0..=16.
    #[error("port prefix length `{port_prefix_len}` exceeds 16")]
    PortPrefixTooLong {
        /// The rejected prefix length.
        port_prefix_len: u8,
    },
    /// Protocol 0 ("any") cannot carry a port: the datapath can only
    /// wildcard the protocol together with the whole port.
    #[error("a key with protocol 0 (any) cannot have port `{port}`/`{port_prefix_len}`")]
    PortWithoutProtocol {
        /// The port given.
        port: u16,
        /// The prefix length given.
        port_prefix_len: u8,
    },
    /// The port has bits set below its prefix (strict constructor only).
    #[error("port `{port}` has bits set beyond its prefix length `{port_prefix_len}`")]
    UnmaskedPort {
        /// The port given.
        port: u16,
        /// The prefix length given.
        port_prefix_len: u8,
    },
}

/// An invalid entry value (from a constructor).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EntryError {
    /// Priorities are 24-bit.
    #[error("priority `{given}` exceeds the maximum `16777215`")]
    PriorityOutOfRange {
        /// The rejected priority.
        given: u32,
    },
    /// Auth types are 7-bit.
    #[error("auth type `{given}` exceeds 127")]
    AuthTypeOutOfRange {
        /// The rejected auth type.
        given: u8,
    },
}
