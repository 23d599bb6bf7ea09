//! The block cache: a bounded, sharded CLOCK cache of decoded blocks shared by every open
//! table, whose hits take no lock and write no shared memory.
//!
//! Keys are `(cache_id, block offset)`: each open [`super::Table`] takes a fresh id from
//! [`BlockCache::new_id`], so tables never see each other's blocks even if a file number were
//! reused. Capacity is in bytes; an entry is charged its block size plus a fixed overhead
//! ([`ENTRY_OVERHEAD_BYTES`]). The capacity is split evenly over [`SHARD_COUNT`] shards (the
//! shard is chosen by a hash of the key).
//!
//! Why CLOCK and not LRU: an exact LRU moves an entry on every hit, which needs a lock and a
//! write to shared memory per read (with the old sharded LRU, the per-hit mutex and recency
//! update were a large part of a cached point read). Here a hit is a walk of one hash chain
//! under an epoch pin ([`crate::epoch`]: the pin writes only the thread's own slot) and sets
//! the entry's reference bit only if it is clear, so a hot block is read by every core
//! without any cache line bouncing. Eviction is CLOCK (second chance): the hand passes over
//! entries in insertion order, clearing set bits and evicting the first entry whose bit is
//! clear. A well-kept crate (`quick_cache`, `moka`) was not used: the crate keeps its
//! dependencies few, and neither gives out borrowed blocks without an `Arc` clone per hit.
//!
//! Memory reclamation: an evicted entry is unlinked from its chain under the shard's mutex,
//! then retired with a stamp from the cache's [`EpochTable`]; it is freed only once every
//! reader that might still be walking over it has unpinned (`safe_below() > stamp`).
//!
//! Thread-safety contract: `BlockCache` is `Send + Sync`. Readers (`get`, `with_block`) take
//! no lock; `insert` takes the shard's mutex (never held during I/O). Hit/miss counters are
//! striped relaxed counters (statistics only, no ordering implied).
//!
//! Invariants:
//! 1. A shard's `usage` is the sum of the charges of the entries in its `clock` ring, and stays
//!    at or below its capacity after every `insert`, so `usage_bytes() <= capacity_bytes()`;
//!    a block larger than a shard's capacity is not cached; a capacity of 0 disables caching.
//! 2. Every entry of the `clock` ring is reachable from exactly one bucket chain (the one its
//!    key hashes to), and every entry reachable from a chain is in the ring; a key is in a
//!    chain at most once.
//! 3. An entry is freed only after it was unlinked and the epoch table reports every reader
//!    pinned at the unlink gone (retired list ordered by stamp).
//!
//! With the `invariants` feature, `insert` checks 1 and 2 on small shards.

use super::block::Block;
use crate::epoch::EpochTable;
use crate::sync::StripedCounter;
use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// log2 of [`SHARD_COUNT`].
const SHARD_BITS: u32 = 4;

/// Number of independently locked shards (for inserts; hits take no lock).
pub const SHARD_COUNT: usize = 1 << SHARD_BITS;

/// Bytes charged per entry on top of the block's own size (entry, chain and `Arc` bookkeeping).
pub const ENTRY_OVERHEAD_BYTES: usize = 64;

/// Block size assumed when sizing a shard's bucket array (chains stay short around it).
const BUCKET_BLOCK_BYTES: usize = 4096;

/// A cache key: `(cache_id, block offset)`.
pub type CacheKey = (u64, u64);

#[derive(Debug)]
struct Entry {
    key: CacheKey,
    block: Arc<Block>,
    charge: usize,
    /// CLOCK's reference bit: set by hits, cleared by the passing hand.
    referenced: AtomicBool,
    /// Next entry of the bucket chain (null at the end).
    next: AtomicPtr<Entry>,
}

/// An entry owned by a shard's ring or retired list (raw, because readers reach it through
/// the chains without a reference count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owned(*mut Entry);

