//! `cairn-bench`: cairn against its peers, same machine, same run.
//!
//! db_bench benchmark names and flags, YCSB A–F and the cLSM / FloDB workloads; engines by
//! name; warm-up, then repetitions interleaved across engines; medians, min–max, ratios to the
//! first engine; a table, JSON and PNG plots. See `bench/README.md`.

mod db_root;
mod engine;
mod error;
mod keys;
mod placement;
mod plot;
mod report;
mod runner;
mod sequence;
mod workloads;

use clap::{ArgAction, Parser};
use db_root::DbRoot;
use engine::{EngineConfig, ShapeConfig};
use error::{BenchError, Context, Result};
use hdrhistogram::Histogram;
use report::{Machine, Report, ResultEntry, Summary};
use runner::{Measurement, Params};
use sequence::{run_interleaved, run_sequence, RunContext};
use std::path::PathBuf;
use std::process::ExitCode;

fn parse_bool(text: &str) -> std::result::Result<bool, String> {
    match text {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(format!("expected true/false or 1/0, got `{other}`")),
    }
}

/// `--compression_type`: none, lz4 or zstd.
fn parse_compression(text: &str) -> std::result::Result<::cairn::Compression, String> {
    match text {
        "none" => Ok(::cairn::Compression::None),
        "lz4" => Ok(::cairn::Compression::Lz4),
        "zstd" => Ok(::cairn::Compression::Zstd),
        other => Err(format!(
            "unknown compression type {other:?} (none, lz4, zstd)"
        )),
    }
}

fn parse_threads(text: &str) -> std::result::Result<Vec<usize>, String> {
    let mut threads = Vec::new();
    for part in text
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        let count: usize = part
            .parse()
            .map_err(|_| format!("`{part}` is not a thread count"))?;
        if count == 0 {
            return Err("thread counts must be at least 1".to_string());
        }
        threads.push(count);
    }
    if threads.is_empty() {
        return Err("no thread count given".to_string());
    }
    Ok(threads)
}

