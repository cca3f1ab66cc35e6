//! The `bpf(2)` system call, wrapped safely.
//!
//! This is the only module of porin-kernel that contains `unsafe` code. Each command has its own
//! `#[repr(C)]` attribute struct laid out exactly like the matching member of `union bpf_attr`
//! (`include/uapi/linux/bpf.h`) up to the last field porin uses, with every padding byte spelled
//! out as a zeroed field: the kernel rejects attributes whose unknown tail is not zero, and it
//! reads only `size` bytes, so a shorter struct is valid on every kernel that knows the command.
//!
//! Pointers handed to the kernel always come from live Rust slices whose lengths are passed
//! alongside, so the kernel never reads or writes past a buffer.
//!
//! `bpf(2)` exists only on Linux. Elsewhere (macOS, for `porin lint` and the other commands that
//! never touch the kernel) the module still builds: the one system call is replaced by a twin
//! that fails, and every command returns [`KernelError::NeedsLinux`].

#![allow(
    unsafe_code,
    reason = "bpf(2) has no safe interface; this module is the narrow FFI boundary"
)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::error::{BpfCommand, KernelError};

/// `BPF_OBJ_NAME_LEN`: object names are at most 15 bytes plus NUL.
const OBJ_NAME_LEN: usize = 16;

/// How often an `EAGAIN`/`EINTR` answer is retried (libbpf retries `BPF_PROG_LOAD` 5 times).
#[cfg(target_os = "linux")]
const RETRIES: usize = 5;

/// Size of the verifier log buffer used when a load fails (16 MiB, the kernel's old maximum).
const VERIFIER_LOG_SIZE: usize = 16 * 1024 * 1024;

/// A map type (`enum bpf_map_type`). A newtype rather than an enum, because an object file may
/// name any type and the kernel is the judge of which it supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MapType(pub u32);

impl MapType {
    /// `BPF_MAP_TYPE_HASH`.
    pub const HASH: Self = Self(1);
    /// `BPF_MAP_TYPE_ARRAY`.
    pub const ARRAY: Self = Self(2);
    /// `BPF_MAP_TYPE_PROG_ARRAY`.
    pub const PROG_ARRAY: Self = Self(3);
    /// `BPF_MAP_TYPE_PERCPU_HASH`.
    pub const PERCPU_HASH: Self = Self(5);
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`.
    pub const PERCPU_ARRAY: Self = Self(6);
    /// `BPF_MAP_TYPE_LRU_HASH`.
    pub const LRU_HASH: Self = Self(9);
    /// `BPF_MAP_TYPE_LRU_PERCPU_HASH`.
    pub const LRU_PERCPU_HASH: Self = Self(10);
    /// `BPF_MAP_TYPE_LPM_TRIE`.
    pub const LPM_TRIE: Self = Self(11);
    /// `BPF_MAP_TYPE_ARRAY_OF_MAPS`.
    pub const ARRAY_OF_MAPS: Self = Self(12);
    /// `BPF_MAP_TYPE_HASH_OF_MAPS`.
    pub const HASH_OF_MAPS: Self = Self(13);
    /// `BPF_MAP_TYPE_RINGBUF`: no key or value; read through [`RingBuffer`].
    pub const RINGBUF: Self = Self(27);

    /// True for the per-CPU types, whose values are one slot per possible CPU in userspace.
    pub fn is_per_cpu(self) -> bool {
        matches!(
            self,
            Self::PERCPU_HASH | Self::PERCPU_ARRAY | Self::LRU_PERCPU_HASH
        )
    }

    /// True for the map-in-map types, whose userspace values are inner map fds (update) or ids
    /// (lookup), 4 bytes each.
    pub fn is_map_of_maps(self) -> bool {
        matches!(self, Self::ARRAY_OF_MAPS | Self::HASH_OF_MAPS)
    }
}

/// `BPF_F_NO_PREALLOC`: required by `LPM_TRIE`, optional for hash maps.
pub const BPF_F_NO_PREALLOC: u32 = 1;

/// A program type (`enum bpf_prog_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProgramType(pub u32);

impl ProgramType {
    /// `BPF_PROG_TYPE_SOCKET_FILTER`.
    pub const SOCKET_FILTER: Self = Self(1);
    /// `BPF_PROG_TYPE_SCHED_CLS`: TC classifiers, porin's datapath.
    pub const SCHED_CLS: Self = Self(3);
}

/// Flags of `BPF_MAP_UPDATE_ELEM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpdateFlags {
    /// `BPF_ANY`: create or overwrite.
    #[default]
    Any,
    /// `BPF_NOEXIST`: create only.
    NoExist,
    /// `BPF_EXIST`: overwrite only.
    Exist,
}

impl UpdateFlags {
    fn bits(self) -> u64 {
        match self {
            Self::Any => 0,
            Self::NoExist => 1,
            Self::Exist => 2,
        }
    }
}

