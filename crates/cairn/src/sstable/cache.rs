//! The block cache: a bounded, sharded LRU of decoded blocks shared by every open table.
//!
//! Keys are `(cache_id, block offset)`: each open [`super::Table`] takes a fresh id from
//! [`BlockCache::new_id`], so tables never see each other's blocks even if a file number were
//! reused. Capacity is in bytes; an entry is charged its block size plus a fixed overhead
//! ([`ENTRY_OVERHEAD_BYTES`]). The capacity is split evenly over [`SHARD_COUNT`] shards (the
//! shard is chosen by a hash of the key) so concurrent readers rarely contend; each shard is an
//! exact LRU: a hash map from key to entry plus a recency index ordered by a per-shard tick
//! (oldest tick evicted first).
//!
//! Thread-safety contract: `BlockCache` is `Send + Sync`; each shard is guarded by its own
//! `Mutex`, held only for map updates (never during I/O). Hit/miss counters are relaxed atomics
//! (statistics only, no ordering implied).
//!
//! Invariants: the usage of every shard stays at or below its capacity after every `insert`, so
//! `usage_bytes() <= capacity_bytes()` always holds; a block larger than a shard's capacity is
//! not cached; a capacity of 0 disables caching (every `get` misses, `insert` does nothing).

use super::block::Block;
use crate::sync::StripedCounter;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// log2 of [`SHARD_COUNT`].
const SHARD_BITS: u32 = 4;

/// Number of independently locked shards.
pub const SHARD_COUNT: usize = 1 << SHARD_BITS;

/// Bytes charged per entry on top of the block's own size (map, index and `Arc` bookkeeping).
pub const ENTRY_OVERHEAD_BYTES: usize = 64;

/// A cache key: `(cache_id, block offset)`.
pub type CacheKey = (u64, u64);

#[derive(Debug)]
struct Entry {
    block: Arc<Block>,
    charge: usize,
    tick: u64,
}

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<CacheKey, Entry>,
    /// Recency index: tick -> key; the first entry is the least recently used.
    recency: BTreeMap<u64, CacheKey>,
    usage: usize,
    capacity: usize,
    clock: u64,
}

impl Shard {
    fn touch(&mut self, key: CacheKey) -> Option<Arc<Block>> {
        self.clock += 1;
        let tick = self.clock;
        let entry = self.map.get_mut(&key)?;
        self.recency.remove(&entry.tick);
        entry.tick = tick;
        self.recency.insert(tick, key);
        Some(Arc::clone(&entry.block))
    }

    fn remove(&mut self, key: &CacheKey) {
        if let Some(entry) = self.map.remove(key) {
            self.recency.remove(&entry.tick);
            self.usage -= entry.charge;
        }
    }

    fn insert(&mut self, key: CacheKey, block: Arc<Block>, charge: usize) {
        self.remove(&key);
        if charge > self.capacity {
            return;
        }
        self.clock += 1;
        let tick = self.clock;
        self.map.insert(
            key,
            Entry {
                block,
                charge,
                tick,
            },
        );
        self.recency.insert(tick, key);
        self.usage += charge;
        while self.usage > self.capacity {
            let Some((_, oldest)) = self.recency.pop_first() else {
                break;
            };
            if let Some(entry) = self.map.remove(&oldest) {
                self.usage -= entry.charge;
            }
        }
    }
}

/// The shard of a key (always `< SHARD_COUNT`).
#[inline]
fn shard_index(key: CacheKey) -> usize {
    let mixed =
        (key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ key.1).wrapping_mul(0xff51_afd7_ed55_8ccd);
    (mixed >> (64 - SHARD_BITS)) as usize
}

