//! `porin replay`: the quickstart recording under the policies in force
//! and under a proposed change, in every format, and its exit codes.

use serde_json::Value;

use crate::common::porin;
use crate::verify_formats::validate_sarif;

const FLOWS: &str = "fixtures/flows/quickstart/observe.json";
const INVENTORY: &str = "examples/quickstart/inventory.yaml";

fn replay(extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["replay", "--flows", FLOWS, "--inventory", INVENTORY];
    args.extend_from_slice(extra);
    let out = porin(&args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

#[test]
fn the_policies_in_force_replay_clean_exit_0() {
    let (code, out, err) = replay(&[
        "examples/quickstart/policies",
        "--current",
        "examples/quickstart/policies",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("46 flows decided (14 distinct edges) from 1 file: nothing newly denied, nothing newly allowed, nothing in fidelity disagreement\n"),
        "{out}"
    );
    assert!(out.contains("15 replies"), "{out}");
    assert!(
        out.contains("warning[PF003]: kube-system/coredns-"),
        "{out}"
    );
}

#[test]
fn a_change_that_closes_an_observed_edge_exits_1_with_counts_and_rule() {
    let (code, out, err) = replay(&[
        "fixtures/flows/quickstart/proposed",
        "--current",
        "examples/quickstart/policies",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("1 edge carrying 11 flows newly denied"),
        "{out}"
    );
    assert!(
        out.contains(
            "  shop/frontend → shop/api TCP/8080: 11 flows, 2026-11-30T10:00:02.015838Z – "
        ),
        "{out}"
    );
    assert!(
        out.contains("because CiliumNetworkPolicy shop/api spec.ingress[0] (fixtures/flows/quickstart/proposed/api.yaml:14)"),
        "{out}"
    );
    assert!(
        out.contains("  remote-node → shop/api TCP/8080: 2 flows"),
        "{out}"
    );
}

#[test]
fn json_and_markdown_carry_the_same_findings() {
    let (code, out, _) = replay(&["fixtures/flows/quickstart/proposed", "--format", "json"]);
    assert_eq!(code, 1);
    let value: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(value["newlyDenied"][0]["flows"], 11);
    assert_eq!(value["newlyDenied"][0]["protocol"], "TCP");
    assert_eq!(value["newlyDenied"][0]["port"], 8080);
    assert_eq!(value["newlyAllowed"][0]["from"], "remote-node");
    assert_eq!(value["read"]["skipped"]["replies"], 15);
    assert_eq!(value["summary"]["fidelityChecked"], false);
    let (_, md, _) = replay(&["fixtures/flows/quickstart/proposed", "--format", "markdown"]);
    assert!(md.starts_with("**porin replay**: "), "{md}");
    assert!(
        md.contains("| `shop/frontend` | `shop/api` | TCP/8080 | 11 |"),
        "{md}"
    );
}

#[test]
fn sarif_puts_a_newly_denied_flow_on_the_policy_line_that_denies_it() {
    let (code, out, _) = replay(&["fixtures/flows/quickstart/proposed", "--format", "sarif"]);
    assert_eq!(code, 1);
    let log: Value = serde_json::from_str(&out).expect("SARIF is JSON");
    assert_eq!(validate_sarif(&log), Vec::<String>::new());
    let results = log["runs"][0]["results"].as_array().expect("results");
    let denied: Vec<&Value> = results.iter().filter(|r| r["ruleId"] == "PF004").collect();
    assert_eq!(denied.len(), 1, "{results:#?}");
    let location = &denied[0]["locations"][0]["physicalLocation"];
    assert_eq!(
        location["artifactLocation"]["uri"],
        "fixtures/flows/quickstart/proposed/api.yaml"
    );
    assert_eq!(location["region"]["startLine"], 14);
    let rules = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules");
    assert!(
        rules
            .iter()
            .any(|r| r["id"] == "PF004" && r["name"] == "newly-denied-flow")
    );
}

#[test]
fn malformed_lines_are_reported_by_line_and_the_rest_is_replayed() {
    let out = porin(&[
        "replay",
        "--flows",
        "fixtures/flows/quickstart/malformed.json",
        "examples/quickstart/policies",
        "--inventory",
        INVENTORY,
    ]);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.starts_with("3 flows decided"), "{text}");
    assert!(
        text.contains("read 10 lines: 3 flows; 6 lines rejected"),
        "{text}"
    );
    for line in [2, 3, 4, 5, 8, 9] {
        assert!(
            text.contains(&format!("fixtures/flows/quickstart/malformed.json:{line}:")),
            "line {line}: {text}"
        );
    }
}

#[test]
fn an_unreadable_flow_file_exits_2_naming_it() {
    let out = porin(&[
        "replay",
        "--flows",
        "fixtures/flows/no-such-file.json",
        "examples/quickstart/policies",
        "--inventory",
        INVENTORY,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert!(
        err.contains("fixtures/flows/no-such-file.json: cannot read"),
        "{err}"
    );
}

/// A scratch directory under the target directory (not /tmp: its path
/// must not matter, and tests clean up after themselves).
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-flows-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

#[test]
fn suggested_policies_lint_without_error_and_replay_clean() {
    for (flows, inventory) in [
        (FLOWS, INVENTORY),
        (
            "fixtures/flows/boutique/observe.jsonpb",
            "examples/boutique/manifests.yaml",
        ),
    ] {
        let dir = scratch("suggest");
        let out = dir.join("suggested.yaml");
        let run = porin(&[
            "suggest",
            "--flows",
            flows,
            "--inventory",
            inventory,
            "--output",
            out.to_str().expect("utf-8 path"),
        ]);
        assert_eq!(run.status.code(), Some(0), "{run:?}");
        let lint = porin(&["lint", out.to_str().unwrap(), "--inventory", inventory]);
        let text = String::from_utf8_lossy(&lint.stdout).into_owned()
            + &String::from_utf8_lossy(&lint.stderr);
        assert_eq!(lint.status.code(), Some(0), "{text}");
        assert!(!text.contains("error["), "{text}");
        let replay = porin(&[
            "replay",
            "--flows",
            flows,
            out.to_str().unwrap(),
            "--inventory",
            inventory,
        ]);
        let text = String::from_utf8_lossy(&replay.stdout).into_owned();
        assert_eq!(replay.status.code(), Some(0), "{text}");
        assert!(
            text.contains("nothing newly denied, nothing newly allowed"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_recorded_test_file_passes_under_the_policies_it_was_recorded_with() {
    for (flows, inventory, policies, cases) in [
        (
            FLOWS,
            INVENTORY,
            "examples/quickstart/policies",
            "15 passed, 0 failed",
        ),
        (
            "fixtures/flows/boutique/observe.jsonpb",
            "examples/boutique/manifests.yaml",
            "examples/boutique/policies",
            " passed, 0 failed",
        ),
    ] {
        let dir = scratch("from-flows");
        let out = dir.join("recorded.policytest.yaml");
        let run = porin(&[
            "test",
            "--from-flows",
            flows,
            "--inventory",
            inventory,
            policies,
            "--output",
            out.to_str().expect("utf-8 path"),
        ]);
        assert_eq!(run.status.code(), Some(0), "{run:?}");
        let test = porin(&["test", out.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&test.stdout).into_owned();
        assert_eq!(test.status.code(), Some(0), "{text}");
        assert!(text.trim_end().ends_with(cases), "{text}");
        assert!(!text.contains("0 passed"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn diff_with_flows_ranks_changes_by_the_traffic_they_change() {
    let out = porin(&[
        "diff",
        "examples/quickstart/policies",
        "fixtures/flows/quickstart/proposed",
        "--inventory",
        INVENTORY,
        "--flows",
        FLOWS,
    ]);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("in the recording (46 flows decided): narrows 1 edge carrying 11 flows, opens 1 edge carrying 2 flows\n"),
        "{text}"
    );
    // The busiest change first.
    let frontend = text
        .find("shop/frontend → shop/api")
        .expect("frontend edge");
    let remote = text
        .find("→ shop/api: none → TCP/8080")
        .expect("remote-node edge");
    assert!(frontend < remote, "{text}");
    assert!(text.contains("changes 11 recorded flows ("), "{text}");
    let json = porin(&[
        "diff",
        "examples/quickstart/policies",
        "fixtures/flows/quickstart/proposed",
        "--inventory",
        INVENTORY,
        "--flows",
        FLOWS,
        "--format",
        "json",
    ]);
    let value: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(value["observed"]["narrows"]["flows"], 11);
    assert_eq!(value["connections"][0]["observedFlows"], 11);
}
