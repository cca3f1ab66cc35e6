//! A disassembler for readable dumps, in llvm-objdump 14's BPF syntax
//! (`r0 += r1`, `if w1 > 5 goto +3`, `*(u32 *)(r10 - 4) = r1`, ...), so a
//! dump can be diffed against `llvm-objdump -d` line by line.

use std::fmt::Write as _;

use crate::insn::{DecodeError, Insn, Operand, Reg, Size, Width};

fn reg_name(width: Width, reg: Reg) -> String {
    match width {
        Width::W32 => format!("w{}", reg.index()),
        Width::W64 => format!("r{}", reg.index()),
    }
}

fn operand(width: Width, src: Operand) -> String {
    match src {
        Operand::Reg(r) => reg_name(width, r),
        Operand::Imm(i) => i.0.to_string(),
    }
}

fn address(base: Reg, off: i16) -> String {
    if off < 0 {
        format!("(r{} - {})", base.index(), -i32::from(off))
    } else {
        format!("(r{} + {})", base.index(), off)
    }
}

fn jump(off: i16) -> String {
    if off < 0 {
        format!("goto {off}")
    } else {
        format!("goto +{off}")
    }
}

fn mem(size: Size) -> String {
    format!("*({} *)", size.c_name())
}

/// The text of one instruction, as llvm-objdump 14 prints it (without the
/// `<label>` suffix it adds to jumps).
pub fn insn_text(insn: &Insn) -> String {
    match *insn {
        Insn::Alu {
            width,
            op,
            dst,
            src,
        } => {
            format!(
                "{} {} {}",
                reg_name(width, dst),
                op.symbol(),
                operand(width, src)
            )
        }
        Insn::Neg { width, dst } => {
            let r = reg_name(width, dst);
            format!("{r} = -{r}")
        }
        Insn::Endian { order, bits, dst } => {
            let name = match order {
                crate::insn::Endian::Little => "le",
                crate::insn::Endian::Big => "be",
            };
            let r = reg_name(Width::W64, dst);
            format!("{r} = {name}{} {r}", bits.bits())
        }
        Insn::Ja { off } => jump(off.0),
        Insn::JumpIf {
            width,
            cond,
            dst,
            src,
            off,
        } => format!(
            "if {} {} {} {}",
            reg_name(width, dst),
            cond.symbol(),
            operand(width, src),
            jump(off.0)
        ),
        Insn::Call { helper } => format!("call {}", helper.0),
        Insn::Exit => "exit".to_owned(),
        Insn::Load {
            size,
            dst,
            src,
            off,
        } => {
            format!("r{} = {}{}", dst.index(), mem(size), address(src, off.0))
        }
        Insn::StoreImm {
            size,
            dst,
            off,
            imm,
        } => {
            format!("{}{} = {}", mem(size), address(dst, off.0), imm.0)
        }
        Insn::Store {
            size,
            dst,
            off,
            src,
        } => {
            format!("{}{} = r{}", mem(size), address(dst, off.0), src.index())
        }
        Insn::AtomicAdd {
            width,
            dst,
            off,
            src,
        } => {
            let size = match width {
                Width::W32 => Size::U32,
                Width::W64 => Size::U64,
            };
            format!(
                "lock {}{} += r{}",
                mem(size),
                address(dst, off.0),
                src.index()
            )
        }
        Insn::PacketLoadAbs { size, imm } => format!("r0 = {}skb[{}]", mem(size.size()), imm.0),
        Insn::PacketLoadInd { size, src, imm } => {
            if imm.0 == 0 {
                format!("r0 = {}skb[r{}]", mem(size.size()), src.index())
            } else {
                format!("r0 = {}skb[r{} + {}]", mem(size.size()), src.index(), imm.0)
            }
        }
        Insn::LoadImm64 { dst, imm } => format!("r{} = {} ll", dst.index(), imm),
        Insn::LoadMapRef { dst } => format!("r{} = 0 ll", dst.index()),
    }
}

/// A listing: one line per instruction, `slot: bytes  text`, with the names
/// of relocation targets (`map_refs`: slot index → symbol) appended, like
/// `llvm-objdump -dr`.
pub fn listing(insns: &[Insn], map_refs: &[(usize, String)]) -> String {
    let mut out = String::new();
    let mut slot = 0usize;
    for insn in insns {
        let mut hex = String::new();
        for raw in insn.encode().iter().take(1) {
            for b in raw.to_bytes() {
                let _ = write!(hex, "{b:02x} ");
            }
        }
        let _ = write!(out, "{slot:5}: {hex} {}", insn_text(insn));
        if let Some(off) = insn.jump_offset() {
            let target = slot as i64 + 1 + i64::from(off.0);
            let _ = write!(out, " <{target}>");
        }
        for (_, name) in map_refs.iter().filter(|(s, _)| *s == slot) {
            let _ = write!(out, "  ; R_BPF_64_64 {name}");
        }
        out.push('\n');
        if insn.slots() == 2 {
            slot += 1;
            let mut hex = String::new();
            if let Some(raw) = insn.encode().get(1) {
                for b in raw.to_bytes() {
                    let _ = write!(hex, "{b:02x} ");
                }
            }
            let _ = writeln!(out, "{slot:5}: {hex}");
        }
        slot += 1;
    }
    out
}

/// Decodes raw instruction bytes and lists them.
pub fn disassemble(bytes: &[u8]) -> Result<String, DecodeError> {
    let insns = Insn::decode_all(bytes)?;
    Ok(listing(&insns, &[]))
}
