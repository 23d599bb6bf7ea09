//! The CS265 workload language: integer key encoding, a one-line parser and an executor.
//!
//! The language has one command per line; keys and values are signed 32-bit integers:
//!
//! | line          | meaning                                                                 |
//! | ------------- | ----------------------------------------------------------------------- |
//! | `p K V`       | put `K` → `V` (overwrites)                                              |
//! | `g K`         | print the value of `K`, or an empty line if absent                      |
//! | `r A B`       | print `key:value` for every `A <= key < B`, ascending, space separated  |
//! |               | on one line (an empty line if none, or if `A >= B`)                     |
//! | `d K`         | delete `K` (absent keys are fine)                                       |
//! | `l "path"`    | load a binary file of native-endian `i32` pairs `K V K V …` as puts      |
//! | `s [N]`       | print the statistics in the CS265 format (below), at most `N` pairs per |
//! |               | level in the dumps                                                      |
//!
//! `s` prints, as the CS265 workload specifies, `Logical Pairs: N` (live keys), then one line
//! of per-level counts of stored pairs (`LVL1: 3, LVL3: 9`, non-empty levels only), then per
//! non-empty level one line of its pairs as `key:value:Lk`. Levels count from 1 as in CS265:
//! `L1` is the write buffers in memory and `L(k+2)` is cairn's on-disk level `k` (so `L2` is
//! level 0). Stored pairs include overwritten versions not yet compacted away (the difference
//! between the counts and `Logical Pairs` is the space amplification), not deletions.
//!
//! Blank lines are ignored; tokens may be separated by any amount of whitespace.
//!
//! The executor ([`Shell`]) is generic over [`Store`] so it runs against a `BTreeMap` in unit
//! tests and against the real database in the binary. An error in one line (bad syntax, a file
//! that cannot be loaded, a store error) is reported as `error: line N: …` and the shell goes on;
//! only a failure to read the input or write the output stops it.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::num::IntErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bytes of one encoded key or value.
pub const ENCODED_BYTES: usize = 4;

/// Bytes of one `K V` pair in a load file.
pub const LOAD_PAIR_BYTES: usize = 8;

/// Encodes an integer so that byte-wise (memcmp) order equals numeric order: the sign bit is
/// flipped and the result written big-endian. Values use the same encoding.
pub fn encode_i32(value: i32) -> [u8; ENCODED_BYTES] {
    ((value as u32) ^ 0x8000_0000).to_be_bytes()
}

/// Inverse of [`encode_i32`].
pub fn decode_i32(bytes: [u8; ENCODED_BYTES]) -> i32 {
    (u32::from_be_bytes(bytes) ^ 0x8000_0000) as i32
}

/// Decodes a slice produced by [`encode_i32`]; `None` if it is not exactly 4 bytes long.
pub fn decode_i32_slice(bytes: &[u8]) -> Option<i32> {
    <[u8; ENCODED_BYTES]>::try_from(bytes).ok().map(decode_i32)
}

/// One parsed line of the language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `p K V`
    Put {
        /// The key.
        key: i32,
        /// The value.
        value: i32,
    },
    /// `g K`
    Get {
        /// The key.
        key: i32,
    },
    /// `r A B`: `A <= key < B`.
    Range {
        /// Inclusive lower bound.
        lower: i32,
        /// Exclusive upper bound.
        upper: i32,
    },
    /// `d K`
    Delete {
        /// The key.
        key: i32,
    },
    /// `l "path"`
    Load {
        /// The path as written (quotes removed); relative paths are resolved by the shell.
        path: String,
    },
    /// `s [N]`: at most `N` pairs per level in the dumps (None: all).
    Stats(Option<usize>),
}

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
        other => {
            return Err(format!(
                "unknown command \"{other}\" (expected one of p, g, r, d, l, s)"
            ))
        }
    };
    Ok(Some(command))
}

