//! `porin-bench flows [--quick] [--lines N]`: `porin replay` of a large Hubble recording
//! (issue #22: a 1,000,000-line flow file replays in ≤ 10 s and ≤ 200 MB).
//!
//! Writes a recording of the Online Boutique (`examples/boutique`: its manifests are the
//! inventory, its policies the policies in force) as the Hubble exporter writes it (one
//! `GetFlowsResponse` a line, pod labels and workloads on both ends, policy names of
//! `*_allowed_by`, IPv4 and IPv6, replies, a few policy drops, the world reaching the
//! frontend), then runs the release `porin replay --flows FILE POLICIES --current POLICIES
//! --inventory INV` on it as a measured child (wall time, peak RSS from `wait4`). Two
//! baselines in the same run: the same replay of the first 1,000 lines (what does not depend
//! on the file's length: loading and compiling both policy sets) and `wc -l` of the whole file
//! (reading it at all). The generated file is deleted afterwards unless `--keep`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::child;

/// Arguments of `porin-bench flows`.
#[derive(Args, Clone)]
pub struct FlowsArgs {
    /// 20,000 lines instead of 1,000,000 (CI smoke test; not a measurement).
    #[arg(long)]
    pub quick: bool,
    /// Lines of the recording.
    #[arg(long)]
    pub lines: Option<usize>,
    /// The `porin` binary (default: beside porin-bench, else target/release/porin).
    #[arg(long)]
    pub porin: Option<PathBuf>,
    /// Where the recording is written (default target/bench-flows/).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the generated recording.
    #[arg(long)]
    pub keep: bool,
}

const APPS: [&str; 13] = [
    "adservice",
    "cartservice",
    "checkoutservice",
    "currencyservice",
    "emailservice",
    "frontend",
    "loadgenerator",
    "paymentservice",
    "productcatalogservice",
    "recommendationservice",
    "redis-cart",
    "shippingservice",
    "coredns",
];

/// The demo's calls (caller, callee, protocol, port, egress policy, ingress policy) as
/// the policies of examples/boutique allow them.
const CALLS: [(usize, usize, &str, u16, &str, &str); 18] = [
    (6, 5, "TCP", 8080, "loadgenerator", "frontend"),
    (5, 0, "TCP", 9555, "frontend", "adservice"),
    (5, 1, "TCP", 7070, "frontend", "cartservice"),
    (5, 2, "TCP", 5050, "frontend", "checkoutservice"),
    (5, 3, "TCP", 7000, "frontend", "currencyservice"),
    (5, 8, "TCP", 3550, "frontend", "productcatalogservice"),
    (5, 9, "TCP", 8080, "frontend", "recommendationservice"),
    (5, 11, "TCP", 50051, "frontend", "shippingservice"),
    (1, 10, "TCP", 6379, "cartservice", "redis-cart"),
    (
        2,
        8,
        "TCP",
        3550,
        "checkoutservice",
        "productcatalogservice",
    ),
    (2, 11, "TCP", 50051, "checkoutservice", "shippingservice"),
    (2, 7, "TCP", 50051, "checkoutservice", "paymentservice"),
    (2, 4, "TCP", 8080, "checkoutservice", "emailservice"),
    (2, 3, "TCP", 7000, "checkoutservice", "currencyservice"),
    (2, 1, "TCP", 7070, "checkoutservice", "cartservice"),
    (
        9,
        8,
        "TCP",
        3550,
        "recommendationservice",
        "productcatalogservice",
    ),
    (5, 12, "UDP", 53, "allow-dns", ""),
    (2, 12, "UDP", 53, "allow-dns", ""),
];

fn endpoint(app: usize) -> String {
    let name = APPS[app];
    let (ns, label) = if name == "coredns" {
        ("kube-system", "k8s:k8s-app=kube-dns".to_owned())
    } else {
        ("default", format!("k8s:app={name}"))
    };
    format!(
        r#"{{"ID":{},"identity":{},"cluster_name":"default","namespace":"{ns}","labels":["{label}","k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name={ns}","k8s:io.cilium.k8s.policy.cluster=default","k8s:io.cilium.k8s.policy.serviceaccount={name}","k8s:io.kubernetes.pod.namespace={ns}"],"pod_name":"{name}-6b9f7c{app:02}d4-x{app:02}kq","workloads":[{{"name":"{name}","kind":"Deployment"}}]}}"#,
        100 + app * 37,
        20_000 + app * 911
    )
}

