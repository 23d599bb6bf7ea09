//! `cairn::MemStore` (the in-memory Nibble-style store) behind the engine trait.
//!
//! No durability and no ordered iteration: scans are reported unsupported (the runner skips
//! workloads that need them before they start), `flush` has nothing to do.

use super::{unsupported_scan, Engine, EngineConfig};
use crate::error::Result;
use cairn::{MemStore, MemStoreOptions};

/// A MemStore with the capacity chosen by `--memstore_capacity`.
#[derive(Debug)]
pub struct MemStoreEngine {
    store: MemStore,
}

fn options(config: &EngineConfig) -> MemStoreOptions {
    // Everything but the capacity stays at MemStore's defaults: the comparison is of the store
    // as a user gets it.
    MemStoreOptions {
        capacity_bytes: config.memstore_capacity,
        ..MemStoreOptions::default()
    }
}

/// The option mapping printed at startup.
pub fn mapping(config: &EngineConfig) -> Vec<String> {
    let options = options(config);
    vec![
        format!(
            "capacity_bytes={} ({} MiB of log; the index is extra)",
            options.capacity_bytes,
            options.capacity_bytes >> 20
        ),
        format!(
            "heads={} segment_bytes={} block_bytes={}",
            options.heads, options.segment_bytes, options.block_bytes
        ),
        format!(
            "compaction_threads={} trigger_free_fraction={} background_max_utilization={} eager_max_utilization={}",
            options.compaction_threads,
            options.compaction_trigger_free_fraction,
            options.background_max_utilization,
            options.eager_max_utilization
        ),
        format!(
            "resident_free_bytes={} free_decay={:?}",
            options.resident_free_bytes, options.free_decay
        ),
        format!(
            "index_partitions={} index_initial_buckets={}",
            options.index_partitions, options.index_initial_buckets
        ),
        "get copies the value out (a fresh Vec per get); update = MemStore::update (atomic)"
            .to_string(),
        "no WAL, no durability; scans unsupported (no ordered iteration)".to_string(),
    ]
}

impl MemStoreEngine {
    /// Creates an empty store (the directory is not used).
    pub fn open(config: &EngineConfig) -> Result<Self> {
        Ok(MemStoreEngine {
            store: MemStore::new(options(config))?,
        })
    }
}

impl Engine for MemStoreEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.store.put(key, value)?)
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        match self.store.get(key)? {
            Some(found) => {
                *value = found;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.store.delete(key)?;
        Ok(())
    }

    fn scan(
        &self,
        _start: &[u8],
        _count: usize,
        _visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        Err(unsupported_scan("memstore"))
    }

    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut found = false;
        self.store.update(key, |current| {
            found = current.is_some();
            Some(super::derive_value(current, value))
        })?;
        Ok(found)
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn counters(&self) -> Vec<(String, u64)> {
        // Only cumulative counters: the runner reports the change over each phase.
        let stats = self.store.stats();
        vec![
            ("compactions".to_string(), stats.compactions),
            ("relocated_bytes".to_string(), stats.relocated_bytes),
            ("writer_wait_nanos".to_string(), stats.writer_wait_nanos),
            ("full_errors".to_string(), stats.full_errors),
        ]
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the store stops and joins its compaction threads.
        drop(self);
        Ok(())
    }
}
