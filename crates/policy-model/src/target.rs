//! Validation that depends on the target Cilium version and agent settings
//! ([`Target`]): the rows of [`crate::version::TABLE`] that a modelled
//! version rejects. The loader validates what every modelled version
//! accepts; [`LoadOutcome::apply_target`] then refuses what the chosen one
//! does not, so one load serves any target (the upgrade check loads once
//! and applies two targets).

use rayon::prelude::*;
use serde_json::Value;

use crate::codes;
use crate::diagnostic::Diagnostic;
use crate::loader::{LoadOutcome, LoadedDocument};
use crate::model::PolicyDocument;
use crate::route::Route;
use crate::version::{Applies, CiliumVersion, Target, VersionFinding, unsupported};

/// The rules of a policy document as JSON, with the route of each
/// (`spec`, `specs[i]`) and what they are.
pub fn rules_of(policy: &PolicyDocument) -> Vec<(String, Value, Applies)> {
    let mut rules = Vec::new();
    let mut push = |route: String, json: Option<Value>, applies| {
        if let Some(json) = json {
            rules.push((route, json, applies));
        }
    };
    match policy {
        PolicyDocument::CiliumNetworkPolicy(_)
        | PolicyDocument::CiliumClusterwideNetworkPolicy(_) => {
            for (route, rule) in policy.cilium_rules() {
                push(route, serde_json::to_value(rule).ok(), Applies::Cilium);
            }
        }
        PolicyDocument::NetworkPolicy(p) => push(
            "spec".to_owned(),
            p.spec.as_ref().and_then(|s| serde_json::to_value(s).ok()),
            Applies::Kubernetes,
        ),
        // No rules; the kind's own versions are the loader's (v2alpha1, v2).
        PolicyDocument::CiliumCidrGroup(_) => {}
        // Versioned as a whole kind (row `cluster-network-policy`).
        PolicyDocument::ClusterNetworkPolicy(_) => {}
    }
    rules
}

/// The findings of the version table for one document under `target`,
/// with the route of each below the document (`spec.ingress[0]...`).
pub fn version_findings(policy: &PolicyDocument, target: &Target) -> Vec<(String, VersionFinding)> {
    let mut found = Vec::new();
    for (prefix, rule, applies) in rules_of(policy) {
        for finding in unsupported(&rule, applies, target.version) {
            found.push((format!("{prefix}.{}", finding.route), finding));
        }
    }
    found
}

/// The diagnostics `target` adds to one loaded document: a row whose
/// validation code is `PM050` (fields removed from the target's CRD).
/// Rows validated by another code (`PM031` for `fromRequires`) are that
/// code's, which the loader already reports.
pub fn target_diagnostics(
    outcome: &LoadOutcome,
    document: &LoadedDocument,
    target: &Target,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let version = target.version.validation();
    // Only rows validated by PM050 give a diagnostic here: when none can
    // fire at the version (any version before 1.20), the rules need not be
    // serialised and walked (~0.1 s of CPU for 65,535 CIDR policies).
    if !crate::version::TABLE.iter().any(|row| {
        row.validated_by == Some(codes::REMOVED_IN_VERSION.code) && !row.honoured_in(version)
    }) {
        return out;
    }
    let target = Target { version, ..*target };
    for (route, finding) in version_findings(&document.doc, &target) {
        if finding.row.validated_by != Some(codes::REMOVED_IN_VERSION.code) {
            continue;
        }
        let mut diagnostic = Diagnostic::new(
            codes::REMOVED_IN_VERSION,
            format!(
                "{} `{}` {}: {}",
                document.doc.kind(),
                document.doc.name(),
                route,
                finding.message
            ),
        )
        .note(finding.note)
        .help(format!(
            "remove the field, or check against the Cilium version the cluster runs (`--cilium-version`); the row is `{}` of porin's version table",
            finding.row.id
        ));
        if let Some(location) = Route::parse(&route).and_then(|r| outcome.locate_in(document, &r)) {
            diagnostic = diagnostic.at(location);
        }
        out.push(diagnostic);
    }
    out
}

