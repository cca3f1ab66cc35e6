//! `porin_str`: the string type of arguments and of borrowed results. A
//! leaf module: every other module of the C API may name it.

use std::ffi::c_char;

/// A string argument: `len` bytes of UTF-8 at `ptr` (no terminator
/// needed). `ptr` may be NULL only when `len` is 0.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub struct porin_str {
    /// First byte.
    pub ptr: *const c_char,
    /// Length in bytes.
    pub len: usize,
}
