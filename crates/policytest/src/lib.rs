//! # porin-policytest: the `porin test` runner
//!
//! Input: paths of `PolicyTest` files or directories. Output: a
//! [`TestReport`] (a [`FileResult`] per file, a [`CaseResult`] per case,
//! the errors of files that could not run) and its exit code; nothing is
//! printed. Cases are decided by an [`Engine`]: this crate's
//! [`Reference`] evaluator, the kernel engine of porin-kernel
//! (`porin_kernel::engine::Kernel`, porin's object in the running kernel),
//! or [`Both`] of them, which fails a case on any disagreement. Every engine
//! reports through the same runner, so the `PASS`/`FAIL` lines and the
//! per-file results are the same whichever engine decided.
//!
//! `porin test`: policy test files (the contract is
//! `docs/policy-tests.md`).
//!
//! A `PolicyTest` file names an inventory (its `cluster`, `namespaces`,
//! `endpoints`, `fqdns`), the policies in force (`policies[].path`, relative
//! to the file, or `policies[].inline`) and `cases`: flows with the
//! verdict they must get. [`run`] compiles each file and decides every case
//! with the engine it is given.
//!
//! The runner returns a [`TestReport`] instead of printing, so the CLI owns
//! output. Exit codes (`TestReport::exit_code`): 0 all passed, 1 a case
//! failed, 2 a file could not be read, parsed or validated.

// No unsafe code: system calls live in porin-kernel, the C ABI in porin-capi.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use porin_model::diagnostic::render_human_all;
use porin_model::loader::{LoadOutcome, load_path, load_str};
use serde::Deserialize;
use serde_saphyr::Spanned;

use porin_compiler::compile::{Compiled, compile_with_limits};
use porin_compiler::explain::{Evaluation, Flow, FlowVerdict, Peer};
use porin_compiler::inventory::Inventory;
use porin_compiler::inventory::yaml::{
    INVENTORY_FIELDS, Scalar, add_inventory_text_with_limits, check_top_level_fields,
};
use porin_compiler::limits::Limits;
use porin_compiler::resolve::lower::PolicyInput;
use porin_compiler::resolve::rule::proto;

mod engine;
mod parse_error;
mod reference;
mod report;
mod run;

pub use engine::{
    Both, CaseDecision, Check, CheckOutcome, Engine, EngineError, Family, FamilyChecks, combine,
    describe_tested, disagreement, verdicts_pass,
};
pub use reference::Reference;
pub use report::{CaseOutcome, CaseResult, FileResult, TestReport};
pub use run::{
    prepare_for_run, run, run_files, run_files_with_inventory, run_files_with_target,
    run_with_limits,
};

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
    /// TCP (default), UDP, SCTP, ICMP, ICMPv6, VRRP or IGMP.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Destination port.
    #[serde(default)]
    pub port: Option<Scalar>,
    /// ICMP type.
    #[serde(default)]
    pub icmp_type: Option<Scalar>,
    /// `ipv4` or `ipv6`: decide the flow in that address family only (both
    /// ends need an address of it); every family both ends have otherwise.
    #[serde(default)]
    pub family: Option<String>,
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

/// Whether a text is a PolicyTest file: `kind: PolicyTest` at the top
/// level of YAML, or `"kind": "PolicyTest"` in JSON (`porin query` reads
/// such a file with its endpoints instead of skipping it as no policy).
pub fn is_policy_test(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_end();
        line == "kind: PolicyTest" || line == "kind: \"PolicyTest\"" || line == "kind: 'PolicyTest'"
    }) || text.contains("\"kind\":\"PolicyTest\"")
        || text.contains("\"kind\": \"PolicyTest\"")
}

