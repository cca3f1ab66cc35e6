//! The integration tests of this crate, one module per former test file, linked into one
//! test binary (one link of the crate and its dependencies instead of one per file; see
//! BENCHMARKS.md, "cargo test --workspace: build and link").

mod cidr_groups;
mod codes_doc;
mod corpus;
mod host_firewall;
mod inventory;
mod limits_compile;
mod limits_inventory;
mod localhost;
mod nodes;
mod parallel;
mod properties;
mod properties_inventory;
mod resolve;
mod settings;
mod support;
