//! What the tier rules (PR033–PR035) share: every ClusterNetworkPolicy
//! rule with its place among the tiers, and the conservative relations
//! between two rules' subjects, peers and ports that they read from the
//! YAML: "covers" is only claimed when it holds for every inventory,
//! "disjoint" only when no inventory can make the two meet.
//!
//! The order is Cilium 1.20's (`pkg/k8s/cluster_network_policy.go`,
//! `priority = spec.priority + index/100`): Admin rules, then the
//! NetworkPolicy tier, then Baseline rules; within a tier by priority,
//! then rule index.

use porin_compiler::resolve::lower::PolicyInput;
use porin_model::model::{
    ClusterAction, ClusterNetworkPolicy, ClusterNetworkPolicyPeer, ClusterNetworkPolicyProtocol,
    ClusterNetworkPolicySubject, LabelSelector, NamespacedPod, Tier,
};

/// One ClusterNetworkPolicy rule.
pub(crate) struct TierItem<'a> {
    /// The document.
    pub input: &'a PolicyInput<'a>,
    /// The policy.
    pub policy: &'a ClusterNetworkPolicy,
    /// `ingress` or `egress`.
    pub section: &'static str,
    /// Index in the section.
    pub index: usize,
    /// The rule's `name`.
    pub name: Option<&'a str>,
    /// The action.
    pub action: ClusterAction,
    /// `from` / `to`.
    pub peers: &'a [ClusterNetworkPolicyPeer],
    /// `protocols`.
    pub protocols: Option<&'a Vec<ClusterNetworkPolicyProtocol>>,
}

impl TierItem<'_> {
    /// The tier.
    pub fn tier(&self) -> Tier {
        self.policy.spec.tier
    }

    /// `spec.priority`.
    pub fn priority(&self) -> i64 {
        self.policy.spec.priority
    }

    /// `spec.ingress[0]`.
    pub fn route(&self) -> String {
        format!("spec.{}[{}]", self.section, self.index)
    }

    /// `ClusterNetworkPolicy `name` spec.ingress[0] (`rule-name`, tier
    /// Admin, priority 10, Deny)`.
    pub fn describe(&self) -> String {
        let name = self.name.map_or(String::new(), |n| format!("`{n}`, "));
        format!(
            "ClusterNetworkPolicy `{}` {} ({name}tier {}, priority {}, {})",
            self.policy.metadata.name.as_deref().unwrap_or(""),
            self.route(),
            self.tier().name(),
            self.priority(),
            self.action.name()
        )
    }

    /// `file:line` of the rule.
    pub fn place(&self) -> String {
        let (line, _) = self.input.locate(&self.route());
        format!("{}:{line}", self.input.file)
    }

    /// Whether this rule is checked strictly before `other` (a tie of
    /// priority and index across policies is no order: PR034's case).
    pub fn strictly_before(&self, other: &TierItem<'_>) -> bool {
        if self.tier() != other.tier() {
            return self.tier() == Tier::Admin;
        }
        (self.priority(), self.index) < (other.priority(), other.index)
    }
}

