//! The integration tests of this crate, one module per former test file, linked into one
//! test binary (one link of the crate and its dependencies instead of one per file; see
//! BENCHMARKS.md, "cargo test --workspace: build and link").

mod verify_advice;
mod verify_corpus;
mod verify_fixtures;
mod verify_nca;
mod verify_reach;
mod verify_semantics;
mod verify_shadowing;
mod verify_threads;
