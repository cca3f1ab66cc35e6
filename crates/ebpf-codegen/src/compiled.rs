//! Compiler output → the exact contents of the object's maps.
//!
//! [`porin_compiler::compile::Compiled`] holds, per endpoint, a
//! [`porin_compiler::mapstate::MapState`] and, for the whole cluster, the
//! ipcache (prefix → identity). This module turns them into the typed
//! `(key, value)` lists of [`crate::abi`] that `DATAPATH.md` §2.1
//! (`porin_ipcache4`, `porin_ipcache6`) and §2.2 (`porin_policy_a` /
//! `porin_policy_b`, one endpoint's policy at a time) take, checks them
//! against the map capacities of an [`ObjectConfig`], and gives a JSON form
//! that shows both the hex bytes (as `bpftool map update ... key hex ...`
//! wants them) and the decoded fields.
//!
//! Every byte comes from [`crate::abi`] (`policy_pairs`, `ipcache_pairs`):
//! there is one encoder, so the compiler and the object cannot drift apart.
//! Port ranges starting at 0 (docs/semantics.md §4.5, §10.1) keep the prefix
//! they mean (`0/6` → prefixlen 54), not Cilium's protocol-only key: the
//! fail-closed choice of [`porin_compiler::mapstate::Key::datapath_prefix_len`].

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnetwork::IpNetwork;
use porin_compiler::compile::Compiled;
use porin_compiler::identity::Identity;
use porin_compiler::ipcache::Ipcache;
use serde::Serialize;
use thiserror::Error;

pub use crate::maps::hex;

use crate::ObjectConfig;
use crate::abi::{
    Ipcache4Pair, Ipcache6Pair, IpcacheValue, PolicyEntry, PolicyKey, PolicyPair, ipcache_pairs,
    policy_pairs,
};

/// Why compiler output cannot be turned into map contents.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompiledMapsError {
    /// An ipcache entry names an identity that is not a valid numeric identity.
    #[error("ipcache entry {prefix} has identity {identity}, which is not a valid identity")]
    BadIdentity {
        /// The prefix.
        prefix: String,
        /// The raw identity.
        identity: u32,
    },
    /// An endpoint's policy does not fit the policy map (Cilium refuses to
    /// regenerate such an endpoint, docs/semantics.md §5.5; porin fails closed).
    #[error(
        "endpoint {endpoint} needs {entries} policy entries but the policy map holds {capacity}"
    )]
    PolicyTooLarge {
        /// The endpoint.
        endpoint: String,
        /// Entries needed.
        entries: usize,
        /// `policy_map_max_entries`.
        capacity: u32,
    },
    /// The ipcache does not fit its map.
    #[error("the IPv{family} ipcache needs {entries} entries but the map holds {capacity}")]
    IpcacheTooLarge {
        /// 4 or 6.
        family: u8,
        /// Entries needed.
        entries: usize,
        /// `ipcache{4,6}_max_entries`.
        capacity: u32,
    },
}

/// The policy-map contents of one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointMap {
    /// `namespace/name` or `name`.
    pub endpoint: String,
    /// The endpoint's own identity.
    pub identity: u32,
    /// The pairs, in the compiler's key order.
    pub policy: Vec<PolicyPair>,
}

/// Everything the object's maps hold for one compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapContents {
    /// `porin_ipcache4` pairs.
    pub ipcache4: Vec<Ipcache4Pair>,
    /// `porin_ipcache6` pairs.
    pub ipcache6: Vec<Ipcache6Pair>,
    /// One policy map per endpoint, in the compilation's endpoint order.
    pub endpoints: Vec<EndpointMap>,
}

/// Builds the compiler's [`Ipcache`] from a compilation's ipcache entries
/// plus `extra` entries (later entries replace earlier ones for the same
/// prefix).
pub fn ipcache_of(
    compiled: &Compiled,
    extra: &[(IpNetwork, u32)],
) -> Result<Ipcache, CompiledMapsError> {
    let mut ipcache = Ipcache::new();
    let entries = compiled
        .ipcache
        .iter()
        .map(|e| (e.prefix, e.identity))
        .chain(extra.iter().copied());
    for (prefix, identity) in entries {
        let id = Identity::new(identity).map_err(|_| CompiledMapsError::BadIdentity {
            prefix: prefix.to_string(),
            identity,
        })?;
        ipcache.insert(prefix, id);
    }
    Ok(ipcache)
}

impl MapContents {
    /// The map contents of a compilation (ipcache exactly as compiled).
    pub fn from_compiled(compiled: &Compiled) -> Result<MapContents, CompiledMapsError> {
        MapContents::with_extra_ipcache(compiled, &[])
    }

    /// The map contents of a compilation with `extra` ipcache entries
    /// (e.g. the test addresses of reserved peers) added on top.
    pub fn with_extra_ipcache(
        compiled: &Compiled,
        extra: &[(IpNetwork, u32)],
    ) -> Result<MapContents, CompiledMapsError> {
        let ipcache = ipcache_pairs(&ipcache_of(compiled, extra)?);
        let endpoints = compiled
            .endpoints
            .iter()
            .map(|endpoint| EndpointMap {
                endpoint: endpoint.display_name(),
                identity: endpoint.identity,
                policy: policy_pairs(&endpoint.state),
            })
            .collect();
        Ok(MapContents {
            ipcache4: ipcache.v4,
            ipcache6: ipcache.v6,
            endpoints,
        })
    }

