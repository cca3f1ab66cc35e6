//! `porin-bench nca` (issue #15): porin beside np-guard's network-config-analyzer (`nca`, an
//! independent implementation of Kubernetes NetworkPolicy connectivity), on the same files, each
//! run a fresh child process ([`crate::child`]: wall time, `ru_maxrss`, a time limit):
//!
//! - `porin lint policies --inventory inventory --format json` beside
//!   `nca --sanity policies --pod_list inventory --ns_list inventory`;
//! - `porin diff policies policies-new --inventory inventory --format json` beside
//!   `nca --semantic_diff policies-new --base_np_list policies --pod_list inventory --ns_list
//!   inventory`.
//!
//! On generated Kubernetes NetworkPolicy clusters ([`crate::gitops::knp_policies`], pods of a
//! Deployment sharing labels; sizes 30 × 300, 100 × 1,000, 1,000 × 10,000) and on the Online
//! Boutique application ([`write_boutique`]). `policies-new` is a pull request's worth of change:
//! one rule's port changed, one policy deleted, one policy added ([`change`]).
//!
//! `nca` is `pip install network-config-analyzer` (a venv is fine: `--nca PATH`). Without it the
//! porin columns are still measured and the nca columns say "nca not installed". nca 2.1.0
//! holds at most 10,000 pods (an assertion in its `nca/CoreDS/Peer.py`, `max_num_of_pods`):
//! on more it prints `Error:` and exits 7, which the table shows as an error exit.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::child::{self, Outcome, Run};
use crate::gitops::{
    self, ClusterSpec, Generated, Identities, Pod, PolicyKind, Topology, Workload,
};
use crate::stats::group;

/// Arguments of `porin-bench nca`.
#[derive(Debug, Clone, Args)]
pub struct NcaArgs {
    /// Seconds, not minutes: one tiny cluster and the application (CI smoke test).
    #[arg(long)]
    pub quick: bool,
    /// The `nca` command.
    #[arg(long, default_value = "nca")]
    pub nca: PathBuf,
    /// The `porin` binary (default: beside porin-bench, else target/release/porin).
    #[arg(long)]
    pub porin: Option<PathBuf>,
    /// Wall-time limit per run (`180` or `180s`).
    #[arg(long, value_parser = crate::parse_secs, default_value = "180s")]
    pub timeout: Duration,
    /// Address-space limit per run, GiB.
    #[arg(long, default_value_t = 8)]
    pub memory_gib: u64,
    /// NetworkPolicy clusters as POLICIES:PODS (default 30:300,100:1000,1000:10000).
    #[arg(long, value_parser = crate::parse_size, value_delimiter = ',')]
    pub sizes: Option<Vec<(usize, usize)>>,
    /// Skip the Online Boutique application.
    #[arg(long)]
    pub no_boutique: bool,
    /// Where to generate (default: a directory under the system temp dir).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Keep the generated repositories.
    #[arg(long)]
    pub keep: bool,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// One tool run with a summary of what it printed.
#[derive(Debug, Clone)]
struct ToolRun {
    run: Run,
    /// What it reported, in a few words.
    reported: String,
}

enum Cell {
    Measured(ToolRun),
    Skipped(String),
}

impl Cell {
    /// Wall seconds of a run that did its job (exit 0 or 1: porin's "found errors", nca's
    /// "not equivalent" or "failed sanity check").
    fn secs(&self) -> Option<f64> {
        match self {
            Cell::Measured(r) if r.run.ran() => Some(r.run.wall_secs),
            _ => None,
        }
    }

    /// Exited by itself (an error exit included): the next size is worth trying.
    fn finished(&self) -> bool {
        matches!(self, Cell::Measured(r) if matches!(r.run.outcome, Outcome::Exited(_)))
    }

