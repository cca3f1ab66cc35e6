//! `porin test FILE_OR_DIR... [--engine reference|kernel|both] [--format human|junit]`
//!
//! Runs policy test files (`docs/policy-tests.md`).
//! - `human` (default): one `PASS`/`FAIL` line per case, then
//!   `N passed, M failed`, with `, K files rejected` when files could not be
//!   loaded (their cases did not run; the reasons are on stderr, parse
//!   errors in `porin lint`'s format).
//! - `junit`: JUnit XML on standard output for CI test reporters: one
//!   `<testsuite>` per test file, one `<testcase>` per case (see
//!   [`junit_suites`]); the summary line goes to standard error.
//!
//! `--inventory PATH` adds inventory sources (Kubernetes manifests...) to
//! every file's own, so a test file need not restate the workloads.
//!
//! `--from-flows FILE` writes a test file instead of running one: its
//! cases are the distinct flows of a Hubble recording with the verdicts
//! Cilium recorded (`porin test --from-flows observe.json --inventory INV
//! POLICIES... [--output FILE]`; the paths are then the policies, and the
//! file names them and the inventory relative to where it is written; see
//! [`porin_flows::cases`]).
//!
//! Exit codes, whatever the format: 0 every case passed, 1 a case failed or
//! a file's policies do not validate (an invalid policy is a finding, as in
//! every command), 2 a file could not be read, parsed or otherwise
//! prepared (reasons on stderr, with file:line).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args as ClapArgs, ValueEnum};
use porin_kernel::engine::Kernel;
use porin_policytest::{
    Both, CaseOutcome, CaseResult, Engine, FileResult, Reference, TargetOverride, TestReport,
    discover, run_files_with_target,
};

use crate::limit_flags::LimitArgs;
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
    /// More inventory sources for every test file (files or directories:
    /// Kubernetes manifests, porin inventory YAML, Cilium agent dumps),
    /// added to each file's own `endpoints` and `inventory:`; an endpoint
    /// defined twice is an error. Repeatable.
    #[arg(long = "inventory", value_name = "PATH")]
    pub inventory: Vec<PathBuf>,
    /// Write a PolicyTest file of the distinct flows of this Hubble flow
    /// file (`hubble observe -o json`/`-o jsonpb`; repeatable) with their
    /// recorded verdicts, instead of running tests: PATHS are then the
    /// policies and `--inventory` is required.
    #[arg(long = "from-flows", value_name = "FILE")]
    pub from_flows: Vec<PathBuf>,
    /// With `--from-flows`: write the test file here (default: standard output).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Resource limits (the test file's inventory, its policies, the
    /// compilation).
    #[command(flatten)]
    pub limits: LimitArgs,
    /// The Cilium the cases are decided for: `--cilium-version` overrides
    /// each file's `ciliumVersion`; `--enable-k8s-cluster-network-policy`
    /// turns the switch on whatever the file says.
    #[command(flatten)]
    pub target: crate::target_flags::TargetArgs,
}

/// Runs `porin test`.
pub fn run(args: &Args) -> ExitCode {
    if !args.from_flows.is_empty() {
        return match from_flows(args) {
            Ok(code) => code,
            Err(error) => {
                eprintln!("porin: error: {error:#}");
                ExitCode::from(2)
            }
        };
    }
    let limits = args.limits.limits();
    // Test files are found before an engine starts (the kernel engine loads
    // porin's object), so a wrong path is reported as such with any engine.
    let report = match discover(&args.paths) {
        Err(error) => TestReport::failed(error),
        Ok(files) => match engine(args.engine) {
            Ok(mut engine) => match crate::project_config::project_config() {
                Ok(config) => {
                    let target = TargetOverride {
                        command_line: args.target.choice(),
                        defaults: crate::target_flags::config_choice(&config),
                    };
                    run_files_with_target(
                        &files,
                        engine.as_mut(),
                        &limits,
                        &args.inventory,
                        &target,
                    )
                }
                Err(error) => TestReport::failed(format!("{error:#}")),
            },
            Err(error) => TestReport::failed(error.to_string()),
        },
    };
    match args.format {
        TestFormat::Human => {
            for line in &report.lines {
                println!("{line}");
            }
        }
        TestFormat::Junit => {
            let files = files_with_every_error(&report);
            print!("{}", junit::write("porin test", &junit_suites(&files)));
        }
    }
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    for error in &report.errors {
        // Parse errors come rendered as diagnostics (`error[PM004]: ...`).
        if error.starts_with("error[") {
            eprintln!("{error}");
        } else {
            eprintln!("error: {error}");
        }
    }
    match args.format {
        TestFormat::Human => println!("{}", report.summary()),
        TestFormat::Junit => eprintln!("{}", report.summary()),
    }
    ExitCode::from(u8::try_from(report.exit_code()).unwrap_or(2))
}

