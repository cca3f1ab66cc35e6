//! A second, independent oracle: porin's end-to-end connectivity against
//! np-guard's network-config-analyzer (`nca --connectivity`, IBM's
//! implementation of the Kubernetes NetworkPolicy semantics, Python,
//! nothing shared with porin).
//!
//! Compared: for every ordered pair of distinct pods (source, destination),
//! the set of (protocol, destination port) a new connection may use. porin:
//! a flow is allowed iff the source's egress map state and the
//! destination's ingress map state both allow it, decided on every port
//! class ([`porin_connectivity::flows::allowed`], what `porin graph` draws).
//! nca: its `txt_no_fw_rules` connectivity map, pod to pod lines. Both are
//! normalised to TCP/UDP/SCTP port ranges within 1–65535 plus "every other
//! protocol" (a NetworkPolicy can name no other protocol, so the others
//! are all or nothing); pods to and from IP ranges are not compared.
//!
//! Inputs: every fixture that is a set of Kubernetes NetworkPolicies with
//! an inventory (policy test files and lint fixtures), and seeded random
//! NetworkPolicy sets over random clusters (`PORIN_NCA_CASES`, default 30,
//! `PORIN_NCA_SEED` to change the seeds).
//!
//! Cilium 1.19 (porin's oracle) and the Kubernetes NetworkPolicy
//! specification (nca's) differ on purpose in a few places. Each such
//! difference is an entry of [`EXPECTED`]: its reason and source, and a
//! rewrite of nca's *input* that expresses Cilium's meaning in Kubernetes
//! terms. porin on the original policies must equal nca on the rewritten
//! ones, pair by pair: a difference is explained only where the rewrite
//! says exactly what Cilium does, never by tolerating a row. How many
//! pairs each difference accounts for (nca on the original against nca on
//! the rewrite) is printed.
//!
//! Without `nca` the test prints SKIPPED, and fails in CI (`CI=true`).
//! `PORIN_NCA` names the executable (default `nca` on `PATH`).

#![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use porin_compiler::compile::compile;
use porin_compiler::inventory::{Endpoint, Inventory, NamedPort, SourceLocation};
use porin_compiler::resolve::lower::PolicyInput;
use porin_connectivity::flows::between;
use porin_lint::config::LintConfig;
use porin_lint::verify;
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;
use serde_json::{Value, json};

const TCP: u8 = 6;
const UDP: u8 = 17;
const SCTP: u8 = 132;
const PORT_PROTOCOLS: [(u8, &str); 3] = [(TCP, "TCP"), (UDP, "UDP"), (SCTP, "SCTP")];

// ---------------------------------------------------------------- clusters

/// A pod as both tools see it.
#[derive(Debug, Clone)]
struct Pod {
    namespace: String,
    name: String,
    labels: BTreeMap<String, String>,
    ip: String,
    /// Named container ports: (name, number, protocol).
    ports: Vec<(String, u16, u8)>,
}

/// One comparison: namespaces with labels, pods, NetworkPolicy documents.
#[derive(Debug, Clone)]
struct Cluster {
    name: String,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pods: Vec<Pod>,
    policies: Vec<Value>,
}

fn proto_name(proto: u8) -> &'static str {
    PORT_PROTOCOLS
        .iter()
        .find(|(p, _)| *p == proto)
        .map_or("TCP", |(_, n)| n)
}

impl Cluster {
    fn inventory(&self) -> Inventory {
        let mut inventory = Inventory::new();
        for (ns, labels) in &self.namespaces {
            inventory.namespaces.insert(ns.clone(), labels.clone());
        }
        for pod in &self.pods {
            inventory.endpoints.push(Endpoint {
                name: pod.name.clone(),
                namespace: Some(pod.namespace.clone()),
                labels: pod.labels.clone(),
                ips: vec![pod.ip.parse().unwrap()],
                service_account: None,
                ports: pod
                    .ports
                    .iter()
                    .map(|(name, port, proto)| NamedPort {
                        name: name.clone(),
                        port: *port,
                        proto: *proto,
                    })
                    .collect(),
                identity: None,
                identity_labels: None,
                location: SourceLocation::default(),
            });
        }
        inventory.finish().unwrap();
        inventory
    }

    fn policy_text(policies: &[Value]) -> String {
        policies
            .iter()
            .map(|p| serde_json::to_string(p).unwrap())
            .collect::<Vec<_>>()
            .join("\n---\n")
    }

    /// Writes nca's inputs (one policy per file, a pod list, a namespace
    /// list) under `dir`.
    fn write_nca_inputs(&self, dir: &Path, policies: &[Value]) {
        let np = dir.join("np");
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(&np).unwrap();
        for (i, p) in policies.iter().enumerate() {
            std::fs::write(
                np.join(format!("p{i:03}.yaml")),
                serde_json::to_string(p).unwrap(),
            )
            .unwrap();
        }
        let pods: Vec<Value> = self
            .pods
            .iter()
            .map(|pod| {
                let ports: Vec<Value> = pod
                    .ports
                    .iter()
                    .map(|(name, port, proto)| {
                        json!({"name": name, "containerPort": port, "protocol": proto_name(*proto)})
                    })
                    .collect();
                json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": pod.labels},
                    "spec": {"containers": [{"name": "c", "image": "x", "ports": ports}]},
                    "status": {"podIP": pod.ip, "podIPs": [{"ip": pod.ip}]},
                })
            })
            .collect();
        let namespaces: Vec<Value> = self
            .namespaces
            .iter()
            .map(|(ns, labels)| {
                let mut labels = labels.clone();
                labels.insert("kubernetes.io/metadata.name".to_owned(), ns.clone());
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
            })
            .collect();
        let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(dir.join("pods.yaml"), list(pods).to_string()).unwrap();
        std::fs::write(dir.join("ns.yaml"), list(namespaces).to_string()).unwrap();
    }
}

// ------------------------------------------------------------ connections

/// The connections of one (source, destination) pair, normalised.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Conn {
    /// TCP/UDP/SCTP: merged inclusive port ranges within 1–65535.
    ports: BTreeMap<u8, Vec<(u16, u16)>>,
    /// Every protocol other than TCP, UDP and SCTP.
    other: bool,
}

