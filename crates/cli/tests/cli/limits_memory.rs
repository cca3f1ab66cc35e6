//! One hostile input per limit, run through the `porin` binary: each is
//! refused with the clear error (non-zero exit; the message names the
//! limit and the flag) and the process's peak memory stays under 1 GiB.
//!
//! Peak memory is the child's own `ru_maxrss` (from `wait4`), so the cases
//! can run in parallel. Time is printed, not asserted (performance is
//! measured, not asserted; the test build is unoptimised).

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// 1 GiB in kB (`ru_maxrss` is in kB on Linux).
const PEAK_LIMIT_KB: i64 = 1024 * 1024;

fn tempdir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("porin-limits-memory-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Waits for `pid` and returns (exit code, peak RSS in kB) from `wait4`.
#[expect(
    unsafe_code,
    reason = "wait4 is the only way to read one child's peak memory"
)]
fn wait_with_rusage(pid: u32) -> (Option<i32>, i64) {
    let pid = libc::pid_t::try_from(pid).unwrap();
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own unwaited child; `status` and `usage` are
    // valid, writable and live for the call.
    let waited = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
    assert_eq!(waited, pid, "wait4 failed");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, usage.ru_maxrss)
}

#[allow(clippy::zombie_processes, reason = "the child is reaped by wait4")]
/// Runs `porin args` in `dir`, expects a refusal whose output contains
/// every needle, and a peak RSS under 1 GiB.
fn refused(what: &str, dir: &Path, args: &[&str], needles: &[&str]) {
    let stdout = dir.join("stdout");
    let stderr = dir.join("stderr");
    let start = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap())
        .spawn()
        .expect("porin runs");
    let (code, peak_kb) = wait_with_rusage(child.id());
    let elapsed = start.elapsed();
    let output = format!(
        "{}{}",
        std::fs::read_to_string(&stdout).unwrap_or_default(),
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    let excerpt: String = output.lines().take(3).collect::<Vec<_>>().join(" | ");
    println!("{what}: exit {code:?} in {elapsed:?}, peak RSS {peak_kb} kB: {excerpt}");
    assert!(
        matches!(code, Some(c) if c != 0),
        "{what}: expected a refusal, got exit {code:?}: {excerpt}"
    );
    for needle in needles {
        assert!(
            output.contains(needle),
            "{what}: `{needle}` missing from: {}",
            output.chars().take(2000).collect::<String>()
        );
    }
    assert!(
        peak_kb < PEAK_LIMIT_KB,
        "{what}: peak RSS {peak_kb} kB exceeds {PEAK_LIMIT_KB} kB"
    );
    let _ = std::fs::remove_dir_all(dir);
}

const CNP_HEAD: &str = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: p, namespace: default}\nspec:\n  endpointSelector: {}\n";

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// A porin inventory with `endpoints` endpoints of distinct labels.
fn inventory(endpoints: usize) -> String {
    let mut text = String::with_capacity(endpoints * 64 + 64);
    text.push_str("kind: Inventory\nendpoints:\n");
    for i in 0..endpoints {
        let _ = writeln!(
            text,
            "  - {{name: p{i}, namespace: default, labels: {{app: a{i}}}}}"
        );
    }
    text
}

/// Nine levels of ten aliases each: 10^9 nodes once expanded.
fn alias_bomb(head: &str) -> String {
    let mut text = format!("{head}a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..9 {
        let prev = format!("*a{}", level - 1);
        let items = [prev.as_str(); 10].join(", ");
        let _ = writeln!(text, "a{level}: &a{level} [{items}]");
    }
    text.push_str("extra: *a8\n");
    text
}

// --- policy loading ---------------------------------------------------

#[test]
fn input_bytes_a_million_rule_policy() {
    let dir = tempdir("bytes");
    let mut text = String::from(CNP_HEAD);
    text.push_str("  ingress:\n");
    for i in 0..1_000_000_u32 {
        let _ = writeln!(
            text,
            "  - fromCIDR: [\"10.{}.{}.0/24\"]",
            (i >> 8) & 255,
            i & 255
        );
    }
    write(&dir, "huge.yaml", &text);
    write(&dir, "inv.yaml", &inventory(1));
    refused(
        "1,000,000-rule policy (30 MB), default limits",
        &dir,
        &["compile", "huge.yaml", "--inventory", "inv.yaml"],
        &["PM002", "--max-file-bytes"],
    );
}

