//! Compile time and peak memory of porin's compiler on synthetic clusters,
//! printed as a Markdown table.
//!
//! Run: `cargo run --release -p porin-compiler --example compile_bench`
//! (optionally `-- P,E P,E ...` for other sizes; default 10,100 100,1000
//! 1000,10000).
//!
//! Each size runs in a fresh child process (this program re-executes
//! itself with `--child P E`), so the peak resident set size (`VmHWM` from
//! `/proc/self/status`) belongs to that size alone. The child generates the
//! cluster with `porin_compiler::compile::synthetic::cluster(P, E)`
//! (P CiliumNetworkPolicies over E endpoints), then three times loads the
//! policy YAML (parse + validate) and compiles it; the table shows the
//! median of the three wall times (load and compile separately and
//! together), the peak RSS of the child (which includes the generated YAML
//! and inventory), and the size of the output.
//!
//! Environment: `PORIN_BENCH_UNIQUE=1` gives every endpoint one more label
//! (`pod: <name>`), so identities = endpoints (the shape of
//! `porin-bench compile`); `PORIN_BENCH_CIDR=1` generates
//! `synthetic::cidr_cluster(P)` instead (P CIDR rules over ten endpoints;
//! E is ignored) and compiles it under default limits;
//! `PORIN_BENCH_STREAM=1` compiles through the unit stream
//! (`Compilation::for_each_unit`, each state dropped after it is counted)
//! instead of building the whole `Compiled`;
//! `PORIN_BENCH_RUNS=N` sets the runs per size (default 3).

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use porin_compiler::compile::synthetic::{SyntheticCluster, cidr_cluster, cluster};
use porin_compiler::resolve::lower::PolicyInput;

const DEFAULT_SIZES: [(usize, usize); 3] = [(10, 100), (100, 1_000), (1_000, 10_000)];
const RUNS: usize = 3;

