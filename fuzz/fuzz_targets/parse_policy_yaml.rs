//! Any bytes → the loader: never panics, bounded time and memory, and every
//! accepted policy round-trips (`porin_model::invariants`).

#![no_main]

use libfuzzer_sys::{Corpus, fuzz_target};

fuzz_target!(|data: &[u8]| -> Corpus {
    if std::str::from_utf8(data).is_err() {
        return Corpus::Reject;
    }
    if let Err(violation) = porin_model::invariants::check_loader_invariants(data) {
        panic!("{violation}");
    }
    Corpus::Keep
});
