//! Compile cost: time and peak memory to compile synthetic clusters, each size in a fresh child
//! process (so the peak resident set, `VmHWM`, belongs to that size alone).
//!
//! Two workloads ([`Workload`]): the cluster is
//! `porin_compiler::compile::synthetic::cluster(policies, endpoints)` with one more label per
//! endpoint (`pod: <name>`), so every endpoint has its own identity (the synthetic generator
//! alone gives one identity per app, endpoints / 10); the CIDR workload is
//! `synthetic::cidr_cluster(rules)`: one distinct prefix per rule over ten endpoints, so one CIDR
//! identity and one CIDR selector per rule (the case that used to grow with rules²).

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Result, bail};
use porin_compiler::compile::synthetic;
use porin_compiler::compile::{compile, compile_with_limits};
use porin_compiler::limits::CompileLimits;
use porin_compiler::resolve::lower::PolicyInput;
use serde::{Deserialize, Serialize};

use crate::stats::{Spread, group};

/// One size: (policies, endpoints); identities come out equal to endpoints (CIDR workload:
/// (rules, [`CIDR_ENDPOINTS`])).
pub type Size = (usize, usize);

/// Endpoints of the CIDR workload (`synthetic::cidr_cluster`: one per app).
pub const CIDR_ENDPOINTS: usize = 10;

/// What a compile child compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// `synthetic::cluster` with one identity per endpoint, default limits.
    Cluster,
    /// `synthetic::cidr_cluster`: one CIDR rule (and identity) per policy. Compiled without
    /// limits: the default `max_selector_evaluations` (selectors × identities) refuses 65,535
    /// CIDR rules before any work is done.
    Cidr,
}

/// The child's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompileResult {
    /// Policies.
    pub policies: usize,
    /// Endpoints.
    pub endpoints: usize,
    /// Distinct endpoint identities.
    pub identities: usize,
    /// Policy-map entries over all endpoints.
    pub entries: usize,
    /// Seconds to parse and validate the YAML (porin_model).
    pub load_secs: f64,
    /// Seconds to compile (porin_compiler).
    pub compile_secs: f64,
    /// Peak RSS after generating the input, before loading (KiB).
    pub rss_input_kib: u64,
    /// Peak RSS at the end (KiB).
    pub rss_peak_kib: u64,
}

/// Runs in the child: generate, load, compile, report.
pub fn child(workload: Workload, policies: usize, endpoints: usize) -> Result<CompileResult> {
    let cluster = match workload {
        Workload::Cluster => {
            let mut cluster = synthetic::cluster(policies, endpoints);
            for endpoint in &mut cluster.inventory.endpoints {
                endpoint
                    .labels
                    .insert("pod".to_owned(), endpoint.name.clone());
            }
            cluster
        }
        Workload::Cidr => synthetic::cidr_cluster(policies),
    };
    let rss_input_kib = crate::cpu::peak_rss_kib().unwrap_or(0);
    let start = Instant::now();
    let outcome = cluster.load();
    let load_secs = start.elapsed().as_secs_f64();
    if outcome.has_errors() {
        bail!(
            "synthetic policies rejected: {:?}",
            outcome.diagnostics.first()
        );
    }
    let start = Instant::now();
    let inputs = PolicyInput::from_outcome(&outcome);
    let compiled = match workload {
        Workload::Cluster => compile(&inputs, &cluster.inventory)?,
        Workload::Cidr => {
            compile_with_limits(&inputs, &cluster.inventory, &CompileLimits::unlimited())?
        }
    };
    let compile_secs = start.elapsed().as_secs_f64();
    let identities: std::collections::BTreeSet<u32> =
        compiled.endpoints.iter().map(|e| e.identity).collect();
    Ok(CompileResult {
        policies,
        endpoints: cluster.inventory.endpoints.len(),
        identities: match workload {
            Workload::Cluster => identities.len(),
            Workload::Cidr => compiled.identities.len(),
        },
        entries: compiled.endpoints.iter().map(|e| e.state.len()).sum(),
        load_secs,
        compile_secs,
        rss_input_kib,
        rss_peak_kib: crate::cpu::peak_rss_kib().unwrap_or(0),
    })
}

/// Address-space limit of a compile child: a size that needs more fails instead of pushing the
/// shared machine into swap or the OOM killer.
pub const CHILD_MEMORY_LIMIT_BYTES: u64 = 8 << 30;
/// Wall-clock limit of a compile child.
pub const CHILD_TIME_LIMIT_SECS: u64 = 120;

