//! # porin-compiler: identities, selectors and policy-map state
//!
//! Given validated policies (from `porin-model`) and an inventory of
//! endpoints, this stage allocates security identities, resolves selectors,
//! entities and CIDRs to identities, and computes for each endpoint the
//! policy-map entries Cilium 1.19 would enforce, with its precedence rules.
//! It also owns the reference evaluator that decides a flow from that state.
//!
//! Modules (one concept each):
//!
//! - [`identity`]: numeric security identities and their scopes;
//! - [`ports`]: port ranges as masked ports;
//! - [`mapstate`]: policy-map keys/entries, insertion algebra, lookup;
//! - [`ipcache`]: prefix → identity table and its datapath encoding.

pub mod identity;
pub mod ipcache;
pub mod mapstate;
pub mod ports;
