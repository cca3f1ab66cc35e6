//! # porin-policytest: the `porin test` runner
//!
//! Input: paths of `PolicyTest` files or directories. Output: a
//! [`TestReport`] (a [`FileResult`] per file, a [`CaseResult`] per case,
//! the errors of files that could not run) and its exit code; nothing is
//! printed. This crate decides cases with the reference engine; the kernel
//! engine (`porin_kernel::engine`) runs the same cases through porin's
//! object in the kernel and reports through the same types
//! ([`record_case`], [`unrun_cases`]).
//!
//! `porin test`: policy test files (the contract is
//! `docs/policy-tests.md`).
//!
//! A `PolicyTest` file names an inventory (its `cluster`, `namespaces`,
//! `endpoints`, `fqdns`), the policies in force (`policies[].path`, relative
//! to the file, or `policies[].inline`) and `cases`: flows with the
//! verdict they must get. [`run`] compiles each file and decides every case
//! with the reference evaluator ([`porin_compiler::explain`]).
//!
//! The runner returns a [`TestReport`] instead of printing, so the CLI owns
//! output. Exit codes (`TestReport::exit_code`): 0 all passed, 1 a case
//! failed, 2 a file could not be read, parsed or validated.

// No unsafe code: system calls live in porin-kernel, the C ABI in porin-capi.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use porin_model::diagnostic::render_human_all;
use porin_model::loader::{LoadOutcome, load_path, load_str};
use serde::Deserialize;
use serde_saphyr::Spanned;

use porin_compiler::compile::{Compiled, compile_with_limits};
use porin_compiler::explain::{Evaluation, Flow, FlowVerdict, Peer, evaluate, explain};
use porin_compiler::inventory::Inventory;
use porin_compiler::inventory::yaml::{
    INVENTORY_FIELDS, Scalar, add_inventory_text_with_limits, check_top_level_fields, syntax_error,
};
use porin_compiler::limits::Limits;
use porin_compiler::resolve::lower::PolicyInput;
use porin_compiler::resolve::rule::proto;

/// Which engine decides the cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The reference evaluator (user space).
    Reference,
    /// porin's eBPF object in the kernel.
    Kernel,
    /// Both, disagreements are failures.
    Both,
}

/// One policy reference of a test file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRef {
    /// A file, relative to the test file.
    #[serde(default)]
    pub path: Option<String>,
    /// An inline document (or several).
    #[serde(default)]
    pub inline: Option<String>,
}

/// One case as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaseSpec {
    /// Optional name.
    #[serde(default)]
    pub name: Option<String>,
    /// Source peer.
    pub from: Scalar,
    /// Destination peer.
    pub to: Scalar,
    /// TCP (default), UDP, SCTP, ICMP or ICMPv6.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Destination port.
    #[serde(default)]
    pub port: Option<Scalar>,
    /// ICMP type.
    #[serde(default)]
    pub icmp_type: Option<Scalar>,
    /// allow | deny | redirect.
    pub expect: String,
}

/// The non-inventory fields of a test file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestFileSpec {
    /// Must be `PolicyTest`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Optional name.
    #[serde(default)]
    pub name: Option<String>,
    /// Policies in force.
    #[serde(default)]
    pub policies: Vec<Spanned<PolicyRef>>,
    /// Cases.
    #[serde(default)]
    pub cases: Vec<Spanned<CaseSpec>>,
    /// porin extension: more inventory sources (files or directories,
    /// relative to the test file) read the way `--inventory` reads them
    /// (porin YAML, Kubernetes manifests, Cilium agent dumps), added to the
    /// file's own `endpoints`.
    #[serde(default)]
    pub inventory: Vec<Spanned<String>>,
    /// porin extension: the file must be refused (read, parse, inventory,
    /// validation or compile error) with an error whose text contains this;
    /// its cases document the flows the refused input would have decided
    /// and are not run. Such a file counts as one case.
    #[serde(default)]
    pub expect_error: Option<Spanned<String>>,
}

/// The top-level fields [`TestFileSpec`] reads (camelCase); with
/// [`INVENTORY_FIELDS`] they are every field a `PolicyTest` may have.
pub const TEST_FILE_FIELDS: &[&str] = &["name", "policies", "cases", "inventory", "expectError"];

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
    /// The summary line: `N passed, M failed`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed", self.passed, self.failed)
    }

    /// 2 when a file had an error, 1 when a case failed, 0 otherwise.
    pub fn exit_code(&self) -> i32 {
        if !self.errors.is_empty() {
            2
        } else if self.failed > 0 {
            1
        } else {
            0
        }
    }
}

