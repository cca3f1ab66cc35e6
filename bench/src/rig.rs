//! The end-to-end rig: two network namespaces joined by one veth pair, an echo server in one,
//! clients in the other, and the filter under test on the server's side.
//!
//! ```text
//!   netns porin-bench-c-<pid>: pbc<pid> 10.213.0.1/24 <==veth==> pbs<pid> 10.213.0.2/24 :netns porin-bench-s-<pid>
//!   (echo clients)                                    filter here: tc clsact on pbs<pid>
//!                                                     (porin) or the netns's INPUT hook (chains)
//! ```
//!
//! Only addresses inside the namespaces are used; the root namespace is never touched apart from
//! a private bpffs mount for porin's pinned programs. Everything created is registered before the
//! next step, and [`Rig`]'s `Drop` removes it even after a failure; [`remove_leftovers`] removes
//! rigs of earlier runs that were killed before their `Drop` ran (names carry the pid).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use porin_kernel::attach::{Hook, TcxLink};
use porin_kernel::{Datapath, Direction, Program};

use crate::cmd::{in_netns, run};
use crate::cpu;
use crate::echo::{self, LatencyResult, READY, ThroughputResult};
use crate::workload::{ChainAt, ECHO_PORT, NFT_TABLE, SERVER};

/// The workload of a run: what the clients send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Traffic {
    /// UDP echo, `window` requests in flight per sender (issue #7's rig).
    Udp,
    /// UDP echo as [`Traffic::Udp`], with batched system calls: each window in one
    /// `sendmmsg(2)`, replies by `recvmmsg(2)`, the server batching the same way
    /// ([`UDP_BATCH`] datagrams per call).
    UdpBatched,
    /// TCP request/response, one long-lived connection per sender.
    TcpRr,
    /// TCP connection churn: a new connection per request.
    Churn,
}

impl Traffic {
    /// The transport the policy must allow.
    pub fn proto(self) -> crate::workload::Proto {
        match self {
            Self::Udp | Self::UdpBatched => crate::workload::Proto::Udp,
            Self::TcpRr | Self::Churn => crate::workload::Proto::Tcp,
        }
    }

    /// The client roles' `--mode` (TCP only).
    fn tcp_mode(self) -> Option<&'static str> {
        match self {
            Self::Udp | Self::UdpBatched => None,
            Self::TcpRr => Some("rr"),
            Self::Churn => Some("churn"),
        }
    }

    /// Human name.
    pub fn label(self) -> &'static str {
        match self {
            Self::Udp => "UDP echo",
            Self::UdpBatched => "UDP echo, batched system calls (sendmmsg/recvmmsg)",
            Self::TcpRr => "TCP request/response",
            Self::Churn => "TCP connection churn",
        }
    }

    /// The arguments of the latency client role for `target`.
    pub fn latency_args(self, target: &str, samples: usize, warmup: usize) -> Vec<String> {
        let mut args = match self.tcp_mode() {
            None => vec!["latency".to_owned()],
            Some(mode) => vec!["tcp-latency".to_owned(), "--mode".into(), mode.into()],
        };
        args.extend([
            "--target".into(),
            target.to_owned(),
            "--samples".into(),
            samples.to_string(),
            "--warmup".into(),
            warmup.to_string(),
        ]);
        args
    }

    /// The arguments of the throughput client role for `target` (`window` is UDP's).
    pub fn throughput_args(
        self,
        target: &str,
        senders: usize,
        window: usize,
        secs: f64,
    ) -> Vec<String> {
        let mut args = match self.tcp_mode() {
            None => {
                let mut args = vec![
                    "throughput".to_owned(),
                    "--window".into(),
                    window.to_string(),
                ];
                if self == Self::UdpBatched {
                    args.push("--batched".into());
                }
                args
            }
            Some(mode) => vec!["tcp-throughput".to_owned(), "--mode".into(), mode.into()],
        };
        args.extend([
            "--target".into(),
            target.to_owned(),
            "--senders".into(),
            senders.to_string(),
            "--secs".into(),
            secs.to_string(),
        ]);
        args
    }
}

