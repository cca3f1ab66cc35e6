//! Builds `examples/c-agent` (gcc, libbpf, `libporin.a`) and runs it as
//! root: it compiles the example policy, loads porin's object, fills the
//! maps through the A/B scheme, decides every flow with
//! `BPF_PROG_TEST_RUN`, applies the v2 policy as a live difference, and
//! decides again. Its verdicts must equal those of `porin test`.

mod common;

use std::process::Command;

#[test]
fn c_agent_verdicts_match_porin_test() {
    if !common::have("gcc") || !common::have("make") {
        common::skip("gcc or make is not installed");
        return;
    }
    if !std::path::Path::new("/usr/include/bpf/libbpf.h").exists() {
        common::skip("libbpf-dev is not installed");
        return;
    }
    if let Err(reason) = common::can_bpf() {
        common::skip(&reason);
        return;
    }
    let lib = common::build_libporin();
    let root = common::workspace_root();
    let binary = common::scratch("c-agent").join("agent");
    let output = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(root.join("examples/c-agent"))
        .arg(format!("ROOT={}", root.display()))
        .arg(format!("PORIN_LIB={}", lib.display()))
        .arg(format!("OUT={}", binary.display()))
        .output()
        .expect("run make");
    assert!(
        output.status.success(),
        "building the C agent failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let data = common::example_data();
    let output = Command::new(&binary)
        .arg(data.join("inventory.yaml"))
        .arg(data.join("policy-v1.yaml"))
        .arg(data.join("policy-v2.yaml"))
        .arg(data.join("flows.txt"))
        .output()
        .expect("run the C agent");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "C agent failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("0 mismatch(es)"), "{stdout}");
    assert!(stdout.contains("diff shop/api:"), "{stdout}");
    let cases = common::check_verdicts_with_porin_test(&stdout, "c-agent");
    assert_eq!(cases, 24, "{stdout}");
}
