//! Label selectors over identity labels.
//!
//! A [`Selector`] is Cilium's `EndpointSelector` after key extension: a
//! conjunction of requirements on extended keys `source.key`
//! (`labels.GetExtendedKeyFrom`, `pkg/labels/labels.go`). Matching follows
//! the Kubernetes label-selector operators (In, NotIn, Exists,
//! DoesNotExist) over [`LabelSet::find`](crate::labels::LabelSet::find), so `any` keys match every source
//! and `cidr` keys match by prefix containment (§3.6).
//!
//! Every peer kind of a policy becomes a selector: endpoint selectors (with
//! the namespace/cluster pinning of `ParseToCiliumRule`), entities
//! (`pkg/policy/api/entity.go`), CIDR rules with excepts, FQDN answers. An
//! empty selector is the wildcard (identity 0 in the policy map).

use std::fmt;

use ipnetwork::IpNetwork;
use serde::{Serialize, Serializer};

use crate::labels::{
    LabelSet, SOURCE_ANY, SOURCE_CIDR, SOURCE_RESERVED, canonical_prefix, cidr_label_key,
    parse_source,
};

/// A selector key in extended form: source and key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SelectorKey {
    /// The label source the key requires, or `any`.
    pub source: String,
    /// The label key.
    pub key: String,
}

impl SelectorKey {
    /// A key with an explicit source.
    pub fn new(source: &str, key: &str) -> Self {
        Self {
            source: source.to_owned(),
            key: key.to_owned(),
        }
    }

    /// Extends a user-written key (`GetExtendedKeyFrom`): `k8s:app` is
    /// `k8s.app`, `app` is `any.app`, `$host` and `reserved:host` are
    /// `reserved.host`.
    pub fn extend(user_key: &str) -> Self {
        let (source, key) = parse_source(user_key, ':');
        let source = if source.is_empty() {
            SOURCE_ANY
        } else {
            source
        };
        Self::new(source, key)
    }

    /// Whether this key names `key` in any of the given sources (`any`
    /// always qualifies).
    pub fn is(&self, sources: &[&str], key: &str) -> bool {
        self.key == key && (self.source == SOURCE_ANY || sources.contains(&self.source.as_str()))
    }
}

impl fmt::Display for SelectorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.source, self.key)
    }
}

/// A label-selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Operator {
    /// The label exists and its value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label exists.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    /// The extended key.
    pub key: SelectorKey,
    /// The operator.
    pub operator: Operator,
    /// The values (In/NotIn), sorted and distinct (a `Vec` rather than a
    /// `BTreeSet`: the same order and comparisons, without a B-tree node
    /// of eleven slots for the usual single value). Build it with
    /// [`Requirement::with_values`] or [`Requirement::is_in`].
    pub values: Vec<String>,
}

impl Requirement {
    /// `key In (values)`.
    pub fn is_in(key: SelectorKey, values: impl IntoIterator<Item = String>) -> Self {
        Self::with_values(key, Operator::In, values)
    }

    /// `key OPERATOR (values)`, the values sorted and made distinct.
    pub fn with_values(
        key: SelectorKey,
        operator: Operator,
        values: impl IntoIterator<Item = String>,
    ) -> Self {
        let mut values: Vec<String> = values.into_iter().collect();
        values.sort();
        values.dedup();
        values.shrink_to_fit();
        Self {
            key,
            operator,
            values,
        }
    }

    /// `key Exists`.
    pub fn exists(key: SelectorKey) -> Self {
        Self {
            key,
            operator: Operator::Exists,
            values: Vec::new(),
        }
    }

    /// `key DoesNotExist`.
    pub fn does_not_exist(key: SelectorKey) -> Self {
        Self {
            key,
            operator: Operator::DoesNotExist,
            values: Vec::new(),
        }
    }

    /// Whether the labels satisfy this requirement.
    pub fn matches(&self, labels: &LabelSet) -> bool {
        let found = labels.find(&self.key.source, &self.key.key);
        match self.operator {
            Operator::In => found.is_some_and(|l| self.has_value(&l.value)),
            Operator::NotIn => found.is_none_or(|l| !self.has_value(&l.value)),
            Operator::Exists => found.is_some(),
            Operator::DoesNotExist => found.is_none(),
        }
    }

    /// Whether `value` is one of the (sorted) values.
    fn has_value(&self, value: &str) -> bool {
        self.values
            .binary_search_by(|v| v.as_str().cmp(value))
            .is_ok()
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = || self.values.join(",");
        match self.operator {
            Operator::In if self.values.len() == 1 => write!(f, "{}={}", self.key, values()),
            Operator::In => write!(f, "{} in ({})", self.key, values()),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, values()),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
        }
    }
}

