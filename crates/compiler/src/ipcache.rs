//! The ipcache: which identity a peer address has (longest prefix wins).
//!
//! Cilium resolves a packet's peer identity with an LPM lookup in the
//! ipcache (docs/semantics.md §3.6): an address inside several policy prefixes
//! gets the identity of the most specific one. porin's table always holds
//! `0.0.0.0/0 → world-ipv4 (9)` and `::/0 → world-ipv6 (10)` (dual-stack, as
//! Cilium with both families on) unless those prefixes are overridden.
//!
//! The map bytes are `porin-ebpf`'s (`abi::ipcache_pairs`, the contract in
//! `crates/ebpf-codegen/DATAPATH.md` §2.1); [`Ipcache::iter`] is what they are
//! made from.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnetwork::{IpNetwork, Ipv4Network, Ipv6Network};

use crate::identity::Identity;

/// Prefix → identity table for IPv4 and IPv6, with longest-prefix lookup.
///
/// Prefixes are stored normalised to their network address
/// (`10.1.2.3/8` is `10.0.0.0/8`); iteration is ordered (family, prefix
/// length, address), so encodings are reproducible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipcache {
    v4: BTreeMap<(u8, u32), Identity>,
    v6: BTreeMap<(u8, u128), Identity>,
}

impl Default for Ipcache {
    fn default() -> Self {
        Ipcache::new()
    }
}

fn mask_v4(addr: u32, prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        addr & (u32::MAX << (32 - u32::from(prefix.min(32))))
    }
}

fn mask_v6(addr: u128, prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        addr & (u128::MAX << (128 - u32::from(prefix.min(128))))
    }
}

impl Ipcache {
    /// A table with only the world defaults (`0.0.0.0/0 → 9`, `::/0 → 10`).
    pub fn new() -> Ipcache {
        let mut v4 = BTreeMap::new();
        v4.insert((0, 0), Identity::WORLD_IPV4);
        let mut v6 = BTreeMap::new();
        v6.insert((0, 0), Identity::WORLD_IPV6);
        Ipcache { v4, v6 }
    }

    /// Maps `prefix` (normalised to its network) to `identity`, returning the
    /// identity it replaces, if any.
    pub fn insert(&mut self, prefix: IpNetwork, identity: Identity) -> Option<Identity> {
        match prefix {
            IpNetwork::V4(net) => {
                let len = net.prefix();
                self.v4
                    .insert((len, mask_v4(u32::from(net.ip()), len)), identity)
            }
            IpNetwork::V6(net) => {
                let len = net.prefix();
                self.v6
                    .insert((len, mask_v6(u128::from(net.ip()), len)), identity)
            }
        }
    }

    /// The identity stored for exactly `prefix` (normalised), if any.
    pub fn get(&self, prefix: IpNetwork) -> Option<Identity> {
        match prefix {
            IpNetwork::V4(net) => {
                let len = net.prefix();
                self.v4
                    .get(&(len, mask_v4(u32::from(net.ip()), len)))
                    .copied()
            }
            IpNetwork::V6(net) => {
                let len = net.prefix();
                self.v6
                    .get(&(len, mask_v6(u128::from(net.ip()), len)))
                    .copied()
            }
        }
    }

    /// Longest-prefix match: the most specific prefix containing `addr` and
    /// its identity, or `None` if nothing matches (only possible when the
    /// world default was removed by an override elsewhere — it never is by
    /// this API, but callers must still handle `None`).
    pub fn lookup_prefix(&self, addr: IpAddr) -> Option<(IpNetwork, Identity)> {
        match addr {
            IpAddr::V4(ip) => {
                let bits = u32::from(ip);
                (0..=32_u8).rev().find_map(|len| {
                    let net = mask_v4(bits, len);
                    let id = self.v4.get(&(len, net))?;
                    let network = Ipv4Network::new(Ipv4Addr::from(net), len).ok()?;
                    Some((IpNetwork::V4(network), *id))
                })
            }
            IpAddr::V6(ip) => {
                let bits = u128::from(ip);
                (0..=128_u8).rev().find_map(|len| {
                    let net = mask_v6(bits, len);
                    let id = self.v6.get(&(len, net))?;
                    let network = Ipv6Network::new(Ipv6Addr::from(net), len).ok()?;
                    Some((IpNetwork::V6(network), *id))
                })
            }
        }
    }

    /// The identity of `addr`: the longest matching prefix's, or world (2)
    /// if nothing matches (what the datapath does on a miss).
    pub fn lookup(&self, addr: IpAddr) -> Identity {
        self.lookup_prefix(addr)
            .map_or(Identity::WORLD, |(_, identity)| identity)
    }

