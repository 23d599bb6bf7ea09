//! Pins the on-disk format (docs/format.md) so that no change to a byte on disk goes unnoticed.
//!
//! 1. Golden bytes: each file kind's real encoder is fed fixed inputs and its output compared
//!    byte for byte with a file under `tests/data/golden/vN/` of the version it writes today;
//!    each golden file of every version is then decoded by today's reader, so old golden files
//!    keep testing that old bytes still read. Version 2 added the WAL header and sync marker
//!    records (and bumped the MANIFEST version that announces them); WAL version 4 added a
//!    nonce to both.
//! 2. Backward compatibility: `tests/data/vN-db/` is a database written by format version N
//!    (see `generate_db`); today's code must open a copy of it and read back every key.
//! 3. Version checks: a table or MANIFEST carrying a format version this build does not read is
//!    refused with an error naming that version, never misread.
//!
//! Golden files are never edited or regenerated: a format change adds files for its new
//! version beside the old ones (docs/format.md, "Changing the format"). With
//! `CAIRN_BLESS_GOLDEN=1` a missing golden file is written from today's encoder; an existing
//! one is never overwritten.
//!
//! Thread-safety contract: every test owns its own `MemFs` or temporary directory.
//!
//! Invariants:
//! 1. The inputs below are constants: changing one is changing a golden file.
//! 2. Every golden comparison is exact (length and every byte).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::golden::{check_golden_in, golden_in};

use cairn::testing::batch::{void_record, DecodedBatch, WriteBatch};
use cairn::testing::encode_batch;
use cairn::testing::key::{internal_key, ValueKind};
use cairn::testing::sstable::format::{encode_block, FOOTER_BYTES, FOOTER_VERSION_OFFSET};
use cairn::testing::sstable::{
    BlockBuilder, BlockHandle, BloomFilter, BloomFilterBuilder, Footer, Table, TableBuilder,
    TableOptions,
};
use cairn::testing::version::{AddedFile, VersionEdit, VersionSet, MANIFEST_FORMAT_VERSION};
use cairn::testing::wal::{parse_log, parse_wal, LogWriter, RECORD_PAYLOAD_BYTES_MAX};
use cairn::{
    Compression, Db, Error, FileSystem, MemFs, Options, StdFs, WalRecovery, WriteBatch as Batch,
    WriteOptions,
};
use common::TempDir;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Live keys and values of a database.
type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// Where the golden files of on-disk format version 1 live.
const GOLDEN_V1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/golden/v1");
/// Where the golden files of on-disk format version 2 live.
const GOLDEN_V2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/golden/v2");
/// Where the golden files of on-disk format version 3 live (`manifest_*`: run ids in edits).
const GOLDEN_V3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/golden/v3");
/// Where the golden files of WAL format version 4 live (a nonce in the header and markers).
const GOLDEN_V4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/golden/v4");

/// The database written by format version 1, and what it must read back.
const V1_DB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1-db");
const V1_DB_EXPECTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1-db.expected");
/// The database written by format version 2, and what it must read back.
const V2_DB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v2-db");
const V2_DB_EXPECTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v2-db.expected");
/// The checked-in MANIFEST-version-3 database: tiered, with several runs in a level, so its
/// MANIFEST records run ids (tag 8).
const V3_RUNS_DB: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v3-runs-db");
const V3_RUNS_DB_EXPECTED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/v3-runs-db.expected"
);

/// Compares `actual` with version-1 golden file `name`.
fn check_golden(name: &str, actual: &[u8]) {
    check_golden_in(GOLDEN_V1, name, actual);
}

fn golden(name: &str) -> Vec<u8> {
    golden_in(GOLDEN_V1, name)
}

fn golden_v2(name: &str) -> Vec<u8> {
    golden_in(GOLDEN_V2, name)
}

fn golden_v4(name: &str) -> Vec<u8> {
    golden_in(GOLDEN_V4, name)
}

/// The fixed batch of the batch and WAL goldens: a put, a delete and an empty put.
fn sample_batch() -> Vec<u8> {
    let mut batch = WriteBatch::new();
    batch
        .put(b"apple", b"red")
        .delete(b"banana")
        .put(b"cherry", b"");
    encode_batch(&mut batch, 0x0102_0304_0506)
}

#[test]
fn golden_write_batch() {
    check_golden("batch.bin", &sample_batch());
    let bytes = golden("batch.bin");
    let decoded = DecodedBatch::decode(&bytes).unwrap();
    assert_eq!(decoded.first_sequence, 0x0102_0304_0506);
    let entries: Vec<_> = decoded.iter().map(Result::unwrap).collect();
    assert_eq!(
        entries,
        vec![
            (ValueKind::Put, &b"apple"[..], &b"red"[..]),
            (ValueKind::Delete, &b"banana"[..], &b""[..]),
            (ValueKind::Put, &b"cherry"[..], &b""[..]),
        ]
    );
}