/// What `BPF_MAP_CREATE` needs to make a map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSpec {
    /// The map type.
    pub map_type: MapType,
    /// Key size in bytes.
    pub key_size: u32,
    /// Value size in bytes (per CPU for per-CPU maps; 4 for map-in-map types).
    pub value_size: u32,
    /// Capacity.
    pub max_entries: u32,
    /// `map_flags` (e.g. [`BPF_F_NO_PREALLOC`]).
    pub map_flags: u32,
}

/// `union bpf_attr` for `BPF_MAP_CREATE`, up to `map_extra`.
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; OBJ_NAME_LEN],
    map_ifindex: u32,
    btf_fd: u32,
    btf_key_type_id: u32,
    btf_value_type_id: u32,
    btf_vmlinux_value_type_id: u32,
    map_extra: u64,
}

/// `union bpf_attr` for the `BPF_MAP_*_ELEM` and `BPF_MAP_GET_NEXT_KEY` commands.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    pad0: u32,
    key: u64,
    value_or_next_key: u64,
    flags: u64,
}

/// `union bpf_attr` for `BPF_PROG_LOAD`, up to `attach_btf_id`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; OBJ_NAME_LEN],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
}

/// `union bpf_attr` for `BPF_PROG_TEST_RUN`, up to `batch_size`.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    pad0: u32,
}

/// `union bpf_attr` for `BPF_OBJ_PIN` / `BPF_OBJ_GET`.
#[repr(C)]
#[derive(Default)]
struct ObjAttr {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
    path_fd: i32,
    pad0: u32,
}

/// `union bpf_attr` for `BPF_BTF_LOAD`.
#[repr(C)]
#[derive(Default)]
struct BtfLoadAttr {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
    pad0: u32,
}

/// `union bpf_attr` for `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `union bpf_attr` for `BPF_LINK_CREATE` with the `tcx` member of its union (kernel 6.6+).
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    relative_fd: u32,
    pad0: u32,
    expected_revision: u64,
}

/// `union bpf_attr` for `BPF_LINK_UPDATE`.
#[repr(C)]
#[derive(Default)]
struct LinkUpdateAttr {
    link_fd: u32,
    new_prog_fd: u32,
    flags: u32,
    old_prog_fd: u32,
}

/// The attribute structs above: plain `repr(C)` data without implicit padding, so passing their
/// address and size to the kernel is sound.
trait BpfAttr {}
impl BpfAttr for MapCreateAttr {}
impl BpfAttr for MapElemAttr {}
impl BpfAttr for ProgLoadAttr {}
impl BpfAttr for TestRunAttr {}
impl BpfAttr for ObjAttr {}
impl BpfAttr for BtfLoadAttr {}
impl BpfAttr for InfoAttr {}
impl BpfAttr for LinkCreateAttr {}
impl BpfAttr for LinkUpdateAttr {}

/// Calls `bpf(cmd, attr, sizeof attr)`, retrying `EAGAIN`/`EINTR` a few times.
#[cfg(target_os = "linux")]
fn bpf_call<A: BpfAttr>(command: BpfCommand, attr: &mut A) -> io::Result<i64> {
    let size = std::mem::size_of::<A>();
    let mut attempt = 0;
    loop {
        // SAFETY: `attr` is a live, exclusively borrowed `repr(C)` struct of exactly `size` bytes
        // whose layout matches the kernel's `union bpf_attr` member for `command` (see the
        // module docs); every pointer stored inside it was taken from a slice that the caller
        // keeps alive for the duration of this call, with the slice length stored next to it.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                libc::c_long::from(command.number()),
                std::ptr::from_mut(attr).cast::<libc::c_void>(),
                size as libc::c_uint,
            )
        };
        if ret >= 0 {
            return Ok(ret);
        }
        let error = io::Error::last_os_error();
        let transient = matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::EINTR));
        attempt += 1;
        if !transient || attempt >= RETRIES {
            return Err(error);
        }
    }
}

/// Wraps a new file descriptor returned by the kernel.
fn owned_fd(ret: i64, command: BpfCommand, object: &str) -> Result<OwnedFd, KernelError> {
    let raw = RawFd::try_from(ret).map_err(|_| KernelError::Syscall {
        command,
        object: object.to_owned(),
        source: io::Error::other(format!("kernel returned `{ret}`, not a file descriptor")),
    })?;
    // SAFETY: for the fd-returning commands (MAP_CREATE, PROG_LOAD, OBJ_GET, BTF_LOAD) a
    // non-negative return value is a freshly opened descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn raw_fd(fd: BorrowedFd<'_>) -> u32 {
    // Valid fds are non-negative, so this conversion is lossless.
    fd.as_raw_fd().unsigned_abs()
}

fn len_u32(what: &'static str, len: usize) -> Result<u32, KernelError> {
    u32::try_from(len).map_err(|_| KernelError::TooLarge { what, len })
}

