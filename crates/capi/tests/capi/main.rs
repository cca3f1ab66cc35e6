//! The integration tests of this crate, one module per former test file, linked into one
//! test binary (one link of the crate and its dependencies instead of one per file; see
//! BENCHMARKS.md, "cargo test --workspace: build and link").

mod c_agent;
mod c_compile_failure;
mod c_suite;
mod c_threads;
mod common;
mod go_agent;
mod header;
