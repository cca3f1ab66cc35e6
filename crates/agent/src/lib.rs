//! # porin-agent: enforce Cilium policy on a host's interfaces
//!
//! The agent a host runs when its workloads (microVMs behind taps, containers behind veths) are
//! not Kubernetes pods but should get Cilium's policy model: it reads a policy directory (CNP,
//! CCNP, KNP) and an inventory whose endpoints name their host-side device
//! (`interface: tap3`), compiles them into a live session ([`porin_compiler::session`]), and
//! attaches one porin object per endpoint to its device with pinned tcx links
//! ([`porin_kernel::attach`]).
//!
//! - **Live changes**: [`Agent::watch`] watches the inputs (inotify, through `notify`) and
//!   [`Agent::reload`] applies each change: the session recompiles incrementally (a policy
//!   file whose change lies in one rule item has only that item parsed again,
//!   `Session::apply_policy_text`), each endpoint
//!   whose map state changed gets its complete new state through the A/B switch, which all
//!   endpoints share (one flip for the whole change, [`switch`], DATAPATH.md §2.3), endpoints
//!   are attached and detached as the inventory says. A
//!   change that does not load, validate or compile is refused as a whole; the previous revision
//!   stays enforced and the error is logged and counted.
//! - **No gap on restart**: maps and links are pinned under the state directory (a bpffs), so
//!   enforcement continues when the agent stops or is killed; [`Agent::start`] adopts the pins
//!   (maps reused, conntrack kept, link programs swapped atomically) without flushing.
//! - **Observability**: [`metrics`] serves Prometheus text on a loopback address; [`monitor`]
//!   reads the endpoints' verdict events and explains each with the rule that decided.
//!
//! Bad input is refused per endpoint where that is safe: a missing device (the endpoint waits
//! and is retried), two endpoints naming one device (neither is attached to it), a policy that
//! does not fit the endpoint's map (the endpoint keeps its previous policy). Nothing is ever
//! attached with an empty or partial policy.

pub mod agent;
pub mod enforce;
pub mod error;
pub mod inputs;
pub mod metrics;
pub mod monitor;
pub mod preflight;
pub mod switch;

pub use agent::{Agent, Applied, Config, Plan, PlannedEndpoint, detach_all, plan};
pub use error::AgentError;
