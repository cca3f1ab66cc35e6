//! Labels: the vocabulary identities are made of and selectors match.
//!
//! A label is `source:key=value` (Cilium `pkg/labels/labels.go`). An identity
//! is a set of labels with at most one label per key (Cilium's `Labels` is a
//! map keyed by `key`). Selectors name keys in the *extended* form
//! `source.key` (`GetExtendedKeyFrom`), where the source `any` matches a
//! label of any source and the source `cidr` matches by prefix containment.
//!
//! This module also owns the identity-label filter of Cilium's
//! `pkg/labelsfilter/filter.go` (`defaultLabelPrefixCfg`): which workload
//! labels become identity labels.

use std::fmt;
use std::net::IpAddr;

use compact_str::CompactString;
use ipnetwork::IpNetwork;
use serde::{Serialize, Serializer};

/// Label source of Kubernetes labels (`LabelSourceK8s`).
pub const SOURCE_K8S: &str = "k8s";
/// Label source of reserved labels (`LabelSourceReserved`).
pub const SOURCE_RESERVED: &str = "reserved";
/// Label source of CIDR labels (`LabelSourceCIDR`).
pub const SOURCE_CIDR: &str = "cidr";
/// Selector source matching a label of any source (`LabelSourceAny`).
pub const SOURCE_ANY: &str = "any";
/// Source of labels given without one (`LabelSourceUnspec`).
pub const SOURCE_UNSPEC: &str = "unspec";
/// Source of FQDN selector labels (`LabelSourceFQDN`).
pub const SOURCE_FQDN: &str = "fqdn";
/// Source of CIDR group labels (`LabelSourceCIDRGroup`).
pub const SOURCE_CIDRGROUP: &str = "cidrgroup";

/// `io.kubernetes.pod.namespace`: the pod's namespace (k8s source).
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// `io.cilium.k8s.namespace.labels`: prefix of namespace labels on pods.
pub const NAMESPACE_LABELS_PREFIX: &str = "io.cilium.k8s.namespace.labels";
/// `io.cilium.k8s.policy.cluster`: the cluster name label.
pub const CLUSTER_LABEL: &str = "io.cilium.k8s.policy.cluster";
/// `io.cilium.k8s.policy.serviceaccount`: the pod's service account.
pub const SERVICE_ACCOUNT_LABEL: &str = "io.cilium.k8s.policy.serviceaccount";
/// `kubernetes.io/metadata.name`: the label Kubernetes puts on every namespace.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// One label: `source:key=value`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Label {
    /// Where the label comes from (`k8s`, `reserved`, `cidr`, ...).
    pub source: CompactString,
    /// The label key.
    pub key: CompactString,
    /// The value; empty for reserved and CIDR labels.
    pub value: CompactString,
}

impl Label {
    /// A label from its parts.
    pub fn new(source: &str, key: &str, value: &str) -> Self {
        Self {
            source: CompactString::from(source),
            key: CompactString::from(key),
            value: CompactString::from(value),
        }
    }

    /// `reserved:<key>`.
    pub fn reserved(key: &str) -> Self {
        Self::new(SOURCE_RESERVED, key, "")
    }

    /// `k8s:<key>=<value>`.
    pub fn k8s(key: &str, value: &str) -> Self {
        Self::new(SOURCE_K8S, key, value)
    }

    /// The CIDR label of a prefix, `cidr:<prefix>` with IPv6 colons written
    /// as `-` (`labels.IPStringToLabel`).
    pub fn cidr(prefix: IpNetwork) -> Self {
        Self::new(SOURCE_CIDR, &cidr_label_key(prefix), "")
    }

    /// Parses `source:key=value` (`labels.ParseLabel`): a leading `$` means
    /// `reserved`; no source means `default_source`.
    pub fn parse(text: &str, default_source: &str) -> Self {
        let (source, rest) = parse_source(text, ':');
        let source = if source.is_empty() {
            default_source
        } else {
            source
        };
        match rest.split_once('=') {
            Some((key, value)) => Self::new(source, key, value),
            None => Self::new(source, rest, ""),
        }
    }

    /// A label from a key and a value the way Cilium's `NewLabel(key,
    /// value, source)` builds it (`pkg/labels/labels.go`, also what
    /// `Map2Labels` does for every entry of a label map):
    /// - the key's own source (`src:` before the first `:`, a leading `$`,
    ///   or a leading `reserved.` without any `:`) is split off;
    /// - a non-empty `source` wins and the key's source is dropped ("the
    ///   value before ':' will be deleted and unused"); an empty `source`
    ///   takes the key's, or `unspec`;
    /// - a reserved key with nothing after its source takes the value as
    ///   its key (`$` + `host` is `reserved:host`).
    ///
    /// Only the key is parsed: a `:` or `=` in the value stays in the value.
    pub fn from_key_value(key: &str, value: &str, source: &str) -> Self {
        let (source, key, value) = Self::parts_of(key, value, source);
        Self::new(source, key, value)
    }