impl Conn {
    fn all() -> Self {
        Conn {
            ports: PORT_PROTOCOLS
                .iter()
                .map(|(p, _)| (*p, vec![(1, 65_535)]))
                .collect(),
            other: true,
        }
    }

    fn is_empty(&self) -> bool {
        !self.other && self.ports.is_empty()
    }

    fn add(&mut self, proto: u8, lo: u16, hi: u16) {
        let (lo, hi) = (lo.max(1), hi);
        if lo > hi {
            return;
        }
        let ranges = self.ports.entry(proto).or_default();
        ranges.push((lo, hi));
        ranges.sort_unstable();
        let mut merged: Vec<(u16, u16)> = Vec::new();
        for (a, b) in ranges.drain(..) {
            match merged.last_mut() {
                Some(last) if u32::from(a) <= u32::from(last.1) + 1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *ranges = merged;
    }

    fn union(&mut self, other: &Conn) {
        self.other |= other.other;
        for (p, ranges) in &other.ports {
            for (lo, hi) in ranges {
                self.add(*p, *lo, *hi);
            }
        }
    }
}

impl std::fmt::Display for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == Conn::all() {
            return f.write_str("all");
        }
        let mut parts: Vec<String> = self
            .ports
            .iter()
            .map(|(p, r)| {
                let list: Vec<String> = r
                    .iter()
                    .map(|(a, b)| {
                        if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        }
                    })
                    .collect();
                format!("{}/{}", proto_name(*p), list.join(","))
            })
            .collect();
        if self.other {
            parts.push("other protocols".to_owned());
        }
        if parts.is_empty() {
            parts.push("none".to_owned());
        }
        f.write_str(&parts.join(" "))
    }
}

type Matrix = BTreeMap<(String, String), Conn>;

/// porin's end-to-end connectivity between distinct pods.
fn porin_matrix(cluster: &Cluster) -> Matrix {
    let inventory = cluster.inventory();
    let text = Cluster::policy_text(&cluster.policies);
    let outcome = load_str(&cluster.name, &text, &LoadLimits::default());
    assert!(
        !outcome.has_errors(),
        "{}: porin does not load the policies: {:?}\n{text}",
        cluster.name,
        outcome.diagnostics
    );
    let inputs = PolicyInput::from_outcome(&outcome);
    let compiled = compile(&inputs, &inventory).unwrap();
    let mut out = Matrix::new();
    for a in &compiled.endpoints {
        for b in &compiled.endpoints {
            if a.display_name() == b.display_name() {
                continue;
            }
            let ranges = between(compiled.mutual_auth, a, b);
            let mut conn = Conn::default();
            let mut others = BTreeSet::new();
            for (p, lo, hi) in &ranges {
                if PORT_PROTOCOLS.iter().any(|(q, _)| q == p) {
                    conn.add(*p, *lo, *hi);
                }
            }
            // Every protocol outside TCP/UDP/SCTP is decided alike by a
            // NetworkPolicy (only an L3 rule allows them): ICMP, ICMPv6
            // and "any other" (255) must agree, or porin is inconsistent.
            for p in [1u8, 58, 255] {
                others.insert(
                    ranges
                        .iter()
                        .any(|(q, lo, hi)| *q == p && *lo == 0 && *hi == u16::MAX),
                );
            }
            assert_eq!(
                others.len(),
                1,
                "{}: porin decides {} → {} differently for ICMP, ICMPv6 and other protocols: {ranges:?}",
                cluster.name,
                a.display_name(),
                b.display_name()
            );
            conn.other = others.contains(&true);
            if !conn.is_empty() {
                out.insert((a.display_name(), b.display_name()), conn);
            }
        }
    }
    out
}

