//! `porin_compilation`: the immutable result of a compile, with everything
//! an agent loads into the kernel; plus flow decisions and differences.

use std::ffi::c_char;

use porin_compiler::compile::Compiled;
use porin_compiler::diff::{ChangeKind, policy_diff};
use porin_compiler::explain::{Flow, FlowVerdict, Peer, evaluate, explain};
use porin_ebpf::abi::{
    ConfigValue, Event, Ipcache4Key, Ipcache6Key, IpcachePair, IpcacheValue, PolicyEntry,
    PolicyKey, policy_pairs,
};
use porin_ebpf::{EmitError, ObjectConfig, emit};

use crate::ffi::{
    boundary, boundary_value, free_handle, handle_ref, into_handle, out_ptr, string, write_out,
};
use crate::result::porin_result;
use crate::strings::porin_str;

/// The sizes `porin.h` states as `PORIN_POLICY_KEY_SIZE` and friends:
/// `(macro, documentation, size)`. They are the datapath ABI's
/// (`porin_ebpf::abi`), so they are defined once; the header's generator
/// writes them with [`header_size_macros`].
const ABI_SIZES: [(&str, &str, usize); 7] = [
    (
        "PORIN_POLICY_KEY_SIZE",
        "Bytes of a policy-map key and value (`DATAPATH.md` §2.2).",
        PolicyKey::SIZE,
    ),
    (
        "PORIN_POLICY_VALUE_SIZE",
        "Bytes of a policy-map value.",
        PolicyEntry::SIZE,
    ),
    (
        "PORIN_IPCACHE4_KEY_SIZE",
        "Bytes of an IPv4 ipcache key (`DATAPATH.md` §2.1).",
        Ipcache4Key::SIZE,
    ),
    (
        "PORIN_IPCACHE6_KEY_SIZE",
        "Bytes of an IPv6 ipcache key.",
        Ipcache6Key::SIZE,
    ),
    (
        "PORIN_IPCACHE_VALUE_SIZE",
        "Bytes of an ipcache value.",
        IpcacheValue::SIZE,
    ),
    (
        "PORIN_CONFIG_VALUE_SIZE",
        "Bytes of the `porin_config` value (`DATAPATH.md` §2.3).",
        ConfigValue::SIZE,
    ),
    (
        "PORIN_EVENT_SIZE",
        "Bytes of one `porin_events` ring-buffer record, `porin_event` (`DATAPATH.md` §2.6).",
        Event::SIZE,
    ),
];

/// The `#define`s of the map key and value sizes, in the header's comment
/// style (for `tests/capi/header.rs`, which generates `include/porin.h`; not
/// part of the C API).
#[doc(hidden)]
pub fn header_size_macros() -> String {
    ABI_SIZES
        .iter()
        .map(|(name, doc, size)| format!("\n\n/*\n {doc}\n */\n#define {name} {size}"))
        .collect()
}

/// A compilation. Opaque and immutable.
///
/// Ownership: returned by `porin_session_compile`, freed by
/// `porin_compilation_free`; independent of the session. Threading:
/// immutable, so any number of threads may call the `const` functions at
/// once. Byte arrays it hands out are borrowed from it and valid until it
/// is freed.
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_compilation {
    _private: [u8; 0],
}

/// Packed map contents: `count` keys of `key_size` bytes back to back, and
/// `count` values of `value_size` bytes, element `i` of one belonging to
/// element `i` of the other; ready for `bpf_map_update_elem` (or
/// `bpf_map_update_batch`). Borrowed from the compilation.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_map_entries {
    /// `count * key_size` bytes.
    pub keys: *const u8,
    /// `count * value_size` bytes.
    pub values: *const u8,
    /// Number of entries.
    pub count: usize,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value.
    pub value_size: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Packed {
    keys: Vec<u8>,
    values: Vec<u8>,
    count: usize,
    key_size: usize,
    value_size: usize,
}

