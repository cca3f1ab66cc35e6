//! A recording: the distinct flows of one or more flow files, each with
//! its count and first/last time, its ends resolved against one or two
//! compilations ([`crate::resolve`]).
//!
//! A file of millions of lines holds few distinct flows: a flow is keyed
//! by its ends as peers (an endpoint, or the identity of an address, not
//! the address), protocol, destination port, family, the direction the
//! event reports and what Cilium decided; source ports, times and payloads
//! are folded into counts. Memory is bounded by the distinct flows, not by
//! the lines, and each distinct flow is decided once.
//!
//! Two compilations (a policy change: old and new, or current and
//! proposed) share the inventory, so the endpoints are the same, but an
//! address may carry a CIDR identity in one and the world in the other:
//! each end is resolved against both, and the key holds both.

use std::collections::{BTreeMap, HashMap};
use std::io::BufReader;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use porin_compiler::compile::Compiled;
use porin_compiler::explain::Family;

use crate::reader::{Classified, FlowReader, RawLine, ReadLimits, ReadStats, classify};

/// Most lines parsed together.
const BATCH_LINES: usize = 8192;
/// Most bytes of lines parsed together (8 MiB).
const BATCH_BYTES: usize = 8 << 20;
use crate::record::{FlowRecord, Recorded, TrafficDirection};
use crate::resolve::{PeerKey, Resolved, Resolver};
use crate::time::Timestamp;

/// The distinct flow of a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowKey {
    /// The source, per compilation (both equal with one compilation).
    pub from: [PeerKey; 2],
    /// The destination, per compilation.
    pub to: [PeerKey; 2],
    /// IP protocol.
    pub proto: u8,
    /// Destination port (ICMP type).
    pub port: u16,
    /// Address family.
    pub family: Family,
    /// Which endpoint's policy the events report.
    pub direction: TrafficDirection,
    /// What Cilium decided.
    pub recorded: Recorded,
}

/// Most policy names kept per distinct flow (Hubble's `*_allowed_by`).
const MAX_CITED: usize = 4;

/// What the recording holds of one distinct flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Events.
    pub count: u64,
    /// First and last time (events without a time are counted, not timed).
    pub first: Option<Timestamp>,
    /// Last time.
    pub last: Option<Timestamp>,
    /// The addresses of the first event (a representative packet).
    pub from_ip: IpAddr,
    /// Destination address of the first event.
    pub to_ip: IpAddr,
    /// The policies Hubble cites (`*_allowed_by`, `*_denied_by`), at most
    /// a few, in first-seen order.
    pub cited: Vec<String>,
    /// File (index into [`Recording::files`]) and line of the first event.
    pub at: (usize, u64),
    /// The distinct addresses of each end that is no endpoint (an
    /// endpoint's are the inventory's), at most [`MAX_ADDRESSES`] each:
    /// `porin suggest` allows exactly these.
    pub addresses: [Addresses; 2],
}

/// Most distinct addresses kept per end of a distinct flow.
pub const MAX_ADDRESSES: usize = 64;

/// The addresses seen at one end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addresses {
    /// Up to [`MAX_ADDRESSES`], sorted.
    pub kept: std::collections::BTreeSet<IpAddr>,
    /// Whether more were seen than kept.
    pub overflow: bool,
}

impl Addresses {
    fn add(&mut self, ip: IpAddr) {
        if self.kept.len() < MAX_ADDRESSES || self.kept.contains(&ip) {
            self.kept.insert(ip);
        } else {
            self.overflow = true;
        }
    }
}

/// A rejected line, or a flow end no endpoint matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: String,
    /// The line (1-based).
    pub line: u64,
    /// The column (1-based).
    pub column: usize,
    /// The code (`PF001`, `PF002`, `PF003`).
    pub code: porin_model::CodeInfo,
    /// What is wrong.
    pub message: String,
}

/// Most problems kept with their text (all are counted).
pub const MAX_PROBLEMS: usize = 200;

/// The flows of a set of files.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// The files, in the order read.
    pub files: Vec<String>,
    /// The distinct flows.
    pub flows: BTreeMap<FlowKey, Seen>,
    /// What the reader counted, over every file.
    pub stats: ReadStats,
    /// Flows with an end no endpoint matches (not decided).
    pub unmapped: u64,
    /// Flows that are no policy decision, by verdict (and drop reason):
    /// `DROPPED (CT_MAP_INSERTION_FAILED)`, `TRACED`.
    pub not_policy: BTreeMap<String, u64>,
    /// The first [`MAX_PROBLEMS`] rejected lines and unmapped ends.
    pub problems: Vec<Problem>,
    /// Problems past [`MAX_PROBLEMS`], counted only.
    pub more_problems: u64,
}

impl Recording {
    /// Flows decided (the sum of the distinct flows' counts).
    pub fn decided(&self) -> u64 {
        self.flows.values().map(|s| s.count).sum()
    }

    fn problem(&mut self, problem: Problem) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(problem);
        } else {
            self.more_problems += 1;
        }
    }
}

