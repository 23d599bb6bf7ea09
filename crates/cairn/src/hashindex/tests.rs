//! The hash index's unit tests: layouts, packing, versions, resizing and stress.

use super::*;
use crate::epoch::EpochTable;
use crate::sync::AtomicU64;
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

    fn check(self, index: &HashIndex, epochs: &EpochTable) {
        let guard = epochs.pin();
        if let Err(broken) = index.check_invariants(&guard, |stored| self.hash_of(stored)) {
            panic!("{broken}");
        }
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
        scheme.check(&index, &epochs);
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
        scheme.check(&index, &epochs);
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
    scheme.check(&index, &epochs);
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

#[test]
fn the_check_catches_a_bucket_left_locked() {
    let epochs = EpochTable::new();
    let index = COMPACT.index(1, 8);
    for key in 0..20 {
        COMPACT.put(&index, &epochs, key, 0);
    }
    COMPACT.check(&index, &epochs);
    let guard = epochs.pin();
    assert!(index.leave_bucket_locked(&guard, 3));
    let broken = index
        .check_invariants(&guard, |stored| COMPACT.hash_of(stored))
        .unwrap_err();
    assert!(broken.contains("invariant 3"), "{broken}");
}

#[test]
fn the_check_catches_an_entry_outside_its_buckets() {
    let epochs = EpochTable::new();
    let index = COMPACT.index(1, 64);
    for key in 0..20 {
        COMPACT.put(&index, &epochs, key, 0);
    }
    COMPACT.check(&index, &epochs);
    let guard = epochs.pin();
    let key = 1000;
    index.misplace_entry(&guard, COMPACT.hash_of(key), COMPACT.location(key, 0));
    let broken = index
        .check_invariants(&guard, |stored| COMPACT.hash_of(stored))
        .unwrap_err();
    assert!(broken.contains("invariant 2"), "{broken}");
}