#[test]
fn yaml_nodes_a_million_rule_policy_with_the_size_limit_lifted() {
    let dir = tempdir("nodes");
    let mut text = String::from(CNP_HEAD);
    text.push_str("  ingress:\n");
    for _ in 0..1_000_000_u32 {
        text.push_str("  - fromEntities: [world]\n");
    }
    write(&dir, "huge.yaml", &text);
    refused(
        "1,000,000-rule policy, --max-file-bytes and --max-total-bytes lifted",
        &dir,
        &[
            "lint",
            "huge.yaml",
            "--max-file-bytes",
            "1000000000",
            "--max-total-bytes",
            "1000000000",
        ],
        &["PM002", "--max-yaml-nodes"],
    );
}

#[test]
fn input_bytes_of_many_files() {
    // 100 files of 1 MB, each within the per-file limit: refused by the
    // total (32 MiB) before any is read.
    let dir = tempdir("total-bytes");
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    let mut text = String::from(CNP_HEAD);
    text.push_str("  ingress:\n");
    while text.len() < 1_000_000 {
        text.push_str("  - fromEntities: [world]\n");
    }
    for f in 0..100 {
        write(&policies, &format!("p-{f:03}.yaml"), &text);
    }
    refused(
        "100 files of 1 MB, default limits",
        &dir,
        &["lint", "policies"],
        &["add up to more than", "--max-total-bytes"],
    );
}

#[test]
fn documents() {
    let dir = tempdir("documents");
    write(&dir, "many.yaml", &"---\na: 1\n".repeat(200_000));
    refused(
        "200,000 documents",
        &dir,
        &["lint", "many.yaml"],
        &["PM002", "--max-documents"],
    );
}

