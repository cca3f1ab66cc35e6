//! `porin-bench scale` (issue #14): the release `porin` binary, run as a user runs it, on
//! generated GitOps repositories ([`crate::gitops`]), each run a fresh child process measured by
//! [`crate::child`] (wall time, `ru_maxrss`, a wall-time limit).
//!
//! Every figure stands beside its baseline from the same run:
//!
//! - `porin lint policies --inventory inventory --format json` with every rule on (default
//!   limits), beside the same lint with the shadowing rules PR004, PR005 and PR017 off through a
//!   `--config` file, and beside itself on one thread (`RAYON_NUM_THREADS=1` vs `2`);
//! - `porin compile policies --inventory inventory --format json > /dev/null`, 1 vs 2 threads;
//! - 65,535 CIDR rules (`synthetic::cidr_cluster` on disk): `porin compile` with default limits
//!   beside raised compile limits;
//! - Cilium's own benchmark shape (one endpoint, N rules, M identities) beside the figure the
//!   Cilium PR measured;
//! - a one-rule change and an identity add/remove through the session's Rust API
//!   ([`crate::incremental`]) with the incremental API's slot beside it.
//!
//! A size whose run did not finish (time limit, or killed) is not tried at the next larger size
//! for the same operation; a refusal (exit 2, e.g. a resource limit) is fast and reported as it
//! is, and the next size is still tried.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::child::{self, Outcome, Run};
use crate::gitops::{self, ClusterSpec, Identities, PolicyKind};
use crate::incremental::{IncrementalResult, Step};
use crate::stats::{Spread, group};

/// Parameters of `porin-bench scale`.
#[derive(Debug, Clone)]
pub struct ScaleConfig {
    /// The `porin` binary.
    pub porin: PathBuf,
    /// Where the repositories are generated (one at a time, removed after use unless `keep`).
    pub workdir: PathBuf,
    /// Keep the generated repositories.
    pub keep: bool,
    /// Wall-time limit per run.
    pub timeout: Duration,
    /// Address-space limit per run.
    pub memory_limit: u64,
    /// (policies, pods).
    pub sizes: Vec<(usize, usize)>,
    /// Identity modes.
    pub modes: Vec<Identities>,
    /// CIDR rule counts.
    pub cidr_rules: Vec<usize>,
    /// Cilium benchmark shapes: (rules, identities, label).
    pub cilium_shapes: Vec<(usize, usize, &'static str)>,
    /// Rules of the incremental benchmark's policy (0: skip).
    pub incremental_rules: usize,
    /// Runs of each incremental step.
    pub incremental_runs: usize,
    /// Generator seed.
    pub seed: u64,
}

/// The default sizes of issue #14: (policies, pods) = (100, 1,000), (1,000, 10,000),
/// (3,000, 30,000).
pub const SIZES: [(usize, usize); 3] = [(100, 1_000), (1_000, 10_000), (3_000, 30_000)];

/// One measured `porin` run with what it printed.
#[derive(Debug, Clone)]
pub struct PorinRun {
    /// The measurement.
    pub run: Run,
    /// First line of stderr (the reason of an exit 2).
    pub error: String,
    /// Findings by code (lint runs).
    pub findings: BTreeMap<String, usize>,
    /// FNV-1a of the lint's JSON output (equal digests: identical findings).
    pub digest: Option<u64>,
}

/// A cell: measured, or why not.
#[derive(Debug, Clone)]
pub enum Cell {
    /// Ran (or was cut off).
    Measured(PorinRun),
    /// Not run.
    Skipped(String),
}

impl Cell {
    fn finished(&self) -> Option<&PorinRun> {
        match self {
            Cell::Measured(r)
                if !matches!(r.run.outcome, Outcome::TimedOut | Outcome::Signalled(_)) =>
            {
                Some(r)
            }
            _ => None,
        }
    }

    /// Wall seconds of a run that exited 0 or 1.
    fn secs(&self) -> Option<f64> {
        self.finished()
            .filter(|r| r.run.ran())
            .map(|r| r.run.wall_secs)
    }

    fn mib(&self) -> Option<f64> {
        self.finished()
            .filter(|r| r.run.ran())
            .map(|r| r.run.max_rss_kib as f64 / 1024.0)
    }

