//! Which identities a selector selects, without testing every identity.
//!
//! Testing every selector against every identity is O(selectors ×
//! identities); with one CIDR identity per policy prefix that is quadratic
//! in the number of CIDR rules (4,000 rules took seconds, 65,535 did not
//! finish). [`SelectionIndex`] narrows each selector to *candidates* and
//! runs the exact [`Selector::matches`] on those only, so the result is the
//! brute force's ([`select_brute_force`], kept as the test oracle) by
//! construction:
//!
//! - A requirement `In`/`Exists` on a non-CIDR key `k` is satisfied only by
//!   a label set holding a label with key `k` ([`LabelSet::find`](crate::labels::LabelSet::find) looks the
//!   key up, then checks the source), so the candidates are the identities
//!   with such a label (an index by label key).
//! - A requirement `In`/`Exists` on `cidr:<P>` is satisfied only by a label
//!   set holding a CIDR label whose prefix lies inside `P`
//!   ([`prefix_contains`]: Cilium's CIDR-aware `Label.HasKey`,
//!   `pkg/labels/labels.go`, matches selector `cidr:P` against identity
//!   label `cidr:Q` iff `P.bits ≤ Q.bits && P.contains(Q.addr)`; selectors
//!   from `types.NewCIDRSelector`; docs/semantics.md §3.6). The identities carrying
//!   CIDR labels are indexed by (family, network address, length); the
//!   prefixes inside `P` are the entries whose address lies in `P`'s range
//!   and whose length is at least `P`'s, one range of a sorted list.
//!   (Entries in the range with a shorter length can only start at `P`'s
//!   own network address: at most 128 of them, filtered out.)
//! - A selector with no such requirement (only `NotIn`/`DoesNotExist`)
//!   falls back to every identity.
//!
//! The candidates of the most selective positive requirement are sorted
//! back into table order, so the selection keeps the brute force's order.

use std::net::IpAddr;

use ipnetwork::IpNetwork;
use rayon::prelude::*;

use crate::allocation::{IdentityInfo, IdentityTable};
use crate::labels::{SOURCE_CIDR, cidr_label_key, parse_cidr_label_key, prefix_contains};
use crate::selector::{Operator, Requirement, Selector};

/// A prefix as a sortable key: (IPv6?, network address, length). Prefixes
/// inside `P` sort between `P`'s network and broadcast addresses.
type PrefixKey = (bool, u128, u8);

fn prefix_key(prefix: IpNetwork) -> PrefixKey {
    (
        prefix.is_ipv6(),
        address_bits(prefix.network()),
        prefix.prefix(),
    )
}

fn address_bits(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Label indexes over one [`IdentityTable`]: positions in
/// `table.identities` by label key and by CIDR label prefix.
#[derive(Debug, Default)]
pub struct SelectionIndex {
    /// The identities holding a (non-CIDR) label, by its key.
    by_key: foldhash::HashMap<String, KeyHolders>,
    /// The identities holding a CIDR label: its prefix and their position,
    /// sorted (a prefix held by several identities is several entries).
    /// The prefixes inside `P` are one range of it.
    by_prefix: Vec<(PrefixKey, IpNetwork, usize)>,
    /// `table.identities` (address, length) the index was built from, to
    /// notice being used with another table.
    built_from: (usize, usize),
}

/// Positions of the identities holding a label with one key.
#[derive(Debug, Default)]
struct KeyHolders {
    /// Every holder, in table order.
    all: Vec<usize>,
    /// The holders by the label's value: the candidates of `key In
    /// (values)` are the union over its values, far fewer than every
    /// holder of the key when each pod has its own value (`pod: <name>`).
    by_value: foldhash::HashMap<String, Vec<usize>>,
}

/// Which table an index belongs to (its identities' storage and count).
fn table_fingerprint(table: &IdentityTable) -> (usize, usize) {
    (table.identities.as_ptr() as usize, table.identities.len())
}

/// Identities per piece of [`SelectionIndex::new`]'s parallel pass; a
/// smaller table is read on the calling thread.
const INDEX_PIECE: usize = 4096;

/// What a run of identities contributes to a [`SelectionIndex`]: its CIDR
/// labels' prefixes and its other labels' holders, in table order.
#[derive(Default)]
struct IndexPiece<'t> {
    prefixes: Vec<(PrefixKey, IpNetwork, usize)>,
    by_key: foldhash::HashMap<&'t str, PieceHolders<'t>>,
}

