//! Baselines: `porin lint --write-baseline FILE` records today's findings,
//! `porin lint --baseline FILE` reports only the findings not recorded, and
//! the recorded entries no longer found ("stale": fixed, or their policy
//! removed) as notes.
//!
//! A finding's [`Fingerprint`] is its file, the object it is about (kind,
//! namespace and name, read from the document's YAML tree, so reordering
//! the documents of a file or the items of a `List` keeps it), its field
//! route inside that object, its code and its message with file positions
//! blanked ([`normalise_message`]). Line and column never enter it: adding a
//! comment or moving a document does not make old findings new. Renaming a
//! policy, reordering its rules (the route holds rule indexes) or changing
//! what a message names does.
//!
//! The file is JSON with a `version` field and the entries sorted, one
//! field per line, so a baseline diff is reviewable. Entries are a set: a
//! fingerprint is either recorded or not (findings the lint reports twice
//! for one place and message are one finding already).
//!
//! Stale entries never fail the run (as in Checkov and Semgrep): a stale
//! entry means something got better; `--write-baseline` prunes them.

use std::collections::BTreeSet;

use porin_model::diagnostic::{Diagnostic, Location, Severity};
use porin_model::loader::FileTree;
use porin_model::yaml::tree::{Node, NodeKind};
use porin_model::{CodeInfo, Stage};
use serde::{Deserialize, Serialize};

/// The version of the baseline file format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// The largest baseline file read (bytes): far above any real one (an
/// entry is ~300 bytes), low enough that a wrong file is refused cheaply.
pub const MAX_BASELINE_BYTES: usize = 64 * 1024 * 1024;

/// `PR021`: a baseline entry matches no finding any more.
pub const STALE_ENTRY: CodeInfo = CodeInfo {
    code: "PR021",
    name: "baseline-entry-stale",
    severity: Severity::Info,
    stage: Stage::Lint,
    needs_inventory: false,
    summary: "A `--baseline` entry matches no finding any more (fixed, or its policy removed); `--write-baseline` removes it. Never fails the run.",
    doc: None,
};

/// What identifies a finding across edits that do not change it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// Display path of the file (`./` stripped); empty for findings about
    /// no file.
    pub file: String,
    /// The object's `kind`, when its document has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The object's `metadata.namespace`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's `metadata.name`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The field route inside the object (without a `List`'s `items[N]`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub route: String,
    /// The code, e.g. `PR004`.
    pub code: String,
    /// The message, normalised by [`normalise_message`].
    pub message: String,
}

impl Fingerprint {
    /// The fingerprint of a finding; `trees` are the loaded files' YAML
    /// trees ([`porin_model::LoadOutcome::trees`]), where the object is read.
    pub fn of(diagnostic: &Diagnostic, trees: &[FileTree]) -> Self {
        let message = normalise_message(&diagnostic.message);
        let code = diagnostic.code.to_owned();
        let Some(at) = &diagnostic.primary else {
            return Fingerprint {
                file: String::new(),
                kind: None,
                namespace: None,
                name: None,
                route: String::new(),
                code,
                message,
            };
        };
        let (object, route) = object_of(at, trees);
        let text = |node: Option<&Node>| node.and_then(Node::as_scalar).map(str::to_owned);
        let metadata = object.and_then(|o| o.get("metadata"));
        Fingerprint {
            file: normalise_file(&at.file),
            kind: text(object.and_then(|o| o.get("kind"))),
            namespace: text(metadata.and_then(|m| m.get("namespace"))),
            name: text(metadata.and_then(|m| m.get("name"))),
            route,
            code,
            message,
        }
    }

    /// `file: Kind namespace/name route CODE`, for messages.
    pub fn describe(&self) -> String {
        let mut text = if self.file.is_empty() {
            String::from("(no file)")
        } else {
            self.file.clone()
        };
        if let Some(kind) = &self.kind {
            text.push_str(&format!(": {kind}"));
        }
        match (&self.namespace, &self.name) {
            (Some(ns), Some(name)) => text.push_str(&format!(" {ns}/{name}")),
            (None, Some(name)) => text.push_str(&format!(" {name}")),
            _ => {}
        }
        if !self.route.is_empty() {
            text.push_str(&format!(" at {}", self.route));
        }
        text.push_str(&format!(" {}", self.code));
        text
    }
}

