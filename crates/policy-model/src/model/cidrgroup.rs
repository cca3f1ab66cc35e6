//! `CiliumCIDRGroup` (`cilium.io/v2alpha1` and `cilium.io/v2`), 1:1 with the
//! YAML: a cluster-scoped list of external CIDRs that `fromCIDRSet` /
//! `toCIDRSet` entries reference by name (`cidrGroupRef`) or by the group's
//! labels (`cidrGroupSelector`).
//!
//! Cilium 1.19: `pkg/k8s/apis/cilium.io/v2alpha1/cidrgroups_types.go` and
//! `pkg/k8s/apis/cilium.io/v2/cidrgroups_types.go` define the same shape
//! (`spec.externalCIDRs`, required, items `format: cidr`); the agent turns
//! each group into ipcache metadata (`pkg/policy/k8s/cidr_group.go`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::ObjectMeta;

/// A cluster-scoped `CiliumCIDRGroup`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct CiliumCidrGroup {
    /// `cilium.io/v2alpha1` or `cilium.io/v2`.
    pub api_version: String,
    /// Always `CiliumCIDRGroup`.
    pub kind: String,
    /// Object metadata; `name` is what `cidrGroupRef` names, `labels` what
    /// `cidrGroupSelector` selects.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The group's CIDRs.
    pub spec: CidrGroupSpec,
}

/// `CiliumCIDRGroupSpec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct CidrGroupSpec {
    /// CIDRs selecting peers outside the cluster (CRD: required, may be
    /// empty, every item `format: cidr`).
    #[serde(rename = "externalCIDRs")]
    pub external_cidrs: Vec<String>,
}
