//! The assembler: one method per instruction form, labels for jumps
//! (forward or backward, resolved in [`Assembler::finish`]), and map
//! references recorded as relocations.
//!
//! Errors (unbound or twice-bound labels, out-of-range jumps) are returned
//! from `finish`, never panics, so a generator bug surfaces as a typed
//! [`AsmError`].

use thiserror::Error;

use crate::insn::{
    AluOp, Cond, Endian, Helper, Imm32, Insn, Off16, Operand, PacketSize, Reg, Size, SwapBits,
    Width,
};

/// A jump target. Create with [`Assembler::new_label`], place with
/// [`Assembler::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Label(usize);

/// Why an instruction sequence could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AsmError {
    /// A jump targets a label that was never bound.
    #[error("label {label} is used by the jump at instruction {insn} but never bound")]
    UnboundLabel {
        /// Label number.
        label: usize,
        /// Index of the jump (in instructions).
        insn: usize,
    },
    /// `bind` was called twice for one label.
    #[error("label {label} is bound twice")]
    LabelBoundTwice {
        /// Label number.
        label: usize,
    },
    /// The label does not belong to this assembler.
    #[error("label {label} does not exist in this assembler")]
    UnknownLabel {
        /// Label number.
        label: usize,
    },
    /// A jump distance does not fit the signed 16-bit offset field.
    #[error("jump at slot {slot} to slot {target} is out of the 16-bit range")]
    JumpOutOfRange {
        /// Slot of the jump.
        slot: usize,
        /// Slot of the target.
        target: usize,
    },
}

/// A map reference: the slot of an `ld_imm64` and the map symbol it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapRef {
    /// Slot index of the first half of the `ld_imm64`.
    pub slot: usize,
    /// The map's ELF symbol name.
    pub map: String,
}

/// An assembled program: the instructions and its map relocations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembled {
    /// Instructions, jumps resolved.
    pub insns: Vec<Insn>,
    /// Map references (slot → map name), in slot order.
    pub map_refs: Vec<MapRef>,
}

impl Assembled {
    /// The program bytes.
    pub fn bytes(&self) -> Vec<u8> {
        crate::insn::to_bytes(&self.insns)
    }

    /// Number of 8-byte slots.
    pub fn slot_count(&self) -> usize {
        self.insns.iter().map(Insn::slots).sum()
    }
}

#[derive(Clone, Debug)]
enum Pending {
    Done(Insn),
    /// A jump whose offset is filled in by `finish`.
    Jump(Insn, Label),
    Map(Reg, String),
}

/// Builds one program.
#[derive(Clone, Debug, Default)]
pub struct Assembler {
    code: Vec<Pending>,
    /// For each label, the instruction index it is bound to.
    labels: Vec<Option<usize>>,
    error: Option<AsmError>,
}

impl Assembler {
    /// An empty program.
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Number of instructions emitted so far.
    pub fn len(&self) -> usize {
        self.code.len()
    }

    /// Whether nothing was emitted yet.
    pub fn is_empty(&self) -> bool {
        self.code.is_empty()
    }

    /// A fresh, unbound label.
    pub fn new_label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `label` to the next instruction. Binding twice is reported by
    /// `finish`.
    pub fn bind(&mut self, label: Label) {
        match self.labels.get_mut(label.0) {
            Some(slot @ None) => *slot = Some(self.code.len()),
            Some(Some(_)) => {
                self.error
                    .get_or_insert(AsmError::LabelBoundTwice { label: label.0 });
            }
            None => {
                self.error
                    .get_or_insert(AsmError::UnknownLabel { label: label.0 });
            }
        }
    }

    /// Appends a fully formed instruction (jumps with literal offsets too).
    pub fn emit(&mut self, insn: Insn) {
        self.code.push(Pending::Done(insn));
    }

    // ---- ALU ----

    /// `dst op= imm` (64-bit).
    pub fn alu64_imm(&mut self, op: AluOp, dst: Reg, imm: impl Into<Imm32>) {
        self.emit(Insn::Alu {
            width: Width::W64,
            op,
            dst,
            src: Operand::Imm(imm.into()),
        });
    }

    /// `dst op= src` (64-bit).
    pub fn alu64_reg(&mut self, op: AluOp, dst: Reg, src: Reg) {
        self.emit(Insn::Alu {
            width: Width::W64,
            op,
            dst,
            src: Operand::Reg(src),
        });
    }

    /// `wdst op= imm` (32-bit; zeroes the upper half).
    pub fn alu32_imm(&mut self, op: AluOp, dst: Reg, imm: impl Into<Imm32>) {
        self.emit(Insn::Alu {
            width: Width::W32,
            op,
            dst,
            src: Operand::Imm(imm.into()),
        });
    }

    /// `wdst op= wsrc` (32-bit).
    pub fn alu32_reg(&mut self, op: AluOp, dst: Reg, src: Reg) {
        self.emit(Insn::Alu {
            width: Width::W32,
            op,
            dst,
            src: Operand::Reg(src),
        });
    }

    /// `dst = imm` (64-bit, sign-extended).
    pub fn mov64_imm(&mut self, dst: Reg, imm: impl Into<Imm32>) {
        self.alu64_imm(AluOp::Mov, dst, imm);
    }

    /// `dst = src` (64-bit).
    pub fn mov64_reg(&mut self, dst: Reg, src: Reg) {
        self.alu64_reg(AluOp::Mov, dst, src);
    }

    /// `dst = -dst`.
    pub fn neg(&mut self, width: Width, dst: Reg) {
        self.emit(Insn::Neg { width, dst });
    }

    /// `dst = be16/be32/be64 dst` or `le..`.
    pub fn endian(&mut self, order: Endian, bits: SwapBits, dst: Reg) {
        self.emit(Insn::Endian { order, bits, dst });
    }

