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
//! file and, when some waiter asked for it, syncs; every other writer waits for the written
//! (or synced) sequence to reach its own.
//!
//! Thread-safety contract: every method takes `&self` and may be called from any thread.
//! Waiting happens only for other writers' progress (their memcpy, or the leader's I/O): a
//! waiter spins, yields, then parks on the log's `Parker`, which every leader notifies after
//! it lets go of the role (a writer that publishes a record always reaches its own wait and
//! leads, so the waiters for that record are woken).
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
//!    writers need; until it is done no leader syncs the new log, so a writer that asked for
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
//! 7. A log's file starts with the WAL header record (`wal::wal_header_record`), written with
//!    its first records. After a sync in `lead`, the next bytes written (ahead of the next
//!    records) are a sync marker naming the file length that sync made durable, which is
//!    exactly the marker's own offset: recovery uses markers to tell damaged synced bytes
//!    (corruption) from a hole in the unsynced tail. A marker is written only with records
//!    after it, so a finished log never ends in one, and the final sync of a finished log
//!    (`sync_finished`) writes none: an unsynced trailing marker, torn by a power loss, would
//!    read as a torn tail and hide every newer log.

use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::sync::{AtomicU64, Ordering, Parker};
use crate::wal::{
    record_bytes, record_header, sync_marker_record, wal_header_record, RECORD_HEADER_BYTES,
};
use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

const SEALED: u64 = 1 << 63;
const SEQUENCE_SHIFT: u32 = 40;
const BYTES_MASK: u64 = (1 << SEQUENCE_SHIFT) - 1;
/// Sequences one segment may hand out (the field has 23 bits; staying at half of it keeps
/// an in-progress reservation from carrying into the sealed bit).
pub const SEGMENT_SEQUENCES_MAX: u64 = 1 << 21;
/// Default segment buffer size.
pub const SEGMENT_BYTES_DEFAULT: usize = 1 << 20;

/// What a reservation attempt got.
#[derive(Debug)]
pub enum Reserve {
    /// Sequences `[sequence, sequence + count)` and bytes `[offset, offset + bytes)`.
    Reserved {
        /// The segment holding the reservation (a guard, not a clone: no shared reference
        /// count is touched per write).
        segment: arc_swap::Guard<Arc<Segment>>,
        /// First reserved sequence.
        sequence: u64,
        /// Byte offset inside the segment buffer.
        offset: usize,
    },
    /// The segment is sealed; retry after the log or the memtable moves on.
    Sealed,
}

/// One buffer of a log. See the module documentation.
pub struct Segment {
    base_sequence: u64,
    capacity_bytes: usize,
    buffer: *mut u8,
    reservation: AtomicU64,
    /// `(end byte offset, end sequence)` once sealed: nothing at or past them is reserved.
    sealed_end: OnceLock<(usize, u64)>,
    next: OnceLock<Arc<Segment>>,
}

// SAFETY: the buffer is written only in disjoint reserved regions (invariant 1) and read by
// the leader only after the region's header was published with a release store.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl std::fmt::Debug for Segment {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Segment")
            .field("base_sequence", &self.base_sequence)
            .field("capacity_bytes", &self.capacity_bytes)
            .finish()
    }
}

impl Segment {
    /// A segment starting at `base_sequence` with room for `capacity_bytes` (0 for a log
    /// without a file: sequences only).
    pub fn new(base_sequence: u64, capacity_bytes: usize) -> Self {
        let capacity_bytes = capacity_bytes.next_multiple_of(8);
        let buffer = if capacity_bytes == 0 {
            std::ptr::null_mut()
        } else {
            let Ok(layout) = Layout::from_size_align(capacity_bytes, 8) else {
                handle_alloc_error(Layout::new::<u64>())
            };
            // SAFETY: non-zero size. Zeroed memory is required: a zero header means "not
            // published yet".
            let buffer = unsafe { alloc_zeroed(layout) };
            if buffer.is_null() {
                handle_alloc_error(layout);
            }
            buffer
        };
        Segment {
            base_sequence,
            capacity_bytes,
            buffer,
            reservation: AtomicU64::new(0),
            sealed_end: OnceLock::new(),
            next: OnceLock::new(),
        }
    }

