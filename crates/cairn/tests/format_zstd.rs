//! The zstd block kind (`Compression::Zstd`) under the format rule (docs/format.md, "Changing
//! the format"): a zstd block and a table written with zstd match their golden files under
//! `tests/data/golden/v3/` (`zstd_*`) byte for byte, the golden files decode with today's
//! reader, and such a table carries table format version 2 while a table without zstd keeps
//! version 1. `CAIRN_BLESS_GOLDEN=1` writes a missing golden file, never an existing one.
//!
//! The golden bytes depend on the libzstd bundled by `zstd-sys` (its encoder output at level
//! `ZSTD_LEVEL`); upgrading it may change them without any format change, which the
//! decoding half of each test tells apart: old golden files must still decode.

#![allow(clippy::unwrap_used)]

mod common;

use cairn::testing::key::{internal_key, ValueKind};
use cairn::testing::sstable::format::{
    encode_block, FOOTER_BYTES, FOOTER_VERSION_OFFSET, FORMAT_VERSION_OLDEST, FORMAT_VERSION_ZSTD,
    KIND_ZSTD,
};
use cairn::testing::sstable::{BlockBuilder, Table, TableBuilder, TableOptions};
use cairn::{Compression, Db, FileSystem, MemFs, Options};
use std::path::Path;
use std::sync::Arc;

const GOLDEN_V3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/golden/v3");

/// Compares `actual` with golden file `name` of format version 3.
fn check_golden(name: &str, actual: &[u8]) {
    common::golden::check_golden_in(GOLDEN_V3, name, actual);
}

fn golden(name: &str) -> Vec<u8> {
    common::golden::golden_in(GOLDEN_V3, name)
}

/// A data block of 30 entries whose values repeat (compressible).
fn sample_block() -> Vec<u8> {
    let mut builder = BlockBuilder::new(4);
    for index in 0..30u64 {
        let key = internal_key(&common::key(index, 4), 10 + index, ValueKind::Put);
        builder.add(&key, format!("value-{}", index % 3).repeat(4).as_bytes());
    }
    builder.finish()
}

#[test]
fn golden_zstd_block() {
    let raw = sample_block();
    let encoded = encode_block(&raw, Compression::Zstd);
    let stored = usize::try_from(encoded.stored_size).unwrap();
    assert_eq!(
        encoded.bytes[stored], KIND_ZSTD,
        "the block was not stored as zstd"
    );
    assert!(
        stored < raw.len() / 2,
        "zstd saved too little: {stored} of {}",
        raw.len()
    );
    check_golden("zstd_data-block.bin", &encoded.bytes);
}

fn sample_table(fs: &MemFs, path: &Path, compression: Compression) {
    let options = TableOptions {
        block_size_bytes: 512,
        block_restart_interval: 4,
        bloom_bits_per_key: 10,
        compression,
    };
    let mut builder = TableBuilder::new(fs.create(path).unwrap(), path.to_path_buf(), options);
    for index in 0..60u64 {
        let value = format!("value-{}", index % 5).repeat(8);
        let key = internal_key(&common::key(index, 4), 100 + index, ValueKind::Put);
        builder.add(&key, value.as_bytes()).unwrap();
    }
    builder.finish().unwrap();
}

fn footer_version(table: &[u8]) -> u32 {
    let at = table.len() - FOOTER_BYTES + FOOTER_VERSION_OFFSET;
    u32::from_le_bytes(table[at..at + 4].try_into().unwrap())
}

#[test]
fn golden_zstd_table() {
    let fs = MemFs::new();
    let path = Path::new("/000007.sst");
    sample_table(&fs, path, Compression::Zstd);
    let written = fs.file_contents(path).unwrap();
    assert_eq!(footer_version(&written), FORMAT_VERSION_ZSTD);
    check_golden("zstd_table.sst", &written);

    fs.set_file_contents(path, golden("zstd_table.sst"));
    let table = Table::open(fs.open_read(path).unwrap(), 7, None, true).unwrap();
    assert_eq!(table.properties().entry_count, 60);
    for index in [0u64, 17, 59] {
        let lookup = internal_key(&common::key(index, 4), u64::MAX >> 8, ValueKind::SEEK);
        let (sequence, kind, value) = table.get(&lookup).unwrap().unwrap();
        let expected = format!("value-{}", index % 5).repeat(8);
        assert_eq!(
            (sequence, kind, &value[..]),
            (100 + index, ValueKind::Put, expected.as_bytes())
        );
    }
}

#[test]
fn tables_without_zstd_keep_format_version_1() {
    for compression in [Compression::None, Compression::Lz4] {
        let fs = MemFs::new();
        let path = Path::new("/000008.sst");
        sample_table(&fs, path, compression);
        assert_eq!(
            footer_version(&fs.file_contents(path).unwrap()),
            FORMAT_VERSION_OLDEST
        );
    }
}

/// Default options on a fresh in-memory file system, compressing with zstd.
fn zstd_options() -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(MemFs::new());
    options.compression = Compression::Zstd;
    options
}

#[test]
fn a_zstd_database_round_trips_through_flush_compaction_and_reopen() {
    let mut options = zstd_options();
    options.write_buffer_size_bytes = 32 * 1024;
    let db = Db::open("/db", options.clone()).unwrap();
    for index in 0..2000u64 {
        db.put(common::key(index, 5), format!("v{}", index % 7).repeat(20))
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    drop(db);
    // Read back under another setting: the kind byte says how each block is stored.
    options.compression = Compression::Lz4;
    let db = Db::open("/db", options).unwrap();
    assert_eq!(db.iter().unwrap().count(), 2000);
    assert_eq!(
        db.get(common::key(1234, 5)).unwrap(),
        Some(format!("v{}", 1234 % 7).repeat(20).into_bytes())
    );
}

/// Bug (found in review): the reader refused a zstd block that claimed more than 1,024 times
/// its stored size (plus 1 MiB) as corrupt, but zstd compresses runs of one byte far better
/// than that (4 MiB of zeros to a few hundred bytes), so a database holding such a value
/// wrote a table it could never read again, and every compaction of it failed.
#[test]
fn a_block_zstd_shrinks_beyond_a_thousandfold_reads_back() {
    let options = zstd_options();
    let db = Db::open("/db", options.clone()).unwrap();
    let zeros = vec![0u8; 4 << 20];
    db.put("zeros", &zeros).unwrap();
    db.put("other", "v").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("zeros").unwrap(), Some(zeros.clone()));
    db.compact_range(None, None).unwrap();
    drop(db);
    let db = Db::open("/db", options).unwrap();
    assert_eq!(db.get("zeros").unwrap(), Some(zeros));
}
