//! A located YAML tree built from `saphyr-parser` events under [`LoadLimits`].
//!
//! The tree is the only place that knows positions: the typed model is
//! deserialized from it, and diagnostics resolve their routes against it.
//! Aliases are expanded into copies while counting every copied node against
//! `max_nodes`, so an alias bomb stops at the budget instead of exhausting
//! memory; nesting is checked against `max_depth` as events arrive, before
//! anything deeper is built.

use std::collections::HashMap;

use compact_str::CompactString;
use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span};

use crate::limits::LoadLimits;

/// A position in the source: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
}

impl Pos {
    fn from_marker(marker: &saphyr_parser::Marker) -> Pos {
        Pos {
            line: u32::try_from(marker.line()).unwrap_or(u32::MAX),
            column: u32::try_from(marker.col().saturating_add(1)).unwrap_or(u32::MAX),
        }
    }
}

/// How a scalar was written; decides whether `8080` is a number or a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Plain (unquoted): resolved by the YAML core schema.
    Plain,
    /// Quoted or block scalar: always a string.
    Quoted,
}

/// One YAML node with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// What the node is.
    pub kind: NodeKind,
    /// Where it starts.
    pub pos: Pos,
}

/// The three YAML node kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// A scalar with its text and style.
    Scalar(CompactString, Style),
    /// A sequence.
    Sequence(Vec<Node>),
    /// A mapping, in source order.
    Mapping(Vec<(Node, Node)>),
}

impl Node {
    /// The scalar text when the node is a scalar.
    pub fn as_scalar(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar(text, _) => Some(text),
            _ => None,
        }
    }

    /// The value under `key` when the node is a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, value)| value)
    }

    /// The key node and value under `key` when the node is a mapping.
    pub fn entry(&self, key: &str) -> Option<(&Node, &Node)> {
        match &self.kind {
            NodeKind::Mapping(entries) => entries
                .iter()
                .find(|(k, _)| k.as_scalar() == Some(key))
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// Where the entry after `key`'s starts (its key's position) when the
    /// node is a mapping: the first node past `key`'s value, which bounds
    /// the lines an edit of that value may touch (incremental re-parse).
    pub fn key_after(&self, key: &str) -> Option<Pos> {
        let NodeKind::Mapping(entries) = &self.kind else {
            return None;
        };
        let at = entries
            .iter()
            .position(|(k, _)| k.as_scalar() == Some(key))?;
        entries.get(at + 1).map(|(k, _)| k.pos)
    }

    /// True for a plain null scalar (`~`, `null`, or nothing).
    pub fn is_null(&self) -> bool {
        matches!(&self.kind, NodeKind::Scalar(text, Style::Plain) if is_null_text(text))
    }
}

/// YAML core-schema null spellings.
pub fn is_null_text(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// One document of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 0-based index of the document in its file.
    pub index: usize,
    /// The root node; `None` for an empty document.
    pub root: Option<Node>,
    /// Keys that appeared twice in one mapping: (key, position of the repeat).
    pub duplicate_keys: Vec<(String, Pos)>,
}

/// Why a stream could not be read completely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeError {
    /// Not valid YAML.
    Syntax {
        /// Parser message.
        message: String,
        /// Where the parser stopped.
        pos: Pos,
    },
    /// A [`LoadLimits`] bound was hit.
    Limit {
        /// Which limit and its value.
        message: String,
        /// Where the limit was hit.
        pos: Pos,
    },
}

/// The documents read before the end or the first error, and that error.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// Complete documents, in order.
    pub documents: Vec<Document>,
    /// The error that ended the stream early, with the index of the
    /// document it happened in.
    pub error: Option<(usize, TreeError)>,
}

/// An open container. Its children so far are the tail of the builder's
/// shared [`Scratch`] from `start` on (the frames above it have moved theirs
/// out when they ended), so a container's list is allocated once, at its
/// length, when it ends: no list of its own grown by doubling and then
/// shrunk (a realloc and a copy per container).
enum Frame {
    Sequence {
        pos: Pos,
        anchor: usize,
        start: usize,
    },
    Mapping {
        pos: Pos,
        anchor: usize,
        start: usize,
        key: Option<Node>,
    },
}

