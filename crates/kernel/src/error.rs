//! The one error type of the kernel layer.

use std::fmt;
use std::io;

/// A `bpf(2)` command, named in errors so a failure says which step broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BpfCommand {
    /// `BPF_MAP_CREATE`.
    MapCreate,
    /// `BPF_MAP_LOOKUP_ELEM`.
    MapLookupElem,
    /// `BPF_MAP_UPDATE_ELEM`.
    MapUpdateElem,
    /// `BPF_MAP_DELETE_ELEM`.
    MapDeleteElem,
    /// `BPF_MAP_GET_NEXT_KEY`.
    MapGetNextKey,
    /// `BPF_PROG_LOAD`.
    ProgLoad,
    /// `BPF_OBJ_PIN`.
    ObjPin,
    /// `BPF_OBJ_GET`.
    ObjGet,
    /// `BPF_PROG_TEST_RUN`.
    ProgTestRun,
    /// `BPF_BTF_LOAD`.
    BtfLoad,
    /// `BPF_OBJ_GET_INFO_BY_FD`.
    ObjGetInfoByFd,
    /// `BPF_LINK_CREATE`.
    LinkCreate,
    /// `BPF_LINK_UPDATE`.
    LinkUpdate,
}

impl BpfCommand {
    /// The command number in `enum bpf_cmd` (`include/uapi/linux/bpf.h`).
    #[cfg(target_os = "linux")]
    pub(crate) fn number(self) -> u32 {
        match self {
            Self::MapCreate => 0,
            Self::MapLookupElem => 1,
            Self::MapUpdateElem => 2,
            Self::MapDeleteElem => 3,
            Self::MapGetNextKey => 4,
            Self::ProgLoad => 5,
            Self::ObjPin => 6,
            Self::ObjGet => 7,
            Self::ProgTestRun => 10,
            Self::BtfLoad => 18,
            Self::ObjGetInfoByFd => 15,
            Self::LinkCreate => 28,
            Self::LinkUpdate => 29,
        }
    }
}

impl fmt::Display for BpfCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::MapCreate => "BPF_MAP_CREATE",
            Self::MapLookupElem => "BPF_MAP_LOOKUP_ELEM",
            Self::MapUpdateElem => "BPF_MAP_UPDATE_ELEM",
            Self::MapDeleteElem => "BPF_MAP_DELETE_ELEM",
            Self::MapGetNextKey => "BPF_MAP_GET_NEXT_KEY",
            Self::ProgLoad => "BPF_PROG_LOAD",
            Self::ObjPin => "BPF_OBJ_PIN",
            Self::ObjGet => "BPF_OBJ_GET",
            Self::ProgTestRun => "BPF_PROG_TEST_RUN",
            Self::BtfLoad => "BPF_BTF_LOAD",
            Self::ObjGetInfoByFd => "BPF_OBJ_GET_INFO_BY_FD",
            Self::LinkCreate => "BPF_LINK_CREATE",
            Self::LinkUpdate => "BPF_LINK_UPDATE",
        };
        f.write_str(name)
    }
}

