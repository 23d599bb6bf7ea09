//! The `cairn` command-line tool: one-off commands on a database directory and the CS265
//! workload shell.
//!
//! Exit status: 0 on success; 1 when `get` finds no value or when some shell lines failed;
//! 2 on any other error (bad arguments, a database that cannot be opened, I/O failures).
//! Errors are printed to stderr as `error: <message>`.

mod cs265;
mod db_store;

use cairn::{Db, Options, WriteOptions};
use clap::{Args, Parser, Subcommand};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const SHELL_HELP: &str = "\
Reads the CS265 workload language, one command per line, from stdin (or --file) and runs it
against the database. Keys and values are signed 32-bit integers.

  p K V       put K -> V
  g K         print the value of K, or an empty line if K is absent
  r A B       print every key:value with A <= key < B on one line, space separated,
              in key order (an empty line if there are none, or if A >= B)
  d K         delete K
  l \"PATH\"    load a binary file of native-endian int32 pairs K V K V ... as puts, in file
              order. The quotes are optional for paths without spaces. The whole file's length
              is checked (a multiple of 8 bytes) before anything is applied. A relative PATH is
              resolved against the current directory when the workload comes from stdin; with
              --file it is tried against the workload file's directory first, then against the
              current directory.
  s           print the database's statistics

Blank lines are ignored. A bad line is reported on stderr as `error: line N: ...` and the shell
continues. At the end a summary (commands, seconds, commands/s) is printed on stderr.
Exit status: 0 if every line succeeded, 1 if some lines failed, 2 on a fatal error.

Examples (from the repository root; the demo's load paths are relative to it):
  cairn shell --db /tmp/cairn-demo < crates/cairn-cli/workloads/demo.txt
  cairn shell --db /tmp/cairn-demo --memtable-mb 1 --file crates/cairn-cli/workloads/demo.txt";

/// The cairn key-value store.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "cairn: a log-structured key-value store",
    long_about = "cairn: a log-structured key-value store.\n\n\
                  One-off commands open the database in --db, do one thing and close it.\n\
                  Keys and values are UTF-8 text unless --hex or --i32 is given.\n\
                  Errors are printed as `error: <message>` with exit status 2."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a CS265 workload (p/g/r/d/l/s lines) from stdin or a file
    #[command(long_about = SHELL_HELP)]
    Shell(ShellArgs),
    /// Store VALUE under KEY
    Put {
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        format: Format,
        /// The key
        key: String,
        /// The value
        value: String,
    },
    /// Print the value of KEY (exit status 1 if it is absent)
    Get {
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        format: Format,
        /// The key
        key: String,
    },
    /// Delete KEY (deleting an absent key is not an error)
    Delete {
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        format: Format,
        /// The key
        key: String,
    },
    /// Print `key<TAB>value` lines in key order, FROM (inclusive) to TO (exclusive)
    Scan {
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        format: Format,
        /// Smallest key to print (inclusive); the start of the key space if omitted
        #[arg(long, value_name = "KEY")]
        from: Option<String>,
        /// Key to stop before (exclusive); the end of the key space if omitted
        #[arg(long, value_name = "KEY")]
        to: Option<String>,
        /// Print in descending key order
        #[arg(long)]
        reverse: bool,
        /// Print at most N entries
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Print the database's statistics
    Stats {
        #[command(flatten)]
        db: DbArg,
    },
    /// Flush the memtable and compact the whole key range
    Compact {
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Debug, Args)]
struct DbArg {
    /// Database directory
    #[arg(long, value_name = "DIR")]
    db: PathBuf,
}

#[derive(Debug, Args)]
struct ShellArgs {
    #[command(flatten)]
    db: DbArg,
    /// Read the workload from PATH instead of stdin (relative `l` paths are then tried against
    /// PATH's directory first)
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// Memtable size in MiB (smaller means more flushes and compactions)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    memtable_mb: Option<u64>,
    /// Memtable size in KiB, for tests that want a flush every few hundred writes
    #[arg(long, value_name = "N", conflicts_with = "memtable_mb",
          value_parser = clap::value_parser!(u64).range(4..=64 * 1024 * 1024))]
    memtable_kb: Option<u64>,
    /// Write-ahead logging on (the default)
    #[arg(long, overrides_with = "no_wal")]
    wal: bool,
    /// Write-ahead logging off: writes since the last flush are lost on a crash
    /// (the shell flushes at the end of the input)
    #[arg(long, overrides_with = "wal")]
    no_wal: bool,
    /// Acknowledge each write only after its WAL record is durable (fdatasync)
    #[arg(long, conflicts_with = "no_wal")]
    sync: bool,
}

