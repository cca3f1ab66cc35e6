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
use porin_kernel::{Datapath, Direction};

use crate::cmd::{in_netns, run};
use crate::cpu;
use crate::echo::{self, LatencyResult, READY, ThroughputResult};
use crate::workload::{ECHO_PORT, NFT_TABLE, SERVER};

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
}

impl Rig {
    /// Builds the rig and starts the echo server (`server_threads` threads).
    pub fn new(server_threads: usize) -> Result<Self> {
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
        };
        let dev_client = format!("pbc{pid}");
        for ns in [rig.ns_client.clone(), rig.ns_server.clone()] {
            run("ip", &["netns", "add", &ns])?;
            rig.namespaces.push(ns);
        }
        run(
            "ip",
            &[
                "link",
                "add",
                &dev_client,
                "netns",
                &rig.ns_client,
                "type",
                "veth",
                "peer",
                "name",
                &rig.dev_server,
                "netns",
                &rig.ns_server,
            ],
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
        rig.start_server(server_threads)?;
        Ok(rig)
    }

    fn start_server(&mut self, threads: usize) -> Result<()> {
        let exe = std::env::current_exe().context("current_exe")?;
        let mut child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns_server))
            .arg(exe)
            .args([
                "role",
                "server",
                "--addr",
                &format!("{SERVER}:{ECHO_PORT}"),
                "--threads",
                &threads.to_string(),
                "--max-secs",
                "7200",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("spawn echo server")?;
        let stdout = child.stdout.take().context("server stdout")?;
        self.server_pid = child.id();
        self.server = Some(child);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains(READY) {
                    let _ = ready_tx.send(());
                }
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| anyhow::anyhow!("echo server not ready within 30 s"))
    }

    /// Runs a client role in the client namespace and returns its stdout.
    fn client(&self, args: &[String]) -> Result<String> {
        let exe = std::env::current_exe().context("current_exe")?;
        let output = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns_client))
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

    /// Latency with one request in flight.
    pub fn latency(&self, samples: usize, warmup: usize) -> Result<LatencyResult> {
        let stdout = self.client(&[
            "latency".into(),
            "--target".into(),
            format!("{SERVER}:{ECHO_PORT}"),
            "--samples".into(),
            samples.to_string(),
            "--warmup".into(),
            warmup.to_string(),
        ])?;
        echo::parse_result(&stdout)
    }

    /// Throughput of `senders` concurrent flows, with the CPU time of client, server and
    /// ksoftirqd over the run.
    pub fn throughput(&self, senders: usize, window: usize, secs: f64) -> Result<Throughput> {
        let softirqd = cpu::ksoftirqd_pids();
        let server_before = cpu::process_ns(self.server_pid);
        let softirq_before = cpu::ksoftirqd_ns(&softirqd);
        let stdout = self.client(&[
            "throughput".into(),
            "--target".into(),
            format!("{SERVER}:{ECHO_PORT}"),
            "--senders".into(),
            senders.to_string(),
            "--window".into(),
            window.to_string(),
            "--secs".into(),
            secs.to_string(),
        ])?;
        let client: ThroughputResult = echo::parse_result(&stdout)?;
        let server_ns = cpu::process_ns(self.server_pid).saturating_sub(server_before);
        let softirq_ns = cpu::ksoftirqd_ns(&softirqd).saturating_sub(softirq_before);
        if client.replies == 0 {
            bail!("no echo replies during the throughput run (filter drops the traffic?)");
        }
        Ok(Throughput {
            replies_per_sec: client.replies as f64 / (client.elapsed_ns as f64 / 1e9),
            cpu_ns_per_round_trip: (client.cpu_ns + server_ns + softirq_ns) as f64
                / client.replies as f64,
        })
    }

    /// Attaches porin's two programs to the server device's clsact hooks, as the e2e test and
    /// an agent do (ingress = to_endpoint, egress = from_endpoint), through pinned programs.
    pub fn attach_porin(&self, datapath: &Datapath, tag: &str) -> Result<()> {
        let to = self.bpffs.join(format!("to-{tag}"));
        let from = self.bpffs.join(format!("from-{tag}"));
        let (to, from) = (
            to.to_string_lossy().into_owned(),
            from.to_string_lossy().into_owned(),
        );
        for (direction, path) in [
            (Direction::ToEndpoint, &to),
            (Direction::FromEndpoint, &from),
        ] {
            if !std::path::Path::new(path).exists() {
                datapath.program(direction)?.pin(path)?;
            }
        }
        let dev = self.dev_server.as_str();
        in_netns(
            &self.ns_server,
            "tc",
            &["qdisc", "add", "dev", dev, "clsact"],
            None,
        )?;
        in_netns(
            &self.ns_server,
            "tc",
            &[
                "filter", "add", "dev", dev, "ingress", "bpf", "da", "pinned", &to,
            ],
            None,
        )?;
        in_netns(
            &self.ns_server,
            "tc",
            &[
                "filter", "add", "dev", dev, "egress", "bpf", "da", "pinned", &from,
            ],
            None,
        )?;
        Ok(())
    }

    /// Removes the clsact qdisc (and with it both filters).
    pub fn detach_porin(&self) -> Result<()> {
        in_netns(
            &self.ns_server,
            "tc",
            &["qdisc", "del", "dev", &self.dev_server, "clsact"],
            None,
        )
        .map(drop)
    }

    /// Removes the pins of one datapath (after its last detach).
    pub fn unpin(&self, tag: &str) {
        for name in [format!("to-{tag}"), format!("from-{tag}")] {
            let _ = std::fs::remove_file(self.bpffs.join(name));
        }
    }

    /// Installs an iptables (nft backend) ruleset in the server namespace.
    pub fn install_iptables(&self, restore: &str) -> Result<()> {
        in_netns(&self.ns_server, "iptables-nft-restore", &[], Some(restore)).map(drop)
    }

    /// Installs a native nft ruleset in the server namespace.
    pub fn install_nft(&self, script: &str) -> Result<()> {
        in_netns(&self.ns_server, "nft", &["-f", "-"], Some(script)).map(drop)
    }

    /// Packets the native nft chain's final (accepting) rule counted.
    pub fn nft_final_rule_packets(&self) -> Result<u64> {
        let listing = in_netns(
            &self.ns_server,
            "nft",
            &["list", "chain", "ip", NFT_TABLE, "input"],
            None,
        )?;
        listing
            .lines()
            .find(|l| l.contains("counter packets"))
            .and_then(|l| {
                let rest = l.split("counter packets ").nth(1)?;
                rest.split_whitespace().next()?.parse().ok()
            })
            .context("the nft chain has no counted final rule")
    }

    /// Packets the iptables chain's final rule counted (`iptables -L INPUT -v`, last rule).
    pub fn iptables_final_rule_packets(&self) -> Result<u64> {
        let listing = in_netns(
            &self.ns_server,
            "iptables-nft",
            &["-L", "INPUT", "-v", "-n", "-x"],
            None,
        )?;
        listing
            .lines()
            .rev()
            .find(|l| l.contains("udp dpt:"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .context("cannot read the iptables chain's counters")
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

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(mut server) = self.server.take() {
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
        }
    }
}
