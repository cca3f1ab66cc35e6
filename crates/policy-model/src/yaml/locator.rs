//! A compact stand-in for a file's located trees: only what resolving a
//! route to a line and column reads.
//!
//! A [`Node`] tree keeps every scalar's text in its own allocation and a
//! mapping entry as two full nodes; for the 65,535 one-rule CNPs of the CIDR
//! benchmark the trees were most of `porin compile`'s memory, although the
//! compile reads them only to locate findings. A [`Locator`] keeps, per
//! node, its position, its kind and its children (mapping keys interned
//! once per file, scalar values dropped), in two flat vectors: no allocation
//! per node, about a third of the bytes.

use std::collections::HashMap;

use super::tree::{Node, NodeKind, Pos};

/// No key: a sequence item, or a mapping key that is not a scalar (which
/// never matches a route's key, as in [`Node::entry`]).
const NO_KEY: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Scalar,
    Sequence,
    Mapping,
}

/// One node: where it starts, its kind and its children
/// (`entries[first..first + len]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    pos: Pos,
    kind: Kind,
    first: u32,
    len: u32,
}

/// One child: its key (an index into `keys`, or [`NO_KEY`]), where the key
/// is (the item's own position for a sequence item) and the child's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    key: u32,
    key_pos: Pos,
    node: u32,
}

/// The positions of one file's documents, by document index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locator {
    slots: Vec<Slot>,
    entries: Vec<Entry>,
    keys: Vec<Box<str>>,
    roots: Vec<Option<u32>>,
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
            let slot = root.as_ref().map(|node| builder.add(node));
            builder.out.roots.push(slot);
        }
        let mut out = builder.out;
        out.slots.shrink_to_fit();
        out.entries.shrink_to_fit();
        out.keys.shrink_to_fit();
        out.roots.shrink_to_fit();
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
    fn slot(&self) -> &'l Slot {
        &self.locator.slots[self.slot as usize]
    }

    /// Where the node starts.
    pub fn pos(&self) -> Pos {
        self.slot().pos
    }

    /// True for a mapping or a sequence.
    pub fn is_container(&self) -> bool {
        self.slot().kind != Kind::Scalar
    }

    /// The child a step names, with where its key is (the item itself for
    /// a sequence): the first entry with that key, as [`Node::entry`].
    pub fn child(&self, step: Step<'_>) -> Option<(Pos, LocatedNode<'l>)> {
        let slot = self.slot();
        let first = slot.first as usize;
        let entries = self.locator.entries.get(first..first + slot.len as usize)?;
        let entry = match (step, slot.kind) {
            (Step::Key(key), Kind::Mapping) => entries.iter().find(|e| {
                e.key != NO_KEY && self.locator.keys.get(e.key as usize).map(|k| &**k) == Some(key)
            })?,
            (Step::Index(index), Kind::Sequence) => entries.get(index)?,
            _ => return None,
        };
        Some((
            entry.key_pos,
            LocatedNode {
                locator: self.locator,
                slot: entry.node,
            },
        ))
    }
}

struct Builder<'t> {
    out: Locator,
    interned: HashMap<&'t str, u32>,
}

impl<'t> Builder<'t> {
    /// Adds `node` and everything under it; returns its slot. Children are
    /// laid out after their parent's entries are reserved, so each node's
    /// entries are contiguous.
    fn add(&mut self, node: &'t Node) -> u32 {
        let at = self.push_slot(node);
        let first = self.out.entries.len();
        match &node.kind {
            NodeKind::Scalar(..) => {}
            NodeKind::Sequence(items) => {
                for item in items {
                    self.out.entries.push(Entry {
                        key: NO_KEY,
                        key_pos: item.pos,
                        node: 0,
                    });
                }
                for (offset, item) in items.iter().enumerate() {
                    let child = self.add(item);
                    self.out.entries[first + offset].node = child;
                }
            }
            NodeKind::Mapping(pairs) => {
                for (key, _) in pairs {
                    let key_index = match key.as_scalar() {
                        Some(text) => self.intern(text),
                        None => NO_KEY,
                    };
                    self.out.entries.push(Entry {
                        key: key_index,
                        key_pos: key.pos,
                        node: 0,
                    });
                }
                for (offset, (_, value)) in pairs.iter().enumerate() {
                    let child = self.add(value);
                    self.out.entries[first + offset].node = child;
                }
            }
        }
        let len = entries_of(node);
        let slot = &mut self.out.slots[at as usize];
        slot.first = u32::try_from(first).unwrap_or(u32::MAX);
        slot.len = u32::try_from(len).unwrap_or(0);
        at
    }

    fn push_slot(&mut self, node: &Node) -> u32 {
        let kind = match node.kind {
            NodeKind::Scalar(..) => Kind::Scalar,
            NodeKind::Sequence(_) => Kind::Sequence,
            NodeKind::Mapping(_) => Kind::Mapping,
        };
        let at = u32::try_from(self.out.slots.len()).unwrap_or(u32::MAX);
        self.out.slots.push(Slot {
            pos: node.pos,
            kind,
            first: 0,
            len: 0,
        });
        at
    }

    fn intern(&mut self, text: &'t str) -> u32 {
        if let Some(&index) = self.interned.get(text) {
            return index;
        }
        let index = u32::try_from(self.out.keys.len()).unwrap_or(NO_KEY);
        self.out.keys.push(text.into());
        self.interned.insert(text, index);
        index
    }
}

/// How many entries a node has directly.
fn entries_of(node: &Node) -> usize {
    match &node.kind {
        NodeKind::Scalar(..) => 0,
        NodeKind::Sequence(items) => items.len(),
        NodeKind::Mapping(pairs) => pairs.len(),
    }
}