/// A conjunction of requirements; empty = wildcard (selects every identity).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Selector {
    /// Sorted and distinct: the order and comparisons of a set, without a
    /// `BTreeSet`'s node of eleven slots (~900 bytes) for a selector of
    /// one requirement (one per CIDR rule; issue 14's 65,535 CIDR rules).
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The wildcard selector.
    pub fn wildcard() -> Self {
        Self::default()
    }

    /// A selector from requirements.
    pub fn from_requirements(requirements: impl IntoIterator<Item = Requirement>) -> Self {
        let mut requirements: Vec<Requirement> = requirements.into_iter().collect();
        requirements.sort();
        requirements.dedup();
        requirements.shrink_to_fit();
        Self { requirements }
    }

    /// A selector requiring one reserved label (`reserved:<name>`).
    pub fn reserved(name: &str) -> Self {
        Self::from_requirements([Requirement::exists(SelectorKey::new(SOURCE_RESERVED, name))])
    }

    /// A CIDR selector (`types.NewCIDRSelector`): requires the label of
    /// `prefix`, and lacks the label of every excepted prefix
    /// (`NewExceptRequirement`). Both labels come from [`cidr_selector_key`].
    pub fn cidr(prefix: IpNetwork, except: &[IpNetwork]) -> Self {
        let mut requirements = Vec::with_capacity(1 + except.len());
        requirements.push(Requirement::exists(cidr_selector_key(prefix)));
        for excepted in except {
            requirements.push(Requirement::does_not_exist(cidr_selector_key(*excepted)));
        }
        Self::from_requirements(requirements)
    }

    /// Adds a requirement.
    pub fn push(&mut self, requirement: Requirement) {
        if let Err(at) = self.requirements.binary_search(&requirement) {
            self.requirements.insert(at, requirement);
        }
    }

    /// The requirements, in a stable order.
    pub fn requirements(&self) -> impl Iterator<Item = &Requirement> {
        self.requirements.iter()
    }

    /// Whether this is the wildcard selector.
    pub fn is_wildcard(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether some requirement's key satisfies `predicate`.
    pub fn has_key(&self, predicate: impl Fn(&SelectorKey) -> bool) -> bool {
        self.requirements.iter().any(|r| predicate(&r.key))
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &LabelSet) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The selector as a policy author wrote it, in label-selector syntax:
    /// `app=frontend`, `tier in (a,b)`, `!canary`, with the source prefix
    /// of Kubernetes and unspecified labels left out (`reserved:host`
    /// keeps its own), the namespace Cilium adds to a namespaced policy's
    /// selector said after it (`app=frontend in namespace shop`) and the
    /// cluster label it adds left out; `{}` (every identity) when nothing
    /// is left. The [`Display`](fmt::Display) form is the exact one.
    pub fn written(&self) -> String {
        const NAMESPACE: &str = "io.kubernetes.pod.namespace";
        const CLUSTER: &str = "io.cilium.k8s.policy.cluster";
        let mut parts = Vec::new();
        let mut namespace = None;
        for requirement in &self.requirements {
            let user_source = matches!(requirement.key.source.as_str(), "k8s" | "any" | "unspec");
            if user_source && requirement.key.key == CLUSTER {
                continue;
            }
            if user_source
                && requirement.key.key == NAMESPACE
                && requirement.operator == Operator::In
                && requirement.values.len() == 1
            {
                namespace = requirement.values.first().cloned();
                continue;
            }
            let key = if user_source {
                requirement.key.key.clone()
            } else {
                format!("{}:{}", requirement.key.source, requirement.key.key)
            };
            let values = || requirement.values.join(",");
            parts.push(match requirement.operator {
                Operator::In if requirement.values.len() == 1 => format!("{key}={}", values()),
                Operator::In => format!("{key} in ({})", values()),
                Operator::NotIn => format!("{key} notin ({})", values()),
                Operator::Exists => key,
                Operator::DoesNotExist => format!("!{key}"),
            });
        }
        let labels = if parts.is_empty() {
            "{}".to_owned()
        } else {
            parts.join(",")
        };
        match namespace {
            Some(ns) => format!("{labels} in namespace {ns}"),
            None => labels,
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.requirements.is_empty() {
            return f.write_str("{}");
        }
        f.write_str("{")?;
        let mut first = true;
        for requirement in &self.requirements {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{requirement}")?;
        }
        f.write_str("}")
    }
}

impl Serialize for Selector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The label key a CIDR peer selects (`labels.IPStringToLabel`,
/// pkg/labels/cidr.go): host bits are masked (`10.1.2.3/8` is
/// `cidr:10.0.0.0/8`), and a zero-length prefix is the family's world label
/// (`getWorldLabel`, dual-stack: `world-ipv4` / `world-ipv6`) whatever its
/// address (`10.0.0.0/0` is `0.0.0.0/0`). The same holds for an `except`
/// entry, so a zero-length except removes every identity of its family
/// (each carries the world label, `labels.GetCIDRLabels`).
pub fn cidr_selector_key(prefix: IpNetwork) -> SelectorKey {
    let prefix = canonical_prefix(prefix);
    if prefix.prefix() == 0 {
        let world = if prefix.is_ipv4() {
            "world-ipv4"
        } else {
            "world-ipv6"
        };
        SelectorKey::new(SOURCE_RESERVED, world)
    } else {
        SelectorKey::new(SOURCE_CIDR, &cidr_label_key(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::Label;

    fn labels(items: &[Label]) -> LabelSet {
        items.iter().cloned().collect()
    }

    #[test]
    fn selectors_are_written_as_policies_write_them() {
        let selector = Selector::from_requirements([
            Requirement::is_in(SelectorKey::extend("app"), ["frontend".to_owned()]),
            Requirement::is_in(
                SelectorKey::extend("k8s:io.kubernetes.pod.namespace"),
                ["shop".to_owned()],
            ),
            Requirement::is_in(
                SelectorKey::extend("k8s:io.cilium.k8s.policy.cluster"),
                ["default".to_owned()],
            ),
            Requirement::does_not_exist(SelectorKey::extend("canary")),
        ]);
        assert_eq!(selector.written(), "app=frontend,!canary in namespace shop");
        assert_eq!(Selector::reserved("host").written(), "reserved:host");
        assert_eq!(Selector::wildcard().written(), "{}");
        let tiers = Selector::from_requirements([Requirement::is_in(
            SelectorKey::extend("tier"),
            ["a".to_owned(), "b".to_owned()],
        )]);
        assert_eq!(tiers.written(), "tier in (a,b)");
    }

    #[test]
    fn extend_keys_like_get_extended_key_from() {
        assert_eq!(SelectorKey::extend("k8s:app").to_string(), "k8s.app");
        assert_eq!(SelectorKey::extend("app").to_string(), "any.app");
        assert_eq!(SelectorKey::extend("$host").to_string(), "reserved.host");
        assert_eq!(
            SelectorKey::extend("reserved:host").to_string(),
            "reserved.host"
        );
    }

    #[test]
    fn operators_follow_k8s_label_selector_semantics() {
        let set = labels(&[Label::k8s("app", "web")]);
        let key = SelectorKey::extend("app");
        let other = SelectorKey::extend("tier");
        assert!(Requirement::is_in(key.clone(), ["web".into()]).matches(&set));
        assert!(!Requirement::is_in(key.clone(), ["db".into()]).matches(&set));
        assert!(
            Requirement {
                key: other.clone(),
                operator: Operator::NotIn,
                values: ["x".to_owned()].into()
            }
            .matches(&set),
            "NotIn matches an absent label"
        );
        assert!(Requirement::exists(key).matches(&set));
        assert!(Requirement::does_not_exist(other).matches(&set));
    }

    #[test]
    fn cidr_selector_with_except_types_new_cidr_selector() {
        let sel = Selector::cidr(
            "10.0.0.0/8".parse().unwrap(),
            &["10.1.0.0/16".parse().unwrap()],
        );
        let inside = labels(&[
            Label::cidr("10.2.0.0/16".parse().unwrap()),
            Label::reserved("world-ipv4"),
        ]);
        let excepted = labels(&[
            Label::cidr("10.1.2.0/24".parse().unwrap()),
            Label::reserved("world-ipv4"),
        ]);
        assert!(sel.matches(&inside));
        assert!(!sel.matches(&excepted));
        let world = Selector::cidr("0.0.0.0/0".parse().unwrap(), &[]);
        assert!(world.matches(&labels(&[Label::reserved("world-ipv4")])));
        assert!(world.matches(&inside));
        assert!(!world.matches(&labels(&[Label::reserved("world-ipv6")])));
    }

    #[test]
    fn zero_length_except_is_the_world_label_ip_string_to_label() {
        // pkg/labels/cidr.go IPStringToLabel: a /0 except is `reserved:world-ipv4`
        // whatever its address, so nothing of the family stays selected.
        let sel = Selector::cidr(
            "0.0.0.0/0".parse().unwrap(),
            &["10.0.0.0/0".parse().unwrap()],
        );
        assert!(!sel.matches(&labels(&[Label::reserved("world-ipv4")])));
        assert!(!sel.matches(&labels(&[
            Label::cidr("192.0.2.0/24".parse().unwrap()),
            Label::reserved("world-ipv4"),
        ])));
        let v6 = Selector::cidr("1::/0".parse().unwrap(), &[]);
        assert!(v6.matches(&labels(&[Label::reserved("world-ipv6")])));
        assert!(!v6.matches(&labels(&[Label::reserved("world-ipv4")])));
        let masked = Selector::cidr("10.1.2.3/8".parse().unwrap(), &[]);
        assert_eq!(masked, Selector::cidr("10.0.0.0/8".parse().unwrap(), &[]));
    }
}