/// [`KeyHolders`] within one [`IndexPiece`].
#[derive(Default)]
struct PieceHolders<'t> {
    all: Vec<usize>,
    by_value: foldhash::HashMap<&'t str, Vec<usize>>,
}

/// Reads the labels of `identities`, the first at `position` of the table.
fn index_piece(position: usize, identities: &[IdentityInfo]) -> IndexPiece<'_> {
    let mut piece = IndexPiece::default();
    for (position, info) in (position..).zip(identities) {
        for label in info.labels.iter() {
            if let Some(prefix) = label.cidr_prefix() {
                piece.prefixes.push((prefix_key(prefix), prefix, position));
                // A CIDR label in its canonical spelling (every one porin
                // makes) is found by key through `by_prefix`
                // ([`SelectionIndex::cidr_label_holders`]): one key per
                // CIDR identity in the key map was most of the index (34
                // MiB for 65,535 CIDR rules).
                if label.key == cidr_label_key(prefix) {
                    continue;
                }
            }
            let holders = piece.by_key.entry(label.key.as_str()).or_default();
            holders.all.push(position);
            holders
                .by_value
                .entry(label.value.as_str())
                .or_default()
                .push(position);
        }
    }
    piece
}

impl SelectionIndex {
    /// Indexes every label of every identity of `table`. The labels are
    /// read in parallel pieces (parsing and re-spelling each CIDR label's
    /// key, and a lookup per label, were most of the build for 65,535 CIDR
    /// identities, on the calling thread alone), and the pieces joined in
    /// table order: the index a single pass builds.
    pub fn new(table: &IdentityTable) -> Self {
        let pieces: Vec<IndexPiece<'_>> = if table.identities.len() > INDEX_PIECE {
            table
                .identities
                .par_chunks(INDEX_PIECE)
                .enumerate()
                .map(|(at, chunk)| index_piece(at * INDEX_PIECE, chunk))
                .collect()
        } else {
            vec![index_piece(0, &table.identities)]
        };
        let mut by_key: foldhash::HashMap<String, KeyHolders> = foldhash::HashMap::default();
        let mut by_prefix: Vec<(PrefixKey, IpNetwork, usize)> =
            Vec::with_capacity(pieces.iter().map(|piece| piece.prefixes.len()).sum());
        for piece in pieces {
            by_prefix.extend(piece.prefixes);
            // A piece's positions follow the earlier pieces', so appending
            // keeps every list in table order.
            for (key, piece_holders) in piece.by_key {
                let holders = by_key.entry(key.to_owned()).or_default();
                holders.all.extend(piece_holders.all);
                for (value, positions) in piece_holders.by_value {
                    holders
                        .by_value
                        .entry(value.to_owned())
                        .or_default()
                        .extend(positions);
                }
            }
        }
        // CIDR identities are numbered in prefix order, so this is mostly
        // sorted already.
        by_prefix.sort_unstable_by_key(|(key, _, position)| (*key, *position));
        Self {
            by_key,
            by_prefix,
            built_from: table_fingerprint(table),
        }
    }

    /// Whether this index was built from `table` (same identities storage
    /// and count).
    pub fn is_for(&self, table: &IdentityTable) -> bool {
        self.built_from == table_fingerprint(table)
    }

    /// The identities `selector` selects, in table order; equal to
    /// [`select_brute_force`]. The wildcard selects every identity here
    /// (the selector cache maps it to identity 0 before asking).
    pub fn select(&self, selector: &Selector, table: &IdentityTable) -> Vec<u32> {
        self.select_counted(selector, table, &mut 0)
    }

    /// [`SelectionIndex::select`], adding to `work` the identities tested
    /// (the candidates, or every identity for the brute-force fallback):
    /// what `max_selector_evaluations` bounds.
    pub fn select_counted(
        &self,
        selector: &Selector,
        table: &IdentityTable,
        work: &mut u64,
    ) -> Vec<u32> {
        let Some(positions) = self.best_candidates(selector) else {
            *work = work.saturating_add(u64::try_from(table.identities.len()).unwrap_or(u64::MAX));
            return select_brute_force(selector, table);
        };
        *work = work.saturating_add(u64::try_from(positions.len()).unwrap_or(u64::MAX));
        matching(positions, selector, table)
    }

    /// [`SelectionIndex::select`] when some requirement of `selector` is
    /// positive (`In`/`Exists`), so that only the identities able to
    /// satisfy it are tested; `None` otherwise (the wildcard, only
    /// negative requirements), where a caller with a smaller set to test
    /// than the whole table (a session's endpoint identities, not its
    /// CIDR identities) tests that set instead.
    pub fn select_indexed(&self, selector: &Selector, table: &IdentityTable) -> Option<Vec<u32>> {
        let positions = self.best_candidates(selector)?;
        Some(matching(positions, selector, table))
    }

    /// Whether [`SelectionIndex::select_indexed`] answers for `selector`:
    /// some requirement is positive (`In`/`Exists`), whose candidates the
    /// index holds. Asked before building an index only to be refused.
    pub fn can_answer(selector: &Selector) -> bool {
        selector.requirements().any(is_positive)
    }

    /// The positions of the fewest candidates any positive requirement of
    /// `selector` gives (unsorted, maybe repeated); `None` without one.
    fn best_candidates(&self, selector: &Selector) -> Option<Vec<usize>> {
        let mut best: Option<Vec<usize>> = None;
        for requirement in selector.requirements() {
            let Some(candidates) = self.candidates(requirement) else {
                continue;
            };
            if best.as_ref().is_none_or(|b| candidates.len() < b.len()) {
                best = Some(candidates);
            }
            if best.as_ref().is_some_and(Vec::is_empty) {
                break;
            }
        }
        best
    }

    /// Positions of the identities that can satisfy a positive requirement
    /// (`In`/`Exists`); `None` for a negative one, which absent labels
    /// satisfy.
    fn candidates(&self, requirement: &Requirement) -> Option<Vec<usize>> {
        if !is_positive(requirement) {
            return None;
        }
        let key = &requirement.key;
        if key.source != SOURCE_CIDR {
            // Holders of a canonical CIDR label with exactly this key (a
            // superset: the exact match runs on every candidate).
            let mut positions = self.cidr_label_holders(&key.key);
            let Some(holders) = self.by_key.get(key.key.as_str()) else {
                return Some(positions);
            };
            if requirement.operator == Operator::In {
                // `LabelSet::find` looks the key up, then `In` compares the
                // value: only holders of (key, one of the values) qualify.
                for value in &requirement.values {
                    if let Some(holders) = holders.by_value.get(value.as_str()) {
                        positions.extend_from_slice(holders);
                    }
                }
                return Some(positions);
            }
            positions.extend_from_slice(&holders.all);
            return Some(positions);
        }
        // An unparsable CIDR key matches no label (`LabelSet::find`).
        let Some(outer) = parse_cidr_label_key(&key.key) else {
            return Some(Vec::new());
        };
        let (v6, _, _) = prefix_key(outer);
        let low = address_bits(outer.network());
        let high = match outer {
            IpNetwork::V4(v4) => u128::from(u32::from(v4.broadcast())),
            IpNetwork::V6(v6_net) => address_bits(IpAddr::V6(v6_net.broadcast())),
        };
        let start = self
            .by_prefix
            .partition_point(|(key, _, _)| *key < (v6, low, 0));
        let end = self
            .by_prefix
            .partition_point(|(key, _, _)| *key <= (v6, high, u8::MAX));
        Some(
            self.by_prefix[start..end.max(start)]
                .iter()
                .filter(|(_, prefix, _)| prefix_contains(outer, *prefix))
                .map(|(_, _, position)| *position)
                .collect(),
        )
    }
}

