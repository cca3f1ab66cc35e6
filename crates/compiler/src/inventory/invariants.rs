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

use crate::allocation::{IdentityKind, IdentityTable, try_endpoint_identity_labels};
use crate::identity::Identity;
use crate::inventory::Inventory;
use crate::labels::{SOURCE_CIDR, SOURCE_CIDRGROUP, SOURCE_FQDN, SOURCE_K8S, SOURCE_RESERVED};

/// Checks the identity invariants of a finished inventory and the table
/// allocated for it; the error names the endpoint and what broke.
pub fn check_identity_invariants(
    inventory: &Inventory,
    table: &IdentityTable,
) -> Result<(), String> {
    let cidr_ids: Vec<u32> = table.cidr_identity.values().copied().collect();
    let cidr_labels: Vec<_> = table
        .identities
        .iter()
        .filter(|i| matches!(i.kind, IdentityKind::Cidr { .. }))
        .map(|i| &i.labels)
        .collect();
    for (index, endpoint) in inventory.endpoints.iter().enumerate() {
        let name = endpoint.display_name();
        let id = *table
            .endpoint_identity
            .get(index)
            .ok_or_else(|| format!("`{name}` has no identity"))?;
        let info = table
            .get(id)
            .ok_or_else(|| format!("`{name}`: identity {id} is not in the table"))?;
        let labels = &info.labels;
        let identity = Identity::new(id).map_err(|e| format!("`{name}`: {e}"))?;
        if identity.has_local_scope() || identity.has_remote_node_scope() || id == 0 {
            return Err(format!(
                "`{name}` holds identity {id:#010x}, outside the cluster scope"
            ));
        }
        if cidr_ids.contains(&id) || cidr_labels.contains(&labels) {
            return Err(format!(
                "`{name}` shares identity {id} (`{labels}`) with a CIDR identity"
            ));
        }
        if let Some(reserved) = identity.reserved_name() {
            if endpoint.namespace.is_some() || labels.find(SOURCE_RESERVED, reserved).is_none() {
                return Err(format!(
                    "`{name}` holds reserved identity {id} without being the {reserved} endpoint"
                ));
            }
        } else if let Some(label) = labels.iter().find(|l| {
            [SOURCE_RESERVED, SOURCE_CIDR, SOURCE_FQDN, SOURCE_CIDRGROUP]
                .contains(&l.source.as_str())
        }) {
            return Err(format!("`{name}` (identity {id}) carries `{label}`"));
        }
        if endpoint.identity_labels.is_none() && !identity.is_reserved() {
            let derived = try_endpoint_identity_labels(endpoint, inventory)?;
            if &derived != labels {
                return Err(format!(
                    "`{name}`: identity {id} is `{labels}`, not its `{derived}`"
                ));
            }
            if endpoint.namespace.is_some()
                && let Some(label) = derived.iter().find(|l| l.source != SOURCE_K8S)
            {
                return Err(format!("pod `{name}` carries `{label}`, not a k8s label"));
            }
        }
    }
    Ok(())
}
