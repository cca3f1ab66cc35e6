//! `porin test`: policy test files (the contract is
//! `shared/docs/policy-test-format.md`).
//!
//! A `PolicyTest` file names an inventory (its `cluster`, `namespaces`,
//! `endpoints`, `fqdns`), the policies in force (`policies[].path`, relative
//! to the file, or `policies[].inline`) and `cases`: flows with the
//! verdict they must get. [`run`] compiles each file and decides every case
//! with the reference evaluator ([`crate::explain`]).
//!
//! The runner returns a [`TestReport`] instead of printing, so the CLI owns
//! output. Exit codes (`TestReport::exit_code`): 0 all passed, 1 a case
//! failed, 2 a file could not be read, parsed or validated.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use porin_model::diagnostic::render_human_all;
use porin_model::loader::{LoadOutcome, load_path, load_str};
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::compile::{Compiled, compile_with_limits};
use crate::explain::{Flow, FlowVerdict, Peer, evaluate, explain};
use crate::inventory::Inventory;
use crate::inventory::yaml::{Scalar, add_inventory_text_with_limits, syntax_error};
use crate::limits::Limits;
use crate::resolve::lower::PolicyInput;
use crate::resolve::rule::proto;

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
}

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
            "the kernel engine is provided by porin-ebpf and is not wired into `porin test` yet; use --engine reference"
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
        return Err(crate::error::InventoryError::Limit {
            file: display,
            limit_kind: crate::limits::InventoryLimit::FileBytes,
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
    let mut inventory = Inventory::new();
    add_inventory_text_with_limits(&mut inventory, &display, &text, &limits.inventory)
        .map_err(|e| e.to_string())?;
    inventory.finish().map_err(|e| e.to_string())?;

    let base = path.parent().unwrap_or(Path::new("."));
    let mut outcome = LoadOutcome::default();
    for (index, policy) in spec.policies.iter().enumerate() {
        let line = policy.referenced.line();
        match (&policy.value.path, &policy.value.inline) {
            (Some(rel), None) => {
                let full = base.join(rel);
                let loaded = load_path(&full, &limits.load)
                    .map_err(|e| format!("{display}:{line}: policies[{index}]: {e}"))?;
                merge_outcome(&mut outcome, loaded);
            }
            (None, Some(inline)) => {
                let name = format!("{display}#policies[{index}]");
                merge_outcome(&mut outcome, load_str(&name, inline, &limits.load));
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

fn merge_outcome(into: &mut LoadOutcome, other: LoadOutcome) {
    into.documents.extend(other.documents);
    into.diagnostics.extend(other.diagnostics);
    into.sources.extend(other.sources);
    into.trees.extend(other.trees);
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
        let number = crate::resolve::rule::icmp_type(&text.0, proto_number == proto::ICMPV6)
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
    Ok(ResolvedCase {
        label,
        flow: Flow {
            from,
            to,
            proto: proto_number,
            port,
        },
        expect,
    })
}

fn run_file(path: &Path, limits: &Limits, report: &mut TestReport) {
    let prepared = match prepare_with_limits(path, limits) {
        Ok(p) => p,
        Err(error) => {
            report.errors.push(error);
            return;
        }
    };
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
                report.errors.push(error);
                return;
            }
        }
    }
    for case in resolved {
        let evaluation = evaluate(&prepared.compiled, &case.flow);
        let mut line = String::new();
        if evaluation.verdict == case.expect {
            report.passed += 1;
            let _ = write!(
                line,
                "PASS {}: {} => {}",
                prepared.file, case.label, evaluation.verdict
            );
        } else {
            report.failed += 1;
            let _ = write!(
                line,
                "FAIL {}: {} => {} (expected {}): {}",
                prepared.file,
                case.label,
                evaluation.verdict,
                case.expect,
                explain(&prepared.compiled, &evaluation)
            );
        }
        report.lines.push(line);
    }
}
