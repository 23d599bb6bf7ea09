//! Log-structured memory (Nibble §3.2, §4.1): the object storage shared by `MemStore` and the
//! later FloDB Membuffer.
//!
//! Job: hand out space for immutable objects at log *heads*, keep per-segment live-byte counts
//! (the SegmentInfo table), pick segments for compaction by cost-benefit, and recycle segments
//! once the epoch says no thread can still read them. What counts as live is the caller's
//! business (it owns the index); this module only moves bytes and keeps the books.
//!
//! Layout: one arena of `capacity_bytes` is reserved up front (virtual memory; pages become
//! resident only when a block is first written). It is cut into *blocks* of `block_bytes` (a
//! multiple of the 4 KiB page). A *segment* is a list of up to `segment_bytes / block_bytes`
//! blocks, not necessarily adjacent, filled in order; blocks are attached lazily as the segment's
//! append offset advances, and blocks past the final offset are returned when it is sealed. A
//! *location* is `segment << 28 | offset` (offset in the segment's logical byte range), so an
//! object is found by `blocks[offset / block_bytes]`.
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
//! 1. A block belongs to at most one segment or to the free pool; a segment slot is free,
//!    a head, sealed (a compaction candidate), compacting, or retired.
//! 2. `used_bytes` of a segment only grows while it is a head and is final once sealed; every
//!    byte below it belongs to a completely written object whose location was published or
//!    dropped before the segment was sealed (the head owner seals only between appends).
//! 3. `live_bytes` of a segment is the sum of the sizes of objects in it that the index
//!    references (writers add on append, subtract when they unlink an object).
//! 4. Ordinary appends never take the last `reserve_blocks` free blocks; only compaction may, so
//!    compaction can always make progress when there is garbage to reclaim.
//! 5. A retired segment is freed only when `epochs.safe_below() > stamp`.

pub mod object;

use crate::epoch::{CachePadded, EpochTable};
use crate::error::{Error, Result};
use object::{Header, MAX_HEADER_BYTES};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bits of a location holding the offset inside the segment.
pub const OFFSET_BITS: u32 = 28;
/// Largest segment size: offsets must fit in [`OFFSET_BITS`].
pub const MAX_SEGMENT_BYTES: usize = 1 << OFFSET_BITS;
/// Most segments (location bits 28..48).
pub const MAX_SEGMENTS: usize = 1 << 20;
/// Blocks are a multiple of this page size.
pub const PAGE_BYTES: usize = 4096;

const STATE_FREE: u8 = 0;
const STATE_HEAD: u8 = 1;
const STATE_SEALED: u8 = 2;
const STATE_COMPACTING: u8 = 3;
const STATE_RETIRED: u8 = 4;

/// Builds a location from a segment and an offset.
pub fn make_location(segment: u32, offset: u64) -> u64 {
    (u64::from(segment) << OFFSET_BITS) | offset
}

/// Splits a location into segment and offset.
pub fn split_location(location: u64) -> (u32, u64) {
    (
        (location >> OFFSET_BITS) as u32,
        location & ((1 << OFFSET_BITS) - 1),
    )
}

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
        if blocks > u32::MAX as usize / 2 || blocks >= MAX_SEGMENTS * 16 {
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

/// The arena: one allocation, blocks addressed by index.
#[derive(Debug)]
struct Arena {
    base: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: the arena is plain memory; all access goes through `LogMemory`, whose contract
// (module doc) makes every concurrent access either disjoint or read-only.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: `base` was returned by `alloc` with exactly this layout and is freed once.
        unsafe { std::alloc::dealloc(self.base, self.layout) }
    }
}

#[derive(Debug)]
struct BlockPool {
    /// Blocks that were used before and are free again (reused first: already resident).
    free: Vec<u32>,
    /// Blocks `untouched_next..total_blocks` were never handed out.
    untouched_next: u32,
}

/// Per-segment metadata (one slot per possible segment).
#[derive(Debug)]
struct Segment {
    blocks: Box<[AtomicU32]>,
    block_count: AtomicU32,
    used_bytes: AtomicU64,
    live_bytes: AtomicI64,
    sealed_at: AtomicU64,
    state: AtomicU8,
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
    /// Blocks ever touched (an upper bound on resident arena memory).
    pub touched_bytes: u64,
}

