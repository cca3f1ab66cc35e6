//! `porin suggest`: least-privilege CiliumNetworkPolicies from the flows
//! Cilium forwarded in a recording.
//!
//! One policy per workload (the endpoints sharing a namespace and stable
//! labels) that appears in the recording. Its endpoint selector and every
//! endpoint peer are the workload's stable Kubernetes labels (not the
//! hashes a controller adds per revision, nor Cilium's own
//! `io.cilium.k8s.*` labels), peers in any namespace with their
//! `io.kubernetes.pod.namespace`; an address outside the inventory is its
//! own `/32` or `/128` CIDR (the world entity only when more addresses
//! were seen than the recording keeps, which the policy's comment says), a
//! reserved peer its entity (`host`, `remote-node`, ...). Ports are those
//! observed, per protocol; ICMP types as `icmps`. Egress to port 53 keeps
//! a DNS rule (`matchPattern: "*"`), so the DNS proxy still sees the
//! lookups that toFQDNs policies and Hubble rely on. A direction with no
//! forwarded flow is default deny (`- {}`): nothing observed, nothing
//! allowed.
//!
//! Only flows Cilium forwarded and never dropped are allowed (a flow
//! forwarded at the source's egress and dropped at the destination's
//! ingress never got through), so `porin replay` of the same
//! recording under the suggestion reports no flow newly denied, and
//! nothing else passes: a port or peer never observed is denied (the
//! crate's tests check both).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::IpAddr;

use porin_compiler::compile::Compiled;
use porin_compiler::identity::Identity;

use crate::observe::Recording;
use crate::record::Recorded;
use crate::resolve::PeerKey;

/// Label keys that change per revision or pod, never a peer's identity in
/// a policy (`pod-template-hash` of Deployments, `controller-revision-hash`
/// of StatefulSets and DaemonSets, a StatefulSet pod's own name, the
/// per-run labels of Jobs).
const UNSTABLE: &[&str] = &[
    "pod-template-hash",
    "controller-revision-hash",
    "statefulset.kubernetes.io/pod-name",
    "pod-template-generation",
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
    "apps.kubernetes.io/pod-index",
];

/// The namespace label key of endpoint selectors.
const NAMESPACE_KEY: &str = "k8s:io.kubernetes.pod.namespace";

/// A peer of a rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Selector {
    /// `fromEndpoints`/`toEndpoints` with these labels.
    Endpoints(BTreeMap<String, String>),
    /// `fromCIDR`/`toCIDR` of these addresses.
    Cidr(BTreeSet<IpAddr>),
    /// `fromEntities`/`toEntities`.
    Entity(String),
}

#[derive(Debug, Default)]
struct Workload {
    namespace: String,
    labels: BTreeMap<String, String>,
    endpoints: Vec<String>,
    ingress: BTreeMap<Selector, BTreeSet<(u8, u16)>>,
    egress: BTreeMap<Selector, BTreeSet<(u8, u16)>>,
    flows: u64,
    notes: BTreeSet<String>,
}

/// The stable labels of an endpoint (`key` → value, Kubernetes source,
/// without the namespace label), the service account when nothing else
/// is left.
fn stable_labels(compiled: &Compiled, index: usize) -> BTreeMap<String, String> {
    let Some(endpoint) = compiled.endpoints.get(index) else {
        return BTreeMap::new();
    };
    let mut labels: BTreeMap<String, String> = endpoint
        .labels
        .iter()
        .filter(|l| l.source == "k8s")
        .filter(|l| !l.key.starts_with("io.cilium.k8s.") && l.key != "io.kubernetes.pod.namespace")
        .filter(|l| !UNSTABLE.contains(&l.key.as_str()))
        .map(|l| (l.key.to_string(), l.value.to_string()))
        .collect();
    if labels.is_empty()
        && let Some(account) = endpoint
            .labels
            .iter()
            .find(|l| l.key == "io.cilium.k8s.policy.serviceaccount")
    {
        labels.insert(account.key.to_string(), account.value.to_string());
    }
    labels
}

fn selector(
    compiled: &Compiled,
    peer: PeerKey,
    addresses: &crate::observe::Addresses,
) -> (Selector, Option<String>) {
    match peer {
        PeerKey::Endpoint(index) => {
            let mut labels = stable_labels(compiled, index);
            let namespace = compiled
                .endpoints
                .get(index)
                .and_then(|e| e.namespace.clone())
                .unwrap_or_default();
            if !namespace.is_empty() {
                labels.insert(NAMESPACE_KEY.to_owned(), namespace);
            }
            (Selector::Endpoints(labels), None)
        }
        PeerKey::Reserved(id) => (
            Selector::Entity(
                Identity::new(id)
                    .ok()
                    .and_then(Identity::reserved_name)
                    .unwrap_or("world")
                    .to_owned(),
            ),
            None,
        ),
        PeerKey::Address(_) if addresses.overflow => (
            Selector::Entity("world".to_owned()),
            Some(format!(
                "more than {} addresses of {} were seen: the world entity stands for them",
                crate::observe::MAX_ADDRESSES,
                compiled.identity_name(match peer {
                    PeerKey::Address(id) => id,
                    _ => 0,
                })
            )),
        ),
        PeerKey::Address(_) => (Selector::Cidr(addresses.kept.clone()), None),
    }
}

fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""))
}

fn protocol(proto: u8) -> &'static str {
    porin_compiler::resolve::rule::proto::static_name(proto)
}

fn write_rules(
    out: &mut String,
    section: &str,
    rules: &BTreeMap<Selector, BTreeSet<(u8, u16)>>,
    ingress: bool,
) {
    let _ = writeln!(out, "  {section}:");
    if rules.is_empty() {
        let _ = writeln!(
            out,
            "  # Nothing was forwarded in this direction: default deny.\n  - {{}}"
        );
        return;
    }
    let (prefix, entities, cidr) = if ingress {
        ("fromEndpoints", "fromEntities", "fromCIDR")
    } else {
        ("toEndpoints", "toEntities", "toCIDR")
    };
    // Merge the cidr addresses of one port set? Each selector is one item.
    for (selector, ports) in rules {
        let l4: Vec<(u8, u16)> = ports
            .iter()
            .copied()
            .filter(|(p, _)| !matches!(p, 1 | 58))
            .collect();
        let icmp: Vec<(u8, u16)> = ports
            .iter()
            .copied()
            .filter(|(p, _)| matches!(p, 1 | 58))
            .collect();
        let mut items = Vec::new();
        if !l4.is_empty() {
            items.push(true);
        }
        if !icmp.is_empty() {
            items.push(false);
        }
        for is_l4 in items {
            let mut peer = String::new();
            match selector {
                Selector::Endpoints(labels) => {
                    let _ = writeln!(peer, "  - {prefix}:\n    - matchLabels:");
                    for (key, value) in labels {
                        let _ = writeln!(peer, "        {}: {}", quote(key), quote(value));
                    }
                }
                Selector::Entity(name) => {
                    let _ = writeln!(peer, "  - {entities}:\n    - {name}");
                }
                Selector::Cidr(addresses) => {
                    let _ = writeln!(peer, "  - {cidr}:");
                    for ip in addresses {
                        let bits = if ip.is_ipv6() { 128 } else { 32 };
                        let _ = writeln!(peer, "    - {ip}/{bits}");
                    }
                }
            }
            out.push_str(&peer);
            if is_l4 {
                let (dns, other): (Vec<_>, Vec<_>) = l4
                    .iter()
                    .partition(|(p, port)| !ingress && *port == 53 && matches!(p, 6 | 17));
                out.push_str("    toPorts:\n");
                if !other.is_empty() {
                    out.push_str("    - ports:\n");
                    for (p, port) in &other {
                        let _ = writeln!(
                            out,
                            "      - port: \"{port}\"\n        protocol: {}",
                            protocol(*p)
                        );
                    }
                }
                if !dns.is_empty() {
                    out.push_str("    - ports:\n");
                    for (p, port) in &dns {
                        let _ = writeln!(
                            out,
                            "      - port: \"{port}\"\n        protocol: {}",
                            protocol(*p)
                        );
                    }
                    out.push_str(
                        "      # DNS kept through the proxy: toFQDNs and Hubble see the lookups.\n      rules:\n        dns:\n        - matchPattern: \"*\"\n",
                    );
                }
            } else {
                out.push_str("    icmps:\n    - fields:\n");
                for (p, kind) in &icmp {
                    let family = if *p == 58 { "IPv6" } else { "IPv4" };
                    let _ = writeln!(out, "      - type: {kind}\n        family: {family}");
                }
            }
        }
    }
}

/// The policy name of a workload: its `app` (or first) label value, else
/// its first endpoint's name, as a DNS label.
fn policy_name(workload: &Workload) -> String {
    let base = workload
        .labels
        .get("app")
        .or_else(|| workload.labels.get("app.kubernetes.io/name"))
        .or_else(|| workload.labels.values().next())
        .cloned()
        .or_else(|| {
            workload
                .endpoints
                .first()
                .map(|e| e.rsplit('/').next().unwrap_or(e).to_owned())
        })
        .unwrap_or_else(|| "workload".to_owned());
    let mut name: String = base
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    name = name.trim_matches(|c| c == '-' || c == '.').to_owned();
    if name.is_empty() {
        "workload".clone_into(&mut name);
    }
    name.truncate(230);
    format!("{name}-observed")
}

/// Per (source, destination, protocol, port): dropped end to end between
/// endpoints, forwarded events, the outside addresses forwarded.
type Merged = (bool, u64, [crate::observe::Addresses; 2]);

/// What [`suggest`] wrote.
#[derive(Debug, Clone, Default)]
pub struct Suggestion {
    /// The policies, one YAML document each.
    pub yaml: String,
    /// How many policies.
    pub policies: usize,
    /// Forwarded flow events the policies allow.
    pub flows: u64,
}

