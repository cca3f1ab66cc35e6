//! Parallel and streamed compilation give the bytes of a single-threaded,
//! whole compilation: the same JSON whatever the number of threads, and the
//! same JSON whether [`Compiled::to_json`] or the endpoint stream
//! ([`write_json`]) writes it; the unit stream visits every unit once, in
//! order, with the states the whole compilation holds.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use porin_compiler::compile::synthetic::{SyntheticCluster, mixed_cluster};
use porin_compiler::compile::{
    Compilation, Compiled, StreamError, UnitOutcome, write_json, write_json_states,
};
use porin_compiler::inventory::Endpoint;
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
    for threads in [1, 2] {
        assert!(
            streamed(&synthetic, threads, write_json, &|_| true) == whole,
            "the stream differs from to_json with {threads} thread(s)"
        );
    }
}

/// `Compiled::nodes` is written only when the inventory has nodes (a
/// host-firewall inventory); the stream wrote the other fields and left it
/// out, so `porin compile --format json` lacked the nodes `to_json` has.
#[test]
fn the_endpoint_stream_writes_the_inventory_nodes_as_to_json_does() {
    let mut synthetic = mixed_cluster(4, 40);
    synthetic
        .inventory
        .nodes
        .push(porin_compiler::inventory::Node {
            name: "worker-1".to_string(),
            labels: [("kubernetes.io/hostname".to_string(), "worker-1".to_string())].into(),
            ips: vec!["192.0.2.10".parse().unwrap()],
            local: false,
            location: Default::default(),
        });
    let whole = compiled(&synthetic).to_json();
    assert!(whole.contains("\"worker-1\""), "to_json has no nodes field");
    let streamed = streamed(&synthetic, 1, write_json, &|_| true);
    assert!(
        streamed == whole,
        "the stream differs from to_json with nodes"
    );
}

type Writer = fn(
    &Compilation<'_>,
    &dyn Fn(&Endpoint) -> bool,
    &mut dyn std::io::Write,
) -> Result<Vec<porin_model::diagnostic::Diagnostic>, StreamError>;

/// The bytes `writer` writes for `synthetic` on `threads` threads, of the
/// endpoints `select` keeps.
fn streamed(
    synthetic: &SyntheticCluster,
    threads: usize,
    writer: Writer,
    select: &(dyn Fn(&Endpoint) -> bool + Sync),
) -> String {
    let outcome = synthetic.load();
    let inputs = PolicyInput::from_outcome(&outcome);
    let bytes = in_pool(threads, || {
        Compilation::run(
            &inputs,
            &synthetic.inventory,
            &CompileLimits::default(),
            |compilation| {
                let mut out = Vec::new();
                writer(compilation, select, &mut out).unwrap();
                Ok(out)
            },
        )
        .unwrap()
    });
    String::from_utf8(bytes).unwrap()
}

/// The `--format json` text of a `--format json-states` text, by text
/// substitution: each endpoint's `"state": N` line becomes `"entries": `
/// and the N-th state's entries text (written at the same depth), and the
/// `states` field goes. Byte-exact, unlike a comparison of parsed values.
fn expand_states(text: &str) -> String {
    let start = text.find("\n  \"states\": ").unwrap();
    let rest = &text[start + 1..];
    let end = rest.find("\n  \"endpoints\": ").unwrap();
    let block = &rest[..end];
    // Each state: `    {\n      "entries": ENTRIES\n    }`.
    let mut states: Vec<&str> = Vec::new();
    let mut at = 0;
    while let Some(open) = block[at..].find("\n    {\n      \"entries\": ") {
        let from = at + open + "\n    {\n      \"entries\": ".len();
        let close = block[from..].find("\n    }").unwrap();
        states.push(&block[from..from + close]);
        at = from + close;
    }
    let mut out = String::with_capacity(text.len() * 4);
    out.push_str(&text[..start]);
    for line in rest[end..].split_inclusive('\n') {
        match line.strip_prefix("      \"state\": ") {
            Some(index) => {
                let index: usize = index.trim_end().parse().unwrap();
                out.push_str("      \"entries\": ");
                out.push_str(states[index]);
                out.push('\n');
            }
            None => out.push_str(line),
        }
    }
    out
}

#[test]
fn the_plain_stream_writes_the_same_bytes_on_one_and_two_threads_for_any_selection() {
    let synthetic = mixed_cluster(40, 400);
    let every_third = |e: &Endpoint| e.name.len().is_multiple_of(3);
    let none = |_: &Endpoint| false;
    for select in [&every_third as &(dyn Fn(&Endpoint) -> bool + Sync), &none] {
        let one = streamed(&synthetic, 1, write_json, select);
        let two = streamed(&synthetic, 2, write_json, select);
        assert!(one == two, "the stream differs between 1 and 2 threads");
        // A selection is the whole document with the other endpoints left
        // out: the same as to_json of the filtered compilation.
        let mut whole = compiled(&synthetic);
        whole.endpoints.retain(|e| {
            let endpoint = synthetic
                .inventory
                .endpoints
                .iter()
                .find(|i| i.name == e.name && i.namespace == e.namespace)
                .unwrap();
            select(endpoint)
        });
        assert!(
            one == whole.to_json(),
            "the selection's stream differs from to_json"
        );
    }
}

#[test]
fn the_state_stream_expands_to_the_plain_bytes_and_writes_each_unit_once() {
    let synthetic = mixed_cluster(40, 400);
    let plain = in_pool(1, || compiled(&synthetic).to_json());
    let one = streamed(&synthetic, 1, write_json_states, &|_| true);
    let two = streamed(&synthetic, 2, write_json_states, &|_| true);
    assert!(
        one == two,
        "the state stream differs between 1 and 2 threads"
    );
    assert!(
        expand_states(&one) == plain,
        "the expanded state stream differs from to_json"
    );
    let value: serde_json::Value = serde_json::from_str(&one).unwrap();
    let states = value["states"].as_array().unwrap().len();
    let endpoints = value["endpoints"].as_array().unwrap();
    // Fewer states than endpoints, every one referenced, in order of first
    // use.
    assert!(states < endpoints.len() / 2, "{states}");
    let mut next = 0;
    for endpoint in endpoints {
        let state = usize::try_from(endpoint["state"].as_u64().unwrap()).unwrap();
        assert!(state <= next, "state {state} before state {next}");
        if state == next {
            next += 1;
        }
    }
    assert_eq!(next, states);
    // The plain document is several times the state document here.
    assert!(plain.len() > one.len() * 2, "{} {}", plain.len(), one.len());
    // No endpoint selected: empty lists, still the plain bytes expanded.
    let none = streamed(&synthetic, 2, write_json_states, &|_| false);
    let mut empty = compiled(&synthetic);
    empty.endpoints.clear();
    assert!(none.contains("\"states\": [],"), "{none}");
    assert!(expand_states(&none) == empty.to_json());
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
