//! # porin-connectivity: which flows a compilation allows
//!
//! The connectivity model that `porin graph`, `porin diff` and the lint
//! rules of porin-lint share, on top of porin-compiler's map states.
//!
//! Input: compiled map states ([`porin_compiler::mapstate::MapState`]) or
//! whole compilations ([`porin_compiler::compile::Compiled`]). Output:
//! - [`analysis`]: the representative flows ([`analysis::FlowPoint`]) that
//!   decide every flow of one or more map states, and whether two states
//!   decide every flow alike (the shadowing rules of porin-lint);
//! - [`flows`]: the port classes cut by the keys of several states, and the
//!   flows allowed between two peers as merged port ranges per protocol
//!   (`porin graph`);
//! - [`change`]: the connectivity diff of two compilations of one
//!   inventory, per endpoint, direction and peer, "now allowed" and "now
//!   denied" port ranges, peers named as users name them (`porin diff
//!   --per-direction`, the C API);
//! - [`graph`]: the allowed-connectivity graph between workloads and the
//!   world, its wildcard edges marked and collapsible, as DOT (`porin
//!   graph`); [`render`]: its SVG and HTML renderings with a layered
//!   layout of its own (no Graphviz);
//! - [`connections`]: the change in effective (end-to-end) connectivity
//!   between workloads and external peer classes, attributed to the rule
//!   items that caused it (`porin diff`);
//! - [`reach`]: of the flows one allow rule grants at its subject, which
//!   the peer's own policy (the other direction) lets through end to end
//!   (porin-lint's PR019 `unreachable-end-to-end`).
//!
//! Guarantees: every answer is exact, not sampled. A map state decides a
//! flow from (direction, peer identity, protocol, port) only, and the
//! verdict is constant on each class cut by the keys, so one lookup per
//! class decides every flow of the class. Cost: one map lookup per class,
//! that is per (direction, identity named by a key plus one, protocol named
//! by a key plus one, port interval between key boundaries) and state;
//! linear in the number of keys per identity and protocol, no search over
//! the 2^16 ports. Nothing here reads files, prints or fails: the inputs
//! are already compiled.

// No unsafe code: system calls live in porin-kernel, the C ABI in porin-capi.
#![forbid(unsafe_code)]

pub mod analysis;
pub mod change;
pub mod connections;
pub mod flows;
pub mod graph;
pub mod reach;
pub mod render;
