//! Any text → `porin_lint::baseline::Baseline::parse` (what
//! `porin lint --baseline FILE` reads): never panics; a baseline it accepts
//! is sorted without repeats, writes back to text that parses to the same
//! baseline (write → read is the identity), and splits findings without
//! panicking: every finding is either new or baselined.

#![no_main]

use libfuzzer_sys::{Corpus, fuzz_target};
use porin_lint::baseline::{Baseline, Fingerprint};
use porin_model::diagnostic::{Diagnostic, Location};

fuzz_target!(|data: &[u8]| -> Corpus {
    let Ok(text) = std::str::from_utf8(data) else {
        return Corpus::Reject;
    };
    let Ok(baseline) = Baseline::parse("fuzz.json", text) else {
        return Corpus::Keep;
    };
    assert!(
        baseline.findings.windows(2).all(|w| w[0] < w[1]),
        "not sorted without repeats: {text}"
    );
    let again = Baseline::parse("fuzz.json", &baseline.to_json())
        .unwrap_or_else(|e| panic!("its own output refused: {e}\n{text}"));
    assert_eq!(again, baseline, "write → read changed it: {text}");
    // One finding per entry, at a file with no tree: the object is unknown,
    // so only entries without kind/namespace/name can match.
    let findings: Vec<Diagnostic> = baseline
        .findings
        .iter()
        .map(|entry| {
            let mut d = Diagnostic::new(porin_lint::baseline::STALE_ENTRY, entry.message.clone());
            d.primary = Some(Location {
                file: entry.file.clone(),
                document: 0,
                line: 1,
                column: 1,
                route: entry.route.clone(),
            });
            d
        })
        .collect();
    let total = findings.len();
    let applied = baseline.apply(findings, &[], |_| true);
    assert_eq!(applied.new.len() + applied.baselined, total);
    assert!(applied.stale.iter().all(|e| baseline.findings.contains(e)));
    let _ = applied.stale.iter().map(Fingerprint::describe).count();
    Corpus::Keep
});
