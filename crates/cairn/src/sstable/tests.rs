//! Whole-table tests: build through `MemFs`, read back against an oracle, and corrupt files.
//!
//! Thread-safety contract: each test owns its own `MemFs`; one test shares a table across
//! threads. Invariants checked: reads equal an independent oracle, and corruption is always an
//! error, never wrong data or a panic.

use super::properties::TableProperties;
use super::*;
use crate::error::Error;
use crate::fs::{FileSystem, MemFs};
use crate::iter::InternalIterator;
use crate::key::{
    compare_internal_keys, internal_key, parse_internal_key, ValueKind, SEQUENCE_MAX,
};
use crate::sstable::Compression;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::iter::test_support::{collect_backward, collect_forward, Entries};

const WORDS: [&str; 8] = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
];

fn random_user_key(rng: &mut SmallRng) -> Vec<u8> {
    let mut key = format!("user{:06}", rng.gen_range(0..1_000_000)).into_bytes();
    for _ in 0..rng.gen_range(0..12) {
        key.push(rng.gen());
    }
    key
}

fn random_value(rng: &mut SmallRng, compressible: bool) -> Vec<u8> {
    if compressible {
        let mut value = Vec::new();
        for _ in 0..rng.gen_range(0..12) {
            value.extend_from_slice(WORDS[rng.gen_range(0..WORDS.len())].as_bytes());
        }
        value
    } else {
        (0..rng.gen_range(0..48)).map(|_| rng.gen()).collect()
    }
}

/// `count` entries over about `count / 4` user keys, several versions each, ~10 % deletes,
/// unique sequence numbers, sorted in internal-key order.
fn random_entries(rng: &mut SmallRng, count: usize, compressible: bool) -> Entries {
    let pool: Vec<Vec<u8>> = (0..=(count / 4)).map(|_| random_user_key(rng)).collect();
    let mut sequences: Vec<u64> = (1..=count as u64).collect();
    sequences.shuffle(rng);
    let mut entries: Entries = sequences
        .into_iter()
        .map(|sequence| {
            let user = &pool[rng.gen_range(0..pool.len())];
            let kind = if rng.gen_bool(0.1) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = if kind == ValueKind::Delete {
                Vec::new()
            } else {
                random_value(rng, compressible)
            };
            (internal_key(user, sequence, kind), value)
        })
        .collect();
    entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
    entries
}

fn build(fs: &MemFs, path: &Path, entries: &Entries, options: TableOptions) -> TableProperties {
    let file = fs.create(path).unwrap();
    let mut builder = TableBuilder::new(file, path.to_path_buf(), options);
    for (key, value) in entries {
        builder.add(key, value).unwrap();
    }
    assert_eq!(builder.entry_count(), entries.len() as u64);
    let properties = builder.finish().unwrap();
    assert_eq!(fs.file_contents(path).unwrap().len() as u64, {
        let file = fs.open_read(path).unwrap();
        file.size_bytes()
    });
    properties
}

fn open(
    fs: &MemFs,
    path: &Path,
    cache: Option<Arc<BlockCache>>,
    verify: bool,
) -> crate::Result<Arc<Table>> {
    Table::open(fs.open_read(path)?, 7, cache, verify).map(Arc::new)
}

/// Versions per user key, newest first: an oracle for `get` independent of key encoding.
type Versions = HashMap<Vec<u8>, Vec<(u64, ValueKind, Vec<u8>)>>;

fn versions(entries: &[(Vec<u8>, Vec<u8>)]) -> Versions {
    let mut map = Versions::new();
    for (key, value) in entries {
        let parsed = parse_internal_key(key).unwrap();
        map.entry(parsed.user_key.to_vec()).or_default().push((
            parsed.sequence,
            parsed.kind,
            value.clone(),
        ));
    }
    for list in map.values_mut() {
        list.sort_by_key(|version| std::cmp::Reverse(version.0));
    }
    map
}

