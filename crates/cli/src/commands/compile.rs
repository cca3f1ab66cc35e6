//! `porin compile POLICIES... --inventory FILE_OR_DIR [--endpoint NS/NAME] [--format json|json-states|table]`
//!
//! Compiles policies against an inventory and prints each endpoint's
//! policy-map state (and the identities, ipcache and rule origins in JSON).
//! Exit codes: 0 compiled; 1 a policy is invalid (diagnostics on stderr);
//! 2 an input could not be read.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args as ClapArgs, ValueEnum};
use porin_compiler::compile::{
    Compilation, Compiled, StreamError, compile_with_limits, write_json, write_json_states,
};
use porin_compiler::error::InventoryError;
use porin_compiler::inventory::{Endpoint, Inventory};
use porin_compiler::limits::Limits;
use porin_compiler::resolve::lower::PolicyInput;
use porin_model::diagnostic::{render_human_all, render_json};
use porin_model::loader::{LoadOutcome, load_paths, load_paths_lean};

use crate::limit_flags::LimitArgs;
use crate::target_flags::TargetArgs;
use porin_model::version::{Target, TargetChoice};

/// Output format of `porin compile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The whole compilation as JSON (stable field order).
    Json,
    /// The JSON of `json` with each distinct map state written once: a
    /// `states` array before `endpoints`, and each endpoint's `entries`
    /// replaced by `state`, the index of its state there (endpoints
    /// selected by the same rules, with the same named ports, share one).
    /// Replacing each `state` by that state's `entries` gives `json`'s
    /// document.
    JsonStates,
    /// One table of map entries per endpoint.
    Table,
}

/// Arguments of `porin compile`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Policy files or directories (CNP, CCNP, KNP YAML/JSON).
    #[arg(required = true)]
    pub policies: Vec<PathBuf>,
    /// Inventory: a porin inventory file, Kubernetes manifests (file or
    /// directory) or a `cilium-dbg identity/endpoint list -o json` dump; `-`
    /// reads standard input.
    #[arg(long)]
    pub inventory: PathBuf,
    /// Only this endpoint (`namespace/name`, or `name` outside Kubernetes;
    /// `node/NAME` is the local node's host endpoint).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// The Cilium the policies are for.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Resource limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Loads policies and inventory and compiles them under `limits`; load
/// diagnostics go to stderr. Shared with `porin query`, `graph` and `diff`.
/// `command_line` is the target flags' layer ([`crate::target_flags`]):
/// it wins over the inventory's `ciliumVersion` /
/// `enableK8sClusterNetworkPolicy`, which win over `.porin.yaml`.
pub fn load_and_compile(
    policies: &[PathBuf],
    inventory: &Path,
    limits: &Limits,
    command_line: &TargetChoice,
) -> anyhow::Result<Result<(Compiled, LoadOutcome), LoadOutcome>> {
    if inventory.as_os_str() == "-" && policies.iter().any(|p| p.as_os_str() == "-") {
        bail!(
            "standard input (`-`) can be read once: give it to the policies or to --inventory, not both"
        );
    }
    let outcome = load_paths(policies, &limits.load).context("cannot load policies")?;
    compile_loaded(outcome, inventory, limits, command_line)
}

/// [`load_and_compile`] of policies already loaded (`porin diff` reads a
/// git revision into memory).
pub fn compile_loaded(
    outcome: LoadOutcome,
    inventory: &Path,
    limits: &Limits,
    command_line: &TargetChoice,
) -> anyhow::Result<Result<(Compiled, LoadOutcome), LoadOutcome>> {
    compile_loaded_before_upgrade(outcome, inventory, limits, command_line, None)
}

/// [`compile_loaded`] of the old side of an upgrade to `upgrade_to` (`porin
/// diff --to-cilium-version`): a ClusterNetworkPolicy the old target
/// ignores and the new one enforces is left out with a warning (PM067)
/// rather than refused, so the diff shows what enforcing it changes.
pub fn compile_loaded_before_upgrade(
    mut outcome: LoadOutcome,
    inventory: &Path,
    limits: &Limits,
    command_line: &TargetChoice,
    upgrade_to: Option<porin_model::CiliumVersion>,
) -> anyhow::Result<Result<(Compiled, LoadOutcome), LoadOutcome>> {
    let (inventory, target) = load_inventory_and_target(inventory, limits, command_line)?;
    if let Some(version) = upgrade_to {
        outcome
            .leave_out_cluster_policies_enforced_by_upgrade(&target, &Target { version, ..target });
    }
    outcome.apply_target(&target);
    if !outcome.diagnostics.is_empty() {
        eprint!(
            "{}",
            render_human_all(&outcome.diagnostics, &outcome.sources)
        );
    }
    if outcome.has_errors() {
        return Ok(Err(outcome));
    }
    let inputs = PolicyInput::from_outcome(&outcome);
    let compiled = compile_with_limits(&inputs, &inventory, &limits.compile)?;
    let diagnostics: Vec<_> = compiled.all_diagnostics().cloned().collect();
    if !diagnostics.is_empty() {
        eprint!("{}", render_human_all(&diagnostics, &outcome.sources));
    }
    Ok(Ok((compiled, outcome)))
}

