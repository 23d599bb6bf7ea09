//! Metamorphic test, after Pebble's `metamorphic` package: one seeded operation sequence
//! (`common/ops.rs`: puts, deletes, batches, gets, ranges with every bound kind in both
//! directions, read-modify-writes, snapshots and reads at them, flushes, ranged compactions,
//! clean reopens) runs under several random option sets — write buffer, block and target file
//! sizes, restart interval, Bloom bits, compression None/Lz4, level-size ratio, level-0
//! triggers, level count, maximum immutable memtables, MANIFEST size, block cache, and the
//! file system: `MemFs`, or `StdFs` in a temporary directory with `wal_memory_mapped` on or
//! off. Every option set must give the same result for every operation (and the same final
//! state after a last reopen) as the reference set (default options on `MemFs`). Power loss
//! is left out: which unsynced writes survive legitimately depends on the options.
//!
//! On a difference the test prints the seed, both option sets and a sequence shrunk by delta
//! debugging over the operation list.
//!
//! Scale with `CAIRN_METAMORPHIC_SEEDS` (sequences, default 2), `CAIRN_METAMORPHIC_OPS`
//! (operations per sequence, default 800) and `CAIRN_METAMORPHIC_CONFIGS` (random option
//! sets per sequence besides the reference, default 3); replay one sequence with
//! `CAIRN_METAMORPHIC_SEED`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/ops.rs"]
mod ops;

use cairn::{
    BloomAllocation, CompactionStyle, Compression, Db, FileSystem, MemFs, Options, StdFs,
    TableReadMode,
};
use common::TempDir;
use ops::{execute, generate, shrink, Op, Outcome, Snapshots};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;

/// The knobs one run varies, printed on a failure.
#[derive(Debug, Clone)]
struct OptionSet {
    /// `StdFs` in a temporary directory (else `MemFs`).
    std_fs: bool,
    wal_memory_mapped: bool,
    /// `pread` or mapped table reads (mapped reads matter on `StdFs` only).
    table_read_mode: TableReadMode,
    /// Threads probing runs concurrently (0: sequential probes).
    lookup_threads: usize,
    write_buffer_size_bytes: usize,
    max_immutable_memtables: usize,
    block_size_bytes: usize,
    block_restart_interval: usize,
    bloom_bits_per_key: usize,
    block_cache_size_bytes: usize,
    compression: Compression,
    target_file_size_bytes: u64,
    level_count: usize,
    level0_triggers: (usize, usize, usize),
    level1_size_bytes_max: u64,
    level_size_ratio: u64,
    manifest_size_bytes_max: u64,
    compaction_style: CompactionStyle,
    runs_per_level: usize,
    merge_fraction: f64,
    compaction_threads: usize,
    bloom_allocation: BloomAllocation,
    /// Membuffer on/off, its percent of the write buffer, its partitions and drainers.
    membuffer: (bool, usize, usize, usize),
    /// A drainer bypasses each write buffer's Membuffer as soon as it can (test-only option).
    membuffer_bypass_at_once: bool,
}

impl OptionSet {
    /// The reference: default options on `MemFs`.
    fn reference() -> OptionSet {
        let defaults = Options::default();
        OptionSet {
            std_fs: false,
            table_read_mode: defaults.table_read_mode,
            lookup_threads: defaults.lookup_threads,
            wal_memory_mapped: defaults.wal_memory_mapped,
            write_buffer_size_bytes: defaults.write_buffer_size_bytes,
            max_immutable_memtables: defaults.max_immutable_memtables,
            block_size_bytes: defaults.block_size_bytes,
            block_restart_interval: defaults.block_restart_interval,
            bloom_bits_per_key: defaults.bloom_bits_per_key,
            block_cache_size_bytes: defaults.block_cache_size_bytes,
            compression: defaults.compression,
            target_file_size_bytes: defaults.target_file_size_bytes,
            level_count: defaults.level_count,
            level0_triggers: (
                defaults.level0_compaction_trigger,
                defaults.level0_slowdown_trigger,
                defaults.level0_stop_trigger,
            ),
            level1_size_bytes_max: defaults.level1_size_bytes_max,
            level_size_ratio: defaults.level_size_ratio,
            manifest_size_bytes_max: defaults.manifest_size_bytes_max,
            compaction_style: defaults.compaction_style,
            runs_per_level: defaults.runs_per_level,
            merge_fraction: defaults.merge_fraction,
            compaction_threads: defaults.compaction_threads,
            bloom_allocation: defaults.bloom_allocation,
            membuffer: (
                defaults.membuffer_enabled,
                defaults.membuffer_percent,
                defaults.membuffer_partitions,
                defaults.membuffer_drainers,
            ),
            membuffer_bypass_at_once: false,
        }
    }

