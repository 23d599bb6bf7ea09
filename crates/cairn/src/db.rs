//! `Db`: the persistent store — open/recover, the write path, the read path, and the
//! background flush and compaction threads.
//!
//! Steps are numbered in `ARCHITECTURE.md`; this doc states the contract.
//!
//! Thread-safety contract: `Db` is `Send + Sync`; every method may be called from any thread,
//! and no client operation takes a lock on its fast path (cLSM §3):
//! - Reads (`get`, iterators, snapshots) load the visible sequence (two atomics) and the
//!   current [`SuperVersion`] (an `ArcSwap`, RCU-style), then read immutable or
//!   concurrently-readable structures.
//! - Writes reserve their sequence numbers and WAL space together in the active memtable's
//!   log (`wal_writer`, one compare-and-swap), copy their record and insert into the skiplist
//!   in parallel, share group-commit writes and syncs, and publish through the watermark
//!   (`sequence`). A writer waits only for other writers' progress: lower sequences to
//!   finish, the group-commit leader's I/O, or a memtable switch in progress.
//! - Read-modify-write is optimistic (cLSM Algorithm 3): read, compute, reserve, then validate
//!   that no version was written in between; on a conflict the reservation is logged as a
//!   void record and the operation retries. It never sleeps while it holds a sequence (see
//!   `DbInner::read_modify_write`).
//! - Background threads hold `versions` across MANIFEST I/O; clients never take it.
//!   `super_version_update` is held only for pointer swaps.
//!
//! Lock order: `compaction_lock` → `versions` → `super_version_update`; `background` is a
//! leaf (condition-variable state only, used when a writer must stall).
//!
//! Invariants:
//! 1. Every write with sequence <= `visible()` is fully in some memtable of the current
//!    super version or in a table of its version, and its WAL record is written.
//! 2. A super version's sealed memtables are ordered newest first and hold disjoint,
//!    increasing sequence ranges: all sequences of a newer memtable exceed all of an older
//!    one (the log seal hands the next log the next sequence).
//! 3. A memtable leaves the super version only in the same swap that installs a version
//!    holding its flushed table (after the MANIFEST edit is durable), and is flushed only
//!    once its last sequence is visible — which implies no writer is inside it, because a
//!    writer holds an unfinished sequence from its reservation until its inserts are done.
//! 4. A WAL is deleted only when its number is below the MANIFEST's durable `log_number`.

use crate::batch::{DecodedBatch, WriteBatch};
use crate::compaction::{self, Choice, OutputSettings, Plan, ShapeOptions, VersionFilter};
use crate::db_iter::{DbIterator, RangeIter};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::{FileLock, FileSystem};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{check_key, check_value, internal_key, SequenceNumber, ValueKind};
use crate::memtable::{Memtable, SortedNodes};
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::sequence::{Acknowledged, Watermark};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::sstable::{BlockCache, TableOptions};
use crate::sstable::{BloomFilter, BloomFilterBuilder};
use crate::stats::{Counters, LevelStats, Stats};
use crate::table_cache::{LevelIterator, TableCache};
use crate::version::{Version, VersionEdit, VersionSet};
use crate::wal::{read_log, read_log_limited};
use crate::wal_writer::{Log, Reserve, SEGMENT_BYTES_DEFAULT};
use arc_swap::ArcSwap;
use std::collections::HashSet;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a waiting thread sleeps before re-checking its condition (bounds the cost of a
/// missed wake-up; wake-ups are normally immediate through the condition variable).
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// A memtable with the WAL that logs it and the bookkeeping of the writers inside it.
pub struct MemComponent {
    memtable: Arc<Memtable>,
    log: Arc<Log>,
    /// Set by the one writer that seals this component when it is full.
    switch_claimed: AtomicBool,
    /// The last sequence this component can hold, set when it is sealed.
    last_sequence: OnceLock<SequenceNumber>,
    /// Bloom filter over its user keys, built once it is sealed and quiet (sLSM's runs).
    filter: OnceLock<BloomFilter>,
    /// Its nodes in key order, gathered once it is sealed and quiet: the filter and then the
    /// flush read them without chasing level-0 pointers (`Memtable::sorted_nodes`).
    sorted: OnceLock<Arc<SortedNodes>>,
}

impl std::fmt::Debug for MemComponent {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemComponent")
            .field("wal", &self.log.number())
            .field("entries", &self.memtable.len())
            .finish()
    }
}

impl MemComponent {
    fn new(memtable: Memtable, log: Log) -> Self {
        MemComponent {
            memtable: Arc::new(memtable),
            log: Arc::new(log),
            switch_claimed: AtomicBool::new(false),
            last_sequence: OnceLock::new(),
            filter: OnceLock::new(),
            sorted: OnceLock::new(),
        }
    }

    /// The nodes in key order. Precondition: the component is quiet (`wait_quiet`), so its
    /// contents are final; a gathering that does not hold every entry is replaced (it cannot
    /// happen, but a flush that trusted one would lose writes).
    fn sorted_nodes(&self) -> Arc<SortedNodes> {
        let sorted = self
            .sorted
            .get_or_init(|| Arc::new(self.memtable.sorted_nodes()));
        if sorted.len() == self.memtable.len() {
            return Arc::clone(sorted);
        }
        debug_assert!(
            false,
            "a quiet memtable changed after its nodes were gathered"
        );
        Arc::new(self.memtable.sorted_nodes())
    }

    fn wal_number(&self) -> u64 {
        self.log.number()
    }

    /// Lookup in a component: the filter (if built) first.
    fn get(
        &self,
        key: &[u8],
        sequence: SequenceNumber,
    ) -> Option<(SequenceNumber, ValueKind, &[u8])> {
        if let Some(filter) = self.filter.get() {
            if !filter.may_contain(key) {
                return None;
            }
        }
        self.memtable.get_entry(key, sequence)
    }
}

/// Spins a read-modify-write waits, holding its sequence, for lower writers before it gives
/// the sequence up as a void record. Each spin is one pause hint and one watermark check:
/// 2,000 is a few microseconds, enough for a writer that is running to copy and insert,
/// and short next to a preempted writer's time slice.
const RMW_SPIN_ROUNDS: u32 = 2_000;
/// Attempts after which a read-modify-write waits for lower writers without a bound.
const RMW_PATIENT_ATTEMPTS: u32 = 8;

/// A version as the read paths return it: its sequence and an owned value (`None` for a
/// tombstone).
fn owned_version(
    version: SequenceNumber,
    kind: ValueKind,
    value: &[u8],
) -> (SequenceNumber, Option<Vec<u8>>) {
    let value = match kind {
        ValueKind::Put => Some(value.to_vec()),
        ValueKind::Delete => None,
    };
    (version, value)
}

/// The outcome of step 4 of `DbInner::read_modify_write`.
enum Validation {
    Valid,
    Conflict,
    /// Lower writers were still in flight after the bounded spin.
    Busy,
    Failed(Error),
}

/// A writer's claim on sequences and WAL bytes in the active component (see
/// `DbInner::reserve`). It holds guards rather than clones of the super version and the WAL
/// segment, so the write path touches no shared reference count.
struct Reservation {
    super_version: arc_swap::Guard<Arc<SuperVersion>>,
    segment: arc_swap::Guard<Arc<crate::wal_writer::Segment>>,
    first: SequenceNumber,
    offset: usize,
}

impl Reservation {
    /// The component the sequences belong to.
    fn component(&self) -> &MemComponent {
        &self.super_version.memtable
    }
}

/// Everything a read needs, switched atomically (RCU): the active memtable, the sealed ones
/// and the version of on-disk tables.
#[derive(Debug)]
pub struct SuperVersion {
    memtable: Arc<MemComponent>,
    immutables: Vec<Arc<MemComponent>>,
    version: Arc<Version>,
    /// Readers of the latest state must read at a sequence >= this (see `read_point`).
    oldest_readable: SequenceNumber,
}

#[derive(Debug, Default)]
struct BackgroundState {
    shutting_down: bool,
    compaction_wanted: bool,
}

