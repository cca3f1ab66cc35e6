//! The YAML path at the cursor, from indentation.
//!
//! Completion runs while the user types, when the document is usually not
//! valid YAML (`endpointSel` without its colon), so the loader's located
//! tree is not there to ask. Block-style YAML says its structure by
//! indentation: walking up from the cursor, the nearest key less indented
//! than the cursor's is its parent, a `- ` marker less indented is a
//! sequence item. Flow collections (`{...}`, `[...]`) are read only on the
//! cursor's line, for a value inside `[a, b]`.

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// An item of a sequence (which one does not matter to the schema).
    Item,
}

/// What the cursor is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A key (or the start of one) in the mapping at [`Cursor::path`].
    Key,
    /// A value; [`Cursor::path`] ends with its key (or [`Segment::Item`]
    /// for a sequence item).
    Value,
}

/// The cursor's place in the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The path of the mapping (for [`Place::Key`]) or of the value.
    pub path: Vec<Segment>,
    /// Key or value.
    pub place: Place,
    /// The word under the cursor: the part before it and the whole word,
    /// as byte ranges of the line.
    pub word_start: usize,
    /// End of the whole word (byte index in the line).
    pub word_end: usize,
    /// The `kind:` of the cursor's YAML document, if it says.
    pub kind: Option<String>,
    /// Keys already present in the mapping at the cursor (not offered again).
    pub siblings: Vec<String>,
}

