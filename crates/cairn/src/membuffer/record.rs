//! A Membuffer record: the newest version of one key in a table's arena — hash, key bytes
//! (fixed) and a version (sequence, kind, value) that a writer overwrites in place under the
//! record's seqlock (`FloDB` §4.1's in-place update).
//!
//! Layout: the header, the key padded to 8 bytes, then `capacity` value bytes held as
//! `AtomicU64` words, so that a reader copying a value while a writer rewrites it races only
//! on atomics (the seqlock then discards the torn copy).
//!
//! Thread-safety contract: a record is filled by the thread that allocates it before it is
//! published (a release compare-and-swap on a slot). Afterwards its key never changes; its
//! version changes only between `lock` and `unlock`, one writer at a time (the lock is the
//! seqlock's odd state). Readers (`read`) never write: they retry a copy that overlapped a
//! rewrite. A writer holding the lock, or anyone once the table is sealed (no writer can
//! enter), may read the version directly (`version_locked`).
//!
//! Invariants:
//! 1. A published record's key never changes and its bytes stay allocated until its table is
//!    freed (see the Membuffer's epoch protocol).
//! 2. `stamp` is even except while one writer holds the lock; every rewrite moves it by 2.
//! 3. `value_len <= capacity`, and `key_len` describes the key bytes exactly.

use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::arena::{Arena, ALIGNMENT};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The header; the key and then the value words follow it in the same allocation.
#[repr(C)]
pub(super) struct Record {
    /// The seqlock word (invariant 2).
    stamp: AtomicU64,
    pub(super) hash: u64,
    sequence: AtomicU64,
    key_len: u32,
    /// Value bytes the record can hold (a multiple of 8).
    capacity: u32,
    value_len: AtomicU32,
    kind: AtomicU8,
}

const HEADER_BYTES: usize = std::mem::size_of::<Record>();
const WORD: usize = std::mem::size_of::<u64>();
const _: () = assert!(
    HEADER_BYTES.is_multiple_of(ALIGNMENT)
        && std::mem::align_of::<Record>() <= ALIGNMENT
        && ALIGNMENT.is_multiple_of(std::mem::align_of::<AtomicU64>())
);

/// A version copied out of a record.
pub(super) type Version = (SequenceNumber, ValueKind, Vec<u8>);

fn kind_byte(kind: ValueKind) -> u8 {
    kind as u8
}

fn kind_of(byte: u8) -> ValueKind {
    ValueKind::from_u8(byte).unwrap_or(ValueKind::Put)
}

impl Record {
    /// Bytes a record of this key and value takes in the arena.
    pub(super) fn bytes(key: &[u8], value: &[u8]) -> usize {
        HEADER_BYTES + key.len().next_multiple_of(WORD) + value.len().next_multiple_of(WORD)
    }