/// The children of the open containers, innermost last: one stack for
/// sequence items and one for mapping entries, reused by every container
/// and every document of a stream.
#[derive(Default)]
struct Scratch {
    items: Vec<Node>,
    entries: Vec<(Node, Node)>,
}

struct Anchored {
    node: Node,
    measure: Measure,
}

struct Builder<'l> {
    limits: &'l LoadLimits,
    stack: Vec<Frame>,
    scratch: Scratch,
    /// Anchored nodes with their size and height, for alias expansion.
    anchors: HashMap<usize, Anchored>,
    nodes: usize,
    bytes: usize,
    root: Option<Node>,
    duplicate_keys: Vec<(String, Pos)>,
}

/// Size (node count), height and scalar bytes of a subtree. The recursion
/// is bounded: every tree the builder makes respects `max_depth` (aliases
/// included).
fn measure(node: &Node) -> Measure {
    match &node.kind {
        NodeKind::Scalar(text, _) => Measure {
            size: 1,
            height: 1,
            bytes: text.len(),
        },
        NodeKind::Sequence(items) => items
            .iter()
            .fold(Measure::container(), |total, item| total.add(measure(item))),
        NodeKind::Mapping(entries) => entries.iter().fold(Measure::container(), |total, (k, v)| {
            total.add(measure(k)).add(measure(v))
        }),
    }
}

#[derive(Debug, Clone, Copy)]
struct Measure {
    size: usize,
    height: usize,
    bytes: usize,
}

impl Measure {
    fn container() -> Measure {
        Measure {
            size: 1,
            height: 1,
            bytes: 0,
        }
    }

    fn add(self, child: Measure) -> Measure {
        Measure {
            size: self.size.saturating_add(child.size),
            height: self.height.max(child.height.saturating_add(1)),
            bytes: self.bytes.saturating_add(child.bytes),
        }
    }
}