// SAFETY: an `Owned` is only dereferenced under the shard mutex (writers) or an epoch pin
// (readers, through the chains); the entry it points to is itself `Send + Sync` (atomics, an
// `Arc` and plain data).
unsafe impl Send for Owned {}

#[derive(Debug, Default)]
struct ShardState {
    /// Live entries in insertion order; the front is the CLOCK hand.
    clock: VecDeque<Owned>,
    usage: usize,
    capacity: usize,
    /// Unlinked entries with the stamp they were retired with (non-decreasing).
    retired: Vec<(u64, Owned)>,
}

#[derive(Debug)]
struct Shard {
    buckets: Box<[AtomicPtr<Entry>]>,
    state: Mutex<ShardState>,
}

/// The mixed hash of a key: the top bits pick the shard, the low bits the bucket.
#[inline]
fn hash(key: CacheKey) -> u64 {
    (key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ key.1).wrapping_mul(0xff51_afd7_ed55_8ccd)
}

/// The shard of a key (always `< SHARD_COUNT`).
#[inline]
fn shard_index(key: CacheKey) -> usize {
    (hash(key) >> (64 - SHARD_BITS)) as usize
}

impl Shard {
    fn new(capacity: usize) -> Self {
        let buckets = (capacity / BUCKET_BLOCK_BYTES)
            .clamp(64, 1 << 20)
            .next_power_of_two();
        Shard {
            buckets: (0..buckets)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            state: Mutex::new(ShardState {
                capacity,
                ..ShardState::default()
            }),
        }
    }

    #[inline]
    fn bucket(&self, key: CacheKey) -> &AtomicPtr<Entry> {
        // The mask keeps the index in range (the bucket count is a power of two).
        #[allow(clippy::cast_possible_truncation, clippy::indexing_slicing)]
        &self.buckets[(hash(key) as usize) & (self.buckets.len() - 1)]
    }

    fn lock(&self) -> MutexGuard<'_, ShardState> {
        // A poisoned shard is still consistent: no shard update panics midway.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entry for `key`, if linked. The caller is pinned or holds the shard mutex.
    fn find(&self, key: CacheKey) -> Option<&Entry> {
        let mut current = self.bucket(key).load(Ordering::Acquire);
        // SAFETY: every pointer in a chain is a live entry or one retired after the caller
        // pinned (or, under the mutex, not yet retired): invariant 3 keeps it allocated for
        // as long as the caller's pin or lock, which outlives the returned borrow's use.
        while let Some(entry) = unsafe { current.as_ref() } {
            if entry.key == key {
                return Some(entry);
            }
            current = entry.next.load(Ordering::Acquire);
        }
        None
    }

    /// Unlinks `target` from its chain. The caller holds the shard mutex.
    fn unlink(&self, target: Owned) {
        // SAFETY: `target` is in the ring (invariant 2), so allocated; we hold the mutex, so no
        // one else unlinks or frees concurrently.
        let (key, next) = unsafe {
            let entry = &*target.0;
            (entry.key, entry.next.load(Ordering::Acquire))
        };
        let mut link = self.bucket(key);
        loop {
            let current = link.load(Ordering::Acquire);
            if current.is_null() {
                return;
            }
            if current == target.0 {
                link.store(next, Ordering::Release);
                return;
            }
            // SAFETY: a linked entry under the mutex is allocated (invariant 3).
            link = unsafe { &(*current).next };
        }
    }

    /// Evicts by CLOCK until `incoming` more bytes fit; returns what was unlinked.
    fn make_room(&self, state: &mut ShardState, incoming: usize) -> Vec<Owned> {
        let mut evicted = Vec::new();
        // Each entry is passed over at most once with its bit set (the hand clears it), so
        // two turns of the ring always suffice.
        let mut budget = state.clock.len() * 2 + 1;
        while state.usage + incoming > state.capacity && budget > 0 {
            budget -= 1;
            let Some(candidate) = state.clock.pop_front() else {
                break;
            };
            // SAFETY: ring entries are allocated (invariant 2/3) and we hold the mutex.
            let entry = unsafe { &*candidate.0 };
            if entry.referenced.swap(false, Ordering::Relaxed) {
                state.clock.push_back(candidate);
                continue;
            }
            self.unlink(candidate);
            state.usage -= entry.charge;
            evicted.push(candidate);
        }
        evicted
    }
}

