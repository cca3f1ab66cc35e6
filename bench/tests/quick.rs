//! `porin-bench all --quick` must keep working: it runs every part of the harness for a few
//! seconds (N ∈ {1, 100}) and prints every table. Needs root (bpf(2), network namespaces,
//! netfilter). In CI (`CI=true`) a machine that cannot run it fails this test loudly; elsewhere
//! the test prints `SKIPPED: <reason>` and passes.

use std::process::Command;

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
    if !is_root() {
        assert!(!in_ci(), "{test}: CI=true but not running as root");
        println!("SKIPPED: {test}: needs root (bpf, network namespaces, netfilter)");
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_porin-bench"))
        .args(["all", "--quick"])
        .output()
        .expect("porin-bench starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let unavailable =
            stderr.contains("eBPF is unavailable") || stderr.contains("missing tools");
        assert!(
            unavailable && !in_ci(),
            "{test}: porin-bench all --quick failed ({}):\n{stderr}\n{stdout}",
            output.status
        );
        println!("SKIPPED: {test}: {}", stderr.trim());
        return;
    }
    println!("{stdout}");
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
