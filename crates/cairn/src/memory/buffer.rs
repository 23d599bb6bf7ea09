//! `WriteBuffer`: one two-level memory component — an optional `Membuffer` (hash tables of
//! recent versions) over a memtable (the skiplist) — with the WAL that logs it, the
//! bookkeeping of its switch, and (once sealed and quiet) its key-ordered gathering and Bloom
//! filter. Also `ReplayBuffer`, the WAL-less memtable recovery replays into.
//!
//! Two levels: an insert goes to the Membuffer when it takes it, else to the memtable; a read
//! asks the Membuffer, then the memtable, and keeps the newer version; an iterator drains the
//! Membuffer into the memtable first; the gathering for flush drains it too (the buffer is
//! quiet then, so the memtable ends up with every version below the buffer's last sequence).
//!
//! Thread-safety contract: a `WriteBuffer` is shared (`Arc`) by writers, readers and the
//! flush thread. Inserts and reads are lock-free and may run concurrently (the memtable's and
//! the Membuffer's contracts; a draining writer or scan holds one partition's drain lock);
//! the `OnceLock`s are set at most once, by the one thread that seals the buffer (`seal`) or
//! the flush thread (`gather`, `build_filter`).
//!
//! Invariants:
//! 1. `last_sequence` is set exactly when the log is sealed, to the last sequence the log
//!    handed out: every sequence ever inserted here lies in `[log.first_sequence(),
//!    last_sequence]`.
//! 2. The gathering (`sorted`) and the filter are built only once the buffer is quiet (the
//!    caller waited until `last_sequence` is inserted); the gathering holds every entry, and
//!    the filter every user key.
//! 3. `switch_claimed` goes from false to true once: exactly one thread seals the buffer.
//! 4. Every version inserted is in the Membuffer or the memtable (never both); the
//!    gathering is built only after the Membuffer was drained, so it holds every version.

use super::scan::{DrainingIterator, Levels};
use crate::batch::WriteBatch;
use crate::iter::InternalIterator;
use crate::key::{SequenceNumber, ValueKind, SEQUENCE_MAX};
use crate::membuffer::{DeferredDrain, DetachedHold, Membuffer, MembufferConfig};
use crate::memtable::{InsertHint, Memtable, SortedNodes};
use crate::sstable::{BloomFilter, BloomFilterBuilder};
use crate::wal_writer::Log;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// A version as a memory lookup returns it: its sequence, kind and value (borrowed from the
/// memtable, or copied out of the Membuffer, whose tables are freed while readers run).
pub type MemoryEntry<'a> = (SequenceNumber, ValueKind, Cow<'a, [u8]>);

/// Where a hinted read found (or would insert) a key in a buffer: the insert of the next
/// version of that key starts there instead of searching from the head. A hint from another
/// buffer or for another key is ignored by the insert, never trusted.
#[derive(Debug)]
pub struct WriteHint<'a>(InsertHint<'a>);

/// What `WriteBuffer::insert_batch` did: its puts and deletes, and the Membuffer drains it
/// left to run (each when dropped: the write path drops this after publishing the write).
#[derive(Debug)]
pub struct Inserted<'a> {
    /// Puts inserted.
    pub puts: u64,
    /// Deletes inserted.
    pub deletes: u64,
    drains: Vec<DeferredDrain<'a>>,
}

/// A memtable with the WAL that logs it and the bookkeeping of the writers inside it.
pub struct WriteBuffer {
    memtable: Arc<Memtable>,
    /// The upper level, if on (see the module documentation).
    membuffer: Option<Arc<Membuffer>>,
    /// With a Membuffer, both levels behind one `Arc`, which each scan's cursor clones
    /// (`scan::Levels`: one reference count per scan instead of two). Writes and reads keep
    /// using `membuffer` directly, one pointer hop shorter.
    levels: Option<Arc<Levels>>,
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
    /// An empty buffer for `capacity_bytes` of writes (the Membuffer's budget included),
    /// logged by `log`, with a Membuffer if `membuffer` is given.
    pub(crate) fn with_membuffer(
        capacity_bytes: usize,
        log: Log,
        membuffer: Option<MembufferConfig>,
    ) -> Self {
        // Sized for the whole buffer: the Membuffer counts only what it holds (`is_full`), so
        // with it nearly empty the memtable may fill the buffer.
        let memtable = Arc::new(sized_memtable(capacity_bytes));
        let membuffer = membuffer.map(|config| Membuffer::start(config, &memtable));
        WriteBuffer {
            levels: membuffer
                .as_ref()
                .map(|membuffer| Levels::new(&memtable, membuffer)),
            membuffer,
            memtable,
            log: Arc::new(log),
            switch_claimed: AtomicBool::new(false),
            last_sequence: OnceLock::new(),
            filter: OnceLock::new(),
            sorted: OnceLock::new(),
        }
    }

