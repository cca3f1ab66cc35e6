//! eBPF instructions: typed operands, one variant per instruction form, and
//! the kernel's 8-byte encoding (`struct bpf_insn`, little-endian target).
//!
//! Only forms that llvm 14 and the kernel's verifier both understand are
//! modelled; everything else is rejected by [`Insn::decode`] with a typed
//! error rather than guessed at.

use thiserror::Error;

/// An eBPF register. `R10` is the read-only frame pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reg {
    /// Return value and helper result.
    R0,
    /// First argument (the context on entry).
    R1,
    /// Second argument.
    R2,
    /// Third argument.
    R3,
    /// Fourth argument.
    R4,
    /// Fifth argument.
    R5,
    /// Callee-saved.
    R6,
    /// Callee-saved.
    R7,
    /// Callee-saved.
    R8,
    /// Callee-saved.
    R9,
    /// Frame pointer (read-only).
    R10,
}

impl Reg {
    /// All registers in index order.
    pub const ALL: [Reg; 11] = [
        Reg::R0,
        Reg::R1,
        Reg::R2,
        Reg::R3,
        Reg::R4,
        Reg::R5,
        Reg::R6,
        Reg::R7,
        Reg::R8,
        Reg::R9,
        Reg::R10,
    ];

    /// The register number as encoded in an instruction nibble.
    pub const fn index(self) -> u8 {
        self as u8
    }

    /// The register with that number, if it exists.
    pub fn from_index(index: u8) -> Option<Reg> {
        Reg::ALL.get(usize::from(index)).copied()
    }
}

/// A 32-bit immediate (sign-extended to 64 bits by 64-bit ALU and JMP ops).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Imm32(pub i32);

impl Imm32 {
    /// The immediate whose 32 bits are `bits` (e.g. `0xFFFF_FFFF` for a
    /// JMP32 comparison against an unsigned value).
    pub const fn from_bits(bits: u32) -> Imm32 {
        Imm32(bits as i32)
    }
}

impl From<i32> for Imm32 {
    fn from(value: i32) -> Self {
        Imm32(value)
    }
}

impl From<u16> for Imm32 {
    fn from(value: u16) -> Self {
        Imm32(i32::from(value))
    }
}

impl From<u8> for Imm32 {
    fn from(value: u8) -> Self {
        Imm32(i32::from(value))
    }
}

/// A signed 16-bit offset: a memory displacement, or a jump distance in
/// instruction slots relative to the next slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Off16(pub i16);

impl From<i16> for Off16 {
    fn from(value: i16) -> Self {
        Off16(value)
    }
}

/// Width of a memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// 1 byte.
    U8,
    /// 2 bytes.
    U16,
    /// 4 bytes.
    U32,
    /// 8 bytes.
    U64,
}

impl Size {
    /// All sizes.
    pub const ALL: [Size; 4] = [Size::U8, Size::U16, Size::U32, Size::U64];

    const fn code(self) -> u8 {
        match self {
            Size::U32 => 0x00,
            Size::U16 => 0x08,
            Size::U8 => 0x10,
            Size::U64 => 0x18,
        }
    }

    fn from_code(code: u8) -> Size {
        match code & 0x18 {
            0x00 => Size::U32,
            0x08 => Size::U16,
            0x10 => Size::U8,
            _ => Size::U64,
        }
    }

    /// The C type name llvm-objdump prints (`u8` ... `u64`).
    pub const fn c_name(self) -> &'static str {
        match self {
            Size::U8 => "u8",
            Size::U16 => "u16",
            Size::U32 => "u32",
            Size::U64 => "u64",
        }
    }

    /// Number of bytes.
    pub const fn bytes(self) -> usize {
        match self {
            Size::U8 => 1,
            Size::U16 => 2,
            Size::U32 => 4,
            Size::U64 => 8,
        }
    }
}

/// Width of a legacy packet load (`BPF_LD | BPF_ABS/BPF_IND`), which has
/// no 64-bit form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketSize {
    /// 1 byte.
    U8,
    /// 2 bytes (converted to host order by the kernel).
    U16,
    /// 4 bytes (converted to host order by the kernel).
    U32,
}

impl PacketSize {
    /// All sizes.
    pub const ALL: [PacketSize; 3] = [PacketSize::U8, PacketSize::U16, PacketSize::U32];

