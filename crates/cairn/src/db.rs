//! `Db`: the persistent store — open/recover, the write path, the read path, and the
//! background flush and compaction threads.
//!
//! Steps are numbered in `ARCHITECTURE.md`; this doc states the contract.
//!
//! Thread-safety contract: `Db` is `Send + Sync`; every method may be called from any thread.
//! - Reads (`get`, iterators, snapshots) take no lock: they load the visible sequence number
//!   (an atomic) and the current [`SuperVersion`] (an `ArcSwap`, RCU-style), then read
//!   immutable or concurrently-readable structures.
//! - Writes serialise on `writer` (sequence assignment + WAL append + memtable insert). The
//!   memtable itself accepts concurrent inserts; the writer lock exists to keep the WAL order
//!   equal to the sequence order and to publish the visible sequence without holes. (cLSM's
//!   lock-free write path replaces it in a later step.)
//! - Background threads never hold `writer`. They hold `versions` across MANIFEST I/O; clients
//!   never take `versions`. `super_version_update` is held only for pointer swaps.
//!
//! Lock order: `compaction_lock` → `versions` → `super_version_update`; `writer` →
//! `super_version_update`; `background` is a leaf (condition-variable state only).
//!
//! Invariants:
//! 1. Every write with sequence <= `visible_sequence` is fully in some memtable of the current
//!    super version or in a table of its version.
//! 2. A super version's immutable memtables are ordered newest first, hold disjoint sequence
//!    ranges, and each has a WAL numbered higher than every older one.
//! 3. A memtable leaves the super version only in the same swap that installs a version
//!    holding its flushed table (after the MANIFEST edit is durable).
//! 4. A WAL is deleted only when its number is below the MANIFEST's durable `log_number`.

