//! The concurrent write-ahead log: writers reserve their sequence numbers and their log space
//! in one atomic step, copy their records in parallel, and share writes and syncs (group
//! commit). cLSM §4: no writer waits for a lock to log.
//!
//! A [`Log`] is one WAL file (one per memtable) made of [`Segment`]s: zeroed in-memory buffers
//! that map to consecutive byte ranges of the file and consecutive sequence ranges. A
//! segment's reservation word packs `sealed | sequence offset | byte offset`; a writer
//! reserves `(count sequences, record bytes)` with one compare-and-swap, so log order equals
//! sequence order by construction. A writer that finds the segment too small seals it and
//! installs the successor (same file, next sequences); a memtable switch seals the last
//! segment of a log for good, and the next log continues the sequence.
//!
//! A record is published by one release store of its 8-byte header (`wal::record_header`,
//! hence 8-byte aligned records). One writer at a time — the *leader*, elected with a
//! `try_lock`, never a blocking lock — writes the longest prefix of published records to the
//! file; every other writer waits for the written sequence to reach its own. A writer also
//! tries the role once right after it publishes (`write_published`), before its memtable
//! insert, and goes on if it is taken: its record is then usually written by the time it
//! waits, so it rarely spins while another thread leads (only when appending is a memory
//! copy, as with a mapped file: with `write(2)` the extra system calls cost more). A writer that
//! asked for a sync then takes the separate *sync role* (again by `try_lock`) and fdatasyncs
//! everything written so far through the file's `SyncHandle`, while the next leader keeps
//! writing (invariant 8); sync waiters wait for the synced sequence.
//!
//! Thread-safety contract: every method takes `&self` and may be called from any thread.
//! Waiting happens only for other writers' progress (their memcpy, or the leader's I/O): a
//! waiter spins, yields, then parks on the log's `Parker`, which every leader and every
//! syncer notifies after it lets go of its role (a writer that publishes a record always
//! reaches its own wait and leads, so the waiters for that record are woken). A writer that
//! asked for no sync waits only for writes (its own and lower ones), never for an fdatasync.
//!
//! Invariants:
//! 1. Reservations in one segment are disjoint and ordered: byte order = sequence order.
//! 2. A segment's sequences continue its predecessor's exactly; a log's first segment
//!    continues the previous log's last (no sequence is skipped, so recovery sees no gap).
//! 3. The leader writes only a contiguous prefix of published records, in order, so the file
//!    never has a hole; `written_sequence` is the last sequence in that prefix.
//! 4. A log writes nothing before its predecessor is fully written (process-crash state is a
//!    prefix across files), and syncs nothing before its predecessor is synced or retired
//!    (power-loss state is a prefix too). Syncing the predecessor waits for the first sync
//!    asked of the new log: a switch no longer stalls every writer for the `fdatasync` of a
//!    whole memtable's log (100–200 ms for 64 MiB). That sync is done by the waiter that
//!    asked, before it competes for the leader role and holding no lock the new log's
//!    writers need; until it is done nobody syncs the new log, so a writer that asked for
//!    no sync never waits for it. A log is *retired* once its memtable is
//!    flushed: its records are in a synced table, so it never needs a sync, and it lets go of
//!    its file and its own predecessor (the chain of unsynced logs stays as short as the list
//!    of unflushed memtables).
//! 5. A finished log whose `trim` changed the file (a mapped log's reserved tail cut) is
//!    synced again before its successor's first sync, even if every record was synced: until
//!    the shorter length is durable, a power loss can bring the zero tail back, and recovery
//!    would read it as a torn tail and ignore every newer log.
//! 6. The writer whose reservation did not fit, and which therefore sealed the segment,
//!    holds the first reservation of the successor it installs: a record larger than the
//!    segment size cannot be starved by small reservations landing in its successor first.
//! 7. A log's file starts with the WAL header record (`wal::wal_header_record`, with the
//!    log's random nonce), written with its first records. After a sync of the live log,
//!    the next bytes written (ahead of the next records) are a sync marker (with the same
//!    nonce) naming the file length that sync made durable, at or below the marker's own
//!    offset: recovery uses markers to tell damaged synced bytes (corruption) from a hole
//!    in the unsynced tail. A marker is written only with records
//!    after it, so a finished log never ends in one, and the final sync of a finished log
//!    (`sync_finished`) writes none: an unsynced trailing marker, torn by a power loss, would
//!    read as a torn tail and hide every newer log. With syncs beside the leader (invariant
//!    8), the marker names the length the sync covered, which may lie below its own offset
//!    (the leader wrote on while the sync ran); `wal` accepts any length at or before it.
//! 8. No fdatasync of a live log holds the leader role: `lead` only writes, and publishes
//!    `written_bytes` (all flushed) before `written_sequence`; the syncer reads the sequence,
//!    then the bytes, syncs through a separate handle and raises `synced_sequence` to that
//!    sequence only — bytes written during the sync count as unsynced. Syncs of one log are
//!    serialised by `sync_role`. A file system without a `SyncHandle` falls back to syncing
//!    under the leader role (plain writers then wait for it). A failed sync is sticky: every
//!    later write of the log fails.
//! 9. A leader (or `finish`) that wrote nothing wakes only the writers parked while it held
//!    the role (`role_waiters`): one of them may have published after its scan. Writers that
//!    led themselves and found nothing sleep until a write moves the watermark (every such
//!    leader notifies) or `PARK_TIMEOUT`: a writer held between reserve and publish costs its
//!    waiters no CPU beyond one lead per timeout each.