/// Finds the test files under the given paths: a file argument is a test
/// file; a directory is searched recursively, in path order, for `.yaml`,
/// `.yml` and `.json` files whose `kind` is `PolicyTest` (other files there,
/// such as policies the tests refer to, are skipped).
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    for path in paths {
        let metadata =
            std::fs::metadata(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        if metadata.is_dir() {
            walk(path, &mut found)?;
        } else {
            found.push(path.clone());
        }
    }
    Ok(found)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), String> {
    let reader =
        std::fs::read_dir(dir).map_err(|e| format!("{}: cannot read: {e}", dir.display()))?;
    let mut entries: Vec<PathBuf> = reader.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            walk(&entry, found)?;
        } else if entry
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
            && std::fs::read_to_string(&entry).is_ok_and(|t| is_policy_test(&t))
        {
            found.push(entry);
        }
    }
    Ok(())
}

fn is_policy_test(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_end();
        line == "kind: PolicyTest" || line == "kind: \"PolicyTest\"" || line == "kind: 'PolicyTest'"
    })
}

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

/// A loaded and compiled test file.
pub struct PreparedTest {
    /// Display path.
    pub file: String,
    /// The spec.
    pub spec: TestFileSpec,
    /// The compilation.
    pub compiled: Compiled,
}

impl PreparedTest {
    /// The line of case `index` in the file (1-based; 0 when unknown).
    pub fn case_line(&self, index: usize) -> u64 {
        self.spec
            .cases
            .get(index)
            .map_or(0, |c| c.referenced.line())
    }
}

/// Reads, validates and compiles one test file, under the default
/// [`Limits`].
pub fn prepare(path: &Path) -> Result<PreparedTest, String> {
    prepare_with_limits(path, &Limits::default())
}

