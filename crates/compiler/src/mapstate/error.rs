//! Errors of the map-state stage: invalid keys and entries.

use thiserror::Error;

use crate::identity::IdentityError;

/// An invalid policy-map key, from a constructor or from datapath bytes.
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
    /// A datapath key must be exactly 12 bytes.
    #[error("a datapath policy key is 12 bytes, got `{len}`")]
    WrongLength {
        /// The length given.
        len: usize,
    },
    /// Datapath prefix lengths are 40 or 48..=64.
    #[error("datapath key prefix length `{prefixlen}` is not 40 or 48..=64")]
    InvalidPrefixLength {
        /// The rejected prefix length.
        prefixlen: u32,
    },
    /// Bits set beyond the prefix of a datapath key.
    #[error("datapath key has bits set beyond its prefix length `{prefixlen}`")]
    BitsBeyondPrefix {
        /// The key's prefix length.
        prefixlen: u32,
    },
    /// The direction byte must be 0 (ingress) or 1 (egress).
    #[error("direction byte `{byte}` is neither 0 (ingress) nor 1 (egress)")]
    InvalidDirection {
        /// The rejected byte.
        byte: u8,
    },
    /// The identity field is not a valid identity.
    #[error("invalid identity in key")]
    Identity(#[source] IdentityError),
}

/// An invalid entry value, from a constructor or from datapath bytes.
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
    /// A datapath entry must be exactly 12 bytes.
    #[error("a datapath policy entry is 12 bytes, got `{len}`")]
    WrongLength {
        /// The length given.
        len: usize,
    },
    /// Flag bits 1-2 are reserved and must be zero.
    #[error("entry flags `{flags:#04x}` have reserved bits set")]
    ReservedFlags {
        /// The flags byte.
        flags: u8,
    },
    /// `lpm_prefix_length` must equal the key's prefix length minus 40.
    #[error("entry lpm_prefix_length `{entry}` does not match the key's `{key}`")]
    PrefixLengthMismatch {
        /// The entry's value.
        entry: u8,
        /// The key's value.
        key: u8,
    },
    /// The deny flag must agree with the precedence low byte.
    #[error("deny flag disagrees with precedence `{precedence:#010x}`")]
    DenyFlagMismatch {
        /// The precedence.
        precedence: u32,
    },
    /// A deny entry never redirects or requires auth.
    #[error("a deny entry carries a proxy port or an auth requirement")]
    DenyWithRedirectOrAuth,
}
