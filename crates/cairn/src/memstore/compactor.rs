//! The store's compactor: rounds that pick victim segments by cost-benefit and pack their
//! live objects into a fresh segment, re-pointing the index; the background loop that runs
//! them; and reclaiming retired segments and index tables once the epoch allows.
//!
//! Thread-safety contract: at most `compaction_slots` rounds run at once (a slot mutex each);
//! a round takes only bucket locks and leaf mutexes, never a head a writer may hold (it seals
//! only heads it can try-lock), so writers waiting for space cannot stall it.
//!
//! Invariants (the store's numbers):
//! 3. An entry is re-pointed only if it still holds the old location, under its bucket locks;
//!    a victim is retired only after all its live objects moved or were found dead.

use super::{
    destination_offset, lock_ignoring_poison, Inner, MAX_VICTIMS_PER_ROUND,
    PRESSURE_MAX_UTILIZATION,
};
use crate::hashindex::hash_key;
use crate::logmem::Head;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Inner {
    /// Seals heads nobody is using (try-lock) so compaction can reach their garbage.
    pub(super) fn seal_idle_heads(&self, even_without_garbage: bool) {
        for head in &self.heads {
            if let Some(mut head) = super::try_lock_ignoring_poison(&head.0) {
                if even_without_garbage || self.log.head_has_garbage(&head) {
                    self.log.seal(&mut head);
                }
            }
        }
    }

    pub(super) fn reclaim(&self) {
        if self.log.reclaim(&self.epochs) > 0 {
            self.wake.notify_all();
        }
        self.log.release_idle();
        self.index.collect_retired(&self.epochs);
    }

    /// One compaction round: picks victims by cost-benefit and packs their live objects into one
    /// fresh segment. Returns whether any segment was compacted.
    pub(super) fn compact_round(&self, max_utilization: f64) -> bool {
        let Some(slot) = self
            .compaction_slots
            .iter()
            .find_map(|slot| slot.try_lock().ok())
        else {
            return false;
        };
        let segment_bytes = self.log.max_object_bytes();
        let mut destination = Head::new();
        let mut compacted = 0;
        let mut key = Vec::new();
        let mut value = Vec::new();
        for _ in 0..MAX_VICTIMS_PER_ROUND {
            let room =
                segment_bytes.saturating_sub(destination_offset(&destination, segment_bytes));
            let limit = if compacted == 0 { segment_bytes } else { room };
            let Some((victim, _live)) = self.log.pick_victim(max_utilization, limit) else {
                break;
            };
            if !self.relocate(victim, &mut destination, &mut key, &mut value) {
                // Out of destination space even in the reserve: give the victim back.
                self.log.unpick(victim);
                break;
            }
            self.log.retire(victim, &self.epochs);
            compacted += 1;
            self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        }
        self.log.seal(&mut destination);
        drop(slot);
        if compacted > 0 {
            self.reclaim();
        }
        compacted > 0
    }

    /// Copies the live objects of `victim` to `destination`, re-pointing the index. Returns false
    /// if destination space ran out (the victim keeps its remaining live objects).
    pub(super) fn relocate(
        &self,
        victim: u32,
        destination: &mut Head,
        key: &mut Vec<u8>,
        value: &mut Vec<u8>,
    ) -> bool {
        let mut complete = true;
        self.log.for_each_object(victim, |location, header| {
            key.clear();
            value.clear();
            if self.log.read_key(location, key).is_none()
                || self.log.read_value(location, value).is_none()
            {
                return true;
            }
            let hash = hash_key(key);
            let guard = self.epochs.pin();
            if self
                .index
                .lookup(&guard, hash, |current| current == location)
                .is_none()
            {
                return true; // dead: overwritten or deleted
            }
            let size = header.object_len();
            if !self.log.reserve(destination, size, true) {
                self.log.seal(destination);
                if !self.log.reserve(destination, size, true) {
                    complete = false;
                    return false;
                }
            }
            let Some(new_location) = self.log.append(destination, key, value) else {
                complete = false;
                return false;
            };
            let pair = self.index.lock(&guard, hash);
            match pair.find(|current| current == location) {
                Some((slot, _)) => {
                    pair.replace(slot, new_location);
                    self.log.mark_dead(location);
                    self.counters
                        .relocated_bytes
                        .fetch_add(size, Ordering::Relaxed);
                }
                None => self.log.mark_dead(new_location),
            }
            true
        });
        complete
    }

    pub(super) fn compaction_loop(&self) {
        while !self.shutdown.load(Ordering::SeqCst) {
            self.reclaim();
            let waiting = self.waiting_writers.load(Ordering::SeqCst) > 0;
            let free_fraction =
                self.log.free_blocks() as f64 / self.log.total_blocks().max(1) as f64;
            if waiting || free_fraction < self.options.compaction_trigger_free_fraction {
                let max_utilization = if waiting {
                    PRESSURE_MAX_UTILIZATION
                } else {
                    self.options.background_max_utilization
                };
                if self.compact_round(max_utilization) {
                    continue;
                }
            } else if self.options.eager_max_utilization > 0.0
                && self.compact_round(self.options.eager_max_utilization)
            {
                continue;
            }
            let lock = lock_ignoring_poison(&self.wake_lock);
            if self.shutdown.load(Ordering::SeqCst) {
                break;
            }
            let timeout = if waiting {
                Duration::from_micros(500)
            } else {
                Duration::from_millis(5)
            };
            let _ = self.wake.wait_timeout(lock, timeout);
        }
    }
}