/// A loaded and compiled test file.
pub struct PreparedTest {
    /// Display path.
    pub file: String,
    /// The spec.
    pub spec: TestFileSpec,
    /// The compilation.
    pub compiled: Compiled,
    /// The inventory the file was compiled against (its endpoints, its
    /// `inventory:` sources and `--inventory`): the Services a case may
    /// name as its destination.
    pub inventory: Inventory,
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

/// What the error of [`prepare_with_limits`] says when the file's policies
/// are invalid (a finding, exit 1, not a failure to run).
pub const POLICIES_INVALID: &str = "the policies do not validate";

/// Reads, validates and compiles one test file, under the default
/// [`Limits`].
pub fn prepare(path: &Path) -> Result<PreparedTest, String> {
    prepare_with_limits(path, &Limits::default())
}

/// [`prepare`] under explicit limits: the test file is an inventory file
/// (its size and YAML budget are the inventory's), its policies are
/// loaded under the load limits and compiled under the compile limits.
pub fn prepare_with_limits(path: &Path, limits: &Limits) -> Result<PreparedTest, String> {
    prepare_with_inventory(path, limits, &[])
}

/// [`prepare_with_limits`] with more inventory sources (`porin test
/// --inventory`: manifests, porin YAML, Cilium dumps) added to the file's
/// own `endpoints` and `inventory:` sources; an endpoint defined twice is
/// an error, as for any two inventory sources.
pub fn prepare_with_inventory(
    path: &Path,
    limits: &Limits,
    extra: &[PathBuf],
) -> Result<PreparedTest, String> {
    prepare_with_target(path, limits, extra, &TargetOverride::default())
}

/// The target a test file is run for, around what its inventory says.
/// The inventory is the file's own `ciliumVersion` /
/// `enableK8sClusterNetworkPolicy` and those of the inventory files it
/// reads (`inventory:`, `--inventory`; a disagreement is an error naming
/// both lines). Precedence: `command_line` (`porin test --cilium-version V
/// --enable-k8s-cluster-network-policy[=BOOL]`), then the inventory, then
/// `defaults` (`.porin.yaml`), then Cilium 1.19 with the switch off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetOverride {
    /// What the command line says: above the file.
    pub command_line: porin_model::TargetChoice,
    /// What `.porin.yaml` says: below the file.
    pub defaults: porin_model::TargetChoice,
}

