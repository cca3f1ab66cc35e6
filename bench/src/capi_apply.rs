//! The one-rule change through the C API itself (issue #14): bytes in
//! (`porin_session_apply_policy_bytes` with the whole new text), update
//! out (every endpoint's writes read with `porin_update_get`,
//! `porin_update_diff`, `porin_diff_get`, the way an agent hands them to
//! the kernel), timed around the C calls. Runs in a child process
//! (`role capi-child`).
//!
//! The shape is [`crate::incremental`]'s: one CNP with `rules` ingress
//! rules ([`policy_yaml`]), the server and 256 client pods. Two live
//! sessions in the same process, stepped alternately: one as the C API
//! ships (the in-place re-parse of `porin_model::reparse`), one with the
//! re-parse off (`porin::session::set_reparse`, every text loaded in full,
//! what the C API did before): the same-run baseline. Each session's runs
//! come in a block, full loads after a pause ([`child`]). Steps:
//!
//! - **rule change**: rule 0's port toggled between 9999 and 10000 (and,
//!   in place only, the last rule's port: the edit at the text's end);
//! - **fallback**: the same toggle on a text whose rule 0 carries an
//!   anchor (`&r`), which the re-parse leaves to the full load: what an
//!   edit it does not handle costs;
//! - **identity add** after a pause, on the in-place session, and on the
//!   full-load session after each full load (the replaced text freed
//!   during the pause).

use std::ptr::null_mut;
use std::time::Instant;

use anyhow::{Result, bail};
use porin::compilation::{
    porin_change, porin_diff, porin_diff_count, porin_diff_free, porin_diff_get,
};
use porin::result::porin_result;
use porin::session::{
    applied_in_place, porin_endpoint_delta, porin_label, porin_session,
    porin_session_add_inventory_bytes, porin_session_apply_endpoint_add,
    porin_session_apply_endpoint_remove, porin_session_apply_policy_bytes, porin_session_free,
    porin_session_new, porin_update, porin_update_count, porin_update_diff, porin_update_free,
    porin_update_get, set_reparse,
};
use porin::strings::porin_str;
use serde::{Deserialize, Serialize};

use crate::incremental::{
    CLIENTS, groups_yaml, policy_yaml, with_cidr_rule_inserted_before, with_log,
    with_new_peer_rule_first, with_port_added, with_rule_inserted, with_rule_inserted_before,
};

const NAME: &str = "server.yaml";

/// Seconds of each run of one step, per session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CapiApplyResult {
    /// Rules in the policy.
    pub rules: usize,
    /// Bytes of the policy text.
    pub text_bytes: usize,
    /// Rule change, in place (as shipped): the apply call alone.
    pub in_place_apply: Vec<f64>,
    /// Rule change, in place: apply, read every write, free.
    pub in_place_total: Vec<f64>,
    /// Rule change, re-parse off (full load): apply alone.
    pub full_apply: Vec<f64>,
    /// Rule change, re-parse off: apply, read every write, free.
    pub full_total: Vec<f64>,
    /// The last rule's port toggled instead (the edit at the text's end:
    /// the longest common prefix), in place: total.
    #[serde(default)]
    pub in_place_last_total: Vec<f64>,
    /// A second port added to the middle rule on lines of its own and
    /// taken out again (`with_port_added`: every later rule's line moves),
    /// in place: total. Empty from builds before session 16.
    #[serde(default)]
    pub in_place_port_line_total: Vec<f64>,
    /// A rule inserted before the middle rule and taken out again
    /// (`with_rule_inserted_before`: every later rule moves one place), in
    /// place: total. Empty from builds before session 16.
    #[serde(default)]
    pub in_place_insert_total: Vec<f64>,
    /// A rule inserted before rule 0 and taken out again
    /// (`with_rule_inserted`: every rule moves one place, and client-5's
    /// first use comes before client-0's, so the session numbers the peer
    /// selectors again), in place: total. Empty from builds before
    /// session 17.
    #[serde(default)]
    pub in_place_front_insert_total: Vec<f64>,
    /// A rule whose peer no rule names inserted before rule 0 and taken
    /// out again (`with_new_peer_rule_first`: every peer selector is
    /// numbered one later), in place: total. Empty from builds before
    /// session 23.
    #[serde(default)]
    pub in_place_front_new_peer_total: Vec<f64>,
    /// A rule from a CIDR prefix no rule names inserted before the middle
    /// rule and taken out again (`with_cidr_rule_inserted_before`: its CIDR
    /// identity comes and goes), in place: total. Empty from builds before
    /// session 21.
    #[serde(default)]
    pub in_place_cidr_insert_total: Vec<f64>,
    /// Rule 0's port toggled in place as in `in_place_total`, with a text of
    /// two CiliumCIDRGroups (`groups.yaml`, [`groups_yaml`]) beside the
    /// policy and the policy carrying `log: {value: audit}`
    /// ([`with_log`]): total. Run last. Empty from builds before session
    /// 22 (which recompiled every change of such a session in full).
    #[serde(default)]
    pub in_place_groups_log_total: Vec<f64>,
    /// The anchored text's toggle, re-parse on (it falls back): total.
    pub fallback_total: Vec<f64>,
    /// The anchored text's toggle, re-parse off: total.
    pub fallback_full_total: Vec<f64>,
    /// Writes of the last rule change (the same on both sessions).
    pub writes: usize,
    /// Identity add through `porin_session_apply_endpoint_add` (a pod
    /// with new labels, selected by rules of the policy), after the
    /// in-place rule changes and a pause, each after a pause of its own:
    /// apply, read every write, free.
    #[serde(default)]
    pub identity_add_total: Vec<f64>,
    /// Removing that pod again (`porin_session_apply_endpoint_remove`),
    /// right after its add: total.
    #[serde(default)]
    pub identity_remove_total: Vec<f64>,
    /// The same add on the re-parse-off session, each after a rule change
    /// that replaced the whole text and a pause (the replaced text freed
    /// on its own thread meanwhile): what an add pays for the allocator's
    /// deferred work on that text. Total.
    #[serde(default)]
    pub identity_add_after_full_total: Vec<f64>,
}

