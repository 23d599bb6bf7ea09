//! Tuning knobs: `Options` for a database, `ReadOptions` and `WriteOptions` per call.
//!
//! Defaults are chosen for a small multicore machine with an SSD. Every limit is an option and
//! `Options::validate` rejects values that cannot work, with a message naming the option.

use crate::error::{Error, Result};
use crate::fs::{FileSystem, StdFs};
use std::sync::Arc;

pub use crate::sstable::Compression;
pub use crate::wal::WalRecovery;

/// Options fixed when a database is opened.
#[derive(Debug, Clone)]
// Independent on/off switches (WAL, sync, checksums, ...), not a state machine in disguise.
#[allow(clippy::struct_excessive_bools)]
pub struct Options {
    /// The file system all files go through.
    pub file_system: Arc<dyn FileSystem>,
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Fail if a database already exists.
    pub error_if_exists: bool,
    /// Size of a write buffer (memtable) at which it is sealed and queued for flush. Each
    /// memtable also has a key index of 1/8 of this (128 MiB at most), which the system
    /// supplies as it is touched.
    pub write_buffer_size_bytes: usize,
    /// Sealed memtables that may wait for flush before writers stall.
    pub max_immutable_memtables: usize,
    /// Write-ahead logging; off means writes since the last flush are lost on a crash.
    pub wal_enabled: bool,
    /// Write the WAL through a shared memory mapping where the file system supports it
    /// (`FileSystem::create_log`): an append is a copy into the page cache instead of a
    /// `write(2)`, with the same durability (survives a process crash; `sync` for power loss).
    pub wal_memory_mapped: bool,
    /// What recovery does with a WAL whose unsynced tail has a hole (see [`WalRecovery`]).
    pub wal_recovery: WalRecovery,
    /// Target size of an `SSTable` data block before compression.
    pub block_size_bytes: usize,
    /// Entries between restart points in a data block.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key (0 disables filters).
    pub bloom_bits_per_key: usize,
    /// Capacity of the shared block cache.
    pub block_cache_size_bytes: usize,
    /// Block compression.
    pub compression: Compression,
    /// Target size of an `SSTable` written by compaction.
    pub target_file_size_bytes: u64,
    /// Number of levels (level 0 plus deeper levels).
    pub level_count: usize,
    /// Level-0 file count that triggers a compaction.
    pub level0_compaction_trigger: usize,
    /// Level-0 file count at which each write is delayed a little.
    pub level0_slowdown_trigger: usize,
    /// Level-0 file count at which writes wait for compaction.
    pub level0_stop_trigger: usize,
    /// Maximum total bytes of level 1.
    pub level1_size_bytes_max: u64,
    /// Growth factor between consecutive levels (the size ratio / fanout T).
    pub level_size_ratio: u64,
    /// MANIFEST size after which a fresh one is written.
    pub manifest_size_bytes_max: u64,
    /// Verify block checksums on every read (always done for compaction inputs).
    pub verify_checksums: bool,
    /// How `SSTable` bytes are read: `pread(2)` or a memory mapping (see [`TableReadMode`]).
    pub table_read_mode: TableReadMode,
    /// Threads that probe sorted runs concurrently when a point lookup must search more than
    /// one (0, the default: probe them one after another). Helps when blocks come from disk
    /// (the waits overlap); with cached blocks the hand-offs cost more than they save.
    pub lookup_threads: usize,
    /// A hook asked, when compaction rewrites a key, whether to keep, remove or change its
    /// newest value (for instance to expire keys); see `compaction::CompactionFilter`.
    pub compaction_filter: Option<Arc<dyn crate::compaction::CompactionFilter>>,
    /// Test-only: the largest WAL record payload, [`crate::wal::RECORD_PAYLOAD_BYTES_MAX`]
    /// unless lowered. Writers refuse larger batches and recovery reads with the same limit,
    /// so a test reaches the limit with kilobytes instead of a gigabyte.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub wal_record_payload_bytes_max: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            file_system: Arc::new(StdFs),
            create_if_missing: true,
            error_if_exists: false,
            write_buffer_size_bytes: 64 * 1024 * 1024,
            max_immutable_memtables: 4,
            wal_enabled: true,
            wal_memory_mapped: true,
            wal_recovery: WalRecovery::PointInTime,
            block_size_bytes: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            block_cache_size_bytes: 64 * 1024 * 1024,
            compression: Compression::None,
            target_file_size_bytes: 64 * 1024 * 1024,
            level_count: 7,
            level0_compaction_trigger: 4,
            level0_slowdown_trigger: 12,
            level0_stop_trigger: 20,
            level1_size_bytes_max: 256 * 1024 * 1024,
            level_size_ratio: 10,
            manifest_size_bytes_max: 64 * 1024 * 1024,
            verify_checksums: true,
            table_read_mode: TableReadMode::default(),
            lookup_threads: 0,
            compaction_filter: None,
            #[cfg(feature = "testing")]
            wal_record_payload_bytes_max: crate::wal::RECORD_PAYLOAD_BYTES_MAX,
        }
    }
}

