//! `porin`: lint, compile, test and emit Cilium-compatible network policy.

fn main() {}
