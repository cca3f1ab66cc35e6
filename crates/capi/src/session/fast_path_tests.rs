//! The C API's live session reaches the compiler session's fast paths: a
//! one-line edit of a large policy text is narrowed to the item it touches
//! (`porin_compiler::session`, `Update::items_compared`), and a pod with
//! new labels is added without a full fold. Counted steps, no timings.

use std::ptr::null_mut;

use super::{
    porin_label, porin_session, porin_session_add_inventory_bytes,
    porin_session_apply_endpoint_add, porin_session_apply_policy_bytes, porin_session_free,
    porin_session_new, porin_update, porin_update_free, update_ref,
};
use crate::result::porin_result;
use crate::strings::porin_str;

const INVENTORY: &str = "kind: Inventory\nendpoints:\n\
    \x20 - {name: server, namespace: bench, labels: {app: server}, ips: [10.0.0.1]}\n\
    \x20 - {name: client-0, namespace: bench, labels: {role: client-0}, ips: [10.0.0.2]}\n\
    \x20 - {name: client-1, namespace: bench, labels: {role: client-1}, ips: [10.0.0.3]}\n";

/// The bench's policy shape (`bench/src/incremental.rs`): `rules` ingress
/// rules, rule `i` from `role: client-<i % 2>` on TCP `10000 + i`, rule 0
/// on `first`.
fn policy(rules: u16, first: u16) -> String {
    let mut out = String::from(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: server\n  namespace: bench\nspec:\n  endpointSelector:\n    matchLabels:\n      app: server\n  ingress:\n",
    );
    for i in 0..rules {
        let port = if i == 0 { first } else { 10_000 + i };
        out.push_str(&format!(
            "  - fromEndpoints:\n    - matchLabels:\n        role: client-{}\n    toPorts:\n    - ports:\n      - port: \"{port}\"\n        protocol: TCP\n",
            i % 2
        ));
    }
    out
}

/// A new session holding the benchmark's inventory.
fn session_with_inventory() -> *mut porin_session {
    let mut session = null_mut();
    assert_eq!(porin_session_new(&mut session), porin_result::Ok);
    let name = "inventory.yaml";
    assert_eq!(
        porin_session_add_inventory_bytes(
            session,
            name.as_ptr().cast(),
            name.len(),
            INVENTORY.as_ptr(),
            INVENTORY.len(),
        ),
        porin_result::Ok
    );
    session
}

/// The text as `server.yaml`, whatever the call returns.
fn try_apply(session: *mut porin_session, text: &str) -> (porin_result, *mut porin_update) {
    let name = "server.yaml";
    let mut update = null_mut();
    let result = porin_session_apply_policy_bytes(
        session,
        name.as_ptr().cast(),
        name.len(),
        text.as_ptr(),
        text.len(),
        &mut update,
    );
    (result, update)
}

fn apply(session: *mut porin_session, text: &str) -> *mut porin_update {
    let (result, update) = try_apply(session, text);
    assert_eq!(result, porin_result::Ok);
    update
}

/// The update went the incremental way, folded `folded` states in full
/// and writes the server's map.
fn assert_incremental_with_server_writes(u: &super::UpdateOut, folded: usize) {
    assert_eq!(
        u.update.path,
        porin_compiler::session::UpdatePath::Incremental
    );
    assert_eq!(u.update.states_folded, folded);
    let server = u
        .update
        .deltas
        .iter()
        .find(|d| d.endpoint == "bench/server");
    assert!(server.is_some_and(|d| !d.changes.is_empty()));
}

#[test]
fn a_one_line_policy_edit_through_the_c_api_compares_one_item() {
    let session = session_with_inventory();
    // The first text makes the session live (a full build).
    porin_update_free(apply(session, &policy(64, 10_000)));
    // Rule 0's port, one line: incremental, one item compared and lowered,
    // the server's old and new key written.
    let update = apply(session, &policy(64, 9_999));
    let u = update_ref(update).unwrap();
    assert_incremental_with_server_writes(u, 0);
    assert_eq!((u.update.items_compared, u.update.rules_lowered), (1, 1));
    porin_update_free(update);
    // Unchanged text: narrowed too, nothing lowered, no writes.
    let update = apply(session, &policy(64, 9_999));
    let u = update_ref(update).unwrap();
    assert_eq!((u.update.items_compared, u.update.rules_lowered), (1, 0));
    assert!(u.update.deltas.is_empty());
    porin_update_free(update);
    // A pod with new labels selected by the odd rules' peer selector:
    // incremental, only its own state folded, the server gains keys.
    let text = |t: &'static str| porin_str {
        ptr: t.as_ptr().cast(),
        len: t.len(),
    };
    let labels = [
        porin_label {
            key: text("role"),
            value: text("client-1"),
        },
        porin_label {
            key: text("canary"),
            value: text("true"),
        },
    ];
    let ips = [text("10.0.0.9")];
    let (namespace, name) = ("bench", "canary");
    let mut update = null_mut();
    assert_eq!(
        porin_session_apply_endpoint_add(
            session,
            namespace.as_ptr().cast(),
            namespace.len(),
            name.as_ptr().cast(),
            name.len(),
            labels.as_ptr(),
            labels.len(),
            ips.as_ptr(),
            ips.len(),
            &mut update,
        ),
        porin_result::Ok
    );
    let u = update_ref(update).unwrap();
    assert_incremental_with_server_writes(u, 1);
    porin_update_free(update);
    porin_session_free(session);
}

