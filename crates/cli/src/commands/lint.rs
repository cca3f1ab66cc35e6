//! `porin lint PATH... [--inventory FILE_OR_DIR] [--config FILE]
//! [--context PATH]... [--format human|json|sarif|junit|github]
//! [--fail-on error|warning|never] [--baseline FILE] [--write-baseline FILE]`: load and validate policies, run the
//! verifier's lint rules (`porin_lint`), print the findings.
//!
//! `--context` loads more policies that every rule sees but whose findings
//! are not reported: a pre-commit hook passes the changed files as PATH and
//! the whole policy set as context, so the rules that compare policies (PR004,
//! PR005, PR007, ...) see every policy the cluster runs and only the changed
//! files are reported on.
//!
//! `--baseline FILE` reports only the findings not recorded in FILE and,
//! as `PR021` notes that never fail the run, the entries of the files
//! linted that match no finding any more; `--write-baseline FILE` records
//! every finding of the run (it does not change what is reported). The
//! fingerprints are `porin_lint::baseline`'s: file, object, route, code and
//! message, no line numbers.
//!
//! Without `--inventory`, the rules that need one (capacity, shadowing,
//! deny bypass, selectors that select nothing, DNS, named ports) are
//! skipped, with a note on standard error. The configuration is `--config`,
//! else `.porin.yaml` in the current directory if present.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use porin_compiler::compile::Compilation;
use porin_compiler::error::CompileError;
use porin_compiler::inventory::Inventory;
use porin_compiler::limits::Limits;
use porin_compiler::resolve::lower::PolicyInput;
use porin_lint::baseline::{self, Baseline, Fingerprint};
use porin_lint::{Report, verify};
use porin_model::codes::SKIPPED_DOCUMENT;
use porin_model::diagnostic::{render_human_all, render_json};
use porin_model::loader::policy_files;
use porin_model::{Diagnostic, LoadLimits, Severity, load_paths};

use crate::commands::compile::load_inventory_with;
use crate::limit_flags::LimitArgs;
use crate::output::Status;
use crate::render::{self, FailOn, LintFormat};
use crate::target_flags::TargetArgs;
use porin_model::target::{cluster_policy_upgrade_diagnostics, upgrade_diagnostics};
use porin_model::version::{CiliumVersion, Target};

/// Arguments of `porin lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// Files or directories (searched recursively for *.yaml, *.yml, *.json); `-` reads standard input.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,
    /// Also print notes (e.g. documents skipped because they are not policies).
    #[arg(short, long)]
    pub verbose: bool,
    /// Inventory (porin inventory, Kubernetes manifests or a Cilium dump;
    /// file or directory, `-` for standard input): enables the rules that
    /// need endpoints.
    #[arg(long, value_name = "FILE_OR_DIR")]
    pub inventory: Option<PathBuf>,
    /// Lint configuration (default: `.porin.yaml` in the current directory, if any).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Which findings fail the run (exit 1).
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    pub fail_on: FailOn,
    /// More policies (file or directory, repeatable) the rules see, whose own
    /// findings are not reported; files also given as PATH are reported on.
    /// Errors that make a context file invalid are still reported: the
    /// analysis would be wrong without its policies.
    #[arg(long, value_name = "PATH")]
    pub context: Vec<PathBuf>,
    /// Report only the findings not recorded in this baseline file (and, as
    /// notes that never fail the run, its entries no longer found).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Record every finding of this run in a baseline file (JSON, sorted),
    /// for `--baseline`; what is reported does not change.
    #[arg(long, value_name = "FILE")]
    pub write_baseline: Option<PathBuf>,
    /// The Cilium the policies are for (overrides `ciliumVersion` of the
    /// configuration).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Also report what upgrading the cluster to this Cilium version (1.20)
    /// changes: policies valid now that the new version refuses, one
    /// finding per row of porin's version table. For the connectivity an
    /// upgrade changes, `porin diff --cilium-version A --to-cilium-version B`.
    #[arg(long, value_name = "VERSION", value_parser = CiliumVersion::parse_modelled)]
    pub upgrade_to: Option<CiliumVersion>,
    /// Resource limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