/// Benchmarks cairn against RocksDB and LevelDB with db_bench, YCSB and paper workloads.
#[derive(Debug, Parser)]
#[command(name = "cairn-bench", version)]
struct Args {
    /// Engines, comma separated; ratios are to the first (cairn, rocksdb, leveldb, and the
    /// in-memory memstore, rwlock-hashmap, dashmap).
    #[arg(long, default_value = "cairn")]
    engines: String,
    /// Workloads, comma separated, run in order on one database per (engine, threads);
    /// `list` prints them all.
    #[arg(long, default_value = "fillrandom,readrandom")]
    benchmarks: String,
    /// Key space: keys written by fill benchmarks, YCSB record count.
    #[arg(long, default_value_t = 1_000_000)]
    num: u64,
    /// Operations of read and mixed workloads (YCSB operation count); default --num.
    #[arg(long)]
    reads: Option<u64>,
    /// Thread counts to run, comma separated (e.g. 1,2,16).
    #[arg(long, default_value = "1", value_parser = parse_threads)]
    threads: Vec<Vec<usize>>,
    /// Key size in bytes (at least 8).
    #[arg(long = "key_size", default_value_t = 16)]
    key_size: usize,
    /// Value size in bytes.
    #[arg(long = "value_size", default_value_t = 100)]
    value_size: usize,
    /// fdatasync every write.
    #[arg(long, default_value = "false", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, action = ArgAction::Set)]
    sync: bool,
    /// Make every Nth write of each thread a synced one (fdatasync before it returns), the
    /// others plain; 0: off. The latency percentiles then cover the plain writes only, so
    /// they show what a concurrent sync costs everyone else (cairn only).
    #[arg(long = "sync_every", default_value_t = 0)]
    sync_every: u64,
    /// Turn the write-ahead log off (LevelDB cannot; it keeps its WAL).
    #[arg(long = "disable_wal", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set)]
    disable_wal: bool,
    /// Memtable (memory component) size in bytes.
    #[arg(long = "write_buffer_size", default_value_t = 64 << 20)]
    write_buffer_size: usize,
    /// Bloom filter bits per key (0: none).
    #[arg(long = "bloom_bits", default_value_t = 10)]
    bloom_bits: usize,
    /// Block cache size in bytes.
    #[arg(long = "cache_size", default_value_t = 64 << 20)]
    cache_size: usize,
    /// Data block size in bytes.
    #[arg(long = "block_size", default_value_t = 4096)]
    block_size: usize,
    /// Log capacity of the memstore engine in bytes (0: twice the records the run can hold,
    /// see bench/README.md).
    #[arg(long = "memstore_capacity", default_value_t = 0)]
    memstore_capacity: usize,
    /// cairn engines, build feature `flodb-variants` only: drop sealed memtables instead of
    /// flushing them, so a fill measures the memory component alone (FloDB Fig. 17). The
    /// counters report the Membuffer's share (`membuffer_writes` vs
    /// `membuffer_direct_writes`) and what was left undrained (`membuffer_undrained_at_drop`).
    #[arg(long = "drop_sealed", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set)]
    drop_sealed: bool,
    /// Run each measured phase this many seconds instead of a count (0: use counts).
    #[arg(long, default_value_t = 0.0)]
    duration: f64,
    /// readwhilewriting's unmeasured writer puts at most this many keys per second (0: as
    /// fast as it can, db_bench's default). db_bench's `--benchmark_write_rate_limit` in
    /// operations: two engines' readers then compare at one write rate, so a faster writer
    /// does not take more of the cores from the readers it is measured against.
    #[arg(long = "writer_ops_per_sec", default_value_t = 0)]
    writer_ops_per_sec: u64,
    /// cairn's block compression: none, lz4 or zstd (the other engines stay uncompressed).
    #[arg(long = "compression_type", default_value = "none", value_parser = parse_compression)]
    compression_type: ::cairn::Compression,
    /// Values compress to about this fraction of their size (db_bench's flag; its default is
    /// 0.5). 1.0, the default here, is random bytes that do not compress.
    #[arg(long = "compression_ratio", default_value_t = 1.0)]
    compression_ratio: f64,
    /// Read tables through memory mappings (true) or pread (false): cairn's table_read_mode
    /// and RocksDB's allow_mmap_reads alike. Absent: each engine's default (cairn: mmap,
    /// RocksDB: pread).
    #[arg(long = "mmap_reads", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, action = ArgAction::Set)]
    mmap_reads: Option<bool>,
    /// cairn: write the WAL through a shared memory mapping (true) or `write(2)` (false).
    /// Absent: the engine's default (mapped on Linux).
    #[arg(long = "wal_mmap", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, action = ArgAction::Set)]
    wal_mmap: Option<bool>,
    /// cairn: threads probing sorted runs concurrently on a point lookup (0: off).
    #[arg(long = "lookup_threads", default_value_t = 0)]
    lookup_threads: usize,
    /// cairn engines with a Membuffer: its key-range partitions (1-1024; 0: the engine's
    /// default).
    #[arg(long = "membuffer_partitions", default_value_t = 0)]
    membuffer_partitions: usize,
    /// cairn engines with a Membuffer: background drainer threads (0-64; absent: the
    /// engine's default, which follows the machine).
    #[arg(long = "membuffer_drainers")]
    membuffer_drainers: Option<usize>,
    /// cairn engines with a Membuffer: its share of the write buffer in percent (1-50;
    /// absent: the engine's default).
    #[arg(long = "membuffer_percent")]
    membuffer_percent: Option<usize>,
    /// Keys per batch of multireadrandom.
    #[arg(long = "multiget_batch", default_value_t = 32)]
    multiget_batch: usize,
    /// Entries read after each seek in seekrandom.
    #[arg(long = "seek_nexts", default_value_t = 0)]
    seek_nexts: usize,
    /// Measured repetitions, interleaved across engines (A B A B ...).
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
    /// Open every engine's database at once and run the workload list phase by phase across
    /// them (A's phase 1, B's phase 1, B's phase 2, A's phase 2, ...: the engines take turns
    /// going first) instead of one engine's whole list after another: two configurations
    /// compared in one run then share each minute of the machine. List a read workload
    /// several times to get several interleaved pairs.
    #[arg(long = "interleave_phases", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set)]
    interleave_phases: bool,
    /// Run every engine once at --num/10 before measuring (discarded).
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, action = ArgAction::Set)]
    warmup: bool,
    /// Time a cache line's round trip between two CPUs before and after every phase
    /// (milliseconds each): on a virtual machine it tells whether the host placed the CPUs
    /// close or far, which moves every multi-thread figure (bench/README.md).
    #[arg(long = "probe_placement", default_value = "true", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set)]
    probe_placement: bool,
    /// Seed of every random choice (same keys and values for every engine).
    #[arg(long, default_value_t = 301)]
    seed: u64,
    /// Flush the memtable after an unmeasured load (LevelDB cannot).
    #[arg(long = "flush_after_load", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_bool, action = ArgAction::Set)]
    flush_after_load: bool,
    /// cairn's tree shape: leveling, tiering or lazy (lazy leveling).
    #[arg(long = "compaction_style", default_value = "leveling")]
    compaction_style: String,
    /// cairn: size ratio between levels (fanout T).
    #[arg(long, default_value_t = 10)]
    fanout: u64,
    /// cairn, tiered styles: runs a level holds before it is merged down (D).
    #[arg(long = "runs_per_level", default_value_t = 4)]
    runs_per_level: usize,
    /// cairn, tiered styles: share of a full level's runs merged down at a time (m).
    #[arg(long = "merge_fraction", default_value_t = 1.0)]
    merge_fraction: f64,
    /// cairn: Bloom bits per level, uniform or monkey (same memory, fewer on the last level).
    #[arg(long = "bloom_allocation", default_value = "uniform")]
    bloom_allocation: String,
    /// cairn: data block size per level, comma separated from level 0 (others: --block_size).
    #[arg(long = "level_block_sizes", default_value = "")]
    level_block_sizes: String,
    /// cairn: compression per level, comma separated from level 0 (none, lz4, zstd; deeper
    /// levels: --compression_type), e.g. `none,none,zstd`.
    #[arg(long = "level_compression", default_value = "")]
    level_compression: String,
    /// Level-1 size limit in bytes (the base of every level's limit).
    #[arg(long = "level1_size", default_value_t = 256 << 20)]
    level1_size: u64,
    /// cairn: number of levels.
    #[arg(long, default_value_t = 7)]
    levels: usize,
    /// cairn: background compaction threads.
    #[arg(long = "compaction_threads", default_value_t = 1)]
    compaction_threads: usize,
    /// Directory under which each engine's database is created (a subdirectory per engine,
    /// wiped before and removed after each of its sequences). Default: a fresh directory
    /// private to this process under the system temporary directory (TMPDIR), removed at
    /// the end. A named directory is locked for the run (DIR.cairn-bench-lock beside it) and
    /// kept; another cairn-bench naming it meanwhile is refused without touching it.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Directory for results.json and the PNG plots.
    #[arg(long, default_value = "cairn-bench-out")]
    out: PathBuf,
    /// Path of the JSON results (default OUT/results.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Skip the PNG plots.
    #[arg(long = "no_plots")]
    no_plots: bool,
    /// Progress bars on standard error (hidden anyway when it is not a terminal).
    #[arg(long, default_value = "true", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool, action = ArgAction::Set)]
    progress: bool,
}

