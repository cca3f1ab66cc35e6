//! A policy that fails to compile for one endpoint yields no maps at all
//! (issue #8: "nothing is emitted for that endpoint, and the caller is told;
//! porin never produces a partial map"), through the Rust API an agent
//! uses: `compile_with_limits`, then `MapContents` for the object.
//! (The C ABI side is `crates/capi/tests/capi/c_compile_failure.rs`.)

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use porin_compiler::compile::{Compiled, compile_with_limits, synthetic};
use porin_compiler::error::CompileError;
use porin_compiler::limits::{CompileLimits, Limit};
use porin_compiler::resolve::lower::PolicyInput;
use porin_ebpf::compiled::MapContents;

fn compile(limits: &CompileLimits) -> Result<Compiled, CompileError> {
    let cluster = synthetic::cluster(6, 30);
    let outcome = cluster.load();
    assert!(!outcome.has_errors());
    compile_with_limits(
        &PolicyInput::from_outcome(&outcome),
        &cluster.inventory,
        limits,
    )
}

#[test]
fn one_endpoint_over_its_entry_limit_fails_the_whole_compile() {
    let compiled = compile(&CompileLimits::default()).unwrap();
    let maps = MapContents::from_compiled(&compiled).unwrap();
    let sizes: Vec<usize> = (0..compiled.endpoints.len())
        .map(|i| maps.endpoint_policy(i).unwrap().len())
        .collect();
    let largest = *sizes.iter().max().unwrap();
    let fitting = sizes.iter().filter(|&&n| n < largest).count();
    assert!(
        fitting > 0 && largest > 1,
        "the cluster needs endpoints of different sizes: {sizes:?}"
    );
    // Only the largest endpoints exceed the limit; the others would fit, yet
    // the caller gets an error and no `Compiled` (so no map for anyone).
    let mut limits = CompileLimits::default();
    limits.set(Limit::EntriesPerEndpoint, (largest - 1) as u64);
    match compile(&limits) {
        Err(error @ CompileError::Limit { .. }) => {
            let message = error.to_string();
            assert!(
                message.contains(Limit::EntriesPerEndpoint.flag()),
                "{message}"
            );
        }
        Err(other) => panic!("expected a limit error, got {other:?}"),
        Ok(partial) => panic!(
            "compiled {} endpoints past an entry limit some exceed",
            partial.endpoints.len()
        ),
    }
}