    /// The equivalent memory access size.
    pub const fn size(self) -> Size {
        match self {
            PacketSize::U8 => Size::U8,
            PacketSize::U16 => Size::U16,
            PacketSize::U32 => Size::U32,
        }
    }
}

/// 32-bit (`w` registers, upper half zeroed) or 64-bit operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    /// BPF_ALU / BPF_JMP32.
    W32,
    /// BPF_ALU64 / BPF_JMP.
    W64,
}

/// Binary ALU operations (everything but NEG and END, which have their own
/// forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    /// `+=`
    Add,
    /// `-=`
    Sub,
    /// `*=`
    Mul,
    /// `/=` (unsigned)
    Div,
    /// `|=`
    Or,
    /// `&=`
    And,
    /// `<<=`
    Lsh,
    /// `>>=` (logical)
    Rsh,
    /// `%=` (unsigned)
    Mod,
    /// `^=`
    Xor,
    /// `=`
    Mov,
    /// `s>>=` (arithmetic)
    Arsh,
}

impl AluOp {
    /// All binary ALU operations.
    pub const ALL: [AluOp; 12] = [
        AluOp::Add,
        AluOp::Sub,
        AluOp::Mul,
        AluOp::Div,
        AluOp::Or,
        AluOp::And,
        AluOp::Lsh,
        AluOp::Rsh,
        AluOp::Mod,
        AluOp::Xor,
        AluOp::Mov,
        AluOp::Arsh,
    ];

    const fn code(self) -> u8 {
        match self {
            AluOp::Add => 0x00,
            AluOp::Sub => 0x10,
            AluOp::Mul => 0x20,
            AluOp::Div => 0x30,
            AluOp::Or => 0x40,
            AluOp::And => 0x50,
            AluOp::Lsh => 0x60,
            AluOp::Rsh => 0x70,
            AluOp::Mod => 0x90,
            AluOp::Xor => 0xa0,
            AluOp::Mov => 0xb0,
            AluOp::Arsh => 0xc0,
        }
    }

    fn from_code(code: u8) -> Option<AluOp> {
        AluOp::ALL.into_iter().find(|op| op.code() == code)
    }

    /// The assignment operator llvm-objdump prints.
    pub const fn symbol(self) -> &'static str {
        match self {
            AluOp::Add => "+=",
            AluOp::Sub => "-=",
            AluOp::Mul => "*=",
            AluOp::Div => "/=",
            AluOp::Or => "|=",
            AluOp::And => "&=",
            AluOp::Lsh => "<<=",
            AluOp::Rsh => ">>=",
            AluOp::Mod => "%=",
            AluOp::Xor => "^=",
            AluOp::Mov => "=",
            AluOp::Arsh => "s>>=",
        }
    }
}

/// Conditions of conditional jumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    /// `==`
    Eq,
    /// `>` unsigned
    Gt,
    /// `>=` unsigned
    Ge,
    /// `&` (any common bit)
    Set,
    /// `!=`
    Ne,
    /// `s>`
    Sgt,
    /// `s>=`
    Sge,
    /// `<` unsigned
    Lt,
    /// `<=` unsigned
    Le,
    /// `s<`
    Slt,
    /// `s<=`
    Sle,
}

impl Cond {
    /// All conditions.
    pub const ALL: [Cond; 11] = [
        Cond::Eq,
        Cond::Gt,
        Cond::Ge,
        Cond::Set,
        Cond::Ne,
        Cond::Sgt,
        Cond::Sge,
        Cond::Lt,
        Cond::Le,
        Cond::Slt,
        Cond::Sle,
    ];

    const fn code(self) -> u8 {
        match self {
            Cond::Eq => 0x10,
            Cond::Gt => 0x20,
            Cond::Ge => 0x30,
            Cond::Set => 0x40,
            Cond::Ne => 0x50,
            Cond::Sgt => 0x60,
            Cond::Sge => 0x70,
            Cond::Lt => 0xa0,
            Cond::Le => 0xb0,
            Cond::Slt => 0xc0,
            Cond::Sle => 0xd0,
        }
    }

    fn from_code(code: u8) -> Option<Cond> {
        Cond::ALL.into_iter().find(|c| c.code() == code)
    }

