//! PR016 `unsupported-field`: fields the configured Cilium version
//! (`ciliumVersion`, default 1.19) does not honour: introduced later, or
//! removed by then.
//!
//! The table [`FIELDS`] is keyed by route pattern below a rule (`spec` or
//! `specs[i]`; `[*]` is any index), so only the field at that place counts:
//! a label key `endPort` in a selector is not a port range. Every entry
//! cites where its version comes from (Cilium release notes, pull requests,
//! upgrade notes). Fields whose first release could not be established are
//! left out rather than guessed (see `FIELDS`' doc).

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use porin_model::model::PolicyDocument;
use serde_json::Value;

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
deprecated in 1.17 and removed in 1.19 (porin, modelling 1.19, also rejects them as PM031). \
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
(#26924, #30624, #32807), v1.18.0 (#39902); cilium/cilium#30572, #36649, #42615, #43167. Each \
entry's source is in `crates/lint/src/rules/unsupported_field.rs` and in the finding's note.",
        }),
    },
};

/// The policy kinds an entry applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kinds {
    /// CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy rules.
    Cilium,
    /// Kubernetes `networking.k8s.io/v1` NetworkPolicy specs.
    Kubernetes,
}

/// When Cilium honours a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// First honoured in this `(major, minor)`.
    Since((u32, u32)),
    /// Deprecated in the first, no longer honoured from the second on.
    Removed {
        /// Release that deprecated it.
        deprecated: (u32, u32),
        /// First release without it.
        removed: (u32, u32),
    },
}

/// One versioned field.
#[derive(Debug, Clone, Copy)]
pub struct FieldSupport {
    /// Which documents it applies to.
    pub kinds: Kinds,
    /// Route below the rule, `[*]` for any index, e.g.
    /// `ingress[*].toPorts[*].ports[*].endPort`.
    pub route: &'static str,
    /// When it is honoured.
    pub support: Support,
    /// What older (or newer) agents do with it, for the finding's note.
    pub note: &'static str,
    /// Where the version comes from.
    pub source: &'static str,
}

const fn since(
    kinds: Kinds,
    route: &'static str,
    version: (u32, u32),
    note: &'static str,
    source: &'static str,
) -> FieldSupport {
    FieldSupport {
        kinds,
        route,
        support: Support::Since(version),
        note,
        source,
    }
}

const ICMPS_NOTE: &str = "ICMP rules (`icmps`) arrived in Cilium 1.11 behind the `enable-icmp-rules` flag, off by \
default; 1.12 turned the flag on by default";
const ICMPS_SOURCE: &str = "v1.11.0-rc0 release notes: \"policy: Add ICMP and ICMPv6 support for CNP and CCNP with a \
feature flag\" (cilium/cilium#16516); v1.12.0-rc3 release notes: \"Enables ICMP network policy function by default\" \
(#20174)";
const PORT_RANGE_NOTE: &str = "port ranges arrived in Cilium 1.16; 1.14.4 and later 1.14/1.15 patch releases do not \
process policies that use them (cilium/cilium#28704), older agents ignore `endPort` silently (#28684)";
const PORT_RANGE_SOURCE: &str = "cilium/cilium#32807 (port range mapping, fixes #16622), docs #33389 (merged \
2024-07-04 for v1.16.0); v1.14.4 release notes for #28704";
const NODES_NOTE: &str = "node selectors in policies arrived in Cilium 1.16 and need the agent flag \
`enable-node-selector-labels`";
const NODES_SOURCE: &str = "v1.16.0 CHANGELOG: \"identity: Allow nodes to be selectable by their labels instead of \
CIDR and/or remote-node entity\" (cilium/cilium#26924)";
const CIDR_GROUP_INGRESS_NOTE: &str = "CiliumCIDRGroup references (`cidrGroupRef`) in `fromCIDRSet` arrived in \
Cilium 1.14 (the ingress and ingress-deny rules share the field)";
const CIDR_GROUP_INGRESS_SOURCE: &str = "v1.14.0 release notes: \"Add support for references to CiliumCIDRGroup \
inside FromCIDRSet for ingress rules in CNPs\" (cilium/cilium#24638)";
const CIDR_GROUP_EGRESS_NOTE: &str = "CiliumCIDRGroup references in `toCIDRSet` arrived in Cilium 1.16 (the egress \
and egress-deny rules share the field)";
const CIDR_GROUP_EGRESS_SOURCE: &str = "v1.16.0 CHANGELOG: \"Add support for matching CiliumCIDRGroups in Egress \
policy rules\" (cilium/cilium#30624)";
const AUTH_NOTE: &str =
    "mutual authentication (`authentication.mode`) arrived in Cilium 1.14 (beta)";
