//! `porin diff OLD NEW --inventory FILE_OR_DIR [--format human|json|markdown]
//! [--per-direction]`: how connectivity changes between two versions of a
//! policy set.
//!
//! OLD and NEW are files or directories, or `REV:PATH` (a git revision and
//! a path in it, read into memory with `git ls-tree`/`git cat-file` from
//! the current repository; diagnostics name `REV:path`). Both are compiled
//! against the same inventory.
//!
//! The default view is effective connectivity
//! ([`porin_connectivity::connections`]): a connection passes when the
//! source's egress and the destination's ingress both allow it, so only
//! the workload-to-workload (and workload-to-world, -CIDR, -entity) edges
//! that really change are listed, external peers that change alike
//! collapsed into one class row, opened before closed, each with its ports
//! before → after and the rule items (policy, file, line) that made it
//! change, after a one-line summary and the policies added or removed.
//!
//! `--per-direction` shows each endpoint's own policy decision instead,
//! per direction and peer identity, "now allowed" / "now denied", with map
//! entry counts ([`porin_connectivity::change::diff`]).
//!
//! Both views are exact: every port class cut by the keys of the map
//! states involved is decided in both compilations. CIDR identities are
//! matched by prefix (their numbers depend on the policy set); a prefix
//! present on one side only is decided on the other side with the
//! narrowest identity whose prefix contains it (`world` otherwise).
//!
//! `--flows FILE` (Hubble flow exports, as `porin replay` reads them)
//! weighs the connection changes by the recorded traffic they change:
//! each connection says how many observed flows it closes or opens, the
//! busiest first, and the summary says `closes 3 edges carrying 12,408
//! flows in the recording` (see [`super::flows_weight`]).
//!
//! Exit codes: 0 no change, 1 connectivity changed (per direction: or map
//! entry counts), 2 an input could not be read or compiled.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use porin_compiler::compile::Compiled;
use porin_compiler::mapstate::Direction;
use porin_connectivity::change::{EndpointDiff, diff};
use porin_connectivity::connections::{
    Cause, Connection, ConnectivityDiff, Effect, Node, NodeKind, PolicyRef, Side,
    connectivity_diff, describe_ports,
};
use porin_connectivity::flows::{PortRange, describe};
use serde_json::json;

use porin_compiler::limits::Limits;

use porin_model::LoadLimits;
use porin_model::loader::{LoadError, LoadOutcome, load_paths, load_reader};

use super::compile::compile_loaded_before_upgrade;
use super::flows_weight::Weight;
use crate::limit_flags::LimitArgs;
use crate::target_flags::TargetArgs;
use porin_model::version::{CiliumVersion, TargetChoice};

/// Output format of `porin diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// Text: the summary line, then one block per changed connection
    /// (per endpoint with --per-direction).
    Human,
    /// JSON (`summary`, `policiesAdded`, `policiesRemoved`, `connections`).
    Json,
    /// A Markdown table (for pull-request comments).
    Markdown,
}

/// Arguments of `porin diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The old policies: a file, a directory, or `REV:PATH`.
    pub old: String,
    /// The new policies: a file, a directory, or `REV:PATH`.
    pub new: String,
    /// Inventory (porin inventory, Kubernetes manifests or a Cilium dump).
    #[arg(long)]
    pub inventory: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Human)]
    pub format: DiffFormat,
    /// Show each endpoint's own policy decision per direction and peer
    /// (with map entry counts) instead of end-to-end connections.
    #[arg(long)]
    pub per_direction: bool,
    /// Weigh the changes by recorded traffic: a Hubble flow file (`hubble
    /// observe -o json` or `-o jsonpb`); repeat for more files.
    #[arg(long = "flows", value_name = "FILE")]
    pub flows: Vec<PathBuf>,
    /// The Cilium of the old side (`--cilium-version`), and of the new side
    /// unless `--to-cilium-version` is given.
    #[command(flatten)]
    pub target: TargetArgs,
    /// The Cilium version of the new side (default: `--cilium-version`):
    /// with the same policies on both sides, the connectivity an upgrade
    /// changes.
    #[arg(long, value_name = "VERSION", value_parser = CiliumVersion::parse_modelled)]
    pub to_cilium_version: Option<CiliumVersion>,
    /// Resource limits (each side is loaded and compiled under them).
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Runs git in `repo` and returns its standard output.
fn git(repo: &Path, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let output = Command::new("git")
        .current_dir(repo)
        .args(args)
        .output()
        .context("cannot run git")?;
    if !output.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output.stdout)
}

