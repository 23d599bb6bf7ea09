//! The RESP2 request parser: multibulk (`*N\r\n$len\r\n...`) and inline (`PING\r\n`) requests.
//!
//! Thread-safety contract: stateless; `parse` reads a borrowed buffer and may be called from
//! any thread.
//!
//! Invariants:
//! 1. `parse` returns `Ok(None)` while the buffer holds only a prefix of a request, and never
//!    reads beyond the request it reports (pipelined requests stay in the buffer).
//! 2. Every error carries Redis's own text (`Protocol error: ...`, from its
//!    `tests/unit/protocol.tcl`), and the caller closes the connection after replying it.
//! 3. A header line (inline request, `*N`, `$len`) longer than [`Limits::max_inline_bytes`]
//!    without its newline is an error, so a client cannot grow the buffer without bound by
//!    never sending a newline; a bulk longer than [`Limits::max_bulk_bytes`] is refused from
//!    its header alone, before its bytes arrive.
//! 4. `parse_request` and `parse` accept and reject the same inputs and consume the same bytes:
//!    `parse` is `parse_request` with the ranges copied out.
//! 5. A multibulk request arriving in pieces is parsed incrementally: with its [`Resume`]
//!    kept between calls, each argument is parsed once, whatever the number of reads.

use std::ops::Range;

#[cfg(test)]
std::thread_local! {
    /// Arguments this thread's parser has read (tests count the work a request costs).
    pub(crate) static ARGUMENTS_PARSED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Size limits the parser enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest bulk string (Redis's `proto-max-bulk-len`, 512 MiB by default).
    pub max_bulk_bytes: u64,
    /// Longest inline request or header line (Redis's `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub max_inline_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_bytes: 512 * 1024 * 1024,
            max_inline_bytes: 64 * 1024,
        }
    }
}

/// One parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A command and its arguments (never empty).
    Command(Vec<Vec<u8>>),
    /// A request that asks for nothing (`*0`, `*-10`, an empty inline line): no reply.
    Nothing,
}

/// One request as the connection runs it, without copying a multibulk request's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A command whose arguments are the byte ranges `parse_request` left in its `ranges`
    /// (never empty), relative to the buffer it parsed.
    Ranges,
    /// A command with owned arguments (inline requests: their quotes and escapes are decoded).
    Owned(Vec<Vec<u8>>),
    /// A request that asks for nothing (`*0`, `*-10`, an empty inline line): no reply.
    Nothing,
}

/// A malformed request; the connection replies `-ERR <message>` and closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(message: impl Into<String>) -> Self {
        ProtocolError(format!("Protocol error: {}", message.into()))
    }
}

/// Parses the first request in `buffer`: `Ok(Some((request, consumed_bytes)))`, `Ok(None)`
/// when more bytes are needed, or the protocol error to reply before closing.
pub fn parse(buffer: &[u8], limits: &Limits) -> Result<Option<(Parsed, usize)>, ProtocolError> {
    let mut ranges = Vec::new();
    Ok(
        parse_request(buffer, limits, &mut ranges, &mut Resume::default())?.map(
            |(request, used)| {
                let parsed = match request {
                    Request::Ranges => Parsed::Command(
                        ranges
                            .iter()
                            .map(|range| buffer.get(range.clone()).unwrap_or_default().to_vec())
                            .collect(),
                    ),
                    Request::Owned(arguments) => Parsed::Command(arguments),
                    Request::Nothing => Parsed::Nothing,
                };
                (parsed, used)
            },
        ),
    )
}

/// Where a multibulk request still arriving stopped. The connection keeps it between reads
/// so that each read parses only the arguments that arrived since: parsing from the request's
/// start on every read made a request of many arguments, sent in pieces, quadratic.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Resume {
    /// Arguments of the request in progress not yet parsed; 0 when none is in progress.
    remaining: usize,
    /// Offset, from the request's start, of the first argument not yet parsed.
    offset: usize,
}

