//! Scenario tests of the public API: recovery, locking, corruption reporting, limits,
//! snapshots across flush and compaction, iterator behaviour.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::{Db, Error, MemFs, Options, WriteBatch, WriteOptions};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

fn small_options(fs: &MemFs) -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(fs.clone());
    options.write_buffer_size_bytes = 4096;
    options.block_size_bytes = 256;
    options.target_file_size_bytes = 8192;
    options.level1_size_bytes_max = 16 * 1024;
    options.level0_compaction_trigger = 2;
    options
}

fn key(index: u32) -> Vec<u8> {
    common::key(index.into(), 6)
}

use common::scan_pairs as collect;

#[test]
fn reopen_replays_wal_and_keeps_flushed_data() {
    let fs = MemFs::new();
    let path = Path::new("/db");
    for round in 0..5u32 {
        let db = Db::open(path, small_options(&fs)).unwrap();
        for index in 0..300 {
            db.put(&key(index), format!("{round}-{index}").as_bytes())
                .unwrap();
        }
        db.delete(&key(round)).unwrap();
        // Dropped without close: WAL replay must restore what is not flushed.
        drop(db);
        let db = Db::open(path, small_options(&fs)).unwrap();
        for index in 0..300 {
            let expected = (index != round).then(|| format!("{round}-{index}").into_bytes());
            assert_eq!(
                db.get(&key(index)).unwrap(),
                expected,
                "round {round} key {index}"
            );
        }
    }
}

#[test]
fn new_files_never_reuse_numbers_of_files_on_disk() {
    let fs = MemFs::new();
    let path = Path::new("/db");
    let db = Db::open(path, small_options(&fs)).unwrap();
    for index in 0..2000 {
        db.put(&key(index), &[7u8; 40]).unwrap();
    }
    drop(db);
    let before: Vec<String> = cairn::FileSystem::list(&fs, path).unwrap();
    let largest_before = before
        .iter()
        .filter_map(
            |name| match cairn::testing::filename::parse_file_name(name) {
                Some(
                    cairn::testing::filename::FileKind::Wal(n)
                    | cairn::testing::filename::FileKind::Table(n),
                ) => Some(n),
                _ => None,
            },
        )
        .max()
        .unwrap();
    let db = Db::open(path, small_options(&fs)).unwrap();
    let after: Vec<String> = cairn::FileSystem::list(&fs, path).unwrap();
    for name in after.iter().filter(|name| !before.contains(name)) {
        if let Some(
            cairn::testing::filename::FileKind::Wal(n)
            | cairn::testing::filename::FileKind::Table(n)
            | cairn::testing::filename::FileKind::Manifest(n),
        ) = cairn::testing::filename::parse_file_name(name)
        {
            assert!(
                n > largest_before,
                "new file {name} reuses a number <= {largest_before}"
            );
        }
    }
    assert_eq!(db.get(&key(1999)).unwrap(), Some(vec![7u8; 40]));
}

