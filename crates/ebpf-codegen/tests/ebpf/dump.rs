//! Readable dumps of the generated programs (insta snapshots), so every
//! change to the datapath shows up as a reviewable diff of its assembly.
//! Update with `INSTA_UPDATE=always cargo test -p porin-ebpf --test ebpf dump::`
//! (or `cargo insta review`).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use porin_ebpf::disasm::{disassemble, listing};
use porin_ebpf::{ObjectConfig, programs};

fn dump(name: &str) -> String {
    let programs = programs(&ObjectConfig::default()).unwrap();
    let program = programs.iter().find(|p| p.name == name).unwrap();
    let refs: Vec<(usize, String)> = program
        .code
        .map_refs
        .iter()
        .map(|r| (r.slot, r.map.clone()))
        .collect();
    format!(
        "; {name}: {} instructions, {} slots\n{}",
        program.code.insns.len(),
        program.code.slot_count(),
        listing(&program.code.insns, &refs)
    )
}

#[test]
fn from_endpoint_listing() {
    insta::assert_snapshot!("porin_from_endpoint", dump("porin_from_endpoint"));
}

#[test]
fn to_endpoint_listing() {
    insta::assert_snapshot!("porin_to_endpoint", dump("porin_to_endpoint"));
}

#[test]
fn disassembling_the_bytes_gives_the_same_listing() {
    for program in programs(&ObjectConfig::default()).unwrap() {
        let from_bytes = disassemble(&program.code.bytes()).unwrap();
        let from_insns = listing(&program.code.insns, &[]);
        // Map references decode as `r = 0 ll`, which is also how they list.
        assert_eq!(from_bytes, from_insns, "{}", program.name);
    }
}

#[test]
fn the_two_directions_differ_only_where_direction_matters() {
    let programs = programs(&ObjectConfig::default()).unwrap();
    let (from, to) = (&programs[0].code, &programs[1].code);
    assert_eq!(from.insns.len(), to.insns.len());
    let differing: Vec<usize> = (0..from.insns.len())
        .filter(|&i| from.insns[i] != to.insns[i])
        .collect();
    // Which address and port is the peer's: the ipcache key's and the
    // role-ordered conntrack key's address words (v4 1 word, v6 4 words,
    // each copy a load/store pair) and port stores; the direction byte of
    // the policy key, the conntrack `opened_by` test and store and the
    // event; the direction's TCP closing/SYN bits in the three conntrack
    // updates (reply, established, new); the counter index of each verdict
    // block (15) and of the two lost-event counts, each in its direction's
    // block of `porin_verdicts` (DATAPATH.md §2.5). 53 today.
    assert!(
        !differing.is_empty() && differing.len() <= 56,
        "{differing:?}"
    );
}
