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
///
/// Every field is public and documents its default; the struct is `#[non_exhaustive]` so new
/// options are not breaking changes. Start from [`Options::default`] (or
/// [`Options::in_memory`]) and assign the fields to change:
///
/// ```
/// let mut options = cairn::Options::default();
/// options.write_buffer_size_bytes = 4 << 20;
/// options.compression = cairn::Compression::Lz4;
/// options.validate()?;
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
// Independent on/off switches (WAL, sync, checksums, ...), not a state machine in disguise.
#[allow(clippy::struct_excessive_bools)]
pub struct Options {
    /// The file system all files go through. Default: [`StdFs`], the operating system's.
    pub file_system: Arc<dyn FileSystem>,
    /// Create the database if the directory holds none. Default: `true`.
    pub create_if_missing: bool,
    /// Open without writing anything: no WAL, no MANIFEST, no CURRENT rewrite, no LOCK (so a
    /// writer may hold the database meanwhile). The handle reads the state as of its open,
    /// the WAL tail included; writes fail with `InvalidArgument`. It starts no thread (no
    /// flush, compaction or lookup-pool threads: `lookup_threads` is ignored). See
    /// [`crate::Db::open_read_only`]. Default: `false`.
    pub read_only: bool,
    /// Fail if a database already exists. Default: `false`.
    pub error_if_exists: bool,
    /// Bytes of versions a write buffer (memtable, and Membuffer when on) holds when it is
    /// sealed and queued for flush. Each memtable also has a key index of 1/8 of this
    /// (128 MiB at most), which the system supplies as it is touched, and the Membuffer's
    /// hash tables have slot arrays (2–4 words per record its share can hold: ~3 % of this
    /// at the default share with 16-byte keys and 100-byte values); neither counts toward
    /// this size. Default: 64 MiB.
    pub write_buffer_size_bytes: usize,
    /// Sealed memtables that may wait for flush before writers stall. Default: 4.
    pub max_immutable_memtables: usize,
    /// Write-ahead logging; off means writes since the last flush are lost on a crash.
    /// Default: `true`.
    pub wal_enabled: bool,
    /// Write the WAL through a shared memory mapping where the file system supports it
    /// (`FileSystem::create_log`): an append is a copy into the page cache instead of a
    /// `write(2)`, with the same durability (survives a process crash; `sync` for power loss).
    /// Default: `true`.
    pub wal_memory_mapped: bool,
    /// What recovery does with a WAL whose unsynced tail has a hole (see [`WalRecovery`]).
    /// Default: [`WalRecovery::PointInTime`].
    pub wal_recovery: WalRecovery,
    /// Target size of an `SSTable` data block before compression. Default: 4 KiB.
    pub block_size_bytes: usize,
    /// Entries between restart points in a data block. Default: 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key (0 disables filters). Default: 10.
    pub bloom_bits_per_key: usize,
    /// Capacity of the shared block cache. Default: 64 MiB.
    pub block_cache_size_bytes: usize,
    /// Block compression of new tables (existing tables keep theirs). Default:
    /// [`Compression::None`], kept by measurement (docs/tuning.md, "Compression"): LZ4 stores
    /// 0.55× the bytes on values that compress to half at about the same read cost, but on
    /// values that do not compress it still tries every block of every compaction, which cost
    /// 1.7× the CPU per insert, and zstd more. Set [`Compression::Lz4`] when values compress
    /// (text, JSON, repeated fields); per level with [`LevelOptions::compression`].
    pub compression: Compression,
    /// Target size of an `SSTable` written by compaction. Default: 64 MiB.
    pub target_file_size_bytes: u64,
    /// Number of levels (level 0 plus deeper levels). Default: 7.
    pub level_count: usize,
    /// Level-0 file count that triggers a compaction. Default: 4.
    pub level0_compaction_trigger: usize,
    /// Level-0 file count at which each write is delayed a little. Default: 12.
    pub level0_slowdown_trigger: usize,
    /// Level-0 file count at which writes wait for compaction. Default: 20.
    pub level0_stop_trigger: usize,
    /// Maximum total bytes of level 1. Default: 256 MiB.
    pub level1_size_bytes_max: u64,
    /// Growth factor between consecutive levels (the size ratio / fanout T). Default: 10.
    pub level_size_ratio: u64,
    /// The shape of the tree: leveling (default), tiering or lazy leveling. May change between
    /// opens of one database; the next compactions move the tree to the new shape.
    pub compaction_style: CompactionStyle,
    /// Tiered styles: runs a level may hold before it is merged down (D; default 4).
    pub runs_per_level: usize,
    /// Tiered styles: share of a full level's runs merged down at a time (m, in (0, 1];
    /// default 1.0, the whole level).
    pub merge_fraction: f64,
    /// How Bloom filter bits are spread over levels at `bloom_bits_per_key` on average.
    pub bloom_allocation: BloomAllocation,
    /// Per-level overrides of table settings: entry `i` applies to level `i`; levels past the
    /// end use the database-wide settings.
    pub level_options: Vec<LevelOptions>,
    /// Background threads that flush memtables (default 1). Validated and reserved: flushes
    /// are still written one at a time in memtable order (level 0 is ordered by flush), so
    /// one flush thread runs whatever this says.
    pub flush_threads: usize,
    /// Background threads that compact (default 1). With more, compactions of disjoint
    /// levels and files run at once.
    pub compaction_threads: usize,
    /// MANIFEST size after which a fresh one (a snapshot of every live file, then the edits
    /// that follow) is written; when the snapshot alone is larger, the MANIFEST rolls over at
    /// twice the snapshot's size instead. Default: 64 MiB.
    pub manifest_size_bytes_max: u64,
    /// Verify block checksums on every read (always done for compaction inputs).
    /// Default: `true`.
    pub verify_checksums: bool,
    /// How `SSTable` bytes are read: `pread(2)` or a memory mapping (see [`TableReadMode`]).
    pub table_read_mode: TableReadMode,
    /// Threads that probe sorted runs concurrently when a point lookup must search more than
    /// one (0, the default: probe them one after another). Helps when blocks come from disk
    /// (the waits overlap); with cached blocks the hand-offs cost more than they save.
    /// A read-only handle starts no pool.
    pub lookup_threads: usize,
    /// A hook asked, when compaction rewrites a key, whether to keep, remove or change its
    /// newest value (for instance to expire keys); see [`crate::CompactionFilter`].
    /// Default: none.
    pub compaction_filter: Option<Arc<dyn crate::compaction::CompactionFilter>>,
    /// The Membuffer (`FloDB`'s upper memory level): writes go to bounded hash tables
    /// partitioned by key range, which are drained into the memtable in sorted batches; a
    /// write whose partition is full (and being drained) goes to the memtable directly; a
    /// key already in the Membuffer is updated in place (its old version moves to the
    /// memtable, or is dropped when no snapshot or scan can read it: latest-state reads
    /// check for that and re-read). Off: a single-level memtable. Default: on.
    ///
    /// Measured on 2 vCPUs against off, paired medians at 1 / 2 threads
    /// (`bench/results/2026-11-28-s15-flodb`, the final binary's run): fills 1.81 / 1.52×,
    /// point reads 1.18 / 1.21×, readers beside a writer paced to 100 k puts/s 0.98 / 1.07×;
    /// YCSB E 0.997 / 1.012× and a write-heavy mix with short scans (`flodb_scan_write`)
    /// 1.07 / 1.00× (`bench/results/2026-11-29-s30`: YCSB E bypasses the Membuffer, see
    /// `membuffer_bypass_scans_per_write`; without the bypass 0.980 / 0.984×); `FloDB`'s
    /// write-burst, skewed-update (64 MiB buffers and up) and memory-only figures
    /// 1.25–4.75× (`bench/results/2026-11-27-s14-flodb`). Slower: readers beside an
    /// unpaced writer (0.84 / 0.88×, while that writer puts 1.47× as many keys) and the
    /// skewed mix with a 16 MiB write buffer (0.82×).
    pub membuffer_enabled: bool,
    /// Percent of `write_buffer_size_bytes` the Membuffer may hold at most; the write
    /// buffer counts what it really holds, so the memtable gets the rest. Default: 25
    /// (`FloDB`'s one quarter). Between 1 and 50.
    pub membuffer_percent: usize,
    /// Key-range partitions of the Membuffer (fewer for small budgets: each gets at least
    /// 4 KiB). Default: 16. Between 1 and 1024.
    pub membuffer_partitions: usize,
    /// Background threads per write buffer that drain Membuffer partitions once three
    /// quarters full (writers still drain a full partition themselves when no drainer has).
    /// 0: writers only. Default: half the available cores, 1 to 4 (one on 2 cores), and none
    /// on one core (a drainer there could only take turns with the writers it would relieve).
    pub membuffer_drainers: usize,
    /// Bypass a write buffer's Membuffer — drain it, then write to the memtable alone until
    /// the next write buffer — when, over a window of at least 100 ms and 1,024 scans (or of
    /// 1 s, when scans are fewer), its scans reach this many times its writes. A scan over a
    /// Membuffer costs more than one over the memtable alone (measured: about 790
    /// instructions of 59,000, and YCSB E's 95 % scans ran 1–2 % slower), which writes repay
    /// only when they are not that few. The drainer threads judge, so with
    /// `membuffer_drainers` 0 it is never bypassed. 0: never. Default: 8.
    pub membuffer_bypass_scans_per_write: u32,
    /// Benchmark variant (feature `bench-variants`): drain with one skiplist insert per
    /// version instead of multi-insert.
    #[cfg(feature = "bench-variants")]
    #[doc(hidden)]
    pub membuffer_simple_insert: bool,
    /// Benchmark variant (feature `bench-variants`): an in-place Membuffer update always
    /// moves the version it replaces to the memtable, never drops it (the behaviour before
    /// the overwrite gate; reads then skip the gate's validation).
    #[cfg(feature = "bench-variants")]
    #[doc(hidden)]
    pub membuffer_always_move: bool,
    /// Benchmark variant (feature `bench-variants`): drop sealed write buffers instead of
    /// flushing them (their writes are lost: measures the memory component alone).
    #[cfg(feature = "bench-variants")]
    #[doc(hidden)]
    pub drop_sealed_memtables: bool,
    /// Test-only: the largest WAL record payload, [`crate::wal::RECORD_PAYLOAD_BYTES_MAX`]
    /// unless lowered. Writers refuse larger batches and recovery reads with the same limit,
    /// so a test reaches the limit with kilobytes instead of a gigabyte.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub wal_record_payload_bytes_max: usize,
    /// Test-only: scans copy every Membuffer partition they enter instead of draining it, the
    /// fallback they otherwise take only when another thread holds the partition's drain lock.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub membuffer_scans_always_copy: bool,
    /// Test-only: a drainer bypasses its Membuffer as soon as the partitions exist, whatever
    /// the mix, so tests race the bypass against every operation.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub membuffer_bypass_at_once: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            file_system: Arc::new(StdFs),
            create_if_missing: true,
            read_only: false,
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
            compaction_style: CompactionStyle::Leveling,
            runs_per_level: 4,
            merge_fraction: 1.0,
            bloom_allocation: BloomAllocation::Uniform,
            level_options: Vec::new(),
            flush_threads: 1,
            compaction_threads: 1,
            manifest_size_bytes_max: 64 * 1024 * 1024,
            verify_checksums: true,
            table_read_mode: TableReadMode::default(),
            lookup_threads: 0,
            compaction_filter: None,
            membuffer_enabled: true,
            membuffer_percent: 25,
            membuffer_partitions: 16,
            // Measured on 2 vCPUs (bench/results/2026-11-28-s18-flodb), one drainer against
            // none, paired medians: fillrandom 1.33x / 1.03x (1 / 2 threads), readrandom
            // 0.98x / 0.99x, readwhilewriting with a paced writer 0.96x / 1.02x, the 10 s
            // burst 0.99x. The costs, where two busy threads share the cores with it: a
            // write-heavy mix with short scans 0.94x at 2 threads (1.03x at 1), and readers
            // beside an unpaced writer 0.83x / 0.82x while that writer puts 1.08x / 1.16x as
            // many keys per second.
            membuffer_drainers: match std::thread::available_parallelism()
                .map_or(1, std::num::NonZero::get)
            {
                0..=1 => 0,
                cores => (cores / 2).clamp(1, 4),
            },
            membuffer_bypass_scans_per_write: 8,
            #[cfg(feature = "bench-variants")]
            membuffer_simple_insert: false,
            #[cfg(feature = "bench-variants")]
            membuffer_always_move: false,
            #[cfg(feature = "bench-variants")]
            drop_sealed_memtables: false,
            #[cfg(feature = "testing")]
            wal_record_payload_bytes_max: crate::wal::RECORD_PAYLOAD_BYTES_MAX,
            #[cfg(feature = "testing")]
            membuffer_scans_always_copy: false,
            #[cfg(feature = "testing")]
            membuffer_bypass_at_once: false,
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

