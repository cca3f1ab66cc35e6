//! Loaded programs and `BPF_PROG_TEST_RUN`.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::error::KernelError;
use super::sys::{self, ProgramType};

/// `sizeof(struct __sk_buff)` on current kernels (up to and including `hwtstamp`).
pub const SK_BUFF_SIZE: usize = 192;

/// The fields of `struct __sk_buff` that `BPF_PROG_TEST_RUN` lets userspace set for TC
/// programs (`convert___skb_to_skb` in `net/bpf/test_run.c` rejects any other non-zero field)
/// and reads back afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SkBuff {
    /// `skb->mark` (offset 8): porin's datapath writes the L7 redirect here.
    pub mark: u32,
    /// `skb->priority` (offset 32).
    pub priority: u32,
    /// `skb->ifindex` (offset 40); 0 or 1 mean the loopback device.
    pub ifindex: u32,
    /// `skb->cb[0..5]` (offset 48).
    pub cb: [u32; 5],
    /// `skb->tstamp` (offset 152).
    pub tstamp: u64,
}

impl SkBuff {
    const MARK: usize = 8;
    const PRIORITY: usize = 32;
    const IFINDEX: usize = 40;
    const CB: usize = 48;
    const TSTAMP: usize = 152;

    /// The `struct __sk_buff` bytes to pass as `ctx_in`.
    pub fn to_bytes(&self) -> [u8; SK_BUFF_SIZE] {
        let mut out = [0u8; SK_BUFF_SIZE];
        out[Self::MARK..Self::MARK + 4].copy_from_slice(&self.mark.to_ne_bytes());
        out[Self::PRIORITY..Self::PRIORITY + 4].copy_from_slice(&self.priority.to_ne_bytes());
        out[Self::IFINDEX..Self::IFINDEX + 4].copy_from_slice(&self.ifindex.to_ne_bytes());
        for (index, word) in self.cb.iter().enumerate() {
            let at = Self::CB + 4 * index;
            out[at..at + 4].copy_from_slice(&word.to_ne_bytes());
        }
        out[Self::TSTAMP..Self::TSTAMP + 8].copy_from_slice(&self.tstamp.to_ne_bytes());
        out
    }

    /// Reads the settable fields back from a `ctx_out` buffer (missing bytes read as zero).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let word = |at: usize| -> u32 {
            bytes
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u32::from_ne_bytes)
        };
        let mut cb = [0u32; 5];
        for (index, slot) in cb.iter_mut().enumerate() {
            *slot = word(Self::CB + 4 * index);
        }
        Self {
            mark: word(Self::MARK),
            priority: word(Self::PRIORITY),
            ifindex: word(Self::IFINDEX),
            cb,
            tstamp: bytes
                .get(Self::TSTAMP..Self::TSTAMP + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_ne_bytes),
        }
    }
}

/// The result of one `BPF_PROG_TEST_RUN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRunOutput {
    /// The program's return value (for TC: 0 `TC_ACT_OK`, 2 `TC_ACT_SHOT`, ...).
    pub retval: u32,
    /// `skb->mark` after the run.
    pub mark: u32,
    /// Average nanoseconds per repetition, measured by the kernel.
    pub duration_ns: u32,
    /// The packet after the run.
    pub packet: Vec<u8>,
    /// The whole context after the run.
    pub ctx: SkBuff,
}

/// A program loaded into the kernel.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
    name: String,
    program_type: ProgramType,
}

impl Program {
    /// Loads raw instructions (8 bytes each, maps already patched). On a verifier rejection the
    /// error carries the verifier log.
    pub fn load(
        name: &str,
        program_type: ProgramType,
        insns: &[u8],
        license: &str,
    ) -> Result<Self, KernelError> {
        Ok(Self {
            fd: sys::prog_load(name, program_type, insns, license)?,
            name: name.to_owned(),
            program_type,
        })
    }

    /// Opens a program pinned at `path`.
    pub fn from_pinned(
        path: &str,
        name: &str,
        program_type: ProgramType,
    ) -> Result<Self, KernelError> {
        Ok(Self {
            fd: sys::obj_get(path)?,
            name: name.to_owned(),
            program_type,
        })
    }

    /// The program's name (the symbol name in the object).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The program type it was loaded as.
    pub fn program_type(&self) -> ProgramType {
        self.program_type
    }

    /// The program's file descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Runs the program once on `packet` (a full Ethernet frame for TC) with context `ctx`.
    pub fn test_run(&self, packet: &[u8], ctx: &SkBuff) -> Result<TestRunOutput, KernelError> {
        self.test_run_repeat(packet, ctx, 1)
    }

    /// Runs the program `repeat` times on the same input; `duration_ns` is then the kernel's
    /// average per run, which is what benchmarks want. Side effects (map writes such as
    /// conntrack or counters) happen on every repetition.
    pub fn test_run_repeat(
        &self,
        packet: &[u8],
        ctx: &SkBuff,
        repeat: u32,
    ) -> Result<TestRunOutput, KernelError> {
        let ctx_in = ctx.to_bytes();
        let raw = sys::prog_test_run(self.fd(), &self.name, packet, Some(&ctx_in), repeat)?;
        let ctx_out = SkBuff::from_bytes(&raw.ctx_out);
        Ok(TestRunOutput {
            retval: raw.retval,
            mark: ctx_out.mark,
            duration_ns: raw.duration_ns,
            packet: raw.data_out,
            ctx: ctx_out,
        })
    }

    /// Pins the program at `path` in a mounted bpffs (e.g. for `tc ... bpf da pinned PATH`).
    pub fn pin(&self, path: &str) -> Result<(), KernelError> {
        sys::obj_pin(self.fd(), path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sk_buff_fields_sit_at_their_uapi_offsets() {
        let ctx = SkBuff {
            mark: 0x0102_0304,
            priority: 7,
            ifindex: 1,
            cb: [1, 2, 3, 4, 5],
            tstamp: 9,
        };
        let bytes = ctx.to_bytes();
        assert_eq!(&bytes[8..12], &0x0102_0304u32.to_ne_bytes());
        assert_eq!(&bytes[32..36], &7u32.to_ne_bytes());
        assert_eq!(&bytes[40..44], &1u32.to_ne_bytes());
        assert_eq!(&bytes[64..68], &5u32.to_ne_bytes());
        assert_eq!(&bytes[152..160], &9u64.to_ne_bytes());
        assert_eq!(SkBuff::from_bytes(&bytes), ctx);
        assert_eq!(SkBuff::from_bytes(&[]), SkBuff::default());
    }
}
