//! The integration tests of this crate, one module per former test file, linked into one
//! test binary (one link of the crate and its dependencies instead of one per file; see
//! BENCHMARKS.md, "cargo test --workspace: build and link").

mod kernel_support;
mod support;

mod conntrack_differential;
mod differential;
mod events;
mod fixtures_both_engines;
#[cfg(target_os = "linux")]
mod kernel_aya;
mod kernel_datapath;
mod kernel_faults;
mod kernel_loader;
mod kernel_model;
mod kernel_sys;
#[cfg(target_os = "linux")]
mod loaders;
mod policy_differential;