use crate::error::{Error, Result};
use crate::fs::{SyncHandle, WritableFile};
use crate::sync::{AtomicU64, CachePadded, Ordering, Parker};
use crate::wal::{record_bytes, sync_marker_record, wal_header_record};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

mod segment;
use self::segment::SEQUENCE_SHIFT;
pub use self::segment::{Reserve, Segment, SEGMENT_BYTES_DEFAULT, SEGMENT_SEQUENCES_MAX};

/// Appends what goes ahead of a log's next records: the WAL header before the first ones, a
/// sync marker after a sync (invariant 7), both carrying the log's `nonce`.
fn write_preamble(
    file: &mut dyn WritableFile,
    header_written: &mut bool,
    nonce: u64,
    pending_sync_marker: &AtomicU64,
) -> Result<()> {
    if !*header_written {
        if cfg!(feature = "invariants") {
            assert_eq!(file.size_bytes(), 0, "WAL header written past the start");
        }
        file.append(&wal_header_record(nonce))?;
        *header_written = true;
    }
    // A load first: a swap on every lead would write the line even with no marker pending,
    // and it sits beside fields every writer reads.
    let durable_bytes = if pending_sync_marker.load(Ordering::Acquire) == 0 {
        0
    } else {
        pending_sync_marker.swap(0, Ordering::AcqRel)
    };
    if durable_bytes != 0 {
        if cfg!(feature = "invariants") {
            // Invariant 7: a marker names a length at or before its own offset.
            assert!(
                file.size_bytes() >= durable_bytes,
                "sync marker names {durable_bytes} bytes, past its offset {}",
                file.size_bytes()
            );
        }
        file.append(&sync_marker_record(nonce, durable_bytes))?;
    }
    Ok(())
}

struct LeaderState {
    file: Option<Box<dyn WritableFile>>,
    segment: Arc<Segment>,
    offset: usize,
    /// The predecessor until it is fully written (its records precede all of this log's).
    previous_unwritten: Option<Arc<Log>>,
    /// Retired: flushed into a table; nothing left to write or sync.
    retired: bool,
    /// `finish` trimmed the file and no sync has made its new length durable yet: until one
    /// does, a power loss can bring back the reserved zero tail, which recovery reads as a
    /// torn tail that hides every newer log.
    trim_unsynced: bool,
    /// The WAL header record is in the file (invariant 7).
    header_written: bool,
    /// The nonce the header and every sync marker of this log carry (`wal`, invariant 4).
    nonce: u64,
}

