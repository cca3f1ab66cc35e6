//! Identity allocation: which number every label set gets.
//!
//! - Reserved identities 1..=10 with their `reserved:` labels
//!   (`pkg/identity/numericidentity.go`; 7 = kube-apiserver also carries
//!   `reserved:remote-node`).
//! - Endpoint identities: the endpoint's identity labels (§2.3; see
//!   [`endpoint_identity_labels`]). Endpoints with equal label sets share
//!   one identity, as in Cilium. Numbers given by the inventory (cluster
//!   dumps) are kept; the other distinct label sets are **sorted** and
//!   numbered from 256 upward, skipping given numbers, so the result is
//!   independent of input order. The range is cluster 0's with the default
//!   `max-connected-clusters` (256..=65535).
//! - Local-scope CIDR identities `0x01000000 | n` for every prefix the
//!   policies name (including `except` prefixes, FQDN answers and
//!   selector-less service backends), sorted (IPv4 first, then by address
//!   and length) and numbered from 1. Their labels are `cidr:<prefix>` and
//!   the family's world label (`labels.GetCIDRLabels`, dual-stack). `/0`
//!   prefixes are the world identities 9/10 themselves.

use std::collections::{BTreeMap, BTreeSet};

use ipnetwork::IpNetwork;
use serde::Serialize;

use crate::error::CompileError;
use crate::identity::Identity;
use crate::inventory::{Endpoint, Inventory};
use crate::labels::{
    CLUSTER_LABEL, Label, LabelSet, NAMESPACE_LABELS_PREFIX, POD_NAMESPACE_LABEL,
    SERVICE_ACCOUNT_LABEL, SOURCE_K8S, SOURCE_RESERVED, SOURCE_UNSPEC, canonical_prefix,
    is_identity_label,
};

/// First number allocated to endpoint label sets (`MinimalNumericIdentity`).
pub const FIRST_ALLOCATED: u32 = 256;
/// Last number of cluster 0's range (`max-connected-clusters` = 255).
pub const LAST_ALLOCATED: u32 = 65_535;

/// What an identity stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum IdentityKind {
    /// A reserved identity (`reserved:<name>`).
    Reserved {
        /// Its name.
        name: String,
    },
    /// A reserved identity that inventory endpoints carry (health, ...).
    ReservedEndpoints {
        /// Its labels.
        name: String,
        /// The endpoints (indices into the inventory).
        endpoints: Vec<usize>,
    },
    /// The identity of one or more endpoints.
    Endpoints {
        /// The endpoints (indices into the inventory).
        endpoints: Vec<usize>,
    },
    /// A local CIDR identity.
    Cidr {
        /// Its prefix.
        #[serde(serialize_with = "crate::labels::serialize_display")]
        prefix: IpNetwork,
    },
}

/// One identity with its labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdentityInfo {
    /// The number.
    pub id: u32,
    /// Its labels.
    pub labels: LabelSet,
    /// What it stands for.
    pub kind: IdentityKind,
}

/// All identities of a compilation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityTable {
    /// Every identity, sorted by number.
    pub identities: Vec<IdentityInfo>,
    /// Identity of each inventory endpoint (same order as the inventory).
    pub endpoint_identity: Vec<u32>,
    /// CIDR identity of each policy prefix.
    pub cidr_identity: BTreeMap<IpNetwork, u32>,
    by_id: BTreeMap<u32, usize>,
}

