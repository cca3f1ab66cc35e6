//! What every inventory the loaders accept guarantees about identities
//! (issue 12): checked by the property tests and the `inventory_load` fuzz
//! target, so both test one statement of it.
//!
//! - A pod's derived labels all have source `k8s` (Cilium's
//!   `Map2Labels(podLabels, "k8s")`), whatever its keys say.
//! - An endpoint outside Kubernetes whose labels porin derives carries no
//!   CIDR, FQDN or CIDR-group label, and reserved labels only as a reserved
//!   endpoint (one label, its own reserved identity).
//! - Endpoint identities never share a number or a label set with a CIDR
//!   identity, never lie in the local or remote-node scope, and a reserved
//!   number belongs only to the reserved endpoint of that identity, whose
//!   labels carry its `reserved:` label.

use crate::allocation::{IdentityKind, IdentityTable, LabelError, try_endpoint_identity_labels};
use crate::identity::{Identity, IdentityError};
use crate::inventory::Inventory;
use crate::labels::{
    Label, LabelSet, SOURCE_CIDR, SOURCE_CIDRGROUP, SOURCE_FQDN, SOURCE_K8S, SOURCE_RESERVED,
};

/// An identity invariant that does not hold: a bug in the loaders or the
/// allocation, named by endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvariantViolation {
    /// The table has no identity for the endpoint.
    #[error("`{endpoint}` has no identity")]
    NoIdentity {
        /// The endpoint (`namespace/name`).
        endpoint: String,
    },
    /// The endpoint's identity is not in the table.
    #[error("`{endpoint}`: identity {id} is not in the table")]
    NotInTable {
        /// The endpoint.
        endpoint: String,
        /// Its identity.
        id: u32,
    },
    /// The endpoint's identity is no valid number.
    #[error("`{endpoint}`: {source}")]
    Number {
        /// The endpoint.
        endpoint: String,
        /// Why the number is invalid.
        source: IdentityError,
    },
    /// A local-scope, remote-node or zero identity on an endpoint.
    #[error("`{endpoint}` holds identity {id:#010x}, outside the cluster scope")]
    OutsideClusterScope {
        /// The endpoint.
        endpoint: String,
        /// Its identity.
        id: u32,
    },
    /// An endpoint identity that is also a CIDR identity.
    #[error("`{endpoint}` shares identity {id} (`{labels}`) with a CIDR identity")]
    SharesCidr {
        /// The endpoint.
        endpoint: String,
        /// Its identity.
        id: u32,
        /// The identity's labels.
        labels: LabelSet,
    },
    /// A reserved identity on an endpoint that is not that reserved endpoint.
    #[error("`{endpoint}` holds reserved identity {id} without being the {reserved} endpoint")]
    ReservedNotItsEndpoint {
        /// The endpoint.
        endpoint: String,
        /// Its identity.
        id: u32,
        /// The reserved name of the identity.
        reserved: &'static str,
    },
    /// A cluster identity with a reserved or derived label.
    #[error("`{endpoint}` (identity {id}) carries `{label}`")]
    DerivedLabel {
        /// The endpoint.
        endpoint: String,
        /// Its identity.
        id: u32,
        /// The label.
        label: Label,
    },
    /// The endpoint's labels cannot be derived.
    #[error("`{endpoint}`: {source}")]
    Labels {
        /// The endpoint.
        endpoint: String,
        /// Why.
        source: LabelError,
    },
    /// The identity's labels are not the endpoint's derived labels.
    #[error("`{endpoint}`: identity {id} is `{labels}`, not its `{derived}`")]
    NotItsLabels {
        /// The endpoint.
        endpoint: String,
        /// Its identity.
        id: u32,
        /// The identity's labels.
        labels: LabelSet,
        /// The endpoint's derived labels.
        derived: LabelSet,
    },
    /// A pod label whose source is not `k8s`.
    #[error("pod `{endpoint}` carries `{label}`, not a k8s label")]
    PodLabelNotK8s {
        /// The endpoint.
        endpoint: String,
        /// The label.
        label: Label,
    },
}

/// Checks the identity invariants of a finished inventory and the table
/// allocated for it; the error names the endpoint and what broke.
pub fn check_identity_invariants(
    inventory: &Inventory,
    table: &IdentityTable,
) -> Result<(), InvariantViolation> {
    let cidr_ids: Vec<u32> = table.cidr_identity.values().copied().collect();
    let cidr_labels: Vec<_> = table
        .identities
        .iter()
        .filter(|i| matches!(i.kind, IdentityKind::Cidr { .. }))
        .map(|i| &i.labels)
        .collect();
    for (index, endpoint) in inventory.endpoints.iter().enumerate() {
        let name = endpoint.display_name();
        let id =
            *table
                .endpoint_identity
                .get(index)
                .ok_or_else(|| InvariantViolation::NoIdentity {
                    endpoint: name.clone(),
                })?;
        let info = table
            .get(id)
            .ok_or_else(|| InvariantViolation::NotInTable {
                endpoint: name.clone(),
                id,
            })?;
        let labels = &info.labels;
        let identity = Identity::new(id).map_err(|source| InvariantViolation::Number {
            endpoint: name.clone(),
            source,
        })?;
        if identity.has_local_scope() || identity.has_remote_node_scope() || id == 0 {
            return Err(InvariantViolation::OutsideClusterScope { endpoint: name, id });
        }
        if cidr_ids.contains(&id) || cidr_labels.contains(&labels) {
            return Err(InvariantViolation::SharesCidr {
                endpoint: name,
                id,
                labels: labels.clone(),
            });
        }
        if let Some(reserved) = identity.reserved_name() {
            if endpoint.namespace.is_some() || labels.find(SOURCE_RESERVED, reserved).is_none() {
                return Err(InvariantViolation::ReservedNotItsEndpoint {
                    endpoint: name,
                    id,
                    reserved,
                });
            }
        } else if let Some(label) = labels.iter().find(|l| {
            [SOURCE_RESERVED, SOURCE_CIDR, SOURCE_FQDN, SOURCE_CIDRGROUP]
                .contains(&l.source.as_str())
        }) {
            return Err(InvariantViolation::DerivedLabel {
                endpoint: name,
                id,
                label: label.clone(),
            });
        }
        if endpoint.identity_labels.is_none() && !identity.is_reserved() {
            let derived = try_endpoint_identity_labels(endpoint, inventory).map_err(|source| {
                InvariantViolation::Labels {
                    endpoint: name.clone(),
                    source,
                }
            })?;
            if &derived != labels {
                return Err(InvariantViolation::NotItsLabels {
                    endpoint: name,
                    id,
                    labels: labels.clone(),
                    derived,
                });
            }
            if endpoint.namespace.is_some()
                && let Some(label) = derived.iter().find(|l| l.source != SOURCE_K8S)
            {
                return Err(InvariantViolation::PodLabelNotK8s {
                    endpoint: name,
                    label: label.clone(),
                });
            }
        }
    }
    Ok(())
}
