//! A minimal BTF reader: just enough to decode BTF-defined maps in `.maps`.
//!
//! libbpf's convention (also what porin's emitter writes): each map is a global `VAR` in the
//! `.maps` `DATASEC` whose type is an anonymous `STRUCT` with members
//! - `type`, `max_entries`, `map_flags`, `key_size`, `value_size`, `pinning`: `PTR -> ARRAY`
//!   whose element count *is* the number (`__uint(name, n)`);
//! - `key`, `value`: `PTR -> T`, the size being `sizeof(T)` (`__type(name, T)`);
//! - `values` (maps of maps): `ARRAY` of `PTR -> STRUCT` describing the inner map.
//!
//! Reference: `Documentation/bpf/btf.rst` (type encoding) and libbpf `parse_btf_map_def`.

use super::error::KernelError;
use super::sys::MapType;

const BTF_MAGIC: u16 = 0xEB9F;
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// Deepest chain of typedef/const/array nesting followed before giving up (cycles in bad BTF).
const MAX_RESOLVE_DEPTH: usize = 32;

/// One decoded BTF type: the common header plus the kind-specific words.
#[derive(Debug, Clone)]
struct BtfType {
    name_off: u32,
    kind: u32,
    size_or_type: u32,
    /// Kind-specific trailing data as u32 words.
    extra: Vec<u32>,
}

/// Parsed BTF: types (index 0 is `void`) and the string section.
#[derive(Debug, Clone)]
pub(crate) struct Btf {
    types: Vec<BtfType>,
    strings: Vec<u8>,
}

fn bad(detail: impl Into<String>) -> KernelError {
    KernelError::Object(format!("invalid .BTF: {}", detail.into()))
}

fn read_u32(bytes: &[u8], at: usize) -> Result<u32, KernelError> {
    bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| bad(format!("truncated at byte {at}")))
}

/// A map definition as the object declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDefinition {
    /// The map's symbol / VAR name.
    pub name: String,
    /// `type`.
    pub map_type: MapType,
    /// `key_size` or `sizeof(key)`.
    pub key_size: u32,
    /// `value_size` or `sizeof(value)` (4 for maps of maps).
    pub value_size: u32,
    /// `max_entries`.
    pub max_entries: u32,
    /// `map_flags`.
    pub map_flags: u32,
    /// `pinning` (0 none, 1 by name).
    pub pinning: u32,
    /// The inner map template of a map of maps.
    pub inner: Option<Box<MapDefinition>>,
    /// Byte offset of the map's VAR inside `.maps`.
    pub offset: u32,
    /// Byte size of the map's VAR inside `.maps`.
    pub size: u32,
}

impl Btf {
    /// Parses a little-endian `.BTF` section.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, KernelError> {
        let magic = bytes
            .get(0..2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| bad("shorter than its header"))?;
        if magic != BTF_MAGIC {
            return Err(bad(format!("magic `{magic:#06x}` (big-endian or not BTF)")));
        }
        let header_len = read_u32(bytes, 4)? as usize;
        let type_off = read_u32(bytes, 8)? as usize;
        let type_len = read_u32(bytes, 12)? as usize;
        let str_off = read_u32(bytes, 16)? as usize;
        let str_len = read_u32(bytes, 20)? as usize;
        let section = |off: usize, len: usize, what: &str| {
            header_len
                .checked_add(off)
                .and_then(|start| Some(start..start.checked_add(len)?))
                .and_then(|range| bytes.get(range))
                .ok_or_else(|| bad(format!("{what} section out of bounds")))
        };
        let type_bytes = section(type_off, type_len, "type")?;
        let strings = section(str_off, str_len, "string")?.to_vec();

