//! `porin agent monitor`: the verdict events of every attached endpoint, each with the
//! endpoint's name, the peer's identity and labels, and the rule that decided (the explanation
//! `porin query` gives for the same flow).
//!
//! The events come from each endpoint's pinned `porin_events` ring buffer (DATAPATH.md §2.6); a
//! ring buffer has one consumer, so one monitor runs at a time. The explanation is computed
//! from a compilation of the same policy files and inventory as the agent's: identity numbers
//! are the batch compiler's, which are the agent's as long as it has applied no change that
//! numbered a new identity since it started (the live session keeps numbers stable; a fresh
//! batch compile may number a later-added identity differently, and the monitor then names the
//! identity the compilation gives that number).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use porin_compiler::compile::Compiled;
use porin_compiler::explain::{Flow, Peer, describe_identity, evaluate, explain};
use porin_ebpf::ObjectConfig;
use porin_ebpf::abi::{ConfigValue, Event, index_key};
use porin_ebpf::maps::names;
use porin_kernel::datapath::CONFIG;
use porin_kernel::events::{EventReader, EventSelection};
use porin_kernel::{Counter, Map, ObjectFile};
use serde::Serialize;

use crate::enforce::{endpoint_dir_name, endpoint_of_dir};
use crate::error::AgentError;
use crate::metrics::counter_name;
use crate::switch::lock_config;

/// One verdict event, explained.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Explained {
    /// The endpoint whose program decided.
    pub endpoint: String,
    /// `ingress` (to the endpoint) or `egress` (from it).
    pub direction: &'static str,
    /// `pass` or `drop`.
    pub verdict: &'static str,
    /// The verdict counter (`denied_by_default`, `allowed_new`, ...).
    pub reason: String,
    /// IP protocol number.
    pub protocol: u8,
    /// Destination port (ICMP: type).
    pub port: u16,
    /// The peer address.
    pub peer: Option<IpAddr>,
    /// The peer's identity number.
    pub peer_identity: u32,
    /// The peer as explanations name it (workloads or entity, and the number).
    pub peer_name: String,
    /// The peer identity's labels.
    pub peer_labels: String,
    /// The explanation of the verdict (`porin query`'s).
    pub explanation: String,
}

impl Explained {
    /// One line of text.
    pub fn render(&self) -> String {
        let peer = self.peer.map_or_else(|| "-".to_owned(), |p| p.to_string());
        let arrow = if self.direction == "ingress" {
            "<-"
        } else {
            "->"
        };
        format!(
            "{} {arrow} {peer} {} proto {} port {}: {} ({}); peer {} [{}]; {}",
            self.endpoint,
            self.direction,
            self.protocol,
            self.port,
            self.verdict,
            self.reason,
            self.peer_name,
            self.peer_labels,
            self.explanation.replace('\n', "; ")
        )
    }
}

/// The readers of every pinned endpoint's events.
pub struct Monitor {
    readers: Vec<(String, EventReader, Map)>,
    compiled: Arc<Compiled>,
    previous: Option<EventSelection>,
    state_dir: PathBuf,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("endpoints", &self.readers.len())
            .finish_non_exhaustive()
    }
}

fn config_selection(map: &Map) -> Result<ConfigValue, AgentError> {
    let value = map
        .lookup(&index_key(ConfigValue::KEY))
        .map_err(|e| AgentError::kernel("reading porin_config", e))?
        .ok_or_else(|| AgentError::Session("porin_config has no key 0".to_owned()))?;
    ConfigValue::from_bytes(&value).map_err(|e| AgentError::Session(format!("porin_config: {e}")))
}

fn write_selection(
    state_dir: &Path,
    map: &Map,
    selection: EventSelection,
) -> Result<(), AgentError> {
    // Only the events byte changes: the active slot is the agent's. The agent's flips are
    // read-modify-writes of the same value: holding the state directory's lock, this one can
    // never write back a slot the agent flipped away from meanwhile.
    let _lock = lock_config(state_dir)?;
    let mut config = config_selection(map)?;
    config.events = ConfigValue::events_word(selection.drops, selection.allows);
    map.update(&index_key(ConfigValue::KEY), &config.to_bytes())
        .map_err(|e| AgentError::kernel("writing porin_config", e))
}