/// What upgrading from `from` to `to` changes for one loaded document
/// (valid under `from`): each finding of [`target_diagnostics`] under `to`,
/// with a note saying it is new with the upgrade. Every one is a row of
/// [`crate::version::TABLE`] (its id is in the help line), so the upgrade
/// report says nothing the table does not back.
pub fn upgrade_diagnostics(
    outcome: &LoadOutcome,
    document: &LoadedDocument,
    from: &Target,
    to: &Target,
) -> Vec<Diagnostic> {
    let before = target_diagnostics(outcome, document, from);
    target_diagnostics(outcome, document, to)
        .into_iter()
        .filter(|d| !before.contains(d))
        .map(|d| {
            d.note(format!(
                "upgrade check: valid for Cilium {}, refused by Cilium {}",
                from.version.validation(),
                to.version.validation()
            ))
        })
        .collect()
}

/// What upgrading from `from` to `to` changes for the ClusterNetworkPolicies
/// of `outcome` (loaded, no target applied yet): when `from` does not
/// enforce the kind and `to` does, one PM067 finding per policy, at its
/// `kind`, backed by row `cluster-network-policy`: its rules, Deny
/// included, start to apply. Whether the policy itself validates is
/// [`LoadOutcome::apply_target`]'s to say.
pub fn cluster_policy_upgrade_diagnostics(
    outcome: &LoadOutcome,
    from: &Target,
    to: &Target,
) -> Vec<Diagnostic> {
    if LoadOutcome::enforces_cluster_network_policy(from)
        || !LoadOutcome::enforces_cluster_network_policy(to)
    {
        return Vec::new();
    }
    let kind_route = Route::root().key("kind");
    outcome
        .pending_cluster_policies
        .iter()
        .map(|document| {
            let mut diagnostic = Diagnostic::new(
                codes::CLUSTER_NETWORK_POLICY_ENFORCED_BY_UPGRADE,
                format!(
                    "ClusterNetworkPolicy `{}` starts to be enforced with the upgrade: Cilium {} with --enable-k8s-cluster-network-policy applies every rule of it, Deny included",
                    document.doc.name(),
                    to.version
                ),
            )
            .note(format!(
                "upgrade check: ignored by Cilium {}{}, enforced by Cilium {} with the switch",
                from.version,
                if from.version.validation() < CiliumVersion::V1_20 {
                    ""
                } else {
                    " without --enable-k8s-cluster-network-policy"
                },
                to.version
            ))
            .help("review its verdicts under the new target (porin test, porin query --cilium-version 1.20 --enable-k8s-cluster-network-policy); the row is `cluster-network-policy` of porin's version table");
            if let Some(location) = outcome.locate_in(document, &kind_route) {
                diagnostic = diagnostic.at(location);
            }
            diagnostic
        })
        .collect()
}

/// From how many documents [`LoadOutcome::apply_target`] checks them on
/// rayon's threads.
const PARALLEL_TARGET_DOCUMENTS: usize = 1024;

impl LoadOutcome {
    /// Applies the target's validation: records the diagnostics of
    /// [`target_diagnostics`] and leaves out every document that gets an
    /// error (fail closed, as the loader does).
    pub fn apply_target(&mut self, target: &Target) {
        // Each document's findings on its own (in parallel: 7 % of a
        // compile of 65,535 small policies on one thread), then kept or
        // refused in document order. Small sets stay on the calling
        // thread: their checks take microseconds, and an embedder (the C
        // API) should not get rayon's thread pool for a handful of
        // policies (helgrind/drd cannot model its atomics either).
        let this = &*self;
        let findings: Vec<Vec<Diagnostic>> = if self.documents.len() >= PARALLEL_TARGET_DOCUMENTS {
            self.documents
                .par_iter()
                .map(|document| target_diagnostics(this, document, target))
                .collect()
        } else {
            self.documents
                .iter()
                .map(|document| target_diagnostics(this, document, target))
                .collect()
        };
        let mut refused = Vec::with_capacity(findings.len());
        for found in findings {
            refused.push(found.iter().any(Diagnostic::is_error));
            self.diagnostics.extend(found);
        }
        // In place: the documents are large, and copying every kept one
        // into a new `Vec` was most of this step's serial time.
        let mut refused = refused.into_iter();
        self.documents.retain(|_| !refused.next().unwrap_or(false));
        self.apply_cluster_policies(target);
    }