    /// `1.23 s, 45.6 MiB`, or the reason it has no figure (the full error as a note).
    pub fn show(&self, notes: &mut Notes) -> String {
        match self {
            Cell::Skipped(reason) => reason.clone(),
            Cell::Measured(r) => {
                let figures = format!(
                    "{} s, {} MiB",
                    group(r.run.wall_secs, 2),
                    group(r.run.max_rss_kib as f64 / 1024.0, 0)
                );
                match r.run.outcome {
                    Outcome::Exited(0 | 1) => figures,
                    Outcome::TimedOut => {
                        format!("did not finish in {:.0} s", r.run.limit_secs)
                    }
                    Outcome::Exited(2) => {
                        format!("exit 2 after {figures} {}", notes.mark(&r.error))
                    }
                    _ => format!("{} after {figures} {}", r.run.note(), notes.mark(&r.error)),
                }
            }
        }
    }
}

/// Footnotes of a table: the full error of each refused run, numbered once per distinct text.
#[derive(Debug, Default)]
pub struct Notes(Vec<String>);

impl Notes {
    /// The marker of `text` (`[n]`), adding it when new.
    pub fn mark(&mut self, text: &str) -> String {
        let index = match self.0.iter().position(|t| t == text) {
            Some(i) => i,
            None => {
                self.0.push(text.to_owned());
                self.0.len() - 1
            }
        };
        format!("[{}]", index + 1)
    }

    /// The notes as Markdown lines (empty when none), clearing them for the next table.
    pub fn render(&mut self) -> String {
        let mut out = String::new();
        for (i, text) in self.0.drain(..).enumerate() {
            let _ = writeln!(out, "\n[{}]: `{text}`", i + 1);
        }
        out
    }
}

/// FNV-1a, 64 bits: a stable digest of an output file (not a security property).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Counts the `"code"` fields of every object in a lint's JSON output.
pub fn count_codes(json: &serde_json::Value, counts: &mut BTreeMap<String, usize>) {
    match json {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(code)) = map.get("code") {
                *counts.entry(code.clone()).or_default() += 1;
            }
            for value in map.values() {
                count_codes(value, counts);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                count_codes(item, counts);
            }
        }
        _ => {}
    }
}

/// Runs `porin ARGS` in `cwd` with `threads` rayon threads (None: the environment's).
pub fn run_porin(
    config: &ScaleConfig,
    cwd: &Path,
    args: &[&str],
    threads: Option<usize>,
    lint_output: bool,
) -> Result<PorinRun> {
    let out = cwd.join("porin-bench.stdout");
    let err = cwd.join("porin-bench.stderr");
    let env = threads
        .map(|n| vec![("RAYON_NUM_THREADS".to_owned(), n.to_string())])
        .unwrap_or_default();
    eprintln!(
        "scale: porin {} (threads {}) in {}",
        args.join(" "),
        threads.map_or_else(|| "default".to_owned(), |n| n.to_string()),
        cwd.display()
    );
    let run = child::run(&child::Spec {
        program: &config.porin,
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        env,
        cwd,
        stdout: lint_output.then_some(out.as_path()),
        stderr: Some(&err),
        timeout: config.timeout,
        memory_limit: Some(config.memory_limit),
    })?;
    let error = std::fs::read_to_string(&err)
        .unwrap_or_default()
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .chars()
        .take(400)
        .collect::<String>();
    let mut findings = BTreeMap::new();
    let mut digest = None;
    if lint_output && run.ran() {
        let bytes = std::fs::read(&out).unwrap_or_default();
        digest = Some(fnv1a(&bytes));
        if let Ok(json) = serde_json::from_slice::<serde_json::Value>(&bytes) {
            count_codes(&json, &mut findings);
        }
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&err);
    Ok(PorinRun {
        run,
        error: error.replace('|', "\\|").replace('`', "'"),
        findings,
        digest,
    })
}

/// The lint configuration that turns the shadowing rules off.
pub const SHADOW_OFF: &str = "rules:\n  PR004: off\n  PR005: off\n  PR017: off\n";

