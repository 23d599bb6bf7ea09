//! Memtable insert and lookup latency: the memtable work of a put of a new key (a skiplist
//! search and link, and an index publish) and of a read-modify-write (an index probe and a
//! chain walk, then a chain insert).
//!
//! `cargo run --release -p cairn --example memtable_lookup -- [entries] [repetitions]`
//! Fills one memtable with `entries` random 16-byte keys (cairn-bench's key shape: a
//! big-endian number then `'0'` padding) and 100-byte values — 500,000 entries is about the
//! 64 MiB memtable the benchmarks use — timing the fill, then times, single-threaded, random
//! lookups of present keys (`get`) and the read-modify-write pair (`get_entry_hinted` + a
//! hinted insert). Prints nanoseconds per operation, median of the repetitions, and whether
//! the key index saturated (then lookups searched the skiplist).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn::testing::key::ValueKind;
use cairn::testing::memtable::Memtable;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn key(number: u64) -> [u8; 16] {
    let mut key = [b'0'; 16];
    key[..8].copy_from_slice(&number.to_be_bytes());
    key
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let entries: u64 = arguments
        .get(1)
        .and_then(|text| text.parse().ok())
        .unwrap_or(500_000);
    let repetitions: usize = arguments
        .get(2)
        .and_then(|text| text.parse().ok())
        .unwrap_or(5);
    let lookups = 1_000_000u64;
    let value = [7u8; 100];
    let mut insert_nanoseconds = Vec::new();
    let mut get_nanoseconds = Vec::new();
    let mut update_nanoseconds = Vec::new();
    for repetition in 0..repetitions {
        let memtable = Memtable::new();
        let mut rng = SmallRng::seed_from_u64(repetition as u64);
        let numbers: Vec<u64> = (0..entries).map(|_| rng.gen()).collect();
        let start = Instant::now();
        for (index, number) in numbers.iter().enumerate() {
            memtable.insert(&key(*number), index as u64 + 1, ValueKind::Put, &value);
        }
        insert_nanoseconds.push(start.elapsed().as_nanos() as f64 / entries.max(1) as f64);
        let mut found = 0u64;
        let start = Instant::now();
        for _ in 0..lookups {
            let number = numbers[rng.gen_range(0..numbers.len())];
            if memtable.get(&key(number), u64::MAX >> 8).is_some() {
                found += 1;
            }
        }
        get_nanoseconds.push(start.elapsed().as_nanos() as f64 / lookups as f64);
        assert_eq!(found, lookups);
        let start = Instant::now();
        for sequence in entries + 1..=entries + lookups / 4 {
            let number = numbers[rng.gen_range(0..numbers.len())];
            let user_key = key(number);
            let (entry, hint) = memtable.get_entry_hinted(&user_key);
            assert!(entry.is_some());
            memtable.insert_hinted(Some(&hint), &user_key, sequence, ValueKind::Put, &value);
        }
        update_nanoseconds.push(start.elapsed().as_nanos() as f64 / (lookups / 4) as f64);
        eprintln!(
            "repetition {}: insert {:.0} ns, get {:.0} ns, get + hinted insert {:.0} ns ({} MiB, index {} MiB{})",
            repetition + 1,
            insert_nanoseconds[repetition],
            get_nanoseconds[repetition],
            update_nanoseconds[repetition],
            memtable.memory_bytes() >> 20,
            memtable.index_memory_bytes() >> 20,
            if memtable.index_saturated() {
                ", saturated"
            } else {
                ""
            }
        );
    }
    println!(
        "memtable of {entries} entries: insert {:.0} ns, get {:.0} ns, get + hinted insert {:.0} ns (median of {repetitions})",
        median(insert_nanoseconds),
        median(get_nanoseconds),
        median(update_nanoseconds)
    );
}