    /// A random set, mostly small so that flushes, compactions and MANIFEST rollovers happen
    /// within a short sequence.
    fn random(seed: u64) -> OptionSet {
        let mut rng = SmallRng::seed_from_u64(seed);
        let compaction_trigger = rng.gen_range(1..=4);
        let slowdown_trigger = compaction_trigger + rng.gen_range(0..4);
        let std_fs = rng.gen_ratio(1, 3);
        OptionSet {
            std_fs,
            wal_memory_mapped: std_fs && rng.gen_bool(0.5),
            write_buffer_size_bytes: 1 << rng.gen_range(10..17),
            max_immutable_memtables: rng.gen_range(1..=4),
            block_size_bytes: 1 << rng.gen_range(6..13),
            block_restart_interval: rng.gen_range(1..=16),
            bloom_bits_per_key: [0, 1, 5, 10, 20][rng.gen_range(0..5)],
            block_cache_size_bytes: [0, 4096, 64 * 1024, 8 << 20][rng.gen_range(0..4)],
            compression: if rng.gen_bool(0.5) {
                Compression::Lz4
            } else {
                Compression::None
            },
            target_file_size_bytes: 1 << rng.gen_range(10..17),
            level_count: rng.gen_range(2..=7),
            level0_triggers: (
                compaction_trigger,
                slowdown_trigger,
                slowdown_trigger + rng.gen_range(1..8),
            ),
            level1_size_bytes_max: 1 << rng.gen_range(10..20),
            level_size_ratio: rng.gen_range(2..=10),
            manifest_size_bytes_max: 1 << rng.gen_range(10..16),
            // The policy axis: every style, unless the matrix pins one (common::env_style).
            compaction_style: common::env_style().unwrap_or(
                [
                    CompactionStyle::Leveling,
                    CompactionStyle::Tiering,
                    CompactionStyle::LazyLeveling,
                ][rng.gen_range(0..3)],
            ),
            runs_per_level: rng.gen_range(1..=5),
            merge_fraction: [0.3, 0.5, 1.0][rng.gen_range(0..3)],
            compaction_threads: rng.gen_range(1..=3),
            bloom_allocation: if rng.gen_bool(0.5) {
                BloomAllocation::Monkey
            } else {
                BloomAllocation::Uniform
            },
            membuffer: (
                rng.gen_bool(0.5),
                rng.gen_range(1..=50),
                rng.gen_range(1..=32),
                rng.gen_range(0..=2),
            ),
            // Drawn last so that adding it left the other fields' draws unchanged.
            table_read_mode: if rng.gen_bool(0.5) {
                TableReadMode::Mmap
            } else {
                TableReadMode::Pread
            },
            lookup_threads: [0, 1, 3][rng.gen_range(0..3)],
            membuffer_bypass_at_once: rng.gen_bool(0.25),
        }
    }

    fn options(&self, file_system: Arc<dyn FileSystem>) -> Options {
        let mut options = Options::default();
        options.file_system = file_system;
        options.wal_memory_mapped = self.wal_memory_mapped;
        options.write_buffer_size_bytes = self.write_buffer_size_bytes;
        options.max_immutable_memtables = self.max_immutable_memtables;
        options.block_size_bytes = self.block_size_bytes;
        options.block_restart_interval = self.block_restart_interval;
        options.bloom_bits_per_key = self.bloom_bits_per_key;
        options.block_cache_size_bytes = self.block_cache_size_bytes;
        options.compression = self.compression;
        options.target_file_size_bytes = self.target_file_size_bytes;
        options.level_count = self.level_count;
        options.level0_compaction_trigger = self.level0_triggers.0;
        options.level0_slowdown_trigger = self.level0_triggers.1;
        options.level0_stop_trigger = self.level0_triggers.2;
        options.level1_size_bytes_max = self.level1_size_bytes_max;
        options.level_size_ratio = self.level_size_ratio;
        options.manifest_size_bytes_max = self.manifest_size_bytes_max;
        options.compaction_style = self.compaction_style;
        options.runs_per_level = self.runs_per_level;
        options.merge_fraction = self.merge_fraction;
        options.compaction_threads = self.compaction_threads;
        options.bloom_allocation = self.bloom_allocation;
        (
            options.membuffer_enabled,
            options.membuffer_percent,
            options.membuffer_partitions,
            options.membuffer_drainers,
        ) = self.membuffer;
        options.membuffer_bypass_at_once = self.membuffer_bypass_at_once;
        options.table_read_mode = self.table_read_mode;
        options.lookup_threads = self.lookup_threads;
        options
    }
}