#[test]
fn golden_wal_records() {
    let fs = MemFs::new();
    let path = Path::new("/000007.log");
    let mut writer = LogWriter::new(fs.create(path).unwrap(), path.to_path_buf());
    writer.add_record(&sample_batch()).unwrap();
    // A void record: a read-modify-write that lost its race spent sequence 0x0102_0304_0509.
    writer
        .add_record(&void_record(0x0102_0304_0509, 20))
        .unwrap();
    writer.sync().unwrap();
    check_golden("wal.log", &fs.file_contents(path).unwrap());

    let contents = parse_log(golden("wal.log"), path).unwrap();
    assert_eq!(contents.torn_tail_offset, None);
    let records: Vec<_> = contents.records().collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0], (0, &sample_batch()[..]));
    assert!(DecodedBatch::decode(records[1].1).unwrap().is_void());
    // Without a header it is a version-1 WAL, whatever the MANIFEST version.
    for expect_header in [false, true] {
        let contents = parse_wal(
            golden("wal.log"),
            path,
            RECORD_PAYLOAD_BYTES_MAX,
            expect_header,
            WalRecovery::Strict,
        )
        .unwrap();
        assert_eq!((contents.wal_version, contents.record_count()), (1, 2));
    }
}

/// The payloads of the WAL header and sync marker goldens in `directory`, read as one log
/// (header first).
fn header_and_marker_payloads(directory: &str) -> Vec<Vec<u8>> {
    let contents = parse_log(
        [
            golden_in(directory, "wal-header.bin"),
            golden_in(directory, "wal-sync-marker.bin"),
        ]
        .concat(),
        Path::new("/000009.log"),
    )
    .unwrap();
    contents
        .records()
        .map(|(_, payload)| payload.to_vec())
        .collect()
}

#[test]
fn golden_v2_wal_header_and_sync_marker() {
    // Today's header and marker carry a nonce (version 4, `golden_v4_wal_header_and_sync_marker`);
    // the version-2 ones are only read, and the marker's old encoder kept for tests.
    assert_eq!(
        golden_v2("wal-sync-marker.bin"),
        cairn::testing::wal::sync_marker_record_v2(0x0102_0304_0506)
    );
    let payloads = header_and_marker_payloads(GOLDEN_V2);
    assert_eq!(payloads[0], b"cairnWAL\x02\0\0\0");
    assert_eq!(payloads[1], b"cairnSYN\x06\x05\x04\x03\x02\x01\0\0");
}

#[test]
fn golden_v4_wal_header_and_sync_marker() {
    const NONCE: u64 = 0x1122_3344_5566_7788;
    check_golden_in(
        GOLDEN_V4,
        "wal-header.bin",
        &cairn::testing::wal::wal_header_record(NONCE),
    );
    check_golden_in(
        GOLDEN_V4,
        "wal-sync-marker.bin",
        &cairn::testing::wal::sync_marker_record(NONCE, 0x0102_0304_0506),
    );
    let payloads = header_and_marker_payloads(GOLDEN_V4);
    assert_eq!(
        payloads[0],
        b"cairnWAL\x04\0\0\0\x88\x77\x66\x55\x44\x33\x22\x11"
    );
    assert_eq!(
        payloads[1],
        b"cairnSYN\x88\x77\x66\x55\x44\x33\x22\x11\x06\x05\x04\x03\x02\x01\0\0"
    );
}

