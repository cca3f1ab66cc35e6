//! (old text, edits) → the incremental re-parse (`porin_model::reparse`):
//! each edited text loaded in place from the previous outcome (when the
//! re-parse plans it; otherwise in full) must equal `load_str` of it
//! (followed by `apply_target` for the inputs that choose a target), and
//! nothing may panic. The old text is either raw bytes or a generated CNP
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

#[derive(Arbitrary, Debug)]
enum Old {
    Raw(String),
    Generated {
        rules: u8,
        first_port: u16,
        flow_every: u8,
        list: bool,
        second_document: bool,
    },
}

#[derive(Arbitrary, Debug)]
struct Edit {
    /// Byte position (modulo the text's length, moved back to a character
    /// boundary).
    at: u32,
    /// Bytes deleted there (up to the end of the text).
    delete: u8,
    insert: String,
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
    if text.is_empty() {
        return edit.insert.clone();
    }
    let mut at = edit.at as usize % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let mut end = (at + usize::from(edit.delete)).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    format!("{}{}{}", &text[..at], edit.insert, &text[end..])
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
    let mut text = match &input.old {
        Old::Raw(text) => text.clone(),
        Old::Generated {
            rules,
            first_port,
            flow_every,
            list,
            second_document,
        } => generated(*rules, *first_port, *flow_every, *list, *second_document),
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
