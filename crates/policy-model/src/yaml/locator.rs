//! A compact stand-in for a file's located trees: only what resolving a
//! route to a line and column reads.
//!
//! A [`Node`] tree keeps every scalar's text in its own allocation and a
//! mapping entry as two full nodes; for the 65,535 one-rule CNPs of the CIDR
//! benchmark the trees were most of `porin compile`'s memory, although the
//! compile reads them only to locate findings. A [`Locator`] keeps one
//! 16-byte slot per node, in preorder: the position a route that ends at the
//! node reports, the node's kind and key (mapping keys interned once per
//! file, scalar values dropped) and where its subtree ends, so that the
//! next sibling is found without a list of children. Long sequences also
//! keep their items' slots, so that `items[9999]` is found without walking
//! its 9,999 siblings.

use std::collections::HashMap;

use super::tree::{Node, NodeKind, Pos};

/// Bits of [`Slot::meta`] that hold the key; the two above hold the kind.
const KEY_BITS: u32 = 30;
const KEY_MASK: u32 = (1 << KEY_BITS) - 1;
/// No key: a root, a sequence item, or a mapping key that is not a scalar
/// (which never matches a route's key, as in [`Node::entry`]).
const NO_KEY: u32 = KEY_MASK;
/// The kinds, as stored above the key bits.
const SCALAR: u32 = 0;
const SEQUENCE: u32 = 1;
const MAPPING: u32 = 2;
/// From this many items a sequence's items are listed in
/// [`Locator::items`]; shorter ones are walked.
const LISTED_ITEMS: usize = 16;

/// How many of a file's first distinct keys [`Builder::intern`] finds by
/// comparison; the later ones are hashed.
const SCANNED_KEYS: usize = 32;

/// One node, in preorder: its subtree is `slots[index + 1..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// Where a route ending here points: the key of a mapping or sequence
    /// that is a mapping's value (where it is named; a block container
    /// "starts" at its first entry, which reads as the wrong place), the
    /// node itself otherwise.
    pos: Pos,
    /// The kind (above [`KEY_BITS`]) and the key under which the node is
    /// its parent mapping's value (an index into `keys`, or [`NO_KEY`]).
    meta: u32,
    /// One past the last slot of the subtree.
    end: u32,
}

impl Slot {
    fn kind(&self) -> u32 {
        self.meta >> KEY_BITS
    }

    fn key(&self) -> u32 {
        self.meta & KEY_MASK
    }
}

/// The positions of one file's documents, by document index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locator {
    slots: Vec<Slot>,
    keys: Vec<Box<str>>,
    roots: Vec<Option<u32>>,
    /// The item slots of each sequence with at least [`LISTED_ITEMS`]
    /// items, by the sequence's slot: `(first, count)` in `listed`.
    items: HashMap<u32, (u32, u32)>,
    listed: Vec<u32>,
}

/// A node of a [`Locator`], as [`Locator::root`] and [`LocatedNode::child`]
/// walk it.
#[derive(Debug, Clone, Copy)]
pub struct LocatedNode<'l> {
    locator: &'l Locator,
    slot: u32,
}

/// Which child [`LocatedNode::child`] looks for.
#[derive(Debug, Clone, Copy)]
pub enum Step<'s> {
    /// The value under a key of a mapping.
    Key(&'s str),
    /// An item of a sequence.
    Index(usize),
}

impl Locator {
    /// The locator of documents' roots (`None` for an empty document).
    pub fn of(roots: &[Option<Node>]) -> Locator {
        let mut builder = Builder {
            out: Locator::default(),
            interned: HashMap::new(),
        };
        for root in roots {
            let slot = root
                .as_ref()
                .map(|node| builder.add(node, NO_KEY, node.pos));
            builder.out.roots.push(slot);
        }
        let mut out = builder.out;
        out.slots.shrink_to_fit();
        out.keys.shrink_to_fit();
        out.roots.shrink_to_fit();
        out.listed.shrink_to_fit();
        out
    }

    /// The root of document `document`, if it has one.
    pub fn root(&self, document: usize) -> Option<LocatedNode<'_>> {
        let slot = (*self.roots.get(document)?)?;
        Some(LocatedNode {
            locator: self,
            slot,
        })
    }
}