    /// The source, key and value [`Label::from_key_value`] makes a label of,
    /// borrowed (checks that need only the key allocate nothing).
    pub fn parts_of<'a>(
        key: &'a str,
        value: &'a str,
        source: &'a str,
    ) -> (&'a str, &'a str, &'a str) {
        let (key_source, mut key) = parse_source(key, ':');
        let mut value = value;
        let source = match (source.is_empty(), key_source.is_empty()) {
            (false, _) => source,
            (true, false) => key_source,
            (true, true) => SOURCE_UNSPEC,
        };
        if key_source == SOURCE_RESERVED && key.is_empty() {
            key = value;
            value = "";
        }
        (source, key, value)
    }

    /// The prefix a CIDR label stands for, if this is one.
    pub fn cidr_prefix(&self) -> Option<IpNetwork> {
        if self.source != SOURCE_CIDR {
            return None;
        }
        parse_cidr_label_key(&self.key)
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.source, self.key)
        } else {
            write!(f, "{}:{}={}", self.source, self.key, self.value)
        }
    }
}

impl Serialize for Label {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Splits a source off a label or selector key (`labels.parseSource`):
/// `$x` is `reserved`, `src<delim>rest` is `src`, and a key starting with
/// `reserved.` (without the delimiter) is `reserved` too.
pub fn parse_source(text: &str, delim: char) -> (&str, &str) {
    if let Some(rest) = text.strip_prefix('$') {
        return (SOURCE_RESERVED, rest);
    }
    match text.split_once(delim) {
        Some((source, rest)) => (source, rest),
        None => {
            if delim != '.'
                && let Some(rest) = text.strip_prefix("reserved.")
            {
                return (SOURCE_RESERVED, rest);
            }
            ("", text)
        }
    }
}

/// The key of a CIDR label: the prefix in canonical notation, IPv6 colons
/// replaced by `-` (`::1/128` is `0--1/128`; Cilium `IPStringToLabel`).
pub fn cidr_label_key(prefix: IpNetwork) -> String {
    let canonical = canonical_prefix(prefix);
    match canonical {
        IpNetwork::V4(_) => canonical.to_string(),
        IpNetwork::V6(v6) => {
            let mut text = format!("{}/{}", v6.network(), v6.prefix());
            text = text.replace(':', "-");
            // Cilium writes a leading or trailing `::` with a 0 so the key
            // never starts or ends with `-` (`::1` is `0--1`).
            if text.starts_with('-') {
                text.insert(0, '0');
            }
            if let Some(slash) = text.find('/')
                && text[..slash].ends_with('-')
            {
                text.insert(slash, '0');
            }
            text
        }
    }
}

/// Parses a CIDR label key back into a prefix (`-` read as `:`).
pub fn parse_cidr_label_key(key: &str) -> Option<IpNetwork> {
    // An IPv4 key is parsed in place (no copy: one per CIDR identity and
    // CIDR selector of a compile).
    let network: IpNetwork = if key.contains('-') {
        key.replace('-', ":").parse().ok()?
    } else {
        key.parse().ok()?
    };
    Some(canonical_prefix(network))
}

/// The prefix with its host bits cleared (`10.1.2.3/8` is `10.0.0.0/8`).
pub fn canonical_prefix(prefix: IpNetwork) -> IpNetwork {
    // The network address with the same length is always a valid prefix.
    IpNetwork::new(prefix.network(), prefix.prefix()).unwrap_or(prefix)
}

/// The host prefix (`/32` or `/128`) of an address.
pub fn host_prefix(ip: IpAddr) -> IpNetwork {
    let len = if ip.is_ipv4() { 32 } else { 128 };
    IpNetwork::new(ip, len).unwrap_or(IpNetwork::from(ip))
}

/// Whether prefix `outer` contains prefix `inner` (`outer.bits <= inner.bits`
/// and `outer` contains `inner`'s address), the CIDR-aware `Label.HasKey`.
pub fn prefix_contains(outer: IpNetwork, inner: IpNetwork) -> bool {
    outer.is_ipv4() == inner.is_ipv4()
        && outer.prefix() <= inner.prefix()
        && outer.contains(inner.network())
}

/// Serialises any `Display` value as a string (for `IpNetwork`, which has
/// no serde support without an extra feature).
pub fn serialize_display<T: fmt::Display, S: Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// A set of labels with at most one label per key, in key order.
///
/// Serialises as the sorted list of `source:key=value` strings.
///
/// The labels are kept in a `Vec` sorted by key rather than a
/// `BTreeMap<String, Label>`: the same order, lookups and comparisons, but
/// a two-label CIDR identity (`cidr:<prefix>`, `reserved:world-ipv4`) no
/// longer holds a B-tree node of eleven slots and a second copy of every
/// key (~1 KiB each; 65,535 CIDR rules held 68 MiB of them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSet {
    /// Sorted by `key`, at most one label per key.
    labels: Vec<Label>,
}

