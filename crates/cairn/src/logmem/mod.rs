//! Log-structured memory (Nibble §3.2, §4.1): the object storage shared by `MemStore` and the
//! later FloDB Membuffer.
//!
//! Job: hand out space for immutable objects at log *heads*, keep per-segment live-byte counts
//! (the SegmentInfo table), pick segments for compaction by cost-benefit, recycle segments once
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
//! newest first), *released* (pages handed back with `madvise(MADV_DONTNEED)`) and *untouched*
//! (never used). A resident free block's memory is released once it has stayed unused for
//! `free_decay` ([`LogMemory::release_idle`], called by the owner's background thread), or at
//! once when more than `resident_free_bytes` of free blocks are resident; released blocks are
//! faulted back in (`MADV_POPULATE_WRITE`) when reused. So a churning log reuses warm blocks
//! without page faults, and an idle one holds only the blocks in use.
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

pub mod object;

use crate::epoch::EpochTable;
use crate::error::{Error, Result};
use crate::pages::Pages;
pub use crate::pages::PAGE_BYTES;
use object::{Header, MAX_HEADER_BYTES};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Largest segment size (the object decoder accepts lengths below 2^28 per field).
pub const MAX_SEGMENT_BYTES: usize = 1 << 28;
/// Most segments.
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

#[derive(Debug)]
struct BlockPool {
    /// Free blocks whose pages are still resident, oldest first, with the tick (milliseconds
    /// since the log was created) they were freed at; reused newest first.
    resident: VecDeque<(u32, u64)>,
    /// Free blocks whose pages were handed back to the operating system.
    released: Vec<u32>,
    /// Free blocks taken out of `resident` by a thread that is releasing their pages.
    releasing: usize,
    /// Blocks `untouched_next..total_blocks` were never handed out.
    untouched_next: u32,
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
        // Every segment holds at least one block, plus empty heads.
        let segment_slots = (total_blocks + 64).min(MAX_SEGMENTS);
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

    /// Block size.
    pub fn block_bytes(&self) -> usize {
        self.block_bytes
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

    fn lock<'a, T>(mutex: &'a Mutex<T>) -> std::sync::MutexGuard<'a, T> {
        // A panic while holding one of these leaf locks cannot leave the data half-updated in a
        // way that matters more than stopping the store would, so poisoning is ignored.
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn allocate_blocks(&self, count: usize, use_reserve: bool, out: &mut Vec<u32>) -> bool {
        let floor = if use_reserve { 0 } else { self.reserve_blocks };
        let first_new = out.len();
        let mut not_resident = Vec::new();
        let mut spins = 0u32;
        loop {
            let mut pool = Self::lock(&self.pool);
            let untouched = self.total_blocks - pool.untouched_next as usize;
            let ready = pool.resident.len() + pool.released.len() + untouched;
            if ready + pool.releasing < count + floor {
                return false;
            }
            if ready < count {
                // Some of the needed blocks are having their pages released right now (a few
                // system calls): wait for that to finish rather than report a full log.
                drop(pool);
                crate::sync::spin_wait(&mut spins);
                continue;
            }
            for _ in 0..count {
                let block = match pool.resident.pop_back() {
                    Some((block, _)) => block,
                    None => {
                        let block = match pool.released.pop() {
                            Some(block) => block,
                            None => {
                                let block = pool.untouched_next;
                                pool.untouched_next += 1;
                                block
                            }
                        };
                        not_resident.push(block);
                        block
                    }
                };
                out.push(block);
            }
            self.free_blocks.fetch_sub(count, Ordering::Relaxed);
            break;
        }
        debug_assert_eq!(out.len() - first_new, count);
        // Fault the pages of non-resident blocks in with one call per run of adjacent blocks.
        for (start, length) in runs(&mut not_resident) {
            self.arena
                .populate(start as usize * self.block_bytes, length * self.block_bytes);
        }
        true
    }