/// Every ClusterNetworkPolicy rule of the inputs, in input order.
pub(crate) fn tier_items<'a>(inputs: &'a [PolicyInput<'a>]) -> Vec<TierItem<'a>> {
    let mut items = Vec::new();
    for input in inputs {
        let Some(policy) = input.policy.as_cluster_network_policy() else {
            continue;
        };
        for (index, rule) in policy.spec.ingress.iter().flatten().enumerate() {
            items.push(TierItem {
                input,
                policy,
                section: "ingress",
                index,
                name: rule.name.as_deref(),
                action: rule.action,
                peers: &rule.from,
                protocols: rule.protocols.as_ref(),
            });
        }
        for (index, rule) in policy.spec.egress.iter().flatten().enumerate() {
            items.push(TierItem {
                input,
                policy,
                section: "egress",
                index,
                name: rule.name.as_deref(),
                action: rule.action,
                peers: &rule.to,
                protocols: rule.protocols.as_ref(),
            });
        }
    }
    items
}

/// `a` selects at least what `b` selects (a wildcard, or the same selector).
fn selector_covers(a: &LabelSelector, b: &LabelSelector) -> bool {
    a.is_wildcard() || a == b
}

/// Two selectors no object can both match: one `matchLabels` key with
/// different values.
fn selectors_disjoint(a: &LabelSelector, b: &LabelSelector) -> bool {
    let (Some(a), Some(b)) = (&a.match_labels, &b.match_labels) else {
        return false;
    };
    a.iter()
        .any(|(key, value)| b.get(key).is_some_and(|other| other != value))
}

fn pods_cover(a: &NamespacedPod, b: &NamespacedPod) -> bool {
    selector_covers(&a.namespace_selector, &b.namespace_selector)
        && selector_covers(&a.pod_selector, &b.pod_selector)
}

/// `a`'s subject selects every pod `b`'s does.
pub(crate) fn subject_covers(
    a: &ClusterNetworkPolicySubject,
    b: &ClusterNetworkPolicySubject,
) -> bool {
    match (&a.namespaces, &a.pods, &b.namespaces, &b.pods) {
        (Some(a), _, Some(b), _) => selector_covers(a, b),
        (Some(a), _, None, Some(b)) => selector_covers(a, &b.namespace_selector),
        (None, Some(a), None, Some(b)) => pods_cover(a, b),
        (None, Some(a), Some(b), _) => {
            a.pod_selector.is_wildcard() && selector_covers(&a.namespace_selector, b)
        }
        _ => false,
    }
}

/// The namespace selector of a subject or pod peer, for disjointness.
fn namespace_part(
    namespaces: Option<&LabelSelector>,
    pods: Option<&NamespacedPod>,
) -> Option<LabelSelector> {
    namespaces
        .cloned()
        .or_else(|| pods.map(|p| p.namespace_selector.clone()))
}

/// No pod can be selected by both subjects.
pub(crate) fn subjects_disjoint(
    a: &ClusterNetworkPolicySubject,
    b: &ClusterNetworkPolicySubject,
) -> bool {
    let na = namespace_part(a.namespaces.as_ref(), a.pods.as_ref());
    let nb = namespace_part(b.namespaces.as_ref(), b.pods.as_ref());
    if let (Some(na), Some(nb)) = (&na, &nb)
        && selectors_disjoint(na, nb)
    {
        return true;
    }
    matches!((&a.pods, &b.pods), (Some(pa), Some(pb)) if selectors_disjoint(&pa.pod_selector, &pb.pod_selector))
}

fn peer_covers(a: &ClusterNetworkPolicyPeer, b: &ClusterNetworkPolicyPeer) -> bool {
    if a == b {
        return true;
    }
    match (a, b) {
        (
            ClusterNetworkPolicyPeer {
                namespaces: Some(a),
                ..
            },
            ClusterNetworkPolicyPeer {
                namespaces: Some(b),
                ..
            },
        ) => selector_covers(a, b),
        (
            ClusterNetworkPolicyPeer {
                namespaces: Some(a),
                ..
            },
            ClusterNetworkPolicyPeer { pods: Some(b), .. },
        ) => selector_covers(a, &b.namespace_selector),
        (
            ClusterNetworkPolicyPeer { pods: Some(a), .. },
            ClusterNetworkPolicyPeer { pods: Some(b), .. },
        ) => pods_cover(a, b),
        _ => false,
    }
}

/// Every peer of `b` is covered by one peer of `a`.
pub(crate) fn peers_cover(a: &[ClusterNetworkPolicyPeer], b: &[ClusterNetworkPolicyPeer]) -> bool {
    b.iter().all(|pb| a.iter().any(|pa| peer_covers(pa, pb)))
}

fn peers_disjoint_one(a: &ClusterNetworkPolicyPeer, b: &ClusterNetworkPolicyPeer) -> bool {
    let pod_like = |p: &ClusterNetworkPolicyPeer| p.namespaces.is_some() || p.pods.is_some();
    if pod_like(a) && pod_like(b) {
        let na = namespace_part(a.namespaces.as_ref(), a.pods.as_ref());
        let nb = namespace_part(b.namespaces.as_ref(), b.pods.as_ref());
        if let (Some(na), Some(nb)) = (&na, &nb)
            && selectors_disjoint(na, nb)
        {
            return true;
        }
        return matches!((&a.pods, &b.pods), (Some(pa), Some(pb)) if selectors_disjoint(&pa.pod_selector, &pb.pod_selector));
    }
    // Pods and domain names never meet; other kinds (networks, nodes) may
    // hold pod addresses, so they may overlap anything.
    (pod_like(a) && b.domain_names.is_some()) || (pod_like(b) && a.domain_names.is_some())
}

/// No peer of `a` can be a peer of `b`.
pub(crate) fn peers_disjoint(
    a: &[ClusterNetworkPolicyPeer],
    b: &[ClusterNetworkPolicyPeer],
) -> bool {
    a.iter()
        .all(|pa| b.iter().all(|pb| peers_disjoint_one(pa, pb)))
}

/// (protocol, first, last) of a numbered port entry; `None` for a named port.
fn port_span(protocol: &ClusterNetworkPolicyProtocol) -> Option<(&'static str, i64, i64)> {
    for (name, port) in [
        ("tcp", protocol.tcp.as_ref()),
        ("udp", protocol.udp.as_ref()),
        ("sctp", protocol.sctp.as_ref()),
    ] {
        let Some(port) = port.and_then(|p| p.destination_port.as_ref()) else {
            continue;
        };
        return match (&port.number, &port.range) {
            (Some(n), _) => Some((name, *n, *n)),
            (None, Some(r)) => Some((name, r.start, r.end)),
            (None, None) => None,
        };
    }
    None
}

/// `a`'s ports include every port of `b`'s.
pub(crate) fn ports_cover(
    a: Option<&Vec<ClusterNetworkPolicyProtocol>>,
    b: Option<&Vec<ClusterNetworkPolicyProtocol>>,
) -> bool {
    let Some(a) = a else { return true };
    let Some(b) = b else { return false };
    b.iter().all(|pb| {
        a.iter().any(|pa| {
            pa == pb
                || matches!((port_span(pa), port_span(pb)), (Some((x, s1, e1)), Some((y, s2, e2))) if x == y && s1 <= s2 && e2 <= e1)
        })
    })
}

/// No port of `a` is a port of `b` (named ports may be any number).
pub(crate) fn ports_disjoint(
    a: Option<&Vec<ClusterNetworkPolicyProtocol>>,
    b: Option<&Vec<ClusterNetworkPolicyProtocol>>,
) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return false;
    };
    a.iter().all(|pa| {
        b.iter().all(|pb| match (port_span(pa), port_span(pb)) {
            (Some((x, s1, e1)), Some((y, s2, e2))) => x != y || e1 < s2 || e2 < s1,
            _ => false,
        })
    })
}
