//! The free-block pool: handing blocks to segments (keeping the reserve for compaction),
//! taking them back, and returning idle free blocks' memory to the operating system.
//!
//! Thread-safety contract: the pool is one mutex (`LogMemory::pool`), held only for list
//! operations; `madvise` calls run outside it on blocks counted as `releasing`.
//!
//! Invariants (the log's numbers):
//! 1. A free block is in exactly one of `resident`, `released`, the untouched range, or the
//!    `releasing` count; `free_blocks` equals their total.
//! 4. `allocate_blocks` without `use_reserve` never takes the last `reserve_blocks` blocks.
//! 7. Pages are released only for blocks counted in `releasing`.

use super::LogMemory;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

#[derive(Debug)]
pub(super) struct BlockPool {
    /// Free blocks whose pages are still resident, oldest first, with the tick (milliseconds
    /// since the log was created) they were freed at; reused newest first.
    pub(super) resident: VecDeque<(u32, u64)>,
    /// Free blocks whose pages were handed back to the operating system.
    pub(super) released: Vec<u32>,
    /// Free blocks taken out of `resident` by a thread that is releasing their pages.
    pub(super) releasing: usize,
    /// Blocks `untouched_next..total_blocks` were never handed out.
    pub(super) untouched_next: u32,
}

impl LogMemory {
    pub(super) fn allocate_blocks(
        &self,
        count: usize,
        use_reserve: bool,
        out: &mut Vec<u32>,
    ) -> bool {
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
    pub(super) fn tick(&self) -> u64 {
        u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Returns blocks to the free pool (resident), then releases the oldest resident free blocks
    /// beyond `resident_free_bytes`.
    pub(super) fn release_blocks(&self, blocks: impl Iterator<Item = u32>) {
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
    pub(super) fn take_for_release(pool: &mut BlockPool, count: usize) -> Vec<u32> {
        let count = count.min(pool.resident.len());
        pool.releasing += count;
        pool.resident
            .drain(..count)
            .map(|(block, _)| block)
            .collect()
    }

    pub(super) fn release_taken(&self, mut blocks: Vec<u32>) {
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
}

/// Sorts block indexes and yields `(first block, count)` for each run of adjacent ones.
pub(super) fn runs(blocks: &mut [u32]) -> Vec<(u32, usize)> {
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
