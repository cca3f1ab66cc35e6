//! Kubernetes object metadata (`metav1.ObjectMeta`), the part every resource shares.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `metadata` of a Kubernetes object.
///
/// porin reads `name`, `namespace` and `labels`; the other fields exist so that
/// manifests exported from a cluster (`kubectl get -o yaml`) load unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ObjectMeta {
    /// Object name; required by Cilium (`CiliumNetworkPolicy must have name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Name prefix the API server completes (not usable offline, but valid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    /// Namespace of a namespaced object (CNP, NetworkPolicy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Object annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Server-assigned unique id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Server-assigned version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Server-assigned generation counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Server-assigned creation time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Server-assigned deletion time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// Grace period before deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// Finalizers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizers: Option<Vec<String>>,
    /// Owner references, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_references: Option<Vec<serde_json::Value>>,
    /// Server-side-apply bookkeeping, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_fields: Option<Vec<serde_json::Value>>,
    /// Deprecated self link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
}
