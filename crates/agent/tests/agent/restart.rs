//! `kill -9` of the agent around an apply: enforcement continues with the old or the new
//! version, never a mix; the restarted agent adopts the pins (no flush), and an established TCP
//! connection, whose replies pass only through conntrack, survives.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use porin_agent::{Agent, Config};

use crate::netns::{Topology, can_run, fixtures, spawn_in};
use crate::probe::{Flow, Proto, Servers, connect_from, probe, round_trip};

const ROLE: &str = "PORIN_AGENT_TEST_ROLE";

/// Not a test: the agent process of the test below (`--ignored --exact`), configured by the
/// environment. Prints `READY <adopted endpoints>` once it enforces.
#[test]
#[ignore = "the agent process of kill_9_..., started by it"]
fn role_agent_process() {
    let Ok(spec) = std::env::var(ROLE) else {
        return;
    };
    let mut parts = spec.split('\n');
    let (policies, inventory, state) = (
        parts.next().unwrap().into(),
        parts.next().unwrap().into(),
        parts.next().unwrap().into(),
    );
    let (agent, applied) = Agent::start(Config::new(policies, inventory, state)).unwrap();
    assert!(applied.errors.is_empty(), "{:?}", applied.errors);
    let adopted = agent
        .enforcer()
        .attached()
        .values()
        .filter(|a| a.adopted)
        .count();
    println!("READY {adopted}");
    std::io::stdout().flush().unwrap();
    agent.watch(&AtomicBool::new(false), false).unwrap();
}

/// The agent process; killed on drop (a failing test leaves no agent behind).
struct Running(Child);

impl Running {
    fn kill_9(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_agent(topology: &Topology, policies: &std::path::Path) -> (Running, usize) {
    let mut child = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", topology.host))
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "restart::role_agent_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            ROLE,
            format!(
                "{}\n{}\n{}",
                policies.display(),
                fixtures().join("vms.test.yaml").display(),
                topology.state_dir().display()
            ),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Running(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The harness may have written `test NAME ... ` on the same line first.
            if let Some((_, count)) = line.split_once("READY ") {
                let _ = tx.send(count.trim().parse::<usize>().unwrap_or(0));
            }
        }
    });
    let adopted = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the agent process did not start");
    (child, adopted)
}

fn probe_in(topology: &Topology, proto: Proto, port: u16) -> bool {
    let flow = Flow { proto, port };
    spawn_in(&topology.client, move || probe(flow))
        .join()
        .unwrap()
}

#[test]
fn kill_9_around_an_apply_keeps_old_or_new_and_a_restart_adopts_without_dropping_connections() {
    if !can_run("kill_9_around_an_apply") {
        return;
    }
    let topology = Topology::new();
    let _servers = Servers::start(&topology.server);
    let policies = topology.policies("a");
    let (mut agent, adopted) = start_agent(&topology, &policies);
    assert_eq!(adopted, 0, "a first start attaches fresh");
    let mut connection = connect_from(&topology.client);
    assert!(round_trip(&mut connection, b'0'));
    let texts = [
        std::fs::read(fixtures().join("policies/a/server.yaml")).unwrap(),
        std::fs::read(fixtures().join("policies/b/server.yaml")).unwrap(),
    ];
    let mut outcomes = Vec::new();
    for round in 0..8u8 {
        let version_b = round % 2 == 0;
        std::fs::write(policies.join("server.yaml"), &texts[usize::from(version_b)]).unwrap();
        // The agent applies 150 ms (its debounce) after the write, in a few ms: kill it around
        // then, a different moment each round.
        std::thread::sleep(Duration::from_millis(140 + u64::from(round) * 20));
        agent.kill_9();
        // No agent: the pinned programs enforce version a or b, never a mix of both.
        let (tcp_9090, udp_9191) = (
            probe_in(&topology, Proto::Tcp, 9090),
            probe_in(&topology, Proto::Udp, 9191),
        );
        assert!(
            tcp_9090 != udp_9191,
            "round {round}: a mix of versions (9090 {tcp_9090}, 9191 {udp_9191})"
        );
        assert!(probe_in(&topology, Proto::Tcp, 8080) && probe_in(&topology, Proto::Udp, 5353));
        assert!(!probe_in(&topology, Proto::Tcp, 7070) && !probe_in(&topology, Proto::Udp, 7171));
        outcomes.push(if udp_9191 { 'b' } else { 'a' });
        assert!(
            round_trip(&mut connection, b'1' + round),
            "round {round}: the connection died with the agent"
        );
        // Restart: the pins are adopted, and the file's version is enforced.
        let (restarted, adopted) = start_agent(&topology, &policies);
        agent = restarted;
        assert_eq!(adopted, 3, "round {round}: every endpoint adopted");
        assert_eq!(
            probe_in(&topology, Proto::Udp, 9191),
            version_b,
            "round {round}"
        );
        assert_eq!(
            probe_in(&topology, Proto::Tcp, 9090),
            !version_b,
            "round {round}"
        );
        assert!(
            round_trip(&mut connection, b'a' + round),
            "round {round}: the connection died in the restart"
        );
    }
    eprintln!("kill -9 rounds: version enforced after each kill (b = the new one): {outcomes:?}");
    agent.kill_9();
}
