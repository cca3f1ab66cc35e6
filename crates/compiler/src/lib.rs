//! # porin-compiler: identities, selectors and policy-map state
//!
//! Given validated policies (from `porin-model`) and an inventory of
//! endpoints, this stage allocates security identities, resolves selectors,
//! entities and CIDRs to identities, and computes for each endpoint the
//! policy-map entries Cilium 1.19 would enforce, with its precedence rules.
//! It also owns the reference evaluator that decides a flow from that state.
//! The later steps build on its output: the lint rules (`porin-lint`), the
//! `porin test` runner (`porin-policytest`) and the object's map contents
//! (`porin-ebpf`).
//!
//! Modules (one concept each):
//!
//! - [`identity`]: numeric security identities and their scopes;
//! - [`ports`]: port ranges as masked ports;
//! - [`mapstate`]: policy-map keys/entries, insertion algebra, lookup;
//! - [`ipcache`]: prefix → identity table and its datapath encoding;
//! - [`labels`], [`selector`]: identity labels and label selectors;
//! - [`inventory`]: the endpoints policies are judged against;
//! - [`allocation`]: identity allocation for label sets and prefixes;
//! - [`resolve`]: policy → L4 filters → map state;
//! - [`compile`]: the driver and its output ([`compile::Compiled`]); the
//!   synthetic cluster generators of the benchmarks and tests
//!   (`compile::synthetic`) need the `synthetic` feature;
//! - [`explain`]: the reference evaluator of flows;
//! - [`codes`]: the stage's diagnostic codes (`PC0xx`);
//! - [`limits`]: compile-time resource limits ([`limits::CompileLimits`]);
//! - [`error`]: the stage's errors.

// No unsafe code: system calls live in porin-kernel, the C ABI in porin-capi.
#![forbid(unsafe_code)]

pub mod allocation;
pub mod cidrgroup;
pub mod codes;
pub mod compile;
pub mod diff;
pub mod error;
pub mod explain;
pub mod identity;
pub mod inventory;
pub mod ipcache;
pub mod labels;
pub mod limits;
pub mod mapstate;
pub mod ports;
pub mod resolve;
pub mod selector;
pub mod session;
pub mod settings;
pub mod tier;
