//! The write path: reserve sequences and WAL space in the active write buffer (making room
//! when it is full), copy the record, insert into the memory component, publish through the
//! watermark and wait for the WAL (`ARCHITECTURE.md`, write path steps).
//!
//! Thread-safety contract: every function here is called by client threads concurrently.
//! The fast path (`reserve` → insert → `finish_write`) takes no lock: one compare-and-swap
//! in the log, lock-free inserts, watermark stores. Only the one writer that claims a full
//! buffer's switch (`make_room`) waits for room and installs the next buffer.
//!
//! Invariants:
//! 1. A reservation's sequence range is non-empty and ascending, and lies in the active
//!    buffer of the super version the reservation holds.
//! 2. Every reserved range is finished (`finish_write`) exactly once, even when the write
//!    fails: the watermark and the flush of the buffer wait for every reserved sequence.
//! 3. A write is acknowledged only after its range is inserted and (WAL on) written.
//! 4. WAL file numbers follow the order in which logs are used: at most one WAL is prepared
//!    ahead (created and its directory entry synced off the switch path), the next switch
//!    uses it, and a switch waits for a preparation under way rather than create a WAL with
//!    a higher number. Recovery stops at the first empty WAL, so an unused empty WAL below
//!    a used one would hide that one's synced records. A failed preparation stops writes
//!    (sticky error), as a failed creation during the switch does.

use super::inner::{create_wal_file, lock, DbInner, WAIT_SLICE};
use super::super_version::SuperVersion;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename;
use crate::key::SequenceNumber;
use crate::memory::WriteBuffer;
use crate::options::WriteOptions;
use crate::stats::Counters;
use crate::wal_writer::{Log, Reserve, Segment, SEGMENT_BYTES_DEFAULT};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A writer's claim on sequences and WAL bytes in the active buffer (see
/// `DbInner::reserve`). It holds guards rather than clones of the super version and the WAL
/// segment, so the write path touches no shared reference count.
pub(super) struct Reservation {
    pub(super) super_version: arc_swap::Guard<Arc<SuperVersion>>,
    pub(super) segment: arc_swap::Guard<Arc<Segment>>,
    pub(super) first: SequenceNumber,
    pub(super) offset: usize,
}

/// A WAL file created ahead of the switch that uses it (invariant 4).
#[derive(Debug)]
pub(super) struct PreparedWal {
    number: u64,
    path: PathBuf,
    file: Box<dyn crate::fs::WritableFile>,
}

impl Reservation {
    /// The buffer the sequences belong to.
    pub(super) fn buffer(&self) -> &WriteBuffer {
        self.super_version.memory.active()
    }
}

impl DbInner {
    /// Applies a batch; returns the sequence of its last entry once it is visible and as
    /// durable as `options` asks.
    // `WriteOptions` travels by reference like every options struct, so a new field never
    // changes a call site.
    #[allow(clippy::trivially_copy_pass_by_ref)]
    pub(super) fn write(
        &self,
        options: &WriteOptions,
        mut batch: WriteBatch,
    ) -> Result<SequenceNumber> {
        self.check_writable()?;
        batch.validate()?;
        if batch.is_empty() {
            return self.write_nothing(options);
        }
        let count = batch.len() as u64;
        // Only with the Membuffer: without one the extra super-version load buys nothing.
        if self.options.membuffer_enabled {
            self.super_version.load().memory.active().prefetch(&batch);
        }
        let reservation = self.reserve(count, batch.size_bytes())?;
        // Tests hold a writer here, between reserve and publish (`inner::tests`).
        self.race_point("write: reserved");
        let first = reservation.first;
        let record_length = {
            let record = batch.encode(first);
            // SAFETY: the reservation is this writer's own, made for `size_bytes()` of
            // payload, which is what `encode` returns; it is published once, here.
            unsafe { reservation.segment.publish(reservation.offset, record) };
            record.len()
        };
        // The log knows whether an early lead pays (`Log::write_published`): none without a
        // file, none with `write(2)` appends.
        reservation.buffer().log().write_published();
        // A malformed entry is unreachable after `validate`; if it happens the range must
        // still be finished, or the watermark would stop for every later writer.
        let inserted = reservation.super_version.memory.insert(&batch, first);
        // Tests hold a writer here, inserted but not yet visible (`inner::tests`).
        self.race_point("write: inserted");
        let last = first + count - 1;
        debug_assert!(
            first >= 1 && last >= first,
            "invariant 1: an empty or wrapped range"
        );
        let finished = self.finish_write(&reservation, options, last, record_length);
        // Tests look here: the write published, its Membuffer drains still to run.
        self.race_point("write: published");
        // A full Membuffer partition this write found is moved into the memtable here, as
        // `inserted` is consumed (its drains run when it drops): after the write is
        // published, so the writers behind it in sequence order need not wait, and whether
        // or not the WAL failed.
        let counts = inserted.map(|inserted| (inserted.puts, inserted.deletes));
        finished?;
        let (puts, deletes) = counts.map_err(Error::Internal)?;
        debug_assert_eq!(puts + deletes, count);
        Counters::add(&self.counters.puts, puts);
        Counters::add(&self.counters.deletes, deletes);
        Counters::add(&self.counters.batches, 1);
        Ok(last)
    }

