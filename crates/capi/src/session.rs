//! `porin_session`: policies and inventory, edited and compiled by an agent.

use std::collections::HashSet;
use std::ffi::c_char;
use std::net::IpAddr;
use std::path::Path;

use porin_compiler::inventory::{Endpoint, Inventory, SourceLocation};
use porin_compiler::limits::Limits;
use porin_compiler::resolve::lower::PolicyInput;
use porin_compiler::session::{
    IncrementalCompiler, IncrementalStats, Session as LiveSession, SessionError, TextLoad, Update,
    UpdatePath, pin_identities,
};
use porin_compiler::settings::SettingsSpec;
use porin_model::loader::{LoadError, LoadOutcome, load_path, load_str};
use porin_model::version::{CiliumVersion, Target, TargetChoice};

use crate::compilation::{Compilation, policy_diff_handle, porin_compilation};
use crate::diagnostics::{Diagnostics, porin_diagnostics};
use crate::ffi::{
    array, boundary, boundary_value, bytes, free_handle, handle_mut, handle_ref, into_handle,
    out_ptr, string, write_out,
};
use crate::limit_codes::{compile_error, inventory_error, porin_limit};
use crate::result::{Failure, porin_result};
use crate::strings::porin_str;

/// One label `key=value` of an endpoint. An endpoint outside Kubernetes
/// (no namespace) keeps a source prefix of the key (`container:app`),
/// `unspec` without one; a pod's labels (namespace given) all get `k8s`,
/// a prefix in the key is dropped (Cilium's `NewLabel`; as in inventory
/// files).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_label {
    /// The key.
    pub key: porin_str,
    /// The value (may be empty).
    pub value: porin_str,
}

/// A session: policy documents, an inventory, and the cache of the last
/// compilation. Opaque.
///
/// Ownership: created by `porin_session_new`, freed by `porin_session_free`.
/// Threading: a session is mutable; call it from one thread at a time (it
/// may move between threads). Compilations it returns are independent of
/// it and may outlive it.
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_session {
    _private: [u8; 0],
}

/// The Rust side of a session.
pub(crate) struct Session {
    policies: LoadOutcome,
    inventory: Inventory,
    compiler: IncrementalCompiler,
    stats: IncrementalStats,
    last_error: String,
    limits: Limits,
    /// Policy bytes added since the last clear (`max_total_bytes`).
    policy_bytes: u64,
    /// Set by the first `porin_session_apply_*` call: from then on the
    /// session is live (see `porin_session_apply_policy_bytes`).
    live: Option<LiveSession>,
    /// The target the caller set (`porin_session_set_cilium_version`,
    /// `enable-k8s-cluster-network-policy` of `porin_session_set_setting`):
    /// above the inventory's `ciliumVersion` /
    /// `enableK8sClusterNetworkPolicy`, as the CLI's flags are.
    target: TargetChoice,
    /// `policies` with the target's validation applied, for the target it
    /// was applied for: `porin_session_compile` reuses it until the texts
    /// ([`Session::policies_mut`] drops it) or the target change, instead
    /// of copying every text and applying the target at each compile.
    targeted: Option<(Target, LoadOutcome)>,
    /// How often the target was applied to a copy of the texts (the tests
    /// count it: once per change, not once per compile).
    targets_applied: usize,
    /// The texts of the live session whose last apply was made in place
    /// ([`applied_in_place`]).
    in_place: HashSet<String>,
    /// Load every applied text in full ([`set_reparse`]).
    reparse_off: bool,
    /// A call panicked while the session was live: its model may be half
    /// updated, and the caller never got that call's writes. Every later
    /// call fails (fail closed) until the session is freed.
    poisoned: bool,
    /// Panic inside the next call's body ([`panic_next_call`], tests).
    panic_next: bool,
}

impl Session {
    /// The target the policies are validated for: what the caller set,
    /// else what the inventory says, else Cilium 1.19 with every setting
    /// off.
    fn target(&self) -> Target {
        self.target.or(self.inventory.target.choice()).target()
    }

    /// The session's policies with the target's validation applied
    /// (`LoadOutcome::apply_target`: rows of porin's version table, and
    /// the ClusterNetworkPolicies enforced or refused with PM066), applied
    /// to a copy once per change of the texts or of the target (the target
    /// may change after the policies were added) and kept.
    fn targeted_policies(&mut self) -> &LoadOutcome {
        let target = self.target();
        if self.targeted.as_ref().is_none_or(|(t, _)| *t != target) {
            let mut policies = self.policies.clone();
            policies.apply_target(&target);
            self.targeted = Some((target, policies));
            self.targets_applied += 1;
        }
        match &mut self.targeted {
            Some((_, policies)) => policies,
            None => &self.policies,
        }
    }

    /// The session's policy texts, to change them: the targeted copy
    /// (`targeted_policies`) is dropped.
    fn policies_mut(&mut self) -> &mut LoadOutcome {
        self.targeted = None;
        &mut self.policies
    }
}

fn session_mut<'a>(session: *mut porin_session) -> Result<&'a mut Session, porin_result> {
    handle_mut(session.cast::<Session>())
}

fn session_ref<'a>(session: *const porin_session) -> Result<&'a Session, porin_result> {
    handle_ref(session.cast::<Session>())
}

/// The limits of a live session.
pub(crate) fn session_limits<'a>(
    session: *const porin_session,
) -> Result<&'a Limits, porin_result> {
    session_ref(session).map(|state| &state.limits)
}

/// Runs a session call that edits its limits (kept for the next calls,
/// the compile limits handed to the incremental compiler).
pub(crate) fn with_session_limits(
    session: *mut porin_session,
    body: impl FnOnce(&mut Limits) -> Result<(), Failure>,
) -> porin_result {
    with_session(session, |state| {
        let mut limits = state.limits.clone();
        body(&mut limits)?;
        state.compiler.set_limits(limits.compile.clone());
        state.limits = limits;
        Ok(())
    })
}

