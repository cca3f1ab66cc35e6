//! Validation equal to what a Cilium 1.19 cluster accepts: the CRD schema the
//! API server enforces **and** the agent's `Rule.Sanitize()`; where they
//! differ the stricter wins (semantics.md §2.4). Kubernetes NetworkPolicy
//! gets the API server's validation.
//!
//! Checks run over the typed model and report [`Finding`]s by route; the
//! loader resolves routes to lines and columns.

use crate::diagnostic::Severity;
use crate::model::PolicyDocument;
use crate::route::Route;

/// One validation finding, located by route relative to the policy object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Diagnostic code (`PM0xx`).
    pub code: &'static str,
    /// Severity.
    pub severity: Severity,
    /// Where.
    pub route: Route,
    /// Point at the key rather than the value.
    pub at_key: bool,
    /// Message, with Cilium's meaning.
    pub message: String,
    /// What would be valid.
    pub help: Option<String>,
    /// Background.
    pub notes: Vec<String>,
    /// Related places.
    pub related: Vec<(Route, String)>,
}

/// Collects findings while walking a document.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    pub(crate) list: Vec<Finding>,
}

impl Findings {
    pub(crate) fn error(
        &mut self,
        code: &'static str,
        route: Route,
        message: impl Into<String>,
    ) -> &mut Finding {
        self.push(code, Severity::Error, route, message)
    }

    pub(crate) fn push(
        &mut self,
        code: &'static str,
        severity: Severity,
        route: Route,
        message: impl Into<String>,
    ) -> &mut Finding {
        self.list.push(Finding {
            code,
            severity,
            route,
            at_key: false,
            message: message.into(),
            help: None,
            notes: Vec::new(),
            related: Vec::new(),
        });
        let last = self.list.len() - 1;
        &mut self.list[last]
    }
}

impl Finding {
    pub(crate) fn help(&mut self, help: impl Into<String>) -> &mut Self {
        self.help = Some(help.into());
        self
    }

    pub(crate) fn note(&mut self, note: impl Into<String>) -> &mut Self {
        self.notes.push(note.into());
        self
    }

    pub(crate) fn at_key(&mut self) -> &mut Self {
        self.at_key = true;
        self
    }
}

/// Validates one policy object.
pub fn validate_document(doc: &PolicyDocument) -> Vec<Finding> {
    let mut findings = Findings::default();
    for (prefix, rule) in doc.cilium_rules() {
        let base = Route::root().key(&prefix);
        let base = match prefix
            .strip_prefix("specs[")
            .and_then(|r| r.strip_suffix(']'))
        {
            Some(index) => Route::root().key("specs").index(index.parse().unwrap_or(0)),
            None => base,
        };
        for (i, item) in rule.ingress.iter().flatten().enumerate() {
            requires(
                &mut findings,
                base.key("ingress").index(i),
                "fromRequires",
                item.from_requires.as_ref(),
            );
        }
        for (i, item) in rule.ingress_deny.iter().flatten().enumerate() {
            requires(
                &mut findings,
                base.key("ingressDeny").index(i),
                "fromRequires",
                item.from_requires.as_ref(),
            );
        }
        for (i, item) in rule.egress.iter().flatten().enumerate() {
            requires(
                &mut findings,
                base.key("egress").index(i),
                "toRequires",
                item.to_requires.as_ref(),
            );
        }
        for (i, item) in rule.egress_deny.iter().flatten().enumerate() {
            requires(
                &mut findings,
                base.key("egressDeny").index(i),
                "toRequires",
                item.to_requires.as_ref(),
            );
        }
    }
    findings.list
}

/// `fromRequires`/`toRequires`: removed in Cilium 1.19; the CRD keeps the
/// field with `maxItems: 0` (Documentation/security/policy/language.rst).
fn requires<T>(findings: &mut Findings, item: Route, field: &str, list: Option<&Vec<T>>) {
    if list.is_some_and(|l| !l.is_empty()) {
        findings
            .error(
                crate::codes::REQUIRES_REMOVED,
                item.key(field),
                format!("`{field}` was removed in Cilium 1.19"),
            )
            .at_key()
            .note("the CRD keeps the field only with maxItems: 0, so the API server rejects any entry")
            .help("express the requirement in the peer selector itself (add the label to fromEndpoints/toEndpoints), or use a deny rule");
    }
}
