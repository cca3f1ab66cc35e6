//! Prometheus text metrics (exposition format 0.0.4) on a loopback address.
//!
//! The verdict counters are read at each scrape from each endpoint's pinned `porin_verdicts`
//! map (per-CPU, summed), so they count every packet since the endpoint was first attached,
//! across agent restarts. The rest (revision, apply latency, errors, map fill) is the agent's
//! own state.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use porin_compiler::mapstate::Direction as PolicyDirection;
use porin_ebpf::abi::index_key;
use porin_kernel::datapath::VERDICTS;
use porin_kernel::{Counter, CounterSlot, CounterValue, Map, MapSpec, MapType};
use tracing::{debug, warn};

use crate::enforce::endpoint_dir_name;
use crate::error::AgentError;

/// One endpoint as the metrics show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointMetrics {
    /// The host-side device.
    pub device: String,
    /// Policy entries installed.
    pub entries: usize,
    /// Whether its programs are attached.
    pub attached: bool,
    /// Per policy direction (`ingress`, `egress`), the policies whose default deny selects the
    /// endpoint (`CiliumNetworkPolicy ns/name`): what decides its `denied_by_default` drops.
    pub default_deny: BTreeMap<&'static str, Vec<String>>,
}

/// The agent's state the metrics show.
#[derive(Debug, Clone, Default)]
pub struct MetricsState {
    /// Policy revision in force (1 = the first apply; +1 per applied change).
    pub revision: u64,
    /// Endpoints with an interface.
    pub endpoints: BTreeMap<String, EndpointMetrics>,
    /// Capacity of each policy map.
    pub capacity: u32,
    /// ipcache entries (IPv4, IPv6).
    pub ipcache: (usize, usize),
    /// Seconds of the last apply (compile + kernel writes).
    pub last_apply_seconds: f64,
    /// Sum of apply seconds.
    pub apply_seconds_sum: f64,
    /// Applies.
    pub apply_count: u64,
    /// Errors by kind (`policy`, `inventory`, `compile`, `attach`, `apply`).
    pub errors: BTreeMap<&'static str, u64>,
    /// Whether the last change was applied.
    pub last_change_ok: bool,
}

/// Shared between the agent loop and the metrics server.
pub type SharedMetrics = Arc<Mutex<MetricsState>>;

/// Locks the state (a panic elsewhere does not stop the metrics).
pub fn lock(shared: &SharedMetrics) -> std::sync::MutexGuard<'_, MetricsState> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The snake-case name of a verdict counter (`denied_by_default`).
pub fn counter_name(counter: Counter) -> String {
    let debug = format!("{counter:?}");
    let mut out = String::with_capacity(debug.len() + 4);
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// What slot `index` of an endpoint's `porin_verdicts` counts: its policy direction and its
/// reason (`None`: not a verdict, e.g. the events the ring had no room for). The datapath's own
/// index mapping ([`porin_kernel::counter_slot`], DATAPATH.md §2.5) is the one owner.
pub fn verdict_slot(index: u32) -> Option<(PolicyDirection, Counter)> {
    match porin_kernel::counter_slot(index)? {
        (direction, CounterSlot::Verdict(counter)) => Some((direction, counter)),
        (_, CounterSlot::EventsLost) => None,
    }
}

/// One endpoint's verdict counters, as the metrics show them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinnedCounters {
    /// Packets and bytes per (direction, reason), summed over CPUs (and over slots that
    /// [`verdict_slot`] gives the same labels).
    pub verdicts: BTreeMap<(PolicyDirection, Counter), CounterValue>,
    /// Events the ring buffer had no room for.
    pub events_lost: u64,
}