/// A whole WAL from the real writer: header, a synced batch, its sync marker, then a batch
/// that was not synced.
fn sample_wal() -> Vec<u8> {
    let fs = MemFs::new();
    let directory = Path::new("/db");
    let db = Db::open(directory, {
        let mut options = Options::default();
        options.file_system = Arc::new(fs.clone());
        options.wal_memory_mapped = false;
        options
    })
    .unwrap();
    let mut batch = Batch::new();
    batch.put(b"apple", b"red").delete(b"banana");
    db.write(&WriteOptions::with_sync(true), batch).unwrap();
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

/// `wal` with the random parts zeroed: the nonce in its header and sync markers, and those
/// records' checksums, which cover it.
fn without_nonces(mut wal: Vec<u8>) -> Vec<u8> {
    let contents = parse_log(wal.clone(), Path::new("/000003.log")).unwrap();
    let nonces: Vec<(usize, usize)> = contents
        .records()
        .filter_map(|(offset, payload)| {
            let at = offset as usize;
            match payload.get(..8)? {
                b"cairnWAL" => Some((at, at + 8 + 12)),
                b"cairnSYN" => Some((at, at + 8 + 8)),
                _ => None,
            }
        })
        .collect();
    for (record, nonce) in nonces {
        wal[record..record + 4].fill(0);
        wal[nonce..nonce + 8].fill(0);
    }
    wal
}

/// Reads `wal`, a golden sample WAL (`sample_wal`) of format `version` whose synced batch
/// starts at `synced_batch_offset`: two batches, sequences 1 and 3; the synced one is covered
/// by the marker, so damaging it is corruption even under point-in-time recovery.
fn check_golden_sample_wal(wal: Vec<u8>, version: u32, synced_batch_offset: u64) {
    let path = Path::new("/000003.log");
    let contents = parse_wal(
        wal.clone(),
        path,
        RECORD_PAYLOAD_BYTES_MAX,
        true,
        WalRecovery::Strict,
    )
    .unwrap();
    assert_eq!(contents.wal_version, version);
    let sequences: Vec<u64> = contents
        .records()
        .map(|(_, payload)| DecodedBatch::decode(payload).unwrap().first_sequence)
        .collect();
    assert_eq!(sequences, vec![1, 3]);
    let mut damaged = wal;
    damaged[synced_batch_offset as usize + 6] ^= 1;
    let error = parse_wal(damaged, path, 1 << 20, true, WalRecovery::PointInTime).unwrap_err();
    assert!(
        matches!(error, Error::Corruption { offset, .. } if offset == synced_batch_offset),
        "{error}"
    );
}

#[test]
fn golden_v2_wal() {
    // Written by the version-2 writer; today's WAL has a longer header and longer markers,
    // so the golden file is only read (header record: 24 bytes).
    check_golden_sample_wal(golden_v2("wal.log"), 2, 24);
}

#[test]
fn golden_v4_wal() {
    // The nonce is random per WAL: compared without it (the golden file has its own, from
    // the writer that blessed it).
    assert_eq!(
        without_nonces(sample_wal()),
        without_nonces(golden_v4("wal.log"))
    );
    // Header record: 32 bytes.
    check_golden_sample_wal(golden_v4("wal.log"), 4, 32);
}

/// Entries of the data-block golden: shared prefixes, two versions of one key, a delete.
fn block_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (internal_key(b"apple", 9, ValueKind::Put), b"red".to_vec()),
        (internal_key(b"apple", 3, ValueKind::Put), b"green".to_vec()),
        (internal_key(b"apricot", 7, ValueKind::Delete), Vec::new()),
        (
            internal_key(b"banana", 8, ValueKind::Put),
            b"yellow".to_vec(),
        ),
        (internal_key(b"cherry", 1, ValueKind::Put), vec![0xff; 3]),
    ]
}

#[test]
fn golden_data_block() {
    let mut builder = BlockBuilder::new(2);
    for (key, value) in block_entries() {
        builder.add(&key, &value);
    }
    // The stored block with its trailer (kind byte and masked crc), as a table holds it.
    let encoded = encode_block(&builder.finish(), Compression::None);
    check_golden("data-block.bin", &encoded.bytes);

    let fs = MemFs::new();
    let path = Path::new("/block");
    let bytes = golden("data-block.bin");
    let handle = BlockHandle {
        offset: 0,
        size: bytes.len() as u64 - 5,
    };
    fs.set_file_contents(path, bytes);
    let file = fs.open_read(path).unwrap();
    let raw = cairn::testing::sstable::read_block(file.as_ref(), handle, true).unwrap();
    let block = Arc::new(
        cairn::testing::sstable::Block::new(raw, cairn::testing::sstable::BlockOrigin::detached())
            .unwrap(),
    );
    let mut iterator = block.iter();
    let mut read = Vec::new();
    use cairn::testing::iter::InternalIterator;
    iterator.seek_to_first();
    while iterator.valid() {
        read.push((iterator.key().to_vec(), iterator.value().to_vec()));
        iterator.next();
    }
    assert_eq!(read, block_entries());
}

#[test]
fn golden_bloom_filter() {
    let mut builder = BloomFilterBuilder::new(10);
    for index in 0..60u64 {
        builder.add_key(&common::key(index, 3));
    }
    check_golden("bloom-filter.bin", &builder.finish());

    let filter = BloomFilter::decode(golden("bloom-filter.bin")).unwrap();
    assert_eq!((filter.block_count(), filter.probes()), (2, 7));
    for index in 0..60u64 {
        assert!(filter.may_contain(&common::key(index, 3)));
    }
}

