//! Policy texts applied as bytes ([`Session::apply_policy_text`]): the
//! agent's per-change path in one call. The session keeps how each such
//! text was loaded (its limits and target) and its parse's budget, so the
//! next version of the text is re-parsed in place, one rule item, when
//! `porin_model::reparse` shows that equal to a full load; any other text
//! is loaded in full. The C API's `porin_session_apply_policy_bytes` is
//! this call.

use porin_model::loader::LoadOutcome;
use porin_model::reparse::{Budget, Edit, plan};

use super::live::{Session, SessionError, Update};
use super::load::{Reparse, TextLoad};

/// What [`Session::apply_policy_text`] did.
#[derive(Debug)]
#[non_exhaustive]
pub struct AppliedText {
    /// The map writes, as [`Session::set_policy`] gives them.
    pub update: Update,
    /// Whether the text was re-parsed in place (one item) rather than
    /// loaded in full.
    pub in_place: bool,
}

impl Session {
    /// [`Session::with_policies`] over texts given as their bytes (name,
    /// text), each loaded by `load` and kept with it: their next versions
    /// go through [`Session::apply_policy_text`] in place from the first
    /// change on. A text with errors is refused with its diagnostics.
    pub fn with_policy_texts<'t>(
        inventory: crate::inventory::Inventory,
        texts: impl IntoIterator<Item = (&'t str, &'t str)>,
        load: &TextLoad,
        limits: crate::limits::CompileLimits,
    ) -> Result<Self, SessionError> {
        let texts = texts
            .into_iter()
            .map(|(name, text)| {
                let outcome = load.load(name, text);
                let reparse = Reparse {
                    load: load.clone(),
                    budget: Budget::of(&outcome, name),
                };
                (name.to_owned(), outcome, Some(reparse))
            })
            .collect();
        Self::with_texts(inventory, texts, limits)
    }

    /// Adds the policy text `name` from its bytes, or replaces the text of
    /// that name: the update [`Session::set_policy`] gives with
    /// `load.load(name, text)`, exactly. When the session holds the text
    /// from an earlier call with the same `load`, and the new text differs
    /// from it in one rule item (changed, inserted or removed) that the
    /// re-parse shows equal to a full load, only that item is parsed and
    /// lowered again ([`Session::edit_policy`]); else the text is loaded
    /// in full. A text with errors is refused with its diagnostics and
    /// changes nothing.
    ///
    /// A one-rule change to a 4,096-rule text takes ~0.25 ms, a rule
    /// inserted ~0.4–0.6 ms, against ~25 ms to load it in full
    /// (`porin-bench role incr-child`, BENCHMARKS.md).
    pub fn apply_policy_text(
        &mut self,
        name: &str,
        text: &str,
        load: &TextLoad,
    ) -> Result<AppliedText, SessionError> {
        if let Some(edit) = self.plan_in_place(name, text, load) {
            let budget = edit.budget();
            // Forgotten while the edit runs: a panic inside it (which the
            // C API catches, keeping the session) must not leave the old
            // budget beside the new text.
            let kept = self.take_reparse(name);
            match self.edit_text(name, edit) {
                Some(Ok(update)) => {
                    self.set_reparse(
                        name,
                        Some(Reparse {
                            load: load.clone(),
                            budget: Some(budget),
                        }),
                    );
                    return Ok(AppliedText {
                        update,
                        in_place: true,
                    });
                }
                // The text is as it was (a failed call changes nothing).
                Some(Err(e)) => {
                    self.set_reparse(name, kept);
                    return Err(e);
                }
                // The edit did not fit the text: nothing changed.
                None => self.set_reparse(name, kept),
            }
        }
        self.apply_loaded(name, load.load(name, text), load)
    }

    /// Checks the policy text `name` as [`Session::apply_policy_text`]
    /// would apply it, changing nothing: a text with errors is refused
    /// with its diagnostics. Checking every text of a change before
    /// applying any ([`Session::apply_checked_text`]) refuses the change
    /// as a whole before the session is touched. A text the session will
    /// re-parse in place is valid by the re-parse's guarantee (its one
    /// changed item is checked, the rest is the session's); any other is
    /// loaded here, and the load is kept for the apply.
    pub fn check_policy_text<'t>(
        &self,
        name: &'t str,
        text: &'t str,
        load: &'t TextLoad,
    ) -> Result<CheckedText<'t>, SessionError> {
        if self.plan_in_place(name, text, load).is_some() {
            return Ok(CheckedText {
                name,
                text,
                load,
                loaded: None,
            });
        }
        let outcome = load.load(name, text);
        if outcome.has_errors() {
            return Err(SessionError::Policy(outcome.diagnostics));
        }
        Ok(CheckedText {
            name,
            text,
            load,
            loaded: Some(outcome),
        })
    }

    /// Applies a text [`Session::check_policy_text`] checked: as
    /// [`Session::apply_policy_text`], without loading it again. A text
    /// checked for in-place re-parsing is planned again here (the session
    /// may have changed since), and loaded in full if that no longer
    /// holds.
    pub fn apply_checked_text(
        &mut self,
        checked: CheckedText<'_>,
    ) -> Result<AppliedText, SessionError> {
        match checked.loaded {
            Some(outcome) => self.apply_loaded(checked.name, outcome, checked.load),
            None => self.apply_policy_text(checked.name, checked.text, checked.load),
        }
    }

    /// The in-place edit of text `name` into `text`, when the session
    /// holds it as loaded by `load` and the re-parse plans one.
    fn plan_in_place(&self, name: &str, text: &str, load: &TextLoad) -> Option<Edit> {
        let kept = self.reparse_of(name).filter(|kept| kept.load == *load)?;
        plan(
            self.policy(name)?,
            name,
            text,
            &load.limits,
            load.target.as_ref(),
            kept.budget?,
        )
    }

    /// Sets text `name` to `outcome`, its full load by `load`, kept with
    /// that load.
    fn apply_loaded(
        &mut self,
        name: &str,
        outcome: LoadOutcome,
        load: &TextLoad,
    ) -> Result<AppliedText, SessionError> {
        // Here, with the tree just built (a pass over it, ~1 % of the
        // load), not at the next edit.
        let budget = Budget::of(&outcome, name);
        let update = self.set_policy(name, outcome)?;
        self.set_reparse(
            name,
            Some(Reparse {
                load: load.clone(),
                budget,
            }),
        );
        Ok(AppliedText {
            update,
            in_place: false,
        })
    }
}

/// A policy text checked by [`Session::check_policy_text`], for
/// [`Session::apply_checked_text`]: the text and how it loads, with its
/// full load when the session will not re-parse it in place.
#[derive(Debug)]
pub struct CheckedText<'t> {
    name: &'t str,
    text: &'t str,
    load: &'t TextLoad,
    loaded: Option<LoadOutcome>,
}

impl<'t> CheckedText<'t> {
    /// The text's name.
    pub fn name(&self) -> &'t str {
        self.name
    }

    /// Whether the text was loaded in full by the check (the session will
    /// not re-parse it in place).
    pub fn loaded_in_full(&self) -> bool {
        self.loaded.is_some()
    }
}