const AUTH_SOURCE: &str = "v1.14.0 release notes: \"Add mtls-spiffe as auth mode in the CiliumNetworkPolicy\" (cilium/cilium#24263)";
const SNI_NOTE: &str = "SNI enforcement (`serverNames`) arrived in Cilium 1.13";
const SNI_SOURCE: &str = "v1.13.0 release notes: \"CiliumNetworkPolicy now supports enforcement of SNI in TLS \
connections\" (cilium/cilium#22398)";
const REQUIRES_NOTE: &str = "`fromRequires`/`toRequires` were deprecated in Cilium 1.17 and removed in 1.19; the \
1.19 CRD keeps them with `maxItems: 0`, so the API server rejects any entry";
const REQUIRES_SOURCE: &str = "cilium/cilium#36649 (docs: deprecate requires fields, 1.17), #42615 (remove support, \
1.19 upgrade notes), #43167 and issue #43088 (release-blocker/1.19: reject with maxItems 0)";

/// The versioned fields porin's model knows, by route. Left out because
/// their first release could not be established from release notes or
/// pull requests: `listener` and `listener.priority` (cilium/cilium#21600,
/// #28555), `cidrGroupSelector` (#36087), ICMP type names in
/// `icmps[].fields[].type`. Fields older than Cilium 1.10
/// (`terminatingTLS`, `originatingTLS`, `headerMatches`, `toGroups`,
/// `toFQDNs`, `nodeSelector`, deny rules) are not listed: every supported
/// version has them.
pub const FIELDS: &[FieldSupport] = &[
    since(
        Kinds::Cilium,
        "ingress[*].icmps",
        (1, 12),
        ICMPS_NOTE,
        ICMPS_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "ingressDeny[*].icmps",
        (1, 12),
        ICMPS_NOTE,
        ICMPS_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egress[*].icmps",
        (1, 12),
        ICMPS_NOTE,
        ICMPS_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egressDeny[*].icmps",
        (1, 12),
        ICMPS_NOTE,
        ICMPS_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "ingress[*].toPorts[*].serverNames",
        (1, 13),
        SNI_NOTE,
        SNI_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egress[*].toPorts[*].serverNames",
        (1, 13),
        SNI_NOTE,
        SNI_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "ingress[*].authentication",
        (1, 14),
        AUTH_NOTE,
        AUTH_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egress[*].authentication",
        (1, 14),
        AUTH_NOTE,
        AUTH_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "ingress[*].fromCIDRSet[*].cidrGroupRef",
        (1, 14),
        CIDR_GROUP_INGRESS_NOTE,
        CIDR_GROUP_INGRESS_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "ingressDeny[*].fromCIDRSet[*].cidrGroupRef",
        (1, 14),
        CIDR_GROUP_INGRESS_NOTE,
        CIDR_GROUP_INGRESS_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egress[*].toCIDRSet[*].cidrGroupRef",
        (1, 16),
        CIDR_GROUP_EGRESS_NOTE,
        CIDR_GROUP_EGRESS_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egressDeny[*].toCIDRSet[*].cidrGroupRef",
        (1, 16),
        CIDR_GROUP_EGRESS_NOTE,
        CIDR_GROUP_EGRESS_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "enableDefaultDeny",
        (1, 16),
        "per-policy default-deny opt-out; not in 1.15 (the pull request was still in review after v1.15.0 \
shipped), first released in 1.16; older API servers drop or reject the unknown field",
        "cilium/cilium#30572 (in review 2024-02-07, after v1.15.0 of 2024-01-31) and its design \
cilium/design-cfps#16 (CFP-30572, merged 2024-02-28)",
    ),
    since(
        Kinds::Cilium,
        "ingress[*].toPorts[*].ports[*].endPort",
        (1, 16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egress[*].toPorts[*].ports[*].endPort",
        (1, 16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "ingressDeny[*].toPorts[*].ports[*].endPort",
        (1, 16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egressDeny[*].toPorts[*].ports[*].endPort",
        (1, 16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        Kinds::Kubernetes,
        "ingress[*].ports[*].endPort",
        (1, 16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        Kinds::Kubernetes,
        "egress[*].ports[*].endPort",
        (1, 16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "ingress[*].fromNodes",
        (1, 16),
        NODES_NOTE,
        NODES_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "ingressDeny[*].fromNodes",
        (1, 16),
        NODES_NOTE,
        NODES_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egress[*].toNodes",
        (1, 16),
        NODES_NOTE,
        NODES_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "egressDeny[*].toNodes",
        (1, 16),
        NODES_NOTE,
        NODES_SOURCE,
    ),
    since(
        Kinds::Cilium,
        "log",
        (1, 18),
        "the free-text policy `log` field (Hubble) arrived in Cilium 1.18",
        "v1.18.0 release notes: \"Policy Log Fields: A new free-text log field is added to policies\" \
(cilium/cilium#39902)",
    ),
    FieldSupport {
        kinds: Kinds::Cilium,
        route: "ingress[*].fromRequires",
        support: Support::Removed {
            deprecated: (1, 17),
            removed: (1, 19),
        },
        note: REQUIRES_NOTE,
        source: REQUIRES_SOURCE,
    },
    FieldSupport {
        kinds: Kinds::Cilium,
        route: "ingressDeny[*].fromRequires",
        support: Support::Removed {
            deprecated: (1, 17),
            removed: (1, 19),
        },
        note: REQUIRES_NOTE,
        source: REQUIRES_SOURCE,
    },
    FieldSupport {
        kinds: Kinds::Cilium,
        route: "egress[*].toRequires",
        support: Support::Removed {
            deprecated: (1, 17),
            removed: (1, 19),
        },
        note: REQUIRES_NOTE,
        source: REQUIRES_SOURCE,
    },
    FieldSupport {
        kinds: Kinds::Cilium,
        route: "egressDeny[*].toRequires",
        support: Support::Removed {
            deprecated: (1, 17),
            removed: (1, 19),
        },
        note: REQUIRES_NOTE,
        source: REQUIRES_SOURCE,
    },
];

/// A field of a rule that the configured version does not honour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The concrete route below the rule, e.g. `ingress[0].icmps`.
    pub route: String,
    /// The table entry.
    pub entry: &'static str,
    /// The message.
    pub message: String,
    /// The entry's note and source.
    pub note: String,
}

fn field_name(route: &str) -> &str {
    route.rsplit('.').next().unwrap_or(route)
}

/// Walks `value`, collecting (concrete route, pattern route) of every key.
fn walk(value: &Value, concrete: &str, pattern: &str, out: &mut Vec<(String, String, bool)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let join = |base: &str| {
                    if base.is_empty() {
                        key.clone()
                    } else {
                        format!("{base}.{key}")
                    }
                };
                let (c, p) = (join(concrete), join(pattern));
                let non_empty = match child {
                    Value::Array(items) => !items.is_empty(),
                    Value::Null => false,
                    _ => true,
                };
                out.push((c.clone(), p.clone(), non_empty));
                walk(child, &c, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(
                    item,
                    &format!("{concrete}[{i}]"),
                    &format!("{pattern}[*]"),
                    out,
                );
            }
        }
        _ => {}
    }
}

/// The fields of one rule (as JSON) that Cilium `wanted` does not honour.
pub fn unsupported(rule: &Value, kinds: Kinds, wanted: (u32, u32)) -> Vec<Finding> {
    let mut keys = Vec::new();
    walk(rule, "", "", &mut keys);
    let mut found = Vec::new();
    for (concrete, pattern, non_empty) in keys {
        for entry in FIELDS
            .iter()
            .filter(|e| e.kinds == kinds && e.route == pattern)
        {
            let field = field_name(entry.route);
            let message = match entry.support {
                Support::Since(version) if version > wanted => format!(
                    "`{field}` needs Cilium {}.{}; the configured version is {}.{}",
                    version.0, version.1, wanted.0, wanted.1
                ),
                Support::Removed {
                    deprecated,
                    removed,
                } if removed <= wanted && non_empty => format!(
                    "`{field}` was removed in Cilium {}.{} (deprecated since {}.{}); the configured version is {}.{}",
                    removed.0, removed.1, deprecated.0, deprecated.1, wanted.0, wanted.1
                ),
                _ => continue,
            };
            found.push(Finding {
                route: concrete.clone(),
                entry: entry.route,
                message,
                note: format!("{} (source: {})", entry.note, entry.source),
            });
        }
    }
    found
}

/// Reports fields the configured `ciliumVersion` does not honour.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let wanted = cx.config.cilium_version;
    for input in cx.inputs {
        let rules = rules_of(input.policy);
        for (prefix, rule, kinds) in rules {
            for finding in unsupported(&rule, kinds, wanted) {
                let route = format!("{prefix}.{}", finding.route);
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
}

/// The rules of a policy document as JSON, with the route of each
/// (`spec`, `specs[i]`) and its kind.
fn rules_of(policy: &PolicyDocument) -> Vec<(String, Value, Kinds)> {
    let mut rules = Vec::new();
    match policy {
        PolicyDocument::CiliumNetworkPolicy(p) => {
            collect(&mut rules, p.spec.as_ref(), p.specs.as_deref());
        }
        PolicyDocument::CiliumClusterwideNetworkPolicy(p) => {
            collect(&mut rules, p.spec.as_ref(), p.specs.as_deref());
        }
        PolicyDocument::NetworkPolicy(p) => {
            if let Some(json) = p.spec.as_ref().and_then(|s| serde_json::to_value(s).ok()) {
                rules.push(("spec".to_owned(), json, Kinds::Kubernetes));
            }
        }
        // No rules; the kind's own versions are the loader's (v2alpha1, v2).
        PolicyDocument::CiliumCidrGroup(_) => {}
    }
    rules
}

fn collect<T: serde::Serialize>(
    rules: &mut Vec<(String, Value, Kinds)>,
    spec: Option<&T>,
    specs: Option<&[T]>,
) {
    if let Some(json) = spec.and_then(|s| serde_json::to_value(s).ok()) {
        rules.push(("spec".to_owned(), json, Kinds::Cilium));
    }
    for (i, rule) in specs.into_iter().flatten().enumerate() {
        if let Ok(json) = serde_json::to_value(rule) {
            rules.push((format!("specs[{i}]"), json, Kinds::Cilium));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_field_at_its_route_counts() {
        let rule = json!({
            "endpointSelector": {"matchLabels": {"endPort": "x", "log": "y", "icmps": "z"}},
            "ingress": [{"toPorts": [{"ports": [{"port": "80", "endPort": 90}]}]}],
        });
        let found = unsupported(&rule, Kinds::Cilium, (1, 15));
        let routes: Vec<&str> = found.iter().map(|f| f.route.as_str()).collect();
        assert_eq!(routes, ["ingress[0].toPorts[0].ports[0].endPort"]);
        // The same route in a Kubernetes NetworkPolicy is not a Cilium route.
        assert!(unsupported(&rule, Kinds::Kubernetes, (1, 15)).is_empty());
    }

    #[test]
    fn versions_are_inclusive_lower_bounds() {
        let rule = json!({"egress": [{"icmps": [{"fields": [{"type": 8}]}]}]});
        assert_eq!(unsupported(&rule, Kinds::Cilium, (1, 11)).len(), 1);
        assert!(unsupported(&rule, Kinds::Cilium, (1, 12)).is_empty());
        assert!(unsupported(&rule, Kinds::Cilium, (2, 0)).is_empty());
    }

    #[test]
    fn removed_fields_count_from_their_removal_and_only_with_entries() {
        let rule = json!({"ingress": [{"fromRequires": [{"matchLabels": {"env": "prod"}}]}],
                          "egress": [{"toRequires": []}]});
        assert!(unsupported(&rule, Kinds::Cilium, (1, 18)).is_empty());
        let found = unsupported(&rule, Kinds::Cilium, (1, 19));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].route, "ingress[0].fromRequires");
        assert!(found[0].message.contains("removed in Cilium 1.19"));
        assert!(found[0].message.contains("deprecated since 1.17"));
    }

    #[test]
    fn every_entry_cites_a_source_and_routes_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for entry in FIELDS {
            assert!(!entry.source.is_empty() && !entry.note.is_empty());
            assert!(
                seen.insert((entry.route, entry.kinds == Kinds::Cilium)),
                "{}",
                entry.route
            );
        }
    }

    /// `porin explain PR016` lists every field of the table with its version.
    #[test]
    fn the_explanation_lists_the_table() {
        let what = RULE.info.doc.unwrap().what;
        for entry in FIELDS {
            let field = field_name(entry.route);
            let version = match entry.support {
                Support::Since(v) | Support::Removed { removed: v, .. } => v,
            };
            let mention = what
                .match_indices(field)
                .any(|(at, _)| what[at..].contains(&format!("{}.{}", version.0, version.1)));
            assert!(mention, "PR016's text lacks `{field}` {version:?}");
        }
    }

    /// Every `since` entry is triggered by the PR016 trigger fixture
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
            let rules = rules_of(&doc.doc);
            for (_, rule, kinds) in rules {
                for finding in unsupported(&rule, kinds, (1, 11)) {
                    hit.insert((finding.entry, kinds == Kinds::Cilium));
                }
            }
        }
        for entry in FIELDS {
            if matches!(entry.support, Support::Since(_)) {
                assert!(
                    hit.contains(&(entry.route, entry.kinds == Kinds::Cilium)),
                    "trigger.yaml lacks {}",
                    entry.route
                );
            }
        }
    }
}