    /// An empty batch. With `sync` it is a durability barrier (as in LevelDB): it returns once
    /// every write acknowledged before it is synced, by syncing the active WAL through them
    /// (a log syncs its predecessors first, so writes in sealed logs are covered too).
    #[allow(clippy::trivially_copy_pass_by_ref)]
    fn write_nothing(&self, options: &WriteOptions) -> Result<SequenceNumber> {
        let through = self.read_sequence();
        if options.sync {
            self.sync_wal_through(through)?;
        }
        Ok(through)
    }

    /// Syncs the WAL through `sequence` (a no-op without a WAL): the active log, which syncs
    /// every older log first, so a sequence in a sealed log is covered too, and one already
    /// flushed to a table needs nothing. A failure is sticky, as for any WAL sync.
    pub(super) fn sync_wal_through(&self, sequence: SequenceNumber) -> Result<()> {
        if !self.options.wal_enabled {
            return Ok(());
        }
        let super_version = self.super_version.load();
        let log = super_version.memory.active().log();
        log.wait_durable(sequence, true).inspect_err(|error| {
            self.set_sticky_error(error);
        })
    }

    /// The common tail of every write: publish `[first, last]` as inserted (which is what
    /// lets a flush of the buffer proceed), wait for the WAL and for visibility.
    // By reference, as in `write`.
    #[allow(clippy::trivially_copy_pass_by_ref)]
    pub(super) fn finish_write(
        &self,
        reservation: &Reservation,
        options: &WriteOptions,
        last: SequenceNumber,
        record_bytes: usize,
    ) -> Result<()> {
        debug_assert!(reservation.first <= last, "invariant 1");
        debug_assert!(last < reservation.buffer().log().next_sequence());
        self.inserted.finish(reservation.first, last);
        if self.options.wal_enabled {
            let log = reservation.buffer().log();
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
        // The published watermark never passes a sequence not yet handed out (read before
        // the log bound, which only grows).
        debug_assert!(self.inserted.get() < self.next_unreserved_sequence());
        self.acknowledge(last);
        Ok(())
    }

    /// Reserves `count` sequences and log space for a payload of `payload_bytes` in the active
    /// buffer, making room first if it is full. The caller must insert its entries into
    /// `reservation.buffer()` and then call `finish_write` (always, even on failure:
    /// invariant 2).
    pub(super) fn reserve(&self, count: u64, payload_bytes: usize) -> Result<Reservation> {
        debug_assert!(count > 0, "an empty reservation");
        // Every write path comes through here: refuse a record recovery could not replay.
        crate::batch::check_batch_bytes(
            payload_bytes,
            self.options.wal_record_payload_bytes_max(),
        )?;
        let mut delayed = false;
        loop {
            self.check_writable()?;
            // A guard, not a clone: holding it keeps the buffer alive without touching the
            // shared reference count of the super version on every write.
            let super_version = self.super_version.load();
            if !delayed
                && super_version.version.files(0).len() >= self.options.level0_slowdown_trigger
            {
                drop(super_version);
                self.slow_down();
                delayed = true;
                continue;
            }
            let buffer = super_version.memory.active();
            if buffer.is_full(self.options.write_buffer_size_bytes) {
                let buffer = Arc::clone(buffer);
                drop(super_version);
                self.make_room(&buffer)?;
                continue;
            }
            let bytes = buffer.log().reservation_bytes(payload_bytes);
            match buffer.log().reserve(count, bytes) {
                Reserve::Reserved {
                    segment,
                    sequence,
                    offset,
                } => {
                    debug_assert!(sequence >= buffer.log().first_sequence(), "invariant 1");
                    debug_assert!(sequence + count <= buffer.log().next_sequence());
                    return Ok(Reservation {
                        super_version,
                        segment,
                        first: sequence,
                        offset,
                    });
                }
                Reserve::Sealed => {
                    let buffer = Arc::clone(buffer);
                    drop(super_version);
                    self.wait_for_switch(&buffer)?;
                }
            }
        }
    }

    /// Slows a writer down before level 0 stops writes: one short delay per write hands the
    /// CPU to compaction and spreads the cost instead of stopping writers outright.
    fn slow_down(&self) {
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(1));
        Counters::add(&self.counters.slowdown_writes, 1);
        Counters::add(
            &self.counters.slowdown_micros,
            u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
    }

    /// Waits until `buffer` is no longer the active buffer (another writer is sealing it),
    /// counting the time as a stall.
    fn wait_for_switch(&self, buffer: &Arc<WriteBuffer>) -> Result<()> {
        let started = Instant::now();
        let mut round = 0u32;
        while Arc::ptr_eq(self.super_version.load().memory.active(), buffer) {
            self.check_writable()?;
            self.wait_switch_step(&mut round, buffer);
        }
        let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        if waited > 100 {
            Counters::add(&self.counters.stop_writes, 1);
            Counters::add(&self.counters.stop_micros, waited);
        }
        Ok(())
    }

    /// The active buffer is full: one writer seals it (after waiting for room among the
    /// sealed buffers and level 0); the others wait for the new one.
    pub(super) fn make_room(&self, buffer: &Arc<WriteBuffer>) -> Result<()> {
        if !buffer.claim_switch() {
            return self.wait_for_switch(buffer);
        }
        debug_assert!(
            buffer.last_sequence().is_none(),
            "a claimed buffer was already sealed"
        );
        let started = Instant::now();
        let mut stalled = false;
        loop {
            self.check_writable()?;
            let super_version = self.super_version.load();
            let full = super_version.memory.sealed().len() >= self.options.max_immutable_memtables
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
                u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            );
        }
        self.switch_buffer(buffer)?;
        debug_assert!(
            buffer.last_sequence().is_some(),
            "the switch did not seal the buffer"
        );
        Ok(())
    }

