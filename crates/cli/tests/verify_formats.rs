//! `porin lint` over every lint fixture (`fixtures/lint/PR0xx_name/`) in
//! every output format (human, json, sarif, junit, github), as insta
//! snapshots; every SARIF log is validated against the SARIF 2.1.0
//! schema's required structure (hand-written checker below, following the
//! OASIS sarif-schema-2.1.0.json definitions it names) plus GitHub code
//! scanning's extra requirements (a location per result, fingerprints).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn porin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(workspace())
        .env("NO_COLOR", "1")
        .output()
        .expect("porin runs")
}

fn rule_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(workspace().join("fixtures/lint"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    dirs
}

fn lint(dir: &str, file: &str, format: &str) -> Output {
    let trigger = format!("fixtures/lint/{dir}/{file}");
    let mut args = vec![
        "lint",
        &trigger,
        "--inventory",
        "fixtures/lint/inventory.yaml",
        "--format",
        format,
    ];
    let config = format!("fixtures/lint/{dir}/porin.yaml");
    if workspace().join(&config).exists() {
        args.push("--config");
        args.push(&config);
    }
    let args: Vec<&str> = args.iter().map(|s| &**s).collect();
    porin(&args)
}

// ----- SARIF 2.1.0 structural validation -----

const LEVELS: &[&str] = &["none", "note", "warning", "error"];

fn message_ok(value: &Value, path: &str, errors: &mut Vec<String>) {
    // #/definitions/message: requires text or id.
    match value {
        Value::Object(m)
            if m.get("text").is_some_and(Value::is_string)
                || m.get("id").is_some_and(Value::is_string) => {}
        _ => errors.push(format!("{path}: message needs `text` or `id`")),
    }
}

fn multiformat_ok(value: Option<&Value>, path: &str, errors: &mut Vec<String>) {
    // #/definitions/multiformatMessageString: requires text.
    if let Some(v) = value
        && !v.get("text").is_some_and(Value::is_string)
    {
        errors.push(format!("{path}: multiformatMessageString needs `text`"));
    }
}

fn physical_ok(value: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(artifact) = value.get("artifactLocation") else {
        errors.push(format!("{path}: physicalLocation needs artifactLocation"));
        return;
    };
    if !artifact.get("uri").is_some_and(Value::is_string) {
        errors.push(format!("{path}.artifactLocation: uri must be a string"));
    }
    if let Some(base) = artifact.get("uriBaseId")
        && !base.is_string()
    {
        errors.push(format!(
            "{path}.artifactLocation: uriBaseId must be a string"
        ));
    }
    if let Some(region) = value.get("region") {
        for field in ["startLine", "startColumn", "endLine", "endColumn"] {
            if let Some(n) = region.get(field)
                && n.as_i64().is_none_or(|n| n < 1)
            {
                errors.push(format!("{path}.region.{field}: integer >= 1"));
            }
        }
    }
}

/// Errors of a SARIF log against the 2.1.0 schema's required properties,
/// enums and minimums, and GitHub code scanning's requirements.
fn validate_sarif(log: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if log.get("version").and_then(Value::as_str) != Some("2.1.0") {
        errors.push("version must be \"2.1.0\"".to_owned());
    }
    let Some(runs) = log.get("runs").and_then(Value::as_array) else {
        errors.push("runs must be an array".to_owned());
        return errors;
    };
    for (r, run) in runs.iter().enumerate() {
        let Some(driver) = run.get("tool").and_then(|t| t.get("driver")) else {
            errors.push(format!("runs[{r}]: tool.driver is required"));
            continue;
        };
        if driver
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errors.push(format!("runs[{r}].tool.driver: name is required"));
        }
        let rules: Vec<Value> = driver
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut ids = BTreeSet::new();
        for (i, rule) in rules.iter().enumerate() {
            let path = format!("runs[{r}].tool.driver.rules[{i}]");
            match rule.get("id").and_then(Value::as_str) {
                Some(id) => {
                    if !ids.insert(id.to_owned()) {
                        errors.push(format!("{path}: duplicate id {id}"));
                    }
                }
                None => errors.push(format!("{path}: id is required")),
            }
            for field in ["shortDescription", "fullDescription", "help"] {
                multiformat_ok(rule.get(field), &format!("{path}.{field}"), &mut errors);
            }
            if let Some(level) = rule.pointer("/defaultConfiguration/level")
                && !level.as_str().is_some_and(|l| LEVELS.contains(&l))
            {
                errors.push(format!("{path}: bad default level"));
            }
        }
        if let Some(kind) = run.get("columnKind")
            && !matches!(kind.as_str(), Some("utf16CodeUnits" | "unicodeCodePoints"))
        {
            errors.push(format!("runs[{r}]: bad columnKind"));
        }
        let results = run
            .get("results")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut fingerprints = BTreeSet::new();
        for (i, result) in results.iter().enumerate() {
            let path = format!("runs[{r}].results[{i}]");
            match result.get("message") {
                Some(m) => message_ok(m, &format!("{path}.message"), &mut errors),
                None => errors.push(format!("{path}: message is required")),
            }
            if let Some(level) = result.get("level")
                && !level.as_str().is_some_and(|l| LEVELS.contains(&l))
            {
                errors.push(format!("{path}: bad level"));
            }
            let rule_id = result.get("ruleId").and_then(Value::as_str);
            if let Some(index) = result.get("ruleIndex") {
                let ok = index
                    .as_i64()
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| rules.get(i))
                    .and_then(|rule| rule.get("id"))
                    .and_then(Value::as_str)
                    == rule_id;
                if !ok {
                    errors.push(format!("{path}: ruleIndex does not point at ruleId"));
                }
            }
            let locations = result.get("locations").and_then(Value::as_array);
            if locations.is_none_or(|l| l.is_empty()) {
                errors.push(format!("{path}: GitHub code scanning needs a location"));
            }
            for (l, location) in locations.into_iter().flatten().enumerate() {
                match location.get("physicalLocation") {
                    Some(p) => physical_ok(
                        p,
                        &format!("{path}.locations[{l}].physicalLocation"),
                        &mut errors,
                    ),
                    None => errors.push(format!("{path}.locations[{l}]: physicalLocation missing")),
                }
            }
            let mut related_ids = BTreeSet::new();
            for (l, related) in result
                .get("relatedLocations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let p = format!("{path}.relatedLocations[{l}]");
                if let Some(id) = related.get("id")
                    && (id.as_i64().is_none_or(|i| i < -1) || !related_ids.insert(id.to_string()))
                {
                    errors.push(format!("{p}: id must be a unique integer >= -1"));
                }
                if let Some(m) = related.get("message") {
                    message_ok(m, &format!("{p}.message"), &mut errors);
                }
                if let Some(physical) = related.get("physicalLocation") {
                    physical_ok(physical, &format!("{p}.physicalLocation"), &mut errors);
                }
            }
            match result.get("partialFingerprints").and_then(Value::as_object) {
                Some(map) if map.values().all(Value::is_string) => {
                    if !fingerprints.insert(serde_json::to_string(map).unwrap()) {
                        errors.push(format!("{path}: fingerprint not unique"));
                    }
                }
                _ => errors.push(format!("{path}: partialFingerprints must map to strings")),
            }
        }
    }
    errors
}