    /// Tries to reserve `count` sequences and `bytes` bytes. On `Err(())` the segment is full
    /// and sealed *by this call*: the caller must install the successor.
    fn try_reserve(
        &self,
        count: u64,
        bytes: usize,
    ) -> std::result::Result<Option<(u64, usize)>, ()> {
        let mut current = self.reservation.load(Ordering::Acquire);
        loop {
            if current & SEALED != 0 {
                return Ok(None);
            }
            let sequence_offset = current >> SEQUENCE_SHIFT;
            let byte_offset = (current & BYTES_MASK) as usize;
            let fits = byte_offset + bytes <= self.capacity_bytes
                && sequence_offset + count <= SEGMENT_SEQUENCES_MAX;
            let new = if fits {
                current + (count << SEQUENCE_SHIFT) + bytes as u64
            } else {
                current | SEALED
            };
            match self.reservation.compare_exchange_weak(
                current,
                new,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) if fits => {
                    return Ok(Some((self.base_sequence + sequence_offset, byte_offset)))
                }
                Ok(_) => {
                    let _ = self
                        .sealed_end
                        .set((byte_offset, self.base_sequence + sequence_offset));
                    return Err(());
                }
                Err(actual) => current = actual,
            }
        }
    }

    /// The next sequence this segment would hand out (its end once sealed).
    fn next_sequence(&self) -> u64 {
        let word = self.reservation.load(Ordering::Acquire);
        self.base_sequence + ((word & !SEALED) >> SEQUENCE_SHIFT)
    }

    /// Seals the segment; returns the next unused sequence if this call sealed it.
    fn seal(&self) -> Option<u64> {
        let previous = self.reservation.fetch_or(SEALED, Ordering::AcqRel);
        if previous & SEALED != 0 {
            return None;
        }
        let byte_offset = (previous & BYTES_MASK) as usize;
        let end_sequence = self.base_sequence + (previous >> SEQUENCE_SHIFT);
        let _ = self.sealed_end.set((byte_offset, end_sequence));
        Some(end_sequence)
    }

    /// Copies a record's payload into its reserved region and publishes it.
    ///
    /// Panics if the record would not fit the buffer at `offset` or `offset` is not 8-byte
    /// aligned: both are checked on every call (two comparisons), so no offset, however
    /// wrong, makes the copy leave the buffer.
    ///
    /// # Safety
    ///
    /// `offset` must be the offset of a [`Reserve::Reserved`] the caller got from this
    /// segment and has not published yet, and `record_bytes(payload.len())` must not exceed
    /// the bytes that reservation asked for. The region is then the caller's alone
    /// (invariant 1): no other thread writes it, and the leader reads its payload only after
    /// the header's release store below. Publishing twice, or past the reservation, races
    /// with another writer's copy or the leader's read.
    pub unsafe fn publish(&self, offset: usize, payload: &[u8]) {
        if self.buffer.is_null() {
            return; // a log without a file: sequences only
        }
        let end = offset.checked_add(record_bytes(payload.len()));
        assert!(
            end.is_some_and(|end| end <= self.capacity_bytes) && offset.is_multiple_of(8),
            "a WAL record of {} bytes at offset {offset} is outside the {}-byte segment",
            payload.len(),
            self.capacity_bytes
        );
        // SAFETY: `[offset, end)` lies inside the buffer and is 8-aligned (asserted above;
        // the buffer is 8-aligned), and is this caller's alone (the function's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(
                payload.as_ptr(),
                self.buffer.add(offset + RECORD_HEADER_BYTES),
                payload.len(),
            );
            let header = &*(self.buffer.add(offset) as *const std::sync::atomic::AtomicU64);
            header.store(record_header(payload), std::sync::atomic::Ordering::Release);
        }
    }

    /// From `offset`, the end of the published prefix and the last sequence in it (`None` if
    /// nothing new is published).
    fn published_prefix(&self, mut offset: usize) -> Option<(usize, u64)> {
        let limit = match self.sealed_end.get() {
            Some(&(end, _)) => end,
            None => (self.reservation.load(Ordering::Acquire) & BYTES_MASK) as usize,
        }
        .min(self.capacity_bytes);
        let mut last_sequence = None;
        while offset + RECORD_HEADER_BYTES <= limit {
            // SAFETY: in bounds and 8-aligned (see `publish`); the acquire load pairs with
            // the publisher's release store, so the payload bytes are visible after it.
            let header =
                unsafe { (*(self.buffer.add(offset) as *const AtomicU64)).load(Ordering::Acquire) };
            if header == 0 {
                break;
            }
            let length = (header >> 32) as usize;
            // SAFETY: the payload of a published record is in bounds and immutable.
            let payload = unsafe {
                std::slice::from_raw_parts(self.buffer.add(offset + RECORD_HEADER_BYTES), length)
            };
            let first = crate::coding::get_u64(payload, 0).unwrap_or(0);
            let count = u64::from(crate::coding::get_u32(payload, 8).unwrap_or(0));
            last_sequence = Some(first + count.max(1) - 1);
            offset += record_bytes(length);
        }
        last_sequence.map(|last| (offset, last))
    }

    fn bytes(&self, start: usize, end: usize) -> &[u8] {
        if self.buffer.is_null() || start >= end {
            return &[];
        }
        // SAFETY: callers pass a range of published records inside the buffer.
        unsafe { std::slice::from_raw_parts(self.buffer.add(start), end - start) }
    }
}