    fn show(&self) -> String {
        match self {
            Cell::Skipped(reason) => reason.clone(),
            Cell::Measured(r) => match r.run.outcome {
                Outcome::TimedOut => format!("did not finish in {:.0} s", r.run.limit_secs),
                Outcome::Exited(code) => {
                    let figures = format!(
                        "{} s, {} MiB",
                        group(r.run.wall_secs, 2),
                        group(r.run.max_rss_kib as f64 / 1024.0, 0)
                    );
                    if r.run.ran() {
                        figures
                    } else {
                        format!("error (exit {code}) after {figures}")
                    }
                }
                Outcome::Signalled(_) => r.run.note(),
            },
        }
    }

    fn reported(&self) -> String {
        match self {
            Cell::Measured(r) if self.finished() => r.reported.clone(),
            _ => String::new(),
        }
    }
}

/// Runs one tool; `summarize` reads its stdout and exit code.
fn run_tool(
    program: &Path,
    args: &[&str],
    cwd: &Path,
    timeout: Duration,
    memory_limit: u64,
    summarize: impl Fn(&str, &Run) -> String,
) -> Result<ToolRun> {
    let out = cwd.join("porin-bench-nca.stdout");
    let err = cwd.join("porin-bench-nca.stderr");
    eprintln!(
        "nca: {} {} in {}",
        program.display(),
        args.join(" "),
        cwd.display()
    );
    let run = child::run(&child::Spec {
        program,
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        env: vec![("RAYON_NUM_THREADS".to_owned(), "2".to_owned())],
        cwd,
        stdout: Some(&out),
        stderr: Some(&err),
        timeout,
        memory_limit: Some(memory_limit),
    })?;
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let mut reported = if matches!(run.outcome, Outcome::Exited(_)) {
        summarize(&stdout, &run)
    } else {
        String::new()
    };
    if let Outcome::Exited(code) = run.outcome
        && code > 1
    {
        let reason = stderr
            .lines()
            .chain(stdout.lines())
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .chars()
            .take(160)
            .collect::<String>();
        let _ = write!(reported, " (exit {code}: {})", reason.replace('|', "\\|"));
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&err);
    Ok(ToolRun { run, reported })
}

fn porin_lint_summary(stdout: &str, _: &Run) -> String {
    let mut counts = BTreeMap::new();
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(stdout) {
        crate::scale::count_codes(&json, &mut counts);
    }
    let total: usize = counts.values().sum();
    let mut top: Vec<(&String, &usize)> = counts.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = top
        .iter()
        .take(4)
        .map(|(c, n)| format!("{c} {n}"))
        .collect();
    if shown.is_empty() {
        format!("{total} findings")
    } else {
        format!("{total} findings ({})", shown.join(", "))
    }
}

fn nca_sanity_summary(stdout: &str, _: &Run) -> String {
    let count = |needle: &str| stdout.lines().filter(|l| l.contains(needle)).count();
    format!(
        "{} redundant, {} selecting no pods",
        count(" is redundant"),
        count("does not select any pods")
    )
}

fn porin_diff_summary(stdout: &str, _: &Run) -> String {
    // `--format json`: count the objects that carry a change (the rows).
    let rows = serde_json::from_str::<serde_json::Value>(stdout)
        .ok()
        .map_or(0, |json| count_rows(&json));
    format!("{rows} changed rows")
}

/// The entries of the longest array in the document (porin diff's rows).
fn count_rows(json: &serde_json::Value) -> usize {
    match json {
        serde_json::Value::Array(items) => items
            .len()
            .max(items.iter().map(count_rows).max().unwrap_or(0)),
        serde_json::Value::Object(map) => map.values().map(count_rows).max().unwrap_or(0),
        _ => 0,
    }
}

fn nca_diff_summary(stdout: &str, _: &Run) -> String {
    let connections = stdout.lines().filter(|l| l.contains("src_ns:")).count();
    format!("{connections} changed connection lines")
}

/// A pull request's worth of change to a policy set: the first policy's first `port: N` becomes
/// 9443, the second policy is deleted, and a new policy (`added-by-pr`) selecting the first
/// policy's pods admits `app: app-5` on TCP 8000.
pub fn change(yaml: &str) -> String {
    let docs: Vec<&str> = yaml
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .collect();
    let mut out = String::new();
    for (i, doc) in docs.iter().enumerate() {
        match i {
            0 => {
                let changed = match doc.find("      port: ") {
                    Some(at) => {
                        let end = doc[at..].find('\n').map_or(doc.len(), |e| at + e);
                        format!("{}      port: 9443{}", &doc[..at], &doc[end..])
                    }
                    None => (*doc).to_owned(),
                };
                out.push_str("---\n");
                out.push_str(&changed);
                let namespace = doc
                    .lines()
                    .find_map(|l| l.strip_prefix("  namespace: "))
                    .unwrap_or("default");
                let selector = doc
                    .split("podSelector:\n")
                    .nth(1)
                    .and_then(|rest| rest.split("  policyTypes:").next())
                    .unwrap_or("    matchLabels:\n      app: app-0\n");
                let _ = write!(
                    out,
                    "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: added-by-pr\n  namespace: {namespace}\nspec:\n  podSelector:\n{selector}  policyTypes:\n  - Ingress\n  ingress:\n  - from:\n    - podSelector:\n        matchLabels:\n          app: app-5\n    ports:\n    - protocol: TCP\n      port: 8000\n"
                );
            }
            1 => {}
            _ => {
                out.push_str("---\n");
                out.push_str(doc);
            }
        }
    }
    out
}

/// The Online Boutique's services: (app, port its policy admits, callers). Reconstructed from
/// the service graph of GoogleCloudPlatform/microservices-demo (its
/// `kustomize/components/network-policies` component: one NetworkPolicy per Deployment plus
/// `deny-all`, 13 in all, egress open); written here, not copied.
const BOUTIQUE: [(&str, u16, &[&str]); 10] = [
    ("adservice", 9555, &["frontend"]),
    ("cartservice", 7070, &["frontend", "checkoutservice"]),
    ("checkoutservice", 5050, &["frontend"]),
    ("currencyservice", 7000, &["frontend", "checkoutservice"]),
    ("emailservice", 8080, &["checkoutservice"]),
    ("paymentservice", 50051, &["checkoutservice"]),
    (
        "productcatalogservice",
        3550,
        &["frontend", "checkoutservice", "recommendationservice"],
    ),
    ("recommendationservice", 8080, &["frontend"]),
    ("redis-cart", 6379, &["cartservice"]),
    ("shippingservice", 50051, &["frontend", "checkoutservice"]),
];

/// The Boutique's namespace.
const BOUTIQUE_NS: &str = "onlineboutique";

/// The Boutique's 13 NetworkPolicies; `changed`: the version after an application change
/// (recommendationservice starts calling adservice; frontend stops calling shippingservice
/// directly).
pub fn boutique_policies(changed: bool) -> String {
    let mut yaml = String::new();
    let header = |yaml: &mut String, name: &str| {
        let _ = write!(
            yaml,
            "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n  namespace: {BOUTIQUE_NS}\nspec:\n"
        );
    };
    header(&mut yaml, "deny-all");
    yaml.push_str("  podSelector: {}\n  policyTypes:\n  - Ingress\n  - Egress\n");
    for (app, port, callers) in BOUTIQUE {
        let mut callers: Vec<&str> = callers.to_vec();
        if changed && app == "adservice" {
            callers.push("recommendationservice");
        }
        if changed && app == "shippingservice" {
            callers.retain(|c| *c != "frontend");
        }
        header(&mut yaml, app);
        let _ = writeln!(
            yaml,
            "  podSelector:\n    matchLabels:\n      app: {app}\n  policyTypes:\n  - Ingress\n  - Egress\n  ingress:\n  - from:"
        );
        for caller in callers {
            let _ = writeln!(
                yaml,
                "    - podSelector:\n        matchLabels:\n          app: {caller}"
            );
        }
        let _ = writeln!(
            yaml,
            "    ports:\n    - port: {port}\n      protocol: TCP\n  egress:\n  - {{}}"
        );
    }
    header(&mut yaml, "frontend");
    yaml.push_str(
        "  podSelector:\n    matchLabels:\n      app: frontend\n  policyTypes:\n  - Ingress\n  - Egress\n  ingress:\n  - {}\n  egress:\n  - {}\n",
    );
    header(&mut yaml, "loadgenerator");
    yaml.push_str(
        "  podSelector:\n    matchLabels:\n      app: loadgenerator\n  policyTypes:\n  - Egress\n  egress:\n  - {}\n",
    );
    yaml
}

/// Writes the Boutique: `policies/` (13 NetworkPolicies), `policies-new/` (after the change),
/// `inventory/` (namespace and one Pod per Deployment), `apps/` (Deployments and Services).
pub fn write_boutique(root: &Path) -> Result<Generated> {
    let mut generated = Generated::start(
        ClusterSpec {
            kind: PolicyKind::Knp,
            policies: 13,
            pods: 12,
            identities: Identities::Shared,
            seed: 0,
        },
        root,
    )?;
    let mut topology = Topology::default();
    topology.namespaces.insert(
        BOUTIQUE_NS.to_owned(),
        [(
            "kubernetes.io/metadata.name".to_owned(),
            BOUTIQUE_NS.to_owned(),
        )]
        .into(),
    );
    let mut rng = gitops::Rng::new(0xb0_u64);
    let apps = BOUTIQUE
        .iter()
        .map(|(app, port, _)| (*app, *port))
        .chain([("frontend", 8080), ("loadgenerator", 8089)]);
    for (i, (app, port)) in apps.enumerate() {
        let labels: BTreeMap<String, String> = [("app".to_owned(), app.to_owned())].into();
        let hash = rng.suffix(10);
        let ports = vec![("grpc".to_owned(), port, "TCP")];
        topology.workloads.push(Workload {
            name: app.to_owned(),
            namespace: BOUTIQUE_NS.to_owned(),
            labels: labels.clone(),
            replicas: 1,
            service_account: app.to_owned(),
            ports: ports.clone(),
        });
        let mut pod_labels = labels;
        pod_labels.insert("pod-template-hash".to_owned(), hash.clone());
        topology.pods.push(Pod {
            name: format!("{app}-{hash}-{}", rng.suffix(5)),
            namespace: BOUTIQUE_NS.to_owned(),
            labels: pod_labels,
            service_account: app.to_owned(),
            ports,
            ip: std::net::Ipv4Addr::new(172, 16, 0, 10 + i as u8),
        });
    }
    generated.policies = gitops::write_policies(
        &root.join("policies"),
        &boutique_policies(false),
        100,
        &mut generated,
    )?;
    gitops::write_policies(
        &root.join("policies-new"),
        &boutique_policies(true),
        100,
        &mut generated,
    )?;
    gitops::write_topology(root, &topology, &mut generated)?;
    Ok(generated)
}

/// One compared repository.
struct Compared {
    name: String,
    generated: Generated,
    porin_lint: Cell,
    nca_sanity: Cell,
    porin_diff: Cell,
    nca_diff: Cell,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => format!("{:.0}×", a / b),
        _ => "n/a".to_owned(),
    }
}

