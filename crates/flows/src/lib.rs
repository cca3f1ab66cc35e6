//! # porin-flows: recorded traffic in, "what would this break" out
//!
//! Input: Hubble flow exports (`hubble observe -o json` / `-o jsonpb`
//! lines, Hubble exporter files) and compilations of policies against an
//! inventory. Output: the recording's distinct flows resolved to the
//! inventory ([`observe::Recording`]) and, per policy set, how each
//! compares with what Cilium recorded ([`replay::Report`]). Nothing is
//! printed; the CLI (`porin replay`, `porin diff --flows`, `porin test
//! --from-flows`, `porin suggest`) owns output.
//!
//! The pipeline: [`reader::FlowReader`] streams lines in bounded memory
//! (one reused line buffer), [`parse::parse_line`] turns one line into a
//! [`record::FlowRecord`] or a skip reason (replies, L7 and socket events,
//! non-flow events), [`observe::record`] folds flows into distinct flows
//! with counts and first/last time, their ends resolved to inventory
//! endpoints, reserved entities or ipcache identities
//! ([`resolve::Resolver`]), and [`replay::replay`] decides each distinct
//! flow once with the reference evaluator. [`cases::policy_test`] writes
//! the distinct flows as a PolicyTest file, [`suggest::suggest`] writes
//! least-privilege policies from the forwarded flows.
//!
//! Diagnostic codes: `PF0xx` ([`codes::ALL`]).

#![forbid(unsafe_code)]

pub mod cases;
pub mod codes;
pub mod observe;
pub mod parse;
pub mod reader;
pub mod record;
pub mod replay;
pub mod resolve;
pub mod suggest;
pub mod time;