/// Runs a session call; on failure the message is kept for
/// `porin_session_last_error`.
fn with_session(
    session: *mut porin_session,
    body: impl FnOnce(&mut Session) -> Result<(), Failure>,
) -> porin_result {
    boundary(|| {
        let state = session_mut(session)?;
        if state.poisoned {
            POISONED.clone_into(&mut state.last_error);
            return Err(porin_result::Panic);
        }
        let live = state.live.is_some();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if std::mem::take(&mut state.panic_next) {
                panic!("a test's panic inside a session call");
            }
            body(&mut *state)
        }));
        let outcome = outcome.unwrap_or_else(|_| {
            // A live session's model may be half updated, and the call's
            // writes never reached the caller: no later call may compute
            // writes from it. A session not yet live holds only inputs.
            if live || state.live.is_some() {
                state.poisoned = true;
            }
            Err(Failure::new(
                porin_result::Panic,
                "internal error: a porin call panicked (a bug; please report it)".to_owned(),
            ))
        });
        match outcome {
            Ok(()) => {
                state.last_error.clear();
                Ok(())
            }
            Err(Failure { code, message }) => {
                state.last_error = message;
                Err(code)
            }
        }
    })
}

/// What every call on a poisoned session fails with (PANIC).
const POISONED: &str = "an earlier call panicked while the session was live, so its maps may no \
                        longer be what its policies give: free the session and create a new one";

/// Makes the next call on `session` panic inside its body (after its
/// handle is checked), as an internal error would. Not part of the C API
/// (no C symbol): the tests of the poisoning.
#[doc(hidden)]
pub fn panic_next_call(session: *mut porin_session) -> porin_result {
    boundary(|| {
        session_mut(session)?.panic_next = true;
        Ok(())
    })
}

/// The batch edit functions refuse a live session: its inputs are edited
/// with `porin_session_apply_*` only, so the two never disagree.
fn not_live(state: &Session) -> Result<(), Failure> {
    if state.live.is_some() {
        return Err(Failure::new(
            porin_result::InvalidParameter,
            "the session is live (a porin_session_apply_* call made it so): edit it with porin_session_apply_policy_bytes, porin_session_apply_policy_remove, porin_session_apply_endpoint_add and porin_session_apply_endpoint_remove".to_owned(),
        ));
    }
    Ok(())
}

fn plain(code: porin_result) -> Failure {
    Failure::from(code)
}

/// The policy texts of a session add up to more than `max_total_bytes`.
fn total_too_large(name: &str, total: u64, limits: &Limits) -> Failure {
    Failure::new(
        porin_result::PolicyTooLarge,
        format!(
            "`{name}`: the session's policy texts would add up to {total} bytes; the limit is {} bytes (C API: porin_session_set_limit with PORIN_LIMIT_POLICY_TOTAL_BYTES)",
            limits.load.max_total_bytes
        ),
    )
}

fn load_error(error: &LoadError) -> Failure {
    match error {
        LoadError::Io { .. } => Failure::new(porin_result::Io, error.to_string()),
        LoadError::TooManyFiles { .. } => Failure::new(
            porin_result::PolicyTooLarge,
            format!("{error} (C API: porin_session_set_limit with PORIN_LIMIT_POLICY_FILES)"),
        ),
        LoadError::TooMuchInput { .. } => Failure::new(
            porin_result::PolicyTooLarge,
            format!(
                "{error}, counting what the session holds (C API: porin_session_set_limit with PORIN_LIMIT_POLICY_TOTAL_BYTES)"
            ),
        ),
        _ => Failure::new(porin_result::PolicyTooLarge, error.to_string()),
    }
}

/// A path argument; `-` (standard input for the CLI) is refused.
fn path_arg<'a>(path: *const c_char, len: usize) -> Result<&'a Path, Failure> {
    let text = string(path, len).map_err(plain)?;
    if text.is_empty() || text == "-" || text.contains('\0') {
        return Err(Failure::new(
            porin_result::InvalidParameter,
            format!("invalid path `{text}`"),
        ));
    }
    Ok(Path::new(text))
}

/// Creates an empty session (no policies, empty inventory of cluster
/// `default`) and writes it to `*out`.
///
/// Ownership: the caller owns `*out` and frees it with `porin_session_free`.
/// Returns OK, NULL_PARAMETER (`out` NULL), PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_new(out: *mut *mut porin_session) -> porin_result {
    boundary(|| {
        out_ptr(out)?;
        let session = Session {
            policies: LoadOutcome::default(),
            inventory: Inventory::new(),
            compiler: IncrementalCompiler::new(),
            stats: IncrementalStats::default(),
            last_error: String::new(),
            limits: Limits::default(),
            policy_bytes: 0,
            live: None,
            targeted: None,
            targets_applied: 0,
            target: TargetChoice::default(),
            in_place: HashSet::new(),
            reparse_off: false,
            poisoned: false,
            panic_next: false,
        };
        write_out(out, into_handle(session).cast::<porin_session>());
        Ok(())
    })
}

/// Frees a session. NULL is a no-op; a handle freed before is ignored
/// (detected through porin's registry of live handles).
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_free(session: *mut porin_session) {
    boundary_value((), || free_handle(session.cast::<Session>()));
}

/// Adds policy documents from memory (YAML or JSON, one or more documents).
///
/// - `name`, `name_len`: display name used in diagnostics (UTF-8).
/// - `data`, `len`: the text (UTF-8); copied, the caller keeps ownership.
///
/// Findings (including errors, and a text over
/// `PORIN_LIMIT_POLICY_FILE_BYTES`: PM002) are reported by
/// `porin_session_compile`. A document with the kind, namespace and name of
/// one the session already holds is an error (PM042), not a replacement:
/// to change a policy, `porin_session_clear_policies` and add the new set. Returns OK, NULL_PARAMETER, INVALID_UTF8,
/// POLICY_TOO_LARGE (the session's texts would exceed
/// `PORIN_LIMIT_POLICY_TOTAL_BYTES`; nothing added), INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_add_policy_bytes(
    session: *mut porin_session,
    name: *const c_char,
    name_len: usize,
    data: *const u8,
    len: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let name = string(name, name_len).map_err(plain)?;
        let raw = bytes(data, len).map_err(plain)?;
        let text = std::str::from_utf8(raw).map_err(|e| {
            Failure::new(porin_result::InvalidUtf8, format!("{name}: not UTF-8: {e}"))
        })?;
        let size = u64::try_from(text.len()).unwrap_or(u64::MAX);
        // A text over max_file_bytes is not parsed (a PM002 finding) and
        // not kept: only what is loaded counts towards the total.
        if size <= state.limits.load.max_file_bytes {
            let total = state.policy_bytes.saturating_add(size);
            if total > state.limits.load.max_total_bytes {
                return Err(total_too_large(name, total, &state.limits));
            }
            state.policy_bytes = total;
        }
        // A document naming an object already added is refused (PM042):
        // the session then fails to compile, like any invalid policy.
        let outcome = load_str(name, text, &state.limits.load);
        state.policies_mut().merge(outcome);
        Ok(())
    })
}

