//! `porin agent run|stop|monitor`: porin as the agent of a host whose workloads (microVMs behind
//! taps, containers behind veths) get Cilium's policy model (the library is `porin-agent`).
//!
//! - `run` enforces a policy directory and an inventory on every endpoint that names its
//!   `interface`, live (inotify), until SIGTERM/SIGINT; enforcement then continues (the pinned
//!   links keep the programs attached) and the next `run` adopts it without a gap.
//! - `stop` sends SIGTERM to the running agent (its pid file); `--detach` then removes every
//!   pin, which detaches every endpoint.
//! - `monitor` streams verdicts per endpoint.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::unistd::Pid;
use porin_agent::{Agent, Config};

use crate::output::Status;

/// Arguments of `porin agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(subcommand)]
    command: AgentCommand,
}

#[derive(Debug, Subcommand)]
enum AgentCommand {
    /// Enforce policies on the interfaces the inventory names, live, until stopped.
    Run(RunArgs),
    /// Stop the running agent (enforcement continues unless --detach).
    Stop(StopArgs),
    /// Stream the verdicts of the attached endpoints.
    Monitor(MonitorArgs),
}

/// The log format.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// The default state directory (a bpffs).
const STATE_DIR: &str = "/sys/fs/bpf/porin";
/// The default pid file.
const PID_FILE: &str = "/run/porin-agent.pid";

#[derive(Debug, Args)]
struct RunArgs {
    /// Directory of policy files (CiliumNetworkPolicy, CCNP, NetworkPolicy; *.yaml, *.yml, *.json).
    #[arg(long)]
    policies: PathBuf,
    /// The inventory (porin YAML, manifests or a Cilium dump); endpoints name their `interface`.
    #[arg(long)]
    inventory: PathBuf,
    /// Where the maps and links are pinned (must be on a bpffs).
    #[arg(long, default_value = STATE_DIR)]
    state_dir: PathBuf,
    /// Serve Prometheus metrics on this loopback address (e.g. 127.0.0.1:9964).
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Print what would be attached and applied, and exit without touching the kernel.
    #[arg(long)]
    dry_run: bool,
    /// The pid file `porin agent stop` reads.
    #[arg(long, default_value = PID_FILE)]
    pid_file: PathBuf,
    /// Log format (logs go to standard error; `RUST_LOG` filters them, default `info`).
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Output of --dry-run.
    #[arg(long, value_enum, default_value = "text")]
    format: PlanFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PlanFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
struct StopArgs {
    /// Remove every pinned link and map (detaches every endpoint: their traffic is no longer filtered).
    #[arg(long)]
    detach: bool,
    /// The state directory of the agent.
    #[arg(long, default_value = STATE_DIR)]
    state_dir: PathBuf,
    /// The agent's pid file.
    #[arg(long, default_value = PID_FILE)]
    pid_file: PathBuf,
}

#[derive(Debug, Args)]
struct MonitorArgs {
    /// The state directory of the agent.
    #[arg(long, default_value = STATE_DIR)]
    state_dir: PathBuf,
    /// Show allowed packets too (drops only by default).
    #[arg(long)]
    allows: bool,
    /// Text or JSON lines.
    #[arg(long, value_enum, default_value = "text")]
    format: PlanFormat,
    /// Poll interval in milliseconds.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    duration_secs: Option<u64>,
}

/// Runs `porin agent`.
pub fn run(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        AgentCommand::Run(args) => run_agent(args),
        AgentCommand::Stop(args) => stop(args),
        AgentCommand::Monitor(args) => monitor(args),
    }
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

fn run_agent(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let mut config = Config::new(
        args.policies.clone(),
        args.inventory.clone(),
        args.state_dir.clone(),
    );
    config.metrics = args.metrics;
    if args.dry_run {
        let plan = porin_agent::plan(&config)?;
        let text = match args.format {
            PlanFormat::Text => plan.render(),
            PlanFormat::Json => serde_json::to_string_pretty(&plan)? + "\n",
        };
        std::io::stdout().write_all(text.as_bytes())?;
        return Ok(Status::Clean.into());
    }
    init_logs(args.log_format);
    // SIGTERM and SIGINT are blocked in every thread (the watcher's and the metrics server's
    // inherit the mask) and taken by one thread with sigwait, which asks the loop to stop.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    signals.thread_block().context("blocking SIGTERM/SIGINT")?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            if let Ok(signal) = signals.wait() {
                tracing::info!(signal = %signal, "stopping");
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
    let (agent, applied) = Agent::start(config)?;
    for error in &applied.errors {
        eprintln!("porin: error: {error}");
    }
    std::fs::write(&args.pid_file, format!("{}\n", std::process::id()))
        .with_context(|| format!("writing the pid file {}", args.pid_file.display()))?;
    let result = agent.watch(&stop, false);
    let _ = std::fs::remove_file(&args.pid_file);
    result?;
    Ok(Status::Clean.into())
}

fn read_pid(path: &Path) -> anyhow::Result<Option<Pid>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let pid: i32 = text
        .trim()
        .parse()
        .with_context(|| format!("{}: `{}` is not a process id", path.display(), text.trim()))?;
    if pid <= 1 {
        bail!("{}: `{pid}` is not an agent's process id", path.display());
    }
    Ok(Some(Pid::from_raw(pid)))
}