/// Copies `name` into a kernel object name: at most 15 bytes of `[A-Za-z0-9_.]`, other bytes
/// replaced with `_`, NUL-terminated (the kernel rejects other characters).
fn object_name(name: &str) -> [u8; OBJ_NAME_LEN] {
    let mut out = [0u8; OBJ_NAME_LEN];
    for (slot, byte) in out.iter_mut().zip(name.bytes().take(OBJ_NAME_LEN - 1)) {
        *slot = if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'.' {
            byte
        } else {
            b'_'
        };
    }
    out
}

/// The non-Linux twin of `bpf_call`: there is no `bpf(2)`, so every command fails the way it
/// does on a kernel without `CONFIG_BPF_SYSCALL` (`ENOSYS`); [`syscall_error`] then says why.
#[cfg(not(target_os = "linux"))]
fn bpf_call<A: BpfAttr>(_command: BpfCommand, _attr: &mut A) -> io::Result<i64> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// The error of a failed command. Every failed `bpf(2)` call that is not a verifier or BTF
/// rejection ends here, so off Linux this is the one place that names the real reason.
fn syscall_error(command: BpfCommand, object: &str, source: io::Error) -> KernelError {
    if cfg!(not(target_os = "linux")) {
        return KernelError::NeedsLinux {
            command,
            object: object.to_owned(),
        };
    }
    KernelError::Syscall {
        command,
        object: object.to_owned(),
        source,
    }
}

/// `BPF_MAP_CREATE`. `inner_map` is the template map for `ARRAY_OF_MAPS`/`HASH_OF_MAPS`.
pub fn map_create(
    name: &str,
    spec: &MapSpec,
    inner_map: Option<BorrowedFd<'_>>,
) -> Result<OwnedFd, KernelError> {
    let mut attr = MapCreateAttr {
        map_type: spec.map_type.0,
        key_size: spec.key_size,
        value_size: spec.value_size,
        max_entries: spec.max_entries,
        map_flags: spec.map_flags,
        inner_map_fd: inner_map.map_or(0, raw_fd),
        map_name: object_name(name),
        ..MapCreateAttr::default()
    };
    let ret = bpf_call(BpfCommand::MapCreate, &mut attr)
        .map_err(|e| syscall_error(BpfCommand::MapCreate, name, e))?;
    owned_fd(ret, BpfCommand::MapCreate, name)
}

/// `BPF_MAP_UPDATE_ELEM`. The caller has checked `key`/`value` against the map's sizes.
pub fn map_update(
    map: BorrowedFd<'_>,
    name: &str,
    key: &[u8],
    value: &[u8],
    flags: UpdateFlags,
) -> Result<(), KernelError> {
    let mut attr = MapElemAttr {
        map_fd: raw_fd(map),
        key: key.as_ptr() as u64,
        value_or_next_key: value.as_ptr() as u64,
        flags: flags.bits(),
        ..MapElemAttr::default()
    };
    bpf_call(BpfCommand::MapUpdateElem, &mut attr)
        .map(drop)
        .map_err(|e| syscall_error(BpfCommand::MapUpdateElem, name, e))
}

/// `BPF_MAP_LOOKUP_ELEM` into `value` (which must hold the map's full userspace value size).
/// Returns `false` when the key is absent (`ENOENT`).
pub fn map_lookup(
    map: BorrowedFd<'_>,
    name: &str,
    key: &[u8],
    value: &mut [u8],
) -> Result<bool, KernelError> {
    let mut attr = MapElemAttr {
        map_fd: raw_fd(map),
        key: key.as_ptr() as u64,
        value_or_next_key: value.as_mut_ptr() as u64,
        ..MapElemAttr::default()
    };
    match bpf_call(BpfCommand::MapLookupElem, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(syscall_error(BpfCommand::MapLookupElem, name, e)),
    }
}

/// `BPF_MAP_DELETE_ELEM`. Returns `false` when the key was absent (`ENOENT`).
pub fn map_delete(map: BorrowedFd<'_>, name: &str, key: &[u8]) -> Result<bool, KernelError> {
    let mut attr = MapElemAttr {
        map_fd: raw_fd(map),
        key: key.as_ptr() as u64,
        ..MapElemAttr::default()
    };
    match bpf_call(BpfCommand::MapDeleteElem, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(syscall_error(BpfCommand::MapDeleteElem, name, e)),
    }
}

/// `BPF_MAP_GET_NEXT_KEY`: writes the key after `key` (the first key when `None`) into
/// `next_key`; returns `false` at the end of the map.
pub fn map_get_next_key(
    map: BorrowedFd<'_>,
    name: &str,
    key: Option<&[u8]>,
    next_key: &mut [u8],
) -> Result<bool, KernelError> {
    let mut attr = MapElemAttr {
        map_fd: raw_fd(map),
        key: key.map_or(0, |k| k.as_ptr() as u64),
        value_or_next_key: next_key.as_mut_ptr() as u64,
        ..MapElemAttr::default()
    };
    match bpf_call(BpfCommand::MapGetNextKey, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(syscall_error(BpfCommand::MapGetNextKey, name, e)),
    }
}

