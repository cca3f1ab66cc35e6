//! The repository stands alone: no tracked file refers to a document
//! outside it, every `semantics.md §N` citation names a section that
//! `docs/semantics.md` has, and every Markdown link into `docs/` resolves.
//!
//! The one outside path allowed is the optional example corpus, and only in
//! the tests that read it when it is present (`CORPUS_READERS`).
//!
//! The other checks of the repository's shape share this test binary (one
//! binary, not one per check): [`module_graph`], no import cycles between
//! the files of a crate.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on I/O errors")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

mod module_graph;

/// The tests that read the optional corpus beside the clone; only they may
/// name its path.
const CORPUS_READERS: &[&str] = &[
    "crates/cli/tests/cli/cilium_version.rs",
    "crates/compiler/tests/compiler/corpus.rs",
    "crates/lint/tests/lint/verify_corpus.rs",
    "crates/policy-model/tests/model/corpus.rs",
];

/// This file names the forbidden references; it is not checked.
const SELF: &str = "crates/policy-model/tests/model/docs_standalone.rs";

/// References to the directory outside the repository.
const OUTSIDE_PATHS: &[&str] = &["shared/docs", "../shared", "/work/shared"];

/// The corpus path, allowed in `CORPUS_READERS` only.
const CORPUS_PATH: &str = "shared/corpus";

/// Names of documents that lived outside the repository; a reference to one
/// is an error unless the repository has a file of that name.
const OUTSIDE_DOCUMENTS: &[&str] = &["policy-test-format.md", "toolchain.md", "style.md"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Tracked files (`git ls-files`), or every file of the tree without
/// `target/` and `.git/` when git is not available (a source archive).
fn tracked_files() -> Vec<String> {
    let root = root();
    let listed = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["ls-files", "-z"])
        .output();
    if let Ok(output) = listed
        && output.status.success()
    {
        return String::from_utf8(output.stdout)
            .unwrap()
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
    }
    let mut files = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && name != ".git" {
                    pending.push(path);
                }
            } else {
                let relative = path.strip_prefix(&root).unwrap();
                files.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    files.sort();
    files
}

/// The text of every tracked file that is UTF-8 (binaries are skipped).
fn texts() -> Vec<(String, String)> {
    let root = root();
    tracked_files()
        .into_iter()
        .filter_map(|file| {
            let bytes = std::fs::read(root.join(&file)).ok()?;
            let text = String::from_utf8(bytes).ok()?;
            Some((file, text))
        })
        .collect()
}

