//! `.pre-commit-hooks.yaml` with the real `pre-commit` against a scratch
//! policy repository, for both hook kinds: `porin-lint` (the release
//! binary, downloaded from the local `scripts/dist` archive, run with a
//! PATH that has no Rust toolchain) and `porin-lint-source` (built by cargo
//! from the hook repository). The hook repository is a git repository of
//! this checkout's files (working-tree versions), as pre-commit clones it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::dist::{self, SYSTEM_PATH, Scratch, git, run};
use crate::common::workspace;

/// A git repository of this checkout's tracked and new files, committed;
/// returns its path and commit. Path and commit stay the same from run to
/// run while the files do (`git` commits with a fixed date), so pre-commit, whose home is kept
/// beside it, reuses its clone, and cargo its build of that clone: each new
/// source path would otherwise add a build of the workspace to target/.
fn hook_repository(hook: &str) -> (PathBuf, String) {
    let repo = workspace().join(format!("target/tmp/pre-commit-{hook}/hooks"));
    let _ = std::fs::remove_dir_all(&repo);
    let files = git(
        &workspace(),
        &[
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "-z",
        ],
    );
    for file in files.split('\0').filter(|f| !f.is_empty()) {
        let from = workspace().join(file);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        let to = repo.join(file);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {file}: {e}"));
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "hooks"]);
    let rev = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    (repo, rev)
}

/// The policy set of `data/context/`: `egress.yaml` alone reports PR014
/// (egress-blocks-dns), which the whole set, with `dns.yaml`, does not have.
fn context_data() -> PathBuf {
    workspace().join("crates/cli/tests/cli/data/context")
}

fn config(hook_repo: &Path, rev: &str, hook: &str, context: bool) -> String {
    let context = if context {
        ", --context, policies/"
    } else {
        ""
    };
    format!(
        "repos:
  - repo: {}
    rev: {rev}
    hooks:
      - id: {hook}
        files: ^policies/
        args: [--inventory, inventory.yaml{context}, --fail-on, warning]
",
        hook_repo.display()
    )
}

/// Runs the scenarios for one hook: a clean repository passes, an invalid
/// policy fails, and a changed file is linted against the whole set.
fn check_hook(hook: &str, env: &[(&str, String)], path: &str) {
    let scratch = Scratch::new(&format!("pre-commit-{hook}"));
    let (hook_repo, rev) = hook_repository(hook);
    let repo = scratch.join("policies-repo");
    std::fs::create_dir_all(repo.join("policies")).expect("repo");
    let data = context_data();
    let copy = |from: PathBuf, to: &str| {
        std::fs::copy(&from, repo.join(to)).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    };
    copy(data.join("inventory.yaml"), "inventory.yaml");
    copy(data.join("policies/egress.yaml"), "policies/egress.yaml");
    copy(data.join("policies/dns.yaml"), "policies/dns.yaml");
    std::fs::write(
        repo.join(".pre-commit-config.yaml"),
        config(&hook_repo, &rev, hook, true),
    )
    .expect("config");
    std::fs::write(
        repo.join("no-context.yaml"),
        config(&hook_repo, &rev, hook, false),
    )
    .expect("config without context");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    let pre_commit = |args: &[&str]| {
        let mut command = Command::new("pre-commit");
        command
            .args(["run", "--color", "never"])
            .args(args)
            .current_dir(&repo)
            .env("PATH", path)
            .env("PRE_COMMIT_HOME", hook_repo.with_file_name("home"))
            .env("XDG_CACHE_HOME", scratch.join("cache"))
            .env("NO_COLOR", "1");
        for (key, value) in env {
            command.env(key, value);
        }
        let (code, out, err) = run(&mut command);
        (code, format!("{out}{err}"))
    };

    let (code, out) = pre_commit(&["--all-files"]);
    assert_eq!(code, 0, "{hook}: a clean repository passes:\n{out}");
    assert!(out.contains("Passed"), "{out}");

    // The changed file alone, in the context of the whole set: no PR014.
    let (code, out) = pre_commit(&["--files", "policies/egress.yaml"]);
    assert_eq!(code, 0, "{hook}: --context sees dns.yaml:\n{out}");
    // Without --context the hook sees egress.yaml only: the false PR014 the
    // context option exists for (shows the scenario can fail).
    let (code, out) = pre_commit(&[
        "--config",
        "no-context.yaml",
        "--files",
        "policies/egress.yaml",
    ]);
    assert_eq!(code, 1, "{hook}: without --context:\n{out}");
    assert!(out.contains("PR014"), "{out}");

    let egress = std::fs::read_to_string(data.join("policies/egress.yaml")).expect("egress");
    let bad = egress
        .replace("frontend-egress", "bad")
        .replace("port: \"8080\"", "port: 8080");
    std::fs::write(repo.join("policies/bad.yaml"), bad).expect("bad policy");
    git(&repo, &["add", "policies/bad.yaml"]);
    let (code, out) = pre_commit(&["--all-files"]);
    assert_eq!(code, 1, "{hook}: an invalid policy fails:\n{out}");
    assert!(out.contains("policies/bad.yaml:"), "{out}");
    assert!(out.contains("Failed"), "{out}");
}

#[test]
fn the_release_hook_needs_no_toolchain() {
    if !dist::have_all(&["pre-commit", "git", "curl", "sha256sum"]) {
        return;
    }
    let Some(dist_dir) = dist::dist_dir() else {
        return;
    };
    // pre-commit itself may live outside the system PATH (pip --user, a venv).
    let pre_commit = Command::new("sh")
        .args(["-c", "command -v pre-commit"])
        .output()
        .expect("sh");
    let pre_commit = String::from_utf8_lossy(&pre_commit.stdout)
        .trim()
        .to_owned();
    let bin = Path::new(&pre_commit)
        .parent()
        .expect("pre-commit's directory");
    let path = format!("{}:{SYSTEM_PATH}", bin.display());
    let no_cargo = Command::new("sh")
        .args(["-c", "command -v cargo"])
        .env("PATH", &path)
        .output()
        .expect("sh");
    if no_cargo.status.success() {
        dist::skip("pre-commit shares its directory with cargo; cannot hide the toolchain");
        return;
    }
    check_hook(
        "porin-lint",
        &[(
            "PORIN_RELEASE_URL",
            format!("file://{}", dist_dir.display()),
        )],
        &path,
    );
}

#[test]
fn the_source_hook_builds_porin_with_cargo() {
    if !dist::have_all(&["pre-commit", "git", "cargo"]) {
        return;
    }
    let path = std::env::var("PATH").unwrap_or_default();
    // The workspace's target directory: the dependencies are built already.
    let target = workspace().join("target");
    check_hook(
        "porin-lint-source",
        &[
            ("CARGO_TARGET_DIR", target.display().to_string()),
            ("PORIN_PROFILE", "dev".to_owned()),
            ("CARGO_INCREMENTAL", "0".to_owned()),
        ],
        &path,
    );
}
