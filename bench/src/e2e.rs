//! End to end: latency, throughput and CPU per round trip through porin's datapath and
//! through iptables / nft rule chains of the same N rules, on the same rig, interleaved: UDP
//! echo, TCP request/response and TCP connection churn, on the namespace rig ([`Rig`]) or the
//! microVM rig (`vm::VmRig`), both behind the [`Bed`] trait.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use porin_ebpf::asm::Assembler;
use porin_ebpf::insn::Reg;
use porin_ebpf::{ObjectConfig, POLICY_MAP_MAX, POLICY_MAP_MIN, emit};
use porin_kernel::{Counter, Datapath, Direction, Program, ProgramType};

use crate::rig::{Rig, Traffic};
use crate::stats::{Spread, group, ratio};
use crate::workload::{self, ChainAt, PorinPolicy};

/// A rig the comparison runs on: where the filters attach and how a run is measured.
pub trait Bed {
    /// One sentence for the report: the topology and where each filter sits.
    fn describe(&self) -> String;
    /// The filtered endpoint's address (the server the policy selects).
    fn server(&self) -> std::net::Ipv4Addr;
    /// Latency and throughput (with CPU) of one run of `traffic`.
    fn measure(&self, traffic: Traffic, config: &E2eConfig) -> Result<RunFigures>;
    /// Attaches `programs`, each on the hook of its path (porin's: [`crate::rig::endpoint_programs`]);
    /// returns how many.
    fn attach_programs(&self, programs: &[(Direction, &Program)], tag: &str) -> Result<usize>;
    /// Detaches them.
    fn detach_porin(&self, tag: &str) -> Result<()>;
    /// Removes the pins of `tag`.
    fn unpin(&self, tag: &str);
    /// The network namespace holding the chains.
    fn chain_netns(&self) -> &str;
    /// Where the chains sit.
    fn chain_at(&self) -> ChainAt;
}

impl Bed for Rig {
    fn describe(&self) -> String {
        format!(
            "filter on the server's side of one veth pair between two namespaces: porin on the \
             server's device ({}; ingress hook = porin_to_endpoint), the chains on the server \
             namespace's INPUT hook",
            crate::rig::AttachMode::from_env().map_or("?", |m| m.label())
        )
    }

    fn server(&self) -> std::net::Ipv4Addr {
        workload::SERVER
    }

    fn measure(&self, traffic: Traffic, config: &E2eConfig) -> Result<RunFigures> {
        let latency = self.latency_of(traffic, config.samples, config.warmup)?;
        let throughput = self.throughput_of(traffic, config.senders, config.window, config.secs)?;
        Ok(RunFigures {
            p50_ns: latency.p50_ns as f64,
            p99_ns: latency.p99_ns as f64,
            rps: throughput.replies_per_sec,
            cpu_ns: throughput.cpu_ns_per_round_trip,
            guest_cpu_ns: f64::NAN,
            client_cpu_ns: f64::NAN,
            program_ns: [f64::NAN; 2],
        })
    }

    fn attach_programs(&self, programs: &[(Direction, &Program)], tag: &str) -> Result<usize> {
        Rig::attach_programs(self, programs, tag)
    }

    fn detach_porin(&self, tag: &str) -> Result<()> {
        Rig::detach_porin(self, tag)
    }

    fn unpin(&self, tag: &str) {
        Rig::unpin(self, tag);
    }

    fn chain_netns(&self) -> &str {
        &self.ns_server
    }

    fn chain_at(&self) -> ChainAt {
        ChainAt::Input
    }
}

/// What one end-to-end run measures.
#[derive(Debug, Clone)]
pub struct E2eConfig {
    /// Rule counts for every mechanism.
    pub sizes: Vec<usize>,
    /// Extra sizes measured for porin only (policy-map entries; the rule count is chosen so
    /// the compiled map holds exactly this many entries).
    pub porin_only_entries: Vec<usize>,
    /// Runs per point (median and range reported).
    pub runs: usize,
    /// Latency samples per run.
    pub samples: usize,
    /// Unmeasured round trips before the samples.
    pub warmup: usize,
    /// Concurrent senders in the throughput run.
    pub senders: usize,
    /// Requests in flight per sender.
    pub window: usize,
    /// Seconds per throughput run.
    pub secs: f64,
    /// Echo server threads.
    pub server_threads: usize,
    /// What the clients send.
    pub traffic: Traffic,
}

