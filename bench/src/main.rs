//! `porin-bench`: porin's datapath against rule chains, measured side by side on one machine.
//!
//! ```text
//! porin-bench all [--quick]       everything below, Markdown tables on stdout
//! porin-bench e2e [--quick]       UDP echo through porin / iptables-nft / nft, N rules
//! porin-bench lookup [--quick]    BPF_PROG_TEST_RUN ns per packet, 1 rule vs full tables
//! porin-bench apply [--quick]     time to replace a policy, whole and as a difference
//! porin-bench compile [--quick]   compile time and peak memory of synthetic clusters
//! ```
//!
//! Needs root (bpf(2), network namespaces, tc, netfilter) and `ip`, `tc`, `nsenter`, `mount`,
//! `iptables-nft-restore`, `nft`. Progress goes to stderr, tables to stdout. `--quick` runs in
//! seconds (N ∈ {1, 100}, few samples, one run) and is what `tests/quick.rs` runs in CI.

mod apply;
mod cmd;
mod compile_cost;
mod cpu;
mod e2e;
mod echo;
mod lookup;
mod rig;
mod stats;
mod workload;

use std::net::SocketAddr;

use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "porin-bench",
    about = "porin's benchmark harness (run as root)"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Every part, in order: compile, lookup, apply, e2e.
    All(Options),
    /// End to end: latency, throughput, CPU per round trip for N rules.
    E2e(Options),
    /// BPF_PROG_TEST_RUN lookup cost.
    Lookup(Options),
    /// Apply (policy replacement) cost.
    Apply(Options),
    /// Compile cost of synthetic clusters.
    Compile(Options),
    /// Internal: the processes the harness starts (echo server, clients, compile child).
    #[command(hide = true)]
    Role {
        #[command(subcommand)]
        role: Role,
    },
}

#[derive(Args, Clone)]
struct Options {
    /// Seconds instead of minutes: N ∈ {1, 100}, few samples, one run.
    #[arg(long)]
    quick: bool,
    /// Runs per point (default 3; quick 1).
    #[arg(long)]
    runs: Option<usize>,
    /// Latency samples per run (default 5,000; quick 300).
    #[arg(long)]
    samples: Option<usize>,
    /// Seconds per throughput run (default 3; quick 0.5).
    #[arg(long)]
    secs: Option<f64>,
    /// Concurrent senders in the throughput run (default 8).
    #[arg(long, default_value_t = 8)]
    senders: usize,
    /// Rule counts for the end-to-end comparison (default 1,10,100,1000,4000,10000).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Skip porin's extra end-to-end point at a full 65,536-entry policy map.
    #[arg(long)]
    no_full_map: bool,
    /// CIDR-rule counts for the compile part's CIDR table (default
    /// 4000,16000,65535; quick 100).
    #[arg(long, value_delimiter = ',')]
    cidr_rules: Option<Vec<usize>>,
    /// Compile part: only the CIDR table, not the synthetic clusters.
    #[arg(long)]
    only_cidr: bool,
}

#[derive(Subcommand)]
enum Role {
    /// UDP echo server.
    Server {
        #[arg(long)]
        addr: SocketAddr,
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, default_value_t = 600)]
        max_secs: u64,
    },
    /// Latency client.
    Latency {
        #[arg(long)]
        target: SocketAddr,
        #[arg(long)]
        samples: usize,
        #[arg(long, default_value_t = 200)]
        warmup: usize,
    },
    /// Throughput client.
    Throughput {
        #[arg(long)]
        target: SocketAddr,
        #[arg(long)]
        senders: usize,
        #[arg(long, default_value_t = 16)]
        window: usize,
        #[arg(long)]
        secs: f64,
    },
    /// Compile one synthetic cluster and report time and peak memory.
    CompileChild {
        #[arg(long)]
        policies: usize,
        #[arg(long)]
        endpoints: usize,
        /// `policies` CIDR rules over ten endpoints instead of a cluster.
        #[arg(long)]
        cidr: bool,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Err(error) = dispatch(cli.command) {
        eprintln!("porin-bench: {error:#}");
        std::process::exit(1);
    }
}

fn dispatch(command: Commands) -> Result<()> {
    match command {
        Commands::Role { role } => run_role(role),
        Commands::All(options) => {
            preflight(true)?;
            header(&options);
            compile_part(&options);
            lookup_part(&options)?;
            apply_part(&options)?;
            e2e_part(&options)
        }
        Commands::E2e(options) => {
            preflight(true)?;
            header(&options);
            e2e_part(&options)
        }
        Commands::Lookup(options) => {
            preflight(false)?;
            header(&options);
            lookup_part(&options)
        }
        Commands::Apply(options) => {
            preflight(true)?;
            header(&options);
            apply_part(&options)
        }
        Commands::Compile(options) => {
            header(&options);
            compile_part(&options);
            Ok(())
        }
    }
}