    /// Allocates and fills an unpublished record.
    pub(super) fn allocate(
        arena: &Arena,
        hash: u64,
        key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> *mut Record {
        let record = arena.allocate(Self::bytes(key, value)).cast::<Record>();
        // SAFETY: the arena returned `bytes` fresh, ALIGNMENT-aligned bytes for us alone
        // (enough for the header, whose alignment the assertion above bounds, the padded key
        // and the value words); lengths fit in u32 (keys and values are bounded far below by
        // `key::KEY_BYTES_MAX` and `VALUE_BYTES_MAX`).
        unsafe {
            record.write(Record {
                stamp: AtomicU64::new(0),
                hash,
                sequence: AtomicU64::new(sequence),
                key_len: u32::try_from(key.len()).unwrap_or(u32::MAX),
                capacity: u32::try_from(value.len().next_multiple_of(WORD)).unwrap_or(u32::MAX),
                value_len: AtomicU32::new(u32::try_from(value.len()).unwrap_or(u32::MAX)),
                kind: AtomicU8::new(kind_byte(kind)),
            });
            let data = record.cast::<u8>().add(HEADER_BYTES);
            std::ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            Self::store_value(record, value);
        }
        record
    }

    /// The value words.
    ///
    /// # Safety
    /// `record` is a live record (invariant 1).
    unsafe fn words<'a>(record: *const Record) -> &'a [AtomicU64] {
        // SAFETY: the caller's contract; the words start 8-aligned after the padded key and
        // `capacity` bytes of them were allocated.
        unsafe {
            let data = record
                .cast::<u8>()
                .add(HEADER_BYTES + ((*record).key_len as usize).next_multiple_of(WORD));
            std::slice::from_raw_parts(data.cast::<AtomicU64>(), (*record).capacity as usize / WORD)
        }
    }

    /// Writes `value` into the words (atomically, word by word) and its length.
    ///
    /// # Safety
    /// `record` is live, unpublished or locked by the caller, and `value` fits (invariant 3).
    unsafe fn store_value(record: *const Record, value: &[u8]) {
        // SAFETY: the caller's contract.
        let words = unsafe { Self::words(record) };
        for (word, chunk) in words.iter().zip(value.chunks(WORD)) {
            let mut bytes = [0u8; WORD];
            bytes
                .iter_mut()
                .zip(chunk)
                .for_each(|(into, from)| *into = *from);
            word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe {
            (*record).value_len.store(
                u32::try_from(value.len()).unwrap_or(u32::MAX),
                Ordering::Relaxed,
            );
        }
    }

    /// The key bytes.
    ///
    /// # Safety
    /// `record` is a published record alive for `'a` (invariant 1).
    pub(super) unsafe fn key<'a>(record: *const Record) -> &'a [u8] {
        // SAFETY: the caller's contract; invariant 3 gives the length.
        unsafe {
            let data = record.cast::<u8>().add(HEADER_BYTES);
            std::slice::from_raw_parts(data, (*record).key_len as usize)
        }
    }

    /// The version, copied under the seqlock (retrying a copy a rewrite overlapped).
    ///
    /// # Safety
    /// As [`Record::key`].
    pub(super) unsafe fn read(record: *const Record) -> Version {
        // SAFETY: the caller's contract.
        let (this, words) = unsafe { (&*record, Self::words(record)) };
        let mut round = 0;
        loop {
            let before = this.stamp.load(Ordering::Acquire);
            if before & 1 == 0 {
                let sequence = this.sequence.load(Ordering::Relaxed);
                let kind = this.kind.load(Ordering::Relaxed);
                let length =
                    (this.value_len.load(Ordering::Relaxed) as usize).min(words.len() * WORD);
                let mut value = Vec::with_capacity(length.next_multiple_of(WORD));
                for word in words.iter().take(length.div_ceil(WORD)) {
                    value.extend_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
                }
                value.truncate(length);
                // Order the copies before the re-check (the seqlock's reader side).
                std::sync::atomic::fence(Ordering::Acquire);
                if this.stamp.load(Ordering::Relaxed) == before {
                    return (sequence, kind_of(kind), value);
                }
            }
            crate::sync::spin_wait(&mut round);
        }
    }

    /// The version's sequence as last published (a hint: it may change unless locked).
    ///
    /// # Safety
    /// As [`Record::key`].
    pub(super) unsafe fn sequence(record: *const Record) -> SequenceNumber {
        // SAFETY: the caller's contract.
        unsafe { (*record).sequence.load(Ordering::Acquire) }
    }

    /// Takes the record's write lock (spinning while another writer holds it).
    ///
    /// # Safety
    /// As [`Record::key`].
    pub(super) unsafe fn lock(record: *const Record) {
        // SAFETY: the caller's contract.
        let this = unsafe { &*record };
        let mut round = 0;
        loop {
            let stamp = this.stamp.load(Ordering::Relaxed);
            if stamp & 1 == 0
                && this
                    .stamp
                    .compare_exchange_weak(stamp, stamp + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                // The seqlock's writer side: the odd stamp is visible before any rewrite.
                std::sync::atomic::fence(Ordering::Release);
                return;
            }
            crate::sync::spin_wait(&mut round);
        }
    }

    /// Releases the lock (invariant 2).
    ///
    /// # Safety
    /// The caller holds the lock of this live record.
    pub(super) unsafe fn unlock(record: *const Record) {
        // SAFETY: the caller's contract.
        unsafe { (*record).stamp.fetch_add(1, Ordering::Release) };
    }

    /// The version, read in place: its value borrows the record's words.
    ///
    /// # Safety
    /// As [`Record::key`], and no writer can rewrite the record meanwhile: the caller holds its
    /// lock, or its table is sealed and no writer is inside.
    pub(super) unsafe fn version_locked<'a>(
        record: *const Record,
    ) -> (SequenceNumber, ValueKind, &'a [u8]) {
        // SAFETY: the caller's contract: nothing writes the words while the slice lives, so
        // viewing them as bytes races with nothing (readers only load).
        unsafe {
            let this = &*record;
            let words = Self::words(record);
            let length = (this.value_len.load(Ordering::Relaxed) as usize).min(words.len() * WORD);
            let value = std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), length);
            (
                this.sequence.load(Ordering::Relaxed),
                kind_of(this.kind.load(Ordering::Relaxed)),
                value,
            )
        }
    }

    /// Whether `value` fits the record's value words.
    ///
    /// # Safety
    /// As [`Record::key`].
    pub(super) unsafe fn fits(record: *const Record, value: &[u8]) -> bool {
        // SAFETY: the caller's contract; `capacity` never changes.
        value.len() <= unsafe { (*record).capacity } as usize
    }

    /// Rewrites the version in place if `value` fits; false (nothing changed) if it does not.
    ///
    /// # Safety
    /// The caller holds the lock of this live record.
    pub(super) unsafe fn overwrite_locked(
        record: *const Record,
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> bool {
        // SAFETY: the caller's contract.
        let this = unsafe { &*record };
        if value.len() > this.capacity as usize {
            return false;
        }
        // Release: a reader that sees the new sequence (`Record::sequence`, acquire) and so
        // skips the record also sees the old version's memtable insert, which came before.
        this.sequence.store(sequence, Ordering::Release);
        this.kind.store(kind_byte(kind), Ordering::Relaxed);
        // SAFETY: locked by the caller, and the value fits.
        unsafe { Self::store_value(record, value) };
        true
    }
}
