//! `porin-bench`: porin's datapath against rule chains, measured side by side on one machine.
//!
//! ```text
//! porin-bench all [--quick]       everything below, Markdown tables on stdout
//! porin-bench e2e [--quick]       UDP echo through porin / iptables-nft / nft, N rules
//! porin-bench tcp [--quick]       TCP request/response on long-lived connections, same rig
//! porin-bench churn [--quick]     TCP connection churn (a new connection per request)
//! porin-bench vm [--quick]        a QEMU microVM behind a tap: porin on the tap vs the chains
//! porin-bench lookup [--quick]    BPF_PROG_TEST_RUN ns per packet, 1 rule vs full tables
//! porin-bench apply [--quick]     time to replace a policy, whole and as a difference
//! porin-bench compile [--quick]   compile time and peak memory of synthetic clusters
//! porin-bench gen --out DIR ...   write a generated GitOps repository (policies + manifests)
//! porin-bench scale [--quick]     the `porin` binary's lint and compile of whole clusters (#14)
//! porin-bench nca [--quick]       porin vs network-config-analyzer on NetworkPolicies (#15)
//! porin-bench flows [--quick]     porin replay of a 1,000,000-line Hubble recording (#22)
//! ```
//!
//! `gen`, `scale` and `nca` need no root: they run the release `porin` binary (and `nca`) as
//! child processes on generated repositories.
//!
//! Needs root (bpf(2), network namespaces, tc, netfilter) and `ip`, `tc`, `nsenter`, `mount`,
//! `iptables-nft-restore`, `nft`. Progress goes to stderr, tables to stdout. `--quick` runs in
//! seconds (N ∈ {1, 100}, few samples, one run) and is what `tests/quick.rs` runs in CI.
//! `vm` also needs `qemu-system-x86_64`, `cpio`, a static busybox, `rustc` with the
//! `x86_64-unknown-linux-musl` target, and a Debian cloud kernel package (see `vm.rs`).

mod apply;
mod capi_apply;
mod child;
mod cmd;
mod compile_cost;
mod cpu;
mod e2e;
mod echo;
mod echo_std;
mod flows;
mod gitops;
mod incremental;
mod lookup;
mod nca;
mod rig;
mod scale;
mod stats;
mod tcp;
mod vm;
mod workload;

use std::net::SocketAddr;

use anyhow::{Context, Result, bail};
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
    /// End to end, TCP request/response on long-lived connections.
    Tcp(Options),
    /// End to end, UDP echo with batched system calls: each sender's window in one
    /// `sendmmsg(2)`, replies by `recvmmsg(2)`, the server batching the same way (an additional
    /// throughput mode beside `e2e`, whose per-datagram calls it does not replace).
    UdpBatched(Options),
    /// End to end, TCP connection churn (a new connection per request).
    Churn(Options),
    /// End to end through a QEMU microVM behind a tap device.
    Vm(VmArgs),
    /// BPF_PROG_TEST_RUN lookup cost.
    Lookup(Options),
    /// Apply (policy replacement) cost.
    Apply(Options),
    /// Compile cost of synthetic clusters.
    Compile(Options),
    /// Write a generated GitOps-like repository (policies, Pod/Namespace/Deployment manifests).
    Gen(GenArgs),
    /// Lint and compile generated clusters with the `porin` binary (issue #14).
    Scale(ScaleArgs),
    /// porin vs network-config-analyzer (`nca`) on NetworkPolicy clusters (issue #15).
    Nca(nca::NcaArgs),
    /// `porin replay` of a 1,000,000-line Hubble recording (issue #22).
    Flows(flows::FlowsArgs),
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
    /// Rule counts for the end-to-end comparison (default 1,10,100,1000,4000,10000); for
    /// `lookup`, policy-map entry counts (default 1,4096,65536).
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

