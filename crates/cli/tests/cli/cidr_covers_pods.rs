//! A CIDR that covers pod addresses never matches the pods on Cilium
//! (cilium/cilium#9209): on Online Boutique (`examples/boutique`) with a
//! policy that lets "the pod network" (`10.244.0.0/16`) reach Redis,
//! `porin lint` warns (PR020, naming the pods), and `porin query` and a
//! failing `porin test` case say that the CIDR is why the pod is denied.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use crate::common::porin;

const POLICIES: &str = "examples/boutique/policies";
const INVENTORY: &str = "examples/boutique/manifests.yaml";
const BLOCK: &str = "crates/cli/tests/cli/data/cidr_covers_pods/redis-from-pod-network.yaml";
const TEST: &str = "crates/cli/tests/cli/data/cidr_covers_pods/redis.policytest.yaml";
const WHY: &str = "but Cilium never matches a pod by its address: the pod keeps its own security identity (cilium/cilium#9209, lint rule PR020 cidr-covers-pods)";

#[test]
fn lint_names_the_pods_the_block_covers() {
    let out = porin(&["lint", "--inventory", INVENTORY, POLICIES, BLOCK]);
    let text = String::from_utf8(out.stdout).unwrap();
    let finding = text
        .lines()
        .find(|l| l.starts_with("warning[PR020]"))
        .unwrap_or_else(|| panic!("no PR020:\n{text}"));
    // cartservice is allowed by a label selector (NetworkPolicy
    // default/redis-cart), so it is not one of the pods the block misses.
    assert!(
        finding.contains("covers the addresses of 12 pods"),
        "{finding}"
    );
    assert!(
        finding.contains("default/checkoutservice (10.244.0.3)"),
        "{finding}"
    );
    assert!(!finding.contains("default/cartservice"), "{finding}");
    // Without the block, no PR020.
    let out = porin(&["lint", "--inventory", INVENTORY, POLICIES]);
    assert!(!String::from_utf8(out.stdout).unwrap().contains("PR020"));
}

#[test]
fn query_says_the_cidr_does_not_match_the_pod() {
    let query = |from: &str| {
        let out = porin(&[
            "query",
            "--from",
            from,
            "--to",
            "default/redis-cart",
            "--port",
            "6379/tcp",
            "--inventory",
            INVENTORY,
            POLICIES,
            BLOCK,
        ]);
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, denied) = query("default/checkoutservice");
    assert_eq!(code, Some(1), "{denied}");
    assert!(
        denied.contains("CIDR 10.244.0.0/16 is allowed (TCP/6379 by CiliumNetworkPolicy default/redis-from-pod-network spec.ingress[0]"),
        "{denied}"
    );
    assert!(
        denied.contains("covers default/checkoutservice's address 10.244.0.3"),
        "{denied}"
    );
    assert!(denied.contains(WHY), "{denied}");
    insta::assert_snapshot!("cidr_covers_pods_query", denied);
    // Allowed by a label selector: no note.
    let (code, allowed) = query("default/cartservice");
    assert_eq!(code, Some(0), "{allowed}");
    assert!(!allowed.contains("cilium/cilium#9209"), "{allowed}");
    // Without the block, the deny has no CIDR to blame.
    let out = porin(&[
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
    ]);
    let plain = String::from_utf8(out.stdout).unwrap();
    assert!(plain.starts_with("deny:"), "{plain}");
    assert!(!plain.contains("cilium/cilium#9209"), "{plain}");
}

#[test]
fn a_failing_test_case_gives_the_same_reason() {
    let out = porin(&["test", TEST]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let failure = text
        .lines()
        .find(|l| l.starts_with("FAIL"))
        .unwrap_or_else(|| panic!("no failure:\n{text}"));
    assert!(
        failure.contains("checkout reaches redis through the block"),
        "{failure}"
    );
    assert!(failure.contains(WHY), "{failure}");
    // An address of the block that no pod has is allowed.
    assert!(
        text.contains("PASS") && text.contains("an address outside the cluster in the block"),
        "{text}"
    );
}
