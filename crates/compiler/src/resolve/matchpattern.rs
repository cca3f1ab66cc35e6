//! `toFQDNs.matchPattern` against DNS names, with the semantics of Cilium
//! 1.19's `pkg/fqdn/matchpattern/matchpattern.go` and in time linear in the
//! name (issue 12: a backtracking glob took 46 s on `*a*a*a*a*a*a*a*a*b.com`).
//!
//! Cilium turns a pattern into a Go regexp (RE2, linear time) and matches it
//! against the names of its DNS cache, which are lower-case and fully
//! qualified (`name.`): `NameManager.mapSelectorsToNamesLocked` (package
//! `pkg/fqdn`) runs `ToAnchoredRegexp(Sanitize(pattern))` over the cache:
//!
//! - `Sanitize`: a pattern made only of stars, optionally with one trailing
//!   dot (`*`, `**`, `*.`, `***.`: `isDNSWildcard`) stays as it is; any other
//!   pattern gets a trailing dot unless it has one (`dns.FQDN`).
//! - `ToAnchoredRegexp` trims spaces, lower-cases, and then:
//!   - a star-only pattern becomes `(^([-a-zA-Z0-9_]+[.])+$)|(^[.]$)`: every
//!     name of non-empty labels of DNS characters, and the root `.`;
//!   - otherwise (`escapeRegexpCharacters`): two or more leading stars
//!     followed by a dot (`**.`, new in 1.19, PR cilium/cilium#43420) become
//!     `[-a-zA-Z0-9_]+([.][-a-zA-Z0-9_]+){0,}[.]`: one or more whole labels;
//!     every other run of stars becomes `[-a-zA-Z0-9_]*`: zero or more DNS
//!     characters of one label, never a dot; `.` is a literal dot and every
//!     other character itself; the whole is anchored (`^...$`).
//!
//! Instead of a regexp engine, [`MatchPattern`] compiles the pattern into that
//! small automaton and simulates it on the set of its states (no
//! backtracking): `O(name × pattern)` steps, each pattern at most 255 bytes.

/// The characters `[-a-zA-Z0-9_]` (`allowedDNSCharsREGroup`).
fn is_dns_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'
}

/// One element of a pattern after its optional `**.` prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Atom {
    /// This byte.
    Byte(u8),
    /// `[-a-zA-Z0-9_]*`.
    Star,
}

/// A compiled `matchPattern`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchPattern {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A star-only pattern: every well-formed name and the root.
    AllNames,
    /// `(labels prefix)? atoms`.
    Program { subdomains: bool, atoms: Vec<Atom> },
}

/// Go's `isDNSWildcard`: stars only, optionally one trailing dot, not empty.
fn is_dns_wildcard(pattern: &str) -> bool {
    let stars = pattern.strip_suffix('.').unwrap_or(pattern);
    !stars.is_empty() && stars.bytes().all(|b| b == b'*')
}

impl MatchPattern {
    /// Compiles a pattern as written in the policy.
    pub fn new(pattern: &str) -> Self {
        // Sanitize, then ToAnchoredRegexp, in Cilium's order.
        let sanitized = if is_dns_wildcard(pattern) || pattern.ends_with('.') {
            pattern.to_owned()
        } else {
            format!("{pattern}.")
        };
        let pattern = sanitized.trim().to_lowercase();
        if is_dns_wildcard(&pattern) {
            return MatchPattern {
                kind: Kind::AllNames,
            };
        }
        let bytes = pattern.as_bytes();
        let leading = bytes.iter().take_while(|&&b| b == b'*').count();
        let subdomains = leading >= 2 && bytes.get(leading) == Some(&b'.');
        let rest = if subdomains {
            &bytes[leading + 1..]
        } else {
            bytes
        };
        let mut atoms = Vec::with_capacity(rest.len());
        for &byte in rest {
            match byte {
                // A run of stars is one `[-a-zA-Z0-9_]*`.
                b'*' if atoms.last() == Some(&Atom::Star) => {}
                b'*' => atoms.push(Atom::Star),
                other => atoms.push(Atom::Byte(other)),
            }
        }
        MatchPattern {
            kind: Kind::Program { subdomains, atoms },
        }
    }