/// Like [`parse`], but a multibulk request's arguments are left as byte ranges of `buffer` in
/// `ranges` instead of copied: the connection's hot path.
///
/// REQUIRES: while `resume` holds a request in progress (the last call returned `Ok(None)`),
/// `buffer` starts where that request starts and `ranges` is as that call left it; the bytes
/// already parsed are not read again.
pub fn parse_request(
    buffer: &[u8],
    limits: &Limits,
    ranges: &mut Vec<Range<usize>>,
    resume: &mut Resume,
) -> Result<Option<(Request, usize)>, ProtocolError> {
    if resume.remaining > 0 {
        return parse_arguments(buffer, limits, ranges, resume);
    }
    ranges.clear();
    match buffer.first() {
        None => Ok(None),
        Some(b'*') => parse_multibulk(buffer, limits, ranges, resume),
        Some(_) => parse_inline(buffer, limits),
    }
}

/// The line starting at `start` (without its `\r\n`) and the offset after it.
fn line_at(buffer: &[u8], start: usize) -> Option<(&[u8], usize)> {
    let rest = buffer.get(start..)?;
    let position = rest.windows(2).position(|pair| pair == b"\r\n")?;
    Some((rest.get(..position)?, start + position + 2))
}

/// Redis's `string2ll`: an optional `-` and decimal digits, nothing else, no overflow.
fn parse_integer(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(byte - b'0');
        // Accumulated with the sign so that i64::MIN parses without overflowing.
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit)?
        } else {
            value.checked_add(digit)?
        };
    }
    Some(value)
}

fn parse_multibulk(
    buffer: &[u8],
    limits: &Limits,
    arguments: &mut Vec<Range<usize>>,
    resume: &mut Resume,
) -> Result<Option<(Request, usize)>, ProtocolError> {
    let Some((header, offset)) = line_at(buffer, 0) else {
        if buffer.len() > limits.max_inline_bytes {
            return Err(ProtocolError::new("too big mbulk count string"));
        }
        return Ok(None);
    };
    let count = parse_integer(header.get(1..).unwrap_or_default())
        .filter(|count| *count <= i64::from(i32::MAX))
        .ok_or_else(|| ProtocolError::new("invalid multibulk length"))?;
    let Ok(count @ 1..) = usize::try_from(count) else {
        return Ok(Some((Request::Nothing, offset)));
    };
    *resume = Resume {
        remaining: count,
        offset,
    };
    parse_arguments(buffer, limits, arguments, resume)
}

/// Parses the arguments of the request in progress from `resume.offset` on, as far as the
/// buffer goes; `resume` is cleared once the request is complete or malformed.
fn parse_arguments(
    buffer: &[u8],
    limits: &Limits,
    arguments: &mut Vec<Range<usize>>,
    resume: &mut Resume,
) -> Result<Option<(Request, usize)>, ProtocolError> {
    while resume.remaining > 0 {
        match parse_argument(buffer, resume.offset, limits) {
            Ok(Some((body, next))) => {
                // Ranges, not copies: the caller reads the arguments in place once the
                // request is complete.
                arguments.push(body);
                #[cfg(test)]
                ARGUMENTS_PARSED.with(|parsed| parsed.set(parsed.get() + 1));
                resume.offset = next;
                resume.remaining -= 1;
            }
            Ok(None) => return Ok(None),
            Err(error) => {
                *resume = Resume::default();
                return Err(error);
            }
        }
    }
    let end = resume.offset;
    *resume = Resume::default();
    Ok(Some((Request::Ranges, end)))
}

/// The bulk string whose `$len` header starts at `offset`: its body's range and the offset
/// after it, or `None` while it has not all arrived.
fn parse_argument(
    buffer: &[u8],
    offset: usize,
    limits: &Limits,
) -> Result<Option<(Range<usize>, usize)>, ProtocolError> {
    let Some(&first) = buffer.get(offset) else {
        return Ok(None);
    };
    if first != b'$' {
        return Err(ProtocolError::new(format!(
            "expected '$', got '{}'",
            char::from(first)
        )));
    }
    let Some((header, body_start)) = line_at(buffer, offset) else {
        if buffer.len() - offset > limits.max_inline_bytes {
            return Err(ProtocolError::new("too big bulk count string"));
        }
        return Ok(None);
    };
    let length = parse_integer(header.get(1..).unwrap_or_default())
        .and_then(|length| u64::try_from(length).ok())
        .filter(|length| *length <= limits.max_bulk_bytes)
        .and_then(|length| usize::try_from(length).ok())
        .ok_or_else(|| ProtocolError::new("invalid bulk length"))?;
    let body_end = body_start + length;
    // Like Redis, the two bytes after the body are skipped, not checked.
    if buffer.len() < body_end + 2 {
        return Ok(None);
    }
    Ok(Some((body_start..body_end, body_end + 2)))
}

