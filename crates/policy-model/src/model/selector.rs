//! Label selectors: Kubernetes `LabelSelector`, which Cilium wraps as
//! `EndpointSelector` (`pkg/policy/api/selector.go`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Kubernetes label selector: `matchLabels` and `matchExpressions`, ANDed.
///
/// An empty selector (`{}`) selects everything (Cilium `IsWildcard`). Keys may
/// carry a Cilium source prefix (`k8s:app`, `reserved:host`, `any:app`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct LabelSelector {
    /// `{key: value}` pairs; each is equivalent to an `In` requirement with one value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

/// Cilium's name for a label selector in policy rules (`api.EndpointSelector`).
pub type EndpointSelector = LabelSelector;

impl LabelSelector {
    /// True when the selector has no requirement at all and so selects every
    /// identity (Cilium `EndpointSelector.IsWildcard`).
    pub fn is_wildcard(&self) -> bool {
        self.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && self.match_expressions.as_ref().is_none_or(Vec::is_empty)
    }
}

/// One set-based requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    /// The label key the requirement applies to.
    pub key: String,
    /// How the key relates to `values`.
    pub operator: SelectorOperator,
    /// Values for `In`/`NotIn`; must be empty for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// Operator of a [`LabelSelectorRequirement`] (CRD enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SelectorOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}
