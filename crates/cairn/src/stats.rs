//! Counters the engine keeps, and the report `Db::stats` returns.
//!
//! Counters are relaxed atomics bumped on the paths they count: they are statistics, not
//! synchronisation, and must never order anything. Each is striped over cache lines
//! (`StripedCounter`) because the write path bumps several per put: one shared line per
//! counter would bounce between every writing core on every write.
//!
//! Per level, the report gives the level's runs (id, files, bytes) and the bytes flushes and
//! compactions wrote into it since open (`level_write_bytes`, bumped once per job, so a plain
//! atomic each): `write_bytes / wal_bytes` is the level's share of write amplification.
//!
//! Invariants:
//! 1. The sum over levels of `write_bytes` equals `flush_bytes + compaction_write_bytes`
//!    (both are bumped by the same job, with the same amount) whenever no job is between
//!    its two adds: a report taken while a flush or compaction finishes may see one add
//!    and not the other (reports are not a consistent snapshot).
//! 2. A level's `files` and `bytes` are the sums over its runs.

use crate::sync::StripedCounter;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters (one per database).
#[derive(Debug, Default)]
pub struct Counters {
    /// Put records written.
    pub puts: StripedCounter,
    /// Delete records written.
    pub deletes: StripedCounter,
    /// Batches written.
    pub batches: StripedCounter,
    /// Read-modify-writes that wrote.
    pub read_modify_writes: StripedCounter,
    /// Read-modify-write attempts that lost a race and retried.
    pub read_modify_write_conflicts: StripedCounter,
    /// Read-modify-write attempts that gave up their sequence because lower writers were
    /// still in flight after a bounded spin (retried).
    pub read_modify_write_busy: StripedCounter,
    /// Bytes appended to WALs.
    pub wal_bytes: StripedCounter,
    /// WAL syncs.
    pub wal_syncs: StripedCounter,
    /// Write buffers (memtables) sealed.
    pub memtable_switches: StripedCounter,
    /// Write buffers (memtables) flushed to level 0.
    pub flushes: StripedCounter,
    /// Bytes written by flushes.
    pub flush_bytes: StripedCounter,
    /// Compactions run (including trivial moves).
    pub compactions: StripedCounter,
    /// Compactions that only moved a file.
    pub trivial_moves: StripedCounter,
    /// Bytes read by compactions.
    pub compaction_read_bytes: StripedCounter,
    /// Bytes written by compactions.
    pub compaction_write_bytes: StripedCounter,
    /// Writes delayed because level 0 had too many files.
    pub slowdown_writes: StripedCounter,
    /// Microseconds writers spent delayed (slowdown).
    pub slowdown_micros: StripedCounter,
    /// Times a writer waited for a full stop to clear.
    pub stop_writes: StripedCounter,
    /// Microseconds writers spent stopped (too many level-0 files or sealed memtables).
    pub stop_micros: StripedCounter,
    /// Obsolete files deleted.
    pub files_deleted: StripedCounter,
    /// Valid WAL records the last open found but did not replay because the recovered prefix
    /// ended before them (point-in-time recovery past a hole in an unsynced tail, or newer
    /// WALs after a torn or lost tail): unsynced writes lost to the crash.
    pub wal_recovery_dropped_records: StripedCounter,
    /// WAL bytes the last open did not replay for the same reason: from a hole in an
    /// unsynced tail to the end of its WAL, plus every ignored newer WAL (a torn tail's own
    /// bytes are not counted: they never held a whole record).
    pub wal_recovery_dropped_bytes: StripedCounter,
    /// Bytes written into each level by flushes and compactions (32 levels at most).
    pub level_write_bytes: [AtomicU64; 32],
    /// The Membuffer's counters, shared with every write buffer.
    pub membuffer: std::sync::Arc<MembufferCounters>,
}

