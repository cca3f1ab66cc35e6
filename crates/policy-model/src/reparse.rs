//! Incremental re-parse: a text edited inside one rule item, loaded by
//! re-parsing only that item.
//!
//! An agent changes one rule of a large policy (a port of one `ingress`
//! item of a 4,096-rule CNP) and hands over the whole new text. Loading it
//! again ([`load_str`]) costs tens of milliseconds; the edit touches one
//! item. [`plan`] finds the changed bytes (common prefix and suffix), the
//! one block-sequence item of a CNP/CCNP rule section (`spec.ingress[3]`,
//! `specs[1].egressDeny[0]`, inside a `List`'s item or not, in any document
//! of a stream) whose text holds them, parses that item's lines alone,
//! deserializes and validates the item alone, and returns an [`Edit`]:
//! [`Edit::apply`] swaps the item's tree node and model into the previous
//! outcome, moves the positions after it (trees, diagnostics, versioned
//! kinds) by the lines the edit added or removed, and swaps the text.
//!
//! A rule item inserted or removed ([`EditKind::Insert`],
//! [`EditKind::Remove`]) is planned the same way when the two texts differ
//! by one block of whole lines that is exactly one entry of a section
//! (`plan_move`): an inserted entry is parsed and checked alone as a
//! replaced item is, a removed one is compared with the entry's node, and
//! [`Edit::apply`] inserts or removes the node and the model. The first
//! entry of a section too: a block sequence starts at its first `-` (at
//! its key's indentation, at its first entry's content), so an entry
//! inserted first starts where the sequence does and the sequence keeps its
//! position (the shift would move it), when the old and the new first
//! entry start their content on the same column. Not a section's only
//! entry, nor a new section, nor an entry whose first line is a bare `-`.
//!
//! The result equals [`load_str`] of the new text (followed by
//! [`LoadOutcome::apply_target`] when a target is given), field by field;
//! the property tests (`tests/model/reparse.rs`) and the fuzz target
//! `reparse_edit` check that. Whenever that cannot be shown from what is
//! cheap to check, [`plan`] answers `None` and the caller loads in full:
//!
//! - The item is a block-sequence entry whose first line is indentation,
//!   one `-` and blanks, then the item; the edit starts after that marker
//!   and ends before the line of the next node after the item (the next
//!   item, the next key of the rule, ...; the end of the text after the
//!   last node of the last document). Every other line of the new item's
//!   text is blank, a comment, or indented deeper than the `-`: then the
//!   parser, which reads block structure from indentation, reads the same
//!   lines as one item in the file as it does alone, and everything before
//!   and after it as before. The item is parsed alone from its whole lines
//!   (so columns are the file's) with the depth the file leaves it, must
//!   give exactly one item at the old item's position, and its lines are
//!   moved to the file's.
//! - The file has no anchor and no merge key anywhere ([`Budget::of`]:
//!   an alias of an ancestor would copy the old item elsewhere), and
//!   neither item's text holds what reaches beyond the item or that this
//!   check does not model: anchors, aliases, tags, merge keys, block
//!   scalars, directives, reserved indicators, complex keys, tabs, CR.
//! - No diagnostic in the edited document before, none for the new item
//!   after (deserialization, unknown fields, Cilium's item checks, the
//!   target's version rows), and none of the file-wide kinds anywhere
//!   (syntax, limits, duplicate keys, duplicate policies, whose messages
//!   quote lines). The item checks are the ones the whole validation
//!   makes under that item (`validate::validate_cilium_item`); a rule's
//!   other checks read only its frame and whether its sections are empty,
//!   which one item replacing another leaves as they were.
//! - The file's node and scalar-byte budgets ([`Budget`]) stay within the
//!   limits with the new item instead of the old.

use serde::Deserialize;

use crate::codes;
use crate::diagnostic::Location;
use crate::limits::LoadLimits;
use crate::loader::{LoadOutcome, LoadedDocument, load_str};
use crate::model::{
    CiliumNetworkPolicy, EgressDenyRule, EgressRule, IngressDenyRule, IngressRule, ObjectMeta,
    PolicyDocument, Rule, RuleItem, RuleSection,
};
use crate::route::Route;
use crate::version::Target;
use crate::yaml::de::{Ctx, NodeDeserializer};
use crate::yaml::tree::{self, HARD_MAX_DEPTH, Node, NodeKind, Pos};

/// Upper bounds of what the parse of a file charged against
/// [`LoadLimits::max_nodes`] and [`LoadLimits::max_scalar_bytes`]: the
/// tree's nodes and scalar bytes, plus one node and four bytes per
/// document for a null root the tree leaves out. The parser charges
/// exactly the tree's nodes otherwise (alias copies are in the tree), so
/// this holds unless a merge key or a repeated key dropped nodes it
/// charged; such files have no budget ([`Budget::of`] is `None`), nor
/// have files with an anchor (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    nodes: usize,
    bytes: usize,
}

impl Budget {
    /// The budget of `name`'s text as `outcome` (a load of that one text)
    /// holds it; `None` when it cannot be bounded (see [`Budget`]).
    pub fn of(outcome: &LoadOutcome, name: &str) -> Option<Budget> {
        let [tree] = outcome.trees.as_slice() else {
            return None;
        };
        let text = outcome.sources.get(name)?;
        // No anchor anywhere (so no alias either: one to an unknown
        // anchor is a syntax error): a copy of the edited item elsewhere
        // (an alias of an ancestor) would not follow the edit. Edits keep
        // it so (their items hold no `&`).
        if tree.file != name
            || text.contains("<<")
            || text.contains('&')
            || outcome
                .diagnostics
                .iter()
                .any(|d| d.code == codes::DUPLICATE_KEY.code)
        {
            return None;
        }
        let mut total = Size::default();
        for root in tree.roots.iter().flatten() {
            total = total.add(size(root));
        }
        let documents = tree.roots.len();
        Some(Budget {
            nodes: total.nodes.checked_add(documents)?,
            bytes: total.bytes.checked_add(documents.checked_mul(4)?)?,
        })
    }
}

/// Nodes and scalar bytes of a subtree.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    nodes: usize,
    bytes: usize,
}

impl Size {
    fn add(self, other: Size) -> Size {
        Size {
            nodes: self.nodes.saturating_add(other.nodes),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }
}

/// The recursion is bounded: trees respect the depth limits.
fn size(node: &Node) -> Size {
    let own = Size { nodes: 1, bytes: 0 };
    match &node.kind {
        NodeKind::Scalar(text, _) => Size {
            nodes: 1,
            bytes: text.len(),
        },
        NodeKind::Sequence(items) => items.iter().fold(own, |total, i| total.add(size(i))),
        NodeKind::Mapping(entries) => entries
            .iter()
            .fold(own, |total, (k, v)| total.add(size(k)).add(size(v))),
    }
}

/// Which rule item an [`Edit`] replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemAt {
    /// Index in [`LoadOutcome::documents`].
    pub document: usize,
    /// The rule, in [`PolicyDocument::cilium_rules`] order.
    pub spec: usize,
    /// The section.
    pub section: RuleSection,
    /// The item's index in the section.
    pub index: usize,
}

/// One typed rule item.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ItemModel {
    Ingress(IngressRule),
    IngressDeny(IngressDenyRule),
    Egress(EgressRule),
    EgressDeny(EgressDenyRule),
}