/// `BPF_PROG_LOAD` of `insns` (raw 8-byte instructions). On failure the program is loaded again
/// with a level-1 verifier log, and the log's text is returned in
/// [`KernelError::VerifierRejected`].
pub fn prog_load(
    name: &str,
    program_type: ProgramType,
    insns: &[u8],
    license: &str,
) -> Result<OwnedFd, KernelError> {
    if insns.is_empty() || !insns.len().is_multiple_of(8) {
        return Err(KernelError::Object(format!(
            "program `{name}` has {} bytes of code, not a non-empty multiple of 8",
            insns.len()
        )));
    }
    let insn_cnt = len_u32("instruction count", insns.len() / 8)?;
    let license = CString::new(license).map_err(|_| KernelError::NulInName(license.to_owned()))?;
    let base = ProgLoadAttr {
        prog_type: program_type.0,
        insn_cnt,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: object_name(name),
        ..ProgLoadAttr::default()
    };
    let mut attr = base;
    let first_error = match bpf_call(BpfCommand::ProgLoad, &mut attr) {
        Ok(ret) => return owned_fd(ret, BpfCommand::ProgLoad, name),
        Err(e) => e,
    };
    if matches!(
        first_error.raw_os_error(),
        Some(libc::EPERM | libc::ENOSYS | libc::E2BIG)
    ) {
        return Err(syscall_error(BpfCommand::ProgLoad, name, first_error));
    }
    // Load again with a log so the error says why. The log buffer outlives the call.
    let mut log = vec![0u8; VERIFIER_LOG_SIZE];
    let mut attr = ProgLoadAttr {
        log_level: 1,
        log_size: len_u32("verifier log", log.len())?,
        log_buf: log.as_mut_ptr() as u64,
        ..base
    };
    match bpf_call(BpfCommand::ProgLoad, &mut attr) {
        // A transient first failure that the second attempt survived.
        Ok(ret) => owned_fd(ret, BpfCommand::ProgLoad, name),
        Err(e) => Err(KernelError::VerifierRejected {
            program: name.to_owned(),
            source: e,
            log: c_text(&log),
        }),
    }
}

/// `BPF_LOG_STATS`: the verifier prints only its statistics (processed instructions, states).
const LOG_STATS: u32 = 4;

/// Loads like [`prog_load`] and also returns the verifier's statistics text (`BPF_LOG_STATS`,
/// e.g. `processed 1234 insns (limit 1000000) max_states_per_insn 2 total_states 80 ...`), which
/// tells how close a program is to the verifier's complexity limit.
pub fn prog_load_with_stats(
    name: &str,
    program_type: ProgramType,
    insns: &[u8],
    license: &str,
) -> Result<(OwnedFd, String), KernelError> {
    if insns.is_empty() || !insns.len().is_multiple_of(8) {
        return Err(KernelError::Object(format!(
            "program `{name}` has {} bytes of code, not a non-empty multiple of 8",
            insns.len()
        )));
    }
    let c_license =
        CString::new(license).map_err(|_| KernelError::NulInName(license.to_owned()))?;
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = ProgLoadAttr {
        prog_type: program_type.0,
        insn_cnt: len_u32("instruction count", insns.len() / 8)?,
        insns: insns.as_ptr() as u64,
        license: c_license.as_ptr() as u64,
        prog_name: object_name(name),
        log_level: LOG_STATS,
        log_size: len_u32("verifier log", log.len())?,
        log_buf: log.as_mut_ptr() as u64,
        ..ProgLoadAttr::default()
    };
    match bpf_call(BpfCommand::ProgLoad, &mut attr) {
        Ok(ret) => Ok((owned_fd(ret, BpfCommand::ProgLoad, name)?, c_text(&log))),
        // Rejected: load again the ordinary way, which returns the full level-1 log.
        Err(_) => prog_load(name, program_type, insns, license).map(|fd| (fd, c_text(&log))),
    }
}

/// The text before the first NUL of a kernel log buffer.
fn c_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end])
        .trim_end()
        .to_owned()
}

/// What `BPF_PROG_TEST_RUN` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTestRun {
    /// The program's return value (the last run's).
    pub retval: u32,
    /// Average run time per repetition, in nanoseconds, as the kernel measured it.
    pub duration_ns: u32,
    /// The packet after the program ran (it may have rewritten it).
    pub data_out: Vec<u8>,
    /// The context after the run (empty when no context was passed).
    pub ctx_out: Vec<u8>,
}

