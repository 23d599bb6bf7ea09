//! A log's in-memory buffers: [`Segment`]s that writers reserve disjoint regions of with one
//! compare-and-swap and publish records into with one release store, read in order by the
//! group-commit leader (`super::Log`).
//!
//! Thread-safety contract: a segment is shared by every writer of its log and the leader;
//! a reserved region is written by the reserving writer only, and read by the leader only
//! after its header was published.
//!
//! Invariants (the parent module's 1 and 2, kept here):
//! 1. Reservations in one segment are disjoint and ordered: byte order = sequence order.
//! 2. Once sealed, `sealed_end` names the end of the last reservation; nothing is reserved
//!    past it.

use crate::sync::{AtomicU64, Ordering};
use crate::wal::{record_bytes, record_header, RECORD_HEADER_BYTES};
use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::sync::{Arc, OnceLock};

const SEALED: u64 = 1 << 63;
pub(super) const SEQUENCE_SHIFT: u32 = 40;
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
    pub(super) base_sequence: u64,
    pub(super) capacity_bytes: usize,
    buffer: *mut u8,
    pub(super) reservation: AtomicU64,
    /// `(end byte offset, end sequence)` once sealed: nothing at or past them is reserved.
    pub(super) sealed_end: OnceLock<(usize, u64)>,
    pub(super) next: OnceLock<Arc<Segment>>,
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
    pub(super) fn try_reserve(
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
    pub(super) fn next_sequence(&self) -> u64 {
        let word = self.reservation.load(Ordering::Acquire);
        self.base_sequence + ((word & !SEALED) >> SEQUENCE_SHIFT)
    }

    /// Seals the segment; returns the next unused sequence if this call sealed it.
    pub(super) fn seal(&self) -> Option<u64> {
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
    pub(super) fn published_prefix(&self, mut offset: usize) -> Option<(usize, u64)> {
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

    pub(super) fn bytes(&self, start: usize, end: usize) -> &[u8] {
        if self.buffer.is_null() || start >= end {
            return &[];
        }
        // SAFETY: callers pass a range of published records inside the buffer.
        unsafe { std::slice::from_raw_parts(self.buffer.add(start), end - start) }
    }
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