#[test]
fn the_sarif_checker_rejects_broken_logs() {
    assert!(!validate_sarif(&serde_json::json!({"version": "2.0.0", "runs": []})).is_empty());
    let broken = serde_json::json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "porin", "rules": [{"id": "PR001"}]}},
        "results": [{"ruleId": "PR002", "ruleIndex": 0, "level": "fatal", "message": {},
                     "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a"}, "region": {"startLine": 0}}}],
                     "partialFingerprints": {"a": 1}}]
    }]});
    let errors = validate_sarif(&broken);
    assert_eq!(errors.len(), 5, "{errors:#?}");
}

#[test]
fn every_fixture_in_every_format() {
    for dir in rule_dirs() {
        for format in ["human", "json", "sarif", "junit", "github"] {
            let output = lint(&dir, "trigger.yaml", format);
            let code = output.status.code();
            assert!(
                matches!(code, Some(0 | 1)),
                "{dir} {format}: exit {code:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let stdout = String::from_utf8(output.stdout).unwrap();
            assert!(
                stdout.contains(&dir[..5]),
                "{dir} {format} lacks its code:\n{stdout}"
            );
            if format == "sarif" {
                let log: Value = serde_json::from_str(&stdout).unwrap();
                let errors = validate_sarif(&log);
                assert!(errors.is_empty(), "{dir}: {errors:#?}");
                // Only the results are snapshotted; the rule table is the same every time.
                let results = serde_json::to_string_pretty(&log["runs"][0]["results"]).unwrap();
                insta::assert_snapshot!(format!("{dir}__sarif_results"), results);
            } else {
                insta::assert_snapshot!(format!("{dir}__{format}"), stdout);
            }
        }
        let near = lint(&dir, "near_miss.yaml", "json");
        let stdout = String::from_utf8(near.stdout).unwrap();
        assert!(
            !stdout.contains(&format!("\"{}\"", &dir[..5])),
            "{dir} near miss triggers:\n{stdout}"
        );
    }
}

#[test]
fn sarif_fingerprints_do_not_depend_on_lines() {
    // The same finding two lines lower keeps its fingerprint.
    let dir = workspace().join("target/verify-formats-tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let original = std::fs::read_to_string(
        workspace().join("fixtures/lint/PR010_overlapping_ports/trigger.yaml"),
    )
    .unwrap();
    let a = dir.join("a.yaml");
    std::fs::write(&a, &original).unwrap();
    let first = porin(&["lint", a.to_str().unwrap(), "--format", "sarif"]);
    std::fs::write(&a, format!("# moved\n# down\n{original}")).unwrap();
    let second = porin(&["lint", a.to_str().unwrap(), "--format", "sarif"]);
    let fp = |o: &Output| {
        let log: Value = serde_json::from_slice(&o.stdout).unwrap();
        (
            log["runs"][0]["results"][0]["partialFingerprints"].clone(),
            log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"]
                .clone(),
        )
    };
    let (fp1, line1) = fp(&first);
    let (fp2, line2) = fp(&second);
    assert_eq!(fp1, fp2);
    assert_eq!(line2.as_i64().unwrap(), line1.as_i64().unwrap() + 2);
}

#[test]
fn fail_on_and_exit_codes() {
    let dir = "PR004_allow_shadowed_by_deny";
    let trigger = format!("fixtures/lint/{dir}/trigger.yaml");
    let inv = "fixtures/lint/inventory.yaml";
    assert_eq!(
        porin(&["lint", &trigger, "--inventory", inv]).status.code(),
        Some(0)
    );
    assert_eq!(
        porin(&["lint", &trigger, "--inventory", inv, "--fail-on", "warning"])
            .status
            .code(),
        Some(1)
    );
    let capacity = "fixtures/lint/PR001_map_capacity_exceeded";
    let out = porin(&[
        "lint",
        &format!("{capacity}/trigger.yaml"),
        "--inventory",
        inv,
        "--config",
        &format!("{capacity}/porin.yaml"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        porin(&[
            "lint",
            &format!("{capacity}/trigger.yaml"),
            "--inventory",
            inv,
            "--config",
            &format!("{capacity}/porin.yaml"),
            "--fail-on",
            "never"
        ])
        .status
        .code(),
        Some(0)
    );
    assert_eq!(
        porin(&["lint", &trigger, "--inventory", "does/not/exist"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        porin(&["lint", &trigger, "--config", "does/not/exist"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn annotation_and_config_turn_rules_off() {
    let dir = workspace().join("target/verify-formats-tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let original = std::fs::read_to_string(
        workspace().join("fixtures/lint/PR010_overlapping_ports/trigger.yaml"),
    )
    .unwrap();
    let annotated = original.replace(
        "namespace: default}",
        "namespace: default, annotations: {porin.dev/ignore: \"PR010\"}}",
    );
    assert_ne!(annotated, original);
    let file = dir.join("annotated.yaml");
    std::fs::write(&file, annotated).unwrap();
    let out = porin(&["lint", file.to_str().unwrap(), "--format", "json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PR010"));
    let config = dir.join("porin.yaml");
    std::fs::write(&config, "rules: {overlapping-ports: error}\n").unwrap();
    let out = porin(&[
        "lint",
        "fixtures/lint/PR010_overlapping_ports/trigger.yaml",
        "--config",
        config.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"severity\": \"error\""));
    std::fs::write(&config, "rules: {PR010: off}\n").unwrap();
    let out = porin(&[
        "lint",
        "fixtures/lint/PR010_overlapping_ports/trigger.yaml",
        "--config",
        config.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("PR010"));
}

#[test]
fn explain_prints_every_rule_document() {
    for dir in rule_dirs() {
        let out = porin(&["explain", &dir[..5]]);
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8(out.stdout).unwrap();
        for section in [
            "## What it does",
            "## Why is this bad",
            "## Example",
            "## Use instead",
            "## References",
        ] {
            assert!(text.contains(section), "{dir}: {section}");
        }
    }
    insta::assert_snapshot!(
        "explain_PR001",
        String::from_utf8(porin(&["explain", "map-capacity-exceeded"]).stdout).unwrap()
    );
    assert_eq!(porin(&["explain", "PR999"]).status.code(), Some(2));
}