fn address(app: usize, v6: bool) -> String {
    if v6 {
        format!("fd00:10:244::{:x}", app + 1)
    } else {
        format!("10.244.0.{}", app + 1)
    }
}

fn timestamp(n: usize) -> String {
    // 2025-12-01T10:00:00Z plus 3.6 ms a line: a million lines span an hour.
    let micros = n as u64 * 3_600;
    let secs = micros / 1_000_000;
    format!(
        "2025-12-01T{:02}:{:02}:{:02}.{:06}Z",
        10 + secs / 3600,
        secs / 60 % 60,
        secs % 60,
        micros % 1_000_000
    )
}

/// One exporter line.
#[allow(clippy::too_many_arguments, reason = "the fields of one flow line")]
fn line(
    out: &mut String,
    n: usize,
    from: (&str, &str),
    to: (&str, &str),
    proto: &str,
    ports: (u32, u16),
    verdict: &str,
    direction: &str,
    reply: bool,
    policy: &str,
) {
    let time = timestamp(n);
    let family = if from.1.contains(':') { "IPv6" } else { "IPv4" };
    let flags = if proto == "TCP" {
        if reply {
            r#","flags":{"ACK":true}"#
        } else {
            r#","flags":{"SYN":true}"#
        }
    } else {
        ""
    };
    let drop = if verdict == "DROPPED" {
        r#""drop_reason":133,"drop_reason_desc":"POLICY_DENIED","#
    } else {
        ""
    };
    let cited = if policy.is_empty() {
        String::new()
    } else {
        format!(
            r#","{}_allowed_by":[{{"name":"{policy}","namespace":"default","labels":["k8s:io.cilium.k8s.policy.name={policy}"],"revision":"12","kind":"CiliumNetworkPolicy"}}]"#,
            direction.to_ascii_lowercase()
        )
    };
    let _ = writeln!(
        out,
        r#"{{"flow":{{"time":"{time}","verdict":"{verdict}",{drop}"IP":{{"source":"{}","destination":"{}","ipVersion":"{family}"}},"l4":{{"{proto}":{{"source_port":{},"destination_port":{}{flags}}}}},"source":{},"destination":{},"Type":"L3_L4","node_name":"boutique-worker","event_type":{{"type":5}},"traffic_direction":"{direction}","is_reply":{reply},"Summary":"{proto}"{cited}}},"node_name":"boutique-worker","time":"{time}"}}"#,
        from.1, to.1, ports.0, ports.1, from.0, to.0
    );
}

/// Writes `lines` lines of the boutique's traffic to `path`.
fn generate(path: &Path, lines: usize) -> Result<u64> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
    let endpoints: Vec<String> = (0..APPS.len()).map(endpoint).collect();
    let world = r#"{"identity":2,"labels":["reserved:world"]}"#;
    let mut text = String::new();
    let mut n = 0;
    let mut connection = 0usize;
    while n < lines {
        connection += 1;
        let v6 = connection.is_multiple_of(3);
        let sport = 32_768 + (connection * 7919 % 28_000) as u32;
        text.clear();
        if connection.is_multiple_of(50) {
            // The world reaches the frontend (fromEntities: [world]).
            let client = format!("198.51.{}.{}", connection / 250 % 256, connection % 250);
            let fe = address(5, false);
            line(
                &mut text,
                n,
                (world, &client),
                (&endpoints[5], &fe),
                "TCP",
                (sport, 8080),
                "FORWARDED",
                "INGRESS",
                false,
                "frontend",
            );
            line(
                &mut text,
                n + 1,
                (&endpoints[5], &fe),
                (world, &client),
                "TCP",
                (8080, sport as u16),
                "FORWARDED",
                "EGRESS",
                true,
                "",
            );
        } else if connection.is_multiple_of(97) {
            // The frontend has no egress rule for redis: dropped at its egress.
            let (a, b) = (address(5, v6), address(10, v6));
            line(
                &mut text,
                n,
                (&endpoints[5], &a),
                (&endpoints[10], &b),
                "TCP",
                (sport, 6379),
                "DROPPED",
                "EGRESS",
                false,
                "",
            );
        } else {
            let (from, to, proto, port, egress, ingress) = CALLS[connection % CALLS.len()];
            let (a, b) = (address(from, v6), address(to, v6));
            let (src, dst) = (
                (endpoints[from].as_str(), a.as_str()),
                (endpoints[to].as_str(), b.as_str()),
            );
            line(
                &mut text,
                n,
                src,
                dst,
                proto,
                (sport, port),
                "FORWARDED",
                "EGRESS",
                false,
                egress,
            );
            line(
                &mut text,
                n + 1,
                src,
                dst,
                proto,
                (sport, port),
                "FORWARDED",
                "INGRESS",
                false,
                ingress,
            );
            line(
                &mut text,
                n + 2,
                dst,
                src,
                proto,
                (u32::from(port), sport as u16),
                "FORWARDED",
                "EGRESS",
                true,
                "",
            );
        }
        let take: Vec<&str> = text.lines().take(lines - n).collect();
        for l in &take {
            writer.write_all(l.as_bytes())?;
            writer.write_all(b"\n")?;
        }
        n += take.len();
    }
    writer.flush()?;
    Ok(std::fs::metadata(path)?.len())
}

