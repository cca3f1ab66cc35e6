//! SARIF 2.1.0 (OASIS), the format GitHub code scanning ingests
//! (<https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html>,
//! <https://docs.github.com/code-security/code-scanning/integrating-with-code-scanning/sarif-support-for-code-scanning>).
//!
//! Decisions:
//! - the driver's rules are the codes that have results, in code order,
//!   each a `reportingDescriptor` from the code registry (summary, default
//!   level, the `porin explain` text as help, the full description where
//!   documented). A result's `ruleIndex` thus depends only on the codes of
//!   its own run, not on how many codes porin has, so a new code changes no
//!   other run's output; code scanning needs the descriptors of the rules
//!   that have results, and the others were dead weight in every upload;
//! - relative paths use `uriBaseId: "%SRCROOT%"` (the repository root when
//!   run from it), absolute ones a `file://` URI;
//! - `partialFingerprints["porinFingerprint/v1"]` hashes (code, file,
//!   document, field path, occurrence) and *not* the line, so a finding
//!   keeps its identity when lines above it move;
//! - a finding with no location (e.g. PR003 about the whole ipcache) is
//!   attached to line 1 of a fallback file (the inventory or the first
//!   policy file), since code scanning drops location-less results.

use std::collections::BTreeMap;

use porin_lint::codes as lint_codes;
use porin_model::CodeInfo;
use porin_model::diagnostic::{Diagnostic, Location, Severity};
use serde_json::{Value, json};

use super::fnv1a64;

/// What the run needs besides the findings.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    /// porin's version.
    pub version: String,
    /// Where location-less findings are attached.
    pub fallback_file: Option<String>,
    /// Why the run stopped before its results (a resource limit): the run
    /// then has one invocation with `executionSuccessful: false` and this as
    /// a tool execution notification (SARIF §3.20.21), so code scanning
    /// shows that porin did not finish instead of a clean run.
    pub failure: Option<Diagnostic>,
}

/// The SARIF `$schema` URI.
pub const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

fn artifact(file: &str) -> Value {
    let file = file.strip_prefix("./").unwrap_or(file);
    let encoded = file.replace('%', "%25").replace(' ', "%20");
    if file.starts_with('/') {
        json!({"uri": format!("file://{encoded}")})
    } else {
        json!({"uri": encoded, "uriBaseId": "%SRCROOT%"})
    }
}

fn physical(location: &Location) -> Value {
    let mut region = json!({"startLine": location.line.max(1)});
    if location.column > 0 {
        region["startColumn"] = json!(location.column);
    }
    json!({"artifactLocation": artifact(&location.file), "region": region})
}

fn descriptor(info: &CodeInfo) -> Value {
    let mut rule = json!({
        "id": info.code,
        "name": info.name,
        "shortDescription": {"text": info.summary},
        "help": {"text": info.document(), "markdown": info.document()},
        "defaultConfiguration": {"level": level(info.severity)},
        "properties": {"tags": ["porin", "network-policy"]},
    });
    if let Some(doc) = &info.doc {
        rule["fullDescription"] = json!({"text": doc.what.replace('\n', " ")});
    }
    rule
}

