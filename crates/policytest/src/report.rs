//! What a run of policy tests produced: a [`TestReport`] with a
//! [`FileResult`] per file and a [`CaseResult`] per case, and the one way
//! every engine records a case into it.

use std::time::Duration;

use crate::{CaseSpec, PreparedTest, ResolvedCase, TestFileSpec};

/// The outcome of running test files.
#[derive(Debug, Clone, Default)]
pub struct TestReport {
    /// One line per case (`PASS ...` / `FAIL ...`), in order.
    pub lines: Vec<String>,
    /// Passed cases.
    pub passed: usize,
    /// Failed cases.
    pub failed: usize,
    /// Files that could not be read, parsed or validated, with the reason
    /// (already rendered, may span lines).
    pub errors: Vec<String>,
    /// Compiler findings (warnings, errors) about the files that ran, one
    /// line each: peers porin could not resolve, named ports that yield no
    /// keys, Cilium quirks in effect. They explain surprising verdicts.
    pub notes: Vec<String>,
    /// The same outcome per file and case, for structured reports (JUnit).
    /// An engine that does not fill it leaves it empty; `lines` stays the
    /// reference then.
    pub files: Vec<FileResult>,
    /// Files refused because their policies do not validate: a finding
    /// (exit 1, as every command reports an invalid policy), not a failure
    /// to run. They are also in `errors`.
    pub invalid_policy_files: usize,
}

/// The outcome of one test file.
#[derive(Debug, Clone, Default)]
pub struct FileResult {
    /// Display path of the file.
    pub file: String,
    /// The file's `name:`, if any.
    pub name: Option<String>,
    /// Why the file could not run (read, parse, validation, compile or case
    /// errors), rendered; its cases are then skipped, or errors.
    pub error: Option<String>,
    /// Its cases, in file order.
    pub cases: Vec<CaseResult>,
    /// Wall time spent on the file (loading, compiling, every case).
    pub duration: Duration,
}

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseOutcome {
    /// The verdict was the expected one.
    Passed,
    /// The verdict differed; `explanation` says which rule (or missing rule)
    /// decided.
    Failed {
        /// Why the verdict is what it is.
        explanation: String,
    },
    /// The case itself is invalid (unknown peer, bad port, ...).
    Error {
        /// The reason, with file:line.
        reason: String,
    },
    /// The case was not run because something else in its file failed.
    Skipped {
        /// Why it did not run.
        reason: String,
    },
}

/// One case of a test file and what became of it.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// Position in the file's `cases`.
    pub index: usize,
    /// Line of the case in the file (1-based; 0 when unknown).
    pub line: u64,
    /// Display label: `name (from -> to proto/port)` or `from -> to proto/port`.
    pub label: String,
    /// The expected verdict as written.
    pub expected: String,
    /// The verdict seen, when the case ran.
    pub actual: Option<String>,
    /// The outcome.
    pub outcome: CaseOutcome,
    /// Wall time of the evaluation.
    pub duration: Duration,
}

impl TestReport {
    /// The summary line: `N passed, M failed`, then `, K files rejected`
    /// when files could not be read, parsed, validated or compiled (their
    /// cases did not run, so a green count alone would hide them), and `,
    /// porin test could not run` when an error belongs to no file (no test
    /// file found, the engine did not start).
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let mut line = format!("{} passed, {} failed", self.passed, self.failed);
        let rejected = self.rejected_files();
        if rejected > 0 {
            let files = if rejected == 1 { "file" } else { "files" };
            let _ = write!(line, ", {rejected} {files} rejected");
        }
        let of_no_file = self
            .errors
            .iter()
            .filter(|e| !self.files.iter().any(|f| f.error.as_ref() == Some(*e)))
            .count();
        if of_no_file > 0 {
            line.push_str(", porin test could not run");
        }
        line
    }

    /// The files whose run stopped at an error (their cases are errors or
    /// skipped).
    pub fn rejected_files(&self) -> usize {
        self.files.iter().filter(|f| f.error.is_some()).count()
    }

    /// A run that stopped before any file: no test file found, or the
    /// engine could not start.
    pub fn failed(error: String) -> TestReport {
        TestReport {
            errors: vec![error],
            ..TestReport::default()
        }
    }

    /// 2 when a file could not run for another reason than an invalid
    /// policy, 1 when a case failed or a file's policies are invalid (the
    /// README's contract: 1 ran and found an error), 0 otherwise.
    pub fn exit_code(&self) -> i32 {
        if self.errors.len() > self.invalid_policy_files {
            2
        } else if self.failed > 0 || self.invalid_policy_files > 0 {
            1
        } else {
            0
        }
    }
}

