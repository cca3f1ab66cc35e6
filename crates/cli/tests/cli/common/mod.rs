//! Helpers shared by the CLI's integration tests: run the built `porin`
//! from the workspace root, where fixture paths are relative.

#![allow(
    clippy::expect_used,
    dead_code,
    reason = "test helpers; not every test file uses every helper"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `porin ARGS...` in the workspace root without colour.
pub fn porin(args: &[&str]) -> Output {
    porin_in(&workspace(), args)
}

/// Runs `porin ARGS...` in `dir` without colour.
pub fn porin_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_porin"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("porin runs")
}

pub mod dist;
