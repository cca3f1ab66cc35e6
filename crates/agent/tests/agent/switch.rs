//! One switch for all endpoints: a change that touches several endpoints flips them with one
//! write (a deny that moves from one endpoint to another never opens the flow in between), and
//! pins of an agent that gave each endpoint its own `porin_config` are migrated without a gap.

use std::path::Path;
use std::time::Duration;

use porin_agent::Agent;
use porin_agent::enforce::{HOOKS, endpoint_dir_name, link_pin};
use porin_agent::switch::map_id;
use porin_ebpf::ObjectConfig;
use porin_ebpf::abi::{ipcache_pairs, policy_pairs};
use porin_ebpf::compiled::ipcache_of;
use porin_kernel::Datapath;
use porin_kernel::attach::{TcxLink, interface_index};
use porin_kernel::datapath::{CONFIG, PolicySlot};
use porin_kernel::pin::pin_maps;

use crate::netns::{Topology, can_run, enter, fixtures, spawn_in};
use crate::probe::{Flow, Prober, Proto, Servers, connect_from, probe, round_trip};

/// Copies version `version` of the moved-deny fixture over the policy directory.
fn write_version(policies: &Path, version: &str) {
    for file in ["client.yaml", "server.yaml"] {
        std::fs::copy(
            fixtures().join("policies/moved").join(version).join(file),
            policies.join(file),
        )
        .unwrap();
    }
}

/// The id of the map pinned at `path`.
fn pinned_id(path: &Path) -> u32 {
    let fd = porin_kernel::sys::obj_get(path.to_str().unwrap()).unwrap();
    map_id(std::os::fd::AsFd::as_fd(&fd), "pin").unwrap()
}

const TCP_9090: Flow = Flow {
    proto: Proto::Tcp,
    port: 9090,
};
const TCP_8080: Flow = Flow {
    proto: Proto::Tcp,
    port: 8080,
};

#[test]
fn a_change_of_two_endpoints_flips_both_with_one_write() {
    if !can_run("a_change_of_two_endpoints_flips_both") {
        return;
    }
    let topology = Topology::new();
    let _servers = Servers::start(&topology.server);
    enter(&topology.host);
    let policies = topology.policies_from(&["moved/x"]);
    let mut agent = topology.start_agent(&policies);
    // One map: every endpoint's programs read the switch, and its directory names it.
    let switch = agent.enforcer().switch().id();
    assert_eq!(pinned_id(&topology.state_dir().join(CONFIG)), switch);
    for (endpoint, attached) in agent.enforcer().attached() {
        let config = attached.datapath.object().map(CONFIG).unwrap();
        assert_eq!(map_id(config.fd(), CONFIG).unwrap(), switch, "{endpoint}");
        let pin = topology
            .state_dir()
            .join(endpoint_dir_name(endpoint))
            .join(CONFIG);
        assert_eq!(pinned_id(&pin), switch, "{endpoint}");
    }
    let prober = Prober::start(&topology.client, &[TCP_9090, TCP_8080]);
    let mut seconds = Vec::new();
    for round in 0..24 {
        write_version(&policies, if round % 2 == 0 { "y" } else { "x" });
        let before = agent.enforcer().switch().flips();
        let applied = agent.reload().unwrap();
        assert!(applied.errors.is_empty(), "{:?}", applied.errors);
        assert_eq!(applied.installed, ["client", "server"], "round {round}");
        seconds.push(applied.seconds * 1000.0);
        assert_eq!(
            agent.enforcer().switch().flips(),
            before + 1,
            "round {round}: one write flips both endpoints"
        );
        std::thread::sleep(Duration::from_millis(110));
    }
    let samples = prober.finish();
    seconds.sort_by(f64::total_cmp);
    eprintln!(
        "two-endpoint changes: 24, one flip each; reload start to flip p50 {:.2} ms, max {:.2} ms",
        seconds[seconds.len() / 2],
        seconds[seconds.len() - 1]
    );
    let of = |flow: Flow| samples.iter().filter(move |s| s.flow == flow);
    assert!(of(TCP_9090).count() > 0);
    assert!(
        of(TCP_9090).all(|s| !s.passed),
        "TCP 9090 (denied by both versions) passed during a change"
    );
    assert!(
        of(TCP_8080).all(|s| s.passed),
        "TCP 8080 (allowed by both) dropped"
    );
    agent.shutdown(true).unwrap();
    assert_eq!(std::fs::read_dir(topology.state_dir()).unwrap().count(), 0);
}

