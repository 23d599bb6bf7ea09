//! A partition's table of buckets (mapped zero-filled pages) and the two-choice bucket
//! functions that place a key hash in it.
//!
//! Thread-safety contract: a `Table` is shared by reference under the epoch; its buckets carry
//! their own locks. The bucket functions are pure.
//!
//! Invariants:
//! 1. A table has `len >= 2` buckets, so a key's two buckets always differ.
//! 2. `first_bucket` and `second_bucket` are `< len` for every hash.
//! 3. `replaced` is set only after the partition points to the new table, and never cleared.

use super::bucket::Bucket;
use super::resize::Placement;
use super::{Layout, MAX_BUCKET_ENTRIES};
use crate::error::Result;
use crate::sync::{AtomicBool, Ordering};

/// Maps 40 hash bits uniformly onto `0..buckets` (multiply-shift, so any table size works).
pub(super) fn scale(bits40: u64, buckets: usize) -> usize {
    ((u128::from(bits40 & ((1 << 40) - 1)) * buckets as u128) >> 40) as usize
}

/// First bucket of a key: hash bits 0..40 (bits 40..48 pick the partition, the top bits are the
/// tag).
pub(super) fn first_bucket(hash: u64, buckets: usize) -> usize {
    scale(hash, buckets)
}

/// Second bucket of a key: a remix of the hash, never equal to the first (tables have at least
/// two buckets).
pub(super) fn second_bucket(hash: u64, buckets: usize) -> usize {
    let mixed = (hash ^ (hash >> 29))
        .wrapping_mul(0xbf58_476d_1ce4_e5b9)
        .rotate_left(31);
    let second = scale(mixed >> 24, buckets);
    let first = first_bucket(hash, buckets);
    if second == first {
        (second + 1) % buckets.max(1)
    } else {
        second
    }
}

/// The bucket of a key other than `this` (for moving its entry).
pub(super) fn other_bucket(hash: u64, buckets: usize, this: usize) -> usize {
    let first = first_bucket(hash, buckets);
    if first == this {
        second_bucket(hash, buckets)
    } else {
        first
    }
}

/// Next size to try when a rebuild at `buckets` did not fit every entry.
pub(super) fn retry_size(buckets: usize) -> usize {
    buckets + buckets / 16 + 1
}

/// Bucket memory of a table: mapped zero-filled pages (all zeros is an empty, unlocked bucket),
/// unmapped when the table is dropped. Loom atomics cannot live in zeroed memory, so loom builds
/// use a boxed slice.
#[cfg(not(loom))]
pub(super) type BucketStorage = crate::pages::Pages;
#[cfg(loom)]
pub(super) type BucketStorage = Box<[Bucket]>;

#[derive(Debug)]
pub(super) struct Table {
    pub(super) storage: BucketStorage,
    pub(super) len: usize,
    pub(super) layout: Layout,
    /// Set once a newer table was published (invariant 5).
    pub(super) replaced: AtomicBool,
}

impl Table {
    /// A table of `buckets` buckets (at least two, so a key's two buckets differ).
    pub(super) fn new(buckets: usize, layout: Layout) -> Result<Table> {
        let len = buckets.max(2);
        #[cfg(not(loom))]
        let storage = crate::pages::Pages::zeroed(len * std::mem::size_of::<Bucket>())?;
        #[cfg(loom)]
        let storage = (0..len).map(|_| Bucket::new()).collect();
        Ok(Table {
            storage,
            len,
            layout,
            replaced: AtomicBool::new(false),
        })
    }

    pub(super) fn buckets(&self) -> &[Bucket] {
        #[cfg(not(loom))]
        // SAFETY: the storage holds at least `len * 64` zero-filled, page-aligned bytes, and all
        // zeros is a valid `Bucket` (eight `AtomicU64`s). The slice lives as long as the table
        // and is only accessed through atomics.
        let buckets =
            unsafe { std::slice::from_raw_parts(self.storage.as_ptr().cast::<Bucket>(), self.len) };
        #[cfg(loom)]
        let buckets = &self.storage;
        buckets
    }

    /// The bucket at `index` modulo the table size.
    pub(super) fn bucket(&self, index: usize) -> &Bucket {
        // Cannot panic: `len` is the (non-zero) length of `buckets()`, so the index is in range.
        #[allow(clippy::indexing_slicing)]
        &self.buckets()[index % self.len]
    }

    /// Writes a placement computed by [`Placement::place`] into this private (not yet shared)
    /// table: bucket by bucket, whole words at a time.
    pub(super) fn store_placement(&self, placement: &Placement, pairs: &[[u64; 2]]) {
        let layout = self.layout;
        let mut entries = [0u64; MAX_BUCKET_ENTRIES];
        for (index, bucket) in self.buckets().iter().enumerate() {
            let members = placement.members(index);
            for (entry, &member) in entries.iter_mut().zip(members) {
                *entry = pairs.get(member as usize).map_or(0, |&[_, entry]| entry);
            }
            let words = layout.pack(entries.get(..members.len()).unwrap_or_default());
            for (word, value) in bucket.words.iter().zip(words) {
                word.store(value, Ordering::Relaxed);
            }
        }
    }
}
