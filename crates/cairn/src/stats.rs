//! Counters the engine keeps, and the report `Db::stats` returns.
//!
//! Counters are relaxed atomics bumped on the paths they count: they are statistics, not
//! synchronisation, and must never order anything. Each is striped over cache lines
//! (`StripedCounter`) because the write path bumps several per put: one shared line per
//! counter would bounce between every writing core on every write.

use crate::sync::StripedCounter;
use std::fmt;

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
    /// Drains a writer ran itself because its partition was full.
    pub writer_drains: StripedCounter,
    /// Microseconds writers spent draining.
    pub writer_drain_micros: StripedCounter,
    /// Drains a scan ran (draining before iterating).
    pub scan_drains: StripedCounter,
    /// Partition drains a scan skipped because a drain that started after it had finished.
    pub scan_piggybacks: StripedCounter,
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

/// One level's shape.
#[derive(Debug, Clone, Default)]
pub struct LevelStats {
    /// Files in the level.
    pub files: usize,
    /// Bytes in the level.
    pub bytes: u64,
    /// Compaction score (>= 1 means over its limit).
    pub score: f64,
}

/// A point-in-time report of the database.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Sequence number of the latest visible write.
    pub last_sequence: u64,
    /// Bytes in the active memtable.
    pub memtable_bytes: u64,
    /// Entries in the active memtable.
    pub memtable_entries: u64,
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
        writeln!(formatter, "level  files        bytes  score")?;
        for (level, stats) in self.levels.iter().enumerate() {
            writeln!(
                formatter,
                "{level:>5} {:>6} {:>12} {:>6.2}",
                stats.files, stats.bytes, stats.score
            )?;
        }
        writeln!(formatter, "snapshots: {}", self.snapshots)?;
        writeln!(
            formatter,
            "block cache: {} bytes, {} hits, {} misses",
            self.block_cache_bytes, self.block_cache_hits, self.block_cache_misses
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
            (
                "membuffer_undrained_at_drop",
                load(&self.membuffer.undrained_at_drop),
            ),
        ]
    }
}
