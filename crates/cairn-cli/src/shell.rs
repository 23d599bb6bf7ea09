//! Runs the shell language ([`crate::cs265`]) against a [`Store`]: batch mode over any
//! reader, and one line at a time for the interactive shell.
//!
//! The executor ([`Shell`]) is generic over [`Store`] so it runs against a `BTreeMap` in unit
//! tests and against the real database in the binary. An error in one line (bad syntax, a file
//! that cannot be loaded, a store error) is reported as `error: line N: …` and the shell goes on;
//! only a failure to read the input or write the output stops it.

use crate::cs265::{decode_i64_slice, encode_i64, parse_line, Command, HELP, LOAD_PAIR_BYTES};
use crate::progress::LoadProgress;
use crate::text::render;
use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Calls back once per pair of a scan; returns false to stop.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool, String> + 'a;

/// What the executor needs from a key-value store of bytes. Errors are messages for the user.
pub trait Store {
    /// Inserts or overwrites `key`.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Reads `key`.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Deletes `key`; absent keys are not an error.
    fn delete(&mut self, key: &[u8]) -> Result<(), String>;
    /// Visits every pair with `lower <= key < upper` (`None`: no upper bound) in key order
    /// until `visit` returns false.
    fn scan(&mut self, lower: &[u8], upper: Option<&[u8]>, visit: &mut Visit)
        -> Result<(), String>;
    /// Adds `by` to the decimal counter at `key` (absent is 0); returns the new value.
    fn increment(&mut self, key: &[u8], by: i64) -> Result<i64, String>;
    /// The CS265 `s` statistics ([`crate::levels`]), at most `limit` pairs per level in the
    /// dumps.
    fn stats(&mut self, limit: Option<usize>) -> Result<String, String>;
}

impl Store for BTreeMap<Vec<u8>, Vec<u8>> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Ok(BTreeMap::get(self, key).cloned())
    }

    fn delete(&mut self, key: &[u8]) -> Result<(), String> {
        self.remove(key);
        Ok(())
    }

    fn scan(
        &mut self,
        lower: &[u8],
        upper: Option<&[u8]>,
        visit: &mut Visit,
    ) -> Result<(), String> {
        for (key, value) in self.range(lower.to_vec()..) {
            if upper.is_some_and(|upper| key.as_slice() >= upper) || !visit(key, value)? {
                break;
            }
        }
        Ok(())
    }

    fn increment(&mut self, key: &[u8], by: i64) -> Result<i64, String> {
        let new = next_counter(BTreeMap::get(self, key).map(Vec::as_slice), by)?;
        self.insert(key.to_vec(), new.to_string().into_bytes());
        Ok(new)
    }

    /// The map is one level, `L1`.
    fn stats(&mut self, limit: Option<usize>) -> Result<String, String> {
        let pairs = self
            .iter()
            .take(limit.unwrap_or(usize::MAX))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let level = crate::levels::LevelDump {
            level: 1,
            count: self.len(),
            pairs,
        };
        Ok(crate::levels::format_stats(self.len(), &[level]))
    }
}

