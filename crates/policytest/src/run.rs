//! The runner: every test file under the given paths, each case decided
//! by an [`Engine`] and recorded into a [`TestReport`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use porin_compiler::limits::Limits;

use crate::engine::Engine;
use crate::report::{DecidedCase, record_case, unrun_cases};
use crate::{FileResult, TestReport, discover, prepare_with_limits, resolve_case};

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
    let mut report = TestReport::default();
    for file in files {
        run_file(engine, file, limits, &mut report);
    }
    report
}

fn run_file(engine: &mut dyn Engine, path: &Path, limits: &Limits, report: &mut TestReport) {
    let started = Instant::now();
    let mut result = FileResult {
        file: path.display().to_string(),
        ..FileResult::default()
    };
    run_file_into(engine, path, limits, report, &mut result);
    result.duration = started.elapsed();
    report.files.push(result);
}

/// Runs one file, recording each case both as a `PASS`/`FAIL` line and as a
/// [`crate::CaseResult`] (what `porin test --format junit` writes).
fn run_file_into(
    engine: &mut dyn Engine,
    path: &Path,
    limits: &Limits,
    report: &mut TestReport,
    result: &mut FileResult,
) {
    let prepared = match prepare_with_limits(path, limits) {
        Ok(p) => p,
        Err(error) => {
            result.error = Some(error.clone());
            report.errors.push(error);
            return;
        }
    };
    result.file.clone_from(&prepared.file);
    result.name.clone_from(&prepared.spec.name);
    let mut findings: Vec<&porin_model::diagnostic::Diagnostic> =
        prepared.compiled.diagnostics.iter().collect();
    for endpoint in &prepared.compiled.endpoints {
        findings.extend(endpoint.diagnostics.iter());
    }
    for finding in findings {
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
        match resolve_case(&prepared.file, index, case, &prepared.compiled) {
            Ok(case) => resolved.push(case),
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
    for (index, case) in resolved.into_iter().enumerate() {
        let started = Instant::now();
        let (seen, failures) = match engine.decide(&prepared, &case) {
            Ok(decision) => {
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