    /// Checks that every map fits the object `config` describes.
    pub fn check_capacity(&self, config: &ObjectConfig) -> Result<(), CompiledMapsError> {
        for endpoint in &self.endpoints {
            if endpoint.policy.len() > config.policy_map_max_entries as usize {
                return Err(CompiledMapsError::PolicyTooLarge {
                    endpoint: endpoint.endpoint.clone(),
                    entries: endpoint.policy.len(),
                    capacity: config.policy_map_max_entries,
                });
            }
        }
        for (family, entries, capacity) in [
            (4, self.ipcache4.len(), config.ipcache4_max_entries),
            (6, self.ipcache6.len(), config.ipcache6_max_entries),
        ] {
            if entries > capacity as usize {
                return Err(CompiledMapsError::IpcacheTooLarge {
                    family,
                    entries,
                    capacity,
                });
            }
        }
        Ok(())
    }

    /// The policy pairs of the endpoint at `index` (compilation order).
    pub fn endpoint_policy(&self, index: usize) -> Option<&[PolicyPair]> {
        self.endpoints.get(index).map(|e| e.policy.as_slice())
    }

    /// The JSON form (see [`MapContentsJson`]).
    pub fn to_json_value(&self) -> MapContentsJson {
        MapContentsJson {
            ipcache4: self
                .ipcache4
                .iter()
                .map(|(k, v)| {
                    ipcache_json(
                        &k.to_bytes(),
                        *v,
                        Ipv4Addr::from(k.addr).into(),
                        k.prefixlen,
                    )
                })
                .collect(),
            ipcache6: self
                .ipcache6
                .iter()
                .map(|(k, v)| {
                    ipcache_json(
                        &k.to_bytes(),
                        *v,
                        Ipv6Addr::from(k.addr).into(),
                        k.prefixlen,
                    )
                })
                .collect(),
            endpoints: self
                .endpoints
                .iter()
                .map(|e| EndpointMapJson {
                    endpoint: e.endpoint.clone(),
                    identity: e.identity,
                    policy: e.policy.iter().map(|(k, v)| policy_json(k, v)).collect(),
                })
                .collect(),
        }
    }

    /// Deterministic, pretty JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(&self.to_json_value())
    }
}

/// JSON form of [`MapContents`]: every pair with its hex bytes (space
/// separated, the way `bpftool map update ... key hex` takes them) and the
/// fields decoded from those bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MapContentsJson {
    /// `porin_ipcache4`.
    pub ipcache4: Vec<IpcacheEntryJson>,
    /// `porin_ipcache6`.
    pub ipcache6: Vec<IpcacheEntryJson>,
    /// One policy map per endpoint.
    pub endpoints: Vec<EndpointMapJson>,
}

/// One ipcache pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IpcacheEntryJson {
    /// Key bytes, hex.
    pub key: String,
    /// Value bytes, hex.
    pub value: String,
    /// The prefix the key encodes.
    pub prefix: String,
    /// The identity the value encodes.
    pub identity: u32,
}

/// One endpoint's policy map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EndpointMapJson {
    /// `namespace/name` or `name`.
    pub endpoint: String,
    /// The endpoint's identity.
    pub identity: u32,
    /// Its pairs.
    pub policy: Vec<PolicyEntryJson>,
}

/// One policy pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyEntryJson {
    /// Key bytes, hex.
    pub key: String,
    /// Value bytes, hex.
    pub value: String,
    /// LPM prefix length of the key (40..=64).
    pub prefixlen: u32,
    /// Peer identity (0 = any).
    pub identity: u32,
    /// `ingress` or `egress`.
    pub direction: &'static str,
    /// IP protocol (0 = any).
    pub proto: u8,
    /// Destination port or ICMP type (host order).
    pub dport: u16,
    /// Proxy port (0 = none).
    pub proxy_port: u16,
    /// Deny flag.
    pub deny: bool,
    /// `lpm_prefix_length` from the flags byte.
    pub lpm_prefix_length: u8,
    /// Auth type (bits 0-6).
    pub auth_type: u8,
    /// Explicit auth (bit 7).
    pub explicit_auth: bool,
    /// Precedence.
    pub precedence: u32,
    /// Cookie.
    pub cookie: u32,
}

fn ipcache_json(
    key: &[u8],
    value: IpcacheValue,
    addr: std::net::IpAddr,
    prefixlen: u32,
) -> IpcacheEntryJson {
    IpcacheEntryJson {
        key: hex(key),
        value: hex(&value.to_bytes()),
        prefix: format!("{addr}/{prefixlen}"),
        identity: value.identity,
    }
}

fn policy_json(key: &PolicyKey, value: &PolicyEntry) -> PolicyEntryJson {
    PolicyEntryJson {
        key: hex(&key.to_bytes()),
        value: hex(&value.to_bytes()),
        prefixlen: key.prefixlen,
        identity: key.identity,
        direction: if key.direction == PolicyKey::EGRESS {
            "egress"
        } else {
            "ingress"
        },
        proto: key.proto,
        dport: key.dport_be,
        proxy_port: value.proxy_port_be,
        deny: value.is_deny(),
        lpm_prefix_length: value.lpm_prefix_length(),
        auth_type: value.auth_type(),
        explicit_auth: value.explicit_auth(),
        precedence: value.precedence,
        cookie: value.cookie,
    }
}
