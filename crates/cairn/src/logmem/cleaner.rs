//! The log's books and its cleaner's side: live-byte accounting, cost-benefit victim choice,
//! walking a victim's objects, and retiring segments until the epoch lets them be reused.
//!
//! Thread-safety contract: live-byte counts are atomics any writer updates; the candidate,
//! retired and free-segment lists are leaf mutexes. A segment being compacted is owned by the
//! compactor that picked it.
//!
//! Invariants (the log's numbers):
//! 3. `live_bytes` of a segment is the sum of its objects the index references.
//! 5. A retired segment is freed only when `epochs.safe_below() > stamp`.

use super::object::Header;
use super::{LogMemory, STATE_COMPACTING, STATE_FREE, STATE_RETIRED, STATE_SEALED};
use crate::epoch::EpochTable;
use std::sync::atomic::Ordering;

/// `bytes` as a signed delta for a segment's live-byte counter. An object is at most one
/// segment long, far below `i64::MAX`; saturating keeps even a wrong length from wrapping the
/// counter's sign.
pub(super) fn signed_bytes(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

impl LogMemory {
    /// Records that the object at `location` is no longer referenced.
    pub fn mark_dead(&self, location: u64) {
        if let Some((_, segment, _, header)) = self.object_at(location) {
            segment
                .live_bytes
                .fetch_sub(signed_bytes(header.object_len()), Ordering::Relaxed);
        }
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
            let live = u64::try_from(segment.live_bytes.load(Ordering::Relaxed)).unwrap_or(0);
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
}
