//! Checks of the log's numbered invariants (see [`crate::logmem`]) on a quiet log: block
//! ownership against the owner table and the free pool, segments' byte counts, and (given the
//! caller's index) live-byte accounting.
//!
//! Thread-safety contract: `check_invariants` takes the pool lock briefly and otherwise only
//! loads; it is meant for a log no thread is appending to, compacting or reclaiming.
//!
//! Invariants checked (the log's numbers):
//! 1. Every block is in exactly one segment or in the free pool, and `free_blocks` counts the
//!    pool.
//! 2. A segment's `used_bytes` fits its attached blocks and `segment_bytes`.
//! 3. A segment's `live_bytes` is between 0 and `used_bytes`, and (with `is_live`) equals
//!    the bytes of its objects the caller's index references.
//! 6. The owner entry of each attached block names its segment and position.

use super::{LogMemory, STATE_FREE, STATE_RETIRED};
use std::sync::atomic::Ordering;

/// Who holds a block, as the check found it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Holder {
    Nobody,
    Segment(u32),
    Pool,
}

impl LogMemory {
    /// Checks invariants 1, 2, 3 and 6. `is_live(location)` answers whether the caller's
    /// index references the object at `location`; without it, live bytes are only bounded.
    pub fn check_invariants(
        &self,
        mut is_live: Option<&mut dyn FnMut(u64) -> bool>,
    ) -> Result<(), String> {
        let mut holders = vec![Holder::Nobody; self.total_blocks];
        for index in 0..self.segment_slots as u32 {
            self.check_segment(index, &mut holders, is_live.as_deref_mut())?;
        }
        let pool = Self::lock(&self.pool);
        let untouched = self
            .total_blocks
            .saturating_sub(pool.untouched_next as usize);
        let listed = pool.resident.iter().map(|&(block, _)| block);
        for block in listed.chain(pool.released.iter().copied()) {
            match holders.get_mut(block as usize) {
                Some(holder @ Holder::Nobody) if block < pool.untouched_next => {
                    *holder = Holder::Pool;
                }
                other => {
                    return Err(format!(
                        "invariant 1: free block {block} is also held by {other:?}"
                    ))
                }
            }
        }
        let free = pool.resident.len() + pool.released.len() + pool.releasing + untouched;
        if free != self.free_blocks.load(Ordering::Acquire) {
            return Err(format!(
                "invariant 1: the pool holds {free} free blocks, free_blocks says {}",
                self.free_blocks.load(Ordering::Acquire)
            ));
        }
        let held = holders
            .iter()
            .filter(|holder| **holder != Holder::Nobody)
            .count();
        if held + pool.releasing + untouched != self.total_blocks {
            return Err(format!(
                "invariant 1: {held} blocks held, {} being released, {untouched} untouched, \
                 of {} blocks",
                pool.releasing, self.total_blocks
            ));
        }
        Ok(())
    }

    /// Checks one segment slot's blocks, owner entries and byte counts, marking its blocks
    /// in `holders`.
    fn check_segment<'f>(
        &self,
        index: u32,
        holders: &mut [Holder],
        is_live: Option<&mut (dyn FnMut(u64) -> bool + 'f)>,
    ) -> Result<(), String> {
        let (Some(segment), Some(blocks)) = (self.segment(index), self.blocks_of(index)) else {
            return Err(format!("segment {index} has no slot"));
        };
        let state = segment.state.load(Ordering::Acquire);
        if state == STATE_FREE {
            return Ok(());
        }
        let block_count = segment.block_count.load(Ordering::Acquire) as usize;
        for (position, slot) in blocks.iter().take(block_count).enumerate() {
            let block = slot.load(Ordering::Acquire);
            match holders.get_mut(block as usize) {
                Some(holder @ Holder::Nobody) => *holder = Holder::Segment(index),
                other => {
                    return Err(format!(
                        "invariant 1: block {block} of segment {index} is held by {other:?}"
                    ))
                }
            }
            let owner = self
                .owners
                .get(block as usize)
                .map(|o| o.load(Ordering::Acquire));
            if owner != Some(u64::from(index) << 32 | position as u64) {
                return Err(format!(
                    "invariant 6: block {block} owner {owner:?}, not segment {index} at {position}"
                ));
            }
        }
        let used = segment.used_bytes.load(Ordering::Acquire);
        let attached = (block_count * self.block_bytes) as u64;
        if used > attached || used > self.segment_bytes as u64 {
            return Err(format!(
                "invariant 2: segment {index} used {used} bytes, {attached} attached"
            ));
        }
        let live = segment.live_bytes.load(Ordering::Acquire);
        if !u64::try_from(live).is_ok_and(|live| live <= used) {
            return Err(format!(
                "invariant 3: segment {index} live {live} of {used} used"
            ));
        }
        if let (Some(is_live), false) = (is_live, state == STATE_RETIRED) {
            let mut counted = 0u64;
            self.for_each_object(index, |location, header| {
                if is_live(location) {
                    counted += header.object_len();
                }
                true
            });
            if u64::try_from(live) != Ok(counted) {
                return Err(format!(
                    "invariant 3: segment {index} counts {live} live bytes, its referenced \
                     objects hold {counted}"
                ));
            }
        }
        Ok(())
    }

    /// Test hook: adds `delta` to the live bytes of the segment holding `location`, so a test
    /// can break invariant 3 and watch the check fire.
    #[cfg(test)]
    pub(crate) fn skew_live_bytes(&self, location: u64, delta: i64) {
        if let Some(segment) = self
            .split_location(location)
            .and_then(|(index, _)| self.segment(index))
        {
            segment.live_bytes.fetch_add(delta, Ordering::Relaxed);
        }
    }
}