    /// The old side of an upgrade comparison (`porin diff
    /// --to-cilium-version`): the ClusterNetworkPolicies `from` ignores and
    /// `to` enforces are left out, as the cluster runs without them before
    /// the upgrade, each reported as PM067 (a warning) where
    /// [`LoadOutcome::apply_target`] would refuse the set (PM066). Call
    /// before `apply_target(from)`.
    pub fn leave_out_cluster_policies_enforced_by_upgrade(&mut self, from: &Target, to: &Target) {
        let found = cluster_policy_upgrade_diagnostics(self, from, to);
        if found.is_empty() {
            return;
        }
        let kind_route = Route::root().key("kind");
        let pending = std::mem::take(&mut self.pending_cluster_policies);
        for document in &pending {
            // The loader's "skipped until a target is known" is answered.
            let location = self.locate_in(document, &kind_route);
            self.diagnostics.retain(|d| {
                !(d.code == codes::SKIPPED_DOCUMENT.code && d.primary.as_ref() == location.as_ref())
            });
        }
        self.diagnostics.extend(found);
    }

    /// Whether `target` enforces ClusterNetworkPolicy: Cilium 1.20 or later
    /// with `--enable-k8s-cluster-network-policy` (row
    /// `cluster-network-policy` of the version table).
    pub fn enforces_cluster_network_policy(target: &Target) -> bool {
        target.k8s_cluster_network_policy
            && crate::version::kind_row("policy.networking.k8s.io", "ClusterNetworkPolicy")
                .is_some_and(|row| row.honoured_in(target.version.validation()))
    }

    /// The held-back ClusterNetworkPolicies join the documents when the
    /// target enforces them; otherwise each is refused (PM066) at its
    /// `kind`, naming the flag: a cluster that ignores them would not
    /// enforce their Deny rules, and porin never reports what the cluster
    /// does not do.
    fn apply_cluster_policies(&mut self, target: &Target) {
        let pending = std::mem::take(&mut self.pending_cluster_policies);
        if pending.is_empty() {
            return;
        }
        let enforced = LoadOutcome::enforces_cluster_network_policy(target);
        let kind_route = Route::root().key("kind");
        let from = self.documents.len();
        for document in pending {
            let location = self.locate_in(&document, &kind_route);
            // The loader's "skipped until a target is known" is answered now.
            self.diagnostics.retain(|d| {
                !(d.code == codes::SKIPPED_DOCUMENT.code && d.primary.as_ref() == location.as_ref())
            });
            if enforced {
                self.documents.push(document);
                continue;
            }
            let why = if target.version.validation() < CiliumVersion::V1_20 {
                format!(
                    "Cilium {} does not implement it (it arrived in 1.20)",
                    target.version
                )
            } else {
                format!(
                    "Cilium {} enforces it only with --enable-k8s-cluster-network-policy",
                    target.version
                )
            };
            let mut diagnostic = Diagnostic::new(
                codes::CLUSTER_NETWORK_POLICY_NOT_ENFORCED,
                format!(
                    "ClusterNetworkPolicy `{}` is not enforced by the target: {why}",
                    document.doc.name()
                ),
            )
            .note(format!("{KCNP_ROW_NOTE} (row `cluster-network-policy` of porin's version table)"))
            .help("if the cluster runs that, pass --cilium-version 1.20 --enable-k8s-cluster-network-policy, or set `ciliumVersion: \"1.20\"` and `enableK8sClusterNetworkPolicy: true` in the inventory, the PolicyTest file or .porin.yaml; otherwise remove the policy: the cluster would ignore every rule, Deny included");
            if let Some(location) = location {
                diagnostic = diagnostic.at(location);
            }
            self.diagnostics.push(diagnostic);
        }
        self.refuse_duplicates(from);
    }
}

const KCNP_ROW_NOTE: &str =
    "an agent that does not watch ClusterNetworkPolicy enforces none of its rules";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::limits::LoadLimits;
    use crate::loader::load_str;
    use crate::version::CiliumVersion;

    const KAFKA: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: kafka, namespace: default}
spec:
  endpointSelector: {matchLabels: {app: broker}}
  ingress:
  - toPorts:
    - ports: [{port: "9092", protocol: TCP}]
      rules:
        kafka: [{topic: deathstar-plans}]
