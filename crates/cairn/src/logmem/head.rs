//! Appending at a log head: opening a segment, reserving and attaching blocks as the append
//! offset advances, writing an object's bytes (possibly across blocks), and sealing the
//! segment when the head moves on.
//!
//! Thread-safety contract: a [`super::Head`] is owned by one thread at a time; only its owner
//! appends to its segment. Readers may read published objects of the segment meanwhile.
//!
//! Invariants (the log's numbers):
//! 2. `used_bytes` grows only while the segment is a head and is final once sealed; sealing
//!    returns the blocks past it to the pool.
//! 6. A block's owner entry is written before the block is attached to the segment.

// Casts here are block counts and offsets inside one segment: `LogMemory::new` caps a
// segment at `u32::MAX / 2` blocks, so every block count fits a `u32`, and in-segment offsets
// are `u64`s below the segment size, which is a `usize`.
#![allow(clippy::cast_possible_truncation)]

use super::object::{self, MAX_HEADER_BYTES};
use super::{Head, LogMemory, Segment, STATE_FREE, STATE_HEAD, STATE_SEALED};
use std::sync::atomic::Ordering;

impl LogMemory {
    pub(super) fn open_segment(&self) -> Option<u32> {
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

    pub(super) fn attach(
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
        segment.live_bytes.fetch_add(
            super::cleaner::signed_bytes(object_bytes),
            Ordering::Relaxed,
        );
        Some(location)
    }

    /// Pointer to byte `offset` of the segment and how many bytes follow it in the same block;
    /// `None` past the attached blocks.
    pub(super) fn chunk(
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

    pub(super) fn write_at(
        &self,
        segment_index: u32,
        segment: &Segment,
        mut offset: u64,
        mut data: &[u8],
    ) {
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
                (u64::try_from(segment.live_bytes.load(Ordering::Relaxed)).unwrap_or(0))
                    < head.offset
            })
    }
}