/// The value `incr` stores: `current` (decimal ASCII, absent is 0) plus `by`, with the
/// messages of `Db::increment`, whose parse and checked add this repeats for the stores that
/// cannot call it.
pub fn next_counter(current: Option<&[u8]>, by: i64) -> Result<i64, String> {
    let current = match current {
        None => 0,
        Some(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
            .ok_or("value is not a decimal 64-bit integer")?,
    };
    current
        .checked_add(by)
        .ok_or_else(|| "increment overflows a 64-bit integer".to_string())
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

impl From<String> for CommandError {
    fn from(message: String) -> Self {
        CommandError::Failed(message)
    }
}

/// Why a run stopped before the end of its input.
#[derive(Debug)]
pub enum RunError {
    /// Reading the input failed.
    Input(io::Error),
    /// Writing the output or a line's error failed while line `line` ran: that line ran, the
    /// ones after it did not.
    Output {
        /// The line that was running.
        line: u64,
        /// What the write returned.
        error: io::Error,
    },
    /// Writing the output failed after every line had run (the final flush).
    Flush(io::Error),
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

/// Where the workload comes from, for resolving and explaining relative `l` paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Standard input (a pipe or a terminal).
    Stdin,
    /// `--file PATH`: relative loads are tried against PATH's directory first.
    File(PathBuf),
}

/// Executes commands against a [`Store`], writing results to `out`.
#[derive(Debug)]
pub struct Shell<S, W> {
    store: S,
    out: W,
    /// The workload file's directory (`None` for stdin, or a file in the current directory).
    base_dir: Option<PathBuf>,
    source: Source,
    /// Whether a load longer than a second draws a progress bar (stderr is a terminal).
    progress: bool,
}

impl<S: Store, W: Write> Shell<S, W> {
    /// A shell over `store` reading from `source`.
    pub fn new(store: S, out: W, source: Source) -> Self {
        let base_dir = match &source {
            Source::File(path) => path
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
                .map(Path::to_path_buf),
            Source::Stdin => None,
        };
        Shell {
            store,
            out,
            base_dir,
            source,
            progress: false,
        }
    }

    /// Draws a progress bar on stderr for loads that run longer than a second.
    pub fn with_progress(mut self, progress: bool) -> Self {
        self.progress = progress;
        self
    }

    /// Gives back the store and the output.
    #[cfg(test)]
    pub fn into_parts(self) -> (S, W) {
        (self.store, self.out)
    }

    /// The output, to flush after an interactive line.
    pub fn out(&mut self) -> &mut W {
        &mut self.out
    }

    /// Runs one command. `warnings` receives non-fatal remarks (a load file's trailing bytes).
    pub fn execute(
        &mut self,
        command: &Command,
        warnings: &mut Vec<String>,
    ) -> Result<(), CommandError> {
        match command {
            Command::Put { key, value } => {
                self.store.put(&encode_i64(*key), &encode_i64(*value))?;
            }
            Command::Get { key } => match self.store.get(&encode_i64(*key))? {
                Some(bytes) => writeln!(self.out, "{}", decode_value(*key, &bytes)?)?,
                None => writeln!(self.out)?,
            },
            Command::Range { lower, upper } => self.range(*lower, *upper)?,
            Command::Delete { key } => self.store.delete(&encode_i64(*key))?,
            Command::Load { path } => self.load(path, warnings)?,
            Command::Stats(limit) => {
                let text = self.store.stats(*limit)?;
                writeln!(self.out, "{}", text.trim_end())?;
            }
            Command::TextPut { key, value } => self.store.put(key, value)?,
            Command::TextGet { key } => match self.store.get(key)? {
                Some(value) => writeln!(self.out, "{}", render(&value))?,
                None => writeln!(self.out)?,
            },
            Command::TextDelete { key } => self.store.delete(key)?,
            Command::Scan { from, to, limit } => self.scan(from, to.as_deref(), *limit)?,
            Command::Increment { key, by } => {
                let value = self.store.increment(key, *by)?;
                writeln!(self.out, "{value}")?;
            }
            Command::Help => writeln!(self.out, "{HELP}")?,
        }
        Ok(())
    }

    /// `r`: the pairs written as they stream by, not gathered into one line first.
    fn range(&mut self, lower: i64, upper: i64) -> Result<(), CommandError> {
        let mut scanned = Ok(());
        if lower < upper {
            let out = &mut self.out;
            let mut first = true;
            // As in `scan`: an output error stops the shell, so it is kept whole.
            let mut failed_write = None;
            let mut visit = |key: &[u8], value: &[u8]| -> Result<bool, String> {
                // A key or value of another width was not written by the integer commands
                // (e.g. by `put`), which cannot name it either, so the pair is skipped.
                let (Some(key), Some(value)) = (decode_i64_slice(key), decode_i64_slice(value))
                else {
                    return Ok(true);
                };
                let separator = if first { "" } else { " " };
                if let Err(error) = write!(out, "{separator}{key}:{value}") {
                    failed_write = Some(error);
                    return Ok(false);
                }
                first = false;
                Ok(true)
            };
            let (lower, upper) = (encode_i64(lower), encode_i64(upper));
            scanned = self.store.scan(&lower, Some(&upper), &mut visit);
            if let Some(error) = failed_write {
                return Err(CommandError::Output(error));
            }
        }
        // Ends the line even when the scan failed part way, so the next answer starts on a
        // line of its own.
        writeln!(self.out)?;
        Ok(scanned?)
    }

    fn scan(
        &mut self,
        from: &[u8],
        to: Option<&[u8]>,
        limit: Option<usize>,
    ) -> Result<(), CommandError> {
        let mut left = limit.unwrap_or(usize::MAX);
        let out = &mut self.out;
        // An output error stops the scan and the shell (`CommandError::Output`), not only
        // this line, so it is kept whole rather than turned into a message.
        let mut failed_write = None;
        let mut visit = |key: &[u8], value: &[u8]| -> Result<bool, String> {
            if left == 0 {
                return Ok(false);
            }
            left -= 1;
            if let Err(error) = writeln!(out, "{} {}", render(key), render(value)) {
                failed_write = Some(error);
                return Ok(false);
            }
            Ok(left > 0)
        };
        self.store.scan(from, to, &mut visit)?;
        if let Some(error) = failed_write {
            return Err(CommandError::Output(error));
        }
        // The empty line ends the listing: no entry prints as one (an empty key is `""`).
        writeln!(self.out)?;
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

    fn open_hint(&self, path: &str) -> &'static str {
        if !Path::new(path).is_relative() {
            return "";
        }
        match (&self.source, &self.base_dir) {
            (Source::Stdin, _) => {
                " (relative paths resolve against the current directory when the workload \
                 comes from stdin)"
            }
            (Source::File(_), None) => {
                " (relative paths resolve against the current directory, which holds the \
                 workload file)"
            }
            (Source::File(_), Some(_)) => {
                " (relative paths are tried against the workload file's directory, then \
                 the current directory)"
            }
        }
    }

    /// Applies every complete pair of the file in file order; trailing bytes that do not
    /// make a pair are reported in `warnings`, as the CS265 reference implementation loads
    /// the complete pairs of such a file.
    fn load(&mut self, path: &str, warnings: &mut Vec<String>) -> Result<(), CommandError> {
        let resolved = self.resolve(path);
        let shown = resolved.display();
        let file = File::open(&resolved).map_err(|error| {
            format!(
                "cannot open load file {shown}: {error}{}",
                self.open_hint(path)
            )
        })?;
        // The size only sizes the progress bar: a FIFO says 0 and still holds pairs, so the
        // pairs are read to the end of the stream.
        let expected = file
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|metadata| metadata.len() / LOAD_PAIR_BYTES as u64);
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut pair = [0u8; LOAD_PAIR_BYTES];
        let mut progress = LoadProgress::new(self.progress, expected);
        let mut done = 0u64;
        let trailing = loop {
            let partial = |what: String| {
                format!("load of {shown} stopped after {done} pairs were applied: {what}")
            };
            let filled = read_record(&mut reader, &mut pair).map_err(|e| partial(e.to_string()))?;
            if filled < LOAD_PAIR_BYTES {
                break filled;
            }
            let [k0, k1, k2, k3, v0, v1, v2, v3] = pair;
            let key = i64::from(i32::from_ne_bytes([k0, k1, k2, k3]));
            let value = i64::from(i32::from_ne_bytes([v0, v1, v2, v3]));
            self.store
                .put(&encode_i64(key), &encode_i64(value))
                .map_err(partial)?;
            done += 1;
            progress.tick(done);
        };
        progress.finish(done);
        if trailing != 0 {
            let length = done * LOAD_PAIR_BYTES as u64 + trailing as u64;
            warnings.push(format!(
                "load file {shown} is {length} bytes, not a multiple of {LOAD_PAIR_BYTES} \
                 (pairs of 32-bit integers): loaded {done} pairs and ignored the last \
                 {trailing} bytes"
            ));
        }
        Ok(())
    }

    /// Parses and runs one line, reporting a failure as `error: line N: …` (or a warning as
    /// `warning: line N: …`) on `errors`. Returns whether the line failed; `Err` only when
    /// writing the output failed.
    pub fn run_line(
        &mut self,
        line_number: u64,
        raw: &[u8],
        errors: &mut dyn Write,
    ) -> io::Result<Option<bool>> {
        let command = match std::str::from_utf8(raw) {
            Err(_) => Err("line is not valid UTF-8".to_string()),
            Ok(text) => parse_line(text),
        };
        let mut warnings = Vec::new();
        let result = match command {
            Ok(None) => return Ok(None),
            Ok(Some(command)) => match self.execute(&command, &mut warnings) {
                Ok(()) => Ok(()),
                Err(CommandError::Failed(message)) => Err(message),
                Err(CommandError::Output(error)) => return Err(error),
            },
            Err(message) => Err(message),
        };
        for warning in warnings {
            writeln!(errors, "warning: line {line_number}: {warning}")?;
        }
        match result {
            Ok(()) => Ok(Some(false)),
            Err(message) => {
                writeln!(errors, "error: line {line_number}: {message}")?;
                Ok(Some(true))
            }
        }
    }

    /// Reads `input` to the end, executing every line. Per-line errors go to `errors`; an
    /// error reading the input or writing the output stops the run and says where.
    pub fn run<R: BufRead>(
        &mut self,
        mut input: R,
        errors: &mut dyn Write,
    ) -> Result<RunSummary, RunError> {
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
            if input.read_until(b'\n', &mut raw).map_err(RunError::Input)? == 0 {
                break;
            }
            line_number += 1;
            let ran = self.run_line(line_number, &raw, errors);
            let ran = ran.map_err(|error| RunError::Output {
                line: line_number,
                error,
            })?;
            if let Some(failed) = ran {
                summary.commands += 1;
                summary.errors += u64::from(failed);
            }
        }
        self.out.flush().map_err(RunError::Flush)?;
        summary.elapsed = started.elapsed();
        Ok(summary)
    }
}

/// Fills `record` from `reader`; returns the bytes filled, fewer than its length only at the
/// end of the stream (a pipe may hand over a record in pieces).
fn read_record(reader: &mut impl Read, record: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = record.get_mut(filled..).filter(|rest| !rest.is_empty()) {
        match reader.read(rest) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

fn decode_value(key: i64, bytes: &[u8]) -> Result<i64, String> {
    decode_i64_slice(bytes).ok_or_else(|| {
        format!(
            "key {key} holds a {}-byte value, not an 8-byte shell integer",
            bytes.len()
        )
    })
}

#[cfg(test)]
mod tests;
