//! One generation of a Membuffer partition: a bounded open-addressing hash table from a key
//! to one record holding its newest version, updated in place, with its own arena.
//!
//! Why this and not the project's `hashindex` + `logmem` + `epoch` (as `MemStore` uses): a
//! Membuffer table lives for one fill of one partition and is then drained whole, so it needs
//! no deletes, no resizing, no cleaning and no reclamation of single entries — only an
//! insert-only array of slots and a bump arena. One slot is one pointer, claimed by one
//! compare-and-swap; a probe touches one cache line in the common case (a slot carries 16 bits
//! of its key's hash above the record's address, so a probe passes other keys' slots without
//! loading their records — measured, a point read that missed the table loaded ~1.5 records
//! of other keys before); an update of a key
//! already present rewrites its record under the record's seqlock (after moving the old
//! version to the memtable), so a hot key takes no new table memory. The `MemStore` index's versioned
//! buckets and log segments pay for deletes, cleaning and resizing this table never does.
//!
//! Thread-safety contract: any number of writers (between `enter` and `exit`) and readers run
//! at once; writers of one key take turns on its record's lock (held for one memtable insert
//! and a copy), readers retry a copy that overlapped a rewrite. `seal` (the drain lock
//! holder) closes the table to new writers and `wait_for_writers` waits for those inside to
//! leave; from then on its contents never change and `records` may gather them. Readers
//! never write shared memory.
//!
//! Invariants:
//! 1. A slot goes from null to a record of one key, and is afterwards replaced only by a
//!    record of the same key (under the old one's lock); a key has one slot. A record's
//!    sequence only grows, and a version leaves a record (rewrite or replacement) only after
//!    `move_old` disposed of it — put it in the memtable, or dropped it after the Membuffer's
//!    `gate` recorded the drop — so a reader that finds the record above its sequence finds
//!    the version it wants in the memtable, or learns from the gate that it must re-read.
//! 2. After `seal` and then `wait_for_writers` return, no writer is inside and none will
//!    enter: `records` sees every version still in the table, and none changes.
//! 3. `record_count` counts keys (records) whose insert completed (incremented before `exit`).
//! 4. A non-null slot holds the record's address tagged with its key's hash (`Slot`,
//!    `crate::tagged`). A record whose address does not fit is never published (its
//!    version goes to the memtable).
//! 5. A key's bits are set in `filter` before its first record is published (`filter`
//!    invariant 1); a replacement record of the key needs no new bits.

use super::filter::Filter;
use super::record::{Record, Version};
use super::slots::SlotArray;
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::arena::Arena;
use crate::sync::CachePadded;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Slots probed (linearly) before a key counts as not fitting.
const PROBE_LIMIT: usize = 32;

/// The writers word's bit set once the table is sealed; the rest counts writers inside.
const SEALED: u64 = 1 << 63;

/// How full, in quarters, a table is when drainer threads take it. Why not half, as before:
/// a drain moves every version out, so a hot key drained early comes back as a new key
/// (a fresh record, then a skiplist insert at the next drain) instead of an in-place
/// update. Measured with one drainer on 2 cores, from a compacted tree (`flodb_scan_write`,
/// 95 % updates and 5 % scans, paired with the Membuffer off, 2 threads): 0.94 at half,
/// 0.97-1.00 at three quarters in two runs; the Fig. 17 fill of `FloDB` level (0.98-1.07 in
/// alternating pairs). Writers still find room: a table is full only at four quarters, where
/// they drain it themselves as before.
const DRAIN_WANTED_QUARTERS: usize = 3;

/// The tagged record pointers a slot holds (invariant 4, `crate::tagged`): address and hash
/// tag in one word, published by one compare-and-swap, so a probe learns from the slot alone
/// whether the record may be its key's. The pointer keeps its provenance (`map_addr`).
struct Slot;

// Slot words are `crate::tagged` words: 64-bit addresses.
const _: () = assert!(usize::BITS == u64::BITS);

impl Slot {
    /// `record` tagged with its key's `hash`, or None if its address does not fit.
    fn tagged(record: *mut Record, hash: u64) -> Option<*mut Record> {
        let word = crate::tagged::pack(record.addr() as u64, hash)?;
        // `usize` is 64 bits (asserted above): the fold loses nothing.
        #[allow(clippy::cast_possible_truncation)]
        Some(record.with_addr(word as usize))
    }

