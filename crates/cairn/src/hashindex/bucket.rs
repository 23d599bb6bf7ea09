//! One bucket: a 64-byte cache line whose first word's low 31 bits are a seqlock version (bit
//! 0 = locked) and whose remaining bits hold packed entries; its lock, its optimistic
//! (validated) read, and the choice of the emptier of two buckets.
//!
//! Thread-safety contract: any thread may read a bucket at any time without writing it
//! (`read_matching` retries until two loads of the version agree and it is unlocked); entries
//! change only under the bucket lock, taken by compare-and-swap of the first word.
//!
//! Invariants:
//! 1. The version is even exactly when the bucket is unlocked; every unlock adds 2 (mod 2^31).
//! 2. `set_entry` runs only while the bucket is locked (or the table is not yet shared), and
//!    never touches the version bits.
//! 3. A `BucketRead` holds only entries of one consistent state of the bucket.

use super::layout::mask;
use super::{Layout, LOCKED, MAX_BUCKET_ENTRIES, VERSION_MASK, WORDS};
use crate::sync::spin_wait;
use crate::sync::{fence, AtomicBool, AtomicU64, Ordering};

/// One cache line: the version in the low 31 bits of word 0, then packed entries.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Bucket {
    pub(super) words: [AtomicU64; WORDS],
}

