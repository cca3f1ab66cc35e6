//! Lookup cost of porin's datapath measured by the kernel (`BPF_PROG_TEST_RUN`, through
//! `Datapath::bench`), at 1 rule and at full tables, new flow vs established flow vs reply,
//! always for the worst-placed entry: the measured peer's ipcache and policy entries are
//! inserted last, after the ipcache was padded with /32 entries.
//!
//! A baseline object in the same run: with `PORIN_BENCH_BASELINE_OBJECT=PATH` (e.g. the
//! `include/porin.bpf.o` of an earlier commit, `git show REV:include/porin.bpf.o`), every row
//! also measures that object, filled the way objects before the exact-key hashes were (every
//! entry in the LPM tries, `porin_policy_a` active), on the same packets, interleaved run by
//! run, and the table shows its figures as the "before" columns.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use porin_ebpf::abi::Ipcache4Key;
use porin_ebpf::{ObjectConfig, POLICY_MAP_MIN, emit};
use porin_kernel::packet::Packet;
use porin_kernel::{Datapath, Direction, EventSelection, LoadedObject, SkBuff};

use crate::stats::{Spread, group};
use crate::workload::{self, CLIENT, ECHO_PORT, SERVER};

/// Parameters.
#[derive(Debug, Clone)]
pub struct LookupConfig {
    /// Policy-map sizes in entries (the rule count is derived; the smallest size is 1 rule).
    pub entries: Vec<usize>,
    /// Minimum ipcache entries.
    pub ipcache_entries: usize,
    /// Single-packet runs per new-flow figure (median taken).
    pub new_flow_runs: usize,
    /// Repetitions averaged by the kernel for established/reply.
    pub repeat: u32,
    /// Runs per point.
    pub runs: usize,
}

/// One size's figures over runs.
#[derive(Debug, Clone)]
pub struct LookupRow {
    /// Rules written.
    pub rules: usize,
    /// Policy-map entries.
    pub policy_entries: usize,
    /// Whether the entries were synthesised instead of compiled.
    pub synthesised: bool,
    /// ipcache entries.
    pub ipcache_entries: usize,
    /// New flow ns/packet per run.
    pub new_flow: Vec<f64>,
    /// Established flow ns/packet per run.
    pub established: Vec<f64>,
    /// Reply ns/packet per run.
    pub reply: Vec<f64>,
    /// Denied by default (no entry for the port) ns/packet per run, with the default drop
    /// events (DATAPATH.md §2.6).
    pub denied: Vec<f64>,
    /// The same with events switched off (`porin_config.events`).
    pub denied_quiet: Vec<f64>,
    /// Non-IP (ARP) frame ns/packet per run: program entry, Ethernet parse, counter.
    pub non_ip: Vec<f64>,
    /// The baseline object's figures, when one was given.
    pub before: Option<Figures>,
}

/// New flow, established and denied ns/packet per run, of the baseline object.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// New flow.
    pub new_flow: Vec<f64>,
    /// Established.
    pub established: Vec<f64>,
    /// Denied, no entry.
    pub denied: Vec<f64>,
}

/// The environment variable naming a baseline object.
pub const BASELINE_ENV: &str = "PORIN_BENCH_BASELINE_OBJECT";

/// The environment variable naming an object file measured *instead of* this build's emitted
/// object (an object of the current map layout, filled the same way through `Datapath`, e.g.
/// `git show REV:include/porin.bpf.o`): two objects compared in alternating runs of the same
/// binary. Its maps have the sizes it was built with; a point that does not fit fails.
pub const OBJECT_ENV: &str = "PORIN_BENCH_OBJECT";

/// An object of the layout before the exact-key hashes, driven by map name: every ipcache
/// entry in `porin_ipcache4`, every policy entry in `porin_policy_a` (the zeroed
/// `porin_config` selects it), conntrack `porin_ct`.
struct Baseline {
    object: LoadedObject,
}

impl Baseline {
    fn load(path: &str, policy: &workload::PorinPolicy) -> Result<Self> {
        let bytes = std::fs::read(path).with_context(|| format!("{BASELINE_ENV}={path}"))?;
        let object = LoadedObject::load(&bytes)?;
        let ipcache = object.map("porin_ipcache4")?;
        for (key, value) in &policy.ipcache4 {
            ipcache.update(&key.to_bytes(), &value.to_bytes())?;
        }
        let map = object.map("porin_policy_a")?;
        for (key, value) in &policy.policy {
            map.update(&key.to_bytes(), &value.to_bytes())?;
        }
        Ok(Self { object })
    }