/// How keys and values on the command line and in the output are written.
#[derive(Debug, Clone, Copy, Args)]
struct Format {
    /// Keys and values are hex digits (e.g. 6b6579), printed as hex too
    #[arg(long, conflicts_with = "int")]
    hex: bool,
    /// Keys and values are CS265 signed 32-bit integers (the shell's encoding)
    #[arg(long = "i32", id = "int")]
    int: bool,
}

/// A failure that ends the program.
#[derive(Debug)]
enum Failure {
    /// Printed as `error: <message>`, exit status 2.
    Message(String),
    /// The reader of our output went away (e.g. `| head`): stop quietly.
    BrokenPipe,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Message(message)
    }
}

impl From<cairn::Error> for Failure {
    fn from(error: cairn::Error) -> Self {
        Failure::Message(error.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Self {
        if error.kind() == io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::Message(error.to_string())
        }
    }
}

fn main() -> ExitCode {
    // The library reports recovery warnings through `log`; RUST_LOG overrides the level.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(Failure::Message(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn open(db: &DbArg, create_if_missing: bool) -> Result<Db, Failure> {
    let mut options = Options::default();
    options.create_if_missing = create_if_missing;
    Ok(Db::open(&db.db, options)?)
}

fn run(command: Command) -> Result<ExitCode, Failure> {
    let stdout = io::stdout();
    match command {
        Command::Shell(args) => return shell(args),
        Command::Put {
            db,
            format,
            key,
            value,
        } => {
            let (key, value) = (format.parse(&key)?, format.parse(&value)?);
            open(&db, true)?.put(&key, &value)?;
        }
        Command::Get { db, format, key } => {
            let key_bytes = format.parse(&key)?;
            match open(&db, false)?.get(&key_bytes)? {
                Some(value) => writeln!(stdout.lock(), "{}", format.render(&value))?,
                None => {
                    eprintln!("key not found: {key}");
                    return Ok(ExitCode::from(1));
                }
            }
        }
        Command::Delete { db, format, key } => {
            let key = format.parse(&key)?;
            open(&db, false)?.delete(&key)?;
        }
        Command::Scan {
            db,
            format,
            from,
            to,
            reverse,
            limit,
        } => {
            let from = from.map(|key| format.parse(&key)).transpose()?;
            let to = to.map(|key| format.parse(&key)).transpose()?;
            let lower = from.as_deref().map_or(Bound::Unbounded, Bound::Included);
            let upper = to.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let db = open(&db, false)?;
            let entries = db.range::<[u8], _>((lower, upper))?;
            let entries: Box<dyn Iterator<Item = _>> = if reverse {
                Box::new(entries.rev())
            } else {
                Box::new(entries)
            };
            let mut out = BufWriter::new(stdout.lock());
            for entry in entries.take(limit.unwrap_or(usize::MAX)) {
                let (key, value) = entry?;
                writeln!(out, "{}\t{}", format.render(&key), format.render(&value))?;
            }
            out.flush()?;
        }
        Command::Stats { db } => {
            let stats = open(&db, false)?.stats();
            writeln!(stdout.lock(), "{}", stats.to_string().trim_end())?;
        }
        Command::Compact { db } => {
            let db = open(&db, false)?;
            db.flush()?;
            db.compact_range(None, None)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn shell(args: ShellArgs) -> Result<ExitCode, Failure> {
    let mut options = Options::default();
    options.create_if_missing = true;
    options.wal_enabled = !args.no_wal;
    if let Some(megabytes) = args.memtable_mb {
        options.write_buffer_size_bytes = usize::try_from(megabytes)
            .ok()
            .and_then(|megabytes| megabytes.checked_mul(1024 * 1024))
            .ok_or_else(|| format!("--memtable-mb {megabytes} is too large for this machine"))?;
    }
    if let Some(kilobytes) = args.memtable_kb {
        options.write_buffer_size_bytes = usize::try_from(kilobytes)
            .ok()
            .and_then(|kilobytes| kilobytes.checked_mul(1024))
            .ok_or_else(|| format!("--memtable-kb {kilobytes} is too large for this machine"))?;
    }
    let (input, base_dir): (Box<dyn BufRead>, Option<PathBuf>) = match &args.file {
        Some(path) => {
            let file = File::open(path)
                .map_err(|error| format!("cannot open {}: {error}", path.display()))?;
            let base = path
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
                .map(Path::to_path_buf);
            (Box::new(BufReader::with_capacity(1 << 16, file)), base)
        }
        None => (Box::new(io::stdin().lock()), None),
    };
    let db = Db::open(&args.db.db, options)?;
    let store = if args.sync {
        db_store::DbStore::with_write_options(&db, WriteOptions::with_sync(true))
    } else {
        db_store::DbStore::new(&db)
    };
    let out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut shell = cs265::Shell::new(store, out, base_dir);
    let summary = shell.run(input, &mut io::stderr().lock())?;
    if args.no_wal {
        db.flush()?;
    }
    eprintln!("cairn shell: {summary}");
    Ok(if summary.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

impl Format {
    /// Turns a command-line argument into bytes.
    fn parse(self, text: &str) -> Result<Vec<u8>, String> {
        if self.hex {
            decode_hex(text)
        } else if self.int {
            text.trim()
                .parse::<i32>()
                .map(|number| cs265::encode_i32(number).to_vec())
                .map_err(|_| format!("\"{text}\" is not a signed 32-bit integer"))
        } else {
            Ok(text.as_bytes().to_vec())
        }
    }

    /// Turns stored bytes into printable text.
    fn render(self, bytes: &[u8]) -> String {
        if self.hex {
            encode_hex(bytes)
        } else if self.int {
            match cs265::decode_i32_slice(bytes) {
                Some(number) => number.to_string(),
                None => format!("0x{}", encode_hex(bytes)),
            }
        } else {
            match std::str::from_utf8(bytes) {
                Ok(text) if !text.chars().any(char::is_control) => text.to_string(),
                _ => bytes.escape_ascii().to_string(),
            }
        }
    }
}

fn encode_hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.strip_prefix("0x").unwrap_or(text).as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("\"{text}\" has an odd number of hex digits"));
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("\"{text}\" is not hex (expected digits 0-9, a-f)"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(decode_hex("00ff7f").unwrap(), vec![0, 255, 127]);
        assert_eq!(decode_hex("0xAB").unwrap(), vec![0xab]);
        assert_eq!(decode_hex("").unwrap(), Vec::<u8>::new());
        assert!(decode_hex("abc").is_err());
        assert!(decode_hex("zz").is_err());
        assert!(decode_hex("é0").is_err());
        assert_eq!(encode_hex(&[0, 255, 16]), "00ff10");
    }

    #[test]
    fn formats() {
        let text = Format {
            hex: false,
            int: false,
        };
        let int = Format {
            hex: false,
            int: true,
        };
        assert_eq!(text.render(b"caf\xc3\xa9"), "café");
        assert_eq!(text.render(b"a\tb\xff"), "a\\tb\\xff");
        assert_eq!(int.parse("-1").unwrap(), cs265::encode_i32(-1).to_vec());
        assert_eq!(int.render(&cs265::encode_i32(i32::MIN)), "-2147483648");
        assert_eq!(int.render(b"abc"), "0x616263");
        assert!(int.parse("x").is_err());
    }
}