/// Removes every policy document added so far (the inventory stays), so
/// that a changed policy set can be added and compiled; the next compile
/// then recomputes every map state. Returns OK, NULL_PARAMETER,
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_clear_policies(session: *mut porin_session) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        *state.policies_mut() = LoadOutcome::default();
        state.policy_bytes = 0;
        Ok(())
    })
}

/// Adds policy documents from a file or a directory (read recursively:
/// `.yaml`, `.yml`, `.json`), read now.
///
/// Returns OK, NULL_PARAMETER, INVALID_UTF8, INVALID_PARAMETER (empty path
/// or `-`), IO, POLICY_TOO_LARGE, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_add_policy_path(
    session: *mut porin_session,
    path: *const c_char,
    path_len: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let path = path_arg(path, path_len)?;
        // What the session already holds counts towards the total.
        let mut limits = state.limits.load.clone();
        limits.max_total_bytes = limits.max_total_bytes.saturating_sub(state.policy_bytes);
        let outcome = load_path(path, &limits).map_err(|e| load_error(&e))?;
        state.policy_bytes = state
            .policy_bytes
            .saturating_add(outcome.sources.total_bytes());
        state.policies_mut().merge(outcome);
        Ok(())
    })
}

/// Adds inventory content from memory: porin inventory YAML, Kubernetes
/// manifests, or a `cilium-dbg identity/endpoint list -o json` dump.
///
/// Returns OK, NULL_PARAMETER, INVALID_UTF8, INVENTORY_INVALID (message in
/// `porin_session_last_error`; the session is unchanged), LIMIT_EXCEEDED
/// (an inventory limit, see `porin_session_set_limit`; the session is
/// unchanged), INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_add_inventory_bytes(
    session: *mut porin_session,
    name: *const c_char,
    name_len: usize,
    data: *const u8,
    len: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let name = string(name, name_len).map_err(plain)?;
        let raw = bytes(data, len).map_err(plain)?;
        let text = std::str::from_utf8(raw).map_err(|e| {
            Failure::new(porin_result::InvalidUtf8, format!("{name}: not UTF-8: {e}"))
        })?;
        let mut next = state.inventory.clone();
        next.add_text_with_limits(name, text, &state.limits.inventory)
            .map_err(|e| inventory_error(&e))?;
        state.inventory = next;
        Ok(())
    })
}

/// Adds inventory content from a file or a directory (read now).
///
/// Returns OK, NULL_PARAMETER, INVALID_UTF8, INVALID_PARAMETER, IO,
/// INVENTORY_INVALID, LIMIT_EXCEEDED (the session is unchanged),
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_add_inventory_path(
    session: *mut porin_session,
    path: *const c_char,
    path_len: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let path = path_arg(path, path_len)?;
        if let Err(e) = std::fs::metadata(path) {
            return Err(Failure::new(
                porin_result::Io,
                format!("{}: {e}", path.display()),
            ));
        }
        let loaded = Inventory::load_with_limits(path, &state.limits.inventory)
            .map_err(|e| inventory_error(&e))?;
        // A ciliumVersion that contradicts the session's: refused before
        // anything is merged (the session is unchanged).
        let mut target = state.inventory.target.clone();
        target
            .merge(&loaded.target)
            .map_err(|e| inventory_error(&e))?;
        let inventory = &mut state.inventory;
        inventory.target = target;
        if loaded.cluster != porin_compiler::inventory::DEFAULT_CLUSTER {
            inventory.cluster = loaded.cluster;
        }
        inventory.namespaces.extend(loaded.namespaces);
        inventory.endpoints.extend(loaded.endpoints);
        inventory.fqdns.extend(loaded.fqdns);
        inventory.services.extend(loaded.services);
        Ok(())
    })
}

fn optional_namespace(
    namespace: *const c_char,
    namespace_len: usize,
) -> Result<Option<String>, Failure> {
    let text = string(namespace, namespace_len).map_err(plain)?;
    Ok((!text.is_empty()).then(|| text.to_owned()))
}

fn labels_arg(
    labels: *const porin_label,
    count: usize,
) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    let mut out = std::collections::BTreeMap::new();
    for label in array(labels, count).map_err(plain)? {
        let key = string(label.key.ptr, label.key.len).map_err(plain)?;
        let value = string(label.value.ptr, label.value.len).map_err(plain)?;
        if key.is_empty() {
            return Err(Failure::new(
                porin_result::InvalidParameter,
                "empty label key".to_owned(),
            ));
        }
        out.insert(key.to_owned(), value.to_owned());
    }
    Ok(out)
}

fn find(inventory: &Inventory, namespace: Option<&String>, name: &str) -> Option<usize> {
    inventory
        .endpoints
        .iter()
        .position(|e| e.namespace.as_ref() == namespace && e.name == name)
}