/// Which tc hook of the filtered device sees the endpoint's inbound traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSide {
    /// The endpoint's own device (the namespace rigs attach inside the server namespace): its
    /// tc ingress sees what is delivered to the endpoint, so `porin_to_endpoint` goes there.
    Endpoint,
    /// The host's end of the endpoint's link (a microVM's tap, a pod's host-side veth, where
    /// Cilium attaches): tc ingress sees what the endpoint sends, so `porin_from_endpoint` goes
    /// on ingress and `porin_to_endpoint` on egress.
    Host,
}

/// How the rigs attach porin's programs to the filtered device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// tcx BPF links (kernel 6.6+), what `porin agent` attaches with (DATAPATH.md §8): no
    /// qdisc, one program call per hook. The default.
    Tcx,
    /// A clsact qdisc and `tc filter add ... bpf da` (cls_bpf in direct-action mode: the
    /// classifier and then the program per hook), the harness of the earlier figures.
    Clsact,
}

/// The environment variable choosing [`AttachMode`]: `tcx` (default) or `clsact`.
pub const ATTACH_ENV: &str = "PORIN_BENCH_ATTACH";

impl AttachMode {
    /// From [`ATTACH_ENV`].
    pub fn from_env() -> Result<Self> {
        match std::env::var(ATTACH_ENV).as_deref() {
            Err(_) | Ok("" | "tcx") => Ok(Self::Tcx),
            Ok("clsact") => Ok(Self::Clsact),
            Ok(other) => bail!("{ATTACH_ENV}={other}: expected `tcx` or `clsact`"),
        }
    }

    /// Human name, for the tables' notes.
    pub fn label(self) -> &'static str {
        match self {
            Self::Tcx => "tcx links",
            Self::Clsact => "clsact + cls_bpf direct-action",
        }
    }
}

/// The endpoint programs of `datapath`'s object, each with the path it filters. Programs are
/// taken from the object, not assumed: an object without one of them yields only the other.
pub fn endpoint_programs(datapath: &Datapath) -> Result<Vec<(Direction, &Program)>> {
    let mut programs = Vec::new();
    for name in datapath.object().program_names() {
        let direction = match name {
            n if n == Direction::ToEndpoint.program_name() => Direction::ToEndpoint,
            n if n == Direction::FromEndpoint.program_name() => Direction::FromEndpoint,
            // Not a program of the endpoint's two paths (nothing to attach on this device).
            _ => continue,
        };
        programs.push((direction, datapath.program(direction)?));
    }
    Ok(programs)
}

/// The hook of a device on `side` that carries `direction`'s packets.
fn hook_of(side: DeviceSide, direction: Direction) -> Hook {
    match (side, direction) {
        (DeviceSide::Endpoint, Direction::ToEndpoint)
        | (DeviceSide::Host, Direction::FromEndpoint) => Hook::Ingress,
        (DeviceSide::Endpoint, Direction::FromEndpoint)
        | (DeviceSide::Host, Direction::ToEndpoint) => Hook::Egress,
    }
}

fn link_pin(bpffs: &std::path::Path, direction: Direction, tag: &str) -> PathBuf {
    bpffs.join(format!("link-{}-{tag}", direction.program_name()))
}

/// Attaches `programs` (each on the hook of its path, [`endpoint_programs`] for porin's) to
/// `dev` in namespace `ns` the way `mode` says ([`attach_clsact`] or tcx links pinned in
/// `bpffs`, which [`detach`] removes). Returns how many programs were attached.
#[allow(clippy::too_many_arguments)]
pub fn attach(
    mode: AttachMode,
    ns: &str,
    dev: &str,
    side: DeviceSide,
    programs: &[(Direction, &Program)],
    bpffs: &std::path::Path,
    tag: &str,
) -> Result<usize> {
    if programs.is_empty() {
        bail!("no endpoint program to attach");
    }
    if mode == AttachMode::Clsact {
        return attach_clsact(ns, dev, side, programs, bpffs, tag);
    }
    let netns = PathBuf::from(format!("/run/netns/{ns}"));
    for (direction, program) in programs {
        let link = TcxLink::attach_in_netns(program, &netns, dev, hook_of(side, *direction))?;
        // The pin keeps the link (and the attachment) after `link` is dropped.
        link.pin(&link_pin(bpffs, *direction, tag))?;
    }
    Ok(programs.len())
}