impl ItemModel {
    fn view(&self) -> RuleItem<'_> {
        match self {
            ItemModel::Ingress(i) => RuleItem::ingress(i),
            ItemModel::IngressDeny(i) => RuleItem::ingress_deny(i),
            ItemModel::Egress(i) => RuleItem::egress(i),
            ItemModel::EgressDeny(i) => RuleItem::egress_deny(i),
        }
    }

    /// A rule with only this item (and nothing else), for the target's
    /// version rows.
    fn alone(&self) -> Rule {
        let mut rule = Rule::default();
        match self.clone() {
            ItemModel::Ingress(i) => rule.ingress = Some(vec![i]),
            ItemModel::IngressDeny(i) => rule.ingress_deny = Some(vec![i]),
            ItemModel::Egress(i) => rule.egress = Some(vec![i]),
            ItemModel::EgressDeny(i) => rule.egress_deny = Some(vec![i]),
        }
        rule
    }

    fn deserialize(section: RuleSection, node: &Node, route: &Route) -> Option<ItemModel> {
        let ctx = Ctx::default();
        let de = NodeDeserializer::new(node, route, &ctx);
        let model = match section {
            RuleSection::Ingress => ItemModel::Ingress(IngressRule::deserialize(de).ok()?),
            RuleSection::IngressDeny => {
                ItemModel::IngressDeny(IngressDenyRule::deserialize(de).ok()?)
            }
            RuleSection::Egress => ItemModel::Egress(EgressRule::deserialize(de).ok()?),
            RuleSection::EgressDeny => ItemModel::EgressDeny(EgressDenyRule::deserialize(de).ok()?),
        };
        ctx.unknown_fields.borrow().is_empty().then_some(model)
    }

    /// Puts `self` at `index` of its section of `rule`, giving the item
    /// that was there; `None` (nothing changed) when there is no such
    /// item.
    fn swap_into(self, rule: &mut Rule, index: usize) -> Option<ItemModel> {
        fn swap<T>(list: &mut Option<Vec<T>>, index: usize, item: T) -> Option<T> {
            let slot = list.as_mut()?.get_mut(index)?;
            Some(std::mem::replace(slot, item))
        }
        Some(match self {
            ItemModel::Ingress(i) => ItemModel::Ingress(swap(&mut rule.ingress, index, i)?),
            ItemModel::IngressDeny(i) => {
                ItemModel::IngressDeny(swap(&mut rule.ingress_deny, index, i)?)
            }
            ItemModel::Egress(i) => ItemModel::Egress(swap(&mut rule.egress, index, i)?),
            ItemModel::EgressDeny(i) => {
                ItemModel::EgressDeny(swap(&mut rule.egress_deny, index, i)?)
            }
        })
    }

    /// Puts `self` at `index` of its section of `rule` (the items from
    /// `index` on move one place); `None` (nothing changed) when the
    /// section has no items or fewer than `index`.
    fn insert_into(self, rule: &mut Rule, index: usize) -> Option<()> {
        fn insert<T>(list: &mut Option<Vec<T>>, index: usize, item: T) -> Option<()> {
            let list = list
                .as_mut()
                .filter(|l| index <= l.len() && !l.is_empty())?;
            list.insert(index, item);
            Some(())
        }
        match self {
            ItemModel::Ingress(i) => insert(&mut rule.ingress, index, i),
            ItemModel::IngressDeny(i) => insert(&mut rule.ingress_deny, index, i),
            ItemModel::Egress(i) => insert(&mut rule.egress, index, i),
            ItemModel::EgressDeny(i) => insert(&mut rule.egress_deny, index, i),
        }
    }

    /// Takes item `index` out of `section` of `rule`; `None` (nothing
    /// changed) when that would leave the section empty or there is no
    /// such item.
    fn remove_from(rule: &mut Rule, section: RuleSection, index: usize) -> Option<ItemModel> {
        fn remove<T>(list: &mut Option<Vec<T>>, index: usize) -> Option<T> {
            let list = list.as_mut().filter(|l| index < l.len() && l.len() > 1)?;
            Some(list.remove(index))
        }
        Some(match section {
            RuleSection::Ingress => ItemModel::Ingress(remove(&mut rule.ingress, index)?),
            RuleSection::IngressDeny => {
                ItemModel::IngressDeny(remove(&mut rule.ingress_deny, index)?)
            }
            RuleSection::Egress => ItemModel::Egress(remove(&mut rule.egress, index)?),
            RuleSection::EgressDeny => ItemModel::EgressDeny(remove(&mut rule.egress_deny, index)?),
        })
    }

    fn section(&self) -> RuleSection {
        match self {
            ItemModel::Ingress(_) => RuleSection::Ingress,
            ItemModel::IngressDeny(_) => RuleSection::IngressDeny,
            ItemModel::Egress(_) => RuleSection::Egress,
            ItemModel::EgressDeny(_) => RuleSection::EgressDeny,
        }
    }
}

/// What an [`Edit`] does to its item ([`Edit::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditKind {
    /// The item at [`Edit::at`] replaced by the edited one.
    Replace,
    /// A new item put at [`Edit::at`] (the items from there on move one
    /// place).
    Insert,
    /// The item at [`Edit::at`] taken out (the section keeps at least one
    /// item).
    Remove,
}

/// A planned in-place load of an edited text ([`plan`]); [`Edit::apply`]
/// makes it and gives back its inverse.
#[derive(Debug, Clone)]
pub struct Edit {
    file: String,
    /// The text after the edit.
    text: String,
    at: ItemAt,
    /// Where the item's tree node is: YAML document, `List` item, rule
    /// (`None`: `spec`; `Some(i)`: `specs[i]`).
    yaml_document: usize,
    list_item: Option<usize>,
    in_specs: Option<usize>,
    /// The new item's node and model (`None` for [`EditKind::Remove`]).
    new: Option<(Node, ItemModel)>,
    kind: EditKind,
    /// Positions on this line and later (before the edit) move by `lines`.
    from_line: u32,
    lines: i64,
    before: Budget,
    after: Budget,
}

impl Edit {
    /// The item the edit replaces, inserts (its index after the edit) or
    /// removes (its index before).
    pub fn at(&self) -> ItemAt {
        self.at
    }

    /// Whether the edit replaces, inserts or removes its item.
    pub fn kind(&self) -> EditKind {
        self.kind
    }

    /// Whether positions after the item move (the edit adds or removes
    /// lines).
    pub fn moves_lines(&self) -> bool {
        self.lines != 0
    }

    /// How the edit moves lines, when it does: every position on line
    /// `from` or later (before the edit) moves by `by` lines, as
    /// [`Edit::apply`] moves the tree's and the diagnostics'; the edited
    /// item's own positions are the new item's.
    pub fn shift(&self) -> Option<(u32, i64)> {
        (self.lines != 0).then_some((self.from_line, self.lines))
    }

    /// The file's budget after the edit.
    pub fn budget(&self) -> Budget {
        self.after
    }

    /// Makes the edit in `outcome` (the outcome it was planned against)
    /// and returns its inverse (applied to the result, it gives `outcome`
    /// back exactly). `None`, with `outcome` unchanged, when `outcome` has
    /// no such item.
    pub fn apply(self, outcome: &mut LoadOutcome) -> Option<Edit> {
        let (inverse, shift) = self.apply_deferred(outcome)?;
        shift.run(outcome);
        Some(inverse)
    }

