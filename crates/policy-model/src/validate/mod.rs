//! Validation equal to what a Cilium 1.19 cluster accepts: the CRD schema the
//! API server enforces **and** the agent's `Rule.Sanitize()`; where they
//! differ the stricter wins (docs/semantics.md §2.4). Kubernetes NetworkPolicy
//! gets the API server's validation.
//!
//! Checks run over the typed model and report [`Finding`]s by route; the
//! loader resolves routes to lines and columns and turns each into the one
//! diagnostics type, [`crate::Diagnostic`]. A `Finding` is that diagnostic
//! before it has a place in the file: the checks see the typed model, not
//! the YAML tree that knows lines.

mod cilium;
mod k8s;
pub mod selector;
pub(crate) mod text;

use crate::diagnostic::Severity;
use crate::model::PolicyDocument;
use crate::registry::CodeInfo;
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
    /// Records a finding of `code` at the code's default severity.
    pub(crate) fn report(
        &mut self,
        code: CodeInfo,
        route: Route,
        message: impl Into<String>,
    ) -> &mut Finding {
        self.list.push(Finding {
            code: code.code,
            severity: code.severity,
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
    /// A severity other than the code's default, for a condition milder
    /// than the rest of its code (the code's summary says which).
    pub(crate) fn with_severity(&mut self, severity: Severity) -> &mut Self {
        self.severity = severity;
        self
    }

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
    match doc {
        PolicyDocument::CiliumNetworkPolicy(p) => cilium::validate_cilium_policy(
            &mut findings,
            cilium::Scope::Namespaced,
            &p.metadata,
            p.spec.as_ref(),
            p.specs.as_ref(),
        ),
        PolicyDocument::CiliumClusterwideNetworkPolicy(p) => cilium::validate_cilium_policy(
            &mut findings,
            cilium::Scope::Clusterwide,
            &p.metadata,
            p.spec.as_ref(),
            p.specs.as_ref(),
        ),
        PolicyDocument::NetworkPolicy(p) => k8s::validate_network_policy(&mut findings, p),
    }
    findings.list
}
