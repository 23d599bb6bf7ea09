//! Resizing a partition: collecting its entries with their key hashes into scratch memory,
//! placing them into a new table of the target size, and publishing it while the old table is
//! retired under the epoch.
//!
//! Thread-safety contract: one resize per partition at a time (its `retired` mutex); the
//! resizer holds every old bucket locked, so writers of the partition wait and readers retry
//! until the new table is published; other partitions are untouched.
//!
//! Invariants:
//! 1. Every entry of the old table is in the new table, in one of its key's two buckets.
//! 2. The old table's buckets stay locked forever and `replaced` is set after the new table is
//!    published (hash-index invariant 5).
//! 3. A retired table is freed only once the epoch passed the stamp it was retired with.
//!    Until then it is held by raw pointer (`RetiredTable`), never as a `Box`: readers pinned
//!    before the swap still hold `&Table` into it, and a `Box` asserts it is unaliased.

use super::table::{first_bucket, other_bucket, retry_size, second_bucket, Table};
use super::{
    HashIndex, KeyHasher, Partition, GROW_TO_LOAD, MAX_BUCKETS_PER_PARTITION, PREFETCH_DISTANCE,
    SHRINK_BELOW_LOAD, SHRINK_TO_LOAD,
};
use crate::epoch::{EpochGuard, EpochTable};
use crate::error::{Error, Result};
use crate::sync::Ordering;

/// A table a resize replaced, freed when this is dropped (invariant 3). It stays a raw
/// pointer until then because readers pinned before the swap still hold `&Table` into it.
#[derive(Debug)]
pub(super) struct RetiredTable {
    pointer: std::ptr::NonNull<Table>,
}

impl RetiredTable {
    /// # Safety
    /// `pointer` came from `Box::into_raw` (or is null) and nothing else frees it.
    unsafe fn new(pointer: *mut Table) -> Option<RetiredTable> {
        std::ptr::NonNull::new(pointer).map(|pointer| RetiredTable { pointer })
    }

    /// Bytes of bucket memory the table holds.
    pub(super) fn bucket_bytes(&self) -> usize {
        // SAFETY: the table lives until `self` is dropped (`new`'s contract), and is only
        // read through shared references.
        let table = unsafe { self.pointer.as_ref() };
        table.len * std::mem::size_of::<super::bucket::Bucket>()
    }
}

