//! Reading the agent's inputs: the policy directory (one text per file) and the inventory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use porin_compiler::inventory::Inventory;
use porin_compiler::limits::Limits;
use porin_model::diagnostic::render_human_all;
use porin_model::loader::{LoadOutcome, load_str, policy_files};

use crate::error::AgentError;

/// The policy files of a directory: display path → text, in path order.
pub type PolicyTexts = BTreeMap<String, String>;

/// Reads every policy file (`*.yaml`, `*.yml`, `*.json`, recursively) under `dir`, each bounded
/// by the load limits.
pub fn read_policy_dir(dir: &Path, limits: &Limits) -> Result<PolicyTexts, AgentError> {
    let mut texts = PolicyTexts::new();
    let mut total: u64 = 0;
    for path in policy_files(dir, &limits.load)? {
        let size = std::fs::metadata(&path)
            .map_err(|e| AgentError::io(&path, e))?
            .len();
        if size > limits.load.max_file_bytes {
            return Err(AgentError::Policy(format!(
                "{}: {size} bytes, more than the policy file limit ({} bytes)",
                path.display(),
                limits.load.max_file_bytes
            )));
        }
        total = total.saturating_add(size);
        if total > limits.load.max_total_bytes {
            return Err(AgentError::Policy(format!(
                "{}: the policy files together exceed {} bytes",
                dir.display(),
                limits.load.max_total_bytes
            )));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| AgentError::io(&path, e))?;
        texts.insert(path.display().to_string(), text);
    }
    Ok(texts)
}

/// Loads one policy text, validated for `target` (the inventory's `ciliumVersion` /
/// `enableK8sClusterNetworkPolicy`); a text with any error is refused with its rendered
/// diagnostics (the file, line, column and field of each), so nothing of it is applied.
pub fn load_policy(
    name: &str,
    text: &str,
    limits: &Limits,
    target: &porin_model::Target,
) -> Result<LoadOutcome, AgentError> {
    let mut outcome = load_str(name, text, &limits.load);
    outcome.apply_target(target);
    if outcome.has_errors() {
        let errors: Vec<_> = outcome
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .cloned()
            .collect();
        return Err(AgentError::Policy(render_human_all(
            &errors,
            &outcome.sources,
        )));
    }
    Ok(outcome)
}

/// The target the agent validates policies for: what the inventory says, else Cilium 1.19
/// with every setting off.
pub fn target_of(inventory: &Inventory) -> porin_model::Target {
    inventory.target.choice().target()
}

/// Loads and finishes the inventory file (or directory).
pub fn read_inventory(path: &Path, limits: &Limits) -> Result<Inventory, AgentError> {
    Ok(Inventory::load_with_limits(path, &limits.inventory)?)
}

/// The paths the agent watches: the policy directory and the inventory's parent directory
/// (editors replace files by renaming, which a watch on the file itself would lose).
pub fn watched_paths(policies: &Path, inventory: &Path) -> Vec<PathBuf> {
    let parent = inventory
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut paths = vec![policies.to_path_buf()];
    if inventory.is_dir() {
        paths.push(inventory.to_path_buf());
    } else if !parent.starts_with(policies) {
        paths.push(parent);
    }
    paths
}