/// The cells of one cluster size.
#[derive(Debug, Clone)]
pub struct SizeRow {
    /// What was generated.
    pub generated: gitops::Generated,
    /// Lint, every rule, 2 threads.
    pub lint: Cell,
    /// Lint, every rule, 1 thread.
    pub lint_1: Cell,
    /// Lint, shadowing rules off, 2 threads.
    pub lint_off: Cell,
    /// Compile, 2 threads.
    pub compile: Cell,
    /// Compile, 1 thread.
    pub compile_1: Cell,
    /// Lint with `--max-total-entries` raised, when the default refused (exit 2).
    pub lint_raised: Option<Cell>,
    /// Compile with `--max-total-entries` raised, when the default refused (exit 2).
    pub compile_raised: Option<Cell>,
}

/// `--max-total-entries` at its maximum: the figure behind a refusal by the total-entries limit.
const RAISED_TOTAL: [&str; 2] = ["--max-total-entries", "18446744073709551615"];

fn refused(cell: &Cell) -> bool {
    matches!(cell, Cell::Measured(r) if r.run.outcome == Outcome::Exited(2))
}

const NOT_RUN_SMALLER: &str = "not run (the smaller size did not finish)";
const NOT_RUN_TWO: &str = "not run (did not finish on 2 threads)";

fn measured_or(skip: Option<&str>, f: impl FnOnce() -> Result<PorinRun>) -> Result<Cell> {
    Ok(match skip {
        Some(reason) => Cell::Skipped(reason.to_owned()),
        None => Cell::Measured(f()?),
    })
}

/// Generates and measures every size of one identity mode.
pub fn run_mode(config: &ScaleConfig, mode: Identities) -> Result<Vec<SizeRow>> {
    let mut rows = Vec::new();
    // Operations that did not finish at a smaller size.
    let mut gave_up: BTreeMap<&str, bool> = BTreeMap::new();
    for &(policies, pods) in &config.sizes {
        let spec = ClusterSpec {
            kind: PolicyKind::Cnp,
            policies,
            pods,
            identities: mode,
            seed: config.seed,
        };
        let root = config.workdir.join(format!(
            "cnp-{policies}x{pods}-{}",
            if mode == Identities::Unique {
                "unique"
            } else {
                "shared"
            }
        ));
        eprintln!(
            "scale: generating {policies} CNPs × {pods} pods ({mode:?}) in {}",
            root.display()
        );
        let generated = gitops::write_cluster(&spec, &root)?;
        std::fs::write(root.join("shadow-off.porin.yaml"), SHADOW_OFF)?;
        let lint_args = [
            "lint",
            "policies",
            "--inventory",
            "inventory",
            "--format",
            "json",
        ];
        let skip = |op: &str, gave_up: &BTreeMap<&str, bool>| {
            gave_up
                .get(op)
                .copied()
                .unwrap_or(false)
                .then_some(NOT_RUN_SMALLER)
        };
        let lint = measured_or(skip("lint", &gave_up), || {
            run_porin(config, &root, &lint_args, Some(2), true)
        })?;
        let lint_off = measured_or(skip("lint_off", &gave_up), || {
            let mut args = lint_args.to_vec();
            args.extend(["--config", "shadow-off.porin.yaml"]);
            run_porin(config, &root, &args, Some(2), true)
        })?;
        let lint_1 = measured_or(lint.finished().is_none().then_some(NOT_RUN_TWO), || {
            run_porin(config, &root, &lint_args, Some(1), true)
        })?;
        let compile_args = [
            "compile",
            "policies",
            "--inventory",
            "inventory",
            "--format",
            "json",
        ];
        let compile = measured_or(skip("compile", &gave_up), || {
            run_porin(config, &root, &compile_args, Some(2), false)
        })?;
        let compile_1 = measured_or(compile.finished().is_none().then_some(NOT_RUN_TWO), || {
            run_porin(config, &root, &compile_args, Some(1), false)
        })?;
        let lint_raised = if refused(&lint) {
            let mut args = lint_args.to_vec();
            args.extend(RAISED_TOTAL);
            Some(measured_or(skip("lint_raised", &gave_up), || {
                run_porin(config, &root, &args, Some(2), true)
            })?)
        } else {
            None
        };
        let compile_raised = if refused(&compile) {
            let mut args = compile_args.to_vec();
            args.extend(RAISED_TOTAL);
            Some(measured_or(skip("compile_raised", &gave_up), || {
                run_porin(config, &root, &args, Some(2), false)
            })?)
        } else {
            None
        };
        for (op, cell) in [
            ("lint", Some(&lint)),
            ("lint_off", Some(&lint_off)),
            ("compile", Some(&compile)),
            ("lint_raised", lint_raised.as_ref()),
            ("compile_raised", compile_raised.as_ref()),
        ] {
            let Some(cell) = cell else { continue };
            if cell.finished().is_none() {
                gave_up.insert(op, true);
            }
        }
        if !config.keep {
            let _ = std::fs::remove_dir_all(&root);
        }
        rows.push(SizeRow {
            generated,
            lint,
            lint_1,
            lint_off,
            compile,
            compile_1,
            lint_raised,
            compile_raised,
        });
    }
    Ok(rows)
}