/// Counters of the Membuffer (the hash-table level of the memory component), kept apart so
/// every write buffer can hold them.
#[derive(Debug, Default)]
pub struct MembufferCounters {
    /// Versions written into the Membuffer.
    pub writes: StripedCounter,
    /// Versions written to the memtable directly (Membuffer off for the key, or partition
    /// full and being drained by another thread).
    pub direct_writes: StripedCounter,
    /// Partitions drained into the memtable.
    pub drains: StripedCounter,
    /// Versions moved into the memtable by drains.
    pub drained_versions: StripedCounter,
    /// Versions moved into the memtable by an in-place update of their key in the Membuffer
    /// (the old version leaves the Membuffer's record for the memtable, the new one takes
    /// its place).
    pub moved_versions: StripedCounter,
    /// Versions an in-place update replaced without moving them to the memtable (no
    /// snapshot or scan could read them; latest-state reads validate against the drop).
    pub dropped_versions: StripedCounter,
    /// Latest-state reads redone in a hold of the overwrite gate because their key's bucket
    /// saw a drop above their read point (`membuffer::gate`; mostly false alarms).
    pub read_retries: StripedCounter,
    /// Drains a writer ran itself because its partition was full.
    pub writer_drains: StripedCounter,
    /// Microseconds writers spent draining.
    pub writer_drain_micros: StripedCounter,
    /// Drains a scan ran (draining before iterating).
    pub scan_drains: StripedCounter,
    /// Partition drains a scan skipped because a drain that started after it had finished.
    pub scan_piggybacks: StripedCounter,
    /// Partitions a scan copied instead of draining, because another thread held the
    /// partition's drain lock past a short spin (the scan's fallback: it never waits for a
    /// drain it does not run).
    pub scan_fallbacks: StripedCounter,
    /// Times a scan cursor, entering a partition, re-sought the memtable because a drain had
    /// run since the cursor last positioned itself (without one it keeps its position).
    pub scan_reseeks: StripedCounter,
    /// Latest-state scans that waited for every reserved sequence to be visible before
    /// taking their read point, because an in-place update had announced a newer sequence
    /// (without one a scan keeps the read point it took first).
    pub scan_waits: StripedCounter,
    /// Membuffers bypassed because scans outnumbered writes (`Options::
    /// membuffer_bypass_scans_per_write`): their write buffers wrote to the memtable alone
    /// from then on.
    pub bypasses: StripedCounter,
    /// Versions still in a Membuffer when its sealed buffer was dropped unflushed (the
    /// benchmark's memory-only variant).
    pub undrained_at_drop: StripedCounter,
}

impl Counters {
    /// Adds `amount` to a counter.
    #[inline]
    pub fn add(counter: &StripedCounter, amount: u64) {
        counter.add(amount);
    }
}

impl Counters {
    /// Adds `bytes` written into `level` (invariant 1: with the flush or compaction byte
    /// counter of the same job).
    pub fn add_level_write(&self, level: usize, bytes: u64) {
        if let Some(counter) = self.level_write_bytes.get(level) {
            counter.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Bytes written into `level` since open.
    pub fn level_write(&self, level: usize) -> u64 {
        self.level_write_bytes
            .get(level)
            .map_or(0, |counter| counter.load(Ordering::Relaxed))
    }
}

/// One level's shape (`Db::level_stats`, `Stats::levels`).
///
/// ```
/// let db = cairn::Db::open("/level-stats-doc", cairn::Options::in_memory()).unwrap();
/// db.put(b"k", b"v").unwrap();
/// db.flush().unwrap();
/// let levels = db.level_stats();
/// assert_eq!(levels[0].runs.len(), levels[0].files); // level 0: a run per file
/// ```
#[derive(Debug, Clone, Default)]
pub struct LevelStats {
    /// Files in the level.
    pub files: usize,
    /// Bytes in the level.
    pub bytes: u64,
    /// Compaction score by the database's policy (>= 1 means it wants compaction).
    pub score: f64,
    /// The level's sorted runs, newest first.
    pub runs: Vec<RunStats>,
    /// Bytes flushes and compactions wrote into this level since open.
    pub write_bytes: u64,
}

/// One sorted run of a level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// The run's id (larger is newer; at level 0, the file number).
    pub id: u64,
    /// Files in the run.
    pub files: usize,
    /// Bytes in the run.
    pub bytes: u64,
}

/// A point-in-time report of the database.
///
/// ```
/// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// db.put("k", "v")?;
/// let stats = db.stats();
/// assert!(stats.last_sequence >= 1);
/// assert_eq!(stats.snapshots, 0);
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Sequence number of the latest visible write.
    pub last_sequence: u64,
    /// Bytes in the active memtable.
    pub memtable_bytes: u64,
    /// Entries in the active memtable.
    pub memtable_entries: u64,
    /// Versions in the Membuffers of the active and sealed memtables not yet drained into
    /// their memtables (0 with the Membuffer off).
    pub membuffer_undrained: u64,
    /// Sealed memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Per-level shape.
    pub levels: Vec<LevelStats>,
    /// Live snapshots.
    pub snapshots: usize,
    /// Block cache usage and hit counts.
    pub block_cache_bytes: u64,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Data blocks read in place from memory-mapped tables, past the block cache
    /// ([`crate::TableReadMode::Mmap`]; the kernel's page cache holds them).
    pub block_mapped_reads: u64,
    /// Counter values (name, value), in a fixed order.
    pub counters: Vec<(&'static str, u64)>,
}

impl Stats {
    /// A counter by name (0 if unknown).
    pub fn counter(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .find(|(counter, _)| *counter == name)
            .map_or(0, |(_, value)| *value)
    }