    /// The comparison operator llvm-objdump prints.
    pub const fn symbol(self) -> &'static str {
        match self {
            Cond::Eq => "==",
            Cond::Gt => ">",
            Cond::Ge => ">=",
            Cond::Set => "&",
            Cond::Ne => "!=",
            Cond::Sgt => "s>",
            Cond::Sge => "s>=",
            Cond::Lt => "<",
            Cond::Le => "<=",
            Cond::Slt => "s<",
            Cond::Sle => "s<=",
        }
    }
}

/// Byte order target of an endianness conversion (`BPF_END`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endian {
    /// `le16`/`le32`/`le64`: to little-endian (a truncation on bpfel).
    Little,
    /// `be16`/`be32`/`be64`: to big-endian (a byte swap on bpfel).
    Big,
}

/// Operand width of an endianness conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwapBits {
    /// 16 bits.
    B16,
    /// 32 bits.
    B32,
    /// 64 bits.
    B64,
}

impl SwapBits {
    /// All widths.
    pub const ALL: [SwapBits; 3] = [SwapBits::B16, SwapBits::B32, SwapBits::B64];

    /// The width in bits (the instruction's immediate).
    pub const fn bits(self) -> i32 {
        match self {
            SwapBits::B16 => 16,
            SwapBits::B32 => 32,
            SwapBits::B64 => 64,
        }
    }
}

/// Source operand of ALU and JMP instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// `BPF_X`: a register.
    Reg(Reg),
    /// `BPF_K`: an immediate.
    Imm(Imm32),
}

/// A kernel helper function id (`BPF_FUNC_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Helper(pub i32);

impl Helper {
    /// `void *bpf_map_lookup_elem(map, key)`.
    pub const MAP_LOOKUP_ELEM: Helper = Helper(1);
    /// `long bpf_map_update_elem(map, key, value, flags)`.
    pub const MAP_UPDATE_ELEM: Helper = Helper(2);
    /// `u64 bpf_ktime_get_ns(void)`.
    pub const KTIME_GET_NS: Helper = Helper(5);
    /// `bpf_ktime_get_coarse_ns` (Linux 5.11): `CLOCK_MONOTONIC_COARSE`,
    /// the monotonic clock at the last tick, without reading the clocksource.
    pub const KTIME_GET_COARSE_NS: Helper = Helper(160);
    /// `long bpf_skb_load_bytes(skb, offset, to, len)`.
    pub const SKB_LOAD_BYTES: Helper = Helper(26);
    /// `long bpf_map_delete_elem(map, key)`.
    pub const MAP_DELETE_ELEM: Helper = Helper(3);
    /// `long bpf_ringbuf_output(ringbuf, data, size, flags)`.
    pub const RINGBUF_OUTPUT: Helper = Helper(130);
}

