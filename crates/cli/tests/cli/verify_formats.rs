//! `porin lint` over every lint fixture (`fixtures/lint/PR0xx_name/`) in
//! every output format (human, json, sarif, junit, github), as insta
//! snapshots; every SARIF log is validated against the official OASIS
//! SARIF 2.1.0 JSON schema (vendored in `tests/schemas/`) plus GitHub code
//! scanning's extra requirements (a location per result, fingerprints).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

use crate::common;
use common::{porin, workspace};

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

// ----- JUnit: what every run shares is checked, not snapshotted -----

/// The JUnit document of a lint run as its snapshot shows it. Every run
/// has one test case per registered rule, so a snapshot of the whole
/// document changes with every new rule; what all runs share is therefore
/// checked here and left out, and a new rule changes only its own
/// fixtures' snapshots. Checked: the rules' cases are every registered
/// rule once, in code order, and each `tests` attribute counts every case.
/// Left out: the passing rules' empty `<testcase .../>` lines (one comment
/// stands for them) and the number of rules in `tests` (`[rules]`, plus the
/// cases of other codes).
fn junit_view(xml: &str) -> String {
    let rules: Vec<String> = porin_lint::codes::rules()
        .map(|r| format!("{} {}", r.code, r.name))
        .collect();
    let name_of = |line: &str| {
        let rest = line.trim_start().strip_prefix("<testcase ")?;
        let start = rest.find(" name=\"")? + " name=\"".len();
        let len = rest[start..].find('"')?;
        Some(rest[start..start + len].to_owned())
    };
    let cases: Vec<String> = xml.lines().filter_map(name_of).collect();
    let rule_cases: Vec<&String> = cases.iter().filter(|c| rules.contains(c)).collect();
    assert_eq!(rule_cases, rules.iter().collect::<Vec<_>>(), "{xml}");
    let others = cases.len() - rules.len();
    let counted = format!("tests=\"{}\"", cases.len());
    assert_eq!(xml.matches("tests=\"").count(), 2, "{xml}");
    assert_eq!(xml.matches(&counted).count(), 2, "{xml}");
    let redacted = if others == 0 {
        "tests=\"[rules]\"".to_owned()
    } else {
        format!("tests=\"[rules] + {others}\"")
    };
    let mut view = String::new();
    for line in xml.replace(&counted, &redacted).lines() {
        let passing_rule = line.trim_end().ends_with("\"/>")
            && name_of(line).is_some_and(|name| rules.contains(&name));
        if passing_rule {
            continue;
        }
        view.push_str(line);
        view.push('\n');
        if line.trim_start().starts_with("<testsuite ") {
            view.push_str("    <!-- every rule not shown: a passing, empty <testcase/> -->\n");
        }
    }
    view
}

// ----- SARIF 2.1.0: the official schema, then GitHub code scanning -----

/// The OASIS SARIF 2.1.0 schema, vendored with its provenance in
/// `tests/schemas/README.md`.
fn sarif_validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schemas/sarif-schema-2.1.0.json"),
        )
        .expect("the vendored SARIF schema is readable");
        let mut schema: Value = serde_json::from_str(&text).expect("the SARIF schema is JSON");
        // The one known flaw of the official schema: the `language` patterns
        // of `run` and `toolComponent`, `^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$`,
        // have a stray `]`. ECMA-262 (Annex B) reads a lone `]` as a literal,
        // but jsonschema checks every `pattern` strictly against the
        // meta-schema's `format: regex` and refuses the whole schema.
        // Escaping it keeps the meaning exactly; the file itself stays
        // byte-for-byte the published one.
        for pointer in [
            "/definitions/run/properties/language/pattern",
            "/definitions/toolComponent/properties/language/pattern",
        ] {
            let language = schema
                .pointer_mut(pointer)
                .unwrap_or_else(|| panic!("the schema still has {pointer}"));
            assert_eq!(
                language.as_str(),
                Some("^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$"),
                "the vendored schema changed at {pointer}; revisit this patch"
            );
            *language = Value::from("^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}\\]?$");
        }
        // Formats (`uri`, `uri-reference`, `date-time`) are checked too:
        // code scanning rejects logs whose URIs do not parse.
        jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("the SARIF schema compiles")
    })
}

