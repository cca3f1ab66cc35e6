//! The lint context resolves and distils its distinct states in parallel
//! (rayon) and the shadowing analysis runs per distinct state in parallel:
//! the units, their states, the compiler's diagnostics and the findings
//! must be those of a one-thread run, in the same order (issue #14).

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use porin_compiler::compile::synthetic::{SyntheticCluster, mixed_cluster};
use porin_compiler::resolve::lower::PolicyInput;
use porin_lint::Context;
use porin_lint::config::LintConfig;

fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

/// Everything a lint run derives, as text: the units in order (endpoints,
/// identity, rules, the state's entries), the overflows, the compiler's
/// diagnostics and the report's findings.
fn lint_text(synthetic: &SyntheticCluster) -> (usize, usize, String) {
    let outcome = synthetic.load();
    let inputs = PolicyInput::from_outcome(&outcome);
    let config = LintConfig::default();
    let cx = Context::new(&inputs, &synthetic.inventory, true, &config).unwrap();
    let mut text = String::new();
    for unit in &cx.units {
        text.push_str(&format!(
            "{:?} {} {:?} {:?}\n",
            unit.endpoints, unit.identity, unit.rules, unit.state
        ));
    }
    for over in &cx.overflows {
        text.push_str(&format!("over {:?} {}\n", over.endpoints, over.identity));
    }
    text.push_str(&format!("{:?}\n", cx.compile_diagnostics));
    let report = porin_lint::verify(&inputs, Some(&synthetic.inventory), &config).unwrap();
    text.push_str(&format!("{:?}\n", report.findings));
    (cx.units.len(), report.findings.len(), text)
}

#[test]
fn one_thread_and_several_threads_give_the_same_context_and_findings() {
    let synthetic = mixed_cluster(40, 400);
    let (units, findings, one) = in_pool(1, || lint_text(&synthetic));
    // Enough work to be split: many units, some findings.
    assert!(units > 100, "{units} units");
    assert!(findings > 0, "no findings");
    for threads in [2, 3] {
        let (_, _, many) = in_pool(threads, || lint_text(&synthetic));
        assert!(
            one == many,
            "the lint context or findings differ between 1 and {threads} threads"
        );
    }
}
