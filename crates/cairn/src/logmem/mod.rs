//! Log-structured memory (Nibble §3.2, §4.1): the object storage shared by `MemStore` and the
//! later `FloDB` Membuffer.
//!
//! Job: hand out space for immutable objects at log *heads*, keep per-segment live-byte counts
//! (the `SegmentInfo` table), pick segments for compaction by cost-benefit, recycle segments once
//! the epoch says no thread can still read them, and give the memory of free blocks back to the
//! operating system so that resident memory follows the bytes in use, not the capacity. What
//! counts as live is the caller's business (it owns the index); this module only moves bytes and
//! keeps the books.
//!
//! Layout: one arena of `capacity_bytes` is mapped up front ([`crate::pages`]: virtual memory;
//! pages become resident only when a block is first written). It is cut into *blocks* of
//! `block_bytes` (a multiple of the 4 KiB page). A *segment* is a list of up to
//! `segment_bytes / block_bytes` blocks, not necessarily adjacent, filled in order; blocks are
//! attached lazily as the segment's append offset advances, and blocks past the final offset are
//! returned when it is sealed. A *location* is the object's physical byte address in the arena,
//! `block * block_bytes + offset in block`, so it needs only [`LogMemory::location_bits`] bits
//! (31 for a 2 GiB log); a per-block owner table maps a block back to its segment and its position
//! there, which finds the following blocks of an object that straddles a block boundary.
//!
//! Free blocks are kept in three groups: *resident* (used before, pages still mapped; reused
//! newest first), *released* (pages handed back with `madvise(MADV_DONTNEED)`, whole system
//! pages only: with 16 or 64 KiB pages a block smaller than one is never handed back, since
//! the kernel would round the length up over live neighbours) and *untouched*
//! (never used). A resident free block's memory is released once it has stayed unused for
//! `free_decay` ([`LogMemory::release_idle`], called by the owner's background thread), or at
//! once when more than `resident_free_bytes` of free blocks are resident; released blocks are
//! faulted back in (`MADV_POPULATE_WRITE`) when reused. So a churning log reuses warm blocks
//! without page faults, and an idle one holds only the blocks in use.
//!
//! Where things are: `blocks` (the free-block pool and releasing idle memory), `head`
//! (appending at a head, sealing), `read` (decoding objects at locations), `cleaner`
//! (live-byte accounting, victim choice, retiring and reclaiming segments), `object` (the
//! object encoding), `invariants` (checks of the invariants below, under the `invariants`
//! feature) and `tests`.
//!
//! Thread-safety contract: `LogMemory` is `Send + Sync`.
//! - A head (`Head`) is owned by one thread at a time (the caller wraps it in a mutex); only the
//!   owner appends to the head's segment or attaches blocks to it.
//! - Bytes of an object are written once, before its location is published (by the caller, with
//!   release ordering); after that they are read-only until the segment is freed.
//! - Readers must be pinned on the caller's `EpochTable` from before they load a location until
//!   they are done with the bytes; segments are freed only through `retire` + `reclaim`.
//!
//! Invariants:
//! 1. A block belongs to at most one segment or to the free pool (resident, released, untouched
//!    or being released); a segment slot is free, a head, sealed (a compaction candidate),
//!    compacting, or retired.
//! 2. `used_bytes` of a segment only grows while it is a head and is final once sealed; every
//!    byte below it belongs to a completely written object whose location was published or
//!    dropped before the segment was sealed (the head owner seals only between appends).
//! 3. `live_bytes` of a segment is the sum of the sizes of objects in it that the index
//!    references (writers add on append, subtract when they unlink an object).
//! 4. Ordinary appends never take the last `reserve_blocks` free blocks; only compaction may, so
//!    compaction can always make progress when there is garbage to reclaim.
//! 5. A retired segment is freed only when `epochs.safe_below() > stamp`.
//! 6. The owner entry of a block (segment, position) is written before the block is attached to
//!    the segment and stays unchanged until the block is freed, so every location a pinned
//!    reader can hold maps to the segment and offset it was created for.
//! 7. A block's pages are released (`madvise`) only while the block is in the free pool and
//!    counted as "being released", so no reader or writer can touch them meanwhile.

// Segment indices are below `segment_slots` (the block count plus 64, below 2^25 by
// `validate`), so they fit the `u32` the owner table stores.
#![allow(clippy::cast_possible_truncation)]