/// Loads the inventory of `--inventory PATH` and the target the policies
/// are validated for: the command line, else the inventory's keys, else
/// `.porin.yaml`, else the defaults. The inventory is read before the
/// policies are validated, since it may say which Cilium they are for.
pub fn load_inventory_and_target(
    path: &Path,
    limits: &Limits,
    command_line: &TargetChoice,
) -> anyhow::Result<(Inventory, Target)> {
    let config = crate::project_config::project_config()?;
    let inventory =
        load_inventory_with(path, limits, &config.settings).context("cannot load the inventory")?;
    let target = crate::target_flags::resolve(*command_line, Some(&inventory), &config);
    Ok((inventory, target))
}

/// Loads the inventory of `--inventory PATH`; `-` is standard input. The
/// agent settings start from `settings:` of `.porin.yaml` in the current
/// directory, if there is one; the inventory's own `settings:` override
/// them.
pub fn load_inventory(path: &Path, limits: &Limits) -> anyhow::Result<Inventory> {
    let defaults = crate::project_config::project_config()?.settings;
    Ok(load_inventory_with(path, limits, &defaults)?)
}

/// [`load_inventory`] with the settings' defaults given (`porin lint
/// --config FILE` reads them from FILE).
pub fn load_inventory_with(
    path: &Path,
    limits: &Limits,
    defaults: &porin_compiler::settings::SettingsSpec,
) -> Result<Inventory, InventoryError> {
    let inventory = Inventory::with_settings(defaults)?;
    if path.as_os_str() == "-" {
        inventory.load_reader("<stdin>", std::io::stdin().lock(), &limits.inventory)
    } else {
        inventory.load_path(path, &limits.inventory)
    }
}

/// Runs `porin compile`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if matches!(args.format, Format::Json | Format::JsonStates) {
        return run_json(args);
    }
    let Ok((mut compiled, _)) = load_and_compile(
        &args.policies,
        &args.inventory,
        &args.limits.limits(),
        &args.target.choice(),
    )?
    else {
        // Invalid policies (diagnostics printed): a finding, exit 1.
        return Ok(ExitCode::from(1));
    };
    // The table names peers by their endpoints, also those filtered out.
    let names = args.endpoint.is_some().then(|| compiled.clone());
    if let Some(wanted) = &args.endpoint {
        if compiled.endpoint(wanted).is_none() {
            bail!("unknown endpoint `{wanted}`");
        }
        compiled.endpoints.retain(|e| &e.display_name() == wanted);
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{}", table(&compiled, names.as_ref()))?;
    Ok(ExitCode::SUCCESS)
}

/// `porin compile --format json`, streamed: the output of
/// [`Compiled::to_json`] byte for byte, written endpoint by endpoint
/// ([`write_json`]) so that the cluster's map states are never held
/// together; `--format json-states` writes each state once
/// ([`write_json_states`]). Every limit is checked before the first byte is written
/// ([`Compilation::check`]); a limit hit is reported as a JSON array with
/// its diagnostic (PC015) on standard output, exit 2. Findings go to
/// standard error after the output (policy-wide first, then each
/// endpoint's, as before).
fn run_json(args: &Args) -> anyhow::Result<ExitCode> {
    let limits = args.limits.limits();
    if args.inventory.as_os_str() == "-" && args.policies.iter().any(|p| p.as_os_str() == "-") {
        bail!(
            "standard input (`-`) can be read once: give it to the policies or to --inventory, not both"
        );
    }
    let mut outcome =
        load_paths_lean(&args.policies, &limits.load).context("cannot load policies")?;
    let (inventory, target) =
        load_inventory_and_target(&args.inventory, &limits, &args.target.choice())?;
    outcome.apply_target(&target);
    if !outcome.diagnostics.is_empty() {
        eprint!(
            "{}",
            render_human_all(&outcome.diagnostics, &outcome.sources)
        );
    }
    if outcome.has_errors() {
        // Invalid policies (diagnostics printed): a finding, exit 1.
        return Ok(ExitCode::from(1));
    }
    if let Some(wanted) = &args.endpoint
        && !inventory
            .endpoints
            .iter()
            .any(|e| &e.display_name() == wanted)
    {
        bail!("unknown endpoint `{wanted}`");
    }
    let select = |endpoint: &Endpoint| {
        args.endpoint
            .as_ref()
            .is_none_or(|wanted| &endpoint.display_name() == wanted)
    };
    // The models and their positions are freed once lowered; the findings
    // and the source texts stay here for rendering.
    let documents = outcome.split_off_documents();
    let written =
        Compilation::run_consuming(documents, &inventory, &limits.compile, |compilation| {
            // The models are freed and the plan is made: the output's
            // windows come next, on top of whatever the allocator holds.
            crate::allocator::release_free_memory();
            compilation.check()?;
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            let writer = if args.format == Format::JsonStates {
                write_json_states
            } else {
                write_json
            };
            // Large writes: the rendered entries of a state are megabytes.
            let mut findings = Vec::new();
            let streamed = writer(compilation, &select, &mut out).and_then(|endpoints| {
                // Policy-wide findings first (the writer computed them), then
                // each endpoint's.
                findings.extend_from_slice(compilation.policy_diagnostics());
                findings.extend(endpoints);
                writeln!(out)
                    .and_then(|()| out.flush())
                    .map_err(|e| StreamError::Write(e.to_string()))
            });
            if streamed.is_ok() {
                drop(out);
                if !findings.is_empty() {
                    eprint!("{}", render_human_all(&findings, &outcome.sources));
                }
                // The output is written and flushed: the process ends here,
                // without returning through `Compilation::run`. Freeing the
                // loaded models, the lowered rules, the identity table and the
                // compilation one allocation at a time cost ~0.1 s (8 %) of a
                // compile of 65,535 small policies, all on one thread, and the
                // kernel frees the pages at exit anyway.
                std::process::exit(0);
            }
            Ok(streamed)
        });
    match written {
        Ok(Ok(())) => Ok(ExitCode::SUCCESS),
        Ok(Err(StreamError::Compile(error))) | Err(error) => limit_failure(&outcome, error),
        Ok(Err(error)) => Err(error.into()),
    }
}