fn sample_footer() -> Footer {
    Footer {
        index: BlockHandle {
            offset: 0x1234,
            size: 0x56,
        },
        filter: BlockHandle {
            offset: 0x1000,
            size: 0x85,
        },
        properties: BlockHandle {
            offset: 0x1100,
            size: 0x4a,
        },
        format_version: cairn::testing::sstable::format::FORMAT_VERSION_OLDEST,
    }
}

#[test]
fn golden_table_footer() {
    check_golden("footer.bin", &sample_footer().encode());
    let footer = Footer::decode(&golden("footer.bin"), Path::new("footer.bin"), 0).unwrap();
    assert_eq!(footer, sample_footer());
}

/// Builds the golden table: 40 entries in 128-byte blocks with a filter.
fn sample_table(fs: &MemFs, path: &Path) {
    let options = TableOptions {
        block_size_bytes: 128,
        block_restart_interval: 4,
        bloom_bits_per_key: 10,
        compression: Compression::None,
    };
    let mut builder = TableBuilder::new(fs.create(path).unwrap(), path.to_path_buf(), options);
    for index in 0..40u64 {
        let kind = if index % 9 == 4 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let value = format!("value-{index}");
        builder
            .add(
                &internal_key(&common::key(index, 4), 100 + index, kind),
                value.as_bytes(),
            )
            .unwrap();
    }
    builder.finish().unwrap();
}

#[test]
fn golden_table() {
    let fs = MemFs::new();
    let path = Path::new("/000005.sst");
    sample_table(&fs, path);
    check_golden("table.sst", &fs.file_contents(path).unwrap());

    fs.set_file_contents(path, golden("table.sst"));
    let table = Table::open(fs.open_read(path).unwrap(), 5, None, true).unwrap();
    assert_eq!(table.properties().entry_count, 40);
    assert_eq!(table.properties().delete_count, 4);
    let lookup = internal_key(&common::key(17, 4), u64::MAX >> 8, ValueKind::SEEK);
    let (sequence, kind, value) = table.get(&lookup).unwrap().unwrap();
    assert_eq!(
        (sequence, kind, &value[..]),
        (117, ValueKind::Put, &b"value-17"[..])
    );
}

fn added(number: u64, low: &[u8], high: &[u8], sequence: u64) -> AddedFile {
    AddedFile {
        number,
        size_bytes: 4000 + number,
        smallest: internal_key(low, sequence, ValueKind::Put),
        largest: internal_key(high, sequence + 1, ValueKind::Delete),
        smallest_sequence: sequence,
        largest_sequence: sequence + 1,
    }
}

/// An edit with every tag (format version 1, as in the version-1 golden file).
fn sample_edit() -> VersionEdit {
    VersionEdit {
        log_number: Some(12),
        next_file_number: Some(20),
        last_sequence: Some(0x0a0b_0c0d),
        format_version: Some(1),
        compact_pointers: vec![(1, internal_key(b"m", 5, ValueKind::Put))],
        deleted_files: vec![(0, 9), (1, 10)],
        added_files: vec![
            (1, added(14, b"a", b"k", 30)),
            (2, added(15, b"l", b"z", 40)),
        ],
        file_runs: Vec::new(),
    }
}

#[test]
fn golden_version_edit() {
    check_golden("version-edit.bin", &sample_edit().encode());
    let edit = VersionEdit::decode(&golden("version-edit.bin")).unwrap();
    assert_eq!(edit.encode(), sample_edit().encode());
    assert_eq!(edit.added_files.len(), 2);
    let v2 = VersionEdit {
        format_version: Some(2),
        ..sample_edit()
    };
    check_golden_in(GOLDEN_V2, "version-edit.bin", &v2.encode());
    let edit = VersionEdit::decode(&golden_v2("version-edit.bin")).unwrap();
    assert_eq!(edit.format_version, Some(2));
    // Version 3: the run id of each added file (tag 8).
    let today = VersionEdit {
        format_version: Some(MANIFEST_FORMAT_VERSION),
        file_runs: vec![(14, 0), (15, 21)],
        ..sample_edit()
    };
    check_golden_in(GOLDEN_V3, "manifest_runs-version-edit.bin", &today.encode());
    let bytes = std::fs::read(Path::new(GOLDEN_V3).join("manifest_runs-version-edit.bin")).unwrap();
    let edit = VersionEdit::decode(&bytes).unwrap();
    assert_eq!(edit.format_version, Some(3));
    assert!(edit.file_runs.contains(&(15, 21)));
}