    /// Write amplification since open: bytes written by flush and compaction per byte
    /// logged; `None` before anything was logged (or with the WAL off).
    pub fn write_amplification(&self) -> Option<f64> {
        let logged = self.counter("wal_bytes");
        (logged > 0).then(|| {
            (self.counter("flush_bytes") + self.counter("compaction_write_bytes")) as f64
                / logged as f64
        })
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(formatter, "last_sequence: {}", self.last_sequence)?;
        writeln!(
            formatter,
            "memtable: {} entries, {} bytes; sealed memtables: {}",
            self.memtable_entries, self.memtable_bytes, self.immutable_memtables
        )?;
        writeln!(
            formatter,
            "level  files        bytes  score  runs    written_bytes"
        )?;
        for (level, stats) in self.levels.iter().enumerate() {
            writeln!(
                formatter,
                "{level:>5} {:>6} {:>12} {:>6.2} {:>5} {:>16}",
                stats.files,
                stats.bytes,
                stats.score,
                stats.runs.len(),
                stats.write_bytes
            )?;
        }
        writeln!(formatter, "snapshots: {}", self.snapshots)?;
        writeln!(
            formatter,
            "block cache: {} bytes, {} hits, {} misses; {} blocks read in place (mapped)",
            self.block_cache_bytes,
            self.block_cache_hits,
            self.block_cache_misses,
            self.block_mapped_reads
        )?;
        for (name, value) in &self.counters {
            writeln!(formatter, "{name}: {value}")?;
        }
        match self.write_amplification() {
            Some(amplification) => write!(formatter, "write_amplification: {amplification:.2}"),
            None => write!(formatter, "write_amplification: n/a"),
        }
    }
}

impl Counters {
    /// Every counter with its name.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let load = |counter: &StripedCounter| counter.get();
        vec![
            ("puts", load(&self.puts)),
            ("deletes", load(&self.deletes)),
            ("batches", load(&self.batches)),
            ("read_modify_writes", load(&self.read_modify_writes)),
            (
                "read_modify_write_conflicts",
                load(&self.read_modify_write_conflicts),
            ),
            ("read_modify_write_busy", load(&self.read_modify_write_busy)),
            ("wal_bytes", load(&self.wal_bytes)),
            ("wal_syncs", load(&self.wal_syncs)),
            ("memtable_switches", load(&self.memtable_switches)),
            ("flushes", load(&self.flushes)),
            ("flush_bytes", load(&self.flush_bytes)),
            ("compactions", load(&self.compactions)),
            ("trivial_moves", load(&self.trivial_moves)),
            ("compaction_read_bytes", load(&self.compaction_read_bytes)),
            ("compaction_write_bytes", load(&self.compaction_write_bytes)),
            ("slowdown_writes", load(&self.slowdown_writes)),
            ("slowdown_micros", load(&self.slowdown_micros)),
            ("stop_writes", load(&self.stop_writes)),
            ("stop_micros", load(&self.stop_micros)),
            ("files_deleted", load(&self.files_deleted)),
            (
                "wal_recovery_dropped_records",
                load(&self.wal_recovery_dropped_records),
            ),
            (
                "wal_recovery_dropped_bytes",
                load(&self.wal_recovery_dropped_bytes),
            ),
            ("membuffer_writes", load(&self.membuffer.writes)),
            (
                "membuffer_direct_writes",
                load(&self.membuffer.direct_writes),
            ),
            ("membuffer_drains", load(&self.membuffer.drains)),
            (
                "membuffer_drained_versions",
                load(&self.membuffer.drained_versions),
            ),
            (
                "membuffer_moved_versions",
                load(&self.membuffer.moved_versions),
            ),
            (
                "membuffer_dropped_versions",
                load(&self.membuffer.dropped_versions),
            ),
            ("membuffer_read_retries", load(&self.membuffer.read_retries)),
            (
                "membuffer_writer_drains",
                load(&self.membuffer.writer_drains),
            ),
            (
                "membuffer_writer_drain_micros",
                load(&self.membuffer.writer_drain_micros),
            ),
            ("membuffer_scan_drains", load(&self.membuffer.scan_drains)),
            (
                "membuffer_scan_piggybacks",
                load(&self.membuffer.scan_piggybacks),
            ),
            ("membuffer_scan_reseeks", load(&self.membuffer.scan_reseeks)),
            ("membuffer_scan_waits", load(&self.membuffer.scan_waits)),
            ("membuffer_bypasses", load(&self.membuffer.bypasses)),
            (
                "membuffer_scan_fallbacks",
                load(&self.membuffer.scan_fallbacks),
            ),
            (
                "membuffer_undrained_at_drop",
                load(&self.membuffer.undrained_at_drop),
            ),
        ]
    }
}
