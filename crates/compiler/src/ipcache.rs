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

/// An address family of the ipcache (and of packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// Both families, IPv4 first.
    pub const ALL: [Family; 2] = [Family::V4, Family::V6];

    /// The family of an address.
    pub fn of(ip: IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// The identity of an address of this family that no more specific
    /// prefix covers: what `0.0.0.0/0` / `::/0` map to in a dual-stack
    /// agent (`daemon/cmd/hostips-sync.go`, `syncHostIPs.sync`), and what
    /// the datapath assigns on an ipcache miss (`WORLD_IPV4_ID` /
    /// `WORLD_IPV6_ID` in `bpf/bpf_lxc.c`; `GetWorldIdentityFromIP` in
    /// `pkg/identity/numericidentity.go`). Identity 2 (`reserved:world`)
    /// only carries world traffic when one family is disabled, which porin
    /// does not model.
    pub const fn world_identity(self) -> Identity {
        match self {
            Family::V4 => Identity::WORLD_IPV4,
            Family::V6 => Identity::WORLD_IPV6,
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// The first address at or after `preferred` (wrapping around the family)
/// that none of `covered` contains; `None` when they cover the whole
/// family. Prefixes of the other family are ignored. Sorting and merging
/// the ranges keeps this `O(n log n)` however the prefixes chain.
pub fn first_uncovered(
    covered: impl IntoIterator<Item = IpNetwork>,
    preferred: IpAddr,
) -> Option<IpAddr> {
    let family = Family::of(preferred);
    let (bits, start) = match preferred {
        IpAddr::V4(ip) => (32_u32, u128::from(u32::from(ip))),
        IpAddr::V6(ip) => (128_u32, u128::from(ip)),
    };
    let max = if bits == 128 {
        u128::MAX
    } else {
        (1_u128 << bits) - 1
    };
    let mut ranges: Vec<(u128, u128)> = covered
        .into_iter()
        .filter(|net| Family::of(net.ip()) == family)
        .map(|net| {
            let len = u32::from(net.prefix()).min(bits);
            let host_bits = bits - len;
            let size_mask = if host_bits == 128 {
                u128::MAX
            } else {
                (1_u128 << host_bits) - 1
            };
            let addr = match net.ip() {
                IpAddr::V4(ip) => u128::from(u32::from(ip)),
                IpAddr::V6(ip) => u128::from(ip),
            };
            let low = addr & !size_mask & max;
            (low, low | size_mask)
        })
        .collect();
    ranges.sort_unstable();
    // Disjoint, non-adjacent ranges: the address after one is free.
    let mut merged: Vec<(u128, u128)> = Vec::with_capacity(ranges.len());
    for (low, high) in ranges {
        match merged.last_mut() {
            Some(last) if last.1 == u128::MAX || low <= last.1 + 1 => last.1 = last.1.max(high),
            _ => merged.push((low, high)),
        }
    }
    let containing = |addr: u128| {
        merged
            .iter()
            .find(|(low, high)| *low <= addr && addr <= *high)
    };
    let free = match containing(start) {
        None => Some(start),
        Some((_, high)) if *high < max => Some(high + 1),
        // The range runs to the end of the family: wrap to its start.
        Some(_) => match merged.first() {
            Some((0, high)) if *high < max => Some(high + 1),
            Some((0, _)) => None,
            _ => Some(0),
        },
    }?;
    Some(match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::from(u32::try_from(free).ok()?)),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(free)),
    })
}

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

    /// The identity of `addr`: the longest matching prefix's, or the
    /// family's world identity (9 / 10) if nothing matches, which is what
    /// Cilium's datapath assigns on a miss (`WORLD_IPV4_ID` /
    /// `WORLD_IPV6_ID`, `bpf/bpf_lxc.c`).
    pub fn lookup(&self, addr: IpAddr) -> Identity {
        self.lookup_prefix(addr)
            .map_or(Family::of(addr).world_identity(), |(_, identity)| identity)
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

    // bpf/bpf_lxc.c: a miss is WORLD_IPV4_ID / WORLD_IPV6_ID (9 / 10 in a
    // dual-stack agent), never reserved:world (2).
    #[test]
    fn a_miss_is_the_family_world_identity() {
        let empty = Ipcache {
            v4: BTreeMap::new(),
            v6: BTreeMap::new(),
        };
        assert_eq!(empty.lookup(ip("8.8.8.8")), Identity::WORLD_IPV4);
        assert_eq!(empty.lookup(ip("2001:db8::8")), Identity::WORLD_IPV6);
    }

    #[test]
    fn first_uncovered_skips_covering_prefixes() {
        let nets = |list: &[&str]| list.iter().map(|s| net(s)).collect::<Vec<_>>();
        let from = ip("192.0.2.1");
        assert_eq!(first_uncovered(nets(&[]), from), Some(from));
        // Other families and prefixes elsewhere do not matter.
        assert_eq!(
            first_uncovered(nets(&["2001:db8::/32", "10.0.0.0/8"]), from),
            Some(from)
        );
        // The end of the widest covering prefix, through adjacent ones.
        assert_eq!(
            first_uncovered(
                nets(&["192.0.2.1/32", "192.0.2.0/24", "192.0.3.0/24"]),
                from
            ),
            Some(ip("192.0.4.0"))
        );
        // A prefix running to the end of the family wraps to its start.
        assert_eq!(
            first_uncovered(nets(&["128.0.0.0/1"]), ip("200.0.0.1")),
            Some(ip("0.0.0.0"))
        );
        assert_eq!(
            first_uncovered(nets(&["128.0.0.0/1", "0.0.0.0/8"]), ip("200.0.0.1")),
            Some(ip("1.0.0.0"))
        );
        // Everything covered: no address.
        assert_eq!(
            first_uncovered(nets(&["0.0.0.0/1", "128.0.0.0/1"]), from),
            None
        );
        assert_eq!(
            first_uncovered(nets(&["::/1", "8000::/1"]), ip("2001:db8::1")),
            None
        );
        assert_eq!(
            first_uncovered(nets(&["2001:db8::/64"]), ip("2001:db8::1")),
            Some(ip("2001:db8:0:1::"))
        );
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
        /// The address `first_uncovered` picks is in no prefix, and every
        /// address from the preferred one up to it is in one (so it is the
        /// first free one). The prefixes stay inside 192.0.0.0/22 so the
        /// scan is short.
        #[test]
        fn first_uncovered_is_the_first_free_address(
            prefixes in prop::collection::vec((0_u32..1024, 22_u8..=32), 0..24),
            start in 0_u32..1024,
        ) {
            let base = u32::from(Ipv4Addr::new(192, 0, 0, 0));
            let nets: Vec<IpNetwork> = prefixes
                .iter()
                .map(|(offset, len)| {
                    let ip = Ipv4Addr::from(base + offset);
                    IpNetwork::V4(Ipv4Network::new(ip, *len).unwrap())
                })
                .collect();
            let preferred = base + start;
            let found = first_uncovered(nets.clone(), IpAddr::V4(Ipv4Addr::from(preferred)));
            let covered = |addr: u32| nets.iter().any(|n| n.contains(IpAddr::V4(Ipv4Addr::from(addr))));
            let Some(IpAddr::V4(found)) = found else {
                return Err(TestCaseError::fail("prefixes inside one /22 leave most addresses free, yet none was found"));
            };
            let found = u32::from(found);
            prop_assert!(!covered(found));
            prop_assert!(found >= preferred);
            for addr in preferred..found {
                prop_assert!(covered(addr), "{} is free but {} was picked", Ipv4Addr::from(addr), Ipv4Addr::from(found));
            }
        }

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