fn check_round_trip(options: TableOptions, compressible: bool, seed: u64) -> u64 {
    let mut rng = SmallRng::seed_from_u64(seed);
    let entries = random_entries(&mut rng, 50_000, compressible);
    let fs = MemFs::new();
    let path = Path::new("/db/000007.sst");
    let properties = build(&fs, path, &entries, options);
    assert_eq!(properties.entry_count, entries.len() as u64);
    let deletes = entries
        .iter()
        .filter(|(key, _)| parse_internal_key(key).unwrap().kind == ValueKind::Delete)
        .count();
    assert_eq!(properties.delete_count, deletes as u64);
    assert_eq!(properties.smallest_sequence, 1);
    assert_eq!(properties.largest_sequence, entries.len() as u64);

    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = open(&fs, path, Some(Arc::clone(&cache)), true).unwrap();
    assert_eq!(table.smallest_key(), entries[0].0.as_slice());
    assert_eq!(table.largest_key(), entries[entries.len() - 1].0.as_slice());
    assert_eq!(table.properties(), &properties);
    assert_eq!(table.file_number(), 7);
    assert_eq!(
        table.size_bytes(),
        fs.file_contents(path).unwrap().len() as u64
    );

    check_point_lookups(&table, &entries, &mut rng);
    if options.bloom_bits_per_key > 0 {
        let rejected = (0..1000)
            .filter(|_| !table.may_contain(&random_user_key(&mut rng)))
            .count();
        assert!(rejected > 0, "the Bloom filter rejects absent keys");
    }

    // Full iteration both ways.
    let mut iter = table.iter();
    assert_eq!(collect_forward(&mut iter).unwrap(), entries);
    assert_eq!(collect_backward(&mut iter).unwrap(), entries);
    assert!(cache.hits() > 0);
    assert!(cache.usage_bytes() <= cache.capacity_bytes());
    check_seek_walks(&mut iter, &entries, &mut rng);

    // No cache, and a non-filling iterator, read the same data.
    let uncached = open(&fs, path, None, false).unwrap();
    assert_eq!(
        collect_forward(&mut uncached.iter_with(false)).unwrap(),
        entries
    );
    table.size_bytes()
}

/// Point lookups at random snapshots against an oracle of every key's versions.
fn check_point_lookups(table: &Table, entries: &[(Vec<u8>, Vec<u8>)], rng: &mut SmallRng) {
    let oracle = versions(entries);
    let user_keys: Vec<&Vec<u8>> = oracle.keys().collect();
    for user in &user_keys {
        assert!(table.may_contain(user));
    }
    for round in 0..20_000 {
        let absent;
        let user: &[u8] = if round % 10 == 0 {
            absent = random_user_key(rng);
            &absent
        } else {
            user_keys[rng.gen_range(0..user_keys.len())]
        };
        let snapshot = match round % 3 {
            0 => SEQUENCE_MAX,
            _ => rng.gen_range(0..=entries.len() as u64 + 1),
        };
        let expected = oracle.get(user).and_then(|list| {
            list.iter()
                .find(|(sequence, _, _)| *sequence <= snapshot)
                .cloned()
        });
        let lookup = internal_key(user, snapshot, ValueKind::SEEK);
        assert_eq!(
            table.get(&lookup).unwrap(),
            expected,
            "get {user:?} at {snapshot}"
        );
    }
}

/// Seeks, then a random walk of next/prev from each, against the sorted entries.
fn check_seek_walks(iter: &mut TableIterator, entries: &[(Vec<u8>, Vec<u8>)], rng: &mut SmallRng) {
    for _ in 0..2_000 {
        let target = if rng.gen_bool(0.5) {
            let (key, _) = &entries[rng.gen_range(0..entries.len())];
            let parsed = parse_internal_key(key).unwrap();
            internal_key(
                parsed.user_key,
                rng.gen_range(0..=entries.len() as u64),
                ValueKind::SEEK,
            )
        } else {
            internal_key(&random_user_key(rng), rng.gen_range(0..100), ValueKind::Put)
        };
        let mut position = entries
            .partition_point(|(key, _)| compare_internal_keys(key, &target) == Ordering::Less);
        iter.seek(&target);
        for _ in 0..8 {
            match entries.get(position) {
                Some((key, value)) => {
                    assert!(iter.valid());
                    assert_eq!(iter.key(), key.as_slice());
                    assert_eq!(iter.value(), value.as_slice());
                }
                None => {
                    assert!(!iter.valid());
                    break;
                }
            }
            if rng.gen_bool(0.5) {
                iter.next();
                position += 1;
            } else if position == 0 {
                iter.prev();
                assert!(!iter.valid());
                break;
            } else {
                iter.prev();
                position -= 1;
            }
        }
        iter.status().unwrap();
    }
}