fn ratio_cell(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => format!("{:.2}×", a / b),
        _ => "n/a".to_owned(),
    }
}

fn findings_cell(run: &Cell) -> String {
    let Some(r) = run.finished().filter(|r| r.run.ran()) else {
        return String::new();
    };
    let total: usize = r.findings.values().sum();
    let mut top: Vec<(&String, &usize)> = r.findings.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = top
        .iter()
        .take(4)
        .map(|(code, n)| format!("{code} {}", group(**n as f64, 0)))
        .collect();
    let codes = if shown.is_empty() {
        String::new()
    } else {
        format!(" ({})", shown.join(", "))
    };
    format!(
        "{}{codes}{}",
        group(total as f64, 0),
        r.digest
            .map_or_else(String::new, |d| format!(" `{d:016x}`"))
    )
}

fn growth(previous: Option<(f64, f64)>, now: Option<(f64, f64)>) -> String {
    match (previous, now) {
        (Some((t0, m0)), Some((t1, m1))) if t0 > 0.0 && m0 > 0.0 => {
            format!("{:.1}× / {:.1}×", t1 / t0, m1 / m0)
        }
        _ => "—".to_owned(),
    }
}

fn pair(cell: &Cell) -> Option<(f64, f64)> {
    Some((cell.secs()?, cell.mib()?))
}

/// The lint and compile tables of one mode.
pub fn render_mode(mode: Identities, rows: &[SizeRow], config: &ScaleConfig) -> String {
    let mut out = String::new();
    let what = match mode {
        Identities::Unique => "one unique label per pod (identities = pods)",
        Identities::Shared => "pods of a Deployment share labels (identities = Deployments)",
    };
    let _ = writeln!(
        out,
        "#### Lint: CNPs over Kubernetes Pod manifests, {what}\n\n`porin lint policies --inventory \
         inventory --format json` in the generated repository, default limits, each run a fresh \
         process, limit {:.0} s. Cells: wall time, peak RSS. Findings: total (top codes) and the \
         FNV-1a digest of the JSON output (equal digest = identical findings). Load average now: \
         {}.\n",
        config.timeout.as_secs_f64(),
        crate::cpu::load_average()
    );
    out.push_str(
        "| policies | pods | identities | every rule, 2 threads | every rule, 1 thread | \
         speed-up 1→2 threads | PR004/PR005/PR017 off | every rule ÷ shadowing off | every \
         rule, `--max-total-entries` raised (where the default refused) | findings (every rule) \
         | growth vs previous size (time / RSS) |\n\
         |---:|---:|---:|---|---|---:|---|---:|---|---|---:|\n",
    );
    let mut notes = Notes::default();
    let mut previous = None;
    for row in rows {
        let g = &row.generated;
        let now = pair(&row.lint);
        let raised = row
            .lint_raised
            .as_ref()
            .map_or_else(|| "—".to_owned(), |c| c.show(&mut notes));
        let findings = match &row.lint_raised {
            Some(cell) => findings_cell(cell),
            None => findings_cell(&row.lint),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {raised} | {findings} | {} |",
            group(g.policies as f64, 0),
            group(g.pods as f64, 0),
            group(g.identities as f64, 0),
            row.lint.show(&mut notes),
            row.lint_1.show(&mut notes),
            ratio_cell(row.lint_1.secs(), row.lint.secs()),
            row.lint_off.show(&mut notes),
            ratio_cell(row.lint.secs(), row.lint_off.secs()),
            growth(previous, now),
        );
        previous = now;
    }
    out.push_str(&notes.render());
    let _ = writeln!(
        out,
        "\n#### Compile: the same repositories, {what}\n\n`porin compile policies --inventory \
         inventory --format json > /dev/null`, default limits.\n"
    );
    out.push_str(
        "| policies | pods | identities | 2 threads | 1 thread | speed-up 1→2 threads | \
         `--max-total-entries` raised (where the default refused) | growth vs previous size \
         (time / RSS) |\n|---:|---:|---:|---|---|---:|---|---:|\n",
    );
    let mut previous = None;
    for row in rows {
        let g = &row.generated;
        let now = pair(&row.compile);
        let raised = row
            .compile_raised
            .as_ref()
            .map_or_else(|| "—".to_owned(), |c| c.show(&mut notes));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {raised} | {} |",
            group(g.policies as f64, 0),
            group(g.pods as f64, 0),
            group(g.identities as f64, 0),
            row.compile.show(&mut notes),
            row.compile_1.show(&mut notes),
            ratio_cell(row.compile_1.secs(), row.compile.secs()),
            growth(previous, now),
        );
        previous = now;
    }
    out.push_str(&notes.render());
    out
}