/// One blob of the revision (`size` bytes as `git ls-tree -l` says):
/// `git cat-file blob` piped into the loader, which reads at most
/// `max_file_bytes` + 1 of it like of a file; named `REV:path`.
fn load_blob(
    repo: &Path,
    object: &str,
    size: u64,
    name: &str,
    limits: &LoadLimits,
) -> anyhow::Result<LoadOutcome> {
    let mut child = Command::new("git")
        .current_dir(repo)
        .args(["cat-file", "blob", object])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run git")?;
    let Some(stdout) = child.stdout.take() else {
        bail!("git cat-file blob {object}: no output");
    };
    let loaded = load_reader(name, stdout, limits);
    if size > limits.max_file_bytes {
        // Not read to its end (the loader reported PM002): stop git.
        let _ = child.kill();
        let _ = child.wait();
    } else if !child.wait().context("cannot run git")?.success() {
        bail!("git cat-file blob {object} ({name}) failed");
    }
    Ok(loaded?)
}

/// Reads the policy files of `REV:PATH` from git in `repo` straight into
/// memory (`git ls-tree`, `git cat-file`): nothing is written to disk, so
/// nothing another local user planted in a temporary directory is loaded,
/// and no link is followed. Diagnostics name `REV:path/file.yaml` with the
/// blob's lines. The limits of a directory load apply (file count, bytes
/// per file and in total). Symbolic links and submodules in the tree are
/// skipped, with a note.
fn load_git(spec: &str, repo: &Path, limits: &LoadLimits) -> anyhow::Result<LoadOutcome> {
    let Some((rev, path)) = spec.split_once(':') else {
        bail!("`{spec}` is neither an existing path nor REV:PATH");
    };
    if rev.starts_with('-') {
        bail!("`{rev}` is not a git revision");
    }
    // `<mode> <type> <object> <size>\t<path>\0` per entry.
    let listing = git(repo, &["ls-tree", "-r", "-l", "-z", rev, "--", path])?;
    let mut outcome = LoadOutcome::default();
    let (mut files, mut total) = (0usize, 0u64);
    for entry in listing.split(|&b| b == 0).filter(|e| !e.is_empty()) {
        let text = String::from_utf8_lossy(entry);
        let Some((meta, file)) = text.split_once('\t') else {
            bail!("git ls-tree {rev}: unexpected output `{text}`");
        };
        if ![".yaml", ".yml", ".json"].iter().any(|e| file.ends_with(e)) {
            continue;
        }
        let name = format!("{rev}:{file}");
        let fields: Vec<&str> = meta.split_whitespace().collect();
        let [mode, kind, object, size] = fields[..] else {
            bail!("git ls-tree {rev}: unexpected output `{text}`");
        };
        if kind != "blob" || !matches!(mode, "100644" | "100755") {
            eprintln!("note: `{name}` is not a regular file in git (mode {mode}); skipped");
            continue;
        }
        files += 1;
        if files > limits.max_files {
            return Err(LoadError::TooManyFiles {
                limit: limits.max_files,
            }
            .into());
        }
        let Ok(size) = size.parse::<u64>() else {
            bail!("git ls-tree {rev}: unexpected size in `{text}`");
        };
        if size <= limits.max_file_bytes {
            total = total.saturating_add(size);
            if total > limits.max_total_bytes {
                return Err(LoadError::TooMuchInput {
                    path: PathBuf::from(name),
                    limit: limits.max_total_bytes,
                }
                .into());
            }
        }
        outcome.merge(load_blob(repo, object, size, &name, limits)?);
    }
    if files == 0 {
        bail!("no policy files under `{path}` at `{rev}`");
    }
    Ok(outcome)
}

/// Loads one side: an existing file or directory, or `REV:PATH` read from
/// the git repository `repo`.
fn load_side(spec: &str, repo: &Path, limits: &LoadLimits) -> anyhow::Result<LoadOutcome> {
    if Path::new(spec).exists() {
        return load_paths(&[PathBuf::from(spec)], limits).context("cannot load policies");
    }
    load_git(spec, repo, limits)
}

