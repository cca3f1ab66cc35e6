//! The result codes of the C API and their messages.

/// The result of every fallible call. Numbers are fixed forever and grouped:
/// 0-99 general, 100-199 policy model, 200-299 compiler, 300-399 code
/// generation. A retired number is never reused.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub enum porin_result {
    /// Success.
    Ok = 0,
    /// A pointer argument that must not be NULL was NULL.
    NullParameter = 1,
    /// An argument is out of range (a length, an index, an unknown enum
    /// value, a misaligned pointer).
    InvalidParameter = 2,
    /// A string argument is not valid UTF-8.
    InvalidUtf8 = 3,
    /// The output buffer is too small; nothing was written.
    BufferTooSmall = 4,
    /// The named endpoint (or other item) does not exist.
    NotFound = 5,
    /// The handle is not live: already freed, or never returned by porin.
    InvalidHandle = 6,
    /// A file or directory could not be read.
    Io = 7,
    /// porin hit an internal error (a caught panic). The handle arguments
    /// are still usable; please report it.
    Panic = 8,
    /// The item already exists (e.g. an endpoint of the same name).
    AlreadyExists = 9,
    /// A policy document has errors (see the diagnostics).
    PolicyInvalid = 100,
    /// The policy input exceeds the load limits (files, bytes, depth).
    PolicyTooLarge = 101,
    /// The inventory is invalid (duplicate endpoint, address in use, bad
    /// YAML); see `porin_session_last_error`.
    InventoryInvalid = 200,
    /// Compilation failed (identity conflicts, capacity); see
    /// `porin_session_last_error`.
    CompileFailed = 201,
    /// A flow peer is not an endpoint, an address or an entity.
    UnknownPeer = 202,
    /// A resource limit was exceeded (rules, identities, map entries,
    /// inventory size, ...); `porin_session_last_error` names the limit,
    /// the amount needed, the limit, and the `porin_limit` that raises it
    /// (`porin_session_set_limit`). Nothing was produced.
    LimitExceeded = 203,
    /// The eBPF object could not be generated.
    EmitFailed = 300,
}

impl porin_result {
    /// Every code, for tests and the C suite's table.
    pub const ALL: [porin_result; 17] = [
        Self::Ok,
        Self::NullParameter,
        Self::InvalidParameter,
        Self::InvalidUtf8,
        Self::BufferTooSmall,
        Self::NotFound,
        Self::InvalidHandle,
        Self::Io,
        Self::Panic,
        Self::AlreadyExists,
        Self::PolicyInvalid,
        Self::PolicyTooLarge,
        Self::InventoryInvalid,
        Self::CompileFailed,
        Self::UnknownPeer,
        Self::LimitExceeded,
        Self::EmitFailed,
    ];

    /// The code of a number, if it is one.
    pub fn from_u32(code: u32) -> Option<porin_result> {
        Self::ALL.iter().copied().find(|c| *c as u32 == code)
    }

    /// The message (English, one line, no trailing period).
    pub fn message(self) -> &'static str {
        match self {
            Self::Ok => "success",
            Self::NullParameter => "a required pointer argument was NULL",
            Self::InvalidParameter => "an argument is out of range",
            Self::InvalidUtf8 => "a string argument is not valid UTF-8",
            Self::BufferTooSmall => "the output buffer is too small",
            Self::NotFound => "no such endpoint or item",
            Self::InvalidHandle => "the handle was already freed or is not a porin handle",
            Self::Io => "a file or directory could not be read",
            Self::Panic => "internal error in porin (caught panic)",
            Self::AlreadyExists => "the item already exists",
            Self::PolicyInvalid => "a policy document has errors (see the diagnostics)",
            Self::PolicyTooLarge => "the policy input exceeds the load limits",
            Self::InventoryInvalid => "the inventory is invalid",
            Self::CompileFailed => "compilation failed",
            Self::UnknownPeer => "unknown flow peer (not an endpoint, address or entity)",
            Self::LimitExceeded => "a resource limit was exceeded (see porin_session_set_limit)",
            Self::EmitFailed => "the eBPF object could not be generated",
        }
    }
}

/// Longest message of `porin_result_message` plus its NUL terminator.
pub const PORIN_RESULT_MESSAGE_MAX: usize = 128;

/// A failed call: its result and the message kept for
/// `porin_session_last_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// What the call returns.
    pub(crate) code: porin_result,
    /// What `porin_session_last_error` gives.
    pub(crate) message: String,
}

impl Failure {
    /// A failure with its own message.
    pub(crate) fn new(code: porin_result, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<porin_result> for Failure {
    /// A failure whose message is the result's own.
    fn from(code: porin_result) -> Self {
        Failure::new(code, code.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_messages_fit() {
        for (i, a) in porin_result::ALL.iter().enumerate() {
            assert!(a.message().len() < PORIN_RESULT_MESSAGE_MAX);
            for b in &porin_result::ALL[i + 1..] {
                assert_ne!(*a as u32, *b as u32);
            }
            assert_eq!(porin_result::from_u32(*a as u32), Some(*a));
        }
        assert_eq!(porin_result::from_u32(77), None);
    }
}