#[test]
fn nesting_ten_thousand_deep_policy() {
    let dir = tempdir("depth");
    let mut text = format!("{CNP_HEAD}  description:\n");
    // 2,000 levels (block indentation grows quadratically: 2 MB).
    for level in 0..2_000 {
        let _ = writeln!(text, "  {}- ", " ".repeat(level));
    }
    write(&dir, "deep.yaml", &text);
    refused(
        "2,000-deep policy (block style)",
        &dir,
        &["lint", "deep.yaml"],
        &["PM002", "--max-depth"],
    );
    // 10,000 levels in flow style stop at the parser's own recursion limit
    // (below the setting, so no flag is named).
    let dir = tempdir("depth-flow");
    let text = format!(
        "{CNP_HEAD}  description: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    write(&dir, "deep.yaml", &text);
    refused(
        "10,000-deep policy (flow style)",
        &dir,
        &["lint", "deep.yaml"],
        &["PM002", "nesting"],
    );
}

#[test]
fn alias_expansion_policy_alias_bomb() {
    let dir = tempdir("alias");
    write(&dir, "bomb.yaml", &alias_bomb(""));
    refused(
        "policy alias bomb (10^9 nodes)",
        &dir,
        &["lint", "bomb.yaml"],
        &["PM002", "--max-yaml-nodes"],
    );
}

// --- compiling ----------------------------------------------------------

#[test]
fn rules_over_many_files() {
    // 200,000 rules in 20 files of 10,000: each file passes the loader,
    // the compiler refuses the total (default 100,000) after lowering.
    let dir = tempdir("rules");
    for f in 0..20 {
        let mut text = String::from(CNP_HEAD.replace("name: p", &format!("name: p{f}")).as_str());
        text.push_str("  ingress:\n");
        for _ in 0..10_000 {
            text.push_str("  - fromEntities: [world]\n");
        }
        write(&dir, &format!("rules-{f:02}.yaml"), &text);
    }
    write(&dir, "inv.yaml", &inventory(1));
    refused(
        "200,000 rules over 20 files",
        &dir,
        &["compile", ".", "--inventory", "inv.yaml"],
        &["policy rules", "200000 needed", "--max-rules"],
    );
}

#[test]
fn peer_selectors() {
    let dir = tempdir("peers");
    let mut text = String::from(CNP_HEAD);
    text.push_str("  ingress:\n  - fromEndpoints: [");
    text.push_str(&"{}, ".repeat(250_000));
    text.push_str("{}]\n");
    write(&dir, "peers.yaml", &text);
    write(&dir, "inv.yaml", &inventory(1));
    refused(
        "250,001 peer selectors in one rule",
        &dir,
        &["compile", "peers.yaml", "--inventory", "inv.yaml"],
        &["peer selectors", "--max-peer-selectors"],
    );
}

#[test]
fn cidr_prefixes() {
    let dir = tempdir("cidr");
    let mut text = String::from(CNP_HEAD);
    text.push_str("  egress:\n  - toCIDR: [");
    for i in 0..70_000_u32 {
        let _ = write!(
            text,
            "\"10.{}.{}.{}/32\", ",
            i >> 16,
            (i >> 8) & 255,
            i & 255
        );
    }
    text.push_str("\"11.0.0.0/8\"]\n");
    write(&dir, "cidr.yaml", &text);
    write(&dir, "inv.yaml", &inventory(1));
    refused(
        "70,001 CIDR prefixes",
        &dir,
        &["compile", "cidr.yaml", "--inventory", "inv.yaml"],
        &["CIDR prefixes", "--max-cidr-prefixes"],
    );
}

#[test]
fn identities() {
    // The defaults cannot be exceeded by the other defaults (100,000
    // endpoints + 65,536 prefixes < 200,000 identities): lowered here.
    let dir = tempdir("identities");
    write(
        &dir,
        "allow.yaml",
        &format!("{CNP_HEAD}  ingress:\n  - fromEntities: [world]\n"),
    );
    write(&dir, "inv.yaml", &inventory(12_000));
    refused(
        "12,000 endpoint identities, --max-identities 10000",
        &dir,
        &[
            "compile",
            "allow.yaml",
            "--inventory",
            "inv.yaml",
            "--max-identities",
            "10000",
        ],
        &["security identities", "--max-identities"],
    );
}

#[test]
fn selector_evaluations() {
    // 2,000 distinct selectors with only negative requirements, which the
    // label index cannot narrow: each tests all 2,000 identities, 4 million.
    let dir = tempdir("evaluations");
    let mut text = String::from(CNP_HEAD);
    text.push_str("  ingress:\n  - fromEndpoints: [");
    for i in 0..2_000 {
        let _ = write!(
            text,
            "{{matchExpressions: [{{key: app, operator: NotIn, values: [x{i}]}}]}}, "
        );
    }
    text.push_str("{}]\n");
    write(&dir, "selectors.yaml", &text);
    write(&dir, "inv.yaml", &inventory(2_000));
    refused(
        "2,000 selectors × 2,000 identities, --max-selector-evaluations 1000000",
        &dir,
        &[
            "compile",
            "selectors.yaml",
            "--inventory",
            "inv.yaml",
            "--max-selector-evaluations",
            "1000000",
        ],
        &["selector evaluations", "--max-selector-evaluations"],
    );
}

/// Every endpoint allows every other on every port over TCP, UDP and SCTP:
/// about 2,000 identities × 16 port blocks × 3 protocols = 96,000 keys
/// per endpoint, 192 million in all.
fn expansion_bomb(dir: &Path) {
    write(
        dir,
        "bomb.yaml",
        &format!(
            "{CNP_HEAD}  ingress:\n  - fromEndpoints: [{{}}]\n    toPorts: [{{ports: [{{port: \"1\", endPort: 65535, protocol: ANY}}]}}]\n"
        ),
    );
    write(dir, "inv.yaml", &inventory(2_000));
}

#[test]
fn expanded_entries_per_endpoint() {
    let dir = tempdir("entries");
    expansion_bomb(&dir);
    refused(
        "all-to-all on every port (192 million keys), default limits",
        &dir,
        &["compile", "bomb.yaml", "--inventory", "inv.yaml"],
        &[
            "policy-map entries of one endpoint",
            "--max-entries-per-endpoint",
        ],
    );
}

#[test]
fn insertions_per_endpoint() {
    let dir = tempdir("insertions");
    expansion_bomb(&dir);
    refused(
        "all-to-all on every port, --max-insertions-per-endpoint 50000",
        &dir,
        &[
            "compile",
            "bomb.yaml",
            "--inventory",
            "inv.yaml",
            "--max-insertions-per-endpoint",
            "50000",
        ],
        &["key insertions", "--max-insertions-per-endpoint"],
    );
}

#[test]
fn expanded_entries_in_total() {
    // The state fits the map (one state, shared by every endpoint); the
    // opt-in total is charged where every state is held (`porin graph`).
    let dir = tempdir("total");
    expansion_bomb(&dir);
    refused(
        "all-to-all on every port, --max-entries-per-endpoint 100000 --max-total-entries 50000",
        &dir,
        &[
            "graph",
            "bomb.yaml",
            "--inventory",
            "inv.yaml",
            "--max-entries-per-endpoint",
            "100000",
            "--max-total-entries",
            "50000",
        ],
        &["all distinct map states", "--max-total-entries"],
    );
}

// --- capacity is a finding; a limit hit speaks the requested format ------

/// 100 MB in kB: what a capacity finding or a refusal may cost at most.
const SMALL_PEAK_KB: i64 = 100 * 1024;

/// Runs `porin args` in `dir`: (exit code, peak RSS in kB, stdout, stderr).
///
/// The peak is the child's own `VmHWM` (`/proc/PID/status`), polled until it
/// exits: `ru_maxrss` would not do here, since Linux carries the spawning
/// process's resident set into the child's (this test binary holds other
/// tests' large inputs meanwhile), and the 100 MB bound is below that.
/// Polling can miss a peak shorter than the interval, never invent one.
fn run_measured(dir: &Path, args: &[&str]) -> (Option<i32>, i64, String, String) {
    let stdout = dir.join("stdout");
    let stderr = dir.join("stderr");
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap())
        .spawn()
        .expect("porin runs");
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kb: i64 = 0;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file)
            && let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let code = status.code();
    println!(
        "porin {}: exit {code:?} in {:?}, peak RSS {peak_kb} kB",
        args.join(" "),
        start.elapsed()
    );
    (
        code,
        peak_kb,
        std::fs::read_to_string(&stdout).unwrap_or_default(),
        std::fs::read_to_string(&stderr).unwrap_or_default(),
    )
}

