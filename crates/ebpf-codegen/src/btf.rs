//! A small BTF encoder (`.BTF` section contents).
//!
//! aya-obj 0.3 cannot build STRUCT, ARRAY or TYPEDEF types (their
//! constructors are crate-private), and BTF-defined maps need
//! exactly those, so porin writes BTF itself. Layout: kernel
//! `include/uapi/linux/btf.h` (header, `struct btf_type`, per-kind trailers).

use std::collections::HashMap;

use thiserror::Error;

/// A BTF type id (1-based; 0 is `void`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeId(pub u32);

/// `void` (the implicit type 0).
pub const VOID: TypeId = TypeId(0);

/// Encoding bits of an INT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntEncoding {
    /// Unsigned.
    Unsigned,
    /// Signed (`BTF_INT_SIGNED`).
    Signed,
    /// Character (`BTF_INT_CHAR`).
    Char,
    /// Boolean (`BTF_INT_BOOL`).
    Bool,
}

impl IntEncoding {
    const fn bits(self) -> u32 {
        match self {
            IntEncoding::Unsigned => 0,
            IntEncoding::Signed => 1,
            IntEncoding::Char => 2,
            IntEncoding::Bool => 4,
        }
    }
}

/// Linkage of a VAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarLinkage {
    /// `BTF_VAR_STATIC`.
    Static,
    /// `BTF_VAR_GLOBAL_ALLOCATED` (what clang emits for map definitions).
    GlobalAllocated,
}

/// Linkage of a FUNC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuncLinkage {
    /// `BTF_FUNC_STATIC`.
    Static,
    /// `BTF_FUNC_GLOBAL`.
    Global,
}

/// INT: a named integer type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Int {
    /// Name (`unsigned int`).
    pub name: String,
    /// Size in bytes (1, 2, 4, 8, 16).
    pub size: u32,
    /// Encoding.
    pub encoding: IntEncoding,
}

/// PTR to a type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ptr {
    /// Pointee.
    pub target: TypeId,
}

/// ARRAY of `len` elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Array {
    /// Element type.
    pub element: TypeId,
    /// Index type (an INT).
    pub index: TypeId,
    /// Number of elements.
    pub len: u32,
}

/// One STRUCT member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Member name (empty for anonymous).
    pub name: String,
    /// Member type.
    pub ty: TypeId,
    /// Offset in **bytes** (encoded in bits).
    pub offset: u32,
}

/// STRUCT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Struct {
    /// Name (empty for anonymous).
    pub name: String,
    /// Size in bytes.
    pub size: u32,
    /// Members.
    pub members: Vec<Member>,
}

/// VAR (a global variable, e.g. a map definition in `.maps`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Var {
    /// Variable name.
    pub name: String,
    /// Its type.
    pub ty: TypeId,
    /// Linkage.
    pub linkage: VarLinkage,
}

/// One DATASEC entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecInfo {
    /// The VAR.
    pub var: TypeId,
    /// Offset in the section.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
}

/// DATASEC: the variables of one ELF section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSec {
    /// ELF section name.
    pub name: String,
    /// Section size.
    pub size: u32,
    /// Variables.
    pub vars: Vec<SecInfo>,
}

/// One FUNC_PROTO parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Parameter name.
    pub name: String,
    /// Its type.
    pub ty: TypeId,
}

/// FUNC_PROTO: a function signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncProto {
    /// Return type.
    pub ret: TypeId,
    /// Parameters.
    pub params: Vec<Param>,
}

/// FUNC: a named function of a FUNC_PROTO.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Func {
    /// Function name.
    pub name: String,
    /// The FUNC_PROTO.
    pub proto: TypeId,
    /// Linkage.
    pub linkage: FuncLinkage,
}

/// One BTF type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BtfType {
    /// `BTF_KIND_INT` (1).
    Int(Int),
    /// `BTF_KIND_PTR` (2).
    Ptr(Ptr),
    /// `BTF_KIND_ARRAY` (3).
    Array(Array),
    /// `BTF_KIND_STRUCT` (4).
    Struct(Struct),
    /// `BTF_KIND_FUNC` (12).
    Func(Func),
    /// `BTF_KIND_FUNC_PROTO` (13).
    FuncProto(FuncProto),
    /// `BTF_KIND_VAR` (14).
    Var(Var),
    /// `BTF_KIND_DATASEC` (15).
    DataSec(DataSec),
}

