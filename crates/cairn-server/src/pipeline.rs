//! One read buffer's worth of pipelined requests: parse each in place, run it, append its
//! reply to the connection's output buffer; consecutive plain SETs are gathered and written
//! as one engine batch (`commands::plain_set`).
//!
//! Thread-safety contract: runs on the connection's task with buffers that connection owns;
//! what it shares goes through the `Context`.
//!
//! Invariants:
//! 1. Replies are appended in request order: a gathered run of SETs is written, and its
//!    replies appended, before any later request of the buffer runs, so a later command sees
//!    every earlier write of its pipeline.
//! 2. Only whole requests are consumed; the returned byte count ends at a request boundary
//!    (after a protocol error or a closing command nothing after it runs).
//! 3. A multibulk request's arguments are read in place (no copy per argument); the scratch
//!    vectors are reused from one buffer to the next.
//! 4. A run stops at a request boundary once the output holds `OUTPUT_LIMIT` bytes
//!    (`Next::Flush`), so one run's output is at most `OUTPUT_LIMIT` plus one reply however
//!    many requests the buffer holds; the caller writes it and runs the rest.

use crate::commands::{self, plain_set};
use crate::context::{Context, Session};
use crate::resp::{self, Limits, Reply, Request};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// Arguments a command may have and still be gathered without allocating.
const STACK_ARGS: usize = 8;

/// Output a run of requests may build before it stops at the next request boundary: without
/// it, 1,500 pipelined GETs of a 256 MiB value built 384 GiB of replies.
pub const OUTPUT_LIMIT: usize = 64 * 1024 * 1024;

/// Capacity a connection's buffers keep between rounds (more only while a round needs it).
pub const BUFFER_KEEP: usize = 64 * 1024;

/// Gives back the capacity of a connection buffer far above what the last round used
/// (`used` bytes): one 256 MiB value once left each of its buffers that large for good.
pub fn shrink_buffer(buffer: &mut Vec<u8>, used: usize) {
    let keep = used.max(buffer.len()).max(BUFFER_KEEP);
    if buffer.capacity() / 4 > keep {
        buffer.shrink_to(keep);
    }
}

/// What the connection does after running the buffered requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Read more requests.
    Read,
    /// Close the connection (QUIT, SHUTDOWN, a protocol error).
    Close,
    /// Write the output, then run the rest of the input (whole requests may remain) before
    /// reading more: the output passed `OUTPUT_LIMIT`.
    Flush,
}

/// Vectors a connection reuses for every read buffer.
#[derive(Debug, Default)]
pub struct Scratch {
    ranges: Vec<Range<usize>>,
    /// Where the request still arriving at the end of the last buffer stopped parsing.
    resume: resp::Resume,
    /// The gathered run of plain SETs: (key, value) ranges of the input.
    sets: Vec<(Range<usize>, Range<usize>)>,
}

/// Runs the complete requests in `input`, appending replies to `output`, until none is left
/// or the output passes `OUTPUT_LIMIT` (invariant 4); returns what to do next and how many
/// bytes of `input` it consumed.
pub fn run_requests(
    input: &[u8],
    output: &mut Vec<u8>,
    context: &Context,
    session: &mut Session,
    scratch: &mut Scratch,
) -> (Next, usize) {
    let limits = Limits {
        max_bulk_bytes: context.config.proto_max_bulk_len.load(Ordering::Relaxed),
        ..Limits::default()
    };
    let mut consumed = 0;
    let mut commands = 0u64;
    let next = loop {
        if output.len() >= OUTPUT_LIMIT {
            // Invariant 4: at a request boundary, so the caller can write and run the rest.
            break Next::Flush;
        }
        let rest = input.get(consumed..).unwrap_or_default();
        let (request, used) =
            match resp::parse_request(rest, &limits, &mut scratch.ranges, &mut scratch.resume) {
                Ok(None) => break Next::Read,
                Ok(Some(parsed)) => parsed,
                Err(error) => {
                    flush_sets(input, output, context, &mut scratch.sets);
                    Reply::Error(format!("ERR {}", error.0)).encode(output);
                    break Next::Close;
                }
            };
        let start = consumed;
        consumed += used;
        commands += 1;
        let outcome = match request {
            Request::Nothing => {
                commands -= 1;
                Next::Read
            }
            Request::Owned(words) => {
                // Inline requests (rare, hand-typed) run alone.
                flush_sets(input, output, context, &mut scratch.sets);
                let owned: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
                run_one(&owned, output, context, session)
            }
            Request::Ranges => run_ranges(input, start, output, context, session, scratch),
        };
        if let Next::Close = outcome {
            break Next::Close;
        }
    };
    flush_sets(input, output, context, &mut scratch.sets);
    context.count_commands(session.id, commands);
    (next, consumed)
}