#[derive(Args, Clone)]
struct VmArgs {
    #[command(flatten)]
    options: Options,
    /// Workloads through the guest (default udp,tcp; churn is possible but slow under TCG).
    #[arg(long, value_enum, value_delimiter = ',')]
    traffic: Option<Vec<TrafficArg>>,
    /// The Debian kernel package (`linux-image-*-cloud-amd64_*.deb`); default: `apt-get
    /// download` of the package `linux-image-cloud-amd64` depends on, into the rig's directory
    /// (the environment variable `PORIN_BENCH_KERNEL_DEB` is the default when set).
    #[arg(long)]
    kernel_deb: Option<std::path::PathBuf>,
    /// Seconds to wait for the guest under KVM before falling back to TCG.
    #[arg(long, default_value_t = 15)]
    kvm_timeout: u64,
    /// Skip KVM and boot under TCG directly.
    #[arg(long)]
    no_kvm: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum TrafficArg {
    Udp,
    Tcp,
    Churn,
}

impl TrafficArg {
    fn traffic(self) -> rig::Traffic {
        match self {
            Self::Udp => rig::Traffic::Udp,
            Self::Tcp => rig::Traffic::TcpRr,
            Self::Churn => rig::Traffic::Churn,
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ModeArg {
    Rr,
    Churn,
}

impl ModeArg {
    fn mode(self) -> tcp::Mode {
        match self {
            Self::Rr => tcp::Mode::RequestResponse,
            Self::Churn => tcp::Mode::Churn,
        }
    }
}

#[derive(Args, Clone)]
struct GenArgs {
    /// The directory to write (emptied first).
    #[arg(long)]
    out: std::path::PathBuf,
    /// Policy language.
    #[arg(long, value_enum, default_value_t = gitops::PolicyKind::Cnp)]
    kind: gitops::PolicyKind,
    /// Policies.
    #[arg(long, default_value_t = 100)]
    policies: usize,
    /// Application pods (two kube-dns pods come on top).
    #[arg(long, default_value_t = 1_000)]
    pods: usize,
    /// One unique label per pod, or labels shared by the pods of a Deployment.
    #[arg(long, value_enum, default_value_t = gitops::Identities::Unique)]
    identities: gitops::Identities,
    /// Seed (pod names, template hashes, NetworkPolicy peers).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Instead of a cluster: `synthetic::cidr_cluster(N)` (N CIDR rules over ten pods).
    #[arg(long, value_name = "N")]
    cidr_rules: Option<usize>,
    /// Instead of a cluster: Cilium's benchmark shape, `RULES,IDENTITIES`.
    #[arg(long, value_name = "RULES,IDENTITIES", value_delimiter = ',')]
    cilium: Option<Vec<usize>>,
    /// Instead of a cluster: the Online Boutique application (reconstructed), old and new
    /// versions of its policies.
    #[arg(long)]
    boutique: bool,
}

/// A duration in seconds: `120` or `120s`.
fn parse_secs(text: &str) -> Result<std::time::Duration, String> {
    let number = text.trim().trim_end_matches('s');
    number
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("`{text}` is not a number of seconds"))
}

/// `P:E` (policies:pods) pairs.
fn parse_size(text: &str) -> Result<(usize, usize), String> {
    let (p, e) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not POLICIES:PODS"))?;
    let number = |s: &str| {
        s.trim()
            .replace('_', "")
            .parse::<usize>()
            .map_err(|e| e.to_string())
    };
    Ok((number(p)?, number(e)?))
}

/// The `porin` binary: beside this executable (both are built into `target/release`), else
/// `target/release/porin`.
fn default_porin() -> std::path::PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("porin")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| "target/release/porin".into())
}

#[derive(Args, Clone)]
struct ScaleArgs {
    /// Seconds, not minutes: one tiny size per table (CI smoke test; not a measurement).
    #[arg(long)]
    quick: bool,
    /// The `porin` binary (default: beside porin-bench, else target/release/porin).
    #[arg(long)]
    porin: Option<std::path::PathBuf>,
    /// Wall-time limit per run (`120` or `120s`); a run past it is killed and reported as
    /// "did not finish".
    #[arg(long, value_parser = parse_secs, default_value = "120s")]
    timeout: std::time::Duration,
    /// Address-space limit per run, GiB.
    #[arg(long, default_value_t = 8)]
    memory_gib: u64,
    /// Cluster sizes as POLICIES:PODS (default 100:1000,1000:10000,3000:30000).
    #[arg(long, value_parser = parse_size, value_delimiter = ',')]
    sizes: Option<Vec<(usize, usize)>>,
    /// Identity modes (default unique,shared).
    #[arg(long, value_enum, value_delimiter = ',')]
    modes: Option<Vec<gitops::Identities>>,
    /// CIDR rule counts (default 65535; 0 to skip).
    #[arg(long, value_delimiter = ',')]
    cidr_rules: Option<Vec<usize>>,
    /// Skip Cilium's benchmark shape.
    #[arg(long)]
    no_cilium: bool,
    /// Rules of the incremental benchmark's policy (default 4096; 0 to skip).
    #[arg(long)]
    incremental_rules: Option<usize>,
    /// Runs of each incremental step (default 5).
    #[arg(long)]
    incremental_runs: Option<usize>,
    /// Where to generate the repositories (default: a directory under the system temp dir).
    #[arg(long)]
    workdir: Option<std::path::PathBuf>,
    /// Keep the generated repositories.
    #[arg(long)]
    keep: bool,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
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
        /// Datagrams per recvmmsg/sendmmsg (1: recvfrom/sendto per datagram).
        #[arg(long, default_value_t = 1)]
        batch: usize,
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
        /// Each window in one sendmmsg, replies by recvmmsg.
        #[arg(long)]
        batched: bool,
    },
    /// TCP echo server.
    TcpServer {
        #[arg(long)]
        addr: SocketAddr,
        #[arg(long, default_value_t = 16)]
        threads: usize,
        #[arg(long, default_value_t = 600)]
        max_secs: u64,
    },
    /// TCP latency client.
    TcpLatency {
        #[arg(long, value_enum)]
        mode: ModeArg,
        #[arg(long)]
        target: SocketAddr,
        #[arg(long)]
        samples: usize,
        #[arg(long, default_value_t = 200)]
        warmup: usize,
    },
    /// TCP throughput client.
    TcpThroughput {
        #[arg(long, value_enum)]
        mode: ModeArg,
        #[arg(long)]
        target: SocketAddr,
        #[arg(long)]
        senders: usize,
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
    /// The incremental benchmark (one-rule change, identity add/remove), in-process.
    IncrChild {
        #[arg(long)]
        rules: usize,
        #[arg(long)]
        runs: usize,
        /// Pods besides the server and its 256 clients, each with labels of its own that no
        /// rule selects: how the steps grow with the cluster.
        #[arg(long, default_value_t = 0)]
        bystanders: usize,
    },
    /// The one-rule change through the C API's `porin_session_apply_policy_bytes`, in place
    /// and with the re-parse off (the same-run baseline), in-process.
    CapiChild {
        #[arg(long)]
        rules: usize,
        #[arg(long)]
        runs: usize,
        /// How the 150 ms pauses before the identity adds (and after full loads) pass: asleep
        /// (an idle agent), spinning (the CPU kept busy, nothing else touched) or not at all
        /// (back to back): what a cold add costs beyond a warm one, and why.
        #[arg(long, value_enum, default_value_t = capi_apply::Pause::Sleep)]
        pause: capi_apply::Pause,
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
        Commands::Tcp(options) => {
            preflight(true)?;
            header(&options);
            traffic_part(&options, rig::Traffic::TcpRr)
        }
        Commands::UdpBatched(options) => {
            preflight(true)?;
            header(&options);
            traffic_part(&options, rig::Traffic::UdpBatched)
        }
        Commands::Churn(options) => {
            preflight(true)?;
            header(&options);
            traffic_part(&options, rig::Traffic::Churn)
        }
        Commands::Vm(args) => {
            preflight(true)?;
            require_tools(&[
                ("qemu-system-x86_64", "--version"),
                ("cpio", "--version"),
                ("dpkg-deb", "--version"),
                ("sysctl", "--version"),
            ])
            .context("apt-get install qemu-system-x86 cpio procps")?;
            header(&args.options);
            vm_part(&args)
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
        Commands::Gen(args) => generate(&args),
        Commands::Scale(args) => {
            let report = scale::run(&scale_config(&args))?;
            println!("{report}");
            Ok(())
        }
        Commands::Flows(args) => {
            let porin = args.porin.clone().unwrap_or_else(default_porin);
            println!("{}", flows::run(&args, &porin)?);
            Ok(())
        }
        Commands::Nca(args) => {
            let report = nca::run(&args, &default_porin())?;
            println!("{report}");
            Ok(())
        }
    }
}

fn generate(args: &GenArgs) -> Result<()> {
    let generated = if let Some(rules) = args.cidr_rules {
        gitops::write_cidr(rules, &args.out)?
    } else if let Some(shape) = &args.cilium {
        let [rules, identities] = shape.as_slice() else {
            bail!("--cilium takes RULES,IDENTITIES");
        };
        gitops::write_cilium_shape(*rules, *identities, &args.out)?
    } else if args.boutique {
        nca::write_boutique(&args.out)?
    } else {
        gitops::write_cluster(
            &gitops::ClusterSpec {
                kind: args.kind,
                policies: args.policies,
                pods: args.pods,
                identities: args.identities,
                seed: args.seed,
            },
            &args.out,
        )?
    };
    eprintln!(
        "porin-bench gen: {} policies, {} pods, {} identities, {} namespaces: {} files, {} bytes \
         in {}",
        generated.policies,
        generated.pods,
        generated.identities,
        generated.namespaces,
        generated.files,
        generated.bytes,
        args.out.display()
    );
    println!(
        "porin lint {0}/policies --inventory {0}/inventory",
        args.out.display()
    );
    Ok(())
}

fn scale_config(args: &ScaleArgs) -> scale::ScaleConfig {
    let quick = args.quick;
    scale::ScaleConfig {
        porin: args.porin.clone().unwrap_or_else(default_porin),
        workdir: args.workdir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("porin-bench-scale-{}", std::process::id()))
        }),
        keep: args.keep,
        timeout: args.timeout,
        memory_limit: args.memory_gib << 30,
        sizes: args.sizes.clone().unwrap_or_else(|| {
            if quick {
                vec![(10, 100)]
            } else {
                scale::SIZES.to_vec()
            }
        }),
        modes: args
            .modes
            .clone()
            .unwrap_or_else(|| vec![gitops::Identities::Unique, gitops::Identities::Shared]),
        cidr_rules: args
            .cidr_rules
            .clone()
            .unwrap_or_else(|| vec![if quick { 100 } else { 65_535 }])
            .into_iter()
            .filter(|n| *n > 0)
            .collect(),
        cilium_shapes: if args.no_cilium {
            vec![]
        } else if quick {
            vec![(30, 10, "quick")]
        } else {
            vec![
                (3_000, 1_000, "PR #6893 text"),
                (1_000, 3_000, "PR #6893 `SetUpSuite`"),
            ]
        },
        incremental_rules: args
            .incremental_rules
            .unwrap_or(if quick { 256 } else { 4_096 }),
        incremental_runs: args.incremental_runs.unwrap_or(if quick { 2 } else { 5 }),
        seed: args.seed,
    }
}