/// One line's structure: `- ` markers and a key, by column (bytes).
#[derive(Debug, Default)]
struct Line<'a> {
    dashes: Vec<usize>,
    key: Option<(usize, &'a str)>,
    /// Where the text after the dashes starts (the key or a scalar item).
    content: usize,
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

fn parse_line(line: &str) -> Line<'_> {
    let mut out = Line::default();
    let mut at = line.len() - line.trim_start_matches(' ').len();
    loop {
        let rest = &line[at..];
        if rest == "-" || rest.starts_with("- ") {
            out.dashes.push(at);
            at += 1;
            at += line[at..].len() - line[at..].trim_start_matches(' ').len();
        } else {
            break;
        }
    }
    out.content = at;
    let rest = &line[at..];
    if rest.starts_with('#') {
        return out;
    }
    // `key:` followed by a blank or the end of the line; quoted keys too.
    let mut search = 0;
    while let Some(colon) = rest[search..].find(':') {
        let colon = search + colon;
        let after = rest[colon + 1..].chars().next();
        if after.is_none_or(|c| c == ' ' || c == '\t') {
            let key = rest[..colon].trim().trim_matches(['"', '\'']);
            if !key.is_empty() && !key.starts_with(['{', '[', '#']) {
                out.key = Some((at, key));
            }
            break;
        }
        search = colon + 1;
    }
    out
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

/// The YAML document (lines between `---` markers) around line `at`.
fn document_bounds(lines: &[&str], at: usize) -> (usize, usize) {
    let start = lines[..at]
        .iter()
        .rposition(|l| is_marker(l))
        .map_or(0, |m| m + 1);
    let end = lines[at + 1..]
        .iter()
        .position(|l| is_marker(l))
        .map_or(lines.len(), |m| at + 1 + m);
    (start, end)
}

/// A document marker line (`---`, `...`): no field is on it.
fn is_marker(line: &str) -> bool {
    line.starts_with("---") || line.starts_with("...")
}

/// The cursor at byte `byte` of line `line` (0-based) of `text`.
pub fn cursor(text: &str, line: usize, byte: usize) -> Option<Cursor> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let current = *lines.get(line)?;
    if is_marker(current) {
        return None;
    }
    let byte = (0..=byte.min(current.len()))
        .rev()
        .find(|&b| current.is_char_boundary(b))?;
    let (doc_start, doc_end) = document_bounds(&lines, line);
    if line < doc_start {
        return None;
    }
    let parsed = parse_line(current);
    // The word under the cursor.
    let word_start = current[..byte]
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_word(*c))
        .last()
        .map_or(byte, |(i, _)| i);
    let word_end = current[byte..]
        .char_indices()
        .find(|(_, c)| !is_word(*c))
        .map_or(current.len(), |(i, _)| byte + i);

    let mut path_tail: Vec<Segment> = Vec::new();
    let place;
    // The column the cursor's entry starts at: parents are left of it.
    let column;
    // Keys must be left of `key_limit`, dashes left of `dash_limit`.
    let mut limits: Option<(usize, usize)> = None;
    let mut own_dashes: Vec<usize> = parsed.dashes.clone();
    let colon = parsed
        .key
        .and_then(|(key_at, _)| current.get(key_at..)?.find(':').map(|c| key_at + c));
    match parsed.key {
        Some((key_at, key)) if colon.is_some_and(|colon| byte > colon) => {
            // After `key:`: a value, or inside a flow sequence of values.
            let value = colon
                .and_then(|colon| current.get(colon + 1..byte))
                .unwrap_or_default();
            path_tail.push(Segment::Key(key.to_owned()));
            if value.contains('[') && !value.contains(']') {
                path_tail.push(Segment::Item);
            }
            place = Place::Value;
            column = key_at;
        }
        Some((key_at, _)) => {
            place = Place::Key;
            column = key_at;
        }
        None => {
            column = parsed.content;
            // After `- ` with no key yet: a scalar item or the first key of
            // a mapping item; both are asked of the item's schema.
            if let Some(&dash) = own_dashes.last()
                && byte > dash
            {
                own_dashes.pop();
                path_tail.push(Segment::Item);
                // Its parent is the sequence's key; a dash at the same
                // column above is a sibling item.
                limits = Some((dash + 1, dash));
                place = Place::Value;
            } else {
                place = Place::Key;
            }
        }
    }

    // Walk up.
    let mut reversed: Vec<Segment> = Vec::new();
    let (mut key_limit, mut dash_limit) = limits.unwrap_or((column, column));
    let apply_dashes = |dashes: &[usize],
                        reversed: &mut Vec<Segment>,
                        key_limit: &mut usize,
                        dash_limit: &mut usize| {
        for &dash in dashes.iter().rev() {
            if dash < *dash_limit {
                reversed.push(Segment::Item);
                *key_limit = dash + 1;
                *dash_limit = dash;
            }
        }
    };
    apply_dashes(&own_dashes, &mut reversed, &mut key_limit, &mut dash_limit);
    for above in lines[doc_start..line].iter().rev() {
        if key_limit == 0 && dash_limit == 0 {
            break;
        }
        if is_blank_or_comment(above) || indent(above) >= key_limit.max(dash_limit) {
            continue;
        }
        let parsed = parse_line(above);
        if let Some((key_at, key)) = parsed.key
            && key_at < key_limit
        {
            reversed.push(Segment::Key(key.to_owned()));
            key_limit = key_at;
            dash_limit = key_at;
        }
        apply_dashes(
            &parsed.dashes,
            &mut reversed,
            &mut key_limit,
            &mut dash_limit,
        );
    }
    reversed.reverse();
    let mut path = reversed;
    path.extend(path_tail);

    // The document's kind, and the keys beside the cursor's.
    let kind = lines[doc_start..doc_end]
        .iter()
        .find_map(|l| l.strip_prefix("kind:"))
        .map(|k| k.trim().trim_matches(['"', '\'']).to_owned())
        .filter(|k| !k.is_empty());
    let siblings = if place == Place::Key {
        siblings(&lines[doc_start..doc_end], line - doc_start, column)
    } else {
        Vec::new()
    };
    Some(Cursor {
        path,
        place,
        word_start,
        word_end,
        kind,
        siblings,
    })
}