    /// Number of prefixes (both families, including the world defaults).
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// Never true: the world defaults are always present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All (prefix, identity) pairs: IPv4 then IPv6, each by prefix length
    /// then address.
    pub fn iter(&self) -> impl Iterator<Item = (IpNetwork, Identity)> + '_ {
        let v4 = self.v4.iter().filter_map(|((len, net), id)| {
            Ipv4Network::new(Ipv4Addr::from(*net), *len)
                .ok()
                .map(|n| (IpNetwork::V4(n), *id))
        });
        let v6 = self.v6.iter().filter_map(|((len, net), id)| {
            Ipv6Network::new(Ipv6Addr::from(*net), *len)
                .ok()
                .map(|n| (IpNetwork::V6(n), *id))
        });
        v4.chain(v6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNetwork {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn world_defaults_are_present() {
        let cache = Ipcache::new();
        assert_eq!(cache.lookup(ip("1.2.3.4")), Identity::WORLD_IPV4);
        assert_eq!(cache.lookup(ip("2001:db8::1")), Identity::WORLD_IPV6);
        assert_eq!(cache.len(), 2);
        assert!(!cache.is_empty());
    }

    // docs/semantics.md §3.6 and distillery_test.go: 192.0.2.3/32 (16324) inside
    // 192.0.2.0/24 (16325); the LPM gives the narrower prefix's identity.
    #[test]
    fn longest_prefix_wins_v4() {
        let mut cache = Ipcache::new();
        let l24 = Identity::local(16325).unwrap();
        let l32 = Identity::local(16324).unwrap();
        assert_eq!(cache.insert(net("192.0.2.0/24"), l24), None);
        cache.insert(net("192.0.2.3/32"), l32);
        assert_eq!(cache.lookup(ip("192.0.2.3")), l32);
        assert_eq!(cache.lookup(ip("192.0.2.4")), l24);
        assert_eq!(cache.lookup(ip("192.0.3.4")), Identity::WORLD_IPV4);
        let (prefix, _) = cache.lookup_prefix(ip("192.0.2.200")).unwrap();
        assert_eq!(prefix, net("192.0.2.0/24"));
    }

    #[test]
    fn longest_prefix_wins_v6_and_host_bits_are_normalised() {
        let mut cache = Ipcache::new();
        let a = Identity::local(1).unwrap();
        let b = Identity::local(2).unwrap();
        cache.insert(net("2001:db8::1/32"), a); // host bits dropped
        cache.insert(net("2001:db8:1::/48"), b);
        assert_eq!(cache.get(net("2001:db8::/32")), Some(a));
        assert_eq!(cache.lookup(ip("2001:db8:1::7")), b);
        assert_eq!(cache.lookup(ip("2001:db8:2::7")), a);
        assert_eq!(cache.lookup(ip("2001:db9::")), Identity::WORLD_IPV6);
    }

    #[test]
    fn world_default_can_be_overridden() {
        let mut cache = Ipcache::new();
        assert_eq!(
            cache.insert(net("0.0.0.0/0"), Identity::WORLD),
            Some(Identity::WORLD_IPV4)
        );
        assert_eq!(cache.lookup(ip("8.8.8.8")), Identity::WORLD);
    }

    #[test]
    fn iteration_is_ordered() {
        let mut cache = Ipcache::new();
        cache.insert(net("10.0.0.0/8"), Identity::local(1).unwrap());
        cache.insert(net("10.0.0.1/32"), Identity::local(2).unwrap());
        let prefixes: Vec<String> = cache.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(prefixes, ["0.0.0.0/0", "10.0.0.0/8", "10.0.0.1/32", "::/0"]);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Longest-prefix lookup agrees with a brute-force scan of every
        /// stored prefix.
        #[test]
        fn lookup_agrees_with_brute_force(
            prefixes in prop::collection::vec((any::<u32>(), 0_u8..=32, 1_u32..1000), 0..20),
            probes in prop::collection::vec(any::<u32>(), 20),
        ) {
            let mut cache = Ipcache::new();
            for (addr, len, index) in &prefixes {
                let net = Ipv4Network::new(Ipv4Addr::from(*addr), *len).unwrap();
                cache.insert(IpNetwork::V4(net), Identity::local(*index).unwrap());
            }
            // Probe stored addresses too, so hits are likely.
            let all: Vec<u32> = probes.iter().copied().chain(prefixes.iter().map(|p| p.0)).collect();
            for probe in all {
                let addr = Ipv4Addr::from(probe);
                let brute = cache
                    .iter()
                    .filter(|(net, _)| net.contains(IpAddr::V4(addr)))
                    .max_by_key(|(net, _)| net.prefix())
                    .map(|(_, id)| id);
                prop_assert_eq!(Some(cache.lookup(IpAddr::V4(addr))), brute);
            }
        }
    }
}