/// Appends what goes ahead of a log's next records: the WAL header before the first ones, a
/// sync marker after a sync (invariant 7).
fn write_preamble(
    file: &mut dyn WritableFile,
    header_written: &mut bool,
    pending_sync_marker: &mut Option<u64>,
) -> Result<()> {
    if !*header_written {
        if cfg!(feature = "invariants") {
            assert_eq!(file.size_bytes(), 0, "WAL header written past the start");
        }
        file.append(&wal_header_record())?;
        *header_written = true;
    }
    if let Some(durable_bytes) = pending_sync_marker.take() {
        if cfg!(feature = "invariants") {
            // Invariant 7: nothing was appended between the sync and its marker.
            assert_eq!(
                file.size_bytes(),
                durable_bytes,
                "sync marker not at the synced length"
            );
        }
        file.append(&sync_marker_record(durable_bytes))?;
    }
    Ok(())
}

impl Drop for Segment {
    fn drop(&mut self) {
        if !self.buffer.is_null() {
            if let Ok(layout) = Layout::from_size_align(self.capacity_bytes, 8) {
                // SAFETY: allocated in `new` with this layout; dropped once.
                unsafe { dealloc(self.buffer, layout) };
            }
        }
    }
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
    /// A sync made this many bytes durable; the marker saying so goes ahead of the next
    /// records (invariant 7).
    pending_sync_marker: Option<u64>,
}