/// `porin_session_compile` applies the target to the texts once per change
/// of the texts or of the target, not at every compile (it used to copy
/// every text and apply the target each time).
#[test]
fn compile_applies_the_target_once_per_change() {
    use super::{
        porin_session_add_policy_bytes, porin_session_compile, porin_session_set_cilium_version,
        session_ref,
    };
    use crate::compilation::porin_compilation_free;
    let session = session_with_inventory();
    let add = |text: &str, name: &str| {
        assert_eq!(
            porin_session_add_policy_bytes(
                session,
                name.as_ptr().cast(),
                name.len(),
                text.as_ptr(),
                text.len(),
            ),
            porin_result::Ok
        );
    };
    let compile = || {
        let mut compilation = null_mut();
        assert_eq!(
            porin_session_compile(session, &mut compilation, null_mut()),
            porin_result::Ok
        );
        porin_compilation_free(compilation);
    };
    let applied = || session_ref(session).map(|s| s.targets_applied).unwrap();
    add(&policy(4, 10_000), "a.yaml");
    compile();
    compile();
    compile();
    assert_eq!(applied(), 1);
    // A new text: applied again, once.
    add(
        &policy(4, 10_000).replace("name: server", "name: other"),
        "b.yaml",
    );
    compile();
    compile();
    assert_eq!(applied(), 2);
    // A new target: the same.
    let version = "1.20";
    assert_eq!(
        porin_session_set_cilium_version(session, version.as_ptr().cast(), version.len()),
        porin_result::Ok
    );
    compile();
    compile();
    assert_eq!(applied(), 3);
    // Setting the same target again changes nothing.
    assert_eq!(
        porin_session_set_cilium_version(session, version.as_ptr().cast(), version.len()),
        porin_result::Ok
    );
    compile();
    assert_eq!(applied(), 3);
    porin_session_free(session);
}

/// What a C caller sees of an update: per endpoint its name, identity,
/// flags and writes.
fn writes(update: *mut porin_update) -> Vec<(String, u32, bool, bool, String)> {
    let u = update_ref(update).unwrap();
    u.update
        .deltas
        .iter()
        .map(|d| {
            (
                d.endpoint.clone(),
                d.identity,
                d.added,
                d.removed,
                format!("{:?}", d.changes),
            )
        })
        .collect()
}

