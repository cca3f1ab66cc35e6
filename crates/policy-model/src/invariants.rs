//! Loader invariants, checked by the `parse_policy_yaml` fuzz target and by
//! the replay of its regressions (`tests/model/regression_fuzz.rs`): whatever the
//! input, loading ends (no panic), renders, and every policy it accepts
//! serializes and loads back to the same model.

use crate::diagnostic::{render_human_all, render_json};
use crate::limits::LoadLimits;
use crate::loader::{LoadOutcome, load_str};
use crate::route::Route;
use crate::yaml::tree::{Node, NodeKind};

/// Limits for fuzzing: smaller than the defaults so each run stays fast.
pub fn fuzz_limits() -> LoadLimits {
    LoadLimits {
        max_file_bytes: 1 << 20,
        max_nodes: 100_000,
        max_scalar_bytes: 4 << 20,
        ..LoadLimits::default()
    }
}

/// A loader invariant that does not hold (a bug, never an input error).
/// The fields are rendered text: the diagnostic or model in debug form,
/// the JSON that was reloaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoaderViolation {
    /// A diagnostic whose location is not 1-based.
    #[error("location not 1-based: {diagnostic}")]
    Location {
        /// The diagnostic, in debug form.
        diagnostic: String,
    },
    /// An accepted policy that does not serialize.
    #[error("cannot serialize {document}: {message}")]
    Serialize {
        /// The loaded document, in debug form.
        document: String,
        /// The serializer's error.
        message: String,
    },
    /// The serialized policy does not load again.
    #[error("reloading the serialized policy failed:\n{json}\n{diagnostics}")]
    Reload {
        /// The serialized policy.
        json: String,
        /// The diagnostics of reloading it, rendered.
        diagnostics: String,
    },
    /// The released trees' compact locator
    /// ([`LoadOutcome::release_trees`], what `porin compile` keeps) locates
    /// a route elsewhere than the tree it replaced.
    #[error("released trees locate {route} at {released}, the trees at {kept}")]
    Locator {
        /// The file, document and route.
        route: String,
        /// The tree's location, in debug form.
        kept: String,
        /// The locator's location, in debug form.
        released: String,
    },
    /// The serialized policy loads to another model.
    #[error("round trip changed the model:\n{json}\n{reloaded}")]
    RoundTrip {
        /// The serialized policy.
        json: String,
        /// What it loaded to, in debug form.
        reloaded: String,
    },
}

/// Loads `data` (ignored unless UTF-8) and checks the invariants. Returns the
/// first violation; the caller decides to panic.
pub fn check_loader_invariants(data: &[u8]) -> Result<(), LoaderViolation> {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let outcome = load_str("fuzz.yaml", text, &fuzz_limits());
    check_released_locator(&outcome)?;
    let _ = render_human_all(&outcome.diagnostics, &outcome.sources);
    let _ = render_json(&outcome.diagnostics);
    for diagnostic in &outcome.diagnostics {
        if let Some(primary) = &diagnostic.primary
            && (primary.line == 0 || primary.column == 0)
        {
            return Err(LoaderViolation::Location {
                diagnostic: format!("{diagnostic:?}"),
            });
        }
    }
    // ClusterNetworkPolicies wait for a target; they round-trip all the same.
    for loaded in outcome
        .documents
        .iter()
        .chain(&outcome.pending_cluster_policies)
    {
        let json = serde_json::to_string(&loaded.doc).map_err(|e| LoaderViolation::Serialize {
            document: format!("{loaded:?}"),
            message: e.to_string(),
        })?;
        let again = load_str("roundtrip.json", &json, &LoadLimits::default());
        if again.has_errors() {
            return Err(LoaderViolation::Reload {
                diagnostics: render_human_all(&again.diagnostics, &again.sources),
                json,
            });
        }
        let reloaded = if again.documents.is_empty() {
            &again.pending_cluster_policies
        } else {
            &again.documents
        };
        match reloaded.as_slice() {
            [reloaded] if reloaded.doc == loaded.doc => {}
            other => {
                return Err(LoaderViolation::RoundTrip {
                    reloaded: format!("{other:#?}"),
                    json,
                });
            }
        }
    }
    Ok(())
}

/// How many routes [`check_released_locator`] compares per input (bounds
/// the time of one fuzz run; routes are visited from the root down).
const MAX_LOCATOR_ROUTES: usize = 20_000;

/// Every route of every loaded tree, and an absent key and index under
/// each, is located by the released locator where the tree locates it.
fn check_released_locator(kept: &LoadOutcome) -> Result<(), LoaderViolation> {
    let mut released = kept.clone();
    released.release_trees();
    let mut budget = MAX_LOCATOR_ROUTES;
    for tree in &kept.trees {
        for (document, root) in tree.roots.iter().enumerate() {
            let Some(root) = root else { continue };
            let mut pending: Vec<(&Node, Route)> = vec![(root, Route::root())];
            while let Some((node, here)) = pending.pop() {
                for route in [here.key("absent"), here.index(usize::MAX), here.clone()] {
                    if budget == 0 {
                        return Ok(());
                    }
                    budget -= 1;
                    let (a, b) = (
                        kept.locate(&tree.file, document, &route),
                        released.locate(&tree.file, document, &route),
                    );
                    if a != b {
                        return Err(LoaderViolation::Locator {
                            route: format!("{}[{document}] {route}", tree.file),
                            kept: format!("{a:?}"),
                            released: format!("{b:?}"),
                        });
                    }
                }
                match &node.kind {
                    NodeKind::Scalar(..) => {}
                    NodeKind::Sequence(items) => {
                        for (index, item) in items.iter().enumerate() {
                            pending.push((item, here.index(index)));
                        }
                    }
                    NodeKind::Mapping(pairs) => {
                        for (key, value) in pairs {
                            if let Some(text) = key.as_scalar() {
                                pending.push((value, here.key(text)));
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
