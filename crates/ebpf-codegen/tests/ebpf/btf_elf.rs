//! BTF encoder and ELF writer round trips: byte-exact encodings per BTF
//! kind (kernel `include/uapi/linux/btf.h`), parse-back with aya-obj (BTF
//! and whole object), with `object::read` (sections, symbols, relocations)
//! and, when installed, with bpftool's libbpf BTF parser.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

// The root/CI skip rule and the scratch object file (bpftool test); the
// module lives with the kernel tests, which use the rest of it.
use crate::support;

use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
use porin_ebpf::asm::Assembler;
use porin_ebpf::btf::{
    Btf, BtfError, BtfType, DataSec, Func, FuncLinkage, FuncProto, IntEncoding, Param, SecInfo,
    TypeId, Var, VarLinkage,
};
use porin_ebpf::elf::{ObjectLayout, ProgramCode, maps_btf, write_object};
use porin_ebpf::insn::Reg;
use porin_ebpf::maps::MapPinning;
use porin_ebpf::{ObjectConfig, emit};
use proptest::prelude::*;

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn every_kind_encodes_as_the_uapi_says() {
    let mut btf = Btf::new();
    let int = btf.int("int", 4, IntEncoding::Signed); // 1
    let ptr = btf.ptr(int); // 2
    let array = btf.array(int, int, 7); // 3
    let st = btf.structure("pair", 8, &[("a", int, 0), ("b", int, 4)]); // 4
    let proto = btf.add_type(BtfType::FuncProto(FuncProto {
        ret: int,
        params: vec![Param {
            name: "skb".into(),
            ty: ptr,
        }],
    })); // 5
    let func = btf.add_type(BtfType::Func(Func {
        name: "f".into(),
        proto,
        linkage: FuncLinkage::Global,
    })); // 6
    let var = btf.add_type(BtfType::Var(Var {
        name: "v".into(),
        ty: st,
        linkage: VarLinkage::GlobalAllocated,
    })); // 7
    btf.add_type(BtfType::DataSec(DataSec {
        name: ".maps".into(),
        size: 8,
        vars: vec![SecInfo {
            var,
            offset: 0,
            size: 8,
        }],
    })); // 8
    assert_eq!((array, func), (TypeId(3), TypeId(6)));
    let bytes = btf.to_bytes().unwrap();
    // Header: magic, version 1, flags 0, hdr_len 24, type_off 0, type_len, str_off, str_len.
    assert_eq!(&bytes[0..4], &[0x9f, 0xeb, 1, 0]);
    let header = u32s(&bytes[4..24]);
    let (type_len, str_len) = (header[2] as usize, header[4] as usize);
    assert_eq!(header[0], 24);
    assert_eq!(header[1], 0);
    assert_eq!(header[3] as usize, type_len);
    assert_eq!(bytes.len(), 24 + type_len + str_len);
    let strings = &bytes[24 + type_len..];
    assert_eq!(strings, b"\0int\0pair\0a\0b\0skb\0f\0v\0.maps\0");
    let off = |s: &str| {
        let needle = [s.as_bytes(), b"\0"].concat();
        strings
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap() as u32
    };
    let types = u32s(&bytes[24..24 + type_len]);
    #[rustfmt::skip]
    let expect = vec![
        off("int"), 1 << 24, 4, (1 << 24) | 32,                       // INT signed 32 bits
        0, 2 << 24, 1,                                                // PTR -> 1
        0, 3 << 24, 0, 1, 1, 7,                                       // ARRAY int[7]
        off("pair"), (4 << 24) | 2, 8, off("a"), 1, 0, off("b"), 1, 32, // STRUCT, offsets in bits
        0, (13 << 24) | 1, 1, off("skb"), 2,                          // FUNC_PROTO int (ptr)
        off("f"), (12 << 24) | 1, 5,                                  // FUNC global
        off("v"), 14 << 24, 4, 1,                                     // VAR global-allocated
        off(".maps"), (15 << 24) | 1, 8, 7, 0, 8,                     // DATASEC
    ];
    assert_eq!(types, expect);
}