/// `porin_session_apply_policy_bytes` with the in-place re-parse
/// (`porin_model::reparse`) gives the updates of the full loads, call by
/// call, failures included (a failing call leaves the session as it
/// was): two sessions, one with the re-parse off, the same texts.
#[test]
fn in_place_applies_equal_full_loads() {
    use super::{applied_in_place, porin_update_path, set_reparse};
    let (fast, full) = (session_with_inventory(), session_with_inventory());
    assert_eq!(set_reparse(full, false), porin_result::Ok);
    let base = policy(64, 10_000);
    let rule = |text: &str, i: usize| -> usize {
        text.match_indices("  - fromEndpoints:")
            .nth(i)
            .map(|(at, _)| at)
            .unwrap()
    };
    let at_port = |text: &str, port: u16| text.find(&format!("port: \"{port}\"")).unwrap() + 7;
    fn edit(steps: &mut Vec<(String, bool)>, at: usize, cut: usize, insert: &str, in_place: bool) {
        let mut text = steps.last().map(|(t, _)| t.clone()).unwrap();
        text.replace_range(at..at + cut, insert);
        steps.push((text, in_place));
    }
    // (text, in place?) in order; each relative to the one before.
    let mut steps: Vec<(String, bool)> = vec![(base.clone(), false)];
    edit(&mut steps, at_port(&base, 10_000), 5, "9999", true);
    let text = steps.last().unwrap().0.clone();
    edit(&mut steps, at_port(&text, 10_010), 5, "10011", true);
    // A label added to rule 3 (lines after it move).
    let text = steps.last().unwrap().0.clone();
    let label = text[rule(&text, 3)..].find("client-1\n").unwrap() + rule(&text, 3) + 9;
    edit(&mut steps, label, 0, "        tier: web\n", true);
    // The last rule's port, then an error (refused: nothing changes),
    // then a comment line inside rule 5.
    let text = steps.last().unwrap().0.clone();
    let last = text.rfind("port: \"").unwrap() + 7;
    edit(&mut steps, last, 5, "20000", true);
    let text = steps.last().unwrap().0.clone();
    let error = text.find("protocol: TCP").unwrap() + 10;
    let mut broken = text.clone();
    broken.replace_range(error..error + 3, "XYZ");
    steps.push((broken, false));
    let comment = text[rule(&text, 5)..].find('\n').unwrap() + rule(&text, 5) + 1;
    steps.push((text.clone(), false));
    edit(&mut steps, comment, 0, "    # reviewed\n", true);
    // A rule inserted (one item more, after the first of its section:
    // re-parsed in place, `porin_model::reparse::EditKind::Insert`), then
    // taken out again (in place too).
    let text = steps.last().unwrap().0.clone();
    edit(
        &mut steps,
        rule(&text, 7),
        0,
        "  - fromEntities: [world]\n",
        true,
    );
    steps.push((text.clone(), true));
    // The same before the section's first rule (the sequence keeps its
    // position), then taken out again.
    edit(
        &mut steps,
        rule(&text, 0),
        0,
        "  - fromEntities: [world]\n",
        true,
    );
    steps.push((text, true));
    for (i, (text, in_place)) in steps.iter().enumerate() {
        let name = "server.yaml";
        let mut results = Vec::new();
        for session in [fast, full] {
            let (result, update) = try_apply(session, text);
            let seen = (result == porin_result::Ok).then(|| {
                let (mut incremental, mut reason) = (
                    false,
                    porin_str {
                        ptr: std::ptr::null(),
                        len: 0,
                    },
                );
                assert_eq!(
                    porin_update_path(update, &mut incremental, &mut reason),
                    porin_result::Ok
                );
                let seen = (incremental, writes(update));
                porin_update_free(update);
                seen
            });
            results.push((result, seen));
        }
        assert_eq!(results[0], results[1], "step {i}");
        if results[0].0 == porin_result::Ok {
            assert_eq!(applied_in_place(fast, name), *in_place, "step {i}");
            assert!(!applied_in_place(full, name), "step {i}");
        } else {
            assert!(!*in_place, "step {i}");
        }
    }
    porin_session_free(fast);
    porin_session_free(full);
}

/// A call that panics while the session is live poisons it: its model may
/// be half updated and the caller never got that call's writes, so every
/// later call fails with PANIC and says why (fail closed) until the
/// session is freed. Before the session is live, a panic poisons nothing.
#[test]
fn a_panic_in_a_live_session_fails_every_later_call() {
    let last_error = |session: *mut porin_session| {
        let (mut text, mut len) = (std::ptr::null(), 0usize);
        assert_eq!(
            super::porin_session_last_error(session, &mut text, &mut len),
            porin_result::Ok
        );
        // SAFETY: the session's message, valid until its next call.
        let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) };
        String::from_utf8_lossy(bytes).into_owned()
    };
    let session = session_with_inventory();
    // Not live yet: the panic is reported, the session stays usable.
    assert_eq!(super::panic_next_call(session), porin_result::Ok);
    let (result, update) = try_apply(session, &policy(8, 9_000));
    assert_eq!(result, porin_result::Panic);
    assert!(update.is_null());
    porin_update_free(apply(session, &policy(8, 9_000)));
    // Live: the panic poisons it.
    assert_eq!(super::panic_next_call(session), porin_result::Ok);
    let (result, _) = try_apply(session, &policy(8, 9_001));
    assert_eq!(result, porin_result::Panic);
    assert!(
        last_error(session).contains("internal error"),
        "{}",
        last_error(session)
    );
    for first in [9_001, 9_000] {
        let (result, update) = try_apply(session, &policy(8, first));
        assert_eq!(result, porin_result::Panic);
        assert!(update.is_null());
        assert!(
            last_error(session).contains("free the session"),
            "{}",
            last_error(session)
        );
    }
    porin_session_free(session);
}