/// Writes a MANIFEST through the real `VersionSet`: a snapshot, then two edits.
fn sample_manifest(fs: &MemFs) -> PathBuf {
    let directory = Path::new("/db");
    fs.create_dir_all(directory).unwrap();
    let mut versions = VersionSet::new(directory, Arc::new(fs.clone()), 7, 1 << 20);
    versions.write_snapshot().unwrap();
    let first = VersionEdit {
        log_number: Some(3),
        last_sequence: Some(50),
        added_files: vec![(0, added(2, b"a", b"f", 10)), (1, added(4, b"g", b"p", 20))],
        ..VersionEdit::default()
    };
    versions.log_and_apply(first).unwrap();
    let second = VersionEdit {
        deleted_files: vec![(0, 2)],
        added_files: vec![(1, added(5, b"q", b"t", 30))],
        compact_pointers: vec![(0, internal_key(b"f", 11, ValueKind::Put))],
        file_runs: vec![(5, 0)],
        ..VersionEdit::default()
    };
    versions.log_and_apply(second).unwrap();
    directory.join(cairn::testing::filename::manifest_name(
        versions.manifest_number(),
    ))
}

#[test]
fn golden_manifest() {
    let fs = MemFs::new();
    let manifest = sample_manifest(&fs);
    // Today's MANIFEST is version 3 (run ids); versions 1 and 2 are only read.
    check_golden_in(
        GOLDEN_V3,
        "manifest_runs.log",
        &fs.file_contents(&manifest).unwrap(),
    );
    let v3 = std::fs::read(Path::new(GOLDEN_V3).join("manifest_runs.log")).unwrap();
    for (version, bytes) in [
        (1, golden("manifest.log")),
        (2, golden_v2("manifest.log")),
        (3, v3),
    ] {
        let versions = recover_golden_manifest(bytes);
        assert_eq!(versions.manifest_format_version, version);
    }
}

/// Recovers a MANIFEST holding `bytes` (the sample MANIFEST) and checks what it says.
fn recover_golden_manifest(bytes: Vec<u8>) -> VersionSet {
    let fs = MemFs::new();
    let directory = Path::new("/old");
    fs.create_dir_all(directory).unwrap();
    fs.set_file_contents(&directory.join("MANIFEST-000001"), bytes);
    fs.set_file_contents(&directory.join("CURRENT"), b"MANIFEST-000001\n".to_vec());
    let mut versions = VersionSet::new(directory, Arc::new(fs), 7, 1 << 20);
    let edit_count = versions.recover().unwrap();
    assert_eq!(edit_count, 3);
    let current = versions.current();
    let numbers = |level: usize| -> Vec<u64> {
        current
            .files(level)
            .iter()
            .map(|file| file.number)
            .collect()
    };
    assert_eq!((numbers(0), numbers(1)), (vec![], vec![4, 5]));
    assert_eq!((versions.log_number, versions.last_sequence), (3, 50));
    versions
}

/// A MANIFEST whose only record is `edit`, named by CURRENT, in a fresh `MemFs`.
fn manifest_with(edit: &VersionEdit) -> VersionSet {
    let fs = MemFs::new();
    let directory = Path::new("/db");
    fs.create_dir_all(directory).unwrap();
    let path = directory.join("MANIFEST-000001");
    let mut writer = LogWriter::new(fs.create(&path).unwrap(), path.clone());
    writer.add_record(&edit.encode()).unwrap();
    writer.sync().unwrap();
    fs.set_file_contents(&directory.join("CURRENT"), b"MANIFEST-000001\n".to_vec());
    VersionSet::new(directory, Arc::new(fs), 7, 1 << 20)
}

#[test]
fn manifest_of_an_unknown_format_version_is_refused() {
    for version in [0, MANIFEST_FORMAT_VERSION + 1] {
        let edit = VersionEdit {
            format_version: Some(version),
            ..sample_edit()
        };
        let error = manifest_with(&edit).recover().unwrap_err();
        let message = error.to_string();
        assert!(error.is_corruption(), "{message}");
        let age = if version == 0 {
            "is too old"
        } else {
            "is newer than this build"
        };
        assert!(
            message.contains(&format!("MANIFEST format version {version} {age}")),
            "{message}"
        );
    }
    // A MANIFEST that does not declare its version at all is not guessed at either.
    let edit = VersionEdit {
        format_version: None,
        ..sample_edit()
    };
    let message = manifest_with(&edit).recover().unwrap_err().to_string();
    assert!(
        message.contains("does not start with a format version"),
        "{message}"
    );
}

