//! The shell's language: the CS265 workload commands on 64-bit integers, text-key commands
//! beside them, and the integer key encoding. [`parse_line`] turns one line into a
//! [`Command`]; the `shell` module runs it.
//!
//! | line                      | meaning                                                    |
//! | ------------------------- | ---------------------------------------------------------- |
//! | `p K V`                   | put `K` → `V` (overwrites)                                 |
//! | `g K`                     | print the value of `K`, or an empty line if absent         |
//! | `r A B`                   | print `key:value` for every `A <= key < B`, ascending,     |
//! |                           | space separated on one line (empty if none, or `A >= B`)   |
//! | `d K`                     | delete `K` (absent keys are fine)                          |
//! | `l "path"`                | load a binary file of native-endian `i32` pairs as puts    |
//! | `s [N]`                   | print the CS265 statistics (`crate::levels`), at most `N`   |
//! |                           | pairs per level in the dumps                               |
//! | `put KEY VALUE`           | text put                                                   |
//! | `get KEY`                 | print the value (escaped), or an empty line if absent      |
//! | `del KEY`                 | text delete                                                |
//! | `scan [FROM [TO [LIMIT]]]`| `KEY VALUE` lines for `FROM <= key < TO`, then an empty line |
//! | `incr KEY [BY]`           | add `BY` (default 1) to a decimal counter, print the result |
//!
//! `K`, `V`, `A`, `B` are signed 64-bit integers: the CS265 generator prints 32-bit ones
//! (`%d`), which are a subset, and its load files hold 32-bit pairs (8 bytes a pair).
//! Text keys and values use the escapes of [`crate::text`]. Blank lines are ignored; tokens
//! may be separated by any amount of whitespace.

use crate::text;
use std::num::IntErrorKind;

/// Bytes of one encoded integer key or value.
pub const ENCODED_BYTES: usize = 8;

/// Bytes of one `K V` pair in a load file (two native-endian `i32`s, as the CS265 generator
/// writes them).
pub const LOAD_PAIR_BYTES: usize = 8;

/// Encodes an integer so that byte-wise (memcmp) order equals numeric order: the sign bit is
/// flipped and the result written big-endian. Values use the same encoding.
pub fn encode_i64(value: i64) -> [u8; ENCODED_BYTES] {
    (value.cast_unsigned() ^ (1 << 63)).to_be_bytes()
}

/// Inverse of [`encode_i64`].
pub fn decode_i64(bytes: [u8; ENCODED_BYTES]) -> i64 {
    (u64::from_be_bytes(bytes) ^ (1 << 63)).cast_signed()
}

/// Decodes a slice produced by [`encode_i64`]; `None` if it is not exactly 8 bytes long.
pub fn decode_i64_slice(bytes: &[u8]) -> Option<i64> {
    <[u8; ENCODED_BYTES]>::try_from(bytes).ok().map(decode_i64)
}

/// One parsed line of the language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `p K V`
    Put { key: i64, value: i64 },
    /// `g K`
    Get { key: i64 },
    /// `r A B`: `A <= key < B`.
    Range { lower: i64, upper: i64 },
    /// `d K`
    Delete { key: i64 },
    /// `l "path"`: the path as written (quotes removed).
    Load { path: String },
    /// `s [N]`: the CS265 statistics, at most `N` pairs per level in the dumps.
    Stats(Option<usize>),
    /// `put KEY VALUE`
    TextPut { key: Vec<u8>, value: Vec<u8> },
    /// `get KEY`
    TextGet { key: Vec<u8> },
    /// `del KEY`
    TextDelete { key: Vec<u8> },
    /// `scan [FROM [TO [LIMIT]]]`
    Scan {
        from: Vec<u8>,
        to: Option<Vec<u8>>,
        limit: Option<usize>,
    },
    /// `incr KEY [BY]`
    Increment { key: Vec<u8>, by: i64 },
    /// `help`
    Help,
}

/// The short help the interactive shell prints for `help`.
pub const HELP: &str = "\
p K V | g K | r A B | d K     CS265 commands on 64-bit integers (r: A <= key < B)
l \"FILE\"                      load int32 pairs K V K V ... from FILE
s [N]                         CS265 statistics (N: pairs per level)
put KEY VALUE | get KEY | del KEY
scan [FROM [TO [LIMIT]]]      KEY VALUE lines for FROM <= key < TO, then an empty line
incr KEY [BY]                 add BY (default 1) to a decimal counter
text: \\\\ \\\" \\t \\n \\r \\xHH escapes, \"quoted words\", \"\" is empty
quit (or Ctrl-D) ends the shell";

const COMMANDS: &str = "p, g, r, d, l, s, put, get, del, scan, incr, help";

