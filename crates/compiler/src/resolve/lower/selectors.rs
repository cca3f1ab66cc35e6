//! Label selector conversion and the selector rewriting of Cilium's
//! `getEndpointSelector` / `parseNetworkPolicyPeer` helpers, and entities.

use porin_model::model::{Entity, LabelSelector, SelectorOperator};

use crate::labels::{
    CLUSTER_LABEL, NAMESPACE_LABELS_PREFIX, POD_NAMESPACE_LABEL, SOURCE_ANY, SOURCE_K8S,
};
use crate::selector::{Operator, Requirement, Selector, SelectorKey};

/// A namespace selector as Cilium's `processNamespaceSelector` makes it
/// (`pkg/k8s/network_policy.go`): the namespace labels, and every pod of
/// every namespace when the selector is empty.
pub(super) fn namespace_labels_selector(namespaces: &LabelSelector) -> Selector {
    let mut selector = Selector::wildcard();
    k8s_selector(
        namespaces,
        &format!("{NAMESPACE_LABELS_PREFIX}."),
        &mut selector,
    );
    if selector.is_wildcard() {
        selector.push(Requirement::exists(SelectorKey::new(
            SOURCE_K8S,
            POD_NAMESPACE_LABEL,
        )));
    }
    selector
}

/// Converts a user label selector to a [`Selector`] with extended keys.
pub fn convert_selector(selector: &LabelSelector) -> Selector {
    let mut out = Selector::wildcard();
    for (key, value) in selector.match_labels.iter().flatten() {
        out.push(Requirement::is_in(
            SelectorKey::extend(key),
            [value.clone()],
        ));
    }
    for expression in selector.match_expressions.iter().flatten() {
        out.push(Requirement::with_values(
            SelectorKey::extend(&expression.key),
            convert_operator(expression.operator),
            expression.values.iter().flatten().cloned(),
        ));
    }
    out
}

pub(super) fn convert_operator(operator: SelectorOperator) -> Operator {
    match operator {
        SelectorOperator::In => Operator::In,
        SelectorOperator::NotIn => Operator::NotIn,
        SelectorOperator::Exists => Operator::Exists,
        SelectorOperator::DoesNotExist => Operator::DoesNotExist,
    }
}

/// A Kubernetes label selector with every key in the `k8s` source
/// (`NewESFromK8sLabelSelector("k8s.", ...)`), keys prefixed by `prefix`.
pub(super) fn k8s_selector(selector: &LabelSelector, prefix: &str, into: &mut Selector) {
    sourced_selector(selector, SOURCE_K8S, prefix, into);
}

/// A Kubernetes label selector with every key in `source`
/// (`NewESFromK8sLabelSelector("<source>.", ...)`), keys prefixed by `prefix`.
pub(super) fn sourced_selector(
    selector: &LabelSelector,
    source: &str,
    prefix: &str,
    into: &mut Selector,
) {
    for (key, value) in selector.match_labels.iter().flatten() {
        into.push(Requirement::is_in(
            SelectorKey::new(source, &format!("{prefix}{key}")),
            [value.clone()],
        ));
    }
    for expression in selector.match_expressions.iter().flatten() {
        into.push(Requirement::with_values(
            SelectorKey::new(source, &format!("{prefix}{}", expression.key)),
            convert_operator(expression.operator),
            expression.values.iter().flatten().cloned(),
        ));
    }
}

/// A KNP pod selector without its `io.kubernetes.pod.namespace` matchLabels
/// entry: `parsePodSelector` (`pkg/k8s/network_policy.go`) overwrites that
/// entry with the policy namespace (matchExpressions are kept and ANDed).
pub(super) fn without_namespace_match(selector: &LabelSelector) -> LabelSelector {
    let mut out = selector.clone();
    if let Some(labels) = out.match_labels.as_mut() {
        labels.remove(POD_NAMESPACE_LABEL);
    }
    out
}

pub(super) fn namespace_pin(namespace: &str) -> Requirement {
    Requirement::is_in(
        SelectorKey::new(SOURCE_K8S, POD_NAMESPACE_LABEL),
        [namespace.to_owned()],
    )
}

pub(super) fn is_pod_namespace_key(key: &SelectorKey) -> bool {
    key.is(&[SOURCE_K8S], POD_NAMESPACE_LABEL)
}

/// `getEndpointSelector` tests `HasKeyPrefix` with
/// `k8s.io.cilium.k8s.namespace.labels` and `any.io.cilium.k8s.namespace.labels`:
/// only those two sources count (a `container:` key does not stop the
/// namespace pinning), and the prefix has no trailing dot.
pub(super) fn is_namespace_labels_key(key: &SelectorKey) -> bool {
    (key.source == SOURCE_K8S || key.source == SOURCE_ANY)
        && key.key.starts_with(NAMESPACE_LABELS_PREFIX)
}

pub(super) fn is_cluster_key(key: &SelectorKey) -> bool {
    key.is(&[SOURCE_K8S], CLUSTER_LABEL)
}

/// `pkg/policy/api/entity.go` `EntitySelectorMapping` (dual-stack), plus the
/// cluster entity's pod part `k8s:io.cilium.k8s.policy.cluster=<cluster>`.
pub(super) fn entity_selectors(entity: Entity, cluster: &str) -> Vec<Selector> {
    let reserved = |names: &[&str]| {
        names
            .iter()
            .map(|n| Selector::reserved(n))
            .collect::<Vec<_>>()
    };
    match entity {
        Entity::All => vec![Selector::wildcard()],
        Entity::World => reserved(&["world", "world-ipv4", "world-ipv6"]),
        Entity::Cluster => {
            let mut list = reserved(&[
                "host",
                "remote-node",
                "init",
                "ingress",
                "health",
                "unmanaged",
                "kube-apiserver",
            ]);
            list.push(Selector::from_requirements([Requirement::is_in(
                SelectorKey::new(SOURCE_K8S, CLUSTER_LABEL),
                [cluster.to_owned()],
            )]));
            list
        }
        Entity::Host => reserved(&["host"]),
        Entity::Init => reserved(&["init"]),
        Entity::Ingress => reserved(&["ingress"]),
        Entity::Unmanaged => reserved(&["unmanaged"]),
        Entity::RemoteNode => reserved(&["remote-node"]),
        Entity::Health => reserved(&["health"]),
        Entity::None => reserved(&["none"]),
        Entity::KubeApiserver => reserved(&["kube-apiserver"]),
    }
}
