//! What a validator reports: [`Finding`]s by route. A leaf of the validate
//! module, so the validators (`cilium`, `k8s`, `selector`) use it without
//! depending on the module that runs them.

use crate::diagnostic::Severity;
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
