//! Tests of `Db` that reach inside it: WAL recovery with hand-built WALs and MANIFESTs.

#![allow(clippy::unwrap_used)]
use super::Db;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::{FileSystem, MemFs};
use crate::key::SequenceNumber;
use crate::options::Options;
use crate::version::{VersionEdit, VersionSet};
use crate::wal::LogWriter;
use std::path::Path;
use std::sync::Arc;

/// Closes a new database on `fs` holding `a` and `b` (sequences 1 and 2); returns the
/// number above every file in it.
fn closed_database(fs: &MemFs) -> u64 {
    let db = reopen(fs).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"2").unwrap();
    db.close().unwrap();
    fs.list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter_map(|name| match filename::parse_file_name(name) {
            Some(FileKind::Wal(number) | FileKind::Table(number) | FileKind::Manifest(number)) => {
                Some(number)
            }
            _ => None,
        })
        .max()
        .unwrap()
        + 1
}

fn write_wal(fs: &MemFs, number: u64, records: &[(SequenceNumber, &[u8])]) {
    let path = filename::wal_path(Path::new("/db"), number);
    let mut writer = LogWriter::new(fs.create(&path).unwrap(), path);
    for &(sequence, key) in records {
        let mut batch = WriteBatch::new();
        batch.put(key, b"v");
        writer.add_record(batch.encode(sequence)).unwrap();
    }
    writer.sync().unwrap();
}

fn reopen(fs: &MemFs) -> Result<Db> {
    Db::open(
        "/db",
        Options {
            file_system: Arc::new(fs.clone()),
            ..Options::default()
        },
    )
}

#[test]
fn a_wal_that_starts_past_its_predecessors_end_ends_the_recovered_prefix() {
    let fs = MemFs::new();
    let number = closed_database(&fs);
    // The older WAL lost its unsynced tail (sequence 5) to a power loss; the newer one's
    // unsynced records reached the disk.
    write_wal(&fs, number, &[(3, b"c"), (4, b"d")]);
    write_wal(&fs, number + 1, &[(6, b"f"), (7, b"g")]);
    let db = reopen(&fs).unwrap();
    for (key, expected) in [
        (&b"a"[..], true),
        (b"b", true),
        (b"c", true),
        (b"d", true),
        (b"f", false),
        (b"g", false),
    ] {
        assert_eq!(db.get(key).unwrap().is_some(), expected, "key {key:?}");
    }
    // The prefix is final: a write after reopening continues from sequence 5.
    db.put(b"h", b"8").unwrap();
    db.close().unwrap();
    let db = reopen(&fs).unwrap();
    assert!(db.get(b"h").unwrap().is_some());
    assert!(db.get(b"f").unwrap().is_none());
}

/// A database holding `a` and `b` flushed to a table, closed with an empty WAL (the one
/// the flush switched to) as the MANIFEST's first WAL to replay; returns the number above
/// every file in it.
fn flushed_database(fs: &MemFs) -> u64 {
    let db = reopen(fs).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"2").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    next_file_number(fs)
}

fn next_file_number(fs: &MemFs) -> u64 {
    fs.list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter_map(|name| match filename::parse_file_name(name) {
            Some(FileKind::Wal(number) | FileKind::Table(number) | FileKind::Manifest(number)) => {
                Some(number)
            }
            _ => None,
        })
        .max()
        .unwrap()
        + 1
}

/// The version set `/db`'s MANIFEST recovers, with the default options.
fn recovered_versions(fs: &MemFs) -> VersionSet {
    let options = Options::default();
    let mut versions = VersionSet::new(
        Path::new("/db"),
        Arc::new(fs.clone()),
        options.level_count,
        options.manifest_size_bytes_max,
    );
    versions.recover().unwrap();
    versions
}

/// Rewrites the MANIFEST with `last_sequence` raised, as a flush logs it when writes of
/// the next WAL were already visible (written to the OS, not synced) at that moment.
fn raise_manifest_last_sequence(fs: &MemFs, last_sequence: SequenceNumber) {
    let mut versions = recovered_versions(fs);
    versions
        .apply_unlogged(&VersionEdit {
            last_sequence: Some(last_sequence),
            ..VersionEdit::default()
        })
        .unwrap();
    versions.write_snapshot().unwrap();
}

#[test]
fn an_empty_wal_ends_the_recovered_prefix_when_sequences_line_up() {
    let fs = MemFs::new();
    let number = flushed_database(&fs);
    // Writes 3..=10 went to the empty WAL and were visible when the flush logged them;
    // the power loss took that WAL's contents, while an unsynced record of a newer WAL
    // reached the disk. Replaying it would recover 11 without 3..=10.
    raise_manifest_last_sequence(&fs, 10);
    write_wal(&fs, number, &[(11, b"k")]);
    let db = reopen(&fs).unwrap();
    assert!(db.get(b"a").unwrap().is_some());
    assert!(
        db.get(b"k").unwrap().is_none(),
        "a WAL past an empty one was replayed"
    );
}