fn inventory_yaml() -> String {
    let mut out = String::from(
        "kind: Inventory\nendpoints:\n  - {name: server, namespace: bench, labels: {app: server}}\n",
    );
    for c in 0..CLIENTS {
        out.push_str(&format!(
            "  - {{name: client-{c}, namespace: bench, labels: {{role: client-{c}}}}}\n"
        ));
    }
    out
}

fn session(in_place: bool) -> Result<*mut porin_session> {
    let mut session = null_mut();
    if porin_session_new(&mut session) != porin_result::Ok {
        bail!("porin_session_new");
    }
    let (name, inventory) = ("inventory.yaml", inventory_yaml());
    if porin_session_add_inventory_bytes(
        session,
        name.as_ptr().cast(),
        name.len(),
        inventory.as_ptr(),
        inventory.len(),
    ) != porin_result::Ok
        || set_reparse(session, in_place) != porin_result::Ok
    {
        bail!("inventory");
    }
    Ok(session)
}

/// One apply: (seconds of the call, seconds of call + reading every write
/// + freeing, writes).
fn apply(session: *mut porin_session, text: &str) -> Result<(f64, f64, usize)> {
    apply_named(session, NAME, text)
}

/// [`apply`] to the text `name`.
fn apply_named(session: *mut porin_session, name: &str, text: &str) -> Result<(f64, f64, usize)> {
    let start = Instant::now();
    let mut update: *mut porin_update = null_mut();
    let result = porin_session_apply_policy_bytes(
        session,
        name.as_ptr().cast(),
        name.len(),
        text.as_ptr(),
        text.len(),
        &mut update,
    );
    let call = start.elapsed().as_secs_f64();
    if result != porin_result::Ok {
        bail!("porin_session_apply_policy_bytes: {result:?}");
    }
    let writes = read_writes(update)?;
    let total = start.elapsed().as_secs_f64();
    Ok((call, total, writes))
}

/// Reads every write of `update` as an agent would, then frees it; the
/// number of writes.
fn read_writes(update: *mut porin_update) -> Result<usize> {
    let mut writes = 0;
    let mut keys = 0usize;
    for index in 0..porin_update_count(update) {
        let mut delta = std::mem::MaybeUninit::<porin_endpoint_delta>::uninit();
        if porin_update_get(update, index, delta.as_mut_ptr()) != porin_result::Ok {
            bail!("porin_update_get");
        }
        let mut diff: *mut porin_diff = null_mut();
        if porin_update_diff(update, index, &mut diff) != porin_result::Ok {
            bail!("porin_update_diff");
        }
        for write in 0..porin_diff_count(diff) {
            let mut change = std::mem::MaybeUninit::<porin_change>::uninit();
            if porin_diff_get(diff, write, change.as_mut_ptr()) != porin_result::Ok {
                bail!("porin_diff_get");
            }
            // Counted only: an agent would copy key and value into a map write.
            writes += 1;
            keys = keys.wrapping_add(write);
        }
        porin_diff_free(diff);
    }
    porin_update_free(update);
    std::hint::black_box(keys);
    Ok(writes)
}

