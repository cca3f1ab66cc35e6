//! `porin-bench all --quick` must keep working: it runs every part of the harness for a few
//! seconds (N ∈ {1, 100}) and prints every table. Needs root (bpf(2), network namespaces,
//! netfilter). In CI (`CI=true`) a machine that cannot run it fails this test loudly; elsewhere
//! the test prints `SKIPPED: <reason>` and passes.
//!
//! `porin-bench gen`, `scale --quick` and `nca --quick` need no root: they run the `porin` binary
//! (built here by cargo into the same target directory, a no-op when fresh) on generated
//! repositories. Their tests check the tables and that every porin run finished; no timings.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target directory and profile this test runs from (`<target>/<profile>/porin-bench`).
fn target_and_profile() -> (PathBuf, String) {
    let exe = Path::new(env!("CARGO_BIN_EXE_porin-bench"));
    let profile_dir = exe
        .parent()
        .expect("porin-bench lives in <target>/<profile>");
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_owned();
    (
        profile_dir.parent().expect("target dir").to_path_buf(),
        profile,
    )
}

/// Builds `porin` (porin-cli) into this test's target directory and returns its path.
fn porin_binary() -> PathBuf {
    let (target, profile) = target_and_profile();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        // Both packages, as the documented build (`cargo build --release -p porin-cli -p
        // porin-bench`) selects them: the same features (porin-bench turns on the compiler's
        // `synthetic`), so a fresh build is a no-op instead of a rebuild of the compiler.
        .args([
            "build",
            "-q",
            "-p",
            "porin-cli",
            "-p",
            "porin-bench",
            "--bin",
            "porin",
        ])
        .arg("--target-dir")
        .arg(&target);
    if profile == "release" {
        command.arg("--release");
    }
    let status = command.status().expect("run cargo build");
    assert!(status.success(), "cargo build -p porin-cli failed");
    let porin = target.join(&profile).join("porin");
    assert!(
        porin.is_file(),
        "{} missing after the build",
        porin.display()
    );
    porin
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-bench-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

fn bench(args: &[&str]) -> (String, String, bool) {
    let output = Command::new(env!("CARGO_BIN_EXE_porin-bench"))
        .args(args)
        .output()
        .expect("porin-bench starts");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.success(),
    )
}

/// Every file under `dir`, relative path → bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)
            .expect("read a generated directory")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read a generated file");
                let relative = path.strip_prefix(dir).expect("under the root");
                files.insert(relative.to_path_buf(), bytes);
            }
        }
    }
    files
}

