//! cargo-fuzz target: see `cairn::testing::fuzzing::fuzz_wal_recovery` for what it drives and
//! checks (WALs of today's format, version 4: sync markers with a nonce; point-in-time and
//! strict recovery).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cairn::testing::fuzzing::fuzz_wal_recovery(data);
});
