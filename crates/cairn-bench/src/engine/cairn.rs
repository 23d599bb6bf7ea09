//! cairn through its public `Db` API.

use super::{Engine, EngineConfig};
use crate::error::Result;
use cairn::{Compression, Db, Options, ReadOptions, TableReadMode, WriteOptions};
use std::path::Path;

/// A cairn database.
#[derive(Debug)]
pub struct CairnEngine {
    db: Db,
    write_options: WriteOptions,
    /// `cairn-striped`: the lock-striped baseline instead of `Db::update`.
    striped_read_modify_write: bool,
}

fn options(config: &EngineConfig) -> Options {
    let (l0_trigger, l0_slowdown, l0_stop) = config.level0_triggers;
    let mut options = Options {
        write_buffer_size_bytes: config.write_buffer_size,
        max_immutable_memtables: config.max_immutable_memtables,
        wal_enabled: config.wal,
        block_size_bytes: config.block_size,
        bloom_bits_per_key: config.bloom_bits,
        block_cache_size_bytes: config.block_cache_size,
        // Compression is off for every engine: the comparison is about the engines'
        // structure, not codecs.
        compression: Compression::None,
        target_file_size_bytes: config.target_file_size,
        level0_compaction_trigger: l0_trigger,
        level0_slowdown_trigger: l0_slowdown,
        level0_stop_trigger: l0_stop,
        level1_size_bytes_max: config.level1_size,
        ..Options::default()
    };
    options.table_read_mode = if config.mmap_reads {
        TableReadMode::Mmap
    } else {
        TableReadMode::Pread
    };
    options.lookup_threads = config.lookup_threads;
    options
}

/// The option mapping printed at startup.
pub fn mapping(config: &EngineConfig) -> Vec<String> {
    let options = options(config);
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
        "background: 1 flush thread + 1 compaction thread (fixed)".to_string(),
        format!("verify_checksums={}", options.verify_checksums),
        format!(
            "table_read_mode={:?} lookup_threads={}",
            options.table_read_mode, options.lookup_threads
        ),
    ]
}

impl CairnEngine {
    /// Opens (creates) a database in `dir`.
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<Self> {
        let db = Db::open(dir, options(config))?;
        Ok(CairnEngine {
            db,
            write_options: WriteOptions { sync: config.sync },
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
        Ok(self.db.put_with(&WriteOptions { sync: true }, key, value)?)
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
        match self.db.get(key)? {
            Some(found) => {
                *value = found;
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
        let mut cursor = self
            .db
            .iter(&ReadOptions::default(), None, Some(start), None)?;
        cursor.seek(start);
        let mut seen = 0;
        while seen < count && cursor.valid() {
            visit(cursor.key(), cursor.value());
            seen += 1;
            cursor.next();
        }
        cursor.status()?;
        Ok(seen)
    }

    fn flush(&self) -> Result<()> {
        Ok(self.db.flush()?)
    }

    fn counters(&self) -> Vec<(String, u64)> {
        self.db
            .stats()
            .counters
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect()
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.db.close()?)
    }
}
