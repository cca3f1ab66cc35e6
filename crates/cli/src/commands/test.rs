//! `porin test FILE_OR_DIR... [--engine reference|kernel|both] [--format human|junit]`
//!
//! Runs policy test files (shared/docs/policy-test-format.md).
//! - `human` (default): one `PASS`/`FAIL` line per case, then
//!   `N passed, M failed`.
//! - `junit`: JUnit XML on standard output for CI test reporters: one
//!   `<testsuite>` per test file, one `<testcase>` per case (see
//!   [`junit_suites`]); the summary line goes to standard error.
//!
//! Exit codes, whatever the format: 0 every case passed, 1 a case failed,
//! 2 a file could not be read, parsed or validated (reasons on stderr, with
//! file:line).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args as ClapArgs, ValueEnum};
use porin_compiler::policytest::{
    CaseOutcome, CaseResult, Engine, FileResult, TestReport, discover, run as run_tests,
};

use crate::render::junit::{self, Case, Problem, Suite};

/// The engine deciding the cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// The reference evaluator in user space (default).
    Reference,
    /// porin's eBPF object in the running kernel (root only).
    Kernel,
    /// Both; disagreements fail.
    Both,
}

/// Output formats of `porin test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum TestFormat {
    /// One `PASS`/`FAIL` line per case and a summary line.
    #[default]
    Human,
    /// JUnit XML: a test suite per file, a test case per case.
    Junit,
}

/// Arguments of `porin test`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Test files, or directories searched for `kind: PolicyTest` files.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Which engine decides the cases.
    #[arg(long, value_enum, default_value_t = EngineArg::Reference)]
    pub engine: EngineArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TestFormat::Human)]
    pub format: TestFormat,
}

/// Runs `porin test`.
pub fn run(args: &Args) -> ExitCode {
    let engine = match args.engine {
        EngineArg::Reference => Engine::Reference,
        EngineArg::Kernel => Engine::Kernel,
        EngineArg::Both => Engine::Both,
    };
    // The kernel engine lives in porin-ebpf (it loads porin's object);
    // the reference engine is the compiler's runner.
    let report = match engine {
        Engine::Reference => run_tests(&args.paths, engine),
        Engine::Kernel | Engine::Both => porin_ebpf::engine::run(&args.paths, engine),
    };
    match args.format {
        TestFormat::Human => {
            for line in &report.lines {
                println!("{line}");
            }
        }
        TestFormat::Junit => {
            let files = if report.files.is_empty() {
                files_from_lines(&report, &discover(&args.paths).unwrap_or_default())
            } else {
                report.files.clone()
            };
            print!("{}", junit::write("porin test", &junit_suites(&files)));
        }
    }
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    for error in &report.errors {
        eprintln!("error: {error}");
    }
    match args.format {
        TestFormat::Human => println!("{}", report.summary()),
        TestFormat::Junit => eprintln!("{}", report.summary()),
    }
    ExitCode::from(u8::try_from(report.exit_code()).unwrap_or(2))
}

