//! What a live session (`porin_compiler::session::Session`) takes to turn
//! one change into the map writes, beside the batch baseline (compile
//! everything, then `policy_diff`) in the same run.
//!
//! ```sh
//! cargo run --release -p porin-compiler --example session_updates [RUNS]
//! ```
//!
//! Shapes (the one-rule CNPs of `porin-bench apply`: `fromCIDR: [peer/32]`,
//! one UDP port, all selecting the one server endpoint):
//!
//! - **rule change, 4,096 texts**: 4,096 one-rule CNPs, the agent
//!   replaces one with another port (the text is parsed outside the timed
//!   part: that is the agent's watch event, and the same for both ways);
//! - **rule change, one 4,096-rule text**: `porin-bench apply`'s CNP,
//!   given whole (parsed, then `Session::set_policy`, which compares the
//!   items and lowers the changed one) and as its bytes
//!   (`Session::apply_policy_text`, which parses only the changed item);
//! - **rule's prefix, one text**: the same text's first rule from another
//!   `/32` (as bytes): the text's prefix set loses one and gains one;
//! - **rule's prefix, one port**: the same change in a text whose 4,096
//!   rules all allow one port (one L4 filter holds every selector);
//! - **rule's prefix, no ports**: the same where no rule names a port (an
//!   allow list of CIDRs: the L3-only filter holds every selector);
//! - **identity add / remove**: 4,096 rules, 64 of which allow peers
//!   `app=client`; a pod `app=client` with a label of its own (a new
//!   identity) appears, then goes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use porin_compiler::compile::compile_with_limits;
use porin_compiler::diff::policy_diff;
use porin_compiler::inventory::{AllowLocalhost, Endpoint, Inventory, SourceLocation};
use porin_compiler::limits::CompileLimits;
use porin_compiler::session::{Session, TextLoad, Update, UpdatePath};
use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_str};

const RULES: usize = 4_096;
const CLIENT_RULES: usize = 64;

type Failure = Box<dyn std::error::Error>;

/// Rule `i`: a CIDR peer (or, with `client`, the pods `app=client`) may
/// reach UDP `port` (any port when `port` is 0: an L3-only rule).
fn rule_yaml(out: &mut String, i: usize, port: u16, client: bool) {
    let offset = u32::try_from(i).unwrap_or(0);
    let peer = Ipv4Addr::from(u32::from_be_bytes([10, 216, 0, 0]) + offset);
    if client {
        out.push_str("  - fromEndpoints: [{matchLabels: {app: client}}]\n");
    } else {
        let _ = writeln!(out, "  - fromCIDR: [{peer}/32]");
    }
    if port != 0 {
        let _ = writeln!(
            out,
            "    toPorts: [{{ports: [{{port: \"{port}\", protocol: UDP}}]}}]"
        );
    }
}

fn cnp(name: &str, rules: &[(usize, u16, bool)]) -> String {
    let mut out = format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: {name}, namespace: bench}}\nspec:\n  endpointSelector: {{matchLabels: {{app: echo-server}}}}\n  ingress:\n"
    );
    for (i, port, client) in rules {
        rule_yaml(&mut out, *i, *port, *client);
    }
    out
}