    /// [`Edit::apply`] without the move of the later lines' positions,
    /// which the returned [`LineShift`] makes when run on the same
    /// outcome. In between, the outcome holds the new text, documents and
    /// item, but the positions after the item are still the old ones: the
    /// new item and everything before it read as after the edit, nothing
    /// after it does. A caller can run the shift (linear in the nodes
    /// after the item: most of a front insertion into a long text) beside
    /// its own work on other data (`porin_compiler::session`).
    pub fn apply_deferred(self, outcome: &mut LoadOutcome) -> Option<(Edit, LineShift)> {
        let Edit {
            file,
            text,
            at,
            yaml_document,
            list_item,
            in_specs,
            new,
            kind,
            from_line,
            lines,
            before,
            after,
        } = self;
        let LoadOutcome {
            trees,
            documents,
            sources,
            ..
        } = &mut *outcome;
        let sequence = file_section_mut(
            trees,
            &file,
            (yaml_document, list_item, in_specs),
            at.section,
        )?;
        let sequence_pos = sequence.pos;
        let NodeKind::Sequence(nodes) = &mut sequence.kind else {
            return None;
        };
        let rule = documents
            .get_mut(at.document)
            .filter(|d| d.file == file && d.index == yaml_document && d.item == list_item)
            .and_then(|d| rule_of_mut(&mut d.doc, at.spec))?;
        // Every slot is there before anything changes.
        let len = section_len(rule, at.section);
        let fits = match kind {
            EditKind::Replace => at.index < len,
            EditKind::Insert => at.index <= len && len > 0,
            EditKind::Remove => at.index < len && len > 1,
        };
        if !fits
            || nodes.len() != len
            || new
                .as_ref()
                .is_some_and(|(_, item)| item.section() != at.section)
            || new.is_none() != (kind == EditKind::Remove)
            || sources.get(&file).is_none()
        {
            return None;
        }
        let old = match (kind, new) {
            (EditKind::Replace, Some((node, item))) => {
                let old_item = item.swap_into(rule, at.index)?;
                let old_node = std::mem::replace(&mut nodes[at.index], node);
                Some((old_node, old_item))
            }
            (EditKind::Insert, Some((node, item))) => {
                item.insert_into(rule, at.index)?;
                nodes.insert(at.index, node);
                None
            }
            (EditKind::Remove, None) => {
                let old_item = ItemModel::remove_from(rule, at.section, at.index)?;
                Some((nodes.remove(at.index), old_item))
            }
            _ => return None,
        };
        // The new item's positions are final: the shift passes it by.
        let placed = match kind {
            EditKind::Remove => 0,
            _ => std::ptr::from_ref(&nodes[at.index]) as usize,
        };
        // A block sequence's position is its first `-` (or, at its key's
        // indentation, its first entry's content, on the same column for
        // the old and the new first entry: `move_at`): an entry inserted
        // first starts where the sequence does, which stays (the shift
        // below moves every position on the entry's line; a removed first
        // entry's lines come after the sequence's start, which the shift
        // leaves as it is).
        let sequence_at = (kind == EditKind::Insert && at.index == 0).then_some(sequence_pos);
        let old_text = sources.replace(&file, text)?;
        let line_shift = LineShift {
            file: (lines != 0).then(|| file.clone()),
            from: from_line,
            lines,
            placed,
            sequence: sequence_at
                .map(|pos| (pos, (yaml_document, list_item, in_specs), at.section)),
        };
        let inverse = match kind {
            EditKind::Replace => EditKind::Replace,
            EditKind::Insert => EditKind::Remove,
            EditKind::Remove => EditKind::Insert,
        };
        let inverse = Edit {
            file,
            text: old_text,
            at,
            yaml_document,
            list_item,
            in_specs,
            new: old,
            kind: inverse,
            from_line: shifted(from_line, lines),
            lines: -lines,
            before: after,
            after: before,
        };
        Some((inverse, line_shift))
    }
}

/// Where a rule's node is in a file: YAML document, `List` item, rule
/// (`None`: `spec`; `Some(i)`: `specs[i]`).
type RulePlace = (usize, Option<usize>, Option<usize>);

/// The part of an edit [`Edit::apply_deferred`] leaves for later: every
/// position of the file on line `from` or later (before the edit) moves by
/// `lines`, but the new item's; then the section's own position is put
/// back when the item went first (its `-` is where the section starts).
#[derive(Debug)]
#[must_use = "the outcome's later positions are the old ones until the shift runs"]
pub struct LineShift {
    /// The file, when lines move at all.
    file: Option<String>,
    from: u32,
    lines: i64,
    /// The new item's node, by address (compared, never read): its
    /// positions are final. Zero for a removal.
    placed: usize,
    /// The section's position to put back: (position, where the rule is,
    /// section).
    sequence: Option<(Pos, RulePlace, RuleSection)>,
}

impl LineShift {
    /// Whether running it changes anything.
    pub fn is_empty(&self) -> bool {
        self.file.is_none()
    }

    /// Moves the positions, on the outcome [`Edit::apply_deferred`]
    /// edited (and nothing else changed since).
    pub fn run(self, outcome: &mut LoadOutcome) {
        let LineShift {
            file,
            from,
            lines,
            placed,
            sequence,
        } = self;
        let Some(file) = file else {
            return;
        };
        shift(outcome, &file, from, lines, placed);
        if let Some((pos, rule, section)) = sequence
            && let Some(node) = file_section_mut(&mut outcome.trees, &file, rule, section)
        {
            node.pos = pos;
        }
    }
}

fn shifted(line: u32, lines: i64) -> u32 {
    u32::try_from((i64::from(line) + lines).max(0)).unwrap_or(u32::MAX)
}

/// Whether `n` is the node at address `skip` (zero: none is).
fn is_node(n: &Node, skip: usize) -> bool {
    std::ptr::from_ref(n) as usize == skip
}

/// Moves every position of `file` on line `from` or later by `lines`.
/// (`skip`: a node whose subtree keeps its positions, by address.)
fn shift(outcome: &mut LoadOutcome, file: &str, from: u32, lines: i64, skip: usize) {
    let location = |l: &mut Location| {
        if l.file == file && l.line >= from {
            l.line = shifted(l.line, lines);
        }
    };
    for tree in outcome.trees.iter_mut().filter(|t| t.file == file) {
        for root in tree.roots.iter_mut().flatten() {
            shift_tree(root, from, lines, skip);
        }
    }
    for diagnostic in &mut outcome.diagnostics {
        if let Some(primary) = &mut diagnostic.primary {
            location(primary);
        }
        for (related, _) in &mut diagnostic.related {
            location(related);
        }
    }
    for (kind, _) in &mut outcome.versioned_kinds {
        location(kind);
    }
}

fn shift_tree(n: &mut Node, from: u32, lines: i64, skip: usize) {
    if is_node(n, skip) {
        return;
    }
    if n.pos.line >= from {
        // The node lies wholly after the edit's start (a subtree's nodes
        // start where it does or later): every node of it moves, without
        // the look at siblings below (most of a front insertion's nodes).
        shift_subtree(n, from, lines, skip);
        return;
    }
    // A child whose next sibling starts before line `from` lies wholly
    // before it (a subtree's text ends where the next sibling's starts;
    // trees edited in place have no alias copies): it is not walked, so an
    // edit in the middle of a large text walks the nodes after it only.
    match &mut n.kind {
        NodeKind::Scalar(..) => {}
        NodeKind::Sequence(items) => {
            for i in 0..items.len() {
                if items.get(i + 1).is_some_and(|next| next.pos.line < from) {
                    continue;
                }
                shift_tree(&mut items[i], from, lines, skip);
            }
        }
        NodeKind::Mapping(entries) => {
            for i in 0..entries.len() {
                if entries
                    .get(i + 1)
                    .is_some_and(|(next, _)| next.pos.line < from)
                {
                    continue;
                }
                let (k, v) = &mut entries[i];
                shift_tree(k, from, lines, skip);
                shift_tree(v, from, lines, skip);
            }
        }
    }
}