use crate::batch::{DecodedBatch, WriteBatch};
use crate::compaction::{self, Choice, OutputSettings, Plan, ShapeOptions, VersionFilter};
use crate::db_iter::{DbIterator, RangeIter};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::{FileLock, FileSystem};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{check_key, internal_key, SequenceNumber, ValueKind};
use crate::memtable::Memtable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::sstable::{BlockCache, TableOptions};
use crate::stats::{Counters, LevelStats, Stats};
use crate::table_cache::{LevelIterator, TableCache};
use crate::version::{Version, VersionEdit, VersionSet};
use crate::wal::{read_log, LogWriter};
use arc_swap::ArcSwap;
use std::collections::HashSet;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a waiting thread sleeps before re-checking its condition (bounds the cost of a
/// missed wake-up; wake-ups are normally immediate through the condition variable).
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// A sealed memtable waiting for flush.
#[derive(Debug)]
pub struct ImmutableMemtable {
    memtable: Arc<Memtable>,
    wal_number: u64,
}

/// Everything a read needs, switched atomically (RCU): the active memtable, the sealed ones
/// and the version of on-disk tables.
#[derive(Debug)]
pub struct SuperVersion {
    memtable: Arc<Memtable>,
    immutables: Vec<Arc<ImmutableMemtable>>,
    version: Arc<Version>,
}

#[derive(Debug)]
struct WriterState {
    wal: Option<LogWriter>,
    wal_number: u64,
    last_sequence: SequenceNumber,
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
    writer: Mutex<WriterState>,
    super_version: ArcSwap<SuperVersion>,
    super_version_update: Mutex<()>,
    visible_sequence: AtomicU64,
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
}

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
        )?;
        let wal_number = versions.new_file_number();
        let wal = if options.wal_enabled {
            let wal_path = filename::wal_path(&directory, wal_number);
            let file = file_system.create(&wal_path)?;
            Some(LogWriter::new(file, wal_path))
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
        let file_numbers = versions.file_number_counter();
        let super_version = SuperVersion {
            memtable: Arc::new(new_memtable(&options)),
            immutables: Vec::new(),
            version: versions.current(),
        };
        let inner = Arc::new(DbInner {
            shape: ShapeOptions::from(&options),
            table_options,
            directory,
            file_system,
            table_cache,
            _lock: lock,
            writer: Mutex::new(WriterState {
                wal,
                wal_number,
                last_sequence,
            }),
            super_version: ArcSwap::from_pointee(super_version),
            super_version_update: Mutex::new(()),
            visible_sequence: AtomicU64::new(last_sequence),
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
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(options, batch)
    }

    /// Removes `key` (a tombstone; absent keys may be deleted).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_with(&WriteOptions::default(), key)
    }

    /// Removes `key` with explicit write options.
    pub fn delete_with(&self, options: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(options, batch)
    }

    /// Applies `batch` atomically: a reader at any snapshot sees all of it or none.
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.inner.write(options, batch)
    }

    /// The value of `key` in the latest state.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let sequence = self.inner.visible_sequence.load(Ordering::Acquire);
        self.inner.get(key, sequence)
    }

    /// The value of `key` as of `snapshot`.
    pub fn get_at(&self, snapshot: &Snapshot, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key, snapshot.sequence())
    }

    /// A consistent view of the current state, kept until dropped.
    pub fn snapshot(&self) -> Snapshot {
        let sequence = self.inner.visible_sequence.load(Ordering::Acquire);
        self.inner.snapshots.acquire(sequence)
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
                self.inner.run_compaction(&version, plan)?;
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

fn new_memtable(options: &Options) -> Memtable {
    Memtable::with_chunk_bytes((options.write_buffer_size_bytes / 8).clamp(4096, 1 << 20))
}

/// Replays the WALs the MANIFEST does not cover and writes what they hold to a level-0 table.
/// Returns the largest sequence number now in the database.
fn recover_wals(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &mut VersionSet,
    table_options: &TableOptions,
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
    let memtable = Arc::new(Memtable::new());
    let mut last_sequence = versions.last_sequence;
    let mut expected_next: Option<SequenceNumber> = None;
    let mut logs = Vec::with_capacity(wal_numbers.len());
    for &number in &wal_numbers {
        let path = filename::wal_path(directory, number);
        let contents = read_log(file_system, &path)?;
        logs.push((path, contents));
    }
    for (index, (path, contents)) in logs.iter().enumerate() {
        if let Some(offset) = contents.torn_tail_offset {
            // A running database syncs a WAL before it starts the next one, so a torn tail is
            // legitimate only in the last WAL holding records. Later WALs may exist but be
            // empty: recovery creates its new WAL before the replayed one is made obsolete
            // (and never syncs the replayed one), so a crash during recovery leaves exactly
            // that (regression test: crash_during_recovery_leaves_a_torn_wal_before_an_empty_one).
            let later_records = logs[index + 1..]
                .iter()
                .any(|(_, later)| later.record_count() > 0);
            if later_records {
                return Err(Error::corruption(
                    path,
                    offset,
                    "damaged record at the end of a WAL followed by a WAL with records",
                ));
            }
        }
        let path = path.clone();
        for (offset, payload) in contents.records() {
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
            let mut sequence = batch.first_sequence;
            for entry in batch.iter() {
                let (kind, key, value) =
                    entry.map_err(|reason| Error::corruption(&path, offset, reason))?;
                memtable.insert(key, sequence, kind, value);
                sequence += 1;
            }
            expected_next = Some(sequence);
            last_sequence = last_sequence.max(batch.last_sequence());
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

    fn write(&self, options: &WriteOptions, mut batch: WriteBatch) -> Result<()> {
        self.check_writable()?;
        batch.validate()?;
        if batch.is_empty() {
            return Ok(());
        }
        let mut writer = lock(&self.writer);
        self.make_room(&mut writer)?;
        let first_sequence = writer.last_sequence + 1;
        let count = batch.len() as u64;
        if first_sequence + count > crate::key::SEQUENCE_MAX {
            return Err(Error::InvalidArgument("sequence numbers exhausted".into()));
        }
        let record = batch.encode(first_sequence);
        if let Some(wal) = writer.wal.as_mut() {
            // Any failure here may leave a partial record in the WAL; later records would then
            // sit behind damage, so no further write may be acknowledged (sticky error).
            let logged = wal
                .add_record(record)
                .and_then(|()| wal.flush())
                .and_then(|()| if options.sync { wal.sync() } else { Ok(()) });
            if let Err(error) = logged {
                self.set_sticky_error(&error);
                return Err(error);
            }
            Counters::add(
                &self.counters.wal_bytes,
                (record.len() + crate::wal::RECORD_HEADER_BYTES) as u64,
            );
            if options.sync {
                Counters::add(&self.counters.wal_syncs, 1);
            }
        }
        let memtable = Arc::clone(&self.super_version.load().memtable);
        let mut sequence = first_sequence;
        let (mut puts, mut deletes) = (0, 0);
        for entry in batch.iter() {
            let (kind, key, value) = entry.map_err(Error::InvalidArgument)?;
            memtable.insert(key, sequence, kind, value);
            match kind {
                ValueKind::Put => puts += 1,
                ValueKind::Delete => deletes += 1,
            }
            sequence += 1;
        }
        writer.last_sequence = sequence - 1;
        // Publishing after the inserts makes the whole batch visible at once (atomicity).
        self.visible_sequence
            .store(writer.last_sequence, Ordering::Release);
        drop(writer);
        Counters::add(&self.counters.puts, puts);
        Counters::add(&self.counters.deletes, deletes);
        Counters::add(&self.counters.batches, 1);
        Ok(())
    }

    /// Makes sure the active memtable has room, sealing it or waiting as needed.
    fn make_room(&self, writer: &mut MutexGuard<'_, WriterState>) -> Result<()> {
        let mut delayed = false;
        loop {
            self.check_writable()?;
            let super_version = self.super_version.load();
            let level0_files = super_version.version.files(0).len();
            if !delayed && level0_files >= self.options.level0_slowdown_trigger {
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
            if super_version.memtable.approximate_memory_bytes()
                < self.options.write_buffer_size_bytes
            {
                return Ok(());
            }
            let stop = super_version.immutables.len() >= self.options.max_immutable_memtables
                || level0_files >= self.options.level0_stop_trigger;
            if stop {
                drop(super_version);
                let started = Instant::now();
                self.request_compaction();
                let background = lock(&self.background);
                let _ = self.background_changed.wait_timeout(background, WAIT_SLICE);
                Counters::add(&self.counters.stop_writes, 1);
                Counters::add(
                    &self.counters.stop_micros,
                    started.elapsed().as_micros() as u64,
                );
                continue;
            }
            drop(super_version);
            return self.switch_memtable(writer);
        }
    }

    /// Seals the active memtable and starts a new one with a new WAL.
    fn switch_memtable(&self, writer: &mut MutexGuard<'_, WriterState>) -> Result<()> {
        let wal_number = self.file_numbers.fetch_add(1, Ordering::SeqCst);
        if self.options.wal_enabled {
            let switched = (|| -> Result<LogWriter> {
                // The old WAL must be durable before a newer one can hold synced writes, or a
                // power loss could keep later writes and lose earlier ones (a hole).
                if let Some(old) = writer.wal.as_mut() {
                    old.sync()?;
                }
                let path = filename::wal_path(&self.directory, wal_number);
                let file = self.file_system.create(&path)?;
                self.file_system.sync_dir(&self.directory)?;
                Ok(LogWriter::new(file, path))
            })();
            match switched {
                Ok(wal) => writer.wal = Some(wal),
                Err(error) => {
                    self.set_sticky_error(&error);
                    return Err(error);
                }
            }
        }
        let old_wal_number = std::mem::replace(&mut writer.wal_number, wal_number);
        {
            let _update = lock(&self.super_version_update);
            let current = self.super_version.load_full();
            let mut immutables = Vec::with_capacity(current.immutables.len() + 1);
            immutables.push(Arc::new(ImmutableMemtable {
                memtable: Arc::clone(&current.memtable),
                wal_number: old_wal_number,
            }));
            immutables.extend(current.immutables.iter().cloned());
            self.super_version.store(Arc::new(SuperVersion {
                memtable: Arc::new(self.new_memtable()),
                immutables,
                version: Arc::clone(&current.version),
            }));
        }
        Counters::add(&self.counters.memtable_switches, 1);
        self.background_changed.notify_all();
        Ok(())
    }

    fn get(&self, key: &[u8], sequence: SequenceNumber) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let super_version = self.super_version.load();
        let found = |kind: ValueKind, value: &[u8]| match kind {
            ValueKind::Put => Some(value.to_vec()),
            ValueKind::Delete => None,
        };
        if let Some((kind, value)) = super_version.memtable.get(key, sequence) {
            return Ok(found(kind, value));
        }
        for immutable in &super_version.immutables {
            if let Some((kind, value)) = immutable.memtable.get(key, sequence) {
                return Ok(found(kind, value));
            }
        }
        let lookup = internal_key(key, sequence, ValueKind::SEEK);
        let version = &super_version.version;
        for file in version.files(0) {
            if !file.overlaps(Some(key), Some(key)) {
                continue;
            }
            let table = self.table_cache.table(file)?;
            if let Some((_, kind, value)) = table.get(&lookup)? {
                return Ok(found(kind, &value));
            }
        }
        for level in 1..version.level_count() {
            if let Some(file) = version.find_file(level, key) {
                let table = self.table_cache.table(file)?;
                if let Some((_, kind, value)) = table.get(&lookup)? {
                    return Ok(found(kind, &value));
                }
            }
        }
        Ok(None)
    }

    fn iterator(
        &self,
        _options: &ReadOptions,
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
        let sequence = match snapshot {
            Some(snapshot) => snapshot.sequence(),
            None => self.visible_sequence.load(Ordering::Acquire),
        };
        let super_version = self.super_version.load_full();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        children.push(Box::new(super_version.memtable.iter()));
        for immutable in &super_version.immutables {
            children.push(Box::new(immutable.memtable.iter()));
        }
        let version = &super_version.version;
        for file in version.files(0) {
            if file.overlaps(lower, upper) {
                children.push(Box::new(self.table_cache.table(file)?.iter()));
            }
        }
        for level in 1..version.level_count() {
            let files = version.overlapping_files(level, lower, upper);
            if !files.is_empty() {
                children.push(Box::new(LevelIterator::new(
                    files,
                    Arc::clone(&self.table_cache),
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
        {
            let mut writer = lock(&self.writer);
            self.check_writable()?;
            if !self.super_version.load().memtable.is_empty() {
                self.switch_memtable(&mut writer)?;
            }
        }
        loop {
            self.check_writable()?;
            if self.super_version.load().immutables.is_empty() {
                return Ok(());
            }
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
            if let Err(error) = self.flush_oldest() {
                self.set_sticky_error(&error);
                return;
            }
            self.request_compaction();
        }
    }

    /// Writes the oldest sealed memtable to a level-0 table and drops it from memory.
    fn flush_oldest(&self) -> Result<()> {
        let Some(immutable) = self.super_version.load().immutables.last().cloned() else {
            return Ok(());
        };
        let snapshots = self.snapshots.sequences();
        let mut filter = VersionFilter::new(&snapshots, None);
        let mut iterator = immutable.memtable.iter();
        let outputs = self.write_outputs(&mut iterator, &mut filter, None)?;
        let written: u64 = outputs.iter().map(|file| file.size_bytes).sum();
        let edit = VersionEdit {
            // WALs are numbered in switch order, so every memtable still unflushed has a WAL
            // numbered above this one's.
            log_number: Some(immutable.wal_number + 1),
            last_sequence: Some(self.visible_sequence.load(Ordering::Acquire)),
            added_files: outputs.into_iter().map(|file| (0, file)).collect(),
            ..VersionEdit::default()
        };
        self.apply_and_install(edit, Some(&immutable))?;
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
        flushed: Option<&Arc<ImmutableMemtable>>,
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
                if let Err(error) = self.run_compaction(&version, plan) {
                    self.set_sticky_error(&error);
                    return;
                }
            }
        }
    }

    /// Executes `plan` (chosen on `version`, which must still be current for its levels).
    /// Caller holds `compaction_lock`.
    fn run_compaction(&self, version: &Arc<Version>, plan: Plan) -> Result<()> {
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
                    crate::version::AddedFile {
                        number: file.number,
                        size_bytes: file.size_bytes,
                        smallest: file.smallest.clone(),
                        largest: file.largest.clone(),
                        smallest_sequence: file.smallest_sequence,
                        largest_sequence: file.largest_sequence,
                    },
                ));
            }
            self.apply_and_install(edit, None)?;
            Counters::add(&self.counters.compactions, 1);
            Counters::add(&self.counters.trivial_moves, 1);
            return Ok(());
        }
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for file in &plan.inputs {
            children.push(Box::new(self.table_cache.table(file)?.iter()));
        }
        if !plan.output_level_inputs.is_empty() {
            children.push(Box::new(LevelIterator::new(
                plan.output_level_inputs.clone(),
                Arc::clone(&self.table_cache),
            )));
        }
        let mut merged = MergingIterator::new(children);
        let snapshots = self.snapshots.sequences();
        let mut filter = VersionFilter::new(&snapshots, Some((version, plan.output_level)));
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
        self.delete_obsolete_files();
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
            last_sequence: self.visible_sequence.load(Ordering::Acquire),
            memtable_bytes: super_version.memtable.approximate_memory_bytes() as u64,
            memtable_entries: super_version.memtable.len() as u64,
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