/// One WAL file (or, with the WAL off, just a sequence source). See the module docs.
pub struct Log {
    number: u64,
    path: PathBuf,
    segment_bytes: usize,
    current: arc_swap::ArcSwap<Segment>,
    /// Bytes of the segments filled and rolled over so far (their capacities): the log's
    /// length to within one segment, read on every write (`rolled_bytes`) and written once
    /// per roll-over.
    rolled_bytes: AtomicU64,
    // The fields writers touch on every write sit on cache lines apart from each other and
    // from the read-mostly ones (`current`, `failed`, `has_file`): a leader's compare-and-swap
    // of the role, or its store of the written sequence, then does not evict the line every
    // writer's `reserve` reads.
    leader: CachePadded<Mutex<LeaderState>>,
    /// The predecessor until it is synced (or retired) on behalf of this log (invariant 4).
    /// Apart from the leader state: its fdatasync must never hold this log's leader lock,
    /// which every writer of this log competes for.
    unsynced_previous: Mutex<Option<Arc<Log>>>,
    /// `unsynced_previous` is empty: this log may sync.
    previous_synced: crate::sync::AtomicBool,
    written_sequence: CachePadded<AtomicU64>,
    /// The file's length when `written_sequence` was last raised (stored before it).
    written_bytes: CachePadded<AtomicU64>,
    synced_sequence: AtomicU64,
    /// Syncs the file beside the leader, which keeps writing meanwhile (invariant 8); `None`
    /// if the file system has no such handle (the sync then holds the leader role).
    sync_handle: Option<Box<dyn SyncHandle>>,
    /// Held by the one thread syncing this log: syncs of one log never overlap.
    sync_role: Mutex<()>,
    /// A sync made this many bytes durable (0: none since the last marker); the marker
    /// saying so goes ahead of the next records (invariant 7).
    pending_sync_marker: AtomicU64,
    /// Sequences below this are not in this log (its first segment's base).
    first_sequence: u64,
    has_file: bool,
    /// The file appends by memory copy (`WritableFile::appends_in_memory`): writers lead
    /// right after publishing (`write_published`).
    lead_after_publish: bool,
    failed: OnceLock<Error>,
    sealed_for_good: crate::sync::AtomicBool,
    /// The database-wide written watermark, raised after every write (invariant 4 makes
    /// `fetch_max` over all logs a prefix).
    global_written: Arc<std::sync::atomic::AtomicU64>,
    /// Where writers waiting for the leader (`wait_for`) or for the last records of a sealed
    /// log (`finish`) sleep after a short spin. Every leader notifies it once it has let go
    /// of the leader role, so a waiter never sleeps through a write it could use or a
    /// leader role it could take (for longer than `PARK_TIMEOUT`).
    parker: Parker,
    /// Writers parked because another thread held the leader role (invariant 9).
    role_waiters: CachePadded<std::sync::atomic::AtomicUsize>,
    /// Runs right before this log's fdatasync of its live file (tests force interleavings).
    #[cfg(all(test, not(loom)))]
    before_sync: tests::Hook,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Log")
            .field("number", &self.number)
            .field("path", &self.path)
            .field("written_sequence", &self.written_sequence())
            .finish()
    }
}

impl Log {
    /// A log writing to `file` (None: no WAL), whose first sequence is `first_sequence`,
    /// which must not write before `previous` is fully written and synced (invariant 4).
    pub fn new(
        number: u64,
        path: PathBuf,
        file: Option<Box<dyn WritableFile>>,
        first_sequence: u64,
        segment_bytes: usize,
        previous: Option<Arc<Log>>,
        global_written: Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        let has_file = file.is_some();
        let lead_after_publish = file.as_ref().is_some_and(|file| file.appends_in_memory());
        let sync_handle = file.as_ref().and_then(|file| file.sync_handle());
        let segment_bytes = if has_file { segment_bytes.max(4096) } else { 0 };
        let segment = Arc::new(Segment::new(first_sequence, segment_bytes));
        let previous_synced = crate::sync::AtomicBool::new(previous.is_none());
        Log {
            number,
            path,
            segment_bytes,
            current: arc_swap::ArcSwap::new(Arc::clone(&segment)),
            rolled_bytes: AtomicU64::new(0),
            leader: CachePadded(Mutex::new(LeaderState {
                file,
                segment,
                offset: 0,
                previous_unwritten: previous.clone(),
                retired: false,
                trim_unsynced: false,
                header_written: false,
                nonce: crate::wal::new_wal_nonce(number),
            })),
            unsynced_previous: Mutex::new(previous),
            previous_synced,
            written_sequence: CachePadded(AtomicU64::new(first_sequence.saturating_sub(1))),
            written_bytes: CachePadded(AtomicU64::new(0)),
            synced_sequence: AtomicU64::new(first_sequence.saturating_sub(1)),
            sync_handle,
            sync_role: Mutex::new(()),
            pending_sync_marker: AtomicU64::new(0),
            first_sequence,
            has_file,
            lead_after_publish,
            failed: OnceLock::new(),
            sealed_for_good: crate::sync::AtomicBool::new(false),
            global_written,
            parker: Parker::default(),
            role_waiters: CachePadded(std::sync::atomic::AtomicUsize::new(0)),
            #[cfg(all(test, not(loom)))]
            before_sync: tests::Hook::default(),
        }
    }