#[test]
fn round_trip_default_options() {
    check_round_trip(TableOptions::default(), false, 1);
}

#[test]
fn round_trip_tiny_blocks() {
    let options = TableOptions {
        block_size_bytes: 64,
        block_restart_interval: 2,
        bloom_bits_per_key: 0,
        compression: Compression::None,
    };
    check_round_trip(options, false, 2);
}

#[test]
fn round_trip_lz4() {
    let lz4 = TableOptions {
        compression: Compression::Lz4,
        ..TableOptions::default()
    };
    let compressed_size = check_round_trip(lz4, true, 3);
    let plain_size = check_round_trip(TableOptions::default(), true, 3);
    println!("lz4: {compressed_size} bytes vs {plain_size} uncompressed");
    assert!(compressed_size < plain_size * 3 / 4);
}

#[test]
fn empty_table() {
    let fs = MemFs::new();
    let path = Path::new("/empty.sst");
    let properties = build(&fs, path, &Vec::new(), TableOptions::default());
    assert_eq!(properties.entry_count, 0);
    let table = open(&fs, path, None, true).unwrap();
    assert!(table.smallest_key().is_empty());
    assert!(!table.may_contain(b"x"));
    assert_eq!(
        table.get(&internal_key(b"x", 5, ValueKind::SEEK)).unwrap(),
        None
    );
    let mut iter = table.iter();
    assert!(collect_forward(&mut iter).unwrap().is_empty());
    assert!(collect_backward(&mut iter).unwrap().is_empty());
    iter.seek(&internal_key(b"x", 5, ValueKind::SEEK));
    assert!(!iter.valid());
}

#[test]
fn add_rejects_malformed_keys() {
    let fs = MemFs::new();
    let path = Path::new("/bad.sst");
    let mut builder = TableBuilder::new(
        fs.create(path).unwrap(),
        path.into(),
        TableOptions::default(),
    );
    assert!(matches!(
        builder.add(b"short", b""),
        Err(Error::InvalidArgument(_))
    ));
    builder
        .add(&internal_key(b"b", 1, ValueKind::Put), b"")
        .unwrap();
    #[cfg(not(debug_assertions))]
    {
        let result = builder.add(&internal_key(b"a", 1, ValueKind::Put), b"");
        assert!(matches!(result, Err(Error::InvalidArgument(_))));
        let result = builder.add(&internal_key(b"b", 1, ValueKind::Put), b"");
        assert!(matches!(result, Err(Error::InvalidArgument(_))));
    }
    assert_eq!(builder.entry_count(), 1);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "strictly increase")]
fn add_out_of_order_asserts_in_debug() {
    let fs = MemFs::new();
    let path = Path::new("/bad.sst");
    let mut builder = TableBuilder::new(
        fs.create(path).unwrap(),
        path.into(),
        TableOptions::default(),
    );
    builder
        .add(&internal_key(b"b", 1, ValueKind::Put), b"")
        .unwrap();
    let _ = builder.add(&internal_key(b"a", 1, ValueKind::Put), b"");
}

fn small_table(fs: &MemFs, path: &Path, compression: Compression) -> Entries {
    let mut rng = SmallRng::seed_from_u64(99);
    let entries = random_entries(&mut rng, 48, compression == Compression::Lz4);
    let options = TableOptions {
        block_size_bytes: 256,
        block_restart_interval: 4,
        bloom_bits_per_key: 10,
        compression,
    };
    build(fs, path, &entries, options);
    entries
}

