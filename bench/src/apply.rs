//! Apply cost: how long porin takes to put a new policy into the kernel, whole or as a
//! difference, next to what the chains take to load the same rules.
//!
//! - whole policy, one `bpf(BPF_MAP_UPDATE_ELEM)` per entry into the live (active) map, plus one
//!   delete per entry that disappears (not atomic: packets see a mix while it runs);
//! - whole policy through the atomic switch: clear and fill the inactive map, flip
//!   `porin_config` (DATAPATH.md §2.3; the 100 ms retire grace period is waited out before the
//!   clock starts, it is not part of the figure);
//! - a one-rule change applied as a difference: only the added, changed and deleted entries are
//!   written, into the live map (the difference itself is computed inside the timed part);
//! - porin recompiling the changed CNP (the step before any apply);
//! - the chains: `iptables-nft-restore` and `nft -f` of the same rules in a fresh namespace, and
//!   a one-rule change (`iptables -R`, `nft replace rule`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use porin_ebpf::abi::{PolicyEntry as AbiEntry, PolicyKey};
use porin_ebpf::{ObjectConfig, emit};
use porin_kernel::Datapath;
use porin_kernel::datapath::RETIRE_GRACE;

use crate::rig::Rig;
use crate::stats::{Spread, group};
use crate::workload::{self, PolicyEntry};

/// Parameters.
#[derive(Debug, Clone)]
pub struct ApplyConfig {
    /// Rules in the policy (porin writes one entry per rule plus its fixed entries).
    pub rules: usize,
    /// Runs per figure.
    pub runs: usize,
}

/// One measured operation.
#[derive(Debug, Clone)]
pub struct ApplyRow {
    /// What was done.
    pub operation: String,
    /// Entries (or rules) written per run.
    pub entries: usize,
    /// Seconds per run.
    pub seconds: Vec<f64>,
}

/// The entries to add or change and the keys to delete, turning `old` into `new`.
pub fn difference(old: &[PolicyEntry], new: &[PolicyEntry]) -> (Vec<PolicyEntry>, Vec<PolicyKey>) {
    let before: BTreeMap<PolicyKey, AbiEntry> = old.iter().copied().collect();
    let after: BTreeMap<PolicyKey, AbiEntry> = new.iter().copied().collect();
    let upserts = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, v)| (*k, *v))
        .collect();
    let deletes = before
        .keys()
        .filter(|k| !after.contains_key(*k))
        .copied()
        .collect();
    (upserts, deletes)
}

/// The active slot's two maps (exact-key hash and prefix trie, DATAPATH.md §2.2): every write
/// below goes to the map that holds its key, as `Datapath::apply_policy_diff` does. (These
/// writes measure the cost of the bpf(2) calls; the verdicts are not probed here, so the
/// slot's `prefix_free` bit, which `apply_policy_diff` clears before a trie write, is left
/// as the fill set it.)
fn active_maps(datapath: &Datapath) -> Result<porin_kernel::apply::SlotMaps<'_>> {
    let slot = datapath.active_slot()?;
    Ok(datapath.slot_maps(slot)?)
}

/// Writes `new` into the live map entry by entry (deleting what `old` had and `new` lacks).
fn replace_in_place(
    datapath: &Datapath,
    old: &[PolicyEntry],
    new: &[PolicyEntry],
) -> Result<usize> {
    let maps = active_maps(datapath)?;
    let keep: std::collections::BTreeSet<PolicyKey> = new.iter().map(|(k, _)| *k).collect();
    let mut calls = 0;
    for (key, value) in new {
        maps.for_key(key)
            .update(&key.to_bytes(), &value.to_bytes())?;
        calls += 1;
    }
    for (key, _) in old {
        if !keep.contains(key) {
            maps.for_key(key).delete(&key.to_bytes())?;
            calls += 1;
        }
    }
    Ok(calls)
}