    /// Whether a DNS name (as the inventory holds it: any case, with or
    /// without the trailing dot) matches.
    pub fn matches(&self, name: &str) -> bool {
        self.matches_counting(name).0
    }

    /// [`Self::matches`], and the number of automaton steps the match took:
    /// at most `3 × (name length + 2) × (pattern length + 2)` (per byte of
    /// the name: each live state once, each state added at most once, one
    /// failed add per live state).
    pub fn matches_counting(&self, name: &str) -> (bool, usize) {
        // The DNS cache holds lower-case FQDNs (`dns.FQDN`, `strings.ToLower`).
        let mut fqdn: Vec<u8> = name.bytes().map(|b| b.to_ascii_lowercase()).collect();
        if fqdn.last() != Some(&b'.') {
            fqdn.push(b'.');
        }
        match &self.kind {
            Kind::AllNames => all_names(&fqdn),
            Kind::Program { subdomains, atoms } => run(*subdomains, atoms, &fqdn),
        }
    }
}

/// `(^([-a-zA-Z0-9_]+[.])+$)|(^[.]$)`, one pass.
fn all_names(fqdn: &[u8]) -> (bool, usize) {
    if fqdn == b"." {
        return (true, 1);
    }
    let mut label = 0usize;
    for (steps, &byte) in fqdn.iter().enumerate() {
        if byte == b'.' {
            if label == 0 {
                return (false, steps + 1);
            }
            label = 0;
        } else if is_dns_char(byte) {
            label += 1;
        } else {
            return (false, steps + 1);
        }
    }
    // `fqdn` ends with a dot, so the last label was closed.
    (true, fqdn.len())
}

/// Adds position `at` and, through stars (which may match nothing), every
/// position after it.
fn add(states: &mut [bool], atoms: &[Atom], mut at: usize, steps: &mut usize) {
    loop {
        *steps += 1;
        if states[at] {
            return;
        }
        states[at] = true;
        match atoms.get(at) {
            Some(Atom::Star) => at += 1,
            _ => return,
        }
    }
}