/// nca's connectivity between distinct pods, from `txt_no_fw_rules`.
fn nca_matrix(nca: &str, cluster: &Cluster, policies: &[Value], dir: &Path) -> Matrix {
    cluster.write_nca_inputs(dir, policies);
    let output = Command::new(nca)
        .arg("--connectivity")
        .arg(dir.join("np"))
        .arg("--pod_list")
        .arg(dir.join("pods.yaml"))
        .arg("--ns_list")
        .arg(dir.join("ns.yaml"))
        .args(["--output_format", "txt_no_fw_rules"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{}: nca failed ({}), inputs in {}:\n{stdout}\n{stderr}",
        cluster.name,
        output.status,
        dir.display()
    );
    let pods: BTreeSet<String> = cluster
        .pods
        .iter()
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    let mut out = Matrix::new();
    for line in stdout.lines() {
        let Some((pair, conn)) = line.split_once(" : ") else {
            continue;
        };
        let Some((src, dst)) = pair.split_once(" => ") else {
            continue;
        };
        let (Some(src), Some(dst)) = (src.strip_suffix("[Pod]"), dst.strip_suffix("[Pod]")) else {
            continue; // an IP range on one side
        };
        assert!(
            pods.contains(src) && pods.contains(dst),
            "{}: nca names an unknown pod: {line}",
            cluster.name
        );
        if src == dst {
            continue;
        }
        let parsed = parse_nca_conn(conn).unwrap_or_else(|| {
            panic!(
                "{}: cannot read nca's connection `{conn}` in `{line}`",
                cluster.name
            )
        });
        out.entry((src.to_owned(), dst.to_owned()))
            .or_default()
            .union(&parsed);
    }
    out.retain(|_, c| !c.is_empty());
    out
}

/// `All connections`, `{protocols:TCP,UDP,dst_ports:80,8000-8100}`,
/// `{protocols:SCTP}`.
fn parse_nca_conn(text: &str) -> Option<Conn> {
    let text = text.trim();
    if text == "All connections" {
        return Some(Conn::all());
    }
    if text == "No connections" {
        return Some(Conn::default());
    }
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let (protocols, ports) = match inner.split_once(",dst_ports:") {
        Some((p, ports)) => (p, Some(ports)),
        None => (inner, None),
    };
    let protocols = protocols.strip_prefix("protocols:")?;
    let mut conn = Conn::default();
    for name in protocols.split(',').map(str::trim) {
        let proto = PORT_PROTOCOLS.iter().find(|(_, n)| *n == name)?.0;
        match ports {
            None => conn.add(proto, 1, 65_535),
            Some(list) => {
                for item in list.split(',') {
                    let (lo, hi) = match item.split_once('-') {
                        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
                        None => {
                            let p: u16 = item.parse().ok()?;
                            (p, p)
                        }
                    };
                    conn.add(proto, lo, hi);
                }
            }
        }
    }
    Some(conn)
}

// ------------------------------------------------- expected differences

/// A difference between Cilium 1.19 and the Kubernetes specification, as a
/// rewrite of nca's input that says in Kubernetes terms what Cilium does.
struct Expected {
    name: &'static str,
    reason: &'static str,
    source: &'static str,
    /// Rewrites the policies (and may read the cluster); whether anything
    /// changed.
    rewrite: fn(&Cluster, &mut [Value]) -> bool,
}

const EXPECTED: &[Expected] = &[
    Expected {
        name: "policyTypes default as the API server sets them",
        reason: "A NetworkPolicy without policyTypes gets them from the API server before Cilium sees \
it: Ingress, plus Egress only if `egress` has a rule; an empty `egress: []` leaves egress open (porin \
follows the stored object). nca reads the file as written and isolates egress for a present but \
empty `egress: []`. Rewrite: write the defaulted policyTypes out (and drop an empty `egress`, \
which nca refuses beside policyTypes without Egress).",
        source: "kubernetes/kubernetes pkg/apis/networking/v1/defaults.go SetDefaults_NetworkPolicy \
(`len(obj.Spec.Egress) != 0`)",
        rewrite: default_policy_types,
    },
    Expected {
        name: "ingress ipBlock-only peer admits the policy's namespace",
        reason: "With policy-default-local-cluster (default true) Cilium turns the nil podSelector of an \
ingress peer that has only an ipBlock into the local-cluster selector, and parsePodSelector then pins \
the policy's namespace: the peer also admits every pod of the policy's own namespace (egress peers \
build that selector only with a pod or namespace selector). Kubernetes (nca): an ipBlock peer selects \
addresses, not pods. Rewrite: add `podSelector: {}` to such a `from` list.",
        source: "cilium/cilium pkg/k8s/network_policy.go parseNetworkPolicyPeer; docs/semantics.md §3.1; \
porin PC005; fixtures/policy-tests/knp/knp.yaml",
        rewrite: ipblock_only_ingress,
    },
    Expected {
        name: "egress named ports resolve cluster-wide",
        reason: "Cilium resolves a named port of an egress rule against every endpoint's container ports \
(one number per name cluster-wide), so it allows that number to every selected destination, also one \
without the name. Kubernetes (nca) resolves it per destination pod. Rewrite: the name becomes the \
cluster-wide number when the cluster maps it to exactly one (number, protocol) and the rule's protocol \
matches (the random clusters only generate such names).",
        source: "cilium/cilium pkg/endpoint/policy.go GetNamedPort, pkg/types/portmap.go \
namedPortMultiMap.GetNamedPort; porin resolve/policy.rs named_port",
        rewrite: egress_named_ports_cluster_wide,
    },
    Expected {
        name: "a podSelector's io.kubernetes.pod.namespace is the policy's namespace",
        reason: "Cilium copies a NetworkPolicy podSelector's matchLabels and then sets \
io.kubernetes.pod.namespace to the policy's namespace, overriding a value the user wrote (for the \
subject, and for a peer with only a podSelector). In Kubernetes (nca) no pod carries that label, so \
such a selector selects nothing. Rewrite: drop the key from those matchLabels.",
        source: "cilium/cilium pkg/k8s/network_policy.go parsePodSelector; \
fixtures/policy-tests/audit/knp-namespace-override.yaml",
        rewrite: pod_namespace_label_overridden,
    },
    Expected {
        name: "nca 2.1.0: Exists/DoesNotExist in a podSelector beside a namespaceSelector",
        reason: "Not a semantic difference but a defect of nca 2.1.0, found by this test: in a peer with \
both selectors, a podSelector expression `Exists` or `DoesNotExist` only matches pods of the \
policy's own namespace (`In`/`NotIn` are right). Kubernetes label selectors: `Exists k` is `k In` \
every value k has in the cluster, `DoesNotExist k` is `k NotIn` them (NotIn also matches a pod \
without k). Rewrite: exactly that, over the cluster's pods.",
        source: "Kubernetes apimachinery labels.Selector (Exists, DoesNotExist, NotIn); reproduced with \
nca --connectivity on a two-namespace cluster (test `nca_exists_defect_is_real`)",
        rewrite: exists_as_in,
    },
];

/// A value no generated or fixture label has.
const NO_SUCH_VALUE: &str = "porin-no-such-value";

fn exists_as_in(cluster: &Cluster, policies: &mut [Value]) -> bool {
    let mut values: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for pod in &cluster.pods {
        for (k, v) in &pod.labels {
            values.entry(k).or_default().insert(v);
        }
    }
    let mut changed = false;
    for policy in policies {
        for (section, field) in [("ingress", "from"), ("egress", "to")] {
            let Some(Value::Array(rules)) = policy.pointer_mut(&format!("/spec/{section}")) else {
                continue;
            };
            for rule in rules {
                let Some(Value::Array(peers)) = rule.get_mut(field) else {
                    continue;
                };
                for peer in peers {
                    if peer.get("namespaceSelector").is_none() {
                        continue;
                    }
                    let Some(Value::Array(exprs)) =
                        peer.pointer_mut("/podSelector/matchExpressions")
                    else {
                        continue;
                    };
                    for expr in exprs {
                        let op = match expr.get("operator").and_then(Value::as_str) {
                            Some("Exists") => "In",
                            Some("DoesNotExist") => "NotIn",
                            _ => continue,
                        };
                        let key = expr.get("key").and_then(Value::as_str).unwrap_or_default();
                        let mut list: Vec<&str> = values
                            .get(key)
                            .map(|v| v.iter().copied().collect())
                            .unwrap_or_default();
                        if list.is_empty() {
                            list.push(NO_SUCH_VALUE);
                        }
                        *expr = json!({"key": key, "operator": op, "values": list});
                        changed = true;
                    }
                }
            }
        }
    }
    changed
}

fn pod_namespace_label_overridden(_: &Cluster, policies: &mut [Value]) -> bool {
    const KEY: &str = "io.kubernetes.pod.namespace";
    let mut changed = false;
    let mut strip = |selector: Option<&mut Value>| {
        if let Some(Value::Object(labels)) = selector.and_then(|s| s.get_mut("matchLabels"))
            && labels.remove(KEY).is_some()
        {
            changed = true;
        }
    };
    for policy in policies {
        strip(policy.pointer_mut("/spec/podSelector"));
        for (section, field) in [("ingress", "from"), ("egress", "to")] {
            let Some(Value::Array(rules)) = policy.pointer_mut(&format!("/spec/{section}")) else {
                continue;
            };
            for rule in rules {
                let Some(Value::Array(peers)) = rule.get_mut(field) else {
                    continue;
                };
                for peer in peers {
                    if peer.get("namespaceSelector").is_none() {
                        strip(peer.get_mut("podSelector"));
                    }
                }
            }
        }
    }
    changed
}

fn default_policy_types(_: &Cluster, policies: &mut [Value]) -> bool {
    let mut changed = false;
    for policy in policies {
        let Some(Value::Object(spec)) = policy.get_mut("spec") else {
            continue;
        };
        let given = spec
            .get("policyTypes")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        if given {
            continue;
        }
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|rules| !rules.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
        // Only a present but empty `egress: []` reads differently; nca
        // refuses an `egress` field without the Egress type, so it goes.
        if !egress && spec.remove("egress").is_some() {
            changed = true;
        }
    }
    changed
}

fn ipblock_only_ingress(_: &Cluster, policies: &mut [Value]) -> bool {
    let mut changed = false;
    for policy in policies {
        let Some(Value::Array(rules)) = policy.pointer_mut("/spec/ingress") else {
            continue;
        };
        for rule in rules {
            let Some(Value::Array(from)) = rule.get_mut("from") else {
                continue;
            };
            let quirk = from.iter().any(|peer| {
                peer.get("ipBlock").is_some()
                    && peer.get("podSelector").is_none()
                    && peer.get("namespaceSelector").is_none()
            });
            if quirk {
                from.push(json!({"podSelector": {}}));
                changed = true;
            }
        }
    }
    changed
}

fn egress_named_ports_cluster_wide(cluster: &Cluster, policies: &mut [Value]) -> bool {
    let mut numbers: BTreeMap<&str, BTreeSet<(u16, u8)>> = BTreeMap::new();
    for pod in &cluster.pods {
        for (name, port, proto) in &pod.ports {
            numbers.entry(name).or_default().insert((*port, *proto));
        }
    }
    let mut changed = false;
    for policy in policies {
        let Some(Value::Array(rules)) = policy.pointer_mut("/spec/egress") else {
            continue;
        };
        for rule in rules {
            let Some(Value::Array(ports)) = rule.get_mut("ports") else {
                continue;
            };
            for port in ports {
                let Some(Value::String(name)) = port.get("port") else {
                    continue;
                };
                let proto = match port.get("protocol").and_then(Value::as_str) {
                    None | Some("TCP") => TCP,
                    Some("UDP") => UDP,
                    Some("SCTP") => SCTP,
                    Some(_) => continue,
                };
                let Some(set) = numbers.get(name.as_str()) else {
                    continue;
                };
                if let [(number, p)] = set.iter().copied().collect::<Vec<_>>()[..]
                    && p == proto
                {
                    port["port"] = json!(number);
                    changed = true;
                }
            }
        }
    }
    changed
}

// ------------------------------------------------------------ comparing

fn nca_command() -> Option<String> {
    let nca = std::env::var("PORIN_NCA").unwrap_or_else(|_| "nca".to_owned());
    let ok = Command::new(&nca)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(nca)
}

fn nca_or_skip(test: &str) -> Option<String> {
    let nca = nca_command();
    if nca.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: nca (network-config-analyzer) is not installed; CI must install it (.ci/run)"
        );
        println!(
            "SKIPPED {test}: nca not installed (pip install network-config-analyzer, or set PORIN_NCA)"
        );
    }
    nca
}

