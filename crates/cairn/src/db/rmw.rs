//! Optimistic read-modify-write (cLSM Algorithm 3, made safe against concurrent puts) and
//! the operations built on it (`put_if_absent`, `compare_and_swap`, `increment`).
//!
//! One attempt (`rmw_attempt`):
//! 1. note the next sequence `horizon` and wait until every sequence below it is
//!    inserted — without holding a sequence of our own, so no one waits for us;
//! 2. read the newest version of `key`, in-flight writes included, and apply `decide`;
//! 3. reserve a sequence number and log space;
//! 4. if it is `horizon`, nobody reserved since step 1 and the read saw every version
//!    below ours: valid. Otherwise wait (briefly, spinning) until every lower sequence is
//!    inserted and check that the newest version below ours is still the one read
//!    (`validate`);
//! 5. insert (valid, `commit`) or log a *void record* and retry (conflict, or the lower
//!    writers did not finish within the spin).
//!
//! The wait closes a race in the paper's algorithm: a put that took a lower timestamp
//! before the read but inserted after it would otherwise be silently overwritten by a
//! value computed without it. The wait is for CPU work of lower writers, never for a lock,
//! and it is bounded while we hold a sequence: a writer that sleeps holding a sequence
//! stalls every later writer (they all wait for the watermark), and on an oversubscribed
//! machine such waits chain into convoys. After `RMW_PATIENT_ATTEMPTS` failed attempts
//! the wait is unbounded, which guarantees progress.
//!
//! Thread-safety contract: called from client threads concurrently with every other
//! operation; takes no lock. `decide` runs outside any lock and may run more than once. It
//! runs before the attempt reserves a sequence, so a panic in it unwinds with nothing held:
//! no lock to poison, no reserved sequence left unfinished (`tests/waits.rs`).
//!
//! Invariants:
//! 1. A sequence reserved here is always finished: as the write (valid) or as a void record
//!    (otherwise), so the log and the watermark stay gap-free.
//! 2. A write is valid only if no version of `key` has a sequence in `[read version, ours)`
//!    other than the one read.

use super::inner::DbInner;
use super::read::HintedRead;
use super::write::Reservation;
use super::Update;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::{check_key, check_value, SequenceNumber, ValueKind};
use crate::options::WriteOptions;
use crate::stats::Counters;
use std::sync::Arc;

/// Spins a read-modify-write waits, holding its sequence, for lower writers before it gives
/// the sequence up as a void record. Each spin is one pause hint and one watermark check:
/// 2,000 is a few microseconds, enough for a writer that is running to copy and insert,
/// and short next to a preempted writer's time slice.
const RMW_SPIN_ROUNDS: u32 = 2_000;
/// Attempts after which a read-modify-write waits for lower writers without a bound.
const RMW_PATIENT_ATTEMPTS: u32 = 8;

/// The outcome of step 4.
enum Validation {
    Valid,
    Conflict,
    /// Lower writers were still in flight after the bounded spin.
    Busy,
    Failed(Error),
}

/// The value now stored and the sequence of the write (None if nothing was written).
type RmwOutcome = (Option<Vec<u8>>, Option<SequenceNumber>);

/// The decision of a read-modify-write: given the current value and its expiry (in
/// milliseconds since the Unix epoch), what to write.
pub(super) type Decide<'a> = dyn FnMut(Option<(&[u8], Option<u64>)>) -> Update + 'a;

impl DbInner {
    /// Runs attempts until one is valid or `decide` keeps the value. Returns the value now
    /// stored and the sequence of the write (None if `decide` kept).
    // Options are taken by reference as `write` takes them (they may grow past Copy).
    #[allow(clippy::trivially_copy_pass_by_ref)]
    pub(super) fn read_modify_write(
        &self,
        options: &WriteOptions,
        key: &[u8],
        decide: &mut Decide<'_>,
    ) -> Result<RmwOutcome> {
        check_key(key)?;
        self.check_writable()?;
        let mut attempts = 0u32;
        loop {
            attempts = attempts.saturating_add(1);
            if let Some(outcome) = self.rmw_attempt(options, key, decide, attempts)? {
                return Ok(outcome);
            }
        }
    }