fn run_role(role: Role) -> Result<()> {
    match role {
        Role::Server {
            addr,
            threads,
            max_secs,
        } => echo::serve(addr, threads, max_secs),
        Role::Latency {
            target,
            samples,
            warmup,
        } => echo::print_result(&echo::latency(target, samples, warmup)?),
        Role::Throughput {
            target,
            senders,
            window,
            secs,
        } => echo::print_result(&echo::throughput(target, senders, window, secs)?),
        Role::CompileChild {
            policies,
            endpoints,
            cidr,
        } => {
            let workload = if cidr {
                compile_cost::Workload::Cidr
            } else {
                compile_cost::Workload::Cluster
            };
            echo::print_result(&compile_cost::child(workload, policies, endpoints)?)
        }
    }
}

/// Fails early, with the reason, when the harness cannot run here.
fn preflight(needs_net: bool) -> Result<()> {
    if let Err(error) = porin_kernel::probe() {
        bail!("eBPF is unavailable (run as root): {error}");
    }
    if needs_net {
        let missing: Vec<&str> = [
            ("ip", "-V"),
            ("tc", "-V"),
            ("nsenter", "-V"),
            ("mount", "-V"),
            ("iptables-nft-restore", "--version"),
            ("iptables-nft", "--version"),
            ("nft", "--version"),
        ]
        .into_iter()
        .filter(|(tool, flag)| !cmd::available(tool, flag))
        .map(|(tool, _)| tool)
        .collect();
        if !missing.is_empty() {
            bail!("missing tools: {missing:?}");
        }
    }
    Ok(())
}

fn header(options: &Options) {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "## porin-bench{}\n\nKernel {}, {cpus} CPUs, load average at start {}. porin-bench {}.\n",
        if options.quick {
            " (quick mode: smoke test, not a measurement)"
        } else {
            ""
        },
        kernel.trim(),
        cpu::load_average(),
        env!("CARGO_PKG_VERSION"),
    );
}

fn runs(options: &Options) -> usize {
    options
        .runs
        .unwrap_or(if options.quick { 1 } else { 3 })
        .max(1)
}

fn e2e_part(options: &Options) -> Result<()> {
    let quick = options.quick;
    let config = e2e::E2eConfig {
        sizes: options.sizes.clone().unwrap_or_else(|| {
            if quick {
                vec![1, 100]
            } else {
                vec![1, 10, 100, 1_000, 4_000, 10_000]
            }
        }),
        porin_only_entries: if quick || options.no_full_map {
            vec![]
        } else {
            vec![65_536]
        },
        runs: runs(options),
        samples: options.samples.unwrap_or(if quick { 300 } else { 5_000 }),
        warmup: if quick { 50 } else { 500 },
        senders: options.senders,
        window: 16,
        secs: options.secs.unwrap_or(if quick { 0.5 } else { 3.0 }),
        server_threads: 2,
    };
    let report = e2e::run(&config)?;
    println!(
        "### End to end: porin vs iptables-nft vs nft\n\n{}",
        e2e::render(&report)
    );
    Ok(())
}

fn lookup_part(options: &Options) -> Result<()> {
    let config = lookup::LookupConfig {
        entries: if options.quick {
            vec![1, 100]
        } else {
            vec![1, 4_096, 65_536]
        },
        ipcache_entries: 8_000,
        new_flow_runs: if options.quick { 100 } else { 2_000 },
        repeat: if options.quick { 2_000 } else { 50_000 },
        runs: runs(options),
    };
    let rows = lookup::run(&config)?;
    println!(
        "### Lookup cost (BPF_PROG_TEST_RUN)\n\n{}\n{}",
        lookup::render(&rows, &config),
        lookup::program_summary()?
    );
    Ok(())
}

fn apply_part(options: &Options) -> Result<()> {
    let config = apply::ApplyConfig {
        rules: if options.quick { 256 } else { 4_096 },
        runs: if options.quick {
            1
        } else {
            runs(options).max(5)
        },
    };
    let rows = apply::run(&config)?;
    println!("### Apply cost\n\n{}", apply::render(&rows, &config));
    Ok(())
}

fn compile_part(options: &Options) {
    let sizes: Vec<compile_cost::Size> = if options.quick {
        vec![(10, 100)]
    } else {
        vec![(10, 100), (100, 1_000), (300, 3_000), (1_000, 10_000)]
    };
    let runs = runs(options);
    if !options.only_cidr {
        let results = compile_cost::run(compile_cost::Workload::Cluster, &sizes, runs);
        println!(
            "### Compile cost\n\n{}",
            compile_cost::render(compile_cost::Workload::Cluster, &results, runs)
        );
    }
    let cidr_sizes: Vec<compile_cost::Size> = options
        .cidr_rules
        .clone()
        .unwrap_or_else(|| {
            if options.quick {
                vec![100]
            } else {
                vec![4_000, 16_000, 65_535]
            }
        })
        .into_iter()
        .map(|rules| (rules, compile_cost::CIDR_ENDPOINTS))
        .collect();
    let results = compile_cost::run(compile_cost::Workload::Cidr, &cidr_sizes, runs);
    println!(
        "### Compile cost: CIDR rules\n\n{}",
        compile_cost::render(compile_cost::Workload::Cidr, &results, runs)
    );
}
