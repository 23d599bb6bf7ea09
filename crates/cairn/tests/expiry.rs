//! Values with an expiry through the public API: invisible to every read path once expired
//! (hiding older versions), kept across a restart, kept or cleared by read-modify-write, and
//! gone from disk after a compaction.
//!
//! Timing: expiry is wall-clock, so tests use times already past or an hour ahead wherever
//! they can; the one test of a short expiry polls with a generous deadline and asserts only
//! lower bounds on elapsed time.

// Options are built field by field: they are (becoming) `#[non_exhaustive]`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

mod common;

use cairn::{Db, Options, Update, WriteBatch, WriteOptions};
use common::TempDir;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

fn past() -> SystemTime {
    SystemTime::now() - Duration::from_secs(1)
}

fn future() -> SystemTime {
    SystemTime::now() + Duration::from_secs(3600)
}

fn open(path: &Path) -> Db {
    Db::open(path, Options::default()).unwrap()
}

fn keys(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.range::<[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn keys_rev(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.range::<[u8], _>(..)
        .unwrap()
        .rev()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn expired_values_read_as_absent_everywhere_and_hide_older_versions() {
    let dir = TempDir::new("expiry-reads");
    let db = open(dir.path());
    db.put(b"a", b"old-a").unwrap();
    db.put(b"b", b"old-b").unwrap();
    db.put(b"c", b"old-c").unwrap();
    db.put_with_expiry(b"a", b"live", future()).unwrap();
    db.put_with_expiry(b"b", b"dead", past()).unwrap();
    let snapshot = db.snapshot();
    for round in 0..2 {
        assert_eq!(
            db.get(b"a").unwrap(),
            Some(b"live".to_vec()),
            "round {round}"
        );
        assert_eq!(db.get(b"b").unwrap(), None, "round {round}");
        assert_eq!(db.get_at(&snapshot, b"b").unwrap(), None);
        assert_eq!(db.get_at(&snapshot, b"a").unwrap(), Some(b"live".to_vec()));
        let (value, expiry) = db.get_with_expiry(b"a").unwrap().unwrap();
        assert_eq!(value, b"live");
        assert!(expiry.unwrap() > SystemTime::now());
        assert_eq!(
            db.get_with_expiry(b"c").unwrap(),
            Some((b"old-c".to_vec(), None))
        );
        let expected = vec![
            (b"a".to_vec(), b"live".to_vec()),
            (b"c".to_vec(), b"old-c".to_vec()),
        ];
        assert_eq!(keys(&db), expected);
        let mut reversed = expected.clone();
        reversed.reverse();
        assert_eq!(keys_rev(&db), reversed);
        // The same from tables: flush, then compact everything to the bottom level.
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
    }
    drop(snapshot);
}

#[test]
fn an_expired_value_above_an_older_table_does_not_let_it_resurface() {
    let dir = TempDir::new("expiry-resurface");
    let db = open(dir.path());
    db.put(b"k", b"old").unwrap();
    db.put(b"z", b"other").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.put_with_expiry(b"k", b"new", past()).unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    assert_eq!(keys(&db), vec![(b"z".to_vec(), b"other".to_vec())]);
    drop(db);
    let db = open(dir.path());
    assert_eq!(db.get(b"k").unwrap(), None);
}

#[test]
fn read_modify_write_keeps_sets_and_clears_the_expiry() {
    let dir = TempDir::new("expiry-rmw");
    let db = open(dir.path());
    let expiry = future();
    db.put_with_expiry(b"n", b"41", expiry).unwrap();
    assert_eq!(db.increment(b"n", 1).unwrap(), 42);
    let (value, kept) = db.get_with_expiry(b"n").unwrap().unwrap();
    assert_eq!(value, b"42");
    let millis = |time: SystemTime| {
        time.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    };
    assert_eq!(millis(kept.unwrap()), millis(expiry));
    // An expired counter counts from zero, as an absent one.
    db.put_with_expiry(b"gone", b"100", past()).unwrap();
    assert_eq!(db.increment(b"gone", 1).unwrap(), 1);
    assert_eq!(
        db.get_with_expiry(b"gone").unwrap(),
        Some((b"1".to_vec(), None))
    );
    // PERSIST: rewrite the value without an expiry, synced.
    let mut options = WriteOptions::default();
    options.sync = true;
    db.update_with(&options, b"n", |current| match current {
        Some((value, Some(_))) => Update::Put(value.to_vec()),
        _ => Update::Keep,
    })
    .unwrap();
    assert_eq!(
        db.get_with_expiry(b"n").unwrap(),
        Some((b"42".to_vec(), None))
    );
    // EXPIRE in the past: the key is gone at once.
    db.update_with(&options, b"n", |current| match current {
        Some((value, _)) => Update::PutWithExpiry(value.to_vec(), past()),
        None => Update::Keep,
    })
    .unwrap();
    assert_eq!(db.get(b"n").unwrap(), None);
    assert!(!db
        .compare_and_swap(b"n", Some(b"42"), Some(b"x"))
        .unwrap()
        .is_written());
    assert!(db.put_if_absent(b"n", b"fresh").unwrap().is_written());
}

#[test]
fn batches_mix_expiring_and_plain_writes_and_survive_a_restart() {
    let dir = TempDir::new("expiry-batch");
    {
        let db = open(dir.path());
        let mut batch = WriteBatch::new();
        batch
            .put_with_expiry(b"e1", b"v1", future())
            .put(b"p", b"plain")
            .put_with_expiry(b"e2", b"v2", past());
        db.write(&WriteOptions::default(), batch).unwrap();
    }
    let db = open(dir.path());
    assert!(db.get_with_expiry(b"e1").unwrap().unwrap().1.is_some());
    assert_eq!(db.get(b"p").unwrap(), Some(b"plain".to_vec()));
    assert_eq!(db.get(b"e2").unwrap(), None);
}

/// Every file of `dir` whose bytes contain `marker`.
fn files_containing(dir: &Path, marker: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap_or_default();
        if bytes.windows(marker.len()).any(|window| window == marker) {
            found.push(path.display().to_string());
        }
    }
    found
}

#[test]
fn a_key_set_for_100_ms_is_gone_after_150_ms_after_a_restart_and_from_disk_after_compaction() {
    let dir = TempDir::new("expiry-acceptance");
    let marker = b"expiring-marker-5f0c1d2e";
    let set_at = Instant::now();
    {
        let db = open(dir.path());
        db.put(b"a", b"neighbour").unwrap();
        db.put(b"zz", b"neighbour").unwrap();
        db.put_with_expiry(
            b"key",
            marker,
            SystemTime::now() + Duration::from_millis(100),
        )
        .unwrap();
        assert_eq!(db.get(b"key").unwrap(), Some(marker.to_vec()));
        let wait = Duration::from_millis(150).saturating_sub(set_at.elapsed());
        std::thread::sleep(wait);
        // Gone by 150 ms; poll (generously bounded) rather than trust one sleep.
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.get(b"key").unwrap().is_some() {
            assert!(Instant::now() < deadline, "expired key still readable");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(set_at.elapsed() >= Duration::from_millis(99));
    }
    assert!(
        !files_containing(dir.path(), marker).is_empty(),
        "the WAL holds it"
    );
    let db = open(dir.path());
    assert_eq!(db.get(b"key").unwrap(), None);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"key").unwrap(), None);
    drop(db);
    // Reopen once more so obsolete files (the old WAL, input tables) are surely deleted.
    let db = open(dir.path());
    db.compact_range(None, None).unwrap();
    drop(db);
    assert_eq!(files_containing(dir.path(), marker), Vec::<String>::new());
    let db = open(dir.path());
    assert_eq!(
        keys(&db),
        vec![
            (b"a".to_vec(), b"neighbour".to_vec()),
            (b"zz".to_vec(), b"neighbour".to_vec())
        ]
    );
}

/// `Db::level_entries` (the CS265 shell's `s` dump) lists a stored value with an expiry as
/// its value without the expiry, and leaves out one that has expired (it reads as a tombstone).
#[test]
fn level_entries_list_expiring_values_without_their_expiry() {
    let db = Db::open("/level-entries-expiry", Options::in_memory()).unwrap();
    let later = SystemTime::now() + Duration::from_secs(3600);
    db.put_with_expiry("live", "v", later).unwrap();
    db.put_with_expiry("gone", "x", SystemTime::UNIX_EPOCH)
        .unwrap();
    db.put("plain", "p").unwrap();
    let expected = vec![
        (b"live".to_vec(), b"v".to_vec()),
        (b"plain".to_vec(), b"p".to_vec()),
    ];
    assert_eq!(db.level_entries(None, 10).unwrap(), expected);
    db.flush().unwrap();
    assert_eq!(db.level_entries(Some(0), 10).unwrap(), expected);
}