/// Why BTF could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BtfError {
    /// A type refers to an id that was not added (yet).
    #[error("type {referrer} refers to type {target}, which does not exist")]
    DanglingType {
        /// The referring type id.
        referrer: u32,
        /// The missing id.
        target: u32,
    },
    /// More members/params/vars than the 16-bit vlen field holds.
    #[error("type {0} has more than 65535 members")]
    TooManyMembers(u32),
    /// A struct member offset in bits does not fit 24 bits.
    #[error("type {0}: member offset does not fit the BTF encoding")]
    OffsetTooLarge(u32),
    /// The section does not fit the 32-bit header fields.
    #[error("BTF larger than 4 GiB")]
    TooLarge,
}

/// A BTF blob under construction.
#[derive(Clone, Debug, Default)]
pub struct Btf {
    types: Vec<BtfType>,
    strings: Vec<u8>,
    string_offsets: HashMap<String, u32>,
}

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;

impl Btf {
    /// An empty BTF (only the empty string).
    pub fn new() -> Btf {
        let mut btf = Btf::default();
        btf.strings.push(0);
        btf.string_offsets.insert(String::new(), 0);
        btf
    }

    /// Adds a string (deduplicated) and returns its offset. The empty string
    /// is offset 0.
    pub fn add_string(&mut self, s: &str) -> u32 {
        if let Some(&off) = self.string_offsets.get(s) {
            return off;
        }
        // A string table beyond 4 GiB is impossible for our few hundred
        // names; saturate rather than panic, `to_bytes` checks the total.
        let off = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        self.string_offsets.insert(s.to_owned(), off);
        off
    }

    /// Adds a type and returns its id.
    pub fn add_type(&mut self, ty: BtfType) -> TypeId {
        self.types.push(ty);
        TypeId(u32::try_from(self.types.len()).unwrap_or(u32::MAX))
    }

    /// The types added so far (id `i + 1` is `types()[i]`).
    pub fn types(&self) -> &[BtfType] {
        &self.types
    }

    /// Convenience: an INT.
    pub fn int(&mut self, name: &str, size: u32, encoding: IntEncoding) -> TypeId {
        self.add_type(BtfType::Int(Int {
            name: name.to_owned(),
            size,
            encoding,
        }))
    }

    /// Convenience: a PTR.
    pub fn ptr(&mut self, target: TypeId) -> TypeId {
        self.add_type(BtfType::Ptr(Ptr { target }))
    }

    /// Convenience: an ARRAY.
    pub fn array(&mut self, element: TypeId, index: TypeId, len: u32) -> TypeId {
        self.add_type(BtfType::Array(Array {
            element,
            index,
            len,
        }))
    }

    /// Convenience: a STRUCT from `(name, type, byte offset)` members.
    pub fn structure(&mut self, name: &str, size: u32, members: &[(&str, TypeId, u32)]) -> TypeId {
        self.add_type(BtfType::Struct(Struct {
            name: name.to_owned(),
            size,
            members: members
                .iter()
                .map(|&(name, ty, offset)| Member {
                    name: name.to_owned(),
                    ty,
                    offset,
                })
                .collect(),
        }))
    }

    fn check(&self, referrer: u32, target: TypeId) -> Result<(), BtfError> {
        if target.0 as usize > self.types.len() {
            return Err(BtfError::DanglingType {
                referrer,
                target: target.0,
            });
        }
        Ok(())
    }

