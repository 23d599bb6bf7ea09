//! The read path's options and batch API against plain `get`: `multi_get` answers exactly
//! what one `get` per key answers, under `pread` and `mmap` table reads, across memtables,
//! level 0 and deeper levels, with deletes, duplicates and absent keys.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::{Db, MemFs, Options, StdFs, TableReadMode};
use common::TempDir;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

const KEYS: u64 = 3000;

fn key(index: u64) -> Vec<u8> {
    common::key(index, 8)
}

/// Writes a random history (puts, deletes, flushes) so keys spread over every component.
fn fill(db: &Db, rng: &mut SmallRng) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for step in 0..8_000u64 {
        let key = key(rng.gen_range(0..KEYS));
        if rng.gen_ratio(1, 8) {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = format!("value-{step}-{}", "x".repeat(rng.gen_range(0..40))).into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        if step % 2000 == 1999 {
            db.flush().unwrap();
        }
    }
    model
}

fn check_multi_get_matches_get(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut SmallRng) {
    for round in 0..100 {
        let count = rng.gen_range(0..64);
        // Include keys past the written range (absent) and repeats.
        let keys: Vec<Vec<u8>> = (0..count)
            .map(|_| key(rng.gen_range(0..KEYS + KEYS / 4)))
            .collect();
        let borrowed: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let batch = db.multi_get(&borrowed).unwrap();
        assert_eq!(batch.len(), keys.len());
        for (key, answer) in keys.iter().zip(&batch) {
            assert_eq!(answer, &db.get(key).unwrap(), "round {round}");
            assert_eq!(answer.as_ref(), model.get(key), "round {round}");
        }
    }
}

fn run(options: Options, path: &std::path::Path, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let db = Db::open(path, options.clone()).unwrap();
    let model = fill(&db, &mut rng);
    check_multi_get_matches_get(&db, &model, &mut rng);
    db.close().unwrap();
    // After a reopen everything is in tables (or the recovered memtable).
    let db = Db::open(path, options).unwrap();
    check_multi_get_matches_get(&db, &model, &mut rng);
    assert_eq!(common::scan(&db), model);
    db.close().unwrap();
}

#[test]
fn multi_get_matches_get_in_memory() {
    let mut options = common::small_lsm_options(Arc::new(MemFs::new()));
    options.bloom_bits_per_key = 10;
    run(options, std::path::Path::new("/db"), 1);
}

#[test]
fn parallel_lookups_match_the_model() {
    let mut options = common::small_lsm_options(Arc::new(MemFs::new()));
    options.lookup_threads = 3;
    // Many level-0 files, so most lookups have several runs to probe.
    options.level0_compaction_trigger = 8;
    options.level0_slowdown_trigger = 16;
    options.level0_stop_trigger = 24;
    run(options, std::path::Path::new("/db"), 4);
}

#[test]
fn multi_get_matches_get_without_filters_or_cache() {
    let mut options = common::small_lsm_options(Arc::new(MemFs::new()));
    options.bloom_bits_per_key = 0;
    options.block_cache_size_bytes = 0;
    run(options, std::path::Path::new("/db"), 2);
}

#[test]
fn pread_and_mmap_reads_agree_on_disk() {
    for (seed, mode) in [(3, TableReadMode::Pread), (3, TableReadMode::Mmap)] {
        let directory = TempDir::new("read-path");
        let mut options = common::small_lsm_options(Arc::new(StdFs));
        options.table_read_mode = mode;
        run(options, &directory.path().join("db"), seed);
    }
}

#[test]
fn multi_get_rejects_an_invalid_key() {
    let db = Db::open("/db", Options::in_memory()).unwrap();
    let long = vec![b'k'; cairn::KEY_BYTES_MAX + 1];
    let keys: [&[u8]; 2] = [b"a", &long];
    assert!(db.multi_get(&keys).is_err());
    assert_eq!(db.multi_get(&[]).unwrap(), Vec::<Option<Vec<u8>>>::new());
}

#[test]
fn a_short_scan_opens_only_the_tables_it_reaches() {
    const FILES: u64 = 8;
    let fs = cairn::FaultFs::new();
    let mut options = common::small_lsm_options(Arc::new(fs.clone()));
    // Keep every flushed table in level 0, each holding its own key range.
    options.level0_compaction_trigger = 100;
    options.level0_slowdown_trigger = 100;
    options.level0_stop_trigger = 100;
    options.write_buffer_size_bytes = 1 << 20;
    let path = std::path::Path::new("/db");
    let db = Db::open(path, options.clone()).unwrap();
    for file in 0..FILES {
        for index in 0..50 {
            db.put(&key(file * 1000 + index), b"value").unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().levels[0].files, FILES as usize);
    db.close().unwrap();
    let db = Db::open(path, options).unwrap();
    fs.reset_counters();
    let mut cursor = db
        .cursor(&cairn::ReadOptions::default(), None, None)
        .unwrap();
    cursor.seek(&key((FILES - 1) * 1000 + 10));
    for _ in 0..5 {
        assert!(cursor.valid());
        cursor.next();
    }
    drop(cursor);
    let short_scan = fs.operation_count();
    fs.reset_counters();
    assert_eq!(common::scan(&db).len(), (FILES * 50) as usize);
    let full_scan = fs.operation_count();
    // The short scan opened (and read) one table; the full scan opened the other seven.
    assert!(
        short_scan * 3 < full_scan,
        "short scan {short_scan} file operations, full scan {full_scan}"
    );
    db.close().unwrap();
}
