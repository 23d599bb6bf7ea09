//! RocksDB, built from source by the `rocksdb` crate (feature `rocksdb`).

use super::{Engine, EngineConfig};
use crate::error::Result;
use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, WriteOptions, DB};
use std::path::Path;

/// A RocksDB database.
pub struct RocksEngine {
    db: DB,
    write_options: WriteOptions,
    wal: bool,
    // Kept alive for as long as the database uses it.
    _cache: Cache,
}

impl std::fmt::Debug for RocksEngine {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("RocksEngine")
    }
}

/// Background jobs: one flush and one compaction, like cairn's two threads.
const BACKGROUND_JOBS: i32 = 2;

fn clamp_i32(value: usize) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// The option mapping printed at startup.
pub fn mapping(config: &EngineConfig) -> Vec<String> {
    let (l0_trigger, l0_slowdown, l0_stop) = config.level0_triggers;
    vec![
        format!("write_buffer_size={}", config.write_buffer_size),
        format!(
            "max_write_buffer_number={} (1 active + {} sealed, as cairn)",
            config.max_immutable_memtables + 1,
            config.max_immutable_memtables
        ),
        format!("block_cache=LRU {}", config.block_cache_size),
        format!(
            "bloom_filter bits_per_key={} (full filter; none if 0)",
            config.bloom_bits
        ),
        format!("block_size={}", config.block_size),
        "compression=none (crate built without codecs)".to_string(),
        format!("disable_wal={} sync={}", !config.wal, config.sync),
        format!("target_file_size_base={}", config.target_file_size),
        format!("max_bytes_for_level_base={}", config.level1_size),
        "max_bytes_for_level_multiplier=10, level_compaction_dynamic_level_bytes=false".to_string(),
        format!("level0 triggers compaction/slowdown/stop={l0_trigger}/{l0_slowdown}/{l0_stop}"),
        format!("max_background_jobs={BACKGROUND_JOBS}"),
        "verify_checksums=true on reads (RocksDB default)".to_string(),
        format!(
            "allow_mmap_reads={} (--mmap_reads; RocksDB's default is false)",
            config.mmap_reads.unwrap_or(false)
        ),
        "other options: RocksDB defaults".to_string(),
    ]
}

impl RocksEngine {
    /// Opens (creates) a database in `dir`.
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<Self> {
        let (l0_trigger, l0_slowdown, l0_stop) = config.level0_triggers;
        let cache = Cache::new_lru_cache(config.block_cache_size);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_block_size(config.block_size);
        if config.bloom_bits > 0 {
            table.set_bloom_filter(config.bloom_bits as f64, false);
        }
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_block_based_table_factory(&table);
        options.set_write_buffer_size(config.write_buffer_size);
        options.set_max_write_buffer_number(clamp_i32(config.max_immutable_memtables + 1));
        options.set_compression_type(DBCompressionType::None);
        options.set_target_file_size_base(config.target_file_size);
        options.set_max_bytes_for_level_base(config.level1_size);
        options.set_max_bytes_for_level_multiplier(10.0);
        options.set_level_compaction_dynamic_level_bytes(false);
        options.set_level_zero_file_num_compaction_trigger(clamp_i32(l0_trigger));
        options.set_level_zero_slowdown_writes_trigger(clamp_i32(l0_slowdown));
        options.set_level_zero_stop_writes_trigger(clamp_i32(l0_stop));
        options.set_max_background_jobs(BACKGROUND_JOBS);
        if let Some(mmap_reads) = config.mmap_reads {
            options.set_allow_mmap_reads(mmap_reads);
        }
        let db = DB::open(&options, dir)?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(config.sync);
        write_options.disable_wal(!config.wal);
        Ok(RocksEngine {
            db,
            write_options,
            wal: config.wal,
            _cache: cache,
        })
    }
}

impl Engine for RocksEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.write_options)?)
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        match self.db.get_pinned(key)? {
            Some(found) => {
                value.clear();
                value.extend_from_slice(&found);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(self.db.delete_opt(key, &self.write_options)?)
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut cursor = self.db.raw_iterator();
        cursor.seek(start);
        let mut seen = 0;
        while seen < count && cursor.valid() {
            if let (Some(key), Some(value)) = (cursor.key(), cursor.value()) {
                visit(key, value);
            }
            seen += 1;
            // As db_bench: no move past the last entry asked for.
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

    /// The memtable is flushed first, then every level compacted down (RocksDB's
    /// `CompactRange` over the whole key space waits for its own work).
    fn compact(&self) -> Result<()> {
        self.db.flush()?;
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let mut counters = Vec::new();
        for property in [
            "rocksdb.num-immutable-mem-table",
            "rocksdb.total-sst-files-size",
            "rocksdb.num-running-compactions",
            "rocksdb.actual-delayed-write-rate",
        ] {
            if let Ok(Some(value)) = self.db.property_int_value(property) {
                counters.push((property.to_string(), value));
            }
        }
        counters
    }

    fn close(self: Box<Self>) -> Result<()> {
        // RocksDB closes on drop; with the WAL off, flush first so a clean close keeps data.
        if !self.wal {
            self.db.flush()?;
        }
        drop(self);
        Ok(())
    }
}
