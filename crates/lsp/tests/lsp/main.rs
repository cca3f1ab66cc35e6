//! The integration tests of porin-lsp, one module per area, linked into one
//! test binary.

// Helpers outside `#[test]` functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod common;
mod protocol;