/// Opens, iterates both ways and looks up every entry; `Err` on any error, else checks the
/// data against `entries` when `must_match`.
fn read_everything(
    fs: &MemFs,
    path: &Path,
    verify: bool,
    entries: &Entries,
) -> crate::Result<bool> {
    read_table(&open(fs, path, None, verify)?, entries)
}

/// [`read_everything`]'s reads on an open table.
fn read_table(table: &Arc<Table>, entries: &Entries) -> crate::Result<bool> {
    let mut iter = table.iter();
    let forward = collect_forward(&mut iter)?;
    let backward = collect_backward(&mut iter)?;
    let mut same = forward == *entries && backward == *entries;
    for (key, value) in entries {
        let parsed = parse_internal_key(key).unwrap();
        let lookup = internal_key(parsed.user_key, parsed.sequence, ValueKind::SEEK);
        let found = table.get(&lookup)?;
        same &= found == Some((parsed.sequence, parsed.kind, value.clone()));
    }
    Ok(same)
}

/// A table file whose bytes, written to a real file, are opened through a memory mapping
/// ([`crate::fs::Mapping`]): uncompressed data blocks are then read in place.
#[cfg(target_os = "linux")]
struct MappedCopy {
    directory: std::path::PathBuf,
}

#[cfg(target_os = "linux")]
impl MappedCopy {
    fn new(name: &str) -> MappedCopy {
        let directory = std::env::temp_dir().join(format!(
            "cairn-sstable-mapped-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        MappedCopy { directory }
    }

    /// Writes `bytes` as a fresh file (never rewriting one that may still be mapped) and opens
    /// it mapped.
    fn open(
        &self,
        bytes: &[u8],
        cache: Option<Arc<BlockCache>>,
        verify: bool,
    ) -> crate::Result<Arc<Table>> {
        let path = self.directory.join("000042.sst");
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, bytes).unwrap();
        let file = crate::fs::StdFs.open_read_mapped(&path)?;
        assert!(file.mapping().is_some());
        Table::open(file, 42, cache, verify).map(Arc::new)
    }
}

#[cfg(target_os = "linux")]
impl Drop for MappedCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn mapped_tables_read_blocks_in_place_and_keep_them_alive() {
    let fs = MemFs::new();
    let path = Path::new("/db/000042.sst");
    let mut rng = SmallRng::seed_from_u64(42);
    let entries = random_entries(&mut rng, 20_000, false);
    build(&fs, path, &entries, TableOptions::default());
    let copy = MappedCopy::new("in-place");
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = copy
        .open(
            &fs.file_contents(path).unwrap(),
            Some(Arc::clone(&cache)),
            true,
        )
        .unwrap();
    check_point_lookups(&table, &entries, &mut rng);
    let mut iter = table.iter();
    assert_eq!(collect_forward(&mut iter).unwrap(), entries);
    assert_eq!(collect_backward(&mut iter).unwrap(), entries);
    check_seek_walks(&mut iter, &entries, &mut rng);
    // Every block was read in place: none went through (or into) the cache.
    assert!(cache.mapped_reads() > 0);
    assert_eq!(
        (cache.hits(), cache.misses(), cache.usage_bytes()),
        (0, 0, 0)
    );
    // A pinned value and a positioned iterator outlive the table, its file and its name.
    let (key, value) = &entries[entries.len() / 2];
    let parsed = parse_internal_key(key).unwrap();
    let lookup = internal_key(parsed.user_key, parsed.sequence, ValueKind::SEEK);
    let (_, _, pinned) = table.get_pinned(&lookup, None).unwrap().unwrap();
    iter.seek(key);
    drop(table);
    drop(copy);
    assert_eq!(&*pinned, value.as_slice());
    assert!(iter.valid());
    assert_eq!(
        (iter.key(), iter.value()),
        (key.as_slice(), value.as_slice())
    );
}

/// Build point 5 of the read path: a `get` from a mapped table borrows its block. Inside the
/// read, the mapping's and the path's reference counts are what they were before it (the
/// block used to hold both by `Arc`), while a pinned value, which must outlive the call,
/// does hold the mapping.
#[cfg(target_os = "linux")]
#[test]
fn mapped_point_reads_take_no_reference_count() {
    let fs = MemFs::new();
    let path = Path::new("/db/000042.sst");
    let mut rng = SmallRng::seed_from_u64(43);
    let entries = random_entries(&mut rng, 5_000, false);
    build(&fs, path, &entries, TableOptions::default());
    let copy = MappedCopy::new("no-counts");
    let table = copy
        .open(&fs.file_contents(path).unwrap(), None, true)
        .unwrap();
    let before = table.shared_counts();
    assert!(before.0 >= 1, "the table is mapped");
    // Inside every block read of `get` and `get_batch`, the counts are what they were.
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hook = {
        let (table, seen) = (Arc::clone(&table), Arc::clone(&seen));
        Box::new(move || seen.lock().unwrap().push(table.shared_counts()))
    };
    let mut lookups = Vec::new();
    let reads = super::reader::test_hooks::with_inside_read(hook, || {
        let mut reads = 0;
        for (key, value) in entries.iter().step_by(97) {
            let parsed = parse_internal_key(key).unwrap();
            let lookup = internal_key(parsed.user_key, parsed.sequence, ValueKind::SEEK);
            assert_eq!(table.get(&lookup).unwrap().unwrap().2, *value);
            lookups.push(lookup);
            reads += 1;
        }
        let keys: Vec<&[u8]> = lookups.iter().map(Vec::as_slice).collect();
        let answers = table.get_batch(&keys, false).unwrap();
        assert!(answers.iter().all(Option::is_some));
        reads + keys.len()
    });
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), reads, "the hook ran inside every lookup");
    assert!(
        seen.iter().all(|&counts| counts == before),
        "a mapped get took a reference count: {seen:?} against {before:?}"
    );
    assert!(reads > 20);
    let (key, _) = &entries[0];
    let parsed = parse_internal_key(key).unwrap();
    let lookup = internal_key(parsed.user_key, parsed.sequence, ValueKind::SEEK);
    let (_, _, pinned) = table.get_pinned(&lookup, None).unwrap().unwrap();
    assert_eq!(
        table.shared_counts().0,
        before.0 + 1,
        "a pinned value holds the mapping"
    );
    drop(pinned);
    assert_eq!(table.shared_counts(), before);
}