/// The golden table with its footer's format version replaced (and the footer crc fixed up,
/// so only the version is wrong).
fn table_with_version(version: u32) -> Vec<u8> {
    let mut bytes = golden("table.sst");
    let footer = bytes.len() - FOOTER_BYTES;
    let at = footer + FOOTER_VERSION_OFFSET;
    bytes[at..at + 4].copy_from_slice(&version.to_le_bytes());
    let crc = cairn::testing::coding::masked_crc(&bytes[footer..bytes.len() - 4]);
    let crc_at = bytes.len() - 4;
    bytes[crc_at..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn table_of_an_unknown_format_version_is_refused() {
    let current = cairn::testing::sstable::format::FORMAT_VERSION_ZSTD;
    for (version, age) in [(0, "is too old"), (current + 1, "is newer than this build")] {
        let fs = MemFs::new();
        let path = Path::new("/000009.sst");
        fs.set_file_contents(path, table_with_version(version));
        let error = Table::open(fs.open_read(path).unwrap(), 9, None, true).unwrap_err();
        let message = error.to_string();
        assert!(error.is_corruption(), "{message}");
        assert!(
            message.contains(&format!("table format version {version} {age}")),
            "{message}"
        );
    }
}

/// Reads `tests/data/vN-db.expected`: `put <key> <value>` or `absent <key>` per line.
fn expected_state(path: &str) -> (State, Vec<Vec<u8>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut present = BTreeMap::new();
    let mut absent = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[..] {
            ["put", key, value] => {
                present.insert(key.as_bytes().to_vec(), value.as_bytes().to_vec());
            }
            ["absent", key] => absent.push(key.as_bytes().to_vec()),
            _ => panic!("bad line in {path}: {line:?}"),
        }
    }
    (present, absent)
}

fn std_options() -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(StdFs);
    options.create_if_missing = false;
    options
}

#[test]
fn v1_database_opens_and_reads_back() {
    database_opens_and_reads_back(V1_DB, V1_DB_EXPECTED, 1);
}

#[test]
fn v2_database_opens_and_reads_back() {
    database_opens_and_reads_back(V2_DB, V2_DB_EXPECTED, 2);
}

#[test]
fn v3_runs_database_opens_and_reads_back_with_its_runs() {
    // Its WAL is version 2 (MANIFEST version 3 changed the MANIFEST only).
    database_opens_and_reads_back_as(V3_RUNS_DB, V3_RUNS_DB_EXPECTED, 3, 2);
    let mut versions = VersionSet::new(Path::new(V3_RUNS_DB), Arc::new(StdFs), 7, 1 << 30);
    versions.recover().unwrap();
    let current = versions.current();
    assert!(
        (1..7).any(|level| current.level(level).run_count() >= 2),
        "no level with several runs"
    );
}

/// Opens a copy of the checked-in database of format `version` in `database` and reads back
/// what `expected` lists; its WAL holds unflushed writes and is read as that WAL version.
fn database_opens_and_reads_back(database: &str, expected: &str, version: u32) {
    database_opens_and_reads_back_as(database, expected, version, version);
}