/// One eBPF instruction in typed form. Every variant but the two 64-bit
/// loads is one 8-byte slot; `LoadImm64` and `LoadMapRef` take two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insn {
    /// `dst op= src` (ALU or ALU64).
    Alu {
        /// 32- or 64-bit.
        width: Width,
        /// The operation.
        op: AluOp,
        /// Destination (and left operand).
        dst: Reg,
        /// Right operand.
        src: Operand,
    },
    /// `dst = -dst`.
    Neg {
        /// 32- or 64-bit.
        width: Width,
        /// Operand.
        dst: Reg,
    },
    /// `dst = be16 dst` etc. (always encoded in the 32-bit ALU class).
    Endian {
        /// Target byte order.
        order: Endian,
        /// Operand width.
        bits: SwapBits,
        /// Operand.
        dst: Reg,
    },
    /// `goto +off`.
    Ja {
        /// Distance in slots from the next slot.
        off: Off16,
    },
    /// `if dst cond src goto +off` (JMP or JMP32).
    JumpIf {
        /// 32-bit (JMP32) or 64-bit (JMP) comparison.
        width: Width,
        /// Condition.
        cond: Cond,
        /// Left operand.
        dst: Reg,
        /// Right operand.
        src: Operand,
        /// Distance in slots from the next slot.
        off: Off16,
    },
    /// `call helper`.
    Call {
        /// The helper.
        helper: Helper,
    },
    /// `exit`.
    Exit,
    /// `dst = *(size *)(src + off)` (LDX MEM).
    Load {
        /// Access width.
        size: Size,
        /// Destination.
        dst: Reg,
        /// Base pointer.
        src: Reg,
        /// Displacement.
        off: Off16,
    },
    /// `*(size *)(dst + off) = imm` (ST MEM).
    StoreImm {
        /// Access width.
        size: Size,
        /// Base pointer.
        dst: Reg,
        /// Displacement.
        off: Off16,
        /// Value (truncated to `size`).
        imm: Imm32,
    },
    /// `*(size *)(dst + off) = src` (STX MEM).
    Store {
        /// Access width.
        size: Size,
        /// Base pointer.
        dst: Reg,
        /// Displacement.
        off: Off16,
        /// Value.
        src: Reg,
    },
    /// `lock *(size *)(dst + off) += src` (STX ATOMIC, BPF_ADD; 32 or 64 bit).
    AtomicAdd {
        /// 32- or 64-bit.
        width: Width,
        /// Base pointer.
        dst: Reg,
        /// Displacement.
        off: Off16,
        /// Addend.
        src: Reg,
    },
    /// `r0 = *(size *)skb[imm]`: legacy absolute packet load (`BPF_LD |
    /// BPF_ABS`; context implicitly in r6, result in r0, byte-swapped to
    /// host order).
    PacketLoadAbs {
        /// Width.
        size: PacketSize,
        /// Packet offset.
        imm: Imm32,
    },
    /// `r0 = *(size *)skb[src + imm]`: legacy indirect packet load
    /// (`BPF_LD | BPF_IND`).
    PacketLoadInd {
        /// Width.
        size: PacketSize,
        /// Offset register.
        src: Reg,
        /// Added offset.
        imm: Imm32,
    },
    /// `dst = imm64 ll` (two slots).
    LoadImm64 {
        /// Destination.
        dst: Reg,
        /// The 64-bit constant.
        imm: i64,
    },
    /// `dst = <map> ll`: the ELF form of a map reference (two slots,
    /// `src_reg = 0`, `imm = 0`); the loader patches it through an
    /// `R_BPF_64_64` relocation. Decodes as `LoadImm64 { imm: 0 }`.
    LoadMapRef {
        /// Destination.
        dst: Reg,
    },
}

const CLASS_LD: u8 = 0x00;
const CLASS_LDX: u8 = 0x01;
const CLASS_ST: u8 = 0x02;
const CLASS_STX: u8 = 0x03;
const CLASS_ALU: u8 = 0x04;
const CLASS_JMP: u8 = 0x05;
const CLASS_JMP32: u8 = 0x06;
const CLASS_ALU64: u8 = 0x07;
const MODE_IMM: u8 = 0x00;
const MODE_ABS: u8 = 0x20;
const MODE_IND: u8 = 0x40;
const MODE_MEM: u8 = 0x60;
const MODE_ATOMIC: u8 = 0xc0;
const SRC_X: u8 = 0x08;
const OP_NEG: u8 = 0x80;
const OP_END: u8 = 0xd0;
const OP_JA: u8 = 0x00;
const OP_CALL: u8 = 0x80;
const OP_EXIT: u8 = 0x90;
const ATOMIC_ADD: i32 = 0x00;

/// One raw instruction slot (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RawSlot {
    /// Opcode byte.
    pub code: u8,
    /// Destination register nibble.
    pub dst: u8,
    /// Source register nibble.
    pub src: u8,
    /// Signed offset.
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

impl RawSlot {
    const fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> RawSlot {
        RawSlot {
            code,
            dst: dst.index(),
            src: src.index(),
            off,
            imm,
        }
    }

    /// The 8 bytes of this slot (bpfel: dst in the low nibble).
    pub fn to_bytes(self) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[0] = self.code;
        out[1] = (self.src << 4) | (self.dst & 0x0f);
        out[2..4].copy_from_slice(&self.off.to_le_bytes());
        out[4..8].copy_from_slice(&self.imm.to_le_bytes());
        out
    }

    /// Parses 8 bytes.
    pub fn from_bytes(bytes: [u8; 8]) -> RawSlot {
        RawSlot {
            code: bytes[0],
            dst: bytes[1] & 0x0f,
            src: bytes[1] >> 4,
            off: i16::from_le_bytes([bytes[2], bytes[3]]),
            imm: i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        }
    }
}

