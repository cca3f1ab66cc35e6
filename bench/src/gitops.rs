//! Generated GitOps-like repositories on disk, read by `porin` (and `nca`) the way a user's
//! repository is: policy files, and Kubernetes manifests as the inventory.
//!
//! Layout of one generated cluster (`porin-bench gen`):
//!
//! ```text
//! ROOT/policies/<namespace>.yaml      the policies of one namespace (CNPs or NetworkPolicies)
//! ROOT/inventory/namespaces.yaml      Namespace objects (labels: team, kubernetes.io/metadata.name)
//! ROOT/inventory/pods-<namespace>.yaml Pod manifests as `kubectl get pods -o yaml` lists them
//!                                     (labels, serviceAccountName, container ports, status.podIPs)
//! ROOT/apps/<namespace>.yaml          the Deployments and Services those pods come from
//! ROOT/cluster.json                   what was generated (counts, seed)
//! ```
//!
//! `porin lint ROOT/policies --inventory ROOT/inventory` and `porin compile ROOT/policies
//! --inventory ROOT/inventory` read it. `apps/` is what the repository would hold; it is not
//! given as the inventory (porin's manifest reader makes one endpoint per Deployment, standing for
//! all its replicas, which would hide the pod count).
//!
//! Workloads: namespaces `ns-0..` of 100 pods each (at least one namespace), ten apps
//! `app-0..app-9` per namespace with equal replica counts, plus two `kube-dns` pods in
//! `kube-system` (every generated policy allows DNS egress to them). Identities:
//! [`Identities::Shared`]: the pods of one Deployment share their labels (`app`, `tier`, and the
//! `pod-template-hash` that Cilium and porin leave out of identities), so identities =
//! namespaces × 10 (+1 for kube-dns); [`Identities::Unique`]: every pod also carries its own
//! label (`pod: <name>`), so identities = pods (+1).
//!
//! The CNP shape is `porin_compiler::compile::synthetic::cluster` (the compiler's generator for
//! the compile benchmarks: endpoint peers, port ranges, CIDR sets with excepts, entities, deny
//! rules, an HTTP rule on a named port, DNS egress). The Kubernetes NetworkPolicy shape is
//! [`knp_policies`]. Everything is deterministic: the seed picks pod names, template hashes and
//! the NetworkPolicies' peers; equal seeds give equal bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use porin_compiler::compile::synthetic;
use serde::{Deserialize, Serialize};

/// Pods per namespace.
pub const PODS_PER_NAMESPACE: usize = 100;
/// Apps (Deployments) per namespace (as `synthetic::cluster`).
pub const APPS: usize = 10;

/// Which policy language the cluster's policies are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum PolicyKind {
    /// CiliumNetworkPolicy (`synthetic::cluster`'s shape).
    Cnp,
    /// Kubernetes NetworkPolicy ([`knp_policies`]).
    Knp,
}

/// How pods map to identities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Identities {
    /// One unique label per pod: identities = pods.
    Unique,
    /// The pods of one Deployment share their labels.
    Shared,
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSpec {
    /// Policy language.
    pub kind: PolicyKind,
    /// Policies.
    pub policies: usize,
    /// Application pods (kube-dns comes on top).
    pub pods: usize,
    /// Identity mode.
    pub identities: Identities,
    /// Seed.
    pub seed: u64,
}

/// What was generated (`cluster.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Generated {
    /// The spec.
    pub spec: ClusterSpec,
    /// Policy documents written.
    pub policies: usize,
    /// Pod manifests written (kube-dns included).
    pub pods: usize,
    /// Distinct identities those pods have (namespace + identity-relevant labels).
    pub identities: usize,
    /// Namespaces.
    pub namespaces: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Files written.
    pub files: usize,
}

impl Generated {
    /// Empties `root` (a repository is always written whole) and starts the record of `spec`.
    pub fn start(spec: ClusterSpec, root: &Path) -> Result<Self> {
        if root.exists() {
            std::fs::remove_dir_all(root)
                .with_context(|| format!("cannot empty {}", root.display()))?;
        }
        Ok(Self {
            spec,
            policies: 0,
            pods: 0,
            identities: 0,
            namespaces: 0,
            bytes: 0,
            files: 0,
        })
    }
}

/// SplitMix64: a small, well-known deterministic generator (no dependency needed for this).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// `len` characters of Kubernetes' random-suffix alphabet (`bcdfghjklmnpqrstvwxz2456789`).
    pub fn suffix(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len())] as char)
            .collect()
    }
}

