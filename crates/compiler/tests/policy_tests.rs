//! Runs every `PolicyTest` file under `fixtures/policy-tests` with the
//! reference evaluator (`porin test fixtures/policy-tests`): every case must
//! pass and every file must load.

use std::path::PathBuf;

use porin_compiler::policytest::{Engine, run};

#[test]
fn every_policy_test_fixture_passes_with_the_reference_engine() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/policy-tests");
    let report = run(&[root], Engine::Reference);
    let failures: Vec<&String> = report
        .lines
        .iter()
        .filter(|l| l.starts_with("FAIL"))
        .collect();
    assert!(
        report.errors.is_empty() && failures.is_empty(),
        "{} errors, {} failures:\n{}\n{}",
        report.errors.len(),
        failures.len(),
        report.errors.join("\n"),
        failures
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(report.passed > 0, "no cases found");
}

#[test]
fn a_wrong_expectation_fails_and_explains() {
    let dir = std::env::temp_dir().join(format!("porin-policytest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("wrong.yaml");
    std::fs::write(
        &file,
        r#"kind: PolicyTest
endpoints:
  - {name: a, namespace: default, labels: {app: a}}
  - {name: b, namespace: default, labels: {app: b}}
policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {name: b, namespace: default}
      spec:
        endpointSelector: {matchLabels: {app: b}}
        ingress:
          - fromEndpoints: [{matchLabels: {app: a}}]
            toPorts: [{ports: [{port: "80", protocol: TCP}]}]
cases:
  - {from: default/a, to: default/b, port: 80, expect: deny}
  - {from: default/a, to: default/b, port: 81, expect: deny}
"#,
    )
    .unwrap();
    let report = run(std::slice::from_ref(&file), Engine::Reference);
    assert_eq!((report.passed, report.failed), (1, 1), "{:?}", report.lines);
    assert_eq!(report.exit_code(), 1);
    assert!(report.lines[0].starts_with("FAIL"), "{}", report.lines[0]);
    assert!(
        report.lines[0].contains("CiliumNetworkPolicy default/b spec.ingress[0]"),
        "{}",
        report.lines[0]
    );
    assert_eq!(report.summary(), "1 passed, 1 failed");

    std::fs::write(
        &file,
        "kind: PolicyTest\ncases:\n  - {from: nowhere, to: x, port: 1, expect: allow}\n",
    )
    .unwrap();
    let report = run(std::slice::from_ref(&file), Engine::Reference);
    assert_eq!(report.exit_code(), 2, "unknown peer is a validation error");

    let report = run(&[file], Engine::Kernel);
    assert_eq!(report.exit_code(), 2);
    assert!(report.errors[0].contains("porin-ebpf"));
    let _ = std::fs::remove_dir_all(dir);
}