fn work_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("nca")
        .join(name)
}

/// The outcome of one comparison.
#[derive(Default)]
struct Tally {
    cases: usize,
    pairs: usize,
    allowed_pairs: usize,
    explained: BTreeMap<&'static str, usize>,
    disagreements: Vec<String>,
    /// porin PR005/PR019 findings on rule items, and how many nca
    /// confirms, per code.
    porin_redundant: BTreeMap<&'static str, usize>,
    confirmed: BTreeMap<&'static str, usize>,
    /// Rule items nca calls redundant and porin does not (expected: see
    /// [`compare_redundancy`]).
    nca_only: Vec<String>,
}

/// Compares one cluster; records unexplained disagreements.
fn compare(nca: &str, cluster: &Cluster, tally: &mut Tally) {
    let dir = work_dir(&cluster.name.replace(['/', '#', '[', ']'], "_"));
    let porin = porin_matrix(cluster);
    let raw = nca_matrix(nca, cluster, &cluster.policies, &dir.join("original"));
    let mut rewritten = cluster.policies.clone();
    let mut applied = Vec::new();
    for expected in EXPECTED {
        if (expected.rewrite)(cluster, &mut rewritten) {
            applied.push(expected.name);
        }
    }
    let adjusted = if applied.is_empty() {
        raw.clone()
    } else {
        nca_matrix(nca, cluster, &rewritten, &dir.join("rewritten"))
    };
    compare_redundancy(nca, cluster, &rewritten, &dir.join("sanity"), tally);
    let n = cluster.pods.len();
    tally.cases += 1;
    tally.pairs += n * n.saturating_sub(1);
    tally.allowed_pairs += porin.len();
    let keys: BTreeSet<&(String, String)> = porin
        .keys()
        .chain(adjusted.keys())
        .chain(raw.keys())
        .collect();
    let none = Conn::default();
    for key in keys {
        let p = porin.get(key).unwrap_or(&none);
        let a = adjusted.get(key).unwrap_or(&none);
        let r = raw.get(key).unwrap_or(&none);
        if p != a {
            tally.disagreements.push(format!(
                "{}: {} → {}: porin {p}, nca {a}{} (inputs: {})",
                cluster.name,
                key.0,
                key.1,
                if applied.is_empty() {
                    String::new()
                } else {
                    format!(" after rewrites {applied:?}")
                },
                dir.display()
            ));
        } else if p != r {
            let label = if applied.len() == 1 {
                applied[0]
            } else {
                "several differences at once"
            };
            *tally.explained.entry(label).or_default() += 1;
        }
    }
}