/// Detaches what [`attach`] attached: the clsact qdisc, or the pinned tcx links (a link whose
/// last pin and fd are gone detaches).
pub fn detach(
    mode: AttachMode,
    ns: &str,
    dev: &str,
    bpffs: &std::path::Path,
    tag: &str,
) -> Result<()> {
    match mode {
        AttachMode::Clsact => {
            in_netns(ns, "tc", &["qdisc", "del", "dev", dev, "clsact"], None).map(drop)
        }
        AttachMode::Tcx => {
            for direction in [Direction::ToEndpoint, Direction::FromEndpoint] {
                let pin = link_pin(bpffs, direction, tag);
                if pin.exists() {
                    std::fs::remove_file(&pin)
                        .with_context(|| format!("cannot remove {}", pin.display()))?;
                }
            }
            Ok(())
        }
    }
}

/// Attaches `programs` to the clsact hooks of `dev` in namespace `ns`, through pins in `bpffs`
/// named after `tag`. Returns how many programs were attached.
pub fn attach_clsact(
    ns: &str,
    dev: &str,
    side: DeviceSide,
    programs: &[(Direction, &Program)],
    bpffs: &std::path::Path,
    tag: &str,
) -> Result<usize> {
    let mut hooks = Vec::new();
    for (direction, program) in programs {
        let pin = bpffs.join(format!("{}-{tag}", direction.program_name()));
        let pin = pin.to_string_lossy().into_owned();
        if !std::path::Path::new(&pin).exists() {
            program.pin(&pin)?;
        }
        hooks.push((hook_of(side, *direction).as_str(), pin));
    }
    if hooks.is_empty() {
        bail!("no endpoint program to attach");
    }
    in_netns(ns, "tc", &["qdisc", "add", "dev", dev, "clsact"], None)?;
    for (hook, pin) in &hooks {
        in_netns(
            ns,
            "tc",
            &[
                "filter", "add", "dev", dev, hook, "bpf", "da", "pinned", pin,
            ],
            None,
        )?;
    }
    Ok(hooks.len())
}

/// Removes the pins [`attach_clsact`] and [`attach`] made for `tag`.
pub fn unpin_clsact(bpffs: &std::path::Path, tag: &str) {
    for name in [Direction::ToEndpoint, Direction::FromEndpoint] {
        let _ = std::fs::remove_file(bpffs.join(format!("{}-{tag}", name.program_name())));
        let _ = std::fs::remove_file(link_pin(bpffs, name, tag));
    }
}

