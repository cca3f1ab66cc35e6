//! Shared helpers of the kernel tests: skip-or-fail policy and a tiny instruction encoder.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use porin_ebpf::kernel;

/// True when the kernel can be used. Without it: in CI (`CI=true`) the test fails loudly;
/// elsewhere it prints `SKIPPED: <test>: <reason>` and the caller returns.
pub fn kernel_available(test: &str) -> bool {
    match kernel::probe() {
        Ok(()) => true,
        Err(error) => {
            let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !in_ci,
                "{test}: CI=true but eBPF is unavailable: {error} (run CI as root)"
            );
            println!("SKIPPED: {test}: eBPF unavailable ({error})");
            false
        }
    }
}

/// One raw instruction: opcode, dst, src, off, imm.
pub fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[0] = code;
    out[1] = (dst & 0x0f) | (src << 4);
    out[2..4].copy_from_slice(&off.to_le_bytes());
    out[4..8].copy_from_slice(&imm.to_le_bytes());
    out
}

/// `dst = imm` (64-bit).
pub fn mov64_imm(dst: u8, imm: i32) -> [u8; 8] {
    insn(0xb7, dst, 0, 0, imm)
}

/// `exit`.
pub fn exit() -> [u8; 8] {
    insn(0x95, 0, 0, 0, 0)
}

/// Concatenates instructions.
pub fn program(insns: &[[u8; 8]]) -> Vec<u8> {
    insns.iter().flatten().copied().collect()
}