/// [`prepare_with_inventory`] with the command line's target overriding
/// the file's ([`TargetOverride`]).
pub fn prepare_with_target(
    path: &Path,
    limits: &Limits,
    extra: &[PathBuf],
    target: &TargetOverride,
) -> Result<PreparedTest, String> {
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
    let spec: TestFileSpec = serde_saphyr::from_str(&text)
        .map_err(|e| parse_error::render_parse_error(&display, &text, &e))?;
    if spec.kind.as_deref() != Some("PolicyTest") {
        return Err(format!("{display}:1:1: `kind: PolicyTest` is required"));
    }
    check_top_level_fields(&display, &text, &limits.inventory, |kind| {
        (kind == "PolicyTest").then(|| [INVENTORY_FIELDS, TEST_FILE_FIELDS].concat())
    })
    .map_err(|e| parse_error::render_top_level_error(&display, &text, e))?;
    let mut inventory = Inventory::new();
    add_inventory_text_with_limits(&mut inventory, &display, &text, &limits.inventory)
        .map_err(|e| parse_error::render_inventory_error(&display, &text, e))?;
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
    for source in extra {
        inventory
            .add_path_with_limits(source, &limits.inventory)
            .map_err(|e| format!("{display}: --inventory {}: {e}", source.display()))?;
    }
    inventory.finish().map_err(|e| format!("{display}: {e}"))?;

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
    outcome.apply_target(
        &target
            .command_line
            .or(inventory.target.choice())
            .or(target.defaults)
            .target(),
    );
    if outcome.has_errors() {
        return Err(format!(
            "{display}: {POLICIES_INVALID}:\n{}",
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
        inventory,
    })
}

/// A case made ready for evaluation.
pub struct ResolvedCase {
    /// Position of the case in the file's `cases` (several resolved cases
    /// share it when the case names a Service: one per backend).
    pub index: usize,
    /// Display label of the case.
    pub label: String,
    /// The flow.
    pub flow: Flow,
    /// Expected verdict.
    pub expect: FlowVerdict,
}

/// Parses a case against a compilation. A case naming a Service
/// (`to: svc/NAMESPACE/NAME`) needs the inventory: use
/// [`resolve_cases`].
pub fn resolve_case(
    file: &str,
    index: usize,
    case: &Spanned<CaseSpec>,
    compiled: &Compiled,
) -> Result<ResolvedCase, String> {
    let mut cases = resolve_case_in(file, index, case, compiled, None)?;
    match (cases.pop(), cases.is_empty()) {
        (Some(case), true) => Ok(case),
        _ => Err(format!("{file}: cases[{index}] resolves to several flows")),
    }
}

/// Parses a case of a prepared file into the flows it stands for: one, or
/// one per backend when its destination is a Service
/// (`svc/NAMESPACE/NAME`, [`porin_compiler::inventory::service`]): the
/// load balancer picks the backend before policy, so each backend's flow
/// on its target port must get the expected verdict. An unknown Service,
/// port or backend-less port is an error of the file at the case's line.
pub fn resolve_cases(
    prepared: &PreparedTest,
    index: usize,
    case: &Spanned<CaseSpec>,
) -> Result<Vec<ResolvedCase>, String> {
    resolve_case_in(
        &prepared.file,
        index,
        case,
        &prepared.compiled,
        Some(&prepared.inventory),
    )
}

fn resolve_case_in(
    file: &str,
    index: usize,
    case: &Spanned<CaseSpec>,
    compiled: &Compiled,
    inventory: Option<&Inventory>,
) -> Result<Vec<ResolvedCase>, String> {
    use porin_compiler::inventory::service::SERVICE_PREFIX;
    let at = format!("{file}:{}: cases[{index}]", case.referenced.line());
    let spec = &case.value;
    if spec.from.0.trim().starts_with(SERVICE_PREFIX) {
        return Err(format!(
            "{at}: `{}` is a Service: a Service is a destination only (its backends answer, not the Service)",
            spec.from.0.trim()
        ));
    }
    let from = Peer::parse(&spec.from.0, compiled).map_err(|e| format!("{at}: {e}"))?;
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
        "VRRP" => proto::VRRP,
        "IGMP" => proto::IGMP,
        other => {
            return Err(format!(
                "{at}: protocol `{other}` is not TCP, UDP, SCTP, ICMP, ICMPv6, VRRP or IGMP"
            ));
        }
    };
    let icmp = matches!(proto_number, proto::ICMP | proto::ICMPV6);
    // VRRP and IGMP have no ports: their packets are looked up with port 0
    // (enable-extended-ip-protocols, porin_compiler::resolve::rule::proto::tracked).
    let portless = matches!(proto_number, proto::VRRP | proto::IGMP);
    let port = if portless {
        match spec.port.as_ref().map(|p| p.0.trim()) {
            None | Some("0") => 0,
            Some(other) => {
                return Err(format!(
                    "{at}: `port: {other}`: {protocol} has no ports (leave `port` out)"
                ));
            }
        }
    } else if icmp {
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
    let family = match spec
        .family
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None => None,
        Some("ipv4") => Some(Family::V4),
        Some("ipv6") => Some(Family::V6),
        Some(other) => return Err(format!("{at}: family `{other}` is not ipv4 or ipv6")),
    };
    let mut what = if portless {
        protocol.clone()
    } else if icmp {
        format!("{protocol} type {port}")
    } else {
        format!("{protocol}/{port}")
    };
    if let Some(family) = family {
        use std::fmt::Write as _;
        let _ = write!(what, " over {family}");
    }
    let label = match &spec.name {
        Some(name) => format!("{name} ({} -> {} {what})", spec.from.0, spec.to.0),
        None => format!("{} -> {} {what}", spec.from.0, spec.to.0),
    };
    let to_text = spec.to.0.trim();
    // (peer, port, label) of every flow the case stands for.
    let mut targets = Vec::new();
    if to_text.starts_with(SERVICE_PREFIX) {
        if icmp || portless {
            return Err(format!(
                "{at}: a Service destination takes TCP, UDP or SCTP (a Service port), not {protocol}"
            ));
        }
        let inventory = inventory.ok_or_else(|| {
            format!("{at}: `{to_text}`: a Service destination needs the file's inventory")
        })?;
        let target = inventory
            .service_target(to_text, port, proto_number)
            .map_err(|e| format!("{at}: {e}"))?;
        for backend in &target.backends {
            let peer = backend.peer();
            targets.push((
                peer.clone(),
                backend.port,
                format!(
                    "{label} via backend {peer} {protocol}/{} ({})",
                    backend.port,
                    target.describe_target()
                ),
            ));
        }
    } else {
        targets.push((to_text.to_owned(), port, label));
    }
    let mut resolved = Vec::with_capacity(targets.len());
    for (peer, port, label) in targets {
        let to = Peer::parse(&peer, compiled).map_err(|e| format!("{at}: {e}"))?;
        let flow = Flow {
            from: from.clone(),
            to,
            proto: proto_number,
            port,
            family,
        };
        // A case must describe a packet that can exist: deciding an
        // impossible flow would give a verdict the datapath can never
        // produce (the kernel engine cannot even build the packet), so it
        // is an error of the file, for both engines.
        flow.families(compiled).map_err(|e| format!("{at}: {e}"))?;
        resolved.push(ResolvedCase {
            index,
            label,
            flow,
            expect,
        });
    }
    Ok(resolved)
}

/// Whether an evaluation meets a case's expectation: every packet the
/// flow can be (each family of a world end) gets the expected verdict.
/// Families that differ fail the case whatever it expects: one verdict
/// cannot describe them, and the line shows both (`IPv4 deny, IPv6
/// allow`).
/// The rule every engine's decision is judged by
/// ([`CaseDecision::passes`]), for a reference [`Evaluation`].
pub fn passes(evaluation: &Evaluation, expect: FlowVerdict) -> bool {
    evaluation.no_packet.is_none() && verdicts_pass(&evaluation.families, expect)
}
