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

/// Writes a test file into a fresh directory of its own and runs it.
fn run_text(tag: &str, text: &str) -> porin_policytest::TestReport {
    run_text_with(tag, text, &mut Reference)
}

/// [`run_text`] with another engine.
fn run_text_with(
    tag: &str,
    text: &str,
    engine: &mut dyn porin_policytest::Engine,
) -> porin_policytest::TestReport {
    let dir = std::env::temp_dir().join(format!(
        "porin-policytest-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join("world.yaml");
    std::fs::write(&file, text).expect("the test file is written");
    let report = run(std::slice::from_ref(&file), engine);
    let _ = std::fs::remove_dir_all(dir);
    report
}

/// Asserts that a file was refused (exit 2) for `reason`.
fn assert_refused(report: &porin_policytest::TestReport, reason: &str) {
    assert_eq!(report.exit_code(), 2, "{report:?}");
    assert!(
        report.errors.iter().any(|e| e.contains(reason)),
        "{:?}",
        report.errors
    );
}

/// A test file whose endpoints (`app: web`) allow the world and deny the
/// prefixes `deny`; the cases follow.
fn world_file(endpoints: &str, deny: &str) -> String {
    format!(
        r#"kind: PolicyTest
endpoints:
{endpoints}policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {{name: web, namespace: default}}
      spec:
        endpointSelector: {{matchLabels: {{app: web}}}}
        ingress: [{{fromEntities: [world]}}]
        ingressDeny: [{{fromCIDR: [{deny}]}}]
cases:
"#
    )
}

/// Dual-stack and IPv6-only endpoints, only `0.0.0.0/0` denied.
fn world_one_family() -> String {
    world_file(
        r#"  - {name: dual, namespace: default, labels: {app: web}, ips: [10.0.13.2, "fd00::13:2"]}
  - {name: v6, namespace: default, labels: {app: web}, ips: ["fd00::13:3"]}
"#,
        r#""0.0.0.0/0""#,
    )
}

/// issue 12 item 3: world traffic is world-ipv4 (9) over IPv4 and
/// world-ipv6 (10) over IPv6 (`daemon/cmd/hostips-sync.go`), so a deny of
/// `0.0.0.0/0` alone denies one half of the world. A `world` case towards a
/// dual-stack endpoint then has two verdicts: it fails whatever it
/// expects, and the line says which family got which, by name.
#[test]
fn a_world_case_whose_families_differ_fails_and_names_both() {
    for expect in ["deny", "allow"] {
        let report = run_text(
            &format!("differ-{expect}"),
            &format!(
                "{}  - {{from: world, to: default/dual, port: 80, expect: {expect}}}\n",
                world_one_family()
            ),
        );
        assert_eq!((report.passed, report.failed), (0, 1), "{:?}", report);
        let line = &report.lines[0];
        assert!(line.contains("=> IPv4 deny, IPv6 allow"), "{line}");
        assert!(
            line.contains("default/dual ingress (IPv4, world-ipv4): denied by ingress key (world-ipv4 (identity 9)"),
            "{line}"
        );
        assert!(
            line.contains("default/dual ingress (IPv6, world-ipv6): allowed by ingress key (world-ipv6 (identity 10)"),
            "{line}"
        );
        assert!(!line.contains("identity 2"), "{line}");
    }
}

/// `world-ipv4` and `world-ipv6` are one family each: towards an endpoint
/// without that family no packet exists, and the case is an error, not a
/// verdict (the kernel engine could not build the packet).
#[test]
fn a_world_family_peer_towards_an_endpoint_without_the_family_is_an_error() {
    let report = run_text(
        "world-v4-to-v6",
        &format!(
            "{}  - {{from: world-ipv4, to: default/v6, port: 80, expect: deny}}\n",
            world_one_family()
        ),
    );
    assert_refused(&report, "no address family in common");
    // The IPv6 half reaches it, and `world` is decided in IPv6 only there.
    let report = run_text(
        "world-v6-to-v6",
        &format!(
            "{}  - {{from: world-ipv6, to: default/v6, port: 80, expect: allow}}
  - {{from: world, to: default/v6, port: 80, expect: allow}}
",
            world_one_family()
        ),
    );
    assert_eq!((report.passed, report.failed), (2, 0), "{:?}", report);
    assert!(
        report.files[0]
            .cases
            .iter()
            .all(|c| c.actual.as_deref() == Some("allow (IPv6)")),
        "{:?}",
        report
    );
}

/// When the policies' prefixes cover every IPv4 address, no IPv4 packet
/// carries world-ipv4: every outside IPv4 address has a CIDR identity. The
/// world peer then has no IPv4 address; towards an IPv4-only endpoint the
/// case is an error that says why, and towards a dual-stack one it is
/// decided in IPv6 only.
#[test]
fn the_world_has_no_address_in_a_family_its_prefixes_cover() {
    let file = world_file(
        r#"  - {name: v4, namespace: default, labels: {app: web}, ips: [10.0.15.1]}
  - {name: dual, namespace: default, labels: {app: web}, ips: [10.0.15.2, "fd00::15:2"]}
"#,
        r#""0.0.0.0/1", "128.0.0.0/1""#,
    );
    let report = run_text(
        "covered-v4",
        &format!("{file}  - {{from: world, to: default/v4, port: 80, expect: deny}}\n"),
    );
    assert_refused(
        &report,
        "every IPv4 address is inside an endpoint or a policy prefix",
    );
    let report = run_text(
        "covered-dual",
        &format!(
            "{file}  - {{from: world, to: default/dual, port: 80, expect: allow}}
  - {{from: 203.0.113.9, to: default/dual, port: 80, expect: deny}}
"
        ),
    );
    assert_eq!((report.passed, report.failed), (2, 0), "{:?}", report);
}

/// A misspelt top-level field (`case:` for `cases:`) used to be skipped,
/// so the file ran no case and passed: a test that cannot fail. It is an
/// error of the file now, at the field's line.
#[test]
fn an_unknown_top_level_field_refuses_the_file() {
    let report = run_text(
        "unknown-field",
        "kind: PolicyTest\nname: typo\nendpoints:\n  - {name: a, namespace: default, labels: {app: a}}\n\
         case:\n  - {from: default/a, to: default/a, port: 80, expect: deny}\n",
    );
    // In porin lint's format (issue 17): the code, the location once
    // with the key's column, the source line and a caret.
    assert_refused(
        &report,
        "error[PM003]: invalid test file: unknown field `case` in a document of kind `PolicyTest`",
    );
    assert_refused(&report, ".yaml:5:1 (document 0)");
    assert_refused(&report, "5 | case:");
    assert_eq!(report.passed + report.failed, 0, "{report:?}");
}

/// An engine that allows every flow, decided once for any family.
struct AllowAll;

impl porin_policytest::Engine for AllowAll {
    fn name(&self) -> &str {
        "allow-all"
    }

    fn decide(
        &mut self,
        _: &porin_policytest::PreparedTest,
        _: &porin_policytest::ResolvedCase,
    ) -> Result<porin_policytest::CaseDecision, porin_policytest::EngineError> {
        Ok(porin_policytest::CaseDecision::new(
            vec![(None, porin_compiler::explain::FlowVerdict::Allow)],
            Vec::new(),
            "allowed".to_owned(),
        ))
    }
}

/// `Both` judges the second engine per family too, and compares the
/// engines family by family: against an engine that allows everything, the
/// reference's `IPv4 deny, IPv6 allow` for a world case fails it, although
/// the most permissive verdicts (allow) agree.
#[test]
fn both_engines_are_judged_and_compared_per_family() {
    let report = run_text_with(
        "both",
        &format!(
            "{}  - {{from: world, to: default/dual, port: 80, expect: allow}}\n",
            world_one_family()
        ),
        &mut porin_policytest::Both::new(AllowAll, Reference),
    );
    assert_eq!((report.passed, report.failed), (0, 1), "{report:?}");
    let line = &report.lines[0];
    assert!(
        line.contains("=> allow-all allow, reference IPv4 deny, IPv6 allow"),
        "{line}"
    );
    assert!(
        line.contains("flow verdict: allow-all allow, reference IPv4 deny, IPv6 allow"),
        "{line}"
    );
    assert!(
        line.contains("reference: default/dual ingress (IPv4, world-ipv4): denied"),
        "{line}"
    );
}

/// A case may ask for one address family (`family: ipv4|ipv6`, issue 17);
/// one that an end has no address in is an error of the file, naming the
/// family and the families the flow can travel in; an unknown family word
/// is one too.
#[test]
fn a_case_in_a_family_an_end_lacks_is_refused() {
    let dir = std::env::temp_dir().join(format!("porin-policytest-family-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, family: &str| {
        let file = dir.join(name);
        std::fs::write(
            &file,
            format!(
                "kind: PolicyTest
endpoints:
  - {{name: client, namespace: default, labels: {{app: client}}, ips: [10.0.17.2, \"fd00::17:2\"]}}
  - {{name: v6only, namespace: default, labels: {{app: v6only}}, ips: [\"fd00::17:3\"]}}
cases:
  - {{from: default/client, to: default/v6only, port: 80, family: {family}, expect: allow}}
"
            ),
        )
        .unwrap();
        file
    };
    let report = run(&[write("v4.yaml", "ipv4")], &mut Reference);
    assert_eq!(report.exit_code(), 2, "{:?}", report.lines);
    assert!(
        report.errors[0]
            .contains("cases[0]: no IPv4 packet can carry this flow: it travels only over IPv6"),
        "{:?}",
        report.errors
    );
    assert_eq!(report.summary(), "0 passed, 0 failed, 1 file rejected");
    let report = run(&[write("v6.yaml", "ipv6")], &mut Reference);
    assert_eq!(
        (report.passed, report.failed),
        (1, 0),
        "{:?}",
        report.errors
    );
    assert!(
        report.lines[0].ends_with("TCP/80 over IPv6 => allow (IPv6)"),
        "{}",
        report.lines[0]
    );
    let report = run(&[write("v5.yaml", "ipv5")], &mut Reference);
    assert!(
        report.errors[0].contains("family `ipv5` is not ipv4 or ipv6"),
        "{:?}",
        report.errors
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