    fn reset_conntrack(&self) -> Result<()> {
        self.object.map("porin_ct")?.clear()?;
        Ok(())
    }

    fn bench(&self, direction: Direction, packet: &[u8], repeat: u32) -> Result<(u32, u32)> {
        let out = self
            .object
            .program(direction.program_name())?
            .test_run_repeat(packet, &SkBuff::default(), repeat)?;
        Ok((out.duration_ns, out.retval))
    }

    fn measure(
        &self,
        request: &[u8],
        denied: &[u8],
        config: &LookupConfig,
        into: &mut Figures,
    ) -> Result<()> {
        self.reset_conntrack()?;
        let (_, verdict) = self.bench(Direction::ToEndpoint, request, 1)?;
        if verdict != porin_kernel::TC_ACT_OK {
            bail!("the baseline object dropped the measured request");
        }
        into.established.push(f64::from(
            self.bench(Direction::ToEndpoint, request, config.repeat)?.0,
        ));
        let (ns, verdict) = self.bench(Direction::ToEndpoint, denied, config.repeat)?;
        if verdict != porin_kernel::TC_ACT_SHOT {
            bail!("the baseline object passed the packet without an entry");
        }
        into.denied.push(f64::from(ns));
        Ok(())
    }
}

fn ipcache_key(addr: std::net::Ipv4Addr) -> Ipcache4Key {
    Ipcache4Key {
        prefixlen: Ipcache4Key::FULL_PREFIX,
        addr: addr.octets(),
    }
}

/// Moves the entry with `key` to the end (inserted last).
fn move_last<K: PartialEq, V>(entries: &mut Vec<(K, V)>, key: &K) -> Result<()> {
    let at = entries
        .iter()
        .position(|(k, _)| k == key)
        .context("measured entry missing")?;
    let entry = entries.remove(at);
    entries.push(entry);
    Ok(())
}

fn rules_for(entries: usize) -> Result<usize> {
    let one = workload::compile_rules(&workload::rules(1, 0)?)?;
    let fixed = one.policy.len() - 1;
    Ok(entries.saturating_sub(fixed).max(1))
}