/// [`shift_tree`] of a node on line `from` or later: each node is still
/// compared with `from` (so the result does not rest on a subtree's
/// nodes starting after its own start), but no sibling is looked at.
fn shift_subtree(n: &mut Node, from: u32, lines: i64, skip: usize) {
    if is_node(n, skip) {
        return;
    }
    if n.pos.line >= from {
        n.pos.line = shifted(n.pos.line, lines);
    }
    match &mut n.kind {
        NodeKind::Scalar(..) => {}
        NodeKind::Sequence(items) => {
            for item in items {
                shift_child(item, from, lines, skip);
            }
        }
        NodeKind::Mapping(entries) => {
            for (k, v) in entries {
                shift_child(k, from, lines, skip);
                shift_child(v, from, lines, skip);
            }
        }
    }
}

/// [`shift_subtree`] of a child, a scalar (most nodes: every key) moved
/// here without a call.
#[inline(always)]
fn shift_child(n: &mut Node, from: u32, lines: i64, skip: usize) {
    if matches!(n.kind, NodeKind::Scalar(..)) && !is_node(n, skip) {
        if n.pos.line >= from {
            n.pos.line = shifted(n.pos.line, lines);
        }
    } else {
        shift_subtree(n, from, lines, skip);
    }
}

fn rule_of_mut(doc: &mut PolicyDocument, spec: usize) -> Option<&mut Rule> {
    let (one, many) = match doc {
        PolicyDocument::CiliumNetworkPolicy(p) => (&mut p.spec, &mut p.specs),
        PolicyDocument::CiliumClusterwideNetworkPolicy(p) => (&mut p.spec, &mut p.specs),
        _ => return None,
    };
    let skip = usize::from(one.is_some());
    if let (Some(rule), 0) = (one.as_mut(), spec) {
        return Some(rule);
    }
    many.as_mut()?.get_mut(spec.checked_sub(skip)?)
}

fn section_len(rule: &Rule, section: RuleSection) -> usize {
    match section {
        RuleSection::Ingress => rule.ingress.as_ref().map_or(0, Vec::len),
        RuleSection::IngressDeny => rule.ingress_deny.as_ref().map_or(0, Vec::len),
        RuleSection::Egress => rule.egress.as_ref().map_or(0, Vec::len),
        RuleSection::EgressDeny => rule.egress_deny.as_ref().map_or(0, Vec::len),
    }
}

fn sequence(node: &Node) -> Option<&[Node]> {
    match &node.kind {
        NodeKind::Sequence(items) => Some(items),
        _ => None,
    }
}

/// The value under `key` (the first entry with it, as [`Node::entry`]).
fn get_mut<'n>(node: &'n mut Node, key: &str) -> Option<&'n mut Node> {
    match &mut node.kind {
        NodeKind::Mapping(entries) => entries
            .iter_mut()
            .find(|(k, _)| k.as_scalar() == Some(key))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn index_mut(node: &mut Node, index: usize) -> Option<&mut Node> {
    match &mut node.kind {
        NodeKind::Sequence(items) => items.get_mut(index),
        _ => None,
    }
}

/// The object of a document: the root, or a `List`'s item.
fn object(root: &Node, list_item: Option<usize>) -> Option<&Node> {
    match list_item {
        Some(i) => sequence(root.get("items")?)?.get(i),
        None => Some(root),
    }
}

/// The rule's node: `spec` or `specs[i]`.
fn rule_node(object: &Node, in_specs: Option<usize>) -> Option<&Node> {
    match in_specs {
        Some(i) => sequence(object.get("specs")?)?.get(i),
        None => object.get("spec"),
    }
}

/// The sequence node of a rule section in `file`'s tree (document
/// `yaml_document`, its `List` item and `specs` entry).
fn file_section_mut<'t>(
    trees: &'t mut [crate::loader::FileTree],
    file: &str,
    (yaml_document, list_item, in_specs): RulePlace,
    section: RuleSection,
) -> Option<&'t mut Node> {
    trees
        .iter_mut()
        .find(|t| t.file == file)?
        .roots
        .get_mut(yaml_document)?
        .as_mut()
        .and_then(|root| section_node_mut(root, list_item, in_specs, section))
}

/// The sequence node of a rule section (its entries are the items).
fn section_node_mut(
    root: &mut Node,
    list_item: Option<usize>,
    in_specs: Option<usize>,
    section: RuleSection,
) -> Option<&mut Node> {
    let object = match list_item {
        Some(i) => index_mut(get_mut(root, "items")?, i)?,
        None => root,
    };
    let rule = match in_specs {
        Some(i) => index_mut(get_mut(object, "specs")?, i)?,
        None => get_mut(object, "spec")?,
    };
    get_mut(rule, section.name())
}

/// Block sizes the common prefix and suffix are compared in, largest
/// first (`memcmp` of large blocks, then smaller ones near the first
/// difference): an edit of a large text costs about one pass of `memcmp`,
/// not one call per 64 bytes.
const BLOCKS: [usize; 3] = [4096, 64, 1];

/// The length of the common prefix of two texts.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    for block in BLOCKS {
        while i + block <= n && a[i..i + block] == b[i..i + block] {
            i += block;
        }
    }
    i
}

/// The length of the common suffix of two texts.
pub fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut i = 0;
    for block in BLOCKS {
        while i + block <= n && a[n - i - block..n - i] == b[n - i - block..n - i] {
            i += block;
        }
    }
    i
}

/// Whether `bytes` hold a carriage return that does not start a CRLF. The
/// YAML parser counts one as a line break; every line number derived from
/// bytes here counts `\n` only, so a lone CR before an edit would name the
/// wrong line (and item): such texts are loaded in full.
pub fn has_lone_cr(bytes: &[u8]) -> bool {
    memchr::memchr_iter(b'\r', bytes).any(|i| bytes.get(i + 1) != Some(&b'\n'))
}

/// Line breaks in `bytes`. Counted in 128-byte blocks into a `u8` (the
/// compiler turns that into vector compares and adds): an edit near the
/// end of a 0.5 MB text counts the lines before it, which a byte-at-a-time
/// count made ~0.2 ms of the update.
pub fn newlines(bytes: &[u8]) -> usize {
    let mut blocks = bytes.chunks_exact(128);
    let mut total = 0usize;
    for block in &mut blocks {
        let n = block
            .iter()
            .fold(0u8, |n, &c| n.wrapping_add(u8::from(c == b'\n')));
        total += usize::from(n);
    }
    total + blocks.remainder().iter().filter(|&&c| c == b'\n').count()
}

/// The sections, in [`Rule::sections`] order.
const SECTIONS: [RuleSection; 4] = [
    RuleSection::Ingress,
    RuleSection::IngressDeny,
    RuleSection::Egress,
    RuleSection::EgressDeny,
];

/// Diagnostics that concern the whole file or quote line numbers in their
/// message: with any of them the file is loaded in full.
const FILE_WIDE: [&str; 4] = [
    codes::YAML_SYNTAX.code,
    codes::LIMIT_EXCEEDED.code,
    codes::DUPLICATE_KEY.code,
    codes::DUPLICATE_POLICY.code,
];

/// Bytes that make a region's text more than plain block YAML with flow
/// collections and quoted scalars (module docs): anchors, aliases, tags,
/// block scalars, directives, reserved indicators, complex keys, tabs, CR.
const UNMODELLED: &[u8] = b"&*!|>%@`?\t\r";