    /// Seals `buffer` and installs a new one with a new WAL. Only the writer that claimed
    /// the switch (or `flush`, likewise claiming it) calls this.
    fn switch_buffer(&self, buffer: &Arc<WriteBuffer>) -> Result<()> {
        debug_assert!(Arc::ptr_eq(
            self.super_version.load().memory.active(),
            buffer
        ));
        let next_sequence = buffer.seal();
        let (wal_number, wal_path, file) = if self.options.wal_enabled {
            match self.take_next_wal() {
                Ok(prepared) => (prepared.number, prepared.path, Some(prepared.file)),
                Err(error) => {
                    self.set_sticky_error(&error);
                    return Err(error);
                }
            }
        } else {
            let number = self.file_numbers.fetch_add(1, Ordering::SeqCst);
            (number, filename::wal_path(&self.directory, number), None)
        };
        let log = Log::new(
            wal_number,
            wal_path,
            file,
            next_sequence,
            SEGMENT_BYTES_DEFAULT,
            Some(Arc::clone(buffer.log())),
            Arc::clone(&self.written),
        );
        let fresh = Arc::new(WriteBuffer::for_options(
            &self.options,
            log,
            &self.counters.membuffer,
            self.overwrite_gate.as_ref(),
        ));
        self.install_switch(buffer, fresh);
        debug_assert!(!Arc::ptr_eq(
            self.super_version.load().memory.active(),
            buffer
        ));
        Counters::add(&self.counters.memtable_switches, 1);
        self.background_changed.notify_all();
        // Nobody waits for the switch any more: create the next switch's WAL now, so that
        // switch does not make every writer wait through a create, fallocate and mmap and a
        // directory sync.
        if self.options.wal_enabled {
            self.prepare_next_wal();
        }
        Ok(())
    }

    /// Creates a WAL file with the next file number and makes its directory entry durable.
    fn create_next_wal(&self) -> Result<PreparedWal> {
        let number = self.file_numbers.fetch_add(1, Ordering::SeqCst);
        let path = filename::wal_path(&self.directory, number);
        let file = create_wal_file(self.file_system.as_ref(), &self.options, &path)?;
        self.file_system.sync_dir(&self.directory)?;
        Ok(PreparedWal { number, path, file })
    }

    /// The file of the next log: the prepared one (after waiting for a preparation under
    /// way: invariant 4), or one created now.
    fn take_next_wal(&self) -> Result<PreparedWal> {
        let mut background = lock(&self.background);
        while background.preparing_wal {
            background = match self.background_changed.wait_timeout(background, WAIT_SLICE) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        if let Some(prepared) = background.prepared_wal.take() {
            return Ok(prepared);
        }
        // Invariant 4: mark the creation as under way before letting go of the lock. Another
        // switch's `prepare_next_wal` may run meanwhile (its switch installed, ours claimed);
        // without the mark it would take a file number of its own, and whichever number came
        // second could go to this log while the first lay prepared and empty below it —
        // recovery stops at an empty WAL, and the obsolete-file pass could delete it once a
        // newer log's flush raised `log_number`.
        background.preparing_wal = true;
        drop(background);
        self.race_point("take_next_wal: creating");
        let created = self.create_next_wal();
        lock(&self.background).preparing_wal = false;
        self.background_changed.notify_all();
        created
    }

    /// Prepares the next switch's WAL unless one is prepared or being prepared.
    pub(super) fn prepare_next_wal(&self) {
        {
            let mut background = lock(&self.background);
            if background.preparing_wal
                || background.prepared_wal.is_some()
                || background.shutting_down
            {
                return;
            }
            background.preparing_wal = true;
        }
        let prepared = self.create_next_wal();
        let mut background = lock(&self.background);
        background.preparing_wal = false;
        let failed = match prepared {
            Ok(prepared) => {
                background.prepared_wal = Some(prepared);
                None
            }
            Err(error) => Some(error),
        };
        drop(background);
        if let Some(error) = failed {
            // Invariant 4: the file may exist, empty; no newer WAL may be used after it.
            self.set_sticky_error(&error);
        }
        self.background_changed.notify_all();
    }
}
