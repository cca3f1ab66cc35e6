//! (old text, edits) → the incremental re-parse (`porin_model::reparse`):
//! each edited text loaded in place from the previous outcome (when the
//! re-parse plans it; otherwise in full) must equal `load_str` of it
//! (followed by `apply_target` for the inputs that choose a target), and
//! nothing may panic. Edits are raw bytes, a port value replaced or a
//! line inserted at an existing line's indentation. The old text is either raw bytes or a generated CNP
//! of the benchmark's shape (block items, some in flow style, optionally
//! inside a `List` and with a second document), so that edits land in
//! rule items the re-parse handles.

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
    list: bool,
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
}

#[derive(Arbitrary, Debug)]
struct Input {
    old: Old,
    edits: Vec<Edit>,
    /// 0: no target, 1: Cilium 1.19, 2: 1.20.
    target: u8,
    tight_limits: bool,
}

fn generated(rules: u8, first_port: u16, flow_every: u8, list: bool, second: bool) -> String {
    let indent = if list { "    " } else { "" };
    let mut out = String::new();
    if list {
        out.push_str("apiVersion: v1\nkind: List\nitems:\n- ");
    }
    out.push_str(&format!(
        "apiVersion: cilium.io/v2\n{indent}kind: CiliumNetworkPolicy\n{indent}metadata:\n{indent}  name: server\n{indent}  namespace: bench\n{indent}spec:\n{indent}  endpointSelector:\n{indent}    matchLabels:\n{indent}      app: server\n{indent}  ingress:\n"
    ));
    for i in 0..usize::from(rules % 32) + 1 {
        let port = if i == 0 {
            u32::from(first_port)
        } else {
            10_000 + i as u32
        };
        if flow_every > 0 && i % usize::from(flow_every) == 0 {
            out.push_str(&format!(
                "{indent}  - {{fromEndpoints: [{{matchLabels: {{role: client-{i}}}}}], toPorts: [{{ports: [{{port: \"{port}\"}}]}}]}}\n"
            ));
        } else {
            out.push_str(&format!(
                "{indent}  - fromEndpoints:\n{indent}    - matchLabels:\n{indent}        role: client-{i}\n{indent}    toPorts:\n{indent}    - ports:\n{indent}      - port: \"{port}\"\n{indent}        protocol: TCP\n"
            ));
        }
    }
    if second {
        out.push_str("---\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: other}\nspec:\n  endpointSelector: {}\n  egress:\n  - toEntities: [world]\n");
    }
    out
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
        None => generated(
            old.rules,
            old.first_port,
            old.flow_every,
            old.list,
            old.second_document,
        ),
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