    /// The record a non-null slot value points to.
    fn record(slot_value: *mut Record) -> *mut Record {
        // As in `tagged`.
        #[allow(clippy::cast_possible_truncation)]
        slot_value.map_addr(|word| crate::tagged::address(word as u64) as usize)
    }

    /// Whether a non-null slot value may hold the record of a key with `hash`.
    fn may_match(slot_value: *mut Record, hash: u64) -> bool {
        crate::tagged::matches(slot_value.addr() as u64, hash)
    }
}

/// What an update does with the version it replaces (moves it to the memtable, or drops it
/// if the gate allows): key, sequence, kind, value.
pub(super) type MoveOld<'a> = dyn FnMut(&[u8], SequenceNumber, ValueKind, &[u8]) + 'a;

/// What an insert did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Put {
    /// The version is in the table.
    Done,
    /// The table is out of bytes, keys or probe room: the version goes elsewhere.
    Full,
    /// The table holds a newer version of the key: this one goes to the memtable.
    Older,
    /// The version is too large for any table of this size: it goes to the memtable.
    Oversized,
}

/// The counters writers change on every insert (see `Table::words`).
#[derive(Default)]
struct WriterWords {
    /// Keys claimed (a slot taken or about to be), checked against the key limit.
    keys: AtomicUsize,
    /// Keys whose insert completed (invariant 3).
    record_count: AtomicUsize,
    /// The sealed bit and the writers inside (`enter`, `exit`).
    writers: AtomicU64,
}

/// See the module documentation.
pub(super) struct Table {
    arena: Arena,
    slots: SlotArray,
    /// The keys with a record here (invariant 5), so most reads of absent keys skip `slots`.
    filter: Filter,
    byte_limit: usize,
    key_limit: usize,
    /// The words every insert writes, on cache lines of their own: beside the read-mostly
    /// fields above (the slot array's address, the limits) they made every probe of the
    /// other core's last table a cache miss.
    words: CachePadded<WriterWords>,
    /// Set once the table passed `wants_drain` and a drainer was told.
    drain_requested: AtomicBool,
    /// Arena bytes already counted in the Membuffer's version bytes (`account_growth`).
    accounted: AtomicUsize,
    /// The largest record taken (a quarter of the partition's full share, whatever this
    /// table's size): a table shrunk by scans still takes what a full-size one would.
    record_bytes_max: usize,
    /// Set once an insert found the table full: the next table must be larger (`fill`).
    overflowed: AtomicBool,
    /// Its partition's swap count when it was installed (`Membuffer` invariant 6).
    generation: u64,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Table")
            .field("records", &self.len())
            .field("bytes", &self.arena.published_bytes())
            .finish()
    }
}

impl Table {
    /// An empty table for about `byte_limit` bytes of records of about `record_bytes`
    /// bytes each (`sizing::next_record_bytes`: it sets the key limit and the slot array),
    /// taking records of up to `record_bytes_max` bytes, to be installed as its partition's
    /// table number `generation` (its swap count then).
    pub(super) fn new(
        byte_limit: usize,
        record_bytes: usize,
        record_bytes_max: usize,
        generation: u64,
    ) -> Table {
        let record_bytes = record_bytes.max(super::sizing::RECORD_BYTES_MIN);
        let key_limit = (byte_limit / record_bytes).max(4);
        let slot_count = (key_limit * 2).next_power_of_two();
        Table {
            arena: Arena::new((byte_limit / 8).clamp(4096, 1 << 20)),
            slots: SlotArray::new(slot_count),
            filter: Filter::new(slot_count),
            byte_limit,
            key_limit,
            words: CachePadded(WriterWords::default()),
            drain_requested: AtomicBool::new(false),
            accounted: AtomicUsize::new(0),
            record_bytes_max,
            overflowed: AtomicBool::new(false),
            generation,
        }
    }