mod blocks;
mod cleaner;
mod head;
#[cfg(any(test, feature = "invariants"))]
mod invariants;
pub mod object;
mod read;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::pages::Pages;
pub use crate::pages::PAGE_BYTES;
use blocks::BlockPool;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Largest segment size (the object decoder accepts lengths below 2^28 per field).
pub const MAX_SEGMENT_BYTES: usize = 1 << 28;
/// Bounds the block count: a log holds fewer than `16 * MAX_SEGMENTS` blocks. Each block may
/// be a segment of its own, so `new` gives every block a segment slot.
pub const MAX_SEGMENTS: usize = 1 << 20;

const STATE_FREE: u8 = 0;
const STATE_HEAD: u8 = 1;
const STATE_SEALED: u8 = 2;
const STATE_COMPACTING: u8 = 3;
const STATE_RETIRED: u8 = 4;

/// Sizes of a log memory.
#[derive(Debug, Clone, Copy)]
pub struct LogMemoryOptions {
    /// Bytes of the arena (rounded down to whole blocks).
    pub capacity_bytes: usize,
    /// Largest logical size of one segment.
    pub segment_bytes: usize,
    /// Size of a block (multiple of 4 KiB, divides `segment_bytes`).
    pub block_bytes: usize,
    /// Bytes kept back for compaction's destination segments.
    pub reserve_bytes: usize,
    /// Most free memory kept resident for reuse (rounded down to whole blocks); the memory of
    /// further free blocks is returned to the operating system at once.
    pub resident_free_bytes: usize,
    /// A free block unused for this long has its memory returned by `release_idle`.
    pub free_decay: std::time::Duration,
}

impl LogMemoryOptions {
    fn validate(&self) -> Result<()> {
        let invalid = |message: String| Err(Error::InvalidArgument(message));
        if self.block_bytes == 0 || self.block_bytes & (PAGE_BYTES - 1) != 0 {
            return invalid(format!(
                "block_bytes ({}) must be a positive multiple of {PAGE_BYTES}",
                self.block_bytes
            ));
        }
        if self.segment_bytes < self.block_bytes
            || (self.segment_bytes / self.block_bytes) * self.block_bytes != self.segment_bytes
            || self.segment_bytes > MAX_SEGMENT_BYTES
        {
            return invalid(format!(
                "segment_bytes ({}) must be a multiple of block_bytes ({}) and at most {MAX_SEGMENT_BYTES}",
                self.segment_bytes, self.block_bytes
            ));
        }
        let blocks = self.capacity_bytes / self.block_bytes;
        if blocks > u32::MAX as usize / 2
            || blocks >= MAX_SEGMENTS * 16
            || (blocks as u64)
                .checked_mul(self.block_bytes as u64)
                .is_none_or(|bytes| bytes >= 1 << 48)
        {
            return invalid(format!(
                "capacity_bytes ({}) is too large for block_bytes ({})",
                self.capacity_bytes, self.block_bytes
            ));
        }
        if self.reserve_bytes + 2 * self.segment_bytes > self.capacity_bytes {
            return invalid(format!(
                "capacity_bytes ({}) must hold the compaction reserve ({}) plus two segments ({} each)",
                self.capacity_bytes, self.reserve_bytes, self.segment_bytes
            ));
        }
        Ok(())
    }
}

/// Per-segment metadata (one slot per possible segment), in zero-filled pages: all fields are
/// atomics, and all zeros is a free segment.
#[derive(Debug)]
#[repr(C, align(64))]
struct Segment {
    block_count: AtomicU32,
    state: AtomicU8,
    used_bytes: AtomicU64,
    live_bytes: AtomicI64,
    sealed_at: AtomicU64,
}

/// An append point: the segment being filled and where. Owned by one thread at a time.
#[derive(Debug, Default)]
pub struct Head {
    segment: Option<u32>,
    offset: u64,
    /// Bytes of the segment backed by attached blocks.
    attached_bytes: u64,
}

impl Head {
    /// A head with no segment yet.
    pub fn new() -> Self {
        Head::default()
    }

    /// Append offset in the current segment, if the head has one.
    pub fn offset_in_segment(&self) -> Option<u64> {
        self.segment.map(|_| self.offset)
    }
}

