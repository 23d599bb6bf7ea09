//! One generation of a Membuffer partition: a bounded, insert-only open-addressing hash table
//! from a key to the chain of its versions (newest first), with its own arena.
//!
//! Why this and not the project's `hashindex` + `logmem` + `epoch` (as `MemStore` uses): a
//! Membuffer table lives for one fill of one partition and is then drained whole, so it needs
//! no deletes, no resizing, no cleaning and no reclamation of single entries — only an
//! insert-only array of slots and a bump arena. One slot is one pointer, claimed by one
//! compare-and-swap; a probe touches one cache line in the common case; an update of a key
//! already present is a compare-and-swap on the slot's chain. The `MemStore` index's versioned
//! buckets and log segments pay for deletes, cleaning and resizing this table never does.
//!
//! Thread-safety contract: any number of writers (between `enter` and `exit`) and readers run
//! at once; nobody blocks. `seal_and_wait` (the drainer, alone) closes the table to new
//! writers and waits for those inside to leave; from then on its contents never change and
//! `records` may gather them. Readers never write shared memory.
//!
//! Invariants:
//! 1. A slot goes from null to a record once; its chain holds only versions of that record's
//!    key, sorted by sequence descending, without duplicates.
//! 2. After `seal_and_wait` returns, no writer is inside and none will enter: `records`
//!    sees every version ever inserted.
//! 3. `record_count` counts versions whose insert completed (incremented before `exit`).

use super::record::Record;
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::arena::Arena;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Slots probed (linearly) before a key counts as not fitting.
const PROBE_LIMIT: usize = 32;

/// The writers word's bit set once the table is sealed; the rest counts writers inside.
const SEALED: u64 = 1 << 63;

/// The smallest record size assumed when sizing the slot array from a byte budget.
const RECORD_BYTES_MIN: usize = 64;

/// What an insert did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Put {
    /// The version is in the table.
    Done,
    /// The table is out of bytes, keys or probe room: the version goes elsewhere.
    Full,
    /// The version is too large for any table of this size: it goes to the memtable.
    Oversized,
}