/// Errors of a SARIF log against the official SARIF 2.1.0 schema, one line
/// each (instance path, then what the schema says).
fn schema_errors(log: &Value) -> Vec<String> {
    sarif_validator()
        .iter_errors(log)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// GitHub code scanning's requirements beyond the schema
/// (docs.github.com: "SARIF support for code scanning"): every result has a
/// physical location with a real (>= 1) start line, a `ruleIndex` that
/// points at its `ruleId`, and `partialFingerprints` unique within the run.
fn code_scanning_errors(log: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for (r, run) in log["runs"].as_array().into_iter().flatten().enumerate() {
        let rules = run["tool"]["driver"]["rules"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut fingerprints = BTreeSet::new();
        for (i, result) in run["results"].as_array().into_iter().flatten().enumerate() {
            let path = format!("/runs/{r}/results/{i}");
            if let Some(index) = result.get("ruleIndex") {
                let pointed = index
                    .as_u64()
                    .and_then(|i| rules.get(usize::try_from(i).ok()?))
                    .and_then(|rule| rule["id"].as_str());
                if pointed != result["ruleId"].as_str() {
                    errors.push(format!("{path}: ruleIndex does not point at ruleId"));
                }
            }
            let lines: Vec<Option<i64>> = result["locations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| {
                    l.pointer("/physicalLocation/region/startLine")
                        .and_then(Value::as_i64)
                })
                .collect();
            if lines.is_empty() {
                errors.push(format!("{path}: GitHub code scanning needs a location"));
            }
            if lines.iter().any(|line| line.is_none_or(|n| n < 1)) {
                errors.push(format!("{path}: every location needs a real startLine"));
            }
            match result["partialFingerprints"].as_object() {
                Some(map) if !map.is_empty() => {
                    if !fingerprints.insert(serde_json::to_string(map).unwrap()) {
                        errors.push(format!("{path}: fingerprint not unique"));
                    }
                }
                _ => errors.push(format!("{path}: partialFingerprints missing")),
            }
        }
    }
    errors
}

pub(crate) fn validate_sarif(log: &Value) -> Vec<String> {
    let mut errors = schema_errors(log);
    errors.extend(code_scanning_errors(log));
    errors
}

#[test]
fn the_sarif_schema_rejects_broken_logs() {
    // A valid minimal log passes, so the rejections below are about the faults.
    let minimal = serde_json::json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "porin"}}, "results": []}]});
    assert_eq!(schema_errors(&minimal), Vec::<String>::new());
    // `runs` is required by the schema.
    let no_runs = serde_json::json!({"version": "2.1.0"});
    assert!(
        schema_errors(&no_runs).iter().any(|e| e.contains("runs")),
        "{:#?}",
        schema_errors(&no_runs)
    );
    // Only 2.1.0 is this schema's version.
    assert!(!schema_errors(&serde_json::json!({"version": "2.0.0", "runs": []})).is_empty());
    // `fatal` is not a level; a message needs text or id; lines start at 1;
    // unknown properties are refused (additionalProperties: false).
    let broken = serde_json::json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "porin", "rules": [{"id": "PR001"}]}},
        "results": [{"ruleId": "PR002", "ruleIndex": 0, "level": "fatal", "message": {},
                     "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a"}, "region": {"startLine": 0}}}],
                     "colour": "red"}]
    }]});
    let errors = schema_errors(&broken);
    for expected in ["/level", "/message", "/startLine", "colour"] {
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "no error about {expected}: {errors:#?}"
        );
    }
    // The code-scanning checks catch what the schema allows.
    let errors = code_scanning_errors(&broken);
    assert!(
        errors.iter().any(|e| e.contains("ruleIndex")),
        "{errors:#?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("startLine")),
        "{errors:#?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("partialFingerprints")),
        "{errors:#?}"
    );
}

/// Every lint fixture file (trigger, near miss, and any other policy file
/// under `fixtures/lint/`), rendered as SARIF, validates against the schema.
#[test]
fn sarif_of_every_lint_fixture_validates_against_the_schema() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for dir in rule_dirs() {
        let mut files: Vec<String> =
            std::fs::read_dir(workspace().join("fixtures/lint").join(&dir))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|f| {
                    std::path::Path::new(f)
                        .extension()
                        .is_some_and(|e| e.eq_ignore_ascii_case("yaml"))
                        && f != "porin.yaml"
                        && f != "inventory.yaml"
                })
                .collect();
        files.sort();
        for file in files {
            let output = lint(&dir, &file, "sarif");
            let log: Value = serde_json::from_slice(&output.stdout)
                .unwrap_or_else(|e| panic!("{dir}/{file}: SARIF is not JSON: {e}"));
            let errors = validate_sarif(&log);
            if !errors.is_empty() {
                failures.push(format!("{dir}/{file}:\n  {}", errors.join("\n  ")));
            }
            checked += 1;
        }
    }
    assert!(checked >= 2 * rule_dirs().len(), "only {checked} fixtures");
    assert!(
        failures.is_empty(),
        "SARIF rejected:\n{}",
        failures.join("\n")
    );
}

/// The other shapes of a run are valid SARIF too: no inventory (rules
/// skipped), invalid policies (model errors, exit 1), several files at once.
#[test]
fn sarif_of_other_runs_validates_against_the_schema() {
    let runs: [&[&str]; 3] = [
        &["lint", "fixtures/lint/PR010_overlapping_ports/trigger.yaml"],
        &[
            "lint",
            "fixtures/invalid/PM003-unknown-field-did-you-mean.yaml",
            "fixtures/invalid/PM001-yaml-syntax.yaml",
        ],
        &[
            "lint",
            "fixtures/lint/PR004_allow_shadowed_by_deny/trigger.yaml",
            "fixtures/lint/PR014_egress_blocks_dns/trigger.yaml",
            "--inventory",
            "fixtures/lint/inventory.yaml",
        ],
    ];
    for args in runs {
        let mut args = args.to_vec();
        args.extend(["--format", "sarif"]);
        let output = porin(&args);
        let log: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: SARIF is not JSON: {e}"));
        assert!(
            log["runs"][0]["results"]
                .as_array()
                .is_some_and(|r| !r.is_empty()),
            "{args:?}: no results"
        );
        let errors = validate_sarif(&log);
        assert!(errors.is_empty(), "{args:?}: {errors:#?}");
    }
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
                // Only the results are snapshotted; the rules are the registry
                // entries of their codes (render::sarif's unit test).
                let results = serde_json::to_string_pretty(&log["runs"][0]["results"]).unwrap();
                insta::assert_snapshot!(format!("{dir}__sarif_results"), results);
            } else if format == "junit" {
                insta::assert_snapshot!(format!("{dir}__junit"), junit_view(&stdout));
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