        let mut types = vec![BtfType {
            name_off: 0,
            kind: 0,
            size_or_type: 0,
            extra: Vec::new(),
        }];
        let mut at = 0usize;
        while at < type_bytes.len() {
            let name_off = read_u32(type_bytes, at)?;
            let info = read_u32(type_bytes, at + 4)?;
            let size_or_type = read_u32(type_bytes, at + 8)?;
            at += 12;
            let kind = (info >> 24) & 0x1f;
            let vlen = info & 0xffff;
            let extra_words = match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 1,
                KIND_ARRAY => 3,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 3 * vlen as usize,
                KIND_ENUM | KIND_FUNC_PROTO => 2 * vlen as usize,
                KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
                | KIND_FUNC | KIND_FLOAT | KIND_TYPE_TAG => 0,
                other => return Err(bad(format!("unknown type kind {other}"))),
            };
            let mut extra = Vec::with_capacity(extra_words);
            for _ in 0..extra_words {
                extra.push(read_u32(type_bytes, at)?);
                at += 4;
            }
            types.push(BtfType {
                name_off,
                kind,
                size_or_type,
                extra,
            });
        }
        Ok(Self { types, strings })
    }

    fn get(&self, id: u32) -> Result<&BtfType, KernelError> {
        self.types
            .get(id as usize)
            .ok_or_else(|| bad(format!("type id {id} does not exist")))
    }

    fn name(&self, offset: u32) -> Result<String, KernelError> {
        let tail = self
            .strings
            .get(offset as usize..)
            .ok_or_else(|| bad(format!("string offset {offset} out of bounds")))?;
        let end = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| bad("unterminated string"))?;
        Ok(String::from_utf8_lossy(&tail[..end]).into_owned())
    }

    /// Follows typedef/const/volatile/restrict/type-tag to the underlying type id.
    fn skip_modifiers(&self, mut id: u32) -> Result<u32, KernelError> {
        for _ in 0..MAX_RESOLVE_DEPTH {
            let ty = self.get(id)?;
            match ty.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = ty.size_or_type;
                }
                _ => return Ok(id),
            }
        }
        Err(bad("type chain too deep (cycle?)"))
    }

    /// `sizeof` of a type.
    fn size_of(&self, id: u32) -> Result<u32, KernelError> {
        self.size_of_depth(id, 0)
    }

    fn size_of_depth(&self, id: u32, depth: usize) -> Result<u32, KernelError> {
        if depth > MAX_RESOLVE_DEPTH {
            return Err(bad("type chain too deep (cycle?)"));
        }
        let id = self.skip_modifiers(id)?;
        let ty = self.get(id)?;
        match ty.kind {
            KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_FLOAT | KIND_ENUM64 => {
                Ok(ty.size_or_type)
            }
            KIND_PTR => Ok(8),
            KIND_ARRAY => {
                let element = ty.extra.first().copied().unwrap_or(0);
                let count = ty.extra.get(2).copied().unwrap_or(0);
                self.size_of_depth(element, depth + 1)?
                    .checked_mul(count)
                    .ok_or_else(|| bad("array size overflows"))
            }
            kind => Err(bad(format!("type {id} (kind {kind}) has no size"))),
        }
    }

    /// The number encoded by `__uint(name, n)`: `PTR -> ARRAY[n]`.
    fn encoded_number(&self, id: u32) -> Result<u32, KernelError> {
        let ptr = self.get(self.skip_modifiers(id)?)?;
        if ptr.kind != KIND_PTR {
            return Err(bad(format!("map attribute type {id} is not a pointer")));
        }
        let array = self.get(self.skip_modifiers(ptr.size_or_type)?)?;
        if array.kind != KIND_ARRAY {
            return Err(bad(format!(
                "map attribute type {id} does not point to an array"
            )));
        }
        array
            .extra
            .get(2)
            .copied()
            .ok_or_else(|| bad("array without element count"))
    }

    /// The map definitions of the `.maps` DATASEC, in declaration order.
    pub(crate) fn map_definitions(&self) -> Result<Vec<MapDefinition>, KernelError> {
        let mut maps = Vec::new();
        for ty in &self.types {
            if ty.kind != KIND_DATASEC || self.name(ty.name_off)? != ".maps" {
                continue;
            }
            for entry in ty.extra.chunks(3) {
                let [var_id, offset, size] = entry else {
                    return Err(bad("truncated DATASEC entry"));
                };
                let var = self.get(*var_id)?;
                if var.kind != KIND_VAR {
                    return Err(bad(format!(".maps entry {var_id} is not a VAR")));
                }
                let name = self.name(var.name_off)?;
                let mut definition = self.map_struct(&name, var.size_or_type, 0)?;
                definition.offset = *offset;
                definition.size = *size;
                maps.push(definition);
            }
        }
        Ok(maps)
    }

    /// Decodes the anonymous map STRUCT `struct_id` of map `name`.
    fn map_struct(
        &self,
        name: &str,
        struct_id: u32,
        depth: usize,
    ) -> Result<MapDefinition, KernelError> {
        if depth > 1 {
            return Err(bad(format!(
                "map `{name}`: maps nested deeper than one level"
            )));
        }
        let id = self.skip_modifiers(struct_id)?;
        let ty = self.get(id)?;
        if ty.kind != KIND_STRUCT {
            return Err(bad(format!("map `{name}` is not described by a STRUCT")));
        }
        let mut definition = MapDefinition {
            name: name.to_owned(),
            map_type: MapType(0),
            key_size: 0,
            value_size: 0,
            max_entries: 0,
            map_flags: 0,
            pinning: 0,
            inner: None,
            offset: 0,
            size: 0,
        };
        let mut has_type = false;
        for member in ty.extra.chunks(3) {
            let [member_name, member_type, _bit_offset] = member else {
                return Err(bad("truncated STRUCT member"));
            };
            let member_name = self.name(*member_name)?;
            match member_name.as_str() {
                "type" => {
                    definition.map_type = MapType(self.encoded_number(*member_type)?);
                    has_type = true;
                }
                "max_entries" => definition.max_entries = self.encoded_number(*member_type)?,
                "map_flags" => definition.map_flags = self.encoded_number(*member_type)?,
                "key_size" => definition.key_size = self.encoded_number(*member_type)?,
                "value_size" => definition.value_size = self.encoded_number(*member_type)?,
                "pinning" => definition.pinning = self.encoded_number(*member_type)?,
                "key" | "value" => {
                    let ptr = self.get(self.skip_modifiers(*member_type)?)?;
                    if ptr.kind != KIND_PTR {
                        return Err(bad(format!(
                            "map `{name}`: `{member_name}` is not a pointer"
                        )));
                    }
                    let size = self.size_of(ptr.size_or_type)?;
                    if member_name == "key" {
                        definition.key_size = size;
                    } else {
                        definition.value_size = size;
                    }
                }
                "values" => {
                    // ARRAY[n] of PTR -> inner map STRUCT.
                    let array = self.get(self.skip_modifiers(*member_type)?)?;
                    let element = array.extra.first().copied().unwrap_or(0);
                    let ptr = self.get(self.skip_modifiers(element)?)?;
                    if array.kind != KIND_ARRAY || ptr.kind != KIND_PTR {
                        return Err(bad(format!(
                            "map `{name}`: `values` is not an array of pointers"
                        )));
                    }
                    let inner =
                        self.map_struct(&format!("{name}.inner"), ptr.size_or_type, depth + 1)?;
                    definition.inner = Some(Box::new(inner));
                    definition.value_size = 4;
                }
                // Attributes the kernel loader does not need (numa_node, map_extra, ...).
                _ => {}
            }
        }
        if !has_type {
            return Err(bad(format!("map `{name}` has no `type`")));
        }
        Ok(definition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny BTF writer for the tests (mirrors the toolchain's minbtf.py).
    struct Writer {
        types: Vec<u8>,
        strings: Vec<u8>,
        count: u32,
    }

    impl Writer {
        fn new() -> Self {
            Self {
                types: Vec::new(),
                strings: vec![0],
                count: 0,
            }
        }
        fn s(&mut self, name: &str) -> u32 {
            if name.is_empty() {
                return 0;
            }
            let at = self.strings.len() as u32;
            self.strings.extend_from_slice(name.as_bytes());
            self.strings.push(0);
            at
        }
        fn add(
            &mut self,
            kind: u32,
            name: &str,
            vlen: u32,
            size_or_type: u32,
            extra: &[u32],
        ) -> u32 {
            let name = self.s(name);
            for word in [name, (kind << 24) | vlen, size_or_type]
                .iter()
                .chain(extra)
            {
                self.types.extend_from_slice(&word.to_le_bytes());
            }
            self.count += 1;
            self.count
        }
        fn bytes(&self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
            out.extend_from_slice(&[1, 0]);
            for word in [
                24u32,
                0,
                self.types.len() as u32,
                self.types.len() as u32,
                self.strings.len() as u32,
            ] {
                out.extend_from_slice(&word.to_le_bytes());
            }
            out.extend_from_slice(&self.types);
            out.extend_from_slice(&self.strings);
            out
        }
    }

    #[test]
    fn decodes_typed_and_sized_map_definitions() {
        let mut w = Writer::new();
        let u32_t = w.add(KIND_INT, "unsigned int", 0, 4, &[32]);
        let int_t = w.add(KIND_INT, "int", 0, 4, &[(1 << 24) | 32]);
        let num = |w: &mut Writer, n: u32| {
            let array = w.add(KIND_ARRAY, "", 0, 0, &[int_t, u32_t, n]);
            w.add(KIND_PTR, "", 0, array, &[])
        };
        let key = w.add(KIND_STRUCT, "k", 2, 12, &[0, u32_t, 0, 0, u32_t, 32]);
        let key_const = w.add(KIND_CONST, "", 0, key, &[]);
        let key_ptr = w.add(KIND_PTR, "", 0, key_const, &[]);
        let value_array = w.add(KIND_ARRAY, "", 0, 0, &[u32_t, u32_t, 3]);
        let value_ptr = w.add(KIND_PTR, "", 0, value_array, &[]);
        let t11 = num(&mut w, 11);
        let t1024 = num(&mut w, 1024);
        let t1 = num(&mut w, 1);
        let (n_type, n_key, n_value, n_max, n_flags) = (
            w.s("type"),
            w.s("key"),
            w.s("value"),
            w.s("max_entries"),
            w.s("map_flags"),
        );
        let typed = w.add(
            KIND_STRUCT,
            "",
            5,
            40,
            &[
                n_type, t11, 0, n_key, key_ptr, 64, n_value, value_ptr, 128, n_max, t1024, 192,
                n_flags, t1, 256,
            ],
        );
        let t2 = num(&mut w, 2);
        let t4 = num(&mut w, 4);
        let t8 = num(&mut w, 8);
        let (n_ks, n_vs) = (w.s("key_size"), w.s("value_size"));
        let sized = w.add(
            KIND_STRUCT,
            "",
            4,
            32,
            &[n_type, t2, 0, n_ks, t4, 64, n_vs, t8, 128, n_max, t1, 192],
        );
        let v1 = w.add(KIND_VAR, "lpm", 0, typed, &[1]);
        let v2 = w.add(KIND_VAR, "arr", 0, sized, &[1]);
        w.add(KIND_DATASEC, ".maps", 2, 72, &[v1, 0, 40, v2, 40, 32]);
        let btf = Btf::parse(&w.bytes()).unwrap();
        let maps = btf.map_definitions().unwrap();
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].name, "lpm");
        assert_eq!(maps[0].map_type, MapType::LPM_TRIE);
        assert_eq!(maps[0].key_size, 12);
        assert_eq!(maps[0].value_size, 12);
        assert_eq!(maps[0].max_entries, 1024);
        assert_eq!(maps[0].map_flags, 1);
        assert_eq!((maps[0].offset, maps[0].size), (0, 40));
        assert_eq!(maps[1].name, "arr");
        assert_eq!(maps[1].map_type, MapType::ARRAY);
        assert_eq!((maps[1].key_size, maps[1].value_size), (4, 8));
        assert_eq!(maps[1].offset, 40);
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        assert!(Btf::parse(&[]).is_err());
        assert!(Btf::parse(&[0x9f, 0xeb, 1, 0]).is_err());
        let mut w = Writer::new();
        w.add(KIND_INT, "int", 0, 4, &[32]);
        let mut bytes = w.bytes();
        // Claim a longer type section than exists.
        bytes[12] = 200;
        assert!(Btf::parse(&bytes).is_err());
        // Unknown kind.
        let mut w = Writer::new();
        w.add(31, "x", 0, 0, &[]);
        assert!(Btf::parse(&w.bytes()).is_err());
        // A self-referencing typedef is a cycle, reported instead of looping.
        let mut w = Writer::new();
        w.add(KIND_TYPEDEF, "loop", 0, 1, &[]);
        let btf = Btf::parse(&w.bytes()).unwrap();
        assert!(btf.size_of(1).is_err());
    }
}
