//! A policy text's change down to the rule items it touched, so the live
//! session lowers only those items again instead of the whole text.
//!
//! `lower` turns every item of a CNP/CCNP rule into one rule and one origin,
//! in order (document, `spec`/`specs[i]`, section, item:
//! `resolve::lower::cilium`), and an item's lowering reads only the item,
//! its rule's frame (subject selector, default deny, log), its document's
//! frame (kind, name, namespace, file, document index) and the line of its
//! route. So when two versions of a text have the same documents with the
//! same frames and the same number of items everywhere, and no line moved,
//! the lowering of the new text is the old one with the differing items'
//! rules and origins replaced by their own lowering. What is not that
//! simple (a KNP, a rule without an endpoint selector, a text whose
//! lowering had diagnostics) gives `None`, and the session lowers the
//! whole text as before. An item whose CIDR prefixes changed is lowered
//! alone too: the text's prefix set follows from the prefixes it named
//! before and names now (`ItemLowering::named_before`), a prefix another
//! item also names staying (`Session::item_prefixes`).
//!
//! Which items differ is found one of two ways. Narrowed (`narrowed`): an
//! agent's edit is one change inside one line, and when that line lies in
//! the text of one item (from its start to the next node after it) and the
//! YAML trees keep every item at its position, only that item is compared,
//! whatever the size of the text. Otherwise (`whole`) every item of every
//! changed document is compared. Both are exact; a test runs random
//! one-line edits through both and requires the same answer. A third way
//! needs no comparison: an in-place edit of the text
//! (`porin_model::reparse`, [`EditedItem`]) names the one item whose node
//! and model it replaced, and when no line moved that item is the only one
//! lowered again.

use std::collections::BTreeSet;
use std::ops::Range;

use ipnetwork::IpNetwork;
use porin_model::loader::{FileTree, LoadOutcome, LoadedDocument};
use porin_model::model::cilium::{EgressDenyRule, EgressRule, IngressDenyRule, IngressRule};
use porin_model::model::{PolicyDocument, Rule, RuleSection};
use porin_model::reparse::{ItemAt, common_prefix, common_suffix, has_lone_cr, newlines};
use porin_model::yaml::tree::{Node, NodeKind, Pos};

use crate::resolve::lower::{Lowered, Origin, PolicyInput, Scope, lower_cilium_item, lower_part};
use crate::resolve::rule::PolicyRule;

/// One re-lowered item: its position in the text's span (rule and origin
/// alike), its rule and its origin (ids already moved to `origin_start +
/// position`).
pub(super) struct ItemLowering {
    pub position: usize,
    pub rule: PolicyRule,
    pub origin: Origin,
    /// The item's policy prefixes.
    pub prefixes: BTreeSet<IpNetwork>,
    /// Those it named before the change (an item changed in place; empty
    /// for an inserted one): the session works out the text's new prefix
    /// set from both (`Session::replace_text`).
    pub named_before: BTreeSet<IpNetwork>,
}

/// An item that may differ between the two texts: its document (index in
/// `documents`), rule (`cilium_rules` order), section and index, and its
/// position in the text's span.
struct Candidate {
    doc: usize,
    spec: usize,
    section: RuleSection,
    index: usize,
    position: usize,
}

/// Which comparison [`changed_items`] made (for the tests: the narrowed
/// one must agree with the whole one wherever it applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compared {
    /// Only the item whose text holds the edit (module docs).
    Narrowed,
    /// Every item of every changed document.
    Whole,
    /// The item an in-place edit of the text named ([`EditedItem`]).
    Edited,
}

/// Every item's line in a changed file, as (span position, line).
pub(super) type ItemLines = Vec<(usize, u32)>;

/// The lines of the text's items after a change ([`ChangedItems`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lines {
    /// No line moved: every origin keeps its line.
    Same,
    /// Every item's line in the changed file, as (span position, line),
    /// read from the new tree ([`relined_items`]).
    Read(ItemLines),
    /// Every line from `from` on (before the change) moved by `by`: an
    /// in-place edit's shift ([`porin_model::reparse::Edit::shift`]); the
    /// text has one file.
    Shift { from: u32, by: i64 },
}

impl Lines {
    /// The line an origin on `line` is on after the change (`Read` is
    /// applied by position, not by line: `line` itself).
    pub(super) fn shifted(&self, line: u32) -> u32 {
        match self {
            Lines::Shift { from, by } if line >= *from && line != 0 => {
                u32::try_from((i64::from(line) + by).max(0)).unwrap_or(u32::MAX)
            }
            _ => line,
        }
    }
}

/// The items a change of a text may have changed, lowered, and how the
/// other items' lines moved: every other item of the text lowers as
/// before but for its origin's line.
pub(super) struct ChangedItems {
    pub items: Vec<ItemLowering>,
    pub compared: Compared,
    pub lines: Lines,
}

/// The items of `new` that differ from `old`, lowered, when the rest of the
/// text's lowering provably stays as it is (module docs); `items` is the
/// number of items (= rules = origins) of the old text's span and
/// `origin_start` the id of its first origin.
pub(super) fn changed_items(
    old: &LoadOutcome,
    new: &LoadOutcome,
    scope: Scope<'_>,
    items: usize,
    origin_start: usize,
) -> Option<ChangedItems> {
    let (candidates, compared, lines) = match narrowed(old, new, items) {
        Some((candidates, lines)) => (candidates, Compared::Narrowed, lines),
        None => match whole(old, new, items) {
            Some(candidates) => (candidates, Compared::Whole, Lines::Same),
            None => {
                let (candidates, lines) = relined(old, new, items)?;
                (candidates, Compared::Whole, Lines::Read(lines))
            }
        },
    };
    let mut out = Vec::with_capacity(candidates.len());
    for c in candidates {
        let before = lower_at(old, &c, scope);
        if !movable(&before) {
            return None;
        }
        let after = lower_at(new, &c, scope);
        out.push(finish(after, &c, origin_start, before.prefixes)?);
    }
    Some(ChangedItems {
        items: out,
        compared,
        lines,
    })
}

/// The policy prefixes of the whole text `outcome`, lowered without
/// locating anything in its trees (prefixes read no position): safe on an
/// in-place edit's outcome whose later positions have not moved yet
/// (`Session::edit_moving`).
pub(super) fn text_prefixes(outcome: &LoadOutcome, scope: Scope<'_>) -> BTreeSet<IpNetwork> {
    let inputs: Vec<PolicyInput<'_>> = outcome
        .documents
        .iter()
        .map(|doc| PolicyInput {
            file: &doc.file,
            document: doc.index,
            item: doc.item,
            policy: &doc.doc,
            source: None,
        })
        .collect();
    lower_part(&inputs, scope).prefixes
}

/// The lowering of candidate `c`'s item in `outcome`.
fn lower_at(outcome: &LoadOutcome, c: &Candidate, scope: Scope<'_>) -> Lowered {
    let doc = &outcome.documents[c.doc];
    lower_cilium_item(
        &PolicyInput {
            file: &doc.file,
            document: doc.index,
            item: doc.item,
            policy: &doc.doc,
            source: Some(outcome),
        },
        scope,
        c.spec,
        c.section,
        c.index,
    )
}

/// An item lowered to exactly one rule and origin, with nothing the
/// text shares but CIDR prefixes (no diagnostics). Its rule's log cookie
/// is the session's (`Scope::cookies`); the rule's `log` is outside the
/// item, in the frame the comparisons require to be the same
/// (`same_rule_frame`). An item inserted or removed may name any
/// prefixes: the text's prefix set then gains the item's, or loses those
/// no other item names, which the session works out
/// (`Session::move_item`).
fn movable(l: &Lowered) -> bool {
    l.rules.len() == 1 && l.origins.len() == 1 && l.diagnostics.is_empty()
}

