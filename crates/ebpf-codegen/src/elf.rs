//! The ELF writer: programs, BTF-defined maps, license and `.BTF`, in the
//! minimal shape every loader accepts (DATAPATH.md §1, §6: `classifier`
//! section, `.maps`, `license`, `.BTF`, global symbols, `R_BPF_64_64`
//! relocations with addend 0, no `.BTF.ext`).

use object::write::{Object, Relocation, SectionId, Symbol, SymbolId, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, RelocationFlags, SectionFlags, SectionKind,
    SymbolFlags, SymbolKind, SymbolScope, elf,
};
use thiserror::Error;

use crate::abi::{FieldType, Layout};
use crate::asm::Assembled;
use crate::btf::{Btf, BtfError, BtfType, DataSec, IntEncoding, SecInfo, TypeId, Var, VarLinkage};
use crate::maps::{MapKind, MapPinning, MapSpec};

/// Why an object could not be written.
#[derive(Debug, Error)]
pub enum ElfError {
    /// BTF encoding failed.
    #[error("BTF: {0}")]
    Btf(#[from] BtfError),
    /// The `object` crate rejected the layout.
    #[error("ELF writer: {0}")]
    Object(#[from] object::write::Error),
    /// A program references a map the object does not define.
    #[error("program {program} references unknown map {map}")]
    UnknownMap {
        /// Program name.
        program: String,
        /// Map name.
        map: String,
    },
    /// A size does not fit the 32-bit fields of BTF/ELF.
    #[error("{0} is too large")]
    TooLarge(&'static str),
}

/// One program of the object.
#[derive(Clone, Debug)]
pub struct ProgramCode {
    /// Symbol name.
    pub name: String,
    /// Code and map references.
    pub code: Assembled,
}

/// Everything the object contains.
#[derive(Clone, Debug)]
pub struct ObjectLayout<'a> {
    /// ELF section the programs go into (`classifier`).
    pub section: &'a str,
    /// Programs, in section order.
    pub programs: &'a [ProgramCode],
    /// Maps, in `.maps` order.
    pub maps: &'a [MapSpec],
    /// License string (`GPL`).
    pub license: &'a str,
}

/// A size or offset of the ABI as BTF writes it. ABI structs are tens of
/// bytes (`crate::abi`), so the conversion never saturates.
fn btf_size(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Size of one map definition member (a pointer) in `.maps`.
const MAP_MEMBER_SIZE: u32 = 8;

/// Members of one map definition: type, key and value (unless absent),
/// max_entries, map_flags, and pinning when pinned.
fn map_def_members(map: &MapSpec) -> u32 {
    let absent = |layout: &Layout| u32::from(*layout == Layout::None);
    let pinned = u32::from(map.pinning == MapPinning::ByName);
    5 - absent(&map.key) - absent(&map.value) + pinned
}

/// Builds the `.BTF` for the maps: typed key/value structs, one anonymous
/// definition struct per map (clang's `__uint`/`__type` encoding), one VAR
/// each and DATASEC `.maps` with real sizes and offsets.
pub fn maps_btf(maps: &[MapSpec]) -> Result<Btf, ElfError> {
    let mut btf = Btf::new();
    let int = btf.int("int", 4, IntEncoding::Signed);
    let u8t = btf.int("unsigned char", 1, IntEncoding::Unsigned);
    let u16t = btf.int("unsigned short", 2, IntEncoding::Unsigned);
    let u32t = btf.int("unsigned int", 4, IntEncoding::Unsigned);
    let u64t = btf.int("unsigned long long", 8, IntEncoding::Unsigned);

    let layout_type = |btf: &mut Btf, layout: &Layout| -> TypeId {
        match layout {
            Layout::U32 | Layout::None => u32t,
            Layout::Struct { name, size, fields } => {
                let members: Vec<_> = fields
                    .iter()
                    .map(|field| {
                        let id = match field.ty {
                            FieldType::U8 => u8t,
                            FieldType::U16 => u16t,
                            FieldType::U32 => u32t,
                            FieldType::U64 => u64t,
                            FieldType::Bytes(n) => btf.array(u8t, u32t, btf_size(n)),
                        };
                        (field.name, id, btf_size(field.offset))
                    })
                    .collect();
                btf.structure(name, btf_size(*size), &members)
            }
        }
    };
    // `__uint(name, n)` is `int (*name)[n]`.
    let number = |btf: &mut Btf, n: u32| -> TypeId {
        let array = btf.array(int, u32t, n);
        btf.ptr(array)
    };

    let mut vars = Vec::new();
    let mut offset = 0u32;
    for map in maps {
        let kind = number(&mut btf, map.kind.number());
        let mut members = vec![("type", kind)];
        // A ring buffer has neither key nor value (libbpf and the kernel
        // require key_size = value_size = 0).
        if map.key != Layout::None {
            let key = layout_type(&mut btf, &map.key);
            members.push(("key", btf.ptr(key)));
        }
        if map.value != Layout::None {
            let value = layout_type(&mut btf, &map.value);
            members.push(("value", btf.ptr(value)));
        }
        let max = number(&mut btf, map.max_entries);
        members.push(("max_entries", max));
        let flags = number(&mut btf, map.flags);
        members.push(("map_flags", flags));
        if map.pinning == MapPinning::ByName {
            // LIBBPF_PIN_BY_NAME = 1.
            let pin = number(&mut btf, 1);
            members.push(("pinning", pin));
        }
        let members: Vec<_> = (0u32..)
            .zip(members)
            .map(|(i, (name, ty))| (name, ty, i * MAP_MEMBER_SIZE))
            .collect();
        let size = map_def_members(map) * MAP_MEMBER_SIZE;
        debug_assert_eq!(btf_size(members.len()), map_def_members(map));
        let def = btf.structure("", size, &members);
        let var = btf.add_type(BtfType::Var(Var {
            name: map.name.to_owned(),
            ty: def,
            linkage: VarLinkage::GlobalAllocated,
        }));
        vars.push(SecInfo { var, offset, size });
        offset += size;
    }
    // The ring buffer's record type, so that BTF consumers see it.
    if maps.iter().any(|m| m.kind == MapKind::RingBuf) {
        layout_type(&mut btf, &crate::abi::Event::LAYOUT);
    }
    btf.add_type(BtfType::DataSec(DataSec {
        name: ".maps".to_owned(),
        size: offset,
        vars,
    }));
    Ok(btf)
}

fn symbol(name: &str, value: u64, size: u64, kind: SymbolKind, section: SectionId) -> Symbol {
    Symbol {
        name: name.as_bytes().to_vec(),
        value,
        size,
        kind,
        scope: SymbolScope::Dynamic,
        weak: false,
        section: SymbolSection::Section(section),
        flags: SymbolFlags::None,
    }
}

/// Writes the relocatable ELF object.
pub fn write_object(layout: &ObjectLayout<'_>) -> Result<Vec<u8>, ElfError> {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::Bpf, Endianness::Little);

    // Programs, concatenated in one section.
    let prog_section = obj.add_section(
        Vec::new(),
        layout.section.as_bytes().to_vec(),
        SectionKind::Text,
    );
    let mut code = Vec::new();
    let mut program_offsets = Vec::new();
    for program in layout.programs {
        program_offsets.push(code.len() as u64);
        code.extend_from_slice(&program.code.bytes());
    }
    obj.set_section_data(prog_section, code, 8);

    // Maps: zero bytes; the definition lives in BTF.
    let maps_section = obj.add_section(Vec::new(), b".maps".to_vec(), SectionKind::Data);
    let mut map_symbols: Vec<(&str, SymbolId)> = Vec::new();
    let mut map_offset = 0u64;
    let mut map_symbol_defs = Vec::new();
    for map in layout.maps {
        let size = u64::from(map_def_members(map) * MAP_MEMBER_SIZE);
        map_symbol_defs.push((map.name, map_offset, size));
        map_offset += size;
    }
    obj.set_section_data(maps_section, vec![0u8; map_offset as usize], 8);

    let license_section = obj.add_section(Vec::new(), b"license".to_vec(), SectionKind::Data);
    let mut license = layout.license.as_bytes().to_vec();
    license.push(0);
    let license_len = license.len() as u64;
    obj.set_section_data(license_section, license, 1);

    let btf_bytes = maps_btf(layout.maps)?.to_bytes()?;
    let btf_section = obj.add_section(Vec::new(), b".BTF".to_vec(), SectionKind::Other);
    obj.section_mut(btf_section).flags = SectionFlags::Elf {
        sh_type: elf::SHT_PROGBITS,
        sh_flags: elf::SectionFlags(0),
    };
    obj.set_section_data(btf_section, btf_bytes, 4);

    // Symbols: programs (FUNC), maps (OBJECT), license.
    for (program, &offset) in layout.programs.iter().zip(&program_offsets) {
        let size = program.code.slot_count() as u64 * 8;
        obj.add_symbol(symbol(
            &program.name,
            offset,
            size,
            SymbolKind::Text,
            prog_section,
        ));
    }
    for (name, offset, size) in map_symbol_defs {
        let id = obj.add_symbol(symbol(name, offset, size, SymbolKind::Data, maps_section));
        map_symbols.push((name, id));
    }
    obj.add_symbol(symbol(
        "_license",
        0,
        license_len,
        SymbolKind::Data,
        license_section,
    ));

    // Relocations: one R_BPF_64_64 per map reference, addend 0 (object
    // writes REL, i.e. implicit addends in the instruction bytes).
    for (program, &base) in layout.programs.iter().zip(&program_offsets) {
        for map_ref in &program.code.map_refs {
            let symbol = map_symbols
                .iter()
                .find(|(name, _)| *name == map_ref.map)
                .map(|(_, id)| *id)
                .ok_or_else(|| ElfError::UnknownMap {
                    program: program.name.clone(),
                    map: map_ref.map.clone(),
                })?;
            obj.add_relocation(
                prog_section,
                Relocation {
                    offset: base + map_ref.slot as u64 * 8,
                    symbol,
                    addend: 0,
                    flags: RelocationFlags::Elf {
                        r_type: elf::R_BPF_64_64,
                    },
                },
            )?;
        }
    }
    Ok(obj.write()?)
}