/// `BPF_PROG_TEST_RUN` on `data` with an optional context (`struct __sk_buff` for TC), repeated
/// `repeat` times (0 and 1 both mean once).
pub fn prog_test_run(
    program: BorrowedFd<'_>,
    name: &str,
    data: &[u8],
    ctx_in: Option<&[u8]>,
    repeat: u32,
) -> Result<RawTestRun, KernelError> {
    // Room for a program that grows the packet (e.g. pushes a header); the kernel answers
    // ENOSPC when the output does not fit.
    let mut data_out = vec![0u8; data.len() + 512];
    let mut ctx_out = vec![0u8; ctx_in.map_or(0, <[u8]>::len)];
    let mut attr = TestRunAttr {
        prog_fd: raw_fd(program),
        data_size_in: len_u32("test-run packet", data.len())?,
        data_size_out: len_u32("test-run output buffer", data_out.len())?,
        data_in: data.as_ptr() as u64,
        data_out: data_out.as_mut_ptr() as u64,
        repeat,
        ..TestRunAttr::default()
    };
    if let Some(ctx) = ctx_in {
        attr.ctx_size_in = len_u32("test-run context", ctx.len())?;
        attr.ctx_in = ctx.as_ptr() as u64;
        attr.ctx_size_out = len_u32("test-run context", ctx_out.len())?;
        attr.ctx_out = ctx_out.as_mut_ptr() as u64;
    }
    bpf_call(BpfCommand::ProgTestRun, &mut attr)
        .map_err(|e| syscall_error(BpfCommand::ProgTestRun, name, e))?;
    data_out.truncate(attr.data_size_out as usize);
    ctx_out.truncate(attr.ctx_size_out as usize);
    Ok(RawTestRun {
        retval: attr.retval,
        duration_ns: attr.duration,
        data_out,
        ctx_out,
    })
}

/// `BPF_OBJ_PIN`: pins a map or program fd at `path` in a mounted bpffs.
pub fn obj_pin(fd: BorrowedFd<'_>, path: &str) -> Result<(), KernelError> {
    let c_path = CString::new(path).map_err(|_| KernelError::NulInName(path.to_owned()))?;
    let mut attr = ObjAttr {
        pathname: c_path.as_ptr() as u64,
        bpf_fd: raw_fd(fd),
        ..ObjAttr::default()
    };
    bpf_call(BpfCommand::ObjPin, &mut attr)
        .map(drop)
        .map_err(|e| syscall_error(BpfCommand::ObjPin, path, e))
}

/// `BPF_OBJ_GET`: opens a pinned map or program.
pub fn obj_get(path: &str) -> Result<OwnedFd, KernelError> {
    let c_path = CString::new(path).map_err(|_| KernelError::NulInName(path.to_owned()))?;
    let mut attr = ObjAttr {
        pathname: c_path.as_ptr() as u64,
        ..ObjAttr::default()
    };
    let ret = bpf_call(BpfCommand::ObjGet, &mut attr)
        .map_err(|e| syscall_error(BpfCommand::ObjGet, path, e))?;
    owned_fd(ret, BpfCommand::ObjGet, path)
}

/// `BPF_BTF_LOAD`: hands a raw `.BTF` blob to the kernel's BTF verifier. On failure the blob is
/// loaded again with a log, returned in [`KernelError::BtfRejected`].
pub fn btf_load(btf: &[u8]) -> Result<OwnedFd, KernelError> {
    let btf_size = len_u32("BTF blob", btf.len())?;
    let mut attr = BtfLoadAttr {
        btf: btf.as_ptr() as u64,
        btf_size,
        ..BtfLoadAttr::default()
    };
    let first_error = match bpf_call(BpfCommand::BtfLoad, &mut attr) {
        Ok(ret) => return owned_fd(ret, BpfCommand::BtfLoad, ".BTF"),
        Err(e) => e,
    };
    if matches!(first_error.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)) {
        return Err(syscall_error(BpfCommand::BtfLoad, ".BTF", first_error));
    }
    let mut log = vec![0u8; 1024 * 1024];
    let mut attr = BtfLoadAttr {
        btf: btf.as_ptr() as u64,
        btf_size,
        btf_log_buf: log.as_mut_ptr() as u64,
        btf_log_size: len_u32("BTF log", log.len())?,
        btf_log_level: 1,
        ..BtfLoadAttr::default()
    };
    match bpf_call(BpfCommand::BtfLoad, &mut attr) {
        Ok(ret) => owned_fd(ret, BpfCommand::BtfLoad, ".BTF"),
        Err(e) => Err(KernelError::BtfRejected {
            source: e,
            log: c_text(&log),
        }),
    }
}

/// The little-endian `N`-byte field at `offset` of an info struct [`obj_get_info`] wrote
/// `written` bytes of: zeros where the kernel wrote nothing (an older kernel's shorter struct).
pub fn info_field<const N: usize>(info: &[u8], written: usize, offset: usize) -> [u8; N] {
    info.get(offset..offset + N)
        .filter(|_| offset + N <= written)
        .and_then(|b| b.try_into().ok())
        .unwrap_or([0; N])
}