/// The log-structured memory.
#[derive(Debug)]
pub struct LogMemory {
    arena: Arena,
    block_bytes: usize,
    segment_bytes: usize,
    total_blocks: usize,
    reserve_blocks: usize,
    pool: Mutex<BlockPool>,
    free_blocks: AtomicUsize,
    segments: Box<[CachePadded<Segment>]>,
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
        let layout =
            std::alloc::Layout::from_size_align(total_blocks * options.block_bytes, PAGE_BYTES)
                .map_err(|error| Error::InvalidArgument(format!("arena layout: {error}")))?;
        // SAFETY: the layout has a non-zero size (validate requires two segments).
        let base = unsafe { std::alloc::alloc(layout) };
        if base.is_null() {
            return Err(Error::InvalidArgument(format!(
                "could not reserve {} bytes for the log",
                layout.size()
            )));
        }
        let arena = Arena { base, layout };
        // Every segment holds at least one block, plus empty heads.
        let segment_slots = (total_blocks + 64).min(MAX_SEGMENTS);
        let segments = (0..segment_slots)
            .map(|_| {
                CachePadded(Segment {
                    blocks: (0..blocks_per_segment).map(|_| AtomicU32::new(0)).collect(),
                    block_count: AtomicU32::new(0),
                    used_bytes: AtomicU64::new(0),
                    live_bytes: AtomicI64::new(0),
                    sealed_at: AtomicU64::new(0),
                    state: AtomicU8::new(STATE_FREE),
                })
            })
            .collect();
        Ok(LogMemory {
            arena,
            block_bytes: options.block_bytes,
            segment_bytes: options.segment_bytes,
            total_blocks,
            reserve_blocks: options.reserve_bytes.div_ceil(options.block_bytes),
            pool: Mutex::new(BlockPool {
                free: Vec::new(),
                untouched_next: 0,
            }),
            free_blocks: AtomicUsize::new(total_blocks),
            segments,
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
        self.segments.get(segment as usize).map(|padded| &padded.0)
    }

    fn lock<'a, T>(mutex: &'a Mutex<T>) -> std::sync::MutexGuard<'a, T> {
        // A panic while holding one of these leaf locks cannot leave the data half-updated in a
        // way that matters more than stopping the store would, so poisoning is ignored.
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn allocate_blocks(&self, count: usize, use_reserve: bool, out: &mut Vec<u32>) -> bool {
        let mut pool = Self::lock(&self.pool);
        let untouched = self.total_blocks - pool.untouched_next as usize;
        let available = pool.free.len() + untouched;
        let floor = if use_reserve { 0 } else { self.reserve_blocks };
        if available < count + floor {
            return false;
        }
        for _ in 0..count {
            let block = match pool.free.pop() {
                Some(block) => block,
                None => {
                    let block = pool.untouched_next;
                    pool.untouched_next += 1;
                    block
                }
            };
            out.push(block);
        }
        self.free_blocks.fetch_sub(count, Ordering::Relaxed);
        true
    }