impl Builder<'_> {
    fn max_depth(&self) -> usize {
        self.limits.max_depth.min(HARD_MAX_DEPTH)
    }

    fn charge(&mut self, count: usize, pos: Pos) -> Result<(), TreeError> {
        self.nodes = self.nodes.saturating_add(count);
        if self.nodes > self.limits.max_nodes {
            return Err(TreeError::Limit {
                message: format!(
                    "the file has more than {} YAML nodes (counting alias expansions); \
                     the limit is LoadLimits::max_nodes (`--max-yaml-nodes`)",
                    self.limits.max_nodes
                ),
                pos,
            });
        }
        Ok(())
    }

    fn charge_bytes(&mut self, count: usize, pos: Pos) -> Result<(), TreeError> {
        self.bytes = self.bytes.saturating_add(count);
        if self.bytes > self.limits.max_scalar_bytes {
            return Err(TreeError::Limit {
                message: format!(
                    "the file's scalars add up to more than {} bytes (counting alias expansions); \
                     the limit is LoadLimits::max_scalar_bytes (`--max-scalar-bytes`)",
                    self.limits.max_scalar_bytes
                ),
                pos,
            });
        }
        Ok(())
    }

    fn push(&mut self, frame: Frame, pos: Pos) -> Result<(), TreeError> {
        if self.stack.len() >= self.max_depth() {
            return Err(TreeError::Limit {
                message: format!(
                    "nesting is deeper than {} levels; the limit is LoadLimits::max_depth (`--max-depth`)",
                    self.max_depth()
                ),
                pos,
            });
        }
        self.charge(1, pos)?;
        self.stack.push(frame);
        Ok(())
    }

    /// Attaches a finished node to its parent, or makes it the root.
    fn complete(&mut self, node: Node, anchor: usize) {
        if anchor != 0 {
            let measure = measure(&node);
            self.anchors.insert(
                anchor,
                Anchored {
                    node: node.clone(),
                    measure,
                },
            );
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Sequence { .. }) => self.scratch.items.push(node),
            Some(Frame::Mapping { start, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => {
                    let entries = self.scratch.entries.get(*start..).unwrap_or_default();
                    let repeated = k.as_scalar().is_some_and(|name| {
                        entries
                            .iter()
                            .any(|(other, _)| other.as_scalar() == Some(name))
                    });
                    if repeated {
                        // kubectl (go-yaml) refuses repeated keys; keep the
                        // first so the model sees one value, and report it.
                        self.duplicate_keys
                            .push((k.as_scalar().unwrap_or_default().to_owned(), k.pos));
                    } else {
                        self.scratch.entries.push((k, node));
                    }
                }
            },
        }
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), TreeError> {
        let pos = Pos::from_marker(&span.start);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                self.charge(1, pos)?;
                self.charge_bytes(text.len(), pos)?;
                let forced_string = tag
                    .as_ref()
                    .is_some_and(|t| t.handle == "tag:yaml.org,2002:" && t.suffix == "str");
                let style = if style == ScalarStyle::Plain && !forced_string {
                    Style::Plain
                } else {
                    Style::Quoted
                };
                self.complete(
                    Node {
                        // Inline up to 24 bytes; a longer one on the heap,
                        // at its length (the scanner grows its buffer as
                        // it reads).
                        kind: NodeKind::Scalar(CompactString::from(text.as_ref()), style),
                        pos,
                    },
                    anchor,
                );
            }
            Event::SequenceStart(anchor, _) => self.push(
                Frame::Sequence {
                    pos,
                    anchor,
                    start: self.scratch.items.len(),
                },
                pos,
            )?,
            Event::MappingStart(anchor, _) => self.push(
                Frame::Mapping {
                    pos,
                    anchor,
                    start: self.scratch.entries.len(),
                    key: None,
                },
                pos,
            )?,
            Event::SequenceEnd | Event::MappingEnd => {
                // Containers are kept for the whole run (routes of later
                // findings resolve against them): each list is allocated at
                // its length (`Drain` is exact-sized), or a one-pair mapping
                // would keep room for four (a third of the tree's memory on
                // 65,535 small policies).
                let node = match self.stack.pop() {
                    Some(Frame::Sequence { pos, anchor, start }) => (
                        Node {
                            kind: NodeKind::Sequence(drain_from(&mut self.scratch.items, start)),
                            pos,
                        },
                        anchor,
                    ),
                    Some(Frame::Mapping {
                        pos, anchor, start, ..
                    }) => (
                        Node {
                            kind: NodeKind::Mapping({
                                let entries = drain_from(&mut self.scratch.entries, start);
                                let mut entries = apply_merge_keys(entries);
                                // Merged entries were pushed past the exact length.
                                entries.shrink_to_fit();
                                entries
                            }),
                            pos,
                        },
                        anchor,
                    ),
                    None => return Ok(()),
                };
                self.complete(node.0, node.1);
            }
            Event::Alias(id) => {
                let Some(Measure {
                    size,
                    height,
                    bytes,
                }) = self.anchors.get(&id).map(|a| a.measure)
                else {
                    return Err(TreeError::Syntax {
                        message: "alias to an unknown anchor".to_owned(),
                        pos,
                    });
                };
                // Budgets are checked before anything is copied: the copy
                // counts as `size` new nodes (this is what stops alias bombs),
                // and placed here it must not nest deeper than `max_depth`.
                // A scalar has height 1 and adds no nesting level.
                if self.stack.len().saturating_add(height) > self.max_depth().saturating_add(1) {
                    return Err(TreeError::Limit {
                        message: format!(
                            "an alias expands to nesting deeper than {} levels; the limit is LoadLimits::max_depth (`--max-depth`)",
                            self.max_depth()
                        ),
                        pos,
                    });
                }
                self.charge(size, pos)?;
                self.charge_bytes(bytes, pos)?;
                if let Some(anchored) = self.anchors.get(&id) {
                    let node = anchored.node.clone();
                    self.complete(node, 0);
                }
            }
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd => {}
        }
        Ok(())
    }
}

/// The children from `start` on, moved out of a scratch stack into a list
/// of exactly their number: `split_off` allocates the tail's length and
/// copies it in one `memcpy` (a `drain` collected moved them one by one,
/// ~300 instructions per container), and the scratch keeps its buffer.
fn drain_from<T>(scratch: &mut Vec<T>, start: usize) -> Vec<T> {
    scratch.split_off(start.min(scratch.len()))
}

