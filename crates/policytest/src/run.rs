//! The runner: every test file under the given paths, each case decided
//! by an [`Engine`] and recorded into a [`TestReport`].

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use porin_compiler::limits::Limits;
use serde_saphyr::Spanned;

use crate::engine::Engine;
use crate::report::{DecidedCase, record_case, unrun_cases};
use crate::{
    CaseOutcome, CaseResult, FileResult, POLICIES_INVALID, PreparedTest, TargetOverride,
    TestFileSpec, TestReport, discover, prepare_with_target, resolve_cases,
};

/// Runs every test file under `paths` with an engine, under the default
/// [`Limits`].
pub fn run(paths: &[PathBuf], engine: &mut dyn Engine) -> TestReport {
    run_with_limits(paths, engine, &Limits::default())
}

/// [`run`] under explicit limits (`porin test --max-...`).
pub fn run_with_limits(paths: &[PathBuf], engine: &mut dyn Engine, limits: &Limits) -> TestReport {
    match discover(paths) {
        Ok(files) => run_files(&files, engine, limits),
        Err(error) => TestReport::failed(error),
    }
}

/// Runs the given test files (as [`discover`] found them) with an engine.
/// A front end that must start its engine (the kernel engine loads an
/// object) discovers first, so that a wrong path is reported as such
/// whichever engine was asked for.
pub fn run_files(files: &[PathBuf], engine: &mut dyn Engine, limits: &Limits) -> TestReport {
    run_files_with_inventory(files, engine, limits, &[])
}

/// [`run_files`] with inventory sources every file gets besides its own
/// (`porin test --inventory PATH`).
pub fn run_files_with_inventory(
    files: &[PathBuf],
    engine: &mut dyn Engine,
    limits: &Limits,
    inventory: &[PathBuf],
) -> TestReport {
    run_files_with_target(files, engine, limits, inventory, &TargetOverride::default())
}

/// [`run_files_with_inventory`] with the command line's target
/// (`porin test --cilium-version`) overriding each file's.
pub fn run_files_with_target(
    files: &[PathBuf],
    engine: &mut dyn Engine,
    limits: &Limits,
    inventory: &[PathBuf],
    target: &TargetOverride,
) -> TestReport {
    let mut report = TestReport::default();
    for file in files {
        run_file(engine, file, (limits, inventory, target), &mut report);
    }
    report
}

/// What every file of a run is prepared with: the limits, the extra
/// inventory sources and the target override.
type RunInputs<'a> = (&'a Limits, &'a [PathBuf], &'a TargetOverride);

fn run_file(engine: &mut dyn Engine, path: &Path, inputs: RunInputs<'_>, report: &mut TestReport) {
    let started = Instant::now();
    let mut result = FileResult {
        file: path.display().to_string(),
        ..FileResult::default()
    };
    run_file_into(engine, path, inputs, report, &mut result);
    result.duration = started.elapsed();
    report.files.push(result);
}