impl Packed {
    fn new(key_size: usize, value_size: usize) -> Self {
        Self {
            key_size,
            value_size,
            ..Self::default()
        }
    }

    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.keys.extend_from_slice(key);
        self.values.extend_from_slice(value);
        self.count += 1;
    }

    fn view(&self) -> porin_map_entries {
        porin_map_entries {
            keys: self.keys.as_ptr(),
            values: self.values.as_ptr(),
            count: self.count,
            key_size: self.key_size,
            value_size: self.value_size,
        }
    }
}

pub(crate) struct Compilation {
    pub(crate) compiled: Compiled,
    object: Vec<u8>,
    policies: Vec<Packed>,
    ipcache4: Packed,
    ipcache6: Packed,
    names: Vec<String>,
}

impl Compilation {
    pub(crate) fn new(compiled: Compiled) -> Result<Self, EmitError> {
        let object = emit(&ObjectConfig::default())?;
        let policies = compiled
            .endpoints
            .iter()
            .map(|endpoint| {
                let mut packed = Packed::new(PolicyKey::SIZE, PolicyEntry::SIZE);
                for (key, value) in policy_pairs(&endpoint.state) {
                    packed.push(&key.to_bytes(), &value.to_bytes());
                }
                packed
            })
            .collect();
        let mut ipcache4 = Packed::new(Ipcache4Key::SIZE, IpcacheValue::SIZE);
        let mut ipcache6 = Packed::new(Ipcache6Key::SIZE, IpcacheValue::SIZE);
        for entry in &compiled.ipcache {
            let (key, value) = ipcache_bytes(entry);
            if entry.prefix.is_ipv4() {
                ipcache4.push(&key, &value);
            } else {
                ipcache6.push(&key, &value);
            }
        }
        let names = compiled
            .endpoints
            .iter()
            .map(porin_compiler::compile::EndpointPolicy::display_name)
            .collect();
        Ok(Self {
            compiled,
            object,
            policies,
            ipcache4,
            ipcache6,
            names,
        })
    }

    fn endpoint_index(&self, reference: &str) -> Option<usize> {
        self.names.iter().position(|n| n == reference)
    }
}

/// The map bytes of an ipcache entry (`porin_ebpf::abi`; the identity is
/// the compiler's, which allocated it).
fn ipcache_bytes(entry: &porin_compiler::compile::IpcacheEntry) -> (Vec<u8>, Vec<u8>) {
    let value = IpcacheValue {
        identity: entry.identity,
        flags: 0,
    };
    IpcachePair::new(entry.prefix, value).to_bytes()
}

fn compilation_ref<'a>(c: *const porin_compilation) -> Result<&'a Compilation, porin_result> {
    handle_ref(c.cast::<Compilation>())
}

/// Frees a compilation. NULL is a no-op; a handle freed before is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_free(compilation: *mut porin_compilation) {
    boundary_value((), || free_handle(compilation.cast::<Compilation>()));
}

/// The eBPF object (ELF bytes of `DATAPATH.md`) that enforces this
/// compilation's maps, borrowed. Load it with libbpf
/// (`bpf_object__open_mem`) or cilium/ebpf. Returns OK, NULL_PARAMETER,
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_object(
    compilation: *const porin_compilation,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> porin_result {
    boundary(|| {
        let c = compilation_ref(compilation)?;
        out_ptr(out_data)?;
        out_ptr(out_len)?;
        write_out(out_data, c.object.as_ptr());
        write_out(out_len, c.object.len());
        Ok(())
    })
}

/// Number of endpoints; 0 for NULL or a freed handle.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_endpoint_count(compilation: *const porin_compilation) -> usize {
    boundary_value(0, || {
        compilation_ref(compilation).map_or(0, |c| c.names.len())
    })
}

/// The name (`namespace/name`, or `name` outside Kubernetes) of endpoint
/// `index`, borrowed. Returns OK, NULL_PARAMETER, INVALID_PARAMETER (index),
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_endpoint_name(
    compilation: *const porin_compilation,
    index: usize,
    out: *mut porin_str,
) -> porin_result {
    boundary(|| {
        let c = compilation_ref(compilation)?;
        out_ptr(out)?;
        let name = c.names.get(index).ok_or(porin_result::InvalidParameter)?;
        write_out(
            out,
            porin_str {
                ptr: name.as_ptr().cast(),
                len: name.len(),
            },
        );
        Ok(())
    })
}