    /// The WAL file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The bytes of the segments this log filled so far: its length, less the current
    /// segment's (0 without a file). A write buffer whose log outgrows its memory is sealed
    /// by this (`WriteBuffer::is_full`).
    pub fn rolled_bytes(&self) -> u64 {
        self.rolled_bytes.load(Ordering::Relaxed)
    }

    /// The last sequence written to the OS (process-crash durable).
    pub fn written_sequence(&self) -> u64 {
        self.written_sequence.load(Ordering::Acquire)
    }

    /// The first sequence of this log.
    pub fn first_sequence(&self) -> u64 {
        self.first_sequence
    }

    /// The sequence the next reservation would get, as of a moment during the call. It can
    /// be stale (lower) if a segment roll-over is in progress, never higher than the true
    /// next sequence; read-modify-write relies on "never higher" only.
    pub fn next_sequence(&self) -> u64 {
        self.current.load().next_sequence()
    }

    /// Bytes a record with `payload_bytes` of payload needs (0 without a file).
    pub fn reservation_bytes(&self, payload_bytes: usize) -> usize {
        if self.has_file {
            record_bytes(payload_bytes)
        } else {
            0
        }
    }

    /// Reserves `count` sequences and `bytes` bytes (from `reservation_bytes`). Rolls over to a
    /// new segment when the current one is full; returns `Sealed` once the log is sealed.
    pub fn reserve(&self, count: u64, bytes: usize) -> Reserve {
        let mut round = 0;
        loop {
            let segment = self.current.load();
            match segment.try_reserve(count, bytes) {
                Ok(Some((sequence, offset))) => {
                    return Reserve::Reserved {
                        segment,
                        sequence,
                        offset,
                    }
                }
                Err(()) => {
                    // This call filled and sealed the segment: start its successor, with
                    // this record already in it.
                    let (segment, sequence) = self.roll_over(&segment, count, bytes);
                    #[cfg(all(test, not(loom)))]
                    tests::after_roll_over();
                    return Reserve::Reserved {
                        segment,
                        sequence,
                        offset: 0,
                    };
                }
                Ok(None) => {
                    // Sealed for good by a memtable switch, or full and sealed by another
                    // writer who is installing the successor right now (it notifies).
                    if self.sealed_for_good.load(Ordering::Acquire) {
                        return Reserve::Sealed;
                    }
                    self.wait_for_successor(&segment, &mut round);
                }
            }
        }
    }

    /// Installs the successor of `full`, which this thread sealed, holding this thread's
    /// reservation of `count` sequences and `bytes` bytes at its start (invariant 6).
    fn roll_over(
        &self,
        full: &Segment,
        count: u64,
        bytes: usize,
    ) -> (arc_swap::Guard<Arc<Segment>>, u64) {
        let end_sequence = full
            .sealed_end
            .get()
            .map_or(full.base_sequence, |&(_, end)| end);
        let capacity = if self.has_file {
            self.segment_bytes.max(bytes)
        } else {
            0
        };
        let successor = Arc::new(Segment::new(end_sequence, capacity));
        self.rolled_bytes
            .fetch_add(full.capacity_bytes as u64, Ordering::Relaxed);
        if cfg!(feature = "invariants") {
            // Invariants 2 and 6: the successor continues the sealed segment's sequences and
            // holds the record that did not fit.
            let sealed_end = full.sealed_end.get().map(|&(_, end)| end);
            assert_eq!(
                sealed_end,
                Some(end_sequence),
                "rolled over an unsealed segment"
            );
            assert!(count <= SEGMENT_SEQUENCES_MAX && bytes <= successor.capacity_bytes);
        }
        // Not yet visible to anyone: a plain store is the whole reservation.
        successor
            .reservation
            .store((count << SEQUENCE_SHIFT) + bytes as u64, Ordering::Release);
        let _ = full.next.set(Arc::clone(&successor));
        // A guard owning its own reference: one reference count touched per roll-over, not
        // per write.
        let guard = arc_swap::Guard::from(Arc::clone(&successor));
        self.current.store(successor);
        // Writers (and a `seal`) waiting for the successor of `full` may be parked.
        self.parker.notify();
        (guard, end_sequence)
    }

