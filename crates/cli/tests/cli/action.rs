//! `action.yml` run as a GitHub runner runs a composite action: each
//! `run:` step in bash (`bash --noprofile --norc -eo pipefail`), with the
//! variables a runner sets (GITHUB_OUTPUT and GITHUB_PATH fresh per step,
//! GITHUB_STEP_SUMMARY, GITHUB_WORKSPACE, GITHUB_ACTION_PATH, RUNNER_TEMP...)
//! and the step's `env:` with its `${{ }}` expressions evaluated; `uses:`
//! steps (the SARIF upload) are not run, their `with:` is checked. porin is
//! installed from the local `scripts/dist` archive by the action's own
//! install step (release mode, checksum-verified).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::common::dist::{self, SYSTEM_PATH, Scratch, git, run, version};
use crate::common::workspace;

#[derive(Debug, Deserialize)]
struct Action {
    inputs: BTreeMap<String, Input>,
    outputs: BTreeMap<String, OutputDef>,
    runs: Runs,
}

#[derive(Debug, Deserialize)]
struct Input {
    #[serde(default)]
    default: String,
}

#[derive(Debug, Deserialize)]
struct OutputDef {
    value: String,
}

#[derive(Debug, Deserialize)]
struct Runs {
    using: String,
    steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
struct Step {
    name: String,
    id: Option<String>,
    #[serde(rename = "if")]
    condition: Option<String>,
    shell: Option<String>,
    run: Option<String>,
    uses: Option<String>,
    #[serde(default)]
    with: BTreeMap<String, String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(rename = "working-directory")]
    working_directory: Option<String>,
}

fn action() -> Action {
    let text = std::fs::read_to_string(workspace().join("action.yml")).expect("action.yml");
    serde_saphyr::from_str(&text).expect("action.yml parses")
}

/// What one run of the action produced.
#[derive(Debug)]
struct Outcome {
    /// Exit code of every step that ran, by step name.
    codes: Vec<(String, i32)>,
    /// Outputs by step id.
    outputs: BTreeMap<String, BTreeMap<String, String>>,
    /// The `with:` of the `uses:` steps, evaluated.
    uses: Vec<(String, BTreeMap<String, String>)>,
    summary: String,
    log: String,
}

impl Outcome {
    fn output(&self, step: &str, name: &str) -> &str {
        self.outputs
            .get(step)
            .and_then(|o| o.get(name))
            .map_or("", String::as_str)
    }
    fn code(&self, step: &str) -> Option<i32> {
        self.codes.iter().find(|(n, _)| n == step).map(|(_, c)| *c)
    }
}

struct Runner {
    workspace: PathBuf,
    temp: PathBuf,
    inputs: BTreeMap<String, String>,
    github: BTreeMap<&'static str, String>,
    /// What the runner's image has beyond the system (a Rust toolchain).
    tools_path: Vec<String>,
    tools_env: Vec<(&'static str, String)>,
}

impl Runner {
    /// `${{ ... }}` of the kinds action.yml uses; anything else fails the
    /// test, so a new expression is taught here before it ships.
    fn eval(&self, text: &str, outputs: &BTreeMap<String, BTreeMap<String, String>>) -> String {
        let mut result = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${{") {
            result.push_str(&rest[..start]);
            let end = rest[start..].find("}}").expect("closed expression") + start;
            let expr = rest[start + 3..end].trim();
            let value = if let Some(name) = expr.strip_prefix("inputs.") {
                self.inputs
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| panic!("no input {name}"))
            } else if let Some(name) = expr.strip_prefix("github.") {
                self.github
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| panic!("no github.{name}"))
            } else if let Some(path) = expr.strip_prefix("steps.") {
                let (id, name) = path.split_once(".outputs.").expect("steps.ID.outputs.NAME");
                outputs
                    .get(id)
                    .and_then(|o| o.get(name))
                    .cloned()
                    .unwrap_or_default()
            } else {
                panic!("the test runner does not know the expression `{expr}`")
            };
            result.push_str(&value);
            rest = &rest[end + 2..];
        }
        result.push_str(rest);
        result
    }