/// One WAL file (or, with the WAL off, just a sequence source). See the module docs.
pub struct Log {
    number: u64,
    path: PathBuf,
    segment_bytes: usize,
    current: arc_swap::ArcSwap<Segment>,
    leader: Mutex<LeaderState>,
    /// The predecessor until it is synced (or retired) on behalf of this log (invariant 4).
    /// Apart from the leader state: its fdatasync must never hold this log's leader lock,
    /// which every writer of this log competes for.
    unsynced_previous: Mutex<Option<Arc<Log>>>,
    /// `unsynced_previous` is empty: this log may sync.
    previous_synced: crate::sync::AtomicBool,
    written_sequence: AtomicU64,
    synced_sequence: AtomicU64,
    sync_requested: AtomicU64,
    /// Sequences below this are not in this log (its first segment's base).
    first_sequence: u64,
    has_file: bool,
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
        let segment_bytes = if has_file { segment_bytes.max(4096) } else { 0 };
        let segment = Arc::new(Segment::new(first_sequence, segment_bytes));
        let previous_synced = crate::sync::AtomicBool::new(previous.is_none());
        Log {
            number,
            path,
            segment_bytes,
            current: arc_swap::ArcSwap::new(Arc::clone(&segment)),
            leader: Mutex::new(LeaderState {
                file,
                segment,
                offset: 0,
                previous_unwritten: previous.clone(),
                retired: false,
                trim_unsynced: false,
                header_written: false,
                pending_sync_marker: None,
            }),
            unsynced_previous: Mutex::new(previous),
            previous_synced,
            written_sequence: AtomicU64::new(first_sequence.saturating_sub(1)),
            synced_sequence: AtomicU64::new(first_sequence.saturating_sub(1)),
            sync_requested: AtomicU64::new(0),
            first_sequence,
            has_file,
            failed: OnceLock::new(),
            sealed_for_good: crate::sync::AtomicBool::new(false),
            global_written,
            parker: Parker::default(),
        }
    }

    /// The WAL file number.
    pub fn number(&self) -> u64 {
        self.number
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
                    // writer who is installing the successor right now.
                    if self.sealed_for_good.load(Ordering::Acquire) {
                        return Reserve::Sealed;
                    }
                    crate::sync::spin_wait(&mut round);
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
        (guard, end_sequence)
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
            crate::sync::spin_wait(&mut round);
        }
    }

    /// Waits until every sequence up to `last` is written to the OS (and synced, with `sync`),
    /// leading the group commit when no one else is.
    pub fn wait_durable(&self, last: u64, sync: bool) -> Result<()> {
        if !self.has_file {
            return Ok(());
        }
        if sync {
            self.sync_requested.fetch_max(last, Ordering::AcqRel);
            if !self.previous_synced.load(Ordering::Acquire) {
                // Invariant 4 off the writers' path: once `last` is written (which finishes
                // the predecessor), this waiter syncs the predecessor itself, holding no lock
                // the other writers of this log need; no leader syncs this log before that.
                self.wait_for(last, false)?;
                if let Err(error) = self.sync_previous() {
                    let _ = self.failed.set(error.clone());
                    self.parker.notify();
                    return Err(error);
                }
            }
        }
        self.wait_for(last, sync)
    }

    /// The waiting loop of `wait_durable`, once the predecessor is taken care of.
    fn wait_for(&self, last: u64, sync: bool) -> Result<()> {
        let mut round = 0;
        let done = || {
            self.written_sequence.load(Ordering::Acquire) >= last
                && (!sync || self.synced_sequence.load(Ordering::Acquire) >= last)
        };
        let progress = || {
            let written = self.written_sequence.load(Ordering::Acquire);
            (written, self.synced_sequence.load(Ordering::Acquire))
        };
        loop {
            if let Some(error) = self.failed.get() {
                return Err(error.clone());
            }
            if done() {
                return Ok(());
            }
            let mut led = false;
            if let Ok(mut state) = self.leader.try_lock() {
                let before = progress();
                let outcome = self.lead(&mut state);
                if let Err(error) = &outcome {
                    let _ = self.failed.set(error.clone());
                }
                drop(state);
                // After letting go of the role: a parked waiter may be done now, or may
                // have to lead (it checks the role is free before it sleeps).
                self.parker.notify();
                outcome?;
                if progress() != before {
                    continue;
                }
                // Nothing new was published: a lower writer is between reserving and
                // publishing. It leads (and so notifies) once it reaches its own wait.
                led = true;
            }
            self.parker.wait(&mut round, || {
                self.failed.get().is_some() || done() || (!led && self.leader.try_lock().is_ok())
            });
        }
    }

    /// Writes every published record and, if requested, syncs. Caller holds `leader`.
    fn lead(&self, state: &mut LeaderState) -> Result<()> {
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
                        &mut state.pending_sync_marker,
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
            }
            // The database-wide watermark first: a writer acknowledged once it sees this
            // log's is then already covered by the database's, so a read that waits for an
            // acknowledged write waits only for inserts (`sequence::Acknowledged`).
            self.global_written
                .fetch_max(last, std::sync::atomic::Ordering::AcqRel);
            self.written_sequence.store(last, Ordering::Release);
        }
        let written = self.written_sequence.load(Ordering::Acquire);
        // Invariant 4: older logs are durable (or retired) before this one syncs; until then
        // the waiter that asked for the sync syncs them (`wait_durable`) and then leads.
        if self.sync_requested.load(Ordering::Acquire)
            > self.synced_sequence.load(Ordering::Acquire)
            && written > self.synced_sequence.load(Ordering::Acquire)
            && self.previous_synced.load(Ordering::Acquire)
        {
            if cfg!(feature = "invariants") {
                // Invariant 4: "previous synced" is set only once the predecessor is let go.
                if let Ok(previous) = self.unsynced_previous.try_lock() {
                    assert!(
                        previous.is_none(),
                        "syncing before the predecessor is durable"
                    );
                }
            }
            if let Some(file) = state.file.as_mut() {
                file.sync()?;
                state.pending_sync_marker = Some(file.size_bytes());
            }
            self.synced_sequence.store(written, Ordering::Release);
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
            self.synced_sequence.store(written, Ordering::Release);
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
                self.parker.notify();
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
