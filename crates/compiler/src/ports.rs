//! Port ranges as masked ports (CIDR-like port prefixes).
//!
//! The policy map is a longest-prefix-match trie, so a port range `start..=end`
//! must be expressed as a set of aligned power-of-two blocks, each a
//! [`MaskedPort`]. This mirrors Cilium's `PortRangeToMaskedPorts` in
//! `pkg/policy/portrange.go` (docs/semantics.md §4.5), including its two input
//! conventions:
//!
//! - `start == 0 && (end == 0 || end == 65535)` is the wildcard (all ports);
//! - `end <= start` is the single port `start` (an inverted range is *silently*
//!   a single port; Cilium documents this in `portrange_test.go`).
//!
//! For `start < end` the result is the *minimal* cover by aligned blocks;
//! the tests prove this against an independent greedy oracle for every
//! single port and a large set of ranges.

/// A port with a prefix mask: it matches `p` iff `p & mask == port`.
///
/// Invariants (enforced by the constructors): `mask` is a prefix mask
/// (`0xffff << k` for some `k` in `0..=16`) and `port & !mask == 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MaskedPort {
    port: u16,
    mask: u16,
}

impl MaskedPort {
    /// The wildcard: every port (`{0, 0}`).
    pub const WILDCARD: MaskedPort = MaskedPort { port: 0, mask: 0 };

    /// A block of `2^(16 - prefix_len)` ports containing `port`
    /// (`port` is masked; a `prefix_len` above 16 is treated as 16).
    pub const fn from_prefix(port: u16, prefix_len: u8) -> MaskedPort {
        let mask = prefix_mask(prefix_len);
        MaskedPort {
            port: port & mask,
            mask,
        }
    }

    /// Cilium's `maskedPort(port, wildcardBits)`: the lowest `wildcard_bits`
    /// bits wildcarded.
    const fn with_wildcard_bits(port: u16, wildcard_bits: u32) -> MaskedPort {
        // wildcard_bits <= 16 at every call site; 16 gives mask 0.
        let mask = if wildcard_bits >= 16 {
            0
        } else {
            0xffff_u16 << wildcard_bits
        };
        MaskedPort {
            port: port & mask,
            mask,
        }
    }

    /// A single port (`{port, 0xffff}`).
    pub const fn single(port: u16) -> MaskedPort {
        MaskedPort { port, mask: 0xffff }
    }

    /// The first port of the block.
    pub const fn port(self) -> u16 {
        self.port
    }

    /// The mask (`0xffff` for a single port, `0` for the wildcard).
    pub const fn mask(self) -> u16 {
        self.mask
    }

    /// The prefix length: `LeadingZeros16(^mask)`, 0..=16.
    pub const fn prefix_len(self) -> u8 {
        (!self.mask).leading_zeros() as u8
    }

    /// The last port of the block (`port + ^mask`).
    pub const fn end_port(self) -> u16 {
        self.port | !self.mask
    }

    /// Number of ports in the block (1..=65536).
    pub const fn len(self) -> u32 {
        (!self.mask) as u32 + 1
    }

    /// Never empty; present for clippy's `len_without_is_empty`.
    pub const fn is_empty(self) -> bool {
        false
    }

    /// True if `port` is in the block.
    pub const fn contains(self, port: u16) -> bool {
        port & self.mask == self.port
    }

    /// True for the all-ports wildcard.
    pub const fn is_wildcard(self) -> bool {
        self.mask == 0
    }
}

/// The prefix mask with `prefix_len` leading ones (capped at 16).
pub const fn prefix_mask(prefix_len: u8) -> u16 {
    if prefix_len == 0 {
        0
    } else if prefix_len >= 16 {
        0xffff
    } else {
        0xffff_u16 << (16 - prefix_len)
    }
}