/// Adds one endpoint.
///
/// - `namespace`, `namespace_len`: Kubernetes namespace; length 0 for an
///   endpoint outside Kubernetes (then `namespace` may be NULL).
/// - `name`, `name_len`: non-empty, unique within the namespace.
/// - `labels`, `label_count`: the workload's labels (copied).
/// - `ips`, `ip_count`: its addresses as text (`10.0.0.5`, `fd00::5`);
///   none: porin assigns deterministic ones at the next compile.
///
/// Returns OK, NULL_PARAMETER, INVALID_UTF8, INVALID_PARAMETER (empty name
/// or key, bad address), ALREADY_EXISTS, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
#[allow(
    clippy::too_many_arguments,
    reason = "C API: every buffer has its length"
)]
pub extern "C" fn porin_session_endpoint_add(
    session: *mut porin_session,
    namespace: *const c_char,
    namespace_len: usize,
    name: *const c_char,
    name_len: usize,
    labels: *const porin_label,
    label_count: usize,
    ips: *const porin_str,
    ip_count: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let endpoint = endpoint_arg(
            namespace,
            namespace_len,
            name,
            name_len,
            labels,
            label_count,
            ips,
            ip_count,
        )?;
        if find(
            &state.inventory,
            endpoint.namespace.as_ref(),
            &endpoint.name,
        )
        .is_some()
        {
            return Err(Failure::new(
                porin_result::AlreadyExists,
                format!("endpoint `{}` already exists", endpoint.name),
            ));
        }
        state.inventory.endpoints.push(endpoint);
        Ok(())
    })
}

/// The endpoint of `porin_session_endpoint_add`'s arguments.
#[allow(
    clippy::too_many_arguments,
    reason = "C API: every buffer has its length"
)]
fn endpoint_arg(
    namespace: *const c_char,
    namespace_len: usize,
    name: *const c_char,
    name_len: usize,
    labels: *const porin_label,
    label_count: usize,
    ips: *const porin_str,
    ip_count: usize,
) -> Result<Endpoint, Failure> {
    let namespace = optional_namespace(namespace, namespace_len)?;
    let name = string(name, name_len).map_err(plain)?;
    if name.is_empty() || name.contains('/') {
        return Err(Failure::new(
            porin_result::InvalidParameter,
            format!("invalid endpoint name `{name}`"),
        ));
    }
    let labels = labels_arg(labels, label_count)?;
    let mut addresses: Vec<IpAddr> = Vec::new();
    for ip in array(ips, ip_count).map_err(plain)? {
        let text = string(ip.ptr, ip.len).map_err(plain)?;
        let address = text.trim().parse::<IpAddr>().map_err(|_| {
            Failure::new(
                porin_result::InvalidParameter,
                format!("`{text}` is not an IP address"),
            )
        })?;
        addresses.push(address);
    }
    Ok(Endpoint {
        name: name.to_owned(),
        namespace,
        labels,
        ips: addresses,
        service_account: None,
        ports: Vec::new(),
        identity: None,
        identity_labels: None,
        location: SourceLocation {
            file: "<porin_session_endpoint_add>".to_owned(),
            line: 0,
        },
    })
}

/// Removes one endpoint (its identity disappears when no other endpoint
/// has its labels). Returns OK, NOT_FOUND, NULL_PARAMETER, INVALID_UTF8,
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_endpoint_remove(
    session: *mut porin_session,
    namespace: *const c_char,
    namespace_len: usize,
    name: *const c_char,
    name_len: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let namespace = optional_namespace(namespace, namespace_len)?;
        let name = string(name, name_len).map_err(plain)?;
        let index = find(&state.inventory, namespace.as_ref(), name)
            .ok_or_else(|| Failure::new(porin_result::NotFound, format!("no endpoint `{name}`")))?;
        state.inventory.endpoints.remove(index);
        Ok(())
    })
}

/// Replaces the labels of one endpoint (its identity is recomputed at the
/// next compile; a given identity number or label set from a cluster dump
/// is dropped). Returns OK, NOT_FOUND, NULL_PARAMETER, INVALID_UTF8,
/// INVALID_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_endpoint_set_labels(
    session: *mut porin_session,
    namespace: *const c_char,
    namespace_len: usize,
    name: *const c_char,
    name_len: usize,
    labels: *const porin_label,
    label_count: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let namespace = optional_namespace(namespace, namespace_len)?;
        let name = string(name, name_len).map_err(plain)?;
        let labels = labels_arg(labels, label_count)?;
        let index = find(&state.inventory, namespace.as_ref(), name)
            .ok_or_else(|| Failure::new(porin_result::NotFound, format!("no endpoint `{name}`")))?;
        if let Some(endpoint) = state.inventory.endpoints.get_mut(index) {
            endpoint.labels = labels;
            endpoint.identity = None;
            endpoint.identity_labels = None;
        }
        Ok(())
    })
}