/// Reads flow files into a recording whose ends are resolved against
/// `compilations` (one or two, of the same inventory). An unreadable file
/// is an error (naming it); a malformed line is a [`Problem`].
pub fn record(
    files: &[PathBuf],
    compilations: &[&Compiled],
    limits: ReadLimits,
) -> Result<Recording, String> {
    let mut resolvers: Vec<Resolver<'_>> = compilations.iter().map(|c| Resolver::new(c)).collect();
    if resolvers.is_empty() || resolvers.len() > 2 {
        return Err("a recording is resolved against one or two compilations".to_owned());
    }
    let mut recording = Recording::default();
    let mut index: HashMap<FlowKey, Seen> = HashMap::new();
    for path in files {
        read_file(path, &mut resolvers, limits, &mut recording, &mut index)?;
    }
    recording.flows = index.into_iter().collect();
    Ok(recording)
}

fn open(path: &Path) -> Result<Box<dyn std::io::BufRead>, String> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            std::io::stdin(),
        )));
    }
    let file =
        std::fs::File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
}

fn read_file(
    path: &Path,
    resolvers: &mut [Resolver<'_>],
    limits: ReadLimits,
    recording: &mut Recording,
    index: &mut HashMap<FlowKey, Seen>,
) -> Result<(), String> {
    let display = if path.as_os_str() == "-" {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    };
    let file_index = recording.files.len();
    recording.files.push(display.clone());
    use rayon::prelude::*;
    let mut reader = FlowReader::new(open(path)?, limits);
    let mut stats = ReadStats::default();
    let mut batch: Vec<RawLine> = Vec::with_capacity(BATCH_LINES);
    loop {
        // A batch is bounded in lines and bytes, so memory stays that of a
        // few MiB of lines whatever the file's length.
        batch.clear();
        let mut bytes = 0;
        while batch.len() < BATCH_LINES && bytes < BATCH_BYTES {
            let Some(raw) = reader.next_raw() else {
                break;
            };
            if let RawLine::Line(_, line) = &raw {
                bytes += line.len();
            }
            batch.push(raw);
        }
        if batch.is_empty() {
            break;
        }
        let max = reader.limits().max_line_bytes;
        let parsed: Vec<Classified> = batch.par_iter().map(|raw| classify(raw, max)).collect();
        for item in parsed {
            stats.account(&item);
            match item {
                Classified::Rejected(e) => recording.problem(Problem {
                    file: display.clone(),
                    line: e.line,
                    column: e.column,
                    code: e.code,
                    message: e.message,
                }),
                Classified::Flow(line, flow) => {
                    observe(
                        &flow,
                        (file_index, line),
                        &display,
                        resolvers,
                        recording,
                        index,
                    );
                }
                Classified::Skipped(_) | Classified::Blank => {}
            }
        }
    }
    if let Some(e) = reader.take_io_error() {
        return Err(format!("{display}: cannot read: {e}"));
    }
    recording.stats.add(&stats);
    Ok(())
}

fn observe(
    flow: &FlowRecord,
    at: (usize, u64),
    file: &str,
    resolvers: &mut [Resolver<'_>],
    recording: &mut Recording,
    index: &mut HashMap<FlowKey, Seen>,
) {
    let Some(recorded) = flow.recorded() else {
        let what = match &flow.drop_reason {
            Some(reason) => format!("{} ({reason})", flow.verdict),
            None => flow.verdict.to_string(),
        };
        *recording.not_policy.entry(what).or_default() += 1;
        return;
    };
    let (Some(from_ip), Some(to_ip)) = (flow.source.ip, flow.destination.ip) else {
        return;
    };
    let mut from = [PeerKey::Reserved(0); 2];
    let mut to = [PeerKey::Reserved(0); 2];
    for (i, resolver) in resolvers.iter_mut().enumerate() {
        for (end, slot) in [
            (&flow.source, &mut from[i]),
            (&flow.destination, &mut to[i]),
        ] {
            match resolver.resolve(end) {
                Resolved::Peer(key) => *slot = key,
                Resolved::Unmapped(why) => {
                    recording.unmapped += 1;
                    recording.problem(Problem {
                        file: file.to_owned(),
                        line: at.1,
                        column: 1,
                        code: crate::codes::UNMAPPED_END,
                        message: format!("{why}: the flow is not decided"),
                    });
                    return;
                }
            }
        }
    }
    if resolvers.len() == 1 {
        from[1] = from[0];
        to[1] = to[0];
    }
    let key = FlowKey {
        from,
        to,
        proto: flow.l4.proto,
        port: flow.l4.port,
        family: Family::of(from_ip),
        direction: flow.direction,
        recorded,
    };
    let seen = index.entry(key).or_insert_with(|| Seen {
        count: 0,
        first: None,
        last: None,
        from_ip,
        to_ip,
        cited: Vec::new(),
        at,
        addresses: Default::default(),
    });
    seen.count += 1;
    for (i, (peer, ip)) in [(from[0], from_ip), (to[0], to_ip)].into_iter().enumerate() {
        if !matches!(peer, PeerKey::Endpoint(_)) {
            seen.addresses[i].add(ip);
        }
    }
    if let Some(time) = flow.time {
        seen.first = Some(seen.first.map_or(time, |t| t.min(time)));
        seen.last = Some(seen.last.map_or(time, |t| t.max(time)));
    }
    let cited = match recorded {
        Recorded::Allowed => &flow.allowed_by,
        Recorded::Denied => &flow.denied_by,
    };
    for policy in cited {
        if seen.cited.len() >= MAX_CITED {
            break;
        }
        let name = policy.to_string();
        if !seen.cited.contains(&name) {
            seen.cited.push(name);
        }
    }
}