/// One pod to write.
#[derive(Debug, Clone)]
pub struct Pod {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Labels (identity-relevant ones and `pod-template-hash`).
    pub labels: BTreeMap<String, String>,
    /// Service account.
    pub service_account: String,
    /// Named container ports: (name, port, protocol).
    pub ports: Vec<(String, u16, &'static str)>,
    /// Address.
    pub ip: std::net::Ipv4Addr,
}

/// One Deployment (and its Service).
#[derive(Debug, Clone)]
pub struct Workload {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Template labels (without `pod-template-hash`).
    pub labels: BTreeMap<String, String>,
    /// Replicas.
    pub replicas: usize,
    /// Service account.
    pub service_account: String,
    /// Named container ports.
    pub ports: Vec<(String, u16, &'static str)>,
}

/// The namespaces, workloads and pods of a cluster.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// Namespace → labels.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Deployments.
    pub workloads: Vec<Workload>,
    /// Pods.
    pub pods: Vec<Pod>,
}

impl Topology {
    /// Distinct identities: namespace + labels, without the labels Cilium leaves out of
    /// identities (`pod-template-hash`, the only one generated).
    pub fn identities(&self) -> usize {
        self.pods
            .iter()
            .map(|p| {
                let mut labels = p.labels.clone();
                labels.remove("pod-template-hash");
                (p.namespace.clone(), labels)
            })
            .collect::<BTreeSet<_>>()
            .len()
    }
}

/// First pod address (172.16.0.0/12: outside every prefix the generated policies name).
const POD_NET: u32 = u32::from_be_bytes([172, 16, 0, 0]);

/// The namespaces, Deployments and pods of `spec`: `synthetic::cluster`'s inventory shape
/// (namespace `ns-{e % namespaces}`, app `app-{(e / namespaces) % 10}`, tier, service account
/// `sa-<app>`, named port `http` 8080), with Kubernetes-style names and addresses, plus
/// kube-dns.
pub fn topology(spec: &ClusterSpec) -> Topology {
    let mut rng = Rng::new(spec.seed);
    let namespaces = (spec.pods / PODS_PER_NAMESPACE).max(1);
    let mut topology = Topology::default();
    for n in 0..namespaces {
        let name = format!("ns-{n}");
        let mut labels = BTreeMap::new();
        labels.insert("team".to_owned(), format!("team-{}", n % 7));
        labels.insert("kubernetes.io/metadata.name".to_owned(), name.clone());
        topology.namespaces.insert(name, labels);
    }
    let mut system = BTreeMap::new();
    system.insert(
        "kubernetes.io/metadata.name".to_owned(),
        "kube-system".to_owned(),
    );
    topology.namespaces.insert("kube-system".to_owned(), system);

    // Workloads first (replica counts), with a template hash each.
    let mut replicas: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for e in 0..spec.pods {
        *replicas
            .entry((e % namespaces, (e / namespaces) % APPS))
            .or_default() += 1;
    }
    let mut hashes: BTreeMap<(usize, usize), String> = BTreeMap::new();
    for (&(n, app), &count) in &replicas {
        let hash = rng.suffix(10);
        hashes.insert((n, app), hash);
        topology.workloads.push(Workload {
            name: format!("app-{app}"),
            namespace: format!("ns-{n}"),
            labels: app_labels(app),
            replicas: count,
            service_account: format!("sa-{app}"),
            ports: vec![("http".to_owned(), 8080, "TCP")],
        });
    }
    for e in 0..spec.pods {
        let (n, app) = (e % namespaces, (e / namespaces) % APPS);
        let hash = &hashes[&(n, app)];
        let name = format!("app-{app}-{hash}-{}", rng.suffix(5));
        let mut labels = app_labels(app);
        labels.insert("pod-template-hash".to_owned(), hash.clone());
        if spec.identities == Identities::Unique {
            labels.insert("pod".to_owned(), name.clone());
        }
        topology.pods.push(Pod {
            name,
            namespace: format!("ns-{n}"),
            labels,
            service_account: format!("sa-{app}"),
            ports: vec![("http".to_owned(), 8080, "TCP")],
            ip: std::net::Ipv4Addr::from(POD_NET + e as u32 + 1),
        });
    }
    let dns_labels: BTreeMap<String, String> =
        [("k8s-app".to_owned(), "kube-dns".to_owned())].into();
    let hash = rng.suffix(10);
    topology.workloads.push(Workload {
        name: "coredns".to_owned(),
        namespace: "kube-system".to_owned(),
        labels: dns_labels.clone(),
        replicas: 2,
        service_account: "coredns".to_owned(),
        ports: vec![
            ("dns".to_owned(), 53, "UDP"),
            ("dns-tcp".to_owned(), 53, "TCP"),
        ],
    });
    for i in 0..2u32 {
        let mut labels = dns_labels.clone();
        labels.insert("pod-template-hash".to_owned(), hash.clone());
        topology.pods.push(Pod {
            name: format!("coredns-{hash}-{}", rng.suffix(5)),
            namespace: "kube-system".to_owned(),
            labels,
            service_account: "coredns".to_owned(),
            ports: vec![
                ("dns".to_owned(), 53, "UDP"),
                ("dns-tcp".to_owned(), 53, "TCP"),
            ],
            ip: std::net::Ipv4Addr::new(172, 31, 255, 10 + i as u8),
        });
    }
    topology
}

fn app_labels(app: usize) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), format!("app-{app}"));
    labels.insert(
        "tier".to_owned(),
        if app < 5 { "front" } else { "back" }.to_owned(),
    );
    labels
}

