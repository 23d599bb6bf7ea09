//! Seeks across many runs: a short scan from a random key (present, deleted or absent) answers
//! what a model answers, at the latest state and at snapshots, with tombstones and older
//! versions spread over memtables, level-0 files and deeper runs; and a seek that finds its key
//! in one run does not read a data block of every other run (the merge defers the seeks that
//! a Bloom filter or a sequence bound rules out).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::{CompactionStyle, Db, MemFs, Options, ReadOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

const KEYS: u64 = 2000;

fn key(index: u64) -> Vec<u8> {
    common::key(index, 8)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Up to `count` pairs from the first key `>= start`, as the model has them.
fn model_scan(model: &Model, start: &[u8], count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .range(start.to_vec()..)
        .take(count)
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// Up to `count` pairs from a cursor seek to `start` (forward, then, for a few, back again).
fn db_scan(db: &Db, options: &ReadOptions, start: &[u8], count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut cursor = db.cursor(options, None, None).unwrap();
    cursor.seek(start);
    let mut pairs = Vec::new();
    while pairs.len() < count && cursor.valid() {
        pairs.push((cursor.key().to_vec(), cursor.value().to_vec()));
        cursor.next();
    }
    cursor.status().unwrap();
    pairs
}

/// Checks seeks to random keys (with short scans after them) against `model` at `options`.
fn check_seeks(db: &Db, options: &ReadOptions, model: &Model, rng: &mut SmallRng, label: &str) {
    for round in 0..200 {
        let start = key(rng.gen_range(0..KEYS + 10));
        let count = [0, 1, 2, 5, 30][rng.gen_range(0..5)];
        assert_eq!(
            db_scan(db, options, &start, count.max(1)),
            model_scan(model, &start, count.max(1)),
            "{label}: round {round}, seek to {start:?}"
        );
        // The same through the borrowing range iterator, both ends.
        let mut pairs = match &options.snapshot {
            Some(snapshot) => db.range_at(snapshot, start.clone()..).unwrap(),
            None => db.range(start.clone()..).unwrap(),
        };
        let mut seen = Vec::new();
        while let Some(pair) = pairs.next_ref() {
            let (key, value) = pair.unwrap();
            seen.push((key.to_vec(), value.to_vec()));
            if seen.len() == count {
                break;
            }
        }
        if count > 0 {
            assert_eq!(
                seen,
                model_scan(model, &start, count),
                "{label}: round {round}"
            );
        }
        if let Some(pair) = pairs.next_back_ref() {
            let (key, _) = pair.unwrap();
            let last = model
                .range(start.clone()..)
                .next_back()
                .map(|(key, _)| key.as_slice());
            if seen.len() < model.range(start.clone()..).count() {
                assert_eq!(Some(key), last, "{label}: round {round}: back end");
            }
        }
    }
}

fn many_runs_options() -> Options {
    let mut options = common::small_lsm_options(Arc::new(MemFs::new()));
    options.membuffer_enabled = false;
    options.bloom_bits_per_key = 10;
    options.compaction_style = CompactionStyle::Tiering;
    options.runs_per_level = 4;
    options.level0_compaction_trigger = 6;
    options.level0_slowdown_trigger = 20;
    options.level0_stop_trigger = 30;
    options
}

#[test]
fn seeks_across_runs_with_tombstones_and_snapshots_match_the_model() {
    let mut rng = SmallRng::seed_from_u64(20);
    let db = Db::open("/db", many_runs_options()).unwrap();
    let mut model = Model::new();
    let mut snapshots = Vec::new();
    for step in 0..12_000u64 {
        let key = key(rng.gen_range(0..KEYS));
        if rng.gen_ratio(1, 5) {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = format!("v{step}-{}", "x".repeat(rng.gen_range(0..30))).into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        if step % 1500 == 1499 {
            db.flush().unwrap();
        }
        if step % 3000 == 2999 {
            let mut options = ReadOptions::default();
            options.snapshot = Some(db.snapshot());
            snapshots.push((options, model.clone()));
        }
    }
    let runs: usize = db.level_stats().iter().map(|level| level.runs.len()).sum();
    assert!(runs >= 3, "the test needs several runs, has {runs}");
    check_seeks(&db, &ReadOptions::default(), &model, &mut rng, "latest");
    for (index, (options, snapshot_model)) in snapshots.iter().enumerate() {
        check_seeks(
            &db,
            options,
            snapshot_model,
            &mut rng,
            &format!("snapshot {index}"),
        );
    }
    db.compact_range(None, None).unwrap();
    check_seeks(
        &db,
        &ReadOptions::default(),
        &model,
        &mut rng,
        "after compaction",
    );
    for (index, (options, snapshot_model)) in snapshots.iter().enumerate() {
        check_seeks(
            &db,
            options,
            snapshot_model,
            &mut rng,
            &format!("snapshot {index} after compaction"),
        );
    }
}

/// Data blocks visited: block cache hits and misses, and blocks read in place from mapped
/// tables.
fn block_reads(db: &Db) -> u64 {
    let stats = db.stats();
    stats.block_cache_hits + stats.block_cache_misses + stats.block_mapped_reads
}

#[test]
fn a_seek_that_finds_its_key_in_one_run_reads_one_data_block() {
    const FILES: u64 = 6;
    let mut options = many_runs_options();
    options.compaction_style = CompactionStyle::Leveling;
    options.level0_compaction_trigger = 100;
    options.level0_slowdown_trigger = 100;
    options.level0_stop_trigger = 100;
    options.write_buffer_size_bytes = 1 << 20;
    let db = Db::open("/db", options).unwrap();
    // Every level-0 file spans the whole key range, each holding every sixth key.
    for file in 0..FILES {
        for index in (file..600).step_by(FILES as usize) {
            db.put(key(index), b"value").unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().levels[0].files, FILES as usize);
    let mut cursor = db.cursor(&ReadOptions::default(), None, None).unwrap();
    let mut most = 0;
    for index in [7, 100, 333, 598] {
        let before = block_reads(&db);
        cursor.seek(&key(index));
        assert_eq!(cursor.key(), key(index).as_slice());
        most = most.max(block_reads(&db) - before);
    }
    // One data block for the file holding the key; a Bloom false positive may add one.
    assert!(
        most <= 2,
        "a seek read {most} data blocks over {FILES} runs"
    );
    // Moving on reaches the deferred runs: the next keys come from other files, in order.
    cursor.seek(&key(7));
    for index in 7..40 {
        assert_eq!(cursor.key(), key(index).as_slice());
        cursor.next();
    }
    cursor.status().unwrap();
}

#[test]
fn a_seek_to_an_overwritten_key_does_not_read_the_older_runs() {
    let mut options = many_runs_options();
    options.compaction_style = CompactionStyle::Leveling;
    options.level0_compaction_trigger = 100;
    options.level0_slowdown_trigger = 100;
    options.level0_stop_trigger = 100;
    options.write_buffer_size_bytes = 1 << 20;
    let db = Db::open("/db", options).unwrap();
    // The same keys in every file, newer values in newer files.
    for round in 0..5u64 {
        for index in 0..300 {
            db.put(key(index), format!("round {round}")).unwrap();
        }
        db.flush().unwrap();
    }
    let before = block_reads(&db);
    let mut cursor = db.cursor(&ReadOptions::default(), None, None).unwrap();
    cursor.seek(&key(150));
    assert_eq!(cursor.value(), b"round 4");
    let read = block_reads(&db) - before;
    assert!(read <= 1, "a seek read {read} data blocks");
    // The older versions are still passed over correctly.
    cursor.next();
    assert_eq!(cursor.key(), key(151).as_slice());
    assert_eq!(cursor.value(), b"round 4");
}