/// Loads and compiles one side.
fn compile_side(
    spec: &str,
    inventory: &Path,
    limits: &Limits,
    target: &TargetChoice,
    upgrade_to: Option<CiliumVersion>,
) -> anyhow::Result<Option<Compiled>> {
    let outcome = load_side(spec, Path::new("."), &limits.load)?;
    Ok(
        compile_loaded_before_upgrade(outcome, inventory, limits, target, upgrade_to)?
            .ok()
            .map(|(compiled, _)| compiled),
    )
}

fn word(direction: Direction) -> &'static str {
    match direction {
        Direction::Ingress => "from",
        Direction::Egress => "to",
    }
}

fn human(diffs: &[EndpointDiff]) -> String {
    use std::fmt::Write as _;
    if diffs.is_empty() {
        return "no connectivity change\n".to_owned();
    }
    let mut text = String::new();
    for d in diffs {
        let delta = d.new_entries as i64 - d.old_entries as i64;
        let _ = writeln!(
            text,
            "{}: map entries {} -> {} ({delta:+})",
            d.name, d.old_entries, d.new_entries
        );
        for c in &d.changes {
            if !c.now_allowed.is_empty() {
                let _ = writeln!(
                    text,
                    "  + {} {} {}: now allowed {}",
                    c.direction,
                    word(c.direction),
                    c.peer,
                    describe(&c.now_allowed)
                );
            }
            if !c.now_denied.is_empty() {
                let _ = writeln!(
                    text,
                    "  - {} {} {}: now denied {}",
                    c.direction,
                    word(c.direction),
                    c.peer,
                    describe(&c.now_denied)
                );
            }
        }
    }
    text
}

fn markdown(diffs: &[EndpointDiff]) -> String {
    use std::fmt::Write as _;
    if diffs.is_empty() {
        return "No connectivity change.\n".to_owned();
    }
    let cell = |s: &str| s.replace('|', "\\|");
    let mut text = String::from("## porin diff\n\n");
    for d in diffs {
        let _ = writeln!(
            text,
            "### `{}`\n\nMap entries: {} → {}\n",
            d.name, d.old_entries, d.new_entries
        );
        if d.changes.is_empty() {
            continue;
        }
        text.push_str("| direction | peer | now allowed | now denied |\n|---|---|---|---|\n");
        for c in &d.changes {
            let _ = writeln!(
                text,
                "| {} | {} | {} | {} |",
                c.direction,
                cell(&c.peer),
                cell(&describe(&c.now_allowed)),
                cell(&describe(&c.now_denied))
            );
        }
        text.push('\n');
    }
    text
}

/// The sentence of one cause: `CiliumNetworkPolicy default/web
/// spec.egress[1] (web.yaml:20) allowed it (rule removed)`.
fn cause_text(cause: &Cause) -> String {
    let what = match (cause.side, cause.effect) {
        (Side::Old, Effect::Allows) => "allowed it".to_owned(),
        (Side::New, Effect::Allows) => "allows it".to_owned(),
        (Side::Old, Effect::Denies) => "denied it".to_owned(),
        (Side::New, Effect::Denies) => "denies it".to_owned(),
        (Side::Old, Effect::DefaultDeny) => {
            format!("put {} in default deny", cause.check)
        }
        (Side::New, Effect::DefaultDeny) => {
            format!("puts {} in default deny", cause.check)
        }
        (Side::Old, Effect::Proxies) => "sent it through the L7 proxy".to_owned(),
        (Side::New, Effect::Proxies) => "sends it through the L7 proxy".to_owned(),
    };
    format!(
        "{} {what} ({})",
        cause.origin.describe(),
        cause.change.words()
    )
}

/// `TCP/80 → TCP/80 via the L7 proxy`: the ports before and after, and
/// which of them go through the proxy.
fn ports_text(c: &Connection) -> String {
    let side = |all: &[PortRange], l7: &[PortRange]| {
        if l7.is_empty() {
            describe_ports(all)
        } else if l7 == all {
            format!("{} via the L7 proxy", describe_ports(all))
        } else {
            format!(
                "{} ({} via the L7 proxy)",
                describe_ports(all),
                describe_ports(l7)
            )
        }
    };
    format!(
        "{} → {}",
        side(&c.before, &c.before_l7),
        side(&c.after, &c.after_l7)
    )
}