/// Simulates the automaton: `states[i]` = "atoms[..i] matched the name so
/// far"; the `**.` prefix has two states of its own (at the start of a
/// label, inside a label).
fn run(subdomains: bool, atoms: &[Atom], fqdn: &[u8]) -> (bool, usize) {
    let mut steps = 0usize;
    let mut states = vec![false; atoms.len() + 1];
    let mut next = vec![false; atoms.len() + 1];
    // The `**.` prefix needs at least one whole label before the atoms.
    let mut label_start = subdomains;
    let mut in_label = false;
    if !subdomains {
        add(&mut states, atoms, 0, &mut steps);
    }
    for &byte in fqdn {
        next.fill(false);
        let mut any = false;
        for (at, &live) in states.iter().enumerate() {
            if !live {
                continue;
            }
            steps += 1;
            match atoms.get(at) {
                Some(Atom::Byte(b)) if *b == byte => {
                    add(&mut next, atoms, at + 1, &mut steps);
                    any = true;
                }
                Some(Atom::Star) if is_dns_char(byte) => {
                    add(&mut next, atoms, at, &mut steps);
                    any = true;
                }
                _ => {}
            }
        }
        let dns_char = is_dns_char(byte);
        let closes_label = in_label && byte == b'.';
        in_label = (label_start || in_label) && dns_char;
        label_start = closes_label;
        if closes_label {
            // One more whole label: the atoms may start here.
            add(&mut next, atoms, 0, &mut steps);
            any = true;
        }
        steps += 1;
        std::mem::swap(&mut states, &mut next);
        if !any && !in_label && !label_start {
            return (false, steps);
        }
    }
    (states[atoms.len()], steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, name: &str) -> bool {
        MatchPattern::new(pattern).matches(name)
    }

    /// `TestAnchoredMatchPatternMatching` (matchpattern_test.go), names
    /// without their trailing dot as porin's inventory holds them.
    #[test]
    fn cilium_matchpattern_test_table() {
        let table: &[(&str, &[&str], &[&str])] = &[
            (
                "cilium.io.",
                &["cilium.io."],
                &[
                    "anysub.cilium.io.",
                    "anysub.ci.io.",
                    "anysub.ciliumandmore.io.",
                ],
            ),
            (
                "*.cilium.io.",
                &["anysub.cilium.io."],
                &["cilium.io.", "anysub.ci.io.", "anysub.ciliumandmore.io."],
            ),
            (
                "*.ci*.io.",
                &[
                    "anysub.cilium.io.",
                    "anysub.ci.io.",
                    "anysub.ciliumandmore.io.",
                ],
                &["cilium.io."],
            ),
            (
                "*",
                &[
                    ".",
                    "io.",
                    "cilium.io.",
                    "svc.cluster.local.",
                    "service.namesace.svc.cluster.local.",
                    "_foobar._tcp.cilium.io.",
                ],
                &[".io.", ".cilium.io.", ".svc.cluster.local."],
            ),
            (
                "_foobar._tcp.cilium.io.",
                &["_foobar._tcp.cilium.io."],
                &["_tcp.cilium.io.", "cilium.io."],
            ),
            ("*.*.cilium.io.", &["_foobar._tcp.cilium.io."], &[]),
        ];
        for (pattern, accept, reject) in table {
            for name in *accept {
                assert!(m(pattern, name), "{pattern} must match {name}");
            }
            for name in *reject {
                assert!(!m(pattern, name), "{pattern} must not match {name}");
            }
        }
    }

    #[test]
    fn one_star_is_one_label_of_dns_characters() {
        assert!(m("*", "a.b.c"));
        assert!(m("*.cilium.io", "docs.cilium.io"));
        assert!(!m("*.cilium.io", "cilium.io"));
        assert!(!m("*.cilium.io", "a.b.cilium.io"));
        assert!(m("api-*.example.com", "api-v1.example.com"));
        // zero characters
        assert!(m("api*.example.com", "api.example.com"));
        // `_` and `-` are DNS characters; other bytes are not
        assert!(m("*.example.com", "_a-b.example.com"));
        assert!(!m("*.example.com", "a+b.example.com"));
        assert!(!m("*", "a+b.example.com"));
        // a run of stars is one star, also in the middle
        assert!(m("a**b.com", "axxb.com"));
        assert!(!m("a.**.com", "a.b.c.com"));
    }

    #[test]
    fn case_and_trailing_dot_do_not_matter() {
        assert!(m("API.Example.COM", "api.example.com"));
        assert!(m("api.example.com.", "API.EXAMPLE.COM"));
        assert!(m("*.example.com.", "www.example.com."));
        assert!(m("*.", "www.example.com"));
        assert!(m("**.", "www.example.com"));
    }

    /// `**.` prefix (1.19): one or more whole labels.
    #[test]
    fn double_star_dot_prefix_is_one_or_more_labels() {
        assert!(m("**.example.org", "a.example.org"));
        assert!(m("**.example.org", "a.b.c.example.org"));
        assert!(!m("**.example.org", "example.org"));
        assert!(!m("**.example.org", ".example.org"));
        assert!(!m("**.example.org", "a..example.org"));
        assert!(m("***.*.org", "a.b.x.org"));
        assert!(!m("***.*.org", "x.org"));
        // `**` not followed by a dot is a plain star
        assert!(m("**x.org", "abx.org"));
        assert!(!m("**x.org", "a.bx.org"));
    }

    /// The issue's pattern (and worse): the steps stay under
    /// `3 × (name + 2) × (pattern + 2)`; a backtracking glob needs
    /// exponentially many (46 s of CPU for 8 stars and a 60-byte label).
    #[test]
    fn pathological_patterns_take_linear_steps() {
        for stars in [8usize, 10, 20, 120] {
            let pattern = format!("{}b.com", "*a".repeat(stars));
            let compiled = MatchPattern::new(&pattern);
            for label in [60usize, 120, 250] {
                let name = format!("{}.com", "a".repeat(label));
                let (matched, steps) = compiled.matches_counting(&name);
                assert!(!matched);
                let bound = 3 * (name.len() + 2) * (pattern.len() + 2);
                assert!(steps <= bound, "{pattern} on {label}: {steps} > {bound}");
                let hit = format!("{}b.com", "a".repeat(label));
                assert_eq!(compiled.matches(&hit), label >= stars, "{pattern} on {hit}");
            }
        }
    }
}

