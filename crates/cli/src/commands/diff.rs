//! `porin diff OLD NEW --inventory FILE_OR_DIR [--format human|json|markdown]`:
//! how connectivity changes between two versions of a policy set.
//!
//! OLD and NEW are files or directories, or `REV:PATH` (a git revision and
//! a path in it, read with `git ls-tree`/`git show` from the current
//! repository). Both are compiled against the same inventory. For every
//! endpoint, direction and peer identity, every port class cut by the keys
//! of both map states is decided in both (exact), and the classes whose
//! verdict changes are listed as "now allowed" / "now denied", merged into
//! port ranges. Each endpoint's own policy decision is compared (an
//! end-to-end flow needs both the sender's egress and the receiver's
//! ingress; `porin graph` shows those). Map entry counts are compared per
//! endpoint.
//!
//! Peers are matched by identity number, except CIDR identities, which are
//! matched by prefix (their numbers depend on the policy set); a prefix
//! present on one side only is decided on the other side with the
//! narrowest identity whose prefix contains it (`world` otherwise).
//!
//! Exit codes: 0 no change, 1 connectivity or entry counts changed, 2 an
//! input could not be read or compiled.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use ipnetwork::IpNetwork;
use porin_compiler::compile::Compiled;
use porin_compiler::identities::IdentityKind;
use porin_compiler::mapstate::Direction;
use porin_compiler::verify::flows::{PortRange, describe, merge, port_classes};
use serde_json::json;

use porin_compiler::limits::Limits;

use porin_model::LoadLimits;
use porin_model::loader::{LoadOutcome, load_paths};

use super::compile::compile_loaded;
use crate::limits::LimitArgs;

/// Output format of `porin diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// Text grouped by endpoint.
    Human,
    /// JSON.
    Json,
    /// Markdown tables (for pull-request comments).
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
    /// Resource limits (each side is loaded and compiled under them).
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// A peer, matched across the two compilations.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Peer {
    Identity(u32),
    Cidr(IpNetwork),
}

/// One changed (direction, peer) of one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    direction: Direction,
    peer: String,
    now_allowed: Vec<PortRange>,
    now_denied: Vec<PortRange>,
}

/// One endpoint's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EndpointDiff {
    name: String,
    old_entries: usize,
    new_entries: usize,
    changes: Vec<Change>,
}

/// Materialises `REV:PATH` from git (run in `repo`) into a temporary
/// directory; returns the path to load and the directory to remove
/// afterwards.
fn from_git(spec: &str, repo: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let Some((rev, path)) = spec.split_once(':') else {
        bail!("`{spec}` is neither an existing path nor REV:PATH");
    };
    let listing = Command::new("git")
        .current_dir(repo)
        .args(["ls-tree", "-r", "--name-only", rev, "--", path])
        .output()
        .context("cannot run git")?;
    if !listing.status.success() {
        bail!(
            "git ls-tree {rev} -- {path}: {}",
            String::from_utf8_lossy(&listing.stderr).trim()
        );
    }
    let safe_rev: String = rev
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let root = std::env::temp_dir().join(format!("porin-diff-{}-{safe_rev}", std::process::id()));
    let files = String::from_utf8_lossy(&listing.stdout).into_owned();
    let mut count = 0;
    for file in files.lines() {
        if !(file.ends_with(".yaml") || file.ends_with(".yml") || file.ends_with(".json")) {
            continue;
        }
        let shown = Command::new("git")
            .current_dir(repo)
            .args(["show", &format!("{rev}:{file}")])
            .output()
            .context("cannot run git")?;
        if !shown.status.success() {
            bail!("git show {rev}:{file} failed");
        }
        let target = root.join(file);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, shown.stdout)?;
        count += 1;
    }
    if count == 0 {
        let _ = std::fs::remove_dir_all(&root);
        bail!("no policy files under `{path}` at `{rev}`");
    }
    Ok((root.join(path), root))
}

/// Loads one side: an existing file or directory, or `REV:PATH` read from
/// the git repository `repo`.
fn load_side(spec: &str, repo: &Path, limits: &LoadLimits) -> anyhow::Result<LoadOutcome> {
    if Path::new(spec).exists() {
        return load_paths(&[PathBuf::from(spec)], limits).context("cannot load policies");
    }
    let (path, root) = from_git(spec, repo)?;
    let loaded = load_paths(&[path], limits).context("cannot load policies");
    let _ = std::fs::remove_dir_all(root);
    loaded
}

/// Loads and compiles one side.
fn compile_side(spec: &str, inventory: &Path, limits: &Limits) -> anyhow::Result<Option<Compiled>> {
    let outcome = load_side(spec, Path::new("."), &limits.load)?;
    Ok(compile_loaded(outcome, inventory, limits)?
        .ok()
        .map(|(compiled, _)| compiled))
}

