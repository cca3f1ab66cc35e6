//! PR016 `unsupported-field`: fields the configured Cilium version
//! (`ciliumVersion`, default 1.19) does not honour: introduced later, or
//! removed by then.
//!
//! The rule reads porin's one version table, `porin_model::version::TABLE`
//! (which validation and the upgrade check read too), keyed by route
//! pattern below a rule (`spec` or `specs[i]`; `[*]` is any index), so only
//! the field at that place counts: a label key `endPort` in a selector is
//! not a port range. Every row cites where its version comes from (Cilium
//! release notes, pull requests, upgrade notes).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use porin_model::target::version_findings;
use porin_model::version::{CiliumVersion, Target};

use crate::Context;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR016",
        name: "unsupported-field",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: false,
        summary: "A field the chosen Cilium version (`ciliumVersion` in `.porin.yaml`) does not honour: introduced later, or removed.",
        doc: Some(Doc {
            what: "Looks up every field of a rule, by its route, in a table of versioned fields (a \
label key or header that happens to be called `endPort` is not a port range). Introduced: \
`icmps` 1.12 (ingress, ingressDeny, egress, egressDeny; 1.11 only behind `enable-icmp-rules`); \
`toPorts[].serverNames` 1.13; `authentication` 1.14; `fromCIDRSet[].cidrGroupRef` 1.14; \
`toCIDRSet[].cidrGroupRef` 1.16; `toPorts[].ports[].endPort` 1.16 (allow and deny rules, and \
`ports[].endPort` of Kubernetes NetworkPolicies); `fromNodes`/`toNodes` 1.16; \
`enableDefaultDeny` 1.16; `log` 1.18. Removed: `fromRequires`/`toRequires` with entries, \
deprecated in 1.17 and removed in 1.19 (porin, modelling 1.19, also rejects them as PM031); \
`toPorts[].rules.kafka` (deprecated 1.18), `rules.l7proto` and `rules.l7`, removed in 1.20 \
(under `--cilium-version 1.20` validation rejects them as PM050). The table is porin's one \
version table (`porin_model::version::TABLE`), which validation and `--upgrade-to` read too. \
Not in the table, because their first release could not be established: `listener`, \
`listener.priority`, `cidrGroupSelector`, ICMP type names.",
            why: "An agent older than a field drops or ignores it, often silently: before 1.16 a port \
range was ignored (cilium/cilium#28684) or the policy not processed at all (#28704), so the rule \
allows a different set of ports than the one reviewed; an API server whose CRD lacks the field \
prunes or rejects it. A removed field is refused by the API server.",
            example: "ciliumVersion: \"1.15\" with `ports: [{port: \"8000\", endPort: 8100}]`, or \
`icmps` with ciliumVersion 1.11.",
            instead: "Upgrade Cilium (and `ciliumVersion` with it), or express the rule with fields \
that version supports: a list of single ports instead of a range, `fromCIDRSet` CIDRs instead \
of a CIDR group, labels in every `fromEndpoints` selector instead of `fromRequires`.",
            references: "semantics.md §9 item 9; Cilium release notes v1.11.0-rc0 (#16516), \
v1.12.0-rc3 (#20174), v1.13.0 (#22398), v1.14.0 (#24263, #24638), v1.14.4 (#28704), v1.16.0 \
(#26924, #30624, #32807), v1.18.0 (#39902); cilium/cilium#30572, #36649, #40967, #42615, #43167, \
#43557, #44610. Each row's source is in `crates/policy-model/src/version.rs` and in the finding's note.",
        }),
    },
};

/// Reports fields the configured `ciliumVersion` does not honour.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let (major, minor) = cx.config.cilium_version;
    let target = Target::new(CiliumVersion::new(major, minor));
    for input in cx.inputs {
        for (route, finding) in version_findings(input.policy, &target) {
            out.push(
                Diagnostic::new(RULE.info, finding.message)
                    .at(input.location(&route))
                    .note(finding.note)
                    .help(
                        "upgrade Cilium (and set `ciliumVersion` in .porin.yaml), or express the \
rule with fields that version supports",
                    ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use porin_model::target::rules_of;
    use porin_model::version::{Change, TABLE, unsupported};

    use super::*;

    /// `porin explain PR016` lists every field row of the table with its
    /// version (kind rows are validation's, PM051).
    #[test]
    fn the_explanation_lists_the_table() {
        let what = RULE.info.doc.unwrap().what;
        for row in TABLE.iter().filter(|r| r.applies != porin_model::version::Applies::Kind) {
            let field = row.field();
            let version = row.turning_version().to_string();
            let mention = what
                .match_indices(field)
                .any(|(at, _)| what[at..].contains(&version));
            assert!(mention, "PR016's text lacks `{field}` {version}");
        }
    }

    /// Every `since` row is triggered by the PR016 trigger fixture
    /// (loaded by the real loader, so each route is one the model accepts).
    #[test]
    fn the_trigger_fixture_covers_every_introduced_field() {
        use porin_model::limits::LoadLimits;
        use porin_model::loader::load_str;

        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/lint/PR016_unsupported_field/trigger.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let outcome = load_str("trigger.yaml", &text, &LoadLimits::default());
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        let mut hit = std::collections::BTreeSet::new();
        for doc in &outcome.documents {
            for (_, rule, applies) in rules_of(&doc.doc) {
                for finding in unsupported(&rule, applies, CiliumVersion::new(1, 11)) {
                    hit.insert((finding.row.route, applies as u8));
                }
            }
        }
        for row in TABLE {
            if matches!(row.change, Change::Since(_)) && row.applies != porin_model::version::Applies::Kind {
                assert!(
                    hit.contains(&(row.route, row.applies as u8)),
                    "trigger.yaml lacks {}",
                    row.route
                );
            }
        }
    }

    #[test]
    fn removed_fields_count_from_their_removal_and_only_with_entries() {
        let rule = serde_json::json!({"ingress": [{"fromRequires": [{"matchLabels": {"env": "prod"}}]}],
                          "egress": [{"toRequires": []}]});
        let applies = porin_model::version::Applies::Cilium;
        assert!(unsupported(&rule, applies, CiliumVersion::new(1, 18)).is_empty());
        let found = unsupported(&rule, applies, CiliumVersion::V1_19);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].route, "ingress[0].fromRequires");
        assert!(found[0].message.contains("removed in Cilium 1.19"));
        assert!(found[0].message.contains("deprecated since 1.17"));
    }
}