fn measure_size(entries: usize, config: &LookupConfig) -> Result<LookupRow> {
    let rules = rules_for(entries)?;
    let (mut policy, synthesised) = workload::porin_policy(&workload::rules(rules, 0)?)?;
    // Pad the ipcache with /32s of an existing identity in 10.220.0.0/16 and up.
    let filler = policy.ipcache4.first().map(|(_, v)| *v).unwrap_or_default();
    let mut next = u32::from_be_bytes([10, 220, 0, 0]);
    while policy.ipcache4.len() < config.ipcache_entries {
        policy
            .ipcache4
            .push((ipcache_key(std::net::Ipv4Addr::from(next)), filler));
        next += 1;
    }
    move_last(&mut policy.ipcache4, &ipcache_key(CLIENT))?;
    let client_key = policy
        .policy
        .iter()
        .find(|(k, _)| workload::is_client_ingress(k, policy.client_identity))
        .map(|(k, _)| *k)
        .context("no policy entry for the client")?;
    move_last(&mut policy.policy, &client_key)?;

    let map_size = u32::try_from(policy.policy.len())?.max(POLICY_MAP_MIN);
    let object = emit(&ObjectConfig {
        policy_map_max_entries: map_size.max(ObjectConfig::default().policy_map_max_entries),
        ipcache4_max_entries: u32::try_from(policy.ipcache4.len())?
            .next_power_of_two()
            .max(65_536),
        ..ObjectConfig::default()
    })?;
    let object = match std::env::var(OBJECT_ENV) {
        Ok(path) if !path.is_empty() => {
            std::fs::read(&path).with_context(|| format!("{OBJECT_ENV}={path}"))?
        }
        _ => object,
    };
    let datapath = Datapath::load(&object)?;
    datapath.install_ipcache(&policy.ipcache4, &policy.ipcache6)?;
    datapath.install_policy(&policy.policy)?;
    // The baseline object's maps have its own fixed sizes (the committed object's: 16,384
    // policy entries); a size that does not fit is left out of the comparison.
    let baseline = match std::env::var(BASELINE_ENV) {
        Ok(path) if !path.is_empty() => match Baseline::load(&path, &policy) {
            Ok(baseline) => Some(baseline),
            Err(error) => {
                eprintln!("lookup: baseline object left out at {entries} entries: {error:#}");
                None
            }
        },
        _ => None,
    };

    let mut row = LookupRow {
        rules,
        policy_entries: policy.policy.len(),
        synthesised,
        ipcache_entries: policy.ipcache4.len() + policy.ipcache6.len(),
        new_flow: Vec::new(),
        established: Vec::new(),
        reply: Vec::new(),
        denied: Vec::new(),
        denied_quiet: Vec::new(),
        non_ip: Vec::new(),
        before: baseline.as_ref().map(|_| Figures::default()),
    };
    let denied = Packet::udp4(CLIENT, 40_001, SERVER, ECHO_PORT + 1).build();
    if datapath.decide(Direction::ToEndpoint, &denied)?.passed() {
        bail!("the packet to a port without an entry passed");
    }
    let arp = Packet::non_ip(0x0806, vec![0; 28]).build();
    let request = Packet::udp4(CLIENT, 40_000, SERVER, ECHO_PORT);
    for _ in 0..config.runs {
        let mut singles = Vec::with_capacity(config.new_flow_runs);
        let mut baseline_singles = Vec::with_capacity(config.new_flow_runs);
        for _ in 0..config.new_flow_runs {
            datapath.reset_conntrack()?;
            singles.push(u64::from(datapath.bench(
                Direction::ToEndpoint,
                &request.build(),
                1,
            )?));
            // The baseline's single runs alternate with these, so load changes hit both.
            if let Some(baseline) = &baseline {
                baseline.reset_conntrack()?;
                baseline_singles.push(u64::from(
                    baseline
                        .bench(Direction::ToEndpoint, &request.build(), 1)?
                        .0,
                ));
            }
        }
        singles.sort_unstable();
        row.new_flow
            .push(crate::stats::percentile(&singles, 50.0) as f64);
        if let Some(before) = row.before.as_mut() {
            baseline_singles.sort_unstable();
            before
                .new_flow
                .push(crate::stats::percentile(&baseline_singles, 50.0) as f64);
        }
        // The first packet opened the flow; now the same packet again and again.
        datapath.reset_conntrack()?;
        let verdict = datapath.decide(Direction::ToEndpoint, &request.build())?;
        if !verdict.passed() {
            bail!("the measured request was dropped: {verdict:?}");
        }
        row.established.push(f64::from(datapath.bench(
            Direction::ToEndpoint,
            &request.build(),
            config.repeat,
        )?));
        let reply = request.reply().build();
        if !datapath.decide(Direction::FromEndpoint, &reply)?.passed() {
            bail!("the reply was dropped");
        }
        row.reply.push(f64::from(datapath.bench(
            Direction::FromEndpoint,
            &reply,
            config.repeat,
        )?));
        row.denied.push(f64::from(datapath.bench(
            Direction::ToEndpoint,
            &denied,
            config.repeat,
        )?));
        datapath.set_events(EventSelection {
            drops: false,
            allows: false,
        })?;
        row.denied_quiet.push(f64::from(datapath.bench(
            Direction::ToEndpoint,
            &denied,
            config.repeat,
        )?));
        datapath.set_events(EventSelection::default())?;
        row.non_ip.push(f64::from(datapath.bench(
            Direction::ToEndpoint,
            &arp,
            config.repeat,
        )?));
        if let (Some(baseline), Some(before)) = (&baseline, row.before.as_mut()) {
            baseline.measure(&request.build(), &denied, config, before)?;
        }
    }
    Ok(row)
}

/// Measures every size.
pub fn run(config: &LookupConfig) -> Result<Vec<LookupRow>> {
    config
        .entries
        .iter()
        .map(|entries| {
            eprintln!("lookup: {entries} policy entries");
            measure_size(*entries, config)
        })
        .collect()
}