/// See the module documentation.
pub(super) struct Table {
    arena: Arena,
    slots: Box<[AtomicPtr<Record>]>,
    byte_limit: usize,
    key_limit: usize,
    keys: AtomicUsize,
    record_count: AtomicUsize,
    writers: AtomicU64,
    /// Set once the table passed half full and a drainer was told.
    drain_requested: std::sync::atomic::AtomicBool,
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
    /// An empty table for about `byte_limit` bytes of records.
    pub(super) fn new(byte_limit: usize) -> Table {
        let key_limit = (byte_limit / RECORD_BYTES_MIN).max(4);
        let slot_count = (key_limit * 2).next_power_of_two();
        Table {
            arena: Arena::new((byte_limit / 8).clamp(4096, 1 << 20)),
            slots: (0..slot_count).map(|_| AtomicPtr::default()).collect(),
            byte_limit,
            key_limit,
            keys: AtomicUsize::new(0),
            record_count: AtomicUsize::new(0),
            writers: AtomicU64::new(0),
            drain_requested: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether the table is at least half full (of bytes or keys): a drainer should take it.
    pub(super) fn wants_drain(&self) -> bool {
        self.arena.published_bytes().saturating_mul(2) >= self.byte_limit
            || self.keys.load(Ordering::Relaxed).saturating_mul(2) >= self.key_limit
    }

    /// True exactly once, for the first caller after the table passed half full.
    pub(super) fn take_drain_request(&self) -> bool {
        !self.drain_requested.load(Ordering::Relaxed)
            && self.wants_drain()
            && !self.drain_requested.swap(true, Ordering::Relaxed)
    }

    /// Bytes the table holds: its arena and its slots.
    pub(super) fn memory_bytes(&self) -> usize {
        self.arena.allocated_bytes() + self.slots.len() * std::mem::size_of::<usize>()
    }

    /// Versions inserted (invariant 3).
    pub(super) fn len(&self) -> usize {
        self.record_count.load(Ordering::Acquire)
    }

    /// Enters as a writer; false if the table is sealed (the writer goes to the partition's
    /// new table).
    pub(super) fn enter(&self) -> bool {
        if self.writers.fetch_add(1, Ordering::SeqCst) & SEALED == 0 {
            return true;
        }
        self.writers.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Leaves as a writer.
    pub(super) fn exit(&self) {
        self.writers.fetch_sub(1, Ordering::Release);
    }

    /// Seals the table and waits until no writer is inside (invariant 2).
    pub(super) fn seal_and_wait(&self) {
        self.writers.fetch_or(SEALED, Ordering::SeqCst);
        let mut round = 0;
        while self.writers.load(Ordering::Acquire) != SEALED {
            crate::sync::spin_wait(&mut round);
        }
    }

    /// Inserts a version. Precondition: the caller is inside (`enter`), and `(key,
    /// sequence)` was never inserted anywhere before.
    pub(super) fn insert(
        &self,
        hash: u64,
        key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> Put {
        let bytes = Record::bytes(key, value);
        if bytes > self.byte_limit / 4 {
            return Put::Oversized;
        }
        if self.arena.published_bytes().saturating_add(bytes) > self.byte_limit {
            return Put::Full;
        }
        let mut fresh: *mut Record = ptr::null_mut();
        for slot in self.probe(hash) {
            let mut head = slot.load(Ordering::Acquire);
            if head.is_null() {
                if fresh.is_null() {
                    if self.keys.fetch_add(1, Ordering::Relaxed) >= self.key_limit {
                        self.keys.fetch_sub(1, Ordering::Relaxed);
                        return Put::Full;
                    }
                    fresh = Record::allocate(&self.arena, hash, key, sequence, kind, value);
                }
                match slot.compare_exchange(head, fresh, Ordering::Release, Ordering::Acquire) {
                    Ok(_) => return self.inserted(),
                    Err(actual) => head = actual,
                }
            }
            // SAFETY: a non-null slot holds a published record of this table (invariant 1).
            let same = unsafe { (*head).hash == hash && Record::key(head) == key };
            if same {
                if fresh.is_null() {
                    fresh = Record::allocate(&self.arena, hash, key, sequence, kind, value);
                } else {
                    // The key we reserved a slot for turned out present.
                    self.keys.fetch_sub(1, Ordering::Relaxed);
                }
                Self::link_version(slot, head, fresh);
                return self.inserted();
            }
        }
        if !fresh.is_null() {
            self.keys.fetch_sub(1, Ordering::Relaxed);
        }
        Put::Full
    }

    fn inserted(&self) -> Put {
        self.record_count.fetch_add(1, Ordering::Release);
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

    /// Puts `version` on the chain starting at `slot` (whose value was `head`), after every
    /// newer version and before every older one (invariant 1).
    fn link_version(slot: &AtomicPtr<Record>, head: *mut Record, version: *mut Record) {
        // SAFETY: `version` is ours and initialised; every record reached is published and
        // alive as long as the table.
        unsafe {
            let ours = (*version).sequence;
            let mut link = slot;
            let mut current = head;
            loop {
                while !current.is_null() && (*current).sequence > ours {
                    link = &(*current).older;
                    current = link.load(Ordering::Acquire);
                }
                (*version).older.store(current, Ordering::Relaxed);
                match link.compare_exchange(current, version, Ordering::Release, Ordering::Acquire)
                {
                    Ok(_) => return,
                    Err(actual) => current = actual,
                }
            }
        }
    }

    /// The chain head of `key`, or null.
    fn find(&self, hash: u64, key: &[u8]) -> *const Record {
        for slot in self.probe(hash) {
            let head = slot.load(Ordering::Acquire);
            if head.is_null() {
                break;
            }
            // SAFETY: a published record of this table.
            if unsafe { (*head).hash == hash && Record::key(head) == key } {
                return head;
            }
        }
        ptr::null()
    }

    /// The newest version of `key` at or below `sequence`.
    pub(super) fn get(
        &self,
        hash: u64,
        key: &[u8],
        sequence: SequenceNumber,
    ) -> Option<(SequenceNumber, ValueKind, &[u8])> {
        let mut record = self.find(hash, key);
        // SAFETY: published records of this table, alive as long as `self`.
        unsafe {
            while !record.is_null() && (*record).sequence > sequence {
                record = (*record).older.load(Ordering::Acquire);
            }
            (!record.is_null()).then(|| Record::entry(record))
        }
    }

    /// Checks invariant 1 (a chain holds one key, sequences strictly descending) and 3
    /// (`record_count` matches the versions reachable). Precondition: sealed.
    #[cfg(feature = "invariants")]
    pub(super) fn check_invariants(&self) -> Result<(), String> {
        let mut versions = 0;
        for slot in &self.slots {
            let head = slot.load(Ordering::Acquire).cast_const();
            let mut record = head;
            let mut previous: Option<SequenceNumber> = None;
            while !record.is_null() {
                // SAFETY: published records of this table, alive as long as `self`.
                unsafe {
                    if Record::key(record) != Record::key(head) {
                        return Err("a chain holds two keys".into());
                    }
                    let sequence = (*record).sequence;
                    if previous.is_some_and(|previous| previous <= sequence) {
                        return Err(format!("chain out of order at sequence {sequence}"));
                    }
                    previous = Some(sequence);
                    record = (*record).older.load(Ordering::Acquire);
                }
                versions += 1;
            }
        }
        if versions != self.len() {
            return Err(format!(
                "{versions} versions reachable, {} counted",
                self.len()
            ));
        }
        Ok(())
    }

    /// Every version in the table. Precondition: sealed (invariant 2), so this is all of them.
    pub(super) fn records(&self) -> Vec<(&[u8], SequenceNumber, ValueKind, &[u8])> {
        let mut records = Vec::with_capacity(self.len());
        for slot in &self.slots {
            let mut record = slot.load(Ordering::Acquire).cast_const();
            while !record.is_null() {
                // SAFETY: published records of this table, alive as long as `self`.
                unsafe {
                    let (sequence, kind, value) = Record::entry(record);
                    records.push((Record::key(record), sequence, kind, value));
                    record = (*record).older.load(Ordering::Acquire);
                }
            }
        }
        records
    }
}