/// Counters for `stats()`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogStats {
    /// Arena size.
    pub capacity_bytes: u64,
    /// Sum of live object bytes (headers, keys and values).
    pub live_bytes: u64,
    /// Bytes of blocks attached to segments.
    pub used_bytes: u64,
    /// Segments that are heads, sealed, compacting or retired.
    pub segments: u64,
    /// Segments waiting for the epoch to pass before reuse.
    pub retired_segments: u64,
    /// Log bytes that may be resident: blocks attached to segments plus free blocks whose
    /// memory was not (yet) returned to the operating system.
    pub touched_bytes: u64,
    /// Bytes of free blocks whose memory was returned to the operating system.
    pub released_bytes: u64,
}

/// The log-structured memory.
#[derive(Debug)]
pub struct LogMemory {
    arena: Pages,
    block_bytes: usize,
    segment_bytes: usize,
    blocks_per_segment: usize,
    total_blocks: usize,
    reserve_blocks: usize,
    resident_free_blocks: usize,
    free_decay_millis: u64,
    created: std::time::Instant,
    pool: Mutex<BlockPool>,
    free_blocks: AtomicUsize,
    /// Owner of each block: `segment << 32 | position in the segment` (invariant 6).
    owners: Box<[AtomicU64]>,
    /// `segment_slots` [`Segment`]s.
    segment_table: Pages,
    /// `segment_slots * blocks_per_segment` block indexes (`AtomicU32`), one list per segment.
    block_lists: Pages,
    segment_slots: usize,
    free_segments: Mutex<Vec<u32>>,
    candidates: Mutex<Vec<u32>>,
    retired: Mutex<VecDeque<(u32, u64)>>,
    seal_clock: AtomicU64,
}

impl LogMemory {
    /// Reserves the arena and builds the tables.
    pub fn new(options: LogMemoryOptions) -> Result<Self> {
        options.validate()?;
        let total_blocks = options.capacity_bytes / options.block_bytes;
        let blocks_per_segment = options.segment_bytes / options.block_bytes;
        let arena = Pages::zeroed(total_blocks * options.block_bytes)?;
        // Every segment holds at least one block, plus empty heads: with fewer slots, small
        // segments (sealed early, or one block each) run out of slots while blocks are free,
        // and writes and compaction alike fail `Full` for good.
        let segment_slots = total_blocks + 64;
        let segment_table = Pages::zeroed(segment_slots * std::mem::size_of::<Segment>())?;
        let block_lists =
            Pages::zeroed(segment_slots * blocks_per_segment * std::mem::size_of::<AtomicU32>())?;
        Ok(LogMemory {
            arena,
            block_bytes: options.block_bytes,
            segment_bytes: options.segment_bytes,
            blocks_per_segment,
            total_blocks,
            reserve_blocks: options.reserve_bytes.div_ceil(options.block_bytes),
            resident_free_blocks: options.resident_free_bytes / options.block_bytes,
            free_decay_millis: u64::try_from(options.free_decay.as_millis()).unwrap_or(u64::MAX),
            created: std::time::Instant::now(),
            pool: Mutex::new(BlockPool {
                resident: VecDeque::new(),
                released: Vec::new(),
                releasing: 0,
                untouched_next: 0,
            }),
            free_blocks: AtomicUsize::new(total_blocks),
            owners: (0..total_blocks).map(|_| AtomicU64::new(0)).collect(),
            segment_table,
            block_lists,
            segment_slots,
            free_segments: Mutex::new((0..segment_slots as u32).rev().collect()),
            candidates: Mutex::new(Vec::new()),
            retired: Mutex::new(VecDeque::new()),
            seal_clock: AtomicU64::new(1),
        })
    }

    /// Largest object (header included) that fits in one segment.
    pub fn max_object_bytes(&self) -> u64 {
        self.segment_bytes as u64
    }

    /// Bits a location needs: every location is below `2^location_bits`.
    pub fn location_bits(&self) -> u32 {
        let arena_bytes = (self.total_blocks * self.block_bytes) as u64;
        u64::BITS - arena_bytes.saturating_sub(1).leading_zeros()
    }

    /// Bytes ordinary appends may fill (capacity minus the compaction reserve).
    pub fn usable_bytes(&self) -> u64 {
        (self.total_blocks.saturating_sub(self.reserve_blocks) * self.block_bytes) as u64
    }

