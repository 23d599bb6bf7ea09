//! Block cache tests: capacity, CLOCK's second chance, and lock-free readers racing inserts.

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
    cache.check_invariants().unwrap();
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
fn clock_gives_read_blocks_a_second_chance() {
    let cache =
        BlockCache::new(SHARD_COUNT * 3 * (block_of(100).size_bytes() + ENTRY_OVERHEAD_BYTES));
    let id = cache.new_id();
    // Four offsets landing in one shard (each shard holds three blocks).
    let shard_of = |offset: u64| shard_index((id, offset));
    let same: Vec<u64> = (0..10_000u64)
        .filter(|&offset| shard_of(offset) == shard_of(0))
        .take(5)
        .collect();
    for &offset in &same[..3] {
        cache.insert(id, offset, block_of(100));
    }
    // same[0] was read: the hand spares it once and evicts same[1], the oldest unread one.
    assert!(cache
        .with_block(id, same[0], |block| block.size_bytes())
        .is_some());
    cache.insert(id, same[3], block_of(100));
    assert!(cache.get(id, same[1]).is_none());
    assert!(cache.get(id, same[2]).is_some());
    assert!(cache.get(id, same[3]).is_some());
    assert!(cache.get(id, same[0]).is_some());
    cache.check_invariants().unwrap();
    // Inserting an already cached key keeps the cached block.
    cache.insert(id, same[0], block_of(50));
    assert_eq!(cache.entry_count(), 3);
    cache.check_invariants().unwrap();
}

#[test]
fn zero_capacity_disables_caching() {
    let cache = BlockCache::new(0);
    cache.insert(1, 0, block_of(10));
    assert!(cache.get(1, 0).is_none());
    assert_eq!(cache.usage_bytes(), 0);
    assert_eq!(cache.misses(), 1);
}

#[test]
fn readers_race_inserts_and_evictions() {
    let cache = Arc::new(BlockCache::new(32 * 1024));
    let id = cache.new_id();
    let threads: Vec<_> = (0..4u64)
        .map(|thread| {
            let cache = Arc::clone(&cache);
            std::thread::spawn(move || {
                for round in 0..20_000u64 {
                    let offset = (round * 7 + thread * 13) % 97;
                    let size = 100 + (offset as usize) * 3;
                    let seen = cache.with_block(id, offset, |block| block.size_bytes());
                    match seen {
                        Some(bytes) => assert_eq!(bytes, block_of(size).size_bytes()),
                        None => cache.insert(id, offset, block_of(size)),
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    cache.check_invariants().unwrap();
    assert!(cache.usage_bytes() <= 32 * 1024);
    assert!(cache.hits() > 0 && cache.misses() > 0);
}