impl Ord for LabelSet {
    /// The order of the map it replaces: lexicographic over the
    /// `(key, label)` pairs in key order (identity numbers are allocated in
    /// this order, so it must not change).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.labels
            .iter()
            .map(|l| (&l.key, l))
            .cmp(other.labels.iter().map(|l| (&l.key, l)))
    }
}

impl PartialOrd for LabelSet {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl LabelSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the label with this key is, or would be inserted.
    fn position(&self, key: &str) -> Result<usize, usize> {
        self.labels.binary_search_by(|l| l.key.as_str().cmp(key))
    }

    /// Adds a label, replacing any label with the same key.
    pub fn insert(&mut self, label: Label) {
        match self.position(&label.key) {
            Ok(at) => self.labels[at] = label,
            Err(at) => self.labels.insert(at, label),
        }
    }

    /// The label with this key, of any source.
    pub fn get(&self, key: &str) -> Option<&Label> {
        self.position(key).ok().and_then(|at| self.labels.get(at))
    }

    /// All labels, in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Label> {
        self.labels.iter()
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Keeps only the labels `keep` accepts (the order stays sorted).
    pub fn retain(&mut self, keep: impl FnMut(&Label) -> bool) {
        self.labels.retain(keep);
        self.labels.shrink_to_fit();
    }

    /// Whether some label has this source.
    pub fn has_source(&self, source: &str) -> bool {
        self.labels.iter().any(|l| l.source == source)
    }

    /// The label a selector key `source.key` finds, with Cilium's
    /// `LabelArray.Has/Get` rules: source `any` matches any source; source
    /// `cidr` matches a CIDR label whose prefix the selector prefix contains.
    pub fn find(&self, source: &str, key: &str) -> Option<&Label> {
        if source == SOURCE_CIDR {
            let wanted = parse_cidr_label_key(key)?;
            return self.labels.iter().find(|label| {
                label
                    .cidr_prefix()
                    .is_some_and(|have| prefix_contains(wanted, have))
            });
        }
        let label = self.get(key)?;
        if source == SOURCE_ANY || label.source == source {
            Some(label)
        } else {
            None
        }
    }
}

impl FromIterator<Label> for LabelSet {
    fn from_iter<I: IntoIterator<Item = Label>>(iter: I) -> Self {
        let mut labels: Vec<Label> = iter.into_iter().collect();
        // Labels that come sorted by key, one per key (a label map's, a
        // set's), are the set as they are: no insertion, no regrowth.
        if !labels.windows(2).all(|pair| pair[0].key < pair[1].key) {
            let mut set = Self::new();
            for label in labels {
                set.insert(label);
            }
            labels = set.labels;
        }
        labels.shrink_to_fit();
        Self { labels }
    }
}

impl Serialize for LabelSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.labels.iter())
    }
}

impl fmt::Display for LabelSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for label in &self.labels {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{label}")?;
        }
        Ok(())
    }
}

