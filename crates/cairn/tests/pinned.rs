//! Pinned reads (`Db::get_pinned`) against a model and against `get`: the same answers across
//! memtables, level 0 and deeper levels, with deletes, expiring values and snapshots; and a
//! pinned value keeps its bytes after its block is evicted from the cache, after the memtable
//! it came from is flushed, after compaction deletes its table, and after the database closes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::{Db, MemFs, Options, PinnedValue, ReadOptions, StdFs, TableReadMode};
use common::TempDir;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const KEYS: u64 = 1500;

fn key(index: u64) -> Vec<u8> {
    common::key(index, 8)
}

/// One step of a random history, applied to the database and the model.
fn write_step(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut SmallRng, step: u64) {
    let key = key(rng.gen_range(0..KEYS));
    let value = format!("value-{step}-{}", "p".repeat(rng.gen_range(0..60))).into_bytes();
    match rng.gen_range(0..10) {
        0 | 1 => {
            db.delete(&key).unwrap();
            model.remove(&key);
        }
        2 => {
            // Expiring far in the future: read like a plain value, without its expiry prefix.
            let expiry = SystemTime::now() + Duration::from_secs(3600);
            db.put_with_expiry(&key, &value, expiry).unwrap();
            model.insert(key, value);
        }
        3 => {
            // Already expired: reads as absent and hides older versions.
            let expiry = SystemTime::now() - Duration::from_secs(1);
            db.put_with_expiry(&key, &value, expiry).unwrap();
            model.remove(&key);
        }
        _ => {
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
    }
}

/// Checks `get_pinned` against `get` and the model for random keys; keeps some values.
fn check_and_hold(
    db: &Db,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut SmallRng,
    held: &mut Vec<(PinnedValue, Vec<u8>)>,
) {
    for _ in 0..200 {
        let key = key(rng.gen_range(0..KEYS + 100));
        let pinned = db.get_pinned(&key).unwrap();
        assert_eq!(
            pinned.as_deref(),
            model.get(&key).map(Vec::as_slice),
            "{key:?}"
        );
        assert_eq!(
            pinned.clone().map(PinnedValue::into_vec),
            db.get(&key).unwrap()
        );
        if let Some(value) = pinned {
            if rng.gen_ratio(1, 4) {
                let expected = value.to_vec();
                held.push((value, expected));
            }
        }
    }
}

fn run(options: Options, path: &std::path::Path, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let db = Db::open(path, options).unwrap();
    let mut model = BTreeMap::new();
    let mut held = Vec::new();
    let mut snapshots = Vec::new();
    for step in 0..9_000u64 {
        write_step(&db, &mut model, &mut rng, step);
        if step % 1000 == 999 {
            check_and_hold(&db, &model, &mut rng, &mut held);
            snapshots.push((db.snapshot(), model.clone()));
        }
        if step % 2500 == 2499 {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
    check_and_hold(&db, &model, &mut rng, &mut held);
    let pinned = held.iter().filter(|(value, _)| value.is_pinned()).count();
    assert!(pinned > 0, "no value came from a table block");
    assert!(pinned < held.len(), "no value came from memory");
    // Snapshots answer as `get_at` does (and as the model did then).
    for (snapshot, snapshot_model) in &snapshots {
        let mut options = ReadOptions::default();
        options.snapshot = Some(snapshot.clone());
        for _ in 0..100 {
            let key = key(rng.gen_range(0..KEYS));
            let pinned = db.get_pinned_with(&options, &key).unwrap();
            assert_eq!(
                pinned.as_deref(),
                snapshot_model.get(&key).map(Vec::as_slice)
            );
            assert_eq!(
                pinned.map(PinnedValue::into_vec),
                db.get_at(snapshot, &key).unwrap()
            );
        }
    }
    drop(snapshots);
    // Evict every cached block (the cache is tiny), rewrite every table, close: the held
    // values keep their bytes.
    for index in 0..KEYS {
        db.get(key(index)).unwrap();
    }
    for index in 0..KEYS {
        db.put(key(index), b"overwritten").unwrap();
    }
    db.compact_range(None, None).unwrap();
    for (value, expected) in &held {
        assert_eq!(&value[..], expected.as_slice());
    }
    db.close().unwrap();
    for (value, expected) in &held {
        assert_eq!(&value[..], expected.as_slice());
    }
}

fn options(file_system: Arc<dyn cairn::FileSystem>, mode: TableReadMode) -> Options {
    let mut options = common::small_lsm_options(file_system);
    options.bloom_bits_per_key = 10;
    // A few blocks at most: pinned values outlive their cache entries.
    options.block_cache_size_bytes = 8 * 1024;
    options.table_read_mode = mode;
    options
}

#[test]
fn pinned_reads_match_the_model_in_memory() {
    run(
        options(Arc::new(MemFs::new()), TableReadMode::Pread),
        std::path::Path::new("/db"),
        1,
    );
}

#[test]
fn pinned_reads_match_the_model_on_disk_with_pread_and_mmap() {
    for mode in [TableReadMode::Pread, TableReadMode::Mmap] {
        let directory = TempDir::new("pinned");
        run(
            options(Arc::new(StdFs), mode),
            &directory.path().join("db"),
            2,
        );
    }
}

#[test]
fn pinned_reads_without_a_block_cache() {
    let mut options = options(Arc::new(MemFs::new()), TableReadMode::Pread);
    options.block_cache_size_bytes = 0;
    run(options, std::path::Path::new("/db"), 3);
}

#[test]
fn a_pinned_read_rejects_an_invalid_key() {
    let db = Db::open("/db", Options::in_memory()).unwrap();
    let long = vec![b'k'; cairn::KEY_BYTES_MAX + 1];
    assert!(db.get_pinned(&long).is_err());
}