/// Why bytes could not be decoded into an [`Insn`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The byte length is not a multiple of 8.
    #[error("instruction stream of {0} bytes is not a multiple of 8")]
    Length(usize),
    /// A register nibble above 10.
    #[error("slot {slot}: register number {reg} does not exist")]
    BadRegister {
        /// Slot index.
        slot: usize,
        /// The nibble.
        reg: u8,
    },
    /// An opcode this model does not cover.
    #[error("slot {slot}: unsupported opcode {code:#04x} (src {src}, imm {imm})")]
    Unsupported {
        /// Slot index.
        slot: usize,
        /// Opcode byte.
        code: u8,
        /// Source nibble.
        src: u8,
        /// Immediate.
        imm: i32,
    },
    /// The first half of a 64-bit load without its second slot.
    #[error("slot {slot}: 64-bit immediate load is missing its second slot")]
    TruncatedImm64 {
        /// Slot index.
        slot: usize,
    },
}

impl Insn {
    /// Number of 8-byte slots this instruction takes.
    pub const fn slots(&self) -> usize {
        match self {
            Insn::LoadImm64 { .. } | Insn::LoadMapRef { .. } => 2,
            _ => 1,
        }
    }

    /// Whether this is a jump with a relative offset (its target is
    /// `index + 1 + off`).
    pub const fn jump_offset(&self) -> Option<Off16> {
        match self {
            Insn::Ja { off } | Insn::JumpIf { off, .. } => Some(*off),
            _ => None,
        }
    }

