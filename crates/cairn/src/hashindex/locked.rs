//! [`LockedPair`]: both buckets of one key locked for a write, with the operations a writer
//! needs (find, replace, remove, insert, make room by moving an entry to its other bucket).
//!
//! Thread-safety contract: a `LockedPair` is the only writer of its buckets while it lives;
//! readers keep reading them optimistically and retry across its changes. It unlocks on drop.
//!
//! Invariants:
//! 1. The two buckets were locked in ascending index order (hash-index invariant 4); a third
//!    bucket is only try-locked, by `make_room`.
//! 2. The partition's entry count changes exactly when an entry is added or removed here.

use super::bucket::{store_in_emptier, Bucket};
use super::table::{other_bucket, Table};
use super::KeyHasher;
use std::sync::atomic::AtomicUsize as CountAtomic;

/// Where a key's entry was found while holding its buckets' locks.
#[derive(Debug, Clone, Copy)]
pub struct EntrySlot {
    pub(super) bucket: usize,
    pub(super) entry: usize,
}

/// Both buckets of one key, locked; unlocks on drop.
#[derive(Debug)]
pub struct LockedPair<'index> {
    pub(super) table: &'index Table,
    pub(super) entries: &'index CountAtomic,
    pub(super) buckets: [usize; 2],
    pub(super) distinct: bool,
    pub(super) hash: u64,
}

impl LockedPair<'_> {
    pub(super) fn bucket(&self, which: usize) -> Option<&Bucket> {
        self.buckets
            .get(which)
            .map(|&index| self.table.bucket(index))
    }

    pub(super) fn bucket_count(&self) -> usize {
        if self.distinct {
            2
        } else {
            1
        }
    }

    /// Finds the key's entry: the first entry with the key's tag for which `matches` is true.
    pub fn find(&self, mut matches: impl FnMut(u64) -> bool) -> Option<(EntrySlot, u64)> {
        let layout = &self.table.layout;
        let tag = layout.tag_of(self.hash);
        for which in 0..self.bucket_count() {
            let words = self.bucket(which)?.load_words();
            for index in 0..layout.entries {
                let entry = layout.entry_in(&words, index);
                if entry != 0
                    && layout.entry_tag(entry) == tag
                    && matches(layout.entry_location(entry))
                {
                    return Some((
                        EntrySlot {
                            bucket: which,
                            entry: index,
                        },
                        layout.entry_location(entry),
                    ));
                }
            }
        }
        None
    }

    /// Points an entry found by `find` at a new location.
    pub fn replace(&self, slot: EntrySlot, location: u64) {
        let layout = &self.table.layout;
        if let Some(bucket) = self.bucket(slot.bucket) {
            bucket.set_entry(layout, slot.entry, layout.make_entry(self.hash, location));
        }
    }

    /// Empties an entry found by `find`.
    pub fn remove(&self, slot: EntrySlot) {
        if let Some(bucket) = self.bucket(slot.bucket) {
            bucket.set_entry(&self.table.layout, slot.entry, 0);
            self.entries
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Adds a new entry (the caller checked with `find` that the key has none) to the emptier of
    /// the key's two buckets (power of two choices keeps the load even, so tables fill to a
    /// high load factor before they must grow); false when both buckets are full.
    pub fn insert(&self, location: u64) -> bool {
        let layout = &self.table.layout;
        let entry = layout.make_entry(self.hash, location);
        let stored = store_in_emptier(
            layout,
            (0..self.bucket_count()).filter_map(|which| self.bucket(which)),
            entry,
        );
        if stored {
            self.entries
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        stored
    }

    /// True when `insert` would succeed.
    pub fn has_room(&self) -> bool {
        (0..self.bucket_count()).any(|which| {
            self.bucket(which)
                .is_some_and(|bucket| bucket.free_slot(&self.table.layout).is_some())
        })
    }

    /// Frees a slot in one of the key's (full) buckets by moving one of their entries to that
    /// entry's other bucket, if that bucket can be locked without waiting and has room.
    /// `hasher` must return the key hash of the object at a location. True when `insert` will
    /// now succeed.
    ///
    /// The moved entry is written to its new bucket before it is erased from the old one, and
    /// both buckets are locked throughout, so a reader sees it in at least one of them or sees
    /// a version change and retries.
    pub fn make_room(&self, mut hasher: impl KeyHasher) -> bool {
        if self.has_room() {
            return true;
        }
        let layout = self.table.layout;
        let locked: [usize; 2] = self.buckets;
        for &this in locked.iter().take(self.bucket_count()) {
            let bucket = self.table.bucket(this);
            for slot in 0..layout.entries {
                let victim = bucket.entry(&layout, slot);
                if victim == 0 {
                    return true;
                }
                let victim_hash = hasher.hash_at(layout.entry_location(victim));
                if layout.tag_of(victim_hash) != layout.entry_tag(victim) {
                    continue;
                }
                let other = other_bucket(victim_hash, self.table.len, this);
                if locked.contains(&other) {
                    // Both of the victim's buckets are the key's, and both are full.
                    continue;
                }
                let other_bucket = self.table.bucket(other);
                // Invariant 4: never wait for a third lock while holding two.
                if !other_bucket.try_lock() {
                    continue;
                }
                let moved = match other_bucket.free_slot(&layout) {
                    Some(free) => {
                        other_bucket.set_entry(&layout, free, victim);
                        bucket.set_entry(&layout, slot, 0);
                        true
                    }
                    None => false,
                };
                other_bucket.unlock();
                if moved {
                    return true;
                }
            }
        }
        false
    }
}

impl Drop for LockedPair<'_> {
    fn drop(&mut self) {
        for which in (0..self.bucket_count()).rev() {
            if let Some(bucket) = self.bucket(which) {
                bucket.unlock();
            }
        }
    }
}