/// Least-privilege policies for the workloads of a recording (resolved
/// against `compiled`, any compilation of the inventory).
pub fn suggest(recording: &Recording, compiled: &Compiled) -> Suggestion {
    let mut workloads: BTreeMap<(String, BTreeMap<String, String>), Workload> = BTreeMap::new();
    let key_of = |index: usize| {
        let namespace = compiled
            .endpoints
            .get(index)
            .and_then(|e| e.namespace.clone())
            .unwrap_or_default();
        (namespace, stable_labels(compiled, index))
    };
    let touch = |workloads: &mut BTreeMap<_, Workload>, index: usize| {
        let key = key_of(index);
        let workload = workloads.entry(key.clone()).or_insert_with(|| Workload {
            namespace: key.0.clone(),
            labels: key.1.clone(),
            ..Workload::default()
        });
        let name = compiled
            .endpoints
            .get(index)
            .map(|e| e.display_name())
            .unwrap_or_default();
        if !workload.endpoints.contains(&name) {
            workload.endpoints.push(name);
        }
        key
    };
    // End to end: a flow between two endpoints that Cilium dropped
    // anywhere (forwarded at the source's egress, then dropped at the
    // destination's ingress) never got through, and is not allowed on
    // either side. With an end outside the inventory one check decides,
    // and the addresses it forwarded are the ones allowed (another address
    // of the same identity may have been dropped).
    let mut merged: BTreeMap<(PeerKey, PeerKey, u8, u16), Merged> = BTreeMap::new();
    for (flow, seen) in &recording.flows {
        let entry = merged
            .entry((flow.from[0], flow.to[0], flow.proto, flow.port))
            .or_default();
        let both_endpoints = matches!(
            (flow.from[0], flow.to[0]),
            (PeerKey::Endpoint(_), PeerKey::Endpoint(_))
        );
        if flow.recorded == Recorded::Denied {
            entry.0 |= both_endpoints;
            continue;
        }
        entry.1 += seen.count;
        for (mine, theirs) in entry.2.iter_mut().zip(&seen.addresses) {
            mine.kept.extend(theirs.kept.iter().copied());
            mine.overflow |= theirs.overflow;
            if mine.kept.len() > crate::observe::MAX_ADDRESSES {
                mine.overflow = true;
            }
        }
    }
    let mut total = 0;
    for ((from, to, proto, port), (denied, count, addresses)) in &merged {
        let (from, to) = (*from, *to);
        let from_key = match from {
            PeerKey::Endpoint(i) => Some(touch(&mut workloads, i)),
            _ => None,
        };
        let to_key = match to {
            PeerKey::Endpoint(i) => Some(touch(&mut workloads, i)),
            _ => None,
        };
        if *denied || *count == 0 {
            continue;
        }
        total += count;
        let port = (*proto, *port);
        if let Some(key) = &from_key {
            let (peer, note) = selector(compiled, to, &addresses[1]);
            if let Some(workload) = workloads.get_mut(key) {
                workload.egress.entry(peer).or_default().insert(port);
                workload.flows += count;
                workload.notes.extend(note);
            }
        }
        if let Some(key) = &to_key {
            let (peer, note) = selector(compiled, from, &addresses[0]);
            if let Some(workload) = workloads.get_mut(key) {
                workload.ingress.entry(peer).or_default().insert(port);
                if from_key.as_ref() != Some(key) {
                    workload.flows += count;
                }
                workload.notes.extend(note);
            }
        }
    }
    let mut yaml = String::new();
    let mut names = BTreeSet::new();
    for workload in workloads.values() {
        let mut name = policy_name(workload);
        let mut n = 2;
        while !names.insert((workload.namespace.clone(), name.clone())) {
            name = format!("{}-{n}", policy_name(workload));
            n += 1;
        }
        if !yaml.is_empty() {
            yaml.push_str("---\n");
        }
        let _ = writeln!(
            yaml,
            "# Suggested by porin suggest for {}: {} forwarded flow events recorded.",
            workload.endpoints.join(", "),
            workload.flows
        );
        for note in &workload.notes {
            let _ = writeln!(yaml, "# Note: {note}.");
        }
        yaml.push_str("apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n");
        let _ = writeln!(yaml, "  name: {}", quote(&name));
        if !workload.namespace.is_empty() {
            let _ = writeln!(yaml, "  namespace: {}", quote(&workload.namespace));
        }
        if workload.ingress.is_empty() || workload.egress.is_empty() {
            // `- {}` is default deny on purpose (lint rule PR012 asks).
            yaml.push_str("  annotations:\n    porin.dev/ignore: PR012\n");
        }
        yaml.push_str("spec:\n  endpointSelector:\n");
        if workload.labels.is_empty() {
            yaml.push_str("    {}\n");
        } else {
            yaml.push_str("    matchLabels:\n");
            for (key, value) in &workload.labels {
                let _ = writeln!(yaml, "      {}: {}", quote(key), quote(value));
            }
        }
        write_rules(&mut yaml, "ingress", &workload.ingress, true);
        write_rules(&mut yaml, "egress", &workload.egress, false);
    }
    Suggestion {
        policies: workloads.len(),
        yaml,
        flows: total,
    }
}