fn check_every_bit_flip(compression: Compression) {
    let fs = MemFs::new();
    let path = Path::new("/db/000042.sst");
    let entries = small_table(&fs, path, compression);
    let original = fs.file_contents(path).unwrap();
    assert!(read_everything(&fs, path, true, &entries).unwrap());
    println!("bit-flip table ({compression:?}): {} bytes", original.len());
    assert!(original.len() <= 4096);
    let mut detected = 0;
    let mut unverified_detected = 0;
    let mut mapped_detected = 0;
    for bit in 0..original.len() * 8 {
        let mut bytes = original.clone();
        bytes[bit / 8] ^= 1 << (bit % 8);
        fs.set_file_contents(path, bytes);
        match read_everything(&fs, path, true, &entries) {
            Err(error) => {
                assert!(error.is_corruption(), "bit {bit}: {error}");
                match &error {
                    Error::Corruption { file, offset, .. } => {
                        assert_eq!(file, path);
                        assert!(*offset < original.len() as u64);
                    }
                    _ => unreachable!(),
                }
                detected += 1;
            }
            Ok(same) => assert!(same, "bit {bit}: flip returned wrong data"),
        }
        // Without checksums on data blocks, anything may come back, but never a panic.
        if read_everything(&fs, path, false, &entries).is_err() {
            unverified_detected += 1;
        }
        if check_flip_when_mapped(&fs.file_contents(path).unwrap(), bit, &entries) {
            mapped_detected += 1;
        }
    }
    println!(
        "bit flips ({compression:?}): {detected} of {} detected with checksums, {unverified_detected} without",
        original.len() * 8
    );
    // Every byte of the file is covered by a block checksum or the footer checksum, read in
    // place or copied.
    assert_eq!(detected, original.len() * 8);
    assert_eq!(mapped_detected, original.len() * 8);
}

