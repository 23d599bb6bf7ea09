//! History-checked concurrency test: several threads put, get and read-modify-write a small
//! key set while compaction and epoch reclamation run constantly underneath. Every operation is
//! logged with start/end ticks of a shared logical clock, and each key's history is checked:
//! a read must return a value that some write produced, that started before the read ended, and
//! that no other write to the key superseded entirely before the read started (the per-key
//! linearizability condition for registers). RMW counters must not lose increments.
//!
//! Set `CAIRN_SOAK=1` for ten times more operations.

// Test helpers outside #[test] functions: panicking on failure is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn::{MemStore, MemStoreOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const KEYS: u32 = 64;
const COUNTERS: u32 = 4;
const THREADS: u32 = 4;

#[derive(Debug, Clone, Copy)]
struct Write {
    key: u32,
    thread: u32,
    counter: u64,
    start: u64,
    end: u64,
}

#[derive(Debug, Clone, Copy)]
struct Read {
    key: u32,
    observed: (u32, u64),
    start: u64,
    end: u64,
}

fn encode(key: u32, thread: u32, counter: u64, padding: usize) -> Vec<u8> {
    let mut value = Vec::with_capacity(16 + padding);
    value.extend_from_slice(&key.to_le_bytes());
    value.extend_from_slice(&thread.to_le_bytes());
    value.extend_from_slice(&counter.to_le_bytes());
    let fill = (counter as u8) ^ (thread as u8) ^ (key as u8);
    value.resize(16 + padding, fill);
    value
}

/// Returns (thread, counter) after checking the value is intact.
fn decode(key: u32, value: &[u8]) -> (u32, u64) {
    assert!(value.len() >= 16, "short value for key {key}");
    let stored_key = u32::from_le_bytes(value[0..4].try_into().unwrap());
    let thread = u32::from_le_bytes(value[4..8].try_into().unwrap());
    let counter = u64::from_le_bytes(value[8..16].try_into().unwrap());
    assert_eq!(stored_key, key, "value of another key returned");
    let fill = (counter as u8) ^ (thread as u8) ^ (key as u8);
    assert!(
        value[16..].iter().all(|&byte| byte == fill),
        "torn value for key {key}"
    );
    (thread, counter)
}

fn key_bytes(key: u32) -> Vec<u8> {
    format!("history-{key}").into_bytes()
}

#[test]
fn per_key_linearizable_under_compaction_and_reclamation() {
    let operations: u64 = if std::env::var_os("CAIRN_SOAK").is_some() {
        300_000
    } else {
        100_000
    };
    let store = Arc::new(
        MemStore::new(MemStoreOptions {
            capacity_bytes: 3 << 20,
            heads: 2,
            segment_bytes: 64 << 10,
            block_bytes: 4 << 10,
            compaction_threads: 1,
            index_partitions: 2,
            index_initial_buckets: 2,
            max_value_bytes: 16 << 10,
            compaction_trigger_free_fraction: 0.6,
            background_max_utilization: 0.95,
            full_wait_limit: Duration::from_secs(10),
            ..MemStoreOptions::default()
        })
        .unwrap(),
    );
    let clock = Arc::new(AtomicU64::new(1));
    // Initial values: written by "thread" THREADS with counter 0, before any reader starts.
    let mut writes: Vec<Write> = Vec::new();
    for key in 0..KEYS {
        store
            .put(&key_bytes(key), &encode(key, THREADS, 0, 8))
            .unwrap();
        writes.push(Write {
            key,
            thread: THREADS,
            counter: 0,
            start: 0,
            end: 0,
        });
    }
    let mut handles = Vec::new();
    for thread in 0..THREADS {
        let (store, clock) = (store.clone(), clock.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(u64::from(thread) + 7);
            let mut writes = Vec::new();
            let mut reads = Vec::new();
            let mut increments = 0u64;
            for counter in 1..=operations {
                let key = rng.gen_range(0..KEYS);
                let choice = rng.gen_range(0..100);
                if choice < 35 {
                    let padding = if rng.gen_bool(0.05) {
                        rng.gen_range(2000..12000)
                    } else {
                        rng.gen_range(0..600)
                    };
                    let value = encode(key, thread, counter, padding);
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    store.put(&key_bytes(key), &value).unwrap();
                    let end = clock.fetch_add(1, Ordering::SeqCst);
                    writes.push(Write {
                        key,
                        thread,
                        counter,
                        start,
                        end,
                    });
                } else if choice < 45 {
                    let counter_key = format!("counter-{}", key % COUNTERS).into_bytes();
                    store
                        .update(&counter_key, |current| {
                            let value = current.map_or(0, |bytes| {
                                u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]))
                            });
                            Some((value + 1).to_le_bytes().to_vec())
                        })
                        .unwrap();
                    increments += 1;
                } else {
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let value = store.get(&key_bytes(key)).unwrap();
                    let end = clock.fetch_add(1, Ordering::SeqCst);
                    let value = value.unwrap_or_else(|| panic!("key {key} vanished"));
                    reads.push(Read {
                        key,
                        observed: decode(key, &value),
                        start,
                        end,
                    });
                }
            }
            (writes, reads, increments)
        }));
    }
    let mut reads = Vec::new();
    let mut increments = 0;
    for handle in handles {
        let (thread_writes, thread_reads, thread_increments) = handle.join().unwrap();
        writes.extend(thread_writes);
        reads.extend(thread_reads);
        increments += thread_increments;
    }
    // RMW atomicity: no increment lost or doubled.
    let total: u64 = (0..COUNTERS)
        .map(|counter| {
            let bytes = store
                .get(format!("counter-{counter}").as_bytes())
                .unwrap()
                .unwrap_or_default();
            u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]))
        })
        .sum();
    assert_eq!(total, increments);
    // Per-key register linearizability check.
    let mut by_key: HashMap<u32, Vec<Write>> = HashMap::new();
    let mut by_identity: HashMap<(u32, u32, u64), Write> = HashMap::new();
    for write in &writes {
        by_key.entry(write.key).or_default().push(*write);
        by_identity.insert((write.key, write.thread, write.counter), *write);
    }
    for read in &reads {
        let (thread, counter) = read.observed;
        let write = by_identity
            .get(&(read.key, thread, counter))
            .unwrap_or_else(|| panic!("read {read:?} returned a value nobody wrote"));
        assert!(
            write.start < read.end,
            "read {read:?} saw a future write {write:?}"
        );
        let superseded = by_key[&read.key]
            .iter()
            .any(|other| other.start > write.end && other.end < read.start);
        assert!(!superseded, "read {read:?} returned stale write {write:?}");
    }
    let stats = store.stats();
    assert!(stats.compactions > 0, "{stats:?}");
    eprintln!(
        "{} writes, {} reads, {} increments checked; {stats:?}",
        writes.len(),
        reads.len(),
        increments
    );
}