    /// One step of waiting for the writer that sealed the full `segment` to install its
    /// successor (a roll-over in progress): spin, yield, then park until it notifies.
    fn wait_for_successor(&self, segment: &Segment, round: &mut u32) {
        self.parker.wait(round, || {
            !std::ptr::eq(Arc::as_ptr(&self.current.load()), segment)
                || self.sealed_for_good.load(Ordering::Acquire)
        });
    }

    /// Seals the log for good (a memtable switch): no reservation succeeds afterwards.
    /// Returns the first sequence the next log must use (invariant 2).
    pub fn seal(&self) -> u64 {
        self.sealed_for_good.store(true, Ordering::Release);
        let mut round = 0;
        loop {
            let segment = self.current.load_full();
            if let Some(end_sequence) = segment.seal() {
                return end_sequence;
            }
            // A writer sealed it because it was full; that writer always installs a
            // successor, which this loop then seals.
            self.wait_for_successor(&segment, &mut round);
        }
    }

    /// Waits until every sequence up to `last` is written to the OS (and synced, with `sync`),
    /// leading the group commit when no one else is.
    pub fn wait_durable(&self, last: u64, sync: bool) -> Result<()> {
        if !self.has_file {
            return Ok(());
        }
        if sync && !self.previous_synced.load(Ordering::Acquire) {
            // Invariant 4 off the writers' path: once `last` is written (which finishes the
            // predecessor), this waiter syncs the predecessor itself, holding no lock the
            // other writers of this log need; nobody syncs this log before that.
            self.wait_for(last, false)?;
            if let Err(error) = self.sync_previous() {
                let _ = self.failed.set(error.clone());
                self.parker.notify();
                return Err(error);
            }
        }
        self.wait_for(last, sync)
    }

