//! No import cycles between the files of a crate (issue 13): if `a.rs`
//! names something of `b.rs` (a `use`, or a path such as `crate::b::X` or
//! `super::X`), `b.rs` must not name something of `a.rs`, directly or
//! through other files. A cycle means two files share one concept; the fix
//! is to move the shared item to the lower file or to a small module both
//! depend on.
//!
//! Every `src/**/*.rs` of every crate under `crates/` is read. Comments,
//! strings and character literals are removed, then each path that starts
//! with `crate`, `super`, `self` or a child module the file declares is
//! resolved to the file that defines the longest prefix of it, following
//! the names other files import (`crate::KernelError`, re-exported by
//! `lib.rs` from `error.rs`, is an edge to `error.rs`). `mod x;`
//! declarations and `pub use` re-exports are not edges (declaring a child
//! or offering its items is not using them). A path into an inline module
//! (`mod tests { use super::*; }`) resolves to the file that holds it, so a
//! file's own test module is no edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate: module path (`["inventory", "yaml"]`) -> file, and back.
struct Crate {
    files: BTreeMap<Vec<String>, PathBuf>,
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut files = BTreeMap::new();
        let mut stack = vec![src.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read src dir") {
                let path = entry.expect("dir entry").path();
                if path.is_dir() {
                    // `src/bin/*` are crates of their own.
                    if path != src.join("bin") {
                        stack.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.insert(module_path(src, &path), path);
                }
            }
        }
        Crate { files }
    }

    /// The file that defines `module` (the longest prefix with a file).
    fn file_of(&self, module: &[String]) -> Option<&PathBuf> {
        (0..=module.len())
            .rev()
            .find_map(|n| self.files.get(&module[..n]))
    }

    /// Whether `module` is a module of this crate with a file of its own.
    fn has_file(&self, module: &[String]) -> bool {
        self.files.contains_key(module)
    }
}

/// The module path of a file: `src/lib.rs`, `src/main.rs` -> `[]`,
/// `src/a.rs` and `src/a/mod.rs` -> `["a"]`, `src/a/b.rs` -> `["a", "b"]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    let at_root = parts.is_empty();
    if !(stem == "mod" || (at_root && (stem == "lib" || stem == "main"))) {
        parts.push(stem.to_owned());
    }
    parts
}