/// The environment variable naming porin's previous object (a file of the current map layout,
/// e.g. `git show REV:include/porin.bpf.o`): when set, it is measured as one more mechanism in
/// the same rotating runs, loaded and filled exactly as this build's object, so a datapath
/// change is compared with the object before it on the same rig at the same load.
pub const PREVIOUS_OBJECT_ENV: &str = "PORIN_BENCH_PREVIOUS_OBJECT";

/// The environment variable that adds the hook-cost rows (`1`): at every N measured with the
/// chains, four more mechanisms in the same rotating runs: a program that only returns
/// `TC_ACT_OK` on the request hook, the same on the reply hook, on both hooks (what attaching costs
/// before any instruction of porin's runs), and porin with `porin_to_endpoint` alone (what
/// porin costs without the reply path's program; a measurement, not a configuration the agent
/// uses: DATAPATH.md §1 says why the endpoint needs both).
pub const HOOK_COST_ENV: &str = "PORIN_BENCH_HOOK_COST";

/// The filters compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mechanism {
    /// No filter at all (the rig's floor).
    Baseline,
    /// porin's compiled object on tc clsact.
    Porin,
    /// The object of [`PREVIOUS_OBJECT_ENV`], filled like [`Mechanism::Porin`]'s.
    PorinPrevious,
    /// iptables (nft backend) INPUT chain.
    Iptables,
    /// Native nft base chain.
    Nft,
    /// [`HOOK_COST_ENV`]: a pass-only program on the request hook.
    PassRequestHook,
    /// [`HOOK_COST_ENV`]: a pass-only program on the reply hook.
    PassReplyHook,
    /// [`HOOK_COST_ENV`]: a pass-only program on both hooks.
    PassBothHooks,
    /// [`HOOK_COST_ENV`]: porin's object with `porin_to_endpoint` alone attached.
    PorinRequestOnly,
}