impl Bucket {
    #[cfg(loom)]
    pub(super) fn new() -> Self {
        Bucket {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(super) fn first_word(&self) -> &AtomicU64 {
        let [first, ..] = &self.words;
        first
    }

    /// Locks the bucket, waiting while another writer holds it; returns false if its table was
    /// replaced (invariant 5: such a bucket is never unlocked again).
    pub(super) fn lock(&self, replaced: &AtomicBool) -> bool {
        let mut spins = 0u32;
        loop {
            let word = self.first_word().load(Ordering::Relaxed);
            if word & LOCKED != 0 {
                if replaced.load(Ordering::Acquire) {
                    return false;
                }
                spin_wait(&mut spins);
                continue;
            }
            if self
                .first_word()
                .compare_exchange_weak(word, word | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // Order the odd version before the entry stores that follow (seqlock writer).
                fence(Ordering::Release);
                return true;
            }
            spin_wait(&mut spins);
        }
    }

    /// Locks the bucket if it is unlocked, without waiting.
    pub(super) fn try_lock(&self) -> bool {
        let word = self.first_word().load(Ordering::Relaxed);
        if word & LOCKED != 0 {
            return false;
        }
        if self
            .first_word()
            .compare_exchange(word, word | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // Order the odd version before the entry stores that follow (seqlock writer).
            fence(Ordering::Release);
            true
        } else {
            false
        }
    }

    pub(super) fn unlock(&self) {
        let word = self.first_word().load(Ordering::Relaxed);
        debug_assert!(word & LOCKED != 0, "unlocking an unlocked bucket");
        let version = ((word & VERSION_MASK) + 1) & VERSION_MASK;
        self.first_word()
            .store((word & !VERSION_MASK) | version, Ordering::Release);
    }

    /// The bucket's words (the caller holds the lock, or the table is not shared yet).
    pub(super) fn load_words(&self) -> [u64; WORDS] {
        let mut words = [0u64; WORDS];
        for (copy, word) in words.iter_mut().zip(&self.words) {
            *copy = word.load(Ordering::Relaxed);
        }
        words
    }

    /// Entry `index` (the caller holds the lock, or the table is not shared yet).
    pub(super) fn entry(&self, layout: &Layout, index: usize) -> u64 {
        layout.entry_in(&self.load_words(), index)
    }

    /// Stores entry `index` (the caller holds the lock, or the table is not shared yet). Only
    /// the entry's bits change; the version bits of word 0 are left alone.
    pub(super) fn set_entry(&self, layout: &Layout, index: usize, entry: u64) {
        debug_assert!(index < layout.entries && entry <= mask(layout.entry_bits));
        let bit = layout.bit_offset(index);
        let (word, shift) = (bit / 64, u32::try_from(bit % 64).unwrap_or_default());
        let low_bits = layout.entry_bits.min(64 - shift);
        if let Some(slot) = self.words.get(word) {
            let field = mask(low_bits) << shift;
            let old = slot.load(Ordering::Relaxed);
            slot.store(
                (old & !field) | ((entry << shift) & field),
                Ordering::Relaxed,
            );
        }
        if low_bits < layout.entry_bits {
            if let Some(slot) = self.words.get(word + 1) {
                let field = mask(layout.entry_bits - low_bits);
                let old = slot.load(Ordering::Relaxed);
                slot.store(
                    (old & !field) | ((entry >> low_bits) & field),
                    Ordering::Relaxed,
                );
            }
        }
    }

    /// The first free slot and how many slots are free.
    pub(super) fn free_slots(&self, layout: &Layout) -> Option<(usize, usize)> {
        let words = self.load_words();
        let mut first = None;
        let mut count = 0;
        for index in 0..layout.entries {
            if layout.entry_in(&words, index) == 0 {
                count += 1;
                first.get_or_insert(index);
            }
        }
        first.map(|slot| (slot, count))
    }

    pub(super) fn free_slot(&self, layout: &Layout) -> Option<usize> {
        self.free_slots(layout).map(|(slot, _)| slot)
    }

    /// Optimistic read (seqlock reader): the locations of the entries whose tag is `tag`, as
    /// they were at one instant while the bucket was unlocked, or `None` if its table was
    /// replaced. Retries while a writer holds the bucket or changed it during the read.
    pub(super) fn read_matching(
        &self,
        layout: &Layout,
        tag: u64,
        replaced: &AtomicBool,
    ) -> Option<BucketRead> {
        let mut spins = 0u32;
        loop {
            let before = self.first_word().load(Ordering::Acquire);
            if before & LOCKED != 0 {
                if replaced.load(Ordering::Acquire) {
                    return None;
                }
                spin_wait(&mut spins);
                continue;
            }
            let mut words = [before; WORDS];
            for (copy, word) in words.iter_mut().zip(&self.words).skip(1) {
                *copy = word.load(Ordering::Relaxed);
            }
            // Seqlock reader: the word loads must complete before the second version load.
            fence(Ordering::Acquire);
            if self.first_word().load(Ordering::Relaxed) == before {
                let mut candidates = [0u64; MAX_BUCKET_ENTRIES];
                let mut count = 0;
                for index in 0..layout.entries {
                    let entry = layout.entry_in(&words, index);
                    if entry != 0 && layout.entry_tag(entry) == tag {
                        if let Some(candidate) = candidates.get_mut(count) {
                            *candidate = layout.entry_location(entry);
                            count += 1;
                        }
                    }
                }
                return Some(BucketRead {
                    first_word: before,
                    candidates,
                    count,
                });
            }
            #[cfg(all(test, loom))]
            super::loom_tests::note_retry();
            spin_wait(&mut spins);
        }
    }
}

/// Stores `entry` in the first free slot of the bucket with the most free slots (power of
/// two choices: the load stays even, so tables fill far before they must grow); false when
/// every bucket is full. The caller holds the buckets (locked, or a table not yet shared).
pub(super) fn store_in_emptier<'a>(
    layout: &Layout,
    buckets: impl Iterator<Item = &'a Bucket>,
    entry: u64,
) -> bool {
    let mut best: Option<(&Bucket, usize, usize)> = None;
    for bucket in buckets {
        if let Some((slot, count)) = bucket.free_slots(layout) {
            if best.is_none_or(|(_, _, best_count)| count > best_count) {
                best = Some((bucket, slot, count));
            }
        }
    }
    match best {
        Some((bucket, slot, _)) => {
            bucket.set_entry(layout, slot, entry);
            true
        }
        None => false,
    }
}

/// A consistent copy of one bucket's entries with a given tag.
#[derive(Debug, Clone, Copy)]
pub(super) struct BucketRead {
    pub(super) first_word: u64,
    pub(super) candidates: [u64; MAX_BUCKET_ENTRIES],
    pub(super) count: usize,
}