#[test]
fn second_open_fails_with_locked() {
    let directory = std::env::temp_dir().join(format!("cairn-lock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let db = Db::open(&directory, Options::default()).unwrap();
    match Db::open(&directory, Options::default()) {
        Err(Error::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(db);
    Db::open(&directory, Options::default()).unwrap();
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn missing_database_and_existing_database_errors() {
    let fs = MemFs::new();
    let mut options = small_options(&fs);
    options.create_if_missing = false;
    assert!(matches!(
        Db::open("/nothing", options),
        Err(Error::NotFound { .. })
    ));
    drop(Db::open("/db", small_options(&fs)).unwrap());
    let mut options = small_options(&fs);
    options.error_if_exists = true;
    assert!(matches!(
        Db::open("/db", options),
        Err(Error::AlreadyExists { .. })
    ));
}

#[test]
fn bad_options_and_oversized_keys_are_rejected() {
    let fs = MemFs::new();
    let mut options = small_options(&fs);
    options.level_count = 1;
    assert!(matches!(
        Db::open("/db", options),
        Err(Error::InvalidArgument(_))
    ));
    let db = Db::open("/db", small_options(&fs)).unwrap();
    let huge_key = vec![0u8; 64 * 1024 + 1];
    assert!(matches!(
        db.put(&huge_key, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(db.get(&huge_key), Err(Error::InvalidArgument(_))));
    // A rejected batch writes nothing.
    let mut batch = WriteBatch::new();
    batch.put(b"fine", b"v").put(&huge_key, b"v");
    assert!(db.write(&WriteOptions::default(), batch).is_err());
    assert_eq!(db.get(b"fine").unwrap(), None);
    // The largest legal key works.
    let largest_key = vec![1u8; 64 * 1024];
    db.put(&largest_key, b"v").unwrap();
    assert_eq!(db.get(&largest_key).unwrap(), Some(b"v".to_vec()));
}

fn wal_files(fs: &MemFs, path: &Path) -> Vec<std::path::PathBuf> {
    cairn::FileSystem::list(fs, path)
        .unwrap()
        .into_iter()
        .filter(|name| name.ends_with(".log"))
        .map(|name| path.join(name))
        .collect()
}

#[test]
fn torn_wal_tail_recovers_a_prefix() {
    let fs = MemFs::new();
    let path = Path::new("/db");
    let mut options = small_options(&fs);
    options.write_buffer_size_bytes = 1 << 20;
    let db = Db::open(path, options.clone()).unwrap();
    for index in 0..100 {
        db.put(&key(index), b"value").unwrap();
    }
    drop(db);
    let wal = wal_files(&fs, path).pop().unwrap();
    let mut bytes = fs.file_contents(&wal).unwrap();
    let new_length = bytes.len() - 7; // tear the last record
    bytes.truncate(new_length);
    fs.set_file_contents(&wal, bytes);
    let db = Db::open(path, options).unwrap();
    for index in 0..99 {
        assert_eq!(db.get(&key(index)).unwrap(), Some(b"value".to_vec()));
    }
    assert_eq!(db.get(&key(99)).unwrap(), None);
}

#[test]
fn damaged_wal_middle_is_reported_as_corruption_with_file_and_offset() {
    let fs = MemFs::new();
    let path = Path::new("/db");
    let mut options = small_options(&fs);
    options.write_buffer_size_bytes = 1 << 20;
    let db = Db::open(path, options.clone()).unwrap();
    // Synced: a WAL's sync markers make damage to synced bytes corruption; a hole in unsynced
    // bytes would be recovered as a prefix (tests/corruption.rs).
    for index in 0..100 {
        db.put_with(&WriteOptions::with_sync(true), &key(index), b"value")
            .unwrap();
    }
    drop(db);
    let wal = wal_files(&fs, path).pop().unwrap();
    let mut bytes = fs.file_contents(&wal).unwrap();
    bytes[100] ^= 0x40;
    fs.set_file_contents(&wal, bytes);
    match Db::open(path, options) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, wal);
            assert!(offset <= 100);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn damaged_table_is_reported_never_a_wrong_value() {
    let fs = MemFs::new();
    let path = Path::new("/db");
    let db = Db::open(path, small_options(&fs)).unwrap();
    for index in 0..50 {
        db.put(&key(index), format!("value{index}").as_bytes())
            .unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let table = cairn::FileSystem::list(&fs, path)
        .unwrap()
        .into_iter()
        .find(|name| name.ends_with(".sst"))
        .map(|name| path.join(name))
        .unwrap();
    let original = fs.file_contents(&table).unwrap();
    for position in (0..original.len()).step_by(7) {
        let mut bytes = original.clone();
        bytes[position] ^= 0x01;
        fs.set_file_contents(&table, bytes);
        let Ok(db) = Db::open(path, small_options(&fs)) else {
            continue;
        };
        for index in 0..50 {
            match db.get(&key(index)) {
                Ok(Some(value)) => assert_eq!(value, format!("value{index}").into_bytes()),
                Ok(None) => panic!("flip at {position}: key {index} silently vanished"),
                Err(error) => assert!(error.is_corruption(), "flip at {position}: {error}"),
            }
        }
        drop(db);
    }
    fs.set_file_contents(&table, original);
}

#[test]
fn snapshot_survives_flush_and_compaction() {
    let fs = MemFs::new();
    let db = Db::open("/db", small_options(&fs)).unwrap();
    for index in 0..500 {
        db.put(&key(index), b"old").unwrap();
    }
    let snapshot = db.snapshot();
    for index in 0..500 {
        if index % 2 == 0 {
            db.delete(&key(index)).unwrap();
        } else {
            db.put(&key(index), b"new").unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    for index in 0..500 {
        assert_eq!(
            db.get_at(&snapshot, &key(index)).unwrap(),
            Some(b"old".to_vec())
        );
        let expected = (index % 2 == 1).then(|| b"new".to_vec());
        assert_eq!(db.get(&key(index)).unwrap(), expected);
    }
    let at_snapshot: Vec<_> = db
        .range_at::<[u8], _>(&snapshot, ..)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(at_snapshot.len(), 500);
    drop(snapshot);
    db.compact_range(None, None).unwrap();
    assert_eq!(collect(&db).len(), 250);
}

#[test]
fn iterator_walks_both_ways_and_respects_bounds() {
    let fs = MemFs::new();
    let db = Db::open("/db", small_options(&fs)).unwrap();
    for index in 0..200 {
        db.put(&key(index), &index.to_le_bytes()).unwrap();
    }
    db.flush().unwrap();
    for index in (0..200).step_by(3) {
        db.delete(&key(index)).unwrap();
    }
    let lower = key(50);
    let upper = key(150);
    let mut cursor = db
        .cursor(&Default::default(), Some(&lower), Some(&upper))
        .unwrap();
    cursor.seek_to_first();
    let mut forward = Vec::new();
    while cursor.valid() {
        forward.push(cursor.key().to_vec());
        cursor.next();
    }
    let expected: Vec<_> = (50..150).filter(|i| i % 3 != 0).map(key).collect();
    assert_eq!(forward, expected);
    cursor.seek_to_last();
    let mut backward = Vec::new();
    while cursor.valid() {
        backward.push(cursor.key().to_vec());
        cursor.prev();
    }
    backward.reverse();
    assert_eq!(backward, expected);
    // Direction changes in the middle.
    cursor.seek(&key(100));
    assert_eq!(cursor.key(), key(100).as_slice());
    cursor.prev();
    assert_eq!(cursor.key(), key(98).as_slice());
    cursor.next();
    assert_eq!(cursor.key(), key(100).as_slice());
    cursor.seek_for_prev(&key(99));
    assert_eq!(cursor.key(), key(98).as_slice());
    // Excluded and included bounds through `range`.
    let keys: Vec<_> = db
        .range::<[u8], _>((Bound::Excluded(&key(1)[..]), Bound::Included(&key(5)[..])))
        .unwrap()
        .map(|entry| entry.unwrap().0)
        .collect();
    assert_eq!(keys, vec![key(2), key(4), key(5)]);
}

#[test]
fn sync_writes_and_stats_are_counted() {
    let fs = MemFs::new();
    let db = Db::open("/db", small_options(&fs)).unwrap();
    db.put_with(&WriteOptions::with_sync(true), b"a", b"1")
        .unwrap();
    let stats = db.stats();
    assert_eq!(stats.counter("wal_syncs"), 1);
    assert_eq!(stats.counter("puts"), 1);
    assert!(stats.to_string().contains("level"));
}

#[test]
fn read_modify_write_operations() {
    let fs = MemFs::new();
    let db = Db::open("/db", small_options(&fs)).unwrap();
    assert_eq!(db.increment(b"n", 5).unwrap(), 5);
    assert_eq!(db.increment(b"n", -2).unwrap(), 3);
    assert_eq!(db.increment(b"n", 1).unwrap(), 4);
    db.put(b"text", b"abc").unwrap();
    assert!(matches!(
        db.increment(b"text", 1),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.get(b"text").unwrap(), Some(b"abc".to_vec()));
    db.put(b"big", i64::MAX.to_string().as_bytes()).unwrap();
    assert!(matches!(
        db.increment(b"big", 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(db.put_if_absent(b"once", b"1").unwrap().is_written());
    assert!(!db.put_if_absent(b"once", b"2").unwrap().is_written());
    assert_eq!(db.get(b"once").unwrap(), Some(b"1".to_vec()));
    assert!(!db
        .compare_and_swap(b"once", Some(b"9"), Some(b"3"))
        .unwrap()
        .is_written());
    assert!(db
        .compare_and_swap(b"once", Some(b"1"), Some(b"3"))
        .unwrap()
        .is_written());
    assert!(db
        .compare_and_swap(b"once", Some(b"3"), None)
        .unwrap()
        .is_written());
    assert_eq!(db.get(b"once").unwrap(), None);
    assert!(db
        .compare_and_swap(b"once", None, Some(b"4"))
        .unwrap()
        .is_written());
    assert_eq!(db.update(b"once", |_| None).unwrap(), None);
    assert_eq!(db.get(b"once").unwrap(), None);
    // Counters survive a flush, a compaction and a reopen (void records replay cleanly).
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.increment(b"n", 1).unwrap(), 5);
    drop(db);
    let db = Db::open("/db", small_options(&fs)).unwrap();
    assert_eq!(db.get(b"n").unwrap(), Some(b"5".to_vec()));
}

#[test]
fn concurrent_increments_are_counted_once_across_reopen() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", small_options(&fs)).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for _ in 0..500 {
                    db.increment(b"shared", 1).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(db.get(b"shared").unwrap(), Some(b"2000".to_vec()));
    let conflicts = db.stats().counter("read_modify_write_conflicts");
    drop(db);
    // The WAL holds a void record per conflict; replay must skip them and count nothing twice.
    let db = Db::open("/db", small_options(&fs)).unwrap();
    assert_eq!(
        db.get(b"shared").unwrap(),
        Some(b"2000".to_vec()),
        "{conflicts} conflicts"
    );
}

/// Compaction reads its inputs once; scans may ask not to fill the cache (LevelDB's
/// `fill_cache`). Neither may leave blocks in the block cache, where they would evict what
/// reads keep hot; an ordinary scan and point reads still fill it.
#[test]
fn compaction_and_scans_without_fill_cache_leave_the_block_cache_alone() {
    use cairn::ReadOptions;
    let fs = MemFs::new();
    let mut options = small_options(&fs);
    options.block_cache_size_bytes = 1 << 20;
    let db = Db::open(Path::new("/db"), options).unwrap();
    for index in 0..2000 {
        db.put(&key(index), format!("value-{index}").as_bytes())
            .unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.compact_range(None, None).unwrap();
    assert!(db
        .stats()
        .levels
        .iter()
        .skip(1)
        .any(|level| level.files > 0));
    assert_eq!(
        db.stats().block_cache_bytes,
        0,
        "compaction filled the cache"
    );

    let scan_count = |fill_cache: bool| {
        let mut read_options = ReadOptions::default();
        read_options.fill_cache = fill_cache;
        let mut cursor = db.cursor(&read_options, None, None).unwrap();
        cursor.seek_to_first();
        let mut count = 0;
        while cursor.valid() {
            count += 1;
            cursor.next();
        }
        cursor.status().unwrap();
        count
    };
    assert_eq!(scan_count(false), 2000);
    assert_eq!(
        db.stats().block_cache_bytes,
        0,
        "a no-fill scan filled the cache"
    );
    assert_eq!(scan_count(true), 2000);
    assert!(
        db.stats().block_cache_bytes > 0,
        "a scan did not fill the cache"
    );
}

/// A compaction deletes the tables it made obsolete in its own deletion pass. It used to hold
/// its input version through that pass, so its inputs counted as live and stayed on disk until
/// the next flush or compaction (or the next open, after the last one).
#[test]
fn compaction_deletes_its_inputs_at_once() {
    use cairn::FileSystem;
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), small_options(&fs)).unwrap();
    for round in 0..4u32 {
        for index in 0..400 {
            db.put(&key(index), format!("{round}-{index}").as_bytes())
                .unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let live: usize = db.stats().levels.iter().map(|level| level.files).sum();
    let on_disk = fs
        .list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter(|name| name.ends_with(".sst"))
        .count();
    assert_eq!(on_disk, live, "obsolete tables left on disk");
    assert_eq!(collect(&db).len(), 400);
}