"#;

    /// Row `kafka` (cilium/cilium#44610): valid under 1.19, refused under 1.20.
    #[test]
    fn kafka_rules_validate_in_1_19_only() {
        let mut outcome = load_str("kafka.yaml", KAFKA, &LoadLimits::default());
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        outcome.apply_target(&Target::new(CiliumVersion::V1_19));
        assert!(!outcome.has_errors());
        assert_eq!(outcome.documents.len(), 1);
        outcome.apply_target(&Target::new(CiliumVersion::V1_20));
        assert!(outcome.has_errors());
        assert!(outcome.documents.is_empty(), "fail closed");
        let error = &outcome.diagnostics[0];
        assert_eq!(error.code, "PM050");
        assert!(
            error
                .message
                .contains("spec.ingress[0].toPorts[0].rules.kafka"),
            "{}",
            error.message
        );
        assert!(
            error
                .message
                .contains("removed in Cilium 1.20 (deprecated since 1.18)")
        );
        let location = error.primary.as_ref().unwrap();
        assert_eq!(location.line, 11);
    }

    /// Rows `l7proto` (rules.l7proto and rules.l7, cilium/cilium#44610).
    #[test]
    fn generic_l7_rules_validate_in_1_19_only() {
        let text = r#"
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: l7}
specs:
- endpointSelector: {}
  egress:
  - toPorts:
    - ports: [{port: "3306", protocol: TCP}]
      rules:
        l7proto: mysql
        l7: [{action: deny}]
"#;
        let mut outcome = load_str("l7.yaml", text, &LoadLimits::default());
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        let mut v20 = outcome.clone();
        outcome.apply_target(&Target::new(CiliumVersion::V1_19));
        assert!(!outcome.has_errors());
        v20.apply_target(&Target::new(CiliumVersion::V1_20));
        let codes: Vec<&str> = v20.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(codes, ["PM050", "PM050"], "{:?}", v20.diagnostics);
        assert!(v20.diagnostics[0].message.contains("specs[0].egress[0]"));
    }

    /// The upgrade check reports exactly the rows that change between the
    /// two versions: nothing from 1.19 to 1.19, the `kafka` row to 1.20.
    #[test]
    fn the_upgrade_check_reports_what_the_new_version_refuses() {
        let outcome = load_str("kafka.yaml", KAFKA, &LoadLimits::default());
        let document = &outcome.documents[0];
        let v19 = Target::new(CiliumVersion::V1_19);
        let v20 = Target::new(CiliumVersion::V1_20);
        assert!(upgrade_diagnostics(&outcome, document, &v19, &v19).is_empty());
        let found = upgrade_diagnostics(&outcome, document, &v19, &v20);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].code, "PM050");
        assert!(found[0].help.as_deref().unwrap().contains("`kafka`"));
        assert!(
            found[0]
                .notes
                .iter()
                .any(|n| n.contains("valid for Cilium 1.19, refused by Cilium 1.20"))
        );
        // Downgrading reports nothing the old version refused already.
        assert!(upgrade_diagnostics(&outcome, document, &v20, &v20).is_empty());
    }

    /// Row `cluster-network-policy`: refused (PM066, naming the flag) for
    /// 1.19 and for 1.20 without the agent setting; loaded where Cilium
    /// enforces it.
    #[test]
    fn a_cluster_network_policy_loads_only_where_cilium_enforces_it() {
        let text = "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\n\
metadata: {name: p}\nspec: {tier: Admin, priority: 1, subject: {namespaces: {}}}\n";
        let errors = |target: Target| {
            let mut outcome = load_str("kcnp.yaml", text, &LoadLimits::default());
            outcome.apply_target(&target);
            outcome
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(|d| d.code)
                .collect::<Vec<_>>()
        };
        assert_eq!(errors(Target::new(CiliumVersion::V1_19)), ["PM066"]);
        assert_eq!(errors(Target::new(CiliumVersion::V1_20)), ["PM066"]);
        let flag = |version| Target {
            version,
            k8s_cluster_network_policy: true,
        };
        assert_eq!(errors(flag(CiliumVersion::V1_19)), ["PM066"]);
        assert!(errors(flag(CiliumVersion::V1_20)).is_empty());
        let mut outcome = load_str("kcnp.yaml", text, &LoadLimits::default());
        assert!(outcome.documents.is_empty(), "held back until a target");
        outcome.apply_target(&flag(CiliumVersion::V1_20));
        assert_eq!(outcome.documents.len(), 1);
        assert!(outcome.diagnostics.is_empty(), "{:?}", outcome.diagnostics);
        let mut refused = load_str("kcnp.yaml", text, &LoadLimits::default());
        refused.apply_target(&Target::new(CiliumVersion::V1_20));
        let error = &refused.diagnostics[0];
        assert!(
            error
                .help
                .as_deref()
                .unwrap()
                .contains("--enable-k8s-cluster-network-policy")
        );
        assert_eq!(error.primary.as_ref().unwrap().line, 2);
    }
}
