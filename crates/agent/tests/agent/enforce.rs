//! The PolicyTest file's cases, sent as real traffic, are enforced as `porin test` predicts;
//! live changes, metrics, bad input and detaching.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use porin_agent::monitor::Monitor;
use porin_agent::{Agent, Config};
use porin_compiler::limits::Limits;
use porin_compiler::mapstate::Direction;
use porin_kernel::events::EventSelection;
use serde::Deserialize;

use crate::netns::{
    CLIENT_IP, SERVER_IP, TAP_GATEWAY, TAP_GUEST_IP, Topology, can_run, enter, fixtures, spawn_in,
};
use crate::probe::{Flow, Proto, Servers, handshake_to, probe_to};
use crate::tap::Guest;

#[derive(Debug, Deserialize)]
struct TestFile {
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    from: String,
    to: String,
    protocol: String,
    port: u16,
    expect: String,
}

/// The cases of a PolicyTest file, after checking that `porin test` (reference engine) passes
/// the file: each case's `expect` is then porin's prediction.
fn predicted_cases(file: &Path) -> Vec<Case> {
    let report = porin_policytest::run_files(
        &[file.to_path_buf()],
        &mut porin_policytest::Reference,
        &Limits::default(),
    );
    assert_eq!(report.exit_code(), 0, "{}", report.lines.join("\n"));
    let text = std::fs::read_to_string(file).unwrap();
    let parsed: TestFile = serde_saphyr::from_str(&text).unwrap();
    parsed.cases
}

/// The namespace and address of each endpoint behind a veth.
type Namespaces = BTreeMap<&'static str, (String, &'static str)>;

fn namespaces(topology: &Topology) -> Namespaces {
    BTreeMap::from([
        ("client", (topology.client.clone(), CLIENT_IP)),
        ("server", (topology.server.clone(), SERVER_IP)),
    ])
}

/// Sends every case as one new flow and compares with the prediction.
fn probe_cases(topology: &Topology, cases: &[Case]) {
    probe_cases_with(topology, cases, |_, _, _| None);
}

/// [`probe_cases`], with `special` probing the cases it knows (`Some(passed)`) and the others
/// sent between the veth namespaces.
fn probe_cases_with(
    topology: &Topology,
    cases: &[Case],
    mut special: impl FnMut(&Case, Flow, &Namespaces) -> Option<bool>,
) {
    let namespaces = namespaces(topology);
    for case in cases {
        let proto = match case.protocol.as_str() {
            "TCP" => Proto::Tcp,
            "UDP" => Proto::Udp,
            other => panic!("case {}: protocol {other} is not probed", case.name),
        };
        let flow = Flow {
            proto,
            port: case.port,
        };
        let passed = special(case, flow, &namespaces).unwrap_or_else(|| {
            let (ns, _) = &namespaces[case.from.as_str()];
            let (_, target) = namespaces[case.to.as_str()];
            spawn_in(ns, move || probe_to(target, flow)).join().unwrap()
        });
        assert_eq!(
            passed,
            case.expect == "allow",
            "case `{}` ({} -> {} {flow}): porin test predicts {}",
            case.name,
            case.from,
            case.to,
            case.expect
        );
    }
}