impl SelectionIndex {
    /// Positions of the identities holding a CIDR label whose key is `key`
    /// in canonical spelling (left out of `by_key`): what `LabelSet::find`
    /// finds for a non-CIDR source (`any`) and that key.
    fn cidr_label_holders(&self, key: &str) -> Vec<usize> {
        let Some(prefix) = parse_cidr_label_key(key) else {
            return Vec::new();
        };
        if cidr_label_key(prefix) != key {
            return Vec::new();
        }
        let wanted = prefix_key(prefix);
        let start = self.by_prefix.partition_point(|(key, _, _)| *key < wanted);
        self.by_prefix[start..]
            .iter()
            .take_while(|(key, _, _)| *key == wanted)
            .map(|(_, _, position)| *position)
            .collect()
    }
}

/// Whether the index holds candidates for `requirement`: only labels
/// present can satisfy `In`/`Exists`; absent labels satisfy the others.
fn is_positive(requirement: &Requirement) -> bool {
    matches!(requirement.operator, Operator::In | Operator::Exists)
}

/// The identities at `positions` (candidates of the index) that
/// `selector` selects, in table order.
fn matching(mut positions: Vec<usize>, selector: &Selector, table: &IdentityTable) -> Vec<u32> {
    positions.sort_unstable();
    positions.dedup();
    positions
        .into_iter()
        .filter_map(|position| table.identities.get(position))
        .filter(|info| selector.matches(&info.labels))
        .map(|info| info.id)
        .collect()
}

