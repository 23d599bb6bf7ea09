//! cargo-fuzz target: see `cairn::fuzzing::fuzz_wal` for what it drives and checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cairn::fuzzing::fuzz_wal(data);
});
