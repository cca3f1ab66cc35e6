//! # The kernel side: run porin's object in the real kernel and read its verdicts
//!
//! porin proves its datapath by executing it, not by simulating it. This module is the narrow
//! path from bytes to kernel objects:
//!
//! - [`sys`]: a safe wrapper over `bpf(2)` (maps, program load with the verifier log,
//!   `BPF_PROG_TEST_RUN`, pinning, BTF load). The only `unsafe` code of the crate.
//! - [`Map`] and [`Program`]: owned fds with typed, size-checked operations.
//!   [`Program::test_run_repeat`] returns the kernel's own average nanoseconds per run, which
//!   the benchmark example (`examples/testrun_bench.rs`) uses.
//! - [`LoadedObject`]: porin's own minimal ELF loader (BTF-defined maps in `.maps`,
//!   `R_BPF_64_64` map relocations on `ld_imm64`, `classifier` programs); [`ObjectFile`] is the
//!   privilege-free parse step.
//! - [`Datapath`]: the object as `DATAPATH.md` defines it: atomic policy replacement through
//!   `porin_config`, ipcache fill, conntrack reset, verdict counters, and
//!   [`Datapath::decide`], which runs one packet and returns pass/drop, the redirect mark and the
//!   one counter it moved.
//! - [`probe`]: tells whether this process may use eBPF at all, so tests can report
//!   `SKIPPED` outside CI instead of failing.
//!
//! Everything here needs `CAP_BPF` (in practice: root, as `unprivileged_bpf_disabled` is set on
//! the machines porin targets). Nothing panics; every failure is a [`KernelError`] that names the
//! `bpf(2)` command, the object and the errno.

mod btf;
pub mod datapath;
mod error;
mod loader;
mod map;
mod program;
pub mod sys;

pub use btf::MapDefinition;
pub use datapath::{
    Counter, CounterValue, Counters, Datapath, Direction, KernelVerdict, PolicySlot, Verdict,
};
pub use error::{BpfCommand, KernelError};
pub use loader::{LoadedObject, MapRelocation, ObjectFile, ProgramDefinition};
pub use map::Map;
pub use program::{Program, SK_BUFF_SIZE, SkBuff, TestRunOutput};
pub use sys::{BPF_F_NO_PREALLOC, MapSpec, MapType, ProgramType, UpdateFlags};

/// TC verdict `TC_ACT_OK`: let the packet through.
pub const TC_ACT_OK: u32 = 0;
/// TC verdict `TC_ACT_SHOT`: drop the packet.
pub const TC_ACT_SHOT: u32 = 2;

/// Checks that this process can create eBPF objects, by creating (and closing) a one-entry
/// array map. `Err` with [`KernelError::is_unavailable`] means "no permission or no bpf(2)".
pub fn probe() -> Result<(), KernelError> {
    Map::create(
        "porin_probe",
        MapSpec {
            map_type: MapType::ARRAY,
            key_size: 4,
            value_size: 4,
            max_entries: 1,
            map_flags: 0,
        },
    )
    .map(drop)
}
