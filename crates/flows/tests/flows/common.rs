//! Compiling the examples the tests replay against.

use std::path::{Path, PathBuf};

use porin_compiler::compile::{Compiled, compile};
use porin_compiler::inventory::Inventory;
use porin_compiler::resolve::lower::PolicyInput;
use porin_model::LoadLimits;
use porin_model::loader::load_paths;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles policy paths (relative to the workspace) against an inventory.
pub fn compiled(policies: &[&str], inventory: &str) -> Compiled {
    let root = workspace();
    let paths: Vec<PathBuf> = policies.iter().map(|p| root.join(p)).collect();
    let outcome = load_paths(&paths, &LoadLimits::default()).expect("policies load");
    assert!(!outcome.has_errors(), "{:#?}", outcome.diagnostics);
    let inventory = Inventory::load(&root.join(inventory)).expect("inventory");
    compile(&PolicyInput::from_outcome(&outcome), &inventory).expect("compiles")
}

/// Compiles policy text against an inventory (relative to the workspace).
pub fn compiled_text(name: &str, text: &str, inventory: &str) -> Compiled {
    let outcome = porin_model::loader::load_str(name, text, &LoadLimits::default());
    assert!(!outcome.has_errors(), "{:#?}\n{text}", outcome.diagnostics);
    let inventory = Inventory::load(&workspace().join(inventory)).expect("inventory");
    compile(&PolicyInput::from_outcome(&outcome), &inventory).expect("compiles")
}

/// The inventory alone, compiled with no policy.
pub fn inventory_only(inventory: &str) -> Compiled {
    compiled_text("none.yaml", "", inventory)
}