    /// Milliseconds since the log was created (the clock of `free_decay`).
    fn tick(&self) -> u64 {
        u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Returns blocks to the free pool (resident), then releases the oldest resident free blocks
    /// beyond `resident_free_bytes`.
    fn release_blocks(&self, blocks: impl Iterator<Item = u32>) {
        let now = self.tick();
        let excess = {
            let mut pool = Self::lock(&self.pool);
            let before = pool.resident.len();
            pool.resident.extend(blocks.map(|block| (block, now)));
            self.free_blocks
                .fetch_add(pool.resident.len() - before, Ordering::Relaxed);
            let over = pool
                .resident
                .len()
                .saturating_sub(self.resident_free_blocks);
            Self::take_for_release(&mut pool, over)
        };
        self.release_taken(excess);
    }

    /// Releases the memory of free blocks that have stayed unused for `free_decay`; returns
    /// how many. Meant for a background thread: it makes a few system calls.
    pub fn release_idle(&self) -> usize {
        // Blocks freed at or before `cutoff` have been unused for `free_decay`.
        let Some(cutoff) = self.tick().checked_sub(self.free_decay_millis) else {
            return 0;
        };
        let idle = {
            let mut pool = Self::lock(&self.pool);
            let count = pool
                .resident
                .iter()
                .take_while(|&&(_, freed)| freed <= cutoff)
                .count();
            Self::take_for_release(&mut pool, count)
        };
        let count = idle.len();
        self.release_taken(idle);
        count
    }

    /// Takes the `count` oldest resident free blocks out of the pool, counted as being released.
    fn take_for_release(pool: &mut BlockPool, count: usize) -> Vec<u32> {
        let count = count.min(pool.resident.len());
        pool.releasing += count;
        pool.resident
            .drain(..count)
            .map(|(block, _)| block)
            .collect()
    }

    fn release_taken(&self, mut blocks: Vec<u32>) {
        if blocks.is_empty() {
            return;
        }
        // Invariant 7: these blocks are free and counted as being released, so nobody touches
        // their pages while they are handed back.
        for (start, length) in runs(&mut blocks) {
            self.arena
                .release(start as usize * self.block_bytes, length * self.block_bytes);
        }
        let mut pool = Self::lock(&self.pool);
        pool.releasing -= blocks.len();
        pool.released.extend(blocks);
    }

    fn open_segment(&self) -> Option<u32> {
        let segment_index = Self::lock(&self.free_segments).pop()?;
        let segment = self.segment(segment_index)?;
        segment.block_count.store(0, Ordering::Relaxed);
        segment.used_bytes.store(0, Ordering::Relaxed);
        segment.live_bytes.store(0, Ordering::Relaxed);
        segment.state.store(STATE_HEAD, Ordering::Release);
        Some(segment_index)
    }

    /// Makes sure the head can take an object of `object_bytes` without allocating later:
    /// attaches blocks, or seals the current segment and opens a new one. Returns false when the
    /// free pool cannot supply the blocks (never blocks waiting for space).
    pub fn reserve(&self, head: &mut Head, object_bytes: u64, use_reserve: bool) -> bool {
        if object_bytes > self.segment_bytes as u64 {
            return false;
        }
        if let Some(segment) = head.segment {
            if head.offset + object_bytes > self.segment_bytes as u64 {
                self.seal(head);
            } else if head.offset + object_bytes <= head.attached_bytes {
                return true;
            } else {
                return self.attach(head, segment, object_bytes, use_reserve);
            }
        }
        // Check for blocks before taking a segment slot, so a failed reserve leaves no empty head.
        if self.free_blocks() < 1 + if use_reserve { 0 } else { self.reserve_blocks } {
            return false;
        }
        let Some(segment) = self.open_segment() else {
            return false;
        };
        *head = Head {
            segment: Some(segment),
            offset: 0,
            attached_bytes: 0,
        };
        if self.attach(head, segment, object_bytes, use_reserve) {
            true
        } else {
            self.seal(head);
            false
        }
    }

    fn attach(
        &self,
        head: &mut Head,
        segment_index: u32,
        object_bytes: u64,
        use_reserve: bool,
    ) -> bool {
        let (Some(segment), Some(slots)) =
            (self.segment(segment_index), self.blocks_of(segment_index))
        else {
            return false;
        };
        let needed_end = head.offset + object_bytes;
        let block_bytes = self.block_bytes as u64;
        let have = head.attached_bytes / block_bytes;
        let want = needed_end.div_ceil(block_bytes);
        let mut blocks = Vec::with_capacity((want - have) as usize);
        if !self.allocate_blocks((want - have) as usize, use_reserve, &mut blocks) {
            return false;
        }
        for (position, block) in (have..want).zip(blocks) {
            // Invariant 6: the owner is recorded before the block becomes reachable.
            if let Some(owner) = self.owners.get(block as usize) {
                owner.store(u64::from(segment_index) << 32 | position, Ordering::Release);
            }
            if let Some(slot) = slots.get(position as usize) {
                slot.store(block, Ordering::Release);
            }
        }
        segment.block_count.store(want as u32, Ordering::Release);
        head.attached_bytes = want * block_bytes;
        true
    }

    /// Appends an object at the head. The caller must have called `reserve` with at least the
    /// object's size since the last append; returns `None` otherwise. Adds the object to the
    /// segment's live bytes.
    pub fn append(&self, head: &mut Head, key: &[u8], value: &[u8]) -> Option<u64> {
        let segment_index = head.segment?;
        let object_bytes = object::object_len(key.len(), value.len());
        if head.offset + object_bytes > head.attached_bytes {
            return None;
        }
        let segment = self.segment(segment_index)?;
        let location = self.make_location(segment_index, head.offset)?;
        debug_assert_eq!(
            self.split_location(location),
            Some((segment_index, head.offset))
        );
        let mut header = [0u8; MAX_HEADER_BYTES];
        let header_bytes = object::encode_header(key.len(), value.len(), &mut header);
        let mut offset = head.offset;
        for part in [header.get(..header_bytes).unwrap_or(&[]), key, value] {
            self.write_at(segment_index, segment, offset, part);
            offset += part.len() as u64;
        }
        head.offset = offset;
        segment.used_bytes.store(offset, Ordering::Release);
        segment
            .live_bytes
            .fetch_add(object_bytes as i64, Ordering::Relaxed);
        Some(location)
    }

    /// Pointer to byte `offset` of the segment and how many bytes follow it in the same block;
    /// `None` past the attached blocks.
    fn chunk(
        &self,
        segment_index: u32,
        segment: &Segment,
        offset: u64,
    ) -> Option<(*mut u8, usize)> {
        let block_bytes = self.block_bytes as u64;
        let position = (offset / block_bytes) as usize;
        if position >= segment.block_count.load(Ordering::Acquire) as usize {
            return None;
        }
        let block = self
            .blocks_of(segment_index)?
            .get(position)?
            .load(Ordering::Acquire) as usize;
        if block >= self.total_blocks {
            return None;
        }
        let within = (offset % block_bytes) as usize;
        // SAFETY: `block < total_blocks` and `within < block_bytes`, so the pointer stays inside
        // the arena mapping of `total_blocks * block_bytes` bytes.
        let pointer = unsafe { self.arena.as_ptr().add(block * self.block_bytes + within) };
        Some((pointer, self.block_bytes - within))
    }

    fn write_at(&self, segment_index: u32, segment: &Segment, mut offset: u64, mut data: &[u8]) {
        while !data.is_empty() {
            let Some((pointer, room)) = self.chunk(segment_index, segment, offset) else {
                return;
            };
            let count = room.min(data.len());
            let (now, rest) = data.split_at(count);
            // SAFETY: `chunk` guarantees `count` bytes from `pointer` lie in one block of the
            // arena. Only the head owner writes these bytes (they are past `used_bytes`, so no
            // location points at them yet and no reader reads them), and `now` is a separate
            // allocation from the arena so the ranges do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(now.as_ptr(), pointer, count) };
            offset += count as u64;
            data = rest;
        }
    }

    /// Visits the bytes `offset..offset + length` of a segment as block-sized slices.
    fn visit(
        &self,
        segment_index: u32,
        segment: &Segment,
        mut offset: u64,
        mut length: usize,
        mut visitor: impl FnMut(&[u8]) -> bool,
    ) -> bool {
        while length > 0 {
            let Some((pointer, room)) = self.chunk(segment_index, segment, offset) else {
                return false;
            };
            let count = room.min(length);
            // SAFETY: `count` bytes from `pointer` lie in one block of the arena (see `chunk`).
            // The caller reads only bytes of a published object (or of a sealed segment), which
            // are immutable until the segment is freed, and the caller is pinned (or owns the
            // segment), so the block is not reused while the slice lives.
            let bytes = unsafe { std::slice::from_raw_parts(pointer.cast_const(), count) };
            if !visitor(bytes) {
                return false;
            }
            offset += count as u64;
            length -= count;
        }
        true
    }

    /// The object at `location`: its segment, offset and header.
    fn object_at(&self, location: u64) -> Option<(u32, &Segment, u64, Header)> {
        let (segment_index, offset) = self.split_location(location)?;
        let segment = self.segment(segment_index)?;
        // Fast path: the header (at most MAX_HEADER_BYTES) lies inside the first block.
        if let Some((pointer, room)) = self.chunk(segment_index, segment, offset) {
            if room >= MAX_HEADER_BYTES {
                let header = object::decode_header(|position| {
                    // SAFETY: `position < room`, so the byte lies in the same block as `pointer`
                    // (see `chunk`). The decoder asks only for header bytes of a published
                    // object, which are immutable while the caller is pinned; bytes past the
                    // header (possibly an object being written) are never read.
                    (position < room).then(|| unsafe { pointer.add(position).read() })
                })?;
                return Some((segment_index, segment, offset, header));
            }
        }
        let header = object::decode_header(|position| {
            let mut byte = None;
            self.visit(
                segment_index,
                segment,
                offset + position as u64,
                1,
                |bytes| {
                    byte = bytes.first().copied();
                    true
                },
            );
            byte
        })?;
        Some((segment_index, segment, offset, header))
    }

    /// Reads the header of the object at `location`.
    pub fn header(&self, location: u64) -> Option<Header> {
        self.object_at(location).map(|(_, _, _, header)| header)
    }

    /// Hints the processor to start loading the object at `location` (for walks over many
    /// locations, such as an index resize). Never faults, whatever the location.
    pub fn prefetch(&self, location: u64) {
        let Some((segment_index, offset)) = self.split_location(location) else {
            return;
        };
        let Some(segment) = self.segment(segment_index) else {
            return;
        };
        if let Some((pointer, _)) = self.chunk(segment_index, segment, offset) {
            prefetch_pointer(pointer.cast_const());
        }
    }

    /// True when the object at `location` has exactly this key.
    pub fn key_equals(&self, location: u64, key: &[u8]) -> bool {
        let Some((segment_index, segment, offset, header)) = self.object_at(location) else {
            return false;
        };
        if header.key_len != key.len() {
            return false;
        }
        let mut remaining = key;
        self.visit(
            segment_index,
            segment,
            offset + header.header_len as u64,
            key.len(),
            |bytes| match remaining.split_at_checked(bytes.len()) {
                Some((expected, rest)) if expected == bytes => {
                    remaining = rest;
                    true
                }
                _ => false,
            },
        )
    }

    /// Runs `f` on the key of the object at `location`: in place when the key lies in one block,
    /// else copied into `scratch`. `None` if there is no object there.
    pub fn with_key<R>(
        &self,
        location: u64,
        scratch: &mut Vec<u8>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let (segment_index, segment, offset, header) = self.object_at(location)?;
        let start = offset + header.header_len as u64;
        if let Some((pointer, room)) = self.chunk(segment_index, segment, start) {
            if room >= header.key_len {
                // SAFETY: the key's `key_len` bytes lie in one block of the arena (see `chunk`);
                // they belong to a published object, immutable while the caller is pinned.
                let key =
                    unsafe { std::slice::from_raw_parts(pointer.cast_const(), header.key_len) };
                return Some(f(key));
            }
        }
        scratch.clear();
        scratch.reserve(header.key_len);
        self.visit(segment_index, segment, start, header.key_len, |bytes| {
            scratch.extend_from_slice(bytes);
            true
        })
        .then(|| f(scratch))
    }

    /// Appends the key of the object at `location` to `out`.
    pub fn read_key(&self, location: u64, out: &mut Vec<u8>) -> Option<Header> {
        let (segment_index, segment, offset, header) = self.object_at(location)?;
        out.reserve(header.key_len);
        self.visit(
            segment_index,
            segment,
            offset + header.header_len as u64,
            header.key_len,
            |bytes| {
                out.extend_from_slice(bytes);
                true
            },
        )
        .then_some(header)
    }

    /// Appends the value of the object at `location` to `out`.
    pub fn read_value(&self, location: u64, out: &mut Vec<u8>) -> Option<Header> {
        let (segment_index, segment, offset, header) = self.object_at(location)?;
        out.reserve(header.value_len);
        self.visit(
            segment_index,
            segment,
            offset + (header.header_len + header.key_len) as u64,
            header.value_len,
            |bytes| {
                out.extend_from_slice(bytes);
                true
            },
        )
        .then_some(header)
    }

    /// Records that the object at `location` is no longer referenced.
    pub fn mark_dead(&self, location: u64) {
        if let Some((_, segment, _, header)) = self.object_at(location) {
            segment
                .live_bytes
                .fetch_sub(header.object_len() as i64, Ordering::Relaxed);
        }
    }

    /// Closes the head's segment: it becomes immutable and a compaction candidate (or is freed
    /// at once if empty). Blocks past the final offset go back to the pool.
    pub fn seal(&self, head: &mut Head) {
        let Some(segment_index) = head.segment.take() else {
            return;
        };
        let (Some(segment), Some(slots)) =
            (self.segment(segment_index), self.blocks_of(segment_index))
        else {
            return;
        };
        let block_bytes = self.block_bytes as u64;
        let keep = head.offset.div_ceil(block_bytes) as usize;
        let attached = (head.attached_bytes / block_bytes) as usize;
        let spare: Vec<u32> = (keep..attached)
            .filter_map(|position| slots.get(position))
            .map(|slot| slot.load(Ordering::Relaxed))
            .collect();
        segment.block_count.store(keep as u32, Ordering::Release);
        self.release_blocks(spare.into_iter());
        *head = Head::default();
        if keep == 0 {
            segment.state.store(STATE_FREE, Ordering::Release);
            Self::lock(&self.free_segments).push(segment_index);
            return;
        }
        segment.sealed_at.store(
            self.seal_clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        segment.state.store(STATE_SEALED, Ordering::Release);
        Self::lock(&self.candidates).push(segment_index);
    }

    /// True when the head's segment holds dead bytes (worth sealing so compaction can see it).
    pub fn head_has_garbage(&self, head: &Head) -> bool {
        head.segment
            .and_then(|index| self.segment(index))
            .is_some_and(|segment| {
                (segment.live_bytes.load(Ordering::Relaxed).max(0) as u64) < head.offset
            })
    }

    /// Picks the sealed segment with the best cost-benefit ratio `(1 - u) * age / (1 + u)`
    /// whose utilization `u` is at most `max_utilization` and whose live bytes are at most
    /// `max_live_bytes`, and marks it as compacting. Returns `(segment, live_bytes)`.
    pub fn pick_victim(&self, max_utilization: f64, max_live_bytes: u64) -> Option<(u32, u64)> {
        let mut candidates = Self::lock(&self.candidates);
        let now = self.seal_clock.load(Ordering::Relaxed);
        let mut best: Option<(usize, f64, u64)> = None;
        for (position, &segment_index) in candidates.iter().enumerate() {
            let Some(segment) = self.segment(segment_index) else {
                continue;
            };
            let used = segment.used_bytes.load(Ordering::Relaxed).max(1);
            let live = segment.live_bytes.load(Ordering::Relaxed).max(0) as u64;
            let utilization = (live as f64 / used as f64).min(1.0);
            if utilization > max_utilization || live > max_live_bytes {
                continue;
            }
            let age = now.saturating_sub(segment.sealed_at.load(Ordering::Relaxed)) as f64 + 1.0;
            let benefit = (1.0 - utilization) * age / (1.0 + utilization);
            let better = match best {
                None => true,
                Some((_, best_benefit, _)) => benefit > best_benefit,
            };
            if better {
                best = Some((position, benefit, live));
            }
        }
        let (position, _, live) = best?;
        let segment_index = candidates.swap_remove(position);
        if let Some(segment) = self.segment(segment_index) {
            segment.state.store(STATE_COMPACTING, Ordering::Release);
        }
        Some((segment_index, live))
    }

    /// Puts a segment taken by `pick_victim` back among the candidates (compaction gave up).
    pub fn unpick(&self, segment_index: u32) {
        if let Some(segment) = self.segment(segment_index) {
            segment.state.store(STATE_SEALED, Ordering::Release);
            Self::lock(&self.candidates).push(segment_index);
        }
    }

    /// Visits every object of a compacting segment in log order: `visit(location, header)`.
    /// Stops early when the visitor returns false.
    pub fn for_each_object(&self, segment_index: u32, mut visit: impl FnMut(u64, Header) -> bool) {
        let Some(segment) = self.segment(segment_index) else {
            return;
        };
        let used = segment.used_bytes.load(Ordering::Acquire);
        let mut offset = 0;
        while offset < used {
            let Some(location) = self.make_location(segment_index, offset) else {
                return;
            };
            let Some(header) = self.header(location) else {
                return;
            };
            if !visit(location, header) {
                return;
            }
            offset += header.object_len();
        }
    }

    /// Live bytes of a segment.
    pub fn segment_live_bytes(&self, segment_index: u32) -> i64 {
        self.segment(segment_index)
            .map_or(0, |segment| segment.live_bytes.load(Ordering::Relaxed))
    }

    /// Queues a compacted segment (no longer referenced by the index) for reuse after the epoch
    /// passes. Must be called after the last index entry pointing into it was replaced.
    pub fn retire(&self, segment_index: u32, epochs: &EpochTable) {
        if let Some(segment) = self.segment(segment_index) {
            segment.state.store(STATE_RETIRED, Ordering::Release);
        }
        let stamp = epochs.advance();
        Self::lock(&self.retired).push_back((segment_index, stamp));
    }

    /// Frees retired segments no pinned thread can still read; returns how many were freed.
    /// The calling thread must not be pinned (its own pin would only delay reuse).
    pub fn reclaim(&self, epochs: &EpochTable) -> usize {
        let ready: Vec<u32> = {
            let mut retired = Self::lock(&self.retired);
            if retired.is_empty() {
                return 0;
            }
            let safe_below = epochs.safe_below();
            let mut ready = Vec::new();
            while let Some(&(segment_index, stamp)) = retired.front() {
                if stamp >= safe_below {
                    break;
                }
                retired.pop_front();
                ready.push(segment_index);
            }
            ready
        };
        let mut freed = Vec::new();
        let mut freed_segments = Vec::with_capacity(ready.len());
        for &segment_index in &ready {
            let (Some(segment), Some(slots)) =
                (self.segment(segment_index), self.blocks_of(segment_index))
            else {
                continue;
            };
            freed_segments.push(segment_index);
            let count = segment.block_count.swap(0, Ordering::AcqRel) as usize;
            freed.extend(
                slots
                    .iter()
                    .take(count)
                    .map(|slot| slot.load(Ordering::Relaxed)),
            );
            segment.used_bytes.store(0, Ordering::Relaxed);
            segment.live_bytes.store(0, Ordering::Relaxed);
            segment.state.store(STATE_FREE, Ordering::Release);
        }
        self.release_blocks(freed.into_iter());
        Self::lock(&self.free_segments).extend(freed_segments.iter().rev());
        freed_segments.len()
    }

    /// Segments waiting in the reclamation queue.
    pub fn retired_count(&self) -> usize {
        Self::lock(&self.retired).len()
    }

    /// Sealed segments waiting for compaction.
    pub fn candidate_count(&self) -> usize {
        Self::lock(&self.candidates).len()
    }

    fn segments(&self) -> impl Iterator<Item = &Segment> {
        (0..self.segment_slots as u32).filter_map(|index| self.segment(index))
    }

    /// Sum of live bytes over segments in use.
    pub fn live_bytes(&self) -> u64 {
        self.segments()
            .filter(|segment| segment.state.load(Ordering::Relaxed) != STATE_FREE)
            .map(|segment| segment.live_bytes.load(Ordering::Relaxed).max(0) as u64)
            .sum()
    }

    /// Accounting snapshot (walks the segment table; not for hot paths).
    pub fn stats(&self) -> LogStats {
        let mut stats = LogStats {
            capacity_bytes: (self.total_blocks * self.block_bytes) as u64,
            ..LogStats::default()
        };
        for segment in self.segments() {
            let state = segment.state.load(Ordering::Relaxed);
            if state == STATE_FREE {
                continue;
            }
            stats.segments += 1;
            if state == STATE_RETIRED {
                stats.retired_segments += 1;
            } else {
                stats.live_bytes += segment.live_bytes.load(Ordering::Relaxed).max(0) as u64;
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

/// Sorts block indexes and yields `(first block, count)` for each run of adjacent ones.
fn runs(blocks: &mut [u32]) -> Vec<(u32, usize)> {
    blocks.sort_unstable();
    let mut runs: Vec<(u32, usize)> = Vec::new();
    for &block in blocks.iter() {
        match runs.last_mut() {
            Some((start, length)) if u64::from(*start) + *length as u64 == u64::from(block) => {
                *length += 1;
            }
            _ => runs.push((block, 1)),
        }
    }
    runs
}

#[inline]
fn prefetch_pointer(pointer: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch is only a hint: it never faults and has no visible effect, whatever
    // the address; `sse` is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(pointer.cast());
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = pointer;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_log() -> LogMemory {
        LogMemory::new(LogMemoryOptions {
            capacity_bytes: 64 * PAGE_BYTES,
            segment_bytes: 4 * PAGE_BYTES,
            block_bytes: PAGE_BYTES,
            reserve_bytes: 4 * PAGE_BYTES,
            resident_free_bytes: 0,
            free_decay: std::time::Duration::ZERO,
        })
        .unwrap()
    }

    #[test]
    fn objects_span_blocks_and_read_back() {
        let log = small_log();
        let mut head = Head::new();
        let mut locations = Vec::new();
        for index in 0..20u32 {
            let key = index.to_be_bytes();
            let value = vec![index as u8; 1500 + index as usize];
            let size = object::object_len(key.len(), value.len());
            assert!(log.reserve(&mut head, size, false));
            locations.push((log.append(&mut head, &key, &value).unwrap(), key, value));
        }
        for (location, key, value) in &locations {
            assert!(log.key_equals(*location, key));
            assert!(!log.key_equals(*location, b"nope"));
            let mut out = Vec::new();
            log.read_value(*location, &mut out).unwrap();
            assert_eq!(&out, value);
        }
        log.seal(&mut head);
        let stats = log.stats();
        assert_eq!(
            stats.live_bytes,
            locations
                .iter()
                .map(|(_, key, value)| object::object_len(key.len(), value.len()))
                .sum::<u64>()
        );
    }

    #[test]
    fn reserve_fails_cleanly_when_pool_is_empty_and_reclaim_refills() {
        let log = small_log();
        let epochs = EpochTable::new();
        let mut head = Head::new();
        let value = vec![7u8; 4000];
        let mut appended = 0;
        while log.reserve(&mut head, object::object_len(4, value.len()), false) {
            log.append(&mut head, b"abcd", &value).unwrap();
            appended += 1;
            assert!(appended < 1000);
        }
        // The reserve is left for compaction.
        assert!(log.free_blocks() >= 4);
        log.seal(&mut head);
        // A reader pinned before the segments are retired may still hold locations into them.
        let guard = epochs.pin();
        while let Some((victim, _)) = log.pick_victim(1.0, u64::MAX) {
            log.retire(victim, &epochs);
        }
        assert_eq!(log.reclaim(&epochs), 0, "a pinned thread blocks reuse");
        drop(guard);
        assert!(log.reclaim(&epochs) > 0);
        assert_eq!(log.free_blocks(), log.total_blocks());
    }

    #[test]
    fn locations_are_physical_and_fit_location_bits() {
        for (blocks, bits) in [(64usize, 18u32), (63, 18), (65, 19), (128, 19)] {
            let log = LogMemory::new(LogMemoryOptions {
                capacity_bytes: blocks * PAGE_BYTES,
                segment_bytes: 4 * PAGE_BYTES,
                block_bytes: PAGE_BYTES,
                reserve_bytes: 4 * PAGE_BYTES,
                resident_free_bytes: 0,
                free_decay: std::time::Duration::ZERO,
            })
            .unwrap();
            assert_eq!(log.location_bits(), bits, "{blocks} blocks");
            // Fill the log with objects that straddle blocks and check every location.
            let mut head = Head::new();
            let mut locations = Vec::new();
            let value = vec![3u8; 1000];
            let mut key = 0u32;
            while log.reserve(&mut head, object::object_len(4, value.len()), true) {
                let location = log.append(&mut head, &key.to_be_bytes(), &value).unwrap();
                assert!(
                    location < 1 << bits,
                    "{location} needs more than {bits} bits"
                );
                locations.push((location, key));
                key += 1;
            }
            let last_block = (blocks - 1) as u64;
            assert!(
                locations
                    .iter()
                    .any(|(location, _)| location / PAGE_BYTES as u64 == last_block),
                "the last block is used"
            );
            for &(location, key) in &locations {
                assert!(log.key_equals(location, &key.to_be_bytes()));
                let mut out = Vec::new();
                log.read_value(location, &mut out).unwrap();
                assert_eq!(out, value);
                let (segment, offset) = log.split_location(location).unwrap();
                assert_eq!(log.make_location(segment, offset), Some(location));
            }
        }
        // A location past the arena is rejected, not read.
        let log = small_log();
        assert_eq!(log.header(u64::MAX), None);
        assert_eq!(log.split_location(64 * PAGE_BYTES as u64), None);
    }

    #[test]
    fn freed_blocks_are_released_and_reused() {
        let log = LogMemory::new(LogMemoryOptions {
            capacity_bytes: 256 * PAGE_BYTES,
            segment_bytes: 16 * PAGE_BYTES,
            block_bytes: 2 * PAGE_BYTES,
            reserve_bytes: 16 * PAGE_BYTES,
            resident_free_bytes: 8 * PAGE_BYTES,
            free_decay: std::time::Duration::from_secs(3600),
        })
        .unwrap();
        let epochs = EpochTable::new();
        let value = vec![5u8; 1000];
        for round in 0..3u8 {
            let mut head = Head::new();
            let mut locations = Vec::new();
            while log.reserve(&mut head, object::object_len(1, value.len()), false) {
                locations.push(log.append(&mut head, &[round], &value).unwrap());
            }
            log.seal(&mut head);
            for &location in &locations {
                let mut out = Vec::new();
                log.read_value(location, &mut out).unwrap();
                assert_eq!(out, value);
                log.mark_dead(location);
            }
            while let Some((victim, live)) = log.pick_victim(1.0, u64::MAX) {
                assert_eq!(live, 0);
                log.retire(victim, &epochs);
            }
            assert!(log.reclaim(&epochs) > 0);
            let stats = log.stats();
            assert_eq!(stats.used_bytes, 0);
            // Only `resident_free_bytes` of free blocks stay resident; the rest were released
            // (and the released ones are what the next round reuses first after those).
            assert_eq!(stats.touched_bytes, 8 * PAGE_BYTES as u64, "{stats:?}");
            assert!(stats.released_bytes >= 200 * PAGE_BYTES as u64, "{stats:?}");
            assert_eq!(log.free_blocks(), log.total_blocks());
            // The resident ones are younger than an hour.
            assert_eq!(log.release_idle(), 0);
        }
    }

    #[test]
    fn idle_free_blocks_are_released_after_the_decay() {
        for (decay, released) in [
            (std::time::Duration::ZERO, true),
            (std::time::Duration::from_secs(3600), false),
        ] {
            let log = LogMemory::new(LogMemoryOptions {
                capacity_bytes: 64 * PAGE_BYTES,
                segment_bytes: 4 * PAGE_BYTES,
                block_bytes: PAGE_BYTES,
                reserve_bytes: 4 * PAGE_BYTES,
                resident_free_bytes: usize::MAX,
                free_decay: decay,
            })
            .unwrap();
            let epochs = EpochTable::new();
            let mut head = Head::new();
            while log.reserve(&mut head, object::object_len(1, 3000), false) {
                let location = log.append(&mut head, b"k", &[1u8; 3000]).unwrap();
                log.mark_dead(location);
            }
            log.seal(&mut head);
            while let Some((victim, _)) = log.pick_victim(1.0, u64::MAX) {
                log.retire(victim, &epochs);
            }
            assert!(log.reclaim(&epochs) > 0);
            let before = log.stats();
            assert_eq!(before.used_bytes, 0);
            assert!(before.touched_bytes > 40 * PAGE_BYTES as u64, "{before:?}");
            let count = log.release_idle();
            let after = log.stats();
            if released {
                assert_eq!(count as u64 * PAGE_BYTES as u64, before.touched_bytes);
                assert_eq!(after.touched_bytes, 0, "{after:?}");
            } else {
                assert_eq!(count, 0);
                assert_eq!(after.touched_bytes, before.touched_bytes);
            }
            // Either way the blocks are reusable.
            let mut head = Head::new();
            assert!(log.reserve(&mut head, object::object_len(1, 3000), false));
            let location = log.append(&mut head, b"k", &[2u8; 3000]).unwrap();
            let mut out = Vec::new();
            log.read_value(location, &mut out).unwrap();
            assert_eq!(out, vec![2u8; 3000]);
        }
    }
}
