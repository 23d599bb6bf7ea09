//! Opening a database: the directory and its lock, MANIFEST recovery (with the salvage of a
//! flushed table whose edit was lost, in `salvage`), WAL replay (`replay_wals`), the first
//! WAL of the new process, the shared state and the background threads.
//!
//! Thread-safety contract: everything here runs on the opening thread before any other
//! thread can see the database; the background threads are spawned last, over a fully built
//! `DbInner`.
//!
//! Invariants:
//! 1. The recovered state is a prefix of the writes: replay stops at the first WAL that is
//!    empty, ends in a torn tail or a lost unsynced tail (a hole past its last sync marker,
//!    under `WalRecovery::PointInTime`), or starts past its predecessor's end, and every
//!    newer WAL is ignored (never replayed). A sequence gap inside the replayed prefix is
//!    corruption, and so is damage to WAL bytes a sync marker says were synced. Batches
//!    held by a table salvaged at this open are skipped, and the first batch replayed must
//!    continue that table's largest sequence.
//! 2. New file numbers are above every file present, so no new file truncates one that
//!    recovery still needs.
//! 3. The fresh MANIFEST names the new WAL as the first to replay only after the replayed
//!    writes are in a table it lists.
//! 4. A read-only open (`Options::read_only`) creates, writes, renames and removes nothing
//!    and takes no LOCK: the replayed WAL tail stays in memory, in the active buffer of a
//!    log with no file, and no background thread is started.

use super::inner::{create_wal_file, BackgroundState, DbInner};
use super::super_version::SuperVersion;
use crate::batch::{DecodedBatch, WriteBatch};
use crate::compaction::{self, OutputSettings, ShapeOptions, VersionFilter};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::{FileLock, FileSystem};
use crate::iter::InternalIterator;
use crate::key::SequenceNumber;
use crate::memory::{MemComponent, ReplayBuffer, WriteBuffer};
use crate::options::Options;
use crate::sequence::{Acknowledged, Watermark};
use crate::snapshot::SnapshotList;
use crate::sstable::BlockCache;
use crate::stats::Counters;
use crate::table_cache::TableCache;
use crate::version::{VersionEdit, VersionSet};
use crate::wal::{read_wal, LogContents, LostTail};
use crate::wal_writer::{Log, SEGMENT_BYTES_DEFAULT};
use arc_swap::ArcSwap;
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Attempts of a read-only open. A writer beside it may delete the WAL or MANIFEST it is
/// reading (a flush, a MANIFEST roll), which fails the attempt; the next one re-reads CURRENT.
const READ_ONLY_OPEN_ATTEMPTS: usize = 8;

