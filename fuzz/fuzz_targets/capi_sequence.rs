//! Random sequences of C API calls, driven the way a buggy C agent would:
//! NULL handles and out-pointers, NULL buffers with lengths, empty and
//! truncated lengths, invalid UTF-8, freed handles used again and freed
//! twice, policies and inventories that do not load. The contract under
//! test: no call panics (a caught panic returns `PORIN_RESULT_PANIC`, which
//! fails the target too), outputs are written only on success, and a
//! compilation always answers its own queries.

#![no_main]

use std::ffi::c_char;
use std::ptr::{null, null_mut};

use libfuzzer_sys::fuzz_target;
use porin::compilation::*;
use porin::diagnostics::*;
use porin::porin_result_message;
use porin::result::porin_result;
use porin::session::*;
use porin::strings::porin_str;

const POLICY: &str = "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\n\
metadata: {name: p, namespace: ns}\nspec:\n  endpointSelector: {matchLabels: {app: b}}\n\
  ingress:\n    - fromEndpoints: [{matchLabels: {app: a}}]\n\
      toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]\n";
const INVENTORY: &str = "kind: Inventory\nendpoints:\n\
  - {name: a, namespace: ns, labels: {app: a}, ips: [10.0.0.1]}\n\
  - {name: b, namespace: ns, labels: {app: b}, ips: [10.0.0.2]}\n";
const NAMES: [&str; 6] = ["ns/a", "ns/b", "a", "10.0.0.1", "world", "ns/zz"];

/// Reads bytes off the input.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }

    /// A (pointer, length) pair: valid, truncated, NULL with a length,
    /// empty, or invalid UTF-8, chosen by the input.
    fn text<'b>(&mut self, text: &'b str, scratch: &'b mut Vec<u8>) -> (*const c_char, usize) {
        match self.byte().unwrap_or(0) % 6 {
            0 | 1 => (text.as_ptr().cast(), text.len()),
            2 => {
                let len = usize::from(self.byte().unwrap_or(0)) % (text.len() + 1);
                (text.as_ptr().cast(), len)
            }
            3 => (null(), text.len().max(1)),
            4 => (null(), 0),
            _ => {
                scratch.clear();
                scratch.extend_from_slice(text.as_bytes());
                scratch.push(0xff);
                (scratch.as_ptr().cast(), scratch.len())
            }
        }
    }
}

