//! JUnit XML for CI test reporters.
//!
//! One writer ([`write`]) serves both commands that speak JUnit:
//! - `porin lint --format junit` ([`render`]): one `<testsuite>` named
//!   `porin lint`, one `<testcase>` per lint rule (and per other diagnostic
//!   code that occurred). A rule's findings that fail the run (see
//!   `--fail-on`) are `<failure>`s; other findings go to `<system-out>`;
//!   rules skipped for lack of an inventory are `<skipped/>`.
//! - `porin test --format junit` (`commands::test`): one `<testsuite>` per
//!   test file, one `<testcase>` per case.
//!
//! The layout follows the de-facto schema of Jenkins/GitLab/GitHub test
//! reporters (testsuites > testsuite > testcase with
//! failure/error/skipped/system-out, counts and `time` in seconds on the
//! suites).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use porin_lint::codes as lint_codes;
use porin_model::diagnostic::Diagnostic;

use super::FailOn;

/// Escapes XML text and attribute values (one escaper for every XML
/// porin writes: JUnit here, SVG in `porin graph`).
pub use porin_connectivity::render::xml_escape as escape;

/// A `<failure>` or `<error>` of a test case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The `type` attribute (a short category).
    pub kind: String,
    /// The `message` attribute (one line).
    pub message: String,
    /// The element's text (details, may span lines).
    pub body: String,
}

/// One `<testcase>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Case {
    /// The `classname` attribute.
    pub classname: String,
    /// The `name` attribute.
    pub name: String,
    /// The `file` attribute, when the case comes from a file.
    pub file: Option<String>,
    /// The `line` attribute (with `file`).
    pub line: Option<u64>,
    /// The `time` attribute, when measured.
    pub time: Option<Duration>,
    /// `<skipped message=...>`: the case did not run.
    pub skipped: Option<String>,
    /// `<failure>`: the case ran and did not hold.
    pub failure: Option<Problem>,
    /// `<error>`: the case could not be run.
    pub error: Option<Problem>,
    /// `<system-out>`: anything worth keeping that is not a failure.
    pub system_out: Option<String>,
}

/// One `<testsuite>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Suite {
    /// The `name` attribute.
    pub name: String,
    /// The `time` attribute, when measured.
    pub time: Option<Duration>,
    /// The cases.
    pub cases: Vec<Case>,
}

#[derive(Default)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

impl Counts {
    fn of(cases: &[Case]) -> Counts {
        Counts {
            tests: cases.len(),
            failures: cases.iter().filter(|c| c.failure.is_some()).count(),
            errors: cases.iter().filter(|c| c.error.is_some()).count(),
            skipped: cases.iter().filter(|c| c.skipped.is_some()).count(),
        }
    }

    fn add(&mut self, other: &Counts) {
        self.tests += other.tests;
        self.failures += other.failures;
        self.errors += other.errors;
        self.skipped += other.skipped;
    }

    fn attributes(&self) -> String {
        format!(
            "tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\"",
            self.tests, self.failures, self.errors, self.skipped
        )
    }
}

fn time_attribute(time: Option<Duration>) -> String {
    time.map_or_else(String::new, |t| format!(" time=\"{:.3}\"", t.as_secs_f64()))
}

fn problem(out: &mut String, element: &str, p: &Problem) {
    let _ = writeln!(
        out,
        "      <{element} type=\"{}\" message=\"{}\">{}</{element}>",
        escape(&p.kind),
        escape(&p.message),
        escape(&p.body)
    );
}

