//! Label-selector validation (docs/semantics.md §2.3): Cilium first rewrites keys
//! into its `source.key` form (`labels.GetExtendedKeyFrom`), then runs
//! Kubernetes `ValidateLabelSelector`; errors read `invalid label selector: ...`.

use super::Findings;
use super::text::{label_value_problem, qualified_name_problem};
use crate::codes;
use crate::model::{LabelSelector, SelectorOperator};
use crate::route::Route;

/// Cilium `labels.GetExtendedKeyFrom`: `k8s:app` → `k8s.app`, `$host` →
/// `reserved.host`, `app` → `any.app`.
pub fn extended_key(key: &str) -> String {
    if let Some(rest) = key.strip_prefix('$') {
        return format!("reserved.{rest}");
    }
    match key.split_once(':') {
        Some((source, rest)) => format!("{source}.{rest}"),
        None => format!("any.{key}"),
    }
}

/// Whether keys are rewritten first (Cilium EndpointSelector) or taken as
/// they are (Kubernetes selectors, `cidrGroupSelector`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorKind {
    /// Cilium `EndpointSelector`: keys may carry a `source:` prefix.
    Cilium,
    /// A plain Kubernetes `LabelSelector`.
    Kubernetes,
}

/// Validates one selector located at `route()`: the route is made only
/// for a finding (most selectors have none, and one per selector and its
/// parents' segments was a tenth of validating a one-rule CIDR policy).
pub(crate) fn validate_selector(
    findings: &mut Findings,
    route: &dyn Fn() -> Route,
    selector: &LabelSelector,
    kind: SelectorKind,
) {
    let checked_key = |key: &str| match kind {
        SelectorKind::Cilium => extended_key(key),
        SelectorKind::Kubernetes => key.to_owned(),
    };
    // Routes are made only for a finding: most selectors have none, and
    // making one per label was a fifth of validating a CIDR policy.
    for (key, value) in selector.match_labels.iter().flatten() {
        let at = || route().key("matchLabels").key(key);
        if let Some(problem) = qualified_name_problem(&checked_key(key)) {
            findings
                .report(
                    codes::LABEL_SELECTOR,
                    at(),
                    format!("invalid label selector: key `{key}`: {problem}"),
                )
                .at_key();
        }
        if let Some(problem) = label_value_problem(value) {
            findings
                .report(codes::LABEL_SELECTOR, at(), format!("invalid label selector: value `{value}` of `{key}`: {problem}"))
                .note("the CRD pattern for matchLabels values is ^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$, at most 63 characters");
        }
    }
    for (index, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let at = || route().key("matchExpressions").index(index);
        if let Some(problem) = qualified_name_problem(&checked_key(&requirement.key)) {
            findings.report(
                codes::LABEL_SELECTOR,
                at().key("key"),
                format!(
                    "invalid label selector: key `{}`: {problem}",
                    requirement.key
                ),
            );
        }
        let values = requirement.values.as_deref().unwrap_or_default();
        match requirement.operator {
            SelectorOperator::In | SelectorOperator::NotIn if values.is_empty() => {
                findings
                    .report(
                        codes::LABEL_SELECTOR,
                        at().key("values"),
                        "invalid label selector: values must be specified when `operator` is 'In' or 'NotIn'",
                    )
                    .help("list at least one value, or use `Exists`/`DoesNotExist`");
            }
            SelectorOperator::Exists | SelectorOperator::DoesNotExist if !values.is_empty() => {
                findings
                    .report(
                        codes::LABEL_SELECTOR,
                        at().key("values"),
                        "invalid label selector: values may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                    .at_key()
                    .help("remove `values`, or use `In`/`NotIn`");
            }
            _ => {}
        }
        for (value_index, value) in values.iter().enumerate() {
            if let Some(problem) = label_value_problem(value) {
                findings.report(
                    codes::LABEL_SELECTOR,
                    at().key("values").index(value_index),
                    format!("invalid label selector: value `{value}`: {problem}"),
                );
            }
        }
    }
}

/// Whether a Cilium selector names the `reserved:init` label.
pub fn selects_reserved_init(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .any(|(key, _)| is_reserved_init(key))
        || selector.match_expressions.iter().flatten().any(|r| {
            is_reserved_init(&r.key)
                && matches!(r.operator, SelectorOperator::In | SelectorOperator::Exists)
        })
}

/// Whether [`extended_key`] of `key` is `reserved.init`, without making
/// it (one allocation per label of every selector): only `$init` and
/// `reserved:init` extend to it, since `reserved.init` has one dot and
/// `any.` never starts it.
fn is_reserved_init(key: &str) -> bool {
    matches!(key, "$init" | "reserved:init")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_keys_follow_cilium_labels_go() {
        // pkg/labels/labels.go GetExtendedKeyFrom
        assert_eq!(extended_key("k8s:app"), "k8s.app");
        assert_eq!(extended_key("app"), "any.app");
        assert_eq!(extended_key("reserved:host"), "reserved.host");
        assert_eq!(extended_key("$host"), "reserved.host");
    }

    #[test]
    fn reserved_init_is_what_extends_to_reserved_init() {
        for key in [
            "$init",
            "reserved:init",
            "reserved.init",
            "any:reserved.init",
            "init",
            "$reserved:init",
            "reserved:init:x",
            "k8s:init",
            "reserved:host",
            "",
            "$",
            ":",
        ] {
            assert_eq!(
                is_reserved_init(key),
                extended_key(key) == "reserved.init",
                "{key}"
            );
        }
    }
}
