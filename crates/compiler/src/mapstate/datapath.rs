//! Datapath constants shared by the reference evaluator and the eBPF side.
//!
//! The byte layouts (`struct policy_key`, `struct policy_entry`,
//! docs/semantics.md §5.1–§5.2) are not the compiler's: `porin-ebpf`'s
//! `abi` module encodes [`super::Key`] and [`super::Entry`].

/// `DROP_POLICY`: no entry matched (default deny).
pub const DROP_POLICY: i32 = -133;
/// `DROP_POLICY_DENY`: a deny entry matched.
pub const DROP_POLICY_DENY: i32 = -181;
/// `DROP_POLICY_AUTH_REQUIRED`: the chosen entry requires authentication.
pub const DROP_POLICY_AUTH_REQUIRED: i32 = -189;
