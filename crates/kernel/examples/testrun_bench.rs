//! Nanoseconds per packet of porin's datapath, measured by the kernel with
//! `BPF_PROG_TEST_RUN` (`repeat`), printed as a Markdown table.
//!
//! Run as root: `cargo run --release -p porin-kernel --example testrun_bench`.
//! Columns: policy map sizes 1 / 4,096 / 65,536 entries with an ipcache of 8,000 /32 entries;
//! rows: a new flow (conntrack cleared before each run, one packet each, median over runs), an
//! established flow (the same allowed packet repeated), and a reply of a tracked flow.

use std::net::Ipv4Addr;

use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{Entry, Key};
use porin_ebpf::abi::{Ipcache4Key, Ipcache4Pair, IpcacheValue, PolicyPair, policy_pair};
use porin_ebpf::{ObjectConfig, emit};
use porin_kernel::packet::Packet;
use porin_kernel::{Datapath, Direction};

const POD: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 10);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
const CLIENT_ID: u32 = 50_000;
const IPCACHE_ENTRIES: u32 = 8_000;
const POLICY_SIZES: [u32; 3] = [1, 4_096, 65_536];
/// Repetitions per established/reply measurement (the kernel averages them).
const REPEAT: u32 = 20_000;
/// Single-packet runs per new-flow measurement (median taken).
const NEW_FLOW_RUNS: u16 = 2_000;

type Error = Box<dyn std::error::Error>;

/// An exact ingress allow of (identity, proto, dport).
fn allow(identity: u32, proto: u8, dport: u16) -> Result<PolicyPair, Error> {
    let key = Key::ingress()
        .with_identity(Identity::new(identity)?)
        .with_port_proto(proto, dport)?;
    Ok(policy_pair(&key, &Entry::allow()))
}

/// `count` distinct exact TCP allow entries, the measured one (CLIENT_ID, TCP 80) among them.
fn policy(count: u32) -> Result<Vec<PolicyPair>, Error> {
    let mut entries = vec![allow(CLIENT_ID, 6, 80)?];
    let mut index = 0u32;
    while entries.len() < count as usize {
        let identity = 1_000 + index / 1_000;
        let port = u16::try_from(1 + index % 1_000).unwrap_or(1);
        entries.push(allow(identity, 6, port)?);
        index += 1;
    }
    Ok(entries)
}

/// 8,000 /32 entries in 10.0.0.0/8, the client among them, plus 0.0.0.0/0 -> world.
fn ipcache() -> Result<Vec<Ipcache4Pair>, Error> {
    let entry = |addr: Ipv4Addr, prefix: u8, identity: u32| -> Result<Ipcache4Pair, Error> {
        let value = IpcacheValue::new(Identity::new(identity)?);
        Ok((Ipcache4Key::new(prefix, addr)?, value))
    };
    let mut entries = vec![
        entry(CLIENT, 32, CLIENT_ID)?,
        entry(Ipv4Addr::UNSPECIFIED, 0, 9)?,
    ];
    for i in 0..IPCACHE_ENTRIES - 2 {
        let [_, b, c, d] = (0x0a01_0000u32 + i).to_be_bytes();
        entries.push(entry(Ipv4Addr::new(10, b, c, d), 32, 1_000 + i % 1_000)?);
    }
    Ok(entries)
}

fn median(mut values: Vec<u32>) -> u32 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

struct Row {
    entries: u32,
    new_flow: u32,
    established: u32,
    reply: u32,
}

fn measure(entries: u32) -> Result<Row, Box<dyn std::error::Error>> {
    let config = ObjectConfig {
        policy_map_max_entries: entries.max(porin_ebpf::POLICY_MAP_MIN),
        ..ObjectConfig::default()
    };
    let datapath = Datapath::load(&emit(&config)?)?;
    datapath.install_ipcache(&ipcache()?, &[])?;
    datapath.install_policy(&policy(entries)?)?;
    let program = datapath.program(Direction::ToEndpoint)?;
    let ctx = porin_kernel::SkBuff::default();

    // New flow: every run sees an empty conntrack table and a fresh tuple.
    let mut new_flow = Vec::new();
    for sport in 0..NEW_FLOW_RUNS {
        datapath.reset_conntrack()?;
        let packet = Packet::tcp4(CLIENT, 10_000 + sport, POD, 80).build();
        let out = program.test_run_repeat(&packet, &ctx, 1)?;
        if out.retval != 0 {
            return Err(format!("the measured flow was dropped (retval {})", out.retval).into());
        }
        new_flow.push(out.duration_ns);
    }

    // Established: the first packet creates the flow, then the kernel averages REPEAT runs.
    datapath.reset_conntrack()?;
    let syn = Packet::tcp4(CLIENT, 40_000, POD, 80);
    program.test_run(&syn.build(), &ctx)?;
    let established = program
        .test_run_repeat(&syn.build(), &ctx, REPEAT)?
        .duration_ns;
    let reply = datapath.program(Direction::FromEndpoint)?.test_run_repeat(
        &syn.reply().build(),
        &ctx,
        REPEAT,
    )?;
    if reply.retval != 0 {
        return Err("the reply was dropped".into());
    }
    Ok(Row {
        entries,
        new_flow: median(new_flow),
        established,
        reply: reply.duration_ns,
    })
}

fn main() {
    if let Err(error) = porin_kernel::probe() {
        let reason = if error.is_unavailable() {
            "needs root (CAP_BPF)"
        } else {
            "bpf unavailable"
        };
        eprintln!("SKIPPED: testrun_bench {reason}: {error}");
        return;
    }
    match emit(&ObjectConfig::default())
        .map_err(|e| e.to_string())
        .and_then(|bytes| Datapath::load(&bytes).map_err(|e| e.to_string()))
    {
        Ok(datapath) => {
            for direction in [Direction::FromEndpoint, Direction::ToEndpoint] {
                let name = direction.program_name();
                let size = datapath.object().instruction_count(name).unwrap_or(0);
                let stats = datapath
                    .object()
                    .verifier_stats(name)
                    .unwrap_or_else(|e| e.to_string());
                let stats = stats.lines().collect::<Vec<_>>().join("; ");
                println!("- `{name}`: {size} instructions; verifier: {stats}");
            }
            println!();
        }
        Err(error) => eprintln!("cannot load the default object: {error}"),
    }
    println!(
        "| policy entries | ipcache entries | new flow (ns/pkt, median of {NEW_FLOW_RUNS}) | established (ns/pkt, avg of {REPEAT}) | reply (ns/pkt, avg of {REPEAT}) |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for entries in POLICY_SIZES {
        match measure(entries) {
            Ok(row) => println!(
                "| {} | {IPCACHE_ENTRIES} | {} | {} | {} |",
                row.entries, row.new_flow, row.established, row.reply
            ),
            Err(error) => {
                eprintln!("measurement at {entries} entries failed: {error}");
                std::process::exit(1);
            }
        }
    }
}
