//! `porin diff --flows FILE`: the connection changes of a policy change,
//! weighed by the recorded traffic they change.
//!
//! The recording is resolved against both compilations and each distinct
//! flow decided under both ([`porin_flows::replay::changed_flows`]); a flow
//! whose verdict changes is counted on the connection whose ends name its
//! ends (an endpoint, or an external class's member: `world-ipv4`, `CIDR
//! 203.0.113.0/24`, under either compilation's name) and whose ports
//! before (a closing flow) or after (an opening one) hold its port. The
//! connections are then ordered by the flows they change, busiest first.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use porin_compiler::compile::Compiled;
use porin_connectivity::connections::{ChangeKind, Connection, ConnectivityDiff};
use porin_flows::observe::record;
use porin_flows::reader::ReadLimits;
use porin_flows::replay::{Changed, changed_flows};
use serde_json::json;

use super::replay::thousands;

/// The observed weight of each connection of a diff.
pub struct Weight {
    /// Per connection (by its position after sorting), the changed flows.
    per_connection: BTreeMap<(String, String, String), Tally>,
    /// `in the recording (…): closes 3 edges carrying 12,408 flows, …`.
    pub summary: String,
    closes: (usize, u64),
    narrows: (usize, u64),
    opens: (usize, u64),
    unattributed: u64,
    read: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    flows: u64,
    first: Option<porin_flows::time::Timestamp>,
    last: Option<porin_flows::time::Timestamp>,
}

fn connection_key(c: &Connection) -> (String, String, String) {
    (
        c.from.name.clone(),
        c.to.name.clone(),
        format!("{:?}{:?}", c.before, c.after),
    )
}

fn matches(c: &Connection, flow: &Changed) -> bool {
    let has = |members: &[String], names: &[String; 2]| {
        names.iter().any(|n| members.iter().any(|m| m == n))
    };
    if !has(&c.from.members, &flow.from) || !has(&c.to.members, &flow.to) {
        return false;
    }
    let ranges = if flow.closes { &c.before } else { &c.after };
    ranges
        .iter()
        .any(|(p, lo, hi)| *p == flow.proto && (*lo..=*hi).contains(&flow.port))
}

impl Weight {
    /// The changed flows of a connection.
    pub fn flows_of(&self, c: &Connection) -> u64 {
        self.per_connection
            .get(&connection_key(c))
            .map_or(0, |t| t.flows)
    }

    /// `closes 12,408 recorded flows (first – last)`, for a connection
    /// that changes some.
    pub fn of(&self, c: &Connection) -> Option<String> {
        let tally = self.per_connection.get(&connection_key(c))?;
        if tally.flows == 0 {
            return None;
        }
        let verb = match c.change {
            ChangeKind::Closed => "closes",
            ChangeKind::Opened => "opens",
            ChangeKind::Changed => "changes",
        };
        let when = match (tally.first, tally.last) {
            (Some(a), Some(b)) => format!(" ({a} – {b})"),
            _ => String::new(),
        };
        Some(format!(
            "{verb} {} recorded flows{when}",
            thousands(tally.flows)
        ))
    }

    /// The summary as JSON.
    pub fn summary_json(&self) -> serde_json::Value {
        json!({
            "text": self.summary,
            "flowsRead": self.read,
            "closes": {"edges": self.closes.0, "flows": self.closes.1},
            "narrows": {"edges": self.narrows.0, "flows": self.narrows.1},
            "opens": {"edges": self.opens.0, "flows": self.opens.1},
            "unattributed": self.unattributed,
        })
    }
}

/// Reads the flow files, weighs `diff`'s connections and sorts them,
/// busiest first (ties keep the diff's order).
pub fn weigh(
    files: &[PathBuf],
    old: &Compiled,
    new: &Compiled,
    diff: &mut ConnectivityDiff,
) -> anyhow::Result<Weight> {
    let recording = record(files, &[new, old], ReadLimits::default())
        .map_err(anyhow::Error::msg)
        .context("cannot read the flows")?;
    for p in &recording.problems {
        eprintln!(
            "{}:{}:{}: {}[{}]: {}",
            p.file,
            p.line,
            p.column,
            p.code.severity.as_str(),
            p.code.code,
            p.message
        );
    }
    let changed = changed_flows(&recording, new, old);
    let mut per_connection: BTreeMap<(String, String, String), Tally> = BTreeMap::new();
    let mut unattributed = 0;
    for flow in &changed {
        match diff.connections.iter().find(|c| matches(c, flow)) {
            Some(c) => {
                let t = per_connection.entry(connection_key(c)).or_default();
                t.flows += flow.flows;
                t.first = match (t.first, flow.first) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                t.last = match (t.last, flow.last) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
            None => unattributed += flow.flows,
        }
    }
    let weight_of = |c: &Connection| {
        per_connection
            .get(&connection_key(c))
            .map_or(0, |t| t.flows)
    };
    diff.connections
        .sort_by_key(|c| std::cmp::Reverse(weight_of(c)));
    // Per kind of change: edges that change recorded flows, and the flows.
    let mut tallies = [(0usize, 0u64); 3];
    for c in &diff.connections {
        let n = weight_of(c);
        if n == 0 {
            continue;
        }
        let slot = &mut tallies[c.change as usize];
        slot.0 += 1;
        slot.1 += n;
    }
    let [opens, narrows, closes] = tallies;
    let edges = |n: usize| if n == 1 { "edge" } else { "edges" };
    let flows = |n: u64| if n == 1 { "flow" } else { "flows" };
    let mut parts: Vec<String> = [("closes", closes), ("narrows", narrows), ("opens", opens)]
        .into_iter()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(verb, (n, f))| {
            format!(
                "{verb} {n} {} carrying {} {}",
                edges(n),
                thousands(f),
                flows(f)
            )
        })
        .collect();
    if parts.is_empty() {
        parts.push("no recorded flow changes verdict".to_owned());
    }
    if unattributed > 0 {
        parts.push(format!(
            "{} changed {} on no listed connection",
            thousands(unattributed),
            flows(unattributed)
        ));
    }
    let read = recording.decided();
    Ok(Weight {
        summary: format!(
            "in the recording ({} flows decided): {}",
            thousands(read),
            parts.join(", ")
        ),
        per_connection,
        closes,
        narrows,
        opens,
        unattributed,
        read,
    })
}