/// The identities `selector` selects, by testing every identity of the
/// table (the definition [`SelectionIndex::select`] must equal).
pub fn select_brute_force(selector: &Selector, table: &IdentityTable) -> Vec<u32> {
    table
        .identities
        .iter()
        .filter(|info| selector.matches(&info.labels))
        .map(|info| info.id)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::net::{Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;

    use super::*;
    use crate::inventory::Inventory;
    use crate::selector::SelectorKey;

    /// A few endpoints, so endpoint and reserved identities sit beside the
    /// CIDR ones.
    fn inventory() -> Inventory {
        let mut inventory = Inventory::new();
        inventory
            .add_text(
                "inv.yaml",
                "kind: Inventory\nendpoints:\n  - {name: web, namespace: prod, labels: {app: web}, ips: [10.0.1.10]}\n  - {name: db, namespace: prod, labels: {app: db}, ips: [10.0.1.20]}\n",
            )
            .unwrap();
        inventory.finish().unwrap();
        inventory
    }

    /// Prefixes from a small address space (so containment is common),
    /// any length, both families.
    fn prefix() -> impl Strategy<Value = IpNetwork> {
        prop_oneof![
            (0u32..64, 0u8..=32).prop_map(|(low, len)| {
                let address = Ipv4Addr::from(0x0a00_0000 | (low << 20) | (low * 7));
                IpNetwork::new(IpAddr::V4(address), len).unwrap()
            }),
            (0u128..16, 0u8..=128).prop_map(|(low, len)| {
                let address = Ipv6Addr::from((0xfd00_u128 << 112) | (low << 100) | low);
                IpNetwork::new(IpAddr::V6(address), len).unwrap()
            }),
        ]
    }

    fn selector() -> impl Strategy<Value = Selector> {
        prop_oneof![
            4 => (prefix(), prop::collection::vec(prefix(), 0..3))
                .prop_map(|(p, except)| Selector::cidr(p, &except)),
            1 => Just(Selector::reserved("world-ipv4")),
            1 => Just(Selector::reserved("world")),
            1 => Just(Selector::from_requirements([Requirement::is_in(
                SelectorKey::extend("k8s:app"),
                ["web".to_owned()],
            )])),
            // Only negative requirements: the brute-force fallback.
            1 => prefix().prop_map(|p| Selector::from_requirements([
                Requirement::does_not_exist(SelectorKey::new(
                    SOURCE_CIDR,
                    &crate::labels::cidr_label_key(p),
                )),
            ])),
            // An `any` key spelled as a CIDR label finds that label by key
            // (`LabelSet::find`), though the index keeps CIDR labels by
            // prefix only; a non-canonical spelling finds nothing.
            1 => (prefix(), any::<bool>(), any::<bool>()).prop_map(|(p, exists, canonical)| {
                let key = if canonical {
                    crate::labels::cidr_label_key(p)
                } else {
                    format!("{}/{}", p.ip(), p.prefix())
                };
                let key = SelectorKey::new(crate::labels::SOURCE_ANY, &key);
                Selector::from_requirements([if exists {
                    Requirement::exists(key)
                } else {
                    Requirement::is_in(key, [String::new()])
                }])
            }),
            // A CIDR key that is not a prefix selects nothing.
            1 => Just(Selector::from_requirements([Requirement::exists(
                SelectorKey::new(SOURCE_CIDR, "not-a-prefix"),
            )])),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The index selects exactly what testing every identity selects,
        /// in the same order (Cilium's CIDR-aware `Label.HasKey` in
        /// `pkg/labels/labels.go`, `types.NewCIDRSelector` with excepts;
        /// docs/semantics.md §3.6).
        #[test]
        fn index_equals_brute_force(
            prefixes in prop::collection::btree_set(prefix(), 0..60),
            selectors in prop::collection::vec(selector(), 1..20),
        ) {
            let prefixes: BTreeSet<IpNetwork> = prefixes;
            let table = IdentityTable::allocate(&inventory(), &prefixes).unwrap();
            let index = SelectionIndex::new(&table);
            prop_assert!(index.is_for(&table));
            for selector in &selectors {
                let brute = select_brute_force(selector, &table);
                prop_assert_eq!(index.select(selector, &table), brute.clone(), "{}", selector);
                // Without the brute force: only a selector with no positive
                // requirement is refused, and what is given is exact.
                let positive = selector
                    .requirements()
                    .any(|r| matches!(r.operator, Operator::In | Operator::Exists));
                prop_assert_eq!(SelectionIndex::can_answer(selector), positive, "{}", selector);
                match index.select_indexed(selector, &table) {
                    Some(indexed) => prop_assert_eq!(indexed, brute, "{}", selector),
                    None => prop_assert!(!positive, "{}", selector),
                }
            }
        }
    }

    /// A table of more than [`INDEX_PIECE`] identities is read in parallel
    /// pieces and joined: the index still selects what testing every
    /// identity selects, for selectors whose candidates span pieces.
    #[test]
    fn an_index_read_in_pieces_equals_brute_force() {
        let count = u32::try_from(INDEX_PIECE).unwrap() + 1500;
        let prefixes: BTreeSet<IpNetwork> = (0..count)
            .map(|i| {
                IpNetwork::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (i << 8))), 24).unwrap()
            })
            .chain(["10.0.0.0/16", "10.16.0.0/12", "fd00::/64"].map(|p| p.parse().unwrap()))
            .collect();
        let table = IdentityTable::allocate(&inventory(), &prefixes).unwrap();
        assert!(table.identities.len() > INDEX_PIECE);
        let index = SelectionIndex::new(&table);
        let any_cidr_key = SelectorKey::new(
            crate::labels::SOURCE_ANY,
            &crate::labels::cidr_label_key("10.0.5.0/24".parse().unwrap()),
        );
        let selectors = [
            Selector::cidr("10.0.0.0/8".parse().unwrap(), &[]),
            Selector::cidr(
                "10.0.0.0/12".parse().unwrap(),
                &["10.0.16.0/20".parse().unwrap()],
            ),
            Selector::cidr("10.16.0.0/12".parse().unwrap(), &[]),
            Selector::reserved("world-ipv4"),
            Selector::reserved("world"),
            Selector::from_requirements([Requirement::is_in(
                SelectorKey::extend("k8s:app"),
                ["db".to_owned()],
            )]),
            Selector::from_requirements([Requirement::exists(any_cidr_key)]),
        ];
        for selector in &selectors {
            let selected = index.select(selector, &table);
            assert_eq!(selected, select_brute_force(selector, &table), "{selector}");
        }
        // The first selects every IPv4 prefix, across the pieces.
        assert_eq!(
            index.select(&selectors[0], &table).len(),
            prefixes.len() - 1
        );
    }

    /// A /8 selector selects the CIDR identities of the prefixes inside it
    /// (not the ones around it or beside it).
    #[test]
    fn cidr_selector_selects_contained_prefixes() {
        let prefixes: BTreeSet<IpNetwork> = [
            "10.0.0.0/8",
            "10.1.0.0/16",
            "10.1.2.3/32",
            "11.0.0.0/8",
            "0.0.0.0/4",
            "fd00::/8",
        ]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
        let table = IdentityTable::allocate(&inventory(), &prefixes).unwrap();
        let index = SelectionIndex::new(&table);
        let selector = Selector::cidr("10.0.0.0/8".parse().unwrap(), &[]);
        let selected = index.select(&selector, &table);
        let expected: Vec<u32> = ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.3/32"]
            .iter()
            .map(|p| table.cidr_identity[&p.parse::<IpNetwork>().unwrap()])
            .collect();
        let mut sorted = expected.clone();
        sorted.sort_unstable();
        assert_eq!(selected, sorted);
        assert_eq!(selected, select_brute_force(&selector, &table));
    }
    /// `any.<prefix>` finds the CIDR label of that exact key
    /// (`LabelSet::find` looks the key up for every non-CIDR source), though
    /// the index keeps canonical CIDR labels out of its key maps.
    #[test]
    fn any_source_key_finds_cidr_label_by_key() {
        let prefixes: BTreeSet<IpNetwork> = ["10.0.0.0/8", "fd00::/64"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        let table = IdentityTable::allocate(&inventory(), &prefixes).unwrap();
        let index = SelectionIndex::new(&table);
        for prefix in &prefixes {
            let key = SelectorKey::new(
                crate::labels::SOURCE_ANY,
                &crate::labels::cidr_label_key(*prefix),
            );
            for selector in [
                Selector::from_requirements([Requirement::exists(key.clone())]),
                Selector::from_requirements([Requirement::is_in(key, [String::new()])]),
            ] {
                let selected = index.select(&selector, &table);
                assert_eq!(selected, vec![table.cidr_identity[prefix]], "{selector}");
                assert_eq!(selected, select_brute_force(&selector, &table));
            }
        }
    }
}