/// Compiles the session's policies against its inventory.
///
/// Incremental: identity numbers of the previous compile are kept for
/// endpoints whose labels did not change (as Cilium's allocator does), and
/// an endpoint's policy-map state is reused when its identity, its resolved
/// L4 policy, its named ports and the selections of every selector it
/// references are unchanged (`porin_session_compile_stats` says how many).
/// Lowering, identity allocation, the ipcache and diagnostics are
/// recomputed every time.
///
/// - `*out`: the compilation, written only on OK; free with
///   `porin_compilation_free`. It does not borrow the session.
/// - `out_diagnostics`: may be NULL. Otherwise `*out_diagnostics` receives
///   the findings (free with `porin_diagnostics_free`) when the result is
///   OK or POLICY_INVALID: that is the one output written on failure,
///   since it explains the failure.
///
/// Returns OK, POLICY_INVALID (a document has an error, including a load
/// limit exceeded: PM002 in the diagnostics), INVENTORY_INVALID,
/// LIMIT_EXCEEDED (a compile limit, see `porin_session_set_limit`; the
/// previous compilations stay valid and unchanged), COMPILE_FAILED,
/// EMIT_FAILED, NULL_PARAMETER (`out`), INVALID_HANDLE,
/// PANIC. Messages of failures: `porin_session_last_error`.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_compile(
    session: *mut porin_session,
    out: *mut *mut porin_compilation,
    out_diagnostics: *mut *mut porin_diagnostics,
) -> porin_result {
    with_session(session, |state| {
        out_ptr(out).map_err(plain)?;
        if !out_diagnostics.is_null() {
            out_ptr(out_diagnostics).map_err(plain)?;
        }
        let give_diagnostics = |diagnostics: Diagnostics| {
            if !out_diagnostics.is_null() {
                write_out(
                    out_diagnostics,
                    into_handle(diagnostics).cast::<porin_diagnostics>(),
                );
            }
        };
        if let Some(live) = &state.live {
            // A live session: its current state (every change is applied
            // already).
            let compiled = live.compiled();
            let findings: Vec<_> = compiled.all_diagnostics().cloned().collect();
            let compilation = Compilation::new(compiled)
                .map_err(|e| Failure::new(porin_result::EmitFailed, e.to_string()))?;
            // The texts added before the session went live, and those it
            // holds now (applied since).
            let mut sources = state.policies.sources.clone();
            for name in live.text_names() {
                if let Some(outcome) = live.policy(name) {
                    sources.extend(outcome.sources.clone());
                }
            }
            give_diagnostics(Diagnostics::new(findings, &sources));
            write_out(out, into_handle(compilation).cast::<porin_compilation>());
            return Ok(());
        }
        state.targeted_policies();
        let Session {
            targeted: Some((_, policies)),
            compiler,
            inventory: kept,
            stats: kept_stats,
            ..
        } = state
        else {
            return Err(Failure::from(porin_result::Panic));
        };
        if policies.has_errors() {
            give_diagnostics(Diagnostics::new(
                policies.diagnostics.clone(),
                &policies.sources,
            ));
            let errors = policies.diagnostics.iter().filter(|d| d.is_error()).count();
            let first = first_error(&policies.diagnostics);
            return Err(Failure::new(
                porin_result::PolicyInvalid,
                format!("{errors} error(s) in the policy documents{first}"),
            ));
        }
        let mut inventory = kept.clone();
        inventory.finish().map_err(|e| inventory_error(&e))?;
        let inputs = PolicyInput::from_outcome(policies);
        let (compiled, stats) = compiler
            .compile(&inputs, &inventory)
            .map_err(|e| compile_error(&e))?;
        let mut findings = policies.diagnostics.clone();
        findings.extend(compiled.all_diagnostics().cloned());
        let compilation = Compilation::new(compiled)
            .map_err(|e| Failure::new(porin_result::EmitFailed, e.to_string()))?;
        // Success: keep the assigned addresses and identity numbers.
        pin_identities(&mut inventory, &compilation.compiled);
        *kept = inventory;
        *kept_stats = stats;
        give_diagnostics(Diagnostics::new(findings, &policies.sources));
        write_out(out, into_handle(compilation).cast::<porin_compilation>());
        Ok(())
    })
}

/// What the last successful compile reused: `*out_reused` map states taken
/// from the cache, `*out_computed` distilled again. Returns OK,
/// NULL_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_compile_stats(
    session: *const porin_session,
    out_reused: *mut usize,
    out_computed: *mut usize,
) -> porin_result {
    boundary(|| {
        let state = session_ref(session)?;
        out_ptr(out_reused)?;
        out_ptr(out_computed)?;
        write_out(out_reused, state.stats.map_states_reused);
        write_out(out_computed, state.stats.map_states_computed);
        Ok(())
    })
}

/// The message of the session's last failed call (empty after a success),
/// borrowed: valid until the next call on this session. Not
/// NUL-terminated. Returns OK, NULL_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_last_error(
    session: *const porin_session,
    out: *mut *const c_char,
    out_len: *mut usize,
) -> porin_result {
    boundary(|| {
        let state = session_ref(session)?;
        out_ptr(out)?;
        out_ptr(out_len)?;
        write_out(out, state.last_error.as_ptr().cast::<c_char>());
        write_out(out_len, state.last_error.len());
        Ok(())
    })
}

/// Sets one resource limit of a session for the calls that follow.
///
/// - `which`: a `porin_limit` value (any other number gives
///   INVALID_PARAMETER, the session unchanged).
/// - `value`: the new limit; every number is valid: 0 refuses any input
///   that has one such item, `UINT64_MAX` is no limit.
///
/// Load and inventory limits apply to the texts and files added after the
/// call (what was added before is not re-read); compile limits (and
/// `PORIN_LIMIT_ENDPOINTS`, which also bounds inventory reads) apply to the
/// next `porin_session_compile`, which fails with LIMIT_EXCEEDED when one
/// is exceeded. Returns OK, INVALID_PARAMETER, NULL_PARAMETER (`session`),
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_set_limit(
    session: *mut porin_session,
    which: u32,
    value: u64,
) -> porin_result {
    with_session_limits(session, |limits| {
        let limit = porin_limit::from_u32(which).ok_or(Failure::new(
            porin_result::InvalidParameter,
            format!("{which} is not a porin_limit"),
        ))?;
        limit.set(limits, value);
        Ok(())
    })
}

/// Sets one Cilium agent setting that changes verdicts, by Cilium's flag
/// name (`allow-localhost`, `policy-default-local-cluster`,
/// `enable-node-selector-labels`, ...; docs/policy-tests.md#settings) and
/// its value as on Cilium's command line (`always`, `true`), as
/// `settings:` of an inventory text does. It applies from the next
/// `porin_session_compile`; inventory texts added later may set it again.
///
/// `enable-k8s-cluster-network-policy` (`true`/`false`, Cilium 1.20) is
/// part of the target, as `porin_session_set_cilium_version` is: it wins
/// over an inventory's `enableK8sClusterNetworkPolicy` and applies to the
/// policies already added.
///
/// Returns OK, INVALID_PARAMETER (an unknown flag, a value the flag does
/// not take, or one porin does not model: the message names it in
/// `porin_session_last_error`; the session is unchanged; or the session
/// is live), NULL_PARAMETER, INVALID_UTF8, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_set_setting(
    session: *mut porin_session,
    flag: *const c_char,
    flag_len: usize,
    value: *const c_char,
    value_len: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let flag = string(flag, flag_len).map_err(plain)?;
        let value = string(value, value_len).map_err(plain)?;
        let invalid = |message: String| Failure::new(porin_result::InvalidParameter, message);
        if flag == K8S_CLUSTER_NETWORK_POLICY_FLAG {
            let switch = match value {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(invalid(format!(
                        "{flag}: `{value}` is not `true` or `false`"
                    )));
                }
            };
            state.target.k8s_cluster_network_policy = Some(switch);
            return Ok(());
        }
        let spec = SettingsSpec::one(flag, value).map_err(invalid)?;
        let mut inventory = state.inventory.clone();
        spec.apply(&mut inventory.settings, &mut inventory.allow_localhost)
            .map_err(invalid)?;
        state.inventory = inventory;
        Ok(())
    })
}

