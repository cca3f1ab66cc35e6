//! Builds `examples/c-agent` (gcc, libbpf, `libporin.a`) and runs it as
//! root: it compiles the example policy, loads porin's object, fills the
//! maps through the A/B scheme, decides every flow with
//! `BPF_PROG_TEST_RUN`, applies the v2 policy as a live difference, and
//! decides again. Its verdicts must equal those of `porin test`. With a
//! write of the difference made to fail, it must roll back and keep v1.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

/// Builds the agent; `None` (after SKIPPED, or failing in CI) when the
/// tools or root are missing.
/// Each test builds into its own folder (`name`): tests run in parallel.
fn build_agent(name: &str) -> Option<PathBuf> {
    if !common::have("gcc") || !common::have("make") {
        common::skip("gcc or make is not installed");
        return None;
    }
    if !std::path::Path::new("/usr/include/bpf/libbpf.h").exists() {
        common::skip("libbpf-dev is not installed");
        return None;
    }
    if let Err(reason) = common::can_bpf() {
        common::skip(&reason);
        return None;
    }
    let lib = common::build_libporin();
    let root = common::workspace_root();
    let binary = common::scratch(name).join("agent");
    let output = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(root.join("examples/c-agent"))
        .arg(format!("ROOT={}", root.display()))
        .arg(format!("PORIN_LIB={}", lib.display()))
        .arg(format!("OUT={}", binary.display()))
        .output()
        .expect("run make");
    assert!(
        output.status.success(),
        "building the C agent failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(binary)
}

#[test]
fn c_agent_verdicts_match_porin_test() {
    let Some(binary) = build_agent("c-agent") else {
        return;
    };
    let output = common::run_example_agent(&binary, None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "C agent failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("0 mismatch(es)"), "{stdout}");
    assert!(stdout.contains("diff shop/api:"), "{stdout}");
    let cases = common::check_verdicts_with_porin_test(&stdout, "c-agent");
    assert_eq!(cases, 24, "{stdout}");
}

/// Issue #8, faults while applying: the agent applies each endpoint's
/// v1 -> v2 difference to its live policy map write by write. With write K
/// made to fail (for every K a difference has), the agent must report the
/// failure (endpoint, map, write index and count, errno), undo the writes
/// before it, and leave v1 in force: the live map equals v1's entries
/// byte for byte, every flow side the endpoint enforces is decided on the
/// live map as after a fresh v1 install, and all flows still get v1's
/// reference verdicts (exit 3, 0 mismatches).
#[test]
fn c_agent_rolls_back_a_difference_that_fails_at_any_write() {
    let Some(binary) = build_agent("c-agent-faults") else {
        return;
    };
    let clean = common::run_example_agent(&binary, None);
    let clean_stdout = String::from_utf8_lossy(&clean.stdout);
    assert!(clean.status.success(), "{clean_stdout}");
    // "diff shop/api: 7 writes applied to the live map"
    let writes: Vec<(String, usize)> = clean_stdout
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("diff ")?;
            let (endpoint, count) = rest.split_once(": ")?;
            let count = count.split_whitespace().next()?.parse().ok()?;
            Some((endpoint.to_owned(), count))
        })
        .collect();
    let longest = writes.iter().map(|(_, n)| *n).max().unwrap_or(0);
    assert!(
        longest >= 5,
        "the example differences are too small: {writes:?}"
    );
    for k in 0..=longest {
        let output = common::run_example_agent(&binary, Some(k));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let failing: Vec<&(String, usize)> = writes.iter().filter(|(_, n)| *n > k).collect();
        if failing.is_empty() {
            assert!(output.status.success(), "K={k}:\n{stdout}\n{stderr}");
            continue;
        }
        assert_eq!(
            output.status.code(),
            Some(3),
            "K={k}: expected exit 3 (rolled back):\n{stdout}\n{stderr}"
        );
        for (endpoint, count) in failing {
            let report = format!(
                "write {k} of {count} of the difference for {endpoint} to the live map porin_policy_"
            );
            assert!(
                stderr.contains(&report),
                "K={k}: no `{report}` in:\n{stderr}"
            );
            assert!(
                stderr.contains(&format!(
                    "(errno 5); the {k} write(s) before it were rolled back"
                )),
                "K={k}:\n{stderr}"
            );
            assert!(
                stdout.contains(&format!("rollback {endpoint}: live map equals v1")),
                "K={k}:\n{stdout}"
            );
            let live = format!("live {endpoint}: ");
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(&live)
                        && l.ends_with("decided as v1 decides them, 0 differ")),
                "K={k}:\n{stdout}"
            );
        }
        assert!(stdout.contains("v1 stays in force"), "K={k}:\n{stdout}");
        assert!(stdout.contains("\n0 mismatch(es)"), "K={k}:\n{stdout}");
        assert!(
            !stdout.contains("verdict v2 "),
            "K={k}: v2 verdicts after a rollback"
        );
    }
}