fn ok(result: porin_result) -> bool {
    assert_ne!(result, porin_result::Panic, "a call panicked");
    result == porin_result::Ok
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let mut scratch = Vec::new();
    let mut sessions: Vec<*mut porin_session> = vec![null_mut()];
    let mut compilations: Vec<*mut porin_compilation> = vec![null_mut()];
    let mut owned_diagnostics: Vec<*mut porin_diagnostics> = vec![null_mut()];
    let mut diffs: Vec<*mut porin_diff> = vec![null_mut()];
    let mut freed: Vec<usize> = Vec::new();
    let mut steps = 0;
    while let Some(op) = input.byte() {
        steps += 1;
        if steps > 64 {
            break;
        }
        let pick = usize::from(input.byte().unwrap_or(0));
        let session = sessions[pick % sessions.len()];
        let compilation = compilations[pick % compilations.len()];
        let other = compilations[(pick / 3) % compilations.len()];
        let name = NAMES[pick % NAMES.len()];
        match op % 16 {
            0 => {
                let mut out = null_mut();
                if ok(porin_session_new(&mut out)) {
                    sessions.push(out);
                }
            }
            1 => {
                let text = if pick % 2 == 0 { POLICY } else { "spec: [" };
                let (ptr, len) = input.text(text, &mut scratch);
                ok(porin_session_add_policy_bytes(
                    session,
                    "f".as_ptr().cast(),
                    1,
                    ptr.cast(),
                    len,
                ));
            }
            2 => {
                let (ptr, len) = input.text(INVENTORY, &mut scratch);
                ok(porin_session_add_inventory_bytes(
                    session,
                    "i".as_ptr().cast(),
                    1,
                    ptr.cast(),
                    len,
                ));
            }
            3 => {
                let labels = [porin_label {
                    key: porin_str {
                        ptr: "app".as_ptr().cast(),
                        len: 3,
                    },
                    value: porin_str {
                        ptr: "a".as_ptr().cast(),
                        len: 1,
                    },
                }];
                let ip = ["10.0.0.9", "fd00::9", "300.1.1.1"][pick % 3];
                let ips = [porin_str {
                    ptr: ip.as_ptr().cast(),
                    len: ip.len(),
                }];
                let (nptr, nlen) = input.text("c", &mut scratch);
                let count = usize::from(input.byte().unwrap_or(1) % 2);
                ok(porin_session_endpoint_add(
                    session,
                    "ns".as_ptr().cast(),
                    2,
                    nptr,
                    nlen,
                    labels.as_ptr(),
                    count,
                    ips.as_ptr(),
                    count,
                ));
            }
            4 => {
                let (ptr, len) = input.text(&name[name.len().min(3)..], &mut scratch);
                ok(porin_session_endpoint_remove(
                    session,
                    "ns".as_ptr().cast(),
                    2,
                    ptr,
                    len,
                ));
            }
            5 => {
                let labels = [porin_label {
                    key: porin_str {
                        ptr: "app".as_ptr().cast(),
                        len: 3,
                    },
                    value: porin_str {
                        ptr: "b".as_ptr().cast(),
                        len: 1,
                    },
                }];
                ok(porin_session_endpoint_set_labels(
                    session,
                    "ns".as_ptr().cast(),
                    2,
                    "a".as_ptr().cast(),
                    1,
                    labels.as_ptr(),
                    pick % 2,
                ));
            }
            6 => {
                let mut out = null_mut();
                let mut diagnostics = null_mut();
                let want = pick % 3;
                let result = porin_session_compile(
                    session,
                    if want == 0 { null_mut() } else { &mut out },
                    if want == 2 {
                        null_mut()
                    } else {
                        &mut diagnostics
                    },
                );
                if ok(result) {
                    assert!(!out.is_null());
                    compilations.push(out);
                } else {
                    assert!(out.is_null(), "output written on failure");
                }
                if !diagnostics.is_null() {
                    let count = porin_diagnostics_count(diagnostics);
                    for i in 0..=count {
                        let mut d = std::mem::MaybeUninit::<porin_diagnostic>::uninit();
                        assert_eq!(
                            ok(porin_diagnostics_get(diagnostics, i, d.as_mut_ptr())),
                            i < count
                        );
                    }
                    owned_diagnostics.push(diagnostics);
                }
            }
            7 => {
                let (ptr, len) = input.text(name, &mut scratch);
                let mut entries = std::mem::MaybeUninit::<porin_map_entries>::uninit();
                if ok(porin_compilation_policy_entries(
                    compilation,
                    ptr,
                    len,
                    entries.as_mut_ptr(),
                )) {
                    // SAFETY: the call wrote `entries` because it returned OK.
                    let entries = unsafe { entries.assume_init() };
                    assert_eq!((entries.key_size, entries.value_size), (12, 12));
                }
                let mut identity = 0u32;
                ok(porin_compilation_endpoint_identity(
                    compilation,
                    ptr,
                    len,
                    &mut identity,
                ));
            }
            8 => {
                let (from, from_len) = input.text(name, &mut scratch);
                let to = NAMES[(pick / 7) % NAMES.len()];
                let mut decision = null_mut();
                if ok(porin_compilation_decide(
                    compilation,
                    from,
                    from_len,
                    to.as_ptr().cast(),
                    to.len(),
                    input.byte().unwrap_or(6),
                    80,
                    &mut decision,
                )) {
                    let mut text = porin_str {
                        ptr: null(),
                        len: 0,
                    };
                    assert!(ok(porin_decision_explanation(decision, &mut text)));
                    let _ = porin_decision_verdict(decision);
                    porin_decision_free(decision);
                }
            }
            9 => {
                let (ptr, len) = input.text(name, &mut scratch);
                let mut diff = null_mut();
                if ok(porin_compilation_policy_diff(
                    compilation,
                    other,
                    ptr,
                    len,
                    &mut diff,
                )) {
                    diffs.push(diff);
                }
                let mut diff = null_mut();
                if ok(porin_compilation_ipcache_diff(
                    compilation,
                    other,
                    [4, 6, 5][pick % 3],
                    &mut diff,
                )) {
                    diffs.push(diff);
                }
            }
            10 => {
                let diff = diffs[pick % diffs.len()];
                let count = porin_diff_count(diff);
                for i in 0..=count.min(64) {
                    let mut change = std::mem::MaybeUninit::<porin_change>::uninit();
                    assert_eq!(ok(porin_diff_get(diff, i, change.as_mut_ptr())), i < count);
                }
            }
            11 => {
                let mut data = null();
                let mut len = 0usize;
                ok(porin_compilation_object(compilation, &mut data, &mut len));
                let mut entries = std::mem::MaybeUninit::<porin_map_entries>::uninit();
                ok(porin_compilation_ipcache_entries(
                    compilation,
                    [4, 6, 0][pick % 3],
                    entries.as_mut_ptr(),
                ));
                let count = porin_compilation_endpoint_count(compilation);
                let mut text = porin_str {
                    ptr: null(),
                    len: 0,
                };
                assert_eq!(
                    ok(porin_compilation_endpoint_name(
                        compilation,
                        pick % 4,
                        &mut text
                    )),
                    pick % 4 < count
                );
            }
            12 => {
                // Free something (maybe again: detected).
                match pick % 4 {
                    0 => porin_session_free(session),
                    1 => porin_compilation_free(compilation),
                    2 => porin_diagnostics_free(owned_diagnostics[pick % owned_diagnostics.len()]),
                    _ => porin_diff_free(diffs[pick % diffs.len()]),
                }
                freed.push(pick);
            }
            13 => {
                let mut buf = [0 as c_char; 160];
                let mut n = 0usize;
                ok(porin_result_message(
                    u32::from(input.byte().unwrap_or(0)),
                    buf.as_mut_ptr(),
                    pick % 160,
                    &mut n,
                ));
            }
            14 => {
                ok(porin_session_clear_policies(session));
                let mut text = null();
                let mut len = 0usize;
                ok(porin_session_last_error(session, &mut text, &mut len));
                let (mut reused, mut computed) = (0usize, 0usize);
                ok(porin_session_compile_stats(
                    session,
                    &mut reused,
                    &mut computed,
                ));
            }
            _ => {
                let mut text = porin_str {
                    ptr: null(),
                    len: 0,
                };
                let (ptr, len) = input.text("10.0.0.2", &mut scratch);
                ok(porin_compilation_endpoint_by_address(
                    compilation,
                    ptr,
                    len,
                    &mut text,
                ));
                ok(porin_diagnostics_render(
                    owned_diagnostics[pick % owned_diagnostics.len()],
                    &mut text,
                ));
            }
        }
    }
    for s in sessions {
        porin_session_free(s);
    }
    for c in compilations {
        porin_compilation_free(c);
    }
    for d in owned_diagnostics {
        porin_diagnostics_free(d);
    }
    for d in diffs {
        porin_diff_free(d);
    }
    let _ = freed;
});