/// Reads the verdict counters pinned for `endpoint` under `state_dir` (`None` when not pinned
/// or not the per-CPU array of the contract). Every slot the pinned map has is read, whatever
/// its size.
pub fn pinned_counters(state_dir: &Path, endpoint: &str) -> Option<PinnedCounters> {
    let path = state_dir.join(endpoint_dir_name(endpoint)).join(VERDICTS);
    let spec: MapSpec = porin_kernel::pin::pinned_map_spec(&path).ok()?;
    if spec.map_type != MapType::PERCPU_ARRAY
        || spec.key_size != 4
        || usize::try_from(spec.value_size).ok() != Some(CounterValue::SIZE)
    {
        return None;
    }
    let slots = spec.max_entries;
    let map = Map::from_pinned(path.to_str()?, VERDICTS, spec).ok()?;
    let mut out = PinnedCounters::default();
    for index in 0..slots {
        let mut total = CounterValue::default();
        for cpu in map
            .lookup_per_cpu(&index_key(index))
            .ok()?
            .unwrap_or_default()
        {
            if let Ok(value) = CounterValue::from_bytes(&cpu) {
                total = total.add(&value);
            }
        }
        match verdict_slot(index) {
            Some(labels) => {
                let slot = out.verdicts.entry(labels).or_default();
                *slot = slot.add(&total);
            }
            None if matches!(
                porin_kernel::counter_slot(index),
                Some((_, CounterSlot::EventsLost))
            ) =>
            {
                out.events_lost += total.packets;
            }
            None => {}
        }
    }
    Some(out)
}

/// The verdict lines of one endpoint: packets into `out`, bytes into `bytes`.
fn render_verdicts(
    out: &mut String,
    bytes: &mut String,
    endpoint: &str,
    device: &str,
    counters: &PinnedCounters,
) {
    for ((direction, counter), value) in &counters.verdicts {
        let labels = format!(
            "{},direction=\"{}\",reason=\"{}\",verdict=\"{}\"",
            endpoint_labels(endpoint, device),
            direction,
            counter_name(*counter),
            if counter.is_pass() { "pass" } else { "drop" }
        );
        let _ = writeln!(
            out,
            "porin_agent_verdicts_total{{{labels}}} {}",
            value.packets
        );
        let _ = writeln!(
            bytes,
            "porin_agent_verdict_bytes_total{{{labels}}} {}",
            value.bytes
        );
    }
}