/// Locks a mutex whose data stays consistent even if a holder panicked (every critical
/// section here either completes its update or returns an error before changing anything).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct DbInner {
    directory: PathBuf,
    options: Options,
    file_system: Arc<dyn FileSystem>,
    table_cache: Arc<TableCache>,
    table_options: TableOptions,
    shape: ShapeOptions,
    _lock: Box<dyn FileLock>,
    super_version: ArcSwap<SuperVersion>,
    super_version_update: Mutex<()>,
    /// Every sequence <= this is inserted (the cLSM "published" timestamp).
    inserted: Watermark,
    /// Every sequence <= this is written to the OS (raised by WAL leaders).
    written: Arc<AtomicU64>,
    /// Writes acknowledged above `visible()`: readers start at or above them, so writers
    /// never wait for each other's inserts (cLSM §3.2's linearizable snapshot: the wait is on
    /// the read side).
    acknowledged: Acknowledged,
    versions: Mutex<VersionSet>,
    file_numbers: Arc<AtomicU64>,
    background: Mutex<BackgroundState>,
    background_changed: Condvar,
    has_sticky_error: AtomicBool,
    sticky_error: Mutex<Option<Error>>,
    snapshots: Arc<SnapshotList>,
    counters: Counters,
    pending_outputs: Mutex<HashSet<u64>>,
    compaction_lock: Mutex<()>,
    /// Lock stripes of the baseline read-modify-write (never used by `update`).
    stripes: Box<[Mutex<()>]>,
}

/// What a read-modify-write function decides to do with the current value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Leave the key as it is (nothing is written).
    Keep,
    /// Store this value.
    Put(Vec<u8>),
    /// Delete the key.
    Delete,
}

/// Number of lock stripes of the baseline read-modify-write.
const STRIPES: usize = 1024;

/// A persistent key-value store. See the module documentation for the concurrency contract.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Db")
            .field("directory", &self.inner.directory)
            .finish()
    }
}

