//! `include/porin.bpf.o` is the emitter's output for the default config,
//! committed so reviewers and loaders can use it without building. This test
//! fails when it is stale; `UPDATE_OBJECT=1 cargo test -p porin-ebpf --test
//! ebpf committed_object::` rewrites it.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::PathBuf;

use porin_ebpf::{ObjectConfig, emit};

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include/porin.bpf.o")
}

#[test]
fn emit_is_deterministic() {
    let first = emit(&ObjectConfig::default()).unwrap();
    let second = emit(&ObjectConfig::default()).unwrap();
    assert_eq!(first, second);
}

#[test]
fn committed_object_is_up_to_date() {
    let fresh = emit(&ObjectConfig::default()).unwrap();
    let path = committed_path();
    if std::env::var_os("UPDATE_OBJECT").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        eprintln!("rewrote {}", path.display());
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_OBJECT=1 to create it",
            path.display()
        )
    });
    assert!(
        committed == fresh,
        "{} is stale ({} bytes committed, {} emitted); run UPDATE_OBJECT=1 cargo test -p porin-ebpf --test ebpf committed_object::",
        path.display(),
        committed.len(),
        fresh.len()
    );
}