impl Drop for RetiredTable {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` and only this value frees it; it is
        // dropped once the epoch passed its stamp or with the index (`&mut`), so no reader
        // still holds a reference into it.
        drop(unsafe { Box::from_raw(self.pointer.as_ptr()) });
    }
}

// SAFETY: a `RetiredTable` owns its table as a `Box<Table>` would, and `Table` is `Send`.
unsafe impl Send for RetiredTable {}

/// Zero-filled scratch memory for one resize. Mapped pages outside loom, so the memory goes
/// back to the operating system after each resize instead of staying in the heap.
#[derive(Debug)]
pub(super) struct Scratch<T> {
    #[cfg(not(loom))]
    pub(super) pages: crate::pages::Pages,
    #[cfg(loom)]
    pub(super) items: Vec<T>,
    pub(super) len: usize,
    pub(super) _items: std::marker::PhantomData<T>,
}

/// Plain values for which all-zero bytes are a valid value (the scratch element types).
///
/// # Safety
/// Implementors must be plain data for which every all-zero bit pattern is a valid value.
pub(super) unsafe trait Zeroable: Copy + Default {}
// SAFETY: integers and arrays of integers are valid as all zeros.
unsafe impl Zeroable for u8 {}
// SAFETY: as above.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for [u64; 2] {}

impl<T: Zeroable> Scratch<T> {
    pub(super) fn new(len: usize) -> Result<Scratch<T>> {
        Ok(Scratch {
            #[cfg(not(loom))]
            pages: crate::pages::Pages::zeroed(len.max(1) * std::mem::size_of::<T>())?,
            #[cfg(loom)]
            items: vec![T::default(); len],
            len,
            _items: std::marker::PhantomData,
        })
    }

    pub(super) fn as_slice(&self) -> &[T] {
        #[cfg(not(loom))]
        // SAFETY: the pages hold at least `len * size_of::<T>()` zero-filled, page-aligned bytes
        // owned by this scratch alone, and all zeros is a valid `T` (`Zeroable`).
        let items =
            unsafe { std::slice::from_raw_parts(self.pages.as_ptr().cast::<T>(), self.len) };
        #[cfg(loom)]
        let items = self.items.get(..self.len).unwrap_or_default();
        items
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [T] {
        #[cfg(not(loom))]
        // SAFETY: as in `as_slice`; the slice borrows `self` mutably, so it is the only one.
        let items =
            unsafe { std::slice::from_raw_parts_mut(self.pages.as_ptr().cast::<T>(), self.len) };
        #[cfg(loom)]
        let items = self.items.get_mut(..self.len).unwrap_or_default();
        items
    }
}

/// The entries of a table being resized with their key hashes: `[hash, entry]` pairs.
pub(super) fn collect_pairs(
    table: &Table,
    hasher: &mut impl KeyHasher,
) -> Result<(Scratch<[u64; 2]>, usize)> {
    let layout = table.layout;
    let mut scratch = Scratch::new(layout.slots(table.len))?;
    let pairs = scratch.as_mut_slice();
    let mut len = 0;
    for bucket in table.buckets() {
        let words = bucket.load_words();
        for index in 0..layout.entries {
            let entry = layout.entry_in(&words, index);
            if entry == 0 {
                continue;
            }
            if let Some(pair) = pairs.get_mut(len) {
                *pair = [0, entry];
                len += 1;
            }
        }
    }
    // Sort by location. Two reasons: the log is then read in address order (neighbouring
    // page-table entries), and the placement visits entries in an order unrelated to their
    // buckets. Visiting them in old-bucket order instead places the entries of one old bucket,
    // which mostly land in the same new bucket, one after another, and measurably spoils the
    // balance the emptier-of-two choice relies on (P1 at 256 MiB: 12 % more resizes).
    let pairs = pairs.get_mut(..len).unwrap_or_default();
    pairs.sort_unstable_by_key(|&[_, entry]| layout.entry_location(entry));
    for ahead in pairs.iter().take(PREFETCH_DISTANCE) {
        hasher.prefetch(layout.entry_location(ahead[1]));
    }
    for index in 0..pairs.len() {
        if let Some(ahead) = pairs.get(index + PREFETCH_DISTANCE) {
            hasher.prefetch(layout.entry_location(ahead[1]));
        }
        if let Some(pair) = pairs.get_mut(index) {
            pair[0] = hasher.hash_at(layout.entry_location(pair[1]));
        }
    }
    Ok((scratch, len))
}

/// Where each entry goes in a table of `buckets` buckets, worked out in private memory with
/// every key hash at hand (so moving an entry needs no log read): per bucket a count and the
/// indexes of its entries in the pair list.
#[derive(Debug)]
pub(super) struct Placement {
    pub(super) buckets: usize,
    pub(super) per_bucket: usize,
    pub(super) counts: Scratch<u8>,
    pub(super) members: Scratch<u32>,
}

impl Placement {
    /// Places every pair: into the emptier of its two buckets, else by moving an entry of
    /// those buckets to its other bucket, directly or after moving one of *that* bucket's
    /// entries on (two steps of cuckoo hashing). `None` when some entry does not fit.
    pub(super) fn place(
        pairs: &[[u64; 2]],
        buckets: usize,
        per_bucket: usize,
    ) -> Result<Option<Placement>> {
        let mut placement = Placement {
            buckets,
            per_bucket,
            counts: Scratch::new(buckets)?,
            members: Scratch::new(buckets * per_bucket)?,
        };
        for (member, &[hash, _]) in pairs.iter().enumerate() {
            let member = u32::try_from(member).map_err(|_| {
                Error::InvalidArgument("hash index partition holds too many entries".into())
            })?;
            if !placement.insert(pairs, hash, member) {
                return Ok(None);
            }
        }
        Ok(Some(placement))
    }

    pub(super) fn count(&self, bucket: usize) -> usize {
        self.counts
            .as_slice()
            .get(bucket)
            .map_or(usize::MAX, |&count| usize::from(count))
    }

    pub(super) fn members(&self, bucket: usize) -> &[u32] {
        let start = bucket * self.per_bucket;
        self.members
            .as_slice()
            .get(start..start + self.count(bucket).min(self.per_bucket))
            .unwrap_or_default()
    }

    pub(super) fn push(&mut self, bucket: usize, member: u32) {
        let count = self.count(bucket);
        debug_assert!(count < self.per_bucket);
        if let Some(slot) = self
            .members
            .as_mut_slice()
            .get_mut(bucket * self.per_bucket + count)
        {
            *slot = member;
        }
        if let Some(count) = self.counts.as_mut_slice().get_mut(bucket) {
            *count += 1;
        }
    }

    pub(super) fn set(&mut self, bucket: usize, slot: usize, member: u32) {
        if let Some(place) = self
            .members
            .as_mut_slice()
            .get_mut(bucket * self.per_bucket + slot)
        {
            *place = member;
        }
    }

    pub(super) fn hash_of(pairs: &[[u64; 2]], member: u32) -> u64 {
        pairs.get(member as usize).map_or(0, |&[hash, _]| hash)
    }

    pub(super) fn insert(&mut self, pairs: &[[u64; 2]], hash: u64, member: u32) -> bool {
        let (first, second) = (
            first_bucket(hash, self.buckets),
            second_bucket(hash, self.buckets),
        );
        let emptier = if self.count(first) <= self.count(second) {
            first
        } else {
            second
        };
        if self.count(emptier) < self.per_bucket {
            self.push(emptier, member);
            return true;
        }
        // One step: move an entry of a full bucket to its other bucket.
        for bucket in [first, second] {
            for slot in 0..self.per_bucket {
                let Some(&victim) = self.members(bucket).get(slot) else {
                    break;
                };
                let other = other_bucket(Self::hash_of(pairs, victim), self.buckets, bucket);
                if self.count(other) < self.per_bucket {
                    self.push(other, victim);
                    self.set(bucket, slot, member);
                    return true;
                }
            }
        }
        // Two steps: make room in the victim's other bucket first.
        for bucket in [first, second] {
            for slot in 0..self.per_bucket {
                let Some(&victim) = self.members(bucket).get(slot) else {
                    break;
                };
                let middle = other_bucket(Self::hash_of(pairs, victim), self.buckets, bucket);
                for middle_slot in 0..self.per_bucket {
                    let Some(&second_victim) = self.members(middle).get(middle_slot) else {
                        break;
                    };
                    let last =
                        other_bucket(Self::hash_of(pairs, second_victim), self.buckets, middle);
                    if last != bucket && self.count(last) < self.per_bucket {
                        self.push(last, second_victim);
                        self.set(middle, middle_slot, victim);
                        self.set(bucket, slot, member);
                        return true;
                    }
                }
            }
        }
        false
    }
}

impl HashIndex {
    /// Grows the table of the partition holding `hash` to about `GROW_TO_LOAD` (unless
    /// someone already made room for the key since the caller's insert failed). `hasher` must
    /// return the key hash of the object at a location. Fails only when the partition reached
    /// its size limit or memory for the new table could not be mapped.
    pub fn grow(
        &self,
        guard: &EpochGuard<'_>,
        epochs: &EpochTable,
        hash: u64,
        mut hasher: impl KeyHasher,
    ) -> Result<()> {
        let partition = self.partition(hash);
        let mut retired = partition
            .retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Someone else may have resized the table since the caller's insert failed; retry then.
        {
            let probe = self.lock(guard, hash);
            if probe.has_room() {
                return Ok(());
            }
        }
        let old = self.table(partition, guard);
        let entries = partition.entries.load(std::sync::atomic::Ordering::Relaxed);
        // At least ~3 % more: an insert that failed below GROW_TO_LOAD (bad luck, or a
        // `make_room` that could not lock a third bucket) must not make every later failure
        // rebuild the partition for one more bucket.
        let target = self
            .layout
            .buckets_for(entries, GROW_TO_LOAD)
            .max(old.len + old.len / 32 + 1);
        self.resize(partition, &mut retired, guard, epochs, target, &mut hasher)
    }

    /// Shrinks the table of the partition holding `hash` to about `SHRINK_TO_LOAD` when deletes
    /// left it under `SHRINK_BELOW_LOAD` (and it is larger than its initial size). Does nothing
    /// if another thread is resizing that partition. Call it pinned but without bucket locks.
    pub fn shrink_if_sparse(
        &self,
        guard: &EpochGuard<'_>,
        epochs: &EpochTable,
        hash: u64,
        mut hasher: impl KeyHasher,
    ) -> Result<()> {
        let partition = self.partition(hash);
        if !self.is_sparse(partition, self.table(partition, guard)) {
            return Ok(());
        }
        let mut retired = match partition.retired.try_lock() {
            Ok(retired) => retired,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
        };
        let old = self.table(partition, guard);
        if !self.is_sparse(partition, old) {
            return Ok(());
        }
        let entries = partition.entries.load(std::sync::atomic::Ordering::Relaxed);
        // `is_sparse` guarantees `old.len > min_buckets`, so this shrinks by at least one bucket.
        let target = self
            .layout
            .buckets_for(entries, SHRINK_TO_LOAD)
            .min(old.len - 1)
            .max(self.min_buckets);
        self.resize(partition, &mut retired, guard, epochs, target, &mut hasher)
    }

    pub(super) fn is_sparse(&self, partition: &Partition, table: &Table) -> bool {
        let entries = partition.entries.load(std::sync::atomic::Ordering::Relaxed);
        table.len > self.min_buckets
            && (entries as f64) < SHRINK_BELOW_LOAD * self.layout.slots(table.len) as f64
    }

    /// Replaces the partition's current table by one of `target` buckets (more if the entries
    /// do not fit). The caller holds the partition's resize mutex (`retired`).
    pub(super) fn resize(
        &self,
        partition: &Partition,
        retired: &mut Vec<(u64, RetiredTable)>,
        guard: &EpochGuard<'_>,
        epochs: &EpochTable,
        target: usize,
        hasher: &mut impl KeyHasher,
    ) -> Result<()> {
        #[cfg(not(loom))]
        let started = std::time::Instant::now();
        let old_pointer = partition.table.load(Ordering::Acquire);
        let old = self.table(partition, guard);
        for bucket in old.buckets() {
            // Cannot fail: only a resizer replaces tables, and we hold the partition's resize
            // mutex and loaded the current table under it.
            let _ = bucket.lock(&old.replaced);
        }
        let unlock_all = || {
            for bucket in old.buckets() {
                bucket.unlock();
            }
        };
        let rebuilt = self.rebuild(old, target, hasher);
        let (new_table, rehashed) = match rebuilt {
            Ok(rebuilt) => rebuilt,
            Err(error) => {
                unlock_all();
                return Err(error);
            }
        };
        if new_table.len >= old.len {
            self.total_buckets
                .fetch_add(new_table.len - old.len, Ordering::Relaxed);
        } else {
            self.total_buckets
                .fetch_sub(old.len - new_table.len, Ordering::Relaxed);
        }
        let new_pointer = Box::into_raw(Box::new(new_table));
        partition.table.store(new_pointer, Ordering::Release);
        // Invariant 5: flag the old table after publishing the new one; its buckets stay
        // locked, so nobody changes them again.
        old.replaced.store(true, Ordering::Release);
        let stamp = epochs.advance();
        // SAFETY: `old_pointer` came from `Box::into_raw` and is no longer reachable from the
        // partition (replaced above); the retired list alone frees it, after the epoch passes
        // `stamp` (invariant 3).
        if let Some(old) = unsafe { RetiredTable::new(old_pointer) } {
            retired.push((stamp, old));
        }
        Self::free_retired(retired, epochs);
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        self.resizes.fetch_add(1, relaxed);
        self.rehashed.fetch_add(rehashed, relaxed);
        #[cfg(not(loom))]
        self.resize_nanos.fetch_add(
            usize::try_from(started.elapsed().as_nanos()).unwrap_or(usize::MAX),
            relaxed,
        );
        Ok(())
    }

    /// A new table of at least `target` buckets holding every entry of `old` (whose buckets
    /// the caller holds locked), and how many entries that was.
    pub(super) fn rebuild(
        &self,
        old: &Table,
        target: usize,
        hasher: &mut impl KeyHasher,
    ) -> Result<(Table, usize)> {
        let (pairs, len) = collect_pairs(old, hasher)?;
        let pairs = pairs.as_slice().get(..len).unwrap_or_default();
        let mut size = target.max(2);
        loop {
            if size > MAX_BUCKETS_PER_PARTITION {
                return Err(Error::InvalidArgument(format!(
                    "hash index partition reached its limit of {MAX_BUCKETS_PER_PARTITION} buckets"
                )));
            }
            if let Some(placement) = Placement::place(pairs, size, self.layout.entries)? {
                let table = Table::new(size, self.layout)?;
                table.store_placement(&placement, pairs);
                return Ok((table, len));
            }
            size = retry_size(size);
        }
    }

    pub(super) fn free_retired(retired: &mut Vec<(u64, RetiredTable)>, epochs: &EpochTable) {
        if retired.is_empty() {
            return;
        }
        let safe_below = epochs.safe_below();
        retired.retain(|(stamp, _)| *stamp >= safe_below);
    }

    /// Frees tables retired by resizes that no pinned thread can still read. Must not be called
    /// while the calling thread is pinned (its own pin would keep them alive, harmlessly).
    pub fn collect_retired(&self, epochs: &EpochTable) {
        for partition in &self.partitions {
            if let Ok(mut retired) = partition.retired.try_lock() {
                Self::free_retired(&mut retired, epochs);
            }
        }
    }
}