    /// Options that run everything in memory (for tests and examples): the defaults with a
    /// fresh [`crate::MemFs`] as the file system.
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put(b"k", b"v")?;
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn in_memory() -> Self {
        Options {
            file_system: Arc::new(crate::fs::MemFs::new()),
            ..Options::default()
        }
    }

    /// Rejects option combinations that cannot work, with a message naming the option.
    ///
    /// ```
    /// let mut options = cairn::Options::default();
    /// options.level_count = 1;
    /// assert!(options.validate().is_err());
    /// ```
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
            (1..=50).contains(&self.membuffer_percent),
            "membuffer_percent must be between 1 and 50",
        )?;
        check(
            self.membuffer_drainers <= 64,
            "membuffer_drainers must be at most 64",
        )?;
        check(
            (1..=1024).contains(&self.membuffer_partitions),
            "membuffer_partitions must be between 1 and 1024",
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
            (1..=crate::sstable::block::BLOCK_RESTART_INTERVAL_MAX)
                .contains(&self.block_restart_interval),
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
            (1..=64).contains(&self.runs_per_level),
            "runs_per_level must be between 1 and 64",
        )?;
        check(
            self.merge_fraction > 0.0 && self.merge_fraction <= 1.0,
            "merge_fraction must be in (0, 1]",
        )?;
        check(
            (1..=16).contains(&self.flush_threads) && (1..=16).contains(&self.compaction_threads),
            "flush_threads and compaction_threads must be between 1 and 16",
        )?;
        check(
            self.level_options.iter().all(|level| {
                level.bloom_bits_per_key.is_none_or(|bits| bits <= 64)
                    && level
                        .block_size_bytes
                        .is_none_or(|size| (64..=64 * 1024 * 1024).contains(&size))
            }),
            "level_options: bloom_bits_per_key at most 64, block_size_bytes 64 B to 64 MiB",
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

/// The shape of the tree a database keeps: how many sorted runs a level may hold and how
/// they are merged (`Options::compaction_style`).
///
/// ```
/// use cairn::{CompactionStyle, Options};
/// let mut options = Options::in_memory();
/// options.compaction_style = CompactionStyle::Tiering;
/// options.runs_per_level = 3;
/// let db = cairn::Db::open(std::path::Path::new("/shape-doc"), options).unwrap();
/// db.put(b"k", b"v").unwrap();
/// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CompactionStyle {
    /// One run per level >= 1; a level over its size limit merges part of itself into the
    /// next level's run (`LevelDB`). Cheapest reads and space, most write amplification. The
    /// default (the only style before it was a knob).
    #[default]
    Leveling,
    /// Up to `runs_per_level` runs per level; a full level merges (a `merge_fraction` of) its
    /// runs into one new run of the next level. Least write amplification; reads probe more
    /// runs.
    Tiering,
    /// Tiering at every level but the last, which is leveled (Dostoevsky): close to
    /// tiering's writes with close to leveling's space and large-level reads.
    LazyLeveling,
}