impl Db {
    /// Opens (creating if allowed) the database in `path`, recovering from its MANIFEST and
    /// WALs. Fails with [`Error::Locked`] if another handle has it open.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let directory = path.as_ref().to_path_buf();
        let file_system = Arc::clone(&options.file_system);
        if options.create_if_missing {
            file_system.create_dir_all(&directory)?;
        } else if !file_system.exists(&directory)? {
            return Err(Error::NotFound { path: directory });
        }
        let lock = file_system.lock(&filename::lock_path(&directory))?;
        let mut versions = VersionSet::new(
            &directory,
            Arc::clone(&file_system),
            options.level_count,
            options.manifest_size_bytes_max,
        );
        if file_system.exists(&filename::current_path(&directory))? {
            if options.error_if_exists {
                return Err(Error::AlreadyExists { path: directory });
            }
            versions.recover()?;
        } else if !options.create_if_missing {
            return Err(Error::NotFound { path: directory });
        }
        let block_cache = (options.block_cache_size_bytes > 0)
            .then(|| Arc::new(BlockCache::new(options.block_cache_size_bytes)));
        let table_cache = Arc::new(TableCache::new(
            Arc::clone(&file_system),
            directory.clone(),
            block_cache,
            options.verify_checksums,
        ));
        let table_options = TableOptions::from(&options);
        let last_sequence = recover_wals(
            &directory,
            file_system.as_ref(),
            &mut versions,
            &table_options,
            &options,
        )?;
        let wal_number = versions.new_file_number();
        let wal_path = filename::wal_path(&directory, wal_number);
        let wal_file = if options.wal_enabled {
            let file = create_wal_file(file_system.as_ref(), &options, &wal_path)?;
            file_system.sync_dir(&directory)?;
            Some(file)
        } else {
            None
        };
        // The fresh MANIFEST names the new WAL as the first one to replay: older WALs were
        // flushed by recovery into the tables the snapshot lists.
        versions.apply_unlogged(&VersionEdit {
            log_number: Some(wal_number),
            last_sequence: Some(last_sequence),
            ..VersionEdit::default()
        })?;
        versions.write_snapshot()?;
        let written = Arc::new(AtomicU64::new(last_sequence));
        let log = Log::new(
            wal_number,
            wal_path,
            wal_file,
            last_sequence + 1,
            SEGMENT_BYTES_DEFAULT,
            None,
            Arc::clone(&written),
        );
        let file_numbers = versions.file_number_counter();
        let super_version = SuperVersion {
            memtable: Arc::new(MemComponent::new(new_memtable(&options), log)),
            immutables: Vec::new(),
            version: versions.current(),
            oldest_readable: last_sequence,
        };
        let inner = Arc::new(DbInner {
            shape: ShapeOptions::from(&options),
            table_options,
            directory,
            file_system,
            table_cache,
            _lock: lock,
            super_version: ArcSwap::from_pointee(super_version),
            super_version_update: Mutex::new(()),
            inserted: Watermark::new(last_sequence),
            written,
            acknowledged: Acknowledged::new(last_sequence),
            versions: Mutex::new(versions),
            file_numbers,
            background: Mutex::new(BackgroundState {
                compaction_wanted: true,
                ..BackgroundState::default()
            }),
            background_changed: Condvar::new(),
            has_sticky_error: AtomicBool::new(false),
            sticky_error: Mutex::new(None),
            snapshots: Arc::new(SnapshotList::default()),
            counters: Counters::default(),
            pending_outputs: Mutex::new(HashSet::new()),
            compaction_lock: Mutex::new(()),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            options,
        });
        inner.delete_obsolete_files();
        let mut threads = Vec::new();
        for (name, body) in [
            ("cairn-flush", DbInner::flush_loop as fn(&DbInner)),
            ("cairn-compact", DbInner::compaction_loop as fn(&DbInner)),
        ] {
            let worker = Arc::clone(&inner);
            let handle = std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    // A panic here is a bug; turning it into a sticky error keeps callers
                    // waiting on this thread (flush, stalled writers) from waiting forever.
                    let outcome =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&worker)));
                    if outcome.is_err() {
                        worker.set_sticky_error(&Error::Internal(format!(
                            "background thread {name} panicked"
                        )));
                    }
                })
                .map_err(|error| Error::io("spawn thread", &inner.directory, error))?;
            threads.push(handle);
        }
        Ok(Db { inner, threads })
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_with(&WriteOptions::default(), key, value)
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_with(&self, options: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(options, WriteBatch::single_put(key, value))
    }

    /// Removes `key` (a tombstone; absent keys may be deleted).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_with(&WriteOptions::default(), key)
    }

    /// Removes `key` with explicit write options.
    pub fn delete_with(&self, options: &WriteOptions, key: &[u8]) -> Result<()> {
        self.write(options, WriteBatch::single_delete(key))
    }

    /// Applies `batch` atomically: a reader at any snapshot sees all of it or none.
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.inner.write(options, batch).map(|_| ())
    }

    /// Like [`Db::write`], returning the sequence number of the batch's last entry (tests and
    /// tools use it to reconstruct histories).
    pub fn write_with_sequence(
        &self,
        options: &WriteOptions,
        batch: WriteBatch,
    ) -> Result<SequenceNumber> {
        self.inner.write(options, batch)
    }

    /// The value of `key` in the latest state.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key, None)
    }

    /// The value of `key` as of `snapshot`.
    pub fn get_at(&self, snapshot: &Snapshot, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key, Some(snapshot.sequence()))
    }

    /// Atomically replaces the value of `key` with `f(current)` (`None` deletes) and returns
    /// the new value. Non-blocking: `f` runs outside any lock and may run more than once if
    /// another write to `key` races it (see `read_modify_write` in the source).
    pub fn update<F>(&self, key: &[u8], mut f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let mut decide = |current: Option<&[u8]>| match f(current) {
            Some(value) => Update::Put(value),
            None => Update::Delete,
        };
        self.inner
            .read_modify_write(key, &mut decide)
            .map(|(value, _)| value)
    }

    /// The general form of `update`: `decide` may also keep the value unchanged. Returns the
    /// value now stored and the sequence number of the write (None when nothing was written).
    pub fn read_modify_write<F>(
        &self,
        key: &[u8],
        mut decide: F,
    ) -> Result<(Option<Vec<u8>>, Option<SequenceNumber>)>
    where
        F: FnMut(Option<&[u8]>) -> Update,
    {
        self.inner.read_modify_write(key, &mut decide)
    }

    /// Stores `value` only if `key` is absent; returns whether it stored it.
    pub fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut stored = false;
        self.inner.read_modify_write(key, &mut |current| {
            stored = current.is_none();
            if stored {
                Update::Put(value.to_vec())
            } else {
                Update::Keep
            }
        })?;
        Ok(stored)
    }

    /// Replaces the value of `key` with `new` (None deletes) only if it currently equals
    /// `expected` (None: absent); returns whether it did.
    pub fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let mut swapped = false;
        self.inner.read_modify_write(key, &mut |current| {
            swapped = current == expected;
            match (swapped, new) {
                (false, _) => Update::Keep,
                (true, Some(value)) => Update::Put(value.to_vec()),
                (true, None) => Update::Delete,
            }
        })?;
        Ok(swapped)
    }

    /// Adds `delta` to the integer stored at `key` (decimal ASCII, as Redis stores it; absent
    /// counts as 0) and returns the new value. Fails with `InvalidArgument` if the value is not
    /// an integer or the sum overflows.
    pub fn increment(&self, key: &[u8], delta: i64) -> Result<i64> {
        self.increment_with(key, delta, false)
    }

    /// `increment` through the lock-striped baseline (benchmarks only: cLSM §5.1 compares the
    /// optimistic RMW with this).
    pub fn increment_striped(&self, key: &[u8], delta: i64) -> Result<i64> {
        self.increment_with(key, delta, true)
    }

    fn increment_with(&self, key: &[u8], delta: i64, striped: bool) -> Result<i64> {
        // The decision may run several times (optimistic retries); the last run's outcome
        // is the one that took effect.
        let mut outcome: std::result::Result<i64, String> = Ok(0);
        let mut decide = |current: Option<&[u8]>| {
            outcome = parse_counter(current).and_then(|value| {
                value
                    .checked_add(delta)
                    .ok_or_else(|| "increment overflows a 64-bit integer".to_string())
            });
            match &outcome {
                Ok(value) => Update::Put(value.to_string().into_bytes()),
                Err(_) => Update::Keep,
            }
        };
        if striped {
            self.inner.read_modify_write_striped(key, &mut decide)?;
        } else {
            self.inner.read_modify_write(key, &mut decide)?;
        }
        outcome.map_err(Error::InvalidArgument)
    }

    /// A consistent view of the current state, kept until dropped.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshots.acquire(|| self.inner.read_sequence())
    }

    /// A cursor over the latest state (or `snapshot`), bounded to `[lower, upper)`.
    pub fn iter(
        &self,
        options: &ReadOptions,
        snapshot: Option<&Snapshot>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<DbIterator> {
        self.inner.iterator(options, snapshot, lower, upper)
    }

    /// Key-value pairs in the range, ascending.
    pub fn range(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<RangeIter> {
        self.range_at(None, lower, upper, false)
    }

    /// Key-value pairs in the range, descending.
    pub fn range_rev(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<RangeIter> {
        self.range_at(None, lower, upper, true)
    }

    /// Key-value pairs in the range as of `snapshot` (None: latest), in either direction.
    pub fn range_at(
        &self,
        snapshot: Option<&Snapshot>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<RangeIter> {
        // The cursor takes an inclusive lower and an exclusive upper bound; the other bound
        // kinds map onto them by appending a zero byte (the next key in byte order).
        let lower = match lower {
            Bound::Included(key) => Some(key.to_vec()),
            Bound::Excluded(key) => Some([key, &[0u8]].concat()),
            Bound::Unbounded => None,
        };
        let upper = match upper {
            Bound::Included(key) => Some([key, &[0u8]].concat()),
            Bound::Excluded(key) => Some(key.to_vec()),
            Bound::Unbounded => None,
        };
        let cursor = self.inner.iterator(
            &ReadOptions::default(),
            snapshot,
            lower.as_deref(),
            upper.as_deref(),
        )?;
        Ok(RangeIter::new(cursor, reverse))
    }

    /// Seals the active memtable (if not empty) and waits until every sealed memtable is on
    /// disk.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Compacts every level's files overlapping `[lower, upper]` (None = unbounded) down into
    /// the next level, after a flush.
    pub fn compact_range(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Result<()> {
        self.inner.flush()?;
        let _compacting = lock(&self.inner.compaction_lock);
        let level_count = self.inner.options.level_count;
        for level in 0..level_count - 1 {
            let version = self.inner.super_version.load().version.clone();
            let plan = if level == 0 {
                // Level-0 files overlap one another: compacting only some of them could put
                // an older version above a newer one, so take them all.
                compaction::plan_for_inputs(&version, 0, version.files(0).to_vec())
            } else {
                compaction::plan_for_range(&version, level, lower, upper)
            };
            if let Some(plan) = plan {
                if let Err(error) = self.inner.run_compaction(version, plan) {
                    // As in the background compactor: a failed write or sync here may leave
                    // the MANIFEST or the directory in an unknown state (sticky error).
                    self.inner.set_sticky_error(&error);
                    return Err(error);
                }
            }
        }
        Ok(())
    }

    /// A report of the database's shape and counters.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.directory
    }

    /// Closes the database, reporting any error from the final flush (with the WAL off) or
    /// from background work. Dropping a `Db` does the same but cannot report errors.
    pub fn close(mut self) -> Result<()> {
        let result = self.shutdown();
        std::mem::take(&mut self.threads);
        result
    }

    fn shutdown(&mut self) -> Result<()> {
        let mut result = Ok(());
        if !self.inner.options.wal_enabled && !self.inner.has_sticky_error.load(Ordering::Acquire) {
            // Without a WAL, unflushed writes exist only in memory: a clean close keeps them.
            result = self.inner.flush();
        }
        {
            let mut background = lock(&self.inner.background);
            background.shutting_down = true;
        }
        self.inner.background_changed.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        if let Some(error) = lock(&self.inner.sticky_error).clone() {
            if result.is_ok() {
                result = Err(error);
            }
        }
        result
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            let _ = self.shutdown();
        }
    }
}

/// Creates the file of a new WAL: memory-mapped where the options and the file system allow.
fn create_wal_file(
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

fn new_memtable(options: &Options) -> Memtable {
    Memtable::with_capacity(options.write_buffer_size_bytes)
}

/// Parses a counter value (absent = 0).
fn parse_counter(current: Option<&[u8]>) -> std::result::Result<i64, String> {
    match current {
        None => Ok(0),
        Some(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
            .ok_or_else(|| "value is not a decimal 64-bit integer".to_string()),
    }
}

/// Replays the WALs the MANIFEST does not cover and writes what they hold to a level-0 table.
/// Returns the largest sequence number now in the database.
fn recover_wals(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &mut VersionSet,
    table_options: &TableOptions,
    options: &Options,
) -> Result<SequenceNumber> {
    let names = file_system.list(directory)?;
    // Writers number new WALs from the shared counter without logging it, so files on disk
    // can carry numbers at or above the MANIFEST's next_file_number. Numbering past every
    // file present keeps a new file from truncating one that recovery still needs.
    for name in &names {
        if let Some(FileKind::Wal(number) | FileKind::Table(number) | FileKind::Manifest(number)) =
            filename::parse_file_name(name)
        {
            versions.reserve_file_numbers_through(number);
        }
    }
    let mut wal_numbers: Vec<u64> = names
        .iter()
        .filter_map(|name| match filename::parse_file_name(name) {
            Some(FileKind::Wal(number)) if number >= versions.log_number => Some(number),
            _ => None,
        })
        .collect();
    wal_numbers.sort_unstable();
    // Sized as the memtables the WALs were written from, so its key index does not saturate
    // (and fall back to skiplist searches) when the write buffer is larger than the default.
    let memtable = Arc::new(new_memtable(options));
    let mut last_sequence = versions.last_sequence;
    let mut expected_next: Option<SequenceNumber> = None;
    'wals: for (index, &number) in wal_numbers.iter().enumerate() {
        let path = filename::wal_path(directory, number);
        let contents =
            read_log_limited(file_system, &path, options.wal_record_payload_bytes_max())?;
        for (record_index, (offset, payload)) in contents.records().enumerate() {
            let batch = DecodedBatch::decode(payload)
                .map_err(|reason| Error::corruption(&path, offset, reason))?;
            if expected_next.is_none() && batch.first_sequence > versions.last_sequence + 1 {
                // The first WAL to replay continues where the last logged flush stopped, so
                // a gap means edits are missing: a damaged last MANIFEST record was taken
                // for a torn tail, or a WAL is gone (regression test:
                // damaged_last_manifest_record_is_reported_not_silently_dropped).
                let reason = format!(
                    "the WALs continue at sequence {} but the MANIFEST stops at {}",
                    batch.first_sequence, versions.last_sequence
                );
                return Err(match &versions.manifest_torn_tail {
                    Some((manifest, tail)) => Error::corruption(
                        manifest,
                        *tail,
                        format!("damaged last record (not a torn write): {reason}"),
                    ),
                    None => Error::corruption(&path, offset, reason),
                });
            }
            if let Some(expected) = expected_next {
                if record_index == 0 && batch.first_sequence > expected {
                    // The older WAL ends early, cleanly: a power loss took its unsynced tail
                    // while some unsynced records of this newer WAL reached the disk. That
                    // is possible because a log writes before its predecessor is synced,
                    // and harmless because it syncs only after (wal_writer invariant 4):
                    // nothing from here on was ever synced, so the prefix ends here.
                    let skipped = wal_numbers.len() - index;
                    eprintln!(
                        "cairn: {} starts at sequence {} but the WALs before it end at {}: \
                         an unsynced tail was lost; ignoring {skipped} WAL(s) from here",
                        path.display(),
                        batch.first_sequence,
                        expected - 1
                    );
                    break 'wals;
                }
                if batch.first_sequence != expected {
                    return Err(Error::corruption(
                        &path,
                        offset,
                        format!(
                            "WAL sequence gap: expected {expected}, found {}",
                            batch.first_sequence
                        ),
                    ));
                }
            }
            for (sequence, entry) in (batch.first_sequence..).zip(batch.iter()) {
                let (kind, key, value) =
                    entry.map_err(|reason| Error::corruption(&path, offset, reason))?;
                memtable.insert(key, sequence, kind, value);
            }
            expected_next = Some(batch.last_sequence() + 1);
            last_sequence = last_sequence.max(batch.last_sequence());
        }
        if contents.torn_tail_offset.is_some() {
            // A torn tail ends the recoverable prefix. A newer WAL can hold records past it
            // only if they were never synced (a sync first syncs every older WAL), so they
            // are dropped to keep the recovered state a prefix with no hole.
            let skipped = wal_numbers.len() - index - 1;
            if skipped > 0 {
                // Count what is dropped: after a process crash a newer WAL holds records only
                // if this one was not finished first, which invariant 4 of `wal_writer` rules
                // out — a non-zero count here means writes were lost, not just unsynced.
                let dropped_records: usize = wal_numbers
                    .iter()
                    .skip(index + 1)
                    .map(|&newer| {
                        read_log(file_system, &filename::wal_path(directory, newer))
                            .map_or(0, |newer| newer.record_count())
                    })
                    .sum();
                eprintln!(
                    "cairn: {} has a torn tail at offset {}; ignoring {skipped} newer WAL(s) \
                     of unsynced writes ({dropped_records} records)",
                    path.display(),
                    contents.torn_tail_offset.unwrap_or(0)
                );
            }
            break;
        }
    }
    if !memtable.is_empty() {
        let number = versions.new_file_number();
        let settings = OutputSettings {
            file_system,
            directory,
            table_options: *table_options,
            target_file_size_bytes: None,
        };
        let mut filter = VersionFilter::new(&[], None);
        let mut iterator = memtable.iter();
        let mut allocate = || number;
        let outputs =
            compaction::write_tables(&mut iterator, &mut filter, &settings, &mut allocate)?;
        versions.apply_unlogged(&VersionEdit {
            added_files: outputs.into_iter().map(|file| (0, file)).collect(),
            last_sequence: Some(last_sequence),
            ..VersionEdit::default()
        })?;
    }
    Ok(last_sequence)
}

impl DbInner {
    /// A fresh memtable; its arena chunks are sized to the write buffer so that tiny
    /// memtables (tests) do not each hold a megabyte.
    fn new_memtable(&self) -> Memtable {
        new_memtable(&self.options)
    }

    fn check_writable(&self) -> Result<()> {
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
    fn set_sticky_error(&self, error: &Error) {
        let mut sticky = lock(&self.sticky_error);
        if sticky.is_none() {
            *sticky = Some(error.clone());
        }
        self.has_sticky_error.store(true, Ordering::Release);
        drop(sticky);
        self.background_changed.notify_all();
    }

    /// The sequence readers use: every write at or below it is inserted and logged.
    #[inline]
    fn visible(&self) -> SequenceNumber {
        let inserted = self.inserted.get();
        if self.options.wal_enabled {
            inserted.min(self.written.load(Ordering::Acquire))
        } else {
            inserted
        }
    }

    /// The write ending at `sequence` is inserted and logged: acknowledge it without waiting
    /// for lower in-flight writes (`sequence::Acknowledged`).
    #[inline]
    fn acknowledge(&self, sequence: SequenceNumber) {
        self.acknowledged.acknowledge(sequence, self.visible());
    }

    /// The sequence a read that starts now uses: at or above every acknowledged write, and
    /// covering only writes that are fully inserted and logged. After a sticky error the wait
    /// gives up: a lower write that failed never becomes visible.
    fn read_sequence(&self) -> SequenceNumber {
        self.acknowledged.read_sequence(
            || self.visible(),
            || self.has_sticky_error.load(Ordering::Acquire),
        )
    }

    /// Waits until `visible()` reaches `sequence` (a short wait for lower in-flight writes).
    fn wait_visible(&self, sequence: SequenceNumber) -> Result<()> {
        self.inserted.wait_for(sequence);
        let mut round = 0u32;
        while self.visible() < sequence {
            self.check_writable()?;
            crate::sync::spin_wait(&mut round);
        }
        Ok(())
    }

    /// Applies a batch; returns the sequence of its last entry once it is visible and as
    /// durable as `options` asks.
    fn write(&self, options: &WriteOptions, mut batch: WriteBatch) -> Result<SequenceNumber> {
        self.check_writable()?;
        batch.validate()?;
        if batch.is_empty() {
            return Ok(self.visible());
        }
        let count = batch.len() as u64;
        let reservation = self.reserve(count, batch.size_bytes())?;
        let first = reservation.first;
        let record_length = {
            let record = batch.encode(first);
            reservation.segment.publish(reservation.offset, record);
            record.len()
        };
        let memtable = &reservation.component().memtable;
        let (mut puts, mut deletes) = (0, 0);
        let mut malformed = None;
        for (sequence, entry) in (first..).zip(batch.iter()) {
            match entry {
                Ok((kind, key, value)) => {
                    memtable.insert(key, sequence, kind, value);
                    match kind {
                        ValueKind::Put => puts += 1,
                        ValueKind::Delete => deletes += 1,
                    }
                }
                Err(error) => {
                    // Unreachable after `validate`; if it happens the range must still be
                    // finished, or the watermark would stop for every later writer.
                    malformed = Some(Error::Internal(error));
                    break;
                }
            }
        }
        let last = first + count - 1;
        self.finish_write(&reservation, options, last, record_length)?;
        if let Some(error) = malformed {
            return Err(error);
        }
        Counters::add(&self.counters.puts, puts);
        Counters::add(&self.counters.deletes, deletes);
        Counters::add(&self.counters.batches, 1);
        Ok(last)
    }

    /// The common tail of every write: publish `[first, last]` as inserted (which is what
    /// lets a flush of the component proceed), wait for the WAL and for visibility.
    fn finish_write(
        &self,
        reservation: &Reservation,
        options: &WriteOptions,
        last: SequenceNumber,
        record_bytes: usize,
    ) -> Result<()> {
        debug_assert!(reservation.first <= last);
        self.inserted.finish(reservation.first, last);
        if self.options.wal_enabled {
            let log = &reservation.component().log;
            if let Err(error) = log.wait_durable(last, options.sync) {
                // A failed write or sync may leave the WAL with a partial record: no later
                // write may be acknowledged (sticky error).
                self.set_sticky_error(&error);
                return Err(error);
            }
            Counters::add(
                &self.counters.wal_bytes,
                crate::wal::record_bytes(record_bytes) as u64,
            );
            if options.sync {
                Counters::add(&self.counters.wal_syncs, 1);
            }
        }
        self.acknowledge(last);
        Ok(())
    }

    /// Reserves `count` sequences and log space for a payload of `payload_bytes` in the active
    /// memtable, making room first if it is full. The caller must insert its entries into
    /// `reservation.component()` and then call `finish_write` (always, even on failure: the
    /// watermark waits for every reserved sequence, and so does the flush of the component).
    fn reserve(&self, count: u64, payload_bytes: usize) -> Result<Reservation> {
        // Every write path comes through here: refuse a record recovery could not replay.
        crate::batch::check_batch_bytes(
            payload_bytes,
            self.options.wal_record_payload_bytes_max(),
        )?;
        let mut delayed = false;
        loop {
            self.check_writable()?;
            // A guard, not a clone: holding it keeps the component alive without touching
            // the shared reference count of the super version on every write.
            let super_version = self.super_version.load();
            if !delayed
                && super_version.version.files(0).len() >= self.options.level0_slowdown_trigger
            {
                drop(super_version);
                // Slow down before stopping: one short delay per write hands the CPU to
                // compaction and spreads the cost instead of stopping writers outright.
                let started = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                Counters::add(&self.counters.slowdown_writes, 1);
                Counters::add(
                    &self.counters.slowdown_micros,
                    started.elapsed().as_micros() as u64,
                );
                delayed = true;
                continue;
            }
            let component = &super_version.memtable;
            if component.memtable.approximate_memory_bytes() >= self.options.write_buffer_size_bytes
            {
                let component = Arc::clone(component);
                drop(super_version);
                self.make_room(&component)?;
                continue;
            }
            let bytes = component.log.reservation_bytes(payload_bytes);
            match component.log.reserve(count, bytes) {
                Reserve::Reserved {
                    segment,
                    sequence,
                    offset,
                } => {
                    return Ok(Reservation {
                        super_version,
                        segment,
                        first: sequence,
                        offset,
                    })
                }
                Reserve::Sealed => {
                    let component = Arc::clone(component);
                    drop(super_version);
                    self.wait_for_switch(&component)?;
                }
            }
        }
    }

    /// Waits until `component` is no longer the active memtable (another writer is sealing
    /// it), counting the time as a stall.
    fn wait_for_switch(&self, component: &Arc<MemComponent>) -> Result<()> {
        let started = Instant::now();
        let mut round = 0u32;
        while Arc::ptr_eq(&self.super_version.load().memtable, component) {
            self.check_writable()?;
            if round > 1000 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                crate::sync::spin_wait(&mut round);
            }
            round = round.saturating_add(1);
        }
        let waited = started.elapsed().as_micros() as u64;
        if waited > 100 {
            Counters::add(&self.counters.stop_writes, 1);
            Counters::add(&self.counters.stop_micros, waited);
        }
        Ok(())
    }

    /// The active memtable is full: one writer seals it (after waiting for room among the
    /// sealed memtables and level 0); the others wait for the new one.
    fn make_room(&self, component: &Arc<MemComponent>) -> Result<()> {
        if component
            .switch_claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return self.wait_for_switch(component);
        }
        let started = Instant::now();
        let mut stalled = false;
        loop {
            self.check_writable()?;
            let super_version = self.super_version.load();
            let full = super_version.immutables.len() >= self.options.max_immutable_memtables
                || super_version.version.files(0).len() >= self.options.level0_stop_trigger;
            drop(super_version);
            if !full {
                break;
            }
            stalled = true;
            self.request_compaction();
            let background = lock(&self.background);
            let _ = self.background_changed.wait_timeout(background, WAIT_SLICE);
        }
        if stalled {
            Counters::add(&self.counters.stop_writes, 1);
            Counters::add(
                &self.counters.stop_micros,
                started.elapsed().as_micros() as u64,
            );
        }
        self.switch_memtable(component)
    }

    /// Seals `component` and installs a new memtable with a new WAL. Only the writer that
    /// claimed the switch (or `flush`, likewise claiming it) calls this.
    fn switch_memtable(&self, component: &Arc<MemComponent>) -> Result<()> {
        let next_sequence = component.log.seal();
        let _ = component.last_sequence.set(next_sequence - 1);
        let wal_number = self.file_numbers.fetch_add(1, Ordering::SeqCst);
        let wal_path = filename::wal_path(&self.directory, wal_number);
        let file = if self.options.wal_enabled {
            let created = create_wal_file(self.file_system.as_ref(), &self.options, &wal_path)
                .and_then(|file| {
                    self.file_system.sync_dir(&self.directory)?;
                    Ok(file)
                });
            match created {
                Ok(file) => Some(file),
                Err(error) => {
                    self.set_sticky_error(&error);
                    return Err(error);
                }
            }
        } else {
            None
        };
        let log = Log::new(
            wal_number,
            wal_path,
            file,
            next_sequence,
            SEGMENT_BYTES_DEFAULT,
            Some(Arc::clone(&component.log)),
            Arc::clone(&self.written),
        );
        let fresh = Arc::new(MemComponent::new(self.new_memtable(), log));
        {
            let _update = lock(&self.super_version_update);
            let current = self.super_version.load_full();
            debug_assert!(Arc::ptr_eq(&current.memtable, component));
            let mut immutables = Vec::with_capacity(current.immutables.len() + 1);
            immutables.push(Arc::clone(&current.memtable));
            immutables.extend(current.immutables.iter().cloned());
            self.super_version.store(Arc::new(SuperVersion {
                memtable: fresh,
                immutables,
                version: Arc::clone(&current.version),
                oldest_readable: current.oldest_readable,
            }));
        }
        Counters::add(&self.counters.memtable_switches, 1);
        self.background_changed.notify_all();
        Ok(())
    }

    fn get(&self, key: &[u8], sequence: Option<SequenceNumber>) -> Result<Option<Vec<u8>>> {
        Ok(self
            .get_version(key, sequence)?
            .and_then(|(_, value)| value))
    }

    /// The sequence to read the latest state at, and a super version that still holds every
    /// version a reader at that sequence needs. A flush or compaction drops versions older
    /// than the newest one below its inputs' largest sequence; a reader that took its
    /// sequence before such an install but loaded the super version after it would miss
    /// them, so it retakes a later sequence (still inside its own call: linearizable).
    fn read_point(&self) -> (SequenceNumber, arc_swap::Guard<Arc<SuperVersion>>) {
        loop {
            let sequence = self.read_sequence();
            let super_version = self.super_version.load();
            if sequence >= super_version.oldest_readable {
                return (sequence, super_version);
            }
        }
    }

    /// The newest version of `key` with sequence <= `sequence`: its sequence and its value
    /// (`None` for a tombstone); `None` if the key was never written.
    fn get_version(
        &self,
        key: &[u8],
        sequence: Option<SequenceNumber>,
    ) -> Result<Option<(SequenceNumber, Option<Vec<u8>>)>> {
        check_key(key)?;
        // An explicit sequence is a registered snapshot (or, for read-modify-write, above
        // everything flushed), whose versions flush and compaction keep.
        let (sequence, super_version) = match sequence {
            Some(sequence) => (sequence, self.super_version.load()),
            None => self.read_point(),
        };
        Ok(self.get_version_in(&super_version, key, sequence)?.0)
    }

    /// The newest version of `key` with sequence <= `sequence` among the memtables of
    /// `super_version`: the active one, then the sealed ones newest first.
    fn memory_version<'a>(
        super_version: &'a SuperVersion,
        key: &[u8],
        sequence: SequenceNumber,
    ) -> Option<(SequenceNumber, ValueKind, &'a [u8])> {
        super_version
            .memtable
            .memtable
            .get_entry(key, sequence)
            .or_else(|| {
                super_version
                    .immutables
                    .iter()
                    .find_map(|immutable| immutable.get(key, sequence))
            })
    }

    /// `get_version` in a given super version; also says whether the answer came from a
    /// memtable (read-modify-write validation uses it).
    #[allow(clippy::type_complexity)]
    fn get_version_in(
        &self,
        super_version: &SuperVersion,
        key: &[u8],
        sequence: SequenceNumber,
    ) -> Result<(Option<(SequenceNumber, Option<Vec<u8>>)>, bool)> {
        if let Some((version, kind, value)) = Self::memory_version(super_version, key, sequence) {
            return Ok((Some(owned_version(version, kind, value)), true));
        }
        Ok((self.tables_version(super_version, key, sequence)?, false))
    }

    /// The newest version of `key` (any sequence) in `super_version`, as `get_version_in`
    /// reports it, plus an insert hint for the active memtable: read-modify-write inserts its
    /// new version where the read found the key, without a second search from the head.
    #[allow(clippy::type_complexity)]
    fn latest_version_hinted<'a>(
        &self,
        super_version: &'a SuperVersion,
        key: &'a [u8],
    ) -> Result<(
        Option<(SequenceNumber, Option<Vec<u8>>)>,
        bool,
        crate::memtable::InsertHint<'a>,
    )> {
        let sequence = crate::key::SEQUENCE_MAX;
        let (active, hint) = super_version.memtable.memtable.get_entry_hinted(key);
        let in_memory = active.or_else(|| {
            super_version
                .immutables
                .iter()
                .find_map(|immutable| immutable.get(key, sequence))
        });
        if let Some((version, kind, value)) = in_memory {
            return Ok((Some(owned_version(version, kind, value)), true, hint));
        }
        Ok((
            self.tables_version(super_version, key, sequence)?,
            false,
            hint,
        ))
    }

    /// The newest version of `key` with sequence <= `sequence` in the on-disk tables of
    /// `super_version`.
    fn tables_version(
        &self,
        super_version: &SuperVersion,
        key: &[u8],
        sequence: SequenceNumber,
    ) -> Result<Option<(SequenceNumber, Option<Vec<u8>>)>> {
        let lookup = internal_key(key, sequence, ValueKind::SEEK);
        let version = &super_version.version;
        for file in version.files(0) {
            if !file.overlaps(Some(key), Some(key)) {
                continue;
            }
            let table = self.table_cache.table(file)?;
            if let Some((found_sequence, kind, value)) = table.get(&lookup)? {
                return Ok(Some(owned_version(found_sequence, kind, &value)));
            }
        }
        for level in 1..version.level_count() {
            for file in version.find_files(level, key) {
                let table = self.table_cache.table(file)?;
                if let Some((found_sequence, kind, value)) = table.get(&lookup)? {
                    return Ok(Some(owned_version(found_sequence, kind, &value)));
                }
            }
        }
        Ok(None)
    }

    /// Optimistic read-modify-write (cLSM Algorithm 3, made safe against concurrent puts):
    /// 1. note the next sequence `horizon` and wait until every sequence below it is
    ///    inserted — without holding a sequence of our own, so no one waits for us;
    /// 2. read the newest version of `key`, in-flight writes included, and apply `decide`;
    /// 3. reserve a sequence number and log space;
    /// 4. if it is `horizon`, nobody reserved since step 1 and the read saw every version
    ///    below ours: valid. Otherwise wait (briefly, spinning) until every lower sequence is
    ///    inserted and check that the newest version below ours is still the one read;
    /// 5. insert (valid) or log a *void record* and retry (conflict, or the lower writers did
    ///    not finish within the spin).
    ///
    /// The wait closes a race in the paper's algorithm: a put that took a lower timestamp
    /// before the read but inserted after it would otherwise be silently overwritten by a
    /// value computed without it. The wait is for CPU work of lower writers, never for a lock,
    /// and it is bounded while we hold a sequence: a writer that sleeps holding a sequence
    /// stalls every later writer (they all wait for the watermark), and on an oversubscribed
    /// machine such waits chain into convoys. After `RMW_PATIENT_ATTEMPTS` failed attempts
    /// the wait is unbounded, which guarantees progress.
    /// Returns the value now stored and the sequence of the write (None if `decide` kept).
    fn read_modify_write(
        &self,
        key: &[u8],
        decide: &mut dyn FnMut(Option<&[u8]>) -> Update,
    ) -> Result<(Option<Vec<u8>>, Option<SequenceNumber>)> {
        check_key(key)?;
        self.check_writable()?;
        let mut attempts = 0u32;
        loop {
            attempts = attempts.saturating_add(1);
            let horizon = self.super_version.load().memtable.log.next_sequence();
            debug_assert!(horizon >= 1, "sequence 0 is never handed out");
            self.inserted.wait_for(horizon.saturating_sub(1));
            // Held (a guard, no reference count) until validation: if the super version is
            // still this one then, no memtable was sealed or flushed in between.
            let read_super_version = self.super_version.load();
            let (read, read_in_memory, hint) =
                self.latest_version_hinted(&read_super_version, key)?;
            let read_version = read.as_ref().map(|(version, _)| *version);
            let current = read.and_then(|(_, value)| value);
            let (mut batch, new_value) = match decide(current.as_deref()) {
                Update::Keep => {
                    // The read is of the newest version, which may belong to a write still
                    // in flight: make it visible before reporting it, or a get that starts
                    // after this call returns could miss a value this call saw.
                    if let Some(version) = read_version {
                        self.wait_visible(version)?;
                    }
                    return Ok((current, None));
                }
                Update::Put(value) => {
                    check_value(&value)?;
                    (WriteBatch::single_put(key, &value), Some(value))
                }
                Update::Delete => (WriteBatch::single_delete(key), None),
            };
            let payload_bytes = batch.size_bytes();
            let reservation = self.reserve(1, payload_bytes)?;
            let sequence = reservation.first;
            debug_assert!(sequence >= horizon);
            let validation = if sequence == horizon {
                Validation::Valid
            } else if self
                .inserted
                .wait_for_spinning(sequence - 1, RMW_SPIN_ROUNDS)
                || attempts > RMW_PATIENT_ATTEMPTS
            {
                self.inserted.wait_for(sequence - 1);
                let now = self.super_version.load();
                if Arc::ptr_eq(&now, &read_super_version) {
                    // Same memtables and tables as the read: a version the read missed has a
                    // sequence in [horizon, sequence) and so sits in one of these memtables
                    // (nothing was flushed), so checking memory is enough — no table probe.
                    let newest = Self::memory_version(&now, key, sequence - 1)
                        .map(|(version, _, _)| version);
                    let unchanged = match newest {
                        Some(version) => Some(version) == read_version,
                        None => !read_in_memory,
                    };
                    if unchanged {
                        Validation::Valid
                    } else {
                        Validation::Conflict
                    }
                } else {
                    match self.get_version(key, Some(sequence - 1)) {
                        Ok(found)
                            if found.as_ref().map(|(version, _)| *version) == read_version =>
                        {
                            Validation::Valid
                        }
                        Ok(_) => Validation::Conflict,
                        Err(error) => Validation::Failed(error),
                    }
                }
            } else {
                Validation::Busy
            };
            let options = WriteOptions::default();
            if let Validation::Valid = validation {
                let record = batch.encode(sequence);
                reservation.segment.publish(reservation.offset, record);
                let memtable = &reservation.component().memtable;
                // The hint is used only if the sequence landed in the memtable that was read
                // (the insert checks); otherwise this is a plain insert.
                match new_value {
                    Some(ref value) => {
                        memtable.insert_hinted(Some(&hint), key, sequence, ValueKind::Put, value)
                    }
                    None => {
                        memtable.insert_hinted(Some(&hint), key, sequence, ValueKind::Delete, &[])
                    }
                }
                self.finish_write(&reservation, &options, sequence, payload_bytes)?;
                Counters::add(&self.counters.read_modify_writes, 1);
                return Ok((new_value, Some(sequence)));
            }
            // The sequence is spent on a void record so the log and the watermark stay
            // gap-free.
            let void = crate::batch::void_record(sequence, payload_bytes);
            reservation.segment.publish(reservation.offset, &void);
            self.finish_write(&reservation, &options, sequence, payload_bytes)?;
            match validation {
                Validation::Failed(error) => return Err(error),
                Validation::Busy => Counters::add(&self.counters.read_modify_write_busy, 1),
                _ => Counters::add(&self.counters.read_modify_write_conflicts, 1),
            }
        }
    }

    /// The lock-striped read-modify-write used as the baseline in benchmarks (cLSM §5.1):
    /// a mutex per key stripe around read + write.
    fn read_modify_write_striped(
        &self,
        key: &[u8],
        decide: &mut dyn FnMut(Option<&[u8]>) -> Update,
    ) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let stripe = (xxhash_rust::xxh3::xxh3_64(key) % self.stripes.len() as u64) as usize;
        let Some(stripe) = self.stripes.get(stripe) else {
            return Err(Error::Internal("stripe index out of range".into()));
        };
        let _held = lock(stripe);
        let current = self.get(key, None)?;
        // Batches sized as in `update`, so the baseline pays no allocation the optimistic
        // path does not.
        let (batch, new_value) = match decide(current.as_deref()) {
            Update::Keep => return Ok(current),
            Update::Put(value) => (WriteBatch::single_put(key, &value), Some(value)),
            Update::Delete => (WriteBatch::single_delete(key), None),
        };
        self.write(&WriteOptions::default(), batch)?;
        Ok(new_value)
    }

    fn iterator(
        &self,
        options: &ReadOptions,
        snapshot: Option<&Snapshot>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<DbIterator> {
        if let Some(key) = lower {
            check_key(key)?;
        }
        if let Some(key) = upper {
            check_key(key)?;
        }
        let (sequence, super_version) = match snapshot {
            Some(snapshot) => (snapshot.sequence(), self.super_version.load_full()),
            None => {
                let (sequence, super_version) = self.read_point();
                (sequence, arc_swap::Guard::into_inner(super_version))
            }
        };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        children.push(Box::new(super_version.memtable.memtable.iter()));
        for immutable in &super_version.immutables {
            children.push(Box::new(immutable.memtable.iter()));
        }
        let version = &super_version.version;
        for file in version.files(0) {
            if file.overlaps(lower, upper) {
                children.push(Box::new(
                    self.table_cache.table(file)?.iter_with(options.fill_cache),
                ));
            }
        }
        for level in 1..version.level_count() {
            for files in version.overlapping_runs(level, lower, upper) {
                children.push(Box::new(LevelIterator::new(
                    files,
                    Arc::clone(&self.table_cache),
                    options.fill_cache,
                )));
            }
        }
        Ok(DbIterator::new(
            Box::new(MergingIterator::new(children)),
            sequence,
            lower.map(<[u8]>::to_vec),
            upper.map(<[u8]>::to_vec),
            Box::new(super_version),
        ))
    }

    fn flush(&self) -> Result<()> {
        self.check_writable()?;
        let component = Arc::clone(&self.super_version.load().memtable);
        if !component.memtable.is_empty() {
            // Claim the switch like a writer that found the memtable full; if a writer already
            // claimed it, its switch does the job.
            self.make_room(&component)?;
        }
        loop {
            self.check_writable()?;
            let super_version = self.super_version.load();
            let pending = super_version
                .immutables
                .iter()
                .any(|immutable| immutable.log.first_sequence() <= component.log.first_sequence());
            if !pending {
                return Ok(());
            }
            drop(super_version);
            let background = lock(&self.background);
            if background.shutting_down {
                return Err(Error::Closed);
            }
            let _ = self.background_changed.wait_timeout(background, WAIT_SLICE);
        }
    }

    fn request_compaction(&self) {
        lock(&self.background).compaction_wanted = true;
        self.background_changed.notify_all();
    }

    fn flush_loop(&self) {
        loop {
            {
                let background = lock(&self.background);
                if background.shutting_down || self.has_sticky_error.load(Ordering::Acquire) {
                    return;
                }
                if self.super_version.load().immutables.is_empty() {
                    let _ = self.background_changed.wait_timeout(background, WAIT_SLICE);
                    continue;
                }
            }
            self.build_filters();
            if let Err(error) = self.flush_oldest() {
                self.set_sticky_error(&error);
                return;
            }
            self.request_compaction();
        }
    }

    /// Gives every quiet sealed memtable a Bloom filter, so gets skip the ones that cannot
    /// hold their key (sLSM §2.1). Cheap next to a flush, and done while the flush waits.
    fn build_filters(&self) {
        if self.options.bloom_bits_per_key == 0 {
            return;
        }
        let super_version = self.super_version.load_full();
        for immutable in &super_version.immutables {
            let quiet = immutable
                .last_sequence
                .get()
                .is_some_and(|&last| self.inserted.get() >= last);
            if immutable.filter.get().is_some() || !quiet {
                continue;
            }
            let mut builder = BloomFilterBuilder::new(self.options.bloom_bits_per_key);
            let mut previous: Vec<u8> = Vec::new();
            let mut first = true;
            immutable.sorted_nodes().for_each_key(|key| {
                let user = crate::key::user_key(key);
                // Versions of a key are adjacent: add each user key once.
                if first || previous.as_slice() != user {
                    builder.add_key(user);
                    previous.clear();
                    previous.extend_from_slice(user);
                    first = false;
                }
            });
            if let Ok(filter) = BloomFilter::decode(builder.finish()) {
                let _ = immutable.filter.set(filter);
            }
        }
    }

    /// Waits until every writer inside the sealed `component` has inserted and its last
    /// sequence is visible (invariant 3), so its contents are final and readers at the
    /// visible sequence never need a version the flush would drop. A writer holds a sequence
    /// <= `last_sequence` from its reservation until `finish_write`, so the inserted
    /// watermark reaching `last_sequence` is exactly "no writer is inside".
    fn wait_quiet(&self, component: &MemComponent) -> Result<()> {
        let Some(&last) = component.last_sequence.get() else {
            return Err(Error::Internal(
                "flush of a memtable that was never sealed".into(),
            ));
        };
        self.wait_visible(last)
    }

    /// Writes the oldest sealed memtable to a level-0 table and drops it from memory.
    fn flush_oldest(&self) -> Result<()> {
        let Some(immutable) = self.super_version.load().immutables.last().cloned() else {
            return Ok(());
        };
        self.wait_quiet(&immutable)?;
        let snapshots = self.snapshots.sequences();
        let mut filter = VersionFilter::new(&snapshots, None);
        let mut iterator = immutable.sorted_nodes().iter();
        let outputs = self.write_outputs(&mut iterator, &mut filter, None)?;
        let written: u64 = outputs.iter().map(|file| file.size_bytes).sum();
        let edit = VersionEdit {
            // WALs are numbered in switch order, so every memtable still unflushed has a WAL
            // numbered above this one's.
            log_number: Some(immutable.wal_number() + 1),
            last_sequence: Some(self.visible()),
            added_files: outputs.into_iter().map(|file| (0, file)).collect(),
            ..VersionEdit::default()
        };
        self.apply_and_install(edit, Some(&immutable))?;
        // The table and the MANIFEST edit are synced: the WAL is never needed again, so a
        // later sync in a newer log does not wait for it (wal_writer invariant 4).
        immutable.log.retire();
        Counters::add(&self.counters.flushes, 1);
        Counters::add(&self.counters.flush_bytes, written);
        self.delete_obsolete_files();
        Ok(())
    }

    /// Runs `compaction::write_tables`, registering each output as pending so the obsolete
    /// file sweep leaves it alone until it is installed (or, on failure, forgotten — its
    /// partial file is then swept).
    fn write_outputs(
        &self,
        input: &mut dyn InternalIterator,
        filter: &mut VersionFilter<'_>,
        target_file_size_bytes: Option<u64>,
    ) -> Result<Vec<crate::version::AddedFile>> {
        let settings = OutputSettings {
            file_system: self.file_system.as_ref(),
            directory: &self.directory,
            table_options: self.table_options,
            target_file_size_bytes,
        };
        let mut allocated = Vec::new();
        let mut allocate = || {
            let number = self.file_numbers.fetch_add(1, Ordering::SeqCst);
            lock(&self.pending_outputs).insert(number);
            allocated.push(number);
            number
        };
        let result = compaction::write_tables(input, filter, &settings, &mut allocate);
        if result.is_err() {
            let mut pending = lock(&self.pending_outputs);
            for number in &allocated {
                pending.remove(number);
            }
        }
        result
    }

    /// Logs `edit` to the MANIFEST, then installs the new version (and, for a flush, removes
    /// the flushed memtable) in one super-version swap (invariant 3).
    fn apply_and_install(
        &self,
        edit: VersionEdit,
        flushed: Option<&Arc<MemComponent>>,
    ) -> Result<()> {
        let added: Vec<u64> = edit
            .added_files
            .iter()
            .map(|(_, file)| file.number)
            .collect();
        let mut versions = lock(&self.versions);
        // On error the edit may still be in the MANIFEST (a failed sync does not mean the
        // record is absent), so the next open may list its new files: they stay pending
        // (never swept) for the rest of this process, which is stopped by the sticky error.
        let version = versions.log_and_apply(edit)?;
        {
            let _update = lock(&self.super_version_update);
            let current = self.super_version.load_full();
            let immutables = current
                .immutables
                .iter()
                .filter(|candidate| flushed.is_none_or(|flushed| !Arc::ptr_eq(candidate, flushed)))
                .cloned()
                .collect();
            self.super_version.store(Arc::new(SuperVersion {
                memtable: Arc::clone(&current.memtable),
                immutables,
                version,
                // Every input of this flush or compaction is at or below the visible sequence
                // (flushes wait for it), so readers at or above it miss nothing dropped.
                oldest_readable: self.visible().max(current.oldest_readable),
            }));
        }
        drop(versions);
        let mut pending = lock(&self.pending_outputs);
        for number in &added {
            pending.remove(number);
        }
        drop(pending);
        self.background_changed.notify_all();
        Ok(())
    }

    fn compaction_loop(&self) {
        loop {
            {
                let mut background = lock(&self.background);
                if background.shutting_down || self.has_sticky_error.load(Ordering::Acquire) {
                    return;
                }
                if !background.compaction_wanted {
                    let _ = self
                        .background_changed
                        .wait_timeout(background, WAIT_SLICE * 10);
                    continue;
                }
                background.compaction_wanted = false;
            }
            loop {
                let _compacting = lock(&self.compaction_lock);
                if lock(&self.background).shutting_down {
                    return;
                }
                let (version, pointers) = {
                    let versions = lock(&self.versions);
                    (versions.current(), versions.compact_pointers.clone())
                };
                let plan = match compaction::choose(&version, &self.shape, &pointers) {
                    Choice::Nothing => break,
                    Choice::Compact(plan) => plan,
                };
                if let Err(error) = self.run_compaction(version, plan) {
                    self.set_sticky_error(&error);
                    return;
                }
            }
        }
    }

    /// Executes `plan` (chosen on `version`, which must still be current for its levels),
    /// then deletes the files it made obsolete. Caller holds `compaction_lock`.
    ///
    /// It takes `version` by value so that it can let go of it before the deletion pass: a
    /// version still held keeps its files live, so the inputs of this compaction would
    /// otherwise wait for the next pass (and, after the last compaction of a busy spell,
    /// sit on disk until the next open).
    fn run_compaction(&self, version: Arc<Version>, plan: Plan) -> Result<()> {
        let result = self.compact_plan(&version, plan);
        drop(version);
        if result.is_ok() {
            self.delete_obsolete_files();
        }
        result
    }

    /// The work of `run_compaction` while it still holds `version`: merge, write, install.
    fn compact_plan(&self, version: &Arc<Version>, plan: Plan) -> Result<()> {
        let mut edit = VersionEdit::default();
        for file in &plan.inputs {
            edit.deleted_files.push((plan.level, file.number));
        }
        for file in &plan.output_level_inputs {
            edit.deleted_files.push((plan.output_level, file.number));
        }
        if let Some(largest) = plan.largest_input_key() {
            edit.compact_pointers.push((plan.level, largest.to_vec()));
        }
        if plan.is_trivial_move() {
            for file in &plan.inputs {
                edit.added_files.push((
                    plan.output_level,
                    crate::version::AddedFile::from_meta(file),
                ));
            }
            self.apply_and_install(edit, None)?;
            Counters::add(&self.counters.compactions, 1);
            Counters::add(&self.counters.trivial_moves, 1);
            return Ok(());
        }
        // Compaction reads each input block once: filling the block cache with them would
        // evict the blocks reads keep hot, and cost an insert and an eviction per block.
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for file in &plan.inputs {
            children.push(Box::new(self.table_cache.table(file)?.iter_with(false)));
        }
        if !plan.output_level_inputs.is_empty() {
            children.push(Box::new(LevelIterator::new(
                plan.output_level_inputs.clone(),
                Arc::clone(&self.table_cache),
                false,
            )));
        }
        let mut merged = MergingIterator::new(children);
        let snapshots = self.snapshots.sequences();
        let mut filter = VersionFilter::new(&snapshots, Some((version, plan.output_level)))
            .with_compaction_filter(self.options.compaction_filter.as_deref(), plan.output_level);
        let outputs = self.write_outputs(
            &mut merged,
            &mut filter,
            Some(self.options.target_file_size_bytes),
        )?;
        let written: u64 = outputs.iter().map(|file| file.size_bytes).sum();
        edit.added_files = outputs
            .into_iter()
            .map(|file| (plan.output_level, file))
            .collect();
        self.apply_and_install(edit, None)?;
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.compaction_read_bytes, plan.input_bytes());
        Counters::add(&self.counters.compaction_write_bytes, written);
        Ok(())
    }

    /// Deletes files no version, pending output or unflushed memtable needs (invariant 4).
    /// Failures are ignored: a leftover file is harmless and retried next time.
    fn delete_obsolete_files(&self) {
        // Order matters: list first, then pending outputs, then live files. A file in the
        // listing was numbered (and made pending) before it was created; if it is no longer
        // pending it was installed first, so the live set read afterwards contains it.
        let Ok(names) = self.file_system.list(&self.directory) else {
            return;
        };
        let pending = lock(&self.pending_outputs).clone();
        let (live, log_number, manifest_number) = {
            let mut versions = lock(&self.versions);
            (
                versions.live_file_numbers(),
                versions.log_number,
                versions.manifest_number(),
            )
        };
        for name in names {
            let obsolete = match filename::parse_file_name(&name) {
                Some(FileKind::Wal(number)) => number < log_number,
                Some(FileKind::Table(number)) => {
                    !live.contains(&number) && !pending.contains(&number)
                }
                Some(FileKind::Manifest(number)) => number < manifest_number,
                _ => false,
            };
            if obsolete && self.file_system.remove(&self.directory.join(&name)).is_ok() {
                Counters::add(&self.counters.files_deleted, 1);
            }
        }
    }

    fn stats(&self) -> Stats {
        let super_version = self.super_version.load_full();
        let version = &super_version.version;
        let scores = compaction::level_scores(version, &self.shape);
        let levels = (0..version.level_count())
            .map(|level| LevelStats {
                files: version.files(level).len(),
                bytes: version.level_bytes(level),
                score: scores.get(level).copied().unwrap_or(0.0),
            })
            .collect();
        let (block_cache_bytes, block_cache_hits, block_cache_misses) =
            match self.table_cache.block_cache() {
                Some(cache) => (cache.usage_bytes() as u64, cache.hits(), cache.misses()),
                None => (0, 0, 0),
            };
        Stats {
            last_sequence: self.visible(),
            memtable_bytes: super_version.memtable.memtable.memory_bytes() as u64,
            memtable_entries: super_version.memtable.memtable.len() as u64,
            immutable_memtables: super_version.immutables.len(),
            levels,
            snapshots: self.snapshots.count(),
            block_cache_bytes,
            block_cache_hits,
            block_cache_misses,
            counters: self.counters.snapshot(),
        }
    }
}