/// Keys at `column` in the same mapping as line `at` (stopping where the
/// indentation says the mapping ends).
fn siblings(lines: &[&str], at: usize, column: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut scan = |range: &mut dyn Iterator<Item = &&str>| {
        for line in range {
            if is_blank_or_comment(line) {
                continue;
            }
            let parsed = parse_line(line);
            let starts = parsed.dashes.first().copied().unwrap_or(parsed.content);
            if starts < column && parsed.key.is_none_or(|(k, _)| k != column) {
                break;
            }
            if let Some((key_at, key)) = parsed.key
                && key_at == column
            {
                out.push(key.to_owned());
                if parsed.dashes.last().is_some_and(|d| d + 2 == column) {
                    break;
                }
            }
        }
    };
    scan(&mut lines[..at].iter().rev());
    scan(&mut lines[at + 1..].iter());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: web
spec:
  endpointSelector:
    matchLabels:
      app: web
  ingress:
  - fromEndpoints:
    - matchLabels:
        app: x
    toPorts:
    - ports:
      - port: \"80\"
        protocol: TCP
";

    fn at(text: &str, line: usize, needle: &str) -> Cursor {
        let l = text.split('\n').nth(line).unwrap();
        cursor(text, line, l.find(needle).unwrap() + 1).unwrap()
    }

    fn keys(path: &[Segment]) -> String {
        path.iter()
            .map(|s| match s {
                Segment::Key(k) => k.as_str(),
                Segment::Item => "-",
            })
            .collect::<Vec<_>>()
            .join(".")
    }

    #[test]
    fn paths_follow_indentation_and_sequence_markers() {
        let c = at(POLICY, 15, "protocol");
        assert_eq!(keys(&c.path), "spec.ingress.-.toPorts.-.ports.-");
        assert_eq!(c.place, Place::Key);
        assert_eq!(c.siblings, ["port"]);
        assert_eq!(c.kind.as_deref(), Some("CiliumNetworkPolicy"));
        let c = at(POLICY, 15, "TCP");
        assert_eq!(keys(&c.path), "spec.ingress.-.toPorts.-.ports.-.protocol");
        assert_eq!(c.place, Place::Value);
        let c = at(POLICY, 12, "toPorts");
        assert_eq!(keys(&c.path), "spec.ingress.-");
        assert_eq!(c.siblings, ["fromEndpoints"]);
        let c = at(POLICY, 9, "fromEndpoints");
        assert_eq!(keys(&c.path), "spec.ingress.-");
        let c = at(POLICY, 7, "app");
        assert_eq!(keys(&c.path), "spec.endpointSelector.matchLabels");
        let c = at(POLICY, 1, "kind");
        assert_eq!(keys(&c.path), "");
    }

    #[test]
    fn incomplete_lines_and_flow_sequences() {
        let text = "kind: CiliumNetworkPolicy\nspec:\n  endpointSel\n  ingress:\n  - fromEntities: [wor\n  - \n---\nkind: NetworkPolicy\nspec:\n  po";
        let c = at(text, 2, "endpointSel");
        assert_eq!(
            (keys(&c.path), c.place.clone()),
            ("spec".to_owned(), Place::Key)
        );
        let c = at(text, 4, "wor");
        assert_eq!(keys(&c.path), "spec.ingress.-.fromEntities.-");
        assert_eq!(c.place, Place::Value);
        let c = cursor(text, 5, 4).unwrap();
        assert_eq!(
            (keys(&c.path), c.place),
            ("spec.ingress.-".to_owned(), Place::Value)
        );
        let c = cursor(text, 9, 4).unwrap();
        assert_eq!(keys(&c.path), "spec");
        assert_eq!(c.kind.as_deref(), Some("NetworkPolicy"));
        assert_eq!(
            &text.split('\n').nth(9).unwrap()[c.word_start..c.word_end],
            "po"
        );
    }

    #[test]
    fn any_position_is_answered_without_panicking() {
        let text = "a:\n  - é: [x\n---\n\t- : :\n- - - k: v\n...\n---";
        for line in 0..9 {
            for byte in 0..20 {
                let _ = cursor(text, line, byte);
            }
        }
    }
}
