//! The kernel engine names the address family it tested for every case
//! (issue 17), also when the case set no `family:`: on Online Boutique's
//! release manifests (`examples/boutique/tests`, dual-stack pods) each
//! `PASS` line of `--engine kernel` and `--engine both` ends in the
//! families of the packets the kernel built (`allow (IPv4, IPv6)`), and a
//! `family: ipv6` case in the one family (`fixtures/policy-tests/families`).
//!
//! Needs root (eBPF). In CI (`CI=true`) an unusable kernel fails the test;
//! elsewhere it prints `SKIPPED: <reason>`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use crate::common::porin;

fn kernel_available(test: &str) -> bool {
    match porin_kernel::probe() {
        Ok(()) => true,
        Err(error) => {
            let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !in_ci,
                "{test}: CI=true but eBPF is unavailable: {error} (run CI as root)"
            );
            println!("SKIPPED: {test}: eBPF unavailable ({error})");
            false
        }
    }
}

#[test]
fn kernel_lines_name_the_families_tested() {
    if !kernel_available("kernel_lines_name_the_families_tested") {
        return;
    }
    let out = porin(&["test", "--engine", "kernel", "examples/boutique/tests"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("PASS")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    for line in &lines {
        assert!(line.ends_with(" (IPv4, IPv6)"), "{line}");
    }
    insta::assert_snapshot!("family_output_kernel_boutique", text);
    let out = porin(&[
        "test",
        "--engine",
        "both",
        "fixtures/policy-tests/families/by-family.yaml",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("(default/client -> default/web TCP/8080 over IPv6) => kernel allow (IPv6), reference allow (IPv6)"),
        "{text}"
    );
    insta::assert_snapshot!("family_output_both_by_family", text);
}