/// A YAML scalar: plain when that is unambiguous, double-quoted otherwise.
fn scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && text.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !matches!(
            text,
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
        );
    if plain {
        text.to_owned()
    } else {
        format!("{text:?}")
    }
}

fn write_labels(out: &mut String, indent: usize, labels: &BTreeMap<String, String>) {
    let pad = " ".repeat(indent);
    for (k, v) in labels {
        let _ = writeln!(out, "{pad}{}: {}", scalar(k), scalar(v));
    }
}

fn write_ports(out: &mut String, indent: usize, ports: &[(String, u16, &'static str)]) {
    let pad = " ".repeat(indent);
    let _ = writeln!(out, "{pad}ports:");
    for (name, port, proto) in ports {
        let _ = writeln!(
            out,
            "{pad}- name: {name}\n{pad}  containerPort: {port}\n{pad}  protocol: {proto}"
        );
    }
}

/// The Namespace manifests.
pub fn namespaces_yaml(topology: &Topology) -> String {
    let mut out = String::new();
    for (name, labels) in &topology.namespaces {
        let _ = writeln!(
            out,
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:"
        );
        write_labels(&mut out, 4, labels);
    }
    out
}

/// The Pod manifests of one namespace.
pub fn pods_yaml<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> String {
    let mut out = String::new();
    for pod in pods {
        let _ = writeln!(
            out,
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {}\n  namespace: {}\n  labels:",
            pod.name, pod.namespace
        );
        write_labels(&mut out, 4, &pod.labels);
        let image = pod.labels.get("app").map_or("coredns", String::as_str);
        let _ = writeln!(
            out,
            "spec:\n  serviceAccountName: {}\n  containers:\n  - name: main\n    image: registry.example/{image}:1.0",
            pod.service_account
        );
        write_ports(&mut out, 4, &pod.ports);
        let _ = writeln!(
            out,
            "status:\n  phase: Running\n  podIP: {ip}\n  podIPs:\n  - ip: {ip}",
            ip = pod.ip
        );
    }
    out
}

/// The Deployment and Service manifests of some workloads.
pub fn apps_yaml<'a>(workloads: impl IntoIterator<Item = &'a Workload>) -> String {
    let mut out = String::new();
    for w in workloads {
        let _ = writeln!(
            out,
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {}\n  namespace: {}\nspec:\n  replicas: {}\n  selector:\n    matchLabels:",
            w.name, w.namespace, w.replicas
        );
        write_labels(&mut out, 6, &w.labels);
        let _ = writeln!(out, "  template:\n    metadata:\n      labels:");
        write_labels(&mut out, 8, &w.labels);
        let image = w.labels.get("app").map_or("coredns", String::as_str);
        let _ = writeln!(
            out,
            "    spec:\n      serviceAccountName: {}\n      containers:\n      - name: main\n        image: registry.example/{image}:1.0",
            w.service_account
        );
        write_ports(&mut out, 8, &w.ports);
        let _ = writeln!(
            out,
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {}\n  namespace: {}\nspec:\n  selector:",
            w.name, w.namespace
        );
        write_labels(&mut out, 4, &w.labels);
        let _ = writeln!(out, "  ports:");
        for (name, port, proto) in &w.ports {
            let _ = writeln!(
                out,
                "  - name: {name}\n    port: {port}\n    targetPort: {name}\n    protocol: {proto}"
            );
        }
    }
    out
}

/// Splits a multi-document text (`---` lines) into its documents, each keyed by its
/// `metadata.namespace` (the first `  namespace:` line; `default` without one).
pub fn documents_by_namespace(yaml: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for doc in yaml.split("---\n").filter(|d| !d.trim().is_empty()) {
        let namespace = doc
            .lines()
            .find_map(|l| l.strip_prefix("  namespace: "))
            .unwrap_or("default")
            .trim()
            .to_owned();
        out.entry(namespace).or_default().push(doc.to_owned());
    }
    out
}

/// Kubernetes NetworkPolicies over the topology's apps: policy `p` selects app
/// `(p / namespaces) % 10` of namespace `p % namespaces` (so the sizes of issue #15 have one
/// policy per Deployment), `policyTypes: [Ingress, Egress]`:
///
/// - ingress from the app's callers in its namespace (the next app, and one chosen by the
///   seed) on the app's port (TCP 8000 + app); every fourth policy names its callers by two
///   overlapping selectors (`app: <caller>` and `tier: <caller's tier>`, issue #15's shape);
///   every fourth one more also admits `app: <caller>` from the namespaces of team
///   `team-<k>` on TCP 9090; every fourth one more admits an `ipBlock` with an `except` on the
///   port range 1024–2047;
/// - egress: DNS to kube-dns (UDP and TCP 53), and to each app that lists this one as a caller
///   on that app's port, except that every seventh policy forgets one of them (so a caller's
///   ingress rule at the callee admits nothing end to end, as real repositories have).
pub fn knp_policies(spec: &ClusterSpec) -> String {
    let namespaces = (spec.pods / PODS_PER_NAMESPACE).max(1);
    let mut rng = Rng::new(spec.seed ^ 0x6b6e_7000);
    // callers[app]: the apps that may call `app` (same in every namespace, so egress can
    // mirror it).
    let callers: Vec<Vec<usize>> = (0..APPS)
        .map(|app| {
            let mut list = vec![(app + 1) % APPS];
            let extra = rng.below(APPS);
            if extra != app && !list.contains(&extra) {
                list.push(extra);
            }
            list
        })
        .collect();
    let port = |app: usize| 8000 + app;
    let tier = |app: usize| if app < 5 { "front" } else { "back" };
    let mut yaml = String::new();
    for p in 0..spec.policies {
        let n = p % namespaces;
        let app = (p / namespaces) % APPS;
        let _ = writeln!(
            yaml,
            "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: policy-{p}\n  namespace: ns-{n}\nspec:\n  podSelector:\n    matchLabels:\n      app: app-{app}\n  policyTypes:\n  - Ingress\n  - Egress\n  ingress:"
        );
        let _ = writeln!(yaml, "  - from:");
        for &caller in &callers[app] {
            let _ = writeln!(
                yaml,
                "    - podSelector:\n        matchLabels:\n          app: app-{caller}"
            );
            if p % 4 == 1 {
                let _ = writeln!(
                    yaml,
                    "    - podSelector:\n        matchLabels:\n          tier: {}",
                    tier(caller)
                );
            }
        }
        let _ = writeln!(
            yaml,
            "    ports:\n    - protocol: TCP\n      port: {}",
            port(app)
        );
        match p % 4 {
            2 => {
                let _ = writeln!(
                    yaml,
                    "  - from:\n    - namespaceSelector:\n        matchLabels:\n          team: team-{}\n      podSelector:\n        matchLabels:\n          app: app-{}\n    ports:\n    - protocol: TCP\n      port: 9090",
                    rng.below(7),
                    callers[app][0]
                );
            }
            3 => {
                let block = p % 200;
                let _ = writeln!(
                    yaml,
                    "  - from:\n    - ipBlock:\n        cidr: 10.{block}.0.0/16\n        except:\n        - 10.{block}.1.0/24\n    ports:\n    - protocol: TCP\n      port: 1024\n      endPort: 2047"
                );
            }
            _ => {}
        }
        let _ = writeln!(
            yaml,
            "  egress:\n  - to:\n    - namespaceSelector:\n        matchLabels:\n          kubernetes.io/metadata.name: kube-system\n      podSelector:\n        matchLabels:\n          k8s-app: kube-dns\n    ports:\n    - protocol: UDP\n      port: 53\n    - protocol: TCP\n      port: 53"
        );
        let mut callees: Vec<usize> = (0..APPS)
            .filter(|callee| callers[*callee].contains(&app))
            .collect();
        if p % 7 == 0 && !callees.is_empty() {
            callees.remove(rng.below(callees.len()));
        }
        for callee in callees {
            let _ = writeln!(
                yaml,
                "  - to:\n    - podSelector:\n        matchLabels:\n          app: app-{callee}\n    ports:\n    - protocol: TCP\n      port: {}",
                port(callee)
            );
        }
    }
    yaml
}

/// Writes `text` to `path` (creating its directory), counting files and bytes.
pub fn write_file(path: &Path, text: &str, generated: &mut Generated) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    generated.files += 1;
    generated.bytes += text.len() as u64;
    Ok(())
}

