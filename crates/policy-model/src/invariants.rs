//! Loader invariants, checked by the `parse_policy_yaml` fuzz target and by
//! the replay of its regressions (`tests/regression_fuzz.rs`): whatever the
//! input, loading ends (no panic), renders, and every policy it accepts
//! serializes and loads back to the same model.

use crate::diagnostic::{render_human_all, render_json};
use crate::limits::LoadLimits;
use crate::loader::load_str;

/// Limits for fuzzing: smaller than the defaults so each run stays fast.
pub fn fuzz_limits() -> LoadLimits {
    LoadLimits {
        max_file_bytes: 1 << 20,
        max_nodes: 100_000,
        max_scalar_bytes: 4 << 20,
        ..LoadLimits::default()
    }
}

/// Loads `data` (ignored unless UTF-8) and checks the invariants. Returns the
/// first violation as text; the caller decides to panic.
pub fn check_loader_invariants(data: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let outcome = load_str("fuzz.yaml", text, &fuzz_limits());
    let _ = render_human_all(&outcome.diagnostics, &outcome.sources);
    let _ = render_json(&outcome.diagnostics);
    for diagnostic in &outcome.diagnostics {
        if let Some(primary) = &diagnostic.primary
            && (primary.line == 0 || primary.column == 0)
        {
            return Err(format!("location not 1-based: {diagnostic:?}"));
        }
    }
    for loaded in &outcome.documents {
        let json = serde_json::to_string(&loaded.doc)
            .map_err(|e| format!("cannot serialize {loaded:?}: {e}"))?;
        let again = load_str("roundtrip.json", &json, &LoadLimits::default());
        if again.has_errors() {
            return Err(format!(
                "reloading the serialized policy failed:\n{json}\n{}",
                render_human_all(&again.diagnostics, &again.sources)
            ));
        }
        match again.documents.as_slice() {
            [reloaded] if reloaded.doc == loaded.doc => {}
            other => return Err(format!("round trip changed the model:\n{json}\n{other:#?}")),
        }
    }
    Ok(())
}