/// The item's lowering with its ids moved to where it sits in the span
/// (`named_before`: the prefixes it named before the change); `None`
/// unless it is [`movable`].
fn finish(
    mut after: Lowered,
    c: &Candidate,
    origin_start: usize,
    named_before: BTreeSet<IpNetwork>,
) -> Option<ItemLowering> {
    if !movable(&after) {
        return None;
    }
    let id = u32::try_from(origin_start + c.position).ok()?;
    let mut rule = after.rules.pop()?;
    let mut origin = after.origins.pop()?;
    rule.origin = id;
    origin.id = id;
    Some(ItemLowering {
        position: c.position,
        rule,
        origin,
        prefixes: after.prefixes,
        named_before,
    })
}

/// An in-place edit's item ([`porin_model::reparse::Edit`]), lowered
/// before the edit (`prepare`) and after it (`finish`): the reparse has
/// shown that the new text's load is the old one with only that item's
/// node and model replaced, so when no line moved (the item's origin
/// reads its line; every other item's origin keeps its own), this is
/// what the narrowed comparison would find, without comparing.
pub(super) struct EditedItem {
    candidate: Candidate,
    /// The item's lowering before the edit (the prefixes it named).
    before: Lowered,
}

impl EditedItem {
    /// The item `at` of `outcome` (before the edit), when every item of
    /// the text lowers to one rule (`lowered_items`, which also requires
    /// an endpoint selector on every rule), the text's span has `items`
    /// of them, and this one is [`movable`]; `None` otherwise.
    pub(super) fn prepare(
        outcome: &LoadOutcome,
        at: ItemAt,
        scope: Scope<'_>,
        items: usize,
    ) -> Option<EditedItem> {
        let candidate = candidate_at(outcome, at, items, false)?;
        let before = lower_at(outcome, &candidate, scope);
        movable(&before).then_some(EditedItem { candidate, before })
    }

    /// The item lowered again in `outcome` (after the edit): the items
    /// that may have changed.
    pub(super) fn finish(
        self,
        outcome: &LoadOutcome,
        scope: Scope<'_>,
        origin_start: usize,
        lines: Lines,
    ) -> Option<ChangedItems> {
        // The session compares it with the rule and origin it holds.
        let after = lower_at(outcome, &self.candidate, scope);
        Some(ChangedItems {
            items: vec![finish(
                after,
                &self.candidate,
                origin_start,
                self.before.prefixes,
            )?],
            compared: Compared::Edited,
            lines,
        })
    }
}

/// The candidate of item `at` of `outcome` (its place, for `end`: one
/// past the section's last item, where an insertion puts one), when
/// every item of the text lowers to one rule (`lowered_items`, which also
/// requires an endpoint selector on every rule) and the text's span has
/// `items` of them.
fn candidate_at(outcome: &LoadOutcome, at: ItemAt, items: usize, end: bool) -> Option<Candidate> {
    let mut position = 0;
    let mut total = 0;
    for (doc, loaded) in outcome.documents.iter().enumerate() {
        let n = lowered_items(&loaded.doc)?;
        if doc < at.document {
            position += n;
        }
        total += n;
    }
    if total != items {
        return None;
    }
    let rules = rules(&outcome.documents.get(at.document)?.doc)?;
    for rule in rules.get(..at.spec)? {
        position += section_lens(rule).iter().map(|(_, len)| len).sum::<usize>();
    }
    for (section, len) in section_lens(rules.get(at.spec)?) {
        if section == at.section {
            if at.index > len || (at.index == len && !end) {
                return None;
            }
            break;
        }
        position += len;
    }
    Some(Candidate {
        doc: at.document,
        spec: at.spec,
        section: at.section,
        index: at.index,
        position: position + at.index,
    })
}

/// An in-place edit that inserts or removes one item
/// ([`porin_model::reparse::EditKind`]): its place before the edit
/// (`prepare`) and the [`MovedItem`] after it (`finish`), what
/// [`moved_item`] would find by comparing every item, without comparing
/// (the reparse has shown that the new load is the old one with that one
/// item more or less and the lines after it shifted).
pub(super) struct MovedByEdit {
    candidate: Candidate,
    inserted: bool,
    /// The policy prefixes of a removed item ([`MovedItem::removed_prefixes`]).
    removed_prefixes: BTreeSet<IpNetwork>,
}

impl MovedByEdit {
    /// The place of item `at` of `outcome` (before the edit); for a
    /// removal the item must lower [`movable`].
    pub(super) fn prepare(
        outcome: &LoadOutcome,
        at: ItemAt,
        scope: Scope<'_>,
        items: usize,
        inserted: bool,
    ) -> Option<MovedByEdit> {
        let candidate = candidate_at(outcome, at, items, inserted)?;
        let mut removed_prefixes = BTreeSet::new();
        if !inserted {
            let removed = lower_at(outcome, &candidate, scope);
            if !movable(&removed) {
                return None;
            }
            removed_prefixes = removed.prefixes;
        }
        Some(MovedByEdit {
            candidate,
            inserted,
            removed_prefixes,
        })
    }

    /// The move in `outcome` (after the edit): the inserted item lowered
    /// (ids from `origin_start`), the items after it in its section, the
    /// lines' shift.
    pub(super) fn finish(
        self,
        outcome: &LoadOutcome,
        scope: Scope<'_>,
        origin_start: usize,
        lines: Lines,
    ) -> Option<MovedItem> {
        let c = &self.candidate;
        let rule = *rules(&outcome.documents.get(c.doc)?.doc)?.get(c.spec)?;
        let new_len = section_lens(rule)
            .into_iter()
            .find(|(section, _)| *section == c.section)
            .map(|(_, len)| len)?;
        let start = c.position + usize::from(self.inserted);
        let reindexed = start..start + new_len.checked_sub(c.index + usize::from(self.inserted))?;
        let inserted = if self.inserted {
            Some(finish(
                lower_at(outcome, c, scope),
                c,
                origin_start,
                BTreeSet::new(),
            )?)
        } else {
            None
        };
        Some(MovedItem {
            position: c.position,
            inserted,
            removed_prefixes: self.removed_prefixes,
            remaining: None,
            reindexed,
            lines,
            compared: 0,
        })
    }
}

/// Every changed document compared item by item (module docs).
fn whole(old: &LoadOutcome, new: &LoadOutcome, items: usize) -> Option<Vec<Candidate>> {
    if old.documents.len() != new.documents.len() {
        return None;
    }
    // Every file of the text, changed documents or not: an unchanged
    // document below a new line break still moves.
    for tree in &new.trees {
        let file = tree.file.as_str();
        if !same_lines(old.sources.get(file)?, new.sources.get(file)?) {
            return None;
        }
    }
    let mut position = 0;
    let mut out = Vec::new();
    for (doc, (a, b)) in old.documents.iter().zip(&new.documents).enumerate() {
        if a.file != b.file || a.index != b.index || a.item != b.item {
            return None;
        }
        if a.doc == b.doc {
            // Unchanged: count its items (every rule has a subject, checked
            // on the changed documents; an unchanged document may still
            // have a rule without one, which lowers to nothing).
            position += lowered_items(&b.doc)?;
            continue;
        }
        let (rules_a, rules_b) = (frame(&a.doc, &b.doc)?, rules(&b.doc)?);
        if rules_a.len() != rules_b.len() {
            return None;
        }
        for (spec, (x, y)) in rules_a.iter().zip(&rules_b).enumerate() {
            if !same_rule_frame(x, y) {
                return None;
            }
            for (section, differing, len) in differing_items(x, y)? {
                for index in differing {
                    out.push(Candidate {
                        doc,
                        spec,
                        section,
                        index,
                        position: position + index,
                    });
                }
                position += len;
            }
        }
    }
    (position == items).then_some(out)
}