/// Parses one line. `Ok(None)` for a blank line; the error message names the problem but not
/// the line number (the caller adds it).
pub fn parse_line(line: &str) -> Result<Option<Command>, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(None);
    }
    let (name, rest) = match line.find(char::is_whitespace) {
        Some(split) => (
            line.get(..split).unwrap_or(line),
            line.get(split..).unwrap_or("").trim_start(),
        ),
        None => (line, ""),
    };
    let command = match name {
        "p" => {
            let [key, value] = parse_ints::<2>(name, rest)?;
            Command::Put { key, value }
        }
        "g" => {
            let [key] = parse_ints::<1>(name, rest)?;
            Command::Get { key }
        }
        "r" => {
            let [lower, upper] = parse_ints::<2>(name, rest)?;
            Command::Range { lower, upper }
        }
        "d" => {
            let [key] = parse_ints::<1>(name, rest)?;
            Command::Delete { key }
        }
        "l" => Command::Load {
            path: parse_path(rest)?,
        },
        "s" => match rest.split_whitespace().collect::<Vec<_>>().as_slice() {
            [] => Command::Stats(None),
            [limit] => Command::Stats(Some(limit.parse().map_err(|_| {
                format!("expected a pair limit (a count) after 's', got \"{rest}\"")
            })?)),
            _ => {
                return Err(format!(
                    "expected at most a pair limit after 's', got \"{rest}\""
                ))
            }
        },
        "help" => {
            if !rest.is_empty() {
                return Err(format!("expected nothing after '{name}', got \"{rest}\""));
            }
            Command::Help
        }
        "put" | "get" | "del" | "scan" | "incr" => parse_text_command(name, rest)?,
        other => {
            return Err(format!(
                "unknown command \"{other}\" (expected one of {COMMANDS})"
            ))
        }
    };
    Ok(Some(command))
}

fn parse_text_command(name: &str, rest: &str) -> Result<Command, String> {
    let tokens = text::split_tokens(rest)?;
    let count = tokens.len();
    let wrong = |expected: &str| format!("expected {expected} after '{name}', got {count}");
    let mut tokens = tokens.into_iter();
    let mut next = || tokens.next().unwrap_or_default();
    Ok(match (name, count) {
        ("put", 2) => Command::TextPut {
            key: next(),
            value: next(),
        },
        ("put", _) => return Err(wrong("a key and a value")),
        ("get", 1) => Command::TextGet { key: next() },
        ("del", 1) => Command::TextDelete { key: next() },
        ("get" | "del", _) => return Err(wrong("one key")),
        ("scan", 0..=3) => {
            let from = next();
            let to = (count >= 2).then(&mut next);
            let limit = match (count == 3).then(&mut next) {
                None => None,
                Some(word) => Some(parse_number(name, &word)?),
            };
            Command::Scan { from, to, limit }
        }
        ("scan", _) => return Err(wrong("at most FROM, TO and LIMIT")),
        ("incr", 1 | 2) => {
            let key = next();
            let by = if count == 2 {
                parse_number(name, &next())?
            } else {
                1
            };
            Command::Increment { key, by }
        }
        _ => return Err(wrong("a key and an optional integer")),
    })
}

fn parse_number<T: std::str::FromStr>(name: &str, word: &[u8]) -> Result<T, String> {
    std::str::from_utf8(word)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| {
            format!(
                "expected an integer after the keys of '{name}', got \"{}\"",
                text::render(word)
            )
        })
}

fn parse_ints<const N: usize>(command: &str, rest: &str) -> Result<[i64; N], String> {
    let expected = if N == 1 {
        format!("expected 1 integer after '{command}'")
    } else {
        format!("expected {N} integers after '{command}'")
    };
    let words: Vec<&str> = rest.split_whitespace().collect();
    if words.len() != N {
        return Err(match words.len() {
            0 => format!("{expected}, got nothing"),
            1 => format!("{expected}, got 1 argument: \"{rest}\""),
            count => format!("{expected}, got {count} arguments: \"{rest}\""),
        });
    }
    let mut numbers = [0i64; N];
    for (slot, word) in numbers.iter_mut().zip(&words) {
        *slot = word.parse::<i64>().map_err(|error| match error.kind() {
            IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => format!(
                "{expected}, got \"{rest}\": {word} is outside the 64-bit range \
                 [-9223372036854775808, 9223372036854775807]"
            ),
            _ => format!("{expected}, got \"{rest}\": \"{word}\" is not an integer"),
        })?;
    }
    Ok(numbers)
}

fn parse_path(rest: &str) -> Result<String, String> {
    if rest.is_empty() {
        return Err("expected a file path after 'l', got nothing".to_string());
    }
    let path = match rest.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            let inner = rest.get(1..).unwrap_or("");
            match inner.find(quote) {
                None => return Err(format!("unterminated quoted path after 'l': {rest}")),
                Some(end) => {
                    let trailing = inner.get(end + 1..).unwrap_or("").trim();
                    if !trailing.is_empty() {
                        return Err(format!(
                            "expected one path after 'l', got \"{trailing}\" after the closing quote"
                        ));
                    }
                    inner.get(..end).unwrap_or("")
                }
            }
        }
        _ => {
            if rest.split_whitespace().count() > 1 {
                return Err(format!(
                    "expected one path after 'l', got \"{rest}\" (quote paths that contain spaces)"
                ));
            }
            if rest.contains(['"', '\'']) {
                return Err(format!("stray quote in path after 'l': {rest}"));
            }
            rest
        }
    };
    if path.is_empty() {
        return Err("empty path after 'l'".to_string());
    }
    Ok(path.to_string())
}

#[cfg(test)]
mod tests;
