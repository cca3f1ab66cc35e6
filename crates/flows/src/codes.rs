//! The flow stage's diagnostic codes (`PF0xx`), in the registry's one
//! shape ([`porin_model::CodeInfo`]). Stable: a number is never reused.
//! `CODES.md` is generated from [`ALL`] (a test fails when it is stale).

porin_model::code_table! {
    stage: Flows, needs_inventory: true;
    /// A line that is not a Hubble flow event.
    MALFORMED_LINE = "PF001", "malformed-flow-line", Error,
        "A line of a flow file is not a Hubble event (`hubble observe -o json` or `-o jsonpb`, a flow.Flow or a GetFlowsResponse): it is reported with its line and column and skipped; the rest of the file is read.";
    /// A line longer than the reader's bound.
    LINE_TOO_LONG = "PF002", "flow-line-too-long", Error,
        "A line of a flow file is longer than `--max-flow-line-bytes` (default 1 MiB; a Hubble flow is a few KiB): it is skipped unread, so one corrupt line cannot make porin hold the file in memory.";
    /// A flow end that is a pod the inventory does not have.
    UNMAPPED_END = "PF003", "unmapped-flow-end", Warning,
        "A flow's source or destination is a pod (pod name, namespace or Kubernetes labels) that no inventory endpoint matches, by name, address or labels: the flow is not decided (its verdict would be guessed), and counted.";
    /// A recorded forwarded flow the replayed policies deny.
    NEWLY_DENIED = "PF004", "newly-denied-flow", Error,
        "Traffic Cilium forwarded in the recording is denied by the replayed policies: applying them would break it. Reported on the rule that denies it (a deny rule, or the policies that put the endpoint in default deny).";
    /// A recorded dropped flow the replayed policies allow.
    NEWLY_ALLOWED = "PF005", "newly-allowed-flow", Warning,
        "Traffic Cilium dropped by policy in the recording is allowed by the replayed policies: applying them opens it. Reported on the rule that allows it.";
    /// porin and Cilium decide a recorded flow differently under the policies in force.
    FIDELITY = "PF006", "fidelity-disagreement", Error,
        "For the policies in force when the flows were recorded (`--current`), porin's verdict differs from the one Cilium recorded: the inventory or policies given are not those of the cluster, or porin and Cilium differ. Both sides' rules are named (porin's map entry origins, Hubble's `*_allowed_by`/`*_denied_by`).";
}

#[cfg(test)]
mod tests {
    use super::ALL;

    #[test]
    fn codes_document_is_fresh() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("CODES.md");
        porin_model::registry::check_generated(
            &path,
            &porin_model::registry::markdown_table(ALL, false),
            "cargo test -p porin-flows --lib codes",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn codes_are_in_the_flow_range() {
        for (i, info) in ALL.iter().enumerate() {
            assert_eq!(info.code, format!("PF{:03}", i + 1));
            assert!(i < 30, "PF001-PF030 is this stage's range");
        }
    }
}