/// `BPF_OBJ_GET_INFO_BY_FD`: the kernel fills `info` (a `struct bpf_map_info`,
/// `bpf_prog_info` or `bpf_link_info`, whichever `fd` is) up to its length; returns the number of
/// bytes the kernel wrote.
pub fn obj_get_info(
    fd: BorrowedFd<'_>,
    object: &str,
    info: &mut [u8],
) -> Result<usize, KernelError> {
    let mut attr = InfoAttr {
        bpf_fd: raw_fd(fd),
        info_len: len_u32("object info", info.len())?,
        info: info.as_mut_ptr() as u64,
    };
    bpf_call(BpfCommand::ObjGetInfoByFd, &mut attr)
        .map_err(|e| syscall_error(BpfCommand::ObjGetInfoByFd, object, e))?;
    Ok((attr.info_len as usize).min(info.len()))
}

/// `BPF_LINK_CREATE` of program `program` on the device `ifindex` at `attach_type` (for tcx:
/// `BPF_TCX_INGRESS` 46 / `BPF_TCX_EGRESS` 47), appended after the device's other programs.
/// Returns the link's fd: the attachment lives as long as the link (its fds and pins).
pub fn link_create(
    program: BorrowedFd<'_>,
    object: &str,
    ifindex: u32,
    attach_type: u32,
) -> Result<OwnedFd, KernelError> {
    let mut attr = LinkCreateAttr {
        prog_fd: raw_fd(program),
        target_ifindex: ifindex,
        attach_type,
        ..LinkCreateAttr::default()
    };
    let ret = bpf_call(BpfCommand::LinkCreate, &mut attr)
        .map_err(|e| syscall_error(BpfCommand::LinkCreate, object, e))?;
    owned_fd(ret, BpfCommand::LinkCreate, object)
}

/// `BPF_LINK_UPDATE`: atomically replaces the program of `link` with `program` (packets see
/// either the old or the new program, never none).
pub fn link_update(
    link: BorrowedFd<'_>,
    program: BorrowedFd<'_>,
    object: &str,
) -> Result<(), KernelError> {
    let mut attr = LinkUpdateAttr {
        link_fd: raw_fd(link),
        new_prog_fd: raw_fd(program),
        ..LinkUpdateAttr::default()
    };
    bpf_call(BpfCommand::LinkUpdate, &mut attr)
        .map(drop)
        .map_err(|e| syscall_error(BpfCommand::LinkUpdate, object, e))
}

/// The index of the network device `name` in the calling thread's network namespace
/// (`if_nametoindex(3)`); `None` when there is no such device.
pub fn interface_index(name: &str) -> Result<Option<u32>, KernelError> {
    let c_name = CString::new(name).map_err(|_| KernelError::NulInName(name.to_owned()))?;
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `c_name` is a live NUL-terminated string for the duration of the call;
        // `if_nametoindex` only reads it.
        let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
        Ok((index != 0).then_some(index))
    }
    #[cfg(not(target_os = "linux"))]
    {
        drop(c_name);
        Err(KernelError::NeedsLinux {
            command: BpfCommand::LinkCreate,
            object: name.to_owned(),
        })
    }
}

/// Moves the calling thread into the network namespace whose file is `path` (`setns(2)` with
/// `CLONE_NEWNET`; e.g. `/run/netns/NAME`). Only this thread changes namespace.
pub fn join_netns(path: &str) -> Result<(), KernelError> {
    let error = |source| KernelError::Netns {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(error)?;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: `file` is an open namespace file for the duration of the call; setns reads
        // only the fd and changes only the calling thread's network namespace.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(error(io::Error::last_os_error()));
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        drop(file);
        Err(KernelError::NeedsLinux {
            command: BpfCommand::LinkCreate,
            object: path.to_owned(),
        })
    }
}

/// `BPF_RINGBUF_BUSY_BIT`: the record is still being written.
const RINGBUF_BUSY: u32 = 1 << 31;
/// `BPF_RINGBUF_DISCARD_BIT`: the producer discarded the record.
const RINGBUF_DISCARD: u32 = 1 << 30;
/// `BPF_RINGBUF_HDR_SZ`: the 8-byte header before each record.
const RINGBUF_HEADER: usize = 8;

/// The consumer side of a `BPF_MAP_TYPE_RINGBUF` map, mapped into this process the way
/// libbpf's `ring_buffer__new` maps it (`kernel/bpf/ringbuf.c`): one read-write page holding
/// `consumer_pos`, then read-only the page holding `producer_pos` followed by the data area,
/// which the kernel maps twice in a row so a record that wraps is contiguous.
///
/// Both mappings stay valid for the life of this value (the kernel keeps the map alive while
/// it is mapped, even after its fd is closed) and are unmapped on drop. The positions are read
/// and written with atomic acquire/release operations, as the kernel's producer expects.
#[derive(Debug)]
pub struct RingBuffer {
    name: String,
    consumer: std::ptr::NonNull<libc::c_void>,
    consumer_len: usize,
    producer: std::ptr::NonNull<libc::c_void>,
    producer_len: usize,
    page: usize,
    data_len: usize,
}

