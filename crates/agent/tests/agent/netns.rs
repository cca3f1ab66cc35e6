//! The topology: a "host" network namespace holding the endpoints' host-side devices, and one
//! namespace per endpoint behind a veth pair, routed through the host.
//!
//! ```text
//!   ns C (client) eth0 10.231.1.2 <==veth==> hv1 10.231.1.1 ┐
//!                                                           ├ ns H (host, forwarding; the agent runs here)
//!   ns S (server) eth0 10.231.2.2 <==veth==> hv2 10.231.2.1 ┤
//!   guest (tap.rs)     10.231.3.2 <==tap===> pt7 10.231.3.1 ┘   (a microVM's tap)
//! ```
//!
//! The tap's guest is the test process on the tap's queue (`tap.rs`); tests that do not start
//! one leave the tap without carrier.
//!
//! Names carry the test process's pid and a counter, so concurrent tests and runs never share a
//! namespace; addresses live inside the namespaces only. `Drop` removes everything (the
//! namespaces take their devices with them; the private bpffs takes the pins).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

pub const CLIENT_IP: &str = "10.231.1.2";
pub const SERVER_IP: &str = "10.231.2.2";
/// The microVM behind tap pt7 (the test's guest, `tap.rs`).
pub const TAP_GUEST_IP: &str = "10.231.3.2";
/// The tap's host-side address (the guest's gateway).
pub const TAP_GATEWAY: &str = "10.231.3.1";

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Whether this process can build the topology; `false` prints `SKIPPED` (and panics under CI).
pub fn can_run(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|u| u.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false);
    let tools = Command::new("ip").arg("-V").output().is_ok();
    if root && tools {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: needs root and iproute2 (CI=true: failing instead of skipping)"
    );
    eprintln!("SKIPPED {test}: needs root and iproute2");
    false
}

pub fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The namespaces, devices and bpffs of one test.
pub struct Topology {
    pub host: String,
    pub client: String,
    pub server: String,
    /// The private bpffs mount.
    pub bpffs: PathBuf,
    /// A scratch directory (policies, inventory).
    pub scratch: PathBuf,
}

impl Topology {
    pub fn new() -> Self {
        let id = format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let scratch = std::env::temp_dir().join(format!("porin-agent-test-{id}"));
        let topology = Self {
            host: format!("pat-h-{id}"),
            client: format!("pat-c-{id}"),
            server: format!("pat-s-{id}"),
            bpffs: scratch.join("bpf"),
            scratch,
        };
        std::fs::create_dir_all(&topology.bpffs).unwrap();
        for ns in [&topology.host, &topology.client, &topology.server] {
            run("ip", &["netns", "add", ns]);
        }
        let (h, c, s) = (&topology.host, &topology.client, &topology.server);
        run(
            "ip",
            &[
                "link", "add", "hv1", "netns", h, "type", "veth", "peer", "name", "eth0", "netns",
                c,
            ],
        );
        run(
            "ip",
            &[
                "link", "add", "hv2", "netns", h, "type", "veth", "peer", "name", "eth0", "netns",
                s,
            ],
        );
        run(
            "ip",
            &["-n", h, "tuntap", "add", "dev", "pt7", "mode", "tap"],
        );
        run(
            "ip",
            &["-n", h, "addr", "add", "10.231.1.1/24", "dev", "hv1"],
        );
        run(
            "ip",
            &["-n", h, "addr", "add", "10.231.2.1/24", "dev", "hv2"],
        );
        run(
            "ip",
            &[
                "-n",
                h,
                "addr",
                "add",
                &format!("{TAP_GATEWAY}/24"),
                "dev",
                "pt7",
            ],
        );
        run(
            "ip",
            &[
                "-n",
                c,
                "addr",
                "add",
                &format!("{CLIENT_IP}/24"),
                "dev",
                "eth0",
            ],
        );
        run(
            "ip",
            &[
                "-n",
                s,
                "addr",
                "add",
                &format!("{SERVER_IP}/24"),
                "dev",
                "eth0",
            ],
        );
        for (ns, dev) in [
            (h, "hv1"),
            (h, "hv2"),
            (h, "pt7"),
            (h, "lo"),
            (c, "eth0"),
            (c, "lo"),
            (s, "eth0"),
            (s, "lo"),
        ] {
            run("ip", &["-n", ns, "link", "set", dev, "up"]);
        }
        run(
            "ip",
            &["-n", c, "route", "add", "default", "via", "10.231.1.1"],
        );
        run(
            "ip",
            &["-n", s, "route", "add", "default", "via", "10.231.2.1"],
        );
        run(
            "ip",
            &["netns", "exec", h, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
        );
        // IPv4 only: no MLD reports or router solicitations, whose drops would blur the
        // counters the swap test compares with the probes.
        for ns in [h, c, s] {
            for key in ["all", "default", "lo"] {
                let setting = format!("net.ipv6.conf.{key}.disable_ipv6=1");
                run("ip", &["netns", "exec", ns, "sysctl", "-qw", &setting]);
            }
        }
        run(
            "mount",
            &["-t", "bpf", "bpf", topology.bpffs.to_str().unwrap()],
        );
        topology
    }

    /// The agent's configuration: `policies`, the end-to-end fixture's inventory
    /// (`vms.test.yaml`), the state directory.
    pub fn config(&self, policies: &Path) -> porin_agent::Config {
        porin_agent::Config::new(
            policies.to_path_buf(),
            fixtures().join("vms.test.yaml"),
            self.state_dir(),
        )
    }

    /// Starts the agent on [`Topology::config`] in the calling thread's namespace; every
    /// endpoint must be attached without error.
    pub fn start_agent(&self, policies: &Path) -> porin_agent::Agent {
        let (agent, applied) = porin_agent::Agent::start(self.config(policies)).unwrap();
        assert!(applied.errors.is_empty(), "{:?}", applied.errors);
        agent
    }

    /// The agent's state directory (on the private bpffs).
    pub fn state_dir(&self) -> PathBuf {
        self.bpffs.join("state")
    }

    /// Copies the fixture's policies of `version` into a fresh policy directory.
    pub fn policies(&self, version: &str) -> PathBuf {
        self.policies_from(&[version])
    }

    /// Copies every policy file of the fixture's `versions` directories into a fresh policy
    /// directory.
    pub fn policies_from(&self, versions: &[&str]) -> PathBuf {
        let dir = self.scratch.join("policies");
        std::fs::create_dir_all(&dir).unwrap();
        for version in versions {
            for entry in std::fs::read_dir(fixtures().join("policies").join(version)).unwrap() {
                let path = entry.unwrap().path();
                std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
            }
        }
        dir
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.bpffs).status();
        for ns in [&self.client, &self.server, &self.host] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agent/fixtures")
}

/// Moves the calling thread into network namespace `ns` (other threads are not affected;
/// threads it spawns afterwards start there).
pub fn enter(ns: &str) {
    let file = File::open(format!("/run/netns/{ns}")).unwrap();
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

/// Runs `f` in a new thread inside `ns`.
pub fn spawn_in<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        enter(&ns);
        f()
    })
}
