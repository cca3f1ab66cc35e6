//! What `porin lint` would report, per file, for the open documents.
//!
//! Without an inventory, each open document is linted alone, exactly as
//! `porin lint FILE` would (the rules that need an inventory are skipped,
//! as they are there). With one, a document's findings depend on the other
//! policies (a rule is redundant *given the rest*), so the whole policy set
//! is linted together, as `porin lint DIR --inventory INV` would, with the
//! editor's unsaved text in place of the file on disk, and findings are
//! published for every file of the set.

use std::collections::BTreeMap;
use std::path::PathBuf;

use porin_compiler::compile::compile_with_limits;
use porin_compiler::error::CompileError;
use porin_compiler::inventory::Inventory;
use porin_compiler::limits::Limits;
use porin_compiler::resolve::lower::PolicyInput;
use porin_lint::config::LintConfig;
use porin_lint::verify;
use porin_model::{Diagnostic, LoadOutcome, Severity, SourceMap, load_path, load_str};

/// The findings of one analysis.
#[derive(Debug, Default)]
pub struct Analysis {
    /// Findings by file name; every file analysed has an entry (empty when
    /// clean), so stale findings are cleared.
    pub by_file: BTreeMap<String, Vec<Diagnostic>>,
    /// The text of every file analysed (for ranges).
    pub sources: SourceMap,
    /// Problems that are no file's finding (an unreadable file, a limit),
    /// for the editor's message area.
    pub problems: Vec<String>,
}

/// What to lint against.
pub struct Setup<'a> {
    /// The lint configuration (`.porin.yaml`).
    pub config: &'a LintConfig,
    /// The inventory, if configured, and its file name (findings about no
    /// particular place are shown there, as SARIF does).
    pub inventory: Option<(&'a Inventory, String)>,
    /// The policy set's roots (files or directories), with an inventory.
    pub policies: &'a [PathBuf],
    /// Limits (loading, compiling).
    pub limits: &'a Limits,
    /// Keep info-level findings (`porin lint -v`).
    pub verbose: bool,
}

/// Lints the open documents (`open`: name → text).
pub fn analyse(open: &BTreeMap<String, String>, setup: &Setup<'_>) -> Analysis {
    let mut analysis = Analysis::default();
    for name in open.keys() {
        analysis.by_file.entry(name.clone()).or_default();
    }
    let inventory = setup
        .inventory
        .as_ref()
        .map(|(i, name)| (*i, name.as_str()));
    if inventory.is_some() {
        match load_set(open, setup) {
            Ok(outcome) => {
                lint(&mut analysis, outcome, inventory, setup);
                return analysis;
            }
            // Refused (too many files, too much text, unreadable): say so,
            // and lint the open documents alone.
            Err(problem) => analysis.problems.push(problem),
        }
    }
    for (name, text) in open {
        let outcome = load_str(name, text, &setup.limits.load);
        lint(&mut analysis, outcome, inventory, setup);
    }
    analysis
}

/// Loads the policy set: every policy file under the roots, the editor's
/// text for open ones, plus open documents outside the roots; bounded by
/// the load limits like `porin lint DIR`.
fn load_set(open: &BTreeMap<String, String>, setup: &Setup<'_>) -> Result<LoadOutcome, String> {
    let limits = &setup.limits.load;
    let mut files: Vec<String> = Vec::new();
    for root in setup.policies {
        let found = if root.is_dir() {
            porin_model::loader::policy_files(root, limits).map_err(|e| e.to_string())?
        } else {
            vec![root.clone()]
        };
        files.extend(found.iter().map(|p| p.display().to_string()));
        if files.len() > limits.max_files {
            return Err(format!(
                "more than {} policy files in the policy set",
                limits.max_files
            ));
        }
    }
    files.extend(open.keys().cloned());
    files.sort();
    files.dedup();
    let mut outcome = LoadOutcome::default();
    let mut total: u64 = 0;
    for file in files {
        let part = match open.get(&file) {
            Some(text) => {
                total = total.saturating_add(text.len() as u64);
                load_str(&file, text, limits)
            }
            None => {
                let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
                total = total.saturating_add(size.min(limits.max_file_bytes));
                load_path(std::path::Path::new(&file), limits)
                    .map_err(|e| format!("{e}: {file}"))?
            }
        };
        if total > limits.max_total_bytes {
            return Err(format!(
                "the policy set adds up to more than {} bytes (the load limit)",
                limits.max_total_bytes
            ));
        }
        outcome.merge(part);
    }
    Ok(outcome)
}

/// Runs porin lint's pipeline on one load and files the findings.
fn lint(
    analysis: &mut Analysis,
    outcome: LoadOutcome,
    inventory: Option<(&Inventory, &str)>,
    setup: &Setup<'_>,
) {
    let (inventory, inventory_name) = (inventory.map(|i| i.0), inventory.map(|i| i.1));
    for file in outcome.trees.iter().map(|t| t.file.clone()) {
        analysis.by_file.entry(file).or_default();
    }
    let mut diagnostics = outcome.diagnostics.clone();
    let inputs = PolicyInput::from_outcome(&outcome);
    // As `porin lint`: refuse a set over the compile limits before the
    // rules compile it without limits.
    let empty = Inventory::new();
    let checked =
        match compile_with_limits(&inputs, inventory.unwrap_or(&empty), &setup.limits.compile) {
            Err(error @ CompileError::Limit { .. }) => Err(error),
            _ => verify(&inputs, inventory, setup.config),
        };
    match checked {
        Ok(report) => diagnostics.extend(report.findings),
        Err(error) => analysis
            .problems
            .push(format!("porin lint could not run: {error}")),
    }
    if !setup.verbose {
        diagnostics.retain(|d| d.severity != Severity::Info);
    }
    for diagnostic in diagnostics {
        let file = diagnostic
            .primary
            .as_ref()
            .map(|l| l.file.clone())
            .or_else(|| inventory_name.map(str::to_owned))
            .or_else(|| outcome.trees.first().map(|t| t.file.clone()));
        if let Some(file) = file {
            analysis.by_file.entry(file).or_default().push(diagnostic);
        }
    }
    analysis.sources.extend(outcome.sources);
}