/// Runs one file, recording each case both as a `PASS`/`FAIL` line and as a
/// [`crate::CaseResult`] (what `porin test --format junit` writes).
fn run_file_into(
    engine: &mut dyn Engine,
    path: &Path,
    inputs: RunInputs<'_>,
    report: &mut TestReport,
    result: &mut FileResult,
) {
    let Some(prepared) = prepare_for_run_with_inventory(path, inputs, report, result) else {
        return;
    };
    result.file.clone_from(&prepared.file);
    result.name.clone_from(&prepared.spec.name);
    for finding in prepared.compiled.all_diagnostics() {
        if finding.severity == porin_model::diagnostic::Severity::Info {
            continue;
        }
        let at = finding
            .primary
            .as_ref()
            .map(|l| format!("{}:{}: ", l.file, l.line))
            .unwrap_or_else(|| format!("{}: ", prepared.file));
        let line = format!(
            "{at}{}[{}]: {}",
            finding.severity.as_str(),
            finding.code,
            finding.message
        );
        if !report.notes.contains(&line) {
            report.notes.push(line);
        }
    }
    let mut resolved = Vec::new();
    for (index, case) in prepared.spec.cases.iter().enumerate() {
        match resolve_cases(&prepared, index, case) {
            Ok(cases) => resolved.extend(cases),
            Err(error) => {
                result.cases = unrun_cases(&prepared.spec, Some(index), &error);
                result.error = Some(error.clone());
                report.errors.push(error);
                return;
            }
        }
    }
    if let Err(error) = engine.load(&prepared, &resolved) {
        let error = format!("{}: {error}", prepared.file);
        result.cases = unrun_cases(&prepared.spec, None, &error);
        result.error = Some(error.clone());
        report.errors.push(error);
        return;
    }
    for case in resolved {
        let index = case.index;
        let started = Instant::now();
        let (seen, failures) = match engine.decide(&prepared, &case) {
            Ok(decision) => {
                let decision = decision.settle_authentication(&prepared, &case);
                let failures = decision.failures(case.expect);
                (decision.seen, failures)
            }
            Err(error) => (
                format!("{} engine error", error.engine()),
                vec![error.to_string()],
            ),
        };
        let decided = DecidedCase {
            index,
            seen,
            failure: (!failures.is_empty()).then(|| failures.join("; ")),
            duration: started.elapsed(),
        };
        record_case(report, result, &prepared, case, decided);
    }
}

/// Prepares a file for an engine and settles its `expectError`: returns
/// the test to run, or `None` when the file's outcome is recorded already
/// (an error, or a refusal that was or was not expected: one pseudo-case
/// at the line of the `expectError` key, whichever engine was asked for).
pub fn prepare_for_run(
    path: &Path,
    limits: &Limits,
    report: &mut TestReport,
    result: &mut FileResult,
) -> Option<PreparedTest> {
    let target = TargetOverride::default();
    prepare_for_run_with_inventory(path, (limits, &[], &target), report, result)
}

fn prepare_for_run_with_inventory(
    path: &Path,
    (limits, inventory, target): RunInputs<'_>,
    report: &mut TestReport,
    result: &mut FileResult,
) -> Option<PreparedTest> {
    let (error, expected) = match prepare_with_target(path, limits, inventory, target) {
        Ok(prepared) => match prepared.spec.expect_error.clone() {
            None => return Some(prepared),
            Some(expected) => (None, expected),
        },
        Err(error) => match expected_error(path) {
            None => {
                if error.starts_with(&format!("{}: {POLICIES_INVALID}", path.display())) {
                    report.invalid_policy_files += 1;
                }
                result.error = Some(error.clone());
                report.errors.push(error);
                return None;
            }
            Some(expected) => (Some(error), expected),
        },
    };
    let file = path.display().to_string();
    let (expected, expected_line) = (expected.value, expected.referenced.line());
    let label = format!("refused with an error containing `{expected}`");
    let first_line = |e: &str| e.lines().next().unwrap_or_default().to_owned();
    let (line, outcome, actual) = match error {
        Some(error) if error.contains(&expected) => {
            report.passed += 1;
            (
                format!("PASS {file}: {label} => {}", first_line(&error)),
                CaseOutcome::Passed,
                error,
            )
        }
        Some(error) => {
            report.failed += 1;
            let explanation = format!("refused with another error: {error}");
            (
                format!("FAIL {file}: {label} => {explanation}"),
                CaseOutcome::Failed { explanation },
                error,
            )
        }
        None => {
            report.failed += 1;
            let explanation = "the file loaded and compiled".to_owned();
            (
                format!("FAIL {file}: {label} => {explanation}"),
                CaseOutcome::Failed { explanation },
                "loaded".to_owned(),
            )
        }
    };
    report.lines.push(line);
    result.cases.push(CaseResult {
        index: 0,
        line: expected_line,
        label,
        expected: "error".to_owned(),
        actual: Some(actual),
        outcome,
        duration: Duration::ZERO,
    });
    None
}

/// The `expectError` of a test file that could not be prepared, if it
/// can be read at all.
fn expected_error(path: &Path) -> Option<Spanned<String>> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_saphyr::from_str::<TestFileSpec>(&text)
        .ok()?
        .expect_error
}
