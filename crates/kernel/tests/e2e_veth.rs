//! End to end: porin's object, loaded by porin's loader, attached with `tc` to a veth between
//! two network namespaces, enforcing policy on real TCP and UDP traffic.
//!
//! Topology (names carry the pid, so parallel runs do not collide):
//!
//! ```text
//!   netns pA<pid>: veth pa<pid> 10.231.0.1/24  <-->  veth pb<pid> 10.231.0.2/24 :netns pB<pid>
//!                               fd7a:231::1/64            fd7a:231::2/64
//!   (the peer, identity 1000)                        (the endpoint; porin on pb's clsact)
//! ```
//!
//! porin sits on the endpoint's own device `pb`: its **ingress** hook sees packets delivered to
//! the endpoint (`porin_to_endpoint`, policy direction ingress) and its **egress** hook sees
//! packets the endpoint sends (`porin_from_endpoint`, policy direction egress). The programs are
//! loaded with [`Datapath::load`], pinned into a private bpffs mounted for this test, and attached
//! with `tc filter ... bpf da pinned PATH`; the maps are filled through porin's own fds.
//!
//! Traffic runs only inside the namespaces: this test binary re-executes itself under
//! `nsenter --net=/run/netns/NAME` in a "server" or "client" role (the `e2e_role` test, inert
//! unless `PORIN_E2E_ROLE` is set). Every loop and socket has a timeout, and the [`Rig`] removes
//! the namespaces (and so the veth pair) and the bpffs mount in `Drop`, even after a failure.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

#[path = "kernel/kernel_support/mod.rs"]
mod kernel_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kernel_support::{EGRESS, INGRESS, allow, deny, ipcache4, ipcache6, kernel_available};
use porin_kernel::Datapath;

const PEER: Ipv4Addr = Ipv4Addr::new(10, 231, 0, 1);
const ENDPOINT: Ipv4Addr = Ipv4Addr::new(10, 231, 0, 2);
const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd7a, 0x231, 0, 0, 0, 0, 0, 1);
const ENDPOINT6: Ipv6Addr = Ipv6Addr::new(0xfd7a, 0x231, 0, 0, 0, 0, 0, 2);
const PEER_IDENTITY: u32 = 1000;
const TCP: u8 = 6;
const UDP: u8 = 17;

/// Ports on the endpoint (server in pB).
const TCP_ALLOWED: u16 = 8080;
const TCP_DENIED_DEFAULT: u16 = 8081;
const TCP_DENIED_RULE: u16 = 8082;
const UDP_ALLOWED: u16 = 9090;
const UDP_DENIED: u16 = 9091;
/// Port on the peer (server in pA) that the endpoint dials out to.
const TCP_PEER: u16 = 7070;