    /// Its partition's swap count when it was installed.
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes of the slot array and the filter (allocated whole when the table is made).
    pub(super) fn slot_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<usize>() + self.filter.bytes()
    }

    /// Arena bytes grown since the last call that returned non-zero, once they reach a
    /// sixteenth of the table's limit (so the Membuffer's shared count is written a few
    /// times per table fill, not per write); exactly one caller gets each growth.
    /// Precondition: the caller is inside (`enter`).
    pub(super) fn account_growth(&self) -> usize {
        let published = self.arena.published_bytes();
        let accounted = self.accounted.load(Ordering::Relaxed);
        let step = (self.byte_limit / 16).max(4096);
        if published < accounted.saturating_add(step) {
            return 0;
        }
        match self.accounted.compare_exchange(
            accounted,
            published,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => published - accounted,
            Err(_) => 0,
        }
    }

    /// Arena bytes counted in the Membuffer's version bytes for this table
    /// (`account_growth`), to subtract when it is drained. Precondition: sealed, so the count no longer changes
    /// (writers account growth only while inside).
    pub(super) fn accounted_bytes(&self) -> usize {
        self.accounted.load(Ordering::Relaxed)
    }

    /// Arena bytes handed to records, exactly: with `len`, the drained table's mean record
    /// size for the next one (`sizing::next_record_bytes`). Reads every arena lane: once per
    /// drain, not per write.
    pub(super) fn arena_bytes(&self) -> usize {
        self.arena.allocated_bytes()
    }

    /// Whether the table is at least `DRAIN_WANTED_QUARTERS` quarters full (of bytes or
    /// keys): a drainer should take it.
    pub(super) fn wants_drain(&self) -> bool {
        let wanted = |used: usize, limit: usize| {
            used.saturating_mul(4) >= limit.saturating_mul(DRAIN_WANTED_QUARTERS)
        };
        wanted(self.arena.published_bytes(), self.byte_limit)
            || wanted(self.words.keys.load(Ordering::Relaxed), self.key_limit)
    }

    /// True exactly once, for the first caller after the table passed `wants_drain`.
    pub(super) fn take_drain_request(&self) -> bool {
        !self.drain_requested.load(Ordering::Relaxed)
            && self.wants_drain()
            && !self.drain_requested.swap(true, Ordering::Relaxed)
    }

    /// How full the table is: the larger of its share of keys and of bytes.
    pub(super) fn fill(&self) -> super::sizing::Fill {
        if self.overflowed() {
            return super::sizing::Fill { per_mille: 1000 };
        }
        // Reserved keys, as `wants_drain` counts them: a drainer woken by keys then sees the
        // same fill here.
        let keys =
            self.words.keys.load(Ordering::Relaxed).saturating_mul(1000) / self.key_limit.max(1);
        let bytes = self.arena.published_bytes().saturating_mul(1000) / self.byte_limit.max(1);
        super::sizing::Fill {
            per_mille: keys.max(bytes),
        }
    }

    /// Whether an insert found the table full (a drain then grows the next table even if
    /// this one is empty: the record that did not fit may be larger than it).
    pub(super) fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// Marks the table full for `fill`, and answers `Full`.
    fn full(&self) -> Put {
        if !self.overflowed.load(Ordering::Relaxed) {
            self.overflowed.store(true, Ordering::Relaxed);
        }
        Put::Full
    }

    /// Versions inserted (invariant 3).
    pub(super) fn len(&self) -> usize {
        self.words.record_count.load(Ordering::Acquire)
    }

    /// Enters as a writer; false if the table is sealed (the writer goes to the partition's
    /// new table).
    pub(super) fn enter(&self) -> bool {
        if self.words.writers.fetch_add(1, Ordering::SeqCst) & SEALED == 0 {
            return true;
        }
        self.words.writers.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Leaves as a writer.
    pub(super) fn exit(&self) {
        self.words.writers.fetch_sub(1, Ordering::Release);
    }

    /// Seals the table: from now on `enter` fails (invariant 2). Idempotent.
    pub(super) fn seal(&self) {
        self.words.writers.fetch_or(SEALED, Ordering::SeqCst);
    }

    /// Waits until no writer is inside (invariant 2). REQUIRES: the table is sealed, so
    /// none can enter.
    pub(super) fn wait_for_writers(&self) {
        debug_assert!(
            self.words.writers.load(Ordering::SeqCst) & SEALED != 0,
            "waiting for the writers of a table still open to them"
        );
        let mut round = 0;
        while self.words.writers.load(Ordering::Acquire) != SEALED {
            crate::sync::spin_wait(&mut round);
        }
    }

    /// Inserts a version: a new key gets a record; a key already here has its version moved
    /// to the memtable (`move_old`, called under the record's lock) and is then overwritten in
    /// place (invariant 1). Precondition: the caller is inside (`enter`), and `(key,
    /// sequence)` was never inserted anywhere before.
    pub(super) fn insert(
        &self,
        hash: u64,
        key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
        move_old: &mut MoveOld<'_>,
    ) -> Put {
        let bytes = Record::bytes(key, value);
        if bytes > self.record_bytes_max {
            return Put::Oversized;
        }
        // A new key sets its filter bits after the probe: fetch both lines at once.
        self.filter.prefetch(hash);
        let mut fresh: *mut Record = ptr::null_mut();
        for slot in self.probe(hash) {
            let mut head = slot.load(Ordering::Acquire);
            if head.is_null() {
                if fresh.is_null() {
                    if !self.has_room(bytes) {
                        return self.full();
                    }
                    if self.words.keys.fetch_add(1, Ordering::Relaxed) >= self.key_limit {
                        self.words.keys.fetch_sub(1, Ordering::Relaxed);
                        return self.full();
                    }
                    let record = Record::allocate(&self.arena, hash, key, sequence, kind, value);
                    let Some(tagged) = Slot::tagged(record, hash) else {
                        self.words.keys.fetch_sub(1, Ordering::Relaxed);
                        return Put::Oversized;
                    };
                    fresh = tagged;
                    // Invariant 5: the filter knows the key before its record is published.
                    self.filter.insert(hash);
                }
                match slot.compare_exchange(head, fresh, Ordering::Release, Ordering::Acquire) {
                    Ok(_) => return self.inserted(),
                    Err(actual) => head = actual,
                }
            }
            if !Slot::may_match(head, hash) {
                continue;
            }
            // SAFETY: a non-null slot holds a published record of this table (invariants 1
            // and 4).
            let same = unsafe {
                let record = Slot::record(head);
                (*record).hash == hash && Record::key(record) == key
            };
            if same {
                if !fresh.is_null() {
                    // The key we reserved a slot for turned out present.
                    self.words.keys.fetch_sub(1, Ordering::Relaxed);
                }
                return self.update(slot, hash, key, (sequence, kind, value), move_old);
            }
        }
        if !fresh.is_null() {
            self.words.keys.fetch_sub(1, Ordering::Relaxed);
        }
        self.full()
    }

    fn has_room(&self, bytes: usize) -> bool {
        self.arena.published_bytes().saturating_add(bytes) <= self.byte_limit
    }

    /// A new version of the key whose record `slot` holds: under the record's lock, the old
    /// version goes to the memtable, then the new one overwrites it in place, or (a larger
    /// value) a new record replaces it in the slot.
    fn update(
        &self,
        slot: &AtomicPtr<Record>,
        hash: u64,
        key: &[u8],
        (sequence, kind, value): (SequenceNumber, ValueKind, &[u8]),
        move_old: &mut MoveOld<'_>,
    ) -> Put {
        loop {
            let tagged = slot.load(Ordering::Acquire);
            let head = Slot::record(tagged);
            // SAFETY: a published record of this table, alive while the caller is inside.
            unsafe { Record::lock(head) };
            if slot.load(Ordering::Acquire) != tagged {
                // Replaced while we waited: lock the replacement instead.
                // SAFETY: we hold its lock.
                unsafe { Record::unlock(head) };
                continue;
            }
            // SAFETY: we hold the lock: the version cannot change under us.
            let (old_sequence, old_kind, old_value) = unsafe { Record::version_locked(head) };
            if sequence < old_sequence {
                // A newer version got here first: ours is older and goes below it.
                // SAFETY: we hold the lock.
                unsafe { Record::unlock(head) };
                return Put::Older;
            }
            // SAFETY: a live record.
            let replacement = if unsafe { Record::fits(head, value) } {
                ptr::null_mut()
            } else {
                let bytes = Record::bytes(key, value);
                if !self.has_room(bytes) {
                    // SAFETY: we hold the lock.
                    unsafe { Record::unlock(head) };
                    return self.full();
                }
                let record = Record::allocate(&self.arena, hash, key, sequence, kind, value);
                let Some(tagged) = Slot::tagged(record, hash) else {
                    // SAFETY: we hold the lock.
                    unsafe { Record::unlock(head) };
                    return Put::Oversized;
                };
                tagged
            };
            // Invariant 1: the old version reaches the memtable before it leaves the table.
            move_old(key, old_sequence, old_kind, old_value);
            // SAFETY: we hold the lock; a replacement is fully written before it is published.
            unsafe {
                if replacement.is_null() {
                    let fitted = Record::overwrite_locked(head, sequence, kind, value);
                    debug_assert!(fitted, "a value checked to fit did not");
                } else {
                    slot.store(replacement, Ordering::Release);
                }
                Record::unlock(head);
            }
            return Put::Done;
        }
    }

    fn inserted(&self) -> Put {
        self.words.record_count.fetch_add(1, Ordering::Release);
        Put::Done
    }

    /// The slots a key with `hash` may occupy, in probe order.
    fn probe(&self, hash: u64) -> impl Iterator<Item = &AtomicPtr<Record>> {
        let mask = self.slots.len() - 1;
        // The hash is folded to `usize` on purpose: the mask keeps only its low bits.
        #[allow(clippy::cast_possible_truncation)]
        let start = hash as usize;
        (0..PROBE_LIMIT.min(self.slots.len()))
            .filter_map(move |probe| self.slots.get(start.wrapping_add(probe) & mask))
    }

    /// Hints the processor to fetch the lines an insert of `hash` reads first: its first
    /// slot and its filter word.
    pub(super) fn prefetch(&self, hash: u64) {
        if let Some(slot) = self.probe(hash).next() {
            crate::sync::prefetch(slot.as_ptr());
        }
        self.filter.prefetch(hash);
    }

    /// The record of `key`, or null.
    fn find(&self, hash: u64, key: &[u8]) -> *const Record {
        for slot in self.probe(hash) {
            let head = slot.load(Ordering::Acquire);
            if head.is_null() {
                break;
            }
            if !Slot::may_match(head, hash) {
                continue;
            }
            let record = Slot::record(head);
            // SAFETY: a published record of this table (invariant 4).
            if unsafe { (*record).hash == hash && Record::key(record) == key } {
                return record;
            }
        }
        ptr::null()
    }

    /// The version of `key` if it is at or below `sequence`, copied out (a version above
    /// `sequence` means the one the caller wants is in the memtable: invariant 1).
    pub(super) fn get(&self, hash: u64, key: &[u8], sequence: SequenceNumber) -> Option<Version> {
        if !self.filter.may_contain(hash) {
            return None;
        }
        let record = self.find(hash, key);
        if record.is_null() {
            return None;
        }
        // SAFETY: a published record of this table, alive while the caller is pinned. A
        // record's sequence only grows, so one above `sequence` stays above it.
        unsafe {
            if Record::sequence(record) > sequence {
                return None;
            }
            let version = Record::read(record);
            (version.0 <= sequence).then_some(version)
        }
    }

    /// Every record's version as an (internal key, value) pair, copied out while writers may
    /// still insert and rewrite (a scan's private copy of a partition it could not drain).
    /// A record rewritten during the copy yields its old or its new version: by invariant 1
    /// an old version left the record only after it reached the memtable (or was dropped
    /// under the gate, which a scan holds). Precondition: the caller is pinned.
    pub(super) fn versions_into(&self, out: &mut Vec<(Vec<u8>, Vec<u8>)>) {
        for slot in self.slots.iter() {
            let record = Slot::record(slot.load(Ordering::Acquire)).cast_const();
            if record.is_null() {
                continue;
            }
            // SAFETY: a published record of this table (invariant 4), alive while the caller
            // is pinned; `read` retries a copy that overlapped a rewrite.
            let (key, (sequence, kind, value)) =
                unsafe { (Record::key(record), Record::read(record)) };
            out.push((crate::key::internal_key(key, sequence, kind), value));
        }
    }

    /// Checks invariant 1 (each key in one record) and 3 (`record_count` matches the
    /// records reachable). Precondition: sealed.
    #[cfg(feature = "invariants")]
    pub(super) fn check_invariants(&self) -> Result<(), String> {
        let mut keys = std::collections::HashSet::new();
        for slot in self.slots.iter() {
            let record = Slot::record(slot.load(Ordering::Acquire)).cast_const();
            if record.is_null() {
                continue;
            }
            // SAFETY: a published record of this table, alive as long as `self`.
            if !keys.insert(unsafe { Record::key(record) }) {
                return Err("two records hold one key".into());
            }
        }
        if keys.len() != self.len() {
            return Err(format!(
                "{} records reachable, {} counted",
                keys.len(),
                self.len()
            ));
        }
        Ok(())
    }

    /// Every version in the table. Precondition: sealed (invariant 2), so this is all of them
    /// and none changes while the borrows live.
    pub(super) fn records(&self) -> Vec<(&[u8], SequenceNumber, ValueKind, &[u8])> {
        let mut records = Vec::with_capacity(self.len());
        for slot in self.slots.iter() {
            let record = Slot::record(slot.load(Ordering::Acquire)).cast_const();
            if record.is_null() {
                continue;
            }
            // SAFETY: a published record of this table, alive as long as `self`; sealed, so
            // no writer rewrites it.
            unsafe {
                let (sequence, kind, value) = Record::version_locked(record);
                records.push((Record::key(record), sequence, kind, value));
            }
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use super::{Put, Record, Slot, Table};
    use crate::key::ValueKind;

    fn keep_old(_: &[u8], _: u64, _: ValueKind, _: &[u8]) {}

    /// A slot keeps the record's address and its key's tag apart (invariant 4).
    #[test]
    fn a_slot_keeps_address_and_tag() {
        let mut record = 0u64;
        let pointer = std::ptr::from_mut(&mut record).cast::<Record>();
        let hash = 0xABCD_0000_0000_0007;
        let Some(tagged) = Slot::tagged(pointer, hash) else {
            panic!("a stack address fits");
        };
        assert_eq!(Slot::record(tagged), pointer);
        assert!(Slot::may_match(tagged, hash));
        assert!(
            Slot::may_match(tagged, hash ^ 0xFF),
            "the low bits are not the tag"
        );
        assert!(!Slot::may_match(tagged, hash ^ (1 << 63)));
    }

    /// Keys starting at one slot, with different tags and with one whole hash, are each
    /// found, updated and gathered as themselves.
    #[test]
    fn colliding_keys_are_told_apart() {
        let table = Table::new(1 << 16, 64, 1 << 12, 0);
        let hashes: Vec<u64> = (0..12u64).map(|i| (i % 6) << 56 | 3).collect();
        assert!(table.enter());
        for (i, hash) in hashes.iter().enumerate() {
            let key = format!("key{i}");
            let put = table.insert(
                *hash,
                key.as_bytes(),
                10,
                ValueKind::Put,
                b"v",
                &mut keep_old,
            );
            assert_eq!(put, Put::Done);
        }
        for (i, hash) in hashes.iter().enumerate() {
            let key = format!("key{i}");
            let value = format!("w{i}");
            let put = table.insert(
                *hash,
                key.as_bytes(),
                20,
                ValueKind::Put,
                value.as_bytes(),
                &mut keep_old,
            );
            assert_eq!(put, Put::Done);
        }
        for (i, hash) in hashes.iter().enumerate() {
            let key = format!("key{i}");
            let found = table.get(*hash, key.as_bytes(), 30);
            assert_eq!(
                found,
                Some((20, ValueKind::Put, format!("w{i}").into_bytes()))
            );
            assert_eq!(table.get(*hash ^ (1 << 62), key.as_bytes(), 30), None);
        }
        table.exit();
        table.seal();
        table.wait_for_writers();
        assert_eq!(table.len(), hashes.len());
        assert_eq!(table.records().len(), hashes.len());
    }
}
