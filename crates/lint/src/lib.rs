//! # porin-lint: the lint rules of `porin lint`
//!
//! Input: loaded policies ([`PolicyInput`]s), an optional finished
//! inventory and a [`LintConfig`] (`porin.yaml`). Output: a [`Report`]:
//! the findings after configuration and `porin.dev/ignore` annotations,
//! sorted by location then code, the codes skipped for want of an
//! inventory, and how many findings were suppressed. A compiler failure is
//! a [`CompileError`], never a panic. The flow classes and the exact
//! analysis are porin-connectivity's, shared with `porin diff` and
//! `porin graph`.
//!
//! The verifier: lint rules over policies and their compiled map state
//! (`porin lint`, issue #5).
//!
//! Findings are [`Diagnostic`]s with `PR0xx` codes; each rule is one module
//! under `rules/` that declares its code, name, default severity and
//! documentation next to its check, and [`rules::ALL`] lists them
//! ([`codes`] looks them up, with the codes of the other stages). Rules
//! that need an inventory are skipped without one (the report says which).
//!
//! The shadowing rules (PR004, PR005, PR009) are exact: for each allow rule
//! and each endpoint it selects, the verifier recompiles that endpoint's
//! map state without the rule and compares every flow class
//! ([`porin_connectivity::analysis`]): "the rule changes no verdict" is a theorem about the
//! compiled state, not a sample.
//!
//! Deny rules that change no verdict are deliberately *not* reported:
//! Cilium keeps covered CIDR denies in the map because the ipcache may give
//! an address inside the covered range the narrower identity (docs/semantics.md
//! §4.6, cilium/cilium#33719), and a redundant deny can only ever fail
//! closed.

// No unsafe code: system calls live in porin-kernel, the C ABI in porin-capi.
#![forbid(unsafe_code)]

pub mod baseline;
pub mod codes;
pub mod config;
pub(crate) mod context;
pub mod rules;
mod settings;

use std::collections::{BTreeMap, BTreeSet};

use porin_model::diagnostic::{Diagnostic, Severity};

pub use config::annotation_problems;
pub use context::{Context, Coverage, Overflow, Unit};
/// `12,345`: how counts are printed in findings (also `porin replay`'s).
pub use rules::support::thousands;

use config::{LintConfig, RuleLevel, annotation_ignores};
use porin_compiler::error::CompileError;
use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;

/// The outcome of a lint run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Findings after configuration and annotations, sorted by location
    /// then code.
    pub findings: Vec<Diagnostic>,
    /// Codes skipped because no inventory was given.
    pub skipped: Vec<&'static str>,
    /// Findings suppressed by configuration or annotation, per code.
    pub suppressed: BTreeMap<&'static str, usize>,
}

impl Report {
    /// The worst severity among the findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|d| d.severity).min()
    }
}

/// Runs every lint rule. `inventory` must be finished
/// ([`Inventory::finish`]); without one, the rules that need it are
/// skipped and listed in [`Report::skipped`].
pub fn verify(
    inputs: &[PolicyInput<'_>],
    inventory: Option<&Inventory>,
    config: &LintConfig,
) -> Result<Report, CompileError> {
    let empty = Inventory::new();
    let cx = Context::new(
        inputs,
        inventory.unwrap_or(&empty),
        inventory.is_some(),
        config,
    )?;
    let mut raw: Vec<Diagnostic> = Vec::new();
    let mut skipped = Vec::new();
    for info in codes::rules() {
        if config.level(info.code) == RuleLevel::Off {
            continue;
        }
        if info.needs_inventory && !cx.has_inventory {
            skipped.push(info.code);
        }
    }
    rules::run_all(&cx, &mut raw);
    if cx.has_inventory {
        // The compiler's own findings (merge conflicts, unresolvable peers,
        // ...), except those a lint rule reports with locations: PC004
        // (PR015) and PC008, PC020 (PR007, per policy).
        raw.extend(
            cx.compile_diagnostics
                .iter()
                .filter(|d| {
                    ![
                        porin_compiler::codes::NAMED_PORT.code,
                        porin_compiler::codes::SELECTS_NOTHING.code,
                        porin_compiler::codes::INVENTORY_SELECTS_NOTHING.code,
                    ]
                    .contains(&d.code)
                })
                .cloned(),
        );
    }
    Ok(finish(&cx, raw, skipped, config))
}

/// Applies configuration levels and `porin.dev/ignore` annotations, then
/// sorts.
fn finish(
    cx: &Context<'_>,
    raw: Vec<Diagnostic>,
    skipped: Vec<&'static str>,
    config: &LintConfig,
) -> Report {
    let ignores = annotation_ignores(cx.inputs);
    let mut report = Report {
        skipped,
        ..Report::default()
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for mut d in raw {
        // A finding has its code's default severity from the registry (or,
        // PR003 below the limit, a milder one its rule chose); the
        // configuration only overrides.
        match config.rules.get(d.code) {
            Some(RuleLevel::Off) => {
                *report.suppressed.entry(d.code).or_default() += 1;
                continue;
            }
            Some(RuleLevel::Severity(severity)) => d.severity = *severity,
            None => {}
        }
        if let Some(primary) = &d.primary
            && ignores
                .get(&(primary.file.clone(), primary.document))
                .is_some_and(|codes| codes.contains(d.code))
        {
            *report.suppressed.entry(d.code).or_default() += 1;
            continue;
        }
        // The same finding for several endpoints sharing a rule is
        // reported once.
        let fingerprint = format!("{}|{:?}|{}", d.code, d.primary, d.message);
        if seen.insert(fingerprint) {
            report.findings.push(d);
        }
    }
    report.findings.sort_by(|a, b| {
        let key = |d: &Diagnostic| {
            d.primary
                .as_ref()
                .map(|l| (l.file.clone(), l.document, l.line, l.column))
        };
        key(a)
            .cmp(&key(b))
            .then(a.code.cmp(b.code))
            .then(a.message.cmp(&b.message))
    });
    report
}
