//! `porin test --format junit` on `fixtures/policy-tests-junit/`: insta
//! snapshots of a passing and a failing run (times redacted), and the XML
//! parsed back (roxmltree) to prove it is well-formed and that escaped
//! names, counts, failures, errors and skips mean what they say.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use crate::common;
use common::porin;

fn junit(path: &str) -> (Option<i32>, String) {
    let out = porin(&["test", path, "--format", "junit"]);
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

/// Replaces every `time="..."` value: wall times change from run to run.
fn redact_times(xml: &str) -> String {
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml;
    while let Some(at) = rest.find(" time=\"") {
        let (head, tail) = rest.split_at(at + " time=\"".len());
        out.push_str(head);
        let end = tail.find('"').unwrap();
        let value = &tail[..end];
        assert!(
            value.parse::<f64>().is_ok_and(|t| t >= 0.0),
            "bad time {value}"
        );
        out.push_str("[t]");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

fn attribute<'a>(node: roxmltree::Node<'a, '_>, name: &str) -> &'a str {
    node.attribute(name)
        .unwrap_or_else(|| panic!("<{}> lacks {name}", node.tag_name().name()))
}

fn count(node: roxmltree::Node<'_, '_>, name: &str) -> usize {
    attribute(node, name).parse().unwrap()
}

#[test]
fn passing_run_snapshot_and_structure() {
    let (code, xml) = junit("fixtures/policy-tests-junit/passing");
    assert_eq!(code, Some(0));
    insta::assert_snapshot!("test_junit_passing", redact_times(&xml));

    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(count(root, "tests"), 3);
    assert_eq!(count(root, "failures"), 0);
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 1, "one suite per test file");
    let names: Vec<&str> = suites[0]
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| attribute(n, "name"))
        .collect();
    // Escaped on the way out, the same text on the way back in.
    assert_eq!(
        names,
        [
            "web to db (shop/web -> shop/db TCP/5432)",
            "db port only <5432> & nothing else (shop/web -> shop/db TCP/5433)",
            "world -> shop/db TCP/5432",
        ]
    );
    for case in suites[0].children().filter(|n| n.has_tag_name("testcase")) {
        assert_eq!(
            attribute(case, "classname"),
            "fixtures/policy-tests-junit/passing/web-db.yaml"
        );
        assert!(attribute(case, "time").parse::<f64>().is_ok());
        assert!(attribute(case, "line").parse::<u32>().unwrap() > 0);
        assert!(case.children().all(|c| !c.has_tag_name("failure")));
    }
}

#[test]
fn failing_run_snapshot_and_structure() {
    let (code, xml) = junit("fixtures/policy-tests-junit/failing");
    // A file that cannot run makes the exit code 2, as in human output.
    assert_eq!(code, Some(2));
    insta::assert_snapshot!("test_junit_failing", redact_times(&xml));

    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let root = doc.root_element();
    let suites: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suites.len(), 3, "one suite per test file");
    // The counts add up, per suite and in total.
    let mut totals = [0; 4];
    for suite in &suites {
        let cases: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        let with = |tag: &str| {
            cases
                .iter()
                .filter(|c| c.children().any(|e| e.has_tag_name(tag)))
                .count()
        };
        let counts = [cases.len(), with("failure"), with("error"), with("skipped")];
        assert_eq!(
            counts,
            [
                count(*suite, "tests"),
                count(*suite, "failures"),
                count(*suite, "errors"),
                count(*suite, "skipped")
            ],
            "{}",
            attribute(*suite, "name")
        );
        for (total, n) in totals.iter_mut().zip(counts) {
            *total += n;
        }
    }
    assert_eq!(
        totals,
        [
            count(root, "tests"),
            count(root, "failures"),
            count(root, "errors"),
            count(root, "skipped")
        ]
    );
    assert_eq!(totals, [7, 2, 2, 2]);

    // A wrong expectation: expected vs actual verdict and the explanation.
    let failure = doc
        .descendants()
        .find(|n| {
            n.has_tag_name("failure")
                && n.parent().is_some_and(|c| {
                    attribute(c, "name").starts_with("expects \"deny\" but web is allowed")
                })
        })
        .expect("the failing case has a <failure>");
    assert_eq!(attribute(failure, "message"), "expected deny, got allow");
    let text = failure.text().unwrap();
    assert!(text.contains("expected: deny\nactual: allow\n"), "{text}");
    assert!(
        text.contains("allowed by ingress key") && text.contains("spec.ingress[0]"),
        "{text}"
    );
    // The invalid case is an error naming it; its siblings are skipped.
    let invalid = suites
        .iter()
        .find(|s| attribute(**s, "name").ends_with("invalid-case.yaml"))
        .unwrap();
    let error = invalid
        .descendants()
        .find(|n| n.has_tag_name("error"))
        .unwrap();
    assert!(attribute(error, "message").contains("unknown peer `shop/nobody`"));
    assert_eq!(count(*invalid, "skipped"), 2);
}

#[test]
fn a_failed_case_alone_exits_1_and_human_output_is_unchanged() {
    let file = "fixtures/policy-tests-junit/failing/wrong-expectations.yaml";
    let (code, xml) = junit(file);
    assert_eq!(code, Some(1));
    roxmltree::Document::parse(&xml).expect("well-formed XML");
    let human = porin(&["test", file]);
    assert_eq!(human.status.code(), Some(1));
    let stdout = String::from_utf8(human.stdout).unwrap();
    assert!(stdout.starts_with("PASS "), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("1 passed, 2 failed"));
    // In JUnit mode the summary goes to stderr so stdout stays XML.
    let junit = porin(&["test", file, "--format", "junit"]);
    assert!(String::from_utf8_lossy(&junit.stderr).contains("1 passed, 2 failed"));
}
