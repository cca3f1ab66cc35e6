//! "Did you mean" suggestions by edit distance, and the one replacement a
//! diagnostic suggests (for editors' quick fixes).

use crate::codes;
use crate::diagnostic::Diagnostic;

/// Levenshtein distance over characters (inputs here are short field names).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// The candidate closest to `input`, if it is close enough to be a likely
/// typo: a case-insensitive match, or within a third of the length in edits.
pub fn did_you_mean<'c>(
    input: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let lowered = input.to_lowercase();
    let mut best: Option<(usize, &'c str)> = None;
    for candidate in candidates {
        if candidate.to_lowercase() == lowered {
            return Some(candidate);
        }
        let distance = edit_distance(&lowered, &candidate.to_lowercase());
        if best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    let limit = (input.chars().count() / 3).max(1);
    best.filter(|(d, _)| *d <= limit).map(|(_, c)| c)
}

/// The text that should replace the token at a diagnostic's primary
/// location, when the diagnostic suggests exactly one mechanical fix: the
/// field an unknown field is a typo of (PM003 `did you mean "fromEndpoints"?`),
/// the quoted form of an unquoted string (PM004 `quote the value: "8080"`),
/// or the enum value a wrong one is close to (`did you mean `TCP`?`, e.g.
/// PM006, PM017, PM023). `None` for every other diagnostic.
///
/// The phrases are the ones this crate writes (loader.rs, yaml/de.rs); a
/// test (`tests/model/suggestions.rs`) loads real inputs, so a change of
/// wording fails there rather than silently disabling an editor's quick fix.
pub fn suggested_replacement(diagnostic: &Diagnostic) -> Option<String> {
    if diagnostic.code == codes::UNKNOWN_FIELD.code {
        let (_, rest) = diagnostic.message.split_once(", did you mean \"")?;
        let field = rest.strip_suffix("\"?")?;
        return plain_token(field).then(|| field.to_owned());
    }
    let help = diagnostic.help.as_deref()?;
    if diagnostic.code == codes::WRONG_TYPE.code {
        let quoted = help.strip_prefix("the field is a string; quote the value: ")?;
        let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
        return (!inner.contains(['"', '\\'])).then(|| quoted.to_owned());
    }
    let (_, rest) = help.split_once("did you mean `")?;
    let (value, _) = rest.split_once("`?")?;
    plain_token(value).then(|| value.to_owned())
}

/// A suggestion that can stand unquoted in YAML as it is (names and enum
/// values: letters, digits, `-`, `_`, `.`, `/`).
fn plain_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_plural_field() {
        assert_eq!(
            did_you_mean("fromEndpoint", ["fromEndpoints", "fromEntities", "toPorts"]),
            Some("fromEndpoints")
        );
    }

    #[test]
    fn case_insensitive_match_wins() {
        assert_eq!(did_you_mean("tcp", ["TCP", "UDP"]), Some("TCP"));
    }

    #[test]
    fn nothing_close() {
        assert_eq!(did_you_mean("zzzzzz", ["ingress", "egress"]), None);
    }
}
