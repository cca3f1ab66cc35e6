//! Parallel and streamed compilation give the bytes of a single-threaded,
//! whole compilation: the same JSON whatever the number of threads, and the
//! same JSON whether [`Compiled::to_json`] or the endpoint stream
//! ([`write_json`]) writes it; the unit stream visits every unit once, in
//! order, with the states the whole compilation holds.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use porin_compiler::compile::synthetic::{SyntheticCluster, mixed_cluster};
use porin_compiler::compile::{Compilation, Compiled, UnitOutcome, write_json};
use porin_compiler::limits::CompileLimits;
use porin_compiler::resolve::lower::PolicyInput;

fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

fn compiled(synthetic: &SyntheticCluster) -> Compiled {
    synthetic.compile().unwrap()
}

#[test]
fn one_thread_and_several_threads_give_the_same_bytes() {
    let synthetic = mixed_cluster(40, 400);
    let one = in_pool(1, || compiled(&synthetic).to_json());
    let three = in_pool(3, || compiled(&synthetic).to_json());
    assert!(one.len() > 100_000, "{}", one.len());
    assert!(one == three, "the JSON differs between 1 and 3 threads");
}

#[test]
fn the_endpoint_stream_writes_the_bytes_of_to_json() {
    let synthetic = mixed_cluster(40, 400);
    let whole = in_pool(1, || compiled(&synthetic).to_json());
    let outcome = synthetic.load();
    let inputs = PolicyInput::from_outcome(&outcome);
    for threads in [1, 2] {
        let streamed = in_pool(threads, || {
            Compilation::run(
                &inputs,
                &synthetic.inventory,
                &CompileLimits::default(),
                |compilation| {
                    let mut out = Vec::new();
                    write_json(compilation, &|_| true, &mut out).unwrap();
                    Ok(out)
                },
            )
            .unwrap()
        });
        assert!(
            String::from_utf8(streamed).unwrap() == whole,
            "the stream differs from to_json with {threads} thread(s)"
        );
    }
}

#[test]
fn the_unit_stream_covers_every_endpoint_once_in_order() {
    let synthetic = mixed_cluster(40, 400);
    let whole = compiled(&synthetic);
    let outcome = synthetic.load();
    let inputs = PolicyInput::from_outcome(&outcome);
    let seen = in_pool(2, || {
        Compilation::run(
            &inputs,
            &synthetic.inventory,
            &CompileLimits::default(),
            |compilation| {
                let mut seen = Vec::new();
                compilation.for_each_unit(|unit| {
                    let UnitOutcome::State(state, _) = unit.outcome else {
                        panic!("no unit of the synthetic cluster is over the capacity");
                    };
                    for &endpoint in &unit.plan.endpoints {
                        assert_eq!(*whole.endpoints[endpoint].state, *state);
                    }
                    seen.push((unit.index, unit.plan.endpoints.clone()));
                    true
                });
                Ok(seen)
            },
        )
        .unwrap()
    });
    let indices: Vec<usize> = seen.iter().map(|(i, _)| *i).collect();
    assert_eq!(indices, (0..seen.len()).collect::<Vec<_>>());
    let mut endpoints: Vec<usize> = seen.into_iter().flat_map(|(_, e)| e).collect();
    // Units come in order of their first endpoint.
    endpoints.sort_unstable();
    assert_eq!(endpoints, (0..whole.endpoints.len()).collect::<Vec<_>>());
    // Fewer units than endpoints: states are shared across identities.
    assert!(
        indices.len() < whole.endpoints.len() / 2,
        "{}",
        indices.len()
    );
}