fn notice(policy: &PolicyRef, what: &str) -> String {
    format!("policy {what}: {} ({})", policy.describe(), policy.file)
}

fn human_connections(d: &ConnectivityDiff, weight: Option<&Weight>) -> String {
    use std::fmt::Write as _;
    let mut text = format!("{}\n", d.summary());
    if let Some(w) = weight {
        let _ = writeln!(text, "{}", w.summary);
    }
    for p in &d.policies_added {
        let _ = writeln!(text, "{}", notice(p, "added"));
    }
    for p in &d.policies_removed {
        let _ = writeln!(text, "{}", notice(p, "removed"));
    }
    for c in &d.connections {
        let _ = writeln!(
            text,
            "\n{:<7} {} → {}: {}",
            c.change.word(),
            c.from.name,
            c.to.name,
            ports_text(c)
        );
        if let Some(observed) = weight.and_then(|w| w.of(c)) {
            let _ = writeln!(text, "        {observed}");
        }
        for cause in &c.causes {
            let _ = writeln!(text, "        because {}", cause_text(cause));
        }
    }
    text
}

fn markdown_connections(d: &ConnectivityDiff, weight: Option<&Weight>) -> String {
    use std::fmt::Write as _;
    let cell = |s: &str| s.replace('|', "\\|");
    let node = |n: &Node| match n.kind {
        NodeKind::Workload => format!("`{}`", n.name),
        NodeKind::External => cell(&n.name),
    };
    let mut text = format!("**porin diff**: {}\n", d.summary());
    if let Some(w) = weight {
        let _ = writeln!(text, "\n{}", w.summary);
    }
    for (list, what) in [
        (&d.policies_added, "added"),
        (&d.policies_removed, "removed"),
    ] {
        for p in list {
            let _ = write!(
                text,
                "\n- policy {what}: {} `{}` (`{}`)",
                p.kind,
                cell(&p.describe()[p.kind.name().len() + 1..]),
                cell(&p.file)
            );
        }
    }
    if !d.policies_added.is_empty() || !d.policies_removed.is_empty() {
        text.push('\n');
    }
    if d.connections.is_empty() {
        return text;
    }
    let observed_column = if weight.is_some() {
        " observed flows |"
    } else {
        ""
    };
    let observed_rule = if weight.is_some() { "---:|" } else { "" };
    let _ = write!(
        text,
        "\n| change | from | to | ports (before → after) |{observed_column} caused by |\n|---|---|---|---|{observed_rule}---|\n",
    );
    for c in &d.connections {
        let causes: Vec<String> = c.causes.iter().map(|k| cell(&cause_text(k))).collect();
        let observed = match weight {
            Some(w) => format!(" {} |", w.flows_of(c)),
            None => String::new(),
        };
        let _ = writeln!(
            text,
            "| **{}** | {} | {} | {} |{observed} {} |",
            c.change.word(),
            node(&c.from),
            node(&c.to),
            cell(&ports_text(c)),
            causes.join("<br>")
        );
    }
    text
}