/// `gen` writes a repository `porin` reads as a user's (policies + Pod manifests), the same
/// bytes for the same seed, and the counts it announces.
#[test]
fn gen_writes_a_repository_porin_reads() {
    let porin = porin_binary();
    let dir = scratch("gen");
    for kind in ["cnp", "knp"] {
        let a = dir.join(format!("{kind}-a"));
        let b = dir.join(format!("{kind}-b"));
        for out in [&a, &b] {
            let (_, stderr, ok) = bench(&[
                "gen",
                "--kind",
                kind,
                "--policies",
                "20",
                "--pods",
                "200",
                "--identities",
                "unique",
                "--seed",
                "5",
                "--out",
                out.to_str().unwrap(),
            ]);
            assert!(ok, "{stderr}");
            assert!(
                stderr.contains("20 policies, 202 pods, 201 identities"),
                "{stderr}"
            );
        }
        assert_eq!(tree(&a), tree(&b), "{kind}: same seed, different bytes");
        let output = Command::new(&porin)
            .args([
                "compile",
                "policies",
                "--inventory",
                "inventory",
                "--format",
                "json",
            ])
            .current_dir(&a)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let endpoints = json["endpoints"].as_array().unwrap();
        assert_eq!(
            endpoints.len(),
            202,
            "{kind}: one endpoint per Pod manifest"
        );
        let identities: std::collections::BTreeSet<u64> = endpoints
            .iter()
            .map(|e| e["identity"].as_u64().unwrap())
            .collect();
        assert_eq!(
            identities.len(),
            201,
            "{kind}: one identity per pod (+ kube-dns)"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `scale --quick` prints every table with every porin run finished.
#[test]
fn scale_quick_prints_every_table() {
    let porin = porin_binary();
    let dir = scratch("scale");
    let (stdout, stderr, ok) = bench(&[
        "scale",
        "--quick",
        "--porin",
        porin.to_str().unwrap(),
        "--workdir",
        dir.join("work").to_str().unwrap(),
    ]);
    assert!(ok, "porin-bench scale --quick failed:\n{stderr}\n{stdout}");
    println!("{stdout}");
    for section in [
        "### Scale: lint and compile of whole clusters (issue #14)",
        "#### Lint: CNPs over Kubernetes Pod manifests, one unique label per pod",
        "#### Compile: the same repositories, one unique label per pod",
        "#### Lint: CNPs over Kubernetes Pod manifests, pods of a Deployment share labels",
        "#### Compile: CIDR rules",
        "#### Cilium's own benchmark shape (one endpoint)",
        "#### Incremental: one-rule change and identity add/remove",
    ] {
        assert!(
            stdout.contains(section),
            "missing {section:?} in:\n{stdout}"
        );
    }
    // Both identity modes of the quick size (10 CNPs, 100 pods + 2 kube-dns).
    assert_eq!(
        stdout.matches("\n| 10 | 102 | 101 | ").count(),
        2,
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("\n| 10 | 102 | 11 | ").count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("\n| 100 | "), "{stdout}");
    for failure in ["did not finish", "exit 2", "killed", "not run", "failed"] {
        assert!(!stdout.contains(failure), "{failure:?} in:\n{stdout}");
    }
    for step in ["one-rule change", "identity add", "identity remove"] {
        assert!(stdout.contains(&format!("| {step}")), "{step}: {stdout}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nca --quick` prints both tables: porin's columns always measured, nca's measured when `nca`
/// is installed and "nca not installed" otherwise.
#[test]
fn nca_quick_prints_both_tables() {
    let porin = porin_binary();
    let dir = scratch("nca");
    let nca = std::env::var("PORIN_BENCH_NCA").unwrap_or_else(|_| "nca".to_owned());
    let (stdout, stderr, ok) = bench(&[
        "nca",
        "--quick",
        "--nca",
        &nca,
        "--porin",
        porin.to_str().unwrap(),
        "--workdir",
        dir.join("work").to_str().unwrap(),
    ]);
    assert!(ok, "porin-bench nca --quick failed:\n{stderr}\n{stdout}");
    println!("{stdout}");
    for section in [
        "### porin vs nca (issue #15)",
        "#### Lint: `porin lint` vs `nca --sanity`",
        "#### Diff: `porin diff` vs `nca --semantic_diff`",
    ] {
        assert!(
            stdout.contains(section),
            "missing {section:?} in:\n{stdout}"
        );
    }
    let installed = !stdout.contains("nca not installed");
    // The Boutique (13 policies, 12 pods) and the quick cluster, in both tables; porin's cells
    // are figures ("s, N MiB") and its diff found the changes.
    assert_eq!(
        stdout
            .matches("| Online Boutique (reconstructed) | 13 | 12 | 12 | ")
            .count(),
        2,
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("| generated | 10 | 102 | 11 | ").count(),
        2,
        "{stdout}"
    );
    for row in stdout
        .lines()
        .filter(|l| l.starts_with("| Online") || l.starts_with("| generated"))
    {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert!(cells[5].ends_with("MiB"), "porin did not run: {row}");
        if installed {
            assert!(cells[6].ends_with("MiB"), "nca did not run: {row}");
        }
    }
    assert!(
        stdout.contains("| 2 changed rows |"),
        "Boutique diff: {stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            Some(line.split_whitespace().nth(2)? == "0")
        })
        .unwrap_or(false)
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

#[test]
fn quick_mode_prints_every_table() {
    let test = "quick_mode_prints_every_table";
    let Some(stdout) = rig_quick(test, &["all", "--quick"]) else {
        return;
    };
    for section in [
        "### Compile cost",
        "### Compile cost: CIDR rules",
        "### Lookup cost (BPF_PROG_TEST_RUN)",
        "### Apply cost",
        "### End to end: porin vs iptables-nft vs nft",
        "#### Latency p50 (µs)",
        "#### Latency p99 (µs)",
        "#### Throughput (round trips/s)",
        "#### CPU per round trip (µs)",
    ] {
        assert!(
            stdout.contains(section),
            "missing {section:?} in:\n{stdout}"
        );
    }
    // Every end-to-end table has the floor and both rule counts, with all three mechanisms
    // measured (no "not run" cells) and the ratios filled in.
    let e2e = &stdout[stdout.find("### End to end").unwrap()..];
    assert_eq!(e2e.matches("| no filter (floor) |").count(), 4, "{e2e}");
    assert_eq!(e2e.matches("\n| 1 (").count(), 4, "{e2e}");
    assert_eq!(e2e.matches("\n| 100 (").count(), 4, "{e2e}");
    assert!(!e2e.contains("not run"), "{e2e}");
    assert!(e2e.contains('×'), "{e2e}");
    // Compile: the 100-rule CIDR case compiled (10 endpoints, 120 identities).
    assert!(stdout.contains("| 100 | 10 | 120 |"), "{stdout}");
    // Lookup: 1 rule and a 100-entry table; apply: porin and the chains.
    assert!(stdout.contains("| 99 | 100 |"), "{stdout}");
    for operation in [
        "atomic switch",
        "as a difference",
        "iptables-nft-restore",
        "nft -f",
    ] {
        assert!(
            stdout.contains(operation),
            "missing {operation:?}:\n{stdout}"
        );
    }
}

/// Runs `porin-bench ARGS` as root; `None` (with `SKIPPED:` printed) when this machine cannot
/// run the rigs and this is not CI. Under `CI=true` every failure fails the test.
fn rig_quick(test: &str, args: &[&str]) -> Option<String> {
    if !is_root() {
        assert!(!in_ci(), "{test}: CI=true but not running as root");
        println!("SKIPPED: {test}: needs root (bpf, network namespaces, netfilter)");
        return None;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_porin-bench"))
        .args(args)
        .output()
        .expect("porin-bench starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let unavailable =
            stderr.contains("eBPF is unavailable") || stderr.contains("missing tools");
        assert!(
            unavailable && !in_ci(),
            "{test}: porin-bench {args:?} failed ({}):\n{stderr}\n{stdout}",
            output.status
        );
        println!("SKIPPED: {test}: {}", stderr.trim());
        return None;
    }
    println!("{stdout}");
    Some(stdout)
}

/// Every table of one end-to-end section has the floor and both quick rule counts with all
/// three mechanisms measured.
fn assert_complete(section: &str, tables: usize) {
    assert_eq!(
        section.matches("| no filter (floor) |").count(),
        tables,
        "{section}"
    );
    assert_eq!(section.matches("\n| 1 (").count(), tables, "{section}");
    assert_eq!(section.matches("\n| 100 (").count(), tables, "{section}");
    assert!(!section.contains("not run"), "{section}");
    assert!(section.contains('×'), "{section}");
}

/// The quick modes of the TCP request/response, connection churn and microVM rigs (issue #18):
/// each prints its tables with porin, iptables-nft and nft measured at 1 and 100 rules. The
/// microVM run boots a real guest (KVM when it comes up in time, else TCG) and says which.
#[test]
fn rigs_quick_modes_print_every_table() {
    let test = "rigs_quick_modes_print_every_table";
    for (command, title) in [
        (
            "tcp",
            "### End to end, TCP request/response: porin vs iptables-nft vs nft",
        ),
        (
            "churn",
            "### End to end, TCP connection churn: porin vs iptables-nft vs nft",
        ),
    ] {
        let Some(stdout) = rig_quick(test, &[command, "--quick"]) else {
            return;
        };
        let section = &stdout[stdout
            .find(title)
            .unwrap_or_else(|| panic!("{title}: {stdout}"))..];
        for table in [
            "#### Latency p50 (µs)",
            "#### Throughput (round trips/s)",
            "#### CPU per round trip (µs)",
        ] {
            assert!(section.contains(table), "{command}: {table}: {section}");
        }
        assert_complete(section, 4);
    }
    let Some(stdout) = rig_quick(test, &["vm", "--quick", "--traffic", "udp,tcp,churn"]) else {
        return;
    };
    let accel = if stdout.contains("### microVM (KVM)") {
        "KVM"
    } else {
        "TCG"
    };
    for traffic in ["UDP echo", "TCP request/response", "TCP connection churn"] {
        let title = format!("### microVM ({accel}), {traffic}: porin vs iptables-nft vs nft");
        let start = stdout
            .find(&title)
            .unwrap_or_else(|| panic!("{title}: {stdout}"));
        let section = &stdout[start..];
        let section = &section[..section[4..]
            .find("### microVM")
            .map_or(section.len(), |i| i + 4)];
        assert!(
            section.contains(&format!("a QEMU microVM under {accel}")),
            "{section}"
        );
        for table in [
            "#### CPU per round trip, host side (µs)",
            "#### CPU per round trip, host side: client threads and ksoftirqd only",
            "#### Guest vCPU per round trip",
        ] {
            assert!(section.contains(table), "{traffic}: {table}: {section}");
        }
        assert_complete(section, 6);
    }
}
