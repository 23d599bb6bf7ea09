//! cargo-fuzz target: see `cairn::testing::fuzzing::fuzz_block` for what it drives and checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cairn::testing::fuzzing::fuzz_block(data);
});