    fn run(&self, action: &Action) -> Outcome {
        let summary = self.temp.join("step-summary.md");
        std::fs::write(&summary, "").expect("summary file");
        let mut outcome = Outcome {
            codes: Vec::new(),
            outputs: BTreeMap::new(),
            uses: Vec::new(),
            summary: String::new(),
            log: String::new(),
        };
        let mut path_additions: Vec<String> = Vec::new();
        let mut failed = false;
        for (index, step) in action.runs.steps.iter().enumerate() {
            let condition = step.condition.as_deref().unwrap_or("success()");
            if let Some(uses) = &step.uses {
                assert!(
                    condition.contains("always()"),
                    "`{}` must run after a failed lint too",
                    step.name
                );
                let with = step
                    .with
                    .iter()
                    .map(|(k, v)| (k.clone(), self.eval(v, &outcome.outputs)))
                    .collect();
                outcome.uses.push((uses.clone(), with));
                continue;
            }
            assert_eq!(step.condition, None, "run steps decide inside their script");
            if failed {
                continue;
            }
            let script = step.run.as_deref().expect("a run or uses step");
            assert!(
                !script.contains("${{"),
                "`{}`: expressions belong in env:",
                step.name
            );
            assert_eq!(step.shell.as_deref(), Some("bash"), "`{}`", step.name);
            let output_file = self.temp.join(format!("output-{index}"));
            let path_file = self.temp.join(format!("path-{index}"));
            std::fs::write(&output_file, "").expect("output file");
            std::fs::write(&path_file, "").expect("path file");
            let mut path = path_additions.clone();
            path.extend(self.tools_path.iter().cloned());
            path.push(SYSTEM_PATH.to_owned());
            let mut command = Command::new("bash");
            command
                .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
                .env_clear()
                .env("PATH", path.join(":"))
                .env("HOME", self.temp.join("home"))
                .env("CI", "true")
                .env("GITHUB_ACTIONS", "true")
                .env(
                    "GITHUB_ACTION_PATH",
                    workspace().canonicalize().expect("root"),
                )
                .env("GITHUB_WORKSPACE", &self.workspace)
                .env("GITHUB_OUTPUT", &output_file)
                .env("GITHUB_PATH", &path_file)
                .env("GITHUB_STEP_SUMMARY", &summary)
                .env("GITHUB_EVENT_NAME", &self.github["event_name"])
                .env("GITHUB_BASE_REF", &self.github["base_ref"])
                .env("RUNNER_TEMP", &self.temp)
                .env("RUNNER_OS", "Linux")
                .env("RUNNER_ARCH", "X64")
                .current_dir(match &step.working_directory {
                    Some(dir) => PathBuf::from(self.eval(dir, &outcome.outputs)),
                    None => self.workspace.clone(),
                });
            for (key, value) in &self.tools_env {
                command.env(key, value);
            }
            for (key, value) in &step.env {
                command.env(key, self.eval(value, &outcome.outputs));
            }
            let (code, stdout, stderr) = run(&mut command);
            outcome
                .log
                .push_str(&format!("== {} (exit {code})\n{stdout}{stderr}", step.name));
            outcome.codes.push((step.name.clone(), code));
            let written = std::fs::read_to_string(&output_file).expect("read output");
            let map = written
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            if let Some(id) = &step.id {
                outcome.outputs.insert(id.clone(), map);
            }
            path_additions.extend(
                std::fs::read_to_string(&path_file)
                    .expect("read path")
                    .lines()
                    .map(str::to_owned),
            );
            failed = code != 0;
        }
        outcome.summary = std::fs::read_to_string(&summary).expect("read summary");
        outcome
    }
}