/// Opens the database in `directory`: everything `Db::open` does but start the threads.
pub(super) fn open_inner(directory: &Path, options: Options) -> Result<Arc<DbInner>> {
    options.validate()?;
    if !options.read_only {
        return open_inner_once(directory, options);
    }
    let mut attempt = 1;
    loop {
        match open_inner_once(directory, options.clone()) {
            Err(error @ (Error::Io { .. } | Error::Corruption { .. }))
                if attempt < READ_ONLY_OPEN_ATTEMPTS =>
            {
                log::debug!(
                    "cairn: read-only open of {} retried: {error}",
                    directory.display()
                );
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// The lookup-pool threads to start: none for a read-only handle (invariant 4: it starts no
/// thread; its lookups probe the runs one after another).
fn lookup_threads(options: &Options) -> usize {
    if options.read_only {
        0
    } else {
        options.lookup_threads
    }
}

fn open_inner_once(directory: &Path, options: Options) -> Result<Arc<DbInner>> {
    let file_system = Arc::clone(&options.file_system);
    let (lock, mut versions) = open_directory(directory, &file_system, &options)?;
    let block_cache = (options.block_cache_size_bytes > 0)
        .then(|| Arc::new(BlockCache::new(options.block_cache_size_bytes)));
    let table_cache = Arc::new(
        TableCache::new(
            Arc::clone(&file_system),
            directory.to_path_buf(),
            block_cache,
            options.verify_checksums,
        )
        .with_read_mode(options.table_read_mode)
        .with_lookup_threads(lookup_threads(&options))?,
    );
    let salvaged = recover_tables(directory, file_system.as_ref(), &mut versions, &options)?;
    let replay = replay_wals(
        directory,
        file_system.as_ref(),
        &mut versions,
        &options,
        salvaged,
    )?;
    let last_sequence = replay.last_sequence;
    let dropped = replay.dropped;
    let written = Arc::new(AtomicU64::new(last_sequence));
    let counters = Counters::default();
    let snapshots = Arc::new(SnapshotList::default());
    let overwrite_gate = overwrite_gate(&options, &snapshots);
    let active = if options.read_only {
        read_only_buffer(&replay, &options, &written)?
    } else {
        write_replayed(
            directory,
            file_system.as_ref(),
            &mut versions,
            &options,
            &replay,
        )?;
        let log = start_first_wal(
            directory,
            file_system.as_ref(),
            &mut versions,
            &options,
            last_sequence,
            &written,
        )?;
        debug_assert_eq!(log.first_sequence(), last_sequence + 1);
        WriteBuffer::for_options(&options, log, &counters.membuffer, overwrite_gate.as_ref())
    };
    drop(replay);
    let super_version = SuperVersion {
        memory: MemComponent::new(active),
        version: versions.current(),
        oldest_readable: last_sequence,
    };
    let inner = Arc::new(DbInner {
        shape: ShapeOptions::from(&options),
        policy: options.compaction_style.policy(),
        directory: directory.to_path_buf(),
        file_system,
        table_cache,
        _lock: lock,
        super_version: ArcSwap::from_pointee(super_version),
        super_version_update: Mutex::new(()),
        inserted: Watermark::new(last_sequence),
        written,
        acknowledged: Acknowledged::new(last_sequence),
        file_numbers: versions.file_number_counter(),
        versions: Mutex::new(versions),
        background: Mutex::new(BackgroundState {
            compaction_wanted: true,
            ..BackgroundState::default()
        }),
        background_changed: Condvar::new(),
        has_sticky_error: AtomicBool::new(false),
        sticky_error: Mutex::new(None),
        snapshots,
        overwrite_gate,
        counters,
        pending_outputs: Mutex::new(HashSet::new()),
        compaction_lock: Mutex::new(()),
        switch_parker: crate::sync::Parker::default(),
        running: Mutex::default(),
        options,
    });
    Counters::add(
        &inner.counters.wal_recovery_dropped_records,
        dropped.records,
    );
    Counters::add(&inner.counters.wal_recovery_dropped_bytes, dropped.bytes);
    if !inner.options.read_only {
        inner.delete_obsolete_files();
    }
    Ok(inner)
}

/// The Membuffer's overwrite gate, if the Membuffer is on (and, in the benchmark build, not
/// told to always move replaced versions). None for a read-only handle: its buffer has no
/// Membuffer (nothing is written, so nothing is dropped), and a scan's hold is released
/// through the Membuffer it drains.
fn overwrite_gate(
    options: &Options,
    snapshots: &Arc<SnapshotList>,
) -> Option<Arc<crate::membuffer::OverwriteGate>> {
    #[cfg(feature = "bench-variants")]
    let gated = options.membuffer_enabled && !options.membuffer_always_move;
    #[cfg(not(feature = "bench-variants"))]
    let gated = options.membuffer_enabled;
    let gated = gated && !options.read_only;
    gated.then(|| Arc::new(crate::membuffer::OverwriteGate::new(Arc::clone(snapshots))))
}

/// The lock a read-only handle holds: none (invariant 4).
#[derive(Debug)]
struct NoLock;

impl FileLock for NoLock {}

/// The active buffer of a read-only handle: the replayed WAL tail, in a buffer whose log has
/// no file (invariant 4). Each replayed version keeps its own sequence number.
fn read_only_buffer(
    replay: &Replay,
    options: &Options,
    written: &Arc<AtomicU64>,
) -> Result<WriteBuffer> {
    let log = Log::new(
        0,
        std::path::PathBuf::new(),
        None,
        replay.last_sequence + 1,
        SEGMENT_BYTES_DEFAULT,
        None,
        Arc::clone(written),
    );
    // No Membuffer: the replayed versions are inserted once and only read after.
    let buffer = WriteBuffer::with_membuffer(options.write_buffer_size_bytes, log, None);
    let mut versions = replay.buffer.iter();
    versions.seek_to_first();
    while versions.valid() {
        let parsed = crate::key::parse_internal_key(versions.key())
            .ok_or_else(|| Error::Internal("replayed a malformed internal key".into()))?;
        let batch = match parsed.kind {
            crate::key::ValueKind::Put => WriteBatch::single_put(parsed.user_key, versions.value()),
            crate::key::ValueKind::Delete => WriteBatch::single_delete(parsed.user_key),
            crate::key::ValueKind::PutWithExpiry => {
                // Stored as the 8-byte expiry then the value (docs/format.md); a replayed
                // record was checked when the WAL was parsed, so a short one is internal.
                let stored = versions.value();
                let (expiry, value) = stored
                    .split_first_chunk::<{ crate::expiry::EXPIRY_BYTES }>()
                    .ok_or_else(|| Error::Internal("replayed a short expiring value".into()))?;
                let expiry = crate::expiry::from_millis(u64::from_le_bytes(*expiry));
                let mut batch = WriteBatch::new();
                batch.put_with_expiry(parsed.user_key, value, expiry);
                batch
            }
        };
        buffer
            .insert_batch(&batch, parsed.sequence)
            .map_err(Error::Internal)?;
        versions.next();
    }
    Ok(buffer)
}

/// Creates or checks the directory, takes its lock and recovers the MANIFEST.
fn open_directory(
    directory: &Path,
    file_system: &Arc<dyn FileSystem>,
    options: &Options,
) -> Result<(Box<dyn FileLock>, VersionSet)> {
    let not_found = || Error::NotFound {
        path: directory.to_path_buf(),
    };
    let create = options.create_if_missing && !options.read_only;
    if create {
        file_system.create_dir_all(directory)?;
    } else if !file_system.exists(directory)? {
        return Err(not_found());
    }
    let lock: Box<dyn FileLock> = if options.read_only {
        Box::new(NoLock)
    } else {
        file_system.lock(&filename::lock_path(directory))?
    };
    let mut versions = VersionSet::new(
        directory,
        Arc::clone(file_system),
        options.level_count,
        options.manifest_size_bytes_max,
    );
    if file_system.exists(&filename::current_path(directory))? {
        if options.error_if_exists {
            return Err(Error::AlreadyExists {
                path: directory.to_path_buf(),
            });
        }
        versions.recover()?;
    } else if !create {
        return Err(not_found());
    }
    Ok((lock, versions))
}

/// Creates the WAL of the new process and writes a fresh MANIFEST naming it as the first to
/// replay: older WALs were flushed by recovery into the tables the snapshot lists
/// (invariant 3).
fn start_first_wal(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &mut VersionSet,
    options: &Options,
    last_sequence: SequenceNumber,
    written: &Arc<AtomicU64>,
) -> Result<Log> {
    let wal_number = versions.new_file_number();
    let wal_path = filename::wal_path(directory, wal_number);
    let wal_file = if options.wal_enabled {
        let file = create_wal_file(file_system, options, &wal_path)?;
        file_system.sync_dir(directory)?;
        Some(file)
    } else {
        None
    };
    versions.apply_unlogged(&VersionEdit {
        log_number: Some(wal_number),
        last_sequence: Some(last_sequence),
        ..VersionEdit::default()
    })?;
    versions.write_snapshot()?;
    Ok(Log::new(
        wal_number,
        wal_path,
        wal_file,
        last_sequence + 1,
        SEGMENT_BYTES_DEFAULT,
        None,
        Arc::clone(written),
    ))
}

#[cfg(test)]
std::thread_local! {
    /// Tests: the spawn (counted from 0) of this thread's next open that fails as if the
    /// system refused a new thread.
    pub(super) static FAIL_SPAWN_AT: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// Starts the flush and compaction threads; if one cannot start, stops the others.
pub(super) fn spawn_background(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::new();
    let compactors = std::iter::repeat_n("cairn-compact", inner.options.compaction_threads.max(1));
    let bodies = std::iter::once(("cairn-flush", DbInner::flush_loop as fn(&DbInner)))
        .chain(compactors.map(|name| (name, DbInner::compaction_loop as fn(&DbInner))));
    for (index, (name, body)) in bodies.enumerate() {
        match spawn_one(inner, index, name, body) {
            Ok(handle) => threads.push(handle),
            Err(error) => {
                // The threads already started hold the database (and its LOCK): stop them,
                // or they would work on a directory whose open was reported failed.
                super::inner::lock(&inner.background).shutting_down = true;
                inner.background_changed.notify_all();
                for thread in threads {
                    let _ = thread.join();
                }
                return Err(error);
            }
        }
    }
    Ok(threads)
}

/// Starts background thread `index` (`name`, running `body`).
fn spawn_one(
    inner: &Arc<DbInner>,
    index: usize,
    name: &'static str,
    body: fn(&DbInner),
) -> Result<JoinHandle<()>> {
    #[cfg(test)]
    if FAIL_SPAWN_AT.with(std::cell::Cell::get) == Some(index) {
        return Err(Error::io(
            "spawn thread",
            &inner.directory,
            std::io::Error::from(std::io::ErrorKind::WouldBlock),
        ));
    }
    let _ = index;
    let worker = Arc::clone(inner);
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            // A panic here is a bug; turning it into a sticky error keeps callers waiting on
            // this thread (flush, stalled writers) from waiting forever.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&worker)));
            if outcome.is_err() {
                worker.set_sticky_error(&Error::Internal(format!(
                    "background thread {name} panicked"
                )));
            }
        })
        .map_err(|error| Error::io("spawn thread", &inner.directory, error))
}

/// A writable open's look at the tables: every one the recovered version lists must exist
/// (`check_tables_present`), and the table of a flush whose MANIFEST edit was lost is
/// salvaged (`db::salvage`). Returns the salvaged table's largest sequence, if any.
fn recover_tables(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &mut VersionSet,
    options: &Options,
) -> Result<Option<SequenceNumber>> {
    if !options.read_only {
        check_tables_present(directory, file_system, versions)?;
    }
    super::salvage::salvage_lost_flush(directory, file_system, versions, options.read_only)
}

/// Every table the recovered version lists is in the directory. One that is not means a lost
/// edit (a damaged last MANIFEST record taken for a torn tail, whose compaction had already
/// deleted its inputs) or a lost file: opening would fail reads, and the obsolete-file sweep
/// would delete the tables the lost edit added, the only copy of their keys. A read-only
/// handle skips this: a writer beside it may delete tables its version still lists.
fn check_tables_present(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &VersionSet,
) -> Result<()> {
    let present: HashSet<u64> = file_system
        .list(directory)?
        .iter()
        .filter_map(|name| match filename::parse_file_name(name) {
            Some(FileKind::Table(number)) => Some(number),
            _ => None,
        })
        .collect();
    let current = versions.current();
    let Some(missing) = current
        .file_numbers()
        .find(|number| !present.contains(number))
    else {
        return Ok(());
    };
    let reason = format!("the MANIFEST lists table {missing}, which is missing");
    Err(match &versions.manifest_torn_tail {
        Some((manifest, tail)) => Error::corruption(
            manifest,
            *tail,
            format!("damaged last record (not a torn write): {reason}"),
        ),
        None => Error::corruption(filename::table_path(directory, missing), 0, reason),
    })
}

/// The WAL numbers recovery replays, ascending, after numbering new files past every file
/// present (invariant 2).
fn wals_to_replay(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &VersionSet,
) -> Result<Vec<u64>> {
    let names = file_system.list(directory)?;
    // Writers number new WALs from the shared counter without logging it, so files on disk
    // can carry numbers at or above the MANIFEST's next_file_number.
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
    Ok(wal_numbers)
}

/// What recovery found in the WALs but did not replay (`Stats` counters
/// `wal_recovery_dropped_*`).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Dropped {
    pub(super) records: u64,
    pub(super) bytes: u64,
}

/// Replays the WALs the MANIFEST does not cover into memory; `replay.last_sequence` is then
/// the largest sequence number in the database and `replay.dropped` what was not replayed.
/// `salvaged`: the largest sequence of a table salvaged at this open (`db::salvage`), whose
/// batches are skipped.
fn replay_wals(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &mut VersionSet,
    options: &Options,
    salvaged: Option<SequenceNumber>,
) -> Result<Replay> {
    let wal_numbers = wals_to_replay(directory, file_system, versions)?;
    // Sized as the buffers the WALs were written from, so its key index does not saturate
    // (and fall back to skiplist searches) when the write buffer is larger than the default.
    let mut replay = Replay {
        buffer: ReplayBuffer::new(options.write_buffer_size_bytes),
        manifest_last_sequence: versions.last_sequence,
        last_sequence: versions.last_sequence,
        salvaged,
        expected_next: None,
        dropped: Dropped::default(),
    };
    let read = |path: &Path| {
        read_wal(
            file_system,
            path,
            options.wal_record_payload_bytes_max(),
            versions.manifest_format_version >= 2,
            options.wal_recovery,
        )
    };
    let mut dropped = Dropped::default();
    for (index, &number) in wal_numbers.iter().enumerate() {
        let path = filename::wal_path(directory, number);
        let contents = read(&path)?;
        let newer = wal_numbers.get(index + 1..).unwrap_or_default();
        let ended = match replay.wal(versions, &path, &contents)? {
            WalEnd::Complete => continue,
            WalEnd::Empty => format!("{} is empty", path.display()),
            WalEnd::TornTail(offset) => {
                format!("{} has a torn tail at offset {offset}", path.display())
            }
            WalEnd::LostUnsyncedTail(lost) => {
                let reason = lost_tail_reason(&path, &lost);
                // Said even when no newer WAL is ignored: records of this WAL were dropped.
                log::warn!("cairn: {reason}");
                dropped.records += lost.dropped_records as u64;
                dropped.bytes += contents.size_bytes().saturating_sub(lost.offset);
                reason
            }
            WalEnd::StartsPastPredecessor(first) => {
                // The record that starts past the end is in this WAL: it is dropped too.
                dropped = warn_ignored_wals(
                    directory,
                    wal_numbers.get(index..).unwrap_or_default(),
                    &format!(
                        "{} starts at sequence {first} but the WALs before it end at {}: an \
                         unsynced tail was lost",
                        path.display(),
                        replay.last_sequence
                    ),
                    &read,
                );
                break;
            }
        };
        let ignored = warn_ignored_wals(directory, newer, &ended, &read);
        dropped.records += ignored.records;
        dropped.bytes += ignored.bytes;
        break;
    }
    debug_assert!(replay.last_sequence >= versions.last_sequence);
    replay.dropped = dropped;
    Ok(replay)
}

/// How the replay of one WAL ended.
enum WalEnd {
    /// Every record replayed; the next WAL continues the prefix.
    Complete,
    /// No record at all: the prefix ends before this WAL.
    Empty,
    /// Records replayed up to a torn tail at this offset: the prefix ends here.
    TornTail(u64),
    /// Records replayed up to a hole in the unsynced tail: the prefix ends here.
    LostUnsyncedTail(LostTail),
    /// Its first record starts past where the older WALs end (at this sequence): the prefix
    /// ends before this WAL.
    StartsPastPredecessor(SequenceNumber),
}

/// The state of WAL replay.
struct Replay {
    buffer: ReplayBuffer,
    manifest_last_sequence: SequenceNumber,
    last_sequence: SequenceNumber,
    /// The largest sequence of the table salvaged at this open (`db::salvage`), if any: a
    /// batch at or below it is in that table and is skipped, not replayed again.
    salvaged: Option<SequenceNumber>,
    /// The sequence the next record must start at (None before the first record).
    expected_next: Option<SequenceNumber>,
    /// What recovery found but did not replay.
    dropped: Dropped,
}

impl Replay {
    /// Replays one WAL's records (invariant 1).
    fn wal(
        &mut self,
        versions: &VersionSet,
        path: &Path,
        contents: &LogContents,
    ) -> Result<WalEnd> {
        if contents.record_count() == 0 {
            // An empty WAL was created but its records never reached the disk (a sealed WAL
            // always holds a record, and a newer WAL syncs only after it). Whatever a newer
            // WAL holds was never synced and follows the lost records: replaying it would
            // leave a hole, so the recovered prefix ends here.
            return Ok(WalEnd::Empty);
        }
        for (record_index, (offset, payload)) in contents.records().enumerate() {
            let batch = DecodedBatch::decode(payload)
                .map_err(|reason| Error::corruption(path, offset, reason))?;
            if self.in_salvaged_table(path, offset, &batch)? {
                continue;
            }
            match self.expected_next {
                None => self.check_continues_manifest(versions, path, offset, &batch)?,
                Some(expected) if record_index == 0 && batch.first_sequence > expected => {
                    // The older WAL ends early, cleanly: a power loss took its unsynced tail
                    // while some unsynced records of this newer WAL reached the disk. That
                    // is possible because a log writes before its predecessor is synced,
                    // and harmless because it syncs only after (wal_writer invariant 4):
                    // nothing from here on was ever synced, so the prefix ends here.
                    return Ok(WalEnd::StartsPastPredecessor(batch.first_sequence));
                }
                Some(expected) if batch.first_sequence != expected => {
                    return Err(Error::corruption(
                        path,
                        offset,
                        format!(
                            "WAL sequence gap: expected {expected}, found {}",
                            batch.first_sequence
                        ),
                    ));
                }
                Some(_) => {}
            }
            self.insert(path, offset, &batch)?;
        }
        // A torn tail or a hole in the unsynced tail ends the recoverable prefix. A newer WAL
        // can hold records past it only if they were never synced (a sync first syncs every
        // older WAL), so they are dropped to keep the recovered state a prefix with no hole.
        Ok(
            match (contents.lost_unsynced_tail, contents.torn_tail_offset) {
                (Some(lost), _) => WalEnd::LostUnsyncedTail(lost),
                (None, Some(offset)) => WalEnd::TornTail(offset),
                (None, None) => WalEnd::Complete,
            },
        )
    }

    /// The first WAL to replay continues where the last logged flush stopped (or the table
    /// salvaged at this open), so a gap means edits are missing: a damaged last MANIFEST
    /// record was taken for a torn tail and its table could not be salvaged, or a WAL is
    /// gone (regression test: `a_damaged_flush_edit_whose_table_is_gone_is_reported`).
    fn check_continues_manifest(
        &self,
        versions: &VersionSet,
        path: &Path,
        offset: u64,
        batch: &DecodedBatch<'_>,
    ) -> Result<()> {
        if batch.first_sequence <= self.manifest_last_sequence + 1 {
            return Ok(());
        }
        let reason = format!(
            "the WALs continue at sequence {} but the MANIFEST stops at {}",
            batch.first_sequence, self.manifest_last_sequence
        );
        Err(match &versions.manifest_torn_tail {
            Some((manifest, tail)) => Error::corruption(
                manifest,
                *tail,
                format!("damaged last record (not a torn write): {reason}"),
            ),
            None => Error::corruption(path, offset, reason),
        })
    }

    /// True if `batch`, met before any batch was replayed, is in the table salvaged at this
    /// open: its writes are there, and replaying them would store their internal keys twice.
    /// Replay skips it without advancing `expected_next`, so the first batch replayed is
    /// checked against the raised `manifest_last_sequence` (the salvaged table's largest
    /// sequence). A batch that straddles that sequence disagrees with the table: corruption.
    fn in_salvaged_table(
        &self,
        path: &Path,
        offset: u64,
        batch: &DecodedBatch<'_>,
    ) -> Result<bool> {
        let Some(through) = self.salvaged.filter(|_| self.expected_next.is_none()) else {
            return Ok(false);
        };
        if batch.last_sequence() <= through {
            return Ok(true);
        }
        if batch.first_sequence <= through {
            return Err(Error::corruption(
                path,
                offset,
                format!(
                    "WAL batch of sequences {}..={} straddles the salvaged table's last \
                     sequence {through}",
                    batch.first_sequence,
                    batch.last_sequence()
                ),
            ));
        }
        Ok(false)
    }

    /// Inserts one replayed batch and advances the expected sequence.
    fn insert(&mut self, path: &Path, offset: u64, batch: &DecodedBatch<'_>) -> Result<()> {
        for (sequence, entry) in (batch.first_sequence..).zip(batch.iter()) {
            let (kind, key, value) =
                entry.map_err(|reason| Error::corruption(path, offset, reason))?;
            self.buffer.insert(key, sequence, kind, value);
        }
        debug_assert!(self
            .expected_next
            .is_none_or(|expected| expected == batch.first_sequence));
        self.expected_next = Some(batch.last_sequence() + 1);
        self.last_sequence = self.last_sequence.max(batch.last_sequence());
        Ok(())
    }
}

/// Writes what replay gathered to a level-0 table, with level 0's table options (as a
/// flush would), and records it (unlogged: the fresh MANIFEST snapshot written next
/// carries it).
fn write_replayed(
    directory: &Path,
    file_system: &dyn FileSystem,
    versions: &mut VersionSet,
    options: &Options,
    replay: &Replay,
) -> Result<()> {
    if replay.buffer.is_empty() {
        return Ok(());
    }
    let deepest = versions.current().deepest_nonempty_level();
    let number = versions.new_file_number();
    let settings = OutputSettings {
        file_system,
        directory,
        table_options: compaction::table_options_for(options, 0, deepest),
        target_file_size_bytes: None,
    };
    let mut filter = VersionFilter::new(&[], None);
    let mut iterator = replay.buffer.iter();
    let mut allocate = || number;
    let outputs = compaction::write_tables(&mut iterator, &mut filter, &settings, &mut allocate)?;
    debug_assert!(!outputs.is_empty(), "replayed writes produced no table");
    versions.apply_unlogged(&VersionEdit {
        added_files: outputs.into_iter().map(|file| (0, file)).collect(),
        last_sequence: Some(replay.last_sequence),
        ..VersionEdit::default()
    })
}

/// Reports the newer WALs that recovery ignores because the prefix ended (`reason`). The
/// count of records dropped matters: after a process crash a newer WAL holds records only if
/// the older one was finished first, which invariant 4 of `wal_writer` rules out, so a
/// non-zero count means writes were lost, not just unsynced.
fn warn_ignored_wals(
    directory: &Path,
    newer: &[u64],
    reason: &str,
    read: &dyn Fn(&Path) -> Result<LogContents>,
) -> Dropped {
    let mut dropped = Dropped::default();
    if newer.is_empty() {
        return dropped;
    }
    for &number in newer {
        if let Ok(contents) = read(&filename::wal_path(directory, number)) {
            let lost = contents
                .lost_unsynced_tail
                .map_or(0, |lost| lost.dropped_records);
            dropped.records += (contents.record_count() + lost) as u64;
            dropped.bytes += contents.size_bytes();
        }
    }
    log::warn!(
        "cairn: {reason}; ignoring {} WAL(s) of unsynced writes ({} records)",
        newer.len(),
        dropped.records
    );
    dropped
}

/// The warning for a WAL whose unsynced tail had a hole (`WalRecovery::PointInTime`).
fn lost_tail_reason(path: &Path, lost: &LostTail) -> String {
    format!(
        "{} has a hole in its unsynced tail at offset {} (synced bytes end at {}): recovered \
         the writes before it and dropped {} record(s) after it, from offset {}",
        path.display(),
        lost.offset,
        lost.durable_bytes,
        lost.dropped_records,
        lost.resumes_at
    )
}
