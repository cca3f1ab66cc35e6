//! Any `ObjectConfig` → `porin_ebpf::emit`: either a typed `EmitError` for
//! an invalid configuration, or an ELF object that three independent readers
//! accept (`object::read`, `aya_obj::Object::parse` as pinned by the
//! workspace, and porin's own `kernel::loader::ObjectFile::parse`) and whose
//! maps carry exactly the configured sizes and pinning.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::{Corpus, fuzz_target};
use object::Object as _;
use porin_ebpf::maps::MapPinning;
use porin_ebpf::{EmitError, ObjectConfig, emit};
use porin_kernel::ObjectFile;

/// A fuzz-side mirror of `ObjectConfig` (the library carries no fuzz-only
/// derive). Sizes are drawn half the time near the policy-map bounds, where
/// validation decides, and otherwise anywhere in `u32`.
#[derive(Arbitrary, Debug)]
struct FuzzConfig {
    policy_map_max_entries: FuzzSize,
    ipcache4_max_entries: FuzzSize,
    ipcache6_max_entries: FuzzSize,
    ct_max_entries: FuzzSize,
    ct_lifetime_tcp_secs: u32,
    ct_lifetime_syn_secs: u32,
    ct_lifetime_close_secs: u32,
    ct_lifetime_other_secs: u32,
    allow_icmp_frag_needed: bool,
    allow_ipv6_ndp: bool,
    extended_ip_protocols: bool,
    pin_by_name: bool,
}

#[derive(Arbitrary, Debug)]
enum FuzzSize {
    /// 0..=70,000: around 256 and 65,536.
    Near(u16, bool),
    Any(u32),
}

impl FuzzSize {
    fn get(&self) -> u32 {
        match *self {
            FuzzSize::Near(low, high) => u32::from(low) + if high { 4_464 } else { 0 },
            FuzzSize::Any(n) => n,
        }
    }
}

fuzz_target!(|data: &[u8]| -> Corpus {
    let Ok(fuzz) = FuzzConfig::arbitrary(&mut Unstructured::new(data)) else {
        return Corpus::Reject;
    };
    let config = ObjectConfig {
        policy_map_max_entries: fuzz.policy_map_max_entries.get(),
        ipcache4_max_entries: fuzz.ipcache4_max_entries.get(),
        ipcache6_max_entries: fuzz.ipcache6_max_entries.get(),
        ct_max_entries: fuzz.ct_max_entries.get(),
        ct_lifetime_tcp_secs: fuzz.ct_lifetime_tcp_secs,
        ct_lifetime_syn_secs: fuzz.ct_lifetime_syn_secs,
        ct_lifetime_close_secs: fuzz.ct_lifetime_close_secs,
        ct_lifetime_other_secs: fuzz.ct_lifetime_other_secs,
        allow_icmp_frag_needed: fuzz.allow_icmp_frag_needed,
        allow_ipv6_ndp: fuzz.allow_ipv6_ndp,
        extended_ip_protocols: fuzz.extended_ip_protocols,
        pinning: if fuzz.pin_by_name {
            MapPinning::ByName
        } else {
            MapPinning::None
        },
    };
    let bytes = match emit(&config) {
        Ok(bytes) => bytes,
        // Configuration errors are the expected refusals; anything else
        // (assembler, ELF writer) is a porin bug on a valid configuration.
        Err(EmitError::PolicyMapSize(_) | EmitError::ZeroSize(_)) => return Corpus::Keep,
        Err(error) => panic!("emit failed on {config:?}: {error}"),
    };

    let file = match object::File::parse(&*bytes) {
        Ok(file) => file,
        Err(error) => panic!("object::read rejects the object of {config:?}: {error}"),
    };
    assert_eq!(file.architecture(), object::Architecture::Bpf);
    for section in [".maps", ".BTF", "license", porin_ebpf::PROGRAM_SECTION] {
        assert!(
            file.section_by_name(section).is_some(),
            "section `{section}` missing for {config:?}"
        );
    }

    if let Err(error) = aya_obj::Object::parse(&bytes) {
        panic!("aya-obj rejects the object of {config:?}: {error}");
    }

    let parsed = match ObjectFile::parse(&bytes) {
        Ok(parsed) => parsed,
        Err(error) => panic!("ObjectFile::parse rejects the object of {config:?}: {error}"),
    };
    let specs = config.maps();
    assert_eq!(parsed.maps.len(), specs.len(), "map count for {config:?}");
    let pinning = u32::from(config.pinning == MapPinning::ByName);
    for (map, spec) in parsed.maps.iter().zip(&specs) {
        assert_eq!(map.name, spec.name, "map order for {config:?}");
        assert_eq!(
            map.max_entries, spec.max_entries,
            "{}: max_entries",
            map.name
        );
        assert_eq!(map.map_flags, spec.flags, "{}: flags", map.name);
        assert_eq!(map.pinning, pinning, "{}: pinning", map.name);
    }
    assert_eq!(parsed.license, porin_ebpf::LICENSE);
    assert_eq!(parsed.programs.len(), 2, "both programs present");
    Corpus::Keep
});
