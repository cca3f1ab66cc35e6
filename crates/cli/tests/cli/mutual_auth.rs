//! Mutual authentication (issue 17), on Online Boutique's release
//! manifests: with `settings: {mesh-auth-mutual-enabled: true}` (Cilium's
//! flag; the cluster runs SPIRE mutual authentication) an
//! `authentication.mode: required` flow between two workloads is decided
//! as an authenticated cluster decides it (allow), while the world, CIDR
//! peers and `test-always-fail` stay denied (`pkg/auth/manager.go`
//! handleAuthRequest skips reserved identities); without the setting (the
//! default) the same file fails closed and says which setting would
//! change it. `porin test` (reference and `--engine both`, see
//! porin-kernel's fixtures_both_engines) and `porin query` agree.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use crate::common::{porin, workspace};

const FIXTURE: &str = "fixtures/policy-tests/auth/boutique-mutual-auth.yaml";

fn query(file: &str, from: &str) -> (Option<i32>, String) {
    let out = porin(&[
        "query",
        "--from",
        from,
        "--to",
        "default/paymentservice",
        "--port",
        "50051",
        file,
    ]);
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn with_the_setting_workloads_authenticate_and_reserved_peers_do_not() {
    let out = porin(&["test", FIXTURE]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.ends_with("6 passed, 0 failed\n"), "{text}");
    insta::assert_snapshot!("mutual_auth_test", text);
    let (code, allowed) = query(FIXTURE, "default/checkoutservice");
    assert_eq!(code, Some(0), "{allowed}");
    assert!(
        allowed.contains("default/paymentservice ingress: allowed after mutual authentication"),
        "{allowed}"
    );
    let (code, world) = query(FIXTURE, "world");
    assert_eq!(code, Some(1), "{world}");
    assert!(world.contains("which never succeeds here"), "{world}");
    insta::assert_snapshot!("mutual_auth_query", format!("{allowed}{world}"));
}

#[test]
fn without_the_setting_the_same_flows_fail_closed_and_name_it() {
    let dir = std::env::temp_dir().join(format!("porin-mutual-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The fixture without its `settings:` block, its paths made absolute.
    let text = std::fs::read_to_string(workspace().join(FIXTURE)).unwrap();
    let base = workspace().join("fixtures/policy-tests/auth");
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("settings:") && !l.contains("mesh-auth-mutual-enabled: true"))
        .map(|l| l.replace("../../../", &format!("{}/../../../", base.display())))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!text.contains("mesh-auth-mutual-enabled: true"));
    let file = dir.join("default.yaml");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    let out = porin(&["test", file]);
    let report = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{report}");
    // The two workload cases fail; the four denials still hold.
    assert!(report.ends_with("4 passed, 2 failed\n"), "{report}");
    assert!(
        report.contains("dropped: authentication type 1 required (porin has no auth map; the setting mesh-auth-mutual-enabled: true decides it as a cluster running mutual authentication)"),
        "{report}"
    );
    let (code, denied) = query(file, "default/checkoutservice");
    assert_eq!(code, Some(1), "{denied}");
    assert!(denied.starts_with("deny: "), "{denied}");
    let _ = std::fs::remove_dir_all(&dir);
}
