//! Checkpoints and read-only handles on a real directory: a checkpoint taken under a
//! concurrent write load opens as a database holding exactly a prefix of the writes; a
//! read-only open changes no file beside a writer that holds the database, sees the WAL tail,
//! and keeps returning the values of its open while the writer flushes and compacts.

#![allow(clippy::unwrap_used)]

mod common;

use cairn::{Db, Options, StdFs};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn options() -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(StdFs);
    options.write_buffer_size_bytes = 16 * 1024;
    options.target_file_size_bytes = 16 * 1024;
    options.level1_size_bytes_max = 64 * 1024;
    options.level0_compaction_trigger = 2;
    options
}

/// Every file's name and bytes (a file the writer's background thread deletes meanwhile,
/// such as the WAL a flush made obsolete, is left out).
fn directory_contents(path: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(path)
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.unwrap();
            let bytes = std::fs::read(entry.path()).ok()?;
            Some((entry.file_name().to_string_lossy().into_owned(), bytes))
        })
        .collect()
}

#[test]
fn a_checkpoint_under_a_write_load_holds_a_prefix_of_the_writes() {
    let directory = common::TempDir::new("checkpoint");
    let db = Arc::new(Db::open(directory.path().join("db"), options()).unwrap());
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, written, stop) = (Arc::clone(&db), Arc::clone(&written), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut index = 0u64;
            while !stop.load(Ordering::Acquire) || index < 2000 {
                db.put(common::key(index, 8), [b'v'; 100]).unwrap();
                index += 1;
                written.store(index, Ordering::Release);
            }
            index
        })
    };
    // Checkpoint while the writer is running: wait for some writes, not for time.
    while written.load(Ordering::Acquire) < 500 {
        std::thread::yield_now();
    }
    let before = written.load(Ordering::Acquire);
    let destination = directory.path().join("checkpoint");
    let sequence = db.checkpoint(&destination).unwrap();
    let after = written.load(Ordering::Acquire);
    stop.store(true, Ordering::Release);
    let total = writer.join().unwrap();

    let copy = Db::open(&destination, options()).unwrap();
    let keys: Vec<Vec<u8>> = copy.iter().unwrap().map(|pair| pair.unwrap().0).collect();
    let count = keys.len() as u64;
    // Writes acknowledged before the call are in; the copy is keys 0..count, no hole.
    assert!(
        count >= before,
        "checkpoint lost acknowledged writes: {count} < {before}"
    );
    assert!(count <= total);
    let expected: Vec<Vec<u8>> = (0..count).map(|index| common::key(index, 8)).collect();
    assert_eq!(
        keys, expected,
        "the checkpoint is not a prefix of the writes"
    );
    // Key i was written at sequence i + 1: the sequence returned is the copy's exactly (a
    // bug returned the sequence visible when the flush was logged, which counts writes
    // that landed in the next buffer meanwhile and are not in the copy).
    assert_eq!(
        sequence, count,
        "sequence {sequence}, {count} keys (acked after: {after})"
    );
    // The checkpoint is a database of its own: writable, and the source is unaffected.
    copy.put("only-in-copy", "1").unwrap();
    assert_eq!(db.get("only-in-copy").unwrap(), None);
    assert_eq!(db.iter().unwrap().count() as u64, total);
    assert!(
        db.checkpoint(&destination).is_err(),
        "a non-empty destination was accepted"
    );
}

#[test]
fn a_read_only_open_beside_a_writer_changes_no_file_and_sees_the_wal_tail() {
    let directory = common::TempDir::new("read-only");
    let path = directory.path().join("db");
    let writer = Db::open(&path, options()).unwrap();
    for index in 0..300 {
        writer.put(common::key(index, 4), b"flushed").unwrap();
    }
    writer.flush().unwrap();
    // Settle the writer's background compaction first, so only the reader could change a
    // file between the two listings.
    writer.compact_range(None, None).unwrap();
    writer.put("tail", "in the WAL only").unwrap();
    let before = directory_contents(&path);

    let reader = Db::open_read_only(&path, options()).unwrap();
    assert_eq!(
        reader.get("tail").unwrap(),
        Some(b"in the WAL only".to_vec())
    );
    assert_eq!(reader.iter().unwrap().count(), 301);
    assert_eq!(reader.prefix("key").unwrap().rev().count(), 300);
    let refused = reader.put("x", "y").unwrap_err();
    assert!(refused.to_string().contains("read-only"), "{refused}");
    assert!(reader.flush().is_err());
    assert!(reader.delete("tail").is_err());
    drop(reader);

    // Nothing new and nothing changed; only the writer may have removed an obsolete file.
    let after = directory_contents(&path);
    for (name, bytes) in &after {
        assert_eq!(
            before.get(name),
            Some(bytes),
            "{name} was created or changed"
        );
    }
    assert!(after.contains_key("CURRENT") && after.contains_key("LOCK"));
    drop(writer);
}

#[test]
fn a_read_only_open_of_a_missing_database_fails_without_creating_it() {
    let directory = common::TempDir::new("read-only-missing");
    let path = directory.path().join("absent");
    let error = Db::open_read_only(&path, options()).unwrap_err();
    assert!(matches!(error, cairn::Error::NotFound { .. }), "{error}");
    assert!(!path.exists());
}

#[test]
fn a_read_only_handle_keeps_its_values_while_the_writer_flushes_and_compacts() {
    let directory = common::TempDir::new("read-only-compact");
    let path = directory.path().join("db");
    let writer = Db::open(&path, options()).unwrap();
    let keys = 400;
    for index in 0..keys {
        writer.put(common::key(index, 4), b"old").unwrap();
    }
    writer.flush().unwrap();
    // Settle the writer's background compaction before the reader opens: a table the writer
    // deletes before the reader first opens it fails the read with an error naming the file
    // (the documented limit of a read-only handle), which is not what this test is about.
    writer.compact_range(None, None).unwrap();
    let reader = Db::open_read_only(&path, options()).unwrap();
    let check = |reader: &Db| {
        for index in 0..keys {
            // Tables the reader has opened stay readable after the writer deletes them; a
            // read may never answer wrongly.
            match reader.get(common::key(index, 4)) {
                Ok(value) => assert_eq!(value.as_deref(), Some(&b"old"[..])),
                Err(error) => panic!("read of an opened table failed: {error}"),
            }
        }
        let values: Vec<Vec<u8>> = reader.iter().unwrap().map(|pair| pair.unwrap().1).collect();
        assert_eq!(values.len() as u64, keys);
        assert!(values.iter().all(|value| value == b"old"));
    };
    check(&reader);
    for round in 0..3 {
        for index in 0..keys {
            writer
                .put(common::key(index, 4), format!("new{round}"))
                .unwrap();
        }
        writer.flush().unwrap();
        writer.compact_range(None, None).unwrap();
        check(&reader);
    }
    assert_eq!(
        writer.get(common::key(0, 4)).unwrap(),
        Some(b"new2".to_vec())
    );
    // A handle opened now sees the writer's state.
    let fresh = Db::open_read_only(&path, options()).unwrap();
    assert_eq!(
        fresh.get(common::key(7, 4)).unwrap(),
        Some(b"new2".to_vec())
    );
}