fn port(i: usize) -> u16 {
    20_000 + u16::try_from(i % 1_000).unwrap_or(0)
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

fn inventory() -> Inventory {
    let mut inventory = Inventory::new();
    // As porin-bench apply: the policy's entries only.
    inventory.allow_localhost = AllowLocalhost::Policy;
    inventory.endpoints.push(pod(
        "echo-server",
        &[("app", "echo-server")],
        Ipv4Addr::new(10, 213, 0, 2),
    ));
    inventory
}

fn load(name: &str, text: &str) -> Result<LoadOutcome, Failure> {
    let outcome = load_str(name, text, &LoadLimits::default());
    if outcome.has_errors() {
        return Err(format!("{name}: {:?}", outcome.diagnostics).into());
    }
    Ok(outcome)
}

/// Median and 90th percentile, in microseconds.
fn spread(samples: &mut [Duration]) -> String {
    samples.sort();
    let at = |q: f64| {
        let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[index].as_secs_f64() * 1e6
    };
    format!("median {:>10.1} µs  p90 {:>10.1} µs", at(0.5), at(0.9))
}

fn writes(update: &Update) -> usize {
    update.deltas.iter().map(|d| d.changes.len()).sum()
}

/// The batch way: compile the session's inputs, then `policy_diff` of the
/// server's state against `before`.
fn batch(
    session: &Session,
    before: &porin_compiler::mapstate::MapState,
) -> Result<(Duration, usize), Failure> {
    let start = Instant::now();
    let compiled = compile_with_limits(
        &session.inputs(),
        &session.inventory(),
        &CompileLimits::default(),
    )?;
    let state = compiled
        .endpoint("bench/echo-server")
        .ok_or("no server")?
        .state
        .clone();
    let changes = policy_diff(before, &state);
    Ok((start.elapsed(), changes.len()))
}

/// Rule 0's prefix of the text `rules` (held by `session` as loaded from
/// its bytes) changed `runs` times, as bytes, each beside the batch way;
/// printed under `label`.
fn prefix_step(
    session: &mut Session,
    rules: &[(usize, u16, bool)],
    runs: usize,
    label: &str,
) -> Result<(), Failure> {
    let text_load = TextLoad::default();
    let (mut prefix, mut baseline) = (Vec::new(), Vec::new());
    let mut written = 0;
    for run in 0..runs {
        let mut changed = rules.to_vec();
        changed[0].0 = 100_000 + run % 2;
        let text = cnp("bench", &changed);
        let before = (**session.state("bench/echo-server").ok_or("no server")?).clone();
        let start = Instant::now();
        let applied = session.apply_policy_text("bench", &text, &text_load)?;
        prefix.push(start.elapsed());
        if !applied.in_place {
            return Err(format!("a rule's prefix change {label} was loaded in full").into());
        }
        expect_incremental(&applied.update)?;
        written = writes(&applied.update);
        let (took, batch_writes) = batch(session, &before)?;
        baseline.push(took);
        if batch_writes != written {
            return Err(format!("{written} writes, the batch gives {batch_writes}").into());
        }
    }
    println!(
        "rule's prefix {label:<15} bytes:   {}   [{written} writes]",
        spread(&mut prefix)
    );
    println!(
        "                              batch:   {}",
        spread(&mut baseline)
    );
    Ok(())
}

fn expect_incremental(update: &Update) -> Result<(), Failure> {
    if update.path != UpdatePath::Incremental {
        return Err(format!("not incremental: {:?}", update.path).into());
    }
    Ok(())
}

fn main() -> Result<(), Failure> {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(Ok(20), |a| a.parse())
        .map_err(|e| format!("RUNS: {e}"))?;
    println!("session updates, {RULES} rules, {runs} runs each (release build)");

    // Rule change, one rule per text.
    let start = Instant::now();
    let texts = (0..RULES)
        .map(|i| {
            let name = format!("r{i}");
            let text = load(&name, &cnp(&name, &[(i, port(i), false)]))?;
            Ok((name, text))
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    let mut session = Session::with_policies(inventory(), texts, CompileLimits::default())?;
    println!(
        "setup: {RULES} texts loaded and compiled in {:?}",
        start.elapsed()
    );
    let (mut incremental, mut baseline) = (Vec::new(), Vec::new());
    let mut written = 0;
    for run in 0..runs {
        let before = (**session.state("bench/echo-server").ok_or("no server")?).clone();
        let new_port = port(0) + 5_000 + u16::try_from(run % 2).unwrap_or(0);
        let text = load("r0", &cnp("r0", &[(0, new_port, false)]))?;
        let start = Instant::now();
        let update = session.set_policy("r0", text)?;
        incremental.push(start.elapsed());
        expect_incremental(&update)?;
        written = writes(&update);
        let (took, batch_writes) = batch(&session, &before)?;
        baseline.push(took);
        if batch_writes != written {
            return Err(format!("{written} writes, the batch gives {batch_writes}").into());
        }
    }
    println!(
        "rule change (4,096 texts)     session: {}   [{written} writes]",
        spread(&mut incremental)
    );
    println!(
        "                              batch:   {}   (compile + policy_diff)",
        spread(&mut baseline)
    );

    // Identity add / remove.
    let texts = (0..RULES)
        .map(|i| {
            let name = format!("r{i}");
            let client = i % (RULES / CLIENT_RULES) == 0;
            let text = load(&name, &cnp(&name, &[(i, port(i), client)]))?;
            Ok((name, text))
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    let mut session = Session::with_policies(inventory(), texts, CompileLimits::default())?;
    let (mut adds, mut removes, mut add_base, mut remove_base) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut add_writes, mut remove_writes) = (0, 0);
    for run in 0..runs {
        let name = format!("client-{run}");
        let unique = format!("u{run}");
        let ip = Ipv4Addr::new(10, 214, 0, u8::try_from(run % 250 + 1).unwrap_or(1));
        let before = (**session.state("bench/echo-server").ok_or("no server")?).clone();
        let start = Instant::now();
        let update =
            session.add_endpoint(pod(&name, &[("app", "client"), ("pod", &unique)], ip))?;
        adds.push(start.elapsed());
        expect_incremental(&update)?;
        add_writes = update
            .deltas
            .iter()
            .filter(|d| !d.added)
            .map(|d| d.changes.len())
            .sum();
        let (took, _) = batch(&session, &before)?;
        add_base.push(took);

        let before = (**session.state("bench/echo-server").ok_or("no server")?).clone();
        let start = Instant::now();
        let update = session
            .remove_endpoint(&format!("bench/{name}"))
            .ok_or("no client")??;
        removes.push(start.elapsed());
        expect_incremental(&update)?;
        remove_writes = writes(&update);
        let (took, _) = batch(&session, &before)?;
        remove_base.push(took);
    }
    println!(
        "identity add                  session: {}   [{add_writes} writes to the server]",
        spread(&mut adds)
    );
    println!(
        "                              batch:   {}",
        spread(&mut add_base)
    );
    println!(
        "identity remove               session: {}   [{remove_writes} writes]",
        spread(&mut removes)
    );
    println!(
        "                              batch:   {}",
        spread(&mut remove_base)
    );

    // Rule change inside one 4,096-rule text.
    let rules: Vec<(usize, u16, bool)> = (0..RULES).map(|i| (i, port(i), false)).collect();
    let mut session = Session::with_policies(
        inventory(),
        vec![("bench".to_owned(), load("bench", &cnp("bench", &rules))?)],
        CompileLimits::default(),
    )?;
    let (mut parse, mut incremental, mut baseline) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs.min(10) {
        let mut changed = rules.clone();
        changed[0].1 = port(0) + 5_000 + u16::try_from(run % 2).unwrap_or(0);
        let before = (**session.state("bench/echo-server").ok_or("no server")?).clone();
        let start = Instant::now();
        let text = load("bench", &cnp("bench", &changed))?;
        parse.push(start.elapsed());
        let start = Instant::now();
        let update = session.set_policy("bench", text)?;
        incremental.push(start.elapsed());
        expect_incremental(&update)?;
        let (took, _) = batch(&session, &before)?;
        baseline.push(took);
    }
    println!(
        "rule change (one text)        parse:   {}   (YAML → documents, both ways)",
        spread(&mut parse)
    );
    println!(
        "                              session: {}   (set_policy: compares the items)",
        spread(&mut incremental)
    );
    println!(
        "                              batch:   {}",
        spread(&mut baseline)
    );
    // The same change given as the text's bytes: the session keeps how the
    // text was loaded (the first call, untimed, loads it in full) and
    // re-parses only the changed rule item, the parse inside the timing.
    let text_load = TextLoad::default();
    session.apply_policy_text("bench", &cnp("bench", &rules), &text_load)?;
    let mut bytes = Vec::new();
    for run in 0..runs {
        let mut changed = rules.clone();
        changed[0].1 = port(0) + 5_000 + u16::try_from(run % 2).unwrap_or(0);
        let text = cnp("bench", &changed);
        let start = Instant::now();
        let applied = session.apply_policy_text("bench", &text, &text_load)?;
        bytes.push(start.elapsed());
        if !applied.in_place {
            return Err("a one-rule change given as bytes was loaded in full".into());
        }
        expect_incremental(&applied.update)?;
    }
    println!(
        "                              bytes:   {}   (apply_policy_text: the parse included)",
        spread(&mut bytes)
    );

    // A rule's prefix changed in the same text: the text's prefix set
    // loses one and gains one (a CIDR identity goes, one comes).
    prefix_step(&mut session, &rules, runs, "(one text)")?;

    // The same prefix change where every rule allows the same port: one
    // L4 filter holds all 4,096 selectors (the session folds and makes
    // again only the changed rule's, `splice_selectors`); then where no
    // rule names a port, the L3-only filter holding them.
    for (rule_port, label) in [(port(0), "(one port)"), (0, "(no ports)")] {
        let shared: Vec<(usize, u16, bool)> = (0..RULES).map(|i| (i, rule_port, false)).collect();
        let mut session = Session::new(inventory(), CompileLimits::default())?;
        session.apply_policy_text("bench", &cnp("bench", &shared), &text_load)?;
        prefix_step(&mut session, &shared, runs, label)?;
    }
    Ok(())
}