/// Endpoint `p0` allows all 1,000 identities (one per endpoint, `app: aN`)
/// on 164 TCP ports: 164,000 entries, 10× Cilium's default
/// `bpf-policy-map-max` (16,384, porin's `policyMapMax`) and 2.5× the
/// largest policy map (65,536).
fn ten_times_over(dir: &Path) {
    write(dir, "over.yaml", &every_app_on_ports("app: a0", 164, 33));
    write(dir, "inv.yaml", &inventory(1_000));
}

/// A CNP selecting `subject` (a `matchLabels` body) that allows every
/// `app` holder on `ports` TCP ports from 2000, `per_item` ports per
/// `toPorts` item (at most 40, PM022).
fn every_app_on_ports(subject: &str, ports: u16, per_item: usize) -> String {
    let ports: Vec<String> = (0..ports)
        .map(|i| format!("{{port: \"{}\", protocol: TCP}}", 2_000 + i))
        .collect::<Vec<_>>()
        .chunks(per_item)
        .map(|chunk| format!("{{ports: [{}]}}", chunk.join(", ")))
        .collect();
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: p, namespace: default}}\nspec:\n  endpointSelector: {{matchLabels: {{{subject}}}}}\n  ingress:\n  - fromEndpoints: [{{matchExpressions: [{{key: app, operator: Exists}}]}}]\n    toPorts: [{}]\n",
        ports.join(", ")
    )
}