    /// An empty buffer sized and shaped by `options` (Membuffer on or off), logged by `log`.
    pub(crate) fn for_options(
        options: &crate::options::Options,
        log: Log,
        counters: &Arc<crate::stats::MembufferCounters>,
        gate: Option<&Arc<crate::membuffer::OverwriteGate>>,
    ) -> Self {
        let capacity_bytes = options.write_buffer_size_bytes;
        let config = options.membuffer_enabled.then(|| {
            let budget_bytes = capacity_bytes / 100 * options.membuffer_percent;
            MembufferConfig {
                budget_bytes,
                // Each partition's table gets at least 4 KiB.
                partitions: options.membuffer_partitions.min(budget_bytes / 4096).max(1),
                // Enough to place the boundaries; a small buffer samples fewer keys so
                // its Membuffer takes writes too.
                sample_keys: (budget_bytes / 4096).clamp(16, 1024),
                #[cfg(feature = "bench-variants")]
                multi_insert: !options.membuffer_simple_insert,
                #[cfg(not(feature = "bench-variants"))]
                multi_insert: true,
                drainers: options.membuffer_drainers,
                counters: Arc::clone(counters),
                gate: gate.cloned(),
                bypass_scans_per_write: options.membuffer_bypass_scans_per_write,
                #[cfg(feature = "testing")]
                bypass_at_once: options.membuffer_bypass_at_once,
                #[cfg(not(feature = "testing"))]
                bypass_at_once: false,
                #[cfg(feature = "testing")]
                scans_always_copy: options.membuffer_scans_always_copy,
                #[cfg(not(feature = "testing"))]
                scans_always_copy: false,
            }
        });
        Self::with_membuffer(capacity_bytes, log, config)
    }

    /// The WAL of this buffer.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// The number of this buffer's WAL.
    pub fn wal_number(&self) -> u64 {
        self.log.number()
    }

    /// Entries inserted so far (both levels).
    pub fn len(&self) -> usize {
        self.memtable.len() + self.undrained()
    }

    /// Versions still in the Membuffer.
    pub fn undrained(&self) -> usize {
        self.membuffer
            .as_ref()
            .map_or(0, |membuffer| membuffer.undrained())
    }

    /// Whether nothing was inserted yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the buffer occupies (memtable arena, and the Membuffer's tables not yet freed:
    /// what they hold, not the Membuffer's budget).
    pub fn memory_bytes(&self) -> usize {
        self.memtable.memory_bytes() + self.membuffer_bytes()
    }

    fn membuffer_bytes(&self) -> usize {
        self.membuffer
            .as_ref()
            .map_or(0, |membuffer| membuffer.memory_bytes())
    }

    /// Whether the buffer holds `limit_bytes` or more of versions and should be sealed: the
    /// memtable's arena plus the versions the Membuffer holds (not its budget, so a
    /// near-empty Membuffer leaves the memtable the rest of the limit; not its slot arrays,
    /// as not the memtable's key index, so a flush carries the same data either way). Also
    /// when its WAL has grown past twice the limit: updates the Membuffer makes in place,
    /// dropping the old versions, grow neither count, and without this bound a hot set of
    /// keys would keep one buffer (and its one WAL, which recovery replays whole) forever.
    pub fn is_full(&self, limit_bytes: usize) -> bool {
        let membuffer = self
            .membuffer
            .as_ref()
            .map_or(0, |membuffer| membuffer.version_bytes());
        self.memtable.approximate_memory_bytes() + membuffer >= limit_bytes
            || self.log.rolled_bytes() >= 2 * limit_bytes as u64
    }

    /// Moves every Membuffer version into the memtable (scans; the flush's gathering).
    fn drain(&self) {
        if let Some(membuffer) = &self.membuffer {
            membuffer.drain_all(&self.memtable);
        }
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
        if let Some(membuffer) = &self.membuffer {
            // Nothing more comes in: the flush's gathering drains what is left.
            membuffer.stop();
        }
        debug_assert!(next_sequence >= self.log.first_sequence());
        let _ = self.last_sequence.set(next_sequence - 1);
        next_sequence
    }

    /// The last sequence of a sealed buffer (None while it is active).
    pub fn last_sequence(&self) -> Option<SequenceNumber> {
        self.last_sequence.get().copied()
    }

    /// Hints the processor to fetch what inserting `batch`'s first entry into the Membuffer
    /// reads first (see `Membuffer::prefetch`); a no-op without a Membuffer.
    pub fn prefetch(&self, batch: &WriteBatch) {
        // Without a Membuffer the batch is not even decoded.
        if let Some(membuffer) = &self.membuffer {
            if let Some(Ok((_, key, _))) = batch.iter().next() {
                membuffer.prefetch(key);
            }
        }
    }

