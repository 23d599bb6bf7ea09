//! Optimistic concurrent hash index (Nibble §3.1, §4.2): maps a key's hash to a *location*
//! chosen by the caller (for MemStore: an object's byte address in the log).
//!
//! Job: the index stores no keys. Each entry is `tag | location`; the tag is the top bits of the
//! key hash and filters out most non-matching entries, and the caller's `matches(location)`
//! closure confirms a candidate by comparing the key stored in the log.
//!
//! Layout: the index is split into `partitions` (selected by hash bits 40..48), each owning a
//! table of any number (≥ 2) of buckets. A bucket is exactly one 64-byte cache line of eight
//! 64-bit words read and written atomically: bits 0..31 of the first word are the bucket's
//! *version* (bit 0 = locked) and the remaining 481 bits hold bit-packed entries. How many and
//! how wide is the index's [`Layout`], chosen at construction from the number of bits a location
//! needs: the densest of 13 × 37, 12 × 40, 10 × 48 and 7 × 64 bits whose tag keeps at least
//! [`MIN_TAG_BITS`] bits (tags are capped at 16 bits). A log of up to 2 GiB (31-bit locations)
//! gets 13 entries per bucket with 6-bit tags, 4.9 bytes per slot; wider locations fall back to
//! fewer, wider entries, and locations over 48 bits are refused at construction. A key may live in
//! either of two buckets (two-choice hashing), which lets a table fill to a high load factor
//! before it must grow.
//!
//! Protocol (seqlock per bucket):
//! - Readers never write shared memory. They load the first word (retrying while it is locked),
//!   copy the other seven words, fence, and load the first word again; if it changed they retry.
//!   The entries are then decoded from the private copy.
//! - Writers lock a bucket by compare-and-swap of the first word from unlocked (version even) to
//!   locked (version + 1), change entry bits with relaxed read-modify-write stores of whole
//!   words, and unlock by storing version + 2. A writer for a key locks both of its buckets,
//!   lower index first.
//! - A partition is resized (grown, or shrunk after many deletes) without stopping the other
//!   partitions: the resizer locks every bucket of the old table in index order, rehashes every
//!   entry into a new table (asking the caller for each location's key hash, with prefetch
//!   hints), publishes the new table, sets the old table's `replaced` flag, and leaves the old
//!   buckets locked for good. Anyone who finds a bucket locked checks `replaced` and then reloads
//!   the table pointer. The old table is retired under the epoch and unmapped once no pinned
//!   thread can be reading it.
//!
//! Thread-safety contract: `HashIndex` is `Send + Sync`. Every method taking an `EpochGuard`
//! must be called while the caller is pinned on the *same* `EpochTable` that is passed to
//! `grow`/`shrink_if_sparse`/`collect_retired`; the guard keeps tables (and the caller's log
//! memory) alive.
//!
//! Invariants:
//! 1. An entry is 0 (empty) or has a non-zero tag, so a stored entry is never 0.
//! 2. A key has at most one entry, in bucket `first_bucket(hash)` or `second_bucket(hash)` of
//!    its partition's current table. An entry moves between buckets only by `make_room` (written
//!    to its other bucket, then erased, with both locked) or by a resize into a new table.
//! 3. Entries change only while their bucket is locked (version odd), and every unlock advances
//!    the 31-bit version. A reader whose two loads of the first word agree therefore read
//!    consistent entries, unless the bucket was locked exactly a multiple of 2^30 times in
//!    between (the version wraps); like a Linux seqcount, the index accepts that a reader would
//!    have to stall for about a billion writes to one bucket to be fooled.
//! 4. Bucket locks are taken in ascending bucket index within one table, by writers and the
//!    resizer alike; a third bucket (`make_room`) is only ever try-locked. So lock waits cannot
//!    form a cycle. No bucket lock is held while waiting for anything else (log space,
//!    compaction, epochs).
//! 5. A replaced table's buckets stay locked forever; its `replaced` flag is set after the new
//!    table pointer was published, so whoever sees the flag reloads the new table.
//! 6. A partition's entry count is exact once its writers are done (updated under the bucket
//!    locks), but it only steers resizing; no lookup depends on it.

use crate::epoch::{CachePadded, EpochGuard, EpochTable};
use crate::error::{Error, Result};
use crate::sync::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::atomic::AtomicUsize as CountAtomic;
use std::sync::Mutex;

/// Bytes of one bucket (a cache line).
pub const BUCKET_BYTES: usize = 64;
/// Most entries a bucket can hold (the 13 × 37-bit layout).
pub const MAX_BUCKET_ENTRIES: usize = 13;
/// Fewest tag bits a layout may keep: with 6 bits, about 1 in 63 entries of a bucket is a false
/// candidate whose key must be compared in the log.
pub const MIN_TAG_BITS: u32 = 6;
/// Widest location the index can store.
pub const MAX_LOCATION_BITS: u32 = 48;
/// Most partitions an index may have (hash bits 40..48 select the partition).
pub const MAX_PARTITIONS: usize = 256;
/// Largest table (in buckets) of one partition: 2^28 buckets = 16 GiB, far beyond any capacity.
const MAX_BUCKETS_PER_PARTITION: usize = 1 << 28;
/// Load a partition is resized to when it grows: growing to 0.90 when an insert finds both
/// buckets and every one-step move full (around 0.97 for 13-entry buckets) keeps the load
/// between about 0.90 and 0.97, at the cost of rehashing each entry ~13 times while a table
/// grows from empty.
const GROW_TO_LOAD: f64 = 0.90;
/// A partition whose load falls below this after deletes is shrunk ...
const SHRINK_BELOW_LOAD: f64 = 0.5;
/// ... to this load.
const SHRINK_TO_LOAD: f64 = 0.90;
/// Entries whose log bytes are prefetched ahead of hashing them during a resize.
const PREFETCH_DISTANCE: usize = 16;
/// Spins on a locked bucket before yielding the processor.
#[cfg(not(loom))]
const SPINS_BEFORE_YIELD: u32 = 64;

const WORDS: usize = BUCKET_BYTES / 8;
/// Bits of the first word holding the version; entries start right after them.
const VERSION_BITS: u32 = 31;
const VERSION_MASK: u64 = (1 << VERSION_BITS) - 1;
const LOCKED: u64 = 1;
const MAX_TAG_BITS: u32 = 16;
/// Candidate layouts, densest first: (entries per bucket, bits per entry). Each fits the 481
/// bits after the version.
const LAYOUTS: [(usize, u32); 4] = [(13, 37), (12, 40), (10, 48), (7, 64)];

/// Hash of a key as used by the index.
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// The caller's view of the objects the index points at: the key hash of the object at a
/// location (needed to move entries between buckets and tables).
pub trait KeyHasher {
    /// Key hash ([`hash_key`]) of the object at `location`.
    fn hash_at(&mut self, location: u64) -> u64;
    /// Hint that `hash_at(location)` will be asked soon (a resize walks many locations).
    fn prefetch(&mut self, _location: u64) {}
}