/// The display path without a leading `./`, so `porin lint ./p` and
/// `porin lint p` share a baseline.
pub fn normalise_file(file: &str) -> String {
    let mut file = file;
    while let Some(rest) = file.strip_prefix("./") {
        file = rest;
    }
    file.to_owned()
}

/// The object a location is in and the route inside it: the document's
/// root, or the `items[N]` of a `List` the route starts with.
fn object_of<'t>(at: &Location, trees: &'t [FileTree]) -> (Option<&'t Node>, String) {
    let root = trees
        .iter()
        .find(|t| t.file == at.file)
        .and_then(|t| t.roots.get(at.document))
        .and_then(Option::as_ref);
    let Some(rest) = at.route.strip_prefix("items[") else {
        return (root, at.route.clone());
    };
    let Some((index, rest)) = rest.split_once(']') else {
        return (root, at.route.clone());
    };
    let item = index
        .parse::<usize>()
        .ok()
        .and_then(|index| match &root?.get("items")?.kind {
            NodeKind::Sequence(items) => items.get(index),
            _ => None,
        });
    match item {
        Some(item) => (Some(item), rest.trim_start_matches('.').to_owned()),
        None => (root, at.route.clone()),
    }
}

/// The message with whitespace runs collapsed and file positions blanked:
/// `a.yaml:12:3` and `a.yaml:12` become `a.yaml:_`, `line 12` becomes
/// `line _`, so a finding that names another place keeps its fingerprint
/// when that place moves.
pub fn normalise_message(message: &str) -> String {
    let words: Vec<&str> = message.split_whitespace().collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        let after_line = i > 0 && words[i - 1].eq_ignore_ascii_case("line");
        let digits_end = word
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(word.len());
        if after_line && digits_end > 0 {
            out.push(format!("_{}", &word[digits_end..]));
        } else {
            out.push(blank_positions(word));
        }
    }
    out.join(" ")
}

/// `x.yaml:12:3)` → `x.yaml:_)`, for the file extensions porin reads.
fn blank_positions(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(colon) = rest.find(':') {
        let (head, tail) = rest.split_at(colon);
        out.push_str(head);
        let is_file = [".yaml", ".yml", ".json"]
            .iter()
            .any(|ext| head.ends_with(ext))
            || head.ends_with("<stdin>");
        let mut after = &tail[1..];
        let starts_digit = after.starts_with(|c: char| c.is_ascii_digit());
        if is_file && starts_digit {
            // One or two `:digits` groups.
            for _ in 0..2 {
                let end = after
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(after.len());
                if end == 0 {
                    break;
                }
                after = &after[end..];
                match after.strip_prefix(':') {
                    Some(next) if next.starts_with(|c: char| c.is_ascii_digit()) => after = next,
                    _ => break,
                }
            }
            out.push_str(":_");
        } else {
            out.push(':');
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A baseline file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// The recorded findings, sorted, without repeats.
    pub findings: Vec<Fingerprint>,
}

/// Why a baseline file could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BaselineError {
    /// Not JSON of the baseline's shape.
    #[error("{file}:{line}:{column}: not a porin baseline: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was wrong.
        message: String,
    },
    /// A version this build does not read.
    #[error(
        "{file}: baseline version {version} is not supported (this porin reads version {FORMAT_VERSION}); write it again with --write-baseline"
    )]
    Version {
        /// The file.
        file: String,
        /// The version it declares.
        version: u32,
    },
    /// Larger than [`MAX_BASELINE_BYTES`].
    #[error("{file}: {bytes} bytes is more than a baseline may hold ({MAX_BASELINE_BYTES})")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size.
        bytes: usize,
    },
}

/// The findings of a run split by a baseline.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Applied {
    /// Findings not in the baseline, in their order.
    pub new: Vec<Diagnostic>,
    /// How many findings the baseline matched (not reported).
    pub baselined: usize,
    /// Entries in the scope that matched no finding, sorted.
    pub stale: Vec<Fingerprint>,
}

impl Baseline {
    /// A baseline recording these fingerprints.
    pub fn new(fingerprints: impl IntoIterator<Item = Fingerprint>) -> Self {
        let set: BTreeSet<Fingerprint> = fingerprints.into_iter().collect();
        Baseline {
            version: FORMAT_VERSION,
            findings: set.into_iter().collect(),
        }
    }