impl RingBuffer {
    /// Maps the ring buffer `map` (whose `max_entries`, the data size, is `data_len`: a power of
    /// two and a multiple of the page size, which the kernel checked at creation).
    #[cfg(target_os = "linux")]
    pub fn map(map: BorrowedFd<'_>, name: &str, data_len: usize) -> Result<Self, KernelError> {
        let fail = |source| KernelError::Mmap {
            map: name.to_owned(),
            source,
        };
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| fail(io::Error::other("no page size")))?;
        if page == 0 || !data_len.is_power_of_two() || !data_len.is_multiple_of(page) {
            return Err(fail(io::Error::other(format!(
                "data size {data_len} is not a power-of-two multiple of the page size {page}"
            ))));
        }
        let producer_len = page + 2 * data_len;
        let offset = libc::off_t::try_from(page).map_err(|_| fail(io::Error::other("page")))?;
        // SAFETY: a fresh shared mapping of `page` bytes of the map at offset 0 (the consumer
        // page, which the kernel allows to be mapped writable); no existing memory is touched.
        let consumer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                0,
            )
        };
        if consumer == libc::MAP_FAILED {
            return Err(fail(io::Error::last_os_error()));
        }
        // SAFETY: as above, read-only, the producer page and the double-mapped data area.
        let producer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                producer_len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                offset,
            )
        };
        if producer == libc::MAP_FAILED {
            let error = io::Error::last_os_error();
            // SAFETY: `consumer` is the mapping of `page` bytes created above.
            unsafe { libc::munmap(consumer, page) };
            return Err(fail(error));
        }
        match (
            std::ptr::NonNull::new(consumer),
            std::ptr::NonNull::new(producer),
        ) {
            (Some(consumer), Some(producer)) => Ok(Self {
                name: name.to_owned(),
                consumer,
                consumer_len: page,
                producer,
                producer_len,
                page,
                data_len,
            }),
            _ => Err(fail(io::Error::other("mmap returned NULL"))),
        }
    }

    /// Off Linux there is no ring buffer to map.
    #[cfg(not(target_os = "linux"))]
    pub fn map(_map: BorrowedFd<'_>, name: &str, _data_len: usize) -> Result<Self, KernelError> {
        Err(KernelError::Mmap {
            map: name.to_owned(),
            source: io::Error::from_raw_os_error(libc::ENOSYS),
        })
    }

    fn consumer_pos(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: the consumer page is mapped for the life of `self`, page-aligned (so 8-byte
        // aligned), and its first 8 bytes are the kernel's `consumer_pos`, which only this
        // consumer writes; AtomicU64 has the layout of u64.
        unsafe {
            &*self
                .consumer
                .as_ptr()
                .cast::<std::sync::atomic::AtomicU64>()
        }
    }

    fn producer_pos(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: as `consumer_pos`, for the producer page's `producer_pos` (read only).
        unsafe {
            &*self
                .producer
                .as_ptr()
                .cast::<std::sync::atomic::AtomicU64>()
        }
    }

    /// Takes every committed record out of the ring (discarded ones are skipped) and returns
    /// their bytes, oldest first; stops at a record the producer is still writing. Never
    /// blocks.
    pub fn drain(&mut self) -> Vec<Vec<u8>> {
        use std::sync::atomic::{AtomicU32, Ordering};
        let mut out = Vec::new();
        let mask = (self.data_len - 1) as u64;
        let mut consumer = self.consumer_pos().load(Ordering::Acquire);
        loop {
            let producer = self.producer_pos().load(Ordering::Acquire);
            if consumer >= producer {
                break;
            }
            // `consumer & mask` < data_len, and the data area is mapped twice, so the header
            // and a record of at most data_len bytes after it are inside the mapping.
            let at = self.page + usize::try_from(consumer & mask).unwrap_or(0);
            // SAFETY: `at + 8 <= page + data_len <= producer_len`, 8-byte aligned (records are
            // 8-byte aligned); the header's first word is written atomically by the kernel.
            let header = unsafe {
                &*self
                    .producer
                    .as_ptr()
                    .cast::<u8>()
                    .add(at)
                    .cast::<AtomicU32>()
            };
            let word = header.load(Ordering::Acquire);
            if word & RINGBUF_BUSY != 0 {
                break;
            }
            let len = (word & !(RINGBUF_BUSY | RINGBUF_DISCARD)) as usize;
            if len > self.data_len {
                // Not a record the kernel writes; stop rather than read out of bounds.
                break;
            }
            if word & RINGBUF_DISCARD == 0 {
                let mut record = vec![0u8; len];
                // SAFETY: the record's bytes lie in `[at + 8, at + 8 + len)`, within the
                // double-mapped data area (`len <= data_len`); the producer no longer writes
                // them (the busy bit is clear) until the consumer position passes them.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.producer.as_ptr().cast::<u8>().add(at + RINGBUF_HEADER),
                        record.as_mut_ptr(),
                        len,
                    );
                }
                out.push(record);
            }
            consumer += ((len + RINGBUF_HEADER + 7) & !7) as u64;
            self.consumer_pos().store(consumer, Ordering::Release);
        }
        out
    }

    /// The map's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for RingBuffer {
    fn drop(&mut self) {
        // SAFETY: both regions are the mappings `map` created, with their lengths; nothing
        // borrows them past `self`.
        unsafe {
            libc::munmap(self.consumer.as_ptr(), self.consumer_len);
            libc::munmap(self.producer.as_ptr(), self.producer_len);
        }
    }
}