fn text(s: &str) -> porin_str {
    porin_str {
        ptr: s.as_ptr().cast(),
        len: s.len(),
    }
}

/// Adds the `canary` pod (labels no endpoint has; `role: client-3` is
/// selected by the policy's rules) and reads the update; (total seconds,
/// writes).
fn add_canary(session: *mut porin_session) -> Result<(f64, usize)> {
    let labels = [
        porin_label {
            key: text("role"),
            value: text("client-3"),
        },
        porin_label {
            key: text("canary"),
            value: text("true"),
        },
    ];
    let (namespace, name) = ("bench", "canary");
    let start = Instant::now();
    let mut update: *mut porin_update = null_mut();
    let result = porin_session_apply_endpoint_add(
        session,
        namespace.as_ptr().cast(),
        namespace.len(),
        name.as_ptr().cast(),
        name.len(),
        labels.as_ptr(),
        labels.len(),
        std::ptr::null(),
        0,
        &mut update,
    );
    if result != porin_result::Ok {
        bail!("porin_session_apply_endpoint_add: {result:?}");
    }
    let writes = read_writes(update)?;
    Ok((start.elapsed().as_secs_f64(), writes))
}

/// Removes the `canary` pod; total seconds.
fn remove_canary(session: *mut porin_session) -> Result<f64> {
    let (namespace, name) = ("bench", "canary");
    let start = Instant::now();
    let mut update: *mut porin_update = null_mut();
    let result = porin_session_apply_endpoint_remove(
        session,
        namespace.as_ptr().cast(),
        namespace.len(),
        name.as_ptr().cast(),
        name.len(),
        &mut update,
    );
    if result != porin_result::Ok {
        bail!("porin_session_apply_endpoint_remove: {result:?}");
    }
    read_writes(update)?;
    Ok(start.elapsed().as_secs_f64())
}

/// How [`settle`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pause {
    /// Asleep: the thread idle, as an agent's between events.
    Sleep,
    /// Spinning on the clock: the CPU busy, no memory touched.
    Spin,
    /// No pause: each call right after the last.
    None,
    /// No pause, but every cache level emptied first: 64 MiB written and
    /// read back, so the add's code and data come from memory, as after an
    /// idle pause, without the CPU's wake or the host's scheduling (the
    /// same on every machine, and what a cache simulator can replay).
    Flush,
}

/// 150 ms between calls, as `pause` says: asleep, the time the previous
/// full load's text takes to be freed (see [`child`]).
fn settle(pause: Pause) {
    const PAUSE: std::time::Duration = std::time::Duration::from_millis(150);
    match pause {
        Pause::Sleep => std::thread::sleep(PAUSE),
        Pause::Spin => {
            let start = Instant::now();
            while start.elapsed() < PAUSE {
                std::hint::spin_loop();
            }
        }
        Pause::None => {}
        Pause::Flush => flush_caches(),
    }
}

/// Writes and reads back a buffer far larger than any last-level cache.
fn flush_caches() {
    const BYTES: usize = 64 << 20;
    let mut buffer = vec![0u8; BYTES];
    for (i, byte) in buffer.iter_mut().enumerate().step_by(64) {
        *byte = i as u8;
    }
    let sum = buffer
        .iter()
        .step_by(64)
        .fold(0u64, |sum, &byte| sum.wrapping_add(u64::from(byte)));
    std::hint::black_box(sum);
}

/// The totals of `2 * runs` calls applying `texts[0]` and `texts[1]` in
/// turn, each required to go in place and to write something (the `what`
/// comes and goes).
fn toggled_in_place(
    session: *mut porin_session,
    texts: &[String; 2],
    runs: usize,
    what: &str,
) -> Result<Vec<f64>> {
    let mut totals = Vec::with_capacity(2 * runs);
    for run in 0..2 * runs {
        let (_, total, writes) = apply(session, &texts[run % 2])?;
        if !applied_in_place(session, NAME) {
            bail!("the {what} was not applied in place");
        }
        if writes == 0 {
            bail!("the {what} wrote nothing");
        }
        totals.push(total);
    }
    Ok(totals)
}