/// The agent flag of the ClusterNetworkPolicy switch (Cilium 1.20,
/// `pkg/option/config.go`), taken by `porin_session_set_setting`.
const K8S_CLUSTER_NETWORK_POLICY_FLAG: &str = "enable-k8s-cluster-network-policy";

/// Sets the Cilium version the session's policies are validated and
/// compiled for: `"1.19"` (the default) or `"1.20"` (`MAJOR.MINOR`, a
/// patch release such as `1.20.1` is read as its minor). It wins over an
/// inventory's `ciliumVersion` and applies from the next
/// `porin_session_compile` to every policy, the ones added before too.
/// ClusterNetworkPolicy needs `"1.20"` and `enable-k8s-cluster-network-policy`
/// (`porin_session_set_setting`); without both, a session holding one
/// fails to compile with POLICY_INVALID (PM066 names what is missing).
///
/// Returns OK, INVALID_PARAMETER (a version porin does not model, or the
/// session is live: the message names the value and the modelled
/// versions in `porin_session_last_error`; the session is unchanged),
/// NULL_PARAMETER, INVALID_UTF8, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_set_cilium_version(
    session: *mut porin_session,
    version: *const c_char,
    version_len: usize,
) -> porin_result {
    with_session(session, |state| {
        not_live(state)?;
        let text = string(version, version_len).map_err(plain)?;
        let parsed = CiliumVersion::parse_modelled(text).map_err(|e| {
            Failure::new(
                porin_result::InvalidParameter,
                format!("Cilium version `{text}`: {e}"),
            )
        })?;
        state.target.version = Some(parsed);
        Ok(())
    })
}

/// Writes the current value of one limit of a session to `*out_value`.
///
/// - `which`: a `porin_limit` value (any other number gives
///   INVALID_PARAMETER).
///
/// Returns OK, INVALID_PARAMETER, NULL_PARAMETER (`session`, `out_value`),
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_get_limit(
    session: *const porin_session,
    which: u32,
    out_value: *mut u64,
) -> porin_result {
    boundary(|| {
        let limits = session_limits(session)?;
        out_ptr(out_value)?;
        let limit = porin_limit::from_u32(which).ok_or(porin_result::InvalidParameter)?;
        write_out(out_value, limit.get(limits));
        Ok(())
    })
}

// ---- live sessions: one change at a time, with the map writes ----

/// The writes of one `porin_session_apply_*` call. Opaque, immutable;
/// free with `porin_update_free`. Independent of the session.
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_update {
    _private: [u8; 0],
}

/// One endpoint of a `porin_update` (`porin_update_get`); `endpoint` is
/// borrowed from the update.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_endpoint_delta {
    /// `namespace/name` (or `name` outside Kubernetes), as
    /// `porin_compilation_endpoint_name` gives it.
    pub endpoint: porin_str,
    /// Its identity (before the call, for a removed endpoint).
    pub identity: u32,
    /// The endpoint is new: its writes fill an empty map.
    pub added: bool,
    /// The endpoint is gone: drop its map (no writes).
    pub removed: bool,
    /// Number of writes (`porin_update_diff` gives them).
    pub writes: usize,
}

struct UpdateOut {
    update: Update,
    reason: String,
}

fn update_ref<'a>(update: *const porin_update) -> Result<&'a UpdateOut, porin_result> {
    handle_ref(update.cast::<UpdateOut>())
}

fn session_error(error: &SessionError) -> Failure {
    match error {
        SessionError::Policy(diagnostics) => {
            let first = first_error(diagnostics);
            Failure::new(porin_result::PolicyInvalid, format!("{error}{first}"))
        }
        SessionError::Inventory(e) => inventory_error(e),
        SessionError::Compile(e) => compile_error(e),
        _ => Failure::new(porin_result::CompileFailed, error.to_string()),
    }
}

/// `: MESSAGE` of the first error among `diagnostics` (empty if none), for
/// a failure's message.
fn first_error(diagnostics: &[porin_model::Diagnostic]) -> String {
    diagnostics
        .iter()
        .find(|d| d.is_error())
        .map(|d| format!(": {}", d.message))
        .unwrap_or_default()
}

/// The live session, started from the batch inputs on first use.
fn live(state: &mut Session) -> Result<&mut LiveSession, Failure> {
    if state.live.is_none() {
        if state.policies.has_errors() {
            return Err(Failure::new(
                porin_result::PolicyInvalid,
                "the session's policy documents have errors; porin_session_compile lists them"
                    .to_owned(),
            ));
        }
        let policies = state.targeted_policies().clone();
        if policies.has_errors() {
            let first = first_error(&policies.diagnostics);
            return Err(Failure::new(
                porin_result::PolicyInvalid,
                format!("the session's policy documents are invalid for its target{first}"),
            ));
        }
        let texts = if policies.documents.is_empty() {
            Vec::new()
        } else {
            vec![("<session>".to_owned(), policies)]
        };
        let session = LiveSession::with_policies(
            state.inventory.clone(),
            texts,
            state.limits.compile.clone(),
        )
        .map_err(|e| session_error(&e))?;
        state.live = Some(session);
    }
    state
        .live
        .as_mut()
        .ok_or_else(|| Failure::from(porin_result::Panic))
}