/// Everything that can go wrong between porin and the kernel's eBPF subsystem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// A `bpf(2)` call returned an error other than a verifier rejection.
    #[error("`{command}` on `{object}` failed: {source}")]
    Syscall {
        /// The command that failed.
        command: BpfCommand,
        /// The map or program it was applied to (or `-` when none).
        object: String,
        /// The OS error, with its errno.
        #[source]
        source: io::Error,
    },
    /// The verifier refused a program; `log` is its full text.
    #[error("the verifier rejected program `{program}` ({source}); verifier log:\n{log}")]
    VerifierRejected {
        /// The program's name.
        program: String,
        /// The OS error (usually `EACCES` or `EINVAL`).
        #[source]
        source: io::Error,
        /// The verifier's log (level 1).
        log: String,
    },
    /// The kernel refused a BTF blob; `log` is its BTF verifier text.
    #[error("the kernel rejected the object's BTF ({source}); BTF log:\n{log}")]
    BtfRejected {
        /// The OS error.
        #[source]
        source: io::Error,
        /// The kernel's BTF log.
        log: String,
    },
    /// porin runs on a system without `bpf(2)` (only Linux has it): every kernel operation fails
    /// with this, whatever the privileges.
    #[error(
        "`{command}` on `{object}`: the kernel engine needs Linux (there is no bpf(2) on {os})",
        os = std::env::consts::OS
    )]
    NeedsLinux {
        /// The command that could not be issued.
        command: BpfCommand,
        /// The map or program it was meant for.
        object: String,
    },
    /// A key or value passed to a map had the wrong length.
    #[error("{what} for map `{map}` has {given} bytes, the map expects {expected}")]
    WrongSize {
        /// `key` or `value`.
        what: &'static str,
        /// The map's name.
        map: String,
        /// The length passed.
        given: usize,
        /// The length the map was created with.
        expected: usize,
    },
    /// A buffer is larger than the `u32` lengths `bpf(2)` takes.
    #[error("{what} of {len} bytes is too large for the bpf() interface")]
    TooLarge {
        /// Which buffer.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A name or path contained an interior NUL byte.
    #[error("`{0}` contains a NUL byte")]
    NulInName(String),
    /// The number of possible CPUs could not be read (needed for per-CPU maps).
    #[error("cannot read the possible CPU list from `{path}`: {detail}")]
    PossibleCpus {
        /// The sysfs path read.
        path: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The ELF object could not be turned into kernel objects.
    #[error("cannot load the eBPF object: {0}")]
    Object(String),
    /// A named map or program is not in the loaded object.
    #[error("the object has no {kind} named `{name}`")]
    Missing {
        /// `map` or `program`.
        kind: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A datapath map holds something that contradicts `DATAPATH.md`.
    #[error("datapath contract violated: {0}")]
    Contract(String),
    /// Mapping a ring buffer map's pages (`mmap(2)`) failed.
    #[error("mmap of ring buffer `{map}` failed: {source}")]
    Mmap {
        /// The map.
        map: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Joining a network namespace (`setns(2)`) failed.
    #[error("cannot join the network namespace `{path}`: {source}")]
    Netns {
        /// The namespace file (e.g. `/run/netns/NAME`).
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Filling the inactive policy slot failed part-way (step 1 of the A/B replacement,
    /// DATAPATH.md §2.3). The slot was never activated: the enforced policy is unchanged.
    #[error(
        "writing policy entry {index} of {count} into the inactive map `{map}` failed, so it \
         was not activated and the previously enforced policy stays in force: {source}"
    )]
    PolicyWrite {
        /// The inactive policy map.
        map: String,
        /// The 0-based index of the entry whose write failed (`index` entries were written).
        index: usize,
        /// The number of entries of the new policy.
        count: usize,
        /// The failed write (with its errno).
        #[source]
        source: Box<KernelError>,
    },
    /// A write of an in-place difference failed; the writes before it were undone in reverse
    /// order, so the live map holds exactly the entries it held before.
    #[error(
        "write {index} of {count} of the policy difference to the live map `{map}` failed; \
         the {index} write(s) before it were rolled back and the map holds the previous \
         policy: {source}"
    )]
    DiffRolledBack {
        /// The live policy map.
        map: String,
        /// The 0-based index of the failed write.
        index: usize,
        /// The number of writes of the difference.
        count: usize,
        /// The failed write (with its errno).
        #[source]
        source: Box<KernelError>,
    },
    /// A write of an in-place difference failed and undoing the writes before it failed too:
    /// the live map is in neither the old nor the new state. The agent must replace the
    /// whole policy (e.g. through the A/B switch) before trusting the map again.
    #[error(
        "write {index} of {count} of the policy difference to the live map `{map}` failed \
         ({source}), and rolling back failed at undo step {undo_index} (reverting write \
         {undo_index}): {rollback}; the map holds a mix of the old and new policy"
    )]
    RollbackFailed {
        /// The live policy map.
        map: String,
        /// The 0-based index of the failed write.
        index: usize,
        /// The number of writes of the difference.
        count: usize,
        /// The failed write.
        #[source]
        source: Box<KernelError>,
        /// The index of the write whose undo failed.
        undo_index: usize,
        /// The failed undo write.
        rollback: Box<KernelError>,
    },
}

impl KernelError {
    /// The errno of the underlying OS error, when there is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Syscall { source, .. }
            | Self::VerifierRejected { source, .. }
            | Self::BtfRejected { source, .. } => source.raw_os_error(),
            Self::PolicyWrite { source, .. }
            | Self::DiffRolledBack { source, .. }
            | Self::RollbackFailed { source, .. } => source.errno(),
            _ => None,
        }
    }

    /// True when the error means "this process may not use eBPF here" (no privilege, or no
    /// `bpf(2)` at all) rather than a bug: tests report SKIPPED outside CI on these. False for
    /// [`KernelError::NeedsLinux`]: no privilege would help there.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self.errno(),
            Some(libc::EPERM | libc::EACCES | libc::ENOSYS)
        ) && matches!(self, Self::Syscall { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_linux_names_the_command_and_is_no_privilege_problem() {
        let error = KernelError::NeedsLinux {
            command: BpfCommand::MapCreate,
            object: "porin_probe".to_owned(),
        };
        let text = error.to_string();
        assert!(
            text.starts_with("`BPF_MAP_CREATE` on `porin_probe`: the kernel engine needs Linux"),
            "{text}"
        );
        assert!(text.contains(std::env::consts::OS), "{text}");
        assert_eq!(error.errno(), None);
        assert!(!error.is_unavailable());
    }
}
