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
//! lowering had diagnostics, an item with CIDR prefixes: the prefix set is
//! the text's, not the item's) gives `None`, and the session lowers the
//! whole text as before.

use porin_model::loader::LoadOutcome;
use porin_model::model::{PolicyDocument, Rule, RuleSection};

use crate::inventory::Inventory;
use crate::resolve::lower::{Origin, PolicyInput, lower_cilium_item};
use crate::resolve::rule::PolicyRule;

/// One re-lowered item: its position in the text's span (rule and origin
/// alike), its rule and its origin (ids already moved to `origin_start +
/// position`).
pub(super) struct ItemLowering {
    pub position: usize,
    pub rule: PolicyRule,
    pub origin: Origin,
}

/// The items of `new` that differ from `old`, lowered, when the rest of the
/// text's lowering provably stays as it is (module docs); `items` is the
/// number of items (= rules = origins) of the old text's span and
/// `origin_start` the id of its first origin.
pub(super) fn changed_items(
    old: &LoadOutcome,
    new: &LoadOutcome,
    inventory: &Inventory,
    items: usize,
    origin_start: usize,
) -> Option<Vec<ItemLowering>> {
    if old.documents.len() != new.documents.len() {
        return None;
    }
    // Every file of the text, changed documents or not: an unchanged
    // document below a new line break still moves.
    let mut files: Vec<&str> = new.documents.iter().map(|d| d.file.as_str()).collect();
    files.dedup();
    for file in files {
        if !same_lines(old.sources.get(file)?, new.sources.get(file)?) {
            return None;
        }
    }
    let mut position = 0;
    let mut out = Vec::new();
    for (a, b) in old.documents.iter().zip(&new.documents) {
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
                    let at = position + index;
                    let input =
                        |outcome: &'_ LoadOutcome, doc: &'_ porin_model::loader::LoadedDocument| {
                            lower_cilium_item(
                                &PolicyInput {
                                    file: &doc.file,
                                    document: doc.index,
                                    item: doc.item,
                                    policy: &doc.doc,
                                    source: Some(outcome),
                                },
                                inventory,
                                spec,
                                section,
                                index,
                            )
                        };
                    let before = input(old, a);
                    let mut after = input(new, b);
                    let simple = |l: &crate::resolve::lower::Lowered| {
                        l.rules.len() == 1
                            && l.origins.len() == 1
                            && l.diagnostics.is_empty()
                            && l.prefixes.is_empty()
                            && l.cookies.is_empty()
                    };
                    if !simple(&before) || !simple(&after) {
                        return None;
                    }
                    let id = u32::try_from(origin_start + at).ok()?;
                    let mut rule = after.rules.pop()?;
                    let mut origin = after.origins.pop()?;
                    rule.origin = id;
                    origin.id = id;
                    out.push(ItemLowering {
                        position: at,
                        rule,
                        origin,
                    });
                }
                position += len;
            }
        }
    }
    (position == items).then_some(out)
}

/// Items a document lowers to, when each is one rule (CNP/CCNP rules with
/// an endpoint selector); `None` otherwise.
fn lowered_items(doc: &PolicyDocument) -> Option<usize> {
    let mut n = 0;
    for rule in rules(doc)? {
        rule.endpoint_selector.as_ref()?;
        n += rule
            .sections()
            .iter()
            .map(|(_, items)| items.len())
            .sum::<usize>();
    }
    Some(n)
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
/// common prefix and suffix hold no line break in either): every node
/// keeps its line, so every origin's line is the same.
fn same_lines(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    !a[prefix..a.len() - suffix].contains(&b'\n') && !b[prefix..b.len() - suffix].contains(&b'\n')
}

#[cfg(test)]
mod tests {
    use super::same_lines;

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
}