impl<F: FnMut(u64) -> u64> KeyHasher for F {
    fn hash_at(&mut self, location: u64) -> u64 {
        self(location)
    }
}

/// How entries are packed into a bucket: chosen once per index from the location width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    entries: usize,
    entry_bits: u32,
    tag_bits: u32,
    /// `entry_bits - tag_bits`: at least the location width asked for.
    location_field_bits: u32,
}

fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1 << width) - 1
    }
}

impl Layout {
    /// The densest layout for locations below `2^location_bits` that keeps at least
    /// [`MIN_TAG_BITS`] of tag; an error when locations are wider than [`MAX_LOCATION_BITS`].
    pub fn for_location_bits(location_bits: u32) -> Result<Layout> {
        if location_bits > MAX_LOCATION_BITS {
            return Err(Error::InvalidArgument(format!(
                "hash index locations of {location_bits} bits exceed the limit of {MAX_LOCATION_BITS}"
            )));
        }
        LAYOUTS
            .iter()
            .find_map(|&(entries, entry_bits)| {
                let tag_bits = entry_bits.checked_sub(location_bits)?.min(MAX_TAG_BITS);
                (tag_bits >= MIN_TAG_BITS).then_some(Layout {
                    entries,
                    entry_bits,
                    tag_bits,
                    location_field_bits: entry_bits - tag_bits,
                })
            })
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "no hash index layout holds {location_bits}-bit locations"
                ))
            })
    }

    /// Entries per bucket.
    pub fn entries_per_bucket(&self) -> usize {
        self.entries
    }

    /// Bits of each entry's tag.
    pub fn tag_bits(&self) -> u32 {
        self.tag_bits
    }

    /// Largest location an entry can hold.
    pub fn max_location(&self) -> u64 {
        mask(self.location_field_bits)
    }

    fn tag_of(&self, hash: u64) -> u64 {
        let tag = hash >> (64 - self.tag_bits);
        if tag == 0 {
            1
        } else {
            tag
        }
    }

    fn make_entry(&self, hash: u64, location: u64) -> u64 {
        debug_assert!(
            location <= self.max_location(),
            "location {location} wider than the layout"
        );
        (self.tag_of(hash) << self.location_field_bits) | (location & self.max_location())
    }

    fn entry_tag(&self, entry: u64) -> u64 {
        entry >> self.location_field_bits
    }

    fn entry_location(&self, entry: u64) -> u64 {
        entry & self.max_location()
    }

    /// First bit of entry `index` in the bucket's 512 bits.
    fn bit_offset(&self, index: usize) -> usize {
        VERSION_BITS as usize + index * self.entry_bits as usize
    }

    /// Entry `index` of a bucket copied into `words`.
    fn entry_in(&self, words: &[u64; WORDS], index: usize) -> u64 {
        let bit = self.bit_offset(index);
        let (word, shift) = (bit / 64, (bit % 64) as u32);
        debug_assert!(index < self.entries && bit + self.entry_bits as usize <= 512);
        let low = words.get(word).copied().unwrap_or(0) >> shift;
        let value = if shift + self.entry_bits > 64 {
            low | (words.get(word + 1).copied().unwrap_or(0) << (64 - shift))
        } else {
            low
        };
        value & mask(self.entry_bits)
    }

    /// The words of a bucket holding `entries` (at most `self.entries`) with version 0.
    fn pack(&self, entries: &[u64]) -> [u64; WORDS] {
        let mut words = [0u64; WORDS];
        for (index, &entry) in entries.iter().enumerate().take(self.entries) {
            let bit = self.bit_offset(index);
            let (word, shift) = (bit / 64, (bit % 64) as u32);
            if let Some(slot) = words.get_mut(word) {
                *slot |= entry << shift;
            }
            if shift + self.entry_bits > 64 {
                if let Some(slot) = words.get_mut(word + 1) {
                    *slot |= entry >> (64 - shift);
                }
            }
        }
        words
    }

    /// Slots a table of `buckets` buckets has.
    fn slots(&self, buckets: usize) -> usize {
        buckets.saturating_mul(self.entries)
    }

    /// Buckets that hold `entries` entries at load factor `load`.
    fn buckets_for(&self, entries: usize, load: f64) -> usize {
        ((entries as f64 / (load * self.entries as f64)).ceil() as usize).max(2)
    }
}

/// Maps 40 hash bits uniformly onto `0..buckets` (multiply-shift, so any table size works).
fn scale(bits40: u64, buckets: usize) -> usize {
    ((u128::from(bits40 & ((1 << 40) - 1)) * buckets as u128) >> 40) as usize
}

/// First bucket of a key: hash bits 0..40 (bits 40..48 pick the partition, the top bits are the
/// tag).
fn first_bucket(hash: u64, buckets: usize) -> usize {
    scale(hash, buckets)
}

