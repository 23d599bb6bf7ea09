//! `WriteBuffer`: one memtable with the WAL that logs it, the bookkeeping of its switch, and
//! (once sealed and quiet) its key-ordered gathering and Bloom filter. Also `ReplayBuffer`,
//! the WAL-less memtable recovery replays into.
//!
//! Thread-safety contract: a `WriteBuffer` is shared (`Arc`) by writers, readers and the
//! flush thread. Inserts and reads are lock-free and may run concurrently (the memtable's
//! contract); the `OnceLock`s are set at most once, by the one thread that seals the buffer
//! (`seal`) or the flush thread (`gather`, `build_filter`).
//!
//! Invariants:
//! 1. `last_sequence` is set exactly when the log is sealed, to the last sequence the log
//!    handed out: every sequence ever inserted here lies in `[log.first_sequence(),
//!    last_sequence]`.
//! 2. The gathering (`sorted`) and the filter are built only once the buffer is quiet (the
//!    caller waited until `last_sequence` is inserted); the gathering holds every entry, and
//!    the filter every user key.
//! 3. `switch_claimed` goes from false to true once: exactly one thread seals the buffer.

use crate::batch::WriteBatch;
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::{InsertHint, Memtable, SortedNodes};
use crate::sstable::{BloomFilter, BloomFilterBuilder};
use crate::wal_writer::Log;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// A version as a memory lookup returns it: its sequence, kind and value.
pub type MemoryEntry<'a> = (SequenceNumber, ValueKind, &'a [u8]);

/// Where a hinted read found (or would insert) a key in a buffer: the insert of the next
/// version of that key starts there instead of searching from the head. A hint from another
/// buffer or for another key is ignored by the insert, never trusted.
#[derive(Debug)]
pub struct WriteHint<'a>(InsertHint<'a>);

/// A memtable with the WAL that logs it and the bookkeeping of the writers inside it.
pub struct WriteBuffer {
    memtable: Arc<Memtable>,
    log: Arc<Log>,
    /// Set by the one writer that seals this buffer when it is full.
    switch_claimed: AtomicBool,
    /// The last sequence this buffer can hold, set when it is sealed.
    last_sequence: OnceLock<SequenceNumber>,
    /// Bloom filter over its user keys, built once it is sealed and quiet (sLSM's runs).
    filter: OnceLock<BloomFilter>,
    /// Its nodes in key order, gathered once it is sealed and quiet: the filter and then the
    /// flush read them without chasing level-0 pointers.
    sorted: OnceLock<Arc<SortedNodes>>,
}

impl std::fmt::Debug for WriteBuffer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("WriteBuffer")
            .field("wal", &self.log.number())
            .field("entries", &self.memtable.len())
            .finish()
    }
}

/// A memtable sized for `capacity_bytes` of writes: its arena chunks and key index scale with
/// it, so tiny buffers (tests) do not each hold a megabyte and big ones do not saturate.
fn sized_memtable(capacity_bytes: usize) -> Memtable {
    Memtable::with_capacity(capacity_bytes)
}

impl WriteBuffer {
    /// An empty buffer for `capacity_bytes` of writes, logged by `log`.
    pub fn new(capacity_bytes: usize, log: Log) -> Self {
        WriteBuffer {
            memtable: Arc::new(sized_memtable(capacity_bytes)),
            log: Arc::new(log),
            switch_claimed: AtomicBool::new(false),
            last_sequence: OnceLock::new(),
            filter: OnceLock::new(),
            sorted: OnceLock::new(),
        }
    }

    /// The WAL of this buffer.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// The number of this buffer's WAL.
    pub fn wal_number(&self) -> u64 {
        self.log.number()
    }

    /// Entries inserted so far.
    pub fn len(&self) -> usize {
        self.memtable.len()
    }

    /// Whether nothing was inserted yet.
    pub fn is_empty(&self) -> bool {
        self.memtable.is_empty()
    }

    /// Bytes the buffer occupies (arena and index).
    pub fn memory_bytes(&self) -> usize {
        self.memtable.memory_bytes()
    }

    /// Whether the buffer holds `limit_bytes` or more and should be sealed.
    pub fn is_full(&self, limit_bytes: usize) -> bool {
        self.memtable.approximate_memory_bytes() >= limit_bytes
    }

