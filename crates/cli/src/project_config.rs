//! `.porin.yaml`: read by `porin lint` (`--config`, else the current
//! directory's) and, for its `settings:`, by every command that loads an
//! inventory (`crate::commands::compile::load_inventory`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use porin_lint::config::LintConfig;

/// The default configuration file name.
pub const CONFIG_FILE: &str = ".porin.yaml";

/// `.porin.yaml` of the current directory (the defaults when there is
/// none), for the commands without `--config`.
pub fn project_config() -> anyhow::Result<LintConfig> {
    load_config(None)
}

pub fn load_config(path: Option<&Path>) -> anyhow::Result<LintConfig> {
    let path = match path {
        Some(path) => path.to_owned(),
        None => {
            let default = PathBuf::from(CONFIG_FILE);
            if !default.is_file() {
                return Ok(LintConfig::default());
            }
            default
        }
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(LintConfig::parse(&path.display().to_string(), &text)?)
}