/// Second bucket of a key: a remix of the hash, never equal to the first (tables have at least
/// two buckets).
fn second_bucket(hash: u64, buckets: usize) -> usize {
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
fn other_bucket(hash: u64, buckets: usize, this: usize) -> usize {
    let first = first_bucket(hash, buckets);
    if first == this {
        second_bucket(hash, buckets)
    } else {
        first
    }
}

/// Next size to try when a rebuild at `buckets` did not fit every entry.
fn retry_size(buckets: usize) -> usize {
    buckets + buckets / 16 + 1
}

/// One cache line: the version in the low 31 bits of word 0, then packed entries.
#[derive(Debug)]
#[repr(C, align(64))]
struct Bucket {
    words: [AtomicU64; WORDS],
}

impl Bucket {
    #[cfg(loom)]
    fn new() -> Self {
        Bucket {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn first_word(&self) -> &AtomicU64 {
        let [first, ..] = &self.words;
        first
    }

    /// Locks the bucket, waiting while another writer holds it; returns false if its table was
    /// replaced (invariant 5: such a bucket is never unlocked again).
    fn lock(&self, replaced: &AtomicBool) -> bool {
        let mut spins = 0u32;
        loop {
            let word = self.first_word().load(Ordering::Relaxed);
            if word & LOCKED != 0 {
                if replaced.load(Ordering::Acquire) {
                    return false;
                }
                backoff(&mut spins);
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
            backoff(&mut spins);
        }
    }

    /// Locks the bucket if it is unlocked, without waiting.
    fn try_lock(&self) -> bool {
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

    fn unlock(&self) {
        let word = self.first_word().load(Ordering::Relaxed);
        debug_assert!(word & LOCKED != 0, "unlocking an unlocked bucket");
        let version = ((word & VERSION_MASK) + 1) & VERSION_MASK;
        self.first_word()
            .store((word & !VERSION_MASK) | version, Ordering::Release);
    }

    /// The bucket's words (the caller holds the lock, or the table is not shared yet).
    fn load_words(&self) -> [u64; WORDS] {
        let mut words = [0u64; WORDS];
        for (copy, word) in words.iter_mut().zip(&self.words) {
            *copy = word.load(Ordering::Relaxed);
        }
        words
    }

    /// Entry `index` (the caller holds the lock, or the table is not shared yet).
    fn entry(&self, layout: &Layout, index: usize) -> u64 {
        layout.entry_in(&self.load_words(), index)
    }

    /// Stores entry `index` (the caller holds the lock, or the table is not shared yet). Only
    /// the entry's bits change; the version bits of word 0 are left alone.
    fn set_entry(&self, layout: &Layout, index: usize, entry: u64) {
        debug_assert!(index < layout.entries && entry <= mask(layout.entry_bits));
        let bit = layout.bit_offset(index);
        let (word, shift) = (bit / 64, (bit % 64) as u32);
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
    fn free_slots(&self, layout: &Layout) -> Option<(usize, usize)> {
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

    fn free_slot(&self, layout: &Layout) -> Option<usize> {
        self.free_slots(layout).map(|(slot, _)| slot)
    }

    /// Optimistic read (seqlock reader): the locations of the entries whose tag is `tag`, as
    /// they were at one instant while the bucket was unlocked, or `None` if its table was
    /// replaced. Retries while a writer holds the bucket or changed it during the read.
    fn read_matching(
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
                backoff(&mut spins);
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
            loom_tests::note_retry();
            backoff(&mut spins);
        }
    }
}

/// Stores `entry` in the first free slot of the bucket with the most free slots (power of
/// two choices: the load stays even, so tables fill far before they must grow); false when
/// every bucket is full. The caller holds the buckets (locked, or a table not yet shared).
fn store_in_emptier<'a>(
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

fn backoff(spins: &mut u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        *spins += 1;
        if *spins < SPINS_BEFORE_YIELD {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A consistent copy of one bucket's entries with a given tag.
#[derive(Debug, Clone, Copy)]
struct BucketRead {
    first_word: u64,
    candidates: [u64; MAX_BUCKET_ENTRIES],
    count: usize,
}

/// Bucket memory of a table: mapped zero-filled pages (all zeros is an empty, unlocked bucket),
/// unmapped when the table is dropped. Loom atomics cannot live in zeroed memory, so loom builds
/// use a boxed slice.
#[cfg(not(loom))]
type BucketStorage = crate::pages::Pages;
#[cfg(loom)]
type BucketStorage = Box<[Bucket]>;

#[derive(Debug)]
struct Table {
    storage: BucketStorage,
    len: usize,
    layout: Layout,
    /// Set once a newer table was published (invariant 5).
    replaced: AtomicBool,
}

impl Table {
    /// A table of `buckets` buckets (at least two, so a key's two buckets differ).
    fn new(buckets: usize, layout: Layout) -> Result<Table> {
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

    fn buckets(&self) -> &[Bucket] {
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
    fn bucket(&self, index: usize) -> &Bucket {
        // Cannot panic: `len` is the (non-zero) length of `buckets()`, so the index is in range.
        &self.buckets()[index % self.len]
    }

    /// Writes a placement computed by [`Placement::place`] into this private (not yet shared)
    /// table: bucket by bucket, whole words at a time.
    fn store_placement(&self, placement: &Placement, pairs: &[[u64; 2]]) {
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

/// Zero-filled scratch memory for one resize. Mapped pages outside loom, so the memory goes
/// back to the operating system after each resize instead of staying in the heap.
#[derive(Debug)]
struct Scratch<T> {
    #[cfg(not(loom))]
    pages: crate::pages::Pages,
    #[cfg(loom)]
    items: Vec<T>,
    len: usize,
    _items: std::marker::PhantomData<T>,
}

/// Plain values for which all-zero bytes are a valid value (the scratch element types).
///
/// # Safety
/// Implementors must be plain data for which every all-zero bit pattern is a valid value.
unsafe trait Zeroable: Copy + Default {}
// SAFETY: integers and arrays of integers are valid as all zeros.
unsafe impl Zeroable for u8 {}
// SAFETY: as above.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for [u64; 2] {}

impl<T: Zeroable> Scratch<T> {
    fn new(len: usize) -> Result<Scratch<T>> {
        Ok(Scratch {
            #[cfg(not(loom))]
            pages: crate::pages::Pages::zeroed(len.max(1) * std::mem::size_of::<T>())?,
            #[cfg(loom)]
            items: vec![T::default(); len],
            len,
            _items: std::marker::PhantomData,
        })
    }

    fn as_slice(&self) -> &[T] {
        #[cfg(not(loom))]
        // SAFETY: the pages hold at least `len * size_of::<T>()` zero-filled, page-aligned bytes
        // owned by this scratch alone, and all zeros is a valid `T` (`Zeroable`).
        let items =
            unsafe { std::slice::from_raw_parts(self.pages.as_ptr().cast::<T>(), self.len) };
        #[cfg(loom)]
        let items = self.items.get(..self.len).unwrap_or_default();
        items
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
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
fn collect_pairs(table: &Table, hasher: &mut impl KeyHasher) -> Result<(Scratch<[u64; 2]>, usize)> {
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
struct Placement {
    buckets: usize,
    per_bucket: usize,
    counts: Scratch<u8>,
    members: Scratch<u32>,
}

impl Placement {
    /// Places every pair: into the emptier of its two buckets, else by moving an entry of
    /// those buckets to its other bucket, directly or after moving one of *that* bucket's
    /// entries on (two steps of cuckoo hashing). `None` when some entry does not fit.
    fn place(pairs: &[[u64; 2]], buckets: usize, per_bucket: usize) -> Result<Option<Placement>> {
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

    fn count(&self, bucket: usize) -> usize {
        self.counts
            .as_slice()
            .get(bucket)
            .map_or(usize::MAX, |&count| usize::from(count))
    }

    fn members(&self, bucket: usize) -> &[u32] {
        let start = bucket * self.per_bucket;
        self.members
            .as_slice()
            .get(start..start + self.count(bucket).min(self.per_bucket))
            .unwrap_or_default()
    }

    fn push(&mut self, bucket: usize, member: u32) {
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

    fn set(&mut self, bucket: usize, slot: usize, member: u32) {
        if let Some(place) = self
            .members
            .as_mut_slice()
            .get_mut(bucket * self.per_bucket + slot)
        {
            *place = member;
        }
    }

    fn hash_of(pairs: &[[u64; 2]], member: u32) -> u64 {
        pairs.get(member as usize).map_or(0, |&[hash, _]| hash)
    }

    fn insert(&mut self, pairs: &[[u64; 2]], hash: u64, member: u32) -> bool {
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

#[derive(Debug)]
struct Partition {
    table: AtomicPtr<Table>,
    /// Held while resizing; holds tables retired by resizes until the epoch passes them.
    retired: Mutex<Vec<(u64, Box<Table>)>>,
    /// Entries in the current table (invariant 6: steers resizing only).
    entries: CountAtomic,
}

impl Drop for Partition {
    fn drop(&mut self) {
        let pointer = self.table.load(Ordering::Acquire);
        if !pointer.is_null() {
            // SAFETY: the pointer came from `Box::into_raw` in `HashIndex::new` or `resize`, and
            // we have exclusive access (`&mut self`), so no reader can still use it.
            drop(unsafe { Box::from_raw(pointer) });
        }
    }
}

/// The optimistic, partitioned, resizable hash index.
#[derive(Debug)]
pub struct HashIndex {
    partitions: Box<[CachePadded<Partition>]>,
    partition_mask: usize,
    layout: Layout,
    /// Smallest table a partition is shrunk to (the initial size).
    min_buckets: usize,
    /// Buckets in all current tables (changes only when a partition is resized).
    total_buckets: AtomicUsize,
    /// Resize counters (statistics only).
    resizes: CountAtomic,
    rehashed: CountAtomic,
    resize_nanos: CountAtomic,
}

/// What resizing has cost so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResizeStats {
    /// Partition tables replaced (grown or shrunk).
    pub resizes: u64,
    /// Entries rehashed into new tables (each asks the caller for a key hash).
    pub rehashed_entries: u64,
    /// Time spent resizing, in nanoseconds (all partitions' buckets locked meanwhile).
    pub nanos: u64,
}

/// Where a key's entry was found while holding its buckets' locks.
#[derive(Debug, Clone, Copy)]
pub struct EntrySlot {
    bucket: usize,
    entry: usize,
}

/// Both buckets of one key, locked; unlocks on drop.
#[derive(Debug)]
pub struct LockedPair<'index> {
    table: &'index Table,
    entries: &'index CountAtomic,
    buckets: [usize; 2],
    distinct: bool,
    hash: u64,
}

impl LockedPair<'_> {
    fn bucket(&self, which: usize) -> Option<&Bucket> {
        self.buckets
            .get(which)
            .map(|&index| self.table.bucket(index))
    }

    fn bucket_count(&self) -> usize {
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

impl HashIndex {
    /// Creates an index of `partitions` partitions (rounded up to a power of two, at most
    /// [`MAX_PARTITIONS`]) of `initial_buckets` buckets each (any size, at least 2), for
    /// locations below `2^location_bits`. Fails when no layout holds such locations (over
    /// [`MAX_LOCATION_BITS`]) or the tables cannot be mapped.
    pub fn new(partitions: usize, initial_buckets: usize, location_bits: u32) -> Result<Self> {
        let layout = Layout::for_location_bits(location_bits)?;
        let partitions = partitions.clamp(1, MAX_PARTITIONS).next_power_of_two();
        let initial_buckets = initial_buckets.clamp(2, MAX_BUCKETS_PER_PARTITION);
        let mut built = Vec::with_capacity(partitions);
        for _ in 0..partitions {
            let table = Table::new(initial_buckets, layout)?;
            built.push(CachePadded(Partition {
                table: AtomicPtr::new(Box::into_raw(Box::new(table))),
                retired: Mutex::new(Vec::new()),
                entries: CountAtomic::new(0),
            }));
        }
        Ok(HashIndex {
            partitions: built.into_boxed_slice(),
            partition_mask: partitions - 1,
            layout,
            min_buckets: initial_buckets,
            total_buckets: AtomicUsize::new(partitions * initial_buckets),
            resizes: CountAtomic::new(0),
            rehashed: CountAtomic::new(0),
            resize_nanos: CountAtomic::new(0),
        })
    }

    /// The entry layout chosen at construction.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    fn partition(&self, hash: u64) -> &Partition {
        // Cannot panic: the mask is `partitions.len() - 1` and the length is a power of two.
        &self.partitions[((hash >> 40) as usize) & self.partition_mask]
    }

    fn table<'guard>(
        &self,
        partition: &Partition,
        _guard: &'guard EpochGuard<'_>,
    ) -> &'guard Table {
        let pointer = partition.table.load(Ordering::Acquire);
        // SAFETY: the pointer is never null (set in `new`, replaced only by `resize` with another
        // `Box::into_raw`). A replaced table is freed only after the epoch passes the stamp it
        // was retired with, and the caller is pinned (`_guard`), so it stays alive at least as
        // long as the guard (invariant 2 of the epoch module).
        unsafe { &*pointer }
    }

    /// Looks the key up without writing shared memory; returns the location of the first entry
    /// with the key's tag for which `matches(location)` is true (checked after validation).
    pub fn lookup(
        &self,
        guard: &EpochGuard<'_>,
        hash: u64,
        mut matches: impl FnMut(u64) -> bool,
    ) -> Option<u64> {
        let partition = self.partition(hash);
        'table: loop {
            let table = self.table(partition, guard);
            let layout = &table.layout;
            let tag = layout.tag_of(hash);
            let first = first_bucket(hash, table.len);
            let second = second_bucket(hash, table.len);
            let bucket_indexes: &[usize] = if first == second {
                &[first]
            } else {
                &[first, second]
            };
            let mut first_word = None;
            for &bucket_index in bucket_indexes {
                let bucket = table.bucket(bucket_index);
                let Some(read) = bucket.read_matching(layout, tag, &table.replaced) else {
                    continue 'table;
                };
                first_word.get_or_insert(read.first_word);
                for &location in read.candidates.iter().take(read.count) {
                    if matches(location) {
                        return Some(location);
                    }
                }
            }
            // A miss must hold for both buckets at one instant: an entry may move from the
            // second bucket to the first (`make_room`) between the two reads. The second read
            // was consistent, so if the first bucket is unchanged since its read, both held at
            // the end of the second read.
            if let (Some(word), Some(&first_index)) = (first_word, bucket_indexes.first()) {
                fence(Ordering::Acquire);
                if table
                    .bucket(first_index)
                    .first_word()
                    .load(Ordering::Relaxed)
                    != word
                {
                    continue 'table;
                }
            }
            return None;
        }
    }

    /// Locks both buckets of a key (waiting while other writers hold them).
    pub fn lock<'index>(
        &'index self,
        guard: &'index EpochGuard<'_>,
        hash: u64,
    ) -> LockedPair<'index> {
        let partition = self.partition(hash);
        loop {
            let table = self.table(partition, guard);
            let first = first_bucket(hash, table.len);
            let second = second_bucket(hash, table.len);
            let (low, high) = (first.min(second), first.max(second));
            let distinct = low != high;
            if !table.bucket(low).lock(&table.replaced) {
                // The table was replaced; reload the partition's pointer.
                continue;
            }
            if distinct && !table.bucket(high).lock(&table.replaced) {
                table.bucket(low).unlock();
                continue;
            }
            return LockedPair {
                table,
                entries: &partition.entries,
                buckets: [first, second],
                distinct,
                hash,
            };
        }
    }

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

    fn is_sparse(&self, partition: &Partition, table: &Table) -> bool {
        let entries = partition.entries.load(std::sync::atomic::Ordering::Relaxed);
        table.len > self.min_buckets
            && (entries as f64) < SHRINK_BELOW_LOAD * self.layout.slots(table.len) as f64
    }

    /// Replaces the partition's current table by one of `target` buckets (more if the entries
    /// do not fit). The caller holds the partition's resize mutex (`retired`).
    fn resize(
        &self,
        partition: &Partition,
        retired: &mut Vec<(u64, Box<Table>)>,
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
        // SAFETY: `old_pointer` came from `Box::into_raw`; it is no longer reachable from the
        // partition (replaced above), and is freed only after the epoch passes `stamp`.
        retired.push((stamp, unsafe { Box::from_raw(old_pointer) }));
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
    fn rebuild(
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

    fn free_retired(retired: &mut Vec<(u64, Box<Table>)>, epochs: &EpochTable) {
        if retired.is_empty() {
            return;
        }
        let safe_below = epochs.safe_below();
        retired.retain(|(stamp, _)| *stamp >= safe_below);
    }

    /// Frees tables retired by resizes that no pinned thread can still read. Must not be called
    /// while the calling thread is pinned (its own pin would keep them alive, harmlessly).
    pub fn collect_retired(&self, epochs: &EpochTable) {
        for partition in self.partitions.iter() {
            if let Ok(mut retired) = partition.retired.try_lock() {
                Self::free_retired(&mut retired, epochs);
            }
        }
    }

    /// Bytes of bucket memory in current tables.
    pub fn memory_bytes(&self) -> usize {
        self.total_buckets.load(Ordering::Relaxed) * std::mem::size_of::<Bucket>()
    }

    /// Entries in the index (exact when no write is in progress).
    pub fn entry_count(&self) -> usize {
        self.partitions
            .iter()
            .map(|partition| partition.entries.load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }

    /// Entry slots in current tables (`entry_count() / slot_count()` is the load factor).
    pub fn slot_count(&self) -> usize {
        self.layout
            .slots(self.total_buckets.load(Ordering::Relaxed))
    }

    /// Resizes so far and what they cost.
    pub fn resize_stats(&self) -> ResizeStats {
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        ResizeStats {
            resizes: self.resizes.load(relaxed) as u64,
            rehashed_entries: self.rehashed.load(relaxed) as u64,
            nanos: self.resize_nanos.load(relaxed) as u64,
        }
    }

    /// Bytes of bucket memory in retired tables not yet freed.
    pub fn retired_memory_bytes(&self) -> usize {
        self.partitions
            .iter()
            .filter_map(|partition| {
                partition.retired.lock().ok().map(|retired| {
                    retired
                        .iter()
                        .map(|(_, table)| table.len * std::mem::size_of::<Bucket>())
                        .sum::<usize>()
                })
            })
            .sum()
    }
}

// The loom build runs only `loom_tests` (these use real threads).
#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Test locations: the key in the low `key_bits` bits, a version above it (up to the
    /// location width the index was built for).
    #[derive(Clone, Copy)]
    struct Scheme {
        key_bits: u32,
        location_bits: u32,
    }

    /// The wide layout (48-bit locations, 7 entries per bucket).
    const WIDE: Scheme = Scheme {
        key_bits: 40,
        location_bits: 48,
    };
    /// The compact layout (31-bit locations, 13 entries per bucket, 6-bit tags).
    const COMPACT: Scheme = Scheme {
        key_bits: 24,
        location_bits: 31,
    };

    impl Scheme {
        fn key_of(self, location: u64) -> u64 {
            location & ((1 << self.key_bits) - 1)
        }

        fn location(self, key: u64, version: u64) -> u64 {
            let versions = 1u64 << (self.location_bits - self.key_bits);
            key | ((version % versions) << self.key_bits)
        }

        fn hash_of(self, location: u64) -> u64 {
            hash_key(&self.key_of(location).to_le_bytes())
        }

        fn index(self, partitions: usize, buckets: usize) -> HashIndex {
            HashIndex::new(partitions, buckets, self.location_bits).unwrap()
        }

        fn put(self, index: &HashIndex, epochs: &EpochTable, key: u64, version: u64) {
            let location = self.location(key, version);
            let hash = self.hash_of(key);
            loop {
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash);
                if let Some((slot, _)) = pair.find(|stored| self.key_of(stored) == key) {
                    pair.replace(slot, location);
                    return;
                }
                // As MemStore does: move an entry aside before growing.
                if pair.make_room(|stored| self.hash_of(stored)) && pair.insert(location) {
                    return;
                }
                drop(pair);
                index
                    .grow(&guard, epochs, hash, |stored| self.hash_of(stored))
                    .unwrap();
            }
        }

        fn delete(self, index: &HashIndex, epochs: &EpochTable, key: u64) -> bool {
            let guard = epochs.pin();
            let hash = self.hash_of(key);
            let pair = index.lock(&guard, hash);
            let Some((slot, _)) = pair.find(|stored| self.key_of(stored) == key) else {
                return false;
            };
            pair.remove(slot);
            drop(pair);
            index
                .shrink_if_sparse(&guard, epochs, hash, |stored| self.hash_of(stored))
                .unwrap();
            true
        }

        fn get(self, index: &HashIndex, epochs: &EpochTable, key: u64) -> Option<u64> {
            let guard = epochs.pin();
            index.lookup(&guard, self.hash_of(key), |stored| {
                self.key_of(stored) == key
            })
        }
    }

    #[test]
    fn layouts_follow_the_location_width() {
        let shape = |bits: u32| {
            let layout = Layout::for_location_bits(bits).unwrap();
            (layout.entries_per_bucket(), layout.tag_bits())
        };
        assert_eq!(shape(0), (13, 16));
        assert_eq!(shape(21), (13, 16));
        assert_eq!(shape(30), (13, 7));
        assert_eq!(shape(31), (13, 6));
        assert_eq!(shape(32), (12, 8));
        assert_eq!(shape(34), (12, 6));
        assert_eq!(shape(35), (10, 13));
        assert_eq!(shape(42), (10, 6));
        assert_eq!(shape(43), (7, 16));
        assert_eq!(shape(48), (7, 16));
        assert!(Layout::for_location_bits(49).is_err());
        assert!(HashIndex::new(1, 2, 49).is_err());
        for bits in 0..=MAX_LOCATION_BITS {
            let layout = Layout::for_location_bits(bits).unwrap();
            assert!(layout.tag_bits() >= MIN_TAG_BITS);
            assert!(layout.max_location() >= (1u64 << bits) - 1, "{bits}");
            let used = VERSION_BITS as usize + layout.entries * layout.entry_bits as usize;
            assert!(used <= BUCKET_BYTES * 8, "{bits}: {used} bits");
        }
    }

    #[test]
    fn packed_entries_round_trip_in_every_layout() {
        for bits in [0, 20, 31, 32, 34, 35, 42, 43, 48] {
            let layout = Layout::for_location_bits(bits).unwrap();
            let table = Table::new(2, layout).unwrap();
            let bucket = table.bucket(0);
            let replaced = AtomicBool::new(false);
            let max = layout.max_location();
            // Distinct hashes with the highest and lowest tags, locations at both ends.
            let hash_for = |index: usize| {
                if index.is_multiple_of(2) {
                    u64::MAX - index as u64
                } else {
                    (index as u64) << (64 - layout.tag_bits)
                }
            };
            let location_for = |index: usize| {
                if index.is_multiple_of(3) {
                    max - index as u64
                } else {
                    index as u64
                }
            };
            assert!(bucket.lock(&replaced));
            for index in 0..layout.entries {
                let entry = layout.make_entry(hash_for(index), location_for(index));
                bucket.set_entry(&layout, index, entry);
            }
            bucket.unlock();
            for index in 0..layout.entries {
                let tag = layout.tag_of(hash_for(index));
                let read = bucket.read_matching(&layout, tag, &replaced).unwrap();
                let found = &read.candidates[..read.count];
                assert!(found.contains(&location_for(index)), "{bits} {index}");
                let entry = bucket.entry(&layout, index);
                assert_eq!(layout.entry_location(entry), location_for(index));
                assert_eq!(layout.entry_tag(entry), tag);
            }
            // Clearing one entry leaves its neighbours and the version alone.
            let version = bucket.first_word().load(Ordering::Relaxed) & VERSION_MASK;
            assert!(bucket.lock(&replaced));
            bucket.set_entry(&layout, 1, 0);
            bucket.unlock();
            assert_eq!(
                bucket.first_word().load(Ordering::Relaxed) & VERSION_MASK,
                version + 2
            );
            assert_eq!(bucket.entry(&layout, 1), 0);
            for index in (0..layout.entries).filter(|&index| index != 1) {
                let entry = bucket.entry(&layout, index);
                assert_eq!(layout.entry_location(entry), location_for(index), "{bits}");
            }
            assert_eq!(bucket.free_slots(&layout), Some((1, 1)));
        }
    }

    #[test]
    fn version_wraps_without_touching_entries() {
        let layout = Layout::for_location_bits(31).unwrap();
        let table = Table::new(2, layout).unwrap();
        let bucket = table.bucket(1);
        let replaced = AtomicBool::new(false);
        let entry = layout.make_entry(u64::MAX, layout.max_location());
        assert!(bucket.lock(&replaced));
        bucket.set_entry(&layout, 0, entry);
        bucket.unlock();
        let first = bucket.first_word();
        let entry_bits = first.load(Ordering::Relaxed) & !VERSION_MASK;
        assert_ne!(entry_bits, 0, "entry 0 starts in the first word");
        first.store(entry_bits | (VERSION_MASK - 1), Ordering::Relaxed);
        assert!(bucket.lock(&replaced));
        bucket.unlock();
        assert_eq!(first.load(Ordering::Relaxed), entry_bits);
        assert_eq!(bucket.entry(&layout, 0), entry);
        // A locked bucket of a replaced table refuses lockers and readers.
        assert!(bucket.lock(&replaced));
        replaced.store(true, Ordering::Release);
        assert!(!bucket.lock(&replaced));
        assert!(!bucket.try_lock());
        assert!(bucket.read_matching(&layout, 1, &replaced).is_none());
    }

    #[test]
    fn insert_lookup_grow_remove() {
        for scheme in [WIDE, COMPACT] {
            let epochs = EpochTable::new();
            let index = scheme.index(4, 2);
            let mut model = HashMap::new();
            for key in 0..20_000u64 {
                scheme.put(&index, &epochs, key, key % 7);
                model.insert(key, scheme.location(key, key % 7));
            }
            for (&key, &location) in &model {
                assert_eq!(scheme.get(&index, &epochs, key), Some(location));
            }
            assert_eq!(scheme.get(&index, &epochs, 1 << 20), None);
            assert_eq!(index.entry_count(), 20_000);
            // Grown to a high load: at least 0.8 of the slots in use.
            let load = index.entry_count() as f64 / index.slot_count() as f64;
            assert!(load > 0.8, "load {load}");
            for key in (0..20_000u64).step_by(2) {
                let guard = epochs.pin();
                let pair = index.lock(&guard, scheme.hash_of(key));
                let (slot, _) = pair.find(|stored| scheme.key_of(stored) == key).unwrap();
                pair.remove(slot);
            }
            for key in 0..20_000u64 {
                assert_eq!(scheme.get(&index, &epochs, key).is_some(), key % 2 == 1);
            }
            assert_eq!(index.entry_count(), 10_000);
            index.collect_retired(&epochs);
            assert_eq!(index.retired_memory_bytes(), 0);
        }
    }

    /// Locations at the top of the compact layout's 31 bits survive insertion, moves between
    /// buckets and resizes unchanged.
    #[test]
    fn compact_locations_at_the_width_limit() {
        let epochs = EpochTable::new();
        let index = HashIndex::new(2, 2, 31).unwrap();
        let top = (1u64 << 31) - 1;
        // Location = top - key: the key is recovered from the location.
        let hash_of = |location: u64| hash_key(&(top - location).to_le_bytes());
        for key in 0..5_000u64 {
            let hash = hash_key(&key.to_le_bytes());
            loop {
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash);
                if pair.make_room(hash_of) && pair.insert(top - key) {
                    break;
                }
                drop(pair);
                index.grow(&guard, &epochs, hash, hash_of).unwrap();
            }
        }
        for key in 0..5_000u64 {
            let guard = epochs.pin();
            let found = index.lookup(&guard, hash_key(&key.to_le_bytes()), |location| {
                location == top - key
            });
            assert_eq!(found, Some(top - key));
        }
        let guard = epochs.pin();
        assert_eq!(
            index.lookup(
                &guard,
                hash_key(&9_999u64.to_le_bytes()),
                |location| location == top - 9_999
            ),
            None
        );
    }

    #[test]
    fn partitions_shrink_after_deletes_and_grow_again() {
        let scheme = COMPACT;
        let epochs = EpochTable::new();
        let index = scheme.index(4, 4);
        for key in 0..40_000u64 {
            scheme.put(&index, &epochs, key, 1);
        }
        let full = index.memory_bytes();
        for key in 0..40_000u64 {
            if key % 10 != 3 {
                assert!(scheme.delete(&index, &epochs, key));
            }
        }
        index.collect_retired(&epochs);
        let shrunk = index.memory_bytes();
        assert!(shrunk * 5 < full, "{full} -> {shrunk}");
        let load = index.entry_count() as f64 / index.slot_count() as f64;
        assert!(
            load >= SHRINK_BELOW_LOAD * 0.9,
            "load {load} after shrinking"
        );
        for key in 0..40_000u64 {
            let expected = (key % 10 == 3).then(|| scheme.location(key, 1));
            assert_eq!(scheme.get(&index, &epochs, key), expected, "{key}");
        }
        for key in 40_000..80_000u64 {
            scheme.put(&index, &epochs, key, 2);
        }
        let load = index.entry_count() as f64 / index.slot_count() as f64;
        assert!(load > 0.85, "load {load} after growing back");
        assert_eq!(index.entry_count(), 44_000);
        index.collect_retired(&epochs);
        assert_eq!(index.retired_memory_bytes(), 0);
    }

    /// Focused stress test of the bucket seqlock (stands in for a loom model): writers move each
    /// key between two locations that encode the same key, readers must always see a location
    /// that was stored, never a torn or missing entry for a key that always exists, while
    /// partitions grow and shrink under them.
    fn stress(scheme: Scheme, churn: bool) {
        const KEYS: u64 = 2_000;
        let epochs = Arc::new(EpochTable::new());
        let index = Arc::new(scheme.index(2, 2));
        for key in 0..KEYS {
            scheme.put(&index, &epochs, key, 0);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for writer in 0..2u64 {
            let (epochs, index, stop) = (epochs.clone(), index.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for key in (writer..KEYS).step_by(2) {
                        scheme.put(&index, &epochs, key, 1 + (round % 100));
                    }
                    if churn {
                        // Many transient keys, then delete them: partitions grow and shrink.
                        let base = KEYS + 100_000 * (1 + writer);
                        for key in base..base + 3 * KEYS {
                            scheme.put(&index, &epochs, key, 0);
                        }
                        for key in base..base + 3 * KEYS {
                            assert!(scheme.delete(&index, &epochs, key));
                        }
                    } else {
                        // New keys force partitions to grow while readers run.
                        scheme.put(&index, &epochs, KEYS + round * 2 + writer, 0);
                    }
                    round += 1;
                }
            }));
        }
        let failures = Arc::new(AtomicU64::new(0));
        for _ in 0..2 {
            let (epochs, index, stop, failures) = (
                epochs.clone(),
                index.clone(),
                stop.clone(),
                failures.clone(),
            );
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for key in 0..KEYS {
                        match scheme.get(&index, &epochs, key) {
                            Some(location) if scheme.key_of(location) == key => {}
                            _ => {
                                failures.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    index.collect_retired(&epochs);
                }
            }));
        }
        std::thread::sleep(std::time::Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(failures.load(Ordering::Relaxed), 0);
        if churn {
            assert_eq!(index.entry_count(), KEYS as usize);
        }
    }

    #[test]
    fn stress_readers_see_consistent_entries_during_writes_and_growth() {
        stress(WIDE, false);
        stress(COMPACT, false);
    }

    #[test]
    fn stress_readers_see_consistent_entries_while_partitions_grow_and_shrink() {
        stress(COMPACT, true);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use std::cell::Cell;

    std::thread_local! {
        /// Seqlock read retries seen on this OS thread (loom runs a model's threads on one).
        static RETRIES: Cell<u64> = const { Cell::new(0) };
    }

    pub(super) fn note_retry() {
        RETRIES.with(|retries| retries.set(retries.get() + 1));
    }

    const TAG: u64 = 0x1234;
    /// Locations of 20 bits: the compact layout with 16-bit tags.
    const LOCATION_BITS: u32 = 20;

    fn layout() -> Layout {
        Layout::for_location_bits(LOCATION_BITS).unwrap_or_else(|error| panic!("{error}"))
    }

    fn tagged(location: u64) -> u64 {
        layout().make_entry(TAG << 48, location)
    }

    /// Bucket versions (seqlock): a writer locks, changes two packed entries (the first of which
    /// shares its word with the version), unlocks; a concurrent optimistic reader sees both old
    /// or both new entries, never a torn pair, and some interleavings must take the retry path.
    ///
    /// The writer stores the new words it computed beforehand rather than calling `set_entry`
    /// (which loads each word before storing it): loom's partial-order reduction compares an
    /// access only with the *last* access to the same atomic, so a store right after the
    /// writer's own load never registers as racing the reader and the model would explore one
    /// execution. The stored words are exactly what `set_entry` would produce (checked below).
    #[test]
    fn bucket_reader_never_sees_a_torn_pair() {
        RETRIES.with(|retries| retries.set(0));
        let layout = layout();
        let old = layout.pack(&[tagged(1), tagged(2)]);
        let new = layout.pack(&[tagged(3), tagged(4)]);
        assert_ne!(
            old[0] & !VERSION_MASK,
            new[0] & !VERSION_MASK,
            "entry 0 is in word 0"
        );
        loom::model(move || {
            let bucket = Arc::new(Bucket::new());
            let replaced = Arc::new(AtomicBool::new(false));
            bucket.set_entry(&layout, 0, tagged(1));
            bucket.set_entry(&layout, 1, tagged(2));
            assert_eq!(bucket.load_words(), old);
            let writer = {
                let (bucket, replaced) = (bucket.clone(), replaced.clone());
                loom::thread::spawn(move || {
                    assert!(bucket.lock(&replaced));
                    let [first, second, ..] = &bucket.words;
                    first.store((new[0] & !VERSION_MASK) | LOCKED, Ordering::Relaxed);
                    second.store(new[1], Ordering::Relaxed);
                    bucket.unlock();
                })
            };
            let read = bucket
                .read_matching(&layout, TAG, &replaced)
                .expect("never replaced");
            assert_eq!(read.count, 2);
            let pair = (read.candidates[0], read.candidates[1]);
            assert!(pair == (1, 2) || pair == (3, 4), "torn pair {pair:?}");
            writer.join().expect("writer");
            // What the writer stored is what `set_entry` produces.
            assert!(bucket.lock(&replaced));
            bucket.set_entry(&layout, 0, tagged(3));
            bucket.set_entry(&layout, 1, tagged(4));
            let mut words = bucket.load_words();
            words[0] &= !VERSION_MASK;
            assert_eq!(words, {
                let mut expected = new;
                expected[0] &= !VERSION_MASK;
                expected
            });
            bucket.unlock();
        });
        assert!(
            RETRIES.with(Cell::get) > 0,
            "no interleaving exercised the version-change retry"
        );
    }

    fn hash_of(location: u64) -> u64 {
        hash_key(&location.to_le_bytes())
    }

    // Note: loom's DPOR compares an operation only with the *last* access to the same atomic,
    // so a writer that loads a bucket version and then CASes it shadows the reader's earlier
    // load; the three API-level models below (replace, grow, make_room) therefore complete in
    // one or very few executions and act as smoke tests of the flows under loom. The
    // interleavings of the bucket protocol itself are explored by
    // `bucket_reader_never_sees_a_torn_pair`.

    /// Index entry update through the real API: a writer re-points a key (lock both buckets,
    /// find, replace) while a reader looks it up; the reader finds the old or the new location,
    /// never nothing.
    #[test]
    fn lookup_during_replace_sees_old_or_new() {
        loom::model(|| {
            let epochs = Arc::new(EpochTable::new());
            let index = Arc::new(HashIndex::new(1, 2, LOCATION_BITS).expect("index"));
            let key = 5u64;
            let hash = hash_of(key);
            {
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash);
                assert!(pair.insert(key));
            }
            let writer = {
                let (epochs, index) = (epochs.clone(), index.clone());
                loom::thread::spawn(move || {
                    let guard = epochs.pin();
                    let pair = index.lock(&guard, hash);
                    let (slot, _) = pair.find(|location| location & 0xff == key).expect("key");
                    pair.replace(slot, key | (1 << 8));
                })
            };
            let found = {
                let guard = epochs.pin();
                index.lookup(&guard, hash, |location| location & 0xff == key)
            };
            assert!(
                found == Some(key) || found == Some(key | (1 << 8)),
                "lookup returned {found:?}"
            );
            writer.join().expect("writer");
        });
    }

    /// Fills a small index until an insert fails; returns the key that did not fit.
    fn fill(epochs: &EpochTable, index: &HashIndex) -> u64 {
        for key in 0..1024u64 {
            let guard = epochs.pin();
            let pair = index.lock(&guard, hash_of(key));
            if !pair.insert(key) {
                return key;
            }
        }
        panic!("a small table fills");
    }

    /// Entry moves (`make_room`): a writer frees a slot for a new key by moving another key's
    /// entry from its second bucket to its first while a reader looks the moved key up. The
    /// reader must find it (the miss re-validation of the first bucket's version catches it).
    #[test]
    fn lookup_during_make_room_finds_the_moved_key() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.max_branches = 100_000;
        builder.check(|| {
            // Dry run on identical indexes to learn a table size at which `make_room` succeeds
            // for the first key that does not fit, and which key it moves.
            let epochs = Arc::new(EpochTable::new());
            let (buckets, moved) = (3..64)
                .find_map(|buckets| {
                    let index = HashIndex::new(1, buckets, LOCATION_BITS).expect("index");
                    let full_key = fill(&epochs, &index);
                    let guard = epochs.pin();
                    let pair = index.lock(&guard, hash_of(full_key));
                    let mut last = None;
                    let made = pair.make_room(|location| {
                        last = Some(location);
                        hash_of(location)
                    });
                    drop(pair);
                    let moved = last.filter(|_| made)?;
                    // Only a move from the key's second bucket to its first can hide it from
                    // a reader that reads the first bucket before the second.
                    let table = index.table(index.partition(hash_of(moved)), &guard);
                    let layout = table.layout;
                    let first = table.bucket(first_bucket(hash_of(moved), table.len));
                    let now_in_first = (0..layout.entries).any(|slot| {
                        let entry = first.entry(&layout, slot);
                        entry != 0 && layout.entry_location(entry) == moved
                    });
                    now_in_first.then_some((buckets, moved))
                })
                .expect("some small table moves an entry to its first bucket");
            let index = Arc::new(HashIndex::new(1, buckets, LOCATION_BITS).expect("index"));
            let full_key = fill(&epochs, &index);
            let writer = {
                let (epochs, index) = (epochs.clone(), index.clone());
                loom::thread::spawn(move || {
                    let guard = epochs.pin();
                    let pair = index.lock(&guard, hash_of(full_key));
                    assert!(pair.make_room(hash_of));
                    assert!(pair.insert(full_key));
                })
            };
            let found = {
                let guard = epochs.pin();
                index.lookup(&guard, hash_of(moved), |location| location == moved)
            };
            assert_eq!(found, Some(moved), "lookup missed a key being moved");
            writer.join().expect("writer");
        });
    }

    /// Growth: a reader looks up a key while another thread grows the key's partition (locks
    /// every bucket, rehashes, publishes the new table, flags the old one replaced, retires it
    /// under the epoch). The reader always finds the key.
    #[test]
    fn lookup_during_grow_finds_the_key() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.max_branches = 100_000;
        builder.check(|| {
            let epochs = Arc::new(EpochTable::new());
            let index = Arc::new(HashIndex::new(1, 2, LOCATION_BITS).expect("index"));
            // Fill the two-bucket table until an insert fails.
            let mut full_key = None;
            for key in 0..64u64 {
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash_of(key));
                if !pair.insert(key) {
                    full_key = Some(key);
                    break;
                }
            }
            let full_key = full_key.expect("a two-bucket table fills");
            find_key_zero_while(&epochs, &index, move |guard, epochs, index| {
                index
                    .grow(guard, epochs, hash_of(full_key), hash_of)
                    .expect("grow");
            });
        });
    }

    /// Runs `replace` (a table replacement of key 0's partition) on another thread while
    /// this one looks up key 0, which must be found; then every retired table is freed.
    #[allow(clippy::expect_used)]
    fn find_key_zero_while(
        epochs: &Arc<EpochTable>,
        index: &Arc<HashIndex>,
        replace: impl FnOnce(&EpochGuard<'_>, &EpochTable, &HashIndex) + Send + 'static,
    ) {
        let replacer = {
            let (epochs, index) = (epochs.clone(), index.clone());
            loom::thread::spawn(move || {
                let guard = epochs.pin();
                replace(&guard, &epochs, &index);
            })
        };
        let found = {
            let guard = epochs.pin();
            index.lookup(&guard, hash_of(0), |location| location == 0)
        };
        assert_eq!(found, Some(0));
        replacer.join().expect("replacer");
        index.collect_retired(epochs);
        assert_eq!(index.retired_memory_bytes(), 0);
    }

    /// Shrinking: a reader looks up the one key left while another thread shrinks the
    /// partition after deletes (the same replace-the-table path as growth, to a smaller table).
    #[test]
    fn lookup_during_shrink_finds_the_key() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.max_branches = 100_000;
        builder.check(|| {
            let epochs = Arc::new(EpochTable::new());
            let index = Arc::new(HashIndex::new(1, 2, LOCATION_BITS).expect("index"));
            for key in 0..40u64 {
                loop {
                    let guard = epochs.pin();
                    let pair = index.lock(&guard, hash_of(key));
                    if pair.insert(key) {
                        break;
                    }
                    drop(pair);
                    index
                        .grow(&guard, &epochs, hash_of(key), hash_of)
                        .expect("grow");
                }
            }
            for key in 1..40u64 {
                let guard = epochs.pin();
                let pair = index.lock(&guard, hash_of(key));
                let (slot, _) = pair.find(|location| location == key).expect("key");
                pair.remove(slot);
            }
            let grown = index.memory_bytes();
            assert!(grown > 2 * BUCKET_BYTES);
            find_key_zero_while(&epochs, &index, |guard, epochs, index| {
                index
                    .shrink_if_sparse(guard, epochs, hash_of(1), hash_of)
                    .expect("shrink");
            });
            assert!(index.memory_bytes() < grown);
        });
    }
}
