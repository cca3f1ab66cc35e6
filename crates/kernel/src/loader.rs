//! porin's own minimal ELF loader: BTF-defined maps, `ld_imm64` map relocations, programs.
//!
//! It accepts exactly the object layout porin emits (and that clang emits for the same C):
//! - program code in executable sections (porin: `classifier`), one global FUNC symbol per
//!   program, several programs per section allowed;
//! - maps as BTF-defined VARs in `.maps` (see [`super::btf`]);
//! - `R_BPF_64_64` relocations on `ld_imm64` instructions that name a map symbol (or the `.maps`
//!   section symbol plus the offset held in the instruction's immediate);
//! - a `license` section.
//!
//! Loading creates every map, patches each relocated `ld_imm64` with `src_reg =
//! BPF_PSEUDO_MAP_FD` and `imm = fd`, and loads every program as `SCHED_CLS`. Anything else
//! (legacy `maps` section, `.rodata`/`.data` globals, BPF-to-BPF calls) is rejected with a clear
//! error instead of being half-supported.

use std::collections::BTreeMap;

use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationTarget, SectionKind};

use super::btf_reader::{Btf, MapDefinition};
use super::error::KernelError;
use super::map::Map;
use super::program::Program;
use super::sys::{self, MapSpec, ProgramType};

/// Opcode of `ld_imm64` (`BPF_LD | BPF_DW | BPF_IMM`).
const LD_IMM64: u8 = 0x18;
/// `BPF_PSEUDO_MAP_FD`: the immediate is a map fd.
const PSEUDO_MAP_FD: u8 = 1;
/// `BPF_JMP | BPF_CALL`.
const CALL: u8 = 0x85;
/// `BPF_PSEUDO_CALL`: a call to another BPF function.
const PSEUDO_CALL: u8 = 1;

fn bad(detail: impl Into<String>) -> KernelError {
    KernelError::Object(detail.into())
}

/// One relocation to apply: instruction index (within the program) → map name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapRelocation {
    /// Index of the `ld_imm64` within the program (in 8-byte slots).
    pub instruction: usize,
    /// The referenced map.
    pub map: String,
}

/// A program as found in the object, before loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramDefinition {
    /// Symbol name.
    pub name: String,
    /// ELF section name.
    pub section: String,
    /// Raw instructions, unpatched.
    pub code: Vec<u8>,
    /// Map references to patch.
    pub relocations: Vec<MapRelocation>,
}

/// The parsed object: what would be created in the kernel. Parsing needs no privileges.
#[derive(Debug, Clone)]
pub struct ObjectFile {
    /// Map definitions in `.maps` order.
    pub maps: Vec<MapDefinition>,
    /// Programs in symbol order.
    pub programs: Vec<ProgramDefinition>,
    /// The `license` string.
    pub license: String,
    /// The raw `.BTF` section.
    pub btf: Vec<u8>,
}