impl<'l> LocatedNode<'l> {
    fn slot(&self) -> Option<&'l Slot> {
        self.locator.slots.get(self.slot as usize)
    }

    /// Where a route that ends at this node points: the key of a mapping
    /// or sequence that is a mapping's value, the node itself otherwise.
    pub fn pos(&self) -> Pos {
        self.slot().map(|slot| slot.pos).unwrap_or_default()
    }

    /// The child a step names: the first entry with that key, as
    /// [`Node::entry`], or the item at that index.
    pub fn child(&self, step: Step<'_>) -> Option<LocatedNode<'l>> {
        let slot = self.slot()?;
        let locator = self.locator;
        let found = match (step, slot.kind()) {
            (Step::Index(index), SEQUENCE) => match locator.items.get(&self.slot) {
                Some(&(first, count)) => {
                    if index >= count as usize {
                        return None;
                    }
                    *locator.listed.get(first as usize + index)?
                }
                None => self.children().nth(index)?,
            },
            (Step::Key(key), MAPPING) => self.children().find(|&child| {
                locator.slots.get(child as usize).is_some_and(|c| {
                    c.key() != NO_KEY
                        && locator.keys.get(c.key() as usize).map(|k| &**k) == Some(key)
                })
            })?,
            _ => return None,
        };
        Some(LocatedNode {
            locator,
            slot: found,
        })
    }

    /// The slots of the direct children, in order.
    fn children(&self) -> impl Iterator<Item = u32> + 'l {
        let slots = &self.locator.slots;
        let end = self.slot().map_or(0, |slot| slot.end);
        let mut next = self.slot.saturating_add(1);
        std::iter::from_fn(move || {
            if next >= end {
                return None;
            }
            let child = next;
            next = slots.get(child as usize).map_or(end, |slot| slot.end);
            Some(child)
        })
    }
}

struct Builder<'t> {
    out: Locator,
    interned: HashMap<&'t str, u32>,
}

impl<'t> Builder<'t> {
    /// Adds `node` (the value under `key`, pointed at by `pos`) and
    /// everything under it, in preorder; returns its slot.
    fn add(&mut self, node: &'t Node, key: u32, pos: Pos) -> u32 {
        let at = u32::try_from(self.out.slots.len()).unwrap_or(u32::MAX);
        let kind = match node.kind {
            NodeKind::Scalar(..) => SCALAR,
            NodeKind::Sequence(_) => SEQUENCE,
            NodeKind::Mapping(_) => MAPPING,
        };
        self.out.slots.push(Slot {
            pos,
            meta: (kind << KEY_BITS) | (key & KEY_MASK),
            end: 0,
        });
        match &node.kind {
            NodeKind::Scalar(..) => {}
            NodeKind::Sequence(items) => {
                let mut listed = Vec::new();
                for item in items {
                    let child = self.add(item, NO_KEY, item.pos);
                    if items.len() >= LISTED_ITEMS {
                        listed.push(child);
                    }
                }
                if !listed.is_empty() {
                    let first = u32::try_from(self.out.listed.len()).unwrap_or(u32::MAX);
                    let count = u32::try_from(listed.len()).unwrap_or(u32::MAX);
                    self.out.listed.extend(listed);
                    self.out.items.insert(at, (first, count));
                }
            }
            NodeKind::Mapping(pairs) => {
                for (key, value) in pairs {
                    let key_index = match key.as_scalar() {
                        Some(text) => self.intern(text),
                        None => NO_KEY,
                    };
                    let container =
                        matches!(value.kind, NodeKind::Mapping(_) | NodeKind::Sequence(_));
                    let pos = if container { key.pos } else { value.pos };
                    self.add(value, key_index, pos);
                }
            }
        }
        let end = u32::try_from(self.out.slots.len()).unwrap_or(u32::MAX);
        if let Some(slot) = self.out.slots.get_mut(at as usize) {
            slot.end = end;
        }
        at
    }

    fn intern(&mut self, text: &'t str) -> u32 {
        // A file's keys are mostly a few field names, repeated in every
        // document: comparing with the first ones is cheaper than hashing
        // (SipHash) each key. Only the keys past them are hashed, so a file
        // of many distinct keys costs a bounded scan more per key.
        let scanned = self.out.keys.len().min(SCANNED_KEYS);
        if let Some(index) = self.out.keys[..scanned]
            .iter()
            .position(|known| **known == *text)
        {
            return u32::try_from(index).unwrap_or(NO_KEY);
        }
        if self.out.keys.len() > SCANNED_KEYS
            && let Some(&index) = self.interned.get(text)
        {
            return index;
        }
        // More distinct keys than the key bits hold (a billion) cannot
        // come from a file under the load limits; such a key is never
        // matched, as a non-scalar key.
        let Some(index) = u32::try_from(self.out.keys.len())
            .ok()
            .filter(|index| *index < NO_KEY)
        else {
            return NO_KEY;
        };
        if self.out.keys.len() >= SCANNED_KEYS {
            self.interned.insert(text, index);
        }
        self.out.keys.push(text.into());
        index
    }
}
