//! "Did you mean" suggestions by edit distance.

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
