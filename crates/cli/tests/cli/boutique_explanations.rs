//! The explanations of issue 17 from the user's side, on Online Boutique's
//! release manifests and policies (`examples/boutique`): the default-deny
//! explanation (which policies put an end in default deny), the
//! duplicate-pair explanation (two identical rules are one pair: keep one)
//! in `porin query`, a failing `porin test` case and `porin lint`; and no
//! silent green: a rejected test file among the boutique's tests is counted
//! on the summary line and the run exits 2. (CIDR-covers-pods: see
//! cidr_covers_pods.rs, on the same application.)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use crate::common::{porin, workspace};

const POLICIES: &str = "examples/boutique/policies";
const INVENTORY: &str = "examples/boutique/manifests.yaml";
const DATA: &str = "crates/cli/tests/cli/data/boutique_explanations";
const PAIR: &str = "(each of these 2 rules alone allows this flow: removing one of them keeps it)";

fn stdout(args: &[&str]) -> (Option<i32>, String) {
    let out = porin(args);
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn a_failing_case_names_the_default_deny_and_the_duplicate_pair() {
    let (code, text) = stdout(&["test", &format!("{DATA}/wrong.policytest.yaml")]);
    assert_eq!(code, Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("default/redis-cart ingress: no rule allows default/frontend (identity 261): default deny, set by NetworkPolicy default/default-deny"),
        "{text}"
    );
    assert!(lines[1].ends_with(PAIR), "{text}");
    insta::assert_snapshot!("boutique_explanations_test_failures", text);
}

#[test]
fn query_names_the_pair_and_lint_reports_it_once_to_keep_one() {
    let pair = format!("{DATA}/redis-cart-backup.yaml");
    let (code, query) = stdout(&[
        "query",
        "--from",
        "default/checkoutservice",
        "--to",
        "default/redis-cart",
        "--port",
        "6379/tcp",
        "--inventory",
        INVENTORY,
        POLICIES,
        &pair,
    ]);
    assert_eq!(code, Some(0), "{query}");
    assert!(query.contains(PAIR), "{query}");
    insta::assert_snapshot!("boutique_explanations_query_pair", query);
    let (code, lint) = stdout(&["lint", "--inventory", INVENTORY, POLICIES, &pair]);
    assert_eq!(code, Some(0), "{lint}");
    // One finding for the pair, asking to keep one; no "redundant, delete
    // it" for either rule.
    assert_eq!(lint.matches("warning[PR011]").count(), 1, "{lint}");
    assert!(lint.contains("= help: keep one of them"), "{lint}");
    assert!(!lint.contains("PR005"), "{lint}");
    insta::assert_snapshot!("boutique_explanations_lint_pair", lint);
}

#[test]
fn lint_names_the_policies_whose_default_deny_blocks_a_rule() {
    let (code, lint) = stdout(&[
        "lint",
        "--inventory",
        INVENTORY,
        POLICIES,
        &format!("{DATA}/frontend-email.yaml"),
    ]);
    assert_eq!(code, Some(0), "{lint}");
    assert!(
        lint.contains("NetworkPolicy `default/default-deny` enforces the ingress of the peer and blocks these flows"),
        "{lint}"
    );
    assert!(
        lint.contains(
            "default/frontend → default/emailservice: TCP/8080 blocked at the peer's ingress"
        ),
        "{lint}"
    );
    insta::assert_snapshot!("boutique_explanations_lint_default_deny", lint);
    // query says the same, in its words.
    let (code, query) = stdout(&[
        "query",
        "--from",
        "default/frontend",
        "--to",
        "svc/default/emailservice",
        "--port",
        "5000",
        "--inventory",
        INVENTORY,
        POLICIES,
        &format!("{DATA}/frontend-email.yaml"),
    ]);
    assert_eq!(code, Some(1), "{query}");
    assert!(
        query.contains("default/emailservice ingress: no rule allows default/frontend (identity 261): default deny, set by NetworkPolicy default/emailservice"),
        "{query}"
    );
}

#[test]
fn a_rejected_file_among_the_boutique_tests_is_no_silent_green() {
    let dir = std::env::temp_dir().join(format!("porin-boutique-green-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let boutique = workspace().join("examples/boutique");
    let checkout = std::fs::read_to_string(boutique.join("tests/checkout.test.yaml"))
        .unwrap()
        .replace("../", &format!("{}/", boutique.display()));
    std::fs::write(dir.join("a-checkout.yaml"), checkout).unwrap();
    // `case:` for `cases:`: refused, not a file that runs nothing.
    std::fs::write(
        dir.join("b-typo.yaml"),
        format!(
            "kind: PolicyTest\ninventory: [{}]\ncase:\n  - {{from: default/frontend, to: default/cartservice, port: 7070, expect: allow}}\n",
            boutique.join("manifests.yaml").display()
        ),
    )
    .unwrap();
    let out = porin(&["test", dir.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout)
        .unwrap()
        .replace(dir.to_str().unwrap(), "[dir]");
    let error = String::from_utf8(out.stderr)
        .unwrap()
        .replace(dir.to_str().unwrap(), "[dir]");
    assert_eq!(out.status.code(), Some(2), "{text}{error}");
    assert!(
        text.ends_with("2 passed, 0 failed, 1 file rejected\n"),
        "{text}"
    );
    assert!(error.contains("--> [dir]/b-typo.yaml:3:1"), "{error}");
    assert!(
        error.starts_with("error[PM003]: invalid test file: "),
        "{error}"
    );
    assert!(error.contains("unknown field `case`"), "{error}");
    insta::assert_snapshot!(
        "boutique_explanations_rejected_file",
        format!("{text}---\n{error}")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The boutique's policies against another application's inventory (the
/// quickstart's): not one policy selects an endpoint, so every flow is
/// allowed. The passing case is no silent green: `porin test` and
/// `porin compile` warn (PC020) that nothing is enforced.
#[test]
fn an_inventory_no_policy_selects_is_a_warning() {
    let dir = std::env::temp_dir().join(format!("porin-boutique-wrong-inv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("wrong-inventory.yaml");
    std::fs::write(
        &file,
        format!(
            "kind: PolicyTest\ninventory: [{}]\npolicies:\n  - path: {}\ncases:\n  - {{from: shop/api, to: shop/db, port: 5432, expect: allow}}\n",
            workspace().join("examples/quickstart/inventory.yaml").display(),
            workspace().join(POLICIES).display()
        ),
    )
    .unwrap();
    let out = porin(&["test", file.to_str().unwrap()]);
    let error = String::from_utf8(out.stderr).unwrap();
    assert!(
        error.contains("warning[PC020]: none of the 14 loaded policies selects an endpoint of the inventory: nothing is enforced and every flow is allowed"),
        "{error}"
    );
    let out = porin(&[
        "compile",
        POLICIES,
        "--inventory",
        "examples/quickstart/inventory.yaml",
    ]);
    let error = String::from_utf8(out.stderr).unwrap();
    assert!(error.contains("warning[PC020]"), "{error}");
    // With the boutique's own manifests: no such warning.
    let out = porin(&["compile", POLICIES, "--inventory", INVENTORY]);
    assert!(!String::from_utf8(out.stderr).unwrap().contains("PC020"));
    let _ = std::fs::remove_dir_all(&dir);
}