#[test]
fn an_empty_wal_ends_the_recovered_prefix_when_sequences_skip() {
    let fs = MemFs::new();
    let number = flushed_database(&fs);
    // The empty WAL held 3 and 4; the newer WAL's unsynced record starts at 5.
    write_wal(&fs, number, &[(5, b"e")]);
    let db = reopen(&fs).unwrap();
    assert!(db.get(b"b").unwrap().is_some());
    assert!(db.get(b"e").unwrap().is_none());
    db.put(b"f", b"6").unwrap();
    db.close().unwrap();
    let db = reopen(&fs).unwrap();
    assert!(db.get(b"f").unwrap().is_some());
    assert!(db.get(b"e").unwrap().is_none());
}

#[test]
fn a_sequence_gap_inside_one_wal_is_still_corruption() {
    let fs = MemFs::new();
    let number = closed_database(&fs);
    write_wal(&fs, number, &[(3, b"c"), (6, b"f")]);
    match reopen(&fs) {
        Err(Error::Corruption { reason, .. }) => {
            assert!(reason.contains("sequence gap"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

/// Bug (found in review): a read-only handle with `lookup_threads > 0` started the lookup
/// pool's threads, though a read-only handle promises no background thread.
#[test]
fn a_read_only_handle_starts_no_lookup_pool() {
    let fs = MemFs::new();
    closed_database(&fs);
    let db = Db::open_read_only(
        "/db",
        Options {
            file_system: Arc::new(fs.clone()),
            lookup_threads: 2,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(db.threads.is_empty());
    assert!(
        db.inner.table_cache.lookup_pool().is_none(),
        "a read-only handle started the lookup pool's threads"
    );
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

/// An open whose background threads cannot all be started (EAGAIN under a thread limit)
/// fails, and stops those it did start: they held the database (its LOCK) and went on
/// flushing and compacting a directory its caller was told failed to open.
#[test]
fn an_open_that_cannot_start_its_threads_leaves_nothing_running() {
    let options = Options {
        file_system: Arc::new(MemFs::new()),
        compaction_threads: 2,
        ..Options::default()
    };
    super::open::FAIL_SPAWN_AT.with(|fail| fail.set(Some(1)));
    let failed = Db::open("/db", options.clone());
    super::open::FAIL_SPAWN_AT.with(|fail| fail.set(None));
    assert!(failed.is_err());
    let db = Db::open("/db", options).unwrap();
    db.put(b"k", b"v").unwrap();
}

/// A power loss during a flush edit's append with `sync` off (`db::salvage`): the MANIFEST
/// ends in a torn record, the flushed table is synced, the flushed WAL lost its unsynced
/// tail (the delete of `a`, which the table holds), and the next WAL holds a record past the
/// table. The open salvages the table, skips the WAL batches it holds (no internal key is
/// stored twice) and replays the newer WAL after it.
#[test]
fn a_flush_table_whose_edit_was_torn_is_salvaged_and_its_wal_batches_skipped() {
    let fs = MemFs::new();
    let db = reopen(&fs).unwrap();
    db.put(b"a", b"v").unwrap(); // 1
    db.flush().unwrap();
    db.put(b"b", b"v").unwrap(); // 2
    db.put(b"c", b"v").unwrap(); // 3
    db.delete(b"a").unwrap(); // 4
    db.flush().unwrap();
    db.close().unwrap();
    // The WAL of the new buffer (a prepared next one, if any, is numbered above it).
    let next_wal = super::inner::tests::wal_files(&fs)[0].0;
    let manifest = fs
        .list(Path::new("/db"))
        .unwrap()
        .into_iter()
        .find(|name| name.starts_with("MANIFEST-"))
        .unwrap();
    let manifest = Path::new("/db").join(manifest);
    let mut bytes = fs.file_contents(&manifest).unwrap();
    bytes.truncate(bytes.len() - 5); // the second flush's edit, torn
    fs.set_file_contents(&manifest, bytes);
    let versions = recovered_versions(&fs);
    assert!(versions.manifest_torn_tail.is_some());
    let flushed_wal = versions.log_number; // deleted after the flush: restored below
    assert!(flushed_wal < next_wal);
    write_wal(&fs, flushed_wal, &[(2, b"b"), (3, b"c")]);
    write_wal(&fs, next_wal, &[(5, b"e")]);
    let db = reopen(&fs).unwrap();
    for (key, present) in [(&b"a"[..], false), (b"b", true), (b"c", true), (b"e", true)] {
        assert_eq!(db.get(key).unwrap().is_some(), present, "key {key:?}");
    }
    let version = Arc::clone(&db.inner.super_version.load().version);
    let mut ranges: Vec<(SequenceNumber, SequenceNumber)> = (0..version.level_count())
        .flat_map(|level| version.files(level).iter())
        .map(|file| (file.smallest_sequence, file.largest_sequence))
        .collect();
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        assert!(pair[0].1 < pair[1].0, "tables share sequences: {ranges:?}");
    }
    db.put(b"f", b"v").unwrap();
    db.close().unwrap();
    let db = reopen(&fs).unwrap();
    assert!(db.get(b"f").unwrap().is_some() && db.get(b"e").unwrap().is_some());
    assert!(db.get(b"a").unwrap().is_none());
}
