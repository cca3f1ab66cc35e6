//! Runs every `PolicyTest` file under `fixtures/policy-tests` with the
//! reference evaluator (`porin test fixtures/policy-tests`): every case must
//! pass and every file must load.

use std::path::PathBuf;

use porin_policytest::{Reference, run};

#[test]
fn every_policy_test_fixture_passes_with_the_reference_engine() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/policy-tests");
    let report = run(&[root], &mut Reference);
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
    let report = run(std::slice::from_ref(&file), &mut Reference);
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
    let report = run(std::slice::from_ref(&file), &mut Reference);
    assert_eq!(report.exit_code(), 2, "unknown peer is a validation error");

    let _ = std::fs::remove_dir_all(dir);
}

/// ICMP (IP protocol 1) exists only inside IPv4 packets and ICMPv6 (58)
/// only inside IPv6 ones (RFC 792, RFC 4443; Cilium keys them as distinct
/// protocols, `pkg/policy/api/l4.go` `ProtoICMP`/`ProtoICMPv6`). A case
/// asking for ICMP between IPv6-only peers describes no packet; the kernel
/// engine cannot build it, so the reference must not invent a verdict for
/// it either: the file is refused (exit 2) with a reason, for both engines.
#[test]
fn a_case_no_packet_can_carry_is_an_error_of_the_file() {
    let dir = std::env::temp_dir().join(format!(
        "porin-policytest-family-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("family.yaml");
    let write = |cases: &str| {
        std::fs::write(
            &file,
            format!(
                "kind: PolicyTest
endpoints:
  - {{name: v6, namespace: default, labels: {{app: v6}}, ips: [\"fd00::6\"]}}
  - {{name: v6b, namespace: default, labels: {{app: v6b}}, ips: [\"fd00::7\"]}}
  - {{name: v4, namespace: default, labels: {{app: v4}}, ips: [10.0.0.4]}}
  - {{name: dual, namespace: default, labels: {{app: dual}}, ips: [10.0.0.5, \"fd00::5\"]}}
policies: []
cases:
{cases}"
            ),
        )
        .unwrap();
    };
    let expect_error = |case: &str, reason: &str| {
        write(case);
        let report = run(std::slice::from_ref(&file), &mut Reference);
        assert_eq!(report.exit_code(), 2, "{case}: {:?}", report.lines);
        assert!(
            report.errors.iter().any(|e| e.contains(reason)),
            "{case}: {:?}",
            report.errors
        );
    };
    expect_error(
        "  - {from: default/v6, to: default/v6b, protocol: ICMP, icmpType: 8, expect: allow}\n",
        "use `protocol: ICMPv6`",
    );
    expect_error(
        "  - {from: default/v4, to: default/dual, protocol: ICMPv6, icmpType: 128, expect: allow}\n",
        "use `protocol: ICMP`",
    );
    expect_error(
        "  - {from: default/v4, to: default/v6, port: 80, expect: allow}\n",
        "no address family in common",
    );
    expect_error(
        "  - {from: \"fd00::99\", to: default/v4, port: 80, expect: allow}\n",
        "no address family in common",
    );

    // Near misses: a family in common, or an entity peer (any family).
    write(
        "  - {from: default/v6, to: default/dual, protocol: ICMPv6, icmpType: 128, expect: allow}
  - {from: default/v4, to: default/dual, protocol: ICMP, icmpType: 8, expect: allow}
  - {from: world, to: default/v6, protocol: ICMPv6, icmpType: 128, expect: allow}
  - {from: host, to: default/v4, protocol: ICMP, icmpType: 8, expect: allow}
  - {from: default/dual, to: default/v6, port: 80, expect: allow}
",
    );
    let report = run(std::slice::from_ref(&file), &mut Reference);
    assert_eq!(
        (report.exit_code(), report.passed),
        (0, 5),
        "{:?} {:?}",
        report.errors,
        report.lines
    );
    let _ = std::fs::remove_dir_all(dir);
}
