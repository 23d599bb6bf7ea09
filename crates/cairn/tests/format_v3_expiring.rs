//! Pins the bytes of format version 3's expiring values (docs/format.md, "Values with an
//! expiry"): a write batch with an entry of kind 2, a whole version-3 WAL from the real
//! writer, and a version-2 table holding such entries, each compared byte for byte with its
//! golden file under `tests/data/golden/v3/` and then decoded by today's readers. The older
//! versions' golden files are checked by `tests/format.rs`.
//!
//! Thread-safety contract: every test owns its own `MemFs`.
//!
//! Invariants:
//! 1. The inputs below are constants (the expiry too, a fixed instant): changing one is
//!    changing a golden file.
//! 2. Every golden comparison is exact (length and every byte); an existing golden file is
//!    never rewritten (`CAIRN_BLESS_GOLDEN=1` writes only a missing one).

// Options are built field by field: they are (becoming) `#[non_exhaustive]`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

mod common;

use cairn::testing::batch::{DecodedBatch, WriteBatch};
use cairn::testing::encode_batch;
use cairn::testing::key::{internal_key, ValueKind};
use cairn::testing::sstable::{Table, TableBuilder, TableOptions};
use cairn::testing::wal::{parse_wal, RECORD_PAYLOAD_BYTES_MAX};
use cairn::{Compression, Db, FileSystem, MemFs, Options, WalRecovery, WriteOptions};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Where the golden files of on-disk format version 3 live.
const GOLDEN_V3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/golden/v3");

/// The fixed expiry of every golden entry: 2100-01-01T00:00:00Z, in milliseconds.
const EXPIRY_MILLIS: u64 = 4_102_444_800_000;

fn expiry() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(EXPIRY_MILLIS)
}

/// The stored bytes of an expiring value: `expiry u64 LE | value`.
fn stored(value: &[u8]) -> Vec<u8> {
    [&EXPIRY_MILLIS.to_le_bytes()[..], value].concat()
}

/// Compares `actual` with golden file `name` of format version 3.
fn check_golden(name: &str, actual: &[u8]) {
    common::golden::check_golden_in(GOLDEN_V3, name, actual);
}

fn golden(name: &str) -> Vec<u8> {
    common::golden::golden_in(GOLDEN_V3, name)
}

#[test]
fn golden_expiring_batch() {
    let mut batch = WriteBatch::new();
    batch
        .put_with_expiry(b"session", b"token", expiry())
        .put(b"plain", b"v")
        .delete(b"gone");
    check_golden("expiring_batch.bin", &encode_batch(&mut batch, 0x0102_0304));
    let bytes = golden("expiring_batch.bin");
    let decoded = DecodedBatch::decode(&bytes).unwrap();
    let entries: Vec<_> = decoded.iter().map(Result::unwrap).collect();
    assert_eq!(
        entries,
        vec![
            (
                ValueKind::PutWithExpiry,
                &b"session"[..],
                &stored(b"token")[..]
            ),
            (ValueKind::Put, &b"plain"[..], &b"v"[..]),
            (ValueKind::Delete, &b"gone"[..], &b""[..]),
        ]
    );
    // The kind byte of the first entry is 2 (on disk: never change).
    assert_eq!(bytes[12], 2);
}

/// A decoded batch entry: kind, key, stored value.
type Entry = (ValueKind, Vec<u8>, Vec<u8>);

/// A whole WAL from today's writer: header, then a synced batch with an expiring put, its
/// sync marker, then a plain put (the golden file has the version-3 writer's).
fn sample_wal() -> Vec<u8> {
    let fs = MemFs::new();
    let directory = Path::new("/db");
    let mut options = Options::default();
    options.file_system = Arc::new(fs.clone());
    options.wal_memory_mapped = false;
    let db = Db::open(directory, options).unwrap();
    let mut batch = cairn::WriteBatch::new();
    batch.put_with_expiry(b"apple", b"red", expiry());
    let mut sync = WriteOptions::default();
    sync.sync = true;
    db.write(&sync, batch).unwrap();
    db.put(b"cherry", b"").unwrap();
    let wal = fs
        .list(directory)
        .unwrap()
        .into_iter()
        .find(|name| name.ends_with(".log"))
        .unwrap();
    let bytes = fs.file_contents(&directory.join(wal)).unwrap();
    drop(db);
    bytes
}

/// The batches of the WAL `bytes`, and its version.
fn wal_batches(bytes: Vec<u8>) -> (u32, Vec<Vec<Entry>>) {
    let contents = parse_wal(
        bytes,
        Path::new("/000003.log"),
        RECORD_PAYLOAD_BYTES_MAX,
        true,
        WalRecovery::Strict,
    )
    .unwrap();
    let batches = contents
        .records()
        .map(|(_, payload)| {
            let batch = DecodedBatch::decode(payload).unwrap();
            batch
                .iter()
                .map(|entry| {
                    let (kind, key, value) = entry.unwrap();
                    (kind, key.to_vec(), value.to_vec())
                })
                .collect()
        })
        .collect();
    (contents.wal_version, batches)
}

#[test]
fn golden_expiring_wal() {
    // Today's writer adds a nonce to the header and markers (WAL version 4), so the golden
    // file is only read, and today's WAL must hold the same batches.
    let expected = vec![
        vec![(ValueKind::PutWithExpiry, b"apple".to_vec(), stored(b"red"))],
        vec![(ValueKind::Put, b"cherry".to_vec(), Vec::new())],
    ];
    assert_eq!(
        wal_batches(golden("expiring_wal.log")),
        (3, expected.clone())
    );
    assert_eq!(wal_batches(sample_wal()), (4, expected));
}

/// A table of three keys, the middle one expiring: format version 2.
fn sample_table(fs: &MemFs, path: &Path) {
    let options = TableOptions {
        block_size_bytes: 4096,
        block_restart_interval: 16,
        bloom_bits_per_key: 10,
        compression: Compression::None,
    };
    let mut builder = TableBuilder::new(fs.create(path).unwrap(), path.to_path_buf(), options);
    builder
        .add(&internal_key(b"a", 3, ValueKind::Put), b"plain")
        .unwrap();
    builder
        .add(
            &internal_key(b"b", 2, ValueKind::PutWithExpiry),
            &stored(b"expiring"),
        )
        .unwrap();
    builder
        .add(&internal_key(b"c", 1, ValueKind::Delete), b"")
        .unwrap();
    builder.finish().unwrap();
}

#[test]
fn golden_expiring_table() {
    let fs = MemFs::new();
    let path = Path::new("/000007.sst");
    sample_table(&fs, path);
    check_golden("expiring_table.sst", &fs.file_contents(path).unwrap());
    fs.set_file_contents(path, golden("expiring_table.sst"));
    let table = Table::open(fs.open_read(path).unwrap(), 7, None, true).unwrap();
    assert_eq!(table.properties().format_version, 2);
    let lookup = internal_key(b"b", u64::MAX >> 8, ValueKind::SEEK);
    let (sequence, kind, value) = table.get(&lookup).unwrap().unwrap();
    assert_eq!(
        (sequence, kind, value.as_ref()),
        (2, ValueKind::PutWithExpiry, &stored(b"expiring")[..])
    );
}

#[test]
fn golden_expiring_wal_header() {
    // Only read: today's header is version 4's (tests/format.rs).
    let header = golden("expiring_wal-header.bin");
    assert_eq!(&header[8..20], b"cairnWAL\x03\0\0\0");
}
