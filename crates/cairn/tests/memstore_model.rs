//! Model test: random operations on a `MemStore` against a `HashMap` oracle, with compaction
//! forced constantly (a background thread that compacts even full segments, plus explicit
//! `compact_now` calls), in a store small enough that the log wraps many times.
//!
//! Set `CAIRN_SOAK=1` for ten times more seeds and operations.

// Test helpers outside #[test] functions: panicking on failure is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn::{Error, MemStore, MemStoreOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::time::Duration;

fn soak() -> bool {
    std::env::var_os("CAIRN_SOAK").is_some()
}

fn options(compaction_threads: usize) -> MemStoreOptions {
    MemStoreOptions {
        capacity_bytes: 2 << 20,
        heads: 3,
        segment_bytes: 32 << 10,
        block_bytes: 4 << 10,
        compaction_threads,
        index_partitions: 4,
        index_initial_buckets: 2,
        max_value_bytes: 8 << 10,
        compaction_trigger_free_fraction: 1.0,
        background_max_utilization: 1.0,
        full_wait_limit: Duration::from_secs(5),
        ..MemStoreOptions::default()
    }
}

fn run(seed: u64, operations: usize, compaction_threads: usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let store = MemStore::new(options(compaction_threads)).unwrap();
    let mut oracle: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let key_space = 400u32;
    for step in 0..operations {
        let key = format!("key-{}", rng.gen_range(0..key_space)).into_bytes();
        let context = || {
            format!(
                "seed {seed} step {step} key {}",
                String::from_utf8_lossy(&key)
            )
        };
        match rng.gen_range(0..100) {
            0..=39 => {
                let length = if rng.gen_bool(0.1) {
                    rng.gen_range(2000..8000)
                } else {
                    rng.gen_range(0..300)
                };
                let value: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
                match store.put(&key, &value) {
                    Ok(()) => {
                        oracle.insert(key.clone(), value);
                    }
                    Err(Error::Full { .. }) => {}
                    Err(error) => panic!("{}: put failed: {error}", context()),
                }
            }
            40..=54 => {
                let existed = store.remove(&key).unwrap();
                assert_eq!(existed, oracle.remove(&key).is_some(), "{}", context());
            }
            55..=64 => {
                let suffix: u8 = rng.gen();
                let result = store.update(&key, |current| {
                    let mut value = current.map(<[u8]>::to_vec).unwrap_or_default();
                    if value.len() > 5000 {
                        return None;
                    }
                    value.push(suffix);
                    Some(value)
                });
                match result {
                    Ok(stored) => {
                        let mut value = oracle.get(&key).cloned().unwrap_or_default();
                        if value.len() > 5000 {
                            oracle.remove(&key);
                        } else {
                            value.push(suffix);
                            oracle.insert(key.clone(), value);
                        }
                        assert_eq!(stored.as_ref(), oracle.get(&key), "{}", context());
                    }
                    Err(Error::Full { .. }) => {}
                    Err(error) => panic!("{}: update failed: {error}", context()),
                }
            }
            65..=66 => {
                store.compact_now(1.0);
            }
            67..=69 => {
                assert_eq!(
                    store.contains(&key).unwrap(),
                    oracle.contains_key(&key),
                    "{}",
                    context()
                );
            }
            _ => {
                assert_eq!(
                    store.get(&key).unwrap(),
                    oracle.get(&key).cloned(),
                    "{}",
                    context()
                );
            }
        }
    }
    for (key, value) in &oracle {
        assert_eq!(
            store.get(key).unwrap().as_ref(),
            Some(value),
            "seed {seed} final"
        );
    }
    let expected_live: u64 = oracle
        .iter()
        .map(|(key, value)| cairn::testing::logmem::object::object_len(key.len(), value.len()))
        .sum();
    // A background compaction may be between copying an object and re-pointing it (the copy is
    // counted before the old one is dropped), so poll until a quiet moment.
    let mut stats = store.stats();
    for _ in 0..200 {
        if stats.live_bytes == expected_live {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
        stats = store.stats();
    }
    assert_eq!(stats.live_bytes, expected_live, "seed {seed}: {stats:?}");
    assert!(stats.compactions > 0, "seed {seed}: {stats:?}");
}

#[test]
fn model_with_background_compaction() {
    let (seeds, operations) = if soak() { (40, 200_000) } else { (4, 30_000) };
    for seed in 0..seeds {
        run(seed, operations, 1);
    }
}

#[test]
fn model_with_writer_driven_compaction_only() {
    let (seeds, operations) = if soak() { (20, 200_000) } else { (2, 30_000) };
    for seed in 100..100 + seeds {
        run(seed, operations, 0);
    }
}
