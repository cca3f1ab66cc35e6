//! The integration tests of this crate, one module per former test file, linked into one
//! test binary (one link of the crate and its dependencies instead of one per file; see
//! BENCHMARKS.md, "cargo test --workspace: build and link").

// The kernel tests' packet and tool helpers (btf_elf uses `require` and `object_file`).
#[path = "../../../kernel/tests/kernel/support/mod.rs"]
mod support;

mod asm_roundtrip;
mod btf_elf;
mod committed_object;
mod compile_faults;
mod dump;
mod encoding;
mod map_contents;
