//! Two identical rules are one duplicate pair, not two deletable rules:
//! `porin query` and a failing `porin test` case name both and say that
//! either alone allows the flow, so that removing both (what "delete this
//! redundant rule" twice would do) is not suggested.

#![allow(clippy::unwrap_used, reason = "tests panic on broken fixtures")]

use crate::common::porin;

const DIR: &str = "crates/cli/tests/cli/data/duplicate_pair";
const NOTE: &str = "(each of these 2 rules alone allows this flow: removing one of them keeps it)";

#[test]
fn query_and_test_name_the_pair_and_keep_one() {
    let query = |policy: &str| {
        let out = porin(&[
            "query",
            "--from",
            "default/api",
            "--to",
            "default/web",
            "--port",
            "80/tcp",
            "--inventory",
            "fixtures/lint/inventory.yaml",
            policy,
        ]);
        String::from_utf8(out.stdout).unwrap()
    };
    let text = query(&format!("{DIR}/web.yaml"));
    assert!(text.starts_with("allow:"), "{text}");
    assert!(
        text.contains("spec.ingress[0]") && text.contains("spec.ingress[1]") && text.contains(NOTE),
        "{text}"
    );
    let out = porin(&["test", &format!("{DIR}/web.policytest.yaml")]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let failure = text.lines().find(|l| l.starts_with("FAIL")).unwrap();
    assert!(failure.contains(NOTE), "{failure}");
    // One rule: no note.
    let single = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: web, namespace: default}\nspec:\n  endpointSelector: {matchLabels: {app: web}}\n  ingress:\n  - fromEndpoints: [{matchLabels: {app: api}}]\n    toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]\n";
    let dir = std::env::temp_dir().join(format!("porin-dup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("web.yaml");
    std::fs::write(&path, single).unwrap();
    let text = query(path.to_str().unwrap());
    assert!(
        text.starts_with("allow:") && !text.contains("alone allows"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