/// Reading the flipped file through a mapping (blocks read in place) is an error exactly
/// when reading it with copies is: corruption naming the file and an offset inside it, never
/// wrong data or a panic (and without checksums, never a panic). Returns whether the flip
/// was detected.
#[cfg(target_os = "linux")]
fn check_flip_when_mapped(bytes: &[u8], bit: usize, entries: &Entries) -> bool {
    thread_local! {
        static COPY: MappedCopy = MappedCopy::new(&format!("flips-{:?}", std::thread::current().id()));
    }
    COPY.with(|copy| {
        // Without checksums anything may come back, but never a panic.
        let _ = copy
            .open(bytes, None, false)
            .and_then(|table| read_table(&table, entries));
        let read = copy
            .open(bytes, None, true)
            .and_then(|table| read_table(&table, entries));
        match read {
            Err(Error::Corruption { file, offset, .. }) => {
                assert!(file.ends_with("000042.sst"), "mapped, bit {bit}: {file:?}");
                assert!(
                    offset < bytes.len() as u64,
                    "mapped, bit {bit}: offset {offset}"
                );
                true
            }
            Err(error) => panic!("mapped, bit {bit}: not corruption: {error}"),
            Ok(same) => {
                assert!(same, "mapped, bit {bit}: flip returned wrong data");
                false
            }
        }
    })
}

#[cfg(not(target_os = "linux"))]
fn check_flip_when_mapped(_bytes: &[u8], _bit: usize, _entries: &Entries) -> bool {
    true
}

#[test]
fn every_bit_flip_is_detected() {
    check_every_bit_flip(Compression::None);
}

#[test]
fn every_bit_flip_is_detected_lz4() {
    check_every_bit_flip(Compression::Lz4);
}

#[test]
fn truncated_and_foreign_files_are_corruption() {
    let fs = MemFs::new();
    let path = Path::new("/db/000009.sst");
    let entries = small_table(&fs, path, Compression::None);
    let original = fs.file_contents(path).unwrap();
    for length in [0, 10, 63, 64, original.len() / 2, original.len() - 1] {
        fs.set_file_contents(path, original[..length].to_vec());
        let error = read_everything(&fs, path, true, &entries).unwrap_err();
        assert!(error.is_corruption(), "{error}");
        assert!(error.to_string().contains("000009.sst"), "{error}");
    }
    let mut appended = original.clone();
    appended.extend_from_slice(&[0; 100]);
    fs.set_file_contents(path, appended);
    assert!(read_everything(&fs, path, true, &entries)
        .unwrap_err()
        .is_corruption());
    // Grown by a copy of its own (valid) footer: the size no longer matches the footer.
    let mut grown = original.clone();
    grown.extend_from_slice(&[0; 100]);
    grown.extend_from_slice(&original[original.len() - 64..]);
    fs.set_file_contents(path, grown);
    let error = open(&fs, path, None, true).unwrap_err();
    assert!(
        error.to_string().contains("does not match its footer"),
        "{error}"
    );
}