/// Runs the multibulk request that starts at `start` of `input`, whose arguments
/// `scratch.ranges` holds (relative to `start`); a plain SET is gathered into the run instead.
fn run_ranges(
    input: &[u8],
    start: usize,
    output: &mut Vec<u8>,
    context: &Context,
    session: &mut Session,
    scratch: &mut Scratch,
) -> Next {
    let shift = |range: &Range<usize>| start + range.start..start + range.end;
    if let [name, key, value] = scratch.ranges.as_slice() {
        let name = input.get(shift(name)).unwrap_or_default();
        if plain_set::is_plain_set(&[name, &[], &[]]) {
            scratch.sets.push((shift(key), shift(value)));
            if scratch.sets.len() >= plain_set::RUN_MAX {
                flush_sets(input, output, context, &mut scratch.sets);
            }
            return Next::Read;
        }
    }
    flush_sets(input, output, context, &mut scratch.sets);
    // Up to `STACK_ARGS` arguments are gathered on the stack: no allocation per command.
    let mut stack: [&[u8]; STACK_ARGS] = [&[]; STACK_ARGS];
    let heap: Vec<&[u8]>;
    let word = |range: &Range<usize>| input.get(shift(range)).unwrap_or_default();
    let args: &[&[u8]] = if scratch.ranges.len() <= STACK_ARGS {
        for (slot, range) in stack.iter_mut().zip(&scratch.ranges) {
            *slot = word(range);
        }
        stack.get(..scratch.ranges.len()).unwrap_or_default()
    } else {
        heap = scratch.ranges.iter().map(word).collect();
        &heap
    };
    run_one(args, output, context, session)
}

/// Runs one command and appends its reply (none when SHUTDOWN succeeds: Redis closes
/// without one).
fn run_one(args: &[&[u8]], output: &mut Vec<u8>, context: &Context, session: &mut Session) -> Next {
    let reply = commands::dispatch(context, session, args);
    if session.shutdown {
        return Next::Close;
    }
    reply.encode(output);
    if session.close {
        Next::Close
    } else {
        Next::Read
    }
}

