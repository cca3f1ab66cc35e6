//! Any text → the inventory loaders (porin `Inventory`/`PolicyTest` YAML,
//! Kubernetes manifests, `cilium-dbg identity/endpoint list -o json` dumps;
//! the loader picks by content, as `--inventory` does): never panics, and
//! every inventory it accepts keeps the identity invariants of
//! `porin_compiler::inventory::invariants` (pods' labels are `k8s`, no
//! endpoint shares an identity with a CIDR or reserved identity, no
//! endpoint holds a local-scope number) once identities are allocated
//! next to a few CIDR identities.

#![no_main]

use std::collections::BTreeSet;

use ipnetwork::IpNetwork;
use libfuzzer_sys::{Corpus, fuzz_target};
use porin_compiler::allocation::IdentityTable;
use porin_compiler::error::CompileError;
use porin_compiler::inventory::Inventory;
use porin_compiler::inventory::invariants::check_identity_invariants;
use porin_compiler::limits::InventoryLimits;

/// Prefixes whose CIDR identities an endpoint must never merge with: the
/// first is 0x01000001, the number the attacker claimed.
const PREFIXES: [&str; 3] = ["203.0.113.0/24", "10.0.0.0/8", "fd00::/8"];

fuzz_target!(|data: &[u8]| -> Corpus {
    let Ok(text) = std::str::from_utf8(data) else {
        return Corpus::Reject;
    };
    // Small limits keep each run fast; they are checked while parsing.
    let limits = InventoryLimits {
        max_file_bytes: 64 * 1024,
        max_nodes: 20_000,
        max_endpoints: 2_000,
        ..InventoryLimits::default()
    };
    let mut inventory = Inventory::new();
    if inventory
        .add_text_with_limits("fuzz.yaml", text, &limits)
        .is_err()
        || inventory.finish().is_err()
    {
        return Corpus::Keep;
    }
    let prefixes: BTreeSet<IpNetwork> = PREFIXES.iter().filter_map(|p| p.parse().ok()).collect();
    let table = match IdentityTable::allocate(&inventory, &prefixes) {
        Ok(table) => table,
        // Conflicting given numbers and a full range are refusals, not
        // bugs; a label or number finish() accepted must allocate.
        Err(CompileError::Identity { message, .. }) if message.contains("but also to labels") => {
            return Corpus::Keep;
        }
        Err(CompileError::RangeExhausted { .. }) => return Corpus::Keep,
        Err(error) => panic!("finish() accepted an inventory allocate() refuses: {error}"),
    };
    if let Err(violation) = check_identity_invariants(&inventory, &table) {
        panic!("{violation}\n{text}");
    }
    Corpus::Keep
});