/// A bounded, sharded LRU cache of blocks.
#[derive(Debug)]
pub struct BlockCache {
    shards: [Mutex<Shard>; SHARD_COUNT],
    capacity: usize,
    hits: StripedCounter,
    misses: StripedCounter,
    next_id: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` (0 disables caching).
    pub fn new(capacity_bytes: usize) -> Self {
        let base = capacity_bytes / SHARD_COUNT;
        let extra = capacity_bytes % SHARD_COUNT;
        let shards = std::array::from_fn(|index| {
            Mutex::new(Shard {
                capacity: base + usize::from(index < extra),
                ..Shard::default()
            })
        });
        BlockCache {
            shards,
            capacity: capacity_bytes,
            hits: StripedCounter::default(),
            misses: StripedCounter::default(),
            next_id: AtomicU64::new(1),
        }
    }

    /// A fresh id for a table's keys.
    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn shard(&self, key: CacheKey) -> MutexGuard<'_, Shard> {
        // A poisoned shard is still consistent: no shard method panics mid-update.
        // `shard_index` masks with the (power-of-two) shard count, so the index is in range.
        #[allow(clippy::indexing_slicing)]
        self.shards[shard_index(key)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached block for `(cache_id, offset)`, marking it most recently used.
    pub fn get(&self, cache_id: u64, offset: u64) -> Option<Arc<Block>> {
        let found = if self.capacity == 0 {
            None
        } else {
            self.shard((cache_id, offset)).touch((cache_id, offset))
        };
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.add(1);
        found
    }

    /// Caches `block` under `(cache_id, offset)`, evicting least recently used blocks to stay
    /// within capacity.
    pub fn insert(&self, cache_id: u64, offset: u64, block: Arc<Block>) {
        if self.capacity == 0 {
            return;
        }
        let charge = block.size_bytes() + ENTRY_OVERHEAD_BYTES;
        self.shard((cache_id, offset))
            .insert((cache_id, offset), block, charge);
    }

    /// Bytes currently charged.
    pub fn usage_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(PoisonError::into_inner).usage)
            .sum()
    }

    #[cfg(any(test, feature = "testing"))]
    /// Number of cached blocks.
    pub fn entry_count(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .map
                    .len()
            })
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sstable::block::{BlockBuilder, BlockOrigin};

    fn block_of(size: usize) -> Arc<Block> {
        let mut builder = BlockBuilder::new(16);
        let key = crate::key::internal_key(b"k", 1, crate::key::ValueKind::Put);
        builder.add(&key, &vec![7u8; size]);
        Arc::new(Block::new(builder.finish(), BlockOrigin::detached()).unwrap())
    }

    #[test]
    fn eviction_respects_capacity() {
        let capacity = 64 * 1024;
        let cache = BlockCache::new(capacity);
        let id = cache.new_id();
        for offset in 0..1000u64 {
            cache.insert(id, offset * 4096, block_of(1000));
            assert!(cache.usage_bytes() <= capacity);
        }
        let entries = cache.entry_count();
        assert!(entries > 0 && entries < 1000, "{entries}");
        assert!(cache.usage_bytes() > capacity / 2);
        // The most recent insert is still there; the first is long gone.
        assert!(cache.get(id, 999 * 4096).is_some());
        assert!(cache.get(id, 0).is_none());
        assert_eq!((cache.hits(), cache.misses()), (1, 1));
        // A block larger than a shard is never cached.
        cache.insert(id, 1, block_of(capacity));
        assert!(cache.get(id, 1).is_none());
        assert!(cache.usage_bytes() <= capacity);
    }

    #[test]
    fn lru_order_within_a_shard() {
        let cache =
            BlockCache::new(SHARD_COUNT * 3 * (block_of(100).size_bytes() + ENTRY_OVERHEAD_BYTES));
        let id = cache.new_id();
        // Find four offsets landing in one shard (each shard holds three blocks).
        let shard_of = |offset: u64| shard_index((id, offset));
        let same: Vec<u64> = (0..10_000u64)
            .filter(|&offset| shard_of(offset) == shard_of(0))
            .take(4)
            .collect();
        for &offset in &same[..3] {
            cache.insert(id, offset, block_of(100));
        }
        assert!(cache.get(id, same[0]).is_some()); // same[1] is now least recent
        cache.insert(id, same[3], block_of(100));
        assert!(cache.get(id, same[1]).is_none());
        assert!(cache.get(id, same[0]).is_some());
        assert!(cache.get(id, same[2]).is_some());
        assert!(cache.get(id, same[3]).is_some());
    }

    #[test]
    fn zero_capacity_disables_caching() {
        let cache = BlockCache::new(0);
        cache.insert(1, 0, block_of(10));
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.usage_bytes(), 0);
        assert_eq!(cache.misses(), 1);
    }
}