    /// `dst = imm64 ll`.
    pub fn ld_imm64(&mut self, dst: Reg, imm: i64) {
        self.emit(Insn::LoadImm64 { dst, imm });
    }

    /// `r0 = *(size *)skb[imm]` (legacy absolute packet load).
    pub fn ld_abs(&mut self, size: PacketSize, imm: impl Into<Imm32>) {
        self.emit(Insn::PacketLoadAbs {
            size,
            imm: imm.into(),
        });
    }

    /// `r0 = *(size *)skb[src + imm]` (legacy indirect packet load).
    pub fn ld_ind(&mut self, size: PacketSize, src: Reg, imm: impl Into<Imm32>) {
        self.emit(Insn::PacketLoadInd {
            size,
            src,
            imm: imm.into(),
        });
    }

    /// `dst = <map> ll` with an `R_BPF_64_64` relocation against `map`.
    pub fn ld_map(&mut self, dst: Reg, map: &str) {
        self.code.push(Pending::Map(dst, map.to_owned()));
    }

    // ---- memory ----

    /// `dst = *(size *)(src + off)`.
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.emit(Insn::Load {
            size,
            dst,
            src,
            off: Off16(off),
        });
    }

    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        self.emit(Insn::Store {
            size,
            dst,
            off: Off16(off),
            src,
        });
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: impl Into<Imm32>) {
        self.emit(Insn::StoreImm {
            size,
            dst,
            off: Off16(off),
            imm: imm.into(),
        });
    }

    /// `lock *(u32/u64 *)(dst + off) += src`.
    pub fn atomic_add(&mut self, width: Width, dst: Reg, off: i16, src: Reg) {
        self.emit(Insn::AtomicAdd {
            width,
            dst,
            off: Off16(off),
            src,
        });
    }

    // ---- control flow ----

    /// `goto label`.
    pub fn ja(&mut self, label: Label) {
        self.code
            .push(Pending::Jump(Insn::Ja { off: Off16(0) }, label));
    }

    /// `if dst cond imm goto label` (64-bit compare; imm sign-extended).
    pub fn jmp_imm(&mut self, cond: Cond, dst: Reg, imm: impl Into<Imm32>, label: Label) {
        self.jump_if(Width::W64, cond, dst, Operand::Imm(imm.into()), label);
    }

    /// `if dst cond src goto label` (64-bit compare).
    pub fn jmp_reg(&mut self, cond: Cond, dst: Reg, src: Reg, label: Label) {
        self.jump_if(Width::W64, cond, dst, Operand::Reg(src), label);
    }

    /// `if wdst cond imm goto label` (32-bit compare).
    pub fn jmp32_imm(&mut self, cond: Cond, dst: Reg, imm: impl Into<Imm32>, label: Label) {
        self.jump_if(Width::W32, cond, dst, Operand::Imm(imm.into()), label);
    }

    /// `if wdst cond wsrc goto label` (32-bit compare).
    pub fn jmp32_reg(&mut self, cond: Cond, dst: Reg, src: Reg, label: Label) {
        self.jump_if(Width::W32, cond, dst, Operand::Reg(src), label);
    }

    fn jump_if(&mut self, width: Width, cond: Cond, dst: Reg, src: Operand, label: Label) {
        self.code.push(Pending::Jump(
            Insn::JumpIf {
                width,
                cond,
                dst,
                src,
                off: Off16(0),
            },
            label,
        ));
    }

    /// `call helper`.
    pub fn call(&mut self, helper: Helper) {
        self.emit(Insn::Call { helper });
    }

    /// `exit`.
    pub fn exit(&mut self) {
        self.emit(Insn::Exit);
    }

    /// Resolves labels and returns the program.
    pub fn finish(self) -> Result<Assembled, AsmError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        // Slot index of every instruction (ld_imm64 takes two slots), plus
        // one past the end so a label bound after the last instruction works.
        let mut slot_of = Vec::with_capacity(self.code.len() + 1);
        let mut slot = 0usize;
        for pending in &self.code {
            slot_of.push(slot);
            slot += match pending {
                Pending::Done(insn) | Pending::Jump(insn, _) => insn.slots(),
                Pending::Map(..) => 2,
            };
        }
        slot_of.push(slot);

        let mut insns = Vec::with_capacity(self.code.len());
        let mut map_refs = Vec::new();
        for (index, pending) in self.code.into_iter().enumerate() {
            let here = slot_of[index];
            match pending {
                Pending::Done(insn) => insns.push(insn),
                Pending::Map(dst, map) => {
                    map_refs.push(MapRef { slot: here, map });
                    insns.push(Insn::LoadMapRef { dst });
                }
                Pending::Jump(insn, label) => {
                    let bound = self
                        .labels
                        .get(label.0)
                        .ok_or(AsmError::UnknownLabel { label: label.0 })?
                        .ok_or(AsmError::UnboundLabel {
                            label: label.0,
                            insn: index,
                        })?;
                    let target = slot_of[bound];
                    let distance = target as i64 - (here as i64 + 1);
                    let off = i16::try_from(distance)
                        .map_err(|_| AsmError::JumpOutOfRange { slot: here, target })?;
                    insns.push(match insn {
                        Insn::Ja { .. } => Insn::Ja { off: Off16(off) },
                        Insn::JumpIf {
                            width,
                            cond,
                            dst,
                            src,
                            ..
                        } => Insn::JumpIf {
                            width,
                            cond,
                            dst,
                            src,
                            off: Off16(off),
                        },
                        other => other,
                    });
                }
            }
        }
        Ok(Assembled { insns, map_refs })
    }
}