/// How Bloom filter memory is spread over the levels (`Options::bloom_allocation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BloomAllocation {
    /// Every level gets `bloom_bits_per_key` (the default).
    #[default]
    Uniform,
    /// Monkey (SIGMOD'17): the same total filter memory, but each level's false-positive rate
    /// proportional to its size — fewer bits per key on the largest level, about
    /// `ln(T) / ln(2)^2` (4.8 at T = 10) more on each level above it — which minimises the
    /// sum of false-positive rates, the expected I/O of a lookup that finds nothing. Levels
    /// are weighted by their capacity (`level1_size_bytes_max * T^(i-1)`) down to the
    /// deepest level holding data when a table is written.
    Monkey,
}

/// Table settings for one level (`Options::level_options`); `None` takes the database-wide
/// setting. The place for any future per-level knob.
///
/// ```
/// let mut options = cairn::Options::default();
/// let mut level1 = cairn::LevelOptions::default();
/// level1.block_size_bytes = Some(16 * 1024);
/// // Levels 0 and 1 stay uncompressed (they are rewritten soonest); level 2 and below zstd.
/// let mut level2 = cairn::LevelOptions::default();
/// level2.compression = Some(cairn::Compression::Zstd);
/// options.compression = cairn::Compression::None;
/// options.level_options = vec![cairn::LevelOptions::default(), level1, level2];
/// assert!(options.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelOptions {
    /// Bloom bits per key of this level's tables (overrides `bloom_allocation`).
    pub bloom_bits_per_key: Option<usize>,
    /// Data block size of this level's tables: the fence-pointer granularity.
    pub block_size_bytes: Option<usize>,
    /// Compression of this level's data blocks (overrides `Options::compression`; the
    /// levels past the end of `level_options` take `Options::compression`).
    pub compression: Option<Compression>,
}