/// The driver's rules: one `reportingDescriptor` per code that has a
/// result, in code order (an unregistered code gets a bare one), and each
/// code's index among them.
fn descriptors(codes: &[&'static str]) -> (Vec<Value>, BTreeMap<&'static str, usize>) {
    let mut rules = Vec::new();
    let mut index = BTreeMap::new();
    for code in codes {
        index.insert(*code, rules.len());
        rules.push(lint_codes::find(code).map_or_else(|| json!({"id": code}), descriptor));
    }
    (rules, index)
}

/// Renders findings as one SARIF log with one run.
pub fn render(diagnostics: &[Diagnostic], info: &RunInfo) -> String {
    let mut codes: Vec<&'static str> = diagnostics.iter().map(|d| d.code).collect();
    codes.sort_unstable();
    codes.dedup();
    let (rules, index) = descriptors(&codes);
    let mut occurrences: BTreeMap<String, usize> = BTreeMap::new();
    let mut results = Vec::new();
    for d in diagnostics {
        let mut text = d.message.clone();
        for note in &d.notes {
            text.push_str("\nnote: ");
            text.push_str(note);
        }
        if let Some(help) = &d.help {
            text.push_str("\nhelp: ");
            text.push_str(help);
        }
        let primary = d.primary.clone().or_else(|| {
            info.fallback_file.as_ref().map(|file| Location {
                file: file.clone(),
                document: 0,
                line: 1,
                column: 1,
                route: String::new(),
            })
        });
        let identity = match &primary {
            Some(l) => format!("{}|{}|{}|{}", d.code, l.file, l.document, l.route),
            None => format!("{}|{}", d.code, d.message),
        };
        let occurrence = occurrences.entry(identity.clone()).or_default();
        *occurrence += 1;
        let fingerprint = format!("{:016x}:{}", fnv1a64(identity.as_bytes()), occurrence);
        let mut result = json!({
            "ruleId": d.code,
            "level": level(d.severity),
            "message": {"text": text},
            "partialFingerprints": {"porinFingerprint/v1": fingerprint},
        });
        if let Some(i) = index.get(d.code) {
            result["ruleIndex"] = json!(i);
        }
        if let Some(location) = &primary {
            let mut loc = json!({"physicalLocation": physical(location)});
            if !location.route.is_empty() {
                loc["logicalLocations"] =
                    json!([{"fullyQualifiedName": location.route, "kind": "member"}]);
            }
            result["locations"] = json!([loc]);
        }
        if !d.related.is_empty() {
            let related: Vec<Value> = d
                .related
                .iter()
                .enumerate()
                .map(|(i, (location, label))| {
                    json!({"id": i, "physicalLocation": physical(location), "message": {"text": label}})
                })
                .collect();
            result["relatedLocations"] = json!(related);
        }
        results.push(result);
    }
    let mut log = json!({
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "porin",
                "semanticVersion": info.version,
                "informationUri": "https://example.invalid/porin",
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "the directory porin ran in"}}},
            "results": results,
        }],
    });
    if let Some(failure) = &info.failure {
        let mut text = failure.message.clone();
        for note in &failure.notes {
            text.push_str("\nnote: ");
            text.push_str(note);
        }
        log["runs"][0]["invocations"] = json!([{
            "executionSuccessful": false,
            "toolExecutionNotifications": [{
                "level": level(failure.severity),
                "message": {"text": text},
                "descriptor": {"id": failure.code},
            }],
        }]);
    }
    let mut text = serde_json::to_string_pretty(&log).unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver lists the codes that have results, once each, in code
    /// order, with the registry's default level; indices follow.
    #[test]
    fn rules_are_the_codes_with_results_in_code_order() {
        let of = |code: &str| {
            let info = lint_codes::find(code).copied().unwrap();
            Diagnostic::new(info, format!("a {code} finding"))
        };
        let findings = [of("PR010"), of("PM037"), of("PR010"), of("PC006")];
        let log: Value = serde_json::from_str(&render(&findings, &RunInfo::default())).unwrap();
        let run = &log["runs"][0];
        let rules: Vec<(&str, &str)> = run["tool"]["driver"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_str().unwrap(),
                    r["defaultConfiguration"]["level"].as_str().unwrap(),
                )
            })
            .collect();
        // PM037 is a warning and PC006 an error by the registry (both were
        // once guessed per stage).
        assert_eq!(
            rules,
            [
                ("PC006", "error"),
                ("PM037", "warning"),
                ("PR010", "warning")
            ]
        );
        let indices: Vec<u64> = run["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["ruleIndex"].as_u64().unwrap())
            .collect();
        assert_eq!(indices, [2, 1, 2, 0]);
    }
}