#[test]
fn ten_times_over_the_map_is_pr001_in_sarif_with_exit_1() {
    let dir = tempdir("over-sarif");
    ten_times_over(&dir);
    let (code, peak_kb, stdout, stderr) = run_measured(
        &dir,
        &[
            "lint",
            "over.yaml",
            "--inventory",
            "inv.yaml",
            "--format",
            "sarif",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let log: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let results = log["runs"][0]["results"].as_array().unwrap();
    let pr001: Vec<&serde_json::Value> =
        results.iter().filter(|r| r["ruleId"] == "PR001").collect();
    assert_eq!(pr001.len(), 1, "{stdout}");
    let text = pr001[0]["message"]["text"].as_str().unwrap();
    // The exact count (164 ports × 1,000 identities, plus the host's allow
    // and the allow-all of the unenforced egress),
    // the map size and the top contributor with its product.
    assert!(
        text.contains("needs 164,002 policy-map entries; the map holds 16,384 (1000%)"),
        "{text}"
    );
    assert!(
        text.contains(
            "1 rule × 1,000 identities × 164 port prefixes × 1 protocol (TCP) = 164,000 entries"
        ),
        "{text}"
    );
    assert_eq!(
        pr001[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "over.yaml"
    );
    assert!(log["runs"][0].get("invocations").is_none());
    assert!(peak_kb < SMALL_PEAK_KB, "peak RSS {peak_kb} kB");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Twelve server pods, each its own identity (`pod: sN`), selected by one
/// policy allowing the 1,000 `app` identities on 70 TCP ports: one map
/// state of 70,002 entries, over the largest map (65,536), shared by
/// twelve units. The census is counted once and reported for each pod
/// (before, each pod counted it again: a 30,000-pod cluster of this shape
/// never finished).
#[test]
fn an_over_capacity_state_shared_by_many_pods_is_pr001_for_each() {
    let dir = tempdir("over-shared");
    write(
        &dir,
        "over.yaml",
        &every_app_on_ports("role: server", 70, 35),
    );
    let mut inv = inventory(1_000);
    for i in 0..12 {
        let _ = writeln!(
            inv,
            "  - {{name: s{i}, namespace: default, labels: {{role: server, pod: s{i}}}}}"
        );
    }
    write(&dir, "inv.yaml", &inv);
    let (code, peak_kb, stdout, stderr) = run_measured(
        &dir,
        &[
            "lint",
            "over.yaml",
            "--inventory",
            "inv.yaml",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let findings: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // Each finding whole (message and notes), as text.
    let pr001: Vec<String> = findings
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "PR001")
        .map(|f| f.to_string())
        .collect();
    assert_eq!(pr001.len(), 12, "{stdout}");
    for i in 0..12 {
        let text = pr001
            .iter()
            .find(|t| t.contains(&format!("`default/s{i}`")))
            .unwrap_or_else(|| panic!("no PR001 names default/s{i}: {stdout}"));
        assert!(text.contains("needs 70,002 policy-map entries"), "{text}");
        assert!(
            text.contains(
                "1 rule × 1,000 identities × 70 port prefixes × 1 protocol (TCP) = 70,000 entries"
            ),
            "{text}"
        );
    }
    assert!(peak_kb < SMALL_PEAK_KB, "peak RSS {peak_kb} kB");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ten_times_over_the_map_is_pr001_in_every_format() {
    let dir = tempdir("over-formats");
    ten_times_over(&dir);
    for (format, needle) in [
        ("human", "error[PR001]"),
        ("json", "\"code\": \"PR001\""),
        ("junit", "PR001 map-capacity-exceeded"),
        ("github", "title=porin PR001::endpoint `default/p0"),
    ] {
        let (code, _, stdout, stderr) = run_measured(
            &dir,
            &[
                "lint",
                "over.yaml",
                "--inventory",
                "inv.yaml",
                "--format",
                format,
            ],
        );
        assert_eq!(code, Some(1), "{format}: {stderr}");
        assert!(stdout.contains(needle), "{format}: {stdout}");
        assert!(stdout.contains("164,002"), "{format}: {stdout}");
    }
    // `porin compile` cannot emit a state over the map: refused, exit 2,
    // with the exact count, as a JSON diagnostic.
    let (code, _, stdout, stderr) =
        run_measured(&dir, &["compile", "over.yaml", "--inventory", "inv.yaml"]);
    assert_eq!(code, Some(2), "{stderr}");
    let diagnostics: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(diagnostics[0]["code"], "PC015", "{stdout}");
    let message = diagnostics[0]["message"].as_str().unwrap();
    assert!(message.contains("164002"), "{message}");
    assert!(message.contains("--max-entries-per-endpoint"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_limit_hit_is_reported_in_the_requested_format_with_exit_2() {
    let dir = tempdir("limit-formats");
    ten_times_over(&dir);
    let args = |format: &'static str| {
        vec![
            "lint",
            "over.yaml",
            "--inventory",
            "inv.yaml",
            "--max-insertions-per-endpoint",
            "1000",
            "--format",
            format,
        ]
    };
    let (code, peak_kb, stdout, stderr) = run_measured(&dir, &args("sarif"));
    assert_eq!(code, Some(2), "{stderr}");
    let log: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let invocation = &log["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false, "{stdout}");
    let notification = &invocation["toolExecutionNotifications"][0];
    assert_eq!(notification["level"], "error");
    assert_eq!(notification["descriptor"]["id"], "PC015");
    let text = notification["message"]["text"].as_str().unwrap();
    assert!(text.contains("--max-insertions-per-endpoint"), "{text}");
    assert!(peak_kb < SMALL_PEAK_KB, "peak RSS {peak_kb} kB");

    for (format, needle) in [
        ("json", "\"code\": \"PC015\""),
        ("github", "::error title=porin PC015::"),
        ("junit", "<error"),
    ] {
        let (code, _, stdout, stderr) = run_measured(&dir, &args(format));
        assert_eq!(code, Some(2), "{format}: {stderr}");
        assert!(stdout.contains(needle), "{format}: {stdout}");
        assert!(
            stdout.contains("--max-insertions-per-endpoint"),
            "{format}: {stdout}"
        );
    }
    // Human output: the one-line error on standard error.
    let (code, _, stdout, stderr) = run_measured(&dir, &args("human"));
    assert_eq!(code, Some(2));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("--max-insertions-per-endpoint"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_load_limit_hit_is_reported_in_the_requested_format_with_exit_2() {
    // Two files of 600 bytes over a 1,000-byte total: refused before any
    // file is parsed, as PM002 in the format asked for.
    let dir = tempdir("load-limit-formats");
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    let mut text = String::from(CNP_HEAD);
    text.push_str("  ingress:\n");
    while text.len() < 600 {
        text.push_str("  - fromEntities: [world]\n");
    }
    for f in 0..2 {
        write(&policies, &format!("p-{f}.yaml"), &text);
    }
    let args = |format: &'static str| {
        vec![
            "lint",
            "policies",
            "--max-total-bytes",
            "1000",
            "--format",
            format,
        ]
    };
    let (code, peak_kb, stdout, stderr) = run_measured(&dir, &args("sarif"));
    assert_eq!(code, Some(2), "{stderr}");
    let log: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let invocation = &log["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false, "{stdout}");
    let notifications = invocation["toolExecutionNotifications"].as_array().unwrap();
    assert_eq!(notifications.len(), 1, "{stdout}");
    assert_eq!(notifications[0]["descriptor"]["id"], "PM002");
    let text = notifications[0]["message"]["text"].as_str().unwrap();
    assert!(text.contains("--max-total-bytes"), "{text}");
    assert!(text.contains("p-1.yaml"), "{text}");
    assert!(peak_kb < SMALL_PEAK_KB, "peak RSS {peak_kb} kB");
    let (code, _, stdout, stderr) = run_measured(&dir, &args("json"));
    assert_eq!(code, Some(2), "{stderr}");
    let diagnostics: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(diagnostics.as_array().unwrap().len(), 1, "{stdout}");
    assert_eq!(diagnostics[0]["code"], "PM002", "{stdout}");
    for (format, needle) in [
        ("github", "::error title=porin PM002::"),
        ("junit", "<error"),
    ] {
        let (code, _, stdout, stderr) = run_measured(&dir, &args(format));
        assert_eq!(code, Some(2), "{format}: {stderr}");
        assert!(stdout.contains(needle), "{format}: {stdout}");
        assert!(stdout.contains("--max-total-bytes"), "{format}: {stdout}");
    }
    let (code, _, stdout, stderr) = run_measured(&dir, &args("human"));
    assert_eq!(code, Some(2));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("--max-total-bytes"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

// --- inventory ------------------------------------------------------------

#[test]
fn endpoints_inventory() {
    let dir = tempdir("endpoints");
    write(
        &dir,
        "allow.yaml",
        &format!("{CNP_HEAD}  ingress:\n  - fromEntities: [world]\n"),
    );
    // The default (100,000) works the same; a lower one keeps the
    // unoptimised test build quick.
    write(&dir, "inv.yaml", &inventory(20_001));
    refused(
        "20,001 endpoints, --max-endpoints 20000",
        &dir,
        &[
            "compile",
            "allow.yaml",
            "--inventory",
            "inv.yaml",
            "--max-endpoints",
            "20000",
        ],
        &["inv.yaml", "inventory endpoints", "--max-endpoints"],
    );
}

#[test]
fn inventory_bytes() {
    let dir = tempdir("inventory-bytes");
    write(
        &dir,
        "allow.yaml",
        &format!("{CNP_HEAD}  ingress:\n  - fromEntities: [world]\n"),
    );
    // 80 MB of comments: refused by its size before it is read.
    let line = format!("# {}\n", "x".repeat(1_000));
    write(
        &dir,
        "inv.yaml",
        &format!("kind: Inventory\n{}", line.repeat(80_000)),
    );
    refused(
        "80 MB inventory file, default limits",
        &dir,
        &["compile", "allow.yaml", "--inventory", "inv.yaml"],
        &[
            "inv.yaml",
            "inventory file size",
            "--max-inventory-file-bytes",
        ],
    );
}

#[test]
fn inventory_files() {
    let dir = tempdir("inventory-files");
    write(
        &dir,
        "allow.yaml",
        &format!("{CNP_HEAD}  ingress:\n  - fromEntities: [world]\n"),
    );
    let inv = dir.join("inv");
    std::fs::create_dir_all(&inv).unwrap();
    for i in 0..10_001 {
        std::fs::write(inv.join(format!("{i:05}.yaml")), "kind: Inventory\n").unwrap();
    }
    refused(
        "10,001 inventory files, default limits",
        &dir,
        &["compile", "allow.yaml", "--inventory", "inv"],
        &["inventory files", "--max-inventory-files"],
    );
}

#[test]
fn inventory_nesting_ten_thousand_deep() {
    let dir = tempdir("inventory-depth");
    write(
        &dir,
        "allow.yaml",
        &format!("{CNP_HEAD}  ingress:\n  - fromEntities: [world]\n"),
    );
    let mut text = String::from("kind: Inventory\nextra:\n");
    for level in 0..10_000 {
        let _ = writeln!(text, "{}- ", " ".repeat(level));
    }
    write(&dir, "inv.yaml", &text);
    refused(
        "10,000-deep inventory, default limits",
        &dir,
        &["compile", "allow.yaml", "--inventory", "inv.yaml"],
        &["inv.yaml", "nesting", "--max-inventory-depth"],
    );
}

#[test]
fn inventory_alias_bomb() {
    let dir = tempdir("inventory-alias");
    write(
        &dir,
        "allow.yaml",
        &format!("{CNP_HEAD}  ingress:\n  - fromEntities: [world]\n"),
    );
    write(&dir, "inv.yaml", &alias_bomb("kind: Inventory\n"));
    refused(
        "inventory alias bomb (10^9 nodes), default limits",
        &dir,
        &["compile", "allow.yaml", "--inventory", "inv.yaml"],
        &["inv.yaml", "--max-inventory-alias-expansions"],
    );
}

#[test]
fn inventory_nodes_and_documents() {
    let dir = tempdir("inventory-nodes");
    write(
        &dir,
        "allow.yaml",
        &format!("{CNP_HEAD}  ingress:\n  - fromEntities: [world]\n"),
    );
    // 1.2 million scalars in 2.4 MB (the default limit, 5 million, works
    // the same; a lower one keeps the unoptimised test build quick).
    let mut text = String::from("kind: Inventory\nextra: [");
    text.push_str(&"0,".repeat(1_200_000));
    text.push_str("0]\n");
    write(&dir, "inv.yaml", &text);
    refused(
        "1,200,000-node inventory, --max-inventory-nodes 1000000",
        &dir,
        &[
            "compile",
            "allow.yaml",
            "--inventory",
            "inv.yaml",
            "--max-inventory-nodes",
            "1000000",
        ],
        &["inv.yaml", "YAML nodes", "--max-inventory-nodes"],
    );
    let dir = tempdir("inventory-documents");
    write(
        &dir,
        "allow.yaml",
        &format!("{CNP_HEAD}  ingress:\n  - fromEntities: [world]\n"),
    );
    write(&dir, "inv.yaml", &"---\nkind: Inventory\n".repeat(100_001));
    refused(
        "100,001-document inventory, default limits",
        &dir,
        &["compile", "allow.yaml", "--inventory", "inv.yaml"],
        &["inv.yaml", "YAML documents", "--max-inventory-documents"],
    );
}
