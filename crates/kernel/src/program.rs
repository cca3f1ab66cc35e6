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

/// [`Program::run_stats`]: what `kernel.bpf_stats_enabled` counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Nanoseconds spent in the program (and the statistics' clock reads), all runs.
    pub run_time_ns: u64,
    /// Runs counted.
    pub run_count: u64,
}

impl RunStats {
    /// Mean ns per run since `earlier` (None without runs in between).
    pub fn ns_per_run_since(&self, earlier: &RunStats) -> Option<f64> {
        let runs = self.run_count.checked_sub(earlier.run_count)?;
        let ns = self.run_time_ns.checked_sub(earlier.run_time_ns)?;
        (runs > 0).then(|| ns as f64 / runs as f64)
    }
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

    /// The kernel's run statistics of the program: (total ns in the program, runs). Both stay
    /// 0 unless `kernel.bpf_stats_enabled` is 1, and the ns include the statistics' own clock
    /// reads around each run (measure an empty program beside it to subtract them).
    pub fn run_stats(&self) -> Result<RunStats, KernelError> {
        // struct bpf_prog_info: run_time_ns at 192, run_cnt at 200 (uapi/linux/bpf.h).
        const RUN_TIME_NS: usize = 192;
        const RUN_CNT: usize = 200;
        let mut info = [0u8; RUN_CNT + 8];
        let written = sys::obj_get_info(self.fd(), &self.name, &mut info)?;
        let field = |offset: usize| u64::from_le_bytes(sys::info_field(&info, written, offset));
        Ok(RunStats {
            run_time_ns: field(RUN_TIME_NS),
            run_count: field(RUN_CNT),
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
    fn ns_per_run_is_the_mean_over_the_runs_in_between() {
        let before = RunStats {
            run_time_ns: 1_000,
            run_count: 10,
        };
        let after = RunStats {
            run_time_ns: 4_000,
            run_count: 20,
        };
        assert_eq!(after.ns_per_run_since(&before), Some(300.0));
        assert_eq!(before.ns_per_run_since(&before), None);
        assert_eq!(before.ns_per_run_since(&after), None);
    }

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