impl IdentityTable {
    /// Allocates identities for an inventory and the prefixes of the
    /// policies.
    pub fn allocate(
        inventory: &Inventory,
        prefixes: &BTreeSet<IpNetwork>,
    ) -> Result<Self, CompileError> {
        let mut identities: Vec<IdentityInfo> = reserved_identities();
        let label_sets: Vec<LabelSet> = inventory
            .endpoints
            .iter()
            .map(|e| endpoint_identity_labels(e, inventory))
            .collect();

        // Reserved label sets keep their reserved numbers; given numbers
        // claim their label set next.
        let mut by_labels: BTreeMap<LabelSet, u32> = identities
            .iter()
            .map(|info| (info.labels.clone(), info.id))
            .collect();
        let mut taken: BTreeMap<u32, LabelSet> = BTreeMap::new();
        for (endpoint, labels) in inventory.endpoints.iter().zip(&label_sets) {
            let Some(id) = endpoint.identity else {
                continue;
            };
            if !(FIRST_ALLOCATED..=LAST_ALLOCATED).contains(&id) && Identity::new(id).is_err() {
                return Err(CompileError::Identity {
                    identity: id,
                    message: format!(
                        "given to `{}` but not a valid identity",
                        endpoint.display_name()
                    ),
                });
            }
            if id < FIRST_ALLOCATED {
                return Err(CompileError::Identity {
                    identity: id,
                    message: format!(
                        "given to `{}` but numbers below {FIRST_ALLOCATED} are reserved",
                        endpoint.display_name()
                    ),
                });
            }
            if let Some(existing) = taken.get(&id)
                && existing != labels
            {
                return Err(CompileError::Identity {
                    identity: id,
                    message: format!(
                        "given to `{}` with labels `{labels}` but also to labels `{existing}`",
                        endpoint.display_name()
                    ),
                });
            }
            taken.insert(id, labels.clone());
            by_labels.entry(labels.clone()).or_insert(id);
        }
        let to_allocate: BTreeSet<&LabelSet> = inventory
            .endpoints
            .iter()
            .zip(&label_sets)
            .filter(|(e, l)| e.identity.is_none() && !by_labels.contains_key(*l))
            .map(|(_, l)| l)
            .collect();
        let mut next = FIRST_ALLOCATED;
        for labels in to_allocate {
            while taken.contains_key(&next) {
                next += 1;
            }
            if next > LAST_ALLOCATED {
                return Err(CompileError::Capacity {
                    what: "endpoint identities",
                    given: by_labels.len() + 1,
                    limit: (LAST_ALLOCATED - FIRST_ALLOCATED + 1) as usize,
                });
            }
            taken.insert(next, labels.clone());
            by_labels.insert(labels.clone(), next);
            next += 1;
        }

        let mut endpoint_identity = Vec::with_capacity(inventory.endpoints.len());
        let mut members: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (index, (endpoint, labels)) in inventory.endpoints.iter().zip(&label_sets).enumerate() {
            let id = match endpoint.identity {
                Some(id) => id,
                None => by_labels.get(labels).copied().unwrap_or(0),
            };
            endpoint_identity.push(id);
            members.entry(id).or_default().push(index);
        }
        for info in &mut identities {
            if let (IdentityKind::Reserved { .. }, Some(list)) = (&info.kind, members.get(&info.id))
            {
                info.kind = IdentityKind::ReservedEndpoints {
                    name: info.labels.to_string(),
                    endpoints: list.clone(),
                };
            }
        }
        for (id, labels) in &taken {
            identities.push(IdentityInfo {
                id: *id,
                labels: labels.clone(),
                kind: IdentityKind::Endpoints {
                    endpoints: members.get(id).cloned().unwrap_or_default(),
                },
            });
        }

        // CIDR identities, numbered in sorted prefix order.
        let mut cidr_identity = BTreeMap::new();
        let mut sorted: Vec<IpNetwork> = prefixes
            .iter()
            .map(|p| canonical_prefix(*p))
            .filter(|p| p.prefix() != 0)
            .collect();
        sorted.sort_by_key(|p| (p.is_ipv6(), p.network(), p.prefix()));
        sorted.dedup();
        for (index, prefix) in sorted.into_iter().enumerate() {
            let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
            let id = Identity::local(number).map_err(|_| CompileError::Capacity {
                what: "CIDR identities",
                given: prefixes.len(),
                limit: Identity::MAX_INDEX as usize,
            })?;
            let world = if prefix.is_ipv4() {
                "world-ipv4"
            } else {
                "world-ipv6"
            };
            let labels: LabelSet = [Label::cidr(prefix), Label::reserved(world)]
                .into_iter()
                .collect();
            cidr_identity.insert(prefix, id.get());
            identities.push(IdentityInfo {
                id: id.get(),
                labels,
                kind: IdentityKind::Cidr { prefix },
            });
        }

        identities.sort_by_key(|i| i.id);
        let by_id = identities
            .iter()
            .enumerate()
            .map(|(index, info)| (info.id, index))
            .collect();
        Ok(Self {
            identities,
            endpoint_identity,
            cidr_identity,
            by_id,
        })
    }

