//! `porin lint --baseline` / `--write-baseline` as a user adopts them:
//! record today's findings, keep editing (move lines, reorder documents),
//! see only new findings, and see fixed ones as stale notes (PR021) that
//! never fail the run, in every output format and with `--context`.

use std::path::Path;
use std::process::Command;

use crate::common::dist::{Scratch, run};

/// Two policies in one file, each with a PR012 warning (`- {}`).
const API: &str = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: api
  namespace: prod
spec:
  endpointSelector:
    matchLabels:
      app: api
  ingress:
  - {}
";
const WEB: &str = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: web
  namespace: prod
spec:
  endpointSelector:
    matchLabels:
      app: web
  egress:
  - {}
";

/// `porin lint ARGS... --fail-on warning` in `dir` (relative paths, as a
/// repository's CI runs it).
fn lint(dir: &Path, args: &[&str]) -> (i32, String, String) {
    run(Command::new(env!("CARGO_BIN_EXE_porin"))
        .arg("lint")
        .args(args)
        .args(["--fail-on", "warning"])
        .current_dir(dir)
        .env("NO_COLOR", "1"))
}

fn write(dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
}

/// The codes and names of a `--format json` run's findings.
fn codes(json: &str) -> Vec<String> {
    let value: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["code"].as_str().expect("code"),
                d["message"].as_str().expect("message")
            )
        })
        .collect()
}

#[test]
fn baseline_hides_old_findings_across_moves_and_reports_new_and_stale() {
    let scratch = Scratch::new("baseline");
    let dir = scratch.0.as_path();
    // A Deployment beside the policies: skipped (PM008), not recorded.
    write(
        dir,
        "p/a.yaml",
        &format!(
            "{API}---\n{WEB}---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n"
        ),
    );

    let (code, out, _) = lint(dir, &["p", "--format", "json"]);
    assert_eq!((code, codes(&out).len()), (1, 2), "{out}");
    let (code, out, err) = lint(
        dir,
        &["p", "--write-baseline", "b.json", "--format", "json"],
    );
    assert_eq!(
        code, 1,
        "--write-baseline does not change what is reported: {err}"
    );
    assert_eq!(codes(&out).len(), 2);
    let written = std::fs::read_to_string(dir.join("b.json")).expect("written");
    assert!(written.starts_with("{\n  \"version\": 1,"), "{written}");
    assert!(!written.contains("line"), "no positions: {written}");
    assert!(
        !written.contains("PM008"),
        "skipped documents are no findings: {written}"
    );

    // Same files: nothing new, nothing stale.
    let (code, out, err) = lint(dir, &["p", "--baseline", "b.json", "--format", "json"]);
    assert_eq!((code, out.trim()), (0, "[]"), "{err}");

    // Lines moved and documents reordered: still nothing.
    write(
        dir,
        "p/a.yaml",
        &format!("# moved\n\n---\n{WEB}---\n# comment\n{API}"),
    );
    let (code, out, err) = lint(dir, &["p", "--baseline", "b.json", "--format", "json"]);
    assert_eq!((code, out.trim()), (0, "[]"), "{err}");
    let (code, out, err) = lint(dir, &["./p", "--baseline", "b.json"]);
    assert_eq!(code, 0, "./p is the same file: {out}{err}");
    assert!(
        err.contains("2 findings recorded in the baseline b.json are not reported"),
        "{err}"
    );

    // A new problem: only it is reported.
    let db = API
        .replace("name: api", "name: db")
        .replace("app: api", "app: db");
    write(dir, "p/db.yaml", &db);
    let (code, out, _) = lint(dir, &["p", "--baseline", "b.json", "--format", "json"]);
    let found = codes(&out);
    assert_eq!((code, found.len()), (1, 1), "{out}");
    assert!(found[0].starts_with("PR012 "), "{found:?}");
    let (_, human, _) = lint(dir, &["p", "--baseline", "b.json"]);
    assert!(human.contains("p/db.yaml:11:5"), "{human}");
    assert!(!human.contains("p/a.yaml"), "{human}");
    std::fs::remove_file(dir.join("p/db.yaml")).expect("remove");

    // One fixed: reported as stale, in every format, without failing.
    let fixed = API.replace(
        "  ingress:\n  - {}\n",
        "  ingress:\n  - fromEntities: [world]\n",
    );
    write(dir, "p/a.yaml", &format!("{WEB}---\n{fixed}"));
    let (code, out, err) = lint(dir, &["p", "--baseline", "b.json", "--format", "json"]);
    let found = codes(&out);
    assert_eq!((code, found.len()), (0, 1), "{out}{err}");
    assert!(
        found[0].starts_with(
            "PR021 baseline entry no longer found: p/a.yaml: CiliumNetworkPolicy prod/api at spec.ingress[0] PR012"
        ),
        "{found:?}"
    );
    for format in ["human", "sarif", "junit", "github"] {
        let (code, out, err) = lint(dir, &["p", "--baseline", "b.json", "--format", format]);
        assert_eq!(code, 0, "{format}: {out}{err}");
        assert!(out.contains("PR021"), "{format}: {out}");
        assert!(out.contains("prod/api"), "{format}: {out}");
    }

    // --context: the baseline's entries of a context file are not stale
    // (that file is not reported on), and context findings stay hidden.
    write(dir, "p/a.yaml", &format!("{API}---\n{WEB}"));
    write(dir, "q/c.yaml", &db.replace("name: db", "name: c"));
    let (code, out, err) = lint(
        dir,
        &[
            "q/c.yaml",
            "--context",
            "p",
            "--baseline",
            "b.json",
            "--format",
            "json",
        ],
    );
    let found = codes(&out);
    assert_eq!((code, found.len()), (1, 1), "{out}{err}");
    assert!(found[0].starts_with("PR012 "), "{found:?}");
    let (code, out, err) = lint(
        dir,
        &[
            "p",
            "--context",
            "q",
            "--baseline",
            "b.json",
            "--format",
            "json",
        ],
    );
    assert_eq!((code, out.trim()), (0, "[]"), "{err}");
}

#[test]
fn an_unreadable_baseline_is_refused_with_its_position() {
    let scratch = Scratch::new("baseline-bad");
    let dir = scratch.0.as_path();
    write(dir, "p/a.yaml", API);
    write(
        dir,
        "b.json",
        "{\"version\": 1,\n \"findings\": [{\"file\": 3}]}",
    );
    let (code, _, err) = lint(dir, &["p", "--baseline", "b.json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("b.json:2:"), "{err}");
    write(dir, "b.json", "{\"version\": 9, \"findings\": []}");
    let (code, _, err) = lint(dir, &["p", "--baseline", "b.json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("baseline version 9 is not supported"), "{err}");
    let (code, _, err) = lint(dir, &["p", "--baseline", "missing.json"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot read the baseline missing.json"),
        "{err}"
    );
}