impl Monitor {
    /// Opens the events of every endpoint pinned under `state_dir` and asks their programs for
    /// `selection` (drops, and allows when asked); [`Monitor::close`] puts back what was set.
    pub fn open(
        state_dir: &Path,
        compiled: Arc<Compiled>,
        selection: EventSelection,
    ) -> Result<Self, AgentError> {
        let object = porin_ebpf::emit(&ObjectConfig::default())
            .map_err(|e| AgentError::Emit(e.to_string()))?;
        let definitions = ObjectFile::parse(&object)
            .map_err(|e| AgentError::kernel("parsing porin's object", e))?
            .maps;
        let spec = |name: &str| {
            definitions
                .iter()
                .find(|d| d.name == name)
                .map(porin_kernel::spec_of)
                .ok_or_else(|| AgentError::Session(format!("the object has no map `{name}`")))
        };
        let mut readers = Vec::new();
        let mut previous = None;
        let entries = std::fs::read_dir(state_dir).map_err(|e| AgentError::io(state_dir, e))?;
        let mut endpoints: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(endpoint_of_dir))
            .collect();
        endpoints.sort();
        for endpoint in endpoints {
            let dir = state_dir.join(endpoint_dir_name(&endpoint));
            let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
            let events =
                Map::from_pinned(&path(names::EVENTS), names::EVENTS, spec(names::EVENTS)?)
                    .map_err(|e| {
                        AgentError::kernel(
                            format!("endpoint `{endpoint}`: opening porin_events"),
                            e,
                        )
                    })?;
            let config = Map::from_pinned(&path(CONFIG), CONFIG, spec(CONFIG)?).map_err(|e| {
                AgentError::kernel(format!("endpoint `{endpoint}`: opening porin_config"), e)
            })?;
            if previous.is_none() {
                let (drops, allows) = config_selection(&config)?.emits();
                previous = Some(EventSelection { drops, allows });
            }
            write_selection(state_dir, &config, selection)?;
            let reader = EventReader::open(&events).map_err(|e| {
                AgentError::kernel(format!("endpoint `{endpoint}`: mapping porin_events"), e)
            })?;
            readers.push((endpoint, reader, config));
        }
        Ok(Self {
            readers,
            compiled,
            previous,
            state_dir: state_dir.to_path_buf(),
        })
    }

    /// The endpoints monitored.
    pub fn endpoints(&self) -> Vec<&str> {
        self.readers.iter().map(|(e, _, _)| e.as_str()).collect()
    }

    /// Every event since the last poll, explained, endpoint by endpoint.
    pub fn poll(&mut self) -> Result<Vec<Explained>, AgentError> {
        let mut out = Vec::new();
        for (endpoint, reader, _) in &mut self.readers {
            let events = reader.poll().map_err(|e| {
                AgentError::kernel(format!("endpoint `{endpoint}`: reading events"), e)
            })?;
            for event in events {
                out.push(explain_event(&self.compiled, endpoint, &event));
            }
        }
        Ok(out)
    }

    /// Puts back the event selection found when the monitor opened.
    pub fn close(self) -> Result<(), AgentError> {
        if let Some(previous) = self.previous {
            for (_, _, config) in &self.readers {
                write_selection(&self.state_dir, config, previous)?;
            }
        }
        Ok(())
    }
}

/// Explains one event against `compiled`.
pub fn explain_event(compiled: &Compiled, endpoint: &str, event: &Event) -> Explained {
    let ingress = event.direction == 0;
    let peer = event.peer();
    // The ABI's `_be` fields hold the number (the byte order is the encoding's).
    let port = event.dport_be;
    let labels = compiled
        .identities
        .iter()
        .find(|i| i.id == event.identity)
        .map_or_else(String::new, |i| i.labels.to_string());
    let counter = event
        .reason_verdict()
        .and_then(|v| usize::try_from(v.index()).ok())
        .and_then(|i| porin_kernel::Counter::ALL.get(i).copied());
    // Only these verdicts come from a policy lookup; the others say why there was none.
    let decided_by_policy = matches!(
        counter,
        Some(
            Counter::AllowedNew
                | Counter::AllowedEstablished
                | Counter::Redirected
                | Counter::DeniedByRule
                | Counter::DeniedByDefault
                | Counter::DeniedAuth
        )
    );
    let explanation = match (
        compiled
            .endpoints
            .iter()
            .position(|e| e.display_name() == endpoint),
        peer,
    ) {
        _ if !decided_by_policy => match counter {
            Some(Counter::AllowedReply) => "a reply of a flow conntrack tracks: passed without a policy lookup (DATAPATH.md 2.4)".to_owned(),
            Some(c) => format!("{}: decided before policy (DATAPATH.md 2.5, 4)", counter_name(c)),
            None => format!("counter {}", event.reason),
        },
        (Some(index), Some(address)) => {
            let other = match compiled
                .endpoints
                .iter()
                .position(|e| e.ips.contains(&address))
            {
                Some(peer_index) => Peer::Endpoint(peer_index),
                None => Peer::Address(address, event.identity),
            };
            let (from, to) = if ingress {
                (other, Peer::Endpoint(index))
            } else {
                (Peer::Endpoint(index), other)
            };
            let flow = Flow {
                from,
                to,
                proto: event.proto,
                port,
                family: Some(porin_compiler::explain::Family::of(address)),
            };
            explain(compiled, &evaluate(compiled, &flow))
        }
        (None, _) => format!("endpoint `{endpoint}` is not in the compilation the monitor read"),
        (_, None) => "not an IP packet, or decided before its addresses were read".to_owned(),
    };
    Explained {
        endpoint: endpoint.to_owned(),
        direction: if ingress { "ingress" } else { "egress" },
        verdict: if event.verdict == Event::DROP {
            "drop"
        } else {
            "pass"
        },
        reason: counter.map_or_else(|| format!("counter {}", event.reason), counter_name),
        protocol: event.proto,
        port,
        peer,
        peer_identity: event.identity,
        peer_name: describe_identity(compiled, event.identity),
        peer_labels: labels,
        explanation,
    }
}