/// The JUnit suites of test results: one suite per file, named by its path
/// (and `name:`); one case per case, with `classname` the file path and
/// `name` the case label (`name (from -> to proto/port)`), both stable
/// across runs; `file`/`line` point at the case. A failed case is a
/// `<failure>` with the expected and actual verdicts and the explanation; an
/// invalid case an `<error>`; the other cases of its file are `<skipped>`. A
/// file that cannot run at all is one case named `(file)` with an `<error>`.
pub fn junit_suites(files: &[FileResult]) -> Vec<Suite> {
    files
        .iter()
        .map(|file| {
            let mut cases: Vec<Case> = file.cases.iter().map(|c| junit_case(file, c)).collect();
            if cases.is_empty()
                && let Some(error) = &file.error
            {
                cases.push(Case {
                    classname: file.file.clone(),
                    name: "(file)".to_owned(),
                    file: Some(file.file.clone()),
                    error: Some(Problem {
                        kind: "invalid test file".to_owned(),
                        message: first_line(error),
                        body: error.clone(),
                    }),
                    ..Case::default()
                });
            }
            unique_names(&mut cases);
            Suite {
                name: match &file.name {
                    Some(name) => format!("{} ({name})", file.file),
                    None => file.file.clone(),
                },
                time: (file.duration > Duration::ZERO).then_some(file.duration),
                cases,
            }
        })
        .collect()
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

fn junit_case(file: &FileResult, case: &CaseResult) -> Case {
    let mut out = Case {
        classname: file.file.clone(),
        name: case.label.clone(),
        file: Some(file.file.clone()),
        line: (case.line > 0).then_some(case.line),
        // A zero duration means "not measured" (results rebuilt from lines).
        time: (case.duration > Duration::ZERO).then_some(case.duration),
        ..Case::default()
    };
    match &case.outcome {
        CaseOutcome::Passed => {
            if let Some(actual) = &case.actual {
                out.system_out = Some(format!("verdict: {actual}"));
            }
        }
        CaseOutcome::Failed { explanation } => {
            let actual = case.actual.as_deref().unwrap_or("none");
            out.failure = Some(Problem {
                kind: "verdict mismatch".to_owned(),
                message: format!("expected {}, got {actual}", case.expected),
                body: format!(
                    "expected: {}\nactual: {actual}\nexplanation: {explanation}",
                    case.expected
                ),
            });
        }
        CaseOutcome::Error { reason } => {
            out.error = Some(Problem {
                kind: "invalid case".to_owned(),
                message: first_line(reason),
                body: reason.clone(),
            });
        }
        CaseOutcome::Skipped { reason } => out.skipped = Some(reason.clone()),
    }
    out
}

/// Two cases with the same label (same flow written twice) get ` #2`,
/// ` #3`... so reporters do not merge them.
fn unique_names(cases: &mut [Case]) {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for case in cases {
        let count = seen.entry(case.name.clone()).or_default();
        *count += 1;
        if *count > 1 {
            case.name = format!("{} #{count}", case.name);
        }
    }
}

/// Per-file results rebuilt from the `PASS`/`FAIL` lines, for an engine
/// that reports lines only (the kernel engine of porin-ebpf): a line is
/// `PASS FILE: LABEL => SEEN` or `FAIL FILE: LABEL => SEEN (expected E):
/// WHY`, with FILE one of the discovered test files. Errors that name no
/// discovered file become a file result of their own.
fn files_from_lines(report: &TestReport, files: &[PathBuf]) -> Vec<FileResult> {
    let mut results: Vec<FileResult> = files
        .iter()
        .map(|path| FileResult {
            file: path.display().to_string(),
            ..FileResult::default()
        })
        .collect();
    for line in &report.lines {
        let (passed, rest) = match (line.strip_prefix("PASS "), line.strip_prefix("FAIL ")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => continue,
        };
        let Some((result, rest)) = results.iter_mut().find_map(|r| {
            let rest = rest.strip_prefix(r.file.as_str())?.strip_prefix(": ")?;
            Some((r, rest))
        }) else {
            continue;
        };
        let (label, seen) = rest.split_once(" => ").unwrap_or((rest, ""));
        let (actual, expected, explanation) = if passed {
            (seen.to_owned(), seen.to_owned(), String::new())
        } else {
            match seen.split_once(" (expected ") {
                Some((actual, tail)) => {
                    let (expected, why) = tail.split_once("): ").unwrap_or((tail, ""));
                    (actual.to_owned(), expected.to_owned(), why.to_owned())
                }
                None => (seen.to_owned(), String::new(), String::new()),
            }
        };
        let index = result.cases.len();
        result.cases.push(CaseResult {
            index,
            line: 0,
            label: label.to_owned(),
            expected,
            actual: Some(actual),
            outcome: if passed {
                CaseOutcome::Passed
            } else {
                CaseOutcome::Failed { explanation }
            },
            duration: Duration::ZERO,
        });
    }
    for error in &report.errors {
        match results
            .iter_mut()
            .find(|r| error.starts_with(&format!("{}:", r.file)))
        {
            Some(result) if result.error.is_none() => result.error = Some(error.clone()),
            _ => results.push(FileResult {
                file: "porin test".to_owned(),
                error: Some(error.clone()),
                ..FileResult::default()
            }),
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_rebuilt_from_an_engine_that_reports_lines_only() {
        let report = TestReport {
            lines: vec![
                "PASS dir/a.yaml: web (a -> b TCP/80) => allow".to_owned(),
                "FAIL dir/a.yaml: a -> b TCP/81 => deny (expected allow): b ingress: no rule allows identity 2 (default deny)".to_owned(),
            ],
            errors: vec!["dir/b.yaml:3: policies[0] needs exactly one of `path` and `inline`".to_owned()],
            passed: 1,
            failed: 1,
            ..TestReport::default()
        };
        let files = files_from_lines(
            &report,
            &[PathBuf::from("dir/a.yaml"), PathBuf::from("dir/b.yaml")],
        );
        assert_eq!(files.len(), 2);
        let a = &files[0];
        assert_eq!(a.cases.len(), 2);
        assert_eq!(a.cases[0].label, "web (a -> b TCP/80)");
        assert_eq!(a.cases[0].outcome, CaseOutcome::Passed);
        assert_eq!(a.cases[1].expected, "allow");
        assert_eq!(a.cases[1].actual.as_deref(), Some("deny"));
        assert_eq!(
            a.cases[1].outcome,
            CaseOutcome::Failed {
                explanation: "b ingress: no rule allows identity 2 (default deny)".to_owned()
            }
        );
        assert!(
            files[1]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("exactly one"))
        );
        let suites = junit_suites(&files);
        assert_eq!(suites[1].cases[0].name, "(file)");
        // Not measured: no time attributes rather than made-up zeros.
        assert!(suites[0].time.is_none() && suites[0].cases[0].time.is_none());
    }

    #[test]
    fn duplicate_labels_are_numbered() {
        let mut cases = vec![
            Case {
                name: "x".to_owned(),
                ..Case::default()
            };
            3
        ];
        unique_names(&mut cases);
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["x", "x #2", "x #3"]);
    }
}
