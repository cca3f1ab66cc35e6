//! Label selectors: Kubernetes `LabelSelector`, which Cilium wraps as
//! `EndpointSelector` (`pkg/policy/api/selector.go`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
    pub match_labels: Option<MatchLabels>,
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
        self.match_labels.as_ref().is_none_or(MatchLabels::is_empty)
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

/// The `matchLabels` of a [`LabelSelector`]: `{key: value}` pairs, sorted
/// by key and distinct, as a `BTreeMap<String, String>` holds them (the
/// same iteration order, comparisons, serialisation, schema and debug
/// form) but in a `Vec`: a one-label selector, which nearly every policy
/// has, takes one 48-byte pair instead of a B-tree node of eleven slots
/// (~550 bytes; 34 MiB of the 65,535-CIDR-rule compile, issue 14).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MatchLabels(Vec<(String, String)>);

impl MatchLabels {
    /// No labels.
    pub fn new() -> MatchLabels {
        MatchLabels::default()
    }

    /// True when there is no label.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The pairs in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &String)> + ExactSizeIterator {
        self.0.iter().map(|(key, value)| (key, value))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(key, _)| key)
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.find(key).ok().map(|at| &self.0[at].1)
    }

    /// True when `key` has a value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        match self.find(&key) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, value)),
            Err(at) => {
                self.0.insert(at, (key, value));
                None
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.find(key).ok().map(|at| self.0.remove(at).1)
    }

    /// Keeps the pairs `keep` accepts, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut String) -> bool) {
        self.0.retain_mut(|(key, value)| keep(key, value));
    }
}

impl FromIterator<(String, String)> for MatchLabels {
    /// Sorted by key; of a repeated key the last value wins, as
    /// `BTreeMap::from_iter` does.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> MatchLabels {
        let mut labels = MatchLabels(pairs.into_iter().collect());
        labels.normalise();
        labels
    }
}

impl MatchLabels {
    /// Sorts by key (stably) and keeps the last value of a repeated key.
    /// Kept at its length: it lives as long as the loaded policy.
    fn normalise(&mut self) {
        if !self.0.windows(2).all(|pair| pair[0].0 < pair[1].0) {
            self.0.sort_by(|a, b| a.0.cmp(&b.0));
            // `dedup_by` keeps the first of a run; it takes the later value.
            self.0.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(&mut later.1, &mut kept.1);
                }
                same
            });
        }
        self.0.shrink_to_fit();
    }
}

impl<'a> IntoIterator for &'a MatchLabels {
    type Item = (&'a String, &'a String);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, String)>,
        fn(&'a (String, String)) -> (&'a String, &'a String),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(key, value)| (key, value))
    }
}

impl From<BTreeMap<String, String>> for MatchLabels {
    fn from(map: BTreeMap<String, String>) -> MatchLabels {
        MatchLabels(map.into_iter().collect())
    }
}

impl std::fmt::Debug for MatchLabels {
    /// As the `BTreeMap` it replaced: `{"app": "web"}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for MatchLabels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for MatchLabels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MatchLabels, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = MatchLabels;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<MatchLabels, A::Error> {
                let mut pairs = Vec::with_capacity(access.size_hint().unwrap_or(0).min(4096));
                while let Some(pair) = access.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                let mut labels = MatchLabels(pairs);
                labels.normalise();
                Ok(labels)
            }
        }
        deserializer.deserialize_map(Pairs)
    }
}

impl JsonSchema for MatchLabels {
    // The schema of the `BTreeMap<String, String>` it replaced, so the
    // published schemas do not change.
    fn inline_schema() -> bool {
        <BTreeMap<String, String>>::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        <BTreeMap<String, String>>::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        <BTreeMap<String, String>>::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <BTreeMap<String, String>>::json_schema(generator)
    }
}
