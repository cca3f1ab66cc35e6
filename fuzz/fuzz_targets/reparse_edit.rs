//! (old text, edits) → the incremental re-parse (`porin_model::reparse`):
//! each edited text loaded in place from the previous outcome (when the
//! re-parse plans it; otherwise in full) must equal `load_str` of it
//! (followed by `apply_target` for the inputs that choose a target), and
//! nothing may panic. Edits are raw bytes, a port value replaced, a line
//! inserted at an existing line's indentation, an entry copied after
//! itself or deleted (an item inserted or removed), or a bare `-` line (an
//! entry's `-` alone on its line, its keys on the next ones) deleted,
//! inserted, made or joined. The old text is either raw bytes or a
//! generated CNP of the benchmark's shape (block items, some in flow
//! style, some with a bare `-`, egress items after the ingress ones,
//! optionally inside a `List` of one or two items and with a second
//! document), so that edits land in rule items the re-parse handles.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use porin_model::LoadLimits;
use porin_model::loader::load_str;
use porin_model::reparse::reload;
use porin_model::version::{CiliumVersion, Target};

/// The text before the edits: `raw` when given, else a generated CNP
/// (half the inputs: the shape the re-parse handles).
#[derive(Arbitrary, Debug)]
struct Old {
    raw: Option<String>,
    rules: u8,
    first_port: u16,
    flow_every: u8,
    /// Which items have their `-` alone on the line before their keys
    /// (bit `i % 32` for the `i`-th item, ingress then egress): deleting
    /// such a line merges the entry into the item before it, the shape
    /// behind the over-allow fixed in dfef1de, which the generator never
    /// wrote before.
    bare: u32,
    /// How a bare `-` is written: `-` alone, with a trailing space or a
    /// comment (`% 3`), then its keys at once, after a blank line or
    /// after a comment line (`/ 3 % 3`): the re-parse must see all of
    /// them as a `-` on a line of its own.
    bare_style: u8,
    /// Egress items after the ingress ones (`% 4`): the node after the
    /// last ingress item is then a key (`egress:`), not an entry.
    egress: u8,
    /// `% 4`: 0 no `List`; 1 a `List` of this CNP; 2 a second item after
    /// it; 3 that second item with a bare `-` (the next node after the
    /// CNP's last item is then a `List` entry whose `-` stands alone).
    list: u8,
    second_document: bool,
}

#[derive(Arbitrary, Debug)]
enum Edit {
    /// Bytes at a position (modulo the text's length, moved back to a
    /// character boundary): `delete` bytes (up to the end) replaced by
    /// `insert`.
    Bytes { at: u32, delete: u8, insert: String },
    /// The `nth` `port: "` value (modulo their number) replaced: the
    /// agent's edit, which the re-parse takes in place when it is valid.
    Port { nth: u16, value: String },
    /// A line inserted after line `nth` (modulo the lines), indented as
    /// that line plus `deeper` spaces: a label, a comment, a field.
    Line { nth: u16, deeper: u8, text: String },
    /// The `nth` line holding only an entry's `-` (spaces or a comment
    /// after it) deleted: the entry's keys then belong to the entry before
    /// it, which the edited item's own lines cannot show (dfef1de).
    DeleteBareDash { nth: u16 },
    /// A line `-` inserted before line `nth`, indented as that line less
    /// two spaces plus `shift % 4`: before a key of an item at its
    /// entry's column it splits the item in two (the deletion's inverse).
    InsertBareDash { nth: u16, shift: u8 },
    /// The `nth` entry written `- content` rewritten as `-` alone, its
    /// content on the next line at the same column (the same document,
    /// another shape: also for nested entries, flow items and `List`
    /// items); with `join`, the `nth` bare `-` line instead takes the
    /// next line's content after it (the inverse).
    BareEntry { nth: u16, join: bool },
    /// The `nth` entry of the generated item column (a line `  - ` at the
    /// items' indentation, up to the next line at that indentation or
    /// less) copied after itself, or (`copy` false) deleted: a rule item
    /// inserted or removed, which the re-parse takes in place.
    Item { nth: u16, copy: bool },
}

#[derive(Arbitrary, Debug)]
struct Input {
    old: Old,
    edits: Vec<Edit>,
    /// 0: no target, 1: Cilium 1.19, 2: 1.20.
    target: u8,
    tight_limits: bool,
}

