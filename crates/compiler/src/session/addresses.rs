//! Every endpoint address a live session holds, and the automatic
//! addresses `Inventory::finish` would give a new endpoint without any.
//!
//! An added endpoint needs two answers in constant time: whether one of
//! its addresses is already taken, and, when it has none, the lowest free
//! automatic IPv4 and IPv6 address. Searching the second from the base on
//! every add hashed every address of the session (257 endpoints: ~135,000
//! of an add's ~480,000 instructions, callgrind, session 11); a floor per
//! family below which every automatic address is known to be taken makes
//! the search start where the last one ended.
//!
//! The set is ordered (a `BTreeSet`), not hashed: the addresses come from
//! the inventory, so a long-running agent's lookups stay logarithmic
//! whatever addresses it is given, with no hasher to seed.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::inventory::{AUTO_IPV4_BASE, AUTO_IPV6_BASE};

/// The session's endpoint addresses (see the module docs).
#[derive(Debug, Clone, Default)]
pub(super) struct AddressBook {
    taken: BTreeSet<IpAddr>,
    /// Per family (IPv4, IPv6), an offset from the automatic base such that
    /// every automatic address at offsets `1..floor` is taken (the base
    /// itself is never given). Only a lower bound: a removed address below
    /// it lowers it, a taken one above it changes nothing.
    floor: [u128; 2],
}

impl AddressBook {
    /// The book of `addresses`, its floors already at the lowest free
    /// automatic addresses (the scan past the inventory's addresses is
    /// paid with the session, not by its first add).
    pub(super) fn new(addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        let mut book = Self {
            taken: addresses.into_iter().collect(),
            floor: [1, 1],
        };
        book.lowest_free();
        book
    }

    pub(super) fn contains(&self, ip: &IpAddr) -> bool {
        self.taken.contains(ip)
    }

    pub(super) fn insert(&mut self, ip: IpAddr) {
        self.taken.insert(ip);
    }

    pub(super) fn remove(&mut self, ip: &IpAddr) {
        if !self.taken.remove(ip) {
            return;
        }
        let (family, offset) = offset(ip);
        if offset >= 1 && offset < self.floor[family] {
            self.floor[family] = offset;
        }
    }

    /// The addresses `Inventory::finish` gives an endpoint without any when
    /// every other endpoint holds its addresses: the first free automatic
    /// address of each family after the base (IPv4 wraps around in 32
    /// bits, as `finish` does). Raises the floors past what it skipped.
    pub(super) fn lowest_free(&mut self) -> Vec<IpAddr> {
        let mut found = Vec::with_capacity(2);
        for family in 0..2 {
            let mut n = self.floor[family];
            loop {
                let candidate = address(family, n);
                if !self.taken.contains(&candidate) {
                    found.push(candidate);
                    break;
                }
                n = n.wrapping_add(1);
                if family == 0 && n > u128::from(u32::MAX) {
                    // Every automatic IPv4 address is taken: `finish`
                    // would search forever; so would the scan from the
                    // base this replaces. Unreachable with the endpoint
                    // limit (far below 2^32).
                    n = 1;
                }
            }
            self.floor[family] = n;
        }
        found
    }
}

/// The family (0 IPv4, 1 IPv6) of an address and its offset from that
/// family's automatic base.
fn offset(ip: &IpAddr) -> (usize, u128) {
    match ip {
        IpAddr::V4(v4) => (
            0,
            u128::from(u32::from(*v4).wrapping_sub(u32::from(AUTO_IPV4_BASE))),
        ),
        IpAddr::V6(v6) => (1, u128::from(*v6).wrapping_sub(u128::from(AUTO_IPV6_BASE))),
    }
}

/// The automatic address at offset `n` of `family`.
fn address(family: usize, n: u128) -> IpAddr {
    if family == 0 {
        IpAddr::V4(Ipv4Addr::from(
            u32::from(AUTO_IPV4_BASE).wrapping_add(n as u32),
        ))
    } else {
        IpAddr::V6(Ipv6Addr::from(u128::from(AUTO_IPV6_BASE).wrapping_add(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search from the base that the floor replaces.
    fn from_base(taken: &BTreeSet<IpAddr>) -> Vec<IpAddr> {
        (0..2)
            .map(|family| {
                (1u128..)
                    .map(|n| address(family, n))
                    .find(|a| !taken.contains(a))
                    .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
            })
            .collect()
    }

    #[test]
    fn the_floor_gives_what_a_search_from_the_base_gives() {
        // A deterministic walk of adds (with and without given addresses)
        // and removes, checked against the search from the base at every
        // step: a floor not lowered by a removal, or raised past a free
        // address, gives a different answer.
        let mut book = AddressBook::new([address(0, 2), address(1, 3)]);
        let mut held: Vec<Vec<IpAddr>> = vec![vec![address(0, 2)], vec![address(1, 3)]];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for step in 0..2_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let expected = from_base(&book.taken);
            match seed % 5 {
                0..=2 => {
                    let ips = book.lowest_free();
                    assert_eq!(ips, expected, "step {step}");
                    for ip in &ips {
                        book.insert(*ip);
                    }
                    held.push(ips);
                }
                3 if !held.is_empty() => {
                    let at = (seed >> 8) as usize % held.len();
                    for ip in held.swap_remove(at) {
                        book.remove(&ip);
                    }
                }
                _ => {
                    // An endpoint with an address of its own, inside the
                    // automatic range, ahead of the floor.
                    let ip = address((seed >> 8) as usize % 2, u128::from(1 + (seed >> 16) % 64));
                    if !book.contains(&ip) {
                        book.insert(ip);
                        held.push(vec![ip]);
                    }
                }
            }
        }
        assert_eq!(book.lowest_free(), from_base(&book.taken));
    }

    #[test]
    fn removing_an_address_outside_the_automatic_range_keeps_the_floor() {
        let mut book = AddressBook::new([address(0, 1), address(1, 1)]);
        assert_eq!(book.lowest_free(), vec![address(0, 2), address(1, 2)]);
        let other = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
        book.insert(other);
        book.remove(&other);
        assert_eq!(book.floor, [2, 2]);
        book.remove(&address(0, 1));
        assert_eq!(book.lowest_free(), vec![address(0, 1), address(1, 2)]);
    }
}