/// Differential test against Cilium's regexp, built the way Cilium builds it
/// (Sanitize, then ToAnchoredRegexp with the `regexp.ReplaceAllString`
/// formulation of escapeRegexpCharacters), run by the `regex` crate.
#[cfg(test)]
mod oracle {
    use proptest::prelude::*;
    use regex::{NoExpand, Regex};

    use super::MatchPattern;

    const DNS_CHARS: &str = "[-a-zA-Z0-9_]";

    fn star_only(pattern: &str) -> bool {
        Regex::new(r"^[*]{1,}[.]?$")
            .map(|re| re.is_match(pattern))
            .unwrap_or(false)
    }

    fn cilium_regexp(pattern: &str) -> String {
        let sanitized = if star_only(pattern) || pattern.ends_with('.') {
            pattern.to_owned()
        } else {
            format!("{pattern}.")
        };
        let pattern = sanitized.trim().to_lowercase();
        if star_only(&pattern) {
            return format!("(^({DNS_CHARS}+[.])+$)|(^[.]$)");
        }
        let dotted = pattern.replace('.', "[.]");
        let labels = format!("({DNS_CHARS}+([.]{DNS_CHARS}+){{0,}})[.]");
        let prefixed = Regex::new(r"^[*]{2,}\[\.\]")
            .expect("prefix regexp")
            .replace_all(&dotted, NoExpand(&labels))
            .into_owned();
        let stars = format!("{DNS_CHARS}*");
        let body = Regex::new("[*]{1,}")
            .expect("star regexp")
            .replace_all(&prefixed, NoExpand(&stars))
            .into_owned();
        format!("^{body}$")
    }

    fn cilium_matches(pattern: &str, name: &str) -> bool {
        let mut fqdn = name.to_ascii_lowercase();
        if !fqdn.ends_with('.') {
            fqdn.push('.');
        }
        Regex::new(&cilium_regexp(pattern))
            .expect("Cilium's regexp compiles")
            .is_match(&fqdn)
    }

    fn agree(pattern: &str, name: &str) -> Result<(), TestCaseError> {
        prop_assert_eq!(
            MatchPattern::new(pattern).matches(name),
            cilium_matches(pattern, name),
            "pattern {:?} name {:?} regexp {}",
            pattern,
            name,
            cilium_regexp(pattern)
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn matcher_agrees_with_ciliums_regexp(
            pattern in "[ab*.-]{1,10}",
            name in "[abAB_.+-]{0,12}",
        ) {
            agree(&pattern, &name)?;
        }

        /// Names built to match patterns often, so both answers are tested.
        #[test]
        fn matcher_agrees_on_related_names(
            pattern in "(\\*\\*\\.)?([ab]|\\*){1,4}(\\.([ab]|\\*){1,3}){0,3}\\.?",
            name in "([ab]{1,3}\\.){0,5}[ab]{0,3}",
        ) {
            agree(&pattern, &name)?;
        }
    }

    #[test]
    fn oracle_matches_ciliums_expected_regexps() {
        // TestAnchoredMatchPatternREConversion (matchpattern_test.go).
        assert_eq!(cilium_regexp("cilium.io."), "^cilium[.]io[.]$");
        assert_eq!(
            cilium_regexp("*.cilium.io."),
            "^[-a-zA-Z0-9_]*[.]cilium[.]io[.]$"
        );
        assert_eq!(cilium_regexp("*"), "(^([-a-zA-Z0-9_]+[.])+$)|(^[.]$)");
        assert_eq!(
            cilium_regexp("**.cilium.io"),
            "^([-a-zA-Z0-9_]+([.][-a-zA-Z0-9_]+){0,})[.]cilium[.]io[.]$"
        );
    }
}
