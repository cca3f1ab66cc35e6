//! `--cilium-version` (issue 21): the same file is valid for Cilium 1.19
//! and refused for 1.20 (row `kafka` of `porin_model::version::TABLE`:
//! cilium/cilium#44610 removed the field from the CRDs), and a version
//! porin does not model is a usage error naming the ones it does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::path::PathBuf;
use std::process::Command;

const KAFKA: &str = r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: kafka, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: broker}}
  ingress:
  - toPorts:
    - ports: [{port: "9092", protocol: TCP}]
      rules:
        kafka: [{topic: deathstar-plans}]
"#;

fn file(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("porin-version-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kafka.yaml");
    std::fs::write(&path, KAFKA).unwrap();
    path
}

fn lint(args: &[&str], path: &PathBuf) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_porin"))
        .arg("lint")
        .args(args)
        .arg(path)
        .output()
        .expect("porin runs");
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn kafka_rules_are_valid_for_1_19_and_refused_for_1_20() {
    let path = file("kafka");
    let (code, out, err) = lint(&[], &path);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = lint(&["--cilium-version", "1.19"], &path);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = lint(&["--cilium-version", "1.20"], &path);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("error[PM050]"), "{out}");
    assert!(out.contains("kafka.yaml:10:9"), "{out}");
    assert!(out.contains("removed in Cilium 1.20"), "{out}");
}

#[test]
fn an_unmodelled_version_is_a_usage_error() {
    let path = file("usage");
    let (code, out, err) = lint(&["--cilium-version", "1.18"], &path);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("use one of 1.19, 1.20"), "{err}");
}
