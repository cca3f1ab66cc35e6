//! The machinery every entry point uses: the panic boundary, the registry
//! of live handles, and checked conversions of C arguments.
//!
//! All `unsafe` of the crate that dereferences caller pointers lives in the
//! small helpers here, each with its SAFETY contract; the entry points only
//! call them.

use std::any::TypeId;
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use crate::result::porin_result;

/// Runs an entry point body, turning a panic into [`porin_result::Panic`].
pub(crate) fn boundary(body: impl FnOnce() -> Result<(), porin_result>) -> porin_result {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => porin_result::Ok,
        Ok(Err(code)) => code,
        Err(_) => porin_result::Panic,
    }
}

/// Runs a body that returns a plain value; a panic gives `fallback`.
pub(crate) fn boundary_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// Addresses of the handles currently owned by the caller, by Rust type.
/// A handle not in here (NULL, freed, or never ours) is refused with
/// `PORIN_RESULT_INVALID_HANDLE`, and `_free` of it is a no-op: that is
/// how a double free is detected (unless the allocator has since reused
/// the address for a new handle of the same type).
static LIVE: Mutex<BTreeSet<(TypeId, usize)>> = Mutex::new(BTreeSet::new());

// Never inlined: the race checker's suppression of the registry's
// futex-based lock (`tests/c/threads.supp`) matches this frame, which an
// optimised build would otherwise fold into every caller (the release
// build's helgrind run then reported the lock it cannot see).
#[inline(never)]
fn with_live<R>(f: impl FnOnce(&mut BTreeSet<(TypeId, usize)>) -> R) -> R {
    let mut guard = match LIVE.lock() {
        Ok(guard) => guard,
        // A panic while holding the lock cannot leave the set half-updated
        // (insert/remove are single operations), so the data is usable.
        Err(poisoned) => poisoned.into_inner(),
    };
    f(&mut guard)
}

/// Moves a value to the heap and registers it as a live handle.
pub(crate) fn into_handle<T: 'static>(value: T) -> *mut T {
    let pointer = Box::into_raw(Box::new(value));
    with_live(|live| live.insert((TypeId::of::<T>(), pointer as usize)));
    pointer
}

/// Unregisters and drops a handle; NULL, unknown and freed handles are
/// ignored.
pub(crate) fn free_handle<T: 'static>(pointer: *mut T) {
    if pointer.is_null() {
        return;
    }
    let was_live = with_live(|live| live.remove(&(TypeId::of::<T>(), pointer as usize)));
    if was_live {
        // SAFETY: the pointer was produced by `into_handle::<T>` (it was in
        // the registry under T's TypeId) and is removed from the registry
        // before this drop, so it is dropped exactly once.
        drop(unsafe { Box::from_raw(pointer) });
    }
}

/// Borrows a live handle.
pub(crate) fn handle_ref<'a, T: 'static>(pointer: *const T) -> Result<&'a T, porin_result> {
    if pointer.is_null() {
        return Err(porin_result::NullParameter);
    }
    if !with_live(|live| live.contains(&(TypeId::of::<T>(), pointer as usize))) {
        return Err(porin_result::InvalidHandle);
    }
    // SAFETY: registered pointers come from `Box::into_raw` and stay valid
    // until `free_handle` unregisters them. The documented threading rules
    // forbid freeing a handle while another call uses it.
    Ok(unsafe { &*pointer })
}

/// Borrows a live handle mutably.
pub(crate) fn handle_mut<'a, T: 'static>(pointer: *mut T) -> Result<&'a mut T, porin_result> {
    if pointer.is_null() {
        return Err(porin_result::NullParameter);
    }
    if !with_live(|live| live.contains(&(TypeId::of::<T>(), pointer as usize))) {
        return Err(porin_result::InvalidHandle);
    }
    // SAFETY: as in `handle_ref`; mutable handles (sessions) are documented
    // as usable from one thread at a time, so no other reference exists.
    Ok(unsafe { &mut *pointer })
}

/// A byte buffer given as pointer + length. NULL is allowed only with
/// length 0.
pub(crate) fn bytes<'a>(data: *const u8, len: usize) -> Result<&'a [u8], porin_result> {
    if data.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(porin_result::NullParameter)
        };
    }
    if len > isize::MAX as usize {
        return Err(porin_result::InvalidParameter);
    }
    // SAFETY: the caller promises `data` points to `len` readable bytes that
    // do not change during the call (documented for every buffer argument).
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// A UTF-8 string given as pointer + length (no terminator needed).
pub(crate) fn string<'a>(
    data: *const std::ffi::c_char,
    len: usize,
) -> Result<&'a str, porin_result> {
    let raw = bytes(data.cast::<u8>(), len)?;
    std::str::from_utf8(raw).map_err(|_| porin_result::InvalidUtf8)
}

/// A C array of `count` elements. NULL is allowed only with count 0.
pub(crate) fn array<'a, T>(data: *const T, count: usize) -> Result<&'a [T], porin_result> {
    if data.is_null() {
        return if count == 0 {
            Ok(&[])
        } else {
            Err(porin_result::NullParameter)
        };
    }
    if count
        .checked_mul(std::mem::size_of::<T>())
        .is_none_or(|n| n > isize::MAX as usize)
    {
        return Err(porin_result::InvalidParameter);
    }
    if !(data as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(porin_result::InvalidParameter);
    }
    // SAFETY: the caller promises `count` initialised, readable elements.
    Ok(unsafe { std::slice::from_raw_parts(data, count) })
}

/// Checks an out-pointer for NULL (before any work is done).
pub(crate) fn out_ptr<T>(pointer: *mut T) -> Result<(), porin_result> {
    if pointer.is_null() {
        Err(porin_result::NullParameter)
    } else if !(pointer as usize).is_multiple_of(std::mem::align_of::<T>()) {
        Err(porin_result::InvalidParameter)
    } else {
        Ok(())
    }
}

/// Writes an output (only ever called on success, after `out_ptr`).
pub(crate) fn write_out<T>(pointer: *mut T, value: T) {
    if pointer.is_null() {
        return;
    }
    // SAFETY: checked non-NULL; the caller promises a writable, aligned T.
    unsafe { pointer.write(value) };
}

/// Copies `text` and a NUL into the caller's buffer `buf` of `len` bytes.
pub(crate) fn write_c_string(
    buf: *mut std::ffi::c_char,
    len: usize,
    text: &str,
) -> Result<(), porin_result> {
    out_ptr(buf)?;
    if len < text.len() + 1 {
        return Err(porin_result::BufferTooSmall);
    }
    // SAFETY: `buf` is non-NULL and the caller promises `len` writable
    // bytes; we write `text.len() + 1 <= len` of them.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        buf.add(text.len()).write(0);
    }
    Ok(())
}