/// The candidates when lines moved: every document of every file but one
/// is the same, and that file's changed documents have the same frames
/// and item counts (compared item by item, as [`whole`] does), with every
/// item's line in that file read from the new tree (span position, line);
/// `None` otherwise. An item's lowering reads only the item, its frames
/// and its line (module docs), so every item but the candidates lowers
/// as before but for its origin's line, which is the item node's line as
/// lowering reads it (`PolicyInput::locate`). A comment line added above
/// the rules, or a port added on a line of its own, is such a change.
fn relined(
    old: &LoadOutcome,
    new: &LoadOutcome,
    items: usize,
) -> Option<(Vec<Candidate>, ItemLines)> {
    let (file, new_tree) = changed_file(old, new)?;
    let mut out = Vec::new();
    let mut lines = Vec::new();
    let mut position = 0;
    for (doc, (a, b)) in old.documents.iter().zip(&new.documents).enumerate() {
        if a.file != b.file || a.index != b.index || a.item != b.item {
            return None;
        }
        let n = lowered_items(&a.doc)?;
        if a.file != file {
            position += n;
            continue;
        }
        let rules_b = rules(&b.doc)?;
        if a.doc != b.doc {
            let rules_a = frame(&a.doc, &b.doc)?;
            if rules_a.len() != rules_b.len() {
                return None;
            }
            let mut offset = position;
            for (spec, (x, y)) in rules_a.iter().zip(&rules_b).enumerate() {
                if !same_rule_frame(x, y) {
                    return None;
                }
                for (section, differing, len) in differing_items(x, y)? {
                    out.extend(differing.into_iter().map(|index| Candidate {
                        doc,
                        spec,
                        section,
                        index,
                        position: offset + index,
                    }));
                    offset += len;
                }
            }
        }
        let root = new_tree.roots.get(b.index)?.as_ref()?;
        let at = push_lines(&mut lines, root, b, &rules_b, position)?;
        position += n;
        if at != position {
            return None;
        }
    }
    (position == items).then_some((out, lines))
}

/// The one file whose text differs between `old` and `new` (the same
/// files, in the same order, the same number of documents, no load
/// findings in either) and its new tree; `None` when none or more than one
/// does.
fn changed_file<'a>(old: &LoadOutcome, new: &'a LoadOutcome) -> Option<(&'a str, &'a FileTree)> {
    if old.documents.len() != new.documents.len()
        || !old.diagnostics.is_empty()
        || !new.diagnostics.is_empty()
        || old.trees.len() != new.trees.len()
    {
        return None;
    }
    let mut file = None;
    for (x, y) in old.trees.iter().zip(&new.trees) {
        if x.file != y.file {
            return None;
        }
        if old.sources.get(&x.file)? != new.sources.get(&y.file)? {
            if file.is_some() {
                return None;
            }
            file = Some((y.file.as_str(), y));
        }
    }
    file
}

/// Pushes the line of every item of document `doc` (its `rules`) in the
/// new tree's `root`, in lowering order, at span positions from `at`;
/// gives the position after them.
fn push_lines(
    lines: &mut ItemLines,
    root: &Node,
    doc: &LoadedDocument,
    rules: &[&Rule],
    mut at: usize,
) -> Option<usize> {
    for list in item_lists(root, doc, rules)? {
        for node in list.nodes {
            lines.push((at, node.pos.line));
            at += 1;
        }
    }
    Some(at)
}

/// One rule item inserted into a text or removed from it, every other
/// item the same ([`moved_item`]).
pub(super) struct MovedItem {
    /// The item's position in the text's span: in the new span for an
    /// insertion, in the old one for a removal.
    pub position: usize,
    /// The inserted item, lowered (its origin id `origin_start +
    /// position`); `None` for a removal.
    pub inserted: Option<ItemLowering>,
    /// The policy prefixes of a removed item (empty for an insertion).
    pub removed_prefixes: BTreeSet<IpNetwork>,
    /// The text's prefix set after the removal of an item with prefixes,
    /// when the session cannot tell it from its rules (another rule of the
    /// text has a selector on one of them: `Session::settle_removal`); it
    /// then lowers the new text for it. `None` from this module.
    pub remaining: Option<BTreeSet<IpNetwork>>,
    /// The new span positions of the items after it in its section: their
    /// index (and so their route) moved by one.
    pub reindexed: Range<usize>,
    /// The lines of the text's items after the change: every item's of the
    /// changed file read from the new tree (new span position, line), or
    /// an in-place edit's shift (not applied to the inserted item, whose
    /// origin has its line).
    pub lines: Lines,
    /// Items compared to find the change (none for an in-place edit).
    pub compared: usize,
}

/// The item inserted or removed when `new` is `old` with one rule item
/// more or less in one section of one rule of one document, and nothing
/// else of any document differs; `None` otherwise (and for what
/// [`changed_items`] does not take either: a text with load findings, a
/// rule without a subject, an item that does not lower [`movable`]).
///
/// Why the rest of the text's lowering is the old one with ids and lines
/// moved: an item's lowering reads only the item, its frames and the line
/// of its route (module docs). The frames are compared; every other item
/// is compared equal to the one it follows; so each lowers to the same
/// rule with its origin id moved by one after the change, and the same
/// origin but for its id, its index and route (the items after it in its
/// section) and its line, which is read here from the new tree, as
/// lowering reads it (`PolicyInput::locate`: the item node's position).
pub(super) fn moved_item(
    old: &LoadOutcome,
    new: &LoadOutcome,
    scope: Scope<'_>,
    items: usize,
    origin_start: usize,
) -> Option<MovedItem> {
    let (file, new_tree) = changed_file(old, new)?;
    let mut found: Option<(Candidate, bool)> = None;
    let mut lines = Vec::new();
    // Positions in the old span and in the new one (they differ by one
    // after the change).
    let (mut position, mut new_position) = (0, 0);
    for (doc, (a, b)) in old.documents.iter().zip(&new.documents).enumerate() {
        if a.file != b.file || a.index != b.index || a.item != b.item {
            return None;
        }
        if a.file != file {
            let n = lowered_items(&a.doc)?;
            position += n;
            new_position += n;
            continue;
        }
        let rules_b = rules(&b.doc)?;
        if a.doc != b.doc {
            if found.is_some() {
                return None;
            }
            found = Some(moved_in(a, b, &rules_b, doc, position)?);
        }
        // Every item's line in the new tree, in lowering order.
        let root = new_tree.roots.get(b.index)?.as_ref()?;
        new_position = push_lines(&mut lines, root, b, &rules_b, new_position)?;
        position += lowered_items(&a.doc)?;
    }
    let (candidate, inserted) = found?;
    if position != items {
        return None;
    }
    let section_len = |outcome: &LoadOutcome| -> Option<usize> {
        let rule = *rules(&outcome.documents.get(candidate.doc)?.doc)?.get(candidate.spec)?;
        section_lens(rule)
            .into_iter()
            .find(|(section, _)| *section == candidate.section)
            .map(|(_, len)| len)
    };
    let new_len = section_len(new)?;
    let start = candidate.position + usize::from(inserted);
    let reindexed = start..start + (new_len - candidate.index - usize::from(inserted));
    let (lowering, removed_prefixes) = if inserted {
        let item = finish(
            lower_at(new, &candidate, scope),
            &candidate,
            origin_start,
            BTreeSet::new(),
        )?;
        (Some(item), BTreeSet::new())
    } else {
        let removed = lower_at(old, &candidate, scope);
        if !movable(&removed) {
            return None;
        }
        (None, removed.prefixes)
    };
    Some(MovedItem {
        position: candidate.position,
        inserted: lowering,
        removed_prefixes,
        remaining: None,
        reindexed,
        lines: Lines::Read(lines),
        compared: items,
    })
}