struct Tools<'a> {
    porin: &'a Path,
    nca: Option<&'a Path>,
    timeout: Duration,
    memory_limit: u64,
}

fn compare(
    tools: &Tools<'_>,
    name: String,
    generated: Generated,
    root: &Path,
    gave_up: &mut BTreeMap<&'static str, bool>,
) -> Result<Compared> {
    let t = tools.timeout;
    let m = tools.memory_limit;
    let porin_lint = Cell::Measured(run_tool(
        tools.porin,
        &[
            "lint",
            "policies",
            "--inventory",
            "inventory",
            "--format",
            "json",
        ],
        root,
        t,
        m,
        porin_lint_summary,
    )?);
    let porin_diff = Cell::Measured(run_tool(
        tools.porin,
        &[
            "diff",
            "policies",
            "policies-new",
            "--inventory",
            "inventory",
            "--format",
            "json",
        ],
        root,
        t,
        m,
        porin_diff_summary,
    )?);
    let nca_cell = |op: &'static str,
                    args: &[&str],
                    summarize: fn(&str, &Run) -> String,
                    gave_up: &mut BTreeMap<&'static str, bool>|
     -> Result<Cell> {
        let Some(nca) = tools.nca else {
            return Ok(Cell::Skipped("nca not installed".to_owned()));
        };
        if gave_up.get(op).copied().unwrap_or(false) {
            return Ok(Cell::Skipped(
                "not run (a smaller size did not finish)".to_owned(),
            ));
        }
        let cell = Cell::Measured(run_tool(nca, args, root, t, m, summarize)?);
        if !cell.finished() {
            gave_up.insert(op, true);
        }
        Ok(cell)
    };
    let nca_sanity = nca_cell(
        "sanity",
        &[
            "--sanity",
            "policies",
            "--pod_list",
            "inventory",
            "--ns_list",
            "inventory",
        ],
        nca_sanity_summary,
        gave_up,
    )?;
    let nca_diff = nca_cell(
        "diff",
        &[
            "--semantic_diff",
            "policies-new",
            "--base_np_list",
            "policies",
            "--pod_list",
            "inventory",
            "--ns_list",
            "inventory",
        ],
        nca_diff_summary,
        gave_up,
    )?;
    Ok(Compared {
        name,
        generated,
        porin_lint,
        nca_sanity,
        porin_diff,
        nca_diff,
    })
}

