//! The integration tests of porin-flows, one module per subject, linked
//! into one test binary.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod boutique;
mod common;
mod parse;
mod quickstart;
mod reader;
mod suggest;
