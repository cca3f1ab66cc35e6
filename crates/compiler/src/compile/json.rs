//! The JSON output of a compilation, written fast: each map state's
//! `entries` array is rendered once into bytes (on the rayon pool, in
//! parallel across states) and copied for every endpoint that shares it,
//! while the rest of the document (small: identities, each endpoint's
//! head, the ipcache, origins) goes through serde_json as before.
//!
//! The bytes are those of serde_json's pretty printer (two-space indent)
//! for [`super::Compiled::to_json`]; `tests/compiler/parallel.rs` compares
//! them on a mixed cluster, with 1 and 2 threads. For 1,000 policies over
//! 10,000 endpoints (60 million entries, ~25 GB) serialising each entry
//! through serde for each endpoint was most of the time; a state is
//! shared by ten endpoints there, so rendering per state does a tenth of
//! the work, and rendering by hand (every string of an entry is a fixed
//! ASCII name, every other field a number) is several times faster per
//! entry than the generic serializer.

use std::io::Write;

use rayon::prelude::*;
use serde::Serialize;

use crate::mapstate::{Direction, MapState};
use crate::resolve::rule::proto;

/// Indentation of an entry object inside the `entries` array of an
/// endpoint (`{ "endpoints": [ { "entries": [ {`: four levels) or of a
/// state (`{ "states": [ { "entries": [ {`: the same four levels).
const ENTRY_INDENT: &[u8] = b"        ";

/// Bytes an entry of [`render_entries`] takes at most without its origins:
/// ~390 of fixed text, indentation and names (verdict, direction,
/// protocol), and eight numbers of at most 10 digits (~425 bytes with the
/// short numbers of a typical entry and one origin).
const ENTRY_BOUND: usize = 400 + 8 * 10;

/// Bytes one origin of an entry takes at most: a line break, indentation,
/// a `u64` and a comma.
const ORIGIN_BOUND: usize = 1 + 12 + 20 + 1;

/// Renders the `entries` array of `state` as it appears at the fourth
/// level of the document, from `[` to `]`, as serde_json's pretty printer
/// writes `EntryOut`s (fields in declaration order, `[]` when empty).
pub(crate) fn render_entries(state: &MapState, out: &mut Vec<u8>) {
    if state.is_empty() {
        out.extend_from_slice(b"[]");
        return;
    }
    // Reserved once, at a bound of what the entries take: a buffer that
    // outgrows its reservation by its last entries is copied into one of
    // twice its size, and for a multi-MiB array the two at once were the
    // peak of the 65,535-CIDR compile (an entry there is ~425 bytes, which
    // the earlier estimate of 420 fell short of). The bound is virtual
    // memory only: the pages past the end are never written.
    let origins: usize = state.iter().map(|(_, entry)| entry.origins.len()).sum();
    out.reserve(state.len() * ENTRY_BOUND + origins * ORIGIN_BOUND + 16);
    out.push(b'[');
    let mut numbers = itoa::Buffer::new();
    let mut first = true;
    for (key, entry) in state.iter() {
        if !first {
            out.push(b',');
        }
        first = false;
        let verdict: &[u8] = if entry.is_deny() {
            b"deny"
        } else if entry.is_redirect() {
            b"redirect"
        } else {
            b"allow"
        };
        let direction: &[u8] = match key.direction() {
            Direction::Ingress => b"ingress",
            Direction::Egress => b"egress",
        };
        out.push(b'\n');
        out.extend_from_slice(ENTRY_INDENT);
        out.extend_from_slice(b"{\n          \"direction\": \"");
        out.extend_from_slice(direction);
        out.extend_from_slice(b"\",\n          \"identity\": ");
        out.extend_from_slice(numbers.format(key.identity().get()).as_bytes());
        out.extend_from_slice(b",\n          \"proto\": \"");
        out.extend_from_slice(proto::static_name(key.proto()).as_bytes());
        out.extend_from_slice(b"\",\n          \"port\": ");
        out.extend_from_slice(numbers.format(key.port()).as_bytes());
        out.extend_from_slice(b",\n          \"end_port\": ");
        out.extend_from_slice(numbers.format(key.end_port()).as_bytes());
        out.extend_from_slice(b",\n          \"port_prefix_len\": ");
        out.extend_from_slice(numbers.format(key.port_prefix_len()).as_bytes());
        out.extend_from_slice(b",\n          \"verdict\": \"");
        out.extend_from_slice(verdict);
        out.extend_from_slice(b"\",\n          \"precedence\": ");
        out.extend_from_slice(numbers.format(entry.precedence.get()).as_bytes());
        out.extend_from_slice(b",\n          \"proxy_port\": ");
        out.extend_from_slice(numbers.format(entry.proxy_port).as_bytes());
        out.extend_from_slice(b",\n          \"auth_type\": ");
        out.extend_from_slice(numbers.format(entry.auth.auth_type().get()).as_bytes());
        out.extend_from_slice(b",\n          \"auth_explicit\": ");
        out.extend_from_slice(if entry.auth.is_explicit() {
            b"true"
        } else {
            b"false"
        });
        out.extend_from_slice(b",\n          \"cookie\": ");
        out.extend_from_slice(numbers.format(entry.cookie).as_bytes());
        out.extend_from_slice(b",\n          \"origins\": ");
        if entry.origins.is_empty() {
            out.extend_from_slice(b"[]");
        } else {
            out.push(b'[');
            let mut first_origin = true;
            for origin in &entry.origins {
                if !first_origin {
                    out.push(b',');
                }
                first_origin = false;
                out.extend_from_slice(b"\n            ");
                out.extend_from_slice(numbers.format(*origin).as_bytes());
            }
            out.extend_from_slice(b"\n          ]");
        }
        out.extend_from_slice(b"\n        }");
    }
    out.extend_from_slice(b"\n      ]");
}