fn apply_difference(
    datapath: &Datapath,
    old: &[PolicyEntry],
    new: &[PolicyEntry],
) -> Result<usize> {
    let (upserts, deletes) = difference(old, new);
    let maps = active_maps(datapath)?;
    for (key, value) in &upserts {
        maps.for_key(key)
            .update(&key.to_bytes(), &value.to_bytes())?;
    }
    for key in &deletes {
        maps.for_key(key).delete(&key.to_bytes())?;
    }
    Ok(upserts.len() + deletes.len())
}

fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(f64, T)> {
    let start = Instant::now();
    let value = f()?;
    Ok((start.elapsed().as_secs_f64(), value))
}

/// Runs every apply measurement.
pub fn run(config: &ApplyConfig) -> Result<Vec<ApplyRow>> {
    let rules_a = workload::rules(config.rules, 0)?;
    let rules_b = workload::rules(config.rules, 1)?;
    let mut rules_c = rules_a.clone();
    if let Some(first) = rules_c.first_mut().filter(|_| config.rules > 1) {
        first.port = first.port.wrapping_add(5_000);
    }
    let policy_a = workload::compile_rules(&rules_a)?;
    let policy_b = workload::compile_rules(&rules_b)?;
    let entries = policy_a.policy.len();
    let datapath = Datapath::load(&emit(&ObjectConfig::default())?)?;
    datapath.install_ipcache(&policy_a.ipcache4, &policy_a.ipcache6)?;

    let mut rows = vec![
        ApplyRow {
            operation: "porin: whole policy, one syscall per entry into the live map".into(),
            entries: 0,
            seconds: vec![],
        },
        ApplyRow {
            operation: "porin: whole policy, atomic switch (clear + fill inactive map, flip)"
                .into(),
            entries: 0,
            seconds: vec![],
        },
        ApplyRow {
            operation: "porin: one-rule change as a difference (live map)".into(),
            entries: 0,
            seconds: vec![],
        },
        ApplyRow {
            operation: format!(
                "porin: recompile the changed CNP ({} rules, YAML → entries)",
                config.rules
            ),
            entries,
            seconds: vec![],
        },
    ];
    for run in 0..config.runs {
        eprintln!("apply: run {}/{}", run + 1, config.runs);
        // Start from policy A in the active slot; wait out the retire grace period first.
        std::thread::sleep(RETIRE_GRACE + Duration::from_millis(20));
        datapath.install_policy(&policy_a.policy)?;
        let (secs, calls) =
            timed(|| replace_in_place(&datapath, &policy_a.policy, &policy_b.policy))?;
        rows[0].seconds.push(secs);
        rows[0].entries = calls;

        std::thread::sleep(RETIRE_GRACE + Duration::from_millis(20));
        let (secs, ()) = timed(|| {
            datapath
                .install_policy(&policy_a.policy)
                .map(drop)
                .map_err(Into::into)
        })?;
        rows[1].seconds.push(secs);
        rows[1].entries = policy_a.policy.len();

        let (compile_secs, policy_c) = timed(|| workload::compile_rules(&rules_c))?;
        rows[3].seconds.push(compile_secs);
        let (secs, written) =
            timed(|| apply_difference(&datapath, &policy_a.policy, &policy_c.policy))?;
        rows[2].seconds.push(secs);
        rows[2].entries = written;
        // The live map now holds exactly policy C.
        let live: Vec<PolicyEntry> = datapath.policy_entries(datapath.active_slot()?)?;
        let mut expected = policy_c.policy.clone();
        expected.sort_by_key(|(k, _)| k.to_bytes());
        anyhow::ensure!(
            live == expected,
            "the difference did not produce the new policy"
        );
    }
    rows.extend(chain_rows(config, &rules_a, &rules_c)?);
    Ok(rows)
}

