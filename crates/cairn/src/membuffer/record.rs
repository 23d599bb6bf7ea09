//! A Membuffer record: one version of one key (hash, sequence, kind, key and value bytes) in a
//! table's arena, linked to the next older version of the same key in that table.
//!
//! Thread-safety contract: a record is written only by the thread that allocates it, before it
//! is published (a release compare-and-swap on a slot or an `older` link); afterwards only its
//! `older` link changes. Readers reach it through acquire loads.
//!
//! Invariants:
//! 1. A published record's bytes never change and stay allocated until its table drops.
//! 2. `key_len` and `value_len` describe the bytes that follow the header, exactly.

use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::arena::{Arena, ALIGNMENT};
use std::sync::atomic::AtomicPtr;

/// The header; the key and then the value bytes follow it in the same allocation.
#[repr(C)]
pub(super) struct Record {
    /// The next older version of the same key in the same table, or null.
    pub(super) older: AtomicPtr<Record>,
    pub(super) hash: u64,
    pub(super) sequence: SequenceNumber,
    key_len: u32,
    value_len: u32,
    kind: ValueKind,
}

const HEADER_BYTES: usize = std::mem::size_of::<Record>();
const _: () =
    assert!(HEADER_BYTES.is_multiple_of(ALIGNMENT) && std::mem::align_of::<Record>() <= ALIGNMENT);

impl Record {
    /// Bytes a record of this key and value takes in the arena.
    pub(super) fn bytes(key: &[u8], value: &[u8]) -> usize {
        HEADER_BYTES + key.len() + value.len()
    }

    /// Allocates and fills an unpublished record (its `older` link null).
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
        // (enough for the header, whose alignment the assertion above bounds, and both
        // slices); key and value lengths fit in u32 (both are bounded far below by
        // `key::KEY_BYTES_MAX` and `VALUE_BYTES_MAX`).
        unsafe {
            record.write(Record {
                older: AtomicPtr::new(std::ptr::null_mut()),
                hash,
                sequence,
                key_len: u32::try_from(key.len()).unwrap_or(u32::MAX),
                value_len: u32::try_from(value.len()).unwrap_or(u32::MAX),
                kind,
            });
            let data = record.cast::<u8>().add(HEADER_BYTES);
            std::ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), data.add(key.len()), value.len());
        }
        record
    }

    /// The key bytes.
    ///
    /// # Safety
    /// `record` is a published record whose table outlives `'a` (invariant 1).
    pub(super) unsafe fn key<'a>(record: *const Record) -> &'a [u8] {
        // SAFETY: the caller's contract; invariant 2 gives the length.
        unsafe {
            let data = record.cast::<u8>().add(HEADER_BYTES);
            std::slice::from_raw_parts(data, (*record).key_len as usize)
        }
    }

    /// The value bytes.
    ///
    /// # Safety
    /// As [`Record::key`].
    pub(super) unsafe fn value<'a>(record: *const Record) -> &'a [u8] {
        // SAFETY: the caller's contract; invariant 2 gives the lengths.
        unsafe {
            let data = record
                .cast::<u8>()
                .add(HEADER_BYTES + (*record).key_len as usize);
            std::slice::from_raw_parts(data, (*record).value_len as usize)
        }
    }

    /// The version as a memory lookup returns it.
    ///
    /// # Safety
    /// As [`Record::key`].
    pub(super) unsafe fn entry<'a>(record: *const Record) -> (SequenceNumber, ValueKind, &'a [u8]) {
        // SAFETY: the caller's contract.
        unsafe { ((*record).sequence, (*record).kind, Self::value(record)) }
    }
}