/// A rule item: (namespace/name, `ingress` or `egress`, 0-based index).
type RuleItem = (String, &'static str, usize);

/// Redundancy, where the definitions meet. nca's `--sanity` calls rule
/// *i* of a policy redundant when the whole configuration's connectivity
/// (pods and IP ranges) is the same without it ("redundant in config"),
/// or when another rule of the same policy contains it, and a policy
/// redundant when the configuration is the same without it (then so is
/// every one of its rules). porin's PR005 (the rule changes no verdict of
/// any endpoint it selects: other allows cover it) and PR019 (none of its
/// flows passes the peer's side) each imply "the configuration's
/// connectivity is the same without the item". That is checked exactly:
/// for every finding, nca `--equiv` compares the configuration with the
/// item deleted from the YAML (porin's advice, applied) against the
/// original, both through the rewrites of [`EXPECTED`] (so the API
/// server's re-defaulting of policyTypes after the edit counts, and nca's
/// `--sanity`, which stops at "vacuous" configurations, is not needed for
/// it). nca's `--sanity` rule findings are then compared the other way,
/// and that converse does not hold; it is only counted:
/// nca also calls redundant a rule whose flows are partly covered on its
/// own side and partly blocked on the peer's side (neither porin rule
/// alone), a rule that grants nothing at all (a named port of the wrong
/// protocol, a subject or peers that select nothing: porin's PR015,
/// PR007, PR008, never PR005), a rule whose only flows are a pod to
/// itself (nca's map has no self-connections), a dead rule one of whose
/// peer selectors selects no pod (PR019 does not judge it: such a
/// selector may name pods outside the inventory), and a rule whose only
/// effect is on IP ranges that other rules already reach. Seen in the
/// runs: the named-port, empty-selector and self-connection cases.
fn compare_redundancy(
    nca: &str,
    cluster: &Cluster,
    rewritten: &[Value],
    dir: &Path,
    tally: &mut Tally,
) {
    let inventory = cluster.inventory();
    let text = Cluster::policy_text(&cluster.policies);
    let outcome = load_str(&cluster.name, &text, &LoadLimits::default());
    let inputs = PolicyInput::from_outcome(&outcome);
    let report = verify(&inputs, Some(&inventory), &LintConfig::default()).unwrap();
    let item_of = |location: &porin_model::diagnostic::Location| -> Option<RuleItem> {
        let policy = cluster.policies.get(location.document)?;
        let name = format!(
            "{}/{}",
            policy.pointer("/metadata/namespace")?.as_str()?,
            policy.pointer("/metadata/name")?.as_str()?
        );
        let (section, rest) = location.route.strip_prefix("spec.")?.split_once('[')?;
        let index: usize = rest.split_once(']')?.0.parse().ok()?;
        let section = match section {
            "ingress" => "ingress",
            "egress" => "egress",
            _ => return None,
        };
        Some((name, section, index))
    };
    let mut porin: BTreeMap<RuleItem, &'static str> = BTreeMap::new();
    for d in &report.findings {
        if !matches!(d.code, "PR005" | "PR019") {
            continue;
        }
        let Some(primary) = &d.primary else { continue };
        let Some(item) = item_of(primary) else {
            continue;
        };
        if d.code == "PR005" && d.related.iter().any(|(l, _)| l == primary) {
            // An item is never redundant with its own peers (issue 15,
            // the per-item shadowing analysis): a PR005 that names its
            // own item among the covering rules is a porin defect.
            tally.disagreements.push(format!(
                "{}: PR005 on {item:?} names the item itself among its covering rules",
                cluster.name
            ));
            continue;
        }
        porin.insert(item, d.code);
    }
    cluster.write_nca_inputs(dir, rewritten);
    let output = Command::new(nca)
        .arg("--sanity")
        .arg(dir.join("np"))
        .arg("--pod_list")
        .arg(dir.join("pods.yaml"))
        .arg("--ns_list")
        .arg(dir.join("ns.yaml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("sanity check"),
        "{}: nca --sanity did not run, inputs in {}:\n{stdout}\n{}",
        cluster.name,
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut rules: BTreeSet<RuleItem> = BTreeSet::new();
    let mut policies: BTreeSet<String> = BTreeSet::new();
    for line in stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            [
                dir @ ("Ingress" | "Egress"),
                "rule",
                "no.",
                n,
                "in",
                "NetworkPolicy",
                name,
                "is",
                "redundant",
                ..,
            ] => {
                let section = if dir == "Ingress" {
                    "ingress"
                } else {
                    "egress"
                };
                let n: usize = n.parse().unwrap();
                rules.insert((name.to_owned(), section, n - 1));
            }
            ["NetworkPolicy", name, "is", verdict, ..] if verdict.starts_with("redundant") => {
                policies.insert(name.trim_end_matches([':', '.']).to_owned());
            }
            _ => {}
        }
    }
    // porin's advice, applied: the YAML without the item. nca decides
    // whether that configuration is equivalent to the original (`--equiv`),
    // both through the rewrites of EXPECTED (so the API server's
    // re-defaulting of policyTypes after the edit is nca's input too).
    for (n, (item, code)) in porin.iter().enumerate() {
        *tally.porin_redundant.entry(code).or_default() += 1;
        let mut edited = cluster.policies.clone();
        let removed = edited.iter_mut().any(|p| {
            let name = format!(
                "{}/{}",
                p.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                p.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
            if name != item.0 {
                return false;
            }
            match p.pointer_mut(&format!("/spec/{}", item.1)) {
                Some(Value::Array(items)) if item.2 < items.len() => {
                    items.remove(item.2);
                    true
                }
                _ => false,
            }
        });
        assert!(removed, "{}: cannot find {item:?}", cluster.name);
        for expected in EXPECTED {
            (expected.rewrite)(cluster, &mut edited);
        }
        let edit_dir = dir.join(format!("without-{n}"));
        cluster.write_nca_inputs(&edit_dir, &edited);
        let output = Command::new(nca)
            .arg("--equiv")
            .arg(edit_dir.join("np"))
            .arg("--base_np_list")
            .arg(dir.join("np"))
            .arg("--pod_list")
            .arg(dir.join("pods.yaml"))
            .arg("--ns_list")
            .arg(dir.join("ns.yaml"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        if stdout.contains("are semantically equivalent") {
            *tally.confirmed.entry(code).or_default() += 1;
            continue;
        }
        let nca_says = if rules.contains(item) || policies.contains(&item.0) {
            " (though its --sanity calls it redundant)"
        } else {
            ""
        };
        tally.disagreements.push(format!(
            "{}: porin {code} on NetworkPolicy {} spec.{}[{}], but nca finds the configuration without it different{nca_says} (inputs: {}):\n{}",
            cluster.name,
            item.0,
            item.1,
            item.2,
            edit_dir.display(),
            stdout.trim()
        ));
    }
    for (name, section, index) in rules.iter().filter(|r| !porin.contains_key(*r)) {
        tally.nca_only.push(format!(
            "{}: NetworkPolicy {name} spec.{section}[{index}]",
            cluster.name
        ));
    }
}

fn finish(test: &str, tally: &Tally) {
    println!(
        "{test}: redundancy: porin findings on rule items {:?}, nca confirms {:?}; nca-only {}",
        tally.porin_redundant,
        tally.confirmed,
        tally.nca_only.len(),
    );
    for item in tally.nca_only.iter().take(10) {
        println!("  nca-only redundant: {item}");
    }
    println!(
        "{test}: {} cases, {} ordered pod pairs, {} with some connection; explained by expected differences: {:?}; unexplained: {}",
        tally.cases,
        tally.pairs,
        tally.allowed_pairs,
        tally.explained,
        tally.disagreements.len()
    );
    for expected in EXPECTED {
        if tally.explained.contains_key(expected.name) {
            println!(
                "  expected difference `{}`: {} [{}]",
                expected.name, expected.reason, expected.source
            );
        }
    }
    assert!(
        tally.disagreements.is_empty(),
        "{test}: {} unexplained disagreements with nca:\n{}",
        tally.disagreements.len(),
        tally.disagreements.join("\n")
    );
}

// ------------------------------------------------------------- fixtures

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents of `text` as JSON, if every one is a NetworkPolicy.
fn knp_documents(name: &str, text: &str) -> Option<Vec<Value>> {
    let outcome = load_str(name, text, &LoadLimits::default());
    if outcome.has_errors() || outcome.documents.is_empty() {
        return None;
    }
    outcome
        .documents
        .iter()
        .map(|d| {
            (d.doc.kind() == "NetworkPolicy").then(|| {
                let mut v = serde_json::to_value(&d.doc).unwrap();
                v["apiVersion"] = json!("networking.k8s.io/v1");
                v["kind"] = json!("NetworkPolicy");
                v
            })
        })
        .collect()
}

fn cluster_of(name: String, inventory: &Inventory, policies: Vec<Value>) -> Option<Cluster> {
    let mut pods = Vec::new();
    for e in &inventory.endpoints {
        // nca knows pods: an endpoint outside Kubernetes, or one without an
        // IPv4 address, has no counterpart there.
        let namespace = e.namespace.clone()?;
        let ip = e.ips.iter().find(|ip| ip.is_ipv4())?;
        pods.push(Pod {
            namespace,
            name: e.name.clone(),
            labels: e.labels.clone(),
            ip: ip.to_string(),
            ports: e
                .ports
                .iter()
                .map(|p| (p.name.clone(), p.port, p.proto))
                .collect(),
        });
    }
    let mut namespaces = inventory.namespaces.clone();
    for labels in namespaces.values_mut() {
        labels.remove("kubernetes.io/metadata.name");
    }
    Some(Cluster {
        name,
        namespaces,
        pods,
        policies,
    })
}

#[derive(serde::Deserialize)]
struct TestFile {
    #[serde(default)]
    policies: Vec<PolicyRef>,
    #[serde(default, rename = "expectError")]
    expect_error: Option<String>,
}

#[derive(serde::Deserialize)]
struct PolicyRef {
    path: Option<String>,
    inline: Option<String>,
}

/// Policy test files and lint fixtures whose policies are all
/// NetworkPolicies.
fn fixture_clusters() -> Vec<Cluster> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![repo().join("fixtures/policy-tests")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        if !text.lines().any(|l| l.trim_end() == "kind: PolicyTest") {
            continue;
        }
        let Ok(spec) = serde_saphyr::from_str::<TestFile>(&text) else {
            continue;
        };
        if spec.expect_error.is_some() {
            continue;
        }
        let mut policies = Vec::new();
        let mut all_knp = !spec.policies.is_empty();
        for (i, p) in spec.policies.iter().enumerate() {
            let (name, body) = match (&p.inline, &p.path) {
                (Some(inline), None) => (format!("{}#{i}", path.display()), inline.clone()),
                (None, Some(rel)) => {
                    let full = path.parent().unwrap().join(rel);
                    match std::fs::read_to_string(&full) {
                        Ok(body) => (full.display().to_string(), body),
                        Err(_) => {
                            all_knp = false;
                            break;
                        }
                    }
                }
                _ => {
                    all_knp = false;
                    break;
                }
            };
            match knp_documents(&name, &body) {
                Some(docs) => policies.extend(docs),
                None => {
                    all_knp = false;
                    break;
                }
            }
        }
        if !all_knp {
            continue;
        }
        let Ok(inventory) = Inventory::load(&path) else {
            continue;
        };
        let name = path
            .strip_prefix(repo())
            .unwrap_or(&path)
            .display()
            .to_string();
        if let Some(c) = cluster_of(name, &inventory, policies) {
            out.push(c);
        }
    }
    let lint = repo().join("fixtures/lint");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&lint)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let inventory_path = if dir.join("inventory.yaml").exists() {
            dir.join("inventory.yaml")
        } else {
            lint.join("inventory.yaml")
        };
        let inventory = Inventory::load(&inventory_path).unwrap();
        for file in ["trigger.yaml", "near_miss.yaml"] {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path
                .strip_prefix(repo())
                .unwrap_or(&path)
                .display()
                .to_string();
            if let Some(policies) = knp_documents(&name, &text)
                && let Some(c) = cluster_of(name, &inventory, policies)
            {
                out.push(c);
            }
        }
    }
    out
}

#[test]
fn fixtures_agree_with_nca() {
    let Some(nca) = nca_or_skip("fixtures_agree_with_nca") else {
        return;
    };
    let clusters = fixture_clusters();
    assert!(
        clusters.len() >= 5,
        "expected the NetworkPolicy fixtures (policy tests, lint fixtures), found {}",
        clusters.len()
    );
    let mut tally = Tally::default();
    for cluster in &clusters {
        compare(&nca, cluster, &mut tally);
    }
    println!(
        "fixtures: {}",
        clusters
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    finish("fixtures_agree_with_nca", &tally);
}

// ------------------------------------------------------- random clusters

/// SplitMix64: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n as u64)).unwrap()
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const NAMESPACES: [&str; 3] = ["alpha", "beta", "gamma"];
const APPS: [&str; 3] = ["a", "b", "c"];
const TIERS: [&str; 2] = ["x", "y"];
const TEAMS: [&str; 2] = ["red", "blue"];
/// Named ports: one number and protocol per name cluster-wide.
const NAMED: [(&str, u16, u8); 3] = [("http", 8080, TCP), ("dns", 53, UDP), ("feed", 9000, SCTP)];

fn random_labels(rng: &mut Rng) -> Value {
    let mut labels = serde_json::Map::new();
    if rng.chance(70) {
        labels.insert("app".into(), json!(rng.pick(&APPS)));
    }
    if rng.chance(40) {
        labels.insert("tier".into(), json!(rng.pick(&TIERS)));
    }
    Value::Object(labels)
}

fn random_pod_selector(rng: &mut Rng) -> Value {
    match rng.below(4) {
        0 => json!({}),
        1 | 2 => json!({"matchLabels": random_labels(rng)}),
        _ => {
            let key = *rng.pick(&["app", "tier"]);
            let op = *rng.pick(&["In", "NotIn", "Exists", "DoesNotExist"]);
            let values = if key == "app" { &APPS[..] } else { &TIERS[..] };
            let mut expr = json!({"key": key, "operator": op});
            if matches!(op, "In" | "NotIn") {
                let mut chosen: Vec<&str> = vec![*rng.pick(values)];
                if rng.chance(40) {
                    chosen.push(*rng.pick(values));
                }
                chosen.sort_unstable();
                chosen.dedup();
                expr["values"] = json!(chosen);
            }
            json!({"matchExpressions": [expr]})
        }
    }
}

fn random_namespace_selector(rng: &mut Rng) -> Value {
    match rng.below(3) {
        0 => json!({}),
        1 => json!({"matchLabels": {"team": rng.pick(&TEAMS)}}),
        _ => json!({"matchLabels": {"kubernetes.io/metadata.name": rng.pick(&NAMESPACES)}}),
    }
}

fn random_peer(rng: &mut Rng) -> Value {
    match rng.below(10) {
        0..=3 => json!({"podSelector": random_pod_selector(rng)}),
        4 | 5 => json!({"namespaceSelector": random_namespace_selector(rng)}),
        6 | 7 => json!({
            "namespaceSelector": random_namespace_selector(rng),
            "podSelector": random_pod_selector(rng),
        }),
        8 => json!({"ipBlock": {"cidr": "10.0.0.0/8"}}),
        _ => json!({"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.1.0.0/16"]}}),
    }
}