/// How `SSTable` files are read.
///
/// Both verify checksums the same way and return the same bytes; they differ in cost and in
/// what a failing disk does.
///
/// - [`TableReadMode::Mmap`] (the default) maps each open table read-only. An uncompressed
///   data block is then parsed in place, in the kernel's page cache: no system call, no
///   buffer, no copy, and it never enters the block cache (the page cache already holds it;
///   compressed blocks are still decompressed and cached). On this project's 2-core machine
///   it halved the CPU of a short scan and cut that of a point read whose block was not in
///   the block cache by 45 % (see `docs/tuning.md`). The costs: mapped pages count in the process's resident set; a value
///   pinned by [`crate::Db::get_pinned`] (or a block held by an iterator) keeps its table's
///   mapping, so a table deleted by compaction gives its disk space back only when the last
///   such reference goes; and a media error on a mapped page cannot be returned as
///   [`crate::Error::Io`] — the kernel stops the process with `SIGBUS` instead, as it does
///   for any program reading a mapped file (tables are never truncated or rewritten while
///   mapped, so a healthy disk never faults). A block is checksummed each time it is read
///   (a `Pread` cache hit skips that), so very large `block_size_bytes` favour `Pread`; and a
///   pinned value or iterator that holds a mapped block for long may read pages the kernel
///   dropped and read back from disk after that check. If a table cannot be mapped (address
///   space, `vm.max_map_count`), it is read with `pread` instead.
/// - [`TableReadMode::Pread`] copies each block out with `pread(2)` into the block cache:
///   every read error is an `Error::Io`, and memory use is the block cache's capacity.
///   Choose it where media errors must be survivable or address space is scarce.
///
/// A file system without mappings (`MemFs`, `FaultFs`, other platforms) reads with copies
/// under either mode.
///
/// ```
/// let mut options = cairn::Options::in_memory();
/// options.table_read_mode = cairn::TableReadMode::Pread;
/// let db = cairn::Db::open("/db", options)?;
/// db.put(b"k", b"v")?;
/// db.flush()?;
/// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableReadMode {
    /// Positional reads (`pread(2)`) into the block cache.
    Pread,
    /// Blocks read in place from a read-only shared mapping of each table (`mmap(2)`).
    #[default]
    Mmap,
}