/// `path` as written from the directory `base` (both made absolute): the
/// test file names its policies and inventory relative to itself.
fn relative_to(path: &std::path::Path, base: &std::path::Path) -> String {
    let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (path, base) = (absolute(path), absolute(base));
    let parts: Vec<_> = path.components().collect();
    let base_parts: Vec<_> = base.components().collect();
    let common = parts
        .iter()
        .zip(&base_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = std::path::PathBuf::new();
    for _ in common..base_parts.len() {
        out.push("..");
    }
    for part in &parts[common..] {
        out.push(part);
    }
    if out.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        out.display().to_string()
    }
}

/// `porin test --from-flows`: writes the recorded test file.
fn from_flows(args: &Args) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    use std::io::Write as _;
    let limits = args.limits.limits();
    let [inventory] = args.inventory.as_slice() else {
        anyhow::bail!("--from-flows needs one --inventory (the endpoints the flows are mapped to)");
    };
    let Ok((compiled, _)) =
        super::compile::load_and_compile(&args.paths, inventory, &limits, &args.target.choice())?
    else {
        return Ok(ExitCode::from(1));
    };
    let recording = porin_flows::observe::record(
        &args.from_flows,
        &[&compiled],
        porin_flows::reader::ReadLimits::default(),
    )
    .map_err(anyhow::Error::msg)?;
    for p in &recording.problems {
        eprintln!(
            "{}:{}:{}: {}[{}]: {}",
            p.file,
            p.line,
            p.column,
            p.code.severity.as_str(),
            p.code.code,
            p.message
        );
    }
    let base = match &args.output {
        Some(out) => out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf),
        None => PathBuf::from("."),
    };
    let header = porin_flows::cases::Header {
        name: format!("recorded traffic ({})", recording.files.join(", ")),
        policies: args.paths.iter().map(|p| relative_to(p, &base)).collect(),
        inventory: vec![relative_to(inventory, &base)],
    };
    let (text, cases) = porin_flows::cases::policy_test(&recording, &compiled, &header);
    match &args.output {
        Some(path) => std::fs::write(path, &text)
            .with_context(|| format!("cannot write `{}`", path.display()))?,
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("cannot write to standard output")?,
    }
    eprintln!(
        "porin test --from-flows: {cases} cases from {} flows",
        recording.decided()
    );
    Ok(if recording.stats.rejected == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The engine `--engine` names: the reference evaluator (porin-policytest),
/// the kernel engine (porin-kernel), or both, the kernel's verdict checked
/// against the reference's.
fn engine(arg: EngineArg) -> Result<Box<dyn Engine>, porin_kernel::engine::EngineError> {
    Ok(match arg {
        EngineArg::Reference => Box::new(Reference),
        EngineArg::Kernel => Box::new(Kernel::new()?),
        EngineArg::Both => Box::new(Both::new(Kernel::new()?, Reference)),
    })
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

/// The per-file results of both engines, plus one `porin test` result per
/// error that belongs to no file (no test file found, the kernel engine
/// could not start), so JUnit never hides why nothing ran.
fn files_with_every_error(report: &TestReport) -> Vec<FileResult> {
    let mut results = report.files.clone();
    for error in &report.errors {
        if !report.files.iter().any(|f| f.error.as_ref() == Some(error)) {
            results.push(FileResult {
                file: "porin test".to_owned(),
                error: Some(error.clone()),
                ..FileResult::default()
            });
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_that_belong_to_no_file_become_a_result_of_their_own() {
        let report = TestReport {
            files: vec![FileResult {
                file: "dir/b.yaml".to_owned(),
                error: Some("dir/b.yaml:3: policies[0] needs exactly one".to_owned()),
                ..FileResult::default()
            }],
            errors: vec![
                "dir/b.yaml:3: policies[0] needs exactly one".to_owned(),
                "the kernel engine needs root".to_owned(),
            ],
            ..TestReport::default()
        };
        let files = files_with_every_error(&report);
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!(files[1].file, "porin test");
        assert_eq!(
            files[1].error.as_deref(),
            Some("the kernel engine needs root")
        );
        let suites = junit_suites(&files);
        assert_eq!(suites[1].cases[0].name, "(file)");
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