    /// Free blocks, including the reserve.
    pub fn free_blocks(&self) -> usize {
        self.free_blocks.load(Ordering::Relaxed)
    }

    /// All blocks.
    pub fn total_blocks(&self) -> usize {
        self.total_blocks
    }

    fn segment(&self, segment: u32) -> Option<&Segment> {
        let index = segment as usize;
        if index >= self.segment_slots {
            return None;
        }
        // SAFETY: `segment_table` holds `segment_slots` `Segment`s (zero-filled pages, page
        // aligned, and all zeros is a valid `Segment` of atomics), `index` is in range, and the
        // table lives as long as `self`. Segments are only accessed through atomics.
        Some(unsafe { &*self.segment_table.as_ptr().cast::<Segment>().add(index) })
    }

    /// The block list of a segment (`blocks_per_segment` slots).
    fn blocks_of(&self, segment: u32) -> Option<&[AtomicU32]> {
        let index = segment as usize;
        if index >= self.segment_slots {
            return None;
        }
        // SAFETY: `block_lists` holds `segment_slots * blocks_per_segment` zero-filled `u32`
        // slots (a valid `AtomicU32` each, page aligned); the slice of segment `index` is in
        // range, lives as long as `self`, and is only accessed through atomics.
        Some(unsafe {
            std::slice::from_raw_parts(
                self.block_lists
                    .as_ptr()
                    .cast::<AtomicU32>()
                    .add(index * self.blocks_per_segment),
                self.blocks_per_segment,
            )
        })
    }

    /// Builds the location of byte `offset` of a segment (the block must be attached).
    fn make_location(&self, segment: u32, offset: u64) -> Option<u64> {
        let block_bytes = self.block_bytes as u64;
        let position = usize::try_from(offset / block_bytes).ok()?;
        let block = self
            .blocks_of(segment)?
            .get(position)?
            .load(Ordering::Acquire);
        Some(u64::from(block) * block_bytes + offset % block_bytes)
    }

    /// Splits a location into its segment and the offset in the segment's logical range.
    fn split_location(&self, location: u64) -> Option<(u32, u64)> {
        let block_bytes = self.block_bytes as u64;
        let block = usize::try_from(location / block_bytes).ok()?;
        let owner = self.owners.get(block)?.load(Ordering::Acquire);
        let segment = (owner >> 32) as u32;
        let position = owner & u64::from(u32::MAX);
        Some((segment, position * block_bytes + location % block_bytes))
    }

    fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        // A panic while holding one of these leaf locks cannot leave the data half-updated in a
        // way that matters more than stopping the store would, so poisoning is ignored.
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn segments(&self) -> impl Iterator<Item = &Segment> {
        (0..self.segment_slots as u32).filter_map(|index| self.segment(index))
    }

    /// Sum of live bytes over segments in use.
    pub fn live_bytes(&self) -> u64 {
        self.segments()
            .filter(|segment| segment.state.load(Ordering::Relaxed) != STATE_FREE)
            .map(|segment| u64::try_from(segment.live_bytes.load(Ordering::Relaxed)).unwrap_or(0))
            .sum()
    }

    /// Accounting snapshot (walks the segment table; not for hot paths).
    pub fn stats(&self) -> LogStats {
        let mut stats = LogStats {
            capacity_bytes: (self.total_blocks * self.block_bytes) as u64,
            ..LogStats::default()
        };
        for segment in self.segments() {
            let segment_state = segment.state.load(Ordering::Relaxed);
            if segment_state == STATE_FREE {
                continue;
            }
            stats.segments += 1;
            if segment_state == STATE_RETIRED {
                stats.retired_segments += 1;
            } else {
                stats.live_bytes +=
                    u64::try_from(segment.live_bytes.load(Ordering::Relaxed)).unwrap_or(0);
            }
        }
        let block_bytes = self.block_bytes as u64;
        let pool = Self::lock(&self.pool);
        let free = self.free_blocks.load(Ordering::Relaxed) as u64;
        let in_use = self.total_blocks as u64 - free;
        stats.used_bytes = in_use * block_bytes;
        stats.touched_bytes = (in_use + pool.resident.len() as u64 + pool.releasing as u64)
            .min(u64::from(pool.untouched_next))
            * block_bytes;
        stats.released_bytes = pool.released.len() as u64 * block_bytes;
        stats
    }
}