fn endpoint_arg(
    c: &Compilation,
    endpoint: *const c_char,
    endpoint_len: usize,
) -> Result<usize, porin_result> {
    let reference = string(endpoint, endpoint_len)?;
    c.endpoint_index(reference).ok_or(porin_result::NotFound)
}

/// The endpoint that owns an address (`10.0.1.20`, `fd00::20`): its name
/// (`namespace/name` or `name`), borrowed. Returns OK, NOT_FOUND (no
/// endpoint has it), INVALID_PARAMETER (not an address), NULL_PARAMETER,
/// INVALID_UTF8, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_endpoint_by_address(
    compilation: *const porin_compilation,
    address: *const c_char,
    address_len: usize,
    out: *mut porin_str,
) -> porin_result {
    boundary(|| {
        let c = compilation_ref(compilation)?;
        out_ptr(out)?;
        let text = string(address, address_len)?;
        let ip: std::net::IpAddr = text
            .trim()
            .parse()
            .map_err(|_| porin_result::InvalidParameter)?;
        let index = c
            .compiled
            .endpoints
            .iter()
            .position(|e| e.ips.contains(&ip))
            .ok_or(porin_result::NotFound)?;
        let name = c.names.get(index).ok_or(porin_result::NotFound)?;
        write_out(
            out,
            porin_str {
                ptr: name.as_ptr().cast(),
                len: name.len(),
            },
        );
        Ok(())
    })
}

/// The security identity of an endpoint (`namespace/name` or `name`).
/// Returns OK, NOT_FOUND, NULL_PARAMETER, INVALID_UTF8, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_endpoint_identity(
    compilation: *const porin_compilation,
    endpoint: *const c_char,
    endpoint_len: usize,
    out_identity: *mut u32,
) -> porin_result {
    boundary(|| {
        let c = compilation_ref(compilation)?;
        out_ptr(out_identity)?;
        let index = endpoint_arg(c, endpoint, endpoint_len)?;
        let identity = c
            .compiled
            .endpoints
            .get(index)
            .ok_or(porin_result::NotFound)?
            .identity;
        write_out(out_identity, identity);
        Ok(())
    })
}

/// The policy-map entries of an endpoint (12-byte keys, 12-byte values,
/// `DATAPATH.md` §2.2), borrowed. Fill the inactive map of the A/B pair
/// with them, then flip `porin_config` (§2.3). Returns OK, NOT_FOUND,
/// NULL_PARAMETER, INVALID_UTF8, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_policy_entries(
    compilation: *const porin_compilation,
    endpoint: *const c_char,
    endpoint_len: usize,
    out: *mut porin_map_entries,
) -> porin_result {
    boundary(|| {
        let c = compilation_ref(compilation)?;
        out_ptr(out)?;
        let index = endpoint_arg(c, endpoint, endpoint_len)?;
        let packed = c.policies.get(index).ok_or(porin_result::NotFound)?;
        write_out(out, packed.view());
        Ok(())
    })
}

/// The IPv4 (`family` 4: 8-byte keys) or IPv6 (`family` 6: 20-byte keys)
/// ipcache entries with 8-byte values (`DATAPATH.md` §2.1), borrowed.
/// Returns OK, INVALID_PARAMETER (family), NULL_PARAMETER, INVALID_HANDLE,
/// PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_ipcache_entries(
    compilation: *const porin_compilation,
    family: u32,
    out: *mut porin_map_entries,
) -> porin_result {
    boundary(|| {
        let c = compilation_ref(compilation)?;
        out_ptr(out)?;
        let packed = match family {
            4 => &c.ipcache4,
            6 => &c.ipcache6,
            _ => return Err(porin_result::InvalidParameter),
        };
        write_out(out, packed.view());
        Ok(())
    })
}