fn parse_inline(buffer: &[u8], limits: &Limits) -> Result<Option<(Request, usize)>, ProtocolError> {
    let Some(newline) = buffer.iter().position(|byte| *byte == b'\n') else {
        if buffer.len() > limits.max_inline_bytes {
            return Err(ProtocolError::new("too big inline request"));
        }
        return Ok(None);
    };
    let mut line = buffer.get(..newline).unwrap_or_default();
    if let Some(stripped) = line.strip_suffix(b"\r") {
        line = stripped;
    }
    let arguments =
        split_arguments(line).ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))?;
    let parsed = if arguments.is_empty() {
        Request::Nothing
    } else {
        Request::Owned(arguments)
    };
    Ok(Some((parsed, newline + 1)))
}

/// Redis's `sdssplitargs`: words separated by blanks, `"..."` with C escapes (`\n`, `\xHH`,
/// ...) and `'...'` with only `\'`; a closing quote must end the word. `None`: unbalanced.
pub fn split_arguments(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut arguments = Vec::new();
    let mut position = 0;
    loop {
        while line.get(position).is_some_and(u8::is_ascii_whitespace) {
            position += 1;
        }
        if position >= line.len() {
            return Some(arguments);
        }
        let (word, next) = split_word(line, position)?;
        arguments.push(word);
        position = next;
    }
}

/// One word starting at `start`; returns it and the offset after it.
fn split_word(line: &[u8], start: usize) -> Option<(Vec<u8>, usize)> {
    let mut word = Vec::new();
    let mut position = start;
    let mut quote: Option<u8> = None;
    loop {
        let Some(&byte) = line.get(position) else {
            // End of line inside quotes is unbalanced; outside, it ends the word.
            return if quote.is_some() {
                None
            } else {
                Some((word, position))
            };
        };
        match quote {
            None if byte.is_ascii_whitespace() => return Some((word, position)),
            None if byte == b'"' || byte == b'\'' => quote = Some(byte),
            None => word.push(byte),
            Some(closing) if byte == closing => {
                // The closing quote must be followed by a blank or the end of the line.
                let after = line.get(position + 1);
                if after.is_some_and(|next| !next.is_ascii_whitespace()) {
                    return None;
                }
                return Some((word, position + 1));
            }
            Some(b'"') if byte == b'\\' => {
                let (decoded, used) = unescape(line.get(position + 1..)?)?;
                word.push(decoded);
                position += used;
            }
            Some(b'\'') if byte == b'\\' && line.get(position + 1) == Some(&b'\'') => {
                word.push(b'\'');
                position += 1;
            }
            Some(_) => word.push(byte),
        }
        position += 1;
    }
}

