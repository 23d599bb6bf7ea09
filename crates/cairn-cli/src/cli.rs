//! The command line: clap's definitions and the dispatch of each command.

use crate::shell::{RunError, Shell, Source};
use crate::{db_store, interactive, open, text, tools, Failure};
use cairn::{Options, WriteOptions};
use clap::{Args, Parser, Subcommand};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::ops::Bound;
use std::path::PathBuf;
use std::process::ExitCode;

const SHELL_HELP: &str = "\
Runs shell commands, one per line: interactively at a terminal (a prompt, history, line
editing; each line answered at once), or from stdin or --file in batch.
CS265 commands take signed 64-bit integers:

  p K V       put K -> V
  g K         print the value of K, or an empty line if K is absent
  r A B       print every key:value with A <= key < B on one line, space separated,
              in key order (an empty line if there are none, or if A >= B); pairs with a
              key or value that is not 8 bytes (text commands wrote them) are skipped
  d K         delete K
  l \"PATH\"    load a binary file of native-endian int32 pairs K V K V ... as puts, in file
              order (the CS265 generator's format). The quotes are optional for paths without
              spaces. The file is read to its end, so a FIFO a generator writes into loads
              too. Bytes after the last complete pair are reported on stderr and ignored.
              A relative PATH is resolved against the current directory when the workload
              comes from stdin; with --file it is tried against the workload file's directory
              first, then against the current directory.
  s           print the database's statistics

Text commands take keys and values as text with escapes (\\\\ \\\" \\t \\n \\r \\xHH;
\"quoted words\"; \"\" is empty), and print them the same way:

  put KEY VALUE | get KEY | del KEY
  scan [FROM [TO [LIMIT]]]   KEY VALUE lines for FROM <= key < TO, then an empty line
  incr KEY [BY]              add BY (default 1) to a decimal counter and print it

Blank lines are ignored. A bad line is reported on stderr as `error: line N: ...` and the shell
continues. At the end a summary (commands, seconds, commands/s) is printed on stderr.
The shell creates the database if the directory is missing or empty.
Exit status: 0 if every line succeeded, 1 if some lines failed, 2 on a fatal error. An output
closed part way (`| head`) is fatal: the shell stops, prints `error: output closed at line N;
the remaining lines were not run` and exits 2.

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
                  Keys and values are text with the shell's escapes (\\\\ for a backslash, \
                  \\xHH for a byte) unless --hex or --int is given.\n\
                  Errors are printed as `error: <message>` with exit status 2."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run shell commands (CS265 p/g/r/d/l/s and text put/get/del/scan/incr)
    #[command(long_about = SHELL_HELP)]
    Shell(ShellArgs),
    /// Store VALUE under KEY
    Put {
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        format: Format,
        /// Create the database if the directory is missing or empty
        #[arg(long)]
        create: bool,
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
    /// Print a table file's footer, properties, blocks and entries (checksums verified)
    DumpTable {
        /// The .sst file
        file: PathBuf,
        /// One JSON document instead of text
        #[arg(long)]
        json: bool,
    },
    /// Print a write-ahead log's records and their entries
    DumpWal {
        /// The .log file
        file: PathBuf,
        /// One JSON document instead of text
        #[arg(long)]
        json: bool,
    },
    /// Print the edits of the database's live MANIFEST
    DumpManifest {
        /// Database directory
        dir: PathBuf,
        /// One JSON document instead of text
        #[arg(long)]
        json: bool,
    },
    /// Verify every checksum of every table, WAL and the MANIFEST (exit status 1 on damage)
    Verify {
        /// Database directory
        dir: PathBuf,
        /// One JSON document instead of text
        #[arg(long)]
        json: bool,
    },
    /// Write a copy of the database to DEST that opens on its own (tables hard-linked)
    Checkpoint {
        /// Database directory
        dir: PathBuf,
        /// Where to write the checkpoint (must not exist, or be empty)
        dest: PathBuf,
    },
    /// Approximate table bytes per level holding keys FROM (inclusive) to TO (exclusive)
    Sizes {
        /// Database directory
        dir: PathBuf,
        /// Smallest key (inclusive); every key if omitted
        from: Option<String>,
        /// Key to stop before (exclusive)
        to: Option<String>,
        #[command(flatten)]
        format: Format,
        /// One JSON document instead of text
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct DbArg {
    /// Database directory
    #[arg(long, value_name = "DIR")]
    db: PathBuf,
    /// Levels to open the database with (2 to 32). Without it an existing database opens
    /// with as many as it already uses (one past its deepest table), so the application
    /// that made it with fewer than the default can still open it; a new one gets 7
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=32))]
    levels: Option<u64>,
}

impl DbArg {
    /// `--levels`, if given (clap keeps it within 2..=32, which fits any `usize`).
    fn levels(&self) -> Option<usize> {
        self.levels.and_then(|levels| usize::try_from(levels).ok())
    }
}

#[derive(Debug, Args)]
pub struct ShellArgs {
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
pub struct Format {
    /// Keys and values are hex digits (e.g. 6b6579), printed as hex too
    #[arg(long, conflicts_with = "int")]
    hex: bool,
    /// Keys and values are the shell's signed 64-bit integers (as `p`/`g` store them)
    #[arg(long = "int", id = "int")]
    int: bool,
}

pub fn run(command: Command) -> Result<ExitCode, Failure> {
    if let Command::Shell(args) = command {
        return shell(args);
    }
    let mut out = BufWriter::new(io::stdout().lock());
    let code = match command {
        Command::DumpTable { file, json } => {
            tools::dump_table(&file, json, &mut out).map(|()| ExitCode::SUCCESS)?
        }
        Command::DumpWal { file, json } => {
            tools::dump_wal(&file, json, &mut out).map(|()| ExitCode::SUCCESS)?
        }
        Command::DumpManifest { dir, json } => {
            tools::dump_manifest(&dir, json, &mut out).map(|()| ExitCode::SUCCESS)?
        }
        Command::Verify { dir, json } => tools::verify(&dir, json, &mut out)?,
        Command::Checkpoint { dir, dest } => {
            tools::checkpoint(&dir, &dest, &mut out).map(|()| ExitCode::SUCCESS)?
        }
        Command::Sizes {
            dir,
            from,
            to,
            format,
            json,
        } => {
            let from = from.map(|key| format.parse(&key)).transpose()?;
            let to = to.map(|key| format.parse(&key)).transpose()?;
            tools::sizes(&dir, from.as_deref(), to.as_deref(), json, &mut out)?;
            ExitCode::SUCCESS
        }
        command => one_off(command, &mut out)?,
    };
    out.flush()?;
    Ok(code)
}

fn one_off(command: Command, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    match command {
        Command::Put {
            db,
            format,
            create,
            key,
            value,
        } => {
            let (key, value) = (format.parse(&key)?, format.parse(&value)?);
            open::open_for_write(&db.db, create, Options::default(), db.levels())?
                .put(&key, &value)?;
        }
        Command::Get { db, format, key } => {
            let key_bytes = format.parse(&key)?;
            match open::open_for_read(&db.db, db.levels())?.get(&key_bytes)? {
                Some(value) => writeln!(out, "{}", format.render(&value))?,
                None => {
                    eprintln!("key not found: {key}");
                    return Ok(ExitCode::from(1));
                }
            }
        }
        Command::Delete { db, format, key } => {
            let key = format.parse(&key)?;
            open::open_existing(&db.db, db.levels())?.delete(&key)?;
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
            let db = open::open_for_read(&db.db, db.levels())?;
            let entries = db.range::<[u8], _>((lower, upper))?;
            let entries: Box<dyn Iterator<Item = _>> = if reverse {
                Box::new(entries.rev())
            } else {
                Box::new(entries)
            };
            for entry in entries.take(limit.unwrap_or(usize::MAX)) {
                let (key, value) = entry?;
                writeln!(out, "{}\t{}", format.render(&key), format.render(&value))?;
            }
        }
        Command::Stats { db } => {
            let stats = open::open_for_read(&db.db, db.levels())?.stats();
            writeln!(out, "{}", stats.to_string().trim_end())?;
        }
        Command::Compact { db } => {
            let db = open::open_existing(&db.db, db.levels())?;
            db.flush()?;
            db.compact_range(None, None)?;
        }
        _ => return Err(Failure::Message("not a one-off command".into())),
    }
    Ok(ExitCode::SUCCESS)
}

fn shell_options(args: &ShellArgs) -> Result<Options, Failure> {
    let mut options = Options::default();
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
    Ok(options)
}

fn shell(args: ShellArgs) -> Result<ExitCode, Failure> {
    let options = shell_options(&args)?;
    let (input, source): (Option<Box<dyn BufRead>>, Source) = match &args.file {
        Some(path) => {
            let file = File::open(path)
                .map_err(|error| format!("cannot open {}: {error}", path.display()))?;
            let input = Box::new(BufReader::with_capacity(1 << 16, file));
            (Some(input), Source::File(path.clone()))
        }
        // Interactive only when a person both types and reads: with stdout redirected the
        // prompt would land in the output, so that case takes the batch path (which still
        // runs each line as it arrives).
        None if io::stdin().is_terminal() && io::stdout().is_terminal() => (None, Source::Stdin),
        None => (Some(Box::new(io::stdin().lock())), Source::Stdin),
    };
    let db = open::open_for_write(&args.db.db, true, options, args.db.levels())?;
    let store = if args.sync {
        let mut write_options = WriteOptions::default();
        write_options.sync = true;
        db_store::DbStore::with_write_options(&db, write_options)
    } else {
        db_store::DbStore::new(&db)
    };
    let progress = io::stderr().is_terminal();
    let summary = match input {
        Some(input) => {
            let out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
            let mut shell = Shell::new(store, out, source).with_progress(progress);
            shell
                .run(input, &mut io::stderr().lock())
                .map_err(stopped)?
        }
        None => {
            let mut shell = Shell::new(store, io::stdout(), source).with_progress(progress);
            interactive::run(&mut shell).map_err(stopped)?
        }
    };
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

/// How a shell run that stopped early ends the program. A closed output is not the quiet end
/// it is for a read command (`cairn scan | head`): the lines after it, writes among them, did
/// not run, which the exit status and the message must say.
fn stopped(error: RunError) -> Failure {
    match error {
        RunError::Output { line, error } if error.kind() == io::ErrorKind::BrokenPipe => {
            Failure::Message(format!(
                "output closed at line {line}; the remaining lines were not run"
            ))
        }
        RunError::Output { line, error } => Failure::Message(format!(
            "cannot write the output at line {line} ({error}); the remaining lines were not run"
        )),
        RunError::Input(error) => Failure::Message(format!("cannot read the input: {error}")),
        // Every line ran: a reader that left early only missed output, as with `get`.
        RunError::Flush(error) => error.into(),
    }
}

impl Format {
    /// Turns a command-line argument into bytes.
    fn parse(self, argument: &str) -> Result<Vec<u8>, String> {
        if self.hex {
            decode_hex(argument)
        } else if self.int {
            argument
                .trim()
                .parse::<i64>()
                .map(|number| crate::cs265::encode_i64(number).to_vec())
                .map_err(|_| format!("\"{argument}\" is not a signed 64-bit integer"))
        } else {
            text::parse_token(argument)
        }
    }

    /// Turns stored bytes into printable text that [`Format::parse`] reads back.
    fn render(self, bytes: &[u8]) -> String {
        if self.hex {
            encode_hex(bytes)
        } else if self.int {
            match crate::cs265::decode_i64_slice(bytes) {
                Some(number) => number.to_string(),
                None => format!("0x{}", encode_hex(bytes)),
            }
        } else {
            text::render(bytes)
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
        assert_eq!(text.render(b"a\tb\xff\\"), "a\\tb\\xff\\\\");
        assert_eq!(text.parse("a\\tb\\xff\\\\").unwrap(), b"a\tb\xff\\");
        assert_eq!(
            int.parse("-1").unwrap(),
            crate::cs265::encode_i64(-1).to_vec()
        );
        assert_eq!(
            int.render(&crate::cs265::encode_i64(i64::MIN)),
            "-9223372036854775808"
        );
        assert_eq!(int.render(b"abc"), "0x616263");
        assert!(int.parse("x").is_err());
    }
}