    /// Steps 1 to 5 once; None when the attempt was spent on a void record.
    // Options are taken by reference as `write` takes them (they may grow past Copy).
    #[allow(clippy::trivially_copy_pass_by_ref)]
    fn rmw_attempt(
        &self,
        options: &WriteOptions,
        key: &[u8],
        decide: &mut Decide<'_>,
        attempts: u32,
    ) -> Result<Option<RmwOutcome>> {
        let horizon = self.next_unreserved_sequence();
        debug_assert!(horizon >= 1, "sequence 0 is never handed out");
        self.inserted.wait_for(horizon.saturating_sub(1));
        // Held (a guard, no reference count) until validation: if the super version is still
        // this one then, no buffer was sealed or flushed in between.
        let read_super_version = self.super_version.load();
        let read = self.latest_version_hinted(&read_super_version, key)?;
        // Tests: a write between the read and the reservation.
        self.race_point("rmw: read");
        let read_version = read.found.as_ref().map(|(version, _, _)| *version);
        let current = read
            .found
            .as_ref()
            .and_then(|(_, value, expiry)| value.as_deref().map(|value| (value, *expiry)));
        let update = decide(current);
        let Some((batch, new_value, stored)) = planned_write(key, update)? else {
            // The read is of the newest version, which may belong to a write still in
            // flight: make it visible before reporting it, or a get that starts after this
            // call returns could miss a value this call saw. With `sync`, also durable: the
            // caller acts on what it was told is there.
            if let Some(version) = read_version {
                self.wait_visible(version)?;
                if options.sync {
                    self.sync_wal_through(version)?;
                }
            }
            let current = read.found.and_then(|(_, value, _)| value);
            return Ok(Some((current, None)));
        };
        let payload_bytes = batch.size_bytes();
        let reservation = self.reserve(1, payload_bytes)?;
        let sequence = reservation.first;
        debug_assert!(
            sequence >= horizon,
            "a sequence below the horizon was handed out"
        );
        // Tests: a write between the reservation and the validation.
        self.race_point("rmw: reserved");
        let validation =
            self.validate(key, horizon, sequence, attempts, &read_super_version, &read);
        if let Validation::Valid = validation {
            let entry = match (&stored, &new_value) {
                (Some(stored), _) => (ValueKind::PutWithExpiry, stored.as_slice()),
                (None, Some(value)) => (ValueKind::Put, value.as_slice()),
                (None, None) => (ValueKind::Delete, &[][..]),
            };
            self.commit(options, &reservation, &read, key, batch, entry)?;
            return Ok(Some((new_value, Some(sequence))));
        }
        // The sequence is spent on a void record so the log and the watermark stay gap-free
        // (invariant 1).
        let void = crate::batch::void_record(sequence, payload_bytes);
        // SAFETY: the reservation is this attempt's own and unpublished (the valid branch
        // returned above); a void record of `payload_bytes` is exactly the size reserved.
        unsafe { reservation.segment.publish(reservation.offset, &void) };
        self.finish_write(
            &reservation,
            &WriteOptions::default(),
            sequence,
            payload_bytes,
        )?;
        match validation {
            Validation::Failed(error) => return Err(error),
            Validation::Busy => Counters::add(&self.counters.read_modify_write_busy, 1),
            _ => Counters::add(&self.counters.read_modify_write_conflicts, 1),
        }
        Ok(None)
    }

    /// Step 4: whether the version read is still the newest below `sequence` (invariant 2).
    fn validate(
        &self,
        key: &[u8],
        horizon: SequenceNumber,
        sequence: SequenceNumber,
        attempts: u32,
        read_super_version: &Arc<super::SuperVersion>,
        read: &HintedRead<'_>,
    ) -> Validation {
        if sequence == horizon {
            return Validation::Valid;
        }
        let lower_done = self
            .inserted
            .wait_for_spinning(sequence - 1, RMW_SPIN_ROUNDS);
        if !lower_done && attempts <= RMW_PATIENT_ATTEMPTS {
            return Validation::Busy;
        }
        self.inserted.wait_for(sequence - 1);
        debug_assert!(self.inserted.get() >= sequence - 1);
        let read_version = read.found.as_ref().map(|(version, _, _)| *version);
        let now = self.super_version.load();
        if Arc::ptr_eq(&now, read_super_version) {
            // Same buffers and tables as the read: a version the read missed has a sequence
            // in [horizon, sequence) and so sits in one of these buffers (nothing was
            // flushed), so checking memory is enough — no table probe.
            let newest = now
                .memory
                .get(key, sequence - 1)
                .map(|(version, _, _)| version);
            let unchanged = match newest {
                Some(version) => Some(version) == read_version,
                None => !read.in_memory,
            };
            return if unchanged && !self.dropped_since_read(key, sequence) {
                Validation::Valid
            } else {
                Validation::Conflict
            };
        }
        match self.get_version(key, Some(sequence - 1)) {
            Ok(found) if found.as_ref().map(|(version, _, _)| *version) == read_version => {
                if self.dropped_since_read(key, sequence) {
                    Validation::Conflict
                } else {
                    Validation::Valid
                }
            }
            Ok(_) => Validation::Conflict,
            Err(error) => Validation::Failed(error),
        }
    }