fn run_role(role: Role) -> Result<()> {
    match role {
        Role::Server {
            addr,
            threads,
            max_secs,
            batch,
        } => echo::serve(addr, threads, max_secs, batch),
        Role::TcpServer {
            addr,
            threads,
            max_secs,
        } => {
            echo_std::watchdog(max_secs, true);
            echo_std::serve_tcp(addr, threads).with_context(|| format!("bind {addr}"))?;
            echo_std::announce_and_wait()
        }
        Role::TcpLatency {
            mode,
            target,
            samples,
            warmup,
        } => echo::print_result(&tcp::latency(target, mode.mode(), samples, warmup)?),
        Role::TcpThroughput {
            mode,
            target,
            senders,
            secs,
        } => echo::print_result(&tcp::throughput(target, mode.mode(), senders, secs)?),
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
            batched,
        } => echo::print_result(&echo::throughput(target, senders, window, secs, batched)?),
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
        Role::IncrChild {
            rules,
            runs,
            bystanders,
        } => echo::print_result(&incremental::child(rules, runs.max(1), bystanders)?),
        Role::CapiChild { rules, runs, pause } => {
            let result = capi_apply::child(rules, runs.max(1), pause)?;
            capi_apply::print(&result);
            echo::print_result(&result)
        }
    }
}