/// Plans loading `text` as the new text of `name`, which `outcome` holds
/// loaded (by [`load_str`], then [`LoadOutcome::apply_target`] with
/// `target` when given; or by earlier edits) with `budget`
/// ([`Budget::of`] of it, or of the last [`Edit::budget`]). `None` when
/// the edit is not one the module docs show equal to a full load.
pub fn plan(
    outcome: &LoadOutcome,
    name: &str,
    text: &str,
    limits: &LoadLimits,
    target: Option<&Target>,
    budget: Budget,
) -> Option<Edit> {
    if !plannable(outcome, name, text, limits) {
        return None;
    }
    plan_replace(outcome, name, text, limits, target, budget)
        .or_else(|| plan_move(outcome, name, text, limits, target, budget))
}

/// What every plan needs of the outcome: one file, `name`, loaded without
/// file-wide findings, and the new text within the file size limit.
fn plannable(outcome: &LoadOutcome, name: &str, text: &str, limits: &LoadLimits) -> bool {
    matches!(outcome.trees.as_slice(), [tree] if tree.file == name)
        && !has_lone_cr(text.as_bytes())
        && outcome
            .sources
            .get(name)
            .is_some_and(|old| !has_lone_cr(old.as_bytes()))
        && outcome.located.is_empty()
        && outcome.omitted == 0
        && u64::try_from(text.len()).is_ok_and(|len| len <= limits.max_file_bytes)
        && !outcome
            .diagnostics
            .iter()
            .any(|d| FILE_WIDE.contains(&d.code))
}

/// [`plan`] for an edit inside one item ([`EditKind::Replace`]).
fn plan_replace(
    outcome: &LoadOutcome,
    name: &str,
    text: &str,
    limits: &LoadLimits,
    target: Option<&Target>,
    budget: Budget,
) -> Option<Edit> {
    let [tree] = outcome.trees.as_slice() else {
        return None;
    };
    let old = outcome.sources.get(name)?;
    let (a, b) = (old.as_bytes(), text.as_bytes());
    let prefix = common_prefix(a, b);
    if prefix == a.len() && prefix == b.len() {
        return None;
    }
    // A change inside a character: from its first byte (the common prefix
    // is the same bytes in both, so the boundary is one in both).
    let start = (0..=prefix).rev().find(|i| old.is_char_boundary(*i))?;
    let line_start = a[..start]
        .iter()
        .rposition(|c| *c == b'\n')
        .map_or(0, |i| i + 1);
    let line = u32::try_from(newlines(&a[..line_start]) + 1).ok()?;
    // The common suffix after the line's start, and the edit's start as
    // late as that suffix allows: a line deleted or inserted at the
    // start of the next item (whose indentation the prefix would eat)
    // is then the whole line before it.
    let suffix = common_suffix(&a[line_start..], &b[line_start..]);
    let end_old = a.len() - suffix;
    let start = start.min(end_old).min(b.len() - suffix);
    // Whole lines inserted before a line (nothing of the old text
    // replaced): they end the node before that line, so the item is
    // looked up from the line before (a port added on lines of its own
    // at the end of an item is inserted before the next item's line).
    let appended = start == line_start && end_old == start && line > 1;
    let at_line = if appended { line - 1 } else { line };

    // The document, the object (a `List`'s item or the root) and the item
    // whose text holds the edit's start.
    let located = Object::at(outcome, tree, name, at_line)?;
    let sections = located.sections()?;
    let Object {
        yaml_document,
        root,
        list_item,
        document,
        object,
        rules,
        has_spec,
        specs_nodes,
        ..
    } = located;
    // (line, rule, section, index, the section's items) of the item that
    // starts last at or before the edit's line.
    let mut found: Option<(u32, usize, RuleSection, usize, &[Node])> = None;
    for (spec, section, items, _) in sections {
        let Some(index) = last_at_or_before(items, at_line) else {
            continue;
        };
        let at = items[index].pos.line;
        match found {
            Some((other, ..)) if other == at => return None,
            Some((other, ..)) if other > at => {}
            _ => found = Some((at, spec, section, index, items)),
        }
    }
    let (item_line, spec, section, index, items) = found?;
    let in_specs = spec.checked_sub(usize::from(has_spec));
    let rule_key = if in_specs.is_some() { "specs" } else { "spec" };
    let rule_tree = rule_node(object, in_specs)?;
    let old_node = &items[index];

    // The first node after the item's subtree, and whether it is a block
    // sequence entry (the next item, rule or `List` item) rather than a
    // mapping key.
    let next = next_node(
        (root, object, list_item),
        (rule_tree, rule_key, in_specs, specs_nodes),
        (items, index + 1, section),
    );
    let (next, next_is_entry) = match next {
        Some((pos, is_entry)) => (Some(pos), is_entry),
        None => (None, false),
    };
    if next.is_none() && yaml_document + 1 != tree.roots.len() {
        return None;
    }
    if next.is_some_and(|n| n.line <= at_line) {
        return None;
    }

    // Byte offsets: the item's line, its content, the next node's line.
    let mut first = line_start;
    for _ in item_line..line {
        first = a[..first.checked_sub(1)?]
            .iter()
            .rposition(|c| *c == b'\n')
            .map_or(0, |i| i + 1);
    }
    let first_line_text = &old[first..];
    let content = first + char_offset(first_line_text, old_node.pos.column)?;
    let marker = &a[first..content];
    let dash = marker.iter().position(|c| *c != b' ')?;
    if !is_entry_marker(marker, false) || start < content {
        return None;
    }
    let region_end = match next {
        Some(next) => {
            let mut at = line_start;
            for _ in line..next.line {
                at += a[at..].iter().position(|c| *c == b'\n')? + 1;
            }
            // The next node is the first thing on its line: after its
            // entry's `-` when it is a sequence entry (an entry whose `-`
            // stands on a line of its own before it, as `-` then the
            // item's keys on the next lines, starts on that earlier line:
            // deleting that line would merge the entry into the edited
            // item, which the edited lines alone cannot show), after
            // indentation alone when it is a key.
            let lead = char_offset(&old[at..], next.column)?;
            if !is_entry_marker(&a[at..at + lead], !next_is_entry) {
                return None;
            }
            at
        }
        None => a.len(),
    };
    // (Inserted lines may end the region: they are the item's last lines.)
    if end_old > region_end || (start >= region_end && !(appended && start == region_end)) {
        return None;
    }
    let new_end = (region_end + b.len()).checked_sub(a.len())?;
    if new_end < b.len() && b.get(new_end.checked_sub(1)?) != Some(&b'\n') {
        return None;
    }
    let (old_region, new_region) = (&a[first..region_end], &b[first..new_end]);
    let plain =
        |r: &[u8]| !r.iter().any(|c| UNMODELLED.contains(c)) && !r.windows(2).any(|w| w == b"<<");
    if !plain(old_region) || !plain(new_region) {
        return None;
    }
    let mut node = item_alone(new_region, dash, limits, (in_specs, list_item))?;
    if node.pos.column != old_node.pos.column {
        return None;
    }
    shift_tree(&mut node, 1, i64::from(item_line) - 1, 0);

    // The model, its checks, its version rows.
    let place = Place {
        name,
        yaml_document,
        list_item,
        in_specs,
        section,
        index,
    };
    let item = place.checked_item(outcome, &node, rules.get(spec)?.1, target)?;
    // The budgets with the new item instead of the old.
    let (gone, added) = (size(old_node), size(&node));
    let after = Budget {
        nodes: budget
            .nodes
            .checked_sub(gone.nodes)?
            .checked_add(added.nodes)?,
        bytes: budget
            .bytes
            .checked_sub(gone.bytes)?
            .checked_add(added.bytes)?,
    };
    if after.nodes > limits.max_nodes || after.bytes > limits.max_scalar_bytes {
        return None;
    }
    let lines =
        i64::try_from(newlines(new_region)).ok()? - i64::try_from(newlines(old_region)).ok()?;
    let from_line = line.checked_add(u32::try_from(newlines(&a[line_start..region_end])).ok()?)?;
    Some(place.edit(
        (document, spec),
        text,
        (Some((node, item)), EditKind::Replace),
        (from_line, lines),
        (budget, after),
    ))
}