/// The label of a case as written, for cases that could not be resolved.
fn written_label(spec: &CaseSpec) -> String {
    let what = match (&spec.port, &spec.icmp_type) {
        (Some(port), _) => format!(
            " {}/{}",
            spec.protocol
                .as_deref()
                .unwrap_or("TCP")
                .to_ascii_uppercase(),
            port.0
        ),
        (None, Some(icmp)) => format!(
            " {} type {}",
            spec.protocol
                .as_deref()
                .unwrap_or("ICMP")
                .to_ascii_uppercase(),
            icmp.0
        ),
        (None, None) => String::new(),
    };
    match &spec.name {
        Some(name) => format!("{name} ({} -> {}{what})", spec.from.0, spec.to.0),
        None => format!("{} -> {}{what}", spec.from.0, spec.to.0),
    }
}

/// Every case of a file that could not run, as skipped (or, for the one at
/// fault, as an error).
pub(crate) fn unrun_cases(
    spec: &TestFileSpec,
    at_fault: Option<usize>,
    reason: &str,
) -> Vec<CaseResult> {
    spec.cases
        .iter()
        .enumerate()
        .map(|(index, case)| CaseResult {
            index,
            line: case.referenced.line(),
            label: written_label(&case.value),
            expected: case.value.expect.clone(),
            actual: None,
            outcome: if at_fault == Some(index) {
                CaseOutcome::Error {
                    reason: reason.to_owned(),
                }
            } else {
                CaseOutcome::Skipped {
                    reason: format!("not run: {reason}"),
                }
            },
            duration: Duration::ZERO,
        })
        .collect()
}

/// What an engine saw for one resolved case.
pub(crate) struct DecidedCase {
    /// Position in the file's `cases`.
    pub index: usize,
    /// The verdict seen, as printed (`allow`, or `kernel allow, reference
    /// deny` for two engines).
    pub seen: String,
    /// Why the case failed; `None` when it passed.
    pub failure: Option<String>,
    /// Wall time of the evaluation.
    pub duration: Duration,
}

/// Records a decided case the one way every engine reports it: the
/// `PASS`/`FAIL` line of docs/policy-tests.md, the pass/fail count, and
/// the [`CaseResult`] that `--format junit` writes.
pub(crate) fn record_case(
    report: &mut TestReport,
    result: &mut FileResult,
    prepared: &PreparedTest,
    case: ResolvedCase,
    decided: DecidedCase,
) {
    let DecidedCase {
        index,
        seen,
        failure,
        duration,
    } = decided;
    let (line, outcome) = match failure {
        None => {
            report.passed += 1;
            (
                format!("PASS {}: {} => {seen}", prepared.file, case.label),
                CaseOutcome::Passed,
            )
        }
        Some(explanation) => {
            report.failed += 1;
            (
                format!(
                    "FAIL {}: {} => {seen} (expected {}): {explanation}",
                    prepared.file, case.label, case.expect
                ),
                CaseOutcome::Failed { explanation },
            )
        }
    };
    report.lines.push(line);
    result.cases.push(CaseResult {
        index,
        line: prepared.case_line(index),
        label: case.label,
        expected: case.expect.to_string(),
        actual: Some(seen),
        outcome,
        duration,
    });
}