/// The item inserted into (`true`) or removed from document `b`, when `b`
/// is `a` with one item more or less in one section of one rule and the
/// same otherwise; its candidate is at its index in the document that
/// holds it (`b` for an insertion, `a` for a removal).
fn moved_in(
    a: &LoadedDocument,
    b: &LoadedDocument,
    rules_b: &[&Rule],
    doc: usize,
    position: usize,
) -> Option<(Candidate, bool)> {
    let rules_a = frame(&a.doc, &b.doc)?;
    if rules_a.len() != rules_b.len() {
        return None;
    }
    let mut found = None;
    let mut offset = position;
    for (spec, (x, y)) in rules_a.iter().zip(rules_b).enumerate() {
        if !same_rule_frame(x, y) {
            return None;
        }
        for (section, len) in section_lens(x) {
            let moved = match section {
                RuleSection::Ingress => one_moved(x.ingress.as_ref(), y.ingress.as_ref())?,
                RuleSection::IngressDeny => {
                    one_moved(x.ingress_deny.as_ref(), y.ingress_deny.as_ref())?
                }
                RuleSection::Egress => one_moved(x.egress.as_ref(), y.egress.as_ref())?,
                RuleSection::EgressDeny => {
                    one_moved(x.egress_deny.as_ref(), y.egress_deny.as_ref())?
                }
            };
            if let Some((index, inserted)) = moved {
                if found.is_some() {
                    return None;
                }
                let candidate = Candidate {
                    doc,
                    spec,
                    section,
                    index,
                    position: offset + index,
                };
                found = Some((candidate, inserted));
            }
            offset += len;
        }
    }
    found
}

/// `Some(None)` when the two lists are equal, `Some(Some((index, true)))`
/// when `b` is `a` with one item inserted at `index`, `Some(Some((index,
/// false)))` when it is `a` without its item `index`; `None` otherwise.
/// (Where an equal item sits next to the change, the first such index.)
fn one_moved<T: PartialEq>(
    a: Option<&Vec<T>>,
    b: Option<&Vec<T>>,
) -> Option<Option<(usize, bool)>> {
    let (a, b) = (
        a.map_or(&[][..], Vec::as_slice),
        b.map_or(&[][..], Vec::as_slice),
    );
    let (short, long, inserted) = match a.len().cmp(&b.len()) {
        std::cmp::Ordering::Equal => return (a == b).then_some(None),
        std::cmp::Ordering::Less => (a, b, true),
        std::cmp::Ordering::Greater => (b, a, false),
    };
    if long.len() != short.len() + 1 {
        return None;
    }
    let index = short
        .iter()
        .zip(long)
        .position(|(x, y)| x != y)
        .unwrap_or(short.len());
    (short[index..] == long[index + 1..]).then_some(Some((index, inserted)))
}

/// Where the two texts differ: one file, as the positions (1-based line
/// and column in characters, as the YAML tree has them) of the first
/// changed character and of the first unchanged one after the change, in
/// the old text and in the new (on different lines when the change holds
/// line breaks: every line after `end_old`'s moves by the difference).
struct Edit<'a> {
    file: &'a str,
    start: Pos,
    end_old: Pos,
    end_new: Pos,
}

/// The edit of [`Edit`] (`Some(None)`: no file differs), or `None` when
/// more than one file differs.
fn edit_of<'a>(old: &LoadOutcome, new: &'a LoadOutcome) -> Option<Option<Edit<'a>>> {
    if old.trees.len() != new.trees.len() {
        return None;
    }
    let mut edit = None;
    for (x, y) in old.trees.iter().zip(&new.trees) {
        if x.file != y.file {
            return None;
        }
        let (a, b) = (old.sources.get(&x.file)?, new.sources.get(&y.file)?);
        let (sa, sb) = (a, b);
        let (a, b) = (a.as_bytes(), b.as_bytes());
        let prefix = common_prefix(a, b);
        if prefix == a.len() && prefix == b.len() {
            continue;
        }
        if edit.is_some() {
            return None;
        }
        // A change inside a character (the common prefix ends in the
        // middle of one): widen it to whole characters (the common prefix
        // is the same bytes in both texts, so a boundary of one is a
        // boundary of the other).
        let prefix = (0..=prefix).rev().find(|i| sa.is_char_boundary(*i))?;
        debug_assert!(sb.is_char_boundary(prefix));
        let line_start = a[..prefix]
            .iter()
            .rposition(|c| *c == b'\n')
            .map_or(0, |i| i + 1);
        // The common suffix after the line's start, and the change's start
        // as early as it allows: lines inserted before a line (whose
        // indentation the prefix would eat) then start at that line's
        // start, and end there in the old text.
        let suffix = common_suffix(&a[line_start..], &b[line_start..]);
        let (end_a, end_b) = (a.len() - suffix, b.len() - suffix);
        let prefix = prefix.min(end_a).min(end_b);
        let prefix = (0..=prefix).rev().find(|i| sa.is_char_boundary(*i))?;
        let line = newlines(&a[..line_start]) + 1;
        // The position of byte `at` of `text` (at or after `line_start`).
        let pos = |text: &[u8], at: usize| -> Option<Pos> {
            let breaks = newlines(&text[line_start..at]);
            let from = text[..at]
                .iter()
                .rposition(|c| *c == b'\n')
                .map_or(0, |i| i + 1)
                .max(line_start);
            // Characters before `at` on its line, counting a partial one.
            let chars = text[from..at]
                .iter()
                .filter(|c| (**c & 0xC0) != 0x80)
                .count();
            Some(Pos {
                line: u32::try_from(line + breaks).ok()?,
                column: u32::try_from(chars + 1).ok()?,
            })
        };
        edit = Some(Edit {
            file: &y.file,
            start: pos(a, prefix)?,
            end_old: pos(a, end_a)?,
            end_new: pos(b, end_b)?,
        });
    }
    Some(edit)
}

fn before(a: Pos, b: Pos) -> bool {
    (a.line, a.column) < (b.line, b.column)
}

/// One rule item in the YAML tree: its rule (`cilium_rules` order),
/// section, index and node.
struct TreeItem<'t> {
    spec: usize,
    section: RuleSection,
    index: usize,
    node: &'t Node,
}

/// The items of one section of one rule in the YAML tree: its rule
/// (`cilium_rules` order), section and item nodes (in text order: a
/// sequence's items are parsed in order).
struct ItemList<'t> {
    spec: usize,
    section: RuleSection,
    nodes: &'t [Node],
}

