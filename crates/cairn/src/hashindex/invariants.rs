//! Checks of the hash index's numbered invariants (see [`crate::hashindex`]) over a quiet
//! index: every current bucket unlocked with an even version, every entry non-zero-tagged,
//! in one of its key's two buckets of the right partition, findable by `lookup`, and counted.
//!
//! Thread-safety contract: `check_invariants` reads buckets without locking them; it is meant
//! for an index no writer is changing (tests, or a store between operations) and would report
//! a bucket a concurrent writer holds as locked.
//!
//! Invariants checked (the hash index's numbers):
//! 1. No stored entry has a zero tag.
//! 2. Each entry sits in `first_bucket` or `second_bucket` of its key hash, in the partition
//!    that hash selects, and `lookup` finds its location.
//! 3. Every bucket of a current table is unlocked (version even).
//! 5. No current table is marked `replaced`.
//! 6. A partition's entry count equals the entries in its table.

use super::table::{first_bucket, second_bucket};
use super::{HashIndex, KeyHasher};
use crate::epoch::EpochGuard;
use crate::sync::Ordering;

impl HashIndex {
    /// Checks invariants 1, 2, 3, 5 and 6 on a quiet index; `hasher` gives the key hash of the
    /// object at a location, as for resizing.
    pub fn check_invariants(
        &self,
        guard: &EpochGuard<'_>,
        mut hasher: impl KeyHasher,
    ) -> Result<(), String> {
        // Every bucket first: the entry checks below look keys up, and a lookup waits for a
        // locked bucket, so a bucket left locked must be found before any lookup reaches it.
        self.check_unlocked(guard)?;
        for (number, partition) in self.partitions.iter().enumerate() {
            let table = self.table(partition, guard);
            if table.replaced.load(Ordering::Acquire) {
                return Err(format!(
                    "invariant 5: partition {number}'s table is replaced"
                ));
            }
            let layout = &table.layout;
            let mut entries = 0usize;
            for (index, bucket) in table.buckets().iter().enumerate() {
                for slot in 0..layout.entries {
                    let entry = bucket.entry(layout, slot);
                    if entry == 0 {
                        continue;
                    }
                    entries += 1;
                    if layout.entry_tag(entry) == 0 {
                        return Err(format!("invariant 1: zero tag in bucket {index}"));
                    }
                    let location = layout.entry_location(entry);
                    let hash = hasher.hash_at(location);
                    if layout.entry_tag(entry) != layout.tag_of(hash) {
                        return Err(format!("invariant 2: location {location} has a wrong tag"));
                    }
                    let home = [
                        first_bucket(hash, table.len),
                        second_bucket(hash, table.len),
                    ];
                    if !std::ptr::eq(self.partition(hash), &raw const **partition)
                        || !home.contains(&index)
                    {
                        return Err(format!(
                            "invariant 2: location {location} in partition {number} bucket \
                             {index}, not in one of its buckets {home:?}"
                        ));
                    }
                    if self.lookup(guard, hash, |found| found == location) != Some(location) {
                        return Err(format!("invariant 2: location {location} is not found"));
                    }
                }
            }
            let counted = partition.entries.load(std::sync::atomic::Ordering::Relaxed);
            if counted != entries {
                return Err(format!(
                    "invariant 6: partition {number} counts {counted} entries, holds {entries}"
                ));
            }
        }
        Ok(())
    }

    /// Invariant 3 on a quiet index: no bucket is locked.
    fn check_unlocked(&self, guard: &EpochGuard<'_>) -> Result<(), String> {
        for (number, partition) in self.partitions.iter().enumerate() {
            let table = self.table(partition, guard);
            for (index, bucket) in table.buckets().iter().enumerate() {
                let version = bucket.first_word().load(Ordering::Acquire);
                if version & super::LOCKED != 0 {
                    return Err(format!(
                        "invariant 3: partition {number} bucket {index} is locked ({version:#x})"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Test hook: locks bucket `index` of partition 0's table and leaves it locked, so a test
    /// can break invariant 3 and watch the check fire.
    #[cfg(all(test, not(loom)))]
    pub(super) fn leave_bucket_locked(&self, guard: &EpochGuard<'_>, index: usize) -> bool {
        match self.partitions.first() {
            Some(partition) => self.table(partition, guard).bucket(index).try_lock(),
            None => false,
        }
    }

    /// Test hook: writes an entry for `(hash, location)` into a bucket of partition 0 that is
    /// neither of the key's buckets (breaking invariant 2), uncounted.
    #[cfg(all(test, not(loom)))]
    pub(super) fn misplace_entry(&self, guard: &EpochGuard<'_>, hash: u64, location: u64) {
        let Some(partition) = self.partitions.first() else {
            return;
        };
        let table = self.table(partition, guard);
        let home = [
            first_bucket(hash, table.len),
            second_bucket(hash, table.len),
        ];
        if let Some(index) = (0..table.len).find(|index| !home.contains(index)) {
            let bucket = table.bucket(index);
            let entry = table.layout.make_entry(hash, location);
            if let Some(slot) = bucket.free_slot(&table.layout) {
                bucket.set_entry(&table.layout, slot, entry);
                partition
                    .entries
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}
