//! What point-in-time recovery drops is counted: `Db::stats()` reports the WAL records and
//! bytes the last open found but did not replay (`wal_recovery_dropped_records`,
//! `wal_recovery_dropped_bytes`), so a lost unsynced tail is visible to monitoring, not only
//! on stderr.
//!
//! Thread-safety contract: each test owns its in-memory file system.
//!
//! Invariants checked:
//! 1. A clean reopen drops nothing (both counters 0).
//! 2. A hole in a WAL's unsynced tail drops exactly the valid records after it, and the
//!    bytes from the hole to the end of the WAL; the records before it are recovered.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// Options are built field by field: they are `#[non_exhaustive]` outside the crate.
#![allow(clippy::field_reassign_with_default)]

use cairn::fs::{FileSystem, MemFs};
use cairn::testing::filename::{parse_file_name, FileKind};
use cairn::{Db, Options, WriteOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DB: &str = "/db";

fn options(fs: &MemFs) -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(fs.clone());
    options
}

fn key(index: u32) -> Vec<u8> {
    format!("key{index:05}").into_bytes()
}

/// The path of the WAL that one synced put and `count` unsynced ones leave behind when the
/// process exits without closing.
fn unsynced_wal(fs: &MemFs, count: u32) -> PathBuf {
    let db = Db::open(DB, options(fs)).unwrap();
    for index in 0..=count {
        let mut write_options = WriteOptions::default();
        write_options.sync = index == 0;
        db.put_with(&write_options, &key(index), &[b'v'; 300])
            .unwrap();
    }
    drop(db);
    fs.list(Path::new(DB))
        .unwrap()
        .iter()
        .filter(|name| matches!(parse_file_name(name), Some(FileKind::Wal(_))))
        .map(|name| Path::new(DB).join(name))
        .max()
        .unwrap()
}

#[test]
fn a_clean_reopen_drops_nothing() {
    let fs = MemFs::new();
    let _wal = unsynced_wal(&fs, 3);
    let db = Db::open(DB, options(&fs)).unwrap();
    let stats = db.stats();
    assert_eq!(stats.counter("wal_recovery_dropped_records"), 0);
    assert_eq!(stats.counter("wal_recovery_dropped_bytes"), 0);
    assert_eq!(db.get(&key(3)).unwrap().as_deref(), Some(&[b'v'; 300][..]));
}

#[test]
fn a_hole_in_the_unsynced_tail_is_counted_in_stats() {
    let fs = MemFs::new();
    let wal = unsynced_wal(&fs, 8);
    let bytes = fs.file_contents(&wal).unwrap();
    let records: Vec<(u64, usize)> = cairn::testing::wal::parse_log(bytes.clone(), &wal)
        .unwrap()
        .records()
        .map(|(offset, payload)| (offset, payload.len()))
        .collect();
    // Header, put 0 (synced), its sync marker, then puts 1..=8 (unsynced). Zero the header
    // of put 4 (record 6): puts 5..=8 after it are valid, and dropped.
    assert_eq!(records.len(), 11);
    let hole = 6;
    let header = records[hole].0 as usize;
    let mut damaged = bytes.clone();
    damaged[header..header + 16].fill(0);
    fs.set_file_contents(&wal, damaged);
    let db = Db::open(DB, options(&fs)).unwrap();
    let stats = db.stats();
    assert_eq!(stats.counter("wal_recovery_dropped_records"), 4);
    assert_eq!(
        stats.counter("wal_recovery_dropped_bytes"),
        bytes.len() as u64 - header as u64
    );
    for index in 0..4 {
        assert!(db.get(&key(index)).unwrap().is_some(), "put {index} lost");
    }
    for index in 4..=8 {
        assert!(db.get(&key(index)).unwrap().is_none(), "put {index} kept");
    }
}