/// The verdict of a flow.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub enum porin_verdict {
    /// Allowed.
    Allow = 0,
    /// Denied (by a rule, by default, or because authentication is required).
    Deny = 1,
    /// Allowed through the L7 proxy.
    Redirect = 2,
}

/// A flow decision with its explanation. Opaque, immutable; free with
/// `porin_decision_free`. Thread-safe to read.
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_decision {
    _private: [u8; 0],
}

struct Decision {
    verdict: porin_verdict,
    explanation: String,
}

/// Decides a flow with the reference evaluator (the engine of `porin test`):
/// egress at the source endpoint and ingress at the destination endpoint.
///
/// - `from`, `to`: `namespace/name`, `name`, an IP address, or an entity
///   word (`world`, `host`, ...), UTF-8 with lengths. `world` is decided
///   per family, as the identities world packets carry in a dual-stack
///   agent (world-ipv4 over IPv4, world-ipv6 over IPv6; `world-ipv4` and
///   `world-ipv6` name one each): when the families differ the verdict is
///   the most permissive (some world packet gets it) and the explanation
///   gives each family's.
/// - `proto`: IP protocol number; `port`: destination port, or the ICMP type.
///   A flow no packet can carry (no address family in common, ICMP between
///   IPv6-only ends, ...) is `PORIN_VERDICT_DENY`, with the reason as the
///   explanation.
/// - `*out`: written on OK; free with `porin_decision_free`.
///
/// Returns OK, UNKNOWN_PEER, NULL_PARAMETER, INVALID_UTF8, INVALID_HANDLE,
/// PANIC.
#[unsafe(no_mangle)]
#[allow(
    clippy::too_many_arguments,
    reason = "C API: every buffer has its length"
)]
pub extern "C" fn porin_compilation_decide(
    compilation: *const porin_compilation,
    from: *const c_char,
    from_len: usize,
    to: *const c_char,
    to_len: usize,
    proto: u8,
    port: u16,
    out: *mut *mut porin_decision,
) -> porin_result {
    boundary(|| {
        let c = compilation_ref(compilation)?;
        out_ptr(out)?;
        let from = string(from, from_len)?;
        let to = string(to, to_len)?;
        let from = Peer::parse(from, &c.compiled).map_err(|_| porin_result::UnknownPeer)?;
        let to = Peer::parse(to, &c.compiled).map_err(|_| porin_result::UnknownPeer)?;
        let flow = Flow {
            from,
            to,
            proto,
            port,
            family: None,
        };
        let evaluation = evaluate(&c.compiled, &flow);
        let verdict = match evaluation.verdict {
            FlowVerdict::Allow => porin_verdict::Allow,
            FlowVerdict::Deny => porin_verdict::Deny,
            FlowVerdict::Redirect => porin_verdict::Redirect,
        };
        let decision = Decision {
            verdict,
            explanation: explain(&c.compiled, &evaluation),
        };
        write_out(out, into_handle(decision).cast::<porin_decision>());
        Ok(())
    })
}

/// The verdict; `PORIN_VERDICT_DENY` for NULL or a freed handle (fail closed).
#[unsafe(no_mangle)]
pub extern "C" fn porin_decision_verdict(decision: *const porin_decision) -> porin_verdict {
    boundary_value(porin_verdict::Deny, || {
        handle_ref(decision.cast::<Decision>()).map_or(porin_verdict::Deny, |d| d.verdict)
    })
}

/// The explanation (one sentence per check), borrowed. Returns OK,
/// NULL_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_decision_explanation(
    decision: *const porin_decision,
    out: *mut porin_str,
) -> porin_result {
    boundary(|| {
        let d = handle_ref(decision.cast::<Decision>())?;
        out_ptr(out)?;
        write_out(
            out,
            porin_str {
                ptr: d.explanation.as_ptr().cast(),
                len: d.explanation.len(),
            },
        );
        Ok(())
    })
}

/// Frees a decision. NULL is a no-op; a handle freed before is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn porin_decision_free(decision: *mut porin_decision) {
    boundary_value((), || free_handle(decision.cast::<Decision>()));
}