/// Writes the policies, one file per namespace, into `dir`; returns the document count.
pub fn write_policies(
    dir: &Path,
    yaml: &str,
    per_file: usize,
    generated: &mut Generated,
) -> Result<usize> {
    let mut count = 0;
    for (namespace, docs) in documents_by_namespace(yaml) {
        count += docs.len();
        let chunks: Vec<&[String]> = docs.chunks(per_file.max(1)).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let name = if chunks.len() == 1 {
                format!("{namespace}.yaml")
            } else {
                format!("{namespace}-{i:03}.yaml")
            };
            let mut text = String::new();
            for doc in *chunk {
                text.push_str("---\n");
                text.push_str(doc);
            }
            write_file(&dir.join(name), &text, generated)?;
        }
    }
    Ok(count)
}

/// Writes the inventory (namespaces and pods) and the apps of `topology` under `root`.
pub fn write_topology(root: &Path, topology: &Topology, generated: &mut Generated) -> Result<()> {
    write_file(
        &root.join("inventory/namespaces.yaml"),
        &namespaces_yaml(topology),
        generated,
    )?;
    let mut by_namespace: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for pod in &topology.pods {
        by_namespace.entry(&pod.namespace).or_default().push(pod);
    }
    for (namespace, pods) in by_namespace {
        write_file(
            &root.join(format!("inventory/pods-{namespace}.yaml")),
            &pods_yaml(pods),
            generated,
        )?;
    }
    let mut apps: BTreeMap<&str, Vec<&Workload>> = BTreeMap::new();
    for w in &topology.workloads {
        apps.entry(&w.namespace).or_default().push(w);
    }
    for (namespace, workloads) in apps {
        write_file(
            &root.join(format!("apps/{namespace}.yaml")),
            &apps_yaml(workloads),
            generated,
        )?;
    }
    generated.pods = topology.pods.len();
    generated.identities = topology.identities();
    generated.namespaces = topology.namespaces.len();
    Ok(())
}

