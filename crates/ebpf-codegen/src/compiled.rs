//! Compiler output → the exact contents of the object's maps.
//!
//! [`porin_compiler::compile::Compiled`] holds, per endpoint, a
//! [`porin_compiler::mapstate::MapState`] and, for the whole cluster, the
//! ipcache (prefix → identity). This module turns them into the byte
//! `(key, value)` lists `DATAPATH.md` §2.1 (`porin_ipcache4`,
//! `porin_ipcache6`) and §2.2 (`porin_policy_a` / `porin_policy_b`, one
//! endpoint's policy at a time) take, and into a JSON form that shows both
//! the hex bytes (as `bpftool map update ... key hex ...` wants them) and
//! the decoded fields.
//!
//! The key and value encodings are the compiler's own (`Key::to_bytes`,
//! `Entry::to_datapath_bytes`, `Ipcache::datapath_entries_v4/v6`); this
//! module does not re-encode anything. It checks every policy pair against
//! the invariants the datapath relies on ([`MapUpdate::policy_raw`]:
//! prefixlen 40..=64, entry `lpm_prefix_length = prefixlen − 40`) and the
//! map capacities of an [`ObjectConfig`], so a drift between the compiler
//! and the object fails here instead of in the kernel.
//!
//! Note on port ranges starting at 0 (docs/semantics.md §4.5, §10.1): the
//! compiler writes the prefix it means (`0/6` → prefixlen 54), not Cilium's
//! protocol-only key, which is the fail-closed choice. It is the only
//! policy-key encoding: [`crate::maps::PolicyKey`] delegates to it too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnetwork::IpNetwork;
use porin_compiler::compile::Compiled;
use porin_compiler::identity::Identity;
use porin_compiler::ipcache::Ipcache;
use serde::Serialize;
use thiserror::Error;

use crate::ObjectConfig;
use crate::maps::{MapContentError, MapUpdate, PolicySlot};

