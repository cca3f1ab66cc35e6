//! What a validator reports: [`Finding`]s by route. A leaf of the validate
//! module, so the validators (`cilium`, `k8s`, `selector`) use it without
//! depending on the module that runs them.

use crate::diagnostic::Severity;
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