/// Generates the cluster of `spec` under `root` (which is emptied first).
pub fn write_cluster(spec: &ClusterSpec, root: &Path) -> Result<Generated> {
    let mut generated = Generated::start(*spec, root)?;
    let topology = topology(spec);
    let policy_yaml = match spec.kind {
        PolicyKind::Cnp => synthetic::cluster(spec.policies, spec.pods).policy_yaml,
        PolicyKind::Knp => knp_policies(spec),
    };
    generated.policies = write_policies(&root.join("policies"), &policy_yaml, 500, &mut generated)?;
    write_topology(root, &topology, &mut generated)?;
    let summary = serde_json::to_string_pretty(&generated)?;
    std::fs::write(root.join("cluster.json"), summary)?;
    Ok(generated)
}

/// `synthetic::cidr_cluster(rules)` on disk: the policies in files of 1,000 documents, the ten
/// endpoints as Pod manifests in `ns-0`.
pub fn write_cidr(rules: usize, root: &Path) -> Result<Generated> {
    let cluster = synthetic::cidr_cluster(rules);
    let mut generated = Generated::start(
        ClusterSpec {
            kind: PolicyKind::Cnp,
            policies: rules,
            pods: cluster.inventory.endpoints.len(),
            identities: Identities::Shared,
            seed: 0,
        },
        root,
    )?;
    let mut topology = Topology::default();
    topology
        .namespaces
        .insert("ns-0".to_owned(), BTreeMap::new());
    for (i, endpoint) in cluster.inventory.endpoints.iter().enumerate() {
        topology.pods.push(Pod {
            name: endpoint.name.clone(),
            namespace: "ns-0".to_owned(),
            labels: endpoint.labels.clone(),
            service_account: "default".to_owned(),
            ports: Vec::new(),
            ip: std::net::Ipv4Addr::from(POD_NET + i as u32 + 1),
        });
    }
    generated.policies = write_policies(
        &root.join("policies"),
        &cluster.policy_yaml,
        1_000,
        &mut generated,
    )?;
    write_topology(root, &topology, &mut generated)?;
    Ok(generated)
}