/// Writes a JUnit document: `<testsuites name=...>` around the suites,
/// with failure/error/skipped counts computed from the cases.
pub fn write(name: &str, suites: &[Suite]) -> String {
    let mut total = Counts::default();
    for suite in suites {
        total.add(&Counts::of(&suite.cases));
    }
    let total_time = suites
        .iter()
        .map(|s| s.time)
        .try_fold(Duration::ZERO, |sum, t| t.map(|t| sum + t));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" {}{}>",
        escape(name),
        total.attributes(),
        time_attribute(total_time.filter(|_| !suites.is_empty()))
    );
    for suite in suites {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" {}{}>",
            escape(&suite.name),
            Counts::of(&suite.cases).attributes(),
            time_attribute(suite.time)
        );
        for case in &suite.cases {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\"",
                escape(&case.classname),
                escape(&case.name)
            );
            if let Some(file) = &case.file {
                let _ = write!(out, " file=\"{}\"", escape(file));
                if let Some(line) = case.line {
                    let _ = write!(out, " line=\"{line}\"");
                }
            }
            out.push_str(&time_attribute(case.time));
            if case.skipped.is_none()
                && case.failure.is_none()
                && case.error.is_none()
                && case.system_out.is_none()
            {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            if let Some(message) = &case.skipped {
                let _ = writeln!(out, "      <skipped message=\"{}\"/>", escape(message));
            }
            if let Some(p) = &case.failure {
                problem(&mut out, "failure", p);
            }
            if let Some(p) = &case.error {
                problem(&mut out, "error", p);
            }
            if let Some(text) = &case.system_out {
                let _ = writeln!(out, "      <system-out>{}</system-out>", escape(text));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
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

/// A run that could not finish (a resource limit): one suite, one case
/// with an `<error>` (the JUnit element for "could not be run").
pub fn render_failure(name: &str, failure: &Diagnostic) -> String {
    write(
        "porin",
        &[Suite {
            name: name.to_owned(),
            time: None,
            cases: vec![Case {
                classname: "porin.lint".to_owned(),
                name: format!(
                    "{} {}",
                    failure.code,
                    lint_codes::find(failure.code).map_or("", |c| c.name)
                ),
                error: Some(Problem {
                    kind: failure.severity.as_str().to_owned(),
                    message: failure.message.clone(),
                    body: describe(failure),
                }),
                ..Case::default()
            }],
        }],
    )
}

/// Renders lint findings as JUnit XML.
pub fn render(diagnostics: &[Diagnostic], skipped: &[&str], fail_on: FailOn) -> String {
    let mut rules: BTreeMap<&str, (&str, Vec<&Diagnostic>)> = BTreeMap::new();
    for rule in lint_codes::rules() {
        rules.insert(rule.code, (rule.name, Vec::new()));
    }
    for d in diagnostics {
        rules
            .entry(d.code)
            .or_insert_with(|| (lint_codes::find(d.code).map_or("", |c| c.name), Vec::new()))
            .1
            .push(d);
    }
    let cases = rules
        .iter()
        .map(|(code, (name, findings))| {
            let (failing, other): (Vec<&Diagnostic>, Vec<&Diagnostic>) =
                findings.iter().partition(|d| fail_on.fails(d.severity));
            let join = |ds: &[&Diagnostic]| {
                ds.iter()
                    .map(|d| describe(d))
                    .collect::<Vec<_>>()
                    .join("\n\n")
            };
            Case {
                classname: "porin.lint".to_owned(),
                name: if name.is_empty() {
                    (*code).to_owned()
                } else {
                    format!("{code} {name}")
                },
                skipped: skipped
                    .contains(code)
                    .then(|| "needs --inventory".to_owned()),
                failure: failing.first().map(|first| Problem {
                    kind: first.severity.as_str().to_owned(),
                    message: format!("{} finding(s): {}", failing.len(), first.message),
                    body: join(&failing),
                }),
                system_out: (!other.is_empty()).then(|| join(&other)),
                ..Case::default()
            }
        })
        .collect();
    write(
        "porin",
        &[Suite {
            name: "porin lint".to_owned(),
            time: None,
            cases,
        }],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_xml() {
        assert_eq!(
            escape("a<b & \"c\"\u{1}'"),
            "a&lt;b &amp; &quot;c&quot;\u{FFFD}&apos;"
        );
        assert_eq!(escape("tab\tnew\nline"), "tab\tnew\nline");
    }

    #[test]
    fn counts_and_times_come_from_the_cases() {
        let failing = Case {
            classname: "c".to_owned(),
            name: "fails".to_owned(),
            time: Some(Duration::from_millis(1500)),
            failure: Some(Problem {
                kind: "k".to_owned(),
                message: "m".to_owned(),
                body: "b".to_owned(),
            }),
            ..Case::default()
        };
        let skipped = Case {
            name: "skips".to_owned(),
            skipped: Some("why".to_owned()),
            ..Case::default()
        };
        let xml = write(
            "top",
            &[Suite {
                name: "s".to_owned(),
                time: Some(Duration::from_millis(2000)),
                cases: vec![failing, skipped],
            }],
        );
        assert!(xml.contains(
            "<testsuites name=\"top\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"2.000\">"
        ));
        assert!(xml.contains("name=\"fails\" time=\"1.500\">"));
        assert!(xml.contains("<failure type=\"k\" message=\"m\">b</failure>"));
        assert!(xml.contains("<skipped message=\"why\"/>"));
    }
}