    /// The identity with this number.
    pub fn get(&self, id: u32) -> Option<&IdentityInfo> {
        self.by_id.get(&id).map(|&index| &self.identities[index])
    }

    /// The most specific policy prefix containing an address (its CIDR
    /// identity), as the ipcache's longest-prefix match would find.
    pub fn cidr_identity_of(&self, ip: std::net::IpAddr) -> Option<(IpNetwork, u32)> {
        self.cidr_identity
            .iter()
            .filter(|(prefix, _)| prefix.contains(ip))
            .max_by_key(|(prefix, _)| prefix.prefix())
            .map(|(prefix, id)| (*prefix, *id))
    }
}

fn reserved_identities() -> Vec<IdentityInfo> {
    let mut list = Vec::new();
    for (identity, name) in Identity::RESERVED {
        if identity == Identity::ENCRYPTED_OVERLAY {
            // Never on the wire, never a policy peer.
            continue;
        }
        let mut labels = LabelSet::new();
        labels.insert(Label::reserved(name));
        if identity == Identity::KUBE_APISERVER {
            labels.insert(Label::reserved("remote-node"));
        }
        list.push(IdentityInfo {
            id: identity.get(),
            labels,
            kind: IdentityKind::Reserved {
                name: name.to_owned(),
            },
        });
    }
    list
}

/// `k8sconst.LabelPrefix` (`pkg/k8s/apis/cilium.io/const.go`): the label
/// keys Cilium owns and strips from pod labels.
const CILIUM_OWNED_LABEL_PREFIX: &str = "io.cilium.k8s";

