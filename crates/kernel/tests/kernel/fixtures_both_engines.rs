//! Every policy test under `fixtures/policy-tests/` through both engines of
//! `porin test` (`docs/policy-tests.md`, `--engine both`): the
//! kernel engine (porin's object in the running kernel, one
//! `BPF_PROG_TEST_RUN` per check) must agree with the reference evaluator
//! on every case — the same deny reason and proxy port per check and the
//! same verdict in every family; the same checks in IPv4 and IPv6 unless
//! an end is the world (world-ipv4 / world-ipv6) — and every case must
//! pass in every family.
//!
//! Needs root (eBPF). In CI (`CI=true`) an unusable kernel fails the test;
//! elsewhere it prints `SKIPPED: <reason>`.

use std::path::PathBuf;
use std::sync::OnceLock;

use porin_kernel::{self as kernel, engine::Kernel};
use porin_policytest::{Both, Reference, TestReport, run, run_with_limits};

fn kernel_available(test: &str) -> bool {
    match kernel::probe() {
        Ok(()) => true,
        Err(error) => {
            let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !in_ci,
                "{test}: CI=true but eBPF is unavailable: {error} (run CI as root)"
            );
            println!("SKIPPED: {test}: eBPF unavailable ({error})");
            false
        }
    }
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/policy-tests")
}

/// The engines of `--engine both`.
fn both() -> Both<Kernel, Reference> {
    Both::new(Kernel::new().expect("the kernel engine loads"), Reference)
}

/// One `--engine both` run over all fixtures, shared by the tests.
fn report() -> &'static TestReport {
    static REPORT: OnceLock<TestReport> = OnceLock::new();
    REPORT.get_or_init(|| {
        let dir = fixtures();
        assert!(dir.is_dir(), "{} is missing", dir.display());
        run(&[dir], &mut both())
    })
}

/// A FAIL line caused by the kernel engine itself: the engines disagree,
/// the families disagree, or the kernel engine could not run the case.
fn is_engine_failure(line: &str) -> bool {
    line.starts_with("FAIL")
        && (line.contains("engines disagree")
            || line.contains("IPv4 and IPv6 disagree")
            || line.contains("kernel engine error"))
}

#[test]
fn kernel_engine_agrees_with_the_reference_on_every_fixture() {
    if !kernel_available("kernel_engine_agrees_with_the_reference_on_every_fixture") {
        return;
    }
    let report = report();
    assert!(
        report.errors.is_empty(),
        "files failed to load:\n{}",
        report.errors.join("\n")
    );
    // Enough cases ran that the suite is really there (1,000+ at the time
    // of writing; a broken discovery would give 0).
    assert!(
        report.passed + report.failed >= 100,
        "only {} cases ran",
        report.passed + report.failed
    );
    let disagreements: Vec<&String> = report
        .lines
        .iter()
        .filter(|l| is_engine_failure(l))
        .collect();
    println!(
        "fixtures, both engines: {} cases, {} engine disagreements",
        report.lines.len(),
        disagreements.len()
    );
    assert!(
        disagreements.is_empty(),
        "the kernel and the reference disagree on {} cases:\n{}",
        disagreements.len(),
        disagreements
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn every_fixture_passes_with_the_kernel_engine() {
    if !kernel_available("every_fixture_passes_with_the_kernel_engine") {
        return;
    }
    let report = report();
    let failures: Vec<&String> = report
        .lines
        .iter()
        .filter(|l| l.starts_with("FAIL"))
        .collect();
    println!("fixtures, both engines: {}", report.summary());
    assert!(
        failures.is_empty() && report.errors.is_empty(),
        "{} cases failed (a failure that is not an engine disagreement means both engines \
         agree and the compiled policy differs from the fixture's expectation):\n{}\n{}",
        failures.len(),
        failures
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        report.errors.join("\n")
    );
}

/// `porin test --engine both --format junit` reads per-file results: the
/// kernel engine must report every case it ran as a `CaseResult` matching
/// its `PASS`/`FAIL` line, with the case's line in the file.
#[test]
fn the_kernel_engine_reports_each_case_per_file() {
    if !kernel_available("the_kernel_engine_reports_each_case_per_file") {
        return;
    }
    let report = report();
    let cases: Vec<_> = report.files.iter().flat_map(|f| &f.cases).collect();
    assert_eq!(cases.len(), report.lines.len(), "one result per line");
    for (case, line) in cases.iter().zip(&report.lines) {
        assert!(line.contains(&case.label), "{line} vs {}", case.label);
        assert!(case.line > 0, "{}: no line", case.label);
        assert_eq!(
            line.starts_with("PASS"),
            case.outcome == porin_policytest::CaseOutcome::Passed,
            "{line}"
        );
    }
    let discovered = porin_policytest::discover(&[fixtures()]).unwrap();
    assert_eq!(report.files.len(), discovered.len(), "one result per file");
}

/// `porin test --engine kernel|both --max-rules N` must bound the kernel
/// engine's compilations exactly like the reference engine's: a file over
/// the limit is refused with the limit's error, not compiled.
#[test]
fn the_kernel_engine_compiles_under_the_given_limits() {
    if !kernel_available("the_kernel_engine_compiles_under_the_given_limits") {
        return;
    }
    let mut limits = porin_compiler::limits::Limits::default();
    limits.compile.set(porin_compiler::limits::Limit::Rules, 0);
    let dir = fixtures().join("smoke");
    let report = run_with_limits(&[dir], &mut both(), &limits);
    assert_eq!(report.exit_code(), 2, "{:?}", report.lines);
    assert!(
        report.errors.iter().any(|e| e.contains("--max-rules")),
        "{:?}",
        report.errors
    );
    assert_eq!(report.passed + report.failed, 0, "nothing may run");
}
