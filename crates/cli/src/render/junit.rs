//! JUnit XML for CI test reporters: one `<testsuite>` named `porin lint`,
//! one `<testcase>` per lint rule (and per other diagnostic code that
//! occurred). A rule's findings that fail the run (see `--fail-on`) are
//! `<failure>`s; other findings go to `<system-out>`; rules skipped for
//! lack of an inventory are `<skipped/>`. The layout follows the de-facto
//! schema of Jenkins/GitLab/GitHub test reporters (testsuites > testsuite >
//! testcase with failure/skipped/system-out).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use porin_compiler::verify::codes as lint_codes;
use porin_model::diagnostic::Diagnostic;

use super::FailOn;

/// Escapes XML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => {
                let _ = write!(out, "&#x{:x};", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn describe(d: &Diagnostic) -> String {
    let mut text = String::new();
    if let Some(l) = &d.primary {
        let _ = write!(text, "{}:{}:{}: ", l.file, l.line, l.column);
    }
    let _ = write!(text, "{}[{}]: {}", d.severity.as_str(), d.code, d.message);
    for (l, label) in &d.related {
        let _ = write!(text, "\n  {label}: {}:{}:{}", l.file, l.line, l.column);
    }
    for note in &d.notes {
        let _ = write!(text, "\n  note: {note}");
    }
    if let Some(help) = &d.help {
        let _ = write!(text, "\n  help: {help}");
    }
    text
}

/// Renders findings as JUnit XML.
pub fn render(diagnostics: &[Diagnostic], skipped: &[&str], fail_on: FailOn) -> String {
    let mut cases: BTreeMap<&str, (String, Vec<&Diagnostic>)> = BTreeMap::new();
    for rule in lint_codes::ALL {
        cases.insert(rule.code, (rule.name.to_owned(), Vec::new()));
    }
    for d in diagnostics {
        cases
            .entry(d.code)
            .or_insert_with(|| {
                let name = porin_model::codes::ALL
                    .iter()
                    .find(|c| c.code == d.code)
                    .map_or_else(String::new, |c| c.name.to_owned());
                (name, Vec::new())
            })
            .1
            .push(d);
    }
    let failures = cases
        .values()
        .filter(|(_, ds)| ds.iter().any(|d| fail_on.fails(d.severity)))
        .count();
    let skipped_count = cases.keys().filter(|c| skipped.contains(c)).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"porin\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped_count}\">",
        cases.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"porin lint\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped_count}\">",
        cases.len()
    );
    for (code, (name, findings)) in &cases {
        let title = if name.is_empty() {
            (*code).to_owned()
        } else {
            format!("{code} {name}")
        };
        let _ = write!(
            out,
            "    <testcase classname=\"porin.lint\" name=\"{}\"",
            escape(&title)
        );
        let failing: Vec<&&Diagnostic> = findings
            .iter()
            .filter(|d| fail_on.fails(d.severity))
            .collect();
        let other: Vec<&&Diagnostic> = findings
            .iter()
            .filter(|d| !fail_on.fails(d.severity))
            .collect();
        if failing.is_empty() && other.is_empty() && !skipped.contains(code) {
            out.push_str("/>\n");
            continue;
        }
        out.push_str(">\n");
        if skipped.contains(code) {
            out.push_str("      <skipped message=\"needs --inventory\"/>\n");
        }
        if !failing.is_empty() {
            let body: Vec<String> = failing.iter().map(|d| describe(d)).collect();
            let _ = writeln!(
                out,
                "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                failing[0].severity.as_str(),
                escape(&format!(
                    "{} finding(s): {}",
                    failing.len(),
                    failing[0].message
                )),
                escape(&body.join("\n\n"))
            );
        }
        if !other.is_empty() {
            let body: Vec<String> = other.iter().map(|d| describe(d)).collect();
            let _ = writeln!(
                out,
                "      <system-out>{}</system-out>",
                escape(&body.join("\n\n"))
            );
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_xml() {
        assert_eq!(
            super::escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;&#x1;"
        );
    }
}