fn spawn_child(workload: Workload, size: Size) -> Result<CompileResult, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let output = Command::new("timeout")
        .arg(CHILD_TIME_LIMIT_SECS.to_string())
        .arg("prlimit")
        .arg(format!("--as={CHILD_MEMORY_LIMIT_BYTES}"))
        .arg("--")
        .arg(exe)
        .args([
            "role",
            "compile-child",
            "--policies",
            &size.0.to_string(),
            "--endpoints",
            &size.1.to_string(),
        ])
        .args((workload == Workload::Cidr).then_some("--cidr"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("spawn compile child: {e}"))?;
    if !output.status.success() {
        let reason = match output.status.code() {
            Some(124) => format!("did not finish within {CHILD_TIME_LIMIT_SECS} s"),
            _ => format!(
                "failed within the {} GiB address-space limit ({})",
                CHILD_MEMORY_LIMIT_BYTES >> 30,
                output.status
            ),
        };
        return Err(reason);
    }
    crate::echo::parse_result(&String::from_utf8_lossy(&output.stdout)).map_err(|e| e.to_string())
}

/// The runs of one size, or why it could not be measured.
pub type SizeResult = (Size, Result<Vec<CompileResult>, String>);

/// Every size, `runs` children each; a size whose first child fails is not retried.
pub fn run(workload: Workload, sizes: &[Size], runs: usize) -> Vec<SizeResult> {
    sizes
        .iter()
        .map(|size| {
            let mut results = Vec::new();
            for run in 0..runs {
                eprintln!("compile {workload:?}: {size:?} run {}/{runs}", run + 1);
                match spawn_child(workload, *size) {
                    Ok(result) => results.push(result),
                    Err(reason) => return (*size, Err(reason)),
                }
            }
            (*size, Ok(results))
        })
        .collect()
}

/// The Markdown table, with growth against the previous size.
pub fn render(workload: Workload, results: &[SizeResult], runs: usize) -> String {
    let mut out = String::new();
    let what = match workload {
        Workload::Cluster => {
            "Synthetic clusters (`compile::synthetic` + one `pod` label per endpoint, so \
             identities = endpoints)"
        }
        Workload::Cidr => {
            "CIDR rules (`compile::synthetic::cidr_cluster`: one CNP per rule, each allowing \
             egress TCP/443 to its own prefix, every 256th a /24 around the next 255 /32s; ten \
             endpoints; identities = all, CIDR ones included; compiled without limits)"
        }
    };
    let _ = writeln!(
        out,
        "{what}, each run in a fresh process. {runs} run(s): median (min–max). Peak RSS is \
         the child's `VmHWM` (input generation included; the \"input\" column is the peak before \
         loading). Load average: {}.\n",
        crate::cpu::load_average()
    );
    out.push_str("| policies | endpoints | identities | map entries (all endpoints) | load YAML (s) | compile (s) | peak RSS (MiB) | input only (MiB) | growth vs previous size (time / RSS) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut previous: Option<(f64, f64)> = None;
    for (size, outcome) in results {
        let runs = match outcome {
            Ok(runs) => runs,
            Err(reason) => {
                // Cluster identities equal endpoints; a CIDR size's count is
                // only known once it compiled.
                let identities = match workload {
                    Workload::Cluster => group(size.1 as f64, 0),
                    Workload::Cidr => String::new(),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {identities} | | | {reason} | | | |",
                    group(size.0 as f64, 0),
                    group(size.1 as f64, 0),
                );
                continue;
            }
        };
        let Some(first) = runs.first() else { continue };
        let spread = |pick: fn(&CompileResult) -> f64| {
            Spread::of(&runs.iter().map(pick).collect::<Vec<_>>())
        };
        let compile = spread(|r| r.compile_secs);
        let load = spread(|r| r.load_secs);
        let rss = spread(|r| r.rss_peak_kib as f64 / 1024.0);
        let input = spread(|r| r.rss_input_kib as f64 / 1024.0);
        let show = |s: Option<Spread>, d| s.map_or_else(|| "n/a".to_owned(), |s| s.show(d));
        let now = (
            compile.map_or(0.0, |s| s.median + load.map_or(0.0, |l| l.median)),
            rss.map_or(0.0, |s| s.median),
        );
        let growth = match previous {
            Some((t, m)) if t > 0.0 && m > 0.0 => format!("{:.1}× / {:.1}×", now.0 / t, now.1 / m),
            _ => "—".to_owned(),
        };
        previous = Some(now);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            group(first.policies as f64, 0),
            group(first.endpoints as f64, 0),
            group(first.identities as f64, 0),
            group(first.entries as f64, 0),
            show(load, 3),
            show(compile, 3),
            show(rss, 1),
            show(input, 1),
            growth
        );
    }
    out
}