/// [`prepare`] under explicit limits: the test file is an inventory file
/// (its size and YAML budget are the inventory's), its policies are
/// loaded under the load limits and compiled under the compile limits.
pub fn prepare_with_limits(path: &Path, limits: &Limits) -> Result<PreparedTest, String> {
    let display = path.display().to_string();
    let size = std::fs::metadata(path)
        .map_err(|e| format!("{display}: cannot read: {e}"))?
        .len();
    if size > limits.inventory.max_file_bytes {
        return Err(porin_compiler::error::InventoryError::Limit {
            file: display,
            limit_kind: porin_compiler::limits::InventoryLimit::FileBytes,
            given: size,
            limit: limits.inventory.max_file_bytes,
        }
        .to_string());
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{display}: cannot read: {e}"))?;
    let spec: TestFileSpec =
        serde_saphyr::from_str(&text).map_err(|e| syntax_error(&display, &e).to_string())?;
    if spec.kind.as_deref() != Some("PolicyTest") {
        return Err(format!("{display}:1:1: `kind: PolicyTest` is required"));
    }
    check_top_level_fields(&display, &text, &limits.inventory, |kind| {
        (kind == "PolicyTest").then(|| [INVENTORY_FIELDS, TEST_FILE_FIELDS].concat())
    })
    .map_err(|e| e.to_string())?;
    let mut inventory = Inventory::new();
    add_inventory_text_with_limits(&mut inventory, &display, &text, &limits.inventory)
        .map_err(|e| e.to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    for (index, source) in spec.inventory.iter().enumerate() {
        inventory
            .add_path_with_limits(&base.join(&source.value), &limits.inventory)
            .map_err(|e| {
                format!(
                    "{display}:{}: inventory[{index}]: {e}",
                    source.referenced.line()
                )
            })?;
    }
    inventory.finish().map_err(|e| e.to_string())?;

    let mut outcome = LoadOutcome::default();
    for (index, policy) in spec.policies.iter().enumerate() {
        let line = policy.referenced.line();
        match (&policy.value.path, &policy.value.inline) {
            (Some(rel), None) => {
                let full = base.join(rel);
                let loaded = load_path(&full, &limits.load)
                    .map_err(|e| format!("{display}:{line}: policies[{index}]: {e}"))?;
                outcome.merge(loaded);
            }
            (None, Some(inline)) => {
                let name = format!("{display}#policies[{index}]");
                outcome.merge(load_str(&name, inline, &limits.load));
            }
            _ => {
                return Err(format!(
                    "{display}:{line}: policies[{index}] needs exactly one of `path` and `inline`"
                ));
            }
        }
    }
    if outcome.has_errors() {
        return Err(format!(
            "{display}: the policies do not validate:\n{}",
            render_human_all(&outcome.diagnostics, &outcome.sources).trim_end()
        ));
    }
    let inputs = PolicyInput::from_outcome(&outcome);
    let compiled = compile_with_limits(&inputs, &inventory, &limits.compile)
        .map_err(|e| format!("{display}: {e}"))?;
    Ok(PreparedTest {
        file: display,
        spec,
        compiled,
    })
}

/// A case made ready for evaluation.
pub struct ResolvedCase {
    /// Display label of the case.
    pub label: String,
    /// The flow.
    pub flow: Flow,
    /// Expected verdict.
    pub expect: FlowVerdict,
}

/// Parses a case against a compilation.
pub fn resolve_case(
    file: &str,
    index: usize,
    case: &Spanned<CaseSpec>,
    compiled: &Compiled,
) -> Result<ResolvedCase, String> {
    let at = format!("{file}:{}: cases[{index}]", case.referenced.line());
    let spec = &case.value;
    let from = Peer::parse(&spec.from.0, compiled).map_err(|e| format!("{at}: {e}"))?;
    let to = Peer::parse(&spec.to.0, compiled).map_err(|e| format!("{at}: {e}"))?;
    let protocol = spec
        .protocol
        .clone()
        .unwrap_or_else(|| "TCP".to_owned())
        .to_ascii_uppercase();
    let proto_number = match protocol.as_str() {
        "TCP" => proto::TCP,
        "UDP" => proto::UDP,
        "SCTP" => proto::SCTP,
        "ICMP" => proto::ICMP,
        "ICMPV6" => proto::ICMPV6,
        other => {
            return Err(format!(
                "{at}: protocol `{other}` is not TCP, UDP, SCTP, ICMP or ICMPv6"
            ));
        }
    };
    let icmp = matches!(proto_number, proto::ICMP | proto::ICMPV6);
    let port = if icmp {
        let text = spec
            .icmp_type
            .as_ref()
            .ok_or_else(|| format!("{at}: `icmpType` is required for {protocol}"))?;
        let number =
            porin_compiler::resolve::rule::icmp_type(&text.0, proto_number == proto::ICMPV6)
                .ok_or_else(|| format!("{at}: `{}` is not an ICMP type", text.0))?;
        u16::from(number)
    } else {
        let text = spec
            .port
            .as_ref()
            .ok_or_else(|| format!("{at}: `port` is required for {protocol}"))?;
        text.0
            .trim()
            .parse::<u16>()
            .map_err(|_| format!("{at}: `{}` is not a port", text.0))?
    };
    let expect = FlowVerdict::parse(&spec.expect).ok_or_else(|| {
        format!(
            "{at}: expect `{}` is not allow, deny or redirect",
            spec.expect
        )
    })?;
    let what = if icmp {
        format!("{protocol} type {port}")
    } else {
        format!("{protocol}/{port}")
    };
    let label = match &spec.name {
        Some(name) => format!("{name} ({} -> {} {what})", spec.from.0, spec.to.0),
        None => format!("{} -> {} {what}", spec.from.0, spec.to.0),
    };
    let flow = Flow {
        from,
        to,
        proto: proto_number,
        port,
    };
    // A case must describe a packet that can exist: deciding an impossible
    // flow would give a verdict the datapath can never produce (the kernel
    // engine cannot even build the packet), so it is an error of the file,
    // for both engines.
    flow.families(compiled).map_err(|e| format!("{at}: {e}"))?;
    Ok(ResolvedCase {
        label,
        flow,
        expect,
    })
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
/// fault, as an error). Engines other than the reference (porin-kernel's
/// kernel engine) report their files the same way.
pub fn unrun_cases(spec: &TestFileSpec, at_fault: Option<usize>, reason: &str) -> Vec<CaseResult> {
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
    let Some(prepared) = prepare_for_run(path, limits, report, result) else {
        return;
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
            (!passes(&evaluation, case.expect)).then(|| explain(&prepared.compiled, &evaluation));
        let decided = DecidedCase {
            index,
            seen: evaluation.describe_verdict(),
            failure,
            duration: started.elapsed(),
        };
        record_case(report, result, &prepared, case, decided);
    }
}

/// Prepares a file for an engine and settles its `expectError`: returns
/// the test to run, or `None` when the file's outcome is recorded already
/// (an error, or a refusal that was or was not expected).
pub fn prepare_for_run(
    path: &Path,
    limits: &Limits,
    report: &mut TestReport,
    result: &mut FileResult,
) -> Option<PreparedTest> {
    let (error, expected) = match prepare_with_limits(path, limits) {
        Ok(prepared) => match prepared.spec.expect_error.clone() {
            None => return Some(prepared),
            Some(expected) => (None, expected),
        },
        Err(error) => match expected_error(path) {
            None => {
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

/// Whether an evaluation meets a case's expectation: every packet the
/// flow can be (each family of a world end) gets the expected verdict.
/// Families that differ fail the case whatever it expects: one verdict
/// cannot describe them, and the line shows both (`IPv4 deny, IPv6
/// allow`).
pub fn passes(evaluation: &Evaluation, expect: FlowVerdict) -> bool {
    evaluation.no_packet.is_none()
        && !evaluation.families.is_empty()
        && evaluation.families.iter().all(|(_, v)| *v == expect)
}

/// What an engine saw for one resolved case.
pub struct DecidedCase {
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
pub fn record_case(
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
