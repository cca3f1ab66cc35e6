//! `porin_diagnostics`: the findings of a compile, with their locations.

use porin_model::diagnostic::{Diagnostic, Severity, SourceMap, render_human_all};

use crate::ffi::{boundary, boundary_value, free_handle, handle_ref, out_ptr, write_out};
use crate::result::porin_result;
use crate::strings::porin_str;

/// The findings of one `porin_session_compile`. Opaque, immutable.
///
/// Ownership: returned by `porin_session_compile`, freed by
/// `porin_diagnostics_free`. Threading: immutable, so any number of threads
/// may read it at once. Strings it hands out are borrowed from it.
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_diagnostics {
    _private: [u8; 0],
}

/// How serious a finding is.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub enum porin_severity {
    /// Compilation cannot succeed.
    Error = 0,
    /// Probably a mistake.
    Warning = 1,
    /// For information.
    Info = 2,
}

/// One finding; every string is borrowed from the `porin_diagnostics` and
/// valid until it is freed. `file` is empty and `line`/`column` 0 when the
/// finding has no location.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_diagnostic {
    /// Stable code, e.g. `PM003`.
    pub code: porin_str,
    /// Severity.
    pub severity: porin_severity,
    /// One-line message.
    pub message: porin_str,
    /// Display path of the file.
    pub file: porin_str,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// Field path, e.g. `spec.ingress[0].toPorts[0].ports[0].port`.
    pub route: porin_str,
}

pub(crate) struct Diagnostics {
    items: Vec<Diagnostic>,
    rendered: String,
}

impl Diagnostics {
    pub(crate) fn new(items: Vec<Diagnostic>, sources: &SourceMap) -> Self {
        let rendered = render_human_all(&items, sources);
        Self { items, rendered }
    }
}

/// A `porin_str` borrowing `text` (valid while its owner lives).
pub(crate) fn borrowed(text: &str) -> porin_str {
    porin_str {
        ptr: text.as_ptr().cast(),
        len: text.len(),
    }
}

/// Number of findings; 0 for NULL or a freed handle.
#[unsafe(no_mangle)]
pub extern "C" fn porin_diagnostics_count(diagnostics: *const porin_diagnostics) -> usize {
    boundary_value(0, || {
        handle_ref(diagnostics.cast::<Diagnostics>()).map_or(0, |d| d.items.len())
    })
}

/// Writes finding `index` (0-based) to `*out`. Returns OK, NULL_PARAMETER,
/// INVALID_PARAMETER (index out of range), INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_diagnostics_get(
    diagnostics: *const porin_diagnostics,
    index: usize,
    out: *mut porin_diagnostic,
) -> porin_result {
    boundary(|| {
        let diagnostics = handle_ref(diagnostics.cast::<Diagnostics>())?;
        out_ptr(out)?;
        let item = diagnostics
            .items
            .get(index)
            .ok_or(porin_result::InvalidParameter)?;
        let (file, line, column, route) = match &item.primary {
            Some(location) => (
                borrowed(&location.file),
                location.line,
                location.column,
                borrowed(&location.route),
            ),
            None => (borrowed(""), 0, 0, borrowed("")),
        };
        write_out(
            out,
            porin_diagnostic {
                code: borrowed(item.code),
                severity: match item.severity {
                    Severity::Error => porin_severity::Error,
                    Severity::Warning => porin_severity::Warning,
                    Severity::Info => porin_severity::Info,
                },
                message: borrowed(&item.message),
                file,
                line,
                column,
                route,
            },
        );
        Ok(())
    })
}

/// All findings rendered like a compiler (`error[PM003]: ...`, `--> file:line:col`,
/// the source line with a caret), borrowed from `diagnostics`. Returns OK,
/// NULL_PARAMETER, INVALID_HANDLE, PANIC.
#[unsafe(no_mangle)]
pub extern "C" fn porin_diagnostics_render(
    diagnostics: *const porin_diagnostics,
    out: *mut porin_str,
) -> porin_result {
    boundary(|| {
        let diagnostics = handle_ref(diagnostics.cast::<Diagnostics>())?;
        out_ptr(out)?;
        write_out(out, borrowed(&diagnostics.rendered));
        Ok(())
    })
}

/// Frees findings. NULL is a no-op; a handle freed before is ignored.
#[unsafe(no_mangle)]
pub extern "C" fn porin_diagnostics_free(diagnostics: *mut porin_diagnostics) {
    boundary_value((), || free_handle(diagnostics.cast::<Diagnostics>()));
}