/// As `database_opens_and_reads_back`, for a MANIFEST of format `version` whose WALs are of
/// format `wal_version`.
fn database_opens_and_reads_back_as(
    database: &str,
    expected: &str,
    version: u32,
    wal_version: u32,
) {
    let directory = TempDir::new("format-db");
    common::copy_dir(Path::new(database), directory.path());
    let wal = std::fs::read_dir(directory.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        // A database may also hold an empty WAL prepared for the next switch.
        .find(|path| {
            path.extension().is_some_and(|extension| extension == "log")
                && std::fs::metadata(path).is_ok_and(|metadata| metadata.len() > 0)
        })
        .unwrap();
    let contents = parse_wal(
        std::fs::read(&wal).unwrap(),
        &wal,
        RECORD_PAYLOAD_BYTES_MAX,
        wal_version >= 2,
        WalRecovery::Strict,
    )
    .unwrap();
    assert_eq!(contents.wal_version, wal_version);
    assert!(
        contents.record_count() > 0,
        "no unflushed writes in the WAL"
    );
    // The checked-in database has the shape the generator promises.
    let mut versions = VersionSet::new(directory.path(), Arc::new(StdFs), 7, 1 << 30);
    versions.recover().unwrap();
    assert_eq!(versions.manifest_format_version, version);
    let current = versions.current();
    assert!(!current.files(0).is_empty(), "no level-0 table");
    assert!(
        (1..7).any(|level| !current.files(level).is_empty()),
        "no table at level >= 1"
    );

    let (present, absent) = expected_state(expected);
    let db = Db::open(directory.path(), std_options()).unwrap();
    for (key, value) in &present {
        assert_eq!(db.get(key).unwrap().as_ref(), Some(value), "{key:?}");
    }
    for key in &absent {
        assert_eq!(db.get(key).unwrap(), None, "{key:?}");
    }
    assert_eq!(common::scan(&db), present);
    // Today's code keeps writing to the old database.
    db.put(b"written-today", b"yes").unwrap();
    db.close().unwrap();
    let db = Db::open(directory.path(), std_options()).unwrap();
    assert_eq!(db.get(b"written-today").unwrap(), Some(b"yes".to_vec()));
    assert_eq!(common::scan(&db).len(), present.len() + 1);
}

/// The same database, its MANIFEST rewritten to claim format version `version`: opening must
/// fail with an error naming that version, and must not touch the files.
#[test]
fn v1_database_claiming_another_manifest_version_is_refused() {
    for version in [0, MANIFEST_FORMAT_VERSION + 1] {
        let directory = TempDir::new("format-manifest-version");
        common::copy_dir(Path::new(V1_DB), directory.path());
        let current = std::fs::read_to_string(directory.path().join("CURRENT")).unwrap();
        let manifest = directory.path().join(current.trim_end());
        let contents = parse_log(std::fs::read(&manifest).unwrap(), &manifest).unwrap();
        let mut edits: Vec<VersionEdit> = contents
            .records()
            .map(|(_, payload)| VersionEdit::decode(payload).unwrap())
            .collect();
        edits[0].format_version = Some(version);
        let file = StdFs.create(&manifest).unwrap();
        let mut writer = LogWriter::new(file, manifest.clone());
        for edit in &edits {
            writer.add_record(&edit.encode()).unwrap();
        }
        writer.sync().unwrap();
        let rewritten = std::fs::read(&manifest).unwrap();

        let error = Db::open(directory.path(), std_options()).unwrap_err();
        let message = error.to_string();
        assert!(error.is_corruption(), "{message}");
        let age = if version == 0 {
            "is too old"
        } else {
            "is newer than this build"
        };
        assert!(
            message.contains(&format!("MANIFEST format version {version} {age}")),
            "{message}"
        );
        assert_eq!(std::fs::read(&manifest).unwrap(), rewritten);
    }
}

/// Wrote `tests/data/v1-db/` and `tests/data/v1-db.expected` with the version-1 build; kept
/// so the generator's history stays readable. It refuses to overwrite.
#[test]
#[ignore = "generator: writes the checked-in v1 database"]
fn generate_v1_db() {
    generate_db(V1_DB, V1_DB_EXPECTED);
}

/// Writes `tests/data/v2-db/` and `tests/data/v2-db.expected` (WALs with a header and sync
/// markers): `cargo test -p cairn --test format -- --ignored generate_v2_db`.
#[test]
#[ignore = "generator: writes the checked-in v2 database"]
fn generate_v2_db() {
    generate_db(V2_DB, V2_DB_EXPECTED);
}

/// Writes `tests/data/v3-runs-db/` and its `.expected`: the phases of `generate_db` under
/// tiering, with two extra flushes merged into level 1 as runs of their own before the
/// level-0 phase: `cargo test -p cairn --test format -- --ignored generate_v3_runs_db`.
#[test]
#[ignore = "generator: writes the checked-in v3 (run ids) database"]
fn generate_v3_runs_db() {
    generate_db_with(V3_RUNS_DB, V3_RUNS_DB_EXPECTED, true);
}

/// Writes a database with today's code into `database` and what it must read back into
/// `expected`, once per format version. It refuses to overwrite: a checked-in database is
/// never regenerated (a new format version gets a new directory and a generator of its own).
/// Phases: 60 keys with deletes, compacted to the bottom level; then overwrites and deletes
/// flushed to a level-0 table; then writes that stay in the WAL only (a clean close with the
/// WAL on does not flush), one of them synced so a version-2 WAL holds a sync marker. Values
/// are repetitive so LZ4 data blocks are in the tables too.
fn generate_db(database: &str, expected_path: &str) {
    generate_db_with(database, expected_path, false);
}

/// `generate_db`, under tiering with runs at level 1 when `tiered`.
fn generate_db_with(database: &str, expected_path: &str, tiered: bool) {
    assert!(
        !Path::new(database).exists(),
        "{database} exists: never regenerate it"
    );
    let mut options = Options::default();
    options.file_system = Arc::new(StdFs);
    options.write_buffer_size_bytes = 64 * 1024;
    options.wal_memory_mapped = false;
    options.block_size_bytes = 256;
    options.block_restart_interval = 4;
    options.compression = Compression::Lz4;
    let db = Db::open(database, options).unwrap();
    let mut state = BTreeMap::new();
    let mut deleted = BTreeSet::new();
    let put = |db: &Db, index: u64, phase: u32, state: &mut State| {
        let value = format!("p{phase}-{index}-").repeat(4).into_bytes();
        db.put(&common::key(index, 3), &value).unwrap();
        state.insert(common::key(index, 3), value);
    };
    let delete = |db: &Db, index: u64, state: &mut State, deleted: &mut BTreeSet<Vec<u8>>| {
        db.delete(&common::key(index, 3)).unwrap();
        state.remove(&common::key(index, 3));
        deleted.insert(common::key(index, 3));
    };
    (0..60).for_each(|index| put(&db, index, 1, &mut state));
    (0..60)
        .step_by(7)
        .for_each(|index| delete(&db, index, &mut state, &mut deleted));
    db.compact_range(None, None).unwrap();
    let db = if tiered {
        tiered_runs_phase(db, database, &mut state)
    } else {
        db
    };
    (0..60)
        .step_by(5)
        .for_each(|index| put(&db, index, 2, &mut state));
    (3..60)
        .step_by(11)
        .for_each(|index| delete(&db, index, &mut state, &mut deleted));
    db.flush().unwrap();
    (60..72).for_each(|index| put(&db, index, 3, &mut state));
    let synced = b"p3-synced".to_vec();
    db.put_with(&WriteOptions::with_sync(true), &common::key(60, 3), &synced)
        .unwrap();
    state.insert(common::key(60, 3), synced);
    (0..72)
        .step_by(6)
        .for_each(|index| put(&db, index, 3, &mut state));
    [1, 2, 61]
        .into_iter()
        .for_each(|index| delete(&db, index, &mut state, &mut deleted));
    db.close().unwrap();
    let _ = std::fs::remove_file(Path::new(database).join("LOCK"));

    let mut expected = String::new();
    for (key, value) in &state {
        let (key, value) = (String::from_utf8_lossy(key), String::from_utf8_lossy(value));
        expected.push_str(&format!("put {key} {value}\n"));
    }
    for key in deleted.iter().filter(|key| !state.contains_key(*key)) {
        expected.push_str(&format!("absent {}\n", String::from_utf8_lossy(key)));
    }
    std::fs::write(expected_path, expected).unwrap();
}

/// The tiered generator's extra phase: reopened under tiering with a level-0 trigger of 1,
/// two flushed batches of overwrites each become a run of level 1 (waited for by polling the
/// shape); then reopened with the usual trigger for the remaining phases.
fn tiered_runs_phase(db: Db, database: &str, state: &mut State) -> Db {
    db.close().unwrap();
    // Field by field: the options rule forbids struct literals outside the crate.
    #[allow(clippy::field_reassign_with_default)]
    let tiered = |trigger: usize| {
        let mut options = Options::default();
        options.file_system = Arc::new(StdFs);
        options.write_buffer_size_bytes = 64 * 1024;
        options.wal_memory_mapped = false;
        options.block_size_bytes = 256;
        options.block_restart_interval = 4;
        options.compression = Compression::Lz4;
        options.compaction_style = cairn::CompactionStyle::Tiering;
        options.level0_compaction_trigger = trigger;
        options
    };
    let db = Db::open(database, tiered(1)).unwrap();
    for batch in 0..2u64 {
        for index in (batch..60).step_by(4) {
            let value = format!("runs{batch}-{index}-").repeat(4).into_bytes();
            db.put(&common::key(index, 3), &value).unwrap();
            state.insert(common::key(index, 3), value);
        }
        db.flush().unwrap();
        // Each flush is merged into a new run of level 1 before the next one lands.
        while db.level_stats()[0].files > 0 {
            std::thread::yield_now();
        }
    }
    db.close().unwrap();
    Db::open(database, tiered(4)).unwrap()
}

/// An error refusing an unknown version must name the version (guards the `Error` display).
#[test]
fn corruption_errors_name_the_version() {
    let error = Footer::decode(
        &{
            let mut bytes = sample_footer().encode();
            bytes[FOOTER_VERSION_OFFSET] = 9;
            let crc = cairn::testing::coding::masked_crc(&bytes[..60]);
            bytes[60..].copy_from_slice(&crc.to_le_bytes());
            bytes
        },
        Path::new("t.sst"),
        100,
    )
    .unwrap_err();
    assert!(
        matches!(error, Error::Corruption { offset: 148, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("format version 9"), "{error}");
}