fn runs() -> usize {
    std::env::var("PORIN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUNS)
}

fn flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

fn generate(policies: usize, endpoints: usize) -> SyntheticCluster {
    if flag("PORIN_BENCH_CIDR") {
        return cidr_cluster(policies);
    }
    let mut synthetic = cluster(policies, endpoints);
    if flag("PORIN_BENCH_UNIQUE") {
        for endpoint in &mut synthetic.inventory.endpoints {
            endpoint
                .labels
                .insert("pod".to_owned(), endpoint.name.clone());
        }
    }
    synthetic
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// User + system CPU seconds of this process so far (`/proc/self/stat`,
/// fields 14 and 15, in clock ticks of 1/100 s): on a shared machine the
/// wall time depends on the load, the CPU time much less.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

/// The streamed compilation (`PORIN_BENCH_STREAM=1`): every limit checked,
/// every unit distilled and dropped after counting its entries (what `porin
/// lint` and `porin compile --format json` do), so the peak is a few states.
/// Returns (entries over all endpoints, endpoints, identities, ipcache).
fn stream(
    inputs: &[PolicyInput<'_>],
    inventory: &porin_compiler::inventory::Inventory,
) -> Result<(usize, usize, usize, usize), String> {
    use porin_compiler::compile::{Compilation, UnitOutcome};
    let limits = porin_compiler::limits::CompileLimits::default();
    Compilation::run(inputs, inventory, &limits, |compilation| {
        compilation.check()?;
        let mut entries = 0usize;
        let mut endpoints = 0usize;
        compilation.for_each_unit(|unit| {
            if let UnitOutcome::State(state, _) = &unit.outcome {
                entries += state.len() * unit.plan.endpoints.len();
            }
            endpoints += unit.plan.endpoints.len();
            true
        });
        let summary = compilation.summary();
        Ok((
            entries,
            endpoints,
            summary.identities.len(),
            summary.ipcache.len(),
        ))
    })
    .map_err(|e| e.to_string())
}

/// One size, in this process: prints one tab-separated result line.
fn child(policies: usize, endpoints: usize) -> Result<(), String> {
    let generated = Instant::now();
    let synthetic = generate(policies, endpoints);
    let expected = synthetic.inventory.endpoints.len();
    let generate = generated.elapsed();
    if flag("PORIN_BENCH_TRACE") {
        eprintln!("after generate: VmHWM {:?} KiB, {generate:?}", vm_hwm_kib());
    }
    let mut load_times = Vec::new();
    let mut compile_times = Vec::new();
    let mut total_times = Vec::new();
    let mut entries = 0usize;
    let mut identities = 0usize;
    let mut ipcache = 0usize;
    for _ in 0..runs() {
        let start = Instant::now();
        let outcome = synthetic.load();
        let loaded = start.elapsed();
        if outcome.has_errors() {
            return Err(format!(
                "the synthetic policies do not validate: {:?}",
                outcome.diagnostics.first()
            ));
        }
        let inputs = PolicyInput::from_outcome(&outcome);
        if flag("PORIN_BENCH_TRACE") {
            eprintln!("after load: VmHWM {:?} KiB, {loaded:?}", vm_hwm_kib());
        }
        let compile_start = Instant::now();
        let (count, endpoints_out, ids, ipc) = if flag("PORIN_BENCH_STREAM") {
            stream(&inputs, &synthetic.inventory)?
        } else {
            let compiled = porin_compiler::compile::compile(&inputs, &synthetic.inventory)
                .map_err(|e| e.to_string())?;
            (
                compiled.endpoints.iter().map(|e| e.state.len()).sum(),
                compiled.endpoints.len(),
                compiled.identities.len(),
                compiled.ipcache.len(),
            )
        };
        let compiled_in = compile_start.elapsed();
        total_times.push(start.elapsed());
        load_times.push(loaded);
        compile_times.push(compiled_in);
        entries = count;
        identities = ids;
        ipcache = ipc;
        if endpoints_out != expected {
            return Err(format!(
                "compiled {endpoints_out} endpoints, expected {expected}"
            ));
        }
    }
    let hwm = vm_hwm_kib().ok_or("cannot read VmHWM from /proc/self/status")?;
    let cpu = cpu_seconds().unwrap_or(0.0);
    println!(
        "{policies}\t{endpoints}\t{}\t{}\t{}\t{}\t{hwm}\t{entries}\t{identities}\t{ipcache}\t{cpu:.2}",
        generate.as_micros(),
        median(load_times).as_micros(),
        median(compile_times).as_micros(),
        median(total_times).as_micros(),
    );
    Ok(())
}

fn millis(micros: &str) -> String {
    micros
        .parse::<f64>()
        .map_or_else(|_| micros.to_owned(), |us| format!("{:.1}", us / 1000.0))
}

fn parse_sizes(args: &[String]) -> Result<Vec<(usize, usize)>, String> {
    if args.is_empty() {
        return Ok(DEFAULT_SIZES.to_vec());
    }
    args.iter()
        .map(|a| {
            let (p, e) = a
                .split_once(',')
                .ok_or_else(|| format!("`{a}`: expected POLICIES,ENDPOINTS"))?;
            Ok((
                p.parse().map_err(|_| format!("`{p}` is not a number"))?,
                e.parse().map_err(|_| format!("`{e}` is not a number"))?,
            ))
        })
        .collect()
}

fn parent(sizes: &[(usize, usize)]) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    println!(
        "| policies | endpoints | load (ms) | compile (ms) | load + compile (ms, median of {}) | peak RSS (MiB) | map entries (all endpoints) | identities | ipcache entries | CPU of the whole child (s, all runs and generation) |",
        runs()
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (policies, endpoints) in sizes {
        let output = Command::new(&exe)
            .args(["--child", &policies.to_string(), &endpoints.to_string()])
            .output()
            .map_err(|e| format!("running the child: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "size ({policies}, {endpoints}) failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let fields: Vec<&str> = text.trim().split('\t').collect();
        let [
            p,
            e,
            _generate,
            load,
            compile,
            total,
            hwm,
            entries,
            identities,
            ipcache,
            cpu,
        ] = fields.as_slice()
        else {
            return Err(format!("unexpected child output: {text}"));
        };
        let rss = hwm
            .parse::<f64>()
            .map_or_else(|_| (*hwm).to_owned(), |k| format!("{:.1}", k / 1024.0));
        println!(
            "| {p} | {e} | {} | {} | {} | {rss} | {entries} | {identities} | {ipcache} | {cpu} |",
            millis(load),
            millis(compile),
            millis(total)
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [flag, p, e] if flag == "--child" => match (p.parse(), e.parse()) {
            (Ok(p), Ok(e)) => child(p, e),
            _ => Err("--child needs two numbers".to_owned()),
        },
        other => parse_sizes(other).and_then(|sizes| parent(&sizes)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("compile_bench: {error}");
            ExitCode::FAILURE
        }
    }
}