/// One IPv4 ipcache pair: 8-byte LPM key, 8-byte value.
pub type Ipcache4Pair = ([u8; 8], [u8; 8]);
/// One IPv6 ipcache pair: 20-byte LPM key, 8-byte value.
pub type Ipcache6Pair = ([u8; 20], [u8; 8]);
/// One policy pair: 12-byte key, 12-byte value.
pub type PolicyPair = ([u8; 12], [u8; 12]);

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
    /// A policy pair violates the datapath's invariants (a compiler bug).
    #[error("endpoint {endpoint}: policy entry {index} is not a valid datapath pair: {source}")]
    BadPolicyPair {
        /// The endpoint.
        endpoint: String,
        /// Index of the entry in key order.
        index: usize,
        /// What is wrong.
        source: MapContentError,
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
        let ipcache = ipcache_of(compiled, extra)?;
        let mut endpoints = Vec::with_capacity(compiled.endpoints.len());
        for endpoint in &compiled.endpoints {
            let name = endpoint.display_name();
            let policy = endpoint.state.to_datapath_entries();
            for (index, (key, value)) in policy.iter().enumerate() {
                MapUpdate::policy_raw(PolicySlot::A, key, value).map_err(|source| {
                    CompiledMapsError::BadPolicyPair {
                        endpoint: name.clone(),
                        index,
                        source,
                    }
                })?;
            }
            endpoints.push(EndpointMap {
                endpoint: name,
                identity: endpoint.identity,
                policy,
            });
        }
        Ok(MapContents {
            ipcache4: ipcache.datapath_entries_v4(),
            ipcache6: ipcache.datapath_entries_v6(),
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
                .map(|(k, v)| ipcache_json(k, v))
                .collect(),
            ipcache6: self
                .ipcache6
                .iter()
                .map(|(k, v)| ipcache_json(k, v))
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

/// Space-separated lower-case hex bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn u32_le(bytes: &[u8], at: usize) -> u32 {
    bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn ipcache_json(key: &[u8], value: &[u8]) -> IpcacheEntryJson {
    let prefixlen = u32_le(key, 0);
    let addr = match key.get(4..) {
        Some(a) if a.len() == 4 => IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
        Some(a) => {
            let mut octets = [0u8; 16];
            for (o, b) in octets.iter_mut().zip(a) {
                *o = *b;
            }
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    IpcacheEntryJson {
        key: hex(key),
        value: hex(value),
        prefix: format!("{addr}/{prefixlen}"),
        identity: u32_le(value, 0),
    }
}

fn policy_json(key: &[u8; 12], value: &[u8; 12]) -> PolicyEntryJson {
    PolicyEntryJson {
        key: hex(key),
        value: hex(value),
        prefixlen: u32_le(key, 0),
        identity: u32_le(key, 4),
        direction: if key[8] == 1 { "egress" } else { "ingress" },
        proto: key[9],
        dport: u16::from_be_bytes([key[10], key[11]]),
        proxy_port: u16::from_be_bytes([value[0], value[1]]),
        deny: value[2] & 1 == 1,
        lpm_prefix_length: value[2] >> 3,
        auth_type: value[3] & 0x7f,
        explicit_auth: value[3] & 0x80 != 0,
        precedence: u32_le(value, 4),
        cookie: u32_le(value, 8),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use porin_policytest::prepare;

    use super::*;

    /// A small compiled policy: `web` (10.0.0.1, fd00::1) accepts TCP 80 from
    /// `client` (10.0.0.2) and denies UDP 53 from 192.0.2.0/24 except
    /// 192.0.2.128/25; `client` has no policy.
    const TEST: &str = r#"
kind: PolicyTest
endpoints:
  - name: web
    namespace: prod
    labels: {app: web}
    ips: [10.0.0.1, "fd00::1"]
  - name: client
    namespace: prod
    labels: {app: client}
    ips: [10.0.0.2]
policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {name: web, namespace: prod}
      spec:
        endpointSelector: {matchLabels: {app: web}}
        ingress:
          - fromEndpoints: [{matchLabels: {app: client}}]
            toPorts: [{ports: [{port: "80", protocol: TCP}]}]
        ingressDeny:
          - fromCIDRSet: [{cidr: 192.0.2.0/24, except: [192.0.2.128/25]}]
            toPorts: [{ports: [{port: "53", protocol: UDP}]}]
cases: []
"#;

    fn compiled() -> Compiled {
        // Tests run in parallel threads of one process: each call gets its own
        // folder, or one test would delete the file another is reading.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("porin-compiled-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("test.yaml");
        std::fs::write(&path, TEST).unwrap();
        let prepared = prepare(Path::new(&path)).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        prepared.compiled
    }

    fn bytes(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    #[test]
    fn ipcache_pairs_are_byte_exact() {
        let compiled = compiled();
        let maps = MapContents::from_compiled(&compiled).unwrap();
        let web = compiled.endpoint("prod/web").unwrap().identity;
        let client = compiled.endpoint("prod/client").unwrap().identity;
        let cidr24 = compiled.identity_of_ip("192.0.2.1".parse().unwrap());
        let cidr25 = compiled.identity_of_ip("192.0.2.200".parse().unwrap());
        assert!(cidr24 != 9 && cidr25 != 9 && cidr24 != cidr25);
        // IPv4: world /0, the policy /24 and /25, the two endpoint /32s, in
        // (prefix length, address) order.
        let id = |i: u32| i.to_le_bytes();
        let expected: Vec<Ipcache4Pair> = vec![
            ([0, 0, 0, 0, 0, 0, 0, 0], [9, 0, 0, 0, 0, 0, 0, 0]),
            ([24, 0, 0, 0, 192, 0, 2, 0], {
                let mut v = [0u8; 8];
                v[0..4].copy_from_slice(&id(cidr24));
                v
            }),
            ([25, 0, 0, 0, 192, 0, 2, 128], {
                let mut v = [0u8; 8];
                v[0..4].copy_from_slice(&id(cidr25));
                v
            }),
            ([32, 0, 0, 0, 10, 0, 0, 1], {
                let mut v = [0u8; 8];
                v[0..4].copy_from_slice(&id(web));
                v
            }),
            ([32, 0, 0, 0, 10, 0, 0, 2], {
                let mut v = [0u8; 8];
                v[0..4].copy_from_slice(&id(client));
                v
            }),
        ];
        assert_eq!(maps.ipcache4, expected);
        // IPv6: world /0 and web's /128.
        assert_eq!(maps.ipcache6.len(), 2);
        assert_eq!(maps.ipcache6[0], ([0u8; 20], [10, 0, 0, 0, 0, 0, 0, 0]));
        let mut key = [0u8; 20];
        key[0] = 128;
        key[4] = 0xfd;
        key[19] = 1;
        assert_eq!(maps.ipcache6[1].0, key);
        assert_eq!(maps.ipcache6[1].1[0..4], id(web));
    }

    #[test]
    fn policy_pairs_are_byte_exact() {
        let compiled = compiled();
        let maps = MapContents::from_compiled(&compiled).unwrap();
        let web_index = compiled
            .endpoints
            .iter()
            .position(|e| e.name == "web")
            .unwrap();
        let client = compiled.endpoint("prod/client").unwrap().identity;
        let cidr24 = compiled.identity_of_ip("192.0.2.1".parse().unwrap());
        let web = maps.endpoint_policy(web_index).unwrap();
        let with_id = |hexed: &str, id: u32| {
            let mut b = bytes(hexed);
            b[4..8].copy_from_slice(&id.to_le_bytes());
            b
        };
        let pairs: Vec<(Vec<u8>, Vec<u8>)> =
            web.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        // Egress is not enforced: the allow-all key (prefixlen 40, identity
        // 0, egress) with allow precedence 0xFFFFFF01.
        let egress_all = (
            bytes("28 00 00 00 00 00 00 00 01 00 00 00"),
            bytes("00 00 00 00 01 ff ff ff 00 00 00 00"),
        );
        assert!(pairs.contains(&egress_all), "{pairs:?}");
        // Ingress: client may reach TCP/80: prefixlen 64, identity client,
        // ingress, proto 6, port 0x0050 BE; entry lpm 24 (0xc0), allow.
        let allow80 = (
            with_id("40 00 00 00 00 00 00 00 00 06 00 50", client),
            bytes("00 00 c0 00 01 ff ff ff 00 00 00 00"),
        );
        assert!(pairs.contains(&allow80), "{pairs:?}");
        // Ingress deny of UDP/53 from the /24 identity: deny flag 1 | lpm 24
        // (0xc1), precedence 0xFFFFFFFF.
        let deny53 = (
            with_id("40 00 00 00 00 00 00 00 00 11 00 35", cidr24),
            bytes("00 00 c1 00 ff ff ff ff 00 00 00 00"),
        );
        assert!(pairs.contains(&deny53), "{pairs:?}");
        // The excepted /25 gets no deny entry.
        let cidr25 = compiled.identity_of_ip("192.0.2.200".parse().unwrap());
        assert!(
            !pairs
                .iter()
                .any(|(k, _)| k[4..8] == cidr25.to_le_bytes() && k[9] == 17),
            "{pairs:?}"
        );
        // The endpoint has a namespace, so allow-localhost (`auto`, Cilium in
        // Kubernetes mode; `determineAllowLocalhostIngress`,
        // pkg/policy/mapstate.go) lets the host in: L3-only ingress key of
        // identity 1 (prefixlen 40), a plain allow.
        let localhost = (
            bytes("28 00 00 00 01 00 00 00 00 00 00 00"),
            bytes("00 00 00 00 01 ff ff ff 00 00 00 00"),
        );
        assert!(pairs.contains(&localhost), "{pairs:?}");
        // Exactly these four pairs: nothing else is allowed or denied.
        assert_eq!(pairs.len(), 4, "{pairs:?}");
    }

    #[test]
    fn json_shows_hex_and_decoded_fields() {
        let compiled = compiled();
        let maps = MapContents::from_compiled(&compiled).unwrap();
        let json: serde_json::Value = serde_json::from_str(&maps.to_json().unwrap()).unwrap();
        assert_eq!(json["ipcache4"][0]["prefix"], "0.0.0.0/0");
        assert_eq!(json["ipcache4"][0]["key"], "00 00 00 00 00 00 00 00");
        assert_eq!(json["ipcache4"][0]["value"], "09 00 00 00 00 00 00 00");
        assert_eq!(json["ipcache6"][1]["prefix"], "fd00::1/128");
        let web = json["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["endpoint"] == "prod/web")
            .unwrap();
        let deny = web["policy"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["deny"] == true)
            .unwrap();
        assert_eq!(deny["proto"], 17);
        assert_eq!(deny["dport"], 53);
        assert_eq!(deny["prefixlen"], 64);
        assert_eq!(deny["lpm_prefix_length"], 24);
        assert_eq!(deny["precedence"], 0xFFFF_FFFFu32);
        assert_eq!(deny["direction"], "ingress");
    }

    #[test]
    fn extra_entries_override_and_capacity_is_checked() {
        let compiled = compiled();
        let extra = [("100.64.0.1/32".parse().unwrap(), 1)];
        let maps = MapContents::with_extra_ipcache(&compiled, &extra).unwrap();
        assert!(
            maps.ipcache4
                .contains(&([32, 0, 0, 0, 100, 64, 0, 1], [1, 0, 0, 0, 0, 0, 0, 0]))
        );
        // Scope byte 0x07 is no identity scope.
        let bad = [("100.64.0.1/32".parse().unwrap(), 0x0700_0001)];
        assert!(matches!(
            MapContents::with_extra_ipcache(&compiled, &bad),
            Err(CompiledMapsError::BadIdentity {
                identity: 0x0700_0001,
                ..
            })
        ));
        let tiny = ObjectConfig {
            ipcache4_max_entries: 2,
            ..ObjectConfig::default()
        };
        assert!(matches!(
            maps.check_capacity(&tiny),
            Err(CompiledMapsError::IpcacheTooLarge { family: 4, .. })
        ));
        assert!(maps.check_capacity(&ObjectConfig::default()).is_ok());
    }
}