/// Runs in the child.
pub fn child(rules: usize, runs: usize, pause: Pause) -> Result<CapiApplyResult> {
    let texts = [policy_yaml(rules, 9_999), policy_yaml(rules, 10_000)];
    let anchored = |text: &str| text.replacen("role: client-0", "role: &r client-0", 1);
    let anchored_texts = [anchored(&texts[0]), anchored(&texts[1])];
    let (fast, full) = (session(true)?, session(false)?);
    let mut out = CapiApplyResult {
        rules,
        text_bytes: texts[0].len(),
        ..CapiApplyResult::default()
    };
    // The first text makes each session live (a full build, untimed).
    for s in [fast, full] {
        apply(s, &texts[1])?;
    }
    // Each session's runs in a block, after a pause: a replaced text is
    // freed on a thread of its own (`Session::set_policy`'s `drop_later`,
    // 15-50 ms for this size), which would otherwise run beside the next
    // timed call of the other session on this 2-core machine.
    settle(pause);
    let mut fast_writes = Vec::new();
    for run in 0..runs {
        let (call, total, writes) = apply(fast, &texts[run % 2])?;
        if !applied_in_place(fast, NAME) {
            bail!("the rule change was not applied in place");
        }
        out.in_place_apply.push(call);
        out.in_place_total.push(total);
        fast_writes.push(writes);
    }
    // The last rule's port (rule 0 back where it started first).
    let last_port = format!("port: \"{}\"", 10_000 + rules - 1);
    let last_texts = [texts[1].clone(), {
        let at = texts[1].rfind(&last_port).unwrap_or(0);
        let mut text = texts[1].clone();
        text.replace_range(at..at + last_port.len(), "port: \"9998\"");
        text
    }];
    apply(fast, &last_texts[0])?;
    for run in 0..runs {
        let (_, total, _) = apply(fast, &last_texts[(run + 1) % 2])?;
        if !applied_in_place(fast, NAME) {
            bail!("the last rule's change was not applied in place");
        }
        out.in_place_last_total.push(total);
    }
    // A port added on lines of its own to the middle rule and taken out
    // again: the lines after it move (the loop above left
    // `last_texts[runs % 2]`).
    let now = &last_texts[runs % 2];
    out.in_place_port_line_total = toggled_in_place(
        fast,
        &[with_port_added(now, rules / 2), now.clone()],
        runs,
        "port added on its own lines",
    )?;
    // A rule inserted before the middle rule and taken out again (the
    // port loop above ends on `now`). The rule (client-5 on TCP 9000) adds
    // and removes its entries.
    out.in_place_insert_total = toggled_in_place(
        fast,
        &[with_rule_inserted_before(now, rules / 2), now.clone()],
        runs,
        "inserted rule",
    )?;
    // The same before rule 0: the first entry of its section, and a peer
    // selector's first use moved before the others'.
    out.in_place_front_insert_total = toggled_in_place(
        fast,
        &[with_rule_inserted(now), now.clone()],
        runs,
        "rule inserted first",
    )?;
    // The same with a peer no rule names: a selector new to the session,
    // numbered before every other. Its entries (client-5 and client-6 on
    // TCP 9005) come and go.
    out.in_place_front_new_peer_total = toggled_in_place(
        fast,
        &[with_new_peer_rule_first(now), now.clone()],
        runs,
        "rule with a new peer inserted first",
    )?;
    // A rule from a new CIDR prefix before the middle rule: its identity
    // comes with it and goes with it. Not required in place: a build that
    // loads the text or recompiles in full for it shows its cost here.
    let cidr_texts = [with_cidr_rule_inserted_before(now, rules / 2), now.clone()];
    for run in 0..2 * runs {
        let (_, total, writes) = apply(fast, &cidr_texts[run % 2])?;
        if writes == 0 {
            bail!("the CIDR rule wrote nothing");
        }
        out.in_place_cidr_insert_total.push(total);
    }
    // Identity adds and removes on the session the in-place changes left,
    // each add after a pause (a pod appearing in a running agent: nothing
    // of the process's last work in the caches, and whatever that work
    // left to free already freed).
    for _ in 0..runs {
        settle(pause);
        let (total, writes) = add_canary(fast)?;
        if writes < 2 {
            bail!("the canary's add wrote {writes} entries");
        }
        out.identity_add_total.push(total);
        out.identity_remove_total.push(remove_canary(fast)?);
    }
    for run in 0..runs {
        settle(pause);
        let (call, total, writes) = apply(full, &texts[run % 2])?;
        out.full_apply.push(call);
        out.full_total.push(total);
        if writes != fast_writes[run] || writes == 0 {
            bail!(
                "writes differ: {} in place, {writes} in full",
                fast_writes[run]
            );
        }
        out.writes = writes;
    }
    // Identity adds on the session that loads every text in full, each
    // after such a load and a pause: the replaced text was freed on its
    // thread during the pause, leaving its blocks to the allocator.
    for run in 0..runs {
        apply(full, &texts[(runs + run) % 2])?;
        settle(pause);
        let (total, writes) = add_canary(full)?;
        if writes < 2 {
            bail!("the canary's add wrote {writes} entries");
        }
        out.identity_add_after_full_total.push(total);
        remove_canary(full)?;
    }
    // The anchored texts: first one untimed on each (it differs from the
    // last text in two places), then toggled.
    for s in [fast, full] {
        apply(s, &anchored_texts[runs % 2])?;
    }
    for (session, times) in [
        (fast, &mut out.fallback_total),
        (full, &mut out.fallback_full_total),
    ] {
        for run in 1..=runs {
            settle(pause);
            let (_, total, _) = apply(session, &anchored_texts[(runs + run) % 2])?;
            if applied_in_place(session, NAME) {
                bail!("the anchored text was applied in place");
            }
            times.push(total);
        }
    }
    // CIDR groups and a log value in the session (untimed: both renumber,
    // in full), then the rule change in place again.
    apply_named(fast, "groups.yaml", &groups_yaml())?;
    let logged = [with_log(&texts[0]), with_log(&texts[1])];
    apply(fast, &logged[1])?;
    for run in 0..runs {
        let (_, total, writes) = apply(fast, &logged[run % 2])?;
        if writes != fast_writes[run] {
            bail!("the rule change beside groups and a log value wrote {writes} entries");
        }
        out.in_place_groups_log_total.push(total);
    }
    porin_session_free(fast);
    porin_session_free(full);
    Ok(out)
}