/// YAML merge keys (`<<: *defaults`, `<<: [*a, *b]`), which kubectl's
/// go-yaml applies: entries of the merged mappings are added unless the
/// mapping already has the key (its own entries, then earlier sources, win).
/// A `<<` whose value is not a mapping (or a list of them) stays an ordinary
/// key, so it is reported as an unknown field.
fn apply_merge_keys(entries: Vec<(Node, Node)>) -> Vec<(Node, Node)> {
    let is_merge =
        |key: &Node| matches!(&key.kind, NodeKind::Scalar(text, Style::Plain) if text == "<<");
    let mergeable = |value: &Node| match &value.kind {
        NodeKind::Mapping(_) => true,
        NodeKind::Sequence(items) => items.iter().all(|i| matches!(i.kind, NodeKind::Mapping(_))),
        NodeKind::Scalar(..) => false,
    };
    if !entries.iter().any(|(k, v)| is_merge(k) && mergeable(v)) {
        return entries;
    }
    let mut own = Vec::with_capacity(entries.len());
    let mut sources = Vec::new();
    for (key, value) in entries {
        if is_merge(&key) && mergeable(&value) {
            match value.kind {
                NodeKind::Sequence(items) => sources.extend(items),
                _ => sources.push(value),
            }
        } else {
            own.push((key, value));
        }
    }
    for source in sources {
        if let NodeKind::Mapping(merged) = source.kind {
            for (key, value) in merged {
                let present = own.iter().any(|(existing, _)| {
                    existing.as_scalar().is_some() && existing.as_scalar() == key.as_scalar()
                });
                if !present {
                    own.push((key, value));
                }
            }
        }
    }
    own
}

/// Nesting is never allowed beyond this, whatever `LoadLimits::max_depth`
/// says: the typed model is deserialized recursively and must not exhaust
/// the thread's stack.
pub const HARD_MAX_DEPTH: usize = 512;

fn syntax_error(error: &ScanError) -> TreeError {
    if error.info() == "recursion limit exceeded" {
        // The scanner reads flow collections ahead of the events we count,
        // so for `[[[[...` its own nesting bound can trip before ours.
        return TreeError::Limit {
            message: "nesting is deeper than the YAML parser accepts for flow collections \
                      (its recursion limit, below LoadLimits::max_depth)"
                .to_owned(),
            pos: Pos::from_marker(error.marker()),
        };
    }
    TreeError::Syntax {
        message: error.info().to_owned(),
        pos: Pos::from_marker(error.marker()),
    }
}