/// A generated CNP: `rules % 32 + 1` ingress items (every
/// `flow_every`-th in flow style) then `egress % 4` egress items, each
/// written with a bare `-` when its bit of `bare` is set.
fn generated(old: &Old) -> String {
    let list = old.list % 4;
    // In a `List` the CNP's keys stand at its item's content column, two
    // spaces in (`- apiVersion`, then `  kind`). Four spaces, as before,
    // put `kind:` inside `apiVersion`'s value: invalid YAML, so no `List`
    // input ever reached the in-place path.
    let indent = if list > 0 { "  " } else { "" };
    let mut out = String::new();
    if list > 0 {
        out.push_str("apiVersion: v1\nkind: List\nitems:\n- ");
    }
    out.push_str(&format!(
        "apiVersion: cilium.io/v2\n{indent}kind: CiliumNetworkPolicy\n{indent}metadata:\n{indent}  name: server\n{indent}  namespace: bench\n{indent}spec:\n{indent}  endpointSelector:\n{indent}    matchLabels:\n{indent}      app: server\n{indent}  ingress:\n"
    ));
    let ingress = usize::from(old.rules % 32) + 1;
    let egress = usize::from(old.egress % 4);
    let at = format!("{indent}  ");
    for i in 0..ingress + egress {
        if i == ingress {
            out.push_str(&format!("{indent}  egress:\n"));
        }
        let port = if i == 0 {
            u32::from(old.first_port)
        } else {
            10_000 + i as u32
        };
        let bare = old.bare & (1 << (i % 32)) != 0;
        out.push_str(&marker(&at, bare, old.bare_style));
        if i >= ingress {
            out.push_str(&format!(
                "toEndpoints:\n{indent}    - matchLabels:\n{indent}        role: server-{i}\n{indent}    toPorts:\n{indent}    - ports:\n{indent}      - port: \"{port}\"\n"
            ));
        } else if old.flow_every > 0 && i % usize::from(old.flow_every) == 0 {
            out.push_str(&format!(
                "{{fromEndpoints: [{{matchLabels: {{role: client-{i}}}}}], toPorts: [{{ports: [{{port: \"{port}\"}}]}}]}}\n"
            ));
        } else {
            out.push_str(&format!(
                "fromEndpoints:\n{indent}    - matchLabels:\n{indent}        role: client-{i}\n{indent}    toPorts:\n{indent}    - ports:\n{indent}      - port: \"{port}\"\n{indent}        protocol: TCP\n"
            ));
        }
    }
    if list >= 2 {
        // The `List`'s next item: the node after the CNP's last item.
        out.push_str(&marker("", list == 3, old.bare_style));
        out.push_str("apiVersion: cilium.io/v2\n  kind: CiliumNetworkPolicy\n  metadata:\n    name: other-item\n    namespace: bench\n  spec:\n    endpointSelector: {}\n    egress:\n    - toEntities: [world]\n");
    }
    if old.second_document {
        out.push_str("---\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: other}\nspec:\n  endpointSelector: {}\n  egress:\n  - toEntities: [world]\n");
    }
    out
}

/// An entry's `-` at indentation `at` up to its content's column: `- `,
/// or (`bare`) the `-` on a line of its own (`style % 3`: alone, a
/// trailing space, a comment), then (`style / 3 % 3`) nothing, a blank
/// line or a comment line, then the content's indentation.
fn marker(at: &str, bare: bool, style: u8) -> String {
    if !bare {
        return format!("{at}- ");
    }
    let after = ["", " ", " # bare"][usize::from(style % 3)];
    let gap = match style / 3 % 3 {
        0 => String::new(),
        1 => "\n".to_owned(),
        _ => format!("{at}  # its keys\n"),
    };
    format!("{at}-{after}\n{gap}{at}  ")
}

/// Whether `line` holds only an entry's `-`, spaces or a comment after
/// it (not `---`).
fn is_bare_dash(line: &str) -> bool {
    let Some(rest) = line.trim_start_matches(' ').strip_prefix('-') else {
        return false;
    };
    let rest = rest.trim_end_matches(['\n', '\r']);
    rest.is_empty()
        || (rest.starts_with([' ', '\t'])
            && matches!(rest.trim_start().chars().next(), None | Some('#')))
}

