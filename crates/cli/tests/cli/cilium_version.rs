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

/// `porin lint --upgrade-to 1.20` over Cilium's examples (issue 21
/// acceptance): the findings the upgrade adds are exactly those a plain run
/// lacks, each names the row of the version table that backs it, and the
/// Kafka examples (`examples/policies/l7/kafka/`, `kubernetes-kafka/`) are
/// among them.
#[test]
fn the_upgrade_report_of_the_corpus_is_backed_by_table_rows() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = root.join("../shared/corpus/cilium-examples");
    if !corpus.is_dir() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI: {} is missing",
            corpus.display()
        );
        println!("SKIPPED: {} is missing", corpus.display());
        return;
    }
    let run = |extra: &[&str]| -> Vec<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_porin"))
            .args(["lint", "--format", "json"])
            .args(extra)
            .arg(&corpus)
            .output()
            .expect("porin runs");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json.as_array().unwrap().clone()
    };
    let plain = run(&[]);
    let upgrade = run(&["--upgrade-to", "1.20"]);
    let added: Vec<&serde_json::Value> = upgrade.iter().filter(|d| !plain.contains(d)).collect();
    assert!(added.len() >= 3, "{added:#?}");
    assert_eq!(plain.len() + added.len(), upgrade.len());
    let rows: Vec<&str> = porin_model::version::TABLE.iter().map(|r| r.id).collect();
    for finding in &added {
        let help = finding["help"].as_str().unwrap_or("");
        assert!(
            rows.iter()
                .any(|id| help.contains(&format!("row is `{id}`"))),
            "not backed by a row: {finding:#}"
        );
        let notes = finding["notes"].to_string();
        assert!(
            notes.contains("valid for Cilium 1.19, refused by Cilium 1.20"),
            "{finding:#}"
        );
    }
    assert!(
        added.iter().any(|d| d["primary"]["file"]
            .as_str()
            .unwrap_or("")
            .contains("kafka")),
        "{added:#?}"
    );
}

/// `porin diff --to-cilium-version`: the new side is validated for the new
/// version. The same Kafka policy on both sides is no change for 1.19 and
/// cannot be compared for 1.20, whose side is refused with PM050 (row
/// `kafka`), not silently compiled.
#[test]
fn diff_validates_each_side_for_its_version() {
    let path = file("diff");
    let inventory = path.with_file_name("inventory.yaml");
    std::fs::write(
        &inventory,
        "kind: Inventory\nendpoints:\n  - {name: broker, namespace: default, labels: {app: broker}}\n",
    )
    .unwrap();
    let diff = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_porin"))
            .arg("diff")
            .arg(&path)
            .arg(&path)
            .arg("--inventory")
            .arg(&inventory)
            .args(extra)
            .output()
            .expect("porin runs");
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, out, err) = diff(&[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out, "no connectivity change\n");
    let (code, out, err) = diff(&["--cilium-version", "1.19", "--to-cilium-version", "1.20"]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("error[PM050]"), "{err}");
}