/// Parses a YAML stream into located documents, stopping at the first syntax
/// error or exceeded limit (documents finished before it are returned).
pub fn parse_stream(text: &str, limits: &LoadLimits) -> Stream {
    let mut parser = Parser::new_from_str(text);
    let mut documents = Vec::new();
    let mut builder: Option<Builder<'_>> = None;
    let mut scratch = Scratch::default();
    let mut nodes_used = 0usize;
    let mut bytes_used = 0usize;
    while let Some(next) = parser.next_event() {
        let (event, span) = match next {
            Ok(pair) => pair,
            Err(error) => {
                return Stream {
                    error: Some((documents.len(), syntax_error(&error))),
                    documents,
                };
            }
        };
        match event {
            Event::DocumentStart(_) => {
                if documents.len() >= limits.max_documents {
                    let error = TreeError::Limit {
                        message: format!(
                            "the file has more than {} documents; the limit is LoadLimits::max_documents (`--max-documents`)",
                            limits.max_documents
                        ),
                        pos: Pos::from_marker(&span.start),
                    };
                    return Stream {
                        error: Some((documents.len(), error)),
                        documents,
                    };
                }
                builder = Some(Builder {
                    limits,
                    stack: Vec::new(),
                    scratch: std::mem::take(&mut scratch),
                    anchors: HashMap::new(),
                    // The budgets are per file: carry what earlier documents used.
                    nodes: nodes_used,
                    bytes: bytes_used,
                    root: None,
                    duplicate_keys: Vec::new(),
                });
            }
            Event::DocumentEnd => {
                if let Some(done) = builder.take() {
                    nodes_used = done.nodes;
                    scratch = done.scratch;
                    // Empty after a complete document; cleared should a
                    // container have been left open.
                    scratch.items.clear();
                    scratch.entries.clear();
                    bytes_used = done.bytes;
                    let root = done.root.filter(|root| !root.is_null());
                    documents.push(Document {
                        index: documents.len(),
                        root,
                        duplicate_keys: done.duplicate_keys,
                    });
                }
            }
            Event::StreamEnd => break,
            other => {
                if let Some(current) = builder.as_mut()
                    && let Err(error) = current.event(other, span)
                {
                    return Stream {
                        error: Some((documents.len(), error)),
                        documents,
                    };
                }
            }
        }
    }
    Stream {
        documents,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_list_has_its_length_and_the_scratch_keeps_its_buffer() {
        for start in [0, 1, 5, 8] {
            let mut scratch: Vec<u32> = Vec::with_capacity(64);
            scratch.extend(0..8);
            let tail = drain_from(&mut scratch, start);
            assert_eq!(tail, (start.min(8) as u32..8).collect::<Vec<_>>());
            assert_eq!(tail.capacity(), tail.len(), "start {start}");
            assert_eq!(scratch.len(), start.min(8));
            assert_eq!(scratch.capacity(), 64, "start {start}");
        }
    }

    #[test]
    fn nested_containers_keep_their_own_children_and_repeated_keys() {
        let text = "a: [1, {b: 2, c: [3, 4]}, 5]\nd: {e: {f: 6}}\na: 7\n";
        let stream = parse_stream(text, &LoadLimits::default());
        let document = &stream.documents[0];
        let root = document.root.as_ref().unwrap();
        let NodeKind::Mapping(entries) = &root.kind else {
            panic!("a mapping")
        };
        assert_eq!(entries.len(), 2);
        assert_eq!(entries.capacity(), 2);
        let NodeKind::Sequence(items) = &root.get("a").unwrap().kind else {
            panic!("a sequence")
        };
        assert_eq!(items.len(), 3);
        assert_eq!(items[1].get("b").unwrap().as_scalar(), Some("2"));
        let NodeKind::Sequence(inner) = &items[1].get("c").unwrap().kind else {
            panic!("a sequence")
        };
        assert_eq!(inner.len(), 2);
        assert_eq!(items[2].as_scalar(), Some("5"));
        let f = root.get("d").unwrap().get("e").unwrap().get("f").unwrap();
        assert_eq!(f.as_scalar(), Some("6"));
        assert_eq!(
            document.duplicate_keys,
            vec![("a".to_owned(), Pos { line: 3, column: 1 })]
        );
    }

    /// Every scalar of up to 24 bytes lives in its node, not in a heap
    /// block: a rule's keys and values were most of a large text's blocks,
    /// and freeing them left glibc a sort of ~100,000 chunks in whatever
    /// call came next (BENCHMARKS.md, session 23). Longer ones keep their
    /// text whole, in any style.
    #[test]
    fn short_scalars_are_kept_inline_and_long_ones_whole() {
        let long = "x".repeat(25);
        let text = format!(
            "- fromEndpoints:\n  - matchLabels:\n      'k8s:io.kubernetes.pod.namespace': \"kube-system\"\n      role: {long}\n    toPorts: [{{ports: [{{port: \"443\", protocol: TCP}}]}}]\n"
        );
        let stream = parse_stream(&text, &LoadLimits::default());
        assert!(stream.error.is_none());
        let mut scalars = Vec::new();
        let mut stack = vec![stream.documents[0].root.as_ref().unwrap()];
        while let Some(node) = stack.pop() {
            match &node.kind {
                NodeKind::Scalar(text, _) => scalars.push(text),
                NodeKind::Sequence(items) => stack.extend(items),
                NodeKind::Mapping(entries) => {
                    stack.extend(entries.iter().flat_map(|(k, v)| [k, v]));
                }
            }
        }
        assert_eq!(scalars.len(), 12);
        for text in &scalars {
            assert_eq!(text.is_heap_allocated(), text.len() > 24, "{text:?}");
        }
        // The quoted 32-byte key and the 25-byte value, whole.
        let long_ones: Vec<&str> = scalars
            .iter()
            .filter(|t| t.is_heap_allocated())
            .map(|t| t.as_str())
            .collect();
        assert_eq!(
            long_ones,
            [long.as_str(), "k8s:io.kubernetes.pod.namespace"]
        );
    }
}