#[test]
fn corrupt_data_block_reports_its_offset() {
    let fs = MemFs::new();
    let path = Path::new("/db/000010.sst");
    let entries = small_table(&fs, path, Compression::None);
    let mut bytes = fs.file_contents(path).unwrap();
    // The first data block starts at offset 0 and is longer than 20 bytes.
    bytes[20] ^= 0x40;
    fs.set_file_contents(path, bytes);
    let error = read_everything(&fs, path, true, &entries).unwrap_err();
    match error {
        Error::Corruption {
            file,
            offset,
            reason,
        } => {
            assert_eq!(file, path);
            assert_eq!(offset, 0, "{reason}");
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn cache_stays_within_capacity_while_scanning() {
    let fs = MemFs::new();
    let path = Path::new("/db/000011.sst");
    let mut rng = SmallRng::seed_from_u64(5);
    let entries = random_entries(&mut rng, 5_000, false);
    build(&fs, path, &entries, TableOptions::default());
    let cache = Arc::new(BlockCache::new(16 * 1024));
    let table = open(&fs, path, Some(Arc::clone(&cache)), true).unwrap();
    let mut iter = table.iter();
    assert_eq!(collect_forward(&mut iter).unwrap(), entries);
    assert!(cache.usage_bytes() <= 16 * 1024);
    assert!(cache.entry_count() > 0);
    let misses = cache.misses();
    // A non-filling scan leaves the cache alone.
    let before = cache.usage_bytes();
    let other = open(&fs, path, Some(Arc::clone(&cache)), true).unwrap();
    assert_eq!(
        collect_forward(&mut other.iter_with(false)).unwrap(),
        entries
    );
    assert_eq!(cache.usage_bytes(), before);
    assert!(cache.misses() > misses);
}

#[test]
fn tables_are_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    assert_send::<TableIterator>();
    assert_send::<TableBuilder>();

    let fs = MemFs::new();
    let path = Path::new("/db/000012.sst");
    let mut rng = SmallRng::seed_from_u64(12);
    let entries = random_entries(&mut rng, 4_000, false);
    build(&fs, path, &entries, TableOptions::default());
    let cache = Arc::new(BlockCache::new(64 * 1024));
    let table = open(&fs, path, Some(cache), true).unwrap();
    let entries = Arc::new(entries);
    let threads: Vec<_> = (0..2)
        .map(|thread| {
            let table = Arc::clone(&table);
            let entries = Arc::clone(&entries);
            std::thread::spawn(move || {
                for (key, value) in entries.iter().skip(thread).step_by(2) {
                    let parsed = parse_internal_key(key).unwrap();
                    let lookup = internal_key(parsed.user_key, parsed.sequence, ValueKind::SEEK);
                    let found = table.get(&lookup).unwrap();
                    assert_eq!(found, Some((parsed.sequence, parsed.kind, value.clone())));
                }
                collect_forward(&mut table.iter()).unwrap().len()
            })
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().unwrap(), entries.len());
    }
}

/// Bug (found in review): a write checks an expiring value's limit without its 8-byte expiry
/// prefix, but the table builder checked the stored value with it, so an acknowledged
/// `put_with_expiry` of a value near `VALUE_BYTES_MAX` could never be flushed (and the
/// database not reopened: recovery flushes through the same builder). The builder's limit is
/// now the stored one.
#[test]
fn a_table_takes_an_expiring_value_of_the_largest_size() {
    let fs = MemFs::new();
    let path = Path::new("/expiring.sst");
    let mut stored = 4_102_444_800_000u64.to_le_bytes().to_vec();
    stored.resize(
        crate::expiry::EXPIRY_BYTES + crate::key::VALUE_BYTES_MAX,
        b'v',
    );
    let key = internal_key(b"k", 9, ValueKind::PutWithExpiry);
    build(
        &fs,
        path,
        &vec![(key.clone(), stored.clone())],
        TableOptions::default(),
    );
    let table = open(&fs, path, None, true).unwrap();
    let found = table.get(&internal_key(b"k", 9, ValueKind::SEEK)).unwrap();
    assert_eq!(found.map(|(_, _, value)| value.len()), Some(stored.len()));
    let mut oversized = stored;
    oversized.push(b'v');
    let mut builder = TableBuilder::new(
        fs.create(Path::new("/over.sst")).unwrap(),
        "/over.sst".into(),
        TableOptions::default(),
    );
    assert!(
        builder.add(&key, &oversized).is_err(),
        "one byte more is refused"
    );
}
