//! `DbInner`: the state every step of the engine shares — options, file system, caches, the
//! published super version, the watermarks, the version set, background-thread signalling
//! and the sticky error — with the small helpers over it.
//!
//! Thread-safety contract: `DbInner` is shared by `Arc` between client threads and the two
//! background threads. Atomics and `ArcSwap` are read without locks; each `Mutex` guards only
//! its own field. Lock order: `compaction_lock` → `versions` → `super_version_update`;
//! `background`, `running`, `pending_outputs` and `sticky_error` are leaves (nothing is taken
//! while one of them is held; `running` is read under `versions` when a compaction is chosen).
//!
//! Invariants:
//! 1. `visible()` never exceeds the inserted watermark, nor (with the WAL on) the highest
//!    sequence written to the OS.
//! 2. Once `has_sticky_error` is set, `sticky_error` holds the first error and keeps it; no
//!    write is accepted afterwards (`check_writable`).
//! 3. Every wait here is parked after a short spin (`sync::Parker`) on a parker that the
//!    thread making the awaited progress notifies: `wait_visible` on the inserted watermark's
//!    and then on the WAL's (leading its group commit if no one else is), the switch wait on
//!    `switch_parker`, notified by `install_switch` and by `set_sticky_error`.

use super::super_version::SuperVersion;
use crate::compaction::{CompactionPolicy, ShapeOptions};
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::key::SequenceNumber;
use crate::options::Options;
use crate::sequence::{Acknowledged, Watermark};
use crate::snapshot::SnapshotList;
use crate::stats::{Counters, LevelStats, RunStats, Stats};
use crate::sync::Parker;
use crate::table_cache::TableCache;
use crate::version::VersionSet;
use crate::wal_writer::Log;
use arc_swap::ArcSwap;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How long a waiting thread sleeps before re-checking its condition (bounds the cost of a
/// missed wake-up; wake-ups are normally immediate through the condition variable).
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(10);

/// What the background threads wait on.
#[derive(Debug, Default)]
pub(super) struct BackgroundState {
    pub(super) shutting_down: bool,
    pub(super) compaction_wanted: bool,
    /// The next WAL, created off the switch path (`DbInner::prepare_next_wal`).
    pub(super) prepared_wal: Option<super::write::PreparedWal>,
    /// A preparation is under way; a switch waits for it (WAL numbers follow log order).
    pub(super) preparing_wal: bool,
}

/// Locks a mutex whose data stays consistent even if a holder panicked (every critical
/// section here either completes its update or returns an error before changing anything).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The shared state of one open database (see the module documentation).
pub(super) struct DbInner {
    pub(super) directory: PathBuf,
    pub(super) options: Options,
    pub(super) file_system: Arc<dyn FileSystem>,
    pub(super) table_cache: Arc<TableCache>,
    pub(super) shape: ShapeOptions,
    /// Decides what to compact next; the compaction loop calls nothing else to choose.
    pub(super) policy: Box<dyn CompactionPolicy>,
    pub(super) _lock: Box<dyn FileLock>,
    pub(super) super_version: ArcSwap<SuperVersion>,
    pub(super) super_version_update: Mutex<()>,
    /// Every sequence <= this is inserted (the cLSM "published" timestamp).
    pub(super) inserted: Watermark,
    /// Every sequence <= this is written to the OS (raised by WAL leaders).
    pub(super) written: Arc<AtomicU64>,
    /// Writes acknowledged above `visible()`: readers start at or above them, so writers
    /// never wait for each other's inserts (cLSM §3.2's linearizable snapshot: the wait is on
    /// the read side).
    pub(super) acknowledged: Acknowledged,
    pub(super) versions: Mutex<VersionSet>,
    pub(super) file_numbers: Arc<AtomicU64>,
    pub(super) background: Mutex<BackgroundState>,
    pub(super) background_changed: Condvar,
    pub(super) has_sticky_error: AtomicBool,
    pub(super) sticky_error: Mutex<Option<Error>>,
    pub(super) snapshots: Arc<SnapshotList>,
    /// With the Membuffer on: whether its in-place updates may drop replaced versions, and
    /// the drop marks latest-state reads validate against (`membuffer::gate`).
    pub(super) overwrite_gate: Option<Arc<crate::membuffer::OverwriteGate>>,
    pub(super) counters: Counters,
    pub(super) pending_outputs: Mutex<HashSet<u64>>,
    pub(super) compaction_lock: Mutex<()>,
    /// Writers waiting for a memtable switch to be installed park here (invariant 3).
    pub(super) switch_parker: Parker,
    /// What background compactions are running (`compact.rs`; several with
    /// `Options::compaction_threads > 1`).
    pub(super) running: Mutex<super::compact::RunningCompactions>,
}

impl DbInner {
    /// Per-level statistics of `version` (`Db::level_stats`).
    pub(super) fn level_stats_of(&self, version: &crate::version::Version) -> Vec<LevelStats> {
        let scores = self.policy.scores(version, &self.shape);
        (0..version.level_count())
            .map(|level| {
                let runs = version.level(level);
                LevelStats {
                    files: version.files(level).len(),
                    bytes: version.level_bytes(level),
                    score: scores.get(level).copied().unwrap_or(0.0),
                    runs: runs
                        .runs()
                        .enumerate()
                        .map(|(index, run)| RunStats {
                            id: runs.run_id(index).unwrap_or(0),
                            files: run.files().len(),
                            bytes: run.bytes(),
                        })
                        .collect(),
                    write_bytes: self.counters.level_write(level),
                }
            })
            .collect()
    }
}

/// Creates the file of a new WAL: memory-mapped where the options and the file system allow.
pub(super) fn create_wal_file(
    file_system: &dyn FileSystem,
    options: &Options,
    path: &Path,
) -> Result<Box<dyn crate::fs::WritableFile>> {
    if options.wal_memory_mapped {
        file_system.create_log(path, options.write_buffer_size_bytes as u64)
    } else {
        file_system.create(path)
    }
}

impl DbInner {
    /// Fails with `WritesStopped` once a sticky error is recorded (invariant 2).
    pub(super) fn check_writable(&self) -> Result<()> {
        if self.has_sticky_error.load(Ordering::Acquire) {
            if let Some(cause) = lock(&self.sticky_error).clone() {
                return Err(match cause {
                    Error::WritesStopped { .. } => cause,
                    other => Error::WritesStopped {
                        cause: Box::new(other),
                    },
                });
            }
        }
        Ok(())
    }

    /// Records an error after which durability can no longer be promised.
    pub(super) fn set_sticky_error(&self, error: &Error) {
        let mut sticky = lock(&self.sticky_error);
        if sticky.is_none() {
            *sticky = Some(error.clone());
        }
        self.has_sticky_error.store(true, Ordering::Release);
        drop(sticky);
        self.background_changed.notify_all();
        // A writer parked for a switch that will now never come must see the error.
        self.switch_parker.notify();
    }

    /// The sequence readers use: every write at or below it is inserted and logged.
    #[inline]
    pub(super) fn visible(&self) -> SequenceNumber {
        let inserted = self.inserted.get();
        let visible = if self.options.wal_enabled {
            inserted.min(self.written.load(Ordering::Acquire))
        } else {
            inserted
        };
        debug_assert!(visible <= inserted, "invariant 1");
        visible
    }

    /// The write ending at `sequence` is inserted and logged: acknowledge it without waiting
    /// for lower in-flight writes (`sequence::Acknowledged`).
    #[inline]
    pub(super) fn acknowledge(&self, sequence: SequenceNumber) {
        self.acknowledged.acknowledge(sequence, self.visible());
    }

    /// The sequence a read that starts now uses: at or above every acknowledged write, and
    /// covering only writes that are fully inserted and logged. After a sticky error the wait
    /// is bounded (`Acknowledged::read_sequence`): lower writes still finish their inserts,
    /// but a writer whose thread died never would.
    pub(super) fn read_sequence(&self) -> SequenceNumber {
        self.acknowledged.read_sequence(
            || self.visible(),
            || self.has_sticky_error.load(Ordering::Acquire),
            self.inserted.parker(),
        )
    }

    /// Waits until `visible()` reaches `sequence`: first for lower writers' inserts, then
    /// for the WAL to be written that far, leading the group commit of the log holding
    /// `sequence` if no one else is (both parked after a short spin: invariant 3). It never
    /// waits for an fdatasync.
    pub(super) fn wait_visible(&self, sequence: SequenceNumber) -> Result<()> {
        self.inserted.wait_for(sequence);
        if self.visible() >= sequence {
            return Ok(());
        }
        if let Some(log) = self.log_holding(sequence) {
            if let Err(error) = log.wait_durable(sequence, false) {
                self.check_writable()?;
                return Err(error);
            }
        }
        // Reached only if the log was retired meanwhile, which happens after its last
        // sequence became visible: at most a parked step or two.
        let mut round = 0u32;
        while self.visible() < sequence {
            self.check_writable()?;
            self.inserted.parker().wait(&mut round, || {
                self.visible() >= sequence || self.has_sticky_error.load(Ordering::Acquire)
            });
        }
        Ok(())
    }

    /// The live log that holds `sequence` (the newest whose first sequence is at or below
    /// it), if its buffer is still in the super version.
    fn log_holding(&self, sequence: SequenceNumber) -> Option<Arc<Log>> {
        let super_version = self.super_version.load();
        let memory = &super_version.memory;
        std::iter::once(memory.active())
            .chain(memory.sealed())
            .map(|buffer| buffer.log())
            .filter(|log| log.first_sequence() <= sequence)
            .max_by_key(|log| log.first_sequence())
            .cloned()
    }

    /// A named point where a unit test can force an interleaving: runs this thread's hook
    /// (`tests::RACE_HOOK`) in test builds; nothing otherwise.
    #[inline]
    pub(super) fn race_point(&self, point: &'static str) {
        #[cfg(test)]
        tests::run_race_hook(point);
        let _ = point;
    }

    /// One step of waiting until `buffer` is no longer the active buffer (another writer is
    /// sealing it): spin, yield, then park until the switch is installed (invariant 3).
    pub(super) fn wait_switch_step(
        &self,
        round: &mut u32,
        buffer: &Arc<crate::memory::WriteBuffer>,
    ) {
        self.switch_parker.wait(round, || {
            !Arc::ptr_eq(self.super_version.load().memory.active(), buffer)
                || self.has_sticky_error.load(Ordering::Acquire)
        });
    }

    /// Wakes the compaction thread.
    pub(super) fn request_compaction(&self) {
        lock(&self.background).compaction_wanted = true;
        self.background_changed.notify_all();
    }

    /// The report behind `Db::stats`.
    pub(super) fn stats(&self) -> Stats {
        let super_version = self.super_version.load_full();
        let levels = self.level_stats_of(&super_version.version);
        let cache = self.table_cache.block_cache();
        let block_cache_bytes = cache.map_or(0, |cache| cache.usage_bytes() as u64);
        let block_cache_hits = cache.map_or(0, |cache| cache.hits());
        let block_cache_misses = cache.map_or(0, |cache| cache.misses());
        let block_mapped_reads = cache.map_or(0, |cache| cache.mapped_reads());
        let active = super_version.memory.active();
        let membuffer_undrained = std::iter::once(active)
            .chain(super_version.memory.sealed())
            .map(|buffer| buffer.undrained() as u64)
            .sum();
        Stats {
            last_sequence: self.visible(),
            memtable_bytes: active.memory_bytes() as u64,
            memtable_entries: active.len() as u64,
            membuffer_undrained,
            immutable_memtables: super_version.memory.sealed().len(),
            levels,
            snapshots: self.snapshots.count(),
            block_cache_bytes,
            block_cache_hits,
            block_cache_misses,
            block_mapped_reads,
            counters: self.counters.snapshot(),
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