/// A bounded, sharded CLOCK cache of blocks with lock-free hits.
#[derive(Debug)]
pub struct BlockCache {
    shards: Box<[Shard]>,
    capacity: usize,
    epoch: EpochTable,
    hits: StripedCounter,
    misses: StripedCounter,
    /// Blocks read in place from mapped tables, past the cache (statistics only).
    mapped_reads: StripedCounter,
    next_id: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` (0 disables caching).
    pub fn new(capacity_bytes: usize) -> Self {
        let base = capacity_bytes / SHARD_COUNT;
        let extra = capacity_bytes % SHARD_COUNT;
        let shards = (0..SHARD_COUNT)
            .map(|index| Shard::new(base + usize::from(index < extra)))
            .collect();
        BlockCache {
            shards,
            capacity: capacity_bytes,
            epoch: EpochTable::new(),
            hits: StripedCounter::default(),
            misses: StripedCounter::default(),
            mapped_reads: StripedCounter::default(),
            next_id: AtomicU64::new(1),
        }
    }

    /// A fresh id for a table's keys.
    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    #[inline]
    fn shard(&self, key: CacheKey) -> &Shard {
        // `shard_index` is below SHARD_COUNT, the length of `shards`.
        #[allow(clippy::indexing_slicing)]
        &self.shards[shard_index(key)]
    }

    /// Runs `f` on the cached block for `(cache_id, offset)` without taking a reference
    /// count or a lock (the block stays alive for the call under an epoch pin); `None` on a
    /// miss. Marks the block recently used.
    pub fn with_block<R>(
        &self,
        cache_id: u64,
        offset: u64,
        f: impl FnOnce(&Arc<Block>) -> R,
    ) -> Option<R> {
        if self.capacity == 0 {
            self.misses.add(1);
            return None;
        }
        let key = (cache_id, offset);
        let _pin = self.epoch.pin();
        let Some(entry) = self.shard(key).find(key) else {
            self.misses.add(1);
            return None;
        };
        // Read before write: a hot block's bit is already set, so its line stays shared in
        // every core's cache.
        if !entry.referenced.load(Ordering::Relaxed) {
            entry.referenced.store(true, Ordering::Relaxed);
        }
        self.hits.add(1);
        Some(f(&entry.block))
    }

    /// The cached block for `(cache_id, offset)`, shared (for iterators that keep it).
    pub fn get(&self, cache_id: u64, offset: u64) -> Option<Arc<Block>> {
        self.with_block(cache_id, offset, Arc::clone)
    }

    /// Caches `block` under `(cache_id, offset)` (kept as is if the key is already cached),
    /// evicting by CLOCK to stay within capacity.
    pub fn insert(&self, cache_id: u64, offset: u64, block: Arc<Block>) {
        if self.capacity == 0 {
            return;
        }
        let key = (cache_id, offset);
        let charge = block.size_bytes() + ENTRY_OVERHEAD_BYTES;
        let shard = self.shard(key);
        let mut state = shard.lock();
        if charge > state.capacity || shard.find(key).is_some() {
            return;
        }
        let evicted = shard.make_room(&mut state, charge);
        let bucket = shard.bucket(key);
        let entry = Box::into_raw(Box::new(Entry {
            key,
            block,
            charge,
            referenced: AtomicBool::new(false),
            next: AtomicPtr::new(bucket.load(Ordering::Acquire)),
        }));
        // Release: a reader that sees the pointer sees the entry's fields.
        bucket.store(entry, Ordering::Release);
        state.clock.push_back(Owned(entry));
        state.usage += charge;
        if !evicted.is_empty() {
            let stamp = self.epoch.advance();
            state
                .retired
                .extend(evicted.into_iter().map(|owned| (stamp, owned)));
        }
        self.reclaim(&mut state);
        #[cfg(feature = "invariants")]
        if state.clock.len() <= 256 {
            if let Err(broken) = check_shard(shard, &state) {
                panic!("block cache broke an invariant: {broken}");
            }
        }
    }

    /// Frees retired entries no reader can still reach (invariant 3).
    fn reclaim(&self, state: &mut ShardState) {
        if state.retired.is_empty() {
            return;
        }
        let safe_below = self.epoch.safe_below();
        let ready = state
            .retired
            .partition_point(|(stamp, _)| *stamp < safe_below);
        for (_, owned) in state.retired.drain(..ready) {
            // SAFETY: unlinked before its stamp was taken, and every reader pinned at or
            // before that stamp has unpinned (`stamp < safe_below`): nothing can reach it.
            drop(unsafe { Box::from_raw(owned.0) });
        }
    }

    /// Bytes currently charged.
    pub fn usage_bytes(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().usage).sum()
    }

    #[cfg(any(test, feature = "testing"))]
    /// Number of cached blocks.
    pub fn entry_count(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().clock.len())
            .sum()
    }

    #[cfg(any(test, feature = "testing"))]
    /// The configured capacity.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.get()
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.get()
    }

    /// Counts a block a mapped table read in place without the cache (such blocks are never
    /// cached: the page cache already holds them).
    pub fn note_mapped_read(&self) {
        self.mapped_reads.add(1);
    }

    /// Blocks read in place from mapped tables.
    pub fn mapped_reads(&self) -> u64 {
        self.mapped_reads.get()
    }

    #[cfg(test)]
    fn check_invariants(&self) -> Result<(), String> {
        for shard in &self.shards {
            check_shard(shard, &shard.lock())?;
        }
        Ok(())
    }
}

/// Invariants 1 and 2 for one shard (the caller holds its mutex).
#[cfg(any(test, feature = "invariants"))]
fn check_shard(shard: &Shard, state: &ShardState) -> Result<(), String> {
    let mut usage = 0;
    for owned in &state.clock {
        // SAFETY: ring entries are allocated while the mutex is held (invariant 3).
        let entry = unsafe { &*owned.0 };
        usage += entry.charge;
        match shard.find(entry.key) {
            Some(found) if ptr::eq(found, entry) => {}
            _ => {
                return Err(format!(
                    "ring entry {:?} is not linked in its chain",
                    entry.key
                ))
            }
        }
    }
    if usage != state.usage || usage > state.capacity {
        return Err(format!(
            "usage {} (ring sum {usage}) against capacity {}",
            state.usage, state.capacity
        ));
    }
    let mut linked = 0;
    for bucket in &shard.buckets {
        let mut current = bucket.load(Ordering::Acquire);
        // SAFETY: linked entries are allocated while the mutex is held (invariant 3).
        while let Some(entry) = unsafe { current.as_ref() } {
            linked += 1;
            current = entry.next.load(Ordering::Acquire);
        }
    }
    if linked != state.clock.len() {
        return Err(format!(
            "{linked} linked entries, {} in the ring",
            state.clock.len()
        ));
    }
    Ok(())
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        for shard in &self.shards {
            let mut state = shard.lock();
            let live = state.clock.drain(..).collect::<Vec<_>>();
            let retired = state.retired.drain(..).map(|(_, owned)| owned);
            for owned in live.into_iter().chain(retired) {
                // SAFETY: `&mut self`: no reader is pinned on this cache any more, and each
                // entry is in exactly one of the ring and the retired list.
                drop(unsafe { Box::from_raw(owned.0) });
            }
            for bucket in &shard.buckets {
                bucket.store(ptr::null_mut(), Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests;
