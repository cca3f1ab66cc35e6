//! # porin-compiler: identities, selectors and policy-map state
//!
//! Given validated policies (from `porin-model`) and an inventory of
//! endpoints, this stage allocates security identities, resolves selectors,
//! entities and CIDRs to identities, and computes for each endpoint the
//! policy-map entries Cilium 1.19 would enforce, with its precedence rules.
//! It also owns the reference evaluator that decides a flow from that state.
