//! # porin-ebpf: the eBPF object porin emits
//!
//! porin's own eBPF assembler, BTF encoder and ELF writer (no clang), the TC
//! datapath programs that enforce compiled policy maps, and the binary
//! layout of those maps' contents.

pub mod kernel;
pub mod packet;
