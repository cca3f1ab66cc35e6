//! The integration tests of this crate, one module per former test file, linked into one
//! test binary (one link of the crate and its dependencies instead of one per file; see
//! BENCHMARKS.md, "cargo test --workspace: build and link").

mod action;
mod baseline;
mod boutique_explanations;
mod cidr_covers_pods;
mod cilium_version;
mod cilium_version_inputs;
mod cli;
mod common;
mod compile_states;
mod diff_boutique;
mod docsite;
mod duplicate_pair;
mod duplicates;
mod editors;
mod family_output;
mod graph_render;
mod limits;
mod limits_memory;
mod lint_context;
mod mutual_auth;
mod names;
mod no_silent_green;
mod node_settings;
mod precommit;
mod release;
mod replay;
mod reuse_manifests;
mod services;
mod test_junit;
mod verify_diff_graph;
mod verify_formats;
mod world_peer;