#[test]
fn no_file_refers_to_documents_outside_the_repository() {
    let files = tracked_files();
    let texts = texts();
    assert!(
        texts.len() > 100,
        "only {} files found under {}",
        texts.len(),
        root().display()
    );
    let missing: Vec<&str> = OUTSIDE_DOCUMENTS
        .iter()
        .copied()
        .filter(|document| {
            !files
                .iter()
                .any(|f| f == document || f.ends_with(&format!("/{document}")))
        })
        .collect();
    let mut problems = Vec::new();
    for (file, text) in texts.iter().filter(|(file, _)| file != SELF) {
        let reads_corpus = CORPUS_READERS.contains(&file.as_str());
        for (number, line) in text.lines().enumerate() {
            let at = format!("{file}:{}", number + 1);
            for outside in OUTSIDE_PATHS {
                // A corpus reader locates the corpus beside the clone
                // (`../shared`); documents stay forbidden there too.
                if line.contains(outside) && !(reads_corpus && *outside == "../shared") {
                    problems.push(format!("{at}: `{outside}`: {}", line.trim()));
                }
            }
            if line.contains(CORPUS_PATH) && !reads_corpus {
                problems.push(format!(
                    "{at}: the corpus path outside the tests that read it: {}",
                    line.trim()
                ));
            }
            for document in &missing {
                if contains_word(line, document) {
                    problems.push(format!(
                        "{at}: `{document}` is not in the repository (docs/policy-tests.md, docs/semantics.md): {}",
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "references to documents outside the repository:\n{}",
        problems.join("\n")
    );
}

/// `name` occurs in `line` not as the tail of a longer file name
/// (`my-style.md` does not count as `style.md`).
fn contains_word(line: &str, name: &str) -> bool {
    line.match_indices(name).any(|(i, _)| {
        line[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'))
    })
}

/// The numbered sections of docs/semantics.md (`## 4.` → "4", `### 4.6` →
/// "4.6") and, per section, how many numbered list items it has.
fn semantics_sections() -> Vec<(String, usize)> {
    let text = std::fs::read_to_string(root().join("docs/semantics.md")).unwrap();
    let mut sections: Vec<(String, usize)> = Vec::new();
    for line in text.lines() {
        let heading = line.trim_start_matches('#');
        if line.starts_with('#') && heading.starts_with(' ') {
            let number: String = heading
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let number = number.trim_end_matches('.').to_owned();
            if !number.is_empty() {
                sections.push((number, 0));
            }
        } else if let Some((_, items)) = sections.last_mut() {
            let item: String = line.chars().take_while(char::is_ascii_digit).collect();
            if !item.is_empty() && line[item.len()..].starts_with(". ") {
                *items += 1;
            }
        }
    }
    sections
}

/// Every `§N`, `§N.M` and `item K` cited after one occurrence of
/// `semantics.md` in `rest` (the text after it), e.g. `§4.8, §5.5`,
/// `§3.3 item 5`, `§2.2-§2.3`, `§9 items 15 and 17`.
fn citations(rest: &str) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    let mut text = rest;
    loop {
        let trimmed = text.trim_start_matches([' ', ',', '/', '-', '–', '(']);
        let trimmed = trimmed.strip_prefix("and ").unwrap_or(trimmed);
        let Some(after) = trimmed.strip_prefix('§') else {
            break;
        };
        let number: String = after
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let number = number.trim_end_matches('.').to_owned();
        if number.is_empty() {
            break;
        }
        let mut tail = &after[number.len()..];
        tail = tail.strip_prefix(" quirk").unwrap_or(tail);
        let mut items = Vec::new();
        for prefix in [" items ", " item "] {
            if let Some(list) = tail.strip_prefix(prefix) {
                let mut list = list;
                loop {
                    let digits: String = list.chars().take_while(char::is_ascii_digit).collect();
                    if digits.is_empty() {
                        break;
                    }
                    items.push(digits.parse().unwrap());
                    list = &list[digits.len()..];
                    match list
                        .strip_prefix(" and ")
                        .or_else(|| list.strip_prefix(", "))
                    {
                        Some(next) if next.starts_with(|c: char| c.is_ascii_digit()) => {
                            list = next;
                        }
                        _ => break,
                    }
                }
                tail = list;
                break;
            }
        }
        out.push((number, items));
        text = tail;
    }
    out
}

#[test]
fn every_semantics_citation_names_a_section_that_exists() {
    let sections = semantics_sections();
    assert!(
        sections.len() > 40,
        "docs/semantics.md has only {} numbered sections",
        sections.len()
    );
    let mut problems = Vec::new();
    let mut cited = 0;
    for (file, text) in texts() {
        for (number, line) in text.lines().enumerate() {
            for (index, _) in line.match_indices("semantics.md") {
                let rest = &line[index + "semantics.md".len()..];
                let rest = rest.strip_prefix('`').unwrap_or(rest);
                for (section, items) in citations(rest) {
                    cited += 1;
                    match sections.iter().find(|(n, _)| *n == section) {
                        None => problems.push(format!(
                            "{file}:{}: §{section} is not a section of docs/semantics.md",
                            number + 1
                        )),
                        Some((_, count)) => {
                            for item in items {
                                if item == 0 || item > *count {
                                    problems.push(format!(
                                        "{file}:{}: §{section} has no item {item} (it has {count})",
                                        number + 1
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        cited > 100,
        "only {cited} citations found: the parser is broken"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces
/// become hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

/// The targets of inline Markdown links `[text](target)` in `text`.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((number + 1, after[..end].to_owned()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn markdown_links_into_docs_resolve() {
    let root = root();
    let docs = ["docs/semantics.md", "docs/policy-tests.md"];
    let mut problems = Vec::new();
    let mut checked = 0;
    for (file, text) in texts() {
        if !std::path::Path::new(&file)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("md"))
        {
            continue;
        }
        let dir = Path::new(&file).parent().unwrap_or(Path::new(""));
        for (line, target) in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                PathBuf::from(&file)
            } else {
                normalise(&dir.join(path))
            };
            let resolved_text = resolved.to_string_lossy().replace('\\', "/");
            if !docs.contains(&resolved_text.as_str()) {
                continue;
            }
            checked += 1;
            if !root.join(&resolved).is_file() {
                problems.push(format!("{file}:{line}: `{target}`: no such file"));
                continue;
            }
            if let Some(fragment) = fragment
                && !anchors(&root.join(&resolved)).contains(fragment)
            {
                problems.push(format!(
                    "{file}:{line}: `{target}`: {resolved_text} has no heading with anchor `{fragment}`"
                ));
            }
        }
    }
    assert!(checked > 40, "only {checked} links into docs/ found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn the_citation_parser_reads_every_form_the_repository_uses() {
    let parsed = citations(" §4.8, §5.5; Cilium");
    assert_eq!(parsed, [("4.8".into(), vec![]), ("5.5".into(), vec![])]);
    let parsed = citations(" §3.3 item 5, §4.3, §4.6.");
    assert_eq!(
        parsed,
        [
            ("3.3".into(), vec![5]),
            ("4.3".into(), vec![]),
            ("4.6".into(), vec![])
        ]
    );
    assert_eq!(
        citations(" §9 items 15 and 17; x"),
        [("9".into(), vec![15, 17])]
    );
    assert_eq!(
        citations(" §2.2-§2.3."),
        [("2.2".into(), vec![]), ("2.3".into(), vec![])]
    );
    assert_eq!(
        citations(" §4.1 and §4.6"),
        [("4.1".into(), vec![]), ("4.6".into(), vec![])]
    );
    assert_eq!(
        citations(" §4.5 quirk, §10.1"),
        [("4.5".into(), vec![]), ("10.1".into(), vec![])]
    );
    assert_eq!(citations(" (a quirk)"), Vec::<(String, Vec<usize>)>::new());
    assert_eq!(
        anchor(" 3.6 CIDR selectors, the ipcache and the longest prefix"),
        "36-cidr-selectors-the-ipcache-and-the-longest-prefix"
    );
    assert!(contains_word("see style.md §5", "style.md"));
    assert!(!contains_word("see my-style.md", "style.md"));
}