/// The identity labels of an endpoint (Cilium's pod label extraction plus
/// `pkg/labelsfilter`):
/// - the workload labels that pass the default label filter, with source
///   `k8s` for Kubernetes endpoints and `unspec` otherwise (a `source:`
///   prefix in the key is kept); a pod's own `io.cilium.k8s*` labels are
///   dropped (`SanitizePodLabels`);
/// - for a namespaced endpoint: `k8s:io.kubernetes.pod.namespace=<ns>`,
///   `k8s:io.cilium.k8s.namespace.labels.<k>=<v>` for every namespace label
///   (including `kubernetes.io/metadata.name`), and
///   `k8s:io.cilium.k8s.policy.serviceaccount=<sa>` when it has one;
/// - for every endpoint: `k8s:io.cilium.k8s.policy.cluster=<cluster>`.
///   porin treats endpoints outside Kubernetes as members of the local
///   cluster too, so the `cluster` entity covers them (documented choice).
///
/// Labels given by a cluster dump are used as they are.
pub fn endpoint_identity_labels(endpoint: &Endpoint, inventory: &Inventory) -> LabelSet {
    if let Some(given) = &endpoint.identity_labels {
        return given.clone();
    }
    let default_source = if endpoint.namespace.is_some() {
        SOURCE_K8S
    } else {
        SOURCE_UNSPEC
    };
    // A pod's labels are `k8s:<key>` verbatim (`labels.Map2Labels(podLabels,
    // LabelSourceK8s)`): a pod key such as `reserved.host` never makes a
    // reserved label, so a pod cannot take the host (or any reserved)
    // identity. Reserved endpoints (health, ingress, init) have no namespace.
    let workload_label = |key: &str, value: &str| {
        let label = Label::parse(&format!("{key}={value}"), default_source);
        if endpoint.namespace.is_some() && label.source == SOURCE_RESERVED {
            Label::new(SOURCE_K8S, key, value)
        } else {
            label
        }
    };
    let parsed: Vec<Label> = endpoint
        .labels
        .iter()
        .map(|(key, value)| workload_label(key, value))
        .collect();
    if !parsed.is_empty() && parsed.iter().all(|l| l.source == SOURCE_RESERVED) {
        // A reserved endpoint (health, ingress, init, ...): its identity is
        // its reserved labels alone, as Cilium gives such endpoints.
        return parsed.into_iter().collect();
    }
    let mut labels = LabelSet::new();
    for (key, value) in &endpoint.labels {
        let label = workload_label(key, value);
        // pkg/k8s/utils/utils.go SanitizePodLabels/filterPodLabels: a pod's
        // own labels under `io.cilium.k8s` (namespace labels, service
        // account, cluster) are dropped; Cilium sets them itself below, so
        // a pod cannot claim a namespace label or service account it lacks.
        if endpoint.namespace.is_some() && label.key.starts_with(CILIUM_OWNED_LABEL_PREFIX) {
            continue;
        }
        if is_identity_label(&label) {
            labels.insert(label);
        }
    }
    if let Some(namespace) = &endpoint.namespace {
        labels.insert(Label::k8s(POD_NAMESPACE_LABEL, namespace));
        if let Some(ns_labels) = inventory.namespaces.get(namespace) {
            for (key, value) in ns_labels {
                let label = Label::k8s(&format!("{NAMESPACE_LABELS_PREFIX}.{key}"), value);
                if is_identity_label(&label) {
                    labels.insert(label);
                }
            }
        }
        if let Some(sa) = &endpoint.service_account {
            labels.insert(Label::k8s(SERVICE_ACCOUNT_LABEL, sa));
        }
    }
    labels.insert(Label::k8s(CLUSTER_LABEL, &inventory.cluster));
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::SourceLocation;

    fn endpoint(name: &str, ns: Option<&str>, app: &str) -> Endpoint {
        Endpoint {
            name: name.into(),
            namespace: ns.map(Into::into),
            labels: [("app".to_owned(), app.to_owned())].into(),
            ips: vec![],
            service_account: None,
            ports: vec![],
            identity: None,
            identity_labels: None,
            location: SourceLocation::default(),
        }
    }

    #[test]
    fn equal_label_sets_share_one_identity_from_256() {
        let mut inv = Inventory::new();
        inv.endpoints = vec![
            endpoint("a", Some("prod"), "web"),
            endpoint("b", Some("prod"), "web"),
            endpoint("c", Some("prod"), "db"),
        ];
        inv.finish().unwrap();
        let table = IdentityTable::allocate(&inv, &BTreeSet::new()).unwrap();
        let ids = &table.endpoint_identity;
        assert_eq!(ids[0], ids[1]);
        assert_ne!(ids[0], ids[2]);
        assert!(ids.iter().all(|id| *id >= 256));
        let labels = &table.get(ids[0]).unwrap().labels;
        assert_eq!(
            labels.to_string(),
            "k8s:app=web,k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=prod,\
             k8s:io.cilium.k8s.policy.cluster=default,k8s:io.kubernetes.pod.namespace=prod"
        );
    }

    #[test]
    fn cidr_identities_are_local_scope_and_sorted() {
        let prefixes: BTreeSet<IpNetwork> = ["192.0.2.0/24", "10.0.0.0/8", "0.0.0.0/0", "fd00::/8"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        let table = IdentityTable::allocate(&Inventory::new(), &prefixes).unwrap();
        assert_eq!(
            table.cidr_identity[&"10.0.0.0/8".parse().unwrap()],
            0x0100_0001
        );
        assert_eq!(
            table.cidr_identity[&"192.0.2.0/24".parse().unwrap()],
            0x0100_0002
        );
        assert_eq!(
            table.cidr_identity[&"fd00::/8".parse().unwrap()],
            0x0100_0003
        );
        assert_eq!(table.cidr_identity.len(), 3, "/0 is the world identity");
    }

    #[test]
    fn given_identity_conflict_is_an_error() {
        let mut inv = Inventory::new();
        let mut a = endpoint("a", Some("prod"), "web");
        a.identity = Some(1000);
        let mut b = endpoint("b", Some("prod"), "db");
        b.identity = Some(1000);
        inv.endpoints = vec![a, b];
        inv.finish().unwrap();
        assert!(matches!(
            IdentityTable::allocate(&inv, &BTreeSet::new()),
            Err(CompileError::Identity { identity: 1000, .. })
        ));
    }
}
