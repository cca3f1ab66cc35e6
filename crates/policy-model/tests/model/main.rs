//! The integration tests of this crate, one module per former test file, linked into one
//! test binary (one link of the crate and its dependencies instead of one per file; see
//! BENCHMARKS.md, "cargo test --workspace: build and link").

mod cilium_quirks;
mod codes_doc;
mod corpus;
mod docs_standalone;
mod duplicates;
mod examples;
mod invalid_fixtures;
mod limits;
mod multiple_errors;
mod regression_fuzz;
mod released_trees;
mod reparse;
mod schema;
mod suggestions;