    fn release_blocks(&self, blocks: impl Iterator<Item = u32>) {
        let mut pool = Self::lock(&self.pool);
        let before = pool.free.len();
        pool.free.extend(blocks);
        self.free_blocks
            .fetch_add(pool.free.len() - before, Ordering::Relaxed);
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
        let Some(segment) = self.segment(segment_index) else {
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
            if let Some(slot) = segment.blocks.get(position as usize) {
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
        let mut header = [0u8; MAX_HEADER_BYTES];
        let header_bytes = object::encode_header(key.len(), value.len(), &mut header);
        let location = make_location(segment_index, head.offset);
        let mut offset = head.offset;
        for part in [header.get(..header_bytes).unwrap_or(&[]), key, value] {
            self.write_at(segment, offset, part);
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
    fn chunk(&self, segment: &Segment, offset: u64) -> Option<(*mut u8, usize)> {
        let block_bytes = self.block_bytes as u64;
        let position = (offset / block_bytes) as usize;
        if position >= segment.block_count.load(Ordering::Acquire) as usize {
            return None;
        }
        let block = segment.blocks.get(position)?.load(Ordering::Acquire) as usize;
        if block >= self.total_blocks {
            return None;
        }
        let within = (offset % block_bytes) as usize;
        // SAFETY: `block < total_blocks` and `within < block_bytes`, so the pointer stays inside
        // the arena allocation of `total_blocks * block_bytes` bytes.
        let pointer = unsafe { self.arena.base.add(block * self.block_bytes + within) };
        Some((pointer, self.block_bytes - within))
    }

    fn write_at(&self, segment: &Segment, mut offset: u64, mut data: &[u8]) {
        while !data.is_empty() {
            let Some((pointer, room)) = self.chunk(segment, offset) else {
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
        segment: &Segment,
        mut offset: u64,
        mut length: usize,
        mut visitor: impl FnMut(&[u8]) -> bool,
    ) -> bool {
        while length > 0 {
            let Some((pointer, room)) = self.chunk(segment, offset) else {
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

    /// Reads the header of the object at `location`.
    pub fn header(&self, location: u64) -> Option<Header> {
        let (segment_index, offset) = split_location(location);
        let segment = self.segment(segment_index)?;
        object::decode_header(|position| {
            let mut byte = None;
            self.visit(segment, offset + position as u64, 1, |bytes| {
                byte = bytes.first().copied();
                true
            });
            byte
        })
    }

    /// True when the object at `location` has exactly this key.
    pub fn key_equals(&self, location: u64, key: &[u8]) -> bool {
        let Some(header) = self.header(location) else {
            return false;
        };
        if header.key_len != key.len() {
            return false;
        }
        let (segment_index, offset) = split_location(location);
        let Some(segment) = self.segment(segment_index) else {
            return false;
        };
        let mut remaining = key;
        self.visit(
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

    /// Appends the key of the object at `location` to `out`.
    pub fn read_key(&self, location: u64, out: &mut Vec<u8>) -> Option<Header> {
        let header = self.header(location)?;
        let (segment_index, offset) = split_location(location);
        let segment = self.segment(segment_index)?;
        out.reserve(header.key_len);
        self.visit(
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
        let header = self.header(location)?;
        let (segment_index, offset) = split_location(location);
        let segment = self.segment(segment_index)?;
        out.reserve(header.value_len);
        self.visit(
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
        let Some(header) = self.header(location) else {
            return;
        };
        if let Some(segment) = self.segment(split_location(location).0) {
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
        let Some(segment) = self.segment(segment_index) else {
            return;
        };
        let block_bytes = self.block_bytes as u64;
        let keep = head.offset.div_ceil(block_bytes) as usize;
        let attached = (head.attached_bytes / block_bytes) as usize;
        let spare: Vec<u32> = (keep..attached)
            .filter_map(|position| segment.blocks.get(position))
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
            let location = make_location(segment_index, offset);
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
        for &segment_index in &ready {
            let Some(segment) = self.segment(segment_index) else {
                continue;
            };
            let count = segment.block_count.swap(0, Ordering::AcqRel) as usize;
            self.release_blocks(
                segment
                    .blocks
                    .iter()
                    .take(count)
                    .map(|slot| slot.load(Ordering::Relaxed)),
            );
            segment.used_bytes.store(0, Ordering::Relaxed);
            segment.live_bytes.store(0, Ordering::Relaxed);
            segment.state.store(STATE_FREE, Ordering::Release);
            Self::lock(&self.free_segments).push(segment_index);
        }
        ready.len()
    }

    /// Segments waiting in the reclamation queue.
    pub fn retired_count(&self) -> usize {
        Self::lock(&self.retired).len()
    }

    /// Sealed segments waiting for compaction.
    pub fn candidate_count(&self) -> usize {
        Self::lock(&self.candidates).len()
    }

    /// Sum of live bytes over segments in use.
    pub fn live_bytes(&self) -> u64 {
        self.segments
            .iter()
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
        for segment in self.segments.iter() {
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
        stats.used_bytes = ((self.total_blocks - self.free_blocks.load(Ordering::Relaxed))
            * self.block_bytes) as u64;
        stats.touched_bytes =
            u64::from(Self::lock(&self.pool).untouched_next) * self.block_bytes as u64;
        stats
    }
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
}