/// A compile error of `porin compile --format json`: a limit is printed as
/// a JSON array of diagnostics (the load findings, then PC015) on standard
/// output and as one line on standard error, exit 2; any other error is
/// the usual one-line error.
fn limit_failure(
    outcome: &LoadOutcome,
    error: porin_compiler::error::CompileError,
) -> anyhow::Result<ExitCode> {
    if !matches!(error, porin_compiler::error::CompileError::Limit { .. }) {
        return Err(error.into());
    }
    let mut diagnostics = outcome.diagnostics.clone();
    diagnostics.push(crate::limit_flags::limit_diagnostic(&error));
    let mut text = render_json(&diagnostics);
    text.push('\n');
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    eprintln!("porin: error: {error}");
    Ok(ExitCode::from(2))
}

/// The table rendering: per endpoint, its identity and labels as policies
/// select them (`app=frontend`: the `k8s:` source and the labels Cilium
/// derives, namespace, service account, cluster, left out), then one row
/// per entry with the peer named (`default/cartservice`, `world-ipv4`).
/// `names` (the unfiltered compilation, if `compiled` lost endpoints to
/// `--endpoint`) names the peers.
pub fn table(compiled: &Compiled, names: Option<&Compiled>) -> String {
    use std::fmt::Write as _;
    let names = names.unwrap_or(compiled);
    let mut text = String::new();
    for endpoint in &compiled.endpoints {
        let labels: Vec<String> = endpoint
            .labels
            .iter()
            .filter(|l| !l.key.starts_with("io.kubernetes.") && !l.key.starts_with("io.cilium."))
            .map(|l| match l.source.as_str() {
                "k8s" | "unspec" | "any" => format!("{}={}", l.key, l.value),
                source => format!("{source}:{}={}", l.key, l.value),
            })
            .collect();
        let _ = writeln!(
            text,
            "{} (identity {}{}{}) ingress {} egress {}",
            endpoint.display_name(),
            endpoint.identity,
            if labels.is_empty() { "" } else { ", " },
            labels.join(","),
            if endpoint.enforcement.ingress {
                "enforced"
            } else {
                "not enforced"
            },
            if endpoint.enforcement.egress {
                "enforced"
            } else {
                "not enforced"
            },
        );
        let _ = writeln!(
            text,
            "  {:<8} {:>10} {:<24} {:<6} {:>11} {:<8} {:>10} {:>5} {:>4} {:>6}  origins",
            "DIR",
            "IDENTITY",
            "PEER",
            "PROTO",
            "PORTS",
            "VERDICT",
            "PRECEDENCE",
            "PROXY",
            "AUTH",
            "COOKIE"
        );
        for entry in &endpoint.entries() {
            let ports = if entry.proto == "ANY" || entry.port_prefix_len == 0 {
                "*".to_owned()
            } else if entry.port == entry.end_port {
                entry.port.to_string()
            } else {
                format!("{}-{}", entry.port, entry.end_port)
            };
            let origins: Vec<String> = entry
                .origins
                .iter()
                .filter_map(|id| compiled.origin(*id))
                .map(|o| match &o.namespace {
                    Some(ns) => format!("{ns}/{}:{}[{}]", o.name, o.section, o.index),
                    None => format!("{}:{}[{}]", o.name, o.section, o.index),
                })
                .collect();
            let _ = writeln!(
                text,
                "  {:<8} {:>10} {:<24} {:<6} {:>11} {:<8} {:>#10x} {:>5} {:>4} {:>6}  {}",
                entry.direction,
                entry.identity,
                names.identity_name(entry.identity),
                entry.proto,
                ports,
                entry.verdict,
                entry.precedence,
                entry.proxy_port,
                entry.auth_type,
                entry.cookie,
                origins.join(", ")
            );
        }
    }
    text
}
