//! The CLI's allocator: which one (mimalloc on Linux) and the one call
//! the commands make to it ([`release_free_memory`]). A module of its own
//! so that the commands reach it without importing `main.rs`.

/// mimalloc as the CLI's allocator on Linux: a compile or lint of a large
/// cluster makes and frees millions of small, short-lived allocations (YAML
/// trees released per file, label sets, selectors, rule structs), and
/// glibc's malloc/free/consolidate were about a third of the flat profile of
/// the 65,535-CIDR compile (BENCHMARKS.md, "Session 8, branch `s8-cidr`").
/// The libraries do not choose an allocator: embedders of the C API and the
/// Rust crates keep theirs.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Hands the allocator's free pages back to the kernel now. mimalloc keeps
/// freed memory for a second before it purges it (its `purge_delay`), and
/// memory freed by one phase of a run is not all reused by the next: at the
/// end of a compile's planning of 65,535 CIDR policies, after the loaded
/// models were freed, ~70–90 MiB of its RSS was free memory, and the
/// output's peak came on top of it (BENCHMARKS.md, "Session 11, the lead").
/// A shorter purge delay for the whole run purges and faults the same
/// pages again and again; one collection at a phase boundary costs a few
/// milliseconds. A no-op where the CLI keeps the system allocator.
pub(crate) fn release_free_memory() {
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    // SAFETY: `mi_collect` takes no arguments but a flag and may be called
    // from any thread at any time; mimalloc is the global allocator here.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}