fn give_update(out: *mut *mut porin_update, update: Update) {
    let reason = match &update.path {
        UpdatePath::Incremental => String::new(),
        UpdatePath::Full(reason) => (*reason).to_owned(),
    };
    write_out(
        out,
        into_handle(UpdateOut { update, reason }).cast::<porin_update>(),
    );
}

/// Adds the policy text `name` (YAML or JSON, one or more documents) to a
/// live session, or replaces the text of that name, and applies it at
/// once: `*out` lists every endpoint whose map changes, with its
/// hole-free writes (as `porin_compilation_policy_diff` between the
/// compilations before and after would give them, exactly).
///
/// **Live sessions.** The first `porin_session_apply_*` call makes the
/// session live: it compiles the policies and inventory added so far (the
/// documents added before become one text named `<session>`), and from
/// then on the session is edited with `porin_session_apply_*` only (the
/// batch edit functions return INVALID_PARAMETER) and
/// `porin_session_compile` returns its current state. Compile limits are
/// those set before the first apply; load limits are read at each apply.
/// A call that panics (an internal error) while the session is live
/// leaves it unusable: every later call returns PANIC (its maps may no
/// longer be what its policies give); free it and create a new one.
/// A change is applied incrementally when it can
/// be (rules changed, inserted or removed, a text added or removed, the
/// texts' CiliumCIDRGroups and the set of `log.value`s they name
/// unchanged; an endpoint with addresses and no named ports and a pod
/// identity; none of it while a ClusterNetworkPolicy is among the texts,
/// whose tiered maps are recompiled on every change), else the session recompiles in full; either way the writes
/// are exact
/// (`porin_update_path` says which). A CIDR prefix no policy named before
/// gets the lowest free local identity and keeps it while a policy names
/// it (Cilium, too, never renumbers a live local identity), so no other
/// prefix's identity is renumbered; unlike Cilium's allocator, which moves
/// on to the next number, a number freed by the same call may be taken
/// again at once. A text that adds, changes or removes a CiliumCIDRGroup
/// recompiles the session (the group's labels reach every text's CIDR
/// identities): keep groups in texts of their own, so that a policy
/// text's change stays incremental. A call that fails leaves the session
/// as it was.
///
/// **Re-parsing in place.** When the new text differs from the one it
/// replaces only inside one item of a block-sequence rule section
/// (`spec.ingress[3]`, in any document or `List` item), or by one such item
/// inserted or removed (not a section's only item, nor a new section), its
/// document had no finding and the item gets none, and neither version of
/// the item holds an anchor, alias, tag or block scalar, only that item is
/// parsed and checked again (and it is the only rule lowered again): a
/// port change of one rule of a 4,096-rule policy takes ~0.15 ms, a rule
/// inserted into it (before its first rule, too) ~0.5-1 ms on a 2-core
/// machine, with exactly the result a load of the whole text gives. Any
/// other text is loaded in full (~25 ms for that size).
/// The session keeps per text the load limits it was loaded under: after
/// `porin_session_set_limit` changes them, the text's next version is
/// loaded in full. (The Rust API's
/// `porin_compiler::session::Session::apply_policy_text`.)
///
/// Returns OK, NULL_PARAMETER, INVALID_UTF8, POLICY_INVALID (the text has
/// errors: nothing changed; the message names the first), LIMIT_EXCEEDED,
/// INVENTORY_INVALID, COMPILE_FAILED, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_apply_policy_bytes(
    session: *mut porin_session,
    name: *const c_char,
    name_len: usize,
    data: *const u8,
    len: usize,
    out: *mut *mut porin_update,
) -> porin_result {
    with_session(session, |state| {
        out_ptr(out).map_err(plain)?;
        let name = string(name, name_len).map_err(plain)?;
        let raw = bytes(data, len).map_err(plain)?;
        let text = std::str::from_utf8(raw).map_err(|e| {
            Failure::new(porin_result::InvalidUtf8, format!("{name}: not UTF-8: {e}"))
        })?;
        let load = TextLoad {
            limits: state.limits.load.clone(),
            target: Some(state.target()),
        };
        let reparse_off = state.reparse_off;
        let live = live(state)?;
        // In place when the session holds this text, loaded the same way,
        // and the edit is one the re-parse shows equal to a full load
        // (`porin_compiler::session::text`); else the full load.
        let (update, in_place) = if reparse_off {
            let update = live
                .set_policy(name, load.load(name, text))
                .map_err(|e| session_error(&e))?;
            (update, false)
        } else {
            let applied = live
                .apply_policy_text(name, text, &load)
                .map_err(|e| session_error(&e))?;
            (applied.update, applied.in_place)
        };
        // (The texts are the live session's: `porin_session_compile`
        // renders with them, so they are not copied here.)
        if in_place {
            state.in_place.insert(name.to_owned());
        } else {
            state.in_place.remove(name);
        }
        give_update(out, update);
        Ok(())
    })
}

/// Turns the in-place re-parse of `porin_session_apply_policy_bytes` off
/// (`on` false) or back on: with it off, every applied text is loaded in
/// full, as before the re-parse existed. Not part of the C API (no C
/// symbol): the reference of the tests and the same-run baseline of the
/// benchmark (`porin-bench role incr-child`).
#[doc(hidden)]
pub fn set_reparse(session: *mut porin_session, on: bool) -> porin_result {
    with_session(session, |state| {
        state.reparse_off = !on;
        Ok(())
    })
}

/// Whether the last `porin_session_apply_policy_bytes` of text `name`
/// was made in place (for the tests and the benchmark; no C symbol).
#[doc(hidden)]
pub fn applied_in_place(session: *const porin_session, name: &str) -> bool {
    session_ref(session).is_ok_and(|state| state.in_place.contains(name))
}

/// Removes the policy text `name` from a live session (see
/// `porin_session_apply_policy_bytes`) and applies it.
///
/// Returns OK, NOT_FOUND (no such text), NULL_PARAMETER, INVALID_UTF8,
/// LIMIT_EXCEEDED, COMPILE_FAILED, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_apply_policy_remove(
    session: *mut porin_session,
    name: *const c_char,
    name_len: usize,
    out: *mut *mut porin_update,
) -> porin_result {
    with_session(session, |state| {
        out_ptr(out).map_err(plain)?;
        let name = string(name, name_len).map_err(plain)?;
        let update = live(state)?
            .remove_policy(name)
            .ok_or_else(|| {
                Failure::new(porin_result::NotFound, format!("no policy text `{name}`"))
            })?
            .map_err(|e| session_error(&e))?;
        state.in_place.remove(name);
        give_update(out, update);
        Ok(())
    })
}