/// Writes `value` pretty-printed as a field value at nesting `level`
/// (two spaces a level): serde_json's pretty output with every line after
/// the first indented by the level, which is how the pretty printer writes
/// a value nested that deep.
pub(crate) fn write_nested(
    out: &mut dyn Write,
    value: &impl Serialize,
    level: usize,
) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    out.write_all(&indented(&text, level))
}

/// Items per parallel piece of [`write_field_seq`].
const SEQ_PIECE: usize = 2048;

/// Pieces per thread that [`write_field_seq`] renders before writing them:
/// the rendered pieces of a window are held at once (65,535 origins are
/// 20 MB of JSON, and each piece's buffer grows by doubling).
const SEQ_PIECES_PER_THREAD: usize = 2;

/// [`write_nested`] of a sequence that is a field of the document's
/// top-level object (nesting level 1), its items rendered in pieces on the
/// rayon pool when there are many (65,535 CIDR identities, ipcache entries
/// and origins), a window of pieces at a time. Each piece is serialised as
/// the field `v` of an object, which puts its items at the indent they have
/// in the document, and the pieces' items, joined by `,`, are the whole
/// sequence's: serde_json writes a non-empty sequence as `[`, each item
/// after `\n` (the first) or `,\n` and its indent, then `\n` and the
/// closing indent and `]`.
pub(crate) fn write_field_seq<T: Serialize + Sync>(
    out: &mut dyn Write,
    items: &[T],
) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct Field<'a, T> {
        v: &'a [T],
    }
    const OPEN: &[u8] = b"{\n  \"v\": [";
    const CLOSE: &[u8] = b"\n  ]\n}";
    if items.len() <= SEQ_PIECE {
        return write_nested(out, &items, 1);
    }
    let window = SEQ_PIECE * SEQ_PIECES_PER_THREAD * rayon::current_num_threads().max(1);
    out.write_all(b"[")?;
    let mut first = true;
    for group in items.chunks(window) {
        let pieces: Vec<std::io::Result<Vec<u8>>> = group
            .par_chunks(SEQ_PIECE)
            .map(|piece| {
                serde_json::to_vec_pretty(&Field { v: piece }).map_err(std::io::Error::other)
            })
            .collect();
        for piece in pieces {
            let text = piece?;
            let items = text
                .strip_prefix(OPEN)
                .and_then(|rest| rest.strip_suffix(CLOSE))
                .ok_or_else(|| std::io::Error::other("unexpected pretty-printed sequence"))?;
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            out.write_all(items)?;
        }
    }
    out.write_all(b"\n  ]")
}

/// `text` with `level` two-space indents after every newline, in one
/// buffer (written line by line, the lines of 65,535 origins were
/// millions of small writes).
fn indented(text: &[u8], level: usize) -> Vec<u8> {
    let indent = level * 2;
    let lines = text.iter().filter(|b| **b == b'\n').count();
    let mut out = Vec::with_capacity(text.len() + lines * indent);
    let mut rest = text;
    while let Some(end) = rest.iter().position(|b| *b == b'\n') {
        out.extend_from_slice(&rest[..=end]);
        out.resize(out.len() + indent, b' ');
        rest = &rest[end + 1..];
    }
    out.extend_from_slice(rest);
    out
}

/// Writes the head of an endpoint object at the second level (`{ "endpoints":
/// [ {`), its fields before `entries`, without the closing brace: `value`
/// serialised pretty and nested, its last line (`}`) left off, so the
/// caller appends `,\n      "entries": ...\n    }` or another last field.
pub(crate) fn write_head(out: &mut dyn Write, value: &impl Serialize) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    // `{\n  "a": 1\n}`: everything up to the last newline.
    let body = text
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(&text[..], |end| &text[..end]);
    let mut lines = body.split(|b| *b == b'\n');
    if let Some(first) = lines.next() {
        out.write_all(first)?;
    }
    for line in lines {
        out.write_all(b"\n    ")?;
        out.write_all(line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces of a long sequence, rendered apart and joined, are the
    /// sequence pretty-printed at once, at every length around a piece's.
    #[test]
    fn a_sequence_in_pieces_is_the_sequence_at_once() {
        for len in [
            0,
            1,
            SEQ_PIECE,
            SEQ_PIECE + 1,
            2 * SEQ_PIECE + 5,
            // More than one window of pieces (on up to 8 threads).
            SEQ_PIECE * SEQ_PIECES_PER_THREAD * 8 + 3,
        ] {
            let items: Vec<serde_json::Value> = (0..len)
                .map(|i| {
                    serde_json::json!({
                        "id": i,
                        "labels": [format!("cidr:10.0.{}.{}/32", i / 256, i % 256)],
                        "kind": {"kind": "cidr", "empty": []},
                    })
                })
                .collect();
            let mut whole = Vec::new();
            write_nested(&mut whole, &items, 1).unwrap();
            let mut pieces = Vec::new();
            write_field_seq(&mut pieces, &items).unwrap();
            assert!(pieces == whole, "{len} items differ");
        }
    }
}
