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
    /// The agent's policy directory (to explain each verdict with the rule that decided).
    #[arg(long)]
    policies: PathBuf,
    /// The agent's inventory.
    #[arg(long)]
    inventory: PathBuf,
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
    #[arg(long, default_value_t = 200)]
    interval_ms: u64,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
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

/// Streams the endpoints' verdict events (their pinned `porin_events`), each explained against
/// a compilation of the agent's files.
fn monitor(args: &MonitorArgs) -> anyhow::Result<ExitCode> {
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    signals.thread_block().context("blocking SIGTERM/SIGINT")?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = signals.wait();
            stop.store(true, Ordering::Relaxed);
        });
    }
    let config = Config::new(
        args.policies.clone(),
        args.inventory.clone(),
        args.state_dir.clone(),
    );
    let compiled = Arc::new(porin_agent::agent::compile(&config)?);
    let selection = porin_kernel::events::EventSelection {
        drops: true,
        allows: args.allows,
    };
    let mut monitor = porin_agent::monitor::Monitor::open(&args.state_dir, compiled, selection)?;
    eprintln!("monitoring {}", monitor.endpoints().join(", "));
    let started = Instant::now();
    let mut stdout = std::io::stdout().lock();
    let result = loop {
        let events = match monitor.poll() {
            Ok(events) => events,
            Err(e) => break Err(e.into()),
        };
        for event in events {
            let line = match args.format {
                PlanFormat::Text => event.render(),
                PlanFormat::Json => serde_json::to_string(&event)?,
            };
            writeln!(stdout, "{line}")?;
        }
        stdout.flush()?;
        if stop.load(Ordering::Relaxed)
            || args
                .duration_secs
                .is_some_and(|d| started.elapsed() >= Duration::from_secs(d))
        {
            break Ok(Status::Clean.into());
        }
        std::thread::sleep(Duration::from_millis(args.interval_ms.max(10)));
    };
    monitor.close()?;
    result
}