/// `endpoint="...",device="..."`.
fn endpoint_labels(endpoint: &str, device: &str) -> String {
    format!(
        "endpoint=\"{}\",device=\"{}\"",
        escape(endpoint),
        escape(device)
    )
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The metrics text.
pub fn render(state: &MetricsState, state_dir: &Path) -> String {
    let mut out = String::new();
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    family(
        &mut out,
        "porin_agent_verdicts_total",
        "counter",
        "Packets decided by an endpoint's programs, by direction (ingress: to the endpoint; egress: from it; both: a counter both programs share) and by the verdict counter that moved (DATAPATH.md 2.5).",
    );
    let mut bytes = String::new();
    let mut lost = String::new();
    for (endpoint, metrics) in &state.endpoints {
        let Some(counters) = pinned_counters(state_dir, endpoint) else {
            continue;
        };
        render_verdicts(&mut out, &mut bytes, endpoint, &metrics.device, &counters);
        let _ = writeln!(
            lost,
            "porin_agent_events_lost_total{{{}}} {}",
            endpoint_labels(endpoint, &metrics.device),
            counters.events_lost
        );
    }
    family(
        &mut out,
        "porin_agent_verdict_bytes_total",
        "counter",
        "Bytes of the packets of porin_agent_verdicts_total.",
    );
    out.push_str(&bytes);
    family(
        &mut out,
        "porin_agent_events_lost_total",
        "counter",
        "Verdict events the endpoint's ring buffer had no room for (porin agent monitor missed them; the verdicts were counted).",
    );
    out.push_str(&lost);
    family(
        &mut out,
        "porin_agent_default_deny_info",
        "gauge",
        "1 for each policy whose default deny selects the endpoint in a direction: the rule that decides its denied_by_default drops there (porin agent monitor explains each drop).",
    );
    for (endpoint, metrics) in &state.endpoints {
        for (direction, policies) in &metrics.default_deny {
            for policy in policies {
                let _ = writeln!(
                    out,
                    "porin_agent_default_deny_info{{{},direction=\"{direction}\",policy=\"{}\"}} 1",
                    endpoint_labels(endpoint, &metrics.device),
                    escape(policy)
                );
            }
        }
    }
    family(
        &mut out,
        "porin_agent_policy_entries",
        "gauge",
        "Policy map entries installed for an endpoint.",
    );
    for (endpoint, metrics) in &state.endpoints {
        let _ = writeln!(
            out,
            "porin_agent_policy_entries{{{}}} {}",
            endpoint_labels(endpoint, &metrics.device),
            metrics.entries
        );
    }
    family(
        &mut out,
        "porin_agent_policy_fill_ratio",
        "gauge",
        "Policy map fill of an endpoint (entries / capacity).",
    );
    for (endpoint, metrics) in &state.endpoints {
        let ratio = if state.capacity == 0 {
            0.0
        } else {
            metrics.entries as f64 / f64::from(state.capacity)
        };
        let _ = writeln!(
            out,
            "porin_agent_policy_fill_ratio{{{}}} {ratio}",
            endpoint_labels(endpoint, &metrics.device)
        );
    }
    family(
        &mut out,
        "porin_agent_endpoint_attached",
        "gauge",
        "1 when the endpoint's programs are attached to its device.",
    );
    for (endpoint, metrics) in &state.endpoints {
        let _ = writeln!(
            out,
            "porin_agent_endpoint_attached{{{}}} {}",
            endpoint_labels(endpoint, &metrics.device),
            u8::from(metrics.attached)
        );
    }
    family(
        &mut out,
        "porin_agent_ipcache_entries",
        "gauge",
        "ipcache entries by address family.",
    );
    let _ = writeln!(
        out,
        "porin_agent_ipcache_entries{{family=\"ipv4\"}} {}",
        state.ipcache.0
    );
    let _ = writeln!(
        out,
        "porin_agent_ipcache_entries{{family=\"ipv6\"}} {}",
        state.ipcache.1
    );
    family(
        &mut out,
        "porin_agent_policy_revision",
        "gauge",
        "The policy revision in force (+1 per applied change).",
    );
    let _ = writeln!(out, "porin_agent_policy_revision {}", state.revision);
    family(
        &mut out,
        "porin_agent_last_change_ok",
        "gauge",
        "1 when the last change was applied, 0 when it was refused (the previous policy stays enforced).",
    );
    let _ = writeln!(
        out,
        "porin_agent_last_change_ok {}",
        u8::from(state.last_change_ok)
    );
    family(
        &mut out,
        "porin_agent_apply_seconds",
        "summary",
        "Time from a change to its last A/B flip (compile, map writes, flips).",
    );
    let _ = writeln!(
        out,
        "porin_agent_apply_seconds_sum {}",
        state.apply_seconds_sum
    );
    let _ = writeln!(out, "porin_agent_apply_seconds_count {}", state.apply_count);
    family(
        &mut out,
        "porin_agent_last_apply_seconds",
        "gauge",
        "Duration of the last apply.",
    );
    let _ = writeln!(
        out,
        "porin_agent_last_apply_seconds {}",
        state.last_apply_seconds
    );
    family(
        &mut out,
        "porin_agent_errors_total",
        "counter",
        "Changes refused or failed, by kind.",
    );
    for kind in ["policy", "inventory", "compile", "attach", "apply"] {
        let count = state.errors.get(kind).copied().unwrap_or(0);
        let _ = writeln!(out, "porin_agent_errors_total{{kind=\"{kind}\"}} {count}");
    }
    out
}

/// Binds the metrics listener (loopback only).
pub fn bind(addr: SocketAddr) -> Result<TcpListener, AgentError> {
    if !addr.ip().is_loopback() {
        return Err(AgentError::MetricsNotLoopback(addr));
    }
    TcpListener::bind(addr).map_err(|e| AgentError::io(format!("--metrics {addr}"), e))
}

/// Serves `/metrics` on `listener` in a thread of its own.
pub fn serve(listener: TcpListener, shared: SharedMetrics, state_dir: PathBuf) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            match stream {
                Ok(stream) => {
                    if let Err(e) = answer(stream, &shared, &state_dir) {
                        debug!(error = %e, "metrics connection");
                    }
                }
                Err(e) => warn!(error = %e, "metrics listener"),
            }
        }
    });
}