fn edited(text: &str, edit: &Edit) -> String {
    match edit {
        Edit::Bytes { at, delete, insert } => {
            if text.is_empty() {
                return insert.clone();
            }
            let mut at = *at as usize % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let mut end = (at + usize::from(*delete)).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            format!("{}{insert}{}", &text[..at], &text[end..])
        }
        Edit::Item { nth, copy } => {
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let starts: Vec<usize> = (0..lines.len())
                .filter(|i| lines[*i].trim_start_matches(' ').starts_with('-'))
                .collect();
            let Some(&start) = starts.get(usize::from(*nth) % starts.len().max(1)) else {
                return text.to_owned();
            };
            let indent = lines[start].len() - lines[start].trim_start_matches(' ').len();
            let end = (start + 1..lines.len())
                .find(|&i| {
                    let l = lines[i].trim_start_matches(' ');
                    !l.trim().is_empty() && lines[i].len() - l.len() <= indent
                })
                .unwrap_or(lines.len());
            let mut out: String = lines[..end].concat();
            if *copy {
                out.push_str(&lines[start..end].concat());
            } else {
                out.truncate(lines[..start].concat().len());
            }
            out.push_str(&lines[end..].concat());
            out
        }
        Edit::Port { nth, value } => {
            let ports: Vec<usize> = text
                .match_indices("port: \"")
                .map(|(i, m)| i + m.len())
                .collect();
            let Some(&at) = ports.get(usize::from(*nth) % ports.len().max(1)) else {
                return text.to_owned();
            };
            let end = at + text[at..].find('"').unwrap_or(0);
            format!("{}{value}{}", &text[..at], &text[end..])
        }
        Edit::Line {
            nth,
            deeper,
            text: line,
        } => {
            let starts: Vec<usize> = std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .filter(|i| *i < text.len())
                .collect();
            let Some(&start) = starts.get(usize::from(*nth) % starts.len().max(1)) else {
                return text.to_owned();
            };
            let end = text[start..]
                .find('\n')
                .map_or(text.len(), |i| start + i + 1);
            let indent = text[start..end].len() - text[start..end].trim_start_matches(' ').len();
            let spaces = " ".repeat(indent + usize::from(*deeper % 8));
            format!("{}{spaces}{line}\n{}", &text[..end], &text[end..])
        }
        Edit::DeleteBareDash { nth } => {
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let bare: Vec<usize> = (0..lines.len())
                .filter(|&i| is_bare_dash(lines[i]))
                .collect();
            let Some(&at) = bare.get(usize::from(*nth) % bare.len().max(1)) else {
                return text.to_owned();
            };
            format!("{}{}", lines[..at].concat(), lines[at + 1..].concat())
        }
        Edit::InsertBareDash { nth, shift } => {
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let at = usize::from(*nth) % lines.len().max(1);
            let line = lines.get(at).copied().unwrap_or("");
            let indent = line.len() - line.trim_start_matches(' ').len();
            let spaces = " ".repeat(indent.saturating_sub(2) + usize::from(*shift % 4));
            format!(
                "{}{spaces}-\n{}",
                lines[..at].concat(),
                lines[at..].concat()
            )
        }
        Edit::BareEntry { nth, join } => {
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            // Lines whose entry has its content after its `-` (`- x`), or
            // bare `-` lines with a line after them to join.
            let candidates: Vec<usize> = (0..lines.len())
                .filter(|&i| {
                    let t = lines[i].trim_start_matches(' ');
                    if *join {
                        is_bare_dash(lines[i]) && i + 1 < lines.len()
                    } else {
                        t.starts_with("- ") && !t[2..].trim_start().is_empty()
                    }
                })
                .collect();
            let Some(&at) = candidates.get(usize::from(*nth) % candidates.len().max(1)) else {
                return text.to_owned();
            };
            let line = lines[at];
            let dash = line.len() - line.trim_start_matches(' ').len();
            let rewritten = if *join {
                // The next line's content keeps its column when it is
                // deeper than the `-`, else goes right after `- `.
                let next = lines[at + 1];
                let content = next.trim_start_matches(' ');
                let gap = (next.len() - content.len()).saturating_sub(dash + 1).max(1);
                format!("{}-{}{content}", &line[..dash], " ".repeat(gap))
            } else {
                // The `-` becomes a space: the content keeps its column.
                format!(
                    "{}-\n{} {}",
                    &line[..dash],
                    &line[..dash],
                    &line[dash + 1..]
                )
            };
            let rest = if *join { at + 2 } else { at + 1 };
            format!(
                "{}{rewritten}{}",
                lines[..at].concat(),
                lines[rest..].concat()
            )
        }
    }
}

const NAME: &str = "fuzz.yaml";

fuzz_target!(|input: Input| {
    let limits = if input.tight_limits {
        LoadLimits {
            max_depth: 8,
            max_nodes: 300,
            max_scalar_bytes: 2_000,
            max_file_bytes: 16_384,
            ..LoadLimits::default()
        }
    } else {
        LoadLimits::default()
    };
    let target = match input.target % 3 {
        0 => None,
        1 => Some(Target::new(CiliumVersion::V1_19)),
        _ => Some(Target::new(CiliumVersion::V1_20)),
    };
    let full = |text: &str| {
        let mut outcome = load_str(NAME, text, &limits);
        if let Some(target) = &target {
            outcome.apply_target(target);
        }
        outcome
    };
    let old = &input.old;
    let mut text = match &old.raw {
        Some(raw) => raw.clone(),
        None => generated(old),
    };
    if text.len() > 65_536 {
        return;
    }
    let mut outcome = full(&text);
    for edit in input.edits.iter().take(8) {
        let new = edited(&text, edit);
        if new.len() > 65_536 {
            return;
        }
        reload(&mut outcome, NAME, &new, &limits, target.as_ref());
        let expected = full(&new);
        assert_eq!(outcome, expected, "old:\n{text}\nnew:\n{new}");
        text = new;
    }
});
