//! Names, not numbers: `porin compile --format table` and `porin query` on
//! Online Boutique (`examples/boutique`) name the workloads behind each
//! identity, print the endpoint's labels as a selector writes them, and a
//! default-deny verdict names the policies that put the direction in
//! default deny.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use crate::common::porin;

const POLICIES: &str = "examples/boutique/policies";
const INVENTORY: &str = "examples/boutique/manifests.yaml";

#[test]
fn the_table_names_the_peers_of_each_entry() {
    let out = porin(&[
        "compile",
        POLICIES,
        "--inventory",
        INVENTORY,
        "--endpoint",
        "default/cartservice",
        "--format",
        "table",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.starts_with("default/cartservice (identity 257, app=cartservice)"),
        "{table}"
    );
    insta::assert_snapshot!("names_table_cartservice", table);
}

#[test]
fn query_names_workloads_and_the_policies_behind_default_deny() {
    let query = |from: &str, to: &str, port: &str| {
        let out = porin(&[
            "query",
            "--from",
            from,
            "--to",
            to,
            "--port",
            port,
            "--inventory",
            INVENTORY,
            POLICIES,
        ]);
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, allowed) = query("default/cartservice", "default/redis-cart", "6379/tcp");
    assert_eq!(code, Some(0));
    assert!(
        allowed.contains("(default/redis-cart (identity 266), TCP/6379)"),
        "{allowed}"
    );
    let (code, denied) = query("default/frontend", "default/redis-cart", "6379/tcp");
    assert_eq!(code, Some(1));
    insta::assert_snapshot!("names_query", format!("{allowed}{denied}"));
}