/// The one block-sequence item `region` (whole lines of the file, its
/// `-` at byte `dash` of the first line) parsed alone, its positions
/// those of the region (line 1 first), when every line after the first is
/// blank, a comment, or indented deeper than the `-` (so the file's
/// parser reads the same lines as that one item), at the depth the file
/// leaves it (inside `specs[i]` and a `List` item: `context`); `None`
/// otherwise.
fn item_alone(
    region: &[u8],
    dash: usize,
    limits: &LoadLimits,
    (in_specs, list_item): (Option<usize>, Option<usize>),
) -> Option<Node> {
    for text_line in region.split(|c| *c == b'\n').skip(1) {
        let indent = text_line.iter().take_while(|c| **c == b' ').count();
        match text_line.get(indent) {
            None | Some(b'#') => {}
            Some(_) if indent > dash => {}
            Some(_) => return None,
        }
    }
    let context = 3 + usize::from(in_specs.is_some()) + 2 * usize::from(list_item.is_some());
    let depth = limits
        .max_depth
        .min(HARD_MAX_DEPTH)
        .checked_sub(context - 1)
        .filter(|d| *d > 1)?;
    let alone = LoadLimits {
        max_depth: depth,
        ..limits.clone()
    };
    let snippet = std::str::from_utf8(region).ok()?;
    let mut stream = tree::parse_stream(snippet, &alone);
    if stream.error.is_some() || stream.documents.len() != 1 {
        return None;
    }
    let parsed = stream.documents.pop()?;
    if !parsed.duplicate_keys.is_empty() {
        return None;
    }
    let seq = parsed.root?;
    let dash_pos = Pos {
        line: 1,
        column: u32::try_from(dash + 1).ok()?,
    };
    let NodeKind::Sequence(mut parsed_items) = seq.kind else {
        return None;
    };
    if seq.pos != dash_pos || parsed_items.len() != 1 {
        return None;
    }
    let node = parsed_items.pop()?;
    (node.pos.line == 1).then_some(node)
}

/// Alignments of an inserted or removed block that [`plan_move`] tries
/// (those starting with an entry's `-`).
const ALIGNMENTS: usize = 4;

/// [`plan`] for one rule item inserted ([`EditKind::Insert`]) or removed
/// ([`EditKind::Remove`]): the texts differ by one block of whole lines,
/// nothing replaced, that is exactly one entry of a section's block
/// sequence (its `-` at the column of the section's other entries, every
/// other line blank, a comment or deeper, plain as an edited item must
/// be), put before an entry of that section or after its last entry (the
/// next node starting on the line after the block), or taken out of a
/// section that keeps another entry. Where the block can sit is ambiguous
/// when its neighbours repeat its bytes (a rule inserted before one that
/// starts the same way): the alignments at line starts are tried from the
/// last one. The rest of the file then parses as before with the lines
/// after the block moved, as for a replaced item (module docs).
fn plan_move(
    outcome: &LoadOutcome,
    name: &str,
    text: &str,
    limits: &LoadLimits,
    target: Option<&Target>,
    budget: Budget,
) -> Option<Edit> {
    let old = outcome.sources.get(name)?;
    let (a, b) = (old.as_bytes(), text.as_bytes());
    let prefix = common_prefix(a, b);
    let suffix = common_suffix(&a[prefix..], &b[prefix..]);
    let (insert, long) = match (a.len() - suffix == prefix, b.len() - suffix == prefix) {
        (true, false) => (true, b),
        (false, true) => (false, a),
        _ => return None,
    };
    let n = long.len() - suffix - prefix;
    // The block can move left while the byte before it is its last byte.
    let mut first = prefix;
    while first > 0 && long[first - 1] == long[first + n - 1] {
        first -= 1;
    }
    // Line starts whose line is an entry (`-` after indentation).
    let entry = |q: usize| {
        (q == 0 || long[q - 1] == b'\n') && long[q..].iter().find(|c| **c != b' ') == Some(&b'-')
    };
    (first..=prefix)
        .rev()
        .filter(|q| entry(*q))
        .take(ALIGNMENTS)
        .find_map(|q| {
            let block = Block {
                at: q,
                bytes: long.get(q..q + n)?,
                insert,
            };
            move_at(outcome, name, text, limits, target, budget, &block)
        })
}

/// A rule section: (rule, section, its entries, the rule's node).
type Section<'a> = (usize, RuleSection, &'a [Node], &'a Node);

/// An entry of a section: (rule, section, index, the section's items, the
/// rule's node).
type Found<'a> = (usize, RuleSection, usize, &'a [Node], &'a Node);

/// One alignment of [`plan_move`]'s block: at byte `at` of both texts,
/// inserted into the new one or removed from the old one.
struct Block<'a> {
    at: usize,
    bytes: &'a [u8],
    insert: bool,
}