/// Cilium's `PortRangeToMaskedPorts(start, end)` (`pkg/policy/portrange.go`),
/// re-expressed; the result is sorted by port (Cilium's order is
/// unspecified, its tests sort too).
///
/// See the module docs for the wildcard and inverted-range conventions.
pub fn port_range_to_masked_ports(start: u16, end: u16) -> Vec<MaskedPort> {
    if start == 0 && (end == 0 || end == u16::MAX) {
        return vec![MaskedPort::WILDCARD];
    }
    if end <= start {
        return vec![MaskedPort::single(start)];
    }
    // Bits above the highest differing bit are common to every port in range.
    let common_bits = (start ^ end).leading_zeros();
    let low_mask = u16::MAX >> common_bits;
    // One aligned block: the low bits run from all-zeros to all-ones.
    if start & low_mask == 0 && !end & low_mask == 0 {
        return vec![MaskedPort::with_wildcard_bits(start, 16 - common_bits)];
    }
    // Otherwise approach the highest differing bit ("middle") from both sides.
    let middle_bit = 15 - common_bits;
    let middle = 1_u16 << middle_bit;
    let mut ports = Vec::new();

    // Start side: the block of the start's trailing zeros, then one block for
    // every zero bit between there and the middle bit.
    let mut bit = (start | middle).trailing_zeros();
    ports.push(MaskedPort::with_wildcard_bits(start, bit));
    bit += 1;
    while bit < middle_bit {
        if start & (1 << bit) == 0 {
            ports.push(MaskedPort::with_wildcard_bits(start + (1 << bit), bit));
        }
        bit += 1;
    }

    // End side: the block of the end's trailing ones, then one block for
    // every one bit between there and the middle bit.
    let mut bit = (!end | middle).trailing_zeros();
    ports.push(MaskedPort::with_wildcard_bits(end, bit));
    bit += 1;
    while bit < middle_bit {
        if end & (1 << bit) != 0 {
            ports.push(MaskedPort::with_wildcard_bits(end - (1 << bit), bit));
        }
        bit += 1;
    }

    ports.sort_unstable();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent oracle: the greedy cover by the largest aligned block that
    /// starts at the current position and stays inside the range. Greedy is
    /// optimal for aligned power-of-two blocks (each block it picks is the
    /// unique maximal one containing its first port), so its count is the
    /// minimal prefix cover.
    fn greedy_cover(start: u16, end: u16) -> Vec<(u32, u32)> {
        let (mut pos, end) = (u32::from(start), u32::from(end));
        let mut blocks = Vec::new();
        while pos <= end {
            let mut size = 1_u32;
            while pos % (size * 2) == 0 && pos + size * 2 - 1 <= end {
                size *= 2;
            }
            blocks.push((pos, size));
            pos += size;
        }
        blocks
    }

    /// Checks exact single coverage of `start..=end`, nothing outside, and
    /// minimality; `validateMaskedPorts` in `portrange_test.go` plus more.
    fn check_range(start: u16, end: u16) {
        let got = port_range_to_masked_ports(start, end);
        // Contiguous, in order, non-overlapping, from start to end.
        let mut next = u32::from(start);
        for m in &got {
            assert_eq!(m.port() & !m.mask(), 0, "unmasked port in {m:?}");
            assert_eq!(
                m.mask(),
                prefix_mask(m.prefix_len()),
                "non-prefix mask in {m:?}"
            );
            assert_eq!(
                u32::from(m.port()),
                next,
                "gap/overlap at {m:?} for {start}-{end}"
            );
            next = u32::from(m.end_port()) + 1;
        }
        assert_eq!(
            next,
            u32::from(end) + 1,
            "{start}-{end} not covered to the end"
        );
        let oracle = greedy_cover(start, end);
        assert_eq!(got.len(), oracle.len(), "{start}-{end} is not minimal");
        let as_blocks: Vec<(u32, u32)> =
            got.iter().map(|m| (u32::from(m.port()), m.len())).collect();
        assert_eq!(as_blocks, oracle, "{start}-{end}");
    }

    fn mp(port: u16, mask: u16) -> MaskedPort {
        let m = MaskedPort { port, mask };
        assert_eq!(m.mask(), prefix_mask(m.prefix_len()));
        m
    }

    // Every row of TestPortRange in cilium pkg/policy/portrange_test.go.
    #[test]
    fn cilium_portrange_test_table() {
        let worst: Vec<MaskedPort> = vec![
            mp(0x1, 0xffff),
            mp(0x2, 0xfffe),
            mp(0x4, 0xfffc),
            mp(0x8, 0xfff8),
            mp(0x10, 0xfff0),
            mp(0x20, 0xffe0),
            mp(0x40, 0xffc0),
            mp(0x80, 0xff80),
            mp(0x100, 0xff00),
            mp(0x200, 0xfe00),
            mp(0x400, 0xfc00),
            mp(0x800, 0xf800),
            mp(0x1000, 0xf000),
            mp(0x2000, 0xe000),
            mp(0x4000, 0xc000),
            mp(0x8000, 0xc000),
            mp(0xc000, 0xe000),
            mp(0xe000, 0xf000),
            mp(0xf000, 0xf800),
            mp(0xf800, 0xfc00),
            mp(0xfc00, 0xfe00),
            mp(0xfe00, 0xff00),
            mp(0xff00, 0xff80),
            mp(0xff80, 0xffc0),
            mp(0xffc0, 0xffe0),
            mp(0xffe0, 0xfff0),
            mp(0xfff0, 0xfff8),
            mp(0xfff8, 0xfffc),
            mp(0xfffc, 0xfffe),
            mp(0xfffe, 0xffff),
        ];
        let table: Vec<(u16, u16, Vec<MaskedPort>)> = vec![
            (1, 65534, worst),
            (
                1,
                1023,
                vec![
                    mp(0x1, 0xffff),
                    mp(0x2, 0xfffe),
                    mp(0x4, 0xfffc),
                    mp(0x8, 0xfff8),
                    mp(0x10, 0xfff0),
                    mp(0x20, 0xffe0),
                    mp(0x40, 0xffc0),
                    mp(0x80, 0xff80),
                    mp(0x100, 0xff00),
                    mp(0x200, 0xfe00),
                ],
            ),
            (0, 1023, vec![mp(0, 0xfc00)]),
            (
                1024,
                65535,
                vec![
                    mp(0x400, 0xfc00),
                    mp(0x800, 0xf800),
                    mp(0x1000, 0xf000),
                    mp(0x2000, 0xe000),
                    mp(0x4000, 0xc000),
                    mp(0x8000, 0x8000),
                ],
            ),
            (
                10000,
                20000,
                vec![
                    mp(0x2710, 0xfff0),
                    mp(0x2720, 0xffe0),
                    mp(0x2740, 0xffc0),
                    mp(0x2780, 0xff80),
                    mp(0x2800, 0xf800),
                    mp(0x3000, 0xf000),
                    mp(0x4000, 0xf800),
                    mp(0x4800, 0xfc00),
                    mp(0x4c00, 0xfe00),
                    mp(0x4e00, 0xffe0),
                    mp(0x4e20, 0xffff),
                ],
            ),
            (
                1000,
                1999,
                vec![
                    mp(0x3e8, 0xfff8),
                    mp(0x3f0, 0xfff0),
                    mp(0x400, 0xfe00),
                    mp(0x600, 0xff00),
                    mp(0x700, 0xff80),
                    mp(0x780, 0xffc0),
                    mp(0x7c0, 0xfff0),
                ],
            ),
            (0, 1, vec![mp(0, 0xfffe)]),
            (16, 31, vec![mp(0x10, 0xfff0)]),
            (0xff00, 0xffff, vec![mp(0xff00, 0xff00)]),
            (0, 0xffff, vec![mp(0, 0)]),
            (1, 7, vec![mp(1, 0xffff), mp(2, 0xfffe), mp(4, 0xfffc)]),
            (0, 7, vec![mp(0, 0xfff8)]),
            (
                5,
                10,
                vec![mp(5, 0xffff), mp(6, 0xfffe), mp(8, 0xfffe), mp(10, 0xffff)],
            ),
            (0, 16, vec![mp(0, 0xfff0), mp(16, 0xffff)]),
            (
                16,
                391,
                vec![
                    mp(0x10, 0xfff0),
                    mp(0x20, 0xffe0),
                    mp(0x40, 0xffc0),
                    mp(0x80, 0xff80),
                    mp(0x100, 0xff80),
                    mp(0x180, 0xfff8),
                ],
            ),
            (22, 23, vec![mp(22, 0xfffe)]),
            (23, 24, vec![mp(23, 0xffff), mp(24, 0xffff)]),
            (0, 0x7fff, vec![mp(0, 0x8000)]),
            (256, 256, vec![mp(0x100, 0xffff)]),
            (65535, 65535, vec![mp(65535, 0xffff)]),
            (32767, 32768, vec![mp(0x7fff, 0xffff), mp(0x8000, 0xffff)]),
            (
                0x5555,
                0x55d5,
                vec![
                    mp(0x5555, 0xffff),
                    mp(0x5556, 0xfffe),
                    mp(0x5558, 0xfff8),
                    mp(0x5560, 0xffe0),
                    mp(0x5580, 0xffc0),
                    mp(0x55c0, 0xfff0),
                    mp(0x55d0, 0xfffc),
                    mp(0x55d4, 0xfffe),
                ],
            ),
            // "This is all ports." / "This is too."
            (0, 0, vec![mp(0, 0)]),
            (0, 65535, vec![mp(0, 0)]),
            // "This is valid, as "0" defines no range."
            (65535, 0, vec![mp(0xffff, 0xffff)]),
            // Inverted ranges: documented to return the start port only.
            (65535, 1, vec![mp(0xffff, 0xffff)]),
            (65530, 5, vec![mp(0xfffa, 0xffff)]),
            (10, 5, vec![mp(0xa, 0xffff)]),
        ];
        assert_eq!(table.len(), 28, "portrange_test.go has 28 rows");
        for (start, end, expected) in table {
            assert_eq!(
                port_range_to_masked_ports(start, end),
                expected,
                "TestPortRange {start}-{end}"
            );
            // validateMaskedPorts runs for start <= end, except the wildcard.
            if start < end && !(start == 0 && end == 65535) {
                check_range(start, end);
            }
        }
    }

    // docs/semantics.md §4.5 counts (portrange_test.go and PR #20633).
    #[test]
    fn documented_prefix_counts() {
        for (start, end, count) in [
            (1, 65534, 30),
            (1, 65535, 16),
            (1024, 65535, 6),
            (10000, 20000, 11),
            (1, 1023, 10),
            (0, 1023, 1),
            (22, 23, 1),
            (80, 80, 1),
        ] {
            assert_eq!(
                port_range_to_masked_ports(start, end).len(),
                count,
                "{start}-{end}"
            );
        }
    }

    #[test]
    fn every_single_port_is_one_exact_block() {
        // 0 alone is Cilium's wildcard convention, tested separately.
        for port in 1..=u16::MAX {
            let got = port_range_to_masked_ports(port, port);
            assert_eq!(got, vec![MaskedPort::single(port)]);
            assert!(got[0].contains(port));
            assert_eq!(got[0].len(), 1);
        }
        assert_eq!(port_range_to_masked_ports(0, 0), vec![MaskedPort::WILDCARD]);
    }

    #[test]
    fn small_widths_at_many_offsets_are_minimal_exact_covers() {
        // Every range of width 2..=70 starting at every offset in a window
        // around interesting alignments, plus the top of the space.
        let mut starts: Vec<u16> = (0..=1100).collect();
        starts.extend(32_700..=32_840);
        starts.extend(65_400..=65_534);
        for start in starts {
            for width in 1..=70_u32 {
                let end = u32::from(start) + width;
                if end > 65535 {
                    break;
                }
                let end = end as u16;
                if start == 0 && end == 65535 {
                    continue;
                }
                check_range(start, end);
            }
        }
    }

    #[test]
    fn large_sample_of_ranges_are_minimal_exact_covers() {
        // A deterministic LCG sample (no external RNG needed).
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as u16
        };
        for _ in 0..200_000 {
            let (a, b) = (next(), next());
            let (start, end) = if a <= b { (a, b) } else { (b, a) };
            if start == end || (start == 0 && end == 65535) {
                continue;
            }
            check_range(start, end);
        }
        // Every range ending at 65535 and every range starting at 1.
        for start in 1..u16::MAX {
            check_range(start, 65535);
        }
        for end in 2..=u16::MAX {
            check_range(1, end);
        }
    }

    #[test]
    fn every_port_membership_for_selected_ranges() {
        // Exhaustive membership over all 65,536 ports for a few ranges.
        for (start, end) in [(1, 65534), (10000, 20000), (5, 10), (0, 1023), (1000, 1999)] {
            let blocks = port_range_to_masked_ports(start, end);
            for port in 0..=u16::MAX {
                let hits = blocks.iter().filter(|m| m.contains(port)).count();
                let inside = port >= start && port <= end;
                assert_eq!(hits, usize::from(inside), "port {port} in {start}-{end}");
            }
        }
    }

    #[test]
    fn masked_port_accessors() {
        let m = MaskedPort::from_prefix(100, 10); // 64..=127
        assert_eq!(
            (m.port(), m.mask(), m.prefix_len(), m.end_port()),
            (64, 0xffc0, 10, 127)
        );
        assert!(m.contains(64) && m.contains(127) && !m.contains(128) && !m.contains(63));
        assert_eq!(MaskedPort::WILDCARD.prefix_len(), 0);
        assert_eq!(MaskedPort::WILDCARD.len(), 65536);
        assert_eq!(MaskedPort::single(7).prefix_len(), 16);
        assert_eq!(MaskedPort::from_prefix(7, 200), MaskedPort::single(7));
        assert_eq!(prefix_mask(0), 0);
        assert_eq!(prefix_mask(6), 0xfc00);
    }
}