/// `GET /metrics` from the calling thread's namespace.
pub fn scrape(addr: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

/// The packets of `endpoint`'s drops by default deny in `direction`, from the metrics text.
fn denied_by_default(text: &str, endpoint: &str, device: &str, direction: Direction) -> f64 {
    let label = direction.to_string();
    metric(
        text,
        &format!(
            "porin_agent_verdicts_total{{endpoint=\"{endpoint}\",device=\"{device}\",\
             direction=\"{label}\",reason=\"denied_by_default\",verdict=\"drop\"}}"
        ),
    )
    .unwrap_or_else(|| panic!("no {label} default-deny line of {endpoint}:\n{text}"))
}

/// The value of one sample line that starts with `prefix`.
pub fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn policy_test_cases_are_enforced_as_porin_test_predicts_and_follow_live_changes() {
    if !can_run("policy_test_cases_are_enforced") {
        return;
    }
    let topology = Topology::new();
    let cases_a = predicted_cases(&fixtures().join("vms.test.yaml"));
    let cases_b = predicted_cases(&fixtures().join("vms-b.test.yaml"));
    let _servers = Servers::start(&topology.server);
    let _client_servers = Servers::start(&topology.client);
    enter(&topology.host);
    let policies = topology.policies("a");
    let mut config = Config::new(
        policies.clone(),
        fixtures().join("vms.test.yaml"),
        topology.state_dir(),
    );
    config.metrics = Some("127.0.0.1:9964".parse().unwrap());
    let (mut agent, applied) = Agent::start(config).unwrap();
    assert!(applied.errors.is_empty(), "{:?}", applied.errors);
    assert_eq!(applied.attached, ["client", "server", "tapvm"]);
    // Each endpoint's two programs are attached to its own device, the tap included.
    for (endpoint, attached) in agent.enforcer().attached() {
        let index = porin_kernel::attach::interface_index(&attached.device)
            .unwrap()
            .unwrap();
        for link in attached.links() {
            assert_eq!(link.info().unwrap().ifindex, index, "{endpoint}");
        }
    }
    probe_cases(&topology, &cases_a);

    // porin agent monitor: the denied probes, named, with the rule that decided.
    let compiled = std::sync::Arc::new(
        porin_agent::agent::compile(&Config::new(
            policies.clone(),
            fixtures().join("vms.test.yaml"),
            topology.state_dir(),
        ))
        .unwrap(),
    );
    let mut monitor = Monitor::open(
        &topology.state_dir(),
        compiled,
        EventSelection {
            drops: true,
            allows: true,
        },
    )
    .unwrap();
    let drops = monitor.poll().unwrap();
    let denied = drops
        .iter()
        .find(|e| e.endpoint == "server" && e.port == 7070 && e.protocol == 6)
        .unwrap_or_else(|| panic!("no event of the denied TCP 7070 probe: {drops:#?}"));
    assert_eq!(
        (denied.direction, denied.verdict, denied.reason.as_str()),
        ("ingress", "drop", "denied_by_default")
    );
    assert_eq!(denied.peer, Some(CLIENT_IP.parse().unwrap()));
    assert!(
        denied.peer_name.starts_with("client (identity "),
        "{denied:?}"
    );
    assert!(denied.peer_labels.contains("role=client"), "{denied:?}");
    assert!(
        denied
            .explanation
            .contains("default deny, set by CiliumClusterwideNetworkPolicy server-ingress"),
        "{}",
        denied.render()
    );
    // Allows too, when asked.
    let allowed = Flow {
        proto: Proto::Udp,
        port: 5353,
    };
    assert!(
        spawn_in(&topology.client, move || probe_to(SERVER_IP, allowed))
            .join()
            .unwrap()
    );
    let events = monitor.poll().unwrap();
    let pass = events
        .iter()
        .find(|e| e.endpoint == "server" && e.port == 5353 && e.verdict == "pass")
        .unwrap_or_else(|| panic!("no pass event of UDP 5353: {events:#?}"));
    assert!(
        pass.explanation.contains("server-ingress"),
        "{}",
        pass.render()
    );
    monitor.close().unwrap();

    // A live change: version b of the server's policy.
    std::fs::copy(
        fixtures().join("policies/b/server.yaml"),
        policies.join("server.yaml"),
    )
    .unwrap();
    let applied = agent.reload().unwrap();
    assert_eq!(
        applied.installed,
        ["server"],
        "only the server's map changed"
    );
    // The file has an anchor (`&client`): loaded in full, never re-parsed in place.
    assert!(
        applied.policies_in_place.is_empty(),
        "{:?}",
        applied.policies_in_place
    );
    probe_cases(&topology, &cases_b);

    // A change that does not validate: refused as a whole, version b stays enforced, the
    // server's file changed back to version a in the same change too (every changed file is
    // checked before the session is touched; the broken file sorts after the server's).
    std::fs::copy(
        fixtures().join("policies/a/server.yaml"),
        policies.join("server.yaml"),
    )
    .unwrap();
    std::fs::write(
        policies.join("zz-broken.yaml"),
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: broken, namespace: x}\n\
         spec:\n  endpointSelector: {}\n  ingress: [{toPorts: [{ports: [{port: \"99999\"}]}]}]\n",
    )
    .unwrap();
    let error = agent.reload().unwrap_err().to_string();
    assert!(
        error.contains("broken.yaml") && error.contains("PM021"),
        "{error}"
    );
    assert_eq!(agent.revision(), 2);
    probe_cases(&topology, &cases_b);
    std::fs::remove_file(policies.join("zz-broken.yaml")).unwrap();
    std::fs::copy(
        fixtures().join("policies/b/server.yaml"),
        policies.join("server.yaml"),
    )
    .unwrap();

    // The metrics name the endpoints and count the denied probes.
    let text = scrape("127.0.0.1:9964");
    // (The denied probes to the server are its ingress.)
    let denied = denied_by_default(&text, "server", "hv2", Direction::Ingress);
    // ... and the policy whose default deny decided them.
    assert_eq!(
        metric(
            &text,
            "porin_agent_default_deny_info{endpoint=\"server\",device=\"hv2\",direction=\"ingress\",\
             policy=\"CiliumClusterwideNetworkPolicy server-ingress\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert!(denied >= 4.0, "{text}");
    assert_eq!(metric(&text, "porin_agent_policy_revision"), Some(2.0));
    assert_eq!(
        metric(&text, "porin_agent_errors_total{kind=\"policy\"}"),
        Some(1.0)
    );
    assert_eq!(metric(&text, "porin_agent_last_change_ok"), Some(0.0));

    // One rule item of a file without an anchor changed: only that item is parsed again, from
    // the first change since the start.
    let client = policies.join("client.yaml");
    let text = std::fs::read_to_string(&client).unwrap();
    std::fs::write(&client, text.replace("role: nobody}", "role: nobody-else}")).unwrap();
    let applied = agent.reload().unwrap();
    assert_eq!(applied.policies_in_place, [client.display().to_string()]);
    probe_cases(&topology, &cases_b);

    // Detaching removes every pin: nothing filters the devices any more.
    agent.shutdown(true).unwrap();
    assert_eq!(std::fs::read_dir(topology.state_dir()).unwrap().count(), 0);
    // (The kernel releases an unpinned link from a work queue: allow it a moment.)
    let denied_before = Flow {
        proto: Proto::Tcp,
        port: 7070,
    };
    let passed = (0..20).any(|_| {
        spawn_in(&topology.client, move || probe_to(SERVER_IP, denied_before))
            .join()
            .unwrap()
    });
    assert!(passed, "after --detach the device is no longer filtered");
}

#[test]
fn bad_input_is_refused_per_endpoint_and_the_rest_is_enforced() {
    if !can_run("bad_input_is_refused_per_endpoint") {
        return;
    }
    let topology = Topology::new();
    let _servers = Servers::start(&topology.server);
    enter(&topology.host);
    crate::netns::run(
        "ip",
        &["link", "add", "hv3", "type", "veth", "peer", "name", "hv3p"],
    );
    let policies = topology.policies("a");
    // 8 rules of 40 ports: 320 ingress entries (and the egress allow-all) for `big`, more than
    // a 256-entry policy map.
    let mut big = String::from(
        "apiVersion: cilium.io/v2\nkind: CiliumClusterwideNetworkPolicy\nmetadata: {name: big}\nspec:\n  endpointSelector: {matchLabels: {role: big}}\n  ingress:\n",
    );
    for rule in 0..8 {
        let ports: Vec<String> = (0..40)
            .map(|i| format!("{{port: \"{}\", protocol: TCP}}", 1000 + rule * 40 + i))
            .collect();
        big.push_str(&format!(
            "    - toPorts: [{{ports: [{}]}}]\n",
            ports.join(", ")
        ));
    }
    std::fs::write(policies.join("big.yaml"), big).unwrap();
    let inventory = topology.scratch.join("inventory.yaml");
    std::fs::write(
        &inventory,
        "kind: Inventory\nendpoints:\n\
         \x20 - {name: client, labels: {role: client}, ips: [10.231.1.2], interface: hv1}\n\
         \x20 - {name: server, labels: {role: server}, ips: [10.231.2.2], interface: hv2}\n\
         \x20 - {name: ghost, labels: {role: ghost}, ips: [10.231.4.2], interface: nosuch0}\n\
         \x20 - {name: twin1, labels: {role: twin}, ips: [10.231.5.2], interface: pt7}\n\
         \x20 - {name: twin2, labels: {role: twin}, ips: [10.231.5.3], interface: pt7}\n\
         \x20 - {name: big, labels: {role: big}, ips: [10.231.6.2], interface: hv3}\n",
    )
    .unwrap();
    let mut config = Config::new(policies.clone(), inventory.clone(), topology.state_dir());
    config.object.policy_map_max_entries = 256;
    let (mut agent, applied) = Agent::start(config).unwrap();
    assert_eq!(applied.attached, ["client", "server"]);
    let errors = applied.errors.join("\n");
    assert!(
        errors.contains("endpoint `ghost`: interface `nosuch0` does not exist"),
        "{errors}"
    );
    assert!(
        errors.contains("interface `pt7` is named by endpoints `twin1`, `twin2`"),
        "{errors}"
    );
    assert!(
        errors
            .contains("endpoint `big`: the policy needs 321 map entries, the policy map holds 256"),
        "{errors}"
    );
    assert!(!topology.state_dir().join("ep:twin1").exists());
    assert!(!topology.state_dir().join("ep:big").exists());
    // The others are enforced.
    let flows = [(8080, true), (7070, false)];
    for (port, expect) in flows {
        let flow = Flow {
            proto: Proto::Tcp,
            port,
        };
        let passed = spawn_in(&topology.client, move || probe_to(SERVER_IP, flow))
            .join()
            .unwrap();
        assert_eq!(passed, expect, "{flow}");
    }
    // An address owned twice: the inventory is refused as a whole, naming both endpoints; the
    // previous revision stays.
    let text = std::fs::read_to_string(&inventory).unwrap();
    std::fs::write(&inventory, text.replace("10.231.6.2", "10.231.2.2")).unwrap();
    let error = agent.reload().unwrap_err().to_string();
    assert!(
        error.contains("10.231.2.2") && error.contains("`server`"),
        "{error}"
    );
    assert_eq!(agent.revision(), 1);
    let flow = Flow {
        proto: Proto::Tcp,
        port: 7070,
    };
    assert!(
        !spawn_in(&topology.client, move || probe_to(SERVER_IP, flow))
            .join()
            .unwrap()
    );
    // The object was emitted for the inventory's `enable-extended-ip-protocols` (off): turning
    // it on at run time is refused, naming the setting, and the previous revision stays.
    std::fs::write(
        &inventory,
        format!("{text}settings:\n  enable-extended-ip-protocols: true\n"),
    )
    .unwrap();
    let error = agent.reload().unwrap_err().to_string();
    assert!(
        error.contains("`enable-extended-ip-protocols` changed from false to true")
            && error.contains("restart the agent"),
        "{error}"
    );
    assert_eq!(agent.revision(), 1);
    // The device appears: the waiting endpoint is attached on the next retry.
    crate::netns::run(
        "ip",
        &[
            "link", "add", "nosuch0", "type", "veth", "peer", "name", "nosuch0p",
        ],
    );
    std::fs::write(&inventory, text).unwrap();
    let applied = agent.retry_waiting().unwrap();
    assert_eq!(applied.attached, ["ghost"], "{:?}", applied.errors);
    agent.shutdown(true).unwrap();
}

/// A microVM behind a tap: the test process is the guest on the tap's queue (`tap.rs`) and
/// sends and answers real frames (ARP, UDP, the TCP handshake). Every case of the tap's
/// PolicyTest file is enforced as `porin test` predicts, in both directions: what the VM sends
/// is decided on the tap's ingress hook (its egress policy), what it is sent on the tap's egress
/// hook (its ingress policy; a denied frame never reaches the guest).
#[test]
fn traffic_through_a_tap_is_enforced_as_porin_test_predicts() {
    if !can_run("traffic_through_a_tap_is_enforced") {
        return;
    }
    let topology = Topology::new();
    let file = fixtures().join("tap.test.yaml");
    let cases = predicted_cases(&file);
    let _servers = Servers::start(&topology.server);
    let guest_ip: std::net::Ipv4Addr = TAP_GUEST_IP.parse().unwrap();
    let guest = Guest::start(
        &topology.host,
        "pt7",
        guest_ip,
        TAP_GATEWAY.parse().unwrap(),
    );
    enter(&topology.host);
    let policies = topology.policies_from(&["a", "tap"]);
    let mut config = Config::new(policies.clone(), file.clone(), topology.state_dir());
    config.metrics = Some("127.0.0.1:9964".parse().unwrap());
    let (agent, applied) = Agent::start(config).unwrap();
    assert!(applied.errors.is_empty(), "{:?}", applied.errors);
    assert_eq!(applied.attached, ["client", "server", "tapvm"]);
    let compiled = std::sync::Arc::new(
        porin_agent::agent::compile(&Config::new(policies, file, topology.state_dir())).unwrap(),
    );
    let mut monitor = Monitor::open(
        &topology.state_dir(),
        compiled,
        EventSelection {
            drops: true,
            allows: false,
        },
    )
    .unwrap();
    // ARP through the tap: the guest's request in (ingress hook), the host's reply out
    // (egress hook); non-IP frames pass both programs.
    guest.gateway_mac();
    probe_cases_with(&topology, &cases, |case, flow, namespaces| {
        match (case.from.as_str(), case.to.as_str()) {
            ("tapvm", to) => {
                Some(guest.probe(namespaces[to].1.parse().unwrap(), flow.proto, flow.port))
            }
            (from, "tapvm") => {
                let (ns, source) = &namespaces[from];
                let passed = spawn_in(ns, move || handshake_to(TAP_GUEST_IP, flow))
                    .join()
                    .unwrap();
                assert_eq!(
                    guest.saw(source.parse().unwrap(), flow.proto, flow.port),
                    passed,
                    "case `{}`: the guest reads a frame to it exactly when the tap's egress \
                     hook let it through",
                    case.name
                );
                Some(passed)
            }
            _ => None,
        }
    });
    // The host resolves the guest through the tap too (request out, reply in).
    crate::netns::run("ip", &["neigh", "flush", "dev", "pt7"]);
    let answered = guest.arp_requests_answered();
    let udp = Flow {
        proto: Proto::Udp,
        port: 6161,
    };
    assert!(
        spawn_in(&topology.server, move || handshake_to(TAP_GUEST_IP, udp))
            .join()
            .unwrap()
    );
    assert!(guest.arp_requests_answered() > answered);

    // Which program of the tap decided: the VM's own sends on the tap's ingress hook
    // (`porin_from_endpoint`, direction egress), what it is sent on the egress hook.
    let events = monitor.poll().unwrap();
    let find = |direction: &str, port: u16| {
        events
            .iter()
            .find(|e| {
                e.endpoint == "tapvm"
                    && e.direction == direction
                    && e.port == port
                    && e.protocol == 6
            })
            .unwrap_or_else(|| panic!("no tapvm {direction} drop of TCP {port}: {events:#?}"))
    };
    let sent = find("egress", 9090);
    assert_eq!(sent.peer, Some(SERVER_IP.parse().unwrap()), "{sent:?}");
    assert!(
        sent.explanation
            .contains("default deny, set by CiliumClusterwideNetworkPolicy tapvm"),
        "{}",
        sent.render()
    );
    let received = find("ingress", 6262);
    assert_eq!(received.peer, Some(SERVER_IP.parse().unwrap()));
    // Denied by the server's side, not the tap's: the tap's egress program let it out.
    assert!(
        events
            .iter()
            .any(|e| e.endpoint == "server" && e.port == 7070 && e.peer == Some(guest_ip.into())),
        "{events:#?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e.endpoint == "tapvm" && e.port == 7070),
        "{events:#?}"
    );
    monitor.close().unwrap();

    // The metrics count the tap's drops: 2 denied sends of the VM (TCP 9090, UDP 7171), 3
    // denied frames to it (TCP 6262, UDP 6363, the client's TCP 6060).
    let text = scrape("127.0.0.1:9964");
    let ingress = denied_by_default(&text, "tapvm", "pt7", Direction::Ingress);
    let egress = denied_by_default(&text, "tapvm", "pt7", Direction::Egress);
    for direction in ["ingress", "egress"] {
        assert_eq!(
            metric(
                &text,
                &format!(
                    "porin_agent_default_deny_info{{endpoint=\"tapvm\",device=\"pt7\",\
                     direction=\"{direction}\",policy=\"CiliumClusterwideNetworkPolicy tapvm\"}}"
                )
            ),
            Some(1.0),
            "{text}"
        );
    }
    assert!(ingress >= 3.0 && egress >= 2.0, "{text}");
    agent.shutdown(true).unwrap();
}