impl Mechanism {
    fn label(self) -> &'static str {
        match self {
            Self::Baseline => "no filter",
            Self::Porin => "porin",
            Self::PorinPrevious => "porin (previous object)",
            Self::Iptables => "iptables-nft",
            Self::Nft => "nft",
            Self::PassRequestHook => "pass-only program, request hook",
            Self::PassReplyHook => "pass-only program, reply hook",
            Self::PassBothHooks => "pass-only program, both hooks",
            Self::PorinRequestOnly => "porin, porin_to_endpoint alone",
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
pub struct RunFigures {
    /// Median round trip (ns).
    pub p50_ns: f64,
    /// 99th percentile round trip (ns).
    pub p99_ns: f64,
    /// Round trips per second with concurrent senders.
    pub rps: f64,
    /// CPU ns per round trip (on the microVM rig: the host side, without the guest's vCPU).
    pub cpu_ns: f64,
    /// The microVM guest's vCPU ns per round trip (NaN on the namespace rig).
    pub guest_cpu_ns: f64,
    /// Of `cpu_ns`, the client threads and ksoftirqd alone (NaN on the namespace rig): on the
    /// microVM rig, the host kernel's request path (routing, the chains, porin's program on
    /// the tap's egress) without QEMU's user-space device emulation.
    pub client_cpu_ns: f64,
    /// With `kernel.bpf_stats_enabled=1`: ns per run of the program on the request path
    /// (`porin_to_endpoint`'s hook) and on the reply path, over the run (NaN otherwise or
    /// where no program ran). Includes the statistics' own overhead.
    pub program_ns: [f64; 2],
}

/// Where [`RunFigures::program_ns`] keeps `direction`'s program.
fn program_slot(direction: Direction) -> usize {
    match direction {
        Direction::ToEndpoint => 0,
        Direction::FromEndpoint => 1,
    }
}

/// `kernel.bpf_stats_enabled` is 1: the kernel counts each program's runs and time.
fn bpf_stats_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}

/// One run of `config.traffic` through `programs` (already attached), with each program's
/// ns per run when the kernel counts them.
fn measure_programs(
    bed: &dyn Bed,
    programs: &[(Direction, &Program)],
    config: &E2eConfig,
) -> Result<RunFigures> {
    if !bpf_stats_enabled() {
        return bed.measure(config.traffic, config);
    }
    let before = programs
        .iter()
        .map(|(_, program)| program.run_stats())
        .collect::<Result<Vec<_>, _>>()?;
    let mut figures = bed.measure(config.traffic, config)?;
    for ((direction, program), before) in programs.iter().zip(&before) {
        figures.program_ns[program_slot(*direction)] = program
            .run_stats()?
            .ns_per_run_since(before)
            .unwrap_or(f64::NAN);
    }
    Ok(figures)
}

/// Per (rule count, mechanism): the runs.
pub type Results = BTreeMap<(usize, Mechanism), Vec<RunFigures>>;

/// What was measured, with the parameters, for the report.
#[derive(Debug)]
pub struct E2eReport {
    /// The configuration used.
    pub config: E2eConfig,
    /// The runs.
    pub results: Results,
    /// Rule count → porin policy-map entries, whether they were synthesised, and the seconds
    /// porin took to produce them (YAML load + compile, or synthesis).
    pub porin_entries: BTreeMap<usize, (usize, bool, f64)>,
    /// Load average before and after.
    pub load: (String, String),
    /// The rig ([`Bed::describe`]).
    pub bed: String,
}

struct PorinSetup {
    datapath: Datapath,
    tag: String,
}

fn load_porin(policy: &PorinPolicy, tag: &str) -> Result<PorinSetup> {
    load_porin_object(policy, tag, None)
}

/// As [`load_porin`], with the object's bytes from `object` instead of this build's emitter
/// (the maps are filled the same way).
fn load_porin_object(policy: &PorinPolicy, tag: &str, object: Option<&[u8]>) -> Result<PorinSetup> {
    let entries = u32::try_from(policy.policy.len()).context("entry count")?;
    if entries > POLICY_MAP_MAX {
        bail!("{entries} policy entries exceed the policy map maximum {POLICY_MAP_MAX}");
    }
    let defaults = ObjectConfig::default();
    let ipcache4 = u32::try_from(policy.ipcache4.len()).context("ipcache size")?;
    let config = ObjectConfig {
        policy_map_max_entries: defaults
            .policy_map_max_entries
            .max(entries)
            .max(POLICY_MAP_MIN),
        ipcache4_max_entries: defaults
            .ipcache4_max_entries
            .max(ipcache4.next_power_of_two()),
        ..defaults
    };
    let datapath = match object {
        Some(bytes) => Datapath::load(bytes)?,
        None => Datapath::load(&emit(&config)?)?,
    };
    datapath.install_ipcache(&policy.ipcache4, &policy.ipcache6)?;
    datapath.install_policy(&policy.policy)?;
    Ok(PorinSetup {
        datapath,
        tag: tag.to_owned(),
    })
}

/// The rule count whose compiled policy has exactly `entries` map entries (one exact entry per
/// rule plus the policy's fixed entries).
fn rules_for_entries(entries: usize) -> Result<usize> {
    let one = workload::compile_rules(&workload::rules(1, 0)?)?;
    let fixed = one.policy.len() - 1;
    entries
        .checked_sub(fixed)
        .filter(|n| *n > 0)
        .with_context(|| format!("{entries} entries cannot hold the {fixed} fixed entries"))
}

/// A program that returns `TC_ACT_OK` and does nothing else, assembled with porin's own
/// assembler: attached where porin's programs go, it measures the hooks' own cost.
fn pass_program() -> Result<Program> {
    let mut a = Assembler::new();
    a.mov64_imm(Reg::R0, 0);
    a.exit();
    let bytes = a
        .finish()
        .context("assembling the pass-only program")?
        .bytes();
    Ok(Program::load(
        "porin_bench_pass",
        ProgramType::SCHED_CLS,
        &bytes,
        "GPL",
    )?)
}

/// One run with a pass-only program on the hooks of `directions`. Each run loads its own
/// programs: a tcx link whose pin was just removed is released asynchronously, and the kernel
/// refuses a program that is still attached to the hook.
fn measure_pass(bed: &dyn Bed, directions: &[Direction], config: &E2eConfig) -> Result<RunFigures> {
    let loaded = directions
        .iter()
        .map(|d| Ok((*d, pass_program()?)))
        .collect::<Result<Vec<_>>>()?;
    let programs: Vec<(Direction, &Program)> = loaded.iter().map(|(d, p)| (*d, p)).collect();
    bed.attach_programs(&programs, "pass")?;
    let figures = measure_programs(bed, &programs, config);
    let detached = bed.detach_porin("pass");
    bed.unpin("pass");
    let figures = figures?;
    detached?;
    Ok(figures)
}

fn measure_porin(bed: &dyn Bed, setup: &PorinSetup, config: &E2eConfig) -> Result<RunFigures> {
    measure_porin_programs(bed, setup, config, &[])
}

/// As [`measure_porin`], without the programs of the paths in `leave_out`.
fn measure_porin_programs(
    bed: &dyn Bed,
    setup: &PorinSetup,
    config: &E2eConfig,
    leave_out: &[Direction],
) -> Result<RunFigures> {
    setup.datapath.reset_conntrack()?;
    setup.datapath.reset_counters()?;
    let mut programs = crate::rig::endpoint_programs(&setup.datapath)?;
    programs.retain(|(direction, _)| !leave_out.contains(direction));
    let attached = bed.attach_programs(&programs, &setup.tag)?;
    let figures = measure_programs(bed, &programs, config);
    let detached = bed.detach_porin(&setup.tag);
    let figures = figures?;
    detached?;
    // The traffic really went through porin: policy-checked requests, and conntrack replies
    // when the object has (and the rig attached) the program of the reply direction.
    let counters = setup.datapath.read_counters()?;
    let checked = counters.get(Counter::AllowedNew).packets
        + counters.get(Counter::AllowedEstablished).packets;
    let replies = counters.get(Counter::AllowedReply).packets;
    if checked == 0 || (attached > 1 && replies == 0) {
        bail!("porin's counters did not see the echo traffic: {counters:?}");
    }
    Ok(figures)
}

fn measure_chain(
    bed: &dyn Bed,
    mechanism: Mechanism,
    rules: &[workload::Rule],
    config: &E2eConfig,
) -> Result<RunFigures> {
    let ns = bed.chain_netns();
    let at = bed.chain_at();
    let iptables = mechanism == Mechanism::Iptables;
    flush_netfilter(ns)?;
    if iptables {
        let restore = workload::iptables_restore_at(rules, &at);
        crate::cmd::in_netns(ns, "iptables-nft-restore", &[], Some(&restore))?;
    } else {
        let script = workload::nft_script_at(rules, &at);
        crate::cmd::in_netns(ns, "nft", &["-f", "-"], Some(&script))?;
    }
    let figures = bed.measure(config.traffic, config);
    let counted = crate::rig::final_rule_packets(ns, &at, iptables);
    let flushed = flush_netfilter(ns);
    let figures = figures?;
    flushed?;
    if counted? == 0 {
        bail!(
            "the {} chain's final rule counted no packets",
            mechanism.label()
        );
    }
    Ok(figures)
}

/// Removes every netfilter table of namespace `ns` (iptables-nft's and ours).
fn flush_netfilter(ns: &str) -> Result<()> {
    crate::cmd::in_netns(ns, "nft", &["flush", "ruleset"], None).map(drop)
}

/// Runs the whole end-to-end comparison on the namespace rig.
pub fn run(config: &E2eConfig) -> Result<E2eReport> {
    let batch = if config.traffic == Traffic::UdpBatched {
        crate::rig::UDP_BATCH
    } else {
        1
    };
    let mut rig = Rig::with_udp_server(config.server_threads, batch)?;
    if !matches!(config.traffic, Traffic::Udp | Traffic::UdpBatched) {
        // One thread per long-lived connection (senders + the latency client) and spares.
        rig.start_tcp_server(config.senders + 8)?;
    }
    run_on(&rig, config)
}

/// Runs the whole end-to-end comparison on `bed`.
pub fn run_on(bed: &dyn Bed, config: &E2eConfig) -> Result<E2eReport> {
    let load_before = crate::cpu::load_average();
    let mut results: Results = BTreeMap::new();
    let mut porin_entries = BTreeMap::new();

    let previous = match std::env::var(PREVIOUS_OBJECT_ENV) {
        Ok(path) if !path.is_empty() => {
            Some(std::fs::read(&path).with_context(|| format!("{PREVIOUS_OBJECT_ENV}={path}"))?)
        }
        _ => None,
    };
    let hook_cost = match std::env::var(HOOK_COST_ENV).as_deref() {
        Err(_) | Ok("" | "0") => false,
        Ok("1") => true,
        Ok(other) => bail!("{HOOK_COST_ENV}={other}: expected `1` or `0`"),
    };
    let mut points: Vec<(usize, bool)> = config.sizes.iter().map(|n| (*n, true)).collect();
    for entries in &config.porin_only_entries {
        points.push((rules_for_entries(*entries)?, false));
    }
    for run in 0..config.runs {
        eprintln!("e2e: baseline run {}/{}", run + 1, config.runs);
        let figures = bed.measure(config.traffic, config)?;
        results
            .entry((0, Mechanism::Baseline))
            .or_default()
            .push(figures);
    }
    for (rules_count, with_chains) in points {
        eprintln!("e2e: N = {rules_count}: compiling with porin");
        let rules = workload::rules_for(rules_count, 0, config.traffic.proto())?;
        let started = std::time::Instant::now();
        let (policy, synthesised) = workload::porin_policy_at(&rules, bed.server())?;
        let compile_secs = started.elapsed().as_secs_f64();
        porin_entries.insert(
            rules_count,
            (policy.policy.len(), synthesised, compile_secs),
        );
        let setup = load_porin(&policy, &format!("n{rules_count}"))?;
        let mut mechanisms = vec![Mechanism::Porin];
        if with_chains {
            mechanisms.extend([Mechanism::Iptables, Mechanism::Nft]);
            if hook_cost {
                mechanisms.extend([
                    Mechanism::PassRequestHook,
                    Mechanism::PassReplyHook,
                    Mechanism::PassBothHooks,
                    Mechanism::PorinRequestOnly,
                ]);
            }
        }
        // Its own instance of the object: a tcx link whose pin was just removed is released
        // asynchronously, and the kernel refuses a program still attached to the hook, so the
        // rotation must not attach porin's programs again right after this one.
        let request_only_setup = if with_chains && hook_cost {
            Some(load_porin(&policy, &format!("r{rules_count}"))?)
        } else {
            None
        };
        let previous_setup = match &previous {
            Some(bytes) if with_chains => {
                let tag = format!("p{rules_count}");
                let setup = load_porin_object(&policy, &tag, Some(bytes))
                    .with_context(|| format!("N = {rules_count}: {PREVIOUS_OBJECT_ENV}"))?;
                mechanisms.push(Mechanism::PorinPrevious);
                Some(setup)
            }
            _ => None,
        };
        for run in 0..config.runs {
            // Rotate the order so no mechanism always runs first (the machine's load drifts).
            let order: Vec<Mechanism> = (0..mechanisms.len())
                .map(|i| mechanisms[(i + run) % mechanisms.len()])
                .collect();
            for mechanism in order {
                eprintln!(
                    "e2e: N = {rules_count}, run {}/{}: {}",
                    run + 1,
                    config.runs,
                    mechanism.label()
                );
                let figures = match (mechanism, &previous_setup, &request_only_setup) {
                    (Mechanism::Porin, _, _) => measure_porin(bed, &setup, config),
                    (Mechanism::PorinPrevious, Some(previous), _) => {
                        measure_porin(bed, previous, config)
                    }
                    (Mechanism::PorinRequestOnly, _, Some(own)) => {
                        measure_porin_programs(bed, own, config, &[Direction::FromEndpoint])
                    }
                    (Mechanism::PassRequestHook, _, _) => {
                        measure_pass(bed, &[Direction::ToEndpoint], config)
                    }
                    (Mechanism::PassReplyHook, _, _) => {
                        measure_pass(bed, &[Direction::FromEndpoint], config)
                    }
                    (Mechanism::PassBothHooks, _, _) => measure_pass(
                        bed,
                        &[Direction::ToEndpoint, Direction::FromEndpoint],
                        config,
                    ),
                    (other, _, _) => measure_chain(bed, other, &rules, config),
                }
                .with_context(|| format!("N = {rules_count}, {}", mechanism.label()))?;
                results
                    .entry((rules_count, mechanism))
                    .or_default()
                    .push(figures);
            }
        }
        for done in [
            Some(&setup),
            previous_setup.as_ref(),
            request_only_setup.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            bed.unpin(&done.tag);
        }
    }
    Ok(E2eReport {
        config: config.clone(),
        bed: bed.describe(),
        results,
        porin_entries,
        load: (load_before, crate::cpu::load_average()),
    })
}

/// With `kernel.bpf_stats_enabled=1`: each program's ns per run on the rig's traffic.
fn render_program_stats(report: &E2eReport, sizes: &[usize], out: &mut String) {
    let measured = |m: Mechanism, n: usize| {
        report.results.get(&(n, m)).is_some_and(|runs| {
            runs.iter()
                .any(|f| f.program_ns.iter().any(|ns| ns.is_finite()))
        })
    };
    let mechanisms = [
        Mechanism::Porin,
        Mechanism::PorinPrevious,
        Mechanism::PorinRequestOnly,
        Mechanism::PassRequestHook,
        Mechanism::PassReplyHook,
        Mechanism::PassBothHooks,
    ];
    if !sizes
        .iter()
        .any(|n| mechanisms.iter().any(|m| measured(*m, *n)))
    {
        return;
    }
    let _ = writeln!(
        out,
        "#### Programs on the rig's traffic (`kernel.bpf_stats_enabled=1`, ns per run)\n\n\
         Each figure includes the statistics' own clock reads; the pass-only rows are that \
         overhead with an empty program.\n\n\
         | rules | mechanism | request hook (porin_to_endpoint) | reply hook (porin_from_endpoint) |\n\
         |---:|---|---:|---:|"
    );
    for n in sizes {
        for m in mechanisms {
            if !measured(m, *n) {
                continue;
            }
            let cell = |slot: usize| {
                report
                    .results
                    .get(&(*n, m))
                    .and_then(|runs| {
                        Spread::of(&runs.iter().map(|f| f.program_ns[slot]).collect::<Vec<_>>())
                    })
                    .map_or_else(|| "—".to_owned(), |s| s.show(1))
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                group(*n as f64, 0),
                m.label(),
                cell(0),
                cell(1)
            );
        }
    }
    out.push('\n');
}

fn spread(
    results: &Results,
    n: usize,
    mechanism: Mechanism,
    pick: fn(&RunFigures) -> f64,
) -> Option<Spread> {
    let runs = results.get(&(n, mechanism))?;
    Spread::of(&runs.iter().map(pick).collect::<Vec<_>>())
}

/// One figure's table: title, the figure, display scale, decimals, whether higher is better.
type Table = (&'static str, fn(&RunFigures) -> f64, f64, usize, bool);

/// Markdown tables: one per figure, porin and the chains side by side with ratios.
pub fn render(report: &E2eReport) -> String {
    let mut out = String::new();
    let c = &report.config;
    let workload = match c.traffic {
        Traffic::Udp => format!(
            "UDP echo, 32-byte payload. Throughput: {} senders × {} requests in flight for {} s, \
             counted in completed round trips (each round trip is 2 packets through the filter: \
             the request is policy-checked, the reply is a conntrack hit or passes the chains' \
             unfiltered direction)",
            c.senders, c.window, c.secs
        ),
        Traffic::UdpBatched => format!(
            "UDP echo, 32-byte payload, batched system calls: each of {} senders sends its {} \
             requests with one sendmmsg(2) and takes the replies with recvmmsg(2) (as many as \
             have arrived per call); the server answers up to {} datagrams per \
             recvmmsg/sendmmsg. For {} s, counted in completed round trips (2 packets through \
             the filter each, as in the UDP echo rig). Latency: one request in flight, as there",
            c.senders,
            c.window,
            crate::rig::UDP_BATCH,
            c.secs
        ),
        Traffic::TcpRr => format!(
            "TCP request/response: 32 bytes each way with TCP_NODELAY, one request in flight per \
             long-lived connection. Throughput: {} connections for {} s, counted in completed \
             round trips (each is at least a request and a reply segment through the filter, \
             plus the ACKs that do not piggyback)",
            c.senders, c.secs
        ),
        Traffic::Churn => format!(
            "TCP connection churn: a new connection for every request (connect, 32 bytes each \
             way, the client's close, wait for the server's FIN; about 9 packets, 5 of them \
             towards the server). Throughput: {} concurrent clients for {} s, counted in \
             completed connections",
            c.senders, c.secs
        ),
    };
    let cpu = if report
        .results
        .values()
        .flatten()
        .any(|f| f.guest_cpu_ns.is_finite())
    {
        "CPU (host side): scheduler time of the client threads (which include the softirq work \
         done on their stacks: routing, the chains, porin's program on the tap's egress), \
         ksoftirqd and QEMU's threads other than the vCPU (its tap I/O thread, in whose \
         system calls the host kernel handles what the guest sends, porin's ingress program \
         included), per round trip, and the client threads with ksoftirqd alone (the request \
         direction without QEMU's user-space work); the guest's vCPU thread is counted apart \
         (last table)"
    } else {
        "CPU: scheduler time of client and server threads (which include the softirq work done \
         on their stacks) plus ksoftirqd, per round trip"
    };
    let _ = writeln!(
        out,
        "End to end ({workload}; {}). {} run(s) per point: median (min–max). Latency: {} \
         samples after {} warm-up, one request in flight. {cpu}. Load average before: {}; \
         after: {}.\n",
        report.bed, c.runs, c.samples, c.warmup, report.load.0, report.load.1
    );
    let mut sizes: Vec<usize> = report
        .results
        .keys()
        .filter(|(n, m)| *n > 0 && *m == Mechanism::Porin)
        .map(|(n, _)| *n)
        .collect();
    sizes.sort_unstable();
    let mut tables: Vec<Table> = vec![
        ("Latency p50 (µs)", |f| f.p50_ns, 1e3, 1, false),
        ("Latency p99 (µs)", |f| f.p99_ns, 1e3, 1, false),
        ("Throughput (round trips/s)", |f| f.rps, 1.0, 0, true),
        ("CPU per round trip (µs)", |f| f.cpu_ns, 1e3, 2, false),
    ];
    if report
        .results
        .values()
        .flatten()
        .any(|f| f.guest_cpu_ns.is_finite())
    {
        tables[3].0 = "CPU per round trip, host side (µs)";
        tables.push((
            "CPU per round trip, host side: client threads and ksoftirqd only (µs; the request \
             path through the chains or porin_to_endpoint, without QEMU)",
            |f| f.client_cpu_ns,
            1e3,
            2,
            false,
        ));
        tables.push((
            "Guest vCPU per round trip (µs; the emulated guest, not the filter)",
            |f| f.guest_cpu_ns,
            1e3,
            1,
            false,
        ));
    }
    for (title, pick, scale, digits, higher_is_better) in tables {
        let _ = writeln!(
            out,
            "#### {title}\n\n| rules (porin entries) | porin | iptables-nft | nft | iptables-nft vs porin | nft vs porin |\n|---:|---:|---:|---:|---:|---:|"
        );
        let show = |s: Option<Spread>| {
            s.map_or_else(
                || "not run".to_owned(),
                |s| {
                    Spread {
                        median: s.median / scale,
                        min: s.min / scale,
                        max: s.max / scale,
                    }
                    .show(digits)
                },
            )
        };
        if let Some(base) = spread(&report.results, 0, Mechanism::Baseline, pick) {
            let _ = writeln!(out, "| no filter (floor) | {} | | | | |", show(Some(base)));
        }
        for n in &sizes {
            let porin = spread(&report.results, *n, Mechanism::Porin, pick);
            let ipt = spread(&report.results, *n, Mechanism::Iptables, pick);
            let nft = spread(&report.results, *n, Mechanism::Nft, pick);
            // "vs porin" > 1 means porin is better (faster, more throughput, less CPU).
            let versus = |chain: Option<Spread>| {
                let (p, c) = (porin.map(|s| s.median), chain.map(|s| s.median));
                let text = if higher_is_better {
                    ratio(p, c)
                } else {
                    ratio(c, p)
                };
                let worse = match (p, c) {
                    (Some(p), Some(c)) if higher_is_better => p < c,
                    (Some(p), Some(c)) => p > c,
                    _ => false,
                };
                if worse {
                    format!("{text} (porin slower)")
                } else {
                    text
                }
            };
            let (entries, synthesised, _) = report
                .porin_entries
                .get(n)
                .copied()
                .unwrap_or((0, false, 0.0));
            let _ = writeln!(
                out,
                "| {} ({}{}) | {} | {} | {} | {} | {} |",
                group(*n as f64, 0),
                group(entries as f64, 0),
                if synthesised { "†" } else { "" },
                show(porin),
                show(ipt),
                show(nft),
                if ipt.is_some() {
                    versus(ipt)
                } else {
                    String::new()
                },
                if nft.is_some() {
                    versus(nft)
                } else {
                    String::new()
                },
            );
        }
        out.push('\n');
        if sizes
            .iter()
            .any(|n| report.results.contains_key(&(*n, Mechanism::PorinPrevious)))
        {
            let _ = writeln!(
                out,
                "{title}, porin's previous object (`{PREVIOUS_OBJECT_ENV}`) in the same runs:\n\n\
                 | rules | porin, previous object | porin, this object | this vs previous |\n\
                 |---:|---:|---:|---:|"
            );
            for n in &sizes {
                let now = spread(&report.results, *n, Mechanism::Porin, pick);
                let before = spread(&report.results, *n, Mechanism::PorinPrevious, pick);
                if before.is_none() {
                    continue;
                }
                let (p, b) = (now.map(|s| s.median), before.map(|s| s.median));
                let versus = if higher_is_better {
                    ratio(p, b)
                } else {
                    ratio(b, p)
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {versus} |",
                    group(*n as f64, 0),
                    show(before),
                    show(now)
                );
            }
            out.push('\n');
        }
        if sizes.iter().any(|n| {
            report
                .results
                .contains_key(&(*n, Mechanism::PassRequestHook))
        }) {
            let _ = writeln!(
                out,
                "{title}, hook cost (`{HOOK_COST_ENV}=1`) in the same runs:\n\n\
                 | rules | floor (no program) | pass-only, request hook | pass-only, reply hook | \
                 pass-only, both hooks | porin, porin_to_endpoint alone | porin, both programs | \
                 iptables-nft | nft |\n\
                 |---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            let base = show(spread(&report.results, 0, Mechanism::Baseline, pick));
            for n in &sizes {
                let cell = |m: Mechanism| show(spread(&report.results, *n, m, pick));
                let _ = writeln!(
                    out,
                    "| {} | {base} | {} | {} | {} | {} | {} | {} | {} |",
                    group(*n as f64, 0),
                    cell(Mechanism::PassRequestHook),
                    cell(Mechanism::PassReplyHook),
                    cell(Mechanism::PassBothHooks),
                    cell(Mechanism::PorinRequestOnly),
                    cell(Mechanism::Porin),
                    cell(Mechanism::Iptables),
                    cell(Mechanism::Nft),
                );
            }
            out.push('\n');
        }
    }
    render_program_stats(report, &sizes, &mut out);
    out.push_str(
        "\"vs porin\": the chain's figure over porin's for latency and CPU, porin's over the \
         chain's for throughput; above 1× porin is ahead, below 1× porin is behind (marked). \
         †: entries synthesised in porin's encoding from a compiled one-rule template, not \
         compiled (the default compile limits refuse that many CIDR rules: selectors × \
         identities exceeds max_selector_evaluations).\n",
    );
    out.push_str(
        "\n#### porin: producing the N-rule policy (once per N, before the runs)\n\n| rules | \
         policy entries | seconds (YAML load + compile; † synthesis) |\n|---:|---:|---:|\n",
    );
    for (n, (entries, synthesised, secs)) in &report.porin_entries {
        let _ = writeln!(
            out,
            "| {} | {}{} | {:.2} |",
            group(*n as f64, 0),
            group(*entries as f64, 0),
            if *synthesised { "†" } else { "" },
            secs
        );
    }
    out
}