    /// The waiting loop of `wait_durable`, once the predecessor is taken care of: lead the
    /// writes until `last` is written, then (with `sync`) take the sync role until it is
    /// synced. A writer that asked for no sync never waits for the sync role.
    fn wait_for(&self, last: u64, sync: bool) -> Result<()> {
        let mut round = 0;
        let written = || self.written_sequence.load(Ordering::Acquire) >= last;
        let done = || written() && (!sync || self.synced_sequence.load(Ordering::Acquire) >= last);
        loop {
            if let Some(error) = self.failed.get() {
                return Err(error.clone());
            }
            if done() {
                return Ok(());
            }
            let mut led = false;
            if !written() {
                match self.try_lead() {
                    Some(Ok(true)) => continue,
                    Some(Ok(false)) => led = true,
                    Some(Err(error)) => return Err(error),
                    None => {}
                }
            } else if !sync {
                // Written since `done()` was checked: done. Only a sync waiter syncs.
                continue;
            } else if let Ok(role) = self.sync_role.try_lock() {
                let outcome = self.sync_written();
                drop(role);
                // Sync waiters parked on the role, or on this sync, may go on now.
                self.parker.notify();
                outcome?;
                continue;
            }
            // Waiting for the leader role (not for a lower writer's publish, after leading
            // ourselves): counted, so that a leader that wrote nothing still wakes us.
            let role_waiter = !led && !written();
            if role_waiter {
                self.role_waiters
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            self.parker.wait(&mut round, || {
                self.failed.get().is_some()
                    || done()
                    || if written() {
                        sync && self.sync_role.try_lock().is_ok()
                    } else {
                        !led && self.leader.try_lock().is_ok()
                    }
            });
            if role_waiter {
                self.role_waiters
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// Wakes parked waiters after this thread let go of the leader role: always if the
    /// written watermark `moved` (or the log failed), else only if a waiter parked for the
    /// role (it may have published after our scan and must lead). Waiters that led and found
    /// nothing to write are not woken by a lead that found nothing either: with several of
    /// them waiting for one descheduled writer, each such wake-up led again and woke the
    /// others, a ping-pong that kept every waiter's core busy (invariant 9).
    fn notify_after_lead(&self, moved: bool) {
        // Orders the release of the role before the load of the count: a role waiter either
        // sees the role free in its last check (`Parker::park`) or is counted here.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        if moved
            || self.failed.get().is_some()
            || self.role_waiters.load(std::sync::atomic::Ordering::SeqCst) > 0
        {
            self.parker.notify_after_seqcst();
        }
    }

    /// Called right after a record is published, before its writer's memtable insert: leads
    /// one round of writes if the leader role is free, and otherwise returns at once. The
    /// writer's own record is still in its cache, and by the time it reaches `wait_durable`
    /// it is usually written (by this lead or another's), so it does not spin while another
    /// thread leads. Never waits: a lead that would first have to finish the predecessor log
    /// (invariant 4) is left to `wait_durable`. A failure is recorded (sticky) and reported
    /// by the writer's `wait_durable`. Only for a file that appends by memory copy: with a
    /// system call per append, leading once per writer costs more than the wait it saves.
    pub fn write_published(&self) {
        if !self.lead_after_publish || self.failed.get().is_some() {
            return;
        }
        let _ = self.try_lead_inner(true);
    }

    /// Leads one round of writes if the leader role is free (`None` if it is not): whether
    /// the written watermark moved.
    fn try_lead(&self) -> Option<Result<bool>> {
        self.try_lead_inner(false)
    }

    /// `try_lead`; with `without_waiting`, also `None` when the lead would first wait for the
    /// predecessor log.
    fn try_lead_inner(&self, without_waiting: bool) -> Option<Result<bool>> {
        let mut state = self.leader.try_lock().ok()?;
        if without_waiting && state.previous_unwritten.is_some() {
            drop(state);
            // A writer may have parked for the role while we held it (invariant 9).
            self.notify_after_lead(false);
            return None;
        }
        let before = self.written_sequence.load(Ordering::Acquire);
        let outcome = self.lead(&mut state);
        if let Err(error) = &outcome {
            let _ = self.failed.set(error.clone());
        }
        drop(state);
        // After letting go of the role: a parked waiter may be done now, or may have to
        // lead (it checks the role is free before it sleeps). If nothing new was published,
        // a lower writer is between reserving and publishing: it leads (and so notifies)
        // once it reaches its own wait.
        let moved = self.written_sequence.load(Ordering::Acquire) != before;
        self.notify_after_lead(moved);
        Some(outcome.map(|()| moved))
    }

    /// Writes every published record. Caller holds `leader`. Never syncs (invariant 8).
    fn lead(&self, state: &mut LeaderState) -> Result<()> {
        // Checked under the role: a writer that saw no failure before it took the role may
        // lead after a failed append, and the file may hold part of what that append wrote
        // (and buffer the rest): writing from the old offset again would log records twice.
        if let Some(error) = self.failed.get() {
            return Err(error.clone());
        }
        if let Some(previous) = state.previous_unwritten.as_ref() {
            // Invariant 4: the predecessor's records come first in the sequence order.
            previous.finish()?;
            state.previous_unwritten = None;
        }
        let mut last_written = None;
        loop {
            if let Some((end, last)) = state.segment.published_prefix(state.offset) {
                let bytes = state.segment.bytes(state.offset, end);
                if let Some(file) = state.file.as_mut() {
                    write_preamble(
                        file.as_mut(),
                        &mut state.header_written,
                        state.nonce,
                        &self.pending_sync_marker,
                    )?;
                    file.append(bytes)?;
                }
                state.offset = end;
                last_written = Some(last);
            }
            let finished = state
                .segment
                .sealed_end
                .get()
                .is_some_and(|&(end, _)| state.offset >= end);
            match state.segment.next.get() {
                Some(next) if finished => {
                    let next = Arc::clone(next);
                    state.segment = next;
                    state.offset = 0;
                }
                _ => break,
            }
        }
        if let Some(last) = last_written {
            if let Some(file) = state.file.as_mut() {
                file.flush()?;
                // Before the sequence: a syncer that sees the sequence sees at least these
                // bytes, all of them flushed (invariant 8).
                self.written_bytes
                    .store(file.size_bytes(), Ordering::Release);
            }
            // The database-wide watermark first: a writer acknowledged once it sees this
            // log's is then already covered by the database's, so a read that waits for an
            // acknowledged write waits only for inserts (`sequence::Acknowledged`).
            // `fetch_max`, not a store: a late lead of a retired log may come after its
            // successor's leads raised the watermark past it (invariant 4 orders leads of
            // live logs only; test `a_late_lead_of_a_retired_log_...`).
            self.global_written
                .fetch_max(last, std::sync::atomic::Ordering::AcqRel);
            self.written_sequence.store(last, Ordering::Release);
        }
        Ok(())
    }

    /// Syncs everything written so far. Caller holds `sync_role`; the leader keeps writing
    /// meanwhile (invariant 8). A failure is sticky: every later write of this log fails.
    fn sync_written(&self) -> Result<()> {
        // Sequence first, then bytes: the bytes cover at least that sequence's records, and
        // every one of them was flushed before this sync starts.
        let written = self.written_sequence.load(Ordering::Acquire);
        let durable_bytes = self.written_bytes.load(Ordering::Acquire);
        if written <= self.synced_sequence.load(Ordering::Acquire) {
            return Ok(());
        }
        if cfg!(feature = "invariants") {
            // Invariant 4: older logs are durable (or retired) before this one syncs.
            assert!(
                self.previous_synced.load(Ordering::Acquire),
                "syncing before the predecessor is durable"
            );
        }
        #[cfg(all(test, not(loom)))]
        self.before_sync.run();
        let outcome = match &self.sync_handle {
            Some(handle) => handle.sync(),
            // No handle: sync through the writer, holding the leader role for it.
            None => {
                let mut state = self
                    .leader
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                // As in `lead`: after a failed append the file may still buffer part of it,
                // which a sync would write out again.
                if let Some(error) = self.failed.get() {
                    return Err(error.clone());
                }
                // A retired log's file is gone (`take`n), and it needs no sync.
                state.file.as_mut().map_or(Ok(()), |file| file.sync())
            }
        };
        if let Err(error) = outcome {
            let _ = self.failed.set(error.clone());
            return Err(error);
        }
        self.synced_sequence.fetch_max(written, Ordering::AcqRel);
        if self.has_file {
            self.pending_sync_marker
                .fetch_max(durable_bytes, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Makes the predecessor and every older log durable (or finds them retired), once.
    /// Called without this log's leader lock; waiters that ask for a sync meanwhile block
    /// here, as they would have to wait for that sync anyway.
    fn sync_previous(&self) -> Result<()> {
        let mut previous = self
            .unsynced_previous
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(log) = previous.as_ref() {
            log.sync_finished()?;
        }
        let released = previous.take();
        self.previous_synced.store(true, Ordering::Release);
        // A waiter parked because no leader could sync this log yet may sync it now.
        self.parker.notify();
        drop(previous);
        // Possibly the last reference to an old log: its file closes here, outside the lock.
        drop(released);
        Ok(())
    }

    /// After `finish`: makes this log and every older one durable, unless retired. Called by
    /// the successor before its first sync (from `sync_previous`, outside its leader lock).
    fn sync_finished(&self) -> Result<()> {
        if let Some(error) = self.failed.get() {
            return Err(error.clone());
        }
        // Older logs first (invariant 4); a retired log let go of them already.
        self.sync_previous()?;
        // Syncs of one log never overlap (a late one must not report an older length).
        let _role = self
            .sync_role
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Blocking is fine: this log is sealed and finished, so only a `retire` or another
        // successor-side sync can hold its leader lock, never one of its writers.
        let mut state = self
            .leader
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if state.retired {
            return Ok(());
        }
        let written = self.written_sequence.load(Ordering::Acquire);
        if self.synced_sequence.load(Ordering::Acquire) < written || state.trim_unsynced {
            if let Some(file) = state.file.as_mut() {
                if let Err(error) = file.sync() {
                    let _ = self.failed.set(error.clone());
                    return Err(error);
                }
            }
            state.trim_unsynced = false;
            self.synced_sequence.fetch_max(written, Ordering::AcqRel);
        }
        Ok(())
    }

    /// The log's memtable is flushed into a synced table: the log never needs writing or
    /// syncing again. Closes its file and lets go of its predecessor (invariant 4). The file
    /// is closed (for a mapped log: unmapped and truncated) after the locks are released.
    pub fn retire(&self) {
        let (file, unwritten) = {
            let mut state = self
                .leader
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            state.retired = true;
            (state.file.take(), state.previous_unwritten.take())
        };
        let unsynced = self
            .unsynced_previous
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        self.previous_synced.store(true, Ordering::Release);
        // A waiter parked because no leader could sync this log yet may sync it now.
        self.parker.notify();
        drop((file, unwritten, unsynced));
    }

    /// After `seal`: waits for every reserved record to be published, writes them all and
    /// trims the file. Used by the next log before it writes (invariant 4); the sync waits
    /// for `sync_finished`.
    pub fn finish(&self) -> Result<()> {
        if !self.has_file {
            return Ok(());
        }
        debug_assert!(self.sealed_for_good.load(Ordering::Acquire));
        let mut round = 0;
        loop {
            if let Some(error) = self.failed.get() {
                return Err(error.clone());
            }
            // Read before the step: a writer that publishes and leads after the step (and
            // notifies before this thread is counted as parked) moves it, so the park below
            // returns at once instead of sleeping out its timeout under the new log's lead.
            let written_before = self.written_sequence.load(Ordering::Acquire);
            let step = match self.leader.try_lock() {
                Ok(mut state) => Some(self.finish_step(&mut state)),
                Err(_) => None,
            };
            if step.is_some() {
                // As in `wait_for`: this log's own writers may be parked on the role.
                let moved = self.written_sequence.load(Ordering::Acquire) != written_before;
                self.notify_after_lead(moved || matches!(step, Some(Ok(true))));
            }
            match step {
                Some(Ok(true)) => return Ok(()),
                Some(Err(error)) => return Err(error),
                Some(Ok(false)) | None => {}
            }
            // Waiting for a writer of this log to publish; it leads once it has.
            self.parker.wait(&mut round, || {
                self.failed.get().is_some()
                    || self.written_sequence.load(Ordering::Acquire) != written_before
            });
        }
    }

    /// One leading pass of `finish`, holding the leader role: whether the log is finished.
    fn finish_step(&self, state: &mut LeaderState) -> Result<bool> {
        if state.retired {
            return Ok(true);
        }
        let result = self.lead(state);
        if let Err(error) = result {
            let _ = self.failed.set(error.clone());
            return Err(error);
        }
        let done = state.segment.next.get().is_none()
            && state
                .segment
                .sealed_end
                .get()
                .is_some_and(|&(end, _)| state.offset >= end);
        if done {
            // A finished log must end at its last record: recovery reads a zero tail
            // (space a memory-mapped log reserved) in an older log as a torn tail and
            // would then ignore every newer log. A trim that changed the file asks for
            // a sync: `sync_finished` does it, off this (the writers') path, before
            // the successor's first sync — even if every record was synced already.
            match state.file.as_mut().map(|file| file.trim()) {
                Some(Err(error)) => {
                    let _ = self.failed.set(error.clone());
                    return Err(error);
                }
                Some(Ok(true)) => state.trim_unsynced = true,
                Some(Ok(false)) | None => {}
            }
            return Ok(true);
        }
        Ok(false)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Two writers reserve while a switch seals the log: every successful reservation lies
    /// below the sequence handed to the next log, and reservations never overlap or leave a
    /// hole (invariants 1 and 2).
    #[test]
    fn seal_races_reservations_without_holes() {
        loom::model(|| {
            let log = loom::sync::Arc::new(Log::new(
                1,
                PathBuf::from("/x"),
                None,
                1,
                0,
                None,
                Arc::new(std::sync::atomic::AtomicU64::new(0)),
            ));
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let log = log.clone();
                    loom::thread::spawn(move || match log.reserve(1, 0) {
                        Reserve::Reserved { sequence, .. } => Some(sequence),
                        Reserve::Sealed => None,
                    })
                })
                .collect();
            let next = log.seal();
            let mut got: Vec<u64> = writers
                .into_iter()
                .filter_map(|w| w.join().unwrap())
                .collect();
            got.sort();
            for (index, sequence) in got.iter().enumerate() {
                assert_eq!(*sequence, 1 + index as u64);
            }
            assert_eq!(next, 1 + got.len() as u64);
        });
    }
}
