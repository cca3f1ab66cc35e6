//! How a live session's identity add and remove grow with the CIDR
//! identities beside them, with the batch baseline (compile everything,
//! then `policy_diff`) of the same add at each size.
//!
//! ```sh
//! cargo run --release -p porin-compiler --example identity_growth [RUNS] [SIZES...]
//! ```
//!
//! One CNP selecting the server: `SIZE` rules, each from one `/32` peer
//! and to one UDP port, 64 of them from the pods `app=client` instead. A
//! pod `app=client` with a label of its own (a new identity, selected by
//! the 64 rules) appears, then goes. Every CIDR identity's number is
//! above the pod's, so the session's table places the pod's identity
//! below all of them. Defaults: 30 runs; 4,096, 16,384 and 64,000 rules
//! (65,536 entries is the map's size: 64,000 rules leave room for the
//! clients').

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use porin_compiler::compile::compile_with_limits;
use porin_compiler::diff::policy_diff;
use porin_compiler::inventory::{AllowLocalhost, Endpoint, Inventory, SourceLocation};
use porin_compiler::limits::CompileLimits;
use porin_compiler::session::{Session, UpdatePath};
use porin_model::limits::LoadLimits;
use porin_model::loader::load_str;

type Failure = Box<dyn std::error::Error>;

const CLIENT_RULES: usize = 64;

fn policy(rules: usize) -> String {
    let mut out = String::from(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {name: bench, namespace: bench}\nspec:\n  endpointSelector: {matchLabels: {app: echo-server}}\n  ingress:\n",
    );
    let every = (rules / CLIENT_RULES).max(1);
    for i in 0..rules {
        let offset = u32::try_from(i).unwrap_or(0);
        let peer = Ipv4Addr::from(u32::from_be_bytes([10, 216, 0, 0]) + offset);
        // The client rules' ports are their own (64 entries).
        let port = if i % every == 0 {
            out.push_str("  - fromEndpoints: [{matchLabels: {app: client}}]\n");
            30_000 + i / every
        } else {
            let _ = writeln!(out, "  - fromCIDR: [{peer}/32]");
            20_000 + i % 1_000
        };
        let _ = writeln!(
            out,
            "    toPorts: [{{ports: [{{port: \"{port}\", protocol: UDP}}]}}]"
        );
    }
    out
}

fn pod(name: &str, labels: &[(&str, &str)], ip: Ipv4Addr) -> Endpoint {
    Endpoint {
        name: name.to_owned(),
        namespace: Some("bench".to_owned()),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        ips: vec![IpAddr::V4(ip)],
        service_account: None,
        ports: Vec::new(),
        identity: None,
        identity_labels: None,
        location: SourceLocation::default(),
    }
}

/// Median, in microseconds.
fn median(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn main() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args
        .next()
        .map_or(Ok(30), |a| a.parse())
        .map_err(|e| format!("RUNS: {e}"))?;
    let mut sizes: Vec<usize> = args
        .map(|a| a.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("SIZE: {e}"))?;
    if sizes.is_empty() {
        sizes = vec![4_096, 16_384, 64_000];
    }
    println!("identity add / remove beside CIDR identities, {runs} runs each (release build)");
    println!("rules    CIDR identities  build (ms)  add (µs)  remove (µs)  batch add (ms)  writes");
    for size in sizes {
        match measure(size, runs) {
            Ok(row) => println!("{row}"),
            Err(e) => println!("{size:>6}  refused: {e}"),
        }
    }
    Ok(())
}

/// One size's row.
fn measure(size: usize, runs: usize) -> Result<String, Failure> {
    let mut inventory = Inventory::new();
    inventory.allow_localhost = AllowLocalhost::Policy;
    inventory.endpoints.push(pod(
        "echo-server",
        &[("app", "echo-server")],
        Ipv4Addr::new(10, 213, 0, 2),
    ));
    let outcome = load_str("bench.yaml", &policy(size), &LoadLimits::default());
    if outcome.has_errors() {
        return Err(format!("{:?}", outcome.diagnostics).into());
    }
    let start = Instant::now();
    let mut session = Session::with_policies(
        inventory,
        vec![("bench".to_owned(), outcome)],
        CompileLimits::default(),
    )?;
    let build = start.elapsed();
    let cidr = session.inventory().cidr_identities.len();
    let (mut adds, mut removes, mut batch) = (Vec::new(), Vec::new(), Vec::new());
    let mut writes = 0;
    for run in 0..runs {
        let name = format!("client-{run}");
        let unique = format!("u{run}");
        let ip = Ipv4Addr::new(10, 214, 0, u8::try_from(run % 250 + 1).unwrap_or(1));
        // The server's state before, for the batch's difference (a copy
        // of up to 65,536 entries, which also leaves the caches cold for
        // the add after it: those runs are three of the median's).
        let before = if run < 3 {
            Some((**session.state("bench/echo-server").ok_or("no server")?).clone())
        } else {
            None
        };
        let start = Instant::now();
        let update =
            session.add_endpoint(pod(&name, &[("app", "client"), ("pod", &unique)], ip))?;
        adds.push(start.elapsed());
        if update.path != UpdatePath::Incremental {
            return Err(format!("add not incremental: {:?}", update.path).into());
        }
        writes = update
            .deltas
            .iter()
            .filter(|d| !d.added)
            .map(|d| d.changes.len())
            .sum();
        // The batch way, three times per size (a compile each).
        if let Some(before) = before {
            let start = Instant::now();
            let compiled = compile_with_limits(
                &session.inputs(),
                &session.inventory(),
                &CompileLimits::default(),
            )?;
            let state = &compiled
                .endpoint("bench/echo-server")
                .ok_or("no server")?
                .state;
            let changes = policy_diff(&before, state);
            batch.push(start.elapsed());
            if changes.len() != writes {
                return Err(format!("{writes} writes, the batch gives {}", changes.len()).into());
            }
        }
        let start = Instant::now();
        let update = session
            .remove_endpoint(&format!("bench/{name}"))
            .ok_or("no client")??;
        removes.push(start.elapsed());
        if update.path != UpdatePath::Incremental {
            return Err(format!("remove not incremental: {:?}", update.path).into());
        }
    }
    Ok(format!(
        "{size:>6}  {cidr:>15}  {:>10.0}  {:>8.1}  {:>11.1}  {:>14.1}  {writes:>6}",
        build.as_secs_f64() * 1e3,
        median(&mut adds),
        median(&mut removes),
        median(&mut batch) / 1e3,
    ))
}
