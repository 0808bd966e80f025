//! Fuzz target: every JSON request body the API accepts. The first byte picks the body
//! (`kairos_api::fuzzing::BODIES`), the rest is read as that route reads its body and
//! checked by the rules that need no database. Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((which, body)) = data.split_first() {
        kairos_api::fuzzing::read_body(usize::from(*which), body);
    }
});