/// [`plan_move`] with the block at one alignment.
fn move_at(
    outcome: &LoadOutcome,
    name: &str,
    text: &str,
    limits: &LoadLimits,
    target: Option<&Target>,
    budget: Budget,
    block: &Block<'_>,
) -> Option<Edit> {
    let [tree] = outcome.trees.as_slice() else {
        return None;
    };
    let old = outcome.sources.get(name)?;
    let a = old.as_bytes();
    let bytes = block.bytes;
    // Whole lines, plain, the last one not blank (trailing blank lines of
    // a removed block would join a block scalar before it).
    let plain =
        |r: &[u8]| !r.iter().any(|c| UNMODELLED.contains(c)) && !r.windows(2).any(|w| w == b"<<");
    let last_line = bytes[..bytes.len().checked_sub(1)?]
        .rsplit(|c| *c == b'\n')
        .next()?;
    if bytes.last() != Some(&b'\n') || !plain(bytes) || last_line.iter().all(|c| *c == b' ') {
        return None;
    }
    let dash = bytes.iter().position(|c| *c != b' ')?;
    let content = dash + 1 + bytes[dash + 1..].iter().take_while(|c| **c == b' ').count();
    if bytes[dash] != b'-' || !is_entry_marker(&bytes[..content], false) && bytes[content] != b'\n'
    {
        return None;
    }
    let line = u32::try_from(newlines(&a[..block.at]) + 1).ok()?;
    let count = u32::try_from(newlines(bytes)).ok()?;
    // The line the lookup starts from: the block's first line when an
    // entry is removed; the line before it when one is inserted (the
    // block ends what starts before it).
    let at_line = if block.insert {
        line.checked_sub(1)?
    } else {
        line
    };
    if at_line == 0 {
        return None;
    }
    let located = Object::at(outcome, tree, name, at_line)?;
    let sections = located.sections()?;
    let Object {
        yaml_document,
        root,
        list_item,
        document,
        object,
        rules,
        has_spec,
        specs_nodes,
        ..
    } = located;
    // (rule, section, index in the section after the edit, the section's
    // items, the rule's node): an entry starting on the block's line
    // (the block goes before it, or is it), else (an insertion) the entry
    // starting last before the block (the block goes after it).
    let mut at: Option<Found<'_>> = None;
    let mut before: Option<(u32, Found<'_>)> = None;
    for (spec, section, items, node) in sections {
        if !items.windows(2).all(|w| w[0].pos.line < w[1].pos.line) {
            return None;
        }
        if let Some(index) = items.iter().position(|i| i.pos.line == line) {
            if at.is_some() {
                return None;
            }
            at = Some((spec, section, index, items, node));
        }
        if let Some(index) = last_at_or_before(items, at_line) {
            let start = items[index].pos.line;
            match before {
                Some((other, ..)) if other == start => return None,
                Some((other, ..)) if other > start => {}
                _ => before = Some((start, (spec, section, index + 1, items, node))),
            }
        }
    }
    let (spec, section, index, items, rule_tree) = match (at, before) {
        (Some(found), _) => found,
        (None, Some((_, found))) if block.insert => found,
        _ => return None,
    };
    // A block sequence indented deeper than its key starts at its first
    // `-`; one at its key's indentation starts where its first entry's
    // content does, after the `-` and its blanks. A first entry inserted
    // or removed keeps the sequence's position (`Edit::apply`) only when
    // the two entries that are first before and after start their content
    // on the same column (their `-` are on one column, checked below).
    if index == 0 {
        let alike = if block.insert {
            u32::try_from(content + 1).ok() == items.first().map(|i| i.pos.column)
        } else {
            items.get(1).map(|i| i.pos.column) == items.first().map(|i| i.pos.column)
        };
        if !alike {
            return None;
        }
    }
    let in_specs = spec.checked_sub(usize::from(has_spec));
    let rule_key = if in_specs.is_some() { "specs" } else { "spec" };
    // A neighbour in the section: its `-` is on the block's column.
    let neighbour = items
        .get(index)
        .or_else(|| items.get(index.checked_sub(1)?))?;
    // Its line's start: back from the block's line (the neighbour starts
    // there or before it).
    let mut start = block.at;
    for _ in neighbour.pos.line..line {
        start = a[..start.checked_sub(1)?]
            .iter()
            .rposition(|c| *c == b'\n')
            .map_or(0, |i| i + 1);
    }
    let neighbour_line = &a[start..];
    let neighbour_dash = neighbour_line.iter().position(|c| *c != b' ')?;
    if neighbour_dash != dash || neighbour_line.get(dash) != Some(&b'-') {
        return None;
    }
    // The first node after the block (in the old text): the entry the
    // block goes before, or the one after the removed entry, or what
    // follows the section.
    let after_index = if block.insert { index } else { index + 1 };
    let next = next_node(
        (root, object, list_item),
        (rule_tree, rule_key, in_specs, specs_nodes),
        (items, after_index, section),
    );
    let end_line = if block.insert { line } else { line + count };
    match next {
        Some((pos, is_entry)) => {
            // The next node is the first thing on the line the block ends
            // before.
            let at = block.at + if block.insert { 0 } else { bytes.len() };
            let lead = char_offset(old.get(at..)?, pos.column)?;
            if pos.line != end_line || !is_entry_marker(&a[at..at + lead], !is_entry) {
                return None;
            }
        }
        None => {
            let end = block.at + if block.insert { 0 } else { bytes.len() };
            if yaml_document + 1 != tree.roots.len() || end != a.len() {
                return None;
            }
        }
    }
    if !block.insert && items.len() < 2 {
        return None;
    }
    let mut parsed = item_alone(bytes, dash, limits, (in_specs, list_item))?;
    if !block.insert && parsed != shifted_copy(&items[index], line) {
        return None;
    }
    let place = Place {
        name,
        yaml_document,
        list_item,
        in_specs,
        section,
        index,
    };
    let lines = i64::from(count);
    let (new, after, from_line, lines) =
        if block.insert {
            shift_tree(&mut parsed, 1, i64::from(line) - 1, 0);
            let item = place.checked_item(outcome, &parsed, rules.get(spec)?.1, target)?;
            let added = size(&parsed);
            let after = Budget {
                nodes: budget.nodes.checked_add(added.nodes)?,
                bytes: budget.bytes.checked_add(added.bytes)?,
            };
            if after.nodes > limits.max_nodes || after.bytes > limits.max_scalar_bytes {
                return None;
            }
            (Some((parsed, item)), after, line, lines)
        } else {
            // No finding in the document (as for an insertion).
            let here = |l: &Location| l.file == name && l.document == yaml_document;
            if outcome.diagnostics.iter().any(|d| {
                d.primary.as_ref().is_some_and(here) || d.related.iter().any(|(l, _)| here(l))
            }) {
                return None;
            }
            let gone = size(&items[index]);
            let after = Budget {
                nodes: budget.nodes.checked_sub(gone.nodes)?,
                bytes: budget.bytes.checked_sub(gone.bytes)?,
            };
            (None, after, line + count, -lines)
        };
    let kind = if block.insert {
        EditKind::Insert
    } else {
        EditKind::Remove
    };
    Some(place.edit(
        (document, spec),
        text,
        (new, kind),
        (from_line, lines),
        (budget, after),
    ))
}

/// `node` with its lines moved so that it starts on line 1 (from `line`).
fn shifted_copy(node: &Node, line: u32) -> Node {
    let mut copy = node.clone();
    shift_tree(&mut copy, 0, 1 - i64::from(line), 0);
    copy
}

/// Where an item goes in its file ([`Place::checked_item`]).
struct Place<'a> {
    name: &'a str,
    yaml_document: usize,
    list_item: Option<usize>,
    in_specs: Option<usize>,
    section: RuleSection,
    index: usize,
}

impl Place<'_> {
    /// The edit of this place: the item `at` (document index, rule) of
    /// the outcome, the new text, the new item and what it does, the
    /// lines' shift (from, by) and the budgets before and after.
    fn edit(
        &self,
        (document, spec): (usize, usize),
        text: &str,
        (new, kind): (Option<(Node, ItemModel)>, EditKind),
        (from_line, lines): (u32, i64),
        (before, after): (Budget, Budget),
    ) -> Edit {
        Edit {
            file: self.name.to_owned(),
            text: text.to_owned(),
            at: ItemAt {
                document,
                spec,
                section: self.section,
                index: self.index,
            },
            yaml_document: self.yaml_document,
            list_item: self.list_item,
            in_specs: self.in_specs,
            new,
            kind,
            from_line,
            lines,
            before,
            after,
        }
    }

    /// The model of `node` as the item here, when deserializing it, the
    /// item checks of the whole validation (`validate_cilium_item`, for
    /// `rule`), the target's version rows and the findings of the edited
    /// document before the edit (there must be none) all say that a full
    /// load gives exactly it and no finding for it.
    fn checked_item(
        &self,
        outcome: &LoadOutcome,
        node: &Node,
        rule: &Rule,
        target: Option<&Target>,
    ) -> Option<ItemModel> {
        let at_route = match self.in_specs {
            Some(i) => Route::root().key("specs").index(i),
            None => Route::root().key("spec"),
        }
        .key(self.section.name())
        .index(self.index);
        let full_route = match self.list_item {
            Some(i) => Route(
                Route::root()
                    .key("items")
                    .index(i)
                    .0
                    .into_iter()
                    .chain(at_route.0.iter().cloned())
                    .collect(),
            ),
            None => at_route.clone(),
        };
        let item = ItemModel::deserialize(self.section, node, &full_route)?;
        if !crate::validate::validate_cilium_item(
            &at_route,
            &item.view(),
            rule.node_selector.is_some(),
        )
        .is_empty()
        {
            return None;
        }
        if let Some(target) = target {
            let alone = LoadedDocument {
                file: self.name.to_owned(),
                index: 0,
                item: None,
                doc: PolicyDocument::CiliumNetworkPolicy(CiliumNetworkPolicy {
                    api_version: String::new(),
                    kind: String::new(),
                    metadata: ObjectMeta::default(),
                    spec: Some(item.alone()),
                    specs: None,
                    status: None,
                }),
            };
            if !crate::target::target_diagnostics(&LoadOutcome::default(), &alone, target)
                .is_empty()
            {
                return None;
            }
        }
        // No finding in the edited document before the edit.
        let here = |l: &Location| l.file == self.name && l.document == self.yaml_document;
        if outcome
            .diagnostics
            .iter()
            .any(|d| d.primary.as_ref().is_some_and(here) || d.related.iter().any(|(l, _)| here(l)))
        {
            return None;
        }
        Some(item)
    }
}

