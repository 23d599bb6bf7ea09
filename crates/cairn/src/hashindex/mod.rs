//! Optimistic concurrent hash index (Nibble §3.1, §4.2): maps a key's hash to a *location*
//! chosen by the caller (for `MemStore`: an object's byte address in the log).
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
//! Where things are: `layout` (entry packing), `bucket` (one seqlocked cache line and its
//! optimistic read), `table` (a table of buckets and the two-choice bucket functions),
//! `locked` (a key's two buckets locked for a write), `resize` (growing and shrinking a
//! partition), `invariants` (the checks of the invariants below, under the `invariants`
//! feature), `tests` and `loom_tests`.
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

mod bucket;
#[cfg(any(test, feature = "invariants"))]
mod invariants;
mod layout;
mod locked;
#[cfg(all(test, loom))]
mod loom_tests;
mod resize;
mod table;
// The loom build runs only `loom_tests` (these use real threads).
#[cfg(test)]
#[cfg(not(loom))]
mod tests;

pub use layout::Layout;
pub use locked::{EntrySlot, LockedPair};

use crate::epoch::{CachePadded, EpochGuard};
use crate::error::Result;
use crate::sync::{fence, AtomicPtr, AtomicUsize, Ordering};
use bucket::Bucket;
use std::sync::atomic::AtomicUsize as CountAtomic;
use std::sync::Mutex;
use table::{first_bucket, second_bucket, Table};

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

const WORDS: usize = BUCKET_BYTES / 8;
/// Bits of the first word holding the version; entries start right after them.
const VERSION_BITS: u32 = 31;
const VERSION_MASK: u64 = (1 << VERSION_BITS) - 1;
const LOCKED: u64 = 1;
const MAX_TAG_BITS: u32 = 16;
/// Candidate layouts, densest first: (entries per bucket, bits per entry). Each fits the 481
/// bits after the version.
const LAYOUTS: [(usize, u32); 4] = [(13, 37), (12, 40), (10, 48), (7, 64)];

/// Bytes of the hash secret (xxh3's own default secret is this long).
const SECRET_BYTES: usize = 192;

/// xxh3's secret, drawn once per process. With the public default secret a client choosing
/// keys can make any number of them share one hash (words equal to the secret's multiply by
/// zero), fill their two buckets and make every write grow the index and fail; without the
/// secret it cannot. Hashes never leave memory, so they need not agree across processes.
static SECRET: std::sync::LazyLock<[u8; SECRET_BYTES]> = std::sync::LazyLock::new(|| {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new();
    let mut secret = [0u8; SECRET_BYTES];
    for (number, word) in secret.chunks_exact_mut(8).enumerate() {
        let mut hasher = random.build_hasher();
        hasher.write_usize(number);
        word.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    secret
});

/// Hash of a key as used by the index (and every other in-memory hash table of keys).
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_secret(key, SECRET.as_slice())
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

#[derive(Debug)]
struct Partition {
    table: AtomicPtr<Table>,
    /// Held while resizing; holds tables retired by resizes until the epoch passes them.
    retired: Mutex<Vec<(u64, resize::RetiredTable)>>,
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

    fn partition(&self, hash: u64) -> &Partition {
        // Cannot panic: the mask is `partitions.len() - 1` and the length is a power of two.
        // Every lookup and insert goes through here, so it is not paid as a checked `get`.
        #[allow(clippy::indexing_slicing)]
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
                        .map(|(_, table)| table.bucket_bytes())
                        .sum::<usize>()
                })
            })
            .sum()
    }
}