/// Runs the comparison and renders its tables.
pub fn run(args: &NcaArgs, default_porin: &Path) -> Result<String> {
    let porin = args
        .porin
        .clone()
        .unwrap_or_else(|| default_porin.to_owned());
    let nca_version = std::process::Command::new(&args.nca)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if nca_version.is_none() {
        eprintln!(
            "nca: `{}` is not installed or does not start (pip install network-config-analyzer, \
             or --nca PATH); measuring porin only",
            args.nca.display()
        );
    }
    let workdir = args.workdir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("porin-bench-nca-{}", std::process::id()))
    });
    std::fs::create_dir_all(&workdir)
        .with_context(|| format!("cannot create {}", workdir.display()))?;
    let tools = Tools {
        porin: &porin,
        nca: nca_version.as_ref().map(|_| args.nca.as_path()),
        timeout: args.timeout,
        memory_limit: args.memory_gib << 30,
    };
    let sizes = args.sizes.clone().unwrap_or_else(|| {
        if args.quick {
            vec![(10, 100)]
        } else {
            vec![(30, 300), (100, 1_000), (1_000, 10_000)]
        }
    });
    let mut rows = Vec::new();
    let mut gave_up = BTreeMap::new();
    if !args.no_boutique {
        let root = workdir.join("online-boutique");
        let generated = write_boutique(&root)?;
        rows.push(compare(
            &tools,
            "Online Boutique (reconstructed)".to_owned(),
            generated,
            &root,
            &mut BTreeMap::new(),
        )?);
        if !args.keep {
            let _ = std::fs::remove_dir_all(&root);
        }
    }
    for (policies, pods) in sizes {
        let spec = ClusterSpec {
            kind: PolicyKind::Knp,
            policies,
            pods,
            identities: Identities::Shared,
            seed: args.seed,
        };
        let root = workdir.join(format!("knp-{policies}x{pods}"));
        eprintln!(
            "nca: generating {policies} NetworkPolicies × {pods} pods in {}",
            root.display()
        );
        let generated = gitops::write_cluster(&spec, &root)?;
        let mut new = generated.clone();
        let old_yaml = gitops::knp_policies(&spec);
        gitops::write_policies(
            &root.join("policies-new"),
            &change(&old_yaml),
            500,
            &mut new,
        )?;
        rows.push(compare(
            &tools,
            "generated".to_owned(),
            generated,
            &root,
            &mut gave_up,
        )?);
        if !args.keep {
            let _ = std::fs::remove_dir_all(&root);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### porin vs nca (issue #15)\n\n`{}` ({}) beside `{}` ({}); {} CPUs, load average at end \
         {}. Each run a fresh process, limit {:.0} s, {} GiB address space. Cells: wall time, \
         peak RSS (`ru_maxrss`). Generated clusters: Kubernetes NetworkPolicies, pods of a \
         Deployment share labels; `policies-new` changes one port, deletes one policy and adds \
         one.\n",
        porin.display(),
        version_of(&porin),
        args.nca.display(),
        nca_version.as_deref().unwrap_or("not installed"),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        crate::cpu::load_average(),
        args.timeout.as_secs_f64(),
        args.memory_gib
    );
    out.push_str("#### Lint: `porin lint` vs `nca --sanity`\n\n");
    table(&mut out, &rows, "porin lint", "nca --sanity", |r| {
        (&r.porin_lint, &r.nca_sanity)
    });
    out.push_str("\n#### Diff: `porin diff` vs `nca --semantic_diff`\n\n");
    table(&mut out, &rows, "porin diff", "nca --semantic_diff", |r| {
        (&r.porin_diff, &r.nca_diff)
    });
    if !args.keep {
        let _ = std::fs::remove_dir(&workdir);
    }
    Ok(out)
}