/// Load and compile limits raised to their maximum (the CIDR table's comparison row).
const RAISED_LIMITS: [&str; 14] = [
    "--max-total-bytes",
    "18446744073709551615",
    "--max-cidr-prefixes",
    "18446744073709551615",
    "--max-identities",
    "18446744073709551615",
    "--max-selector-evaluations",
    "18446744073709551615",
    "--max-insertions-per-endpoint",
    "18446744073709551615",
    "--max-total-entries",
    "18446744073709551615",
    "--max-peer-selectors",
    "18446744073709551615",
];

/// The CIDR table: each rule count with default and with raised compile limits.
pub fn run_cidr(config: &ScaleConfig) -> Result<String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#### Compile: CIDR rules\n\n`synthetic::cidr_cluster(N)` on disk (one CNP per rule, each \
         allowing egress TCP/443 to its own prefix, every 256th a /24 around the next 255 /32s; \
         ten pods), `porin compile policies --inventory inventory --format json > /dev/null` \
         (load + compile), limit {:.0} s. Load average now: {}.\n",
        config.timeout.as_secs_f64(),
        crate::cpu::load_average()
    );
    out.push_str(
        "| CIDR rules | repository bytes (policies + manifests) | default limits | load and compile limits raised to the \
         maximum | default ÷ raised |\n|---:|---:|---|---|---:|\n",
    );
    let mut notes = Notes::default();
    for &rules in &config.cidr_rules {
        let root = config.workdir.join(format!("cidr-{rules}"));
        eprintln!("scale: generating {rules} CIDR rules in {}", root.display());
        let generated = gitops::write_cidr(rules, &root)?;
        let args = [
            "compile",
            "policies",
            "--inventory",
            "inventory",
            "--format",
            "json",
        ];
        let default = Cell::Measured(run_porin(config, &root, &args, Some(2), false)?);
        let mut raised_args = args.to_vec();
        raised_args.extend(RAISED_LIMITS);
        let raised = Cell::Measured(run_porin(config, &root, &raised_args, Some(2), false)?);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            group(rules as f64, 0),
            group(generated.bytes as f64, 0),
            default.show(&mut notes),
            raised.show(&mut notes),
            ratio_cell(default.secs(), raised.secs())
        );
        if !config.keep {
            let _ = std::fs::remove_dir_all(&root);
        }
    }
    out.push_str(&notes.render());
    Ok(out)
}

/// Cilium's `BenchmarkRegeneratePolicyRules`: 1,353,687,383 ns/op for one endpoint (cilium/cilium
/// PR #6893, 2019, on the PR author's machine).
pub const CILIUM_PR_6893_MS: f64 = 1_353.687_383;

