//! The limit flags: every flag an error message names exists on every
//! subcommand that loads or compiles policy, lowering a limit gives the
//! clear error (non-zero exit; the limit, the count, the limit value and the
//! flag), and raising it lets the same input compile.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use porin_compiler::limits::{CompileLimits, InventoryLimit, Limit};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn porin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("porin runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const POLICIES: &str = "fixtures/examples";
const INVENTORY: &str = "fixtures/inventories/corpus-examples.yaml";

/// The load-limit flags (porin_model::limits::LoadLimits).
const LOAD_FLAGS: [&str; 8] = [
    "--max-file-bytes",
    "--max-total-bytes",
    "--max-files",
    "--max-documents",
    "--max-depth",
    "--max-yaml-nodes",
    "--max-scalar-bytes",
    "--max-diagnostics-per-file",
];

fn every_flag() -> Vec<&'static str> {
    let mut flags: Vec<&'static str> = Limit::ALL.iter().map(|l| l.flag()).collect();
    flags.extend(InventoryLimit::ALL.iter().map(|l| l.flag()));
    flags.extend(LOAD_FLAGS);
    flags.sort_unstable();
    flags.dedup();
    flags
}

#[test]
fn every_subcommand_that_loads_policy_documents_every_limit_flag() {
    for subcommand in ["lint", "compile", "query", "test", "diff", "graph"] {
        let output = porin(&[subcommand, "--help"]);
        assert_eq!(output.status.code(), Some(0), "{subcommand}");
        let help = text(&output.stdout);
        for flag in every_flag() {
            assert!(
                help.contains(&format!("{flag} <")),
                "`porin {subcommand} --help` lacks {flag}"
            );
        }
        // Defaults shown are the library defaults.
        assert!(
            help.contains(&format!(
                "[default: {}]",
                CompileLimits::default().max_rules
            )),
            "{subcommand}: {help}"
        );
    }
}

/// Every flag at a value at least its default, in one run each of
/// `porin compile` and `porin lint`: all are accepted, and nothing is
/// refused.
#[test]
fn every_limit_flag_is_accepted_by_compile_and_lint() {
    let mut limit_args: Vec<String> = Vec::new();
    for flag in every_flag() {
        limit_args.push(flag.to_owned());
        limit_args.push("100000000".to_owned());
    }
    let limit_args: Vec<&str> = limit_args.iter().map(String::as_str).collect();
    let mut compile = vec!["compile", POLICIES, "--inventory", INVENTORY];
    compile.extend(&limit_args);
    let output = porin(&compile);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let mut lint = vec!["lint", POLICIES, "--inventory", INVENTORY];
    lint.extend(&limit_args);
    let output = porin(&lint);
    assert!(
        !text(&output.stderr).contains("unexpected argument"),
        "{}",
        text(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stdout));
}

/// Runs `args` with `flag value`, expects a refusal naming `flag` and
/// `the limit is {value}`; then with the flag raised, expects exit 0.
fn lowered_then_raised(args: &[&str], flag: &str, low: &str, high: &str, needles: &[&str]) {
    let mut refused = args.to_vec();
    refused.extend([flag, low]);
    let output = porin(&refused);
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert_ne!(output.status.code(), Some(0), "{refused:?}: {all}");
    assert!(all.contains(flag), "{refused:?}: {all}");
    assert!(all.contains("the limit is "), "{refused:?}: {all}");
    assert!(all.contains(low), "{refused:?}: {all}");
    for needle in needles {
        assert!(
            all.contains(needle),
            "{refused:?}: missing `{needle}` in {all}"
        );
    }
    println!("{refused:?}:\n{all}");
    let mut accepted = args.to_vec();
    accepted.extend([flag, high]);
    let output = porin(&accepted);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{accepted:?}: {}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

#[test]
fn compile_limits_refuse_clearly_and_raising_them_compiles() {
    let compile = ["compile", POLICIES, "--inventory", INVENTORY];
    lowered_then_raised(
        &compile,
        "--max-rules",
        "1",
        "1000",
        &["policy rules", "needed"],
    );
    lowered_then_raised(
        &compile,
        "--max-endpoints",
        "2",
        "1000",
        &["inventory endpoints", "needed"],
    );
    lowered_then_raised(
        &compile,
        "--max-entries-per-endpoint",
        "1",
        "65536",
        &["policy-map entries of one endpoint"],
    );
    lowered_then_raised(
        &compile,
        "--max-identities",
        "3",
        "1000",
        &["security identities"],
    );
}

#[test]
fn lint_enforces_the_compile_limits() {
    let lint = ["lint", POLICIES, "--inventory", INVENTORY];
    lowered_then_raised(&lint, "--max-rules", "1", "1000", &["policy rules"]);
    // Without an inventory too: rules are counted after lowering.
    lowered_then_raised(
        &["lint", POLICIES],
        "--max-rules",
        "1",
        "1000",
        &["policy rules"],
    );
}

#[test]
fn inventory_limits_refuse_clearly_and_raising_them_loads() {
    let compile = ["compile", POLICIES, "--inventory", INVENTORY];
    lowered_then_raised(
        &compile,
        "--max-inventory-file-bytes",
        "100",
        "10000000",
        &["corpus-examples.yaml", "inventory file size"],
    );
    lowered_then_raised(
        &compile,
        "--max-inventory-nodes",
        "50",
        "1000000",
        &["corpus-examples.yaml", "YAML nodes"],
    );
    lowered_then_raised(
        &compile,
        "--max-inventory-depth",
        "2",
        "64",
        &["corpus-examples.yaml", "nesting"],
    );
    let test = ["test", "fixtures/policy-tests"];
    lowered_then_raised(
        &test,
        "--max-inventory-file-bytes",
        "10",
        "10000000",
        &["inventory file size"],
    );
}

#[test]
fn load_limits_refuse_clearly_and_raising_them_loads() {
    let compile = ["compile", POLICIES, "--inventory", INVENTORY];
    lowered_then_raised(&compile, "--max-file-bytes", "10", "10000000", &["PM002"]);
    lowered_then_raised(&compile, "--max-depth", "2", "64", &["PM002", "nesting"]);
    lowered_then_raised(&compile, "--max-yaml-nodes", "5", "1000000", &["PM002"]);
    lowered_then_raised(
        &compile,
        "--max-total-bytes",
        "1000",
        "100000000",
        &["policy files add up to more than"],
    );
    lowered_then_raised(
        &["lint", POLICIES],
        "--max-file-bytes",
        "10",
        "10000000",
        &["PM002"],
    );
}

#[test]
fn security_md_lists_every_flag_with_its_default() {
    let text = std::fs::read_to_string(workspace().join("SECURITY.md")).unwrap();
    for flag in every_flag() {
        assert!(
            text.contains(&format!("| `{flag}` |")),
            "SECURITY.md lacks {flag}"
        );
    }
}