/// The number of possible CPUs (`/sys/devices/system/cpu/possible`), which sizes the
/// userspace view of per-CPU map values.
pub fn possible_cpus() -> Result<usize, KernelError> {
    const PATH: &str = "/sys/devices/system/cpu/possible";
    let text = std::fs::read_to_string(PATH).map_err(|e| KernelError::PossibleCpus {
        path: PATH,
        detail: e.to_string(),
    })?;
    parse_cpu_list(&text).ok_or_else(|| KernelError::PossibleCpus {
        path: PATH,
        detail: format!("unexpected content `{}`", text.trim()),
    })
}

/// Parses a CPU list such as `0-3,5` into "highest CPU + 1" (per-CPU slots are indexed by CPU
/// number, so holes still take a slot).
fn parse_cpu_list(text: &str) -> Option<usize> {
    let mut highest: Option<usize> = None;
    for part in text.trim().split(',') {
        let last = match part.split_once('-') {
            Some((_, end)) => end.trim().parse::<usize>().ok()?,
            None => part.trim().parse::<usize>().ok()?,
        };
        highest = Some(highest.map_or(last, |h| h.max(last)));
    }
    highest.map(|h| h + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_layouts_match_the_uapi_offsets() {
        // Sizes up to the last field used, per include/uapi/linux/bpf.h.
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 72);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 112);
        assert_eq!(std::mem::size_of::<TestRunAttr>(), 80);
        assert_eq!(std::mem::size_of::<ObjAttr>(), 24);
        assert_eq!(std::mem::size_of::<BtfLoadAttr>(), 32);
        assert_eq!(std::mem::size_of::<InfoAttr>(), 16);
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 32);
        assert_eq!(std::mem::offset_of!(LinkCreateAttr, expected_revision), 24);
        assert_eq!(std::mem::size_of::<LinkUpdateAttr>(), 16);
        assert_eq!(std::mem::offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(std::mem::offset_of!(MapCreateAttr, map_extra), 64);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, attach_btf_id), 108);
        assert_eq!(std::mem::offset_of!(TestRunAttr, repeat), 32);
        assert_eq!(std::mem::offset_of!(TestRunAttr, ctx_in), 48);
        assert_eq!(std::mem::offset_of!(TestRunAttr, batch_size), 72);
    }

    #[test]
    fn object_names_are_truncated_and_sanitised() {
        assert_eq!(&object_name("porin_policy_a")[..15], b"porin_policy_a\0");
        let long = object_name("porin-from-endpoint-program");
        assert_eq!(&long[..15], b"porin_from_endp");
        assert_eq!(long[15], 0);
    }

    /// Off Linux every command fails with `NeedsLinux`, including the two that retry with a log.
    #[cfg(not(target_os = "linux"))]
    #[test]
    fn every_command_needs_linux_here() {
        let needs = |result: Result<OwnedFd, KernelError>, expected: BpfCommand| {
            assert!(
                matches!(result, Err(KernelError::NeedsLinux { command, .. }) if command == expected)
            );
        };
        let spec = MapSpec {
            map_type: MapType::ARRAY,
            key_size: 4,
            value_size: 4,
            max_entries: 1,
            map_flags: 0,
        };
        needs(map_create("t", &spec, None), BpfCommand::MapCreate);
        needs(
            prog_load(
                "t",
                ProgramType::SCHED_CLS,
                &[0x95, 0, 0, 0, 0, 0, 0, 0],
                "GPL",
            ),
            BpfCommand::ProgLoad,
        );
        needs(btf_load(&[0u8; 24]), BpfCommand::BtfLoad);
    }

    #[test]
    fn cpu_lists_count_the_highest_cpu() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-3,8-9"), Some(10));
        assert_eq!(parse_cpu_list("x"), None);
    }
}
