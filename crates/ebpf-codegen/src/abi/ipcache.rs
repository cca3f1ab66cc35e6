//! `porin_ipcache4` / `porin_ipcache6`: prefix → security identity
//! (`DATAPATH.md` §2.1), and the conversion from the compiler's
//! [`Ipcache`].

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnetwork::{IpNetwork, Ipv4Network, Ipv6Network};
use porin_compiler::identity::Identity;
use porin_compiler::ipcache::Ipcache;

use super::{AbiError, abi_struct};

/// Bytes of an IPv4 address.
pub const IPV4_ADDR_LEN: usize = 4;
/// Bytes of an IPv6 address.
pub const IPV6_ADDR_LEN: usize = 16;

abi_struct! {
    /// `porin_ipcache4_key`: an LPM-trie key.
    pub struct Ipcache4Key = "porin_ipcache4_key" {
        /// Prefix length, 0..=32.
        prefixlen @ OFF_PREFIXLEN: u32 = Le,
        /// The address, network order.
        addr @ OFF_ADDR: [u8; IPV4_ADDR_LEN] = Raw,
    }
}

abi_struct! {
    /// `porin_ipcache6_key`: an LPM-trie key.
    pub struct Ipcache6Key = "porin_ipcache6_key" {
        /// Prefix length, 0..=128.
        prefixlen @ OFF_PREFIXLEN: u32 = Le,
        /// The address, network order.
        addr @ OFF_ADDR: [u8; IPV6_ADDR_LEN] = Raw,
    }
}

abi_struct! {
    /// `porin_ipcache_value`: the identity of the longest matching prefix.
    pub struct IpcacheValue = "porin_ipcache_value" {
        /// Numeric security identity.
        identity @ OFF_IDENTITY: u32 = Le,
        /// Reserved, 0.
        flags @ OFF_FLAGS: u32 = Le,
    }
}

impl Ipcache4Key {
    /// The prefix length the programs look up (the whole address).
    pub const FULL_PREFIX: u32 = 32;

    /// The key of `addr/prefix_len`. Host bits are kept as given (the trie
    /// ignores them).
    pub fn new(prefix_len: u8, addr: Ipv4Addr) -> Result<Ipcache4Key, AbiError> {
        Ok(Ipcache4Key {
            prefixlen: bounded(prefix_len, Self::FULL_PREFIX)?,
            addr: addr.octets(),
        })
    }
}

impl From<Ipv4Network> for Ipcache4Key {
    fn from(prefix: Ipv4Network) -> Ipcache4Key {
        Ipcache4Key {
            prefixlen: u32::from(prefix.prefix()),
            addr: prefix.network().octets(),
        }
    }
}

impl Ipcache6Key {
    /// The prefix length the programs look up (the whole address).
    pub const FULL_PREFIX: u32 = 128;

    /// The key of `addr/prefix_len`. Host bits are kept as given.
    pub fn new(prefix_len: u8, addr: Ipv6Addr) -> Result<Ipcache6Key, AbiError> {
        Ok(Ipcache6Key {
            prefixlen: bounded(prefix_len, Self::FULL_PREFIX)?,
            addr: addr.octets(),
        })
    }
}

impl From<Ipv6Network> for Ipcache6Key {
    fn from(prefix: Ipv6Network) -> Ipcache6Key {
        Ipcache6Key {
            prefixlen: u32::from(prefix.prefix()),
            addr: prefix.network().octets(),
        }
    }
}

impl IpcacheValue {
    /// The value naming `identity` (flags 0).
    pub const fn new(identity: Identity) -> IpcacheValue {
        IpcacheValue {
            identity: identity.get(),
            flags: 0,
        }
    }

    /// The identity this value names.
    pub fn to_identity(&self) -> Result<Identity, AbiError> {
        Identity::new(self.identity).map_err(|source| AbiError::Identity {
            identity: self.identity,
            source,
        })
    }
}

/// `prefix_len` if it is at most `max` bits.
fn bounded(prefix_len: u8, max: u32) -> Result<u32, AbiError> {
    let prefix_len = u32::from(prefix_len);
    if prefix_len > max {
        return Err(AbiError::PrefixTooLong { prefix_len, max });
    }
    Ok(prefix_len)
}

/// One IPv4 ipcache pair.
pub type Ipcache4Pair = (Ipcache4Key, IpcacheValue);
/// One IPv6 ipcache pair.
pub type Ipcache6Pair = (Ipcache6Key, IpcacheValue);

/// The contents of both ipcache maps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpcachePairs {
    /// `porin_ipcache4`, by prefix length then address.
    pub v4: Vec<Ipcache4Pair>,
    /// `porin_ipcache6`, by prefix length then address.
    pub v6: Vec<Ipcache6Pair>,
}

/// One ipcache entry of either family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpcachePair {
    /// A `porin_ipcache4` entry.
    V4(Ipcache4Pair),
    /// A `porin_ipcache6` entry.
    V6(Ipcache6Pair),
}

impl IpcachePair {
    /// The entry of `prefix` (host bits cleared) with `value`.
    pub fn new(prefix: IpNetwork, value: IpcacheValue) -> IpcachePair {
        match prefix {
            IpNetwork::V4(prefix) => IpcachePair::V4((Ipcache4Key::from(prefix), value)),
            IpNetwork::V6(prefix) => IpcachePair::V6((Ipcache6Key::from(prefix), value)),
        }
    }

    /// The key and value bytes.
    pub fn to_bytes(&self) -> (Vec<u8>, Vec<u8>) {
        match self {
            IpcachePair::V4((key, value)) => (key.to_bytes().to_vec(), value.to_bytes().to_vec()),
            IpcachePair::V6((key, value)) => (key.to_bytes().to_vec(), value.to_bytes().to_vec()),
        }
    }
}

/// The map contents of a compiler ipcache (world defaults included).
pub fn ipcache_pairs(ipcache: &Ipcache) -> IpcachePairs {
    let mut out = IpcachePairs::default();
    for (prefix, identity) in ipcache.iter() {
        match IpcachePair::new(prefix, IpcacheValue::new(identity)) {
            IpcachePair::V4(pair) => out.v4.push(pair),
            IpcachePair::V6(pair) => out.v6.push(pair),
        }
    }
    out
}