/// The Cilium-shape table.
pub fn run_cilium(config: &ScaleConfig) -> Result<String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#### Cilium's own benchmark shape (one endpoint)\n\n`BenchmarkRegeneratePolicyRules` \
         (cilium/cilium pkg/policy/resolve_test.go, PR #6893): N rules each selecting the \
         endpoint (`foo`) and allowing ingress from `bar` (which selects nothing), M identities \
         `foo<i>`, policy resolved for one endpoint. Here: N CiliumClusterwideNetworkPolicies, \
         M + 1 pods, `porin compile policies --inventory inventory --endpoint default/endpoint \
         --format json > /dev/null` (process start, YAML parse, every endpoint's compile). The \
         PR's text says \"3000 rules and 1000 identities\"; its `SetUpSuite` generates 3,000 \
         identities and 1,000 rules, so both are measured. Cilium's figure is from 2019 on other \
         hardware, in-process, without parsing: a reference point, not a same-run baseline. Load \
         average now: {}.\n",
        crate::cpu::load_average()
    );
    out.push_str(
        "| shape | rules | identities | porin compile (wall, RSS) | Cilium PR #6893 | porin ÷ \
         Cilium |\n|---|---:|---:|---|---:|---:|\n",
    );
    let mut notes = Notes::default();
    for &(rules, identities, label) in &config.cilium_shapes {
        let root = config.workdir.join(format!("cilium-{rules}x{identities}"));
        gitops::write_cilium_shape(rules, identities, &root)?;
        let args = [
            "compile",
            "policies",
            "--inventory",
            "inventory",
            "--endpoint",
            "default/endpoint",
            "--format",
            "json",
        ];
        let cell = Cell::Measured(run_porin(config, &root, &args, Some(2), false)?);
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} ms | {} |",
            group(rules as f64, 0),
            group(identities as f64, 0),
            cell.show(&mut notes),
            group(CILIUM_PR_6893_MS, 0),
            ratio_cell(cell.secs().map(|s| s * 1e3), Some(CILIUM_PR_6893_MS)),
        );
        if !config.keep {
            let _ = std::fs::remove_dir_all(&root);
        }
    }
    out.push_str(&notes.render());
    Ok(out)
}