impl ObjectFile {
    /// Parses an eBPF ELF object.
    pub fn parse(bytes: &[u8]) -> Result<Self, KernelError> {
        let file = object::File::parse(bytes).map_err(|e| bad(format!("not an ELF file: {e}")))?;
        if file.architecture() != object::Architecture::Bpf {
            return Err(bad(format!(
                "architecture is {:?}, not BPF",
                file.architecture()
            )));
        }
        if !file.is_little_endian() {
            return Err(bad("big-endian BPF objects are not supported"));
        }
        if file.section_by_name("maps").is_some() {
            return Err(bad(
                "legacy `maps` section: porin only loads BTF-defined maps in `.maps`",
            ));
        }
        let btf = file
            .section_by_name(".BTF")
            .ok_or_else(|| bad("no .BTF section: maps cannot be decoded"))?
            .data()
            .map_err(|e| bad(format!("cannot read .BTF: {e}")))?
            .to_vec();
        let maps = Btf::parse(&btf)?.map_definitions()?;
        let maps_section = file.section_by_name(".maps").map(|s| s.index());
        if maps_section.is_none() && !maps.is_empty() {
            return Err(bad("BTF declares maps but the object has no .maps section"));
        }
        let license = match file.section_by_name("license") {
            Some(section) => {
                let data = section
                    .data()
                    .map_err(|e| bad(format!("cannot read license: {e}")))?;
                let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                String::from_utf8_lossy(&data[..end]).into_owned()
            }
            None => return Err(bad("no `license` section")),
        };

        // Map symbols: (offset in .maps) -> map name. The ELF symbols are authoritative (clang
        // leaves the DATASEC offsets at 0 and libbpf fixes them up from the symbols); each
        // symbol must name a BTF map definition.
        let mut map_by_offset: BTreeMap<u64, String> = BTreeMap::new();
        for symbol in file.symbols() {
            if maps_section.is_none() || symbol.section_index() != maps_section {
                continue;
            }
            if symbol.kind() == object::SymbolKind::Section {
                continue;
            }
            let name = symbol
                .name()
                .map_err(|e| bad(format!("bad symbol name in .maps: {e}")))?;
            if !maps.iter().any(|m| m.name == name) {
                return Err(bad(format!(
                    "symbol `{name}` in .maps has no BTF map definition"
                )));
            }
            map_by_offset.insert(symbol.address(), name.to_owned());
        }

        let mut programs = Vec::new();
        for section in file.sections() {
            if section.kind() != SectionKind::Text {
                continue;
            }
            let section_name = section
                .name()
                .map_err(|e| bad(format!("bad section name: {e}")))?
                .to_owned();
            let data = section
                .data()
                .map_err(|e| bad(format!("cannot read section `{section_name}`: {e}")))?;
            // Program symbols of this section, sorted by address.
            let mut symbols: Vec<(u64, u64, String)> = file
                .symbols()
                .filter(|s| {
                    s.section_index() == Some(section.index())
                        && s.kind() == object::SymbolKind::Text
                        && s.is_global()
                })
                .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_owned())))
                .collect();
            symbols.sort();
            if symbols.is_empty() {
                continue;
            }
            // All relocations of the section: offset -> target map name.
            let mut relocations: BTreeMap<u64, String> = BTreeMap::new();
            for (offset, relocation) in section.relocations() {
                let RelocationFlags::Elf { r_type } = relocation.flags() else {
                    return Err(bad("non-ELF relocation"));
                };
                let RelocationTarget::Symbol(index) = relocation.target() else {
                    return Err(bad(format!(
                        "relocation at `{section_name}`+{offset} has no symbol"
                    )));
                };
                let symbol = file
                    .symbol_by_index(index)
                    .map_err(|e| bad(format!("relocation symbol: {e}")))?;
                let symbol_name = symbol.name().unwrap_or("?").to_owned();
                if r_type != object::elf::R_BPF_64_64 {
                    return Err(bad(format!(
                        "relocation type {r_type:?} at `{section_name}`+{offset} against \
                         `{symbol_name}` is not supported (only R_BPF_64_64 map references)"
                    )));
                }
                if symbol.section_index() != maps_section || maps_section.is_none() {
                    return Err(bad(format!(
                        "relocation at `{section_name}`+{offset} references `{symbol_name}`, \
                         which is not a map in .maps (global data is not supported)"
                    )));
                }
                // A section symbol carries the map offset in the instruction's immediate.
                let map_offset = if symbol.kind() == object::SymbolKind::Section {
                    let at = usize::try_from(offset).map_err(|_| bad("offset overflow"))?;
                    let imm = data
                        .get(at + 4..at + 8)
                        .and_then(|b| b.try_into().ok())
                        .map(u32::from_le_bytes)
                        .ok_or_else(|| bad("relocation outside its section"))?;
                    u64::from(imm)
                } else {
                    symbol.address()
                };
                let map = map_by_offset.get(&map_offset).ok_or_else(|| {
                    bad(format!(
                        "relocation against `{symbol_name}` at .maps+{map_offset} matches no \
                         BTF map definition"
                    ))
                })?;
                relocations.insert(offset, map.clone());
            }

            for (position, (start, size, name)) in symbols.iter().enumerate() {
                let end = if *size > 0 {
                    start + size
                } else {
                    symbols
                        .get(position + 1)
                        .map_or(data.len() as u64, |next| next.0)
                };
                let code = usize::try_from(*start)
                    .ok()
                    .zip(usize::try_from(end).ok())
                    .and_then(|(s, e)| data.get(s..e))
                    .ok_or_else(|| bad(format!("program `{name}` lies outside its section")))?
                    .to_vec();
                let mut program_relocations = Vec::new();
                for (offset, map) in relocations.range(*start..end) {
                    let relative = usize::try_from(offset - start).map_err(|_| bad("offset"))?;
                    if relative % 8 != 0 || code.get(relative) != Some(&LD_IMM64) {
                        return Err(bad(format!(
                            "relocation at `{section_name}`+{offset} is not on an ld_imm64"
                        )));
                    }
                    program_relocations.push(MapRelocation {
                        instruction: relative / 8,
                        map: map.clone(),
                    });
                }
                for (index, insn) in code.chunks(8).enumerate() {
                    if insn.first() == Some(&CALL)
                        && insn.get(1).is_some_and(|regs| regs >> 4 == PSEUDO_CALL)
                    {
                        return Err(bad(format!(
                            "program `{name}` makes a BPF-to-BPF call at instruction {index}; \
                             porin's loader does not link subprograms"
                        )));
                    }
                }
                programs.push(ProgramDefinition {
                    name: name.clone(),
                    section: section_name.clone(),
                    code,
                    relocations: program_relocations,
                });
            }
        }
        if programs.is_empty() {
            return Err(bad("the object contains no programs"));
        }
        Ok(Self {
            maps,
            programs,
            license,
            btf,
        })
    }
}

