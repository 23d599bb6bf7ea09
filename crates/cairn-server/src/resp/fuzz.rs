//! The RESP parser's fuzz target body, shared by the cargo-fuzz target (`fuzz/fuzz_targets/
//! resp.rs`) and the seeded test that runs it in CI without cargo-fuzz (`tests/fuzz.rs`).
//!
//! Thread-safety contract: a pure function of its input; callable from any thread.
//!
//! Invariants (each asserted for every input, with the default limits and with tiny ones):
//! 1. `parse` never panics, and a request it reports consumed between 1 byte and the whole
//!    buffer.
//! 2. Every strict prefix of a complete request parses as "need more bytes" (`Ok(None)`) —
//!    or, if the prefix is longer than `Limits::max_inline_bytes`, possibly as the error for
//!    a header line that has not ended yet — and bytes after it never change it: the parser
//!    reads neither short nor long.
//! 3. A parsed command, re-encoded as a multibulk request, parses back to the same
//!    arguments, consuming exactly the encoding.
//! 4. No bulk argument of a multibulk request exceeds `Limits::max_bulk_bytes`.

use super::parser::{parse, Limits, Parsed};

/// Longest request whose every prefix is re-parsed (keeps one input's cost near linear).
const PREFIX_CHECK_BYTES: usize = 256;
/// Most pipelined requests parsed out of one input.
const REQUESTS_MAX: usize = 64;

/// Runs the parser over `data` as a pipelined stream and checks the module's invariants;
/// panics on a violation.
pub fn fuzz_parse(data: &[u8]) {
    let tiny = Limits {
        max_bulk_bytes: 16,
        max_inline_bytes: 32,
    };
    for limits in [Limits::default(), tiny] {
        check_stream(data, &limits);
    }
}

/// Parses requests off the front of `data` until it needs more bytes or fails.
fn check_stream(data: &[u8], limits: &Limits) {
    let mut offset = 0;
    for _ in 0..REQUESTS_MAX {
        let rest = data.get(offset..).unwrap_or_default();
        let Ok(Some((parsed, used))) = parse(rest, limits) else {
            return;
        };
        assert!(
            used >= 1 && used <= rest.len(),
            "invariant 1: consumed {used}"
        );
        let request = rest.get(..used).unwrap_or_default();
        check_prefixes(request, &parsed, limits);
        if let Parsed::Command(arguments) = &parsed {
            check_round_trip(arguments, limits);
            if rest.first() == Some(&b'*') {
                assert!(
                    arguments
                        .iter()
                        .all(|argument| argument.len() as u64 <= limits.max_bulk_bytes),
                    "invariant 4"
                );
            }
        }
        offset += used;
    }
}

/// Invariant 2 for one complete request.
fn check_prefixes(request: &[u8], parsed: &Parsed, limits: &Limits) {
    if request.len() <= PREFIX_CHECK_BYTES {
        for cut in 0..request.len() {
            let prefix = request.get(..cut).unwrap_or_default();
            let outcome = parse(prefix, limits);
            assert!(
                outcome == Ok(None) || (outcome.is_err() && cut > limits.max_inline_bytes),
                "invariant 2: a {cut}-byte prefix of a {}-byte request gave {outcome:?}",
                request.len()
            );
        }
    }
    let mut longer = request.to_vec();
    longer.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
    assert_eq!(
        parse(&longer, limits),
        Ok(Some((parsed.clone(), request.len()))),
        "invariant 2: trailing bytes changed the request"
    );
}

/// Invariant 3.
fn check_round_trip(arguments: &[Vec<u8>], limits: &Limits) {
    if arguments
        .iter()
        .any(|argument| argument.len() as u64 > limits.max_bulk_bytes)
    {
        return; // an inline argument may exceed the bulk limit; not encodable here
    }
    let mut encoded = format!("*{}\r\n", arguments.len()).into_bytes();
    for argument in arguments {
        encoded.extend_from_slice(format!("${}\r\n", argument.len()).as_bytes());
        encoded.extend_from_slice(argument);
        encoded.extend_from_slice(b"\r\n");
    }
    assert_eq!(
        parse(&encoded, limits),
        Ok(Some((Parsed::Command(arguments.to_vec()), encoded.len()))),
        "invariant 3: round trip of {arguments:?}"
    );
}