/// cairn's shape options from the command line (docs/tuning.md names each flag's trade-off).
fn shape_config(args: &Args) -> Result<ShapeConfig> {
    let style = match args.compaction_style.as_str() {
        "leveling" => cairn::CompactionStyle::Leveling,
        "tiering" => cairn::CompactionStyle::Tiering,
        "lazy" => cairn::CompactionStyle::LazyLeveling,
        other => {
            return Err(BenchError::new(format!(
                "--compaction_style {other}: expected leveling, tiering or lazy"
            )))
        }
    };
    let bloom_allocation = match args.bloom_allocation.as_str() {
        "uniform" => cairn::BloomAllocation::Uniform,
        "monkey" => cairn::BloomAllocation::Monkey,
        other => {
            return Err(BenchError::new(format!(
                "--bloom_allocation {other}: expected uniform or monkey"
            )))
        }
    };
    let level_block_sizes = args
        .level_block_sizes
        .split(',')
        .filter(|size| !size.trim().is_empty())
        .map(|size| {
            size.trim().parse::<usize>().map_err(|_| {
                BenchError::new(format!("--level_block_sizes: \"{size}\" is not a size"))
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    let level_compression = args
        .level_compression
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            parse_compression(name)
                .map_err(|message| BenchError::new(format!("--level_compression: {message}")))
        })
        .collect::<Result<Vec<::cairn::Compression>>>()?;
    Ok(ShapeConfig {
        style,
        level_compression,
        fanout: args.fanout,
        runs_per_level: args.runs_per_level,
        merge_fraction: args.merge_fraction,
        bloom_allocation,
        level_block_sizes,
        levels: args.levels,
        compaction_threads: args.compaction_threads,
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cairn-bench: error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// One (benchmark, threads, engine) cell being filled.
struct Cell {
    benchmark: usize,
    threads: usize,
    engine: usize,
    runs: Vec<Measurement>,
    histogram: Histogram<u64>,
}

/// Adds one phase's output to its cell (benchmark index, threads, engine index) and prints
/// its line.
fn record(
    cells: &mut [Cell],
    phase: &str,
    (benchmark, threads, engine): (usize, usize, usize),
    output: runner::PhaseOutput,
) -> Result<()> {
    let Some(cell) = cells.iter_mut().find(|cell| {
        cell.benchmark == benchmark && cell.threads == threads && cell.engine == engine
    }) else {
        return Ok(());
    };
    let measurement = output.measurement;
    let placement = match (
        measurement.cross_core_round_trip_ns_before,
        measurement.cross_core_round_trip_ns_after,
    ) {
        (Some(before), Some(after)) => format!(", cross-core {before:.0}/{after:.0} ns"),
        _ => String::new(),
    };
    let blocks = measurement
        .blocks_per_read
        .map(|blocks| format!(", {blocks:.3} blocks/read"))
        .unwrap_or_default();
    // readwhilewriting's readers are measured, its writer is not: an engine whose writer
    // keeps up with the cap does more background work in the same seconds, so show it.
    let writer = if measurement.writer_ops > 0 && measurement.seconds > 0.0 {
        format!(
            ", writer {:.0} ops/s",
            measurement.writer_ops as f64 / measurement.seconds
        )
    } else {
        String::new()
    };
    let shape = measurement
        .level_shape
        .as_deref()
        .map(|shape| format!(", shape {shape}"))
        .unwrap_or_default();
    eprintln!(
        "  {phase}: {:.0} ops/s, p99 {:.1} us, {:.2} cpu-us/op{blocks}{writer}{placement}{shape}",
        measurement.ops_per_sec, measurement.p99_us, measurement.cpu_us_per_op
    );
    cell.runs.push(measurement);
    cell.histogram
        .add(&output.histogram)
        .map_err(|error| BenchError::new(format!("histogram merge: {error}")))
}

fn commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string())
}

/// MemStore's log capacity for `--memstore_capacity 0`: twice the bytes of every record the
/// run can hold (the key space plus the YCSB D/E inserts, at most 5 % of `--reads`), so the
/// log is about half full after the load and compaction runs during update-heavy phases, as
/// it would in steady use. At least what MemStore needs for its heads and compaction reserve;
/// rounded up to whole segments.
fn auto_memstore_capacity(params: &Params) -> Result<usize> {
    let defaults = cairn::MemStoreOptions::default();
    let segment = defaults.segment_bytes;
    let minimum = (defaults.heads + 2 + defaults.compaction_threads.max(1)) * segment;
    // Two LEB128 length headers of at most 3 bytes each for keys and values under 2 MiB.
    let object = params.key_size as u64 + params.value_size as u64 + 6;
    let records = params.num.saturating_add(params.reads / 20);
    let too_large = || {
        BenchError::new(
            "--num and --value_size are too large for an automatic MemStore capacity; \
             set --memstore_capacity",
        )
    };
    let bytes = records
        .checked_mul(object)
        .and_then(|bytes| bytes.checked_mul(2))
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(too_large)?;
    let rounded = bytes
        .checked_next_multiple_of(segment)
        .ok_or_else(too_large)?;
    Ok(rounded.max(minimum))
}

fn run(args: Args) -> Result<()> {
    if args.benchmarks == "list" {
        print!("{}", workloads::describe());
        return Ok(());
    }
    let workloads = workloads::parse_list(&args.benchmarks)?;
    let engines: Vec<String> = args
        .engines
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect();
    if engines.is_empty() {
        return Err(BenchError::new("--engines names no engine"));
    }
    for name in &engines {
        engine::check_name(name)?;
    }
    let threads: Vec<usize> = args.threads.iter().flatten().copied().collect();
    if args.key_size < keys::MIN_KEY_SIZE || args.key_size > 64 * 1024 {
        return Err(BenchError::new("--key_size must be between 8 and 65536"));
    }
    if args.num == 0 {
        return Err(BenchError::new("--num must be at least 1"));
    }
    if args.repetitions == 0 {
        return Err(BenchError::new("--repetitions must be at least 1"));
    }
    if !(args.compression_ratio > 0.0 && args.compression_ratio <= 1.0) {
        return Err(BenchError::new("--compression_ratio must be in (0, 1]"));
    }
    let params = Params {
        num: args.num,
        reads: args.reads.unwrap_or(args.num),
        key_size: args.key_size,
        value_size: args.value_size,
        compression_ratio: args.compression_ratio,
        seek_nexts: args.seek_nexts,
        duration: args.duration,
        seed: args.seed,
        flush_after_load: args.flush_after_load,
        sync_every: args.sync_every,
        probe_placement: args.probe_placement,
        multiget_batch: args.multiget_batch,
        writer_ops_per_sec: args.writer_ops_per_sec,
    };
    let memstore_capacity = match args.memstore_capacity {
        0 => auto_memstore_capacity(&params)?,
        bytes => bytes,
    };
    let config = EngineConfig {
        write_buffer_size: args.write_buffer_size,
        block_cache_size: args.cache_size,
        bloom_bits: args.bloom_bits,
        block_size: args.block_size,
        wal: !args.disable_wal,
        sync: args.sync,
        target_file_size: 64 << 20,
        level1_size: args.level1_size,
        level0_triggers: (4, 12, 20),
        max_immutable_memtables: 4,
        memstore_capacity,
        compression: args.compression_type,
        shape: shape_config(&args)?,
        drop_sealed: args.drop_sealed,
        mmap_reads: args.mmap_reads,
        wal_mmap: args.wal_mmap,
        lookup_threads: args.lookup_threads,
        membuffer_partitions: args.membuffer_partitions,
        membuffer_drainers: args.membuffer_drainers,
        membuffer_percent: args.membuffer_percent,
    };
    if args.drop_sealed && !cfg!(feature = "flodb-variants") {
        return Err(BenchError::new(
            "--drop_sealed needs a build with `--features flodb-variants`".to_string(),
        ));
    }
    // Held before anything under it is removed, until the end of the run.
    let db_root = DbRoot::acquire(args.db.as_deref())?;
    let machine = Machine::detect();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let date = report::utc_now();
    println!("cairn-bench {date}");
    println!("command: {command}");
    println!(
        "machine: {} CPUs ({}), {} GiB, kernel {}, load average {:.2}; commit {}",
        machine.cpus,
        machine.cpu_model,
        machine.memory_gib,
        machine.kernel,
        machine.load_average_start,
        commit()
    );
    println!(
        "sizes: num={} reads={} key_size={} value_size={} threads={:?} repetitions={} warmup={} seed={}",
        params.num,
        params.reads,
        params.key_size,
        params.value_size,
        threads,
        args.repetitions,
        args.warmup,
        params.seed
    );
    println!("databases: {}", db_root.describe());
    let mapping: Vec<(String, Vec<String>)> = engines
        .iter()
        .map(|name| (name.clone(), engine::mapping(name, &config)))
        .collect();
    println!("option mapping:");
    for (name, lines) in &mapping {
        println!("  {name}:");
        for line in lines {
            println!("    {line}");
        }
    }
    for workload in &workloads {
        if let Some(note) = workload.note {
            println!("note: {}: {note}", workload.name);
        }
        for name in &engines {
            if workload.needs_scan() && !engine::supports_scan(name) {
                println!(
                    "note: {}: skipped on {name} (no ordered iteration: unsupported)",
                    workload.name
                );
            }
        }
    }
    let context = RunContext {
        config: &config,
        workloads: &workloads,
        db_root: db_root.path(),
        progress: args.progress,
    };

    if args.warmup {
        let warm = Params {
            num: (params.num / 10).max(1000),
            reads: (params.reads / 10).max(1000),
            duration: params.duration.min(1.0),
            probe_placement: false,
            ..params.clone()
        };
        for name in &engines {
            eprintln!("warm-up: {name}");
            run_sequence(&context, name, threads[0], &warm, "warm-up", |_, _| {})?;
        }
    }

    let mut cells: Vec<Cell> = Vec::new();
    for benchmark in 0..workloads.len() {
        for &thread_count in &threads {
            for engine in 0..engines.len() {
                cells.push(Cell {
                    benchmark,
                    threads: thread_count,
                    engine,
                    runs: Vec::new(),
                    histogram: runner::new_histogram()?,
                });
            }
        }
    }
    for repetition in 0..args.repetitions {
        let tag = format!("rep {}/{}", repetition + 1, args.repetitions);
        for &thread_count in &threads {
            let mut failure = None;
            let mut sink = |engine_index: usize, index: usize, output: runner::PhaseOutput| {
                let name = &engines[engine_index];
                let phase = format!("{tag} {name} {} t={thread_count}", workloads[index].name);
                if let Err(error) = record(
                    &mut cells,
                    &phase,
                    (index, thread_count, engine_index),
                    output,
                ) {
                    failure = Some(error);
                }
            };
            if args.interleave_phases {
                run_interleaved(&context, &engines, thread_count, &params, &tag, &mut sink)?;
            } else {
                for (engine_index, name) in engines.iter().enumerate() {
                    run_sequence(
                        &context,
                        name,
                        thread_count,
                        &params,
                        &tag,
                        |index, output| sink(engine_index, index, output),
                    )?;
                }
            }
            if let Some(error) = failure {
                return Err(error);
            }
        }
    }

    let mut results = Vec::new();
    for cell in &cells {
        let summary = Summary::of(&cell.runs);
        let first = cells
            .iter()
            .find(|other| {
                other.benchmark == cell.benchmark
                    && other.threads == cell.threads
                    && other.engine == 0
            })
            .map(|other| Summary::of(&other.runs).ops_per_sec.median)
            .unwrap_or(0.0);
        let ratio = if first > 0.0 {
            summary.ops_per_sec.median / first
        } else {
            0.0
        };
        let latency_cdf = if cell.histogram.is_empty() {
            Vec::new()
        } else {
            [
                0.0, 1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 97.0,
                99.0, 99.5, 99.9, 99.95, 99.99, 100.0,
            ]
            .iter()
            .map(|&percentile| {
                let nanos = cell.histogram.value_at_percentile(percentile);
                (percentile, nanos as f64 / 1000.0)
            })
            .collect()
        };
        let workload = &workloads[cell.benchmark];
        let engine_name = &engines[cell.engine];
        results.push(ResultEntry {
            benchmark: workload.name.to_string(),
            threads: cell.threads,
            engine: engine_name.clone(),
            unsupported: workload.needs_scan() && !engine::supports_scan(engine_name),
            note: workload.note.map(str::to_string),
            runs: cell.runs.clone(),
            summary,
            ratio_to_first: ratio,
            latency_cdf,
        });
    }
    let mut machine = machine;
    machine.load_average_end = report::load_average();
    let report = Report {
        date_utc: date,
        command,
        commit: commit(),
        machine,
        params,
        config,
        mapping,
        engines,
        threads,
        repetitions: args.repetitions,
        results,
    };
    println!();
    println!(
        "results: median of {} repetitions [min-max]; ratio = ops/s / {}'s; latencies per operation; \
         cpu-us/op = process CPU time (all threads) / operations; \
         w-amp = bytes written to storage / key+value bytes written",
        report.repetitions, report.engines[0]
    );
    println!(
        "load average: {:.2} at start, {:.2} at end (2 cores: anything else running shows in the figures)",
        report.machine.load_average_start, report.machine.load_average_end
    );
    print!("{}", report::table(&report));
    print!(
        "{}",
        report::paired_ratios(&report.results, &report.engines, &report.threads)
    );

    std::fs::create_dir_all(&args.out).context(format!("creating {}", args.out.display()))?;
    let json_path = args
        .json
        .clone()
        .unwrap_or_else(|| args.out.join("results.json"));
    let json = serde_json::to_string_pretty(&report)?;
    std::fs::write(&json_path, json).context(format!("writing {}", json_path.display()))?;
    println!("json: {}", json_path.display());
    if !args.no_plots {
        for path in plot::write_all(&report, &args.out)? {
            println!("plot: {}", path.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_params(duration: f64) -> Params {
        Params {
            num: 3000,
            reads: 2000,
            key_size: 16,
            value_size: 64,
            compression_ratio: 0.5,
            seek_nexts: 2,
            duration,
            seed: 7,
            flush_after_load: true,
            sync_every: 0,
            probe_placement: false,
            multiget_batch: 8,
            writer_ops_per_sec: 0,
        }
    }

    fn config() -> EngineConfig {
        EngineConfig {
            write_buffer_size: 64 << 10,
            block_cache_size: 1 << 20,
            bloom_bits: 10,
            block_size: 4096,
            wal: true,
            sync: false,
            target_file_size: 256 << 10,
            level1_size: 1 << 20,
            level0_triggers: (4, 12, 20),
            max_immutable_memtables: 4,
            memstore_capacity: 64 << 20,
            compression: ::cairn::Compression::Zstd,
            shape: ShapeConfig::default(),
            drop_sealed: false,
            mmap_reads: None,
            wal_mmap: None,
            lookup_threads: 0,
            membuffer_partitions: 0,
            membuffer_drainers: None,
            membuffer_percent: None,
        }
    }

    fn test_context<'a>(
        config: &'a EngineConfig,
        workloads: &'a [workloads::Workload],
        root: &'a std::path::Path,
    ) -> RunContext<'a> {
        RunContext {
            config,
            workloads,
            db_root: root,
            progress: false,
        }
    }

    fn run_all(names: &str, params: &Params, threads: usize) -> Vec<(usize, Measurement)> {
        let seen = run_on("cairn", names, params, threads);
        assert_eq!(seen.len(), names.split(',').count());
        seen
    }

    fn run_on(
        engine: &str,
        names: &str,
        params: &Params,
        threads: usize,
    ) -> Vec<(usize, Measurement)> {
        let root = std::env::temp_dir().join(format!(
            "cairn-bench-test-{}-{engine}-{}",
            std::process::id(),
            names.len()
        ));
        let workloads = workloads::parse_list(names).unwrap();
        let config = config();
        let context = test_context(&config, &workloads, &root);
        let mut seen = Vec::new();
        run_sequence(
            &context,
            engine,
            threads,
            params,
            "test",
            |index, output| {
                seen.push((index, output.measurement));
            },
        )
        .unwrap();
        let _ = std::fs::remove_dir_all(&root);
        seen
    }

    /// Runs `list` with `--interleave_phases` over `engines` (1 thread, small parameters) in
    /// a fresh directory named by `tag`, handing each phase to `on_phase`; returns that
    /// directory, which the caller removes.
    fn interleave(
        engines: &[&str],
        list: &str,
        tag: &str,
        on_phase: impl FnMut(usize, usize, runner::PhaseOutput),
    ) -> std::path::PathBuf {
        let root =
            std::env::temp_dir().join(format!("cairn-bench-test-{}-{tag}", std::process::id()));
        let workloads = workloads::parse_list(list).unwrap();
        let config = config();
        let context = test_context(&config, &workloads, &root);
        let engines: Vec<String> = engines.iter().map(|name| (*name).to_string()).collect();
        run_interleaved(&context, &engines, 1, &small_params(0.0), "test", on_phase).unwrap();
        root
    }

    #[test]
    fn an_engine_listed_twice_interleaves_on_two_databases() {
        let mut found = Vec::new();
        let root = interleave(
            &["cairn", "cairn"],
            "fillrandom,readrandom",
            "aa",
            |_, index, output| {
                if index == 1 {
                    found.push(output.measurement.found * 2 > output.measurement.reads);
                }
            },
        );
        assert_eq!(
            found,
            [true, true],
            "each copy reads the keys its own fill wrote"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn interleaved_phases_take_turns_going_first() {
        let mut seen = Vec::new();
        let root = interleave(
            &["cairn-leveling", "cairn-lazy"],
            "fillrandom,settle,readrandom,readrandom",
            "il",
            |engine, index, output| seen.push((engine, index, output.measurement)),
        );
        let order: Vec<(usize, usize)> = seen
            .iter()
            .map(|(engine, index, _)| (*engine, *index))
            .collect();
        assert_eq!(
            order,
            [
                (0, 0),
                (1, 0),
                (1, 1),
                (0, 1),
                (0, 2),
                (1, 2),
                (1, 3),
                (0, 3)
            ]
        );
        // Each engine read the keys its own fill wrote: the second read phase found as many.
        for (engine, index, measurement) in &seen {
            if *index >= 2 {
                assert!(
                    measurement.ops > 0,
                    "engine {engine} phase {index} ran nothing"
                );
                assert!(
                    measurement.found * 2 > measurement.reads,
                    "engine {engine} found too few"
                );
            }
        }
        assert!(
            !root.join("cairn-lazy").exists(),
            "a directory was left behind"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn every_counted_workload_runs_on_cairn() {
        let names: Vec<&str> = workloads::catalogue()
            .iter()
            .map(|workload| workload.name)
            .filter(|name| *name != "flodb_burst")
            .collect();
        let results = run_all(&names.join(","), &small_params(0.0), 2);
        for (index, measurement) in &results {
            assert!(measurement.ops > 0, "{} ran no operation", names[*index]);
        }
        let by_name = |name: &str| {
            let index = names.iter().position(|other| *other == name).unwrap();
            results
                .iter()
                .find(|(other, _)| *other == index)
                .map(|(_, measurement)| measurement.clone())
                .unwrap()
        };
        // fillseq writes every key; readrandom on top of later fills finds most of them.
        assert_eq!(by_name("fillseq").ops, 3000);
        assert!(by_name("readrandom").found > 0);
        assert!(by_name("multireadrandom").found > 0);
        // Zero-result lookups find nothing, and cairn counts the blocks they read.
        assert_eq!(by_name("readmissing").found, 0);
        assert_eq!(by_name("readmissing").reads, 2000);
        assert!(by_name("readmissing").blocks_per_read.is_some());
        assert!(by_name("settle").level_shape.is_some());
        assert_eq!(by_name("readseq").ops, by_name("readseq").ops.min(3000));
        // readwhilewriting measures the readers and counts the writer apart.
        assert_eq!(by_name("readwhilewriting").ops, 2000);
    }

    /// A paced writer puts no faster than its rate (one check every 64 puts, so at most 64
    /// ahead); an unpaced one in the same phase length runs far ahead of it.
    #[test]
    fn a_paced_writer_keeps_to_its_rate() {
        let rate = 2000;
        let paced = Params {
            writer_ops_per_sec: rate,
            ..small_params(0.5)
        };
        let free = small_params(0.5);
        let writer_rate = |params: &Params| {
            let results = run_all("readwhilewriting", params, 1);
            let (_, measurement) = results.first().cloned().unwrap();
            measurement.writer_ops as f64 / measurement.seconds
        };
        let paced_rate = writer_rate(&paced);
        assert!(
            paced_rate <= rate as f64 * 1.2 + 64.0 / 0.5,
            "{paced_rate} puts/s"
        );
        assert!(writer_rate(&free) > paced_rate * 2.0);
    }

    #[test]
    fn timed_workloads_stop_on_time() {
        let started = std::time::Instant::now();
        let results = run_all("flodb_burst,ycsb_a", &small_params(0.3), 2);
        assert!(results.iter().all(|(_, measurement)| measurement.ops > 0));
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn in_memory_engines_run_ycsb_and_skip_scans() {
        let names = "ycsb_a,ycsb_b_uniform,readseq,ycsb_c,ycsb_put,ycsb_put_uniform,ycsb_f";
        for engine in ["memstore", "rwlock-hashmap", "dashmap"] {
            let seen = run_on(engine, names, &small_params(0.0), 2);
            let indexes: Vec<usize> = seen.iter().map(|(index, _)| *index).collect();
            // readseq (index 2) needs ordered iteration: skipped, everything else ran.
            assert_eq!(indexes, [0, 1, 3, 4, 5, 6], "{engine}");
            for (index, measurement) in &seen {
                assert_eq!(measurement.ops, 2000, "{engine} workload {index}");
                if measurement.reads > 0 {
                    assert_eq!(measurement.found, measurement.reads, "{engine} {index}");
                }
            }
        }
    }

    #[test]
    fn automatic_memstore_capacity_fits_the_records() {
        let mut params = small_params(0.0);
        params.num = 200_000;
        params.reads = 1_000_000;
        params.value_size = 1024;
        let capacity = auto_memstore_capacity(&params).unwrap();
        let needed = (200_000 + 50_000) * (16 + 1024 + 6) * 2;
        assert!(capacity >= needed && capacity < needed + (8 << 20));
        params.num = u64::MAX / 2;
        assert!(auto_memstore_capacity(&params).is_err());
    }

    #[test]
    fn engine_names_are_checked() {
        assert!(engine::check_name("cairn").is_ok());
        assert!(engine::check_name("memstore").is_ok());
        assert!(engine::check_name("rwlock-hashmap").is_ok());
        assert!(engine::check_name("dashmap").is_ok());
        assert!(engine::check_name("nosuchdb").is_err());
    }
}