// The contract in the module doc: a `Db` can be shared across threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
};

#[cfg(all(test, not(loom)))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::fs::MemFs;
    use crate::wal::LogWriter;

    /// Closes a new database on `fs` holding `a` and `b` (sequences 1 and 2); returns the
    /// number above every file in it.
    fn closed_database(fs: &MemFs) -> u64 {
        let db = reopen(fs).unwrap();
        db.put(b"a", b"1").unwrap();
        db.put(b"b", b"2").unwrap();
        db.close().unwrap();
        fs.list(Path::new("/db"))
            .unwrap()
            .iter()
            .filter_map(|name| match filename::parse_file_name(name) {
                Some(
                    FileKind::Wal(number) | FileKind::Table(number) | FileKind::Manifest(number),
                ) => Some(number),
                _ => None,
            })
            .max()
            .unwrap()
            + 1
    }

    fn write_wal(fs: &MemFs, number: u64, records: &[(SequenceNumber, &[u8])]) {
        let path = filename::wal_path(Path::new("/db"), number);
        let mut writer = LogWriter::new(fs.create(&path).unwrap(), path);
        for &(sequence, key) in records {
            let mut batch = WriteBatch::new();
            batch.put(key, b"v");
            writer.add_record(batch.encode(sequence)).unwrap();
        }
        writer.sync().unwrap();
    }

    fn reopen(fs: &MemFs) -> Result<Db> {
        Db::open(
            "/db",
            Options {
                file_system: Arc::new(fs.clone()),
                ..Options::default()
            },
        )
    }

    #[test]
    fn a_wal_that_starts_past_its_predecessors_end_ends_the_recovered_prefix() {
        let fs = MemFs::new();
        let number = closed_database(&fs);
        // The older WAL lost its unsynced tail (sequence 5) to a power loss; the newer one's
        // unsynced records reached the disk.
        write_wal(&fs, number, &[(3, b"c"), (4, b"d")]);
        write_wal(&fs, number + 1, &[(6, b"f"), (7, b"g")]);
        let db = reopen(&fs).unwrap();
        for (key, expected) in [
            (&b"a"[..], true),
            (b"b", true),
            (b"c", true),
            (b"d", true),
            (b"f", false),
            (b"g", false),
        ] {
            assert_eq!(db.get(key).unwrap().is_some(), expected, "key {key:?}");
        }
        // The prefix is final: a write after reopening continues from sequence 5.
        db.put(b"h", b"8").unwrap();
        db.close().unwrap();
        let db = reopen(&fs).unwrap();
        assert!(db.get(b"h").unwrap().is_some());
        assert!(db.get(b"f").unwrap().is_none());
    }

    #[test]
    fn a_sequence_gap_inside_one_wal_is_still_corruption() {
        let fs = MemFs::new();
        let number = closed_database(&fs);
        write_wal(&fs, number, &[(3, b"c"), (6, b"f")]);
        match reopen(&fs) {
            Err(Error::Corruption { reason, .. }) => {
                assert!(reason.contains("sequence gap"), "{reason}")
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }
}
