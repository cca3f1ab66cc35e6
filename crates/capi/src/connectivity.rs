//! `porin_connectivity_diff`: how connectivity changes between two
//! compilations, named as users name workloads (what `porin diff` prints),
//! from [`porin_connectivity::change::diff`].

use porin_compiler::mapstate::Direction;
use porin_connectivity::change::diff;
use porin_connectivity::flows::describe;

use crate::compilation::{Compilation, porin_compilation};
use crate::diagnostics::borrowed;
use crate::ffi::{
    boundary, boundary_value, free_handle, handle_ref, into_handle, out_ptr, write_out,
};
use crate::result::porin_result;
use crate::strings::porin_str;

/// The direction of an endpoint's policy.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub enum porin_direction {
    /// Traffic to the endpoint (its ingress policy).
    Ingress = 0,
    /// Traffic from the endpoint (its egress policy).
    Egress = 1,
}

/// One changed (endpoint, direction, peer). The strings are borrowed from
/// the `porin_connectivity_diff` and valid until it is freed.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_connectivity_change {
    /// The endpoint whose policy decides, `namespace/name`.
    pub endpoint: porin_str,
    /// Ingress (from `peer`) or egress (to `peer`).
    pub direction: porin_direction,
    /// The peer: the endpoints of an identity (`prod/web`, three names then
    /// `and N more`), `reserved:world`, `cidr 10.0.0.0/8`, ...
    pub peer: porin_str,
    /// What was denied and is allowed now (`TCP/8080, UDP/53`, `any`);
    /// empty when nothing.
    pub now_allowed: porin_str,
    /// What was allowed and is denied now; empty when nothing.
    pub now_denied: porin_str,
}

/// The connectivity changes between two compilations. Opaque, immutable;
/// free with `porin_connectivity_diff_free`. Thread-safe to read.
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_connectivity_diff {
    _private: [u8; 0],
}

struct Row {
    endpoint: String,
    direction: porin_direction,
    peer: String,
    now_allowed: String,
    now_denied: String,
}

struct ConnectivityDiff {
    rows: Vec<Row>,
}

/// How connectivity changes from `old` to `new` (two compilations of the
/// same endpoints): for every endpoint in both, each direction and peer
/// whose verdict changes on some port, what is now allowed and now denied.
/// Exact (every port class cut by the keys of both map states is decided
/// in both). Endpoints present in only one compilation are not compared;
/// `porin_compilation_policy_diff` gives the map writes.
///
/// Returns OK, NULL_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_compilation_connectivity_diff(
    old: *const porin_compilation,
    new: *const porin_compilation,
    out: *mut *mut porin_connectivity_diff,
) -> porin_result {
    boundary(|| {
        let old = handle_ref(old.cast::<Compilation>())?;
        let new = handle_ref(new.cast::<Compilation>())?;
        out_ptr(out)?;
        let rows = diff(&old.compiled, &new.compiled)
            .into_iter()
            .flat_map(|endpoint| {
                let name = endpoint.name;
                endpoint.changes.into_iter().map(move |change| Row {
                    endpoint: name.clone(),
                    direction: match change.direction {
                        Direction::Ingress => porin_direction::Ingress,
                        Direction::Egress => porin_direction::Egress,
                    },
                    peer: change.peer,
                    now_allowed: describe(&change.now_allowed),
                    now_denied: describe(&change.now_denied),
                })
            })
            .collect();
        write_out(
            out,
            into_handle(ConnectivityDiff { rows }).cast::<porin_connectivity_diff>(),
        );
        Ok(())
    })
}

/// Number of changes; 0 for NULL or a freed handle.
#[unsafe(no_mangle)]
pub extern "C" fn porin_connectivity_diff_count(diff: *const porin_connectivity_diff) -> usize {
    boundary_value(0, || {
        handle_ref(diff.cast::<ConnectivityDiff>()).map_or(0, |d| d.rows.len())
    })
}

/// Change `index` (0-based; endpoints in order, then direction and peer).
/// Returns OK, INVALID_PARAMETER (index), NULL_PARAMETER, INVALID_HANDLE,
/// PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_connectivity_diff_get(
    diff: *const porin_connectivity_diff,
    index: usize,
    out: *mut porin_connectivity_change,
) -> porin_result {
    boundary(|| {
        let d = handle_ref(diff.cast::<ConnectivityDiff>())?;
        out_ptr(out)?;
        let row = d.rows.get(index).ok_or(porin_result::InvalidParameter)?;
        write_out(
            out,
            porin_connectivity_change {
                endpoint: borrowed(&row.endpoint),
                direction: row.direction,
                peer: borrowed(&row.peer),
                now_allowed: borrowed(&row.now_allowed),
                now_denied: borrowed(&row.now_denied),
            },
        );
        Ok(())
    })
}

/// Frees a connectivity difference. NULL is a no-op; a handle freed before
/// is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn porin_connectivity_diff_free(diff: *mut porin_connectivity_diff) {
    boundary_value((), || free_handle(diff.cast::<ConnectivityDiff>()));
}