use crate::project_config::load_config;

/// Checks the compile limits before the lint rules run, without building a
/// map state: lowering, identities, selector work and each endpoint's
/// insertion bound ([`Compilation::check_insertions`]). The rules compile
/// every endpoint themselves, so a hostile policy set is refused here
/// instead of exhausting memory there. An endpoint over the map capacity
/// is not refused: that is PR001's finding (counted, never built). Other
/// compile errors are left to the rules, which report them their own way.
fn check_compile_limits(
    inputs: &[PolicyInput<'_>],
    inventory: Option<&Inventory>,
    limits: &Limits,
) -> Result<(), CompileError> {
    let empty = Inventory::new();
    match Compilation::run(
        inputs,
        inventory.unwrap_or(&empty),
        &limits.compile,
        |compilation| compilation.check_insertions(),
    ) {
        Err(error @ CompileError::Limit { .. }) => Err(error),
        _ => Ok(()),
    }
}

/// The files a path names: itself, or the policy files under a directory.
fn files_of(path: &Path, limits: &LoadLimits) -> anyhow::Result<Vec<PathBuf>> {
    if path.is_dir() {
        Ok(policy_files(path, limits)?)
    } else {
        Ok(vec![path.to_owned()])
    }
}

/// The files of `--context` not also named (directly or through a
/// directory) by a PATH, without repeats: loading a file twice would make
/// its policies duplicates of themselves (PM042).
fn context_files(args: &LintArgs, limits: &LoadLimits) -> anyhow::Result<Vec<PathBuf>> {
    if args.context.is_empty() {
        return Ok(Vec::new());
    }
    // Canonical paths, so `policies/a.yaml` and `./policies/a.yaml` are one file.
    let canonical = |file: &Path| std::fs::canonicalize(file).unwrap_or_else(|_| file.to_owned());
    let mut seen = BTreeSet::new();
    for path in args.paths.iter().filter(|p| p.as_os_str() != "-") {
        for file in files_of(path, limits)? {
            seen.insert(canonical(&file));
        }
    }
    let mut files = Vec::new();
    for path in &args.context {
        if path.as_os_str() == "-" {
            anyhow::bail!("--context cannot read standard input; give a file or directory");
        }
        if !path.exists() {
            anyhow::bail!(
                "cannot read the context {}: no such file or directory",
                path.display()
            );
        }
        for file in files_of(path, limits)? {
            if seen.insert(canonical(&file)) {
                files.push(file);
            }
        }
    }
    Ok(files)
}

/// Whether a finding is located in a `--context` file (and so is not
/// reported, unless it makes that file invalid).
fn in_context(diagnostic: &Diagnostic, context: &BTreeSet<String>) -> bool {
    diagnostic
        .primary
        .as_ref()
        .is_some_and(|at| context.contains(&at.file))
}

/// A compile limit hit while linting: in the requested format (SARIF with a
/// tool execution notification, JSON and GitHub with the diagnostic, JUnit
/// with an `<error>`), exit 2. Human output keeps the one-line error on
/// standard error.
fn could_not_run(
    args: &LintArgs,
    outcome: &porin_model::LoadOutcome,
    error: CompileError,
) -> anyhow::Result<Status> {
    let failure = crate::limit_flags::limit_diagnostic(&error);
    report_failure(args, outcome, failure, error.into())
}

/// A load limit hit before anything was parsed (`--max-total-bytes`,
/// `--max-files`): like [`could_not_run`], with the loader's PM002; any
/// other load error (a path that cannot be read) stays the usual error.
fn load_failed(args: &LintArgs, error: porin_model::LoadError) -> anyhow::Result<Status> {
    if !matches!(
        error,
        porin_model::LoadError::TooMuchInput { .. } | porin_model::LoadError::TooManyFiles { .. }
    ) {
        return Err(error.into());
    }
    let failure = Diagnostic::new(porin_model::codes::LIMIT_EXCEEDED, error.to_string());
    let outcome = porin_model::LoadOutcome::default();
    report_failure(args, &outcome, failure, error.into())
}

/// Writes `failure` in the requested format and exits 2 (human: `error`
/// as the one-line error on standard error).
fn report_failure(
    args: &LintArgs,
    outcome: &porin_model::LoadOutcome,
    failure: Diagnostic,
    error: anyhow::Error,
) -> anyhow::Result<Status> {
    if args.format == LintFormat::Human {
        return Err(error);
    }
    let mut diagnostics: Vec<Diagnostic> = outcome.diagnostics.clone();
    diagnostics.push(failure.clone());
    let text = match args.format {
        LintFormat::Sarif => render::sarif::render(
            &outcome.diagnostics,
            &sarif_info(args, outcome, Some(failure)),
        ),
        LintFormat::Junit => render::junit::render_failure("porin lint", &failure),
        LintFormat::Github => render::github::render(&diagnostics),
        LintFormat::Json | LintFormat::Human => {
            let mut text = render_json(&diagnostics);
            text.push('\n');
            text
        }
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    Ok(Status::CouldNotRun)
}

/// The SARIF run's context: location-less findings go to the inventory or
/// the first policy file.
fn sarif_info(
    args: &LintArgs,
    outcome: &porin_model::LoadOutcome,
    failure: Option<Diagnostic>,
) -> render::sarif::RunInfo {
    render::sarif::RunInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        fallback_file: args
            .inventory
            .as_ref()
            .map(|p| p.display().to_string())
            .or_else(|| outcome.documents.first().map(|d| d.file.clone())),
        failure,
    }
}

/// Runs the lint: exit 0 when nothing fails the run, 1 otherwise, 2 when a
/// path, the inventory or the configuration cannot be read.
pub fn run(args: &LintArgs) -> anyhow::Result<Status> {
    let limits = args.limits.limits();
    let mut config = load_config(args.config.as_deref())?;
    let stdin_readers = args.paths.iter().filter(|p| p.as_os_str() == "-").count()
        + usize::from(args.inventory.as_deref() == Some(Path::new("-")));
    if stdin_readers > 1 {
        anyhow::bail!(
            "standard input (`-`) can be read once: give it to PATH or to --inventory, not both"
        );
    }
    let recorded = match &args.baseline {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the baseline {}", path.display()))?;
            Some(Baseline::parse(&path.display().to_string(), &text)?)
        }
        None => None,
    };
    let context = context_files(args, &limits.load)?;
    let context_names: BTreeSet<String> = context.iter().map(|f| f.display().to_string()).collect();
    let mut paths = args.paths.clone();
    paths.extend(context);
    let mut outcome = match load_paths(&paths, &limits.load) {
        Ok(outcome) => outcome,
        Err(error) => return load_failed(args, error),
    };
    let inventory = match &args.inventory {
        Some(path) => Some(
            load_inventory_with(path, &limits, &config.settings)
                .with_context(|| format!("cannot load the inventory {}", path.display()))?,
        ),
        None => None,
    };
    // The flags, then the inventory's `ciliumVersion` /
    // `enableK8sClusterNetworkPolicy`, then `.porin.yaml`; PR016 reads the
    // version the policies are validated for.
    let target = crate::target_flags::resolve(args.target.choice(), inventory.as_ref(), &config);
    config.cilium_version = (target.version.major, target.version.minor);
    // Read before `apply_target` consumes the held-back ClusterNetworkPolicies.
    let enforced_by_upgrade = args.upgrade_to.map(|version| {
        cluster_policy_upgrade_diagnostics(&outcome, &target, &Target { version, ..target })
    });
    outcome.apply_target(&target);
    let inputs = PolicyInput::from_outcome(&outcome);
    if let Err(error) = check_compile_limits(&inputs, inventory.as_ref(), &limits) {
        return could_not_run(args, &outcome, error);
    }
    let report: Report = match verify(&inputs, inventory.as_ref(), &config) {
        Ok(report) => report,
        Err(error @ CompileError::Limit { .. }) => return could_not_run(args, &outcome, error),
        Err(error) => return Err(error.into()),
    };

    // Load errors of context files stay: the analysis is wrong without
    // their policies. Their other findings are not this run's to report.
    let mut diagnostics: Vec<Diagnostic> = outcome
        .diagnostics
        .iter()
        .filter(|d| d.is_error() || !in_context(d, &context_names))
        .cloned()
        .collect();
    diagnostics.extend(
        report
            .findings
            .iter()
            .filter(|d| !in_context(d, &context_names))
            .cloned(),
    );
    if let Some(version) = args.upgrade_to {
        let to = Target { version, ..target };
        for document in &outcome.documents {
            diagnostics.extend(
                upgrade_diagnostics(&outcome, document, &target, &to)
                    .into_iter()
                    .filter(|d| !in_context(d, &context_names)),
            );
        }
        diagnostics.extend(
            enforced_by_upgrade
                .into_iter()
                .flatten()
                .filter(|d| !in_context(d, &context_names)),
        );
    }
    if let Some(path) = &args.write_baseline {
        // A skipped non-policy document is not a finding to record.
        let written = Baseline::new(
            diagnostics
                .iter()
                .filter(|d| d.code != SKIPPED_DOCUMENT.code)
                .map(|d| Fingerprint::of(d, &outcome.trees)),
        );
        std::fs::write(path, written.to_json())
            .with_context(|| format!("cannot write the baseline {}", path.display()))?;
    }
    let mut stale = Vec::new();
    if let (Some(recorded), Some(path)) = (&recorded, &args.baseline) {
        // Stale only for the files this run reports on.
        let scope: BTreeSet<String> = outcome
            .trees
            .iter()
            .filter(|t| !context_names.contains(&t.file))
            .map(|t| baseline::normalise_file(&t.file))
            .collect();
        let applied = recorded.apply(diagnostics, &outcome.trees, |f| scope.contains(f));
        diagnostics = applied.new;
        let name = path.display().to_string();
        stale = applied
            .stale
            .iter()
            .map(|entry| baseline::stale_diagnostic(&name, entry))
            .collect();
        if args.format == LintFormat::Human && applied.baselined > 0 {
            eprintln!(
                "note: {} findings recorded in the baseline {name} are not reported",
                applied.baselined
            );
        }
    }
    if !args.verbose {
        // Notes are for people; a skipped Deployment is not a finding for
        // code scanning or a test report either, so machine formats leave
        // it out too (`-v` keeps it).
        diagnostics.retain(|d| {
            d.code != SKIPPED_DOCUMENT.code
                && (d.severity != Severity::Info || args.format != LintFormat::Human)
        });
    }
    // Stale baseline entries are shown whatever -v says, and never fail.
    diagnostics.extend(stale);
    // A baselined load error does not fail the run; without a baseline
    // every one does (including those of context files).
    let fails = (recorded.is_none() && outcome.has_errors())
        || diagnostics.iter().any(|d| args.fail_on.fails(d.severity));
    let status = if fails {
        Status::Findings
    } else {
        Status::Clean
    };
    if !report.skipped.is_empty() && args.format == LintFormat::Human {
        eprintln!(
            "note: {} rules need --inventory and were skipped ({})",
            report.skipped.len(),
            report.skipped.join(", ")
        );
    }
    let text = match args.format {
        LintFormat::Json => {
            let mut text = render_json(&diagnostics);
            text.push('\n');
            text
        }
        LintFormat::Human => {
            let mut text = render_human_all(&diagnostics, &outcome.sources);
            let policies = outcome.documents.len();
            text.push_str(&format!(
                "{policies} valid {} loaded\n",
                if policies == 1 { "policy" } else { "policies" }
            ));
            if render::use_colour() {
                render::colourise(&text)
            } else {
                text
            }
        }
        LintFormat::Sarif => render::sarif::render(&diagnostics, &sarif_info(args, &outcome, None)),
        LintFormat::Junit => render::junit::render(&diagnostics, &report.skipped, args.fail_on),
        LintFormat::Github => render::github::render(&diagnostics),
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    Ok(status)
}