/// The Markdown table, with the change against the smallest size.
pub fn render(rows: &[LookupRow], config: &LookupConfig) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "BPF_PROG_TEST_RUN on `porin_to_endpoint` (request) and `porin_from_endpoint` (reply), \
         UDP 10.213.0.1 → 10.213.0.2:7000, the measured peer's entries inserted last. New flow: \
         conntrack emptied before each single-packet run, median of {} runs (single runs are \
         coarse: they include the test-run setup). Established / reply: kernel average of {} \
         repetitions; denied = UDP to port 7001 (no entry: ipcache + both policy lookups, no \
         conntrack write); non-IP = an ARP frame (program entry, Ethernet parse, counter). {} \
         run(s) per point: median (min–max). Load average: {}.\n",
        config.new_flow_runs,
        config.repeat,
        config.runs,
        crate::cpu::load_average()
    );
    out.push_str(
        "| rules | policy entries | ipcache entries | new flow (ns/pkt) | established (ns/pkt) | reply (ns/pkt) | denied, no entry (ns/pkt) | non-IP frame (ns/pkt) |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let before_table = render_before(rows);
    let show = |v: &[f64]| Spread::of(v).map_or_else(|| "n/a".to_owned(), |s| s.show(0));
    let base = rows.first();
    for row in rows {
        let change = |pick: fn(&LookupRow) -> &Vec<f64>| {
            let now = Spread::of(pick(row)).map(|s| s.median);
            let then = base.and_then(|b| Spread::of(pick(b))).map(|s| s.median);
            match (now, then) {
                (Some(n), Some(t)) if t > 0.0 && !std::ptr::eq(row, base.unwrap_or(row)) => {
                    format!(" ({:+.1}%)", (n / t - 1.0) * 100.0)
                }
                _ => String::new(),
            }
        };
        let _ = writeln!(
            out,
            "| {} | {}{} | {} | {}{} | {}{} | {}{} | {}{} | {}{} |",
            group(row.rules as f64, 0),
            group(row.policy_entries as f64, 0),
            if row.synthesised { "†" } else { "" },
            group(row.ipcache_entries as f64, 0),
            show(&row.new_flow),
            change(|r| &r.new_flow),
            show(&row.established),
            change(|r| &r.established),
            show(&row.reply),
            change(|r| &r.reply),
            show(&row.denied),
            change(|r| &r.denied),
            show(&row.non_ip),
            change(|r| &r.non_ip),
        );
    }
    out.push_str(
        "\n†: entries synthesised in porin's encoding from a compiled one-rule template (see the \
         end-to-end note).\n",
    );
    out.push_str(&before_table);
    out
}

/// The same run's baseline object against this one, when a baseline was measured: before and
/// now per path, each with its change against the smallest size.
fn render_before(rows: &[LookupRow]) -> String {
    let mut out = String::new();
    if rows.iter().all(|r| r.before.is_none()) {
        return out;
    }
    out.push_str(
        "\nBaseline object (`PORIN_BENCH_BASELINE_OBJECT`, every entry in the LPM tries) vs this \
         object, same run, same packets, interleaved per run:\n\n\
         | policy entries | new flow before | new flow now | established before | established now | denied before | denied now (drop events on, the default) | denied now, events off |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let median = |v: &[f64]| Spread::of(v).map(|s| s.median);
    let base = rows.first();
    let cell = |now: &[f64], first: Option<&[f64]>| -> String {
        let Some(n) = median(now) else {
            return "n/a (does not fit the baseline's maps)".to_owned();
        };
        let Some(spread) = Spread::of(now) else {
            return "n/a".to_owned();
        };
        match first.and_then(median) {
            Some(t) if t > 0.0 && !std::ptr::eq(now, first.unwrap_or(now)) => {
                format!("{} ({:+.1}%)", spread.show(0), (n / t - 1.0) * 100.0)
            }
            _ => spread.show(0),
        }
    };
    let missing = Figures::default();
    for row in rows {
        let before = row.before.as_ref().unwrap_or(&missing);
        let first = base.and_then(|b| b.before.as_ref());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            group(row.policy_entries as f64, 0),
            cell(&before.new_flow, first.map(|f| f.new_flow.as_slice())),
            cell(&row.new_flow, base.map(|b| b.new_flow.as_slice())),
            cell(&before.established, first.map(|f| f.established.as_slice())),
            cell(&row.established, base.map(|b| b.established.as_slice())),
            cell(&before.denied, first.map(|f| f.denied.as_slice())),
            cell(&row.denied, base.map(|b| b.denied.as_slice())),
            cell(&row.denied_quiet, base.map(|b| b.denied_quiet.as_slice())),
        );
    }
    out
}

/// Instruction counts and verifier statistics of both programs (default object).
pub fn program_summary() -> Result<String> {
    let datapath = Datapath::load(&emit(&ObjectConfig::default())?)?;
    let mut out = String::new();
    for direction in [Direction::ToEndpoint, Direction::FromEndpoint] {
        let name = direction.program_name();
        let size = datapath.object().instruction_count(name)?;
        let stats = datapath
            .object()
            .verifier_stats(name)
            .unwrap_or_else(|e| e.to_string());
        let stats = stats.lines().collect::<Vec<_>>().join("; ");
        let _ = writeln!(out, "- `{name}`: {size} instructions; verifier: {stats}");
    }
    Ok(out)
}