/// The test's network namespaces, veth pair and bpffs mount; removed on drop.
struct Rig {
    ns_peer: String,
    ns_endpoint: String,
    dev_peer: String,
    dev_endpoint: String,
    bpffs: PathBuf,
    mounted: bool,
    namespaces: Vec<String>,
}

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{program} {args:?}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {args:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl Rig {
    fn new() -> Result<Self, String> {
        remove_stale_rigs();
        let pid = std::process::id();
        let mut rig = Self {
            ns_peer: format!("pA{pid}"),
            ns_endpoint: format!("pB{pid}"),
            dev_peer: format!("pa{pid}"),
            dev_endpoint: format!("pb{pid}"),
            bpffs: std::env::temp_dir().join(format!("porin-e2e-bpffs-{pid}")),
            mounted: false,
            namespaces: Vec::new(),
        };
        // Every step registers what it created before the next one, so Drop undoes exactly that.
        for ns in [rig.ns_peer.clone(), rig.ns_endpoint.clone()] {
            run("ip", &["netns", "add", &ns])?;
            rig.namespaces.push(ns);
        }
        run(
            "ip",
            &[
                "link",
                "add",
                &rig.dev_peer,
                "netns",
                &rig.ns_peer,
                "type",
                "veth",
                "peer",
                "name",
                &rig.dev_endpoint,
                "netns",
                &rig.ns_endpoint,
            ],
        )?;
        for (ns, dev, addr, addr6) in [
            (&rig.ns_peer, &rig.dev_peer, PEER, PEER6),
            (&rig.ns_endpoint, &rig.dev_endpoint, ENDPOINT, ENDPOINT6),
        ] {
            let cidr = format!("{addr}/24");
            run("ip", &["-n", ns, "addr", "add", &cidr, "dev", dev])?;
            // nodad: the address is usable at once (no duplicate address detection wait).
            let cidr6 = format!("{addr6}/64");
            run(
                "ip",
                &["-n", ns, "-6", "addr", "add", &cidr6, "dev", dev, "nodad"],
            )?;
            run("ip", &["-n", ns, "link", "set", dev, "up"])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        std::fs::create_dir_all(&rig.bpffs).map_err(|e| format!("mkdir bpffs: {e}"))?;
        let target = rig.bpffs.to_string_lossy().into_owned();
        run("mount", &["-t", "bpf", "bpf", &target])?;
        rig.mounted = true;
        Ok(rig)
    }

    /// Runs `tc ARGS` inside the endpoint's namespace.
    fn tc(&self, args: &[&str]) -> Result<String, String> {
        let net = format!("--net=/run/netns/{}", self.ns_endpoint);
        let mut full = vec![net.as_str(), "tc"];
        full.extend_from_slice(args);
        run("nsenter", &full)
    }

    /// Pins both programs and attaches them to the endpoint device's clsact hooks.
    fn attach(&self, datapath: &Datapath) -> Result<(), String> {
        let to = self
            .bpffs
            .join("to_endpoint")
            .to_string_lossy()
            .into_owned();
        let from = self
            .bpffs
            .join("from_endpoint")
            .to_string_lossy()
            .into_owned();
        datapath
            .program(porin_kernel::Direction::ToEndpoint)
            .and_then(|p| p.pin(&to))
            .map_err(|e| e.to_string())?;
        datapath
            .program(porin_kernel::Direction::FromEndpoint)
            .and_then(|p| p.pin(&from))
            .map_err(|e| e.to_string())?;
        let dev = self.dev_endpoint.as_str();
        self.tc(&["qdisc", "add", "dev", dev, "clsact"])?;
        self.tc(&[
            "filter", "add", "dev", dev, "ingress", "bpf", "da", "pinned", &to,
        ])?;
        self.tc(&[
            "filter", "add", "dev", dev, "egress", "bpf", "da", "pinned", &from,
        ])?;
        let shown = self.tc(&["filter", "show", "dev", dev, "ingress"])?;
        if !shown.contains("direct-action") {
            return Err(format!("filter not attached: {shown}"));
        }
        Ok(())
    }

    /// Starts this test binary in `role` inside namespace `ns`.
    fn spawn_role(&self, ns: &str, role: &str, spec: &str) -> Result<Child, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{ns}"))
            .arg(exe)
            .args(["--exact", "e2e_role", "--nocapture", "--test-threads=1"])
            .env("PORIN_E2E_ROLE", role)
            .env("PORIN_E2E_SPEC", spec)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn {role}: {e}"))
    }
}

/// Removes what an earlier run of this test left behind when it was killed before its Drop
/// ran: namespaces `pA<pid>`/`pB<pid>` and mounts `porin-e2e-bpffs-<pid>` whose process is gone.
fn remove_stale_rigs() {
    let dead = |pid: &str| {
        !pid.is_empty()
            && pid.bytes().all(|b| b.is_ascii_digit())
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
    };
    if let Ok(list) = run("ip", &["netns", "list"]) {
        for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
            let stale = ["pA", "pB"]
                .iter()
                .any(|prefix| name.strip_prefix(prefix).is_some_and(dead));
            if stale {
                let _ = run("ip", &["netns", "del", name]);
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.strip_prefix("porin-e2e-bpffs-").is_some_and(dead) {
                let path = entry.path().to_string_lossy().into_owned();
                let _ = run("umount", &[&path]);
                let _ = std::fs::remove_dir(&path);
            }
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // Deleting a namespace destroys its veth end, which destroys the pair and its filters.
        for ns in self.namespaces.drain(..).rev() {
            let _ = run("ip", &["netns", "del", &ns]);
        }
        if self.mounted {
            let _ = run("umount", &[&self.bpffs.to_string_lossy()]);
        }
        let _ = std::fs::remove_dir(&self.bpffs);
    }
}

/// A server process; killed (it is our own child) and reaped on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Marker the server prints once every socket is bound (the test harness may print its own
/// `test e2e_role ... ` prefix on the same line, so it is searched, not matched).
const READY: &str = "PORIN_E2E_READY";

/// Starts a server and waits (bounded) for its ready marker.
fn start_server(rig: &Rig, ns: &str, spec: &str) -> Result<Server, String> {
    let mut child = rig.spawn_role(ns, "server", spec)?;
    let stdout = child.stdout.take().ok_or("server stdout")?;
    let server = Server(child);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(line) if line.contains(READY) => {
                    let _ = ready_tx.send(());
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(20))
        .map_err(|_| "server not ready within 20 s".to_owned())?;
    Ok(server)
}

/// Runs a client with targets `proto:addr:port,...` and returns `target -> reached`.
fn run_client(rig: &Rig, ns: &str, targets: &[String]) -> Result<Vec<(String, bool)>, String> {
    let child = rig.spawn_role(ns, "client", &targets.join(","))?;
    let output = child
        .wait_with_output()
        .map_err(|e| format!("client: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut results = Vec::new();
    for line in text.lines() {
        if let Some(at) = line.find("RESULT ") {
            let rest = &line[at + "RESULT ".len()..];
            let mut parts = rest.split_whitespace();
            if let (Some(target), Some(state)) = (parts.next(), parts.next()) {
                results.push((target.to_owned(), state == "ok"));
            }
        }
    }
    if results.len() != targets.len() {
        return Err(format!(
            "client printed {results:?} for {targets:?}:\n{text}"
        ));
    }
    Ok(results)
}

fn target(proto: &str, addr: impl Into<IpAddr>, port: u16) -> String {
    format!("{proto}:{}", SocketAddr::new(addr.into(), port))
}

/// The endpoint's ports, IPv4 then IPv6, in the order of the expected outcomes.
fn inbound_targets() -> Vec<String> {
    let mut targets = Vec::new();
    for addr in [IpAddr::V4(ENDPOINT), IpAddr::V6(ENDPOINT6)] {
        targets.extend([
            target("tcp", addr, TCP_ALLOWED),
            target("tcp", addr, TCP_DENIED_DEFAULT),
            target("tcp", addr, TCP_DENIED_RULE),
            target("udp", addr, UDP_ALLOWED),
            target("udp", addr, UDP_DENIED),
        ]);
    }
    targets
}

/// The policy of the endpoint: ingress from the peer to TCP 8080 and UDP 9090; TCP 8082 is
/// allowed for every identity (identity 0) but denied for the peer (deny wins, docs/semantics.md
/// §5.4); egress allows nothing until `allow_egress`.
fn endpoint_policy(allow_egress: bool) -> Vec<porin_ebpf::abi::PolicyPair> {
    let mut entries = vec![
        allow(PEER_IDENTITY, INGRESS, TCP, TCP_ALLOWED, Some(16)),
        allow(PEER_IDENTITY, INGRESS, UDP, UDP_ALLOWED, Some(16)),
        allow(0, INGRESS, TCP, TCP_DENIED_RULE, Some(16)),
        deny(PEER_IDENTITY, INGRESS, TCP, TCP_DENIED_RULE, Some(16)),
    ];
    if allow_egress {
        entries.push(allow(PEER_IDENTITY, EGRESS, TCP, TCP_PEER, Some(16)));
    }
    entries
}

#[test]
fn e2e_veth_tcp_and_udp_follow_policy() {
    let test = "e2e_veth_tcp_and_udp_follow_policy";
    if !kernel_available(test) {
        return;
    }
    let missing: Vec<_> = ["ip", "tc", "nsenter", "mount"]
        .into_iter()
        .filter(|tool| Command::new(tool).arg("-V").output().is_err())
        .collect();
    if !missing.is_empty() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: missing tools {missing:?} in CI"
        );
        println!("SKIPPED: {test}: missing tools {missing:?}");
        return;
    }
    let object = kernel_support::porin_object();
    let datapath = Datapath::load(&object).expect("porin's object loads");
    datapath
        .install_ipcache(
            &[ipcache4(PEER, 32, PEER_IDENTITY)],
            &[ipcache6(PEER6, 128, PEER_IDENTITY)],
        )
        .unwrap();
    datapath.install_policy(&endpoint_policy(false)).unwrap();

    let rig = Rig::new().expect("rig");
    rig.attach(&datapath).expect("attach");

    let endpoint_server = start_server(&rig, &rig.ns_endpoint, &inbound_targets().join(","))
        .expect("endpoint server");
    let peer_server =
        start_server(&rig, &rig.ns_peer, &target("tcp", PEER, TCP_PEER)).expect("peer server");

    // Peer -> endpoint: the allowed flows and their replies pass, the others do not.
    let targets = inbound_targets();
    let inbound = run_client(&rig, &rig.ns_peer, &targets).expect("client");
    let expected = [true, false, false, true, false];
    for ((name, reached), want) in inbound.iter().zip(expected.iter().chain(&expected)) {
        let want = *want;
        assert_eq!(*reached, want, "{name}: reached={reached}, expected {want}");
    }

    // Endpoint -> peer: egress is default-deny until the policy allows it.
    let outbound = [target("tcp", PEER, TCP_PEER)];
    let before = run_client(&rig, &rig.ns_endpoint, &outbound).expect("client");
    assert!(
        !before[0].1,
        "egress must be denied before the egress allow"
    );
    datapath.install_policy(&endpoint_policy(true)).unwrap();
    let after = run_client(&rig, &rig.ns_endpoint, &outbound).expect("client");
    assert!(
        after[0].1,
        "egress must pass after the egress allow was installed"
    );

    // The counters saw real traffic: new flows, replies and drops.
    let counters = datapath.read_counters().unwrap();
    use porin_kernel::Counter;
    assert!(
        counters.get(Counter::AllowedNew).packets > 0,
        "{counters:?}"
    );
    assert!(
        counters.get(Counter::AllowedReply).packets > 0,
        "{counters:?}"
    );
    assert!(
        counters.get(Counter::DeniedByDefault).packets > 0,
        "{counters:?}"
    );
    assert!(
        counters.get(Counter::DeniedByRule).packets > 0,
        "{counters:?}"
    );
    drop(peer_server);
    drop(endpoint_server);
}

/// Server and client roles, run by the test above inside a namespace. Inert otherwise.
#[test]
fn e2e_role() {
    let Ok(role) = std::env::var("PORIN_E2E_ROLE") else {
        return;
    };
    let spec = std::env::var("PORIN_E2E_SPEC").unwrap_or_default();
    let targets: Vec<(String, SocketAddr)> = spec
        .split(',')
        .filter_map(|t| {
            let (proto, rest) = t.split_once(':')?;
            Some((proto.to_owned(), rest.parse().ok()?))
        })
        .collect();
    match role.as_str() {
        "server" => serve(&targets),
        "client" => {
            for (proto, addr) in &targets {
                let ok = if proto == "tcp" {
                    tcp_echo(*addr)
                } else {
                    udp_echo(*addr)
                };
                println!("RESULT {proto}:{addr} {}", if ok { "ok" } else { "fail" });
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// Echo servers on every target, for at most 60 s (the parent kills us earlier).
fn serve(targets: &[(String, SocketAddr)]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut handles = Vec::new();
    for (proto, addr) in targets.iter().cloned() {
        if proto == "tcp" {
            let listener = TcpListener::bind(addr).expect("bind tcp");
            listener.set_nonblocking(true).expect("nonblocking");
            handles.push(std::thread::spawn(move || {
                while Instant::now() < deadline {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let _ = stream.set_nonblocking(false);
                            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                            let mut buf = [0u8; 64];
                            if let Ok(n) = stream.read(&mut buf) {
                                let _ = stream.write_all(&buf[..n]);
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            }));
        } else {
            let socket = UdpSocket::bind(addr).expect("bind udp");
            socket
                .set_read_timeout(Some(Duration::from_millis(100)))
                .expect("timeout");
            handles.push(std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while Instant::now() < deadline {
                    if let Ok((n, from)) = socket.recv_from(&mut buf) {
                        let _ = socket.send_to(&buf[..n], from);
                    }
                }
            }));
        }
    }
    println!("{READY}");
    let _ = std::io::stdout().flush();
    for handle in handles {
        let _ = handle.join();
    }
}

fn tcp_echo(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(2500)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(2500)));
    if stream.write_all(b"porin").is_err() {
        return false;
    }
    let mut buf = [0u8; 5];
    stream.read_exact(&mut buf).is_ok() && &buf == b"porin"
}

fn udp_echo(addr: SocketAddr) -> bool {
    let local = if addr.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    };
    let Ok(socket) = UdpSocket::bind(local) else {
        return false;
    };
    let _ = socket.set_read_timeout(Some(Duration::from_millis(400)));
    let mut buf = [0u8; 16];
    for _ in 0..4 {
        if socket.send_to(b"porin", addr).is_err() {
            return false;
        }
        if let Ok((n, from)) = socket.recv_from(&mut buf)
            && from == addr
            && &buf[..n] == b"porin"
        {
            return true;
        }
    }
    false
}