/// Options for one read.
///
/// `#[non_exhaustive]`: start from [`ReadOptions::default`] and assign fields.
///
/// ```
/// let mut read_options = cairn::ReadOptions::default();
/// read_options.fill_cache = false;
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Add blocks read by this call to the block cache (turn off for big one-time scans).
    /// Default: `true`.
    pub fill_cache: bool,
    /// Read as of this snapshot instead of the latest state (it must come from the database
    /// read). Default: none.
    pub snapshot: Option<crate::Snapshot>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            fill_cache: true,
            snapshot: None,
        }
    }
}

/// Options for one write.
///
/// `#[non_exhaustive]`: start from [`WriteOptions::default`] or [`WriteOptions::with_sync`].
///
/// ```
/// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// db.put_with(&cairn::WriteOptions::with_sync(true), b"k", b"v")?;
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Acknowledge only after the WAL record is durable (fdatasync); survives power loss.
    /// An empty batch written with `sync` is a barrier: it returns once every write
    /// acknowledged before it is durable. A read-modify-write with `sync` that keeps the
    /// value returns once the version it read is durable. Without a WAL
    /// (`Options::wal_enabled` off) there is nothing to sync: writes are durable once flushed.
    /// Default: `false` (survives a process crash, not a power loss).
    pub sync: bool,
}

impl WriteOptions {
    /// The defaults with `sync` set as given (usable in a `const`).
    pub const fn with_sync(sync: bool) -> Self {
        WriteOptions { sync }
    }
}