/// Runs the incremental child (`porin-bench role incr-child`).
pub fn run_incremental(config: &ScaleConfig) -> Result<String> {
    let exe = std::env::current_exe().context("own path")?;
    std::fs::create_dir_all(&config.workdir)?;
    let out_path = config.workdir.join("incr.stdout");
    eprintln!("scale: incremental, {} rules", config.incremental_rules);
    let run = child::run(&child::Spec {
        program: &exe,
        args: vec![
            "role".into(),
            "incr-child".into(),
            "--rules".into(),
            config.incremental_rules.to_string(),
            "--runs".into(),
            config.incremental_runs.to_string(),
        ],
        env: vec![],
        cwd: &config.workdir,
        stdout: Some(&out_path),
        stderr: None,
        timeout: config.timeout,
        memory_limit: Some(config.memory_limit),
    })?;
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "#### Incremental: one-rule change and identity add/remove\n\nOne CNP of {} ingress rules \
         (rule i: `role: client-<i % 256>` on TCP 10000+i) over 256 client pods, through the \
         session's Rust API on main (`session::IncrementalCompiler` + `pin_identities`, what \
         `porin_session_compile` runs, then `diff::policy_diff` of the server's map state, what \
         `porin_compilation_policy_diff` runs), in-process in a child. {} runs per step: median \
         (min–max), milliseconds. Load average now: {}.\n",
        group(config.incremental_rules as f64, 0),
        config.incremental_runs,
        crate::cpu::load_average()
    );
    if !run.ran() {
        let _ = writeln!(out, "The incremental child failed: {}.", run.note());
        return Ok(out);
    }
    let result: IncrementalResult = crate::echo::parse_result(&stdout)?;
    let _ = writeln!(
        out,
        "Server map entries: {}; first (full) compile {} ms; peak RSS of the child {} MiB.\n",
        group(result.entries as f64, 0),
        group(result.first_compile_secs * 1e3, 1),
        group(run.max_rss_kib as f64 / 1024.0, 0)
    );
    out.push_str(
        "| step | parse (ms) | compile (ms) | difference (ms) | total to the map difference (ms) | \
         map writes | map states recomputed | incremental API (`session::Session`): the update; \
         with the text's parse | target (issue #14) |\n|---|---:|---:|---:|---:|---:|---:|---|---:|\n",
    );
    let show = |steps: &[Step], pick: fn(&Step) -> f64| {
        Spread::of(&steps.iter().map(|s| pick(s) * 1e3).collect::<Vec<_>>())
            .map_or_else(|| "n/a".to_owned(), |s| s.show(3))
    };
    // The update apart from the parse: the target is the update's (the C
    // API's text call re-parses only the edited rule item, `capi-child`).
    let incremental_cell = |pick: fn(&crate::incremental::IncrementalApiResult) -> &Vec<Step>| {
        result.incremental.as_ref().map_or_else(
            || "not in this build".to_owned(),
            |api| {
                let steps = pick(api);
                let update = show(steps, |s| s.compile_secs + s.diff_secs);
                if steps.iter().any(|s| s.load_secs > 0.0) {
                    format!("{update} ms; {} ms", show(steps, Step::total))
                } else {
                    format!("{update} ms")
                }
            },
        )
    };
    let add = format!(
        "identity add (a pod with new labels, selected by {} rules)",
        result.rules.div_ceil(256)
    );
    for (name, steps, api, target) in [
        (
            "one-rule change (port of rule 0)",
            &result.rule_change,
            incremental_cell(|a| &a.rule_change),
            "≤ 1 ms",
        ),
        (
            add.as_str(),
            &result.identity_add,
            incremental_cell(|a| &a.identity_add),
            "≤ 0.1 ms",
        ),
        (
            "identity remove (that pod goes away)",
            &result.identity_remove,
            incremental_cell(|a| &a.identity_remove),
            "",
        ),
    ] {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} | {api} | {target} |",
            show(steps, |s| s.load_secs),
            show(steps, |s| s.compile_secs),
            show(steps, |s| s.diff_secs),
            show(steps, Step::total),
            steps.first().map_or(0, |s| s.changes),
            steps.first().map_or(0, |s| s.computed),
        );
    }
    // The incremental API only: the batch path has no rule insertion step.
    if let Some(api) = result.incremental.as_ref()
        && !api.rule_insert.is_empty()
    {
        let _ = writeln!(
            out,
            "\nA rule inserted before rule 0 and taken out again (every later rule moves one \
             place; its peer selector, first used by rule 5, is then used before rule 0's, which \
             the batch numbers first, so the session numbers the selectors again in place), \
             incremental API: {}; {} map writes; {} state(s) distilled again.",
            incremental_cell(|a| &a.rule_insert),
            api.rule_insert.first().map_or(0, |s| s.changes),
            api.rule_insert.first().map_or(0, |s| s.computed),
        );
    }
    if let Some(api) = result.incremental.as_ref()
        && !api.rule_insert_middle.is_empty()
    {
        let _ = writeln!(
            out,
            "\nThe same rule inserted before rule {} and taken out again (its peer selector keeps \
             its place in the order of first uses), incremental API: {}; {} map writes; {} \
             state(s) distilled again.",
            result.rules / 2,
            incremental_cell(|a| &a.rule_insert_middle),
            api.rule_insert_middle.first().map_or(0, |s| s.changes),
            api.rule_insert_middle.first().map_or(0, |s| s.computed),
        );
    }
    if let Some(api) = result.incremental.as_ref()
        && !api.text_add.is_empty()
    {
        let _ = writeln!(
            out,
            "\nA second text (a one-rule CNP selecting the server) added and removed again, \
             incremental API: {}; {} map writes.",
            incremental_cell(|a| &a.text_add),
            api.text_add.first().map_or(0, |s| s.changes),
        );
    }
    if let Some(api) = result.incremental.as_ref()
        && !api.port_line_add.is_empty()
    {
        let _ = writeln!(
            out,
            "\nA second port added to rule {} on lines of its own and taken out again (every \
             later rule's line moves), incremental API: {}; {} map writes; {} state(s) \
             distilled again.",
            result.rules / 2,
            incremental_cell(|a| &a.port_line_add),
            api.port_line_add.first().map_or(0, |s| s.changes),
            api.port_line_add.first().map_or(0, |s| s.computed),
        );
    }
    if let Some(api) = result.incremental.as_ref()
        && !api.cidr_insert_middle.is_empty()
    {
        let _ = writeln!(
            out,
            "\nA rule from a CIDR prefix no rule named inserted before rule {} and taken out \
             again (its CIDR identity comes and goes), incremental API: {}; {} map writes; {} \
             state(s) distilled again.",
            result.rules / 2,
            incremental_cell(|a| &a.cidr_insert_middle),
            api.cidr_insert_middle.first().map_or(0, |s| s.changes),
            api.cidr_insert_middle.first().map_or(0, |s| s.computed),
        );
    }
    if let Some(api) = result.incremental.as_ref()
        && !api.cidr_port_change.is_empty()
    {
        let _ = writeln!(
            out,
            "\nWith that CIDR rule in the text, its port changed and back (its prefix the same), \
             incremental API: {}; {} map writes.",
            incremental_cell(|a| &a.cidr_port_change),
            api.cidr_port_change.first().map_or(0, |s| s.changes),
        );
    }
    if let Some(api) = result.incremental.as_ref()
        && !api.group_rule_change.is_empty()
    {
        let _ = writeln!(
            out,
            "\nWith a text of two CiliumCIDRGroups beside the policy: rule 0's port changed, \
             incremental API: {}; a rule from a group (`cidrGroupRef`) inserted before rule {} \
             and taken out again: {}; {} map writes; {} state(s) distilled again.",
            incremental_cell(|a| &a.group_rule_change),
            result.rules / 2,
            incremental_cell(|a| &a.group_ref_insert_middle),
            api.group_ref_insert_middle.first().map_or(0, |s| s.changes),
            api.group_ref_insert_middle
                .first()
                .map_or(0, |s| s.computed),
        );
    }
    if let Some(api) = result.incremental.as_ref()
        && !api.text_apply.rule_change.is_empty()
    {
        let text = &api.text_apply;
        let _ = writeln!(
            out,
            "\nThe same changes given as the text's bytes to `Session::apply_policy_text` (the \
             C API's call: the changed rule item re-parsed in place, the parse included): rule \
             0's port {} ms; a rule inserted before rule 0 {} ms, before rule {} {} ms; a port \
             added on lines of its own {} ms; the CIDR rule's port {} ms.",
            show(&text.rule_change, Step::total),
            show(&text.rule_insert, Step::total),
            result.rules / 2,
            show(&text.rule_insert_middle, Step::total),
            show(&text.port_line_add, Step::total),
            show(&text.cidr_port_change, Step::total),
        );
    }
    if let Some(api) = result.incremental.as_ref()
        && !api.logged_rule_change.is_empty()
    {
        let _ = writeln!(
            out,
            "\nThe policy carrying `log: {{value: audit}}`, rule 0's port changed, incremental \
             API: {}.",
            incremental_cell(|a| &a.logged_rule_change),
        );
    }
    Ok(out)
}

