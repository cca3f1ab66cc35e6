//! The assembler's encoder against its decoder and disassembler.
//!
//! Two checks per input:
//! 1. structured: an arbitrary instruction list (a fuzz-side mirror of
//!    `porin_ebpf::insn::Insn`, so the library needs no fuzz-only derive)
//!    encodes to bytes that decode back to the same list, and its listing
//!    renders;
//! 2. raw: the same input bytes, read as an instruction stream, either
//!    decode (and then re-encode to a stream that decodes to the same list,
//!    and disassemble) or fail with a typed `DecodeError`; never a panic.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::{Corpus, fuzz_target};
use porin_ebpf::disasm::{disassemble, listing};
use porin_ebpf::insn::{
    AluOp, Cond, Endian, Helper, Imm32, Insn, Off16, Operand, PacketSize, Reg, Size, SwapBits,
    Width, to_bytes,
};

/// Longest instruction list tried (the datapath programs are a few
/// thousand; the round trip is per instruction, so length adds little).
const MAX_INSNS: usize = 512;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum FuzzInsn {
    Alu {
        wide: bool,
        op: u8,
        dst: u8,
        src: FuzzOperand,
    },
    Neg {
        wide: bool,
        dst: u8,
    },
    Endian {
        big: bool,
        bits: u8,
        dst: u8,
    },
    Ja {
        off: i16,
    },
    JumpIf {
        wide: bool,
        cond: u8,
        dst: u8,
        src: FuzzOperand,
        off: i16,
    },
    Call {
        helper: i32,
    },
    Exit,
    Load {
        size: u8,
        dst: u8,
        src: u8,
        off: i16,
    },
    StoreImm {
        size: u8,
        dst: u8,
        off: i16,
        imm: i32,
    },
    Store {
        size: u8,
        dst: u8,
        off: i16,
        src: u8,
    },
    AtomicAdd {
        wide: bool,
        dst: u8,
        off: i16,
        src: u8,
    },
    PacketLoadAbs {
        size: u8,
        imm: i32,
    },
    PacketLoadInd {
        size: u8,
        src: u8,
        imm: i32,
    },
    LoadImm64 {
        dst: u8,
        imm: i64,
    },
    LoadMapRef {
        dst: u8,
    },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum FuzzOperand {
    Reg(u8),
    Imm(i32),
}

fn pick<T: Copy>(all: &[T], index: u8) -> T {
    all[usize::from(index) % all.len()]
}

fn reg(index: u8) -> Reg {
    // R0..=R10: every register an instruction can name.
    Reg::from_index(index % 11).expect("0..=10 are registers")
}

fn width(wide: bool) -> Width {
    if wide { Width::W64 } else { Width::W32 }
}

fn operand(op: FuzzOperand) -> Operand {
    match op {
        FuzzOperand::Reg(r) => Operand::Reg(reg(r)),
        FuzzOperand::Imm(i) => Operand::Imm(Imm32(i)),
    }
}

fn lower(insn: FuzzInsn) -> Insn {
    match insn {
        FuzzInsn::Alu { wide, op, dst, src } => Insn::Alu {
            width: width(wide),
            op: pick(&AluOp::ALL, op),
            dst: reg(dst),
            src: operand(src),
        },
        FuzzInsn::Neg { wide, dst } => Insn::Neg {
            width: width(wide),
            dst: reg(dst),
        },
        FuzzInsn::Endian { big, bits, dst } => Insn::Endian {
            order: if big { Endian::Big } else { Endian::Little },
            bits: pick(&SwapBits::ALL, bits),
            dst: reg(dst),
        },
        FuzzInsn::Ja { off } => Insn::Ja { off: Off16(off) },
        FuzzInsn::JumpIf {
            wide,
            cond,
            dst,
            src,
            off,
        } => Insn::JumpIf {
            width: width(wide),
            cond: pick(&Cond::ALL, cond),
            dst: reg(dst),
            src: operand(src),
            off: Off16(off),
        },
        FuzzInsn::Call { helper } => Insn::Call {
            helper: Helper(helper),
        },
        FuzzInsn::Exit => Insn::Exit,
        FuzzInsn::Load {
            size,
            dst,
            src,
            off,
        } => Insn::Load {
            size: pick(&Size::ALL, size),
            dst: reg(dst),
            src: reg(src),
            off: Off16(off),
        },
        FuzzInsn::StoreImm {
            size,
            dst,
            off,
            imm,
        } => Insn::StoreImm {
            size: pick(&Size::ALL, size),
            dst: reg(dst),
            off: Off16(off),
            imm: Imm32(imm),
        },
        FuzzInsn::Store {
            size,
            dst,
            off,
            src,
        } => Insn::Store {
            size: pick(&Size::ALL, size),
            dst: reg(dst),
            off: Off16(off),
            src: reg(src),
        },
        FuzzInsn::AtomicAdd {
            wide,
            dst,
            off,
            src,
        } => Insn::AtomicAdd {
            width: width(wide),
            dst: reg(dst),
            off: Off16(off),
            src: reg(src),
        },
        FuzzInsn::PacketLoadAbs { size, imm } => Insn::PacketLoadAbs {
            size: pick(&PacketSize::ALL, size),
            imm: Imm32(imm),
        },
        FuzzInsn::PacketLoadInd { size, src, imm } => Insn::PacketLoadInd {
            size: pick(&PacketSize::ALL, size),
            src: reg(src),
            imm: Imm32(imm),
        },
        FuzzInsn::LoadImm64 { dst, imm } => Insn::LoadImm64 { dst: reg(dst), imm },
        FuzzInsn::LoadMapRef { dst } => Insn::LoadMapRef { dst: reg(dst) },
    }
}

/// Returns whether the bytes described an instruction list.
fn structured(data: &[u8]) -> bool {
    let mut input = Unstructured::new(data);
    let Ok(fuzz_insns) = Vec::<FuzzInsn>::arbitrary(&mut input) else {
        return false;
    };
    if fuzz_insns.is_empty() || fuzz_insns.len() > MAX_INSNS {
        return false;
    }
    let insns: Vec<Insn> = fuzz_insns.into_iter().map(lower).collect();
    let bytes = to_bytes(&insns);
    let slots: usize = insns.iter().map(Insn::slots).sum();
    assert_eq!(
        bytes.len(),
        slots * 8,
        "encoded length disagrees with slot counts"
    );
    let decoded = match Insn::decode_all(&bytes) {
        Ok(decoded) => decoded,
        Err(error) => panic!("encoded {insns:?} does not decode: {error}"),
    };
    // A map reference is, by design, the ELF form `ld_imm64 0` patched by a
    // relocation (`Insn::LoadMapRef` docs), so it decodes as that.
    let expected: Vec<Insn> = insns
        .iter()
        .map(|insn| match *insn {
            Insn::LoadMapRef { dst } => Insn::LoadImm64 { dst, imm: 0 },
            other => other,
        })
        .collect();
    assert_eq!(decoded, expected, "decode(encode(x)) != x");
    let _ = listing(&insns, &[]);
    if let Err(error) = disassemble(&bytes) {
        panic!("encoded {insns:?} does not disassemble: {error}");
    }
    true
}

fn raw(data: &[u8]) {
    // Decoding arbitrary bytes must fail cleanly or yield instructions whose
    // own encoding decodes to the same instructions (bits the decoder ignores
    // may differ, so the bytes themselves are not compared).
    let usable = &data[..data.len() - data.len() % 8];
    if let Ok(insns) = Insn::decode_all(usable) {
        let again = to_bytes(&insns);
        match Insn::decode_all(&again) {
            Ok(decoded) => assert_eq!(decoded, insns, "decode(encode(decode(b))) != decode(b)"),
            Err(error) => panic!("re-encoding of decoded {insns:?} does not decode: {error}"),
        }
    }
    let _ = disassemble(data);
}

fuzz_target!(|data: &[u8]| -> Corpus {
    raw(data);
    // Every input exercises the raw decoder, so none is rejected; the
    // structured half only runs when the bytes describe a non-empty list.
    let _ = structured(data);
    Corpus::Keep
});