/// An object whose maps exist and whose programs are loaded; dropping it releases them all.
#[derive(Debug)]
pub struct LoadedObject {
    maps: BTreeMap<String, Map>,
    programs: BTreeMap<String, Program>,
    /// Each program's code as loaded (map fds patched in).
    patched: BTreeMap<String, Vec<u8>>,
    parsed: ObjectFile,
}

impl LoadedObject {
    /// Parses and loads `bytes`: creates the maps, patches and loads the programs.
    pub fn load(bytes: &[u8]) -> Result<Self, KernelError> {
        Self::load_with_maps(bytes, BTreeMap::new())
    }

    /// Like [`LoadedObject::load`], but the maps named in `reuse` are not created: the programs
    /// are patched to use those maps (e.g. maps pinned by an earlier run, whose contents the
    /// programs must keep seeing). Each reused map must have exactly the type, sizes and flags
    /// the object declares for it, else [`KernelError::Contract`] and nothing is loaded; a map
    /// of `reuse` the object does not declare is an error too.
    pub fn load_with_maps(
        bytes: &[u8],
        mut reuse: BTreeMap<String, Map>,
    ) -> Result<Self, KernelError> {
        let parsed = ObjectFile::parse(bytes)?;
        let mut maps = BTreeMap::new();
        for definition in &parsed.maps {
            let map = match reuse.remove(&definition.name) {
                Some(map) => {
                    let expected = spec_of(definition);
                    if *map.spec() != expected || definition.inner.is_some() {
                        return Err(KernelError::Contract(format!(
                            "reused map `{}` is {:?}; the object declares {expected:?}",
                            definition.name,
                            map.spec()
                        )));
                    }
                    map
                }
                None => create_map(definition)?,
            };
            maps.insert(definition.name.clone(), map);
        }
        if let Some(name) = reuse.keys().next() {
            return Err(KernelError::Contract(format!(
                "reused map `{name}` is not a map of the object"
            )));
        }
        let mut programs = BTreeMap::new();
        let mut patched = BTreeMap::new();
        for definition in &parsed.programs {
            let mut code = definition.code.clone();
            for relocation in &definition.relocations {
                let map = maps
                    .get(&relocation.map)
                    .ok_or_else(|| KernelError::Missing {
                        kind: "map",
                        name: relocation.map.clone(),
                    })?;
                let fd = std::os::fd::AsRawFd::as_raw_fd(&map.fd());
                let at = relocation.instruction * 8;
                let insn = code
                    .get_mut(at..at + 16)
                    .ok_or_else(|| bad("ld_imm64 truncated at the end of a program"))?;
                insn[1] = (insn[1] & 0x0f) | (PSEUDO_MAP_FD << 4);
                insn[4..8].copy_from_slice(&fd.to_le_bytes());
                // The second half's immediate (upper 32 bits) must be zero for a map fd.
                insn[12..16].fill(0);
            }
            let program = Program::load(
                &definition.name,
                ProgramType::SCHED_CLS,
                &code,
                &parsed.license,
            )?;
            programs.insert(definition.name.clone(), program);
            patched.insert(definition.name.clone(), code);
        }
        Ok(Self {
            maps,
            programs,
            patched,
            parsed,
        })
    }

