//! Datapath constants shared by the reference evaluator and the eBPF side.
//!
//! The byte layouts themselves live with their types: [`super::Key::to_bytes`]
//! (`struct policy_key`) and [`super::Entry::to_datapath_bytes`]
//! (`struct policy_entry`), docs/semantics.md §5.1–§5.2.

/// `DROP_POLICY`: no entry matched (default deny).
pub const DROP_POLICY: i32 = -133;
/// `DROP_POLICY_DENY`: a deny entry matched.
pub const DROP_POLICY_DENY: i32 = -181;
/// `DROP_POLICY_AUTH_REQUIRED`: the chosen entry requires authentication.
pub const DROP_POLICY_AUTH_REQUIRED: i32 = -189;
