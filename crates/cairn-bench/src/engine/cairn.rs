//! cairn through its public `Db` API.

use super::{Engine, EngineConfig};
use crate::error::{BenchError, Result};
use cairn::{Db, LevelOptions, Options, ReadOptions, TableReadMode, WriteOptions};
use std::path::Path;
use std::time::{Duration, Instant};

/// A cairn database.
#[derive(Debug)]
pub struct CairnEngine {
    db: Db,
    write_options: WriteOptions,
    /// `cairn-striped`: the lock-striped baseline instead of `Db::update`.
    striped_read_modify_write: bool,
}

fn options(config: &EngineConfig, name: &str) -> Options {
    let (l0_trigger, l0_slowdown, l0_stop) = config.level0_triggers;
    let mut options = Options::default();
    options.write_buffer_size_bytes = config.write_buffer_size;
    options.max_immutable_memtables = config.max_immutable_memtables;
    options.wal_enabled = config.wal;
    options.block_size_bytes = config.block_size;
    options.bloom_bits_per_key = config.bloom_bits;
    options.block_cache_size_bytes = config.block_cache_size;
    // Off unless `--compression_type` asks: the engine comparison is about structure, not
    // codecs (the other engines run uncompressed).
    options.compression = config.compression;
    options.target_file_size_bytes = config.target_file_size;
    options.level0_compaction_trigger = l0_trigger;
    options.level0_slowdown_trigger = l0_slowdown;
    options.level0_stop_trigger = l0_stop;
    options.level1_size_bytes_max = config.level1_size;
    let shape = &config.shape;
    options.compaction_style = shape.style;
    options.level_size_ratio = shape.fanout;
    options.runs_per_level = shape.runs_per_level;
    options.merge_fraction = shape.merge_fraction;
    options.bloom_allocation = shape.bloom_allocation;
    options.level_count = shape.levels;
    options.compaction_threads = shape.compaction_threads;
    let levels = shape
        .level_block_sizes
        .len()
        .max(shape.level_compression.len());
    options.level_options = (0..levels)
        .map(|index| {
            let mut level = LevelOptions::default();
            level.block_size_bytes = shape.level_block_sizes.get(index).copied();
            level.compression = shape.level_compression.get(index).copied();
            level
        })
        .collect();
    match name {
        "cairn-nomembuffer" => options.membuffer_enabled = false,
        "cairn-membuffer" | "cairn-simpleinsert" | "cairn-membuffer-move" => {
            options.membuffer_enabled = true;
        }
        "cairn-membuffer-writerdrain" => {
            options.membuffer_enabled = true;
            options.membuffer_drainers = 0;
        }
        "cairn-membuffer-drainer" => {
            options.membuffer_enabled = true;
            options.membuffer_drainers = 1;
        }
        "cairn-membuffer-nobypass" => {
            options.membuffer_enabled = true;
            options.membuffer_bypass_scans_per_write = 0;
        }
        // The shape variants override `--compaction_style` (the other shape flags apply), so
        // one run can compare shapes phase by phase (`--interleave_phases`).
        "cairn-leveling" => options.compaction_style = cairn::CompactionStyle::Leveling,
        "cairn-tiering" => options.compaction_style = cairn::CompactionStyle::Tiering,
        "cairn-lazy" => options.compaction_style = cairn::CompactionStyle::LazyLeveling,
        _ => {}
    }
    #[cfg(feature = "flodb-variants")]
    {
        options.membuffer_simple_insert = name == "cairn-simpleinsert";
        options.membuffer_always_move = name == "cairn-membuffer-move";
        options.drop_sealed_memtables = config.drop_sealed;
    }
    match config.mmap_reads {
        Some(true) => options.table_read_mode = TableReadMode::Mmap,
        Some(false) => options.table_read_mode = TableReadMode::Pread,
        None => {}
    }
    if let Some(wal_mmap) = config.wal_mmap {
        options.wal_memory_mapped = wal_mmap;
    }
    options.lookup_threads = config.lookup_threads;
    if config.membuffer_partitions > 0 {
        options.membuffer_partitions = config.membuffer_partitions;
    }
    // After the variants: the flag is what a run asks for, whichever variant it names.
    if let Some(drainers) = config.membuffer_drainers {
        options.membuffer_drainers = drainers;
    }
    if let Some(percent) = config.membuffer_percent {
        options.membuffer_percent = percent;
    }
    options
}

/// Polls `db` until no sealed memtable waits, no level's score is ≥ 1 and no flush or
/// compaction finished for a second (at most ten minutes).
fn settle(db: &Db) -> Result<()> {
    let quiet_for = Duration::from_secs(1);
    let give_up = Instant::now() + Duration::from_secs(600);
    let progress = |stats: &cairn::Stats| {
        (
            stats.counter("flushes"),
            stats.counter("compactions"),
            stats.counter("trivial_moves"),
        )
    };
    let mut last = progress(&db.stats());
    let mut quiet_since = Instant::now();
    while Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(100));
        let stats = db.stats();
        let now = progress(&stats);
        let pending =
            stats.immutable_memtables > 0 || stats.levels.iter().any(|level| level.score >= 1.0);
        if now != last || pending {
            last = now;
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= quiet_for {
            return Ok(());
        }
    }
    Err(BenchError::new(
        "settle: background work did not stop within ten minutes",
    ))
}

/// `L0:2r/2f/120M L1:1r/3f/16M ...`: runs, files and MiB of each non-empty level.
fn describe_levels(levels: &[cairn::LevelStats]) -> String {
    let mut text = String::new();
    for (index, level) in levels.iter().enumerate().filter(|(_, l)| l.files > 0) {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&format!(
            "L{index}:{}r/{}f/{:.0}M",
            level.runs.len(),
            level.files,
            level.bytes as f64 / f64::from(1 << 20)
        ));
    }
    if text.is_empty() {
        text.push_str("empty");
    }
    text
}