/// One side-by-side table: `pick` gives the (porin, nca) cells of a row.
fn table(
    out: &mut String,
    rows: &[Compared],
    porin: &str,
    nca: &str,
    pick: impl Fn(&Compared) -> (&Cell, &Cell),
) {
    let _ = writeln!(
        out,
        "| cluster | policies | pods | identities | {porin} | {nca} | nca ÷ porin | porin \
         reported | nca reported |\n|---|---:|---:|---:|---|---|---:|---|---|"
    );
    for row in rows {
        let g = &row.generated;
        let (p, n) = pick(row);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.name,
            group(g.policies as f64, 0),
            group(g.pods as f64, 0),
            group(g.identities as f64, 0),
            p.show(),
            n.show(),
            ratio(n.secs(), p.secs()),
            p.reported(),
            n.reported(),
        );
    }
}

fn version_of(program: &Path) -> String {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "not found".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boutique_has_thirteen_policies_and_its_change_moves_two_callers() {
        let old = boutique_policies(false);
        let new = boutique_policies(true);
        assert_eq!(old.matches("kind: NetworkPolicy").count(), 13);
        assert_eq!(new.matches("kind: NetworkPolicy").count(), 13);
        let callers = |yaml: &str| yaml.matches("app: recommendationservice").count();
        assert_eq!(callers(&new), callers(&old) + 1);
        let frontend = |yaml: &str| yaml.matches("app: frontend").count();
        assert_eq!(frontend(&new) + 1, frontend(&old));
    }

    #[test]
    fn a_change_edits_one_port_deletes_one_policy_and_adds_one() {
        let spec = ClusterSpec {
            kind: PolicyKind::Knp,
            policies: 30,
            pods: 300,
            identities: Identities::Shared,
            seed: 1,
        };
        let old = gitops::knp_policies(&spec);
        let new = change(&old);
        assert_eq!(new.matches("kind: NetworkPolicy").count(), 30);
        assert!(!new.contains("name: policy-1\n"));
        assert!(new.contains("name: added-by-pr\n"));
        assert_eq!(new.matches("port: 9443").count(), 1);
    }
}
