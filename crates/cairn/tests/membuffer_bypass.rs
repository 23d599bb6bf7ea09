//! The Membuffer's bypass (`Options::membuffer_bypass_scans_per_write`): a write buffer whose
//! scans outnumber its writes by the factor (YCSB E's mix: 19 scans per insert) stops using
//! its Membuffer — every version moves to the memtable and later writes go there directly —
//! without losing or hiding a write; a write-heavy buffer with scans keeps it.
//!
//! The drainer judges windows of at least 100 ms and 1,024 scans, so these tests run for a
//! fraction of a second to a few seconds; the bypass racing every operation is the history
//! test's `concurrent_history_with_bypassed_membuffers_is_linearizable`.

#![allow(clippy::unwrap_used)]

use cairn::fs::MemFs;
use cairn::{Db, Options, ReadOptions};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn open() -> Db {
    let mut options = Options::default();
    options.file_system = Arc::new(MemFs::new());
    options.membuffer_enabled = true;
    options.membuffer_drainers = 1;
    options.write_buffer_size_bytes = 64 << 20;
    Db::open("/db", options).unwrap()
}

fn key(index: u64) -> Vec<u8> {
    index
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .to_be_bytes()
        .to_vec()
}

/// Reads up to `count` entries from `start`, as YCSB E's scans do.
fn short_scan(db: &Db, start: &[u8], count: usize) -> usize {
    let mut cursor = db
        .cursor(&ReadOptions::default(), Some(start), None)
        .unwrap();
    cursor.seek(start);
    let mut seen = 0;
    while seen < count && cursor.valid() {
        seen += 1;
        cursor.next();
    }
    seen
}

/// Everything the database holds, in order.
fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut cursor = db.cursor(&ReadOptions::default(), None, None).unwrap();
    cursor.seek_to_first();
    let mut all = BTreeMap::new();
    while cursor.valid() {
        all.insert(cursor.key().to_vec(), cursor.value().to_vec());
        cursor.next();
    }
    all
}

/// Puts key `index` (its value is the index) into `db` and `model`.
fn put(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, index: u64) {
    let value = index.to_le_bytes().to_vec();
    db.put(key(index), &value).unwrap();
    model.insert(key(index), value);
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    assert_eq!(&contents(db), model, "a scan sees exactly the writes");
    for (key, value) in model {
        assert_eq!(db.get(key).unwrap().as_deref(), Some(value.as_slice()));
    }
}

#[test]
fn a_scan_heavy_buffer_bypasses_its_membuffer_and_keeps_every_write() {
    let db = open();
    let mut model = BTreeMap::new();
    for index in 0..5_000 {
        put(&db, &mut model, index);
    }
    assert!(
        db.stats().counter("membuffer_writes") > 0,
        "the Membuffer took writes"
    );
    // 19 scans per write until the drainer bypasses the Membuffer.
    let started = Instant::now();
    let mut index = 5_000;
    while db.stats().counter("membuffer_bypasses") == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no bypass under a scan-heavy mix"
        );
        for scan in 0..19u64 {
            short_scan(&db, &key(index * 31 + scan), 50);
        }
        put(&db, &mut model, index);
        index += 1;
    }
    check(&db, &model);
    let direct = db.stats().counter("membuffer_direct_writes");
    for index in index..index + 1_000 {
        put(&db, &mut model, index);
    }
    assert_eq!(
        db.stats().counter("membuffer_direct_writes"),
        direct + 1_000,
        "after the bypass every write goes to the memtable"
    );
    check(&db, &model);
}

#[test]
fn a_write_heavy_buffer_with_scans_keeps_its_membuffer() {
    let db = open();
    let started = Instant::now();
    let mut index = 0;
    // Four writes per scan, past several of the drainer's windows.
    while started.elapsed() < Duration::from_millis(600) {
        for _ in 0..4 {
            db.put(key(index), b"v").unwrap();
            index += 1;
        }
        short_scan(&db, &key(index * 7), 20);
    }
    assert_eq!(db.stats().counter("membuffer_bypasses"), 0);
    assert!(db.stats().counter("membuffer_writes") > 0);
}