/// Cilium's own policy-resolution benchmark on disk (`BenchmarkRegeneratePolicyRules`,
/// pkg/policy/resolve_test.go as of cilium/cilium PR #6893): `rules` rules, each selecting the
/// endpoint labelled `foo` and allowing ingress from `bar` (selected by nothing), and
/// `identities` identities labelled `foo<i>`, resolved for one endpoint. Cilium's rules are not
/// namespaced, so they are written as CiliumClusterwideNetworkPolicies; each identity is one pod.
pub fn write_cilium_shape(rules: usize, identities: usize, root: &Path) -> Result<Generated> {
    let mut generated = Generated::start(
        ClusterSpec {
            kind: PolicyKind::Cnp,
            policies: rules,
            pods: identities + 1,
            identities: Identities::Unique,
            seed: 0,
        },
        root,
    )?;
    let mut yaml = String::new();
    for i in 1..=rules {
        let _ = write!(
            yaml,
            "---\napiVersion: cilium.io/v2\nkind: CiliumClusterwideNetworkPolicy\nmetadata:\n  name: rule-{i}\nspec:\n  endpointSelector:\n    matchLabels:\n      foo: \"\"\n  ingress:\n  - fromEndpoints:\n    - matchLabels:\n        bar: \"\"\n"
        );
    }
    let mut topology = Topology::default();
    topology
        .namespaces
        .insert("default".to_owned(), BTreeMap::new());
    let mut push = |name: String, label: String, i: u32| {
        topology.pods.push(Pod {
            name,
            namespace: "default".to_owned(),
            labels: [(label, String::new())].into(),
            service_account: "default".to_owned(),
            ports: Vec::new(),
            ip: std::net::Ipv4Addr::from(POD_NET + i),
        });
    };
    push("endpoint".to_owned(), "foo".to_owned(), 1);
    for i in 0..identities {
        push(format!("id-{i}"), format!("foo{i}"), i as u32 + 2);
    }
    generated.policies = write_policies(&root.join("policies"), &yaml, 1_000, &mut generated)?;
    write_topology(root, &topology, &mut generated)?;
    Ok(generated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: PolicyKind, identities: Identities) -> ClusterSpec {
        ClusterSpec {
            kind,
            policies: 30,
            pods: 300,
            identities,
            seed: 7,
        }
    }

    #[test]
    fn identities_follow_the_mode() {
        let unique = topology(&spec(PolicyKind::Cnp, Identities::Unique));
        assert_eq!(unique.pods.len(), 302);
        assert_eq!(unique.identities(), 301);
        let shared = topology(&spec(PolicyKind::Cnp, Identities::Shared));
        assert_eq!(shared.identities(), 3 * APPS + 1);
        assert_eq!(shared.workloads.len(), 3 * APPS + 1);
        assert_eq!(
            shared.workloads.iter().map(|w| w.replicas).sum::<usize>(),
            302
        );
    }

    #[test]
    fn generation_is_deterministic_and_seeded() {
        let a = knp_policies(&spec(PolicyKind::Knp, Identities::Shared));
        let b = knp_policies(&spec(PolicyKind::Knp, Identities::Shared));
        assert_eq!(a, b);
        let pods = |seed| {
            let mut s = spec(PolicyKind::Knp, Identities::Shared);
            s.seed = seed;
            pods_yaml(&topology(&s).pods)
        };
        assert_eq!(pods(1), pods(1));
        assert_ne!(pods(1), pods(2));
        assert_eq!(
            documents_by_namespace(&a)
                .values()
                .map(Vec::len)
                .sum::<usize>(),
            30
        );
    }

    #[test]
    fn scalars_that_yaml_would_retype_are_quoted() {
        assert_eq!(scalar("app-1"), "app-1");
        assert_eq!(scalar(""), "\"\"");
        assert_eq!(scalar("on"), "\"on\"");
        assert_eq!(scalar("8080"), "\"8080\"");
        assert_eq!(
            scalar("kubernetes.io/metadata.name"),
            "kubernetes.io/metadata.name"
        );
    }
}
