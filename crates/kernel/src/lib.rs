//! # porin-kernel: run porin's object in the real kernel and read its verdicts
//!
//! porin proves its datapath by executing it, not by simulating it. This crate is the narrow
//! path from the object `porin-ebpf` emits and the map contents of its ABI (`porin_ebpf::abi`,
//! encoded to bytes only at the `bpf(2)` call) to kernel objects, and the kernel engine of
//! `porin test` on top of it:
//!
//! - [`sys`]: a safe wrapper over `bpf(2)` (maps, program load with the verifier log,
//!   `BPF_PROG_TEST_RUN`, pinning, BTF load). The only `unsafe` code of the crate.
//! - [`Map`] and [`Program`]: owned fds with typed, size-checked operations.
//!   [`Program::test_run_repeat`] returns the kernel's own average nanoseconds per run, which
//!   the benchmark example (`examples/testrun_bench.rs`) uses.
//! - [`LoadedObject`]: porin's own minimal ELF loader (BTF-defined maps in `.maps`,
//!   `R_BPF_64_64` map relocations on `ld_imm64`, `classifier` programs); [`ObjectFile`] is the
//!   privilege-free parse step.
//! - [`attach`] and [`pin`]: tcx BPF links on network devices and bpffs pins of links and maps,
//!   so that an agent's enforcement outlives its process and a restarted agent adopts it.
//! - [`Datapath`]: the object as `DATAPATH.md` defines it: atomic policy replacement through
//!   `porin_config`, ipcache fill, conntrack reset, verdict counters, and
//!   [`Datapath::decide`], which runs one packet and returns pass/drop, the redirect mark and the
//!   one counter it moved.
//! - [`probe`]: tells whether this process may use eBPF at all, so tests can report
//!   `SKIPPED` outside CI instead of failing.
//! - [`packet`]: the frames the tests and the kernel engine send through the programs.
//! - [`events`]: the consumer of the verdict event ring buffer `porin_events` ([`EventReader`])
//!   and its switches ([`Datapath::set_events`]).
//! - [`engine`]: the kernel engine of `porin test` (`--engine kernel|both`), which decides the
//!   cases of `porin-policytest` the way the datapath does.
//!
//! `bpf(2)` is Linux's: on other systems the crate still builds (so do the CLI and the C API
//! that depend on it), and every kernel operation fails with [`KernelError::NeedsLinux`].
//! `unsafe` code is denied by the workspace lints and allowed only in [`sys`].
//!
//! ```no_run
//! use porin_compiler::identity::Identity;
//! use porin_compiler::mapstate::{Entry, Key};
//! use porin_ebpf::abi::{Ipcache4Key, IpcacheValue, policy_pair};
//! use porin_kernel::{Datapath, Direction};
//! use porin_kernel::packet::Packet;
//! use std::net::Ipv4Addr;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let object = porin_ebpf::emit(&porin_ebpf::ObjectConfig::default())?;
//! let datapath = Datapath::load(&object)?;
//! // ipcache 10.0.2.0/24 -> identity 1000 (DATAPATH.md §2.1).
//! let peer = Identity::new(1000)?;
//! let prefix = Ipcache4Key::new(24, Ipv4Addr::new(10, 0, 2, 0))?;
//! datapath.install_ipcache(&[(prefix, IpcacheValue::new(peer))], &[])?;
//! // Policy: identity 1000 may reach TCP 80 (ingress); written to the idle slot, then flipped.
//! let key = Key::ingress().with_identity(peer).with_port_proto(6, 80)?;
//! datapath.install_policy(&[policy_pair(&key, &Entry::allow())])?;
//! let syn = Packet::tcp4(Ipv4Addr::new(10, 0, 2, 7), 40000, Ipv4Addr::new(10, 0, 1, 1), 80);
//! let verdict = datapath.decide(Direction::ToEndpoint, &syn.build())?;
//! assert!(verdict.passed());
//! // Kernel-measured average ns per packet over 10,000 runs (established flow).
//! let ns = datapath.bench(Direction::ToEndpoint, &syn.build(), 10_000)?;
//! # let _ = ns;
//! # Ok(())
//! # }
//! ```
//!
//! Everything here needs `CAP_BPF` (in practice: root, as `unprivileged_bpf_disabled` is set on
//! the machines porin targets). Nothing panics; every failure is a [`KernelError`] that names the
//! `bpf(2)` command, the object and the errno.

pub mod apply;
pub mod attach;
mod btf_reader;
pub mod datapath;
pub mod engine;
mod error;
pub mod events;
mod loader;
mod map;
pub mod packet;
pub mod pin;
mod program;
pub mod sys;

pub use apply::{DirectWrites, MapWriter, SlotMaps};
pub use btf_reader::MapDefinition;
pub use datapath::{
    COUNTERS_PER_DIRECTION, Counter, CounterSlot, CounterValue, Counters, Datapath, Direction,
    KernelVerdict, PolicySlot, Verdict, counter_slot,
};
pub use error::{BpfCommand, KernelError};
pub use events::{EventReader, EventSelection};
pub use loader::{LoadedObject, MapRelocation, ObjectFile, ProgramDefinition, spec_of};
pub use map::Map;
pub use program::{Program, RunStats, SK_BUFF_SIZE, SkBuff, TestRunOutput};
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