/// What a change does to a map.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub enum porin_change_kind {
    /// Insert a new key (`bpf_map_update_elem(.., BPF_ANY)`).
    Add = 0,
    /// Overwrite an existing key (`BPF_ANY`).
    Change = 1,
    /// Remove a key (`bpf_map_delete_elem`).
    Delete = 2,
}

/// One write of a difference; `key`/`value` are borrowed from the
/// `porin_diff` (`value` is NULL with size 0 for a delete).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_change {
    /// Add, change or delete.
    pub kind: porin_change_kind,
    /// The key bytes.
    pub key: *const u8,
    /// Bytes of the key.
    pub key_size: usize,
    /// The value bytes (NULL for a delete).
    pub value: *const u8,
    /// Bytes of the value (0 for a delete).
    pub value_size: usize,
}

/// An ordered list of map writes. Opaque, immutable; free with
/// `porin_diff_free`. Thread-safe to read.
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_diff {
    _private: [u8; 0],
}

/// The writes of a `porin_diff`: every key's and value's bytes in one
/// buffer, each write a span of it. Two allocations whatever the number of
/// writes (a pair of `Vec`s per write was most of the allocations, and so of
/// the cold cache lines, of an identity add read through the C API).
#[derive(Default)]
struct Diff {
    bytes: Vec<u8>,
    changes: Vec<DiffWrite>,
}

struct DiffWrite {
    kind: porin_change_kind,
    key: std::ops::Range<usize>,
    /// `None` for a delete.
    value: Option<std::ops::Range<usize>>,
}

impl Diff {
    /// Room for `writes` writes of about `bytes_each` key and value bytes.
    fn with_capacity(writes: usize, bytes_each: usize) -> Diff {
        Diff {
            bytes: Vec::with_capacity(writes.saturating_mul(bytes_each)),
            changes: Vec::with_capacity(writes),
        }
    }

    fn push(&mut self, kind: porin_change_kind, key: &[u8], value: Option<&[u8]>) {
        let key = self.span(key);
        let value = value.map(|value| self.span(value));
        self.changes.push(DiffWrite { kind, key, value });
    }

    fn span(&mut self, bytes: &[u8]) -> std::ops::Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        start..self.bytes.len()
    }

    fn into_handle(self) -> *mut porin_diff {
        into_handle(self).cast::<porin_diff>()
    }
}

/// The writes that turn an endpoint's policy map from `old` to `new`, in
/// an order that never opens a hole when applied one by one to a live map:
/// after every write, a packet that passes gets exactly the verdict of the
/// old or of the new policy (first every touched key becomes the maximal
/// deny, then final values and deletions; proof in
/// `porin_compiler::diff`). An endpoint missing from `old` (or `new`) is
/// treated as having an empty map.
///
/// Returns OK, NOT_FOUND (in neither), NULL_PARAMETER, INVALID_UTF8,
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_policy_diff(
    old: *const porin_compilation,
    new: *const porin_compilation,
    endpoint: *const c_char,
    endpoint_len: usize,
    out: *mut *mut porin_diff,
) -> porin_result {
    boundary(|| {
        let old = compilation_ref(old)?;
        let new = compilation_ref(new)?;
        out_ptr(out)?;
        let reference = string(endpoint, endpoint_len)?;
        let empty = porin_compiler::mapstate::MapState::new();
        let state = |c: &'_ Compilation| {
            c.endpoint_index(reference)
                .and_then(|i| c.compiled.endpoints.get(i))
                .map(|e| e.state.clone())
        };
        let (before, after) = (state(old), state(new));
        if before.is_none() && after.is_none() {
            return Err(porin_result::NotFound);
        }
        let changes = policy_diff(
            before.as_deref().unwrap_or(&empty),
            after.as_deref().unwrap_or(&empty),
        );
        write_out(out, policy_diff_handle(&changes));
        Ok(())
    })
}