/// The rule items of a CNP/CCNP document's tree as one list per rule and
/// section, in `cilium_rules` and section order (so the items in lowering
/// order are the lists' items one list after the other), when the tree has
/// the model's shape (every rule's sections with the model's item counts);
/// `None` otherwise. Lists, not one entry per item: the caller finds the
/// edited item by binary search and compares positions without copying
/// every item.
fn item_lists<'t>(
    root: &'t Node,
    doc: &LoadedDocument,
    rules: &[&Rule],
) -> Option<Vec<ItemList<'t>>> {
    let root = match doc.item {
        Some(i) => sequence(root.get("items")?)?.get(i)?,
        None => root,
    };
    let mut nodes: Vec<&Node> = Vec::new();
    if let Some(spec) = root.get("spec")
        && !spec.is_null()
    {
        nodes.push(spec);
    }
    if let Some(specs) = root.get("specs")
        && !specs.is_null()
    {
        nodes.extend(sequence(specs)?);
    }
    if nodes.len() != rules.len() {
        return None;
    }
    let mut out = Vec::with_capacity(rules.len() * 4);
    for (spec, (node, rule)) in nodes.into_iter().zip(rules).enumerate() {
        for (section, items) in section_lens(rule) {
            let list = match node.get(section_key(section)) {
                Some(list) if !list.is_null() => sequence(list)?,
                _ => &[][..],
            };
            if list.len() != items {
                return None;
            }
            out.push(ItemList {
                spec,
                section,
                nodes: list,
            });
        }
    }
    Some(out)
}

fn sequence(node: &Node) -> Option<&[Node]> {
    match &node.kind {
        NodeKind::Sequence(items) => Some(items),
        _ => None,
    }
}

fn section_key(section: RuleSection) -> &'static str {
    match section {
        RuleSection::Ingress => "ingress",
        RuleSection::IngressDeny => "ingressDeny",
        RuleSection::Egress => "egress",
        RuleSection::EgressDeny => "egressDeny",
    }
}

/// Where the first node after `item`'s subtree starts in the document
/// (`item` is at `spec`/`specs[i]`, `section`, `index`): the next item of
/// its sequence, else the next key of its rule's mapping, else the next
/// rule of `specs`, else the next key of the document's mapping; `None`
/// when nothing follows it in the document.
fn next_after(
    root: &Node,
    doc: &LoadedDocument,
    has_spec: bool,
    item: &TreeItem<'_>,
) -> Option<Pos> {
    let root = match doc.item {
        Some(i) => sequence(root.get("items")?)?.get(i)?,
        None => root,
    };
    let (rule, rule_key, in_specs) = if has_spec && item.spec == 0 {
        (root.get("spec")?, "spec", None)
    } else {
        let at = item.spec - usize::from(has_spec);
        (sequence(root.get("specs")?)?.get(at)?, "specs", Some(at))
    };
    let list = sequence(rule.get(section_key(item.section))?)?;
    if let Some(next) = list.get(item.index + 1) {
        return Some(next.pos);
    }
    if let Some(pos) = rule.key_after(section_key(item.section)) {
        return Some(pos);
    }
    if let Some(at) = in_specs
        && let Some(next) = sequence(root.get("specs")?)?.get(at + 1)
    {
        return Some(next.pos);
    }
    root.key_after(rule_key)
}

/// The candidates when the change is one edit of one file (without an
/// anchor) that lies within the text of one rule item (from the item's
/// start to the start of the next node after it, [`next_after`]), and the
/// YAML trees of that document have the same item positions before and
/// after (those after the edit moved by the lines it added or removed),
/// so every item but that one has the same node; with how the lines
/// moved. `None` when any of this does not hold (the caller compares the
/// whole documents).
///
/// Why that is exact: the tree is built from the parser's events, each
/// node from the text between its start and the start of the node after
/// it; a block sequence item that starts at the same position, in the same
/// nesting (every item of the document at its old position, the same item
/// counts) and ends where the same next node starts, over the same text,
/// is the same node. Documents of unchanged files are the same documents
/// (the loader is a function of the file's text); the other documents of
/// the changed file, the document frame and the rule frames are compared
/// in full (cheap: no items). No load diagnostics on either side (a
/// duplicate key would make the model read a node the tree walk does not).
fn narrowed(old: &LoadOutcome, new: &LoadOutcome, items: usize) -> Option<(Vec<Candidate>, Lines)> {
    if old.documents.len() != new.documents.len()
        || !old.diagnostics.is_empty()
        || !new.diagnostics.is_empty()
    {
        return None;
    }
    let Some(edit) = edit_of(old, new)? else {
        // The same texts: the same documents (the loader is a function of
        // the text).
        let mut position = 0;
        for (a, b) in old.documents.iter().zip(&new.documents) {
            if a.file != b.file || a.index != b.index || a.item != b.item {
                return None;
            }
            position += lowered_items(&a.doc)?;
        }
        return (position == items).then_some((Vec::new(), Lines::Same));
    };
    // Lines moved: every origin of the text after the edit moves with its
    // node (one file, so the shift is the text's).
    let by = i64::from(edit.end_new.line) - i64::from(edit.end_old.line);
    let lines = if by == 0 {
        Lines::Same
    } else if old.trees.len() == 1 {
        // Lines from the one the change ends on move, or from the next
        // when it ends inside that line.
        let from = if edit.end_old.column == 1 && edit.end_new.column == 1 {
            edit.end_old.line
        } else {
            edit.end_old.line + 1
        };
        Lines::Shift { from, by }
    } else {
        return None;
    };
    // No anchor in the edited file: an alias elsewhere copies the anchored
    // node, so an edit of it inside one item changes the items that hold
    // its aliases too, which only comparing them shows (an alias needs an
    // anchor: without `&` there is none).
    // Nor a carriage return outside a CRLF: the parser counts it as a
    // line break, the edit's lines here count `\n` only.
    let unmodelled = |text: &str| {
        memchr::memchr(b'&', text.as_bytes()).is_some() || has_lone_cr(text.as_bytes())
    };
    if unmodelled(old.sources.get(edit.file)?) || unmodelled(new.sources.get(edit.file)?) {
        return None;
    }
    let (old_tree, new_tree) = (
        old.trees.iter().find(|t| t.file == edit.file)?,
        new.trees.iter().find(|t| t.file == edit.file)?,
    );
    let mut found: Option<Candidate> = None;
    let mut position = 0;
    for (doc, (a, b)) in old.documents.iter().zip(&new.documents).enumerate() {
        if a.file != b.file || a.index != b.index || a.item != b.item {
            return None;
        }
        let n = lowered_items(&a.doc)?;
        if a.file != edit.file {
            position += n;
            continue;
        }
        if found.is_none()
            && let Some(c) = edited_item(a, b, old_tree, new_tree, &edit, doc, position)
        {
            found = Some(c);
        } else if a.doc != b.doc {
            return None;
        }
        position += n;
    }
    // An edit in no item's text (a frame, a comment after the last node)
    // is the whole comparison's to judge.
    let found = found?;
    if position != items {
        return None;
    }
    let (x, y) = (&old.documents[found.doc].doc, &new.documents[found.doc].doc);
    let differs = match (item_of(x, &found), item_of(y, &found)) {
        (Some(p), Some(q)) => p != q,
        _ => return None,
    };
    Some((if differs { vec![found] } else { Vec::new() }, lines))
}