    /// Claims the right to seal this buffer; true for exactly one caller (invariant 3).
    pub fn claim_switch(&self) -> bool {
        self.switch_claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Seals the log (no sequence is reserved here afterwards) and records the last
    /// sequence (invariant 1); returns the first sequence of the next buffer.
    pub fn seal(&self) -> SequenceNumber {
        let next_sequence = self.log.seal();
        debug_assert!(next_sequence >= self.log.first_sequence());
        let _ = self.last_sequence.set(next_sequence - 1);
        next_sequence
    }

    /// The last sequence of a sealed buffer (None while it is active).
    pub fn last_sequence(&self) -> Option<SequenceNumber> {
        self.last_sequence.get().copied()
    }

    /// Inserts the entries of `batch` at sequences `first..`; returns the numbers of puts and
    /// deletes. On a malformed entry it stops and reports it (unreachable after
    /// `WriteBatch::validate`).
    pub fn insert_batch(
        &self,
        batch: &WriteBatch,
        first: SequenceNumber,
    ) -> std::result::Result<(u64, u64), String> {
        let (mut puts, mut deletes) = (0, 0);
        for (sequence, entry) in (first..).zip(batch.iter()) {
            let (kind, key, value) = entry?;
            self.memtable.insert(key, sequence, kind, value);
            match kind {
                ValueKind::Put | ValueKind::PutWithExpiry => puts += 1,
                ValueKind::Delete => deletes += 1,
            }
        }
        Ok((puts, deletes))
    }

    /// Inserts one version where `hint` says (see [`WriteHint`]).
    pub fn insert_hinted(
        &self,
        hint: &WriteHint<'_>,
        key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) {
        self.memtable
            .insert_hinted(Some(&hint.0), key, sequence, kind, value);
    }

    /// The newest version of `key` at or below `sequence`; the filter (if built) first.
    pub fn get(&self, key: &[u8], sequence: SequenceNumber) -> Option<MemoryEntry<'_>> {
        if let Some(filter) = self.filter.get() {
            if !filter.may_contain(key) {
                return None;
            }
        }
        self.memtable.get_entry(key, sequence)
    }

    /// The newest version of `key` (any sequence) and a hint for inserting the next one.
    pub fn get_hinted<'a>(&'a self, key: &'a [u8]) -> (Option<MemoryEntry<'a>>, WriteHint<'a>) {
        let (entry, hint) = self.memtable.get_entry_hinted(key);
        (entry, WriteHint(hint))
    }

    /// A cursor over every version, kept valid by the memtable it holds.
    pub fn iter(&self) -> impl InternalIterator + 'static {
        self.memtable.iter()
    }

    /// The flush's input: every version in key order, from the gathering (invariant 2).
    /// Precondition: the buffer is quiet.
    pub fn gather_for_flush(&self) -> impl InternalIterator + 'static {
        let sorted = self.sorted_nodes();
        if cfg!(feature = "invariants") {
            self.check_sequences(&mut sorted.iter());
        }
        sorted.iter()
    }

    /// Invariant 1: every entry's sequence lies in the sealed log's range.
    fn check_sequences(&self, entries: &mut dyn InternalIterator) {
        let first = self.log.first_sequence();
        let last = self.last_sequence();
        assert!(
            last.is_some(),
            "a buffer gathered for flush was never sealed"
        );
        let last = last.unwrap_or(SequenceNumber::MAX);
        entries.seek_to_first();
        while entries.valid() {
            let sequence = crate::key::parse_internal_key(entries.key()).map(|key| key.sequence);
            assert!(
                sequence.is_some_and(|sequence| (first..=last).contains(&sequence)),
                "entry at sequence {sequence:?} outside its buffer's [{first}, {last}]"
            );
            entries.next();
        }
    }

    /// The nodes in key order. A gathering that does not hold every entry is replaced (it
    /// cannot happen, but a flush that trusted one would lose writes).
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

    /// Whether the Bloom filter is built.
    pub fn has_filter(&self) -> bool {
        self.filter.get().is_some()
    }

    /// Builds the Bloom filter over the user keys. Precondition: the buffer is quiet.
    pub fn build_filter(&self, bits_per_key: usize) {
        let mut builder = BloomFilterBuilder::new(bits_per_key);
        let mut previous: Vec<u8> = Vec::new();
        let mut first = true;
        let mut added = 0usize;
        self.sorted_nodes().for_each_key(|key| {
            let user = crate::key::user_key(key);
            // Versions of a key are adjacent: add each user key once.
            if first || previous.as_slice() != user {
                builder.add_key(user);
                previous.clear();
                previous.extend_from_slice(user);
                first = false;
                added += 1;
            }
        });
        debug_assert!(added <= self.memtable.len());
        if let Ok(filter) = BloomFilter::decode(builder.finish()) {
            let _ = self.filter.set(filter);
        }
    }
}

/// The memtable recovery replays WALs into before writing it to a level-0 table: no log, no
/// readers, one thread.
#[derive(Debug)]
pub struct ReplayBuffer {
    memtable: Arc<Memtable>,
}

impl ReplayBuffer {
    /// An empty buffer sized as the write buffers the WALs were written from.
    pub fn new(capacity_bytes: usize) -> Self {
        ReplayBuffer {
            memtable: Arc::new(sized_memtable(capacity_bytes)),
        }
    }

    /// Inserts one replayed version.
    pub fn insert(&self, key: &[u8], sequence: SequenceNumber, kind: ValueKind, value: &[u8]) {
        self.memtable.insert(key, sequence, kind, value);
    }

    /// Whether nothing was replayed.
    pub fn is_empty(&self) -> bool {
        self.memtable.is_empty()
    }

    /// A cursor over every replayed version in key order.
    pub fn iter(&self) -> impl InternalIterator + 'static {
        self.memtable.iter()
    }
}