    /// Inserts the entries of `batch` at sequences `first..`; returns the numbers of puts and
    /// deletes, and the drains a full Membuffer partition left to run once the write is
    /// published (`Membuffer::insert_deferring`; they run when the result drops). On a
    /// malformed entry it stops and reports it (unreachable after `WriteBatch::validate`).
    pub fn insert_batch(
        &self,
        batch: &WriteBatch,
        first: SequenceNumber,
    ) -> std::result::Result<Inserted<'_>, String> {
        let mut inserted = Inserted {
            puts: 0,
            deletes: 0,
            drains: Vec::new(),
        };
        for (sequence, entry) in (first..).zip(batch.iter()) {
            let (kind, key, value) = entry?;
            let taken = self.membuffer.as_ref().is_some_and(|membuffer| {
                let mut deferred = None;
                let taken = membuffer.insert_deferring(
                    &self.memtable,
                    key,
                    sequence,
                    kind,
                    value,
                    &mut deferred,
                );
                inserted.drains.extend(deferred);
                taken
            });
            if !taken {
                self.memtable.insert(key, sequence, kind, value);
            }
            match kind {
                ValueKind::Put | ValueKind::PutWithExpiry => inserted.puts += 1,
                ValueKind::Delete => inserted.deletes += 1,
            }
        }
        Ok(inserted)
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
        // The Membuffer first: a version drained meanwhile is in the memtable by then. Once
        // gathered the buffer is quiet and drained (invariant 4): the memtable holds it all.
        let membuffer = self
            .membuffer
            .as_ref()
            .filter(|_| self.sorted.get().is_none());
        if membuffer.is_some() {
            // The memtable's index slot is fetched while the Membuffer's filter word is: two
            // misses overlapped instead of one after the other (measured: the filter load was
            // three quarters of `Table::get`, itself 3.8 % of a readwhilewriting's CPU).
            self.memtable.prefetch_key(key);
        }
        let upper = membuffer.and_then(|membuffer| membuffer.get(key, sequence));
        newer(upper, self.memtable.get_entry(key, sequence))
    }

    /// The newest version of `key` (any sequence) and a hint for inserting the next one.
    pub fn get_hinted<'a>(&'a self, key: &'a [u8]) -> (Option<MemoryEntry<'a>>, WriteHint<'a>) {
        let upper = self
            .membuffer
            .as_ref()
            .and_then(|membuffer| membuffer.get(key, SEQUENCE_MAX));
        let (entry, hint) = self.memtable.get_entry_hinted(key);
        (newer(upper, entry), WriteHint(hint))
    }

    /// A cursor over every version, kept valid by the memtable it holds. The Membuffer is
    /// drained first, so the cursor sees every version whose insert completed before the call.
    pub fn iter(&self) -> impl InternalIterator + 'static {
        self.drain();
        self.memtable.iter()
    }

    /// A scan's cursor over every version, bounded above by user key `upper`: with a
    /// Membuffer, each partition is drained just before the cursor enters its range
    /// (`scan::DrainingIterator`), which keeps `hold` until it has drained them all.
    /// Precondition: the scan's read point was taken before this call, and `hold` keeps every
    /// version it sees (`membuffer::gate`, step 2).
    pub fn scan_iter(
        &self,
        upper: Option<&[u8]>,
        hold: Option<DetachedHold>,
    ) -> Box<dyn InternalIterator> {
        let levels = self.levels.as_ref().filter(|_| self.sorted.get().is_none());
        if let Some(levels) = levels {
            let membuffer = levels.membuffer();
            if membuffer.is_bypassed() {
                // It holds nothing and no update reaches it again: the memtable alone, and
                // the hold ends here (`membuffer::bypass` invariant 2).
                if let Some(hold) = hold {
                    super::scan::release(membuffer, hold);
                }
                return Box::new(self.memtable.iter());
            }
            if let Some(marks) = membuffer.scan_marks() {
                membuffer.count_scan();
                return Box::new(DrainingIterator::new(
                    Arc::clone(levels),
                    marks,
                    upper,
                    hold,
                ));
            }
        }
        let iter = self.iter();
        // Drained now: the hold has nothing left to keep.
        if let (Some(hold), Some(membuffer)) = (hold, &self.membuffer) {
            super::scan::release(membuffer, hold);
        }
        Box::new(iter)
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
        if self.sorted.get().is_none() {
            // Invariant 4: the buffer is quiet, so after this the memtable holds everything.
            self.drain();
        }
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

/// The newer of the two levels' answers for one key: the Membuffer's (copied) and the
/// memtable's (borrowed).
fn newer(
    upper: Option<crate::membuffer::Entry>,
    lower: Option<(SequenceNumber, ValueKind, &[u8])>,
) -> Option<MemoryEntry<'_>> {
    match (upper, lower) {
        (Some(upper), Some(lower)) if lower.0 > upper.0 => {
            Some((lower.0, lower.1, Cow::Borrowed(lower.2)))
        }
        (Some(upper), _) => Some((upper.0, upper.1, Cow::Owned(upper.2))),
        (None, lower) => {
            lower.map(|(sequence, kind, value)| (sequence, kind, Cow::Borrowed(value)))
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
