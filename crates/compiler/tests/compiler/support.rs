//! Helpers shared by the test modules of this binary.

#![allow(clippy::unwrap_used, reason = "test helpers panic on broken fixtures")]

use porin_compiler::compile::Compiled;
use porin_compiler::explain::{Flow, FlowVerdict, Peer, evaluate};
use porin_compiler::resolve::rule::proto;

/// The reference verdict of a flow between two peers of `compiled`
/// (`Peer::parse` words), in every family both have.
pub fn verdict_of(compiled: &Compiled, from: &str, to: &str, proto: u8, port: u16) -> FlowVerdict {
    let flow = Flow {
        from: Peer::parse(from, compiled).unwrap(),
        to: Peer::parse(to, compiled).unwrap(),
        proto,
        port,
        family: None,
    };
    evaluate(compiled, &flow).verdict
}

/// [`verdict_of`] for TCP.
pub fn tcp_verdict(compiled: &Compiled, from: &str, to: &str, port: u16) -> FlowVerdict {
    verdict_of(compiled, from, to, proto::TCP, port)
}
