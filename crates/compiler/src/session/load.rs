//! How a policy text given as bytes is loaded ([`TextLoad`]), and what
//! the session keeps of it for an in-place re-parse of its next version
//! ([`Reparse`]): below both the session (`super::live`, which holds it
//! per text) and the bytes path (`super::text`, which uses it).

use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_str};
use porin_model::reparse::Budget;
use porin_model::version::Target;

/// How `Session::apply_policy_text` loads a text:
/// `porin_model::loader::load_str` under `limits`, then
/// `LoadOutcome::apply_target` with `target` (`None`: no target's
/// validation, as `load_str` alone gives).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextLoad {
    /// The parser's limits.
    pub limits: LoadLimits,
    /// The Cilium version and settings the policies are validated for.
    pub target: Option<Target>,
}

impl TextLoad {
    /// The outcome of a full load of `text`, named `name`.
    pub fn load(&self, name: &str, text: &str) -> LoadOutcome {
        let mut outcome = load_str(name, text, &self.limits);
        if let Some(target) = &self.target {
            outcome.apply_target(target);
        }
        outcome
    }
}

/// What the session keeps of a text applied as bytes.
#[derive(Debug, Clone)]
pub(super) struct Reparse {
    /// How it was loaded.
    pub(super) load: TextLoad,
    /// The budget of its parse (`None`: it cannot be edited in place, an
    /// anchor or a merge key in it, for example).
    pub(super) budget: Option<Budget>,
}