/// The median of `values` (seconds), in milliseconds.
pub fn median_ms(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN) * 1e3
}

/// (min, max) of `values` in milliseconds.
pub fn range_ms(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    (min * 1e3, max * 1e3)
}

/// The child's summary, one line per step.
pub fn print(result: &CapiApplyResult) {
    println!(
        "{} rules, {} bytes, {} writes per change; median (min-max) ms over {} runs",
        result.rules,
        result.text_bytes,
        result.writes,
        result.in_place_apply.len()
    );
    for (what, values) in [
        ("rule change, in place: apply", &result.in_place_apply),
        (
            "rule change, in place: apply + read writes",
            &result.in_place_total,
        ),
        (
            "last rule's change, in place: apply + read writes",
            &result.in_place_last_total,
        ),
        (
            "a port added on lines of its own (later lines move), in place: apply + read writes",
            &result.in_place_port_line_total,
        ),
        (
            "a rule inserted mid-text / taken out (later rules move), in place: apply + read writes",
            &result.in_place_insert_total,
        ),
        (
            "a rule inserted before rule 0 / taken out (every rule moves, selectors renumbered), in place: apply + read writes",
            &result.in_place_front_insert_total,
        ),
        (
            "a rule with a peer no rule names inserted before rule 0 / taken out (every selector renumbered), in place: apply + read writes",
            &result.in_place_front_new_peer_total,
        ),
        (
            "a rule from a new CIDR prefix inserted mid-text / taken out (its identity comes and goes), in place: apply + read writes",
            &result.in_place_cidr_insert_total,
        ),
        (
            "rule change beside CIDR groups, in a logged policy, in place: apply + read writes",
            &result.in_place_groups_log_total,
        ),
        ("rule change, full load: apply", &result.full_apply),
        (
            "rule change, full load: apply + read writes",
            &result.full_total,
        ),
        (
            "anchored text (falls back), re-parse on",
            &result.fallback_total,
        ),
        ("anchored text, re-parse off", &result.fallback_full_total),
        (
            "identity add after a pause: apply + read writes",
            &result.identity_add_total,
        ),
        (
            "identity remove: apply + read writes",
            &result.identity_remove_total,
        ),
        (
            "identity add after a full load and a pause: apply + read writes",
            &result.identity_add_after_full_total,
        ),
    ] {
        if values.is_empty() {
            continue;
        }
        let (min, max) = range_ms(values);
        println!("{what}: {:.3} ({min:.3}-{max:.3})", median_ms(values));
    }
}
