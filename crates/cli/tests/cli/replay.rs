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
