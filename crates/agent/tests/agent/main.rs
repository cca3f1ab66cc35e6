//! porin agent, end to end: real traffic between network namespaces through the agent's
//! programs on veth (and tap) devices. Needs root; without it every test prints `SKIPPED`, and
//! fails under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod enforce;
mod netns;
mod probe;
mod restart;
mod swaps;
mod switch;
mod tap;