    /// The map called `name` (its ELF/BTF name).
    pub fn map(&self, name: &str) -> Result<&Map, KernelError> {
        self.maps.get(name).ok_or_else(|| KernelError::Missing {
            kind: "map",
            name: name.to_owned(),
        })
    }

    /// The program called `name` (its ELF symbol name).
    pub fn program(&self, name: &str) -> Result<&Program, KernelError> {
        self.programs.get(name).ok_or_else(|| KernelError::Missing {
            kind: "program",
            name: name.to_owned(),
        })
    }

    /// Names of all maps.
    pub fn map_names(&self) -> impl Iterator<Item = &str> {
        self.maps.keys().map(String::as_str)
    }

    /// Names of all programs.
    pub fn program_names(&self) -> impl Iterator<Item = &str> {
        self.programs.keys().map(String::as_str)
    }

    /// What the object declared.
    pub fn definition(&self) -> &ObjectFile {
        &self.parsed
    }

    /// Loads program `name` once more (a throwaway copy sharing this object's maps) with
    /// `BPF_LOG_STATS` and returns the verifier's statistics line(s), e.g. `processed N insns`.
    pub fn verifier_stats(&self, name: &str) -> Result<String, KernelError> {
        let code = self.patched.get(name).ok_or_else(|| KernelError::Missing {
            kind: "program",
            name: name.to_owned(),
        })?;
        let program = self.program(name)?;
        sys::prog_load_with_stats(name, program.program_type(), code, &self.parsed.license)
            .map(|(_fd, stats)| stats)
    }

    /// Number of instructions (8-byte slots) of program `name`.
    pub fn instruction_count(&self, name: &str) -> Result<usize, KernelError> {
        self.patched
            .get(name)
            .map(|code| code.len() / 8)
            .ok_or_else(|| KernelError::Missing {
                kind: "program",
                name: name.to_owned(),
            })
    }

    /// Hands the object's `.BTF` to the kernel's BTF verifier (porin's loader does not need
    /// BTF to load, so this is a separate conformance check, as libbpf would perform).
    pub fn verify_btf(&self) -> Result<(), KernelError> {
        sys::btf_load(&self.parsed.btf).map(drop)
    }
}

/// The [`MapSpec`] a map definition asks `BPF_MAP_CREATE` for.
pub fn spec_of(definition: &MapDefinition) -> MapSpec {
    MapSpec {
        map_type: definition.map_type,
        key_size: definition.key_size,
        value_size: definition.value_size,
        max_entries: definition.max_entries,
        map_flags: definition.map_flags,
    }
}

fn create_map(definition: &MapDefinition) -> Result<Map, KernelError> {
    let spec = spec_of(definition);
    match &definition.inner {
        Some(inner) => {
            let template = create_map(inner)?;
            Map::create_outer(&definition.name, spec, &template)
        }
        None => Map::create(&definition.name, spec),
    }
}
