//! cargo-fuzz target: see `cairn_server::resp::fuzz::fuzz_parse` for what it drives and checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cairn_server::resp::fuzz::fuzz_parse(data);
});