    /// The raw slot(s) of this instruction.
    pub fn encode(&self) -> Vec<RawSlot> {
        use Reg::R0;
        let alu_class = |w: Width| match w {
            Width::W32 => CLASS_ALU,
            Width::W64 => CLASS_ALU64,
        };
        let jmp_class = |w: Width| match w {
            Width::W32 => CLASS_JMP32,
            Width::W64 => CLASS_JMP,
        };
        let one = |slot: RawSlot| vec![slot];
        match *self {
            Insn::Alu {
                width,
                op,
                dst,
                src,
            } => one(match src {
                Operand::Reg(s) => RawSlot::new(alu_class(width) | op.code() | SRC_X, dst, s, 0, 0),
                Operand::Imm(Imm32(i)) => RawSlot::new(alu_class(width) | op.code(), dst, R0, 0, i),
            }),
            Insn::Neg { width, dst } => one(RawSlot::new(alu_class(width) | OP_NEG, dst, R0, 0, 0)),
            Insn::Endian { order, bits, dst } => {
                let source = match order {
                    Endian::Little => 0,
                    Endian::Big => SRC_X,
                };
                one(RawSlot::new(
                    CLASS_ALU | OP_END | source,
                    dst,
                    R0,
                    0,
                    bits.bits(),
                ))
            }
            Insn::Ja { off } => one(RawSlot::new(CLASS_JMP | OP_JA, R0, R0, off.0, 0)),
            Insn::JumpIf {
                width,
                cond,
                dst,
                src,
                off,
            } => one(match src {
                Operand::Reg(s) => {
                    RawSlot::new(jmp_class(width) | cond.code() | SRC_X, dst, s, off.0, 0)
                }
                Operand::Imm(Imm32(i)) => {
                    RawSlot::new(jmp_class(width) | cond.code(), dst, R0, off.0, i)
                }
            }),
            Insn::Call { helper } => one(RawSlot::new(CLASS_JMP | OP_CALL, R0, R0, 0, helper.0)),
            Insn::Exit => one(RawSlot::new(CLASS_JMP | OP_EXIT, R0, R0, 0, 0)),
            Insn::Load {
                size,
                dst,
                src,
                off,
            } => one(RawSlot::new(
                CLASS_LDX | MODE_MEM | size.code(),
                dst,
                src,
                off.0,
                0,
            )),
            Insn::StoreImm {
                size,
                dst,
                off,
                imm,
            } => one(RawSlot::new(
                CLASS_ST | MODE_MEM | size.code(),
                dst,
                R0,
                off.0,
                imm.0,
            )),
            Insn::Store {
                size,
                dst,
                off,
                src,
            } => one(RawSlot::new(
                CLASS_STX | MODE_MEM | size.code(),
                dst,
                src,
                off.0,
                0,
            )),
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
                one(RawSlot::new(
                    CLASS_STX | MODE_ATOMIC | size.code(),
                    dst,
                    src,
                    off.0,
                    ATOMIC_ADD,
                ))
            }
            Insn::PacketLoadAbs { size, imm } => one(RawSlot::new(
                CLASS_LD | MODE_ABS | size.size().code(),
                R0,
                R0,
                0,
                imm.0,
            )),
            Insn::PacketLoadInd { size, src, imm } => one(RawSlot::new(
                CLASS_LD | MODE_IND | size.size().code(),
                R0,
                src,
                0,
                imm.0,
            )),
            Insn::LoadImm64 { dst, imm } => {
                // Low half in the first slot, high half in the second.
                let low = imm as u64 as u32 as i32;
                let high = ((imm as u64) >> 32) as u32 as i32;
                vec![
                    RawSlot::new(CLASS_LD | MODE_IMM | Size::U64.code(), dst, R0, 0, low),
                    RawSlot::new(0, R0, R0, 0, high),
                ]
            }
            Insn::LoadMapRef { dst } => Insn::LoadImm64 { dst, imm: 0 }.encode(),
        }
    }

    /// Appends the bytes of this instruction.
    pub fn write_bytes(&self, out: &mut Vec<u8>) {
        for slot in self.encode() {
            out.extend_from_slice(&slot.to_bytes());
        }
    }

    /// Decodes a whole instruction stream.
    pub fn decode_all(bytes: &[u8]) -> Result<Vec<Insn>, DecodeError> {
        if !bytes.len().is_multiple_of(8) {
            return Err(DecodeError::Length(bytes.len()));
        }
        let slots: Vec<RawSlot> = bytes
            .chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                RawSlot::from_bytes(a)
            })
            .collect();
        let mut out = Vec::new();
        let mut index = 0;
        while index < slots.len() {
            let insn = Insn::decode(&slots[index..], index)?;
            index += insn.slots();
            out.push(insn);
        }
        Ok(out)
    }

    /// Decodes the instruction starting at `slots[0]` (`slot` is its index,
    /// for error messages).
    pub fn decode(slots: &[RawSlot], slot: usize) -> Result<Insn, DecodeError> {
        let Some(&raw) = slots.first() else {
            return Err(DecodeError::TruncatedImm64 { slot });
        };
        let reg = |n: u8| Reg::from_index(n).ok_or(DecodeError::BadRegister { slot, reg: n });
        let unsupported = DecodeError::Unsupported {
            slot,
            code: raw.code,
            src: raw.src,
            imm: raw.imm,
        };
        let class = raw.code & 0x07;
        let dst = reg(raw.dst)?;
        let off = Off16(raw.off);
        let no_src = raw.src == 0;
        match class {
            CLASS_ALU | CLASS_ALU64 => {
                let width = if class == CLASS_ALU {
                    Width::W32
                } else {
                    Width::W64
                };
                let op = raw.code & 0xf0;
                let uses_x = raw.code & SRC_X != 0;
                if op == OP_END {
                    if class != CLASS_ALU || raw.off != 0 || !no_src {
                        return Err(unsupported);
                    }
                    let bits = match raw.imm {
                        16 => SwapBits::B16,
                        32 => SwapBits::B32,
                        64 => SwapBits::B64,
                        _ => return Err(unsupported),
                    };
                    let order = if uses_x { Endian::Big } else { Endian::Little };
                    return Ok(Insn::Endian { order, bits, dst });
                }
                if op == OP_NEG {
                    if uses_x || raw.imm != 0 || raw.off != 0 || !no_src {
                        return Err(unsupported);
                    }
                    return Ok(Insn::Neg { width, dst });
                }
                let op = AluOp::from_code(op).ok_or(unsupported.clone())?;
                if raw.off != 0 {
                    return Err(unsupported);
                }
                let src = if uses_x {
                    if raw.imm != 0 {
                        return Err(unsupported);
                    }
                    Operand::Reg(reg(raw.src)?)
                } else {
                    if !no_src {
                        return Err(unsupported);
                    }
                    Operand::Imm(Imm32(raw.imm))
                };
                Ok(Insn::Alu {
                    width,
                    op,
                    dst,
                    src,
                })
            }
            CLASS_JMP | CLASS_JMP32 => {
                let width = if class == CLASS_JMP32 {
                    Width::W32
                } else {
                    Width::W64
                };
                let op = raw.code & 0xf0;
                let uses_x = raw.code & SRC_X != 0;
                if class == CLASS_JMP && !uses_x && raw.dst == 0 && no_src {
                    match op {
                        OP_JA if raw.imm == 0 => return Ok(Insn::Ja { off }),
                        OP_CALL if raw.off == 0 => {
                            return Ok(Insn::Call {
                                helper: Helper(raw.imm),
                            });
                        }
                        OP_EXIT if raw.off == 0 && raw.imm == 0 => return Ok(Insn::Exit),
                        _ => {}
                    }
                }
                let cond = Cond::from_code(op).ok_or(unsupported.clone())?;
                let src = if uses_x {
                    if raw.imm != 0 {
                        return Err(unsupported);
                    }
                    Operand::Reg(reg(raw.src)?)
                } else {
                    if !no_src {
                        return Err(unsupported);
                    }
                    Operand::Imm(Imm32(raw.imm))
                };
                Ok(Insn::JumpIf {
                    width,
                    cond,
                    dst,
                    src,
                    off,
                })
            }
            CLASS_LDX if raw.code & 0xe0 == MODE_MEM && raw.imm == 0 => Ok(Insn::Load {
                size: Size::from_code(raw.code),
                dst,
                src: reg(raw.src)?,
                off,
            }),
            CLASS_ST if raw.code & 0xe0 == MODE_MEM && no_src => Ok(Insn::StoreImm {
                size: Size::from_code(raw.code),
                dst,
                off,
                imm: Imm32(raw.imm),
            }),
            CLASS_STX if raw.code & 0xe0 == MODE_MEM && raw.imm == 0 => Ok(Insn::Store {
                size: Size::from_code(raw.code),
                dst,
                off,
                src: reg(raw.src)?,
            }),
            CLASS_STX if raw.code & 0xe0 == MODE_ATOMIC && raw.imm == ATOMIC_ADD => {
                let width = match Size::from_code(raw.code) {
                    Size::U32 => Width::W32,
                    Size::U64 => Width::W64,
                    _ => return Err(unsupported),
                };
                Ok(Insn::AtomicAdd {
                    width,
                    dst,
                    off,
                    src: reg(raw.src)?,
                })
            }
            CLASS_LD
                if matches!(raw.code & 0xe0, MODE_ABS | MODE_IND)
                    && raw.dst == 0
                    && raw.off == 0 =>
            {
                let size = match Size::from_code(raw.code) {
                    Size::U8 => PacketSize::U8,
                    Size::U16 => PacketSize::U16,
                    Size::U32 => PacketSize::U32,
                    Size::U64 => return Err(unsupported),
                };
                if raw.code & 0xe0 == MODE_ABS {
                    if !no_src {
                        return Err(unsupported);
                    }
                    Ok(Insn::PacketLoadAbs {
                        size,
                        imm: Imm32(raw.imm),
                    })
                } else {
                    Ok(Insn::PacketLoadInd {
                        size,
                        src: reg(raw.src)?,
                        imm: Imm32(raw.imm),
                    })
                }
            }
            CLASS_LD
                if raw.code == (CLASS_LD | MODE_IMM | Size::U64.code())
                    && no_src
                    && raw.off == 0 =>
            {
                let Some(&high) = slots.get(1) else {
                    return Err(DecodeError::TruncatedImm64 { slot });
                };
                if high.code != 0 || high.dst != 0 || high.src != 0 || high.off != 0 {
                    return Err(unsupported);
                }
                let imm = (u64::from(raw.imm as u32) | (u64::from(high.imm as u32) << 32)) as i64;
                Ok(Insn::LoadImm64 { dst, imm })
            }
            _ => Err(unsupported),
        }
    }
}

/// Encodes a sequence of instructions to bytes.
pub fn to_bytes(insns: &[Insn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(insns.len() * 8);
    for insn in insns {
        insn.write_bytes(&mut out);
    }
    out
}