/// The CNP/CCNP object of a file's tree that holds a line
/// ([`Object::at`]), with its rules and their nodes.
struct Object<'a> {
    yaml_document: usize,
    root: &'a Node,
    list_item: Option<usize>,
    /// Index in [`LoadOutcome::documents`].
    document: usize,
    object: &'a Node,
    rules: Vec<(String, &'a Rule)>,
    has_spec: bool,
    spec_node: Option<&'a Node>,
    specs_nodes: &'a [Node],
}

impl<'a> Object<'a> {
    /// The object that line `at_line` of `name` (the one tree of
    /// `outcome`) lies in: its YAML document, `List` item and loaded
    /// document, when it is a CNP/CCNP whose rules match the tree's.
    fn at(
        outcome: &'a LoadOutcome,
        tree: &'a crate::loader::FileTree,
        name: &str,
        at_line: u32,
    ) -> Option<Object<'a>> {
        let (yaml_document, root) = tree
            .roots
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, r)| r.as_ref().filter(|r| r.pos.line <= at_line).map(|r| (i, r)))?;
        let list_item = if outcome
            .documents
            .iter()
            .any(|d| d.file == name && d.index == yaml_document && d.item.is_some())
        {
            Some(last_at_or_before(sequence(root.get("items")?)?, at_line)?)
        } else {
            None
        };
        let document = outcome
            .documents
            .iter()
            .position(|d| d.file == name && d.index == yaml_document && d.item == list_item)?;
        let loaded = &outcome.documents[document];
        let object = object(root, list_item)?;
        let rules = loaded.doc.cilium_rules();
        let has_spec = match &loaded.doc {
            PolicyDocument::CiliumNetworkPolicy(p) => p.spec.is_some(),
            PolicyDocument::CiliumClusterwideNetworkPolicy(p) => p.spec.is_some(),
            _ => return None,
        };
        let spec_node = object.get("spec").filter(|s| !s.is_null());
        let specs_nodes = match object.get("specs").filter(|s| !s.is_null()) {
            Some(specs) => sequence(specs)?,
            None => &[][..],
        };
        if has_spec != spec_node.is_some()
            || rules.len() != usize::from(has_spec) + specs_nodes.len()
        {
            return None;
        }
        Some(Object {
            yaml_document,
            root,
            list_item,
            document,
            object,
            rules,
            has_spec,
            spec_node,
            specs_nodes,
        })
    }
}

impl<'a> Object<'a> {
    /// Every non-empty rule section of the object in the order of rules
    /// (`cilium_rules`) and sections; `None` when an entry count differs
    /// from the model's.
    fn sections(&self) -> Option<Vec<Section<'a>>> {
        let mut out = Vec::new();
        for (spec, ((_, rule), node)) in self
            .rules
            .iter()
            .zip(self.spec_node.into_iter().chain(self.specs_nodes))
            .enumerate()
        {
            for section in SECTIONS {
                let Some(list) = node.get(section.name()).filter(|l| !l.is_null()) else {
                    continue;
                };
                let items = sequence(list)?;
                if items.len() != section_len(rule, section) {
                    return None;
                }
                out.push((spec, section, items, node));
            }
        }
        Some(out)
    }
}

/// The first node after item `after - 1` of a section's `items` (`after`
/// may be `items.len()`): the item at `after`, else the next key of the
/// rule's mapping, else the next rule of `specs`, else the next key of the
/// object, else the next `List` item or key of the root; with whether it
/// is a sequence entry (else a key). `None` when nothing follows in the
/// document.
fn next_node(
    (root, object, list_item): (&Node, &Node, Option<usize>),
    (rule_tree, rule_key, in_specs, specs_nodes): (&Node, &str, Option<usize>, &[Node]),
    (items, after, section): (&[Node], usize, RuleSection),
) -> Option<(Pos, bool)> {
    let entry = |n: &Node| (n.pos, true);
    let key = |p: Pos| (p, false);
    items
        .get(after)
        .map(entry)
        .or_else(|| rule_tree.key_after(section.name()).map(key))
        .or_else(|| in_specs.and_then(|i| specs_nodes.get(i + 1)).map(entry))
        .or_else(|| object.key_after(rule_key).map(key))
        .or_else(|| {
            let i = list_item?;
            let list = sequence(root.get("items")?)?;
            list.get(i + 1)
                .map(entry)
                .or_else(|| root.key_after("items").map(key))
        })
}

/// The index of the last item starting on `line` or before, when the
/// items start on strictly increasing lines (a block sequence; an alias
/// copy keeps its anchor's lines, so a list with one is not searched).
fn last_at_or_before(items: &[Node], line: u32) -> Option<usize> {
    if !items.windows(2).all(|w| w[0].pos.line < w[1].pos.line) {
        return None;
    }
    items.partition_point(|n| n.pos.line <= line).checked_sub(1)
}

/// Whether `lead` (what precedes a node on its line) is indentation and
/// one block sequence entry's `-` with blanks after it, or (`bare`
/// allowed) indentation alone.
fn is_entry_marker(lead: &[u8], bare: bool) -> bool {
    let indent = lead.iter().take_while(|c| **c == b' ').count();
    match &lead[indent..] {
        [] => bare,
        [b'-', rest @ ..] => !rest.is_empty() && rest.iter().all(|c| *c == b' '),
        _ => false,
    }
}

/// The byte offset of 1-based character column `column` in `line`.
fn char_offset(line: &str, column: u32) -> Option<usize> {
    let chars = usize::try_from(column.checked_sub(1)?).ok()?;
    let mut iter = line.char_indices();
    for _ in 0..chars {
        let (_, c) = iter.next()?;
        if c == '\n' {
            return None;
        }
    }
    Some(iter.next().map_or(line.len(), |(i, _)| i))
}

/// Replaces `outcome` (the load of `name`'s previous text, `target`
/// applied when given) by the load of `text`: in place when [`plan`]
/// allows, else by [`load_str`] (and [`LoadOutcome::apply_target`]).
/// Returns whether it was in place.
pub fn reload(
    outcome: &mut LoadOutcome,
    name: &str,
    text: &str,
    limits: &LoadLimits,
    target: Option<&Target>,
) -> bool {
    if let Some(budget) = Budget::of(outcome, name)
        && let Some(edit) = plan(outcome, name, text, limits, target, budget)
        && edit.apply(outcome).is_some()
    {
        return true;
    }
    *outcome = load_str(name, text, limits);
    if let Some(target) = target {
        outcome.apply_target(target);
    }
    false
}