/// Adds one endpoint to a live session (see
/// `porin_session_apply_policy_bytes`) and applies it: a pod with labels
/// no other endpoint has gets a new identity, and every endpoint whose
/// peer selectors match it gets the writes for it (Cilium's selector cache
/// and `MapChanges`); the new endpoint's own map is in the update as
/// `added`. Arguments as `porin_session_endpoint_add`; without addresses,
/// porin assigns the automatic ones the inventory would (still applied
/// incrementally).
///
/// Returns OK, NULL_PARAMETER, INVALID_UTF8, INVALID_PARAMETER,
/// ALREADY_EXISTS, INVENTORY_INVALID, LIMIT_EXCEEDED, COMPILE_FAILED,
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
#[allow(
    clippy::too_many_arguments,
    reason = "C API: every buffer has its length"
)]
pub extern "C" fn porin_session_apply_endpoint_add(
    session: *mut porin_session,
    namespace: *const c_char,
    namespace_len: usize,
    name: *const c_char,
    name_len: usize,
    labels: *const porin_label,
    label_count: usize,
    ips: *const porin_str,
    ip_count: usize,
    out: *mut *mut porin_update,
) -> porin_result {
    with_session(session, |state| {
        out_ptr(out).map_err(plain)?;
        let endpoint = endpoint_arg(
            namespace,
            namespace_len,
            name,
            name_len,
            labels,
            label_count,
            ips,
            ip_count,
        )?;
        let live = live(state)?;
        if live.has_endpoint(&endpoint.display_name()) {
            return Err(Failure::new(
                porin_result::AlreadyExists,
                format!("endpoint `{}` already exists", endpoint.display_name()),
            ));
        }
        let update = live.add_endpoint(endpoint).map_err(|e| session_error(&e))?;
        give_update(out, update);
        Ok(())
    })
}

/// Removes one endpoint from a live session and applies it: when it was
/// the last endpoint of its identity, every map that held keys for that
/// identity loses them; the endpoint itself is in the update as `removed`.
///
/// Returns OK, NOT_FOUND, NULL_PARAMETER, INVALID_UTF8, LIMIT_EXCEEDED,
/// COMPILE_FAILED, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_session_apply_endpoint_remove(
    session: *mut porin_session,
    namespace: *const c_char,
    namespace_len: usize,
    name: *const c_char,
    name_len: usize,
    out: *mut *mut porin_update,
) -> porin_result {
    with_session(session, |state| {
        out_ptr(out).map_err(plain)?;
        let namespace = optional_namespace(namespace, namespace_len)?;
        let name = string(name, name_len).map_err(plain)?;
        let reference = match &namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_owned(),
        };
        let update = live(state)?
            .remove_endpoint(&reference)
            .ok_or_else(|| Failure::new(porin_result::NotFound, format!("no endpoint `{name}`")))?
            .map_err(|e| session_error(&e))?;
        give_update(out, update);
        Ok(())
    })
}

/// Number of endpoints in an update; 0 for NULL or a freed handle.
#[unsafe(no_mangle)]
pub extern "C" fn porin_update_count(update: *const porin_update) -> usize {
    boundary_value(0, || {
        update_ref(update).map_or(0, |u| u.update.deltas.len())
    })
}

/// Endpoint `index` (0-based; removed endpoints come first, then the
/// others in inventory order). Returns OK, INVALID_PARAMETER (index),
/// NULL_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_update_get(
    update: *const porin_update,
    index: usize,
    out: *mut porin_endpoint_delta,
) -> porin_result {
    boundary(|| {
        let u = update_ref(update)?;
        out_ptr(out)?;
        let delta = u
            .update
            .deltas
            .get(index)
            .ok_or(porin_result::InvalidParameter)?;
        write_out(
            out,
            porin_endpoint_delta {
                endpoint: crate::diagnostics::borrowed(&delta.endpoint),
                identity: delta.identity,
                added: delta.added,
                removed: delta.removed,
                writes: delta.changes.len(),
            },
        );
        Ok(())
    })
}

/// The writes of endpoint `index` as a new `porin_diff` (apply in order;
/// free with `porin_diff_free`). Returns OK, INVALID_PARAMETER (index),
/// NULL_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_update_diff(
    update: *const porin_update,
    index: usize,
    out: *mut *mut crate::compilation::porin_diff,
) -> porin_result {
    boundary(|| {
        let u = update_ref(update)?;
        out_ptr(out)?;
        let delta = u
            .update
            .deltas
            .get(index)
            .ok_or(porin_result::InvalidParameter)?;
        write_out(out, policy_diff_handle(&delta.changes));
        Ok(())
    })
}

/// How the update was computed: `*out_incremental` true when only what the
/// change touches was recomputed; otherwise `*out_reason` (borrowed from
/// the update, not NUL-terminated) says why the session recompiled in full.
/// The writes are exact either way. Returns OK, NULL_PARAMETER,
/// INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_update_path(
    update: *const porin_update,
    out_incremental: *mut bool,
    out_reason: *mut porin_str,
) -> porin_result {
    boundary(|| {
        let u = update_ref(update)?;
        out_ptr(out_incremental)?;
        out_ptr(out_reason)?;
        write_out(out_incremental, u.update.path == UpdatePath::Incremental);
        write_out(out_reason, crate::diagnostics::borrowed(&u.reason));
        Ok(())
    })
}

/// Frees an update. NULL is a no-op; a handle freed before is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn porin_update_free(update: *mut porin_update) {
    boundary_value((), || free_handle(update.cast::<UpdateOut>()));
}

#[cfg(test)]
#[path = "session/fast_path_tests.rs"]
mod fast_path_tests;