fn chain_rows(
    config: &ApplyConfig,
    rules: &[workload::Rule],
    changed: &[workload::Rule],
) -> Result<Vec<ApplyRow>> {
    let rig = Rig::new(1)?;
    let restore = workload::iptables_restore(rules);
    let script = workload::nft_script(rules);
    let n = rules.len();
    let mut rows = vec![
        ApplyRow {
            operation: "iptables-nft-restore: whole ruleset".into(),
            entries: n,
            seconds: vec![],
        },
        ApplyRow {
            operation: "nft -f: whole ruleset".into(),
            entries: n,
            seconds: vec![],
        },
        ApplyRow {
            operation: "iptables-nft -R: replace one rule".into(),
            entries: 1,
            seconds: vec![],
        },
        ApplyRow {
            operation: "nft replace rule: replace one rule".into(),
            entries: 1,
            seconds: vec![],
        },
    ];
    let first = changed.first().context("no rules")?;
    for _ in 0..config.runs {
        rig.flush_netfilter()?;
        let (secs, ()) = timed(|| rig.install_iptables(&restore))?;
        rows[0].seconds.push(secs);
        let spec = format!(
            "-s {}/32 -p udp -m udp --dport {} -j ACCEPT",
            first.peer, first.port
        );
        let mut args = vec!["-R", "INPUT", "1"];
        args.extend(spec.split_whitespace());
        let (secs, _) =
            timed(|| crate::cmd::in_netns(&rig.ns_server, "iptables-nft", &args, None))?;
        rows[2].seconds.push(secs);
        rig.flush_netfilter()?;
        let (secs, ()) = timed(|| rig.install_nft(&script))?;
        rows[1].seconds.push(secs);
        let listing = crate::cmd::in_netns(
            &rig.ns_server,
            "nft",
            &["-a", "list", "chain", "ip", workload::NFT_TABLE, "input"],
            None,
        )?;
        let handle = listing
            .lines()
            .find_map(|l| {
                l.contains(" accept")
                    .then(|| l.rsplit("# handle ").next())?
            })
            .map(str::trim)
            .context("no rule handle in the nft listing")?
            .to_owned();
        let rule = format!("ip saddr {} udp dport {} accept", first.peer, first.port);
        let mut args = vec![
            "replace",
            "rule",
            "ip",
            workload::NFT_TABLE,
            "input",
            "handle",
            handle.as_str(),
        ];
        args.extend(rule.split_whitespace());
        let (secs, _) = timed(|| crate::cmd::in_netns(&rig.ns_server, "nft", &args, None))?;
        rows[3].seconds.push(secs);
    }
    rig.flush_netfilter()?;
    Ok(rows)
}

/// The Markdown table.
pub fn render(rows: &[ApplyRow], config: &ApplyConfig) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A policy of {} rules (porin: the same rules compiled to policy-map entries). {} run(s): \
         median (min–max). The chains' figures include starting the tool (`nsenter` + process \
         start, about a millisecond); porin's are in-process `bpf(2)` calls. Load average: {}.\n",
        group(config.rules as f64, 0),
        config.runs,
        crate::cpu::load_average()
    );
    out.push_str("| operation | entries / rules written | time (ms) | entries per second |\n|---|---:|---:|---:|\n");
    for row in rows {
        let ms: Vec<f64> = row.seconds.iter().map(|s| s * 1e3).collect();
        let spread = Spread::of(&ms);
        let rate = spread.filter(|s| s.median > 0.0).map_or_else(
            || "n/a".to_owned(),
            |s| group(row.entries as f64 / (s.median / 1e3), 0),
        );
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            row.operation,
            group(row.entries as f64, 0),
            spread.map_or_else(|| "n/a".to_owned(), |s| s.show(2)),
            rate
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difference_lists_only_what_changed() {
        let key = |k: u32| PolicyKey {
            identity: k,
            ..PolicyKey::default()
        };
        let e = |k: u32, v: u32| {
            let value = AbiEntry {
                precedence: v,
                ..AbiEntry::default()
            };
            (key(k), value)
        };
        let old = vec![e(1, 1), e(2, 2), e(3, 3)];
        let new = vec![e(1, 1), e(2, 9), e(4, 4)];
        let (upserts, deletes) = difference(&old, &new);
        assert_eq!(upserts, vec![e(2, 9), e(4, 4)]);
        assert_eq!(deletes, vec![key(3)]);
        assert_eq!(difference(&old, &old), (vec![], vec![]));
    }
}