/// Fails early, with the reason, when the harness cannot run here.
fn preflight(needs_net: bool) -> Result<()> {
    if let Err(error) = porin_kernel::probe() {
        bail!("eBPF is unavailable (run as root): {error}");
    }
    if needs_net {
        require_tools(&[
            ("ip", "-V"),
            ("tc", "-V"),
            ("nsenter", "-V"),
            ("mount", "-V"),
            ("iptables-nft-restore", "--version"),
            ("iptables-nft", "--version"),
            ("nft", "--version"),
        ])?;
    }
    Ok(())
}

/// Fails with `missing tools: [...]` unless every `(tool, version flag)` starts.
fn require_tools(tools: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&str> = tools
        .iter()
        .filter(|(tool, flag)| !cmd::available(tool, flag))
        .map(|(tool, _)| *tool)
        .collect();
    if !missing.is_empty() {
        bail!("missing tools: {missing:?}");
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
    let report = e2e::run(&e2e_config(options, rig::Traffic::Udp))?;
    println!(
        "### End to end: porin vs iptables-nft vs nft\n\n{}",
        e2e::render(&report)
    );
    Ok(())
}

/// The TCP workloads on the namespace rig.
fn traffic_part(options: &Options, traffic: rig::Traffic) -> Result<()> {
    let report = e2e::run(&e2e_config(options, traffic))?;
    println!(
        "### End to end, {}: porin vs iptables-nft vs nft\n\n{}",
        traffic.label(),
        e2e::render(&report)
    );
    Ok(())
}

/// The microVM rig: one guest, each workload in turn.
fn vm_part(args: &VmArgs) -> Result<()> {
    let options = &args.options;
    let traffics: Vec<rig::Traffic> = args.traffic.as_ref().map_or_else(
        || vec![rig::Traffic::Udp, rig::Traffic::TcpRr],
        |list| list.iter().map(|t| t.traffic()).collect(),
    );
    let mut config = e2e_config(options, rig::Traffic::Udp);
    // The guest's own cost dominates under TCG: fewer samples by default (5,000 would take
    // minutes per point), and no 65,536-entry point unless asked for by --sizes.
    config.samples = options
        .samples
        .unwrap_or(if options.quick { 100 } else { 1_000 });
    config.warmup = if options.quick { 20 } else { 100 };
    let vm = vm::VmRig::new(&vm::VmConfig {
        kernel_deb: args
            .kernel_deb
            .clone()
            .or_else(|| std::env::var_os("PORIN_BENCH_KERNEL_DEB").map(Into::into)),
        kvm_timeout: std::time::Duration::from_secs(args.kvm_timeout),
        try_kvm: !args.no_kvm,
        // Ample for the run (a full `vm --traffic udp,tcp,churn` took 20 minutes here).
        guest_max_secs: if options.quick { 900 } else { 4 * 3600 },
    })?;
    for traffic in traffics {
        config.traffic = traffic;
        let report = e2e::run_on(&vm, &config)?;
        println!(
            "### microVM ({}), {}: porin vs iptables-nft vs nft\n\n{}",
            vm.accelerator(),
            traffic.label(),
            e2e::render(&report)
        );
    }
    Ok(())
}

fn e2e_config(options: &Options, traffic: rig::Traffic) -> e2e::E2eConfig {
    let quick = options.quick;
    e2e::E2eConfig {
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
        traffic,
    }
}

fn lookup_part(options: &Options) -> Result<()> {
    let config = lookup::LookupConfig {
        entries: options.sizes.clone().unwrap_or_else(|| {
            if options.quick {
                vec![1, 100]
            } else {
                vec![1, 4_096, 65_536]
            }
        }),
        ipcache_entries: 65_536,
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