#[test]
fn strings_are_deduplicated_and_empty_is_zero() {
    let mut btf = Btf::new();
    assert_eq!(btf.add_string(""), 0);
    let a = btf.add_string("porin");
    assert_eq!(btf.add_string("porin"), a);
    assert_ne!(btf.add_string("other"), a);
}

#[test]
fn dangling_references_are_errors() {
    let mut btf = Btf::new();
    btf.ptr(TypeId(5));
    assert_eq!(
        btf.to_bytes(),
        Err(BtfError::DanglingType {
            referrer: 1,
            target: 5
        })
    );
}

#[test]
fn aya_obj_reparses_the_btf_and_reserialises_it_identically() {
    let bytes = emit(&ObjectConfig::default()).unwrap();
    let ours = maps_btf(&ObjectConfig::default().maps())
        .unwrap()
        .to_bytes()
        .unwrap();
    let obj = aya_obj::Object::parse(&bytes).unwrap();
    let btf = obj.btf.unwrap();
    assert_eq!(btf.to_bytes(), ours);
    use aya_obj::btf::BtfKind;
    for name in [
        "porin_ipcache4_key",
        "porin_ipcache6_key",
        "porin_ipcache_value",
        "porin_policy_key",
        "porin_policy_entry",
        "porin_config_value",
        "porin_ct_key",
        "porin_ct_value",
        "porin_counter",
    ] {
        btf.id_by_type_name_kind(name, BtfKind::Struct)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    btf.id_by_type_name_kind(".maps", BtfKind::DataSec).unwrap();
    btf.id_by_type_name_kind("porin_policy_a", BtfKind::Var)
        .unwrap();
}

#[test]
fn bpftool_dumps_the_typed_structs() {
    if !support::require("bpftool btf dump", &["bpftool"]) {
        return;
    }
    let path = support::object_file("btfdump");
    let out = std::process::Command::new("bpftool")
        .args(["btf", "dump", "file"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "STRUCT 'porin_policy_key' size=12 vlen=5",
        "'dport_be' type_id=3 bits_offset=80",
        "STRUCT 'porin_policy_entry' size=12 vlen=5",
        "'precedence' type_id=4 bits_offset=32",
        "STRUCT 'porin_ct_key' size=40 vlen=7",
        "VAR 'porin_ct' type_id=",
        "STRUCT 'porin_event' size=40 vlen=11",
        // Eleven maps of 5 members and the ring buffer's 3 (no key or value).
        "DATASEC '.maps' size=464 vlen=12",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn object_read_sees_sections_symbols_and_relocations() {
    let bytes = emit(&ObjectConfig::default()).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    assert_eq!(file.architecture(), object::Architecture::Bpf);
    assert!(file.is_little_endian());
    let names: Vec<&str> = file.sections().map(|s| s.name().unwrap()).collect();
    for name in ["classifier", ".maps", "license", ".BTF"] {
        assert!(names.contains(&name), "{names:?}");
    }
    assert!(!names.contains(&".BTF.ext"));
    assert!(!names.contains(&"maps"), "legacy maps section");
    let license = file.section_by_name("license").unwrap();
    assert_eq!(license.data().unwrap(), b"GPL\0");
    let maps = file.section_by_name(".maps").unwrap();
    // Eleven maps of 5 members, the ring buffer of 3 (type, max_entries, map_flags).
    assert_eq!(maps.size(), 11 * 40 + 24);

    let code = file.section_by_name("classifier").unwrap();
    let code_bytes = code.data().unwrap();
    let mut programs = Vec::new();
    let mut map_symbols = std::collections::BTreeMap::new();
    for symbol in file.symbols() {
        let name = symbol.name().unwrap();
        if !symbol.is_global() {
            continue;
        }
        match symbol.kind() {
            object::SymbolKind::Text => {
                programs.push((name.to_owned(), symbol.address(), symbol.size()));
            }
            object::SymbolKind::Data if symbol.section_index() == Some(maps.index()) => {
                map_symbols.insert(
                    symbol.index().0,
                    (name.to_owned(), symbol.address(), symbol.size()),
                );
            }
            _ => {}
        }
    }
    programs.sort_by_key(|p| p.1);
    assert_eq!(programs.len(), 2);
    assert_eq!(programs[0].0, "porin_from_endpoint");
    assert_eq!(programs[1].0, "porin_to_endpoint");
    assert_eq!(programs[0].1, 0);
    assert_eq!(programs[1].1, programs[0].2);
    assert_eq!(programs[1].1 + programs[1].2, code_bytes.len() as u64);
    let offsets: Vec<u64> = map_symbols.values().map(|m| m.1).collect();
    assert_eq!(
        offsets,
        [0, 40, 80, 120, 160, 200, 240, 280, 304, 344, 384, 424]
    );

    let mut referenced = std::collections::BTreeSet::new();
    let mut count = 0;
    for (offset, relocation) in code.relocations() {
        count += 1;
        assert_eq!(
            relocation.flags(),
            object::RelocationFlags::Elf {
                r_type: object::elf::R_BPF_64_64
            }
        );
        assert!(relocation.has_implicit_addend());
        assert_eq!(relocation.addend(), 0);
        let object::RelocationTarget::Symbol(index) = relocation.target() else {
            panic!("relocation without symbol");
        };
        let (name, _, _) = &map_symbols[&index.0];
        referenced.insert(name.clone());
        // The target is an ld_imm64 r, 0 (src_reg 0, imm 0 in both halves).
        let at = offset as usize;
        assert_eq!(
            code_bytes[at], 0x18,
            "relocation at {offset} is not ld_imm64"
        );
        assert_eq!(code_bytes[at + 1] >> 4, 0);
        assert_eq!(&code_bytes[at + 4..at + 8], &[0; 4]);
        assert_eq!(&code_bytes[at + 12..at + 16], &[0; 4]);
    }
    assert!(count > 10);
    assert_eq!(referenced.len(), 12, "every map is used: {referenced:?}");
}

#[test]
fn pinning_by_name_adds_the_member() {
    let config = ObjectConfig {
        pinning: MapPinning::ByName,
        ..ObjectConfig::default()
    };
    let bytes = emit(&config).unwrap();
    let obj = aya_obj::Object::parse(&bytes).unwrap();
    for map in obj.maps.values() {
        assert_eq!(map.pinning(), aya_obj::maps::PinningType::ByName);
    }
    let file = object::File::parse(&*bytes).unwrap();
    assert_eq!(file.section_by_name(".maps").unwrap().size(), 11 * 48 + 32);
}

#[test]
fn config_sizes_reach_the_map_definitions() {
    let config = ObjectConfig {
        policy_map_max_entries: 1024,
        ipcache4_max_entries: 300,
        ipcache6_max_entries: 200,
        ct_max_entries: 4096,
        ..ObjectConfig::default()
    };
    let obj = aya_obj::Object::parse(&emit(&config).unwrap()).unwrap();
    assert_eq!(obj.maps["porin_policy_a"].max_entries(), 1024);
    assert_eq!(obj.maps["porin_policy_b"].max_entries(), 1024);
    assert_eq!(obj.maps["porin_ipcache4"].max_entries(), 300);
    assert_eq!(obj.maps["porin_ipcache6"].max_entries(), 200);
    assert_eq!(obj.maps["porin_ct"].max_entries(), 4096);
}

#[test]
fn invalid_configs_are_typed_errors() {
    for config in [
        ObjectConfig {
            policy_map_max_entries: 255,
            ..ObjectConfig::default()
        },
        ObjectConfig {
            policy_map_max_entries: 65537,
            ..ObjectConfig::default()
        },
        ObjectConfig {
            ct_max_entries: 0,
            ..ObjectConfig::default()
        },
        ObjectConfig {
            ct_lifetime_other_secs: 0,
            ..ObjectConfig::default()
        },
    ] {
        assert!(emit(&config).is_err(), "{config:?}");
    }
}

#[test]
fn unknown_map_reference_is_an_error() {
    let mut a = Assembler::new();
    a.ld_map(Reg::R1, "nope");
    a.exit();
    let code = a.finish().unwrap();
    let result = write_object(&ObjectLayout {
        section: "classifier",
        programs: &[ProgramCode {
            name: "p".into(),
            code,
        }],
        maps: &[],
        license: "GPL",
    });
    assert!(matches!(
        result,
        Err(porin_ebpf::elf::ElfError::UnknownMap { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any sizes give an object that object::read and aya-obj accept, with
    /// the sizes intact.
    #[test]
    fn emitted_objects_round_trip(
        policy in 256u32..=65536,
        v4 in 1u32..=1 << 20,
        v6 in 1u32..=1 << 20,
        ct in 1u32..=1 << 20,
        frag in any::<bool>(),
        ndp in any::<bool>(),
        pin in any::<bool>(),
    ) {
        let config = ObjectConfig {
            policy_map_max_entries: policy,
            ipcache4_max_entries: v4,
            ipcache6_max_entries: v6,
            ct_max_entries: ct,
            allow_icmp_frag_needed: frag,
            allow_ipv6_ndp: ndp,
            pinning: if pin { MapPinning::ByName } else { MapPinning::None },
            ..ObjectConfig::default()
        };
        let bytes = emit(&config).unwrap();
        prop_assert!(object::File::parse(&*bytes).is_ok());
        let obj = aya_obj::Object::parse(&bytes).unwrap();
        prop_assert_eq!(obj.maps["porin_policy_a"].max_entries(), policy);
        prop_assert_eq!(obj.maps["porin_ipcache4"].max_entries(), v4);
        prop_assert_eq!(obj.maps["porin_ipcache6"].max_entries(), v6);
        prop_assert_eq!(obj.maps["porin_ct"].max_entries(), ct);
        prop_assert_eq!(obj.programs.len(), 2);
    }

    /// Random struct layouts survive BTF encode → aya-obj parse → encode.
    #[test]
    fn random_btf_round_trips(fields in proptest::collection::vec((0usize..4, 1u32..64), 1..12)) {
        let mut btf = Btf::new();
        let ints = [
            btf.int("unsigned char", 1, IntEncoding::Unsigned),
            btf.int("unsigned short", 2, IntEncoding::Unsigned),
            btf.int("unsigned int", 4, IntEncoding::Unsigned),
            btf.int("unsigned long long", 8, IntEncoding::Unsigned),
        ];
        let mut members = Vec::new();
        let mut offset = 0;
        let names: Vec<String> = (0..fields.len()).map(|i| format!("f{i}")).collect();
        for (i, (kind, len)) in fields.iter().enumerate() {
            let ty = if *len > 32 { btf.array(ints[*kind], ints[2], *len) } else { ints[*kind] };
            members.push((names[i].as_str(), ty, offset));
            offset += [1, 2, 4, 8][*kind] * if *len > 32 { *len } else { 1 };
        }
        let st = btf.structure("random", offset, &members);
        let var = btf.add_type(BtfType::Var(Var { name: "x".into(), ty: st, linkage: VarLinkage::GlobalAllocated }));
        btf.add_type(BtfType::DataSec(DataSec { name: ".data".into(), size: offset, vars: vec![SecInfo { var, offset: 0, size: offset }] }));
        let bytes = btf.to_bytes().unwrap();
        // aya-obj 0.3 uses object 0.39; take its Endianness value from a parsed object.
        let endianness = aya_obj::Object::parse(&emit(&ObjectConfig::default()).unwrap()).unwrap().endianness;
        let parsed = aya_obj::btf::Btf::parse(&bytes, endianness).unwrap();
        prop_assert_eq!(parsed.to_bytes(), bytes);
    }
}