fn random_port(rng: &mut Rng) -> Value {
    let protocol = *rng.pick(&[None, Some("TCP"), Some("UDP"), Some("SCTP")]);
    let mut port = serde_json::Map::new();
    if let Some(p) = protocol {
        port.insert("protocol".into(), json!(p));
    }
    match rng.below(6) {
        0 => {}
        1 => {
            // A named port of the protocol (or of none, then a mismatch
            // is possible: Kubernetes and Cilium both allow nothing).
            let (name, _, proto) = if rng.chance(80) {
                *NAMED
                    .iter()
                    .find(|(_, _, p)| proto_name(*p) == protocol.unwrap_or("TCP"))
                    .unwrap()
            } else {
                *rng.pick(&NAMED)
            };
            let _ = proto;
            port.insert("port".into(), json!(name));
        }
        2 => {
            port.insert("port".into(), json!(8000));
            port.insert("endPort".into(), json!(8100));
        }
        _ => {
            port.insert(
                "port".into(),
                json!(rng.pick(&[53, 80, 443, 8080, 9000, 8050])),
            );
        }
    }
    Value::Object(port)
}

fn random_rules(rng: &mut Rng, peers_field: &str) -> Value {
    let count = rng.below(3);
    let rules: Vec<Value> = (0..count)
        .map(|_| {
            let mut rule = serde_json::Map::new();
            if rng.chance(80) {
                let peers: Vec<Value> = (0..=rng.below(2)).map(|_| random_peer(rng)).collect();
                rule.insert(peers_field.into(), json!(peers));
            }
            if rng.chance(65) {
                let ports: Vec<Value> = (0..=rng.below(2)).map(|_| random_port(rng)).collect();
                rule.insert("ports".into(), json!(ports));
            }
            Value::Object(rule)
        })
        .collect();
    json!(rules)
}