/// Pins as the agent before the shared switch left them: each endpoint's object with its own
/// `porin_config`, policy in slot B (one install flips a fresh object to B), links pinned.
fn pin_previous_layout(topology: &Topology, policies: &Path) {
    let compiled = porin_agent::agent::compile(&topology.config(policies)).unwrap();
    let ipcache = ipcache_pairs(&ipcache_of(&compiled, &[]).unwrap());
    let object = porin_ebpf::emit(&ObjectConfig::default()).unwrap();
    for (endpoint, device) in [("client", "hv1"), ("server", "hv2")] {
        let state = &compiled
            .endpoints
            .iter()
            .find(|e| e.display_name() == endpoint)
            .unwrap()
            .state;
        let datapath = Datapath::load(&object).unwrap();
        let dir = topology.state_dir().join(endpoint_dir_name(endpoint));
        std::fs::create_dir_all(&dir).unwrap();
        pin_maps(datapath.object(), &dir).unwrap();
        datapath.install_ipcache(&ipcache.v4, &ipcache.v6).unwrap();
        assert_eq!(
            datapath.install_policy(&policy_pairs(state)).unwrap(),
            PolicySlot::B
        );
        let ifindex = interface_index(device).unwrap().unwrap();
        for (hook, direction) in HOOKS {
            let link =
                TcxLink::attach(datapath.program(direction).unwrap(), ifindex, hook).unwrap();
            link.pin(&dir.join(link_pin(hook))).unwrap();
        }
    }
}

#[test]
fn pins_with_a_switch_per_endpoint_are_migrated_without_a_gap() {
    if !can_run("pins_with_a_switch_per_endpoint_are_migrated") {
        return;
    }
    let topology = Topology::new();
    let _servers = Servers::start(&topology.server);
    enter(&topology.host);
    std::fs::create_dir_all(topology.state_dir()).unwrap();
    let policies = topology.policies("a");
    pin_previous_layout(&topology, &policies);
    let in_client = |flow: Flow| {
        spawn_in(&topology.client, move || probe(flow))
            .join()
            .unwrap()
    };
    // Version a enforced by the old pins alone; a connection whose replies pass only through
    // the client's conntrack.
    assert!(in_client(TCP_9090) && in_client(TCP_8080));
    let mut connection = connect_from(&topology.client);
    assert!(round_trip(&mut connection, b'0'));
    // The agent starts on version b: the old programs read slot B of their own switches, the
    // new switch selects A, which is filled before the programs are swapped.
    std::fs::copy(
        fixtures().join("policies/b/server.yaml"),
        policies.join("server.yaml"),
    )
    .unwrap();
    let agent = topology.start_agent(&policies);
    let switch = agent.enforcer().switch().id();
    for endpoint in ["client", "server"] {
        let attached = &agent.enforcer().attached()[endpoint];
        assert!(attached.adopted, "{endpoint}");
        let pin = topology
            .state_dir()
            .join(endpoint_dir_name(endpoint))
            .join(CONFIG);
        assert_eq!(
            pinned_id(&pin),
            switch,
            "{endpoint}: the pin names the switch"
        );
        assert_eq!(attached.datapath.active_slot().unwrap(), PolicySlot::A);
    }
    assert!(
        round_trip(&mut connection, b'1'),
        "the connection survives the migration (conntrack adopted)"
    );
    let udp_9191 = Flow {
        proto: Proto::Udp,
        port: 9191,
    };
    assert!(!in_client(TCP_9090) && in_client(udp_9191), "version b");
    // A restart adopts the migrated pins as they are.
    agent.shutdown(false).unwrap();
    let (agent, applied) = Agent::start(topology.config(&policies)).unwrap();
    assert!(applied.errors.is_empty(), "{:?}", applied.errors);
    assert!(applied.installed.is_empty(), "{:?}", applied.installed);
    assert_eq!(agent.enforcer().switch().id(), switch);
    assert!(round_trip(&mut connection, b'2'));
    assert!(!in_client(TCP_9090) && in_client(udp_9191));
    agent.shutdown(true).unwrap();
}

/// An agent killed after pinning an endpoint's maps and before attaching its links leaves pins
/// whose active slot may be partly written (here: empty). No program reads them, so the next
/// start fills the slot completely before it attaches (it does not adopt the partial policy).
#[test]
fn pins_without_links_are_filled_before_attaching() {
    if !can_run("pins_without_links_are_filled_before_attaching") {
        return;
    }
    let topology = Topology::new();
    let _servers = Servers::start(&topology.server);
    enter(&topology.host);
    let policies = topology.policies("a");
    let object = porin_ebpf::emit(&ObjectConfig::default()).unwrap();
    let datapath = Datapath::load(&object).unwrap();
    let dir = topology.state_dir().join(endpoint_dir_name("server"));
    std::fs::create_dir_all(&dir).unwrap();
    pin_maps(datapath.object(), &dir).unwrap();
    drop(datapath);
    let agent = topology.start_agent(&policies);
    assert!(agent.enforcer().attached()["server"].adopted);
    let in_client = |flow: Flow| {
        spawn_in(&topology.client, move || probe(flow))
            .join()
            .unwrap()
    };
    assert!(
        in_client(TCP_8080) && in_client(TCP_9090),
        "version a's allows"
    );
    assert!(!in_client(Flow {
        proto: Proto::Tcp,
        port: 7070
    }));
    agent.shutdown(true).unwrap();
}