/// Writes the gathered run of plain SETs (if any) and appends their replies.
fn flush_sets(
    input: &[u8],
    output: &mut Vec<u8>,
    context: &Context,
    sets: &mut Vec<(Range<usize>, Range<usize>)>,
) {
    if sets.is_empty() {
        return;
    }
    let pair = |(key, value): &(Range<usize>, Range<usize>)| {
        (
            input.get(key.clone()).unwrap_or_default(),
            input.get(value.clone()).unwrap_or_default(),
        )
    };
    if let [one] = sets.as_slice() {
        // An unpipelined SET: no vector.
        plain_set::set_run(context, &[pair(one)], output);
    } else {
        let pairs: Vec<(&[u8], &[u8])> = sets.iter().map(pair).collect();
        plain_set::set_run(context, &pairs, output);
    }
    sets.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ModelStore, SharedStore};
    use std::sync::Arc;

    /// Runs `requests` (inline lines or multibulk) as one read buffer; returns the replies.
    fn run_buffer(context: &Context, requests: &[&[&[u8]]]) -> (Next, Vec<u8>) {
        let mut input = Vec::new();
        for words in requests {
            input.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
            for word in *words {
                input.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
                input.extend_from_slice(word);
                input.extend_from_slice(b"\r\n");
            }
        }
        let mut output = Vec::new();
        let (next, consumed) = run_requests(
            &input,
            &mut output,
            context,
            &mut Session::default(),
            &mut Scratch::default(),
        );
        assert_eq!(consumed, input.len(), "every whole request is consumed");
        (next, output)
    }

    fn model() -> Context {
        Context::new(Arc::new(ModelStore::default()), 0)
    }

    #[test]
    fn a_later_command_sees_the_sets_before_it() {
        let context = model();
        let (next, replies) = run_buffer(
            &context,
            &[
                &[b"SET", b"k", b"1"],
                &[b"set", b"k", b"2"],
                &[b"GET", b"k"],
                &[b"SET", b"n", b"1"],
                &[b"INCR", b"n"],
                &[b"SET", b"n", b"5"],
                &[b"GET", b"n"],
            ],
        );
        assert_eq!(next, Next::Read);
        assert_eq!(
            String::from_utf8_lossy(&replies),
            "+OK\r\n+OK\r\n$1\r\n2\r\n+OK\r\n:2\r\n+OK\r\n$1\r\n5\r\n"
        );
    }

    #[test]
    fn a_failing_set_in_a_run_replies_its_own_error_and_the_rest_apply() {
        let context = model();
        let long_key = vec![b'x'; 70 * 1024];
        let (_, replies) = run_buffer(
            &context,
            &[
                &[b"SET", b"a", b"1"],
                &[b"SET", &long_key, b"v"],
                &[b"SET", b"b", b"2"],
                &[b"GET", b"a"],
                &[b"GET", b"b"],
                &[b"EXISTS", &long_key],
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&replies),
            "+OK\r\n-ERR key too large: 71680 bytes (the limit is 65535 bytes)\r\n+OK\r\n\
             $1\r\n1\r\n$1\r\n2\r\n:0\r\n"
        );
    }

    #[test]
    fn a_run_longer_than_one_batch_keeps_its_order() {
        let context = model();
        let keys: Vec<Vec<u8>> = (0..plain_set::RUN_MAX * 2 + 3)
            .map(|index| format!("k{}", index % 7).into_bytes())
            .collect();
        let values: Vec<Vec<u8>> = (0..keys.len())
            .map(|index| index.to_string().into_bytes())
            .collect();
        let mut requests: Vec<Vec<&[u8]>> = keys
            .iter()
            .zip(&values)
            .map(|(key, value)| vec![&b"SET"[..], key, value])
            .collect();
        requests.push(vec![b"GET", b"k3"]);
        let borrowed: Vec<&[&[u8]]> = requests.iter().map(Vec::as_slice).collect();
        let (_, replies) = run_buffer(&context, &borrowed);
        // The last SET of k3 is index 514 (514 % 7 == 3).
        let mut expected = "+OK\r\n".repeat(keys.len());
        expected.push_str("$3\r\n514\r\n");
        assert_eq!(String::from_utf8_lossy(&replies), expected);
    }

    #[test]
    fn a_set_over_a_hash_deletes_its_fields_even_for_hashes_stored_before_the_start() {
        let store: SharedStore = Arc::new(ModelStore::default());
        let before = Context::new(Arc::clone(&store), 0);
        run_buffer(&before, &[&[b"HSET", b"h", b"f", b"v"]]);
        // A new context (a restart) learns of the stored hash from its fields.
        let context = Context::new(store, 0);
        assert!(context.may_hold_hash(b"h"));
        let (_, replies) = run_buffer(
            &context,
            &[
                &[b"SET", b"h", b"s"],
                &[b"GET", b"h"],
                &[b"DEL", b"h"],
                &[b"HSET", b"h", b"g", b"w"],
                &[b"HGETALL", b"h"],
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&replies),
            "+OK\r\n$1\r\ns\r\n:1\r\n:1\r\n*2\r\n$1\r\ng\r\n$1\r\nw\r\n"
        );
    }

    #[test]
    fn a_lone_set_replies_as_the_same_set_inside_a_run() {
        let long_key = vec![b'x'; 70 * 1024];
        let cases: [&[&[u8]]; 3] = [
            &[b"SET", b"k", b"v"],
            &[b"SET", &long_key, b"v"],
            &[b"SET", b"h", b"s"],
        ];
        for case in cases {
            let lone = model();
            let run = model();
            for context in [&lone, &run] {
                run_buffer(context, &[&[b"HSET", b"h", b"f", b"v"]]);
            }
            // Alone: the GET after it ends the run; in a run: a SET of another key before it.
            let (_, lone_replies) = run_buffer(&lone, &[case, &[b"HGETALL", b"h"]]);
            let (_, run_replies) = run_buffer(
                &run,
                &[&[b"SET", b"other", b"1"], case, &[b"HGETALL", b"h"]],
            );
            assert_eq!(
                [&b"+OK\r\n"[..], &lone_replies].concat(),
                run_replies,
                "{:?}",
                String::from_utf8_lossy(&lone_replies)
            );
        }
    }

    #[test]
    fn commands_are_counted_across_connections() {
        let context = model();
        for id in 0..20u64 {
            let mut input = Vec::new();
            for _ in 0..=id {
                input.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
            }
            let mut session = Session {
                id,
                ..Session::default()
            };
            let mut output = Vec::new();
            run_requests(
                &input,
                &mut output,
                &context,
                &mut session,
                &mut Scratch::default(),
            );
        }
        assert_eq!(context.commands_processed(), (1..=20).sum::<u64>());
    }

    #[test]
    fn a_protocol_error_after_a_run_closes_after_its_replies() {
        let context = model();
        let mut input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n".to_vec();
        let run_end = input.len();
        input.extend_from_slice(b"*1\r\n$x\r\n*1\r\n$4\r\nPING\r\n");
        let mut output = Vec::new();
        let (next, consumed) = run_requests(
            &input,
            &mut output,
            &context,
            &mut Session::default(),
            &mut Scratch::default(),
        );
        assert_eq!((next, consumed), (Next::Close, run_end));
        assert_eq!(
            String::from_utf8_lossy(&output),
            "+OK\r\n-ERR Protocol error: invalid bulk length\r\n"
        );
        let (_, replies) = run_buffer(&context, &[&[b"GET", b"k"]]);
        assert_eq!(replies, b"$1\r\nv\r\n");
    }

    #[test]
    fn a_request_arriving_in_pieces_parses_each_argument_about_once() {
        let context = model();
        let keys = 20_000;
        let mut request = format!("*{}\r\n$3\r\nDEL\r\n", keys + 1).into_bytes();
        for key in 0..keys {
            let key = format!("k{key}");
            request.extend_from_slice(format!("${}\r\n{key}\r\n", key.len()).as_bytes());
        }
        let (mut input, mut output) = (Vec::new(), Vec::new());
        let (mut session, mut scratch) = (Session::default(), Scratch::default());
        let before = crate::resp::parser::ARGUMENTS_PARSED.with(std::cell::Cell::get);
        // As the connection does: append what arrived, run, drop what was consumed.
        for piece in request.chunks(64) {
            input.extend_from_slice(piece);
            let (next, consumed) =
                run_requests(&input, &mut output, &context, &mut session, &mut scratch);
            assert_eq!(next, Next::Read);
            input.drain(..consumed);
        }
        assert!(input.is_empty(), "the whole request ran");
        assert_eq!(output, b":0\r\n");
        let parsed = crate::resp::parser::ARGUMENTS_PARSED.with(std::cell::Cell::get) - before;
        let pieces = request.len().div_ceil(64) as u64;
        assert!(
            parsed <= keys + 1 + pieces,
            "{parsed} arguments parsed for a request of {} arguments in {pieces} pieces",
            keys + 1
        );
    }

    /// Every complete request of a buffer once ran before any output was written: 1,500
    /// pipelined GETs of a 256 MiB value built 384 GiB of replies. The run now stops at a
    /// request boundary once the output passes `OUTPUT_LIMIT`, and the rest runs next.
    #[test]
    fn a_pipeline_of_large_replies_runs_in_rounds_of_bounded_output() {
        let context = model();
        let value = vec![b'v'; 1 << 20];
        run_buffer(&context, &[&[b"SET", b"k", &value]]);
        let gets = OUTPUT_LIMIT / value.len() + 36;
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".repeat(gets);
        let (mut session, mut scratch) = (Session::default(), Scratch::default());
        let reply = format!("${}\r\n", value.len()).len() + value.len() + 2;
        let (mut offset, mut replies, mut rounds) = (0, 0, 0);
        while offset < input.len() {
            let mut output = Vec::new();
            let rest = input.get(offset..).unwrap();
            let (next, consumed) =
                run_requests(rest, &mut output, &context, &mut session, &mut scratch);
            assert!(
                output.len() <= OUTPUT_LIMIT + reply,
                "{} bytes of output in one round",
                output.len()
            );
            assert!(consumed > 0, "a round makes progress");
            if offset + consumed < input.len() {
                assert_eq!(next, Next::Flush, "stopped early, the caller runs the rest");
            }
            assert_eq!(output.len() % reply, 0, "whole replies only");
            replies += output.len() / reply;
            offset += consumed;
            rounds += 1;
        }
        assert_eq!(replies, gets);
        assert!(rounds >= 2, "{gets} replies of 1 MiB in one round");
    }

    #[test]
    fn a_buffer_far_larger_than_its_use_shrinks() {
        let mut buffer: Vec<u8> = Vec::with_capacity(64 << 20);
        buffer.extend_from_slice(b"rest");
        shrink_buffer(&mut buffer, 1 << 20);
        assert!(buffer.capacity() >= 1 << 20 && buffer.capacity() < 4 << 20);
        assert_eq!(buffer, b"rest");
        shrink_buffer(&mut buffer, 0);
        assert!(buffer.capacity() >= BUFFER_KEEP && buffer.capacity() < 4 * BUFFER_KEEP);
        let capacity = buffer.capacity();
        shrink_buffer(&mut buffer, 2 * BUFFER_KEEP);
        assert_eq!(
            buffer.capacity(),
            capacity,
            "a buffer in use keeps its capacity"
        );
    }
}