/// Every part, rendered.
pub fn run(config: &ScaleConfig) -> Result<String> {
    std::fs::create_dir_all(&config.workdir)
        .with_context(|| format!("cannot create {}", config.workdir.display()))?;
    let version = std::process::Command::new(&config.porin)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run {} --version", config.porin.display()))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Scale: lint and compile of whole clusters (issue #14)\n\n`{}` ({}), {} CPUs, load \
         average at start {}; address-space limit {} GiB per run.\n",
        config.porin.display(),
        String::from_utf8_lossy(&version.stdout).trim(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        crate::cpu::load_average(),
        config.memory_limit >> 30
    );
    for &mode in &config.modes {
        let rows = run_mode(config, mode)?;
        out.push_str(&render_mode(mode, &rows, config));
        out.push('\n');
    }
    if !config.cidr_rules.is_empty() {
        out.push_str(&run_cidr(config)?);
        out.push('\n');
    }
    if !config.cilium_shapes.is_empty() {
        out.push_str(&run_cilium(config)?);
        out.push('\n');
    }
    if config.incremental_rules > 0 {
        out.push_str(&run_incremental(config)?);
    }
    if !config.keep {
        // Only what this run created: every repository was removed after its size.
        let _ = std::fs::remove_dir(&config.workdir);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lint_codes_are_counted_wherever_they_are() {
        let json: serde_json::Value = serde_json::from_str(
            r#"{"files": [{"diagnostics": [{"code": "PR005"}, {"code": "PR005"}]}],
                "other": {"code": "PR001"}}"#,
        )
        .unwrap();
        let mut counts = BTreeMap::new();
        count_codes(&json, &mut counts);
        assert_eq!(counts["PR005"], 2);
        assert_eq!(counts["PR001"], 1);
        assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }
}