fn measure(porin: &Path, cwd: &Path, args: Vec<String>, out: &Path) -> Result<child::Run> {
    child::run(&child::Spec {
        program: porin,
        args,
        env: vec![],
        cwd,
        stdout: Some(out),
        stderr: None,
        timeout: Duration::from_secs(300),
        memory_limit: Some(4 << 30),
    })
}

/// Runs the benchmark; returns the Markdown report.
pub fn run(args: &FlowsArgs, porin: &Path) -> Result<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lines = args
        .lines
        .unwrap_or(if args.quick { 20_000 } else { 1_000_000 });
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| root.join("target/bench-flows"));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("boutique-{lines}.jsonpb"));
    let head = dir.join("boutique-1000.jsonpb");
    let started = Instant::now();
    let bytes = generate(&file, lines)?;
    let generated = started.elapsed();
    generate(&head, lines.min(1000))?;
    let replay = |flows: &Path| -> Vec<String> {
        [
            "replay",
            "--flows",
            &flows.display().to_string(),
            "examples/boutique/policies",
            "--current",
            "examples/boutique/policies",
            "--inventory",
            "examples/boutique/manifests.yaml",
            "--format",
            "json",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    let out = dir.join("replay.json");
    let full = measure(porin, &root, replay(&file), &out)?;
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out)?)
        .context("porin replay wrote no JSON")?;
    if !full.ran() {
        bail!("porin replay did not finish: {}", full.note());
    }
    let fixed = measure(porin, &root, replay(&head), &dir.join("replay-head.json"))?;
    let wc = measure(
        Path::new("wc"),
        &root,
        vec!["-l".to_owned(), file.display().to_string()],
        &dir.join("wc.txt"),
    )?;
    if !args.keep {
        let _ = std::fs::remove_file(&file);
        let _ = std::fs::remove_file(&head);
    }
    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut text = format!(
        "### porin replay of a Hubble recording ({} lines, {:.0} MiB, generated in {:.1} s)\n\n",
        lines,
        bytes as f64 / f64::from(1 << 20),
        generated.as_secs_f64()
    );
    text.push_str("| run | wall s | peak RSS MiB | lines/s |\n|---|---:|---:|---:|\n");
    for (name, run, n) in [
        (
            format!("`porin replay` (--current, 2 compilations), {lines} lines"),
            full,
            lines,
        ),
        (
            "`porin replay`, first 1,000 lines (fixed cost)".to_owned(),
            fixed,
            lines.min(1000),
        ),
        (
            format!("`wc -l` of the {lines} lines (reading floor)"),
            wc,
            lines,
        ),
    ] {
        let _ = writeln!(
            text,
            "| {name}{} | {:.2} | {:.1} | {:.0} |",
            if run.note().is_empty() {
                String::new()
            } else {
                format!(" ({})", run.note())
            },
            run.wall_secs,
            mib(run.max_rss_kib),
            n as f64 / run.wall_secs.max(1e-9)
        );
    }
    let _ = writeln!(
        text,
        "\nDecided {} flows ({} distinct edges), {} disagreements; issue #22's bound (≤ 10 s, ≤ 200 MiB for 1,000,000 lines): {}.",
        report["summary"]["decided"],
        report["summary"]["edges"],
        report["disagreements"].as_array().map_or(0, Vec::len),
        if lines >= 1_000_000 {
            if full.wall_secs <= 10.0 && mib(full.max_rss_kib) <= 200.0 {
                "met"
            } else {
                "NOT met"
            }
        } else {
            "not measured (fewer lines)"
        }
    );
    Ok(text)
}