/// A new `porin_diff` handle holding `changes` as map bytes (the caller
/// owns it: `porin_diff_free`).
pub(crate) fn policy_diff_handle(changes: &[porin_compiler::diff::MapChange]) -> *mut porin_diff {
    let mut diff = Diff::with_capacity(changes.len(), PolicyKey::SIZE + PolicyEntry::SIZE);
    for change in changes {
        let kind = match change.kind {
            ChangeKind::Add => porin_change_kind::Add,
            ChangeKind::Change => porin_change_kind::Change,
            ChangeKind::Delete => porin_change_kind::Delete,
        };
        let key = PolicyKey::from_key(&change.key).to_bytes();
        let value = change
            .entry
            .as_ref()
            .map(|entry| PolicyEntry::from_entry(&change.key, entry).to_bytes());
        diff.push(kind, &key, value.as_ref().map(|v| &v[..]));
    }
    diff.into_handle()
}

/// The ipcache writes from `old` to `new` for one family (4 or 6): adds
/// and changes first (most specific prefix first), deletions last (most
/// specific first), so an address never falls back to a broader prefix
/// that neither compilation gives it while an entry is replaced.
///
/// Returns OK, INVALID_PARAMETER (family), NULL_PARAMETER, INVALID_HANDLE,
/// PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_ipcache_diff(
    old: *const porin_compilation,
    new: *const porin_compilation,
    family: u32,
    out: *mut *mut porin_diff,
) -> porin_result {
    boundary(|| {
        let old = compilation_ref(old)?;
        let new = compilation_ref(new)?;
        out_ptr(out)?;
        let v6 = match family {
            4 => false,
            6 => true,
            _ => return Err(porin_result::InvalidParameter),
        };
        let select = |c: &Compilation| -> std::collections::BTreeMap<(u8, Vec<u8>), Vec<u8>> {
            c.compiled
                .ipcache
                .iter()
                .filter(|e| e.prefix.is_ipv6() == v6)
                .map(|e| {
                    let (key, value) = ipcache_bytes(e);
                    // Most specific first: sort by descending prefix length.
                    ((u8::MAX - e.prefix.prefix(), key), value)
                })
                .collect()
        };
        let (before, after) = (select(old), select(new));
        let mut diff = Diff::default();
        for (key, value) in &after {
            match before.get(key) {
                None => diff.push(porin_change_kind::Add, &key.1, Some(value)),
                Some(previous) if previous != value => {
                    diff.push(porin_change_kind::Change, &key.1, Some(value));
                }
                Some(_) => {}
            }
        }
        for key in before.keys() {
            if !after.contains_key(key) {
                diff.push(porin_change_kind::Delete, &key.1, None);
            }
        }
        write_out(out, diff.into_handle());
        Ok(())
    })
}

/// Number of writes; 0 for NULL or a freed handle.
#[unsafe(no_mangle)]
pub extern "C" fn porin_diff_count(diff: *const porin_diff) -> usize {
    boundary_value(0, || {
        handle_ref(diff.cast::<Diff>()).map_or(0, |d| d.changes.len())
    })
}

/// Write `index` (0-based, apply in index order). Returns OK,
/// INVALID_PARAMETER (index), NULL_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_diff_get(
    diff: *const porin_diff,
    index: usize,
    out: *mut porin_change,
) -> porin_result {
    boundary(|| {
        let d = handle_ref(diff.cast::<Diff>())?;
        out_ptr(out)?;
        let write = d.changes.get(index).ok_or(porin_result::InvalidParameter)?;
        let key = d
            .bytes
            .get(write.key.clone())
            .ok_or(porin_result::InvalidParameter)?;
        let value = match &write.value {
            Some(span) => Some(
                d.bytes
                    .get(span.clone())
                    .ok_or(porin_result::InvalidParameter)?,
            ),
            None => None,
        };
        write_out(
            out,
            porin_change {
                kind: write.kind,
                key: key.as_ptr(),
                key_size: key.len(),
                value: value.map_or(std::ptr::null(), <[u8]>::as_ptr),
                value_size: value.map_or(0, <[u8]>::len),
            },
        );
        Ok(())
    })
}

/// Frees a difference. NULL is a no-op; a handle freed before is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn porin_diff_free(diff: *mut porin_diff) {
    boundary_value((), || free_handle(diff.cast::<Diff>()));
}