fn random_cluster(seed: u64) -> Cluster {
    let mut rng = Rng(seed);
    let ns_count = 2 + rng.below(2);
    let mut namespaces = BTreeMap::new();
    for ns in &NAMESPACES[..ns_count] {
        let mut labels = BTreeMap::new();
        labels.insert("team".to_owned(), (*rng.pick(&TEAMS)).to_owned());
        namespaces.insert((*ns).to_owned(), labels);
    }
    let pod_count = 3 + rng.below(6);
    let mut pods = Vec::new();
    for i in 0..pod_count {
        let n = rng.below(ns_count);
        let mut labels = BTreeMap::new();
        if let Value::Object(map) = random_labels(&mut rng) {
            for (k, v) in map {
                labels.insert(k, v.as_str().unwrap().to_owned());
            }
        }
        let ports = NAMED
            .iter()
            .filter(|_| rng.chance(45))
            .map(|(name, port, proto)| ((*name).to_owned(), *port, *proto))
            .collect();
        pods.push(Pod {
            namespace: NAMESPACES[n].to_owned(),
            name: format!("pod-{i}"),
            labels,
            ip: format!("10.{}.0.{}", n, i + 1),
            ports,
        });
    }
    let policy_count = 1 + rng.below(4);
    let mut policies = Vec::new();
    for i in 0..policy_count {
        let mut spec = serde_json::Map::new();
        spec.insert("podSelector".into(), random_pod_selector(&mut rng));
        let types = *rng.pick(&[
            None,
            Some(&["Ingress"][..]),
            Some(&["Egress"][..]),
            Some(&["Ingress", "Egress"][..]),
        ]);
        let (mut ingress, mut egress) = match types {
            None => (true, rng.chance(30)),
            Some(t) => (t.contains(&"Ingress"), t.contains(&"Egress")),
        };
        if let Some(t) = types {
            spec.insert("policyTypes".into(), json!(t));
        }
        // Without policyTypes, Kubernetes defaults them from the rules
        // present (the API server's defaulting, which nca and Cilium
        // follow); keep some rule lists absent either way.
        ingress &= rng.chance(85);
        egress &= rng.chance(85);
        if ingress {
            spec.insert("ingress".into(), random_rules(&mut rng, "from"));
        }
        if egress {
            spec.insert("egress".into(), random_rules(&mut rng, "to"));
        }
        let ns = NAMESPACES[rng.below(ns_count)];
        policies.push(json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": format!("np-{i}"), "namespace": ns},
            "spec": Value::Object(spec),
        }));
    }
    Cluster {
        name: format!("random-{seed:#018x}"),
        namespaces,
        pods,
        policies,
    }
}