    /// The file's text: pretty JSON, sorted, with a final newline.
    pub fn to_json(&self) -> String {
        // A struct of strings always serialises.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads a baseline file; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, BaselineError> {
        if text.len() > MAX_BASELINE_BYTES {
            return Err(BaselineError::TooLarge {
                file: file.to_owned(),
                bytes: text.len(),
            });
        }
        // The version first, so a future format is refused by its version,
        // not by its first unknown field.
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let syntax = |e: serde_json::Error| BaselineError::Syntax {
            file: file.to_owned(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        };
        let versioned: Versioned = serde_json::from_str(text).map_err(syntax)?;
        if versioned.version != FORMAT_VERSION {
            return Err(BaselineError::Version {
                file: file.to_owned(),
                version: versioned.version,
            });
        }
        let baseline: Baseline = serde_json::from_str(text).map_err(syntax)?;
        // Sorted and without repeats whatever the file held.
        Ok(Baseline::new(baseline.findings))
    }

    /// Splits `findings` into new and baselined ones; the entries whose
    /// file is `in_scope` and that match none are stale. Entries of files
    /// outside the scope (not linted in this run, e.g. a pre-commit run on
    /// the changed files) are neither.
    pub fn apply(
        &self,
        findings: Vec<Diagnostic>,
        trees: &[FileTree],
        in_scope: impl Fn(&str) -> bool,
    ) -> Applied {
        let recorded: BTreeSet<&Fingerprint> = self.findings.iter().collect();
        let mut matched: BTreeSet<&Fingerprint> = BTreeSet::new();
        let mut applied = Applied::default();
        for finding in findings {
            let fingerprint = Fingerprint::of(&finding, trees);
            if let Some(entry) = recorded.get(&fingerprint) {
                matched.insert(entry);
                applied.baselined += 1;
            } else {
                applied.new.push(finding);
            }
        }
        applied.stale = self
            .findings
            .iter()
            .filter(|entry| !matched.contains(entry) && in_scope(&entry.file))
            .cloned()
            .collect();
        applied
    }
}

/// The note a stale entry is reported as (`PR021`, at no location: the
/// finding is gone).
pub fn stale_diagnostic(baseline_file: &str, entry: &Fingerprint) -> Diagnostic {
    let mut d = Diagnostic::new(
        STALE_ENTRY,
        format!(
            "baseline entry no longer found: {} ({})",
            entry.describe(),
            entry.message
        ),
    );
    d.notes.push(format!("recorded in {baseline_file}"));
    d.help = Some(format!(
        "run with --write-baseline {baseline_file} to remove it"
    ));
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use porin_model::loader::load_str;

    const TWO: &str = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: a
  namespace: prod
spec:
  endpointSelector: {}
---
apiVersion: v1
kind: List
items:
- apiVersion: cilium.io/v2
  kind: CiliumNetworkPolicy
  metadata:
    name: b
  spec:
    endpointSelector: {}
";

    fn finding(file: &str, document: usize, line: u32, route: &str) -> Diagnostic {
        let mut d = Diagnostic::new(STALE_ENTRY, "something at p.yaml:4:2 on line 7");
        d.code = "PR004";
        d.primary = Some(Location {
            file: file.into(),
            document,
            line,
            column: 3,
            route: route.into(),
        });
        d
    }

    fn trees(text: &str) -> Vec<FileTree> {
        load_str("p.yaml", text, &porin_model::LoadLimits::default()).trees
    }

    #[test]
    fn the_object_comes_from_the_tree_and_lines_do_not_count() {
        let trees = trees(TWO);
        let a = Fingerprint::of(&finding("p.yaml", 0, 7, "spec.ingress[0]"), &trees);
        assert_eq!(a.file, "p.yaml");
        assert_eq!(normalise_file("././p.yaml"), "p.yaml");
        assert_eq!(a.kind.as_deref(), Some("CiliumNetworkPolicy"));
        assert_eq!(a.namespace.as_deref(), Some("prod"));
        assert_eq!(a.name.as_deref(), Some("a"));
        assert_eq!(a.route, "spec.ingress[0]");
        assert_eq!(a.message, "something at p.yaml:_ on line _");
        let moved = Fingerprint::of(&finding("p.yaml", 0, 70, "spec.ingress[0]"), &trees);
        assert_eq!(a, moved);
        let b = Fingerprint::of(&finding("p.yaml", 1, 15, "items[0].spec"), &trees);
        assert_eq!(b.name.as_deref(), Some("b"));
        assert_eq!(b.kind.as_deref(), Some("CiliumNetworkPolicy"));
        assert_eq!(b.route, "spec");
    }

    #[test]
    fn reordered_documents_keep_their_fingerprints() {
        let (first, second) = TWO.split_once("---\n").unwrap();
        let swapped = format!("{second}---\n{first}");
        let before = Fingerprint::of(&finding("p.yaml", 0, 7, "spec"), &trees(TWO));
        let after = Fingerprint::of(&finding("p.yaml", 1, 17, "spec"), &trees(&swapped));
        assert_eq!(before, after);
        let other = Fingerprint::of(&finding("p.yaml", 0, 7, "spec"), &trees(&swapped));
        assert_ne!(before, other, "the document now first is another object");
    }

    #[test]
    fn apply_splits_new_baselined_and_stale_in_scope() {
        let trees = trees(TWO);
        let old = finding("p.yaml", 0, 7, "spec.a");
        let gone = finding("p.yaml", 0, 9, "spec.gone");
        let elsewhere = finding("q.yaml", 0, 9, "spec");
        let baseline = Baseline::new(
            [&old, &gone, &elsewhere]
                .iter()
                .map(|d| Fingerprint::of(d, &trees)),
        );
        let new = finding("p.yaml", 0, 8, "spec.b");
        let applied = baseline.apply(vec![old.clone(), new.clone()], &trees, |f| f == "p.yaml");
        assert_eq!(applied.new, vec![new]);
        assert_eq!(applied.baselined, 1);
        assert_eq!(applied.stale.len(), 1);
        assert_eq!(applied.stale[0].route, "spec.gone");
        let note = stale_diagnostic("b.json", &applied.stale[0]);
        assert_eq!(note.code, "PR021");
        assert_eq!(note.severity, Severity::Info);
        assert!(
            note.message
                .contains("p.yaml: CiliumNetworkPolicy prod/a at spec.gone PR004")
        );
    }

    #[test]
    fn the_file_round_trips_sorted_and_refuses_other_versions() {
        let trees = trees(TWO);
        let baseline = Baseline::new(
            [
                finding("p.yaml", 1, 1, "items[0].spec"),
                finding("p.yaml", 0, 1, "spec"),
            ]
            .iter()
            .map(|d| Fingerprint::of(d, &trees)),
        );
        let text = baseline.to_json();
        assert!(text.starts_with("{\n  \"version\": 1,\n"), "{text}");
        // Sorted by file, kind, then namespace: `b` has none, so it is first.
        assert!(text.find("\"name\": \"b\"") < text.find("\"name\": \"a\""));
        assert_eq!(Baseline::parse("b.json", &text), Ok(baseline.clone()));
        let v2 = text.replace("\"version\": 1", "\"version\": 2");
        assert!(matches!(
            Baseline::parse("b.json", &v2),
            Err(BaselineError::Version { version: 2, .. })
        ));
        let bad = Baseline::parse("b.json", "{\"version\": 1, \"findings\": [{\"file\": 3}]}");
        let Err(BaselineError::Syntax { line, column, .. }) = bad else {
            panic!("{bad:?}")
        };
        assert_eq!((line, column), (1, 38));
        let unknown = Baseline::parse("b.json", "{\"version\": 1, \"findings\": [], \"x\": 1}");
        assert!(matches!(unknown, Err(BaselineError::Syntax { .. })));
    }

    #[test]
    fn positions_are_blanked_only_after_file_names() {
        assert_eq!(
            normalise_message("port 8080:80 of a.yml:3"),
            "port 8080:80 of a.yml:_"
        );
        assert_eq!(
            normalise_message("see  <stdin>:1:2,  x"),
            "see <stdin>:_, x"
        );
        assert_eq!(normalise_message("Line 4: ok"), "Line _: ok");
        assert_eq!(normalise_message("fd00::1 a.json:x"), "fd00::1 a.json:x");
    }
}