impl Options {
    /// The largest WAL record payload (and so encoded batch) this database writes and reads.
    pub(crate) fn wal_record_payload_bytes_max(&self) -> usize {
        #[cfg(feature = "testing")]
        return self.wal_record_payload_bytes_max;
        #[cfg(not(feature = "testing"))]
        return crate::wal::RECORD_PAYLOAD_BYTES_MAX;
    }

    /// Options that run everything in memory (for tests and examples).
    pub fn in_memory() -> Self {
        Options {
            file_system: Arc::new(crate::fs::MemFs::new()),
            ..Options::default()
        }
    }

    /// Rejects option combinations that cannot work.
    pub fn validate(&self) -> Result<()> {
        let check = |ok: bool, message: &str| {
            if ok {
                Ok(())
            } else {
                Err(Error::InvalidArgument(message.to_string()))
            }
        };
        check(
            self.write_buffer_size_bytes >= 1024,
            "write_buffer_size_bytes must be at least 1024",
        )?;
        check(
            self.max_immutable_memtables >= 1,
            "max_immutable_memtables must be at least 1",
        )?;
        check(
            (64..=64 * 1024 * 1024).contains(&self.block_size_bytes),
            "block_size_bytes must be between 64 and 64 MiB",
        )?;
        check(
            (1..=1024).contains(&self.block_restart_interval),
            "block_restart_interval must be between 1 and 1024",
        )?;
        check(
            self.bloom_bits_per_key <= 64,
            "bloom_bits_per_key must be at most 64",
        )?;
        check(
            self.target_file_size_bytes >= 1024,
            "target_file_size_bytes must be at least 1024",
        )?;
        check(
            (2..=32).contains(&self.level_count),
            "level_count must be between 2 and 32",
        )?;
        check(
            self.level0_compaction_trigger >= 1
                && self.level0_slowdown_trigger >= self.level0_compaction_trigger
                && self.level0_stop_trigger >= self.level0_slowdown_trigger,
            "level-0 triggers must satisfy 1 <= compaction <= slowdown <= stop",
        )?;
        check(
            self.level1_size_bytes_max >= 1024,
            "level1_size_bytes_max must be at least 1024",
        )?;
        check(
            self.level_size_ratio >= 2,
            "level_size_ratio must be at least 2",
        )?;
        check(
            self.lookup_threads <= 64,
            "lookup_threads must be at most 64",
        )?;
        check(
            self.manifest_size_bytes_max >= 1024,
            "manifest_size_bytes_max must be at least 1024",
        )?;
        check(
            (4096..=crate::wal::RECORD_PAYLOAD_BYTES_MAX)
                .contains(&self.wal_record_payload_bytes_max()),
            "wal_record_payload_bytes_max must be between 4096 and wal::RECORD_PAYLOAD_BYTES_MAX",
        )?;
        Ok(())
    }
}

/// How `SSTable` files are read.
///
/// Both verify checksums the same way and return the same bytes; they differ in cost. A
/// mapped read copies out of the page cache without a system call, which is cheaper while
/// the tables fit in memory; `pread` leaves the kernel's page cache out of the process's
/// address space and is the portable choice (it is the default: without measurements on the
/// target machine, the mode without page-fault stalls on a cold cache is the safer one). A
/// file system without mappings (`MemFs`, other platforms) reads with `pread`-style copies
/// under either mode.
///
/// ```
/// let mut options = cairn::Options::in_memory();
/// options.table_read_mode = cairn::TableReadMode::Mmap;
/// let db = cairn::Db::open("/db", options)?;
/// db.put(b"k", b"v")?;
/// db.flush()?;
/// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableReadMode {
    /// Positional reads (`pread(2)`).
    #[default]
    Pread,
    /// Reads from a read-only shared mapping of each table (`mmap(2)`).
    Mmap,
}

/// Options for one read.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Add blocks read by this call to the block cache (turn off for big one-time scans).
    pub fill_cache: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { fill_cache: true }
    }
}

/// Options for one write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Acknowledge only after the WAL record is durable (fdatasync); survives power loss.
    pub sync: bool,
}