/// Packets the last rule of the chains at `at` counted, in namespace `ns`
/// (`iptables: true` reads iptables-nft's listing, else the native nft table's).
pub fn final_rule_packets(ns: &str, at: &ChainAt, iptables: bool) -> Result<u64> {
    let chain = at.rule_chain(iptables);
    if iptables {
        let listing = in_netns(ns, "iptables-nft", &["-L", chain, "-v", "-n", "-x"], None)?;
        return listing
            .lines()
            .rev()
            .find(|l| l.contains(" dpt:"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .context("cannot read the iptables chain's counters");
    }
    let listing = in_netns(ns, "nft", &["list", "chain", "ip", NFT_TABLE, chain], None)?;
    listing
        .lines()
        .find(|l| l.contains("counter packets"))
        .and_then(|l| {
            let rest = l.split("counter packets ").nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .context("the nft chain has no counted final rule")
}

/// Starts `role args` of this binary in namespace `ns` and waits (30 s at most) for its
/// [`READY`] line; returns the child and its pid (nsenter execs it, so the pid is the role's).
pub fn spawn_ready(ns: &str, args: &[String]) -> Result<(Child, u32)> {
    let exe = std::env::current_exe().context("current_exe")?;
    let mut child = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{ns}"))
        .arg(exe)
        .arg("role")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawn echo server")?;
    let stdout = child.stdout.take().context("server stdout")?;
    let pid = child.id();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains(READY) {
                let _ = ready_tx.send(());
            }
        }
    });
    if ready_rx.recv_timeout(Duration::from_secs(30)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        bail!("echo server {args:?} not ready within 30 s");
    }
    Ok((child, pid))
}

/// Runs a client role in namespace `ns` and returns its stdout.
pub fn client(ns: &str, args: &[String]) -> Result<String> {
    let exe = std::env::current_exe().context("current_exe")?;
    let output = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{ns}"))
        .arg(exe)
        .arg("role")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("spawn client")?;
    if !output.status.success() {
        bail!(
            "client {args:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A veth pair with one end (device, namespace) in each namespace.
pub fn add_veth(a: (&str, &str), b: (&str, &str)) -> Result<()> {
    run(
        "ip",
        &[
            "link", "add", a.0, "netns", a.1, "type", "veth", "peer", "name", b.0, "netns", b.1,
        ],
    )
    .map(drop)
}

/// The arguments of an echo server role (`server` or `tcp-server`) on the rig's address.
fn server_args(role: &str, threads: usize) -> Vec<String> {
    [
        role,
        "--addr",
        &format!("{SERVER}:{ECHO_PORT}"),
        "--threads",
        &threads.to_string(),
        "--max-secs",
        "7200",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Lets the client namespace `ns` open thousands of connections a second: the whole ephemeral
/// port range and reuse of its TIME_WAIT ports (the churn client closes first).
pub fn allow_churn(ns: &str) -> Result<()> {
    for setting in [
        "net.ipv4.ip_local_port_range=1024 65535",
        "net.ipv4.tcp_tw_reuse=1",
    ] {
        in_netns(ns, "sysctl", &["-q", "-w", setting], None)?;
    }
    Ok(())
}

/// Datagrams per `recvmmsg(2)` / `sendmmsg(2)` of [`Traffic::UdpBatched`]'s server (its
/// clients send their whole window, 16 by default, per call).
pub const UDP_BATCH: usize = 16;

/// Prefix of every namespace name this harness creates.
pub const NETNS_PREFIX: &str = "porin-bench-";
/// Prefix of the private bpffs mount points.
const BPFFS_PREFIX: &str = "porin-bench-bpffs-";

/// The namespaces, the veth pair and the bpffs mount; removed on drop.
pub struct Rig {
    /// Client namespace.
    pub ns_client: String,
    /// Server namespace (the filtered side).
    pub ns_server: String,
    /// The server's veth end.
    pub dev_server: String,
    bpffs: PathBuf,
    mounted: bool,
    namespaces: Vec<String>,
    server: Option<Child>,
    /// Server process id (nsenter execs it, so the pid is the server's).
    server_pid: u32,
    /// The TCP echo server, once started ([`Rig::start_tcp_server`]).
    tcp_server: Option<Child>,
    tcp_server_pid: u32,
}

impl Rig {
    /// Builds the rig and starts the echo server (`server_threads` threads).
    pub fn new(server_threads: usize) -> Result<Self> {
        Self::with_udp_server(server_threads, 1)
    }

    /// As [`Rig::new`], the UDP server taking up to `batch` datagrams per system call
    /// (1: one per call, [`Traffic::Udp`]'s server; [`UDP_BATCH`]: [`Traffic::UdpBatched`]'s).
    pub fn with_udp_server(server_threads: usize, batch: usize) -> Result<Self> {
        remove_leftovers();
        let pid = std::process::id();
        let mut rig = Self {
            ns_client: format!("{NETNS_PREFIX}c-{pid}"),
            ns_server: format!("{NETNS_PREFIX}s-{pid}"),
            dev_server: format!("pbs{pid}"),
            bpffs: std::env::temp_dir().join(format!("{BPFFS_PREFIX}{pid}")),
            mounted: false,
            namespaces: Vec::new(),
            server: None,
            server_pid: 0,
            tcp_server: None,
            tcp_server_pid: 0,
        };
        let dev_client = format!("pbc{pid}");
        for ns in [rig.ns_client.clone(), rig.ns_server.clone()] {
            run("ip", &["netns", "add", &ns])?;
            rig.namespaces.push(ns);
        }
        add_veth(
            (&dev_client, &rig.ns_client),
            (&rig.dev_server, &rig.ns_server),
        )?;
        for (ns, dev, addr) in [
            (&rig.ns_client, &dev_client, crate::workload::CLIENT),
            (&rig.ns_server, &rig.dev_server, SERVER),
        ] {
            run(
                "ip",
                &["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev],
            )?;
            run("ip", &["-n", ns, "link", "set", dev, "up"])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        std::fs::create_dir_all(&rig.bpffs).context("mkdir bpffs")?;
        run("mount", &["-t", "bpf", "bpf", &rig.bpffs.to_string_lossy()])?;
        rig.mounted = true;
        rig.start_server(server_threads, batch)?;
        Ok(rig)
    }

    fn start_server(&mut self, threads: usize, batch: usize) -> Result<()> {
        let mut args = server_args("server", threads);
        args.extend(["--batch".to_owned(), batch.to_string()]);
        let (child, pid) = spawn_ready(&self.ns_server, &args)?;
        self.server_pid = pid;
        self.server = Some(child);
        Ok(())
    }

    /// Starts the TCP echo server (same address and port as the UDP one) with `threads`
    /// connection threads, and lets the client namespace churn connections.
    pub fn start_tcp_server(&mut self, threads: usize) -> Result<()> {
        if self.tcp_server.is_some() {
            return Ok(());
        }
        allow_churn(&self.ns_client)?;
        let (child, pid) = spawn_ready(&self.ns_server, &server_args("tcp-server", threads))?;
        self.tcp_server_pid = pid;
        self.tcp_server = Some(child);
        Ok(())
    }

    fn client(&self, args: &[String]) -> Result<String> {
        client(&self.ns_client, args)
    }

    /// Latency of `traffic` with one request in flight.
    pub fn latency_of(
        &self,
        traffic: Traffic,
        samples: usize,
        warmup: usize,
    ) -> Result<LatencyResult> {
        let target = format!("{SERVER}:{ECHO_PORT}");
        echo::parse_result(&self.client(&traffic.latency_args(&target, samples, warmup))?)
    }

    /// Throughput of `traffic` from `senders` concurrent clients, with the CPU time of client,
    /// server and ksoftirqd over the run.
    pub fn throughput_of(
        &self,
        traffic: Traffic,
        senders: usize,
        window: usize,
        secs: f64,
    ) -> Result<Throughput> {
        let server_pid = match traffic {
            Traffic::Udp | Traffic::UdpBatched => self.server_pid,
            Traffic::TcpRr | Traffic::Churn => self.tcp_server_pid,
        };
        let target = format!("{SERVER}:{ECHO_PORT}");
        let args = traffic.throughput_args(&target, senders, window, secs);
        let softirqd = cpu::ksoftirqd_pids();
        let server_before = cpu::process_ns(server_pid);
        let softirq_before = cpu::ksoftirqd_ns(&softirqd);
        let client: ThroughputResult = echo::parse_result(&self.client(&args)?)?;
        let server_ns = cpu::process_ns(server_pid).saturating_sub(server_before);
        let softirq_ns = cpu::ksoftirqd_ns(&softirqd).saturating_sub(softirq_before);
        Throughput::of(&client, server_ns + softirq_ns)
    }

    /// Attaches `programs`, each on the server device's hook of its path (ingress =
    /// to_endpoint, egress = from_endpoint; porin's: [`endpoint_programs`]), as
    /// [`AttachMode::from_env`] says.
    pub fn attach_programs(&self, programs: &[(Direction, &Program)], tag: &str) -> Result<usize> {
        attach(
            AttachMode::from_env()?,
            &self.ns_server,
            &self.dev_server,
            DeviceSide::Endpoint,
            programs,
            &self.bpffs,
            tag,
        )
    }

    /// Detaches what [`Rig::attach_programs`] attached for `tag`.
    pub fn detach_porin(&self, tag: &str) -> Result<()> {
        detach(
            AttachMode::from_env()?,
            &self.ns_server,
            &self.dev_server,
            &self.bpffs,
            tag,
        )
    }

    /// Removes the pins of one datapath (after its last detach).
    pub fn unpin(&self, tag: &str) {
        unpin_clsact(&self.bpffs, tag);
    }

    /// Installs an iptables (nft backend) ruleset in the server namespace.
    pub fn install_iptables(&self, restore: &str) -> Result<()> {
        in_netns(&self.ns_server, "iptables-nft-restore", &[], Some(restore)).map(drop)
    }

    /// Installs a native nft ruleset in the server namespace.
    pub fn install_nft(&self, script: &str) -> Result<()> {
        in_netns(&self.ns_server, "nft", &["-f", "-"], Some(script)).map(drop)
    }

    /// Removes every netfilter table of the server namespace (iptables-nft's and ours).
    pub fn flush_netfilter(&self) -> Result<()> {
        in_netns(&self.ns_server, "nft", &["flush", "ruleset"], None).map(drop)
    }
}

/// One throughput run.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Completed round trips per second.
    pub replies_per_sec: f64,
    /// CPU nanoseconds (client + server threads + ksoftirqd) per round trip.
    pub cpu_ns_per_round_trip: f64,
}

impl Throughput {
    /// From the client's result and the CPU time of everything else counted (server,
    /// ksoftirqd).
    pub fn of(client: &ThroughputResult, other_cpu_ns: u64) -> Result<Self> {
        if client.replies == 0 {
            bail!("no echo replies during the throughput run (filter drops the traffic?)");
        }
        Ok(Self {
            replies_per_sec: client.replies as f64 / (client.elapsed_ns as f64 / 1e9),
            cpu_ns_per_round_trip: (client.cpu_ns + other_cpu_ns) as f64 / client.replies as f64,
        })
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for mut server in [self.server.take(), self.tcp_server.take()]
            .into_iter()
            .flatten()
        {
            let _ = server.kill();
            let _ = server.wait();
        }
        // Deleting a namespace destroys its veth end, the pair, its qdiscs and its rules.
        for ns in self.namespaces.drain(..).rev() {
            let _ = run("ip", &["netns", "del", &ns]);
        }
        if self.mounted {
            let _ = run("umount", &[&self.bpffs.to_string_lossy()]);
        }
        let _ = std::fs::remove_dir(&self.bpffs);
    }
}

/// Removes namespaces and bpffs mounts of earlier runs whose process is gone.
pub fn remove_leftovers() {
    let dead = |suffix: &str| {
        let pid = suffix.rsplit('-').next().unwrap_or("");
        !pid.is_empty()
            && pid.bytes().all(|b| b.is_ascii_digit())
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
    };
    if let Ok(list) = run("ip", &["netns", "list"]) {
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if name.strip_prefix(NETNS_PREFIX).is_some_and(dead) {
                let _ = run("ip", &["netns", "del", name]);
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.strip_prefix(BPFFS_PREFIX).is_some_and(dead) {
                let path = entry.path().to_string_lossy().into_owned();
                let _ = run("umount", &[&path]);
                let _ = std::fs::remove_dir(&path);
            }
            // The microVM rig's private directory (its bpffs is mounted inside).
            if name.strip_prefix(crate::vm::DIR_PREFIX).is_some_and(dead) {
                let bpffs = entry.path().join("bpffs");
                let _ = run("umount", &[&bpffs.to_string_lossy()]);
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}