fn peers(compiled: &Compiled) -> BTreeMap<Peer, u32> {
    compiled
        .identities
        .iter()
        .map(|info| match &info.kind {
            IdentityKind::Cidr { prefix } => (Peer::Cidr(*prefix), info.id),
            _ => (Peer::Identity(info.id), info.id),
        })
        .collect()
}

/// The identity of a peer in a compilation that may lack it.
fn identity_in(compiled: &Compiled, table: &BTreeMap<Peer, u32>, peer: &Peer) -> u32 {
    if let Some(id) = table.get(peer) {
        return *id;
    }
    match peer {
        Peer::Identity(id) => *id,
        Peer::Cidr(prefix) => compiled
            .ipcache
            .iter()
            .filter(|e| e.prefix.prefix() <= prefix.prefix() && e.prefix.contains(prefix.network()))
            .max_by_key(|e| e.prefix.prefix())
            .map_or(2, |e| e.identity),
    }
}

fn peer_name(compiled: &Compiled, peer: &Peer, id: u32) -> String {
    if let Peer::Cidr(prefix) = peer {
        return format!("cidr {prefix}");
    }
    let info = compiled.identities.iter().find(|i| i.id == id);
    match info.map(|i| &i.kind) {
        Some(IdentityKind::Reserved { name })
        | Some(IdentityKind::ReservedEndpoints { name, .. }) => {
            format!("reserved:{name}")
        }
        Some(IdentityKind::Endpoints { endpoints }) => {
            let names: Vec<String> = compiled
                .endpoints
                .iter()
                .filter(|e| e.identity == id)
                .map(|e| e.display_name())
                .collect();
            match names.len() {
                0 => format!("identity {id} ({} endpoints)", endpoints.len()),
                1..=3 => names.join(", "),
                n => format!("{} and {} more", names[..3].join(", "), n - 3),
            }
        }
        _ => format!("identity {id}"),
    }
}

fn diff(old: &Compiled, new: &Compiled) -> Vec<EndpointDiff> {
    let old_peers = peers(old);
    let new_peers = peers(new);
    let mut all: Vec<Peer> = old_peers.keys().chain(new_peers.keys()).cloned().collect();
    all.sort();
    all.dedup();
    let mut out = Vec::new();
    for endpoint in &new.endpoints {
        let Some(before) = old
            .endpoints
            .iter()
            .find(|e| e.display_name() == endpoint.display_name())
        else {
            continue;
        };
        let mut changes = Vec::new();
        for direction in Direction::ALL {
            let classes = port_classes(&[(&before.state, direction), (&endpoint.state, direction)]);
            for peer in &all {
                let id_old = identity_in(old, &old_peers, peer);
                let id_new = identity_in(new, &new_peers, peer);
                let (Ok(a), Ok(b)) = (
                    porin_compiler::identity::Identity::new(id_old),
                    porin_compiler::identity::Identity::new(id_new),
                ) else {
                    continue;
                };
                let mut allowed = Vec::new();
                let mut denied = Vec::new();
                for &(p, lo, hi) in &classes {
                    let was = before
                        .state
                        .lookup(direction, a, p, lo)
                        .verdict
                        .is_allowed();
                    let is = endpoint
                        .state
                        .lookup(direction, b, p, lo)
                        .verdict
                        .is_allowed();
                    if !was && is {
                        allowed.push((p, lo, hi));
                    } else if was && !is {
                        denied.push((p, lo, hi));
                    }
                }
                if allowed.is_empty() && denied.is_empty() {
                    continue;
                }
                changes.push(Change {
                    direction,
                    peer: peer_name(new, peer, id_new),
                    now_allowed: merge(allowed),
                    now_denied: merge(denied),
                });
            }
        }
        if changes.is_empty() && before.state.len() == endpoint.state.len() {
            continue;
        }
        out.push(EndpointDiff {
            name: endpoint.display_name(),
            old_entries: before.state.len(),
            new_entries: endpoint.state.len(),
            changes,
        });
    }
    out
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
    let Some(old) = compile_side(&args.old, &args.inventory, &limits)? else {
        return Ok(ExitCode::from(2));
    };
    let Some(new) = compile_side(&args.new, &args.inventory, &limits)? else {
        return Ok(ExitCode::from(2));
    };
    let diffs = diff(&old, &new);
    let text = match args.format {
        DiffFormat::Human => human(&diffs),
        DiffFormat::Json => to_json(&diffs),
        DiffFormat::Markdown => markdown(&diffs),
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    Ok(if diffs.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