/// The candidate of a document of the edited file when the edit lies in
/// one of its items' text and everything else of the document provably
/// stays ([`narrowed`]); `None` otherwise.
fn edited_item(
    a: &LoadedDocument,
    b: &LoadedDocument,
    old_tree: &FileTree,
    new_tree: &FileTree,
    edit: &Edit<'_>,
    doc: usize,
    position: usize,
) -> Option<Candidate> {
    let (rules_a, rules_b) = (frame(&a.doc, &b.doc)?, rules(&b.doc)?);
    if rules_a.len() != rules_b.len()
        || !rules_a
            .iter()
            .zip(&rules_b)
            .all(|(x, y)| same_rule_frame(x, y))
    {
        return None;
    }
    let (root_a, root_b) = (
        old_tree.roots.get(a.index)?.as_ref()?,
        new_tree.roots.get(b.index)?.as_ref()?,
    );
    let (lists_a, lists_b) = (
        item_lists(root_a, a, &rules_a)?,
        item_lists(root_b, b, &rules_b)?,
    );
    // The item whose text holds the edit: the last to start at or before
    // it (items of different sections need not be in text order, so the
    // last of each list, found by binary search, then the last of those),
    // with its position among the document's items.
    let mut found: Option<(usize, TreeItem<'_>)> = None;
    let mut offset = 0;
    for list in &lists_a {
        debug_assert!(
            list.nodes.windows(2).all(|w| before(w[0].pos, w[1].pos)),
            "a sequence's items in text order"
        );
        let starting = list.nodes.partition_point(|n| !before(edit.start, n.pos));
        if let Some(index) = starting.checked_sub(1) {
            let node = &list.nodes[index];
            if found
                .as_ref()
                .is_none_or(|(_, f)| before(f.node.pos, node.pos))
            {
                let item = TreeItem {
                    spec: list.spec,
                    section: list.section,
                    index,
                    node,
                };
                found = Some((offset + index, item));
            }
        }
        offset += list.nodes.len();
    }
    let (at, item) = found?;
    let has_spec = match &a.doc {
        PolicyDocument::CiliumNetworkPolicy(p) => p.spec.is_some(),
        PolicyDocument::CiliumClusterwideNetworkPolicy(p) => p.spec.is_some(),
        _ => return None,
    };
    let bound = next_after(root_a, a, has_spec, &item)?;
    // The edit ends before the next node's line (so that node and every
    // later one keep their positions, their lines moved by what the edit
    // added or removed), and every item is where it was: at its position
    // when it starts before the edit, moved by those lines after it.
    let by = i64::from(edit.end_new.line) - i64::from(edit.end_old.line);
    // After the change, a line keeps its columns when the change ends
    // before it, or at its start in both texts (whole lines inserted or
    // removed before it).
    let at_line_start = edit.end_old.column == 1 && edit.end_new.column == 1;
    let after =
        |p: Pos| p.line > edit.end_old.line || (at_line_start && p.line == edit.end_old.line);
    let moved = |p: Pos| -> Option<Pos> {
        if !before(edit.start, p) {
            return Some(p);
        }
        after(p).then_some(())?;
        Some(Pos {
            line: u32::try_from(i64::from(p.line) + by).ok()?,
            column: p.column,
        })
    };
    let same_place = |x: &ItemList<'_>, y: &ItemList<'_>| {
        (x.spec, x.section) == (y.spec, y.section)
            && x.nodes.len() == y.nodes.len()
            && x.nodes
                .iter()
                .zip(y.nodes)
                .all(|(p, q)| moved(p.pos) == Some(q.pos))
    };
    if !after(bound)
        || lists_a.len() != lists_b.len()
        || !lists_a.iter().zip(&lists_b).all(|(x, y)| same_place(x, y))
    {
        return None;
    }
    let in_b = TreeItem {
        node: lists_b
            .iter()
            .find(|l| (l.spec, l.section) == (item.spec, item.section))?
            .nodes
            .get(item.index)?,
        ..item
    };
    if next_after(root_b, b, has_spec, &in_b) != Some(moved(bound)?) {
        return None;
    }
    // Position of the item in the text's span: the items before it in
    // `cilium_rules` and section order.
    Some(Candidate {
        doc,
        spec: item.spec,
        section: item.section,
        index: item.index,
        position: position + at,
    })
}

/// The model of candidate `c`'s item in `doc`, for comparing.
fn item_of<'a>(doc: &'a PolicyDocument, c: &Candidate) -> Option<RuleItemRef<'a>> {
    let rule = *rules(doc)?.get(c.spec)?;
    Some(match c.section {
        RuleSection::Ingress => RuleItemRef::Ingress(rule.ingress.as_ref()?.get(c.index)?),
        RuleSection::IngressDeny => {
            RuleItemRef::IngressDeny(rule.ingress_deny.as_ref()?.get(c.index)?)
        }
        RuleSection::Egress => RuleItemRef::Egress(rule.egress.as_ref()?.get(c.index)?),
        RuleSection::EgressDeny => {
            RuleItemRef::EgressDeny(rule.egress_deny.as_ref()?.get(c.index)?)
        }
    })
}