/// Decodes the escape after a backslash in double quotes: the byte and how many bytes it took.
fn unescape(rest: &[u8]) -> Option<(u8, usize)> {
    let hex = |byte: u8| char::from(byte).to_digit(16);
    let first = *rest.first()?;
    if first == b'x' {
        if let (Some(high), Some(low)) = (
            rest.get(1).copied().and_then(hex),
            rest.get(2).copied().and_then(hex),
        ) {
            return Some(((high * 16 + low) as u8, 3));
        }
    }
    let decoded = match first {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 8,
        b'a' => 7,
        other => other,
    };
    Some((decoded, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Option<(Parsed, usize)>, ProtocolError> {
        parse(input, &Limits::default())
    }

    fn command(words: &[&[u8]]) -> Parsed {
        Parsed::Command(words.iter().map(|word| word.to_vec()).collect())
    }

    #[test]
    fn multibulk_and_pipelining() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        let (first, used) = parse_all(input).unwrap().unwrap();
        assert_eq!(first, command(&[b"GET", b"k"]));
        let (second, rest) = parse_all(&input[used..]).unwrap().unwrap();
        assert_eq!(second, command(&[b"PING"]));
        assert_eq!(used + rest, input.len());
    }

    #[test]
    fn partial_requests_wait() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        for end in 0..input.len() {
            assert_eq!(parse_all(&input[..end]), Ok(None), "prefix of {end} bytes");
        }
    }

    #[test]
    fn a_request_parsed_in_pieces_matches_the_request_parsed_whole() {
        let inputs: [&[u8]; 3] = [
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n*1\r\n$4\r\nPING\r\n",
            b"*2\r\n$3\r\nGET\r\n$x\r\n",
            b"*2\r\n$3\r\nGET\r\n:1\r\n",
        ];
        let limits = Limits::default();
        for input in inputs {
            let whole = parse_request(input, &limits, &mut Vec::new(), &mut Resume::default());
            for split in 0..input.len() {
                let (mut ranges, mut resume) = (Vec::new(), Resume::default());
                let first = parse_request(&input[..split], &limits, &mut ranges, &mut resume);
                let pieces = match first {
                    Ok(None) => parse_request(input, &limits, &mut ranges, &mut resume),
                    done => done,
                };
                assert_eq!(pieces, whole, "split at {split}");
                let mut whole_ranges = Vec::new();
                let _ = parse_request(input, &limits, &mut whole_ranges, &mut Resume::default());
                if let Ok(Some(_)) = pieces {
                    assert_eq!(ranges, whole_ranges, "split at {split}");
                }
                assert_eq!(
                    resume,
                    Resume::default(),
                    "nothing in progress after a verdict"
                );
            }
        }
    }

    #[test]
    fn binary_bulk_round_trips() {
        let input = b"*1\r\n$4\r\n\x00\r\n\xff\r\n";
        let (parsed, _) = parse_all(input).unwrap().unwrap();
        assert_eq!(parsed, command(&[b"\x00\r\n\xff"]));
    }

    #[test]
    fn redis_protocol_errors() {
        let error = |text: &str| Err(ProtocolError(format!("Protocol error: {text}")));
        assert_eq!(
            parse_all(b"*1\r\n$blabla\r\n"),
            error("invalid bulk length")
        );
        assert_eq!(
            parse_all(b"*3000000000\r\n"),
            error("invalid multibulk length")
        );
        assert_eq!(parse_all(b"*1\r\n$-10\r\n"), error("invalid bulk length"));
        assert_eq!(parse_all(b"*1\r\nfoo\r\n"), error("expected '$', got 'f'"));
        assert_eq!(parse_all(b"*x\r\n"), error("invalid multibulk length"));
        assert_eq!(
            parse_all(b"set \"a\r\n"),
            error("unbalanced quotes in request")
        );
        assert_eq!(
            parse_all(b"set \"a\"b c\r\n"),
            error("unbalanced quotes in request")
        );
        let limits = Limits {
            max_bulk_bytes: 10,
            max_inline_bytes: 64,
        };
        assert_eq!(
            parse(b"*1\r\n$11\r\n", &limits),
            error("invalid bulk length")
        );
        assert_eq!(parse(&[b'a'; 65], &limits), error("too big inline request"));
        assert_eq!(
            parse(&[b'*'; 65], &limits),
            error("too big mbulk count string")
        );
    }

    #[test]
    fn integers_read_as_before_the_hand_written_parser() {
        assert_eq!(parse_integer(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_integer(b"-0"), Some(0));
        assert_eq!(parse_integer(b"007"), Some(7));
        for bad in [
            &b"9223372036854775808"[..],
            b"-9223372036854775809",
            b"+1",
            b"-",
            b"",
            b"1a",
            b" 1",
            b"1 ",
        ] {
            assert_eq!(parse_integer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn negative_multibulk_is_ignored() {
        assert_eq!(parse_all(b"*-10\r\n"), Ok(Some((Parsed::Nothing, 6))));
        assert_eq!(parse_all(b"\r\n"), Ok(Some((Parsed::Nothing, 2))));
    }

    #[test]
    fn inline_quoting() {
        let (parsed, _) = parse_all(b"set 'it\\'s' \"a\\x41\\n\"  \r\n")
            .unwrap()
            .unwrap();
        assert_eq!(parsed, command(&[b"set", b"it's", b"aA\n"]));
    }
}