fn parse_ints<const N: usize>(command: &str, rest: &str) -> Result<[i32; N], String> {
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
    let mut numbers = [0i32; N];
    for (slot, word) in numbers.iter_mut().zip(&words) {
        *slot = word.parse::<i32>().map_err(|error| match error.kind() {
            IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => format!(
                "{expected}, got \"{rest}\": {word} is outside the 32-bit range \
                 [-2147483648, 2147483647]"
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

/// What the executor needs from a key-value store. Errors are messages for the user.
pub trait Store {
    /// Inserts or overwrites `key`.
    fn put(&mut self, key: i32, value: i32) -> Result<(), String>;
    /// Reads `key`.
    fn get(&mut self, key: i32) -> Result<Option<i32>, String>;
    /// Deletes `key`; absent keys are not an error.
    fn delete(&mut self, key: i32) -> Result<(), String>;
    /// Appends every pair with `lower <= key < upper` to `out` in ascending key order.
    /// Called only with `lower < upper`.
    fn range(&mut self, lower: i32, upper: i32, out: &mut Vec<(i32, i32)>) -> Result<(), String>;
    /// Statistics in the CS265 `s` format (see [`format_stats`]), at most `limit` pairs per
    /// level in the dumps.
    fn stats(&mut self, limit: Option<usize>) -> Result<String, String>;
}

/// One level of the CS265 `s` output: its number (from 1), how many pairs it stores, and the
/// pairs to dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelDump {
    /// `k` of `LVLk` / `:Lk`.
    pub level: usize,
    /// Pairs stored in the level (all of them, not only the dumped ones).
    pub count: usize,
    /// Pairs to print, in the level's order.
    pub pairs: Vec<(i32, i32)>,
}

/// The CS265 `s` text: `Logical Pairs: N`, the counts of non-empty levels, one dump line per
/// non-empty level.
pub fn format_stats(logical_pairs: usize, levels: &[LevelDump]) -> String {
    let levels: Vec<&LevelDump> = levels.iter().filter(|level| level.count > 0).collect();
    let mut text = format!("Logical Pairs: {logical_pairs}\n");
    let counts: Vec<String> = levels
        .iter()
        .map(|level| format!("LVL{}: {}", level.level, level.count))
        .collect();
    text.push_str(&counts.join(", "));
    for level in levels {
        let pairs: Vec<String> = level
            .pairs
            .iter()
            .map(|(key, value)| format!("{key}:{value}:L{}", level.level))
            .collect();
        text.push('\n');
        text.push_str(&pairs.join(" "));
    }
    text
}

impl Store for BTreeMap<i32, i32> {
    fn put(&mut self, key: i32, value: i32) -> Result<(), String> {
        self.insert(key, value);
        Ok(())
    }

    fn get(&mut self, key: i32) -> Result<Option<i32>, String> {
        Ok(BTreeMap::get(self, &key).copied())
    }

    fn delete(&mut self, key: i32) -> Result<(), String> {
        self.remove(&key);
        Ok(())
    }

    fn range(&mut self, lower: i32, upper: i32, out: &mut Vec<(i32, i32)>) -> Result<(), String> {
        out.extend(BTreeMap::range(self, lower..upper).map(|(k, v)| (*k, *v)));
        Ok(())
    }

    /// The map is one level, `L1`.
    fn stats(&mut self, limit: Option<usize>) -> Result<String, String> {
        let pairs = self
            .iter()
            .take(limit.unwrap_or(usize::MAX))
            .map(|(key, value)| (*key, *value))
            .collect();
        let level = LevelDump {
            level: 1,
            count: self.len(),
            pairs,
        };
        Ok(format_stats(self.len(), &[level]))
    }
}

/// Why one command failed.
#[derive(Debug)]
pub enum CommandError {
    /// The command could not be carried out; the shell reports it and continues.
    Failed(String),
    /// Writing the output failed; the shell stops.
    Output(io::Error),
}

impl From<io::Error> for CommandError {
    fn from(error: io::Error) -> Self {
        CommandError::Output(error)
    }
}

/// Counters of one shell run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunSummary {
    /// Non-blank lines processed (including failed ones).
    pub commands: u64,
    /// Lines that failed.
    pub errors: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl fmt::Display for RunSummary {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.elapsed.as_secs_f64();
        let rate = if seconds > 0.0 {
            self.commands as f64 / seconds
        } else {
            0.0
        };
        write!(
            formatter,
            "{} commands ({} failed) in {:.3} s, {:.0} commands/s",
            self.commands, self.errors, seconds, rate
        )
    }
}

/// Executes commands against a [`Store`], writing results to `out`.
#[derive(Debug)]
pub struct Shell<S, W> {
    store: S,
    out: W,
    base_dir: Option<PathBuf>,
    pairs: Vec<(i32, i32)>,
}

impl<S: Store, W: Write> Shell<S, W> {
    /// A shell over `store`. Relative `l` paths are tried against `base_dir` when given (the
    /// workload file's directory), then against the process's working directory.
    pub fn new(store: S, out: W, base_dir: Option<PathBuf>) -> Self {
        Shell {
            store,
            out,
            base_dir,
            pairs: Vec::new(),
        }
    }

    /// Gives back the store and the output.
    #[cfg(test)]
    pub fn into_parts(self) -> (S, W) {
        (self.store, self.out)
    }

    /// Runs one command.
    pub fn execute(&mut self, command: &Command) -> Result<(), CommandError> {
        match command {
            Command::Put { key, value } => self.store.put(*key, *value).map_err(failed)?,
            Command::Get { key } => {
                match self.store.get(*key).map_err(failed)? {
                    Some(value) => writeln!(self.out, "{value}")?,
                    None => writeln!(self.out)?,
                };
            }
            Command::Range { lower, upper } => {
                self.pairs.clear();
                if lower < upper {
                    self.store
                        .range(*lower, *upper, &mut self.pairs)
                        .map_err(failed)?;
                }
                let mut first = true;
                for (key, value) in &self.pairs {
                    if !first {
                        self.out.write_all(b" ")?;
                    }
                    first = false;
                    write!(self.out, "{key}:{value}")?;
                }
                writeln!(self.out)?;
                if self.pairs.capacity() > 1 << 20 {
                    self.pairs = Vec::new();
                }
            }
            Command::Delete { key } => self.store.delete(*key).map_err(failed)?,
            Command::Load { path } => self.load(path)?,
            Command::Stats(limit) => {
                let text = self.store.stats(*limit).map_err(failed)?;
                writeln!(self.out, "{}", text.trim_end())?;
            }
        }
        Ok(())
    }

    /// Resolves an `l` path: absolute paths as is; relative ones against the base directory
    /// if the file exists there, otherwise against the working directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        match &self.base_dir {
            Some(base) if path.is_relative() => {
                let in_base = base.join(path);
                if in_base.exists() || !path.exists() {
                    in_base
                } else {
                    path.to_path_buf()
                }
            }
            _ => path.to_path_buf(),
        }
    }

    /// Validates the whole file's length first, then applies its pairs in file order.
    fn load(&mut self, path: &str) -> Result<(), CommandError> {
        let resolved = self.resolve(path);
        let shown = resolved.display();
        let file = File::open(&resolved).map_err(|error| {
            let hint = match (&self.base_dir, Path::new(path).is_relative()) {
                (None, true) => {
                    " (relative paths resolve against the current directory when the workload \
                     comes from stdin)"
                }
                (Some(_), true) => {
                    " (relative paths are tried against the workload file's directory, then \
                     the current directory)"
                }
                _ => "",
            };
            failed(format!("cannot open load file {shown}: {error}{hint}"))
        })?;
        let length = file
            .metadata()
            .map_err(|error| failed(format!("cannot stat load file {shown}: {error}")))?
            .len();
        if length % LOAD_PAIR_BYTES as u64 != 0 {
            return Err(failed(format!(
                "load file {shown} is {length} bytes, not a multiple of {LOAD_PAIR_BYTES} \
                 (pairs of 32-bit integers); nothing was loaded"
            )));
        }
        let total = length / LOAD_PAIR_BYTES as u64;
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut pair = [0u8; LOAD_PAIR_BYTES];
        for done in 0..total {
            let partial = |what: String| {
                failed(format!(
                    "load of {shown} stopped after {done} of {total} pairs were applied: {what}"
                ))
            };
            reader
                .read_exact(&mut pair)
                .map_err(|error| partial(error.to_string()))?;
            let [k0, k1, k2, k3, v0, v1, v2, v3] = pair;
            let key = i32::from_ne_bytes([k0, k1, k2, k3]);
            let value = i32::from_ne_bytes([v0, v1, v2, v3]);
            self.store.put(key, value).map_err(partial)?;
        }
        Ok(())
    }

    /// Reads `input` to the end, executing every line. Per-line errors go to `errors` as
    /// `error: line N: message`; an error reading the input or writing the output stops the run.
    pub fn run<R: BufRead>(
        &mut self,
        mut input: R,
        errors: &mut dyn Write,
    ) -> io::Result<RunSummary> {
        let started = Instant::now();
        let mut summary = RunSummary {
            commands: 0,
            errors: 0,
            elapsed: Duration::ZERO,
        };
        let mut raw = Vec::new();
        let mut line_number = 0u64;
        loop {
            raw.clear();
            if input.read_until(b'\n', &mut raw)? == 0 {
                break;
            }
            line_number += 1;
            let outcome = match std::str::from_utf8(&raw) {
                Err(_) => Err("line is not valid UTF-8".to_string()),
                Ok(text) => parse_line(text),
            };
            let command = match outcome {
                Ok(None) => continue,
                Ok(Some(command)) => Ok(command),
                Err(message) => Err(message),
            };
            summary.commands += 1;
            let result = match command {
                Ok(command) => match self.execute(&command) {
                    Ok(()) => Ok(()),
                    Err(CommandError::Failed(message)) => Err(message),
                    Err(CommandError::Output(error)) => return Err(error),
                },
                Err(message) => Err(message),
            };
            if let Err(message) = result {
                summary.errors += 1;
                writeln!(errors, "error: line {line_number}: {message}")?;
            }
        }
        self.out.flush()?;
        summary.elapsed = started.elapsed();
        Ok(summary)
    }
}

fn failed(message: String) -> CommandError {
    CommandError::Failed(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn parse(line: &str) -> Command {
        parse_line(line).unwrap().unwrap()
    }

    fn error(line: &str) -> String {
        parse_line(line).unwrap_err()
    }

    #[test]
    fn encoding_round_trips_extremes() {
        for value in [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX] {
            assert_eq!(decode_i32(encode_i32(value)), value);
            assert_eq!(decode_i32_slice(&encode_i32(value)), Some(value));
        }
        assert_eq!(encode_i32(i32::MIN), [0, 0, 0, 0]);
        assert_eq!(encode_i32(-1), [0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(encode_i32(0), [0x80, 0, 0, 0]);
        assert_eq!(encode_i32(i32::MAX), [0xff, 0xff, 0xff, 0xff]);
        assert_eq!(decode_i32_slice(&[1, 2, 3]), None);
        assert_eq!(decode_i32_slice(&[1, 2, 3, 4, 5]), None);
    }

    #[test]
    fn encoding_preserves_order() {
        let mut rng = SmallRng::seed_from_u64(265);
        let specials = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
        for round in 0..100_000 {
            let (a, b) = if round < specials.len() * specials.len() {
                (
                    specials[round / specials.len()],
                    specials[round % specials.len()],
                )
            } else {
                (rng.gen::<i32>(), rng.gen::<i32>())
            };
            assert_eq!(
                encode_i32(a).cmp(&encode_i32(b)),
                a.cmp(&b),
                "order of {a} and {b}"
            );
            assert_eq!(decode_i32(encode_i32(a)), a);
        }
    }

    #[test]
    fn parses_every_command() {
        assert_eq!(parse("p 1 2"), Command::Put { key: 1, value: 2 });
        assert_eq!(
            parse("p -2147483648 2147483647"),
            Command::Put {
                key: i32::MIN,
                value: i32::MAX
            }
        );
        assert_eq!(parse("g -7"), Command::Get { key: -7 });
        assert_eq!(parse("r 3 9"), Command::Range { lower: 3, upper: 9 });
        assert_eq!(parse("d +4"), Command::Delete { key: 4 });
        assert_eq!(parse("s"), Command::Stats(None));
        assert_eq!(parse("s 3"), Command::Stats(Some(3)));
        assert!(parse_line("s x").is_err());
        assert!(parse_line("s 1 2").is_err());
        assert_eq!(
            parse("l \"data/one.bin\""),
            Command::Load {
                path: "data/one.bin".into()
            }
        );
        assert_eq!(
            parse("l data/one.bin"),
            Command::Load {
                path: "data/one.bin".into()
            }
        );
    }

    #[test]
    fn tolerates_whitespace_and_skips_blank_lines() {
        assert_eq!(
            parse("  p\t1    2  \r\n"),
            Command::Put { key: 1, value: 2 }
        );
        assert_eq!(parse("\tg 5\n"), Command::Get { key: 5 });
        assert_eq!(parse("s \r\n"), Command::Stats(None));
        assert_eq!(parse_line("").unwrap(), None);
        assert_eq!(parse_line("   \t \r\n").unwrap(), None);
    }

    #[test]
    fn quoted_paths() {
        assert_eq!(
            parse("l   \"dir with spaces/f.bin\"  "),
            Command::Load {
                path: "dir with spaces/f.bin".into()
            }
        );
        assert_eq!(
            parse("l 'single.bin'"),
            Command::Load {
                path: "single.bin".into()
            }
        );
        assert_eq!(
            parse("l \"/abs/path.bin\""),
            Command::Load {
                path: "/abs/path.bin".into()
            }
        );
        assert!(error("l \"unterminated.bin").contains("unterminated"));
        assert!(error("l \"a.bin\" extra").contains("after the closing quote"));
        assert!(error("l a.bin b.bin").contains("expected one path"));
        assert!(error("l a\"b").contains("stray quote"));
        assert!(error("l \"\"").contains("empty path"));
        assert!(error("l").contains("expected a file path after 'l', got nothing"));
    }

    #[test]
    fn rejects_bad_integers() {
        assert_eq!(
            error("p 1 x"),
            "expected 2 integers after 'p', got \"1 x\": \"x\" is not an integer"
        );
        assert!(error("g 1.5").contains("\"1.5\" is not an integer"));
        assert!(error("p 2147483648 1").contains("outside the 32-bit range"));
        assert!(error("d -2147483649").contains("outside the 32-bit range"));
        assert!(error("r 0x10 20").contains("not an integer"));
    }

    #[test]
    fn rejects_missing_and_extra_arguments() {
        assert_eq!(
            error("p 12"),
            "expected 2 integers after 'p', got 1 argument: \"12\""
        );
        assert_eq!(error("p"), "expected 2 integers after 'p', got nothing");
        assert_eq!(
            error("p 1 2 3"),
            "expected 2 integers after 'p', got 3 arguments: \"1 2 3\""
        );
        assert_eq!(error("g"), "expected 1 integer after 'g', got nothing");
        assert!(error("g 1 2").starts_with("expected 1 integer after 'g', got 2 arguments"));
        assert!(error("r 1").starts_with("expected 2 integers after 'r'"));
        assert!(error("d").starts_with("expected 1 integer after 'd'"));
        assert_eq!(
            error("s 1 2"),
            "expected at most a pair limit after 's', got \"1 2\""
        );
    }

    #[test]
    fn rejects_unknown_commands() {
        assert_eq!(
            error("x 1 2"),
            "unknown command \"x\" (expected one of p, g, r, d, l, s)"
        );
        assert!(error("put 1 2").contains("unknown command \"put\""));
        assert!(error("P 1 2").contains("unknown command"));
        assert!(error("p1 2").contains("unknown command \"p1\""));
    }

    fn run(input: &str) -> (String, String, RunSummary) {
        let mut shell = Shell::new(BTreeMap::new(), Vec::new(), None);
        let mut errors = Vec::new();
        let summary = shell.run(input.as_bytes(), &mut errors).unwrap();
        let (_, out) = shell.into_parts();
        (
            String::from_utf8(out).unwrap(),
            String::from_utf8(errors).unwrap(),
            summary,
        )
    }

    #[test]
    fn executes_against_a_btreemap() {
        let input = "p 5 50\np -1 -10\np 5 55\ng 5\ng 6\n\nr -5 10\nr 10 -5\nr 5 5\nd 5\nd 42\n\
                     g 5\nr -2147483648 2147483647\np 1 -2147483648\ng 1\ns\n";
        let (out, errors, summary) = run(input);
        assert_eq!(
            out,
            "55\n\n-1:-10 5:55\n\n\n\n-1:-10\n-2147483648\n\
             Logical Pairs: 2\nLVL1: 2\n-1:-10:L1 1:-2147483648:L1\n"
        );
        assert_eq!(errors, "");
        assert_eq!(summary.commands, 15);
        assert_eq!(summary.errors, 0);
    }

    #[test]
    fn reports_errors_and_continues() {
        let (out, errors, summary) = run("p 1 2\np 1\nbogus\ng 1\nl \"/nonexistent/x.bin\"\ng 2\n");
        assert_eq!(out, "2\n\n");
        let lines: Vec<&str> = errors.lines().collect();
        assert_eq!(lines.len(), 3, "{errors}");
        assert!(lines[0].starts_with("error: line 2: expected 2 integers after 'p'"));
        assert!(lines[1].starts_with("error: line 3: unknown command"));
        assert!(lines[2].starts_with("error: line 5: cannot open load file /nonexistent/x.bin"));
        assert_eq!(summary.commands, 6);
        assert_eq!(summary.errors, 3);
    }

    #[test]
    fn loads_validate_before_applying() {
        let dir = std::env::temp_dir().join(format!("cairn-cs265-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut good = Vec::new();
        for (key, value) in [(3, 30), (i32::MIN, i32::MAX), (3, 33), (i32::MAX, i32::MIN)] {
            good.extend_from_slice(&i32::to_ne_bytes(key));
            good.extend_from_slice(&i32::to_ne_bytes(value));
        }
        std::fs::write(dir.join("good.bin"), &good).unwrap();
        std::fs::write(dir.join("bad.bin"), &good[..12]).unwrap();
        let mut shell = Shell::new(BTreeMap::new(), Vec::new(), Some(dir.clone()));
        let mut errors = Vec::new();
        shell
            .run(
                "l \"bad.bin\"\nr -2147483648 2147483647\nl good.bin\nr -2147483648 2147483647\n"
                    .as_bytes(),
                &mut errors,
            )
            .unwrap();
        let (map, out) = shell.into_parts();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\n-2147483648:2147483647 3:33\n"
        );
        assert_eq!(map.get(&i32::MAX), Some(&i32::MIN));
        let errors = String::from_utf8(errors).unwrap();
        assert!(
            errors.starts_with("error: line 1: load file ")
                && errors.contains("is 12 bytes, not a multiple of 8")
                && errors.contains("nothing was loaded"),
            "{errors}"
        );
    }

    #[test]
    fn resolves_relative_paths_against_the_base_directory() {
        let shell = Shell::new(BTreeMap::new(), Vec::new(), Some(PathBuf::from("/w")));
        assert_eq!(shell.resolve("a.bin"), PathBuf::from("/w/a.bin"));
        assert_eq!(shell.resolve("/x/a.bin"), PathBuf::from("/x/a.bin"));
        // Falls back to the working directory when only that has the file.
        assert_eq!(shell.resolve("Cargo.toml"), PathBuf::from("Cargo.toml"));
        let here = Shell::new(BTreeMap::new(), Vec::new(), Some(PathBuf::from("src")));
        assert_eq!(here.resolve("main.rs"), PathBuf::from("src/main.rs"));
        let shell = Shell::new(BTreeMap::new(), Vec::new(), None);
        assert_eq!(shell.resolve("a.bin"), PathBuf::from("a.bin"));
    }

    #[test]
    fn rejects_non_utf8_lines() {
        let mut shell = Shell::new(BTreeMap::new(), Vec::new(), None);
        let mut errors = Vec::new();
        let summary = shell
            .run(&b"p 1 2\n\xff\xfe\ng 1\n"[..], &mut errors)
            .unwrap();
        assert_eq!(summary.errors, 1);
        assert_eq!(
            String::from_utf8(errors).unwrap(),
            "error: line 2: line is not valid UTF-8\n"
        );
    }
}