/// The option mapping printed at startup.
pub fn mapping(config: &EngineConfig) -> Vec<String> {
    mapping_for("cairn", config)
}

/// The option mapping of cairn engine variant `name`.
pub fn mapping_for(name: &str, config: &EngineConfig) -> Vec<String> {
    let options = options(config, name);
    vec![
        format!(
            "write_buffer_size_bytes={}",
            options.write_buffer_size_bytes
        ),
        format!(
            "max_immutable_memtables={}",
            options.max_immutable_memtables
        ),
        format!("block_cache_size_bytes={}", options.block_cache_size_bytes),
        format!("bloom_bits_per_key={}", options.bloom_bits_per_key),
        format!("block_size_bytes={}", options.block_size_bytes),
        format!("compression={:?}", options.compression),
        format!(
            "wal_enabled={} wal_memory_mapped={} sync={}",
            options.wal_enabled, options.wal_memory_mapped, config.sync
        ),
        format!("target_file_size_bytes={}", options.target_file_size_bytes),
        format!("level1_size_bytes_max={}", options.level1_size_bytes_max),
        format!(
            "level0 triggers compaction/slowdown/stop={}/{}/{}",
            options.level0_compaction_trigger,
            options.level0_slowdown_trigger,
            options.level0_stop_trigger
        ),
        format!(
            "shape: {:?} fanout={} runs_per_level={} merge_fraction={} levels={}",
            options.compaction_style,
            options.level_size_ratio,
            options.runs_per_level,
            options.merge_fraction,
            options.level_count
        ),
        format!(
            "bloom_allocation={:?} level_block_sizes={:?} level_compression={:?}",
            options.bloom_allocation,
            config.shape.level_block_sizes,
            config.shape.level_compression
        ),
        format!(
            "background: {} flush thread + {} compaction threads",
            options.flush_threads, options.compaction_threads
        ),
        format!("verify_checksums={}", options.verify_checksums),
        format!(
            "membuffer_enabled={} membuffer_percent={} membuffer_partitions={} membuffer_drainers={} drop_sealed={}",
            options.membuffer_enabled,
            options.membuffer_percent,
            options.membuffer_partitions,
            options.membuffer_drainers,
            config.drop_sealed
        ),
        format!(
            "table_read_mode={:?} lookup_threads={}",
            options.table_read_mode, options.lookup_threads
        ),
    ]
}

impl CairnEngine {
    /// Opens (creates) a database in `dir`.
    pub fn open(dir: &Path, config: &EngineConfig, name: &str) -> Result<Self> {
        let db = Db::open(dir, options(config, name))?;
        Ok(CairnEngine {
            db,
            write_options: WriteOptions::with_sync(config.sync),
            striped_read_modify_write: false,
        })
    }

    /// Makes `read_modify_write` the lock-striped get + put baseline (engine
    /// `cairn-striped`), to compare cairn's optimistic RMW with it on the same engine.
    pub fn use_striped_read_modify_write(&mut self) {
        self.striped_read_modify_write = true;
    }
}

impl Engine for CairnEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_with(&self.write_options, key, value)?)
    }

    fn put_synced(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self
            .db
            .put_with(&WriteOptions::with_sync(true), key, value)?)
    }

    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        if self.striped_read_modify_write {
            return super::striped_read_modify_write(self, key, value);
        }
        // cairn's optimistic, atomic read-modify-write (cLSM Algorithm 3).
        let mut found = false;
        self.db.update(key, |current| {
            found = current.is_some();
            Some(super::derive_value(current, value))
        })?;
        Ok(found)
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        // The pinned read, copied into the caller's buffer as the RocksDB engine does with
        // `get_pinned`: one copy, no allocation once the buffer has grown.
        match self.db.get_pinned(key)? {
            Some(found) => {
                value.clear();
                value.extend_from_slice(&found);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<usize> {
        Ok(self.db.multi_get(keys)?.iter().flatten().count())
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_with(&self.write_options, key)?)
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut cursor = self.db.cursor(&ReadOptions::default(), Some(start), None)?;
        cursor.seek(start);
        let mut seen = 0;
        while seen < count && cursor.valid() {
            visit(cursor.key(), cursor.value());
            seen += 1;
            // As db_bench: no move past the last entry asked for (a seek with
            // --seek_nexts 0 reads one entry and never calls next).
            if seen < count {
                cursor.next();
            }
        }
        cursor.status()?;
        Ok(seen)
    }

    fn flush(&self) -> Result<()> {
        Ok(self.db.flush()?)
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let stats = self.db.stats();
        let mut counters: Vec<(String, u64)> = stats
            .counters
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
        // Every data-block access of a read goes through the cache or, on a mapped table,
        // reads in place (index and filter are held in memory), so hits + misses + mapped
        // reads per point read is the blocks it read.
        counters.push(("block_cache_hits".to_string(), stats.block_cache_hits));
        counters.push(("block_cache_misses".to_string(), stats.block_cache_misses));
        counters.push(("block_mapped_reads".to_string(), stats.block_mapped_reads));
        // A level, not a count: a phase's delta is what it left undrained at its end when it
        // started from an empty Membuffer (a fill), which FloDB's Fig. 17 asks to report.
        counters.push((
            "membuffer_undrained_at_end".to_string(),
            stats.membuffer_undrained,
        ));
        counters
    }

    fn compact(&self) -> Result<()> {
        Ok(self.db.compact_range(None, None)?)
    }

    fn settle(&self) -> Result<()> {
        settle(&self.db)
    }

    fn shape(&self) -> Option<String> {
        Some(describe_levels(&self.db.level_stats()))
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.db.close()?)
    }
}
