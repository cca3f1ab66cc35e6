//! CiliumCIDRGroups as a Cilium 1.19 agent sees them: labels on prefixes.
//!
//! A group is no rule of its own. The agent's policy watcher turns each
//! group into ipcache metadata (`applyCIDRGroup`,
//! `pkg/policy/k8s/cidr_group.go`): every CIDR of `spec.externalCIDRs` gets
//!
//! - `cidrgroup:io.cilium.policy.cidrgroupname/<name>` (`LabelForCIDRGroupRef`,
//!   `pkg/policy/api/cidr.go`),
//! - `cidrgroup:<key>=<value>` for every label of the group's metadata
//!   except Cilium's own (`labels.Map2Labels(utils.RemoveCiliumLabels(..),
//!   LabelSourceCIDRGroup)`),
//! - the world label of its family.
//!
//! The ipcache then gives every prefix it holds the `cidrgroup:` labels of
//! every enclosing prefix as well, the longer prefix winning a key
//! (`mergeParentLabels`, `pkg/ipcache/metadata.go`; its test
//! `Test_metadata_mergeParentLabels`), so a narrower CIDR another rule names
//! stays in the group. [`CidrGroups::labels_of`] is that merge;
//! `IdentityTable::allocate_with_groups` gives the result to the CIDR
//! identities.
//!
//! Rules select groups by label: `cidrGroupRef: x` is the selector
//! `cidrgroup.io.cilium.policy.cidrgroupname/x` and `cidrGroupSelector`
//! a Kubernetes selector over the `cidrgroup` source (`newCIDRRuleSelector`,
//! `pkg/policy/types/selector.go`); `except` adds `!cidr:<prefix>`. A
//! reference to a group that does not exist selects nothing.

use std::collections::BTreeMap;

use ipnetwork::IpNetwork;
use porin_model::model::PolicyDocument;

use crate::labels::{Label, LabelSet, SOURCE_CIDRGROUP, canonical_prefix, prefix_contains};
use crate::selector::Selector;

/// `api.LabelPrefixGroupName`: the key prefix of a group's name label.
pub const GROUP_NAME_LABEL_PREFIX: &str = "io.cilium.policy.cidrgroupname";

/// `k8sconst.LabelPrefix`: label keys Cilium owns, which
/// `utils.RemoveCiliumLabels` drops from a group's labels.
const CILIUM_LABEL_PREFIX: &str = "io.cilium.k8s";

/// The label of a group's name (`LabelForCIDRGroupRef`).
pub fn group_name_label(name: &str) -> Label {
    Label::new(
        SOURCE_CIDRGROUP,
        &format!("{GROUP_NAME_LABEL_PREFIX}/{name}"),
        "",
    )
}

/// One loaded group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidrGroup {
    /// `metadata.name`.
    pub name: String,
    /// The `cidrgroup:` labels each of its prefixes carries (name label
    /// and metadata labels).
    pub labels: LabelSet,
    /// `spec.externalCIDRs`, canonical, in file order (duplicates kept
    /// once).
    pub prefixes: Vec<IpNetwork>,
    /// Display path of its file.
    pub file: String,
    /// Document index in the file.
    pub document: usize,
}

/// Every group of a compilation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CidrGroups {
    /// The groups, in input order (names are unique: the loader refuses a
    /// second object with the same name).
    pub groups: Vec<CidrGroup>,
    /// The merged labels each group prefix is given (several groups may
    /// list the same prefix; their labels add up).
    by_prefix: BTreeMap<IpNetwork, LabelSet>,
}

impl CidrGroups {
    /// The groups among the documents (each with its file and document
    /// index).
    pub fn from_documents<'d>(
        documents: impl IntoIterator<Item = (&'d str, usize, &'d PolicyDocument)>,
    ) -> Self {
        let mut out = Self::default();
        for (file, document, policy) in documents {
            let PolicyDocument::CiliumCidrGroup(group) = policy else {
                continue;
            };
            let name = policy.name().to_owned();
            let mut labels: LabelSet = group
                .metadata
                .labels
                .iter()
                .flatten()
                .filter(|(key, _)| !key.starts_with(CILIUM_LABEL_PREFIX))
                .map(|(key, value)| Label::from_key_value(key, value, SOURCE_CIDRGROUP))
                .collect();
            labels.insert(group_name_label(&name));
            let mut prefixes = Vec::with_capacity(group.spec.external_cidrs.len());
            for text in &group.spec.external_cidrs {
                // The loader validated every entry (format: cidr); one that
                // does not parse here never reached this stage.
                let Ok(prefix) = text.trim().parse::<IpNetwork>() else {
                    continue;
                };
                let prefix = canonical_prefix(prefix);
                if !prefixes.contains(&prefix) {
                    prefixes.push(prefix);
                }
            }
            for prefix in &prefixes {
                let merged = out.by_prefix.entry(*prefix).or_default();
                for label in labels.iter() {
                    merged.insert(label.clone());
                }
            }
            out.groups.push(CidrGroup {
                name,
                labels,
                prefixes,
                file: file.to_owned(),
                document,
            });
        }
        out
    }

    /// Whether there are no groups.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Every prefix of every group (each needs a CIDR identity).
    pub fn prefixes(&self) -> impl Iterator<Item = IpNetwork> + '_ {
        self.by_prefix.keys().copied()
    }

    /// The group with this name.
    pub fn get(&self, name: &str) -> Option<&CidrGroup> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The groups a CIDR-group selector selects (by their labels).
    pub fn selected_by(&self, selector: &Selector) -> Vec<&CidrGroup> {
        self.groups
            .iter()
            .filter(|g| selector.matches(&g.labels))
            .collect()
    }

    /// The `cidrgroup:` labels the ipcache gives `prefix`: those of every
    /// group prefix that contains it (itself included), a longer prefix's
    /// value winning a key (`mergeParentLabels`).
    pub fn labels_of(&self, prefix: IpNetwork) -> LabelSet {
        let mut parents: Vec<(&IpNetwork, &LabelSet)> = self
            .by_prefix
            .iter()
            .filter(|(outer, _)| prefix_contains(**outer, prefix))
            .collect();
        // Shortest first, so a longer prefix overwrites a key.
        parents.sort_by_key(|(outer, _)| outer.prefix());
        let mut out = LabelSet::new();
        for (_, labels) in parents {
            for label in labels.iter() {
                out.insert(label.clone());
            }
        }
        out
    }
}