    /// The `.BTF` section bytes (little-endian).
    pub fn to_bytes(&self) -> Result<Vec<u8>, BtfError> {
        // Names are interned first so that the string table is complete
        // before it is written; interning is deterministic (type order).
        let mut strings = self.clone();
        let mut type_bytes = Vec::new();
        let put = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
        let vlen = |id: u32, n: usize| -> Result<u32, BtfError> {
            u16::try_from(n)
                .map(u32::from)
                .map_err(|_| BtfError::TooManyMembers(id))
        };
        for (index, ty) in self.types.iter().enumerate() {
            let id = index as u32 + 1;
            match ty {
                BtfType::Int(int) => {
                    put(&mut type_bytes, strings.add_string(&int.name));
                    put(&mut type_bytes, KIND_INT << 24);
                    put(&mut type_bytes, int.size);
                    put(
                        &mut type_bytes,
                        (int.encoding.bits() << 24) | (int.size * 8),
                    );
                }
                BtfType::Ptr(ptr) => {
                    self.check(id, ptr.target)?;
                    put(&mut type_bytes, 0);
                    put(&mut type_bytes, KIND_PTR << 24);
                    put(&mut type_bytes, ptr.target.0);
                }
                BtfType::Array(array) => {
                    self.check(id, array.element)?;
                    self.check(id, array.index)?;
                    put(&mut type_bytes, 0);
                    put(&mut type_bytes, KIND_ARRAY << 24);
                    put(&mut type_bytes, 0);
                    put(&mut type_bytes, array.element.0);
                    put(&mut type_bytes, array.index.0);
                    put(&mut type_bytes, array.len);
                }
                BtfType::Struct(st) => {
                    put(&mut type_bytes, strings.add_string(&st.name));
                    put(
                        &mut type_bytes,
                        (KIND_STRUCT << 24) | vlen(id, st.members.len())?,
                    );
                    put(&mut type_bytes, st.size);
                    for member in &st.members {
                        self.check(id, member.ty)?;
                        let bits = member
                            .offset
                            .checked_mul(8)
                            .filter(|b| *b < (1 << 24))
                            .ok_or(BtfError::OffsetTooLarge(id))?;
                        put(&mut type_bytes, strings.add_string(&member.name));
                        put(&mut type_bytes, member.ty.0);
                        put(&mut type_bytes, bits);
                    }
                }
                BtfType::Func(func) => {
                    self.check(id, func.proto)?;
                    let linkage = match func.linkage {
                        FuncLinkage::Static => 0,
                        FuncLinkage::Global => 1,
                    };
                    put(&mut type_bytes, strings.add_string(&func.name));
                    put(&mut type_bytes, (KIND_FUNC << 24) | linkage);
                    put(&mut type_bytes, func.proto.0);
                }
                BtfType::FuncProto(proto) => {
                    self.check(id, proto.ret)?;
                    put(&mut type_bytes, 0);
                    put(
                        &mut type_bytes,
                        (KIND_FUNC_PROTO << 24) | vlen(id, proto.params.len())?,
                    );
                    put(&mut type_bytes, proto.ret.0);
                    for param in &proto.params {
                        self.check(id, param.ty)?;
                        put(&mut type_bytes, strings.add_string(&param.name));
                        put(&mut type_bytes, param.ty.0);
                    }
                }
                BtfType::Var(var) => {
                    self.check(id, var.ty)?;
                    put(&mut type_bytes, strings.add_string(&var.name));
                    put(&mut type_bytes, KIND_VAR << 24);
                    put(&mut type_bytes, var.ty.0);
                    put(
                        &mut type_bytes,
                        match var.linkage {
                            VarLinkage::Static => 0,
                            VarLinkage::GlobalAllocated => 1,
                        },
                    );
                }
                BtfType::DataSec(sec) => {
                    put(&mut type_bytes, strings.add_string(&sec.name));
                    put(
                        &mut type_bytes,
                        (KIND_DATASEC << 24) | vlen(id, sec.vars.len())?,
                    );
                    put(&mut type_bytes, sec.size);
                    for var in &sec.vars {
                        self.check(id, var.var)?;
                        put(&mut type_bytes, var.var.0);
                        put(&mut type_bytes, var.offset);
                        put(&mut type_bytes, var.size);
                    }
                }
            }
        }
        let type_len = u32::try_from(type_bytes.len()).map_err(|_| BtfError::TooLarge)?;
        let str_len = u32::try_from(strings.strings.len()).map_err(|_| BtfError::TooLarge)?;
        let mut out = Vec::with_capacity(24 + type_bytes.len() + strings.strings.len());
        out.extend_from_slice(&0xEB9Fu16.to_le_bytes());
        out.push(1); // version
        out.push(0); // flags
        put(&mut out, 24); // hdr_len
        put(&mut out, 0); // type_off
        put(&mut out, type_len);
        put(&mut out, type_len); // str_off
        put(&mut out, str_len);
        out.extend_from_slice(&type_bytes);
        out.extend_from_slice(&strings.strings);
        Ok(out)
    }
}
