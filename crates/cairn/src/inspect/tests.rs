use super::manifest::live_tables;
use super::sizes::approximate_sizes;
use super::table::dump_table;
use super::verify::verify_dir;
use super::wal::dump_wal;
use super::EntryKind;
use crate::{Db, Error, Options};
use std::path::{Path, PathBuf};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("cairn-inspect-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Two flushed tables (keys 000..100 and 100..200, one deleted) and a WAL holding `tail`.
fn database(dir: &Path) {
    let options = Options {
        create_if_missing: true,
        ..Options::default()
    };
    let db = Db::open(dir, options).unwrap();
    for round in 0..2 {
        for index in round * 100..(round + 1) * 100 {
            db.put(format!("key{index:03}").as_bytes(), &[b'v'; 100])
                .unwrap();
        }
        db.delete(b"key050").unwrap();
        db.flush().unwrap();
    }
    db.put(b"tail", b"t").unwrap();
    drop(db);
}

#[test]
fn a_table_dump_holds_every_entry_in_order() {
    let dir = TempDir::new("table");
    database(&dir.0);
    let tables = live_tables(&dir.0).unwrap();
    assert_eq!(tables.len(), 2, "{tables:?}");
    let (mut puts, mut deletes) = (0, 0);
    for live in &tables {
        let dump = dump_table(&live.path).unwrap();
        assert_eq!(dump.entries.len() as u64, dump.facts.entry_count);
        assert_eq!(dump.blocks.len() as u64, dump.facts.data_block_count);
        assert_eq!(dump.size_bytes, live.table.size_bytes);
        for entry in &dump.entries {
            match entry.kind {
                EntryKind::Put | EntryKind::PutWithExpiry => puts += 1,
                EntryKind::Delete => deletes += 1,
            }
        }
    }
    // key050's put and delete met in the first memtable: the flush kept the delete only.
    assert_eq!((puts, deletes), (199, 2));
}

#[test]
fn a_flipped_bit_is_reported_with_file_and_offset() {
    let dir = TempDir::new("flip");
    database(&dir.0);
    let path = live_tables(&dir.0).unwrap().remove(0).path;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    match dump_table(&path) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            assert_eq!(offset, 0);
        }
        other => panic!("{other:?}"),
    }
    let report = verify_dir(&dir.0).unwrap();
    assert!(!report.is_ok());
    let problems: Vec<_> = report.problems().collect();
    assert_eq!(problems.len(), 1, "{report:?}");
    assert_eq!(problems[0].path, path);
}

#[test]
fn a_missing_live_table_fails_verification() {
    let dir = TempDir::new("missing");
    database(&dir.0);
    assert!(verify_dir(&dir.0).unwrap().is_ok());
    let path = live_tables(&dir.0).unwrap().remove(1).path;
    std::fs::remove_file(&path).unwrap();
    let report = verify_dir(&dir.0).unwrap();
    let problems: Vec<_> = report.problems().collect();
    assert_eq!(problems.len(), 1, "{report:?}");
    assert!(problems[0]
        .problem
        .as_deref()
        .unwrap()
        .contains("listed as live in the MANIFEST but cannot be read"));
}

#[test]
fn the_wal_holds_the_unflushed_tail() {
    let dir = TempDir::new("wal");
    database(&dir.0);
    let mut tail = Vec::new();
    for entry in std::fs::read_dir(&dir.0).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "log") {
            for record in dump_wal(&path).unwrap().records {
                tail.extend(record.entries.into_iter().map(|entry| entry.key));
            }
        }
    }
    assert!(tail.contains(&b"tail".to_vec()), "{tail:?}");
}

#[test]
fn sizes_are_bounded_by_the_live_tables() {
    let dir = TempDir::new("sizes");
    database(&dir.0);
    let live: u64 = live_tables(&dir.0)
        .unwrap()
        .iter()
        .map(|live| live.table.size_bytes)
        .sum();
    let all = approximate_sizes(&dir.0, None, None).unwrap();
    assert_eq!(all.total_bytes, live);
    let first = approximate_sizes(&dir.0, Some(b"key000"), Some(b"key100")).unwrap();
    assert!(
        first.total_bytes > 0 && first.total_bytes < live,
        "{first:?}"
    );
    let inner = approximate_sizes(&dir.0, Some(b"key010"), Some(b"key020")).unwrap();
    assert!(inner.total_bytes <= first.total_bytes, "{inner:?}");
    assert_eq!(
        approximate_sizes(&dir.0, Some(b"z"), None)
            .unwrap()
            .total_bytes,
        0
    );
}

/// Rewrites the table at `path` with an index whose every handle claims `size` bytes (its
/// checksum recomputed): damage a checksum cannot catch.
fn forge_index_sizes(path: &Path, size: u64) {
    use crate::fs::{FileSystem, StdFs};
    use crate::iter::InternalIterator;
    use crate::sstable::block::{Block, BlockBuilder, BlockOrigin};
    use crate::sstable::format::{
        encode_block, read_block_contents, BlockHandle, Footer, FOOTER_BYTES,
    };
    let mut bytes = std::fs::read(path).unwrap();
    let footer_at = bytes.len() - FOOTER_BYTES;
    let mut footer = Footer::decode(&bytes[footer_at..], path, footer_at as u64).unwrap();
    let file = StdFs.open_read(path).unwrap();
    let contents = read_block_contents(file.as_ref(), footer.index, true).unwrap();
    let index = std::sync::Arc::new(Block::new(contents.data, BlockOrigin::detached()).unwrap());
    let mut forged = BlockBuilder::new(1);
    let mut iter = index.iter();
    iter.seek_to_first();
    while iter.valid() {
        let mut handle = BlockHandle::decode(iter.value()).unwrap();
        handle.size = size;
        forged.add(iter.key(), &handle.encode());
        iter.next();
    }
    let encoded = encode_block(&forged.finish(), crate::sstable::Compression::None);
    bytes.truncate(footer_at);
    footer.index = BlockHandle {
        offset: footer_at as u64,
        size: encoded.stored_size,
    };
    bytes.extend_from_slice(&encoded.bytes);
    bytes.extend_from_slice(&footer.encode());
    std::fs::write(path, bytes).unwrap();
}

/// Sizes read block handles straight from a table: forged sizes must not overflow (a panic
/// in a checked build) nor report more bytes than the tables hold.
#[test]
fn sizes_of_a_table_with_forged_block_sizes_stay_bounded() {
    let dir = TempDir::new("forged");
    database(&dir.0);
    let live = live_tables(&dir.0).unwrap();
    let files: u64 = live.iter().map(|live| live.table.size_bytes).sum();
    for table in &live {
        forge_index_sizes(&table.path, 1 << 63);
    }
    match approximate_sizes(&dir.0, Some(b"key050"), Some(b"key150")) {
        Ok(sizes) => assert!(sizes.total_bytes <= files, "{sizes:?}"),
        Err(error) => assert!(error.is_corruption(), "{error}"),
    }
}