fn answer(mut stream: TcpStream, shared: &SharedMetrics, state_dir: &Path) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = Vec::with_capacity(512);
    let mut buffer = [0u8; 512];
    // The request line and headers, bounded.
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        let n = stream.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buffer[..n]);
    }
    let line = String::from_utf8_lossy(&request);
    let path = line.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = if path == "/metrics" {
        let state = lock(shared).clone();
        ("200 OK", render(&state, state_dir))
    } else {
        ("404 Not Found", "porin agent: see /metrics\n".to_owned())
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_names_are_snake_case() {
        assert_eq!(counter_name(Counter::DeniedByDefault), "denied_by_default");
        assert_eq!(counter_name(Counter::AllowedNew), "allowed_new");
        assert_eq!(counter_name(Counter::PassedIpv6Ndp), "passed_ipv6_ndp");
    }

    #[test]
    fn verdicts_are_labelled_by_direction_and_reason() {
        // DATAPATH.md §2.5: ingress slots 0-15, egress 16-31, slot 15 of each counts lost events.
        assert_eq!(
            verdict_slot(5),
            Some((PolicyDirection::Ingress, Counter::DeniedByDefault))
        );
        assert_eq!(
            verdict_slot(16 + 5),
            Some((PolicyDirection::Egress, Counter::DeniedByDefault))
        );
        assert_eq!(verdict_slot(porin_ebpf::maps::EVENTS_LOST_COUNTER), None);
        assert_eq!(
            verdict_slot(16 + porin_ebpf::maps::EVENTS_LOST_COUNTER),
            None
        );
        assert_eq!(verdict_slot(32), None);
        // Per-direction counters (what the datapath's mapping gives) render one line each.
        let mut counters = PinnedCounters::default();
        let packets = |packets| CounterValue {
            packets,
            bytes: packets * 60,
        };
        counters.verdicts.insert(
            (PolicyDirection::Ingress, Counter::DeniedByDefault),
            packets(4),
        );
        counters.verdicts.insert(
            (PolicyDirection::Egress, Counter::DeniedByDefault),
            packets(1),
        );
        counters
            .verdicts
            .insert((PolicyDirection::Egress, Counter::AllowedNew), packets(9));
        let (mut out, mut bytes) = (String::new(), String::new());
        render_verdicts(&mut out, &mut bytes, "vm-1", "tap3", &counters);
        assert_eq!(
            out,
            "porin_agent_verdicts_total{endpoint=\"vm-1\",device=\"tap3\",direction=\"ingress\",reason=\"denied_by_default\",verdict=\"drop\"} 4\n\
             porin_agent_verdicts_total{endpoint=\"vm-1\",device=\"tap3\",direction=\"egress\",reason=\"allowed_new\",verdict=\"pass\"} 9\n\
             porin_agent_verdicts_total{endpoint=\"vm-1\",device=\"tap3\",direction=\"egress\",reason=\"denied_by_default\",verdict=\"drop\"} 1\n"
        );
        assert!(
            bytes.contains(
                "direction=\"ingress\",reason=\"denied_by_default\",verdict=\"drop\"} 240"
            )
        );
    }

    #[test]
    fn metrics_refuse_addresses_other_than_loopback() {
        let error = bind("0.0.0.0:9999".parse().unwrap()).unwrap_err();
        assert!(error.to_string().contains("loopback"), "{error}");
    }

    #[test]
    fn the_text_has_every_family_once() {
        let mut state = MetricsState::default();
        state.endpoints.insert(
            "vm-1".to_owned(),
            EndpointMetrics {
                device: "tap3".to_owned(),
                entries: 12,
                attached: true,
                default_deny: BTreeMap::from([(
                    "ingress",
                    vec!["CiliumNetworkPolicy vms/isolate".to_owned()],
                )]),
            },
        );
        state.capacity = 16384;
        state.errors.insert("policy", 2);
        let text = render(&state, Path::new("/nonexistent"));
        for family in [
            "porin_agent_verdicts_total",
            "porin_agent_policy_entries",
            "porin_agent_policy_revision",
            "porin_agent_apply_seconds",
            "porin_agent_errors_total",
        ] {
            assert_eq!(
                text.matches(&format!("# TYPE {family} ")).count(),
                1,
                "{family}\n{text}"
            );
        }
        assert!(text.contains("porin_agent_policy_entries{endpoint=\"vm-1\",device=\"tap3\"} 12"));
        assert!(text.contains("porin_agent_errors_total{kind=\"policy\"} 2"));
        assert!(text.contains(
            "porin_agent_default_deny_info{endpoint=\"vm-1\",device=\"tap3\",direction=\"ingress\",policy=\"CiliumNetworkPolicy vms/isolate\"} 1"
        ));
    }
}