/// A policy repository on a pull-request branch: the base commit
/// (origin/main) allows the db less than the head does, and the jobs
/// policy has a warning (PR012), so the SARIF has results.
fn policy_repository(scratch: &Scratch) -> PathBuf {
    let repo = scratch.join("repo");
    std::fs::create_dir_all(repo.join("policies")).expect("repo dir");
    let quickstart = workspace().join("examples/quickstart");
    std::fs::copy(
        quickstart.join("inventory.yaml"),
        repo.join("inventory.yaml"),
    )
    .expect("inv");
    let api = std::fs::read_to_string(quickstart.join("policies/api.yaml")).expect("api.yaml");
    std::fs::write(
        repo.join("policies/api.yaml"),
        api.replace("endPort: 9100", "endPort: 9010"),
    )
    .expect("base policy");
    std::fs::write(repo.join("policies/jobs.yaml"), JOBS).expect("jobs policy");
    git(&repo, &["init", "-q", "-b", "feature"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    git(&repo, &["update-ref", "refs/remotes/origin/main", "HEAD"]);
    std::fs::write(repo.join("policies/api.yaml"), api).expect("head policy");
    git(&repo, &["commit", "-q", "-am", "open the db's port range"]);
    repo
}

const JOBS: &str = "apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: batch
  namespace: jobs
spec:
  endpointSelector:
    matchLabels:
      app: frontend
  ingress:
  - {}
";

fn runner(scratch: &Scratch, repo: PathBuf, dist_dir: &Path) -> Runner {
    let temp = scratch.join("runner-temp");
    std::fs::create_dir_all(temp.join("home")).expect("runner temp");
    let action = action();
    let mut inputs: BTreeMap<String, String> = action
        .inputs
        .iter()
        .map(|(k, v)| (k.clone(), v.default.clone()))
        .collect();
    inputs.insert("version".into(), version().into());
    inputs.insert(
        "release-url".into(),
        format!("file://{}", dist_dir.display()),
    );
    inputs.insert("paths".into(), "policies/".into());
    inputs.insert("inventory".into(), "inventory.yaml".into());
    let github = BTreeMap::from([
        ("workspace", repo.display().to_string()),
        ("token", "not-a-token".to_owned()),
        ("event_name", "pull_request".to_owned()),
        ("base_ref", "main".to_owned()),
        ("event.pull_request.number", "7".to_owned()),
    ]);
    Runner {
        workspace: repo,
        temp,
        inputs,
        github,
        tools_path: Vec::new(),
        tools_env: Vec::new(),
    }
}

fn sarif(repo: &Path, outcome: &Outcome) -> serde_json::Value {
    let file = outcome.output("lint", "sarif-file");
    assert!(!file.is_empty(), "no sarif-file output:\n{}", outcome.log);
    let text = std::fs::read_to_string(repo.join(file)).expect("SARIF written");
    serde_json::from_str(&text).expect("SARIF is JSON")
}

/// The tools, the archive and a policy repository; `None` after a skip.
fn scenario(name: &str) -> Option<(Scratch, PathBuf, &'static Path)> {
    if !dist::have_all(&["git", "curl", "sha256sum"]) {
        return None;
    }
    let dist_dir = dist::dist_dir()?;
    let scratch = Scratch::new(name);
    let repo = policy_repository(&scratch);
    Some((scratch, repo, dist_dir))
}

#[test]
fn the_action_is_composite_and_its_outputs_name_step_outputs() {
    let action = action();
    assert_eq!(action.runs.using, "composite");
    for (name, output) in &action.outputs {
        assert!(output.value.contains("steps."), "output {name}");
    }
    let upload = action
        .runs
        .steps
        .iter()
        .find(|s| s.uses.is_some())
        .expect("an upload step");
    assert!(
        upload
            .uses
            .as_deref()
            .is_some_and(|u| u.starts_with("github/codeql-action/upload-sarif@"))
    );
}

#[test]
fn a_pull_request_with_warnings_passes_uploads_sarif_and_summarises_the_diff() {
    let Some((scratch, repo, dist_dir)) = scenario("action-pass") else {
        return;
    };
    let outcome = runner(&scratch, repo.clone(), dist_dir).run(&action());
    let log = &outcome.log;
    assert!(outcome.codes.iter().all(|(_, c)| *c == 0), "{log}");
    assert_eq!(outcome.code("Fail on findings"), Some(0), "{log}");
    assert_eq!(outcome.output("lint", "exit-code"), "0", "{log}");
    assert!(
        outcome
            .output("install", "porin")
            .ends_with("/porin/bin/porin"),
        "{log}"
    );
    assert!(log.contains(&format!("porin {}", version())), "{log}");

    let sarif = sarif(&repo, &outcome);
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    assert!(
        results.iter().any(|r| r["ruleId"] == "PR012"),
        "SARIF results: {results:#?}"
    );
    let (uses, with) = &outcome.uses[0];
    assert!(uses.starts_with("github/codeql-action/upload-sarif@"));
    assert_eq!(with["sarif_file"], "porin.sarif");
    assert_eq!(with["category"], "porin");

    // Annotations in the log, the findings and the diff in the summary.
    assert!(log.contains("::warning file=policies/jobs.yaml"), "{log}");
    let summary = &outcome.summary;
    assert!(summary.contains("## porin lint: passed"), "{summary}");
    assert!(summary.contains("PR012"), "{summary}");
    assert!(summary.contains("## porin diff"), "{summary}");
    assert!(
        summary.contains("shop/db"),
        "the db's widened range is in the diff:\n{summary}"
    );
    assert_eq!(outcome.output("diff", "changed"), "true", "{log}");
}

#[test]
fn an_invalid_policy_fails_the_job_after_the_sarif_is_written() {
    let Some((scratch, repo, dist_dir)) = scenario("action-fail") else {
        return;
    };
    let api = std::fs::read_to_string(repo.join("policies/api.yaml")).expect("api");
    std::fs::write(
        repo.join("policies/api.yaml"),
        api.replacen("port: \"8080\"", "port: 8080", 1),
    )
    .expect("break the policy");
    let mut runner = runner(&scratch, repo.clone(), dist_dir);
    runner.github.insert("event_name", "push".to_owned());
    let outcome = runner.run(&action());
    let log = &outcome.log;
    assert_eq!(
        outcome.code("porin lint"),
        Some(0),
        "the lint step records, the last step fails:\n{log}"
    );
    assert_eq!(outcome.output("lint", "exit-code"), "1", "{log}");
    assert_eq!(outcome.code("Fail on findings"), Some(1), "{log}");
    assert!(log.contains("not a pull request"), "{log}");
    let sarif = sarif(&repo, &outcome);
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    assert!(
        results.iter().any(|r| r["level"] == "error"),
        "{results:#?}"
    );
    assert!(
        outcome.summary.contains("## porin lint: failed (exit 1"),
        "{}",
        outcome.summary
    );
    assert!(
        !outcome.summary.contains("porin diff"),
        "{}",
        outcome.summary
    );
}

#[test]
fn an_unreadable_inventory_stops_the_action_with_exit_2() {
    let Some((scratch, repo, dist_dir)) = scenario("action-norun") else {
        return;
    };
    let mut runner = runner(&scratch, repo.clone(), dist_dir);
    runner
        .inputs
        .insert("inventory".into(), "no-such-inventory.yaml".into());
    let outcome = runner.run(&action());
    assert_eq!(outcome.code("porin lint"), Some(2), "{}", outcome.log);
    assert_eq!(
        outcome.code("Fail on findings"),
        None,
        "later steps are skipped"
    );
    assert!(
        !repo.join("porin.sarif").exists(),
        "no half-written SARIF is left to upload"
    );
}

/// `install: source`: cargo install from the action's checkout. The test
/// gives the step the running toolchain and the workspace's target
/// directory with the release archive's target, so cargo reuses the build
/// `scripts/dist` made instead of compiling porin again.
#[test]
fn the_source_install_builds_porin_with_cargo() {
    let Some((scratch, repo, dist_dir)) = scenario("action-source") else {
        return;
    };
    let cargo = PathBuf::from(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    let Some(toolchain) = cargo.parent().filter(|dir| dir.join("rustc").exists()) else {
        dist::skip("no toolchain directory beside $CARGO");
        return;
    };
    let mut runner = runner(&scratch, repo.clone(), dist_dir);
    runner.inputs.insert("install".into(), "source".into());
    runner.tools_path.push(toolchain.display().to_string());
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    let cargo_home =
        std::env::var("CARGO_HOME").unwrap_or_else(|_| home.join(".cargo").display().to_string());
    runner.tools_env = vec![
        ("CARGO_HOME", cargo_home),
        (
            "CARGO_TARGET_DIR",
            workspace().join("target").display().to_string(),
        ),
        ("CARGO_BUILD_TARGET", dist::TARGET.to_owned()),
    ];
    let outcome = runner.run(&action());
    let log = &outcome.log;
    assert_eq!(outcome.code("Install porin"), Some(0), "{log}");
    let porin = outcome.output("install", "porin");
    assert_eq!(
        porin,
        format!("{}/porin/bin/porin", runner.temp.display()),
        "{log}"
    );
    assert!(
        log.contains("Installed package `porin-cli"),
        "cargo install ran:\n{log}"
    );
    assert_eq!(outcome.output("lint", "exit-code"), "0", "{log}");
    let sarif = sarif(&repo, &outcome);
    assert!(
        sarif["runs"][0]["results"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    );
}