    /// Whether a Membuffer update at or above `sequence` may have dropped a version of `key`
    /// below it (`membuffer::gate`, step 1): a put that landed after the read and was
    /// replaced in place before the lookup above, which then finds the version the attempt
    /// read and would call it unchanged. Called after that lookup: the drop raised the mark
    /// before it rewrote the record the lookup passed over. False alarms (another key's drop
    /// in the bucket) cost a retry.
    fn dropped_since_read(&self, key: &[u8], sequence: SequenceNumber) -> bool {
        self.read_may_be_stale(key, sequence - 1)
    }

    /// Step 5 of a valid attempt: log and insert the new version (hinted: the hint is used
    /// only if the sequence landed in the buffer that was read — the insert checks).
    // Options are taken by reference as `write` takes them (they may grow past Copy).
    #[allow(clippy::trivially_copy_pass_by_ref)]
    fn commit(
        &self,
        options: &WriteOptions,
        reservation: &Reservation,
        read: &HintedRead<'_>,
        key: &[u8],
        mut batch: WriteBatch,
        (kind, value): (ValueKind, &[u8]),
    ) -> Result<()> {
        let sequence = reservation.first;
        let payload_bytes = batch.size_bytes();
        let record = batch.encode(sequence);
        // SAFETY: the reservation is this attempt's own, made for `payload_bytes` (this
        // batch's size); `commit` runs once per reservation, so it is published once.
        unsafe { reservation.segment.publish(reservation.offset, record) };
        reservation
            .buffer()
            .insert_hinted(&read.hint, key, sequence, kind, value);
        self.finish_write(reservation, options, sequence, payload_bytes)?;
        Counters::add(&self.counters.read_modify_writes, 1);
        Ok(())
    }

    /// Stores `value` only if `key` is absent; returns whether it stored it.
    pub(super) fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        let mut stored = false;
        self.read_modify_write(&WriteOptions::default(), key, &mut |current| {
            stored = current.is_none();
            if stored {
                Update::Put(value.to_vec())
            } else {
                Update::Keep
            }
        })?;
        Ok(stored)
    }

    /// Replaces the value of `key` with `new` only if it currently equals `expected`.
    pub(super) fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        let mut swapped = false;
        self.read_modify_write(&WriteOptions::default(), key, &mut |current| {
            swapped = current.map(|(value, _)| value) == expected;
            match (swapped, new) {
                (false, _) => Update::Keep,
                (true, Some(value)) => Update::Put(value.to_vec()),
                (true, None) => Update::Delete,
            }
        })?;
        Ok(swapped)
    }

    /// Adds `delta` to the decimal integer stored at `key` (absent: 0).
    pub(super) fn increment(&self, key: &[u8], delta: i64) -> Result<i64> {
        // The decision may run several times (optimistic retries); the last run's outcome
        // is the one that took effect.
        let mut outcome: std::result::Result<i64, String> = Ok(0);
        let mut decide = |current: Option<(&[u8], Option<u64>)>| {
            outcome = parse_counter(current.map(|(value, _)| value)).and_then(|value| {
                value
                    .checked_add(delta)
                    .ok_or_else(|| "increment overflows a 64-bit integer".to_string())
            });
            // A counter keeps its expiry, as Redis's INCR keeps a key's TTL.
            let expiry = current.and_then(|(_, expiry)| expiry);
            match (&outcome, expiry) {
                (Ok(value), None) => Update::Put(value.to_string().into_bytes()),
                (Ok(value), Some(expiry)) => Update::PutWithExpiry(
                    value.to_string().into_bytes(),
                    crate::expiry::from_millis(expiry),
                ),
                (Err(_), _) => Update::Keep,
            }
        };
        self.read_modify_write(&WriteOptions::default(), key, &mut decide)?;
        outcome.map_err(Error::InvalidArgument)
    }
}

/// What a decision writes: the batch, the value now stored (None: deleted) and, for a value
/// with an expiry, its stored form (`expiry | value`); None for `Update::Keep`.
type PlannedWrite = (WriteBatch, Option<Vec<u8>>, Option<Vec<u8>>);

/// The write `update` asks for, checked against the value limit.
fn planned_write(key: &[u8], update: Update) -> Result<Option<PlannedWrite>> {
    Ok(Some(match update {
        Update::Keep => return Ok(None),
        Update::Put(value) => {
            check_value(&value)?;
            (WriteBatch::single_put(key, &value), Some(value), None)
        }
        Update::PutWithExpiry(value, expiry) => {
            check_value(&value)?;
            let mut batch = WriteBatch::new();
            batch.put_with_expiry(key, &value, expiry);
            let stored = crate::expiry::encode(crate::expiry::to_millis(expiry), &value);
            (batch, Some(value), Some(stored))
        }
        Update::Delete => (WriteBatch::single_delete(key), None, None),
    }))
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
