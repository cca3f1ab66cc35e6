//! `porin_verdicts`: one counter per verdict, per CPU (`DATAPATH.md` §2.5;
//! the indices are [`crate::maps::Verdict`]).

use super::{AbiError, abi_struct};

abi_struct! {
    /// `porin_counter`: one verdict counter on one CPU.
    pub struct Counter = "porin_counter" {
        /// Packets.
        packets @ OFF_PACKETS: u64 = Le,
        /// Bytes (`skb->len`).
        bytes @ OFF_BYTES: u64 = Le,
    }
}

impl Counter {
    /// Sums the per-CPU values of one `porin_verdicts` entry, as
    /// `bpf_map_lookup_elem` returns them ([`Counter::SIZE`] bytes per
    /// possible CPU).
    pub fn sum_per_cpu(values: &[u8]) -> Result<Counter, AbiError> {
        if values.is_empty() || !values.len().is_multiple_of(Self::SIZE) {
            return Err(AbiError::Length {
                what: "per-CPU porin_counter values",
                expected: Self::SIZE,
                got: values.len(),
            });
        }
        let mut sum = Counter::default();
        for cpu in values.chunks_exact(Self::SIZE) {
            sum = sum.add(&Counter::from_bytes(cpu)?);
        }
        Ok(sum)
    }

    /// The sum of two counters (wrapping, as the per-CPU counters do).
    #[must_use]
    pub const fn add(&self, other: &Counter) -> Counter {
        Counter {
            packets: self.packets.wrapping_add(other.packets),
            bytes: self.bytes.wrapping_add(other.bytes),
        }
    }
}