#[test]
fn random_networkpolicy_sets_agree_with_nca() {
    let Some(nca) = nca_or_skip("random_networkpolicy_sets_agree_with_nca") else {
        return;
    };
    let cases: u64 = std::env::var("PORIN_NCA_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let base: u64 = std::env::var("PORIN_NCA_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_0015);
    // PORIN_NCA_SEEDS=0x12ab,0x34cd reruns given clusters (as the failure
    // messages name them) instead.
    let seeds: Vec<u64> = match std::env::var("PORIN_NCA_SEEDS") {
        Ok(list) => list
            .split(',')
            .map(|s| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap())
            .collect(),
        Err(_) => (0..cases)
            .map(|i| base.wrapping_mul(1_000_003).wrapping_add(i))
            .collect(),
    };
    let mut tally = Tally::default();
    for seed in seeds {
        compare(&nca, &random_cluster(seed), &mut tally);
    }
    finish("random_networkpolicy_sets_agree_with_nca", &tally);
}

#[test]
fn nca_connection_text_parses() {
    let c = parse_nca_conn("{protocols:TCP,UDP,dst_ports:7,5432,6000-6010}").unwrap();
    assert_eq!(c.ports[&TCP], vec![(7, 7), (5432, 5432), (6000, 6010)]);
    assert_eq!(c.ports[&UDP], c.ports[&TCP]);
    assert!(!c.other);
    assert_eq!(
        parse_nca_conn("{protocols:SCTP}").unwrap().ports[&SCTP],
        vec![(1, 65_535)]
    );
    assert_eq!(parse_nca_conn("All connections").unwrap(), Conn::all());
    assert!(
        parse_nca_conn("{protocols:ICMP}").is_none(),
        "unknown text is an error, not a silent none"
    );
}

/// The nca defect [`exists_as_in`] works around is real (and the entry
/// goes when a fixed nca no longer shows it): `tier Exists` beside a
/// namespaceSelector misses a pod of another namespace.
#[test]
fn nca_exists_defect_is_real() {
    let Some(nca) = nca_or_skip("nca_exists_defect_is_real") else {
        return;
    };
    let blue = || BTreeMap::from([("team".to_owned(), "blue".to_owned())]);
    let pod = |ns: &str, name: &str, labels: &[(&str, &str)], ip: &str| Pod {
        namespace: ns.to_owned(),
        name: name.to_owned(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ip: ip.to_owned(),
        ports: Vec::new(),
    };
    let cluster = Cluster {
        name: "nca-exists-defect".to_owned(),
        namespaces: BTreeMap::from([("alpha".to_owned(), blue()), ("beta".to_owned(), blue())]),
        pods: vec![
            pod("beta", "src", &[], "10.1.0.1"),
            pod("alpha", "dst", &[("tier", "y")], "10.0.0.1"),
        ],
        policies: vec![json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "out", "namespace": "beta"},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{
                "namespaceSelector": {"matchLabels": {"team": "blue"}},
                "podSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            }]}]},
        })],
    };
    let key = ("beta/src".to_owned(), "alpha/dst".to_owned());
    assert!(
        porin_matrix(&cluster)
            .get(&key)
            .is_some_and(|c| *c == Conn::all())
    );
    let dir = work_dir("nca-exists-defect");
    let raw = nca_matrix(&nca, &cluster, &cluster.policies, &dir.join("original"));
    assert!(
        !raw.contains_key(&key),
        "nca now selects alpha/dst through `Exists`: the defect is fixed, drop the entry from EXPECTED"
    );
    let mut rewritten = cluster.policies.clone();
    assert!(exists_as_in(&cluster, &mut rewritten));
    let fixed = nca_matrix(&nca, &cluster, &rewritten, &dir.join("rewritten"));
    assert_eq!(fixed.get(&key), Some(&Conn::all()));
}