/// One item of a rule as the model has it (compared whole).
#[derive(PartialEq)]
enum RuleItemRef<'a> {
    Ingress(&'a IngressRule),
    IngressDeny(&'a IngressDenyRule),
    Egress(&'a EgressRule),
    EgressDeny(&'a EgressDenyRule),
}

/// Items a document lowers to, when each is one rule (CNP/CCNP rules with
/// an endpoint selector); `None` otherwise.
fn lowered_items(doc: &PolicyDocument) -> Option<usize> {
    let mut n = 0;
    for rule in rules(doc)? {
        rule.endpoint_selector.as_ref()?;
        n += section_lens(rule).iter().map(|(_, len)| len).sum::<usize>();
    }
    Some(n)
}

/// The number of items of each section, in `Rule::sections` order
/// (without viewing the items).
fn section_lens(rule: &Rule) -> [(RuleSection, usize); 4] {
    fn len<T>(list: Option<&Vec<T>>) -> usize {
        list.map_or(0, Vec::len)
    }
    [
        (RuleSection::Ingress, len(rule.ingress.as_ref())),
        (RuleSection::IngressDeny, len(rule.ingress_deny.as_ref())),
        (RuleSection::Egress, len(rule.egress.as_ref())),
        (RuleSection::EgressDeny, len(rule.egress_deny.as_ref())),
    ]
}

/// The rules of a CNP/CCNP (`spec`, then `specs`).
fn rules(doc: &PolicyDocument) -> Option<Vec<&Rule>> {
    match doc {
        PolicyDocument::CiliumNetworkPolicy(_)
        | PolicyDocument::CiliumClusterwideNetworkPolicy(_) => {
            Some(doc.cilium_rules().into_iter().map(|(_, r)| r).collect())
        }
        PolicyDocument::NetworkPolicy(_)
        | PolicyDocument::CiliumCidrGroup(_)
        | PolicyDocument::ClusterNetworkPolicy(_) => None,
    }
}

/// The old document's rules when both documents are the same kind with the
/// same frame (everything but the rules' items), else `None`.
fn frame<'a>(a: &'a PolicyDocument, b: &PolicyDocument) -> Option<Vec<&'a Rule>> {
    // The same fields of both kinds (a macro: the two are distinct types).
    macro_rules! same_frame {
        ($x:expr, $y:expr) => {
            $x.api_version == $y.api_version
                && $x.kind == $y.kind
                && $x.metadata == $y.metadata
                && $x.status == $y.status
                && $x.spec.is_some() == $y.spec.is_some()
                && $x.specs.as_ref().map(Vec::len) == $y.specs.as_ref().map(Vec::len)
        };
    }
    let same = match (a, b) {
        (PolicyDocument::CiliumNetworkPolicy(x), PolicyDocument::CiliumNetworkPolicy(y)) => {
            same_frame!(x, y)
        }
        (
            PolicyDocument::CiliumClusterwideNetworkPolicy(x),
            PolicyDocument::CiliumClusterwideNetworkPolicy(y),
        ) => same_frame!(x, y),
        _ => false,
    };
    if same { rules(a) } else { None }
}

/// Everything of a rule but its items is the same, and it has a subject
/// (so each item lowers to one rule).
fn same_rule_frame(x: &Rule, y: &Rule) -> bool {
    x.endpoint_selector.is_some()
        && x.endpoint_selector == y.endpoint_selector
        && x.node_selector == y.node_selector
        && x.labels == y.labels
        && x.enable_default_deny == y.enable_default_deny
        && x.description == y.description
        && x.log == y.log
}

/// Per section in lowering order: the indices of the items that differ and
/// the number of items; `None` when a section's length changed.
fn differing_items(x: &Rule, y: &Rule) -> Option<[(RuleSection, Vec<usize>, usize); 4]> {
    fn diff<T: PartialEq>(a: Option<&Vec<T>>, b: Option<&Vec<T>>) -> Option<(Vec<usize>, usize)> {
        let (a, b) = (
            a.map_or(&[][..], Vec::as_slice),
            b.map_or(&[][..], Vec::as_slice),
        );
        if a.len() != b.len() {
            return None;
        }
        let differing = (0..a.len()).filter(|i| a[*i] != b[*i]).collect();
        Some((differing, a.len()))
    }
    let (i, ilen) = diff(x.ingress.as_ref(), y.ingress.as_ref())?;
    let (id, idlen) = diff(x.ingress_deny.as_ref(), y.ingress_deny.as_ref())?;
    let (e, elen) = diff(x.egress.as_ref(), y.egress.as_ref())?;
    let (ed, edlen) = diff(x.egress_deny.as_ref(), y.egress_deny.as_ref())?;
    Some([
        (RuleSection::Ingress, i, ilen),
        (RuleSection::IngressDeny, id, idlen),
        (RuleSection::Egress, e, elen),
        (RuleSection::EgressDeny, ed, edlen),
    ])
}

/// The two texts differ only inside one line (the bytes between their
/// common prefix and suffix hold no line break in either, `\n` or the
/// `\r` the parser also counts as one): every node keeps its line, so every
/// origin's line is the same.
fn same_lines(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let prefix = common_prefix(a, b);
    let suffix = common_suffix(&a[prefix..], &b[prefix..]);
    let breaks = |r: &[u8]| r.contains(&b'\n') || r.contains(&b'\r');
    !breaks(&a[prefix..a.len() - suffix]) && !breaks(&b[prefix..b.len() - suffix])
}

#[cfg(test)]
mod tests {
    use porin_model::limits::LoadLimits;
    use porin_model::loader::{LoadOutcome, load_str};
    use proptest::prelude::*;

    use super::{
        Compared, Lines, changed_items, lowered_items, narrowed, relined, same_lines, whole,
    };
    use crate::inventory::Inventory;
    use crate::resolve::lower::{Lowered, Scope};

    /// No inventory, no CIDR groups, no log cookies.
    fn empty<R>(f: impl FnOnce(Scope<'_>) -> R) -> R {
        f(Lowered::default().scope(&Inventory::new()))
    }

    #[test]
    fn same_lines_sees_only_line_breaks_in_the_change() {
        assert!(same_lines(
            "a: 1\nb: 10000\nc: 3\n",
            "a: 1\nb: 9999\nc: 3\n"
        ));
        assert!(same_lines("x\n", "x\n"));
        assert!(!same_lines("a: 1\nb: 2\n", "a: 1\n\nb: 2\n"));
        assert!(!same_lines("a: 1\nb: 2\n", "a: 1\n"));
        // The common suffix may not overlap the common prefix.
        assert!(!same_lines("aa\na", "aa\naa\na"));
    }

    /// A text with two documents, `spec` and `specs`, every section, block
    /// and flow items, comments between and after items.
    fn text(ports: &[u16]) -> String {
        let p = |i: usize| ports[i % ports.len()];
        format!(
            "# policies\n\
             apiVersion: cilium.io/v2\n\
             kind: CiliumNetworkPolicy\n\
             metadata: {{name: one, namespace: prod}}\n\
             spec:\n\
             \x20 endpointSelector: {{matchLabels: {{app: a}}}}\n\
             \x20 ingress:\n\
             \x20 - fromEndpoints:\n\
             \x20   - matchLabels: {{app: b}}\n\
             \x20   toPorts:\n\
             \x20   - ports:\n\
             \x20     - port: \"{}\"\n\
             \x20       protocol: TCP\n\
             \x20 # between\n\
             \x20 - fromEndpoints: [{{matchLabels: {{app: c}}}}]\n\
             \x20   toPorts: [{{ports: [{{port: \"{}\", protocol: UDP}}]}}]\n\
             \x20 egress:\n\
             \x20 - toEndpoints: [{{matchLabels: {{app: b}}}}]\n\
             \x20   toPorts: [{{ports: [{{port: \"{}\", protocol: TCP}}]}}]\n\
             \x20 # after the last item\n\
             ---\n\
             apiVersion: cilium.io/v2\n\
             kind: CiliumNetworkPolicy\n\
             metadata:\n\
             \x20 name: two\n\
             \x20 namespace: prod\n\
             specs:\n\
             - endpointSelector: {{matchLabels: {{app: b}}}}\n\
             \x20 egressDeny:\n\
             \x20 - toEndpoints: [{{matchLabels: {{app: c}}}}]\n\
             \x20   toPorts: [{{ports: [{{port: \"{}\", protocol: TCP}}]}}]\n\
             \x20 ingressDeny:\n\
             \x20 - fromEndpoints: [{{matchLabels: {{app: a}}}}]\n\
             - endpointSelector: {{matchLabels: {{app: c}}}}\n\
             \x20 ingress:\n\
             \x20   - fromEndpoints: [{{matchLabels: {{app: a}}}}]\n\
             \x20     toPorts: [{{ports: [{{port: \"{}\", protocol: TCP}}]}}]\n\
             \x20   - fromEndpoints: [{{matchLabels: {{app: b}}}}]\n\
             \x20 egress: []\n",
            p(0),
            p(1),
            p(2),
            p(3),
            p(4),
        )
    }

    fn load(yaml: &str) -> LoadOutcome {
        load_str("t.yaml", yaml, &LoadLimits::default())
    }

    /// Applies edit `kind` at character `at` of line `line` (both taken
    /// modulo the text's size); `None` when that adds or removes a line
    /// break.
    fn edit(text: &str, line: usize, at: usize, kind: u8, with: char) -> Option<String> {
        let lines: Vec<&str> = text.split('\n').collect();
        let line = line % lines.len();
        let mut chars: Vec<char> = lines[line].chars().collect();
        let at = at % (chars.len() + 1);
        match kind % 3 {
            0 => chars.insert(at, with),
            1 if at < chars.len() => chars[at] = with,
            _ if at < chars.len() => {
                chars.remove(at);
            }
            _ => chars.insert(at, with),
        }
        let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        out[line] = chars.into_iter().collect();
        let out = out.join("\n");
        (out.matches('\n').count() == text.matches('\n').count()).then_some(out)
    }

    /// Lines [`narrowed_lines_agree_with_relined`] inserts.
    const LINES: &[&str] = &[
        "\n",
        "# a comment\n",
        "          # deeper\n",
        "        - port: \"81\"\n",
        "          protocol: UDP\n",
        "      - port: \"82\"\n",
        "    - {}\n",
    ];

    fn positions(c: &[super::Candidate]) -> Vec<usize> {
        c.iter().map(|c| c.position).collect()
    }

    /// Every item's line (span position, line) of a one-file outcome.
    fn item_lines(outcome: &LoadOutcome) -> Vec<(usize, u32)> {
        let mut lines = Vec::new();
        let mut at = 0;
        for doc in &outcome.documents {
            let rules = super::rules(&doc.doc).unwrap();
            let root = outcome.trees[0].roots[doc.index].as_ref().unwrap();
            at = super::push_lines(&mut lines, root, doc, &rules, at).unwrap();
        }
        lines
    }

    /// The characters edits use: YAML's indicators, blanks, digits, a
    /// letter, a multi-byte character.
    const WITH: &[char] = &[
        ' ', '-', '#', ':', '"', '\'', '[', ']', '{', '}', ',', '?', '&', '*', '!', '|', '>', '%',
        '@', '\t', '0', '7', 'x', 'é', '1', '2', '5', 'a', 'b', 'c', 'z',
    ];

    #[test]
    fn a_port_edit_is_narrowed_to_its_item() {
        let (inventory, lowered) = (Inventory::new(), Lowered::default());
        let scope = lowered.scope(&inventory);
        let old = load(&text(&[80, 443, 53, 8080, 9090]));
        let new = load(&text(&[81, 443, 53, 8080, 9090]));
        let items = lowered_items(&old.documents[0].doc).unwrap()
            + lowered_items(&old.documents[1].doc).unwrap();
        let changed = changed_items(&old, &new, scope, items, 2).unwrap();
        assert_eq!(changed.compared, Compared::Narrowed);
        assert_eq!(changed.lines, Lines::Same);
        assert_eq!(
            changed.items.iter().map(|c| c.position).collect::<Vec<_>>(),
            vec![0]
        );
        // A comment edit changes nothing, narrowed too.
        let commented = load(&text(&[80, 443, 53, 8080, 9090]).replace("# between", "# betwixt"));
        let changed = changed_items(&old, &commented, scope, items, 2).unwrap();
        assert_eq!(
            (changed.items.len(), changed.compared),
            (0, Compared::Narrowed)
        );
        // A port added on lines of its own to item 0 (two lines more):
        // narrowed too, the later origins' lines moved by two.
        let ported = load(&text(&[80, 443, 53, 8080, 9090]).replace(
            "       protocol: TCP\n",
            "       protocol: TCP\n      - port: \"81\"\n        protocol: TCP\n",
        ));
        assert!(!ported.has_errors(), "{:?}", ported.diagnostics);
        let changed = changed_items(&old, &ported, scope, items, 2).unwrap();
        assert_eq!(changed.compared, Compared::Narrowed);
        assert_eq!(changed.lines, Lines::Shift { from: 14, by: 2 });
        assert_eq!(
            changed.items.iter().map(|c| c.position).collect::<Vec<_>>(),
            vec![0]
        );
        // The last item of `specs[1]` (its bound: the document's end) is
        // compared whole.
        let last = load(&text(&[80, 443, 53, 8080, 9090]).replace("egress: []", "egress: [ ]"));
        assert!(narrowed(&old, &last, items).is_none());
    }

    /// A carriage return outside a CRLF is a line break to the parser, not
    /// to the byte-derived lines of the narrowed comparison: with one before
    /// the edit, the edit's line named the item before the edited one
    /// (found by review: the session kept the old port open). Such a file
    /// is compared whole.
    #[test]
    fn a_lone_carriage_return_is_not_narrowed() {
        let text = |port: &str| {
            format!(
                "# policy\r# owner: a\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: p, namespace: ns}}\nspec:\n  endpointSelector: {{}}\n  ingress:\n  - toPorts: [{{ports: [{{port: \"22\", protocol: TCP}}]}}]\n  - toPorts: [{{ports: [{{port: \"{port}\", protocol: TCP}}]}}]\n  - toPorts: [{{ports: [{{port: \"443\", protocol: TCP}}]}}]\n"
            )
        };
        assert_compared_whole(&text("80"), &text("81"), &[1]);
    }

    /// `new` (from `old`, both one CNP document without load findings) is
    /// not narrowed, and the whole comparison finds the items at
    /// `positions`.
    fn assert_compared_whole(old: &str, new: &str, positions: &[usize]) {
        let (old, new) = (load(old), load(new));
        assert!(
            !old.has_errors() && !new.has_errors(),
            "{:?}",
            old.diagnostics
        );
        let items = lowered_items(&old.documents[0].doc).unwrap();
        assert!(narrowed(&old, &new, items).is_none());
        let changed = empty(|scope| changed_items(&old, &new, scope, items, 2)).unwrap();
        assert_eq!(changed.compared, Compared::Whole);
        assert_eq!(
            changed.items.iter().map(|c| c.position).collect::<Vec<_>>(),
            positions
        );
    }

    /// An edit of an anchored node inside one item changes the items that
    /// hold its aliases too: the narrowed comparison (which compares the
    /// edited item alone) must not answer, the whole one finds both. (It
    /// answered with the edited item alone, and the session kept the
    /// alias's old peer: an over-allow.)
    #[test]
    fn an_anchor_edit_reaches_its_aliases() {
        let text = |app: &str| {
            format!(
                "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: p, namespace: prod}}\nspec:\n  endpointSelector: {{matchLabels: {{app: s}}}}\n  ingress:\n  - fromEndpoints: [&sel {{matchLabels: {{app: {app}}}}}]\n  - fromEndpoints: [*sel]\n    toPorts: [{{ports: [{{port: \"80\", protocol: TCP}}]}}]\n"
            )
        };
        assert_compared_whole(&text("a"), &text("b"), &[0, 1]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
        ))]
        /// Wherever the narrowed comparison answers, the whole comparison
        /// gives the same items (and it must answer for port edits).
        #[test]
        fn narrowed_agrees_with_whole(
            ports in prop::collection::vec(1u16..65535, 5),
            line in 0usize..64,
            at in 0usize..64,
            kind in 0u8..3,
            with in prop::sample::select(WITH),
        ) {
            let base = text(&ports);
            let old = load(&base);
            prop_assert!(!old.has_errors(), "{:?}", old.diagnostics);
            let items = old
                .documents
                .iter()
                .map(|d| lowered_items(&d.doc).unwrap())
                .sum::<usize>();
            let Some(edited) = edit(&base, line, at, kind, with) else {
                return Ok(());
            };
            let new = load(&edited);
            if new.has_errors() {
                return Ok(());
            }
            if let Some((narrow, _)) = narrowed(&old, &new, items) {
                let full = whole(&old, &new, items);
                prop_assert!(full.is_some(), "narrowed, but not local:\n{edited}");
                prop_assert_eq!(positions(&narrow), positions(&full.unwrap()), "{}", edited);
            }
        }

        /// Lines inserted or removed: wherever the narrowed comparison
        /// answers, the comparison of every item (`relined`) gives the
        /// same items, and its lines, read from the new tree, are the old
        /// ones moved by the narrowed shift.
        #[test]
        fn narrowed_lines_agree_with_relined(
            ports in prop::collection::vec(1u16..65535, 5),
            line in 0usize..64,
            inserted in prop::sample::select(LINES),
            remove in any::<bool>(),
        ) {
            let base = text(&ports);
            let old = load(&base);
            let items = old
                .documents
                .iter()
                .map(|d| lowered_items(&d.doc).unwrap())
                .sum::<usize>();
            let mut lines: Vec<&str> = base.split_inclusive('\n').collect();
            let at = line % lines.len();
            if remove {
                lines.remove(at);
            } else {
                lines.insert(at, inserted);
            }
            let edited = lines.concat();
            let new = load(&edited);
            if new.has_errors() {
                return Ok(());
            }
            if let Some((narrow, shift)) = narrowed(&old, &new, items) {
                let full = relined(&old, &new, items);
                prop_assert!(full.is_some(), "narrowed, not relined:\n{edited}");
                let (full, read) = full.unwrap();
                prop_assert_eq!(positions(&narrow), positions(&full), "{}", edited);
                let moved: Vec<(usize, u32)> = item_lines(&old)
                    .into_iter()
                    .map(|(at, line)| (at, shift.shifted(line)))
                    .collect();
                prop_assert_eq!(moved, read, "{}", edited);
            }
        }
    }
}