/// One pattern of the identity-label filter.
#[derive(Debug, Clone, Copy)]
enum FilterPattern {
    /// Matches keys starting with the text; matched length = text length.
    Prefix(&'static str),
    /// Matches keys containing the text; the pattern was `.*text`, which
    /// Go's leftmost-greedy regexp match extends to the last occurrence.
    AnyThen(&'static str),
    /// Matches keys starting with the text; the pattern was `text.*`, so the
    /// match covers the whole key.
    PrefixThenAny(&'static str),
}

impl FilterPattern {
    fn matched_len(self, key: &str) -> Option<usize> {
        match self {
            Self::Prefix(text) => key.starts_with(text).then_some(text.len()),
            // The last occurrence, by a plain scan of the bytes: the keys
            // are short, and `str::rfind`'s two-way searcher was a
            // noticeable part of the code an identity add runs.
            Self::AnyThen(text) => key
                .as_bytes()
                .windows(text.len())
                .rposition(|window| window == text.as_bytes())
                .map(|at| at + text.len()),
            Self::PrefixThenAny(text) => key.starts_with(text).then_some(key.len()),
        }
    }
}

/// Cilium's default label prefixes (`defaultLabelPrefixCfg` in
/// `pkg/labelsfilter/filter.go`): `(ignore, pattern)`. Reserved labels are
/// always kept and handled separately.
const DEFAULT_LABEL_FILTER: &[(bool, FilterPattern)] = &[
    (false, FilterPattern::Prefix(POD_NAMESPACE_LABEL)),
    (false, FilterPattern::Prefix(NAMESPACE_LABELS_PREFIX)),
    (false, FilterPattern::Prefix("app.kubernetes.io")),
    (false, FilterPattern::Prefix(CLUSTER_LABEL)),
    (true, FilterPattern::Prefix("io.kubernetes")),
    (true, FilterPattern::Prefix("kubernetes.io")),
    (
        true,
        FilterPattern::Prefix("statefulset.kubernetes.io/pod-name"),
    ),
    (true, FilterPattern::Prefix("apps.kubernetes.io/pod-index")),
    (
        true,
        FilterPattern::Prefix("batch.kubernetes.io/job-completion-index"),
    ),
    (true, FilterPattern::AnyThen("beta.kubernetes.io")),
    (true, FilterPattern::Prefix("k8s.io")),
    (true, FilterPattern::Prefix("pod-template-generation")),
    (true, FilterPattern::Prefix("pod-template-hash")),
    (true, FilterPattern::Prefix("controller-revision-hash")),
    (true, FilterPattern::PrefixThenAny("annotation")),
    (true, FilterPattern::Prefix("etcd_node")),
];

/// Whether a workload label becomes an identity label under Cilium's default
/// label filter: kept unless an ignore pattern matches and no include
/// pattern matches a longer part of the key (`filterLabels`; the default
/// configuration is not a whitelist).
pub fn is_identity_label(label: &Label) -> bool {
    if label.source == SOURCE_RESERVED {
        return true;
    }
    let mut included = 0usize;
    let mut ignored = 0usize;
    for (ignore, pattern) in DEFAULT_LABEL_FILTER {
        if let Some(len) = pattern.matched_len(&label.key) {
            if *ignore {
                if ignored == 0 || len < ignored {
                    ignored = len;
                }
            } else if len > included {
                included = len;
            }
        }
    }
    ignored == 0 || included > ignored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_source_follows_cilium_labels_go() {
        assert_eq!(parse_source("k8s:app", ':'), ("k8s", "app"));
        assert_eq!(parse_source("app", ':'), ("", "app"));
        assert_eq!(parse_source("$host", ':'), ("reserved", "host"));
        assert_eq!(parse_source("reserved.host", ':'), ("reserved", "host"));
        assert_eq!(parse_source("reserved:host", ':'), ("reserved", "host"));
    }

    // pkg/labels/labels.go NewLabel (via Map2Labels(podLabels, "k8s")): a given
    // source replaces whatever source the key names.
    #[test]
    fn from_key_value_follows_new_label() {
        let k8s =
            |key: &str, value: &str| Label::from_key_value(key, value, SOURCE_K8S).to_string();
        assert_eq!(k8s("cidr:203.0.113.0/24", ""), "k8s:203.0.113.0/24");
        assert_eq!(k8s("unspec:role", "bad"), "k8s:role=bad");
        assert_eq!(k8s("a:b:c", "v"), "k8s:b:c=v");
        assert_eq!(k8s("$host", ""), "k8s:host");
        assert_eq!(k8s("reserved.host", ""), "k8s:host");
        assert_eq!(k8s("reserved:", "host"), "k8s:host");
        assert_eq!(k8s("$", "host"), "k8s:host");
        assert_eq!(k8s("app", "a:b=c"), "k8s:app=a:b=c");
        let given = |key: &str, value: &str| Label::from_key_value(key, value, "").to_string();
        assert_eq!(given("container:app", "x"), "container:app=x");
        assert_eq!(given("app", "x"), "unspec:app=x");
        assert_eq!(given("$health", ""), "reserved:health");
        assert_eq!(given("reserved:", "init"), "reserved:init");
    }

    #[test]
    fn cidr_label_keys_follow_ip_string_to_label() {
        let v6: IpNetwork = "::1/128".parse().unwrap();
        assert_eq!(cidr_label_key(v6), "0--1/128");
        assert_eq!(parse_cidr_label_key("0--1/128"), Some(v6));
        let v4: IpNetwork = "10.1.2.3/8".parse().unwrap();
        assert_eq!(cidr_label_key(v4), "10.0.0.0/8");
        let trailing: IpNetwork = "fd00::/64".parse().unwrap();
        assert_eq!(cidr_label_key(trailing), "fd00--0/64");
        assert_eq!(parse_cidr_label_key("fd00--0/64"), Some(trailing));
    }

    #[test]
    fn selector_cidr_key_matches_contained_prefixes_selectorcache_test() {
        // selectorcache_test.go TestMultipleIdentitySelectors.
        let l1: LabelSet = [Label::cidr("10.0.0.1/32".parse().unwrap())]
            .into_iter()
            .collect();
        let l2: LabelSet = [Label::cidr("10.0.0.0/8".parse().unwrap())]
            .into_iter()
            .collect();
        for (selector, sel1, sel2) in [
            ("10.0.0.1/32", true, false),
            ("10.0.0.0/24", true, false),
            ("10.0.0.0/8", true, true),
            ("10.0.0.0/7", true, true),
        ] {
            assert_eq!(l1.find("cidr", selector).is_some(), sel1, "{selector}");
            assert_eq!(l2.find("cidr", selector).is_some(), sel2, "{selector}");
        }
    }

    #[test]
    fn any_source_matches_every_source_labels_go_has() {
        let set: LabelSet = [Label::k8s("app", "web")].into_iter().collect();
        assert!(set.find("any", "app").is_some());
        assert!(set.find("k8s", "app").is_some());
        assert!(set.find("container", "app").is_none());
    }

    #[test]
    fn label_filter_follows_default_label_prefix_cfg() {
        let keep = |key: &str| is_identity_label(&Label::k8s(key, "x"));
        assert!(keep("app"));
        assert!(keep("io.kubernetes.pod.namespace"));
        assert!(keep("io.cilium.k8s.namespace.labels.team"));
        assert!(keep("app.kubernetes.io/name"));
        assert!(keep("io.cilium.k8s.policy.serviceaccount"));
        assert!(keep("io.cilium.k8s.policy.cluster"));
        assert!(!keep("pod-template-hash"));
        assert!(!keep("controller-revision-hash"));
        assert!(!keep("statefulset.kubernetes.io/pod-name"));
        assert!(!keep("kubernetes.io/hostname"));
        assert!(!keep("failure-domain.beta.kubernetes.io/zone"));
        assert!(!keep("io.kubernetes.container.name"));
        assert!(!keep("annotation.foo"));
        assert!(is_identity_label(&Label::reserved("host")));
    }
    proptest::proptest! {
        /// The byte scan finds the last occurrence, as `str::rfind` does.
        #[test]
        fn any_then_matches_at_the_last_occurrence(
            key in "(beta\\.kubernetes\\.io|beta|[a-z./-]){0,12}",
        ) {
            let text = "beta.kubernetes.io";
            proptest::prop_assert_eq!(
                FilterPattern::AnyThen(text).matched_len(&key),
                key.rfind(text).map(|at| at + text.len())
            );
        }
    }

    fn label() -> impl proptest::strategy::Strategy<Value = Label> {
        use proptest::prelude::*;
        (
            prop::sample::select(vec!["k8s", "reserved", "cidr", "any"]),
            prop::sample::select(vec!["app", "ap", "b", "10.0.0.0/8", "world"]),
            prop::sample::select(vec!["", "x", "web", "db"]),
        )
            .prop_map(|(source, key, value)| Label::new(source, key, value))
    }

    proptest::proptest! {
        /// The sorted `Vec` orders, compares and iterates label sets as
        /// the `BTreeMap<key, Label>` it replaced (identity numbers are
        /// allocated in label-set order), with the last label of a key
        /// winning.
        #[test]
        fn label_set_orders_as_the_map_it_replaced(
            a in proptest::collection::vec(label(), 0..6),
            b in proptest::collection::vec(label(), 0..6),
        ) {
            let map = |labels: &[Label]| -> std::collections::BTreeMap<String, Label> {
                labels.iter().map(|l| (l.key.to_string(), l.clone())).collect()
            };
            let (set_a, set_b): (LabelSet, LabelSet) =
                (a.iter().cloned().collect(), b.iter().cloned().collect());
            let (map_a, map_b) = (map(&a), map(&b));
            proptest::prop_assert_eq!(set_a.cmp(&set_b), map_a.cmp(&map_b));
            proptest::prop_assert_eq!(set_a == set_b, map_a == map_b);
            proptest::prop_assert!(set_a.iter().eq(map_a.values()));
            for key in ["app", "b", "zz"] {
                proptest::prop_assert_eq!(set_a.get(key), map_a.get(key));
            }
        }
    }
}