fn json_connections(d: &ConnectivityDiff, weight: Option<&Weight>) -> String {
    let ranges = |r: &[PortRange]| -> Vec<serde_json::Value> {
        r.iter()
            .map(|(p, lo, hi)| {
                json!({
                    "protocol": porin_compiler::resolve::rule::proto::static_name(*p),
                    "port": lo,
                    "endPort": hi,
                })
            })
            .collect()
    };
    let node = |n: &Node| {
        json!({
            "kind": match n.kind { NodeKind::Workload => "workload", NodeKind::External => "external" },
            "name": n.name,
            "members": n.members,
            "identity": n.identity,
        })
    };
    let policy = |p: &PolicyRef| json!({"kind": p.kind.name(), "namespace": p.namespace, "name": p.name, "file": p.file});
    let mut value = json!({
        "summary": {
            "text": d.summary(),
            "opened": d.count(porin_connectivity::connections::ChangeKind::Opened),
            "changed": d.count(porin_connectivity::connections::ChangeKind::Changed),
            "closed": d.count(porin_connectivity::connections::ChangeKind::Closed),
        },
        "policiesAdded": d.policies_added.iter().map(policy).collect::<Vec<_>>(),
        "policiesRemoved": d.policies_removed.iter().map(policy).collect::<Vec<_>>(),
        "connections": d.connections.iter().map(|c| json!({
            "change": c.change.word(),
            "from": node(&c.from),
            "to": node(&c.to),
            "before": ranges(&c.before),
            "after": ranges(&c.after),
            "beforeL7": ranges(&c.before_l7),
            "afterL7": ranges(&c.after_l7),
            "ports": ports_text(c),
            "causes": c.causes.iter().map(|k| json!({
                "policy": {
                    "kind": k.origin.kind.name(),
                    "namespace": k.origin.namespace,
                    "name": k.origin.name,
                },
                "route": k.origin.route,
                "file": k.origin.file,
                "line": k.origin.line,
                "side": match k.side { Side::Old => "old", Side::New => "new" },
                "check": k.check,
                "change": k.change.words(),
                "text": cause_text(k),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    if let Some(w) = weight {
        value["observed"] = w.summary_json();
        if let Some(list) = value["connections"].as_array_mut() {
            for (c, v) in d.connections.iter().zip(list) {
                v["observedFlows"] = json!(w.flows_of(c));
            }
        }
    }
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}

fn to_json(diffs: &[EndpointDiff]) -> String {
    let ranges = |r: &[PortRange]| -> Vec<serde_json::Value> {
        r.iter()
            .map(|(p, lo, hi)| json!({"protocol": p, "port": lo, "endPort": hi}))
            .collect()
    };
    let value: Vec<serde_json::Value> = diffs
        .iter()
        .map(|d| {
            json!({
                "endpoint": d.name,
                "oldEntries": d.old_entries,
                "newEntries": d.new_entries,
                "changes": d.changes.iter().map(|c| json!({
                    "direction": c.direction.to_string(),
                    "peer": c.peer,
                    "nowAllowed": ranges(&c.now_allowed),
                    "nowDenied": ranges(&c.now_denied),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "[]".to_owned());
    text.push('\n');
    text
}

/// Runs `porin diff`.
pub fn run(args: &DiffArgs) -> anyhow::Result<ExitCode> {
    let limits = args.limits.limits();
    // Each side loads the inventory; standard input would be empty the second time.
    if args.inventory.as_os_str() == "-" {
        anyhow::bail!(
            "porin diff reads the inventory once per side: give a file or directory, not `-`"
        );
    }
    // Both sides resolve the target the same way (flags, the inventory,
    // `.porin.yaml`); --to-cilium-version replaces the version of the new
    // side only, above everything else.
    let old_target = args.target.choice();
    let new_target = TargetChoice {
        version: args.to_cilium_version.or(old_target.version),
        ..old_target
    };
    // The old side of an upgrade runs without the ClusterNetworkPolicies
    // only the new version enforces (PM067), as the cluster does.
    let Some(old) = compile_side(
        &args.old,
        &args.inventory,
        &limits,
        &old_target,
        args.to_cilium_version,
    )?
    else {
        return Ok(ExitCode::from(2));
    };
    let Some(new) = compile_side(&args.new, &args.inventory, &limits, &new_target, None)? else {
        return Ok(ExitCode::from(2));
    };
    if args.per_direction && !args.flows.is_empty() {
        anyhow::bail!("--flows weighs the connection view: drop --per-direction");
    }
    let (text, unchanged) = if args.per_direction {
        let diffs = diff(&old, &new);
        let text = match args.format {
            DiffFormat::Human => human(&diffs),
            DiffFormat::Json => to_json(&diffs),
            DiffFormat::Markdown => markdown(&diffs),
        };
        (text, diffs.is_empty())
    } else {
        let mut d = connectivity_diff(&old, &new);
        let weight = if args.flows.is_empty() {
            None
        } else {
            Some(super::flows_weight::weigh(&args.flows, &old, &new, &mut d)?)
        };
        let text = match args.format {
            DiffFormat::Human => human_connections(&d, weight.as_ref()),
            DiffFormat::Json => json_connections(&d, weight.as_ref()),
            DiffFormat::Markdown => markdown_connections(&d, weight.as_ref()),
        };
        (text, d.is_empty())
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    Ok(if unchanged {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// A scratch git repository with `policies/web.yaml` (valid) and
    /// `policies/sub/bad.yaml` (an unquoted port on line 10) committed.
    fn scratch_repository(test: &str) -> PathBuf {
        let repo =
            std::env::temp_dir().join(format!("porin-diff-test-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&repo);
        std::fs::create_dir_all(repo.join("policies/sub")).expect("scratch directory");
        std::fs::write(repo.join("policies/web.yaml"), policy("web", "\"80\""))
            .expect("write web.yaml");
        std::fs::write(repo.join("policies/sub/bad.yaml"), policy("bad", "8080"))
            .expect("write bad.yaml");
        for args in [
            &["init", "-q"][..],
            &["add", "."],
            &[
                "-c",
                "user.name=porin",
                "-c",
                "user.email=porin@example.invalid",
                "commit",
                "-q",
                "-m",
                "policies",
            ],
        ] {
            let status = Command::new("git")
                .current_dir(&repo)
                .args(args)
                .status()
                .expect("git runs");
            assert!(status.success(), "git {args:?}");
        }
        repo
    }

    fn policy(name: &str, port: &str) -> String {
        format!(
            "apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {{name: {name}, namespace: default}}
spec:
  endpointSelector: {{matchLabels: {{app: {name}}}}}
  ingress:
  - fromEntities: [world]
    toPorts:
    - ports:
      - port: {port}
        protocol: TCP
"
        )
    }

    fn names(outcome: &LoadOutcome) -> Vec<String> {
        outcome
            .documents
            .iter()
            .map(|d| format!("{} {}", d.file, d.doc.name()))
            .collect()
    }

    /// The directory the old implementation wrote `HEAD` of this process
    /// into, predictable to any local user.
    fn predictable_root() -> PathBuf {
        std::env::temp_dir().join(format!("porin-diff-{}-HEAD", std::process::id()))
    }

    #[test]
    fn a_revision_is_read_from_git_not_from_a_temporary_directory() {
        let repo = scratch_repository("planted");
        let limits = LoadLimits::default();

        // 1. A policy planted where the old code wrote the revision.
        let root = predictable_root();
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("policies")).expect("plant");
        std::fs::write(
            root.join("policies/planted.yaml"),
            policy("planted", "\"22\""),
        )
        .expect("plant");
        let outcome = load_side("HEAD:policies", &repo, &limits).expect("loads");
        assert_eq!(
            names(&outcome),
            ["HEAD:policies/web.yaml web"],
            "{:#?}",
            outcome.diagnostics
        );
        let _ = std::fs::remove_dir_all(&root);

        // 2. A symbolic link planted there: nothing is written through it
        // and nothing is read from where it points.
        let elsewhere = repo.with_extension("elsewhere");
        let _ = std::fs::remove_dir_all(&elsewhere);
        std::fs::create_dir_all(elsewhere.join("policies")).expect("target");
        std::fs::write(
            elsewhere.join("policies/planted.yaml"),
            policy("planted", "\"22\""),
        )
        .expect("plant");
        std::os::unix::fs::symlink(&elsewhere, &root).expect("symlink");
        let outcome = load_side("HEAD:policies", &repo, &limits).expect("loads");
        assert_eq!(names(&outcome), ["HEAD:policies/web.yaml web"]);
        let written: Vec<_> = std::fs::read_dir(elsewhere.join("policies"))
            .expect("target")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(written, ["planted.yaml"], "porin wrote through the link");
        assert!(!elsewhere.join("policies/web.yaml").exists());
        let _ = std::fs::remove_file(&root);
        let _ = std::fs::remove_dir_all(&elsewhere);
        let _ = std::fs::remove_dir_all(&repo);
    }

    #[test]
    fn diagnostics_of_a_revision_name_rev_and_path() {
        let repo = scratch_repository("located");
        let outcome = load_side("HEAD:policies", &repo, &LoadLimits::default()).expect("loads");
        let error = outcome
            .diagnostics
            .iter()
            .find(|d| d.is_error())
            .expect("bad.yaml has an error");
        let at = error.primary.as_ref().expect("located");
        assert_eq!(
            (at.file.as_str(), at.line, at.column),
            ("HEAD:policies/sub/bad.yaml", 10, 15),
            "{error:#?}"
        );
        // The renderer quotes the line from the blob's text.
        let rendered = porin_model::diagnostic::render_human(error, &outcome.sources);
        assert!(rendered.contains("10 |       - port: 8080"), "{rendered}");
        let _ = std::fs::remove_dir_all(&repo);
    }
}
