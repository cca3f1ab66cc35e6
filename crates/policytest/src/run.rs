//! The runner: every test file under the given paths, each case decided
//! by an engine and recorded into a [`TestReport`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use porin_compiler::explain::{evaluate, explain};
use porin_compiler::limits::Limits;

use crate::report::{DecidedCase, record_case, unrun_cases};
use crate::{Engine, FileResult, TestReport, discover, prepare_with_limits, resolve_case};

/// Runs every test file under `paths` with an engine, under the default
/// [`Limits`].
pub fn run(paths: &[PathBuf], engine: Engine) -> TestReport {
    run_with_limits(paths, engine, &Limits::default())
}

/// [`run`] under explicit limits (`porin test --max-...`).
pub fn run_with_limits(paths: &[PathBuf], engine: Engine, limits: &Limits) -> TestReport {
    let mut report = TestReport::default();
    if engine != Engine::Reference {
        report.errors.push(
            "the kernel engine is provided by porin-kernel and is not wired into `porin test` yet; use --engine reference"
                .to_owned(),
        );
        return report;
    }
    let files = match discover(paths) {
        Ok(files) => files,
        Err(error) => {
            report.errors.push(error);
            return report;
        }
    };
    for file in files {
        run_file(&file, limits, &mut report);
    }
    report
}

fn run_file(path: &Path, limits: &Limits, report: &mut TestReport) {
    let started = Instant::now();
    let mut result = FileResult {
        file: path.display().to_string(),
        ..FileResult::default()
    };
    run_file_into(path, limits, report, &mut result);
    result.duration = started.elapsed();
    report.files.push(result);
}

fn run_file_into(path: &Path, limits: &Limits, report: &mut TestReport, result: &mut FileResult) {
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
    for (index, case) in resolved.into_iter().enumerate() {
        let started = Instant::now();
        let evaluation = evaluate(&prepared.compiled, &case.flow);
        let failure =
            (evaluation.verdict != case.expect).then(|| explain(&prepared.compiled, &evaluation));
        let decided = DecidedCase {
            index,
            seen: evaluation.verdict.to_string(),
            failure,
            duration: started.elapsed(),
        };
        record_case(report, result, &prepared, case, decided);
    }
}
