//! Properties: identity allocation does not depend on input order, and
//! compiling the same inputs twice gives byte-identical JSON.

use std::collections::BTreeMap;

use porin_compiler::allocation::IdentityTable;
use porin_compiler::compile::synthetic;
use porin_compiler::inventory::{Endpoint, Inventory, SourceLocation};
use proptest::prelude::*;

fn endpoint(index: usize, namespace: Option<u8>, app: u8, tier: u8) -> Endpoint {
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), format!("a{app}"));
    if tier > 0 {
        labels.insert("tier".to_owned(), format!("t{tier}"));
    }
    Endpoint {
        name: format!("e{index}"),
        namespace: namespace.map(|n| format!("ns{n}")),
        labels,
        ips: Vec::new(),
        service_account: None,
        ports: Vec::new(),
        identity: None,
        identity_labels: None,
        location: SourceLocation::default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Same endpoints in any order: every endpoint gets the same identity,
    /// and the identity table is the same.
    #[test]
    fn identity_allocation_is_independent_of_input_order(
        specs in proptest::collection::vec((proptest::option::of(0u8..3), 0u8..6, 0u8..3), 1..40),
        seed in any::<u64>(),
    ) {
        let endpoints: Vec<Endpoint> = specs
            .iter()
            .enumerate()
            .map(|(i, (ns, app, tier))| endpoint(i, *ns, *app, *tier))
            .collect();
        let mut shuffled = endpoints.clone();
        // A deterministic shuffle from the seed.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let j = usize::try_from(state % (i as u64 + 1)).unwrap();
            shuffled.swap(i, j);
        }
        let allocate = |list: Vec<Endpoint>| {
            let mut inventory = Inventory::new();
            inventory.endpoints = list;
            inventory.finish().unwrap();
            let table = IdentityTable::allocate(&inventory, &Default::default()).unwrap();
            let by_name: BTreeMap<String, u32> = inventory
                .endpoints
                .iter()
                .zip(&table.endpoint_identity)
                .map(|(e, id)| (e.display_name(), *id))
                .collect();
            (by_name, table.identities)
        };
        let (a, ta) = allocate(endpoints);
        let (b, tb) = allocate(shuffled);
        prop_assert_eq!(a, b);
        prop_assert_eq!(ta, tb);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn compiling_twice_gives_identical_json(policies in 1usize..25, endpoints in 1usize..150) {
        let cluster = synthetic::cluster(policies, endpoints);
        let first = cluster.compile().unwrap().to_json();
        let second = synthetic::cluster(policies, endpoints).compile().unwrap().to_json();
        prop_assert_eq!(first, second);
    }
}