/// Runs `ops` under `set`; returns every operation's outcome and, last, the full contents
/// after a final reopen — or the step and error of the first failure.
fn run(ops: &[Op], set: &OptionSet) -> Result<Vec<Outcome>, String> {
    let scratch = set.std_fs.then(|| TempDir::new("metamorphic"));
    let (file_system, path): (Arc<dyn FileSystem>, PathBuf) = match &scratch {
        Some(directory) => (Arc::new(StdFs), directory.path().join("db")),
        None => (Arc::new(MemFs::new()), PathBuf::from("/metamorphic-db")),
    };
    let open = || Db::open(&path, set.options(Arc::clone(&file_system)));
    let mut db = Some(open().map_err(|e| format!("open: {e}"))?);
    let mut snapshots = Snapshots::new();
    let mut trace = Vec::with_capacity(ops.len() + 1);
    for (step, op) in ops.iter().enumerate() {
        let fail = |message: String| format!("step {step} ({op:?}): {message}");
        if let Op::Reopen = op {
            snapshots.clear();
            if let Some(db) = db.take() {
                db.close().map_err(|e| fail(format!("close: {e}")))?;
            }
            db = Some(open().map_err(|e| fail(format!("open: {e}")))?);
            trace.push(Outcome::Done);
            continue;
        }
        let current = db.as_ref().ok_or_else(|| fail("no db".into()))?;
        let outcome = execute(current, &mut snapshots, op).map_err(|e| fail(e.to_string()))?;
        trace.push(outcome);
    }
    snapshots.clear();
    if let Some(db) = db.take() {
        db.close().map_err(|e| format!("final close: {e}"))?;
    }
    let db = open().map_err(|e| format!("final open: {e}"))?;
    let contents = common::try_scan(&db).map_err(|e| format!("final scan: {e}"))?;
    trace.push(Outcome::Entries(contents.into_iter().collect()));
    db.close().map_err(|e| format!("last close: {e}"))?;
    Ok(trace)
}

/// Compares `set` with the reference on `ops`: the first difference, if any.
fn compare(ops: &[Op], reference: &OptionSet, set: &OptionSet) -> Result<(), String> {
    let expected = run(ops, reference).map_err(|e| format!("reference run failed: {e}"))?;
    compare_with(ops, &expected, set)
}

/// Compares `set`'s run of `ops` with the reference trace `expected`.
fn compare_with(ops: &[Op], expected: &[Outcome], set: &OptionSet) -> Result<(), String> {
    let got = run(ops, set)?;
    if let Some(step) = (0..expected.len().max(got.len())).find(|&i| expected.get(i) != got.get(i))
    {
        let op = ops
            .get(step)
            .map_or_else(|| "final scan".to_string(), |op| format!("{op:?}"));
        return Err(format!(
            "step {step} ({op}): reference {:?}, this set {:?}",
            expected.get(step),
            got.get(step)
        ));
    }
    Ok(())
}

fn check_seed(seed: u64, count: usize, configs: u64) {
    let ops = generate(seed, count, false);
    let reference = OptionSet::reference();
    // The reference trace is computed once per sequence; shrinking reruns both sides.
    let expected = run(&ops, &reference)
        .unwrap_or_else(|error| panic!("seed {seed}: reference run failed: {error}"));
    for config in 0..configs {
        let set = OptionSet::random(seed.wrapping_mul(31).wrapping_add(config));
        if let Err(message) = compare_with(&ops, &expected, &set) {
            let shrunk = shrink(ops.clone(), &|candidate| {
                compare(candidate, &reference, &set).is_err()
            });
            let shrunk_message = compare(&shrunk, &reference, &set).err().unwrap_or_default();
            panic!(
                "metamorphic difference, seed {seed}: {message}\n\
                 reference options: {reference:#?}\nthis option set: {set:#?}\n\
                 shrunk to {} operations ({shrunk_message}):\n{shrunk:#?}\n\
                 replay: CAIRN_METAMORPHIC_SEED={seed} cargo test -p cairn --test metamorphic",
                shrunk.len()
            );
        }
    }
}

#[test]
fn metamorphic_option_sets_agree() {
    let seeds: u64 = common::env_or("CAIRN_METAMORPHIC_SEEDS", 2);
    let count: usize = common::env_or("CAIRN_METAMORPHIC_OPS", 800);
    let configs: u64 = common::env_or("CAIRN_METAMORPHIC_CONFIGS", 3);
    let seed_list: Vec<u64> = match std::env::var("CAIRN_METAMORPHIC_SEED") {
        Ok(seed) => vec![seed
            .parse()
            .expect("CAIRN_METAMORPHIC_SEED must be a number")],
        Err(_) => (0..seeds).map(|index| 0x3e7a_0000 + index).collect(),
    };
    for seed in seed_list {
        check_seed(seed, count, configs);
    }
}