/// The code of a Rust file without comments, strings and character
/// literals (each replaced by a space), so only real paths remain.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        // Raw strings: r"..", r#".."#, br#".."#.
        let raw_start =
            (c == 'r' || (c == 'b' && next == Some('r'))) && (i == 0 || !ident(chars[i - 1]));
        if raw_start {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                j += 1;
                loop {
                    if j >= chars.len() {
                        break;
                    }
                    if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                i = j;
                out.push(' ');
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(' ');
            continue;
        }
        if c == '\'' {
            // A character literal ('a', '\n', '\u{..}'), not a lifetime.
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push(' ');
                continue;
            }
            if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push(' ');
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Tokens: identifiers, `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The paths of a `use` tree (`a::{b, c::{self, D}}` -> `a::b`, `a::c`,
/// `a::c::D`), starting at `tokens[*at]`; stops after the tree.
/// Each path comes with the name it binds (its last segment, or the
/// `as` name; none for a glob).
fn use_tree(tokens: &[String], at: &mut usize, prefix: &[String], out: &mut Vec<Binding>) {
    let mut path = prefix.to_vec();
    while *at < tokens.len() {
        let token = tokens[*at].as_str();
        match token {
            "::" => *at += 1,
            "{" => {
                *at += 1;
                loop {
                    use_tree(tokens, at, &path, out);
                    match tokens.get(*at).map(String::as_str) {
                        Some(",") => *at += 1,
                        Some("}") => {
                            *at += 1;
                            return;
                        }
                        _ => return,
                    }
                    if tokens.get(*at).map(String::as_str) == Some("}") {
                        *at += 1;
                        return;
                    }
                }
            }
            "*" => {
                *at += 1;
                out.push((path, None));
                return;
            }
            "as" => {
                let name = tokens.get(*at + 1).cloned();
                *at += 2;
                out.push((path, name));
                return;
            }
            "," | "}" | ";" => {
                let name = path.last().cloned();
                out.push((path, name));
                return;
            }
            "self" if !path.is_empty() => {
                *at += 1;
            }
            _ => {
                path.push(token.to_owned());
                *at += 1;
            }
        }
    }
    let name = path.last().cloned();
    out.push((path, name));
}

/// A path of a `use` tree and the name it binds.
type Binding = (Vec<String>, Option<String>);

/// What a file names: the module paths (absolute, without `crate`), and
/// the names its top-level `use` items bind (name -> absolute path), which
/// other files reach through it (`crate::X` re-exported by `lib.rs`,
/// `super::Key` imported by `mod.rs`).
#[derive(Default)]
struct Names {
    named: Vec<Vec<String>>,
    aliases: BTreeMap<String, Vec<String>>,
}

/// The module paths a file names, each resolved against the module it is
/// named in (absolute, without `crate`).
fn named_modules(krate: &Crate, module: &[String], code: &str) -> Names {
    let tokens = tokens(code);
    let mut found = Names::default();
    // Inline modules: (name, brace depth at which it closes).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        let current: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(name, _)| name.clone()))
            .collect();
        match token {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).map(String::as_str) == Some("{") => {
                inline.push((tokens[i + 1].clone(), depth));
                depth += 1;
                i += 3;
                continue;
            }
            "use" => {
                let mut at = i + 1;
                if tokens.get(at).map(String::as_str) == Some("::") {
                    // `use ::external` is another crate.
                    i += 2;
                    continue;
                }
                let reexport = is_reexport(&tokens[..i]);
                let mut paths = Vec::new();
                use_tree(&tokens, &mut at, &[], &mut paths);
                for (path, name) in paths {
                    if let Some(resolved) = resolve(krate, &current, &path) {
                        if let (true, Some(name)) = (inline.is_empty(), name) {
                            found.aliases.insert(name, resolved.clone());
                        }
                        if !reexport {
                            found.named.push(resolved);
                        }
                    }
                }
                i = at;
                continue;
            }
            _ => {
                let starts_path = tokens.get(i + 1).map(String::as_str) == Some("::")
                    && (i == 0 || tokens[i - 1] != "::");
                if starts_path {
                    let mut path = vec![token.to_owned()];
                    let mut j = i + 1;
                    while tokens.get(j).map(String::as_str) == Some("::")
                        && tokens
                            .get(j + 1)
                            .is_some_and(|t| t.chars().all(|c| c.is_alphanumeric() || c == '_'))
                    {
                        path.push(tokens[j + 1].clone());
                        j += 2;
                    }
                    if let Some(resolved) = resolve(krate, &current, &path) {
                        found.named.push(resolved);
                    }
                    i = j;
                    continue;
                }
            }
        }
        i += 1;
    }
    found
}

/// Whether the `use` after `before` is a re-export (`pub use`,
/// `pub(crate) use`): a facade (`lib.rs` re-exporting its modules' types) is
/// not a use of what it re-exports, and a file using the facade is
/// followed through it to the file that defines the item.
fn is_reexport(before: &[String]) -> bool {
    match before.last().map(String::as_str) {
        Some("pub") => true,
        Some(")") => before
            .iter()
            .rposition(|t| t == "(")
            .is_some_and(|open| open > 0 && before[open - 1] == "pub"),
        _ => false,
    }
}

/// `path` named in `module`, as an absolute module path of this crate, or
/// None for another crate's path.
fn resolve(krate: &Crate, module: &[String], path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?.as_str();
    match first {
        "crate" => Some(path[1..].to_vec()),
        "super" => {
            let mut base = module.to_vec();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        }
        "self" => {
            let mut base = module.to_vec();
            base.extend(path[1..].iter().cloned());
            Some(base)
        }
        _ => {
            // A child module of the current one (2018 paths are relative).
            let mut child = module.to_vec();
            child.push(first.to_owned());
            krate.has_file(&child).then(|| {
                child.extend(path[1..].iter().cloned());
                child
            })
        }
    }
}

/// The file -> files it names, for one crate. A name a file imports or
/// re-exports is followed to the file that defines it: `crate::KernelError`
/// re-exported by `lib.rs` from `error.rs` is an edge to `error.rs`.
fn edges(krate: &Crate) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let names: BTreeMap<&PathBuf, Names> = krate
        .files
        .iter()
        .map(|(module, file)| {
            let text = std::fs::read_to_string(file).expect("read source");
            (file, named_modules(krate, module, &strip(&text)))
        })
        .collect();
    let mut graph = BTreeMap::new();
    for (file, found) in &names {
        let mut targets = BTreeSet::new();
        for named in &found.named {
            if let Some(target) = defining_file(krate, &names, named, file)
                && target != *file
            {
                targets.insert(target.clone());
            }
        }
        graph.insert((*file).clone(), targets);
    }
    graph
}

/// The file that defines `path`, following `use` aliases of other files
/// (a file's own aliases are its own edges already).
fn defining_file<'a>(
    krate: &'a Crate,
    names: &BTreeMap<&PathBuf, Names>,
    path: &[String],
    from: &PathBuf,
) -> Option<&'a PathBuf> {
    let mut path = path.to_vec();
    let mut file = krate.file_of(&path)?;
    // Bounded: aliases can form loops (`pub use self::a::*` pairs).
    for _ in 0..16 {
        let depth = (0..=path.len())
            .rev()
            .find(|n| krate.files.get(&path[..*n]) == Some(file))?;
        let Some(name) = path.get(depth) else {
            return Some(file);
        };
        let alias = (file != from)
            .then(|| names.get(file).and_then(|n| n.aliases.get(name)))
            .flatten();
        let Some(target) = alias else {
            return Some(file);
        };
        let mut next = target.clone();
        next.extend(path[depth + 1..].iter().cloned());
        path = next;
        file = krate.file_of(&path)?;
    }
    Some(file)
}

/// One cycle of each strongly connected component with more than one
/// file, as the list of files along it (the first repeated at the end).
fn cycles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    let mut found: Vec<Vec<PathBuf>> = Vec::new();
    let mut covered: BTreeSet<PathBuf> = BTreeSet::new();
    for start in graph.keys() {
        if covered.contains(start) {
            continue;
        }
        // Shortest path from a successor of `start` back to `start` (BFS).
        let mut previous: BTreeMap<&PathBuf, &PathBuf> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut closing = None;
        while let Some(file) = queue.pop_front() {
            for next in graph.get(file).into_iter().flatten() {
                if next == start {
                    closing = Some(file);
                    break;
                }
                if !previous.contains_key(next) {
                    previous.insert(next, file);
                    queue.push_back(next);
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let Some(mut file) = closing else {
            continue;
        };
        let mut cycle = vec![start.clone()];
        while file != start {
            cycle.push(file.clone());
            file = previous[file];
        }
        cycle[1..].reverse();
        cycle.push(start.clone());
        covered.extend(cycle.iter().cloned());
        found.push(cycle);
    }
    found
}

#[test]
fn no_import_cycles_between_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut report = Vec::new();
    let mut crates = 0;
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let src = entry.expect("entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let krate = Crate::read(&src);
        for cycle in cycles(&edges(&krate)) {
            let names: Vec<String> = cycle
                .iter()
                .map(|f| f.strip_prefix(&root).unwrap_or(f).display().to_string())
                .collect();
            report.push(names.join(" -> "));
        }
    }
    assert!(crates >= 8, "found only {crates} crates under crates/");
    assert!(
        report.is_empty(),
        "import cycles between files (move the shared item to the lower file or a module both use):\n{}",
        report.join("\n")
    );
}

#[test]
fn the_scanner_sees_uses_paths_and_test_modules() {
    let src = PathBuf::from("/x/src");
    let files = ["lib.rs", "a.rs", "b.rs", "b/c.rs", "d/mod.rs"]
        .into_iter()
        .map(|f| (module_path(&src, &src.join(f)), src.join(f)))
        .collect();
    let krate = Crate { files };
    let named = |module: &[&str], code: &str| -> BTreeSet<Vec<String>> {
        let module: Vec<String> = module.iter().map(|s| (*s).to_owned()).collect();
        named_modules(&krate, &module, &strip(code))
            .named
            .into_iter()
            .collect()
    };
    let path = |p: &str| -> Vec<String> { p.split("::").map(str::to_owned).collect() };
    // A use tree with groups, self and renames.
    assert_eq!(
        named(&["a"], "use crate::{b::{self, c::X as Y}, d};"),
        [path("b"), path("b::c::X"), path("d")]
            .into_iter()
            .collect()
    );
    // super, child modules and inline paths; comments and strings do not count.
    assert_eq!(
        named(
            &["b"],
            "use super::a::T; // crate::d\nfn f() { c::g(); let s = \"crate::d\"; crate::d::h(); }"
        ),
        [path("a::T"), path("b::c::g"), path("d::h")]
            .into_iter()
            .collect()
    );
    // A test module's `super` is its own file; another crate's path is no edge.
    assert_eq!(
        named(
            &["a"],
            "mod tests { use super::*; use std::fmt; fn t() { let c = 'x'; } }"
        ),
        [path("a")].into_iter().collect()
    );
    // A cycle is found and named.
    let graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(from, to)| {
        (
            PathBuf::from(from),
            to.into_iter().map(PathBuf::from).collect(),
        )
    })
    .collect();
    assert_eq!(
        cycles(&graph),
        vec![["a", "b", "c", "a"].map(PathBuf::from).to_vec()]
    );
}