fn stop(args: &StopArgs) -> anyhow::Result<ExitCode> {
    match read_pid(&args.pid_file)? {
        Some(pid) if kill(pid, None).is_ok() => {
            kill(pid, Signal::SIGTERM).with_context(|| format!("sending SIGTERM to {pid}"))?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while kill(pid, None).is_ok() {
                if Instant::now() > deadline {
                    bail!("the agent (pid {pid}) did not stop within 10 s");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            println!("porin agent (pid {pid}) stopped");
        }
        _ => println!(
            "no porin agent is running (pid file {})",
            args.pid_file.display()
        ),
    }
    if args.detach {
        let detached = porin_agent::detach_all(&args.state_dir)?;
        println!(
            "detached {} endpoint(s){}",
            detached.len(),
            if detached.is_empty() {
                String::new()
            } else {
                format!(": {}", detached.join(", "))
            }
        );
    } else {
        println!(
            "the pinned programs under {} keep enforcing; `porin agent stop --detach` removes them",
            args.state_dir.display()
        );
    }
    Ok(Status::Clean.into())
}

/// Partial: the verdict counters of each endpoint, polled (no per-packet events, so no peer
/// and no deciding rule; the events ring buffer will give those).
fn monitor(args: &MonitorArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let mut previous: std::collections::BTreeMap<(String, String), u64> = Default::default();
    let mut stdout = std::io::stdout().lock();
    loop {
        for endpoint in pinned_endpoints(&args.state_dir)? {
            let Some(counters) = porin_agent::metrics::pinned_counters(&args.state_dir, &endpoint)
            else {
                continue;
            };
            for (counter, value) in counters {
                if counter.is_pass() && !args.allows {
                    continue;
                }
                let reason = porin_agent::metrics::counter_name(counter);
                let key = (endpoint.clone(), reason.clone());
                let before = previous.insert(key, value.packets).unwrap_or(value.packets);
                let delta = value.packets.saturating_sub(before);
                if delta == 0 {
                    continue;
                }
                let verdict = if counter.is_pass() { "pass" } else { "drop" };
                match args.format {
                    PlanFormat::Text => {
                        writeln!(stdout, "{endpoint}: {delta} packet(s) {verdict} ({reason})")?;
                    }
                    PlanFormat::Json => writeln!(
                        stdout,
                        "{}",
                        serde_json::json!({"endpoint": endpoint, "verdict": verdict, "reason": reason, "packets": delta})
                    )?,
                }
            }
        }
        stdout.flush()?;
        if args
            .duration_secs
            .is_some_and(|d| started.elapsed() >= Duration::from_secs(d))
        {
            return Ok(Status::Clean.into());
        }
        std::thread::sleep(Duration::from_millis(args.interval_ms.max(10)));
    }
}

fn pinned_endpoints(state_dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut endpoints = Vec::new();
    let entries =
        std::fs::read_dir(state_dir).with_context(|| format!("reading {}", state_dir.display()))?;
    for entry in entries.flatten() {
        if let Some(name) = entry
            .file_name()
            .to_str()
            .and_then(porin_agent::enforce::endpoint_of_dir)
        {
            endpoints.push(name);
        }
    }
    endpoints.sort();
    Ok(endpoints)
}
