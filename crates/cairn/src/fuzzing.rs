//! Fuzz target bodies for every decoder of untrusted bytes, shared by the cargo-fuzz targets
//! in `fuzz/` and by the plain `#[test]` in `tests/fuzz.rs` (which feeds them thousands of
//! random and mutated inputs, so CI exercises the decoders without cargo-fuzz).
//!
//! Job: each `fuzz_*` function takes arbitrary bytes and drives one decoder end to end. A
//! decoder may reject its input with an error; it must never panic, loop forever or return
//! something inconsistent. These functions *do* panic when a decoder breaks one of those
//! rules — that panic is how a fuzzer reports a finding.
//!
//! Input shape: when the first byte is odd, the rest of the input first *builds* a valid
//! object (a log, block, table or edit whose contents come from the input), then flips or
//! zeroes bytes of it at positions the input chooses; otherwise the input is fed to the
//! decoder raw. Building first lets a fuzzer reach deep decoder states (valid checksums,
//! footers, restart arrays) without a seed corpus.
//!
//! Thread-safety contract: every function is self-contained (its own `MemFs`); callable from
//! any thread.
//!
//! Invariants checked: no panic; iteration and seeks terminate; an undamaged object decodes
//! back to exactly what was built (every key, in order; every `get` finds its value); a
//! decoded version edit re-encodes to bytes that decode to the same edit; a version built
//! by `apply_edit` satisfies its invariants.

// Panicking is this module's job (see above), so its functions carry no `# Panics` section;
// positions into a built object are reduced modulo its length first, and the `u32` tags are
// small loop indices.
#![allow(
    clippy::missing_panics_doc,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation
)]

use crate::batch::{DecodedBatch, WriteBatch};
use crate::fs::{FileSystem, MemFs};
use crate::iter::InternalIterator;
use crate::key::{compare_internal_keys, internal_key, ValueKind};
use crate::options::WalRecovery;
use crate::sstable::builder::TableOptions;
use crate::sstable::{Block, BlockBuilder, BlockCache, BlockOrigin, Table, TableBuilder};
use crate::version::{apply_edit, AddedFile, Version, VersionEdit};
use crate::wal::{
    encode_record, parse_log, parse_wal, sync_marker_record, wal_header_record, LogWriter,
    RECORD_PAYLOAD_BYTES_MAX,
};
use crate::Compression;
use std::path::Path;
use std::sync::Arc;

/// Reads bytes from the front of the input; yields zeros once it runs out.
struct Source<'a> {
    bytes: &'a [u8],
}

impl Source<'_> {
    fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((&first, rest)) => {
                self.bytes = rest;
                first
            }
            None => 0,
        }
    }

    fn take(&mut self, count: usize) -> &[u8] {
        let count = count.min(self.bytes.len());
        let (taken, rest) = self.bytes.split_at(count);
        self.bytes = rest;
        taken
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
}

/// Applies the remaining input as damage: `(position u16, xor byte)` pairs. Returns true if
/// the object may have changed.
fn damage(object: &mut [u8], source: &mut Source<'_>) -> bool {
    if object.is_empty() {
        return false;
    }
    let rounds = source.byte() % 8;
    for _ in 0..rounds {
        let position = usize::from(source.u16()) % object.len();
        let mask = source.byte();
        object[position] ^= if mask == 0 { 0xff } else { mask };
    }
    // Sometimes zero the tail.
    let zero_tail = source.byte().is_multiple_of(4);
    if zero_tail {
        let keep = usize::from(source.u16()) % (object.len() + 1);
        object.iter_mut().skip(keep).for_each(|byte| *byte = 0);
    }
    rounds > 0 || zero_tail
}

/// Sorted, distinct internal keys (user keys from the input) with values.
fn entries(source: &mut Source<'_>, count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = (0..count)
        .map(|index| {
            let length = usize::from(source.byte() % 12);
            let user_key = source.take(length).to_vec();
            let sequence = u64::from(source.byte()) + 1;
            let kind = if source.byte().is_multiple_of(5) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value_length = usize::from(source.byte() % 40);
            let mut value = source.take(value_length).to_vec();
            value.extend_from_slice(&(index as u32).to_le_bytes());
            (internal_key(&user_key, sequence, kind), value)
        })
        .collect();
    entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
    entries.dedup_by(|a, b| a.0 == b.0);
    entries
}

/// Drains `iterator` forward from the first entry; checks termination. (Key order is not
/// checked: a damaged block whose checksum was not verified may hold keys out of order,
/// which no reader can tell from data; order is checked on undamaged inputs instead.)
fn drain(iterator: &mut dyn InternalIterator, limit: usize) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    iterator.seek_to_first();
    while iterator.valid() {
        let key = iterator.key().to_vec();
        let _ = iterator.value().len();
        keys.push(key);
        assert!(keys.len() <= limit, "iteration does not terminate");
        iterator.next();
    }
    let _ = iterator.status();
    keys
}

/// Backward iteration and seeks must not panic and must agree on order.
fn probe(iterator: &mut dyn InternalIterator, keys: &[Vec<u8>], limit: usize) {
    iterator.seek_to_last();
    let mut steps = 0;
    while iterator.valid() {
        steps += 1;
        assert!(steps <= limit, "reverse iteration does not terminate");
        iterator.prev();
    }
    for key in keys.iter().take(16) {
        iterator.seek(key);
    }
    iterator.seek(b"");
    iterator.seek(&[0xff; 20]);
    let _ = iterator.status();
}

/// WAL reader: `wal::parse_log`, then `DecodedBatch::decode` and entry iteration.
pub fn fuzz_wal(data: &[u8]) {
    let mut source = Source { bytes: data };
    let bytes = if source.byte() % 2 == 1 {
        let file_system = MemFs::new();
        let path = Path::new("/fuzz.log");
        let Ok(file) = file_system.create(path) else {
            return;
        };
        let mut writer = LogWriter::new(file, path.to_path_buf());
        let mut sequence = 1u64;
        for _ in 0..=(source.byte() % 6) {
            let mut batch = WriteBatch::new();
            let count = usize::from(source_count(&mut source));
            for (key, value) in entries(&mut source, count) {
                if value.len() % 3 == 0 {
                    batch.delete(&key);
                } else {
                    batch.put(&key, &value);
                }
            }
            if batch.is_empty() {
                batch.put(b"k", b"v");
            }
            let count = batch.len() as u64;
            let _ = writer.add_record(batch.encode(sequence));
            sequence += count;
        }
        let _ = writer.flush();
        let mut bytes = file_system.file_contents(path).unwrap_or_default();
        damage(&mut bytes, &mut source);
        bytes
    } else {
        source.bytes.to_vec()
    };
    let length = bytes.len() as u64;
    if let Ok(contents) = parse_log(bytes.clone(), Path::new("/fuzz.log")) {
        if let Some(offset) = contents.torn_tail_offset {
            assert!(offset <= length, "torn tail past the end");
        }
        for (offset, payload) in contents.records() {
            assert!(
                offset + payload.len() as u64 <= length,
                "record past the end"
            );
            decode_batch(payload);
        }
    }
    decode_batch(&bytes);
}

/// WAL recovery (`wal::parse_wal`, format version 2): a log of a header, write batches and
/// sync markers, damaged (flipped bytes, a zeroed hole, a zeroed tail) or raw, read under
/// both recovery modes. Checks: records lie in bounds, in file order; a lost unsynced tail
/// lies past every length a marker says was durable and before where valid records resume,
/// and no kept record lies past it; what strict recovery accepts, point-in-time recovery
/// reads identically (it only differs where strict refuses).
pub fn fuzz_wal_recovery(data: &[u8]) {
    let mut source = Source { bytes: data };
    let bytes = if source.byte() % 2 == 1 {
        built_wal(&mut source)
    } else {
        source.bytes.to_vec()
    };
    let path = Path::new("/fuzz.log");
    let read = |recovery| {
        parse_wal(
            bytes.clone(),
            path,
            RECORD_PAYLOAD_BYTES_MAX,
            true,
            recovery,
        )
    };
    let point_in_time = read(WalRecovery::PointInTime);
    if let Ok(contents) = &point_in_time {
        let length = bytes.len() as u64;
        let mut previous_end = 0u64;
        for (offset, payload) in contents.records() {
            let end = offset + payload.len() as u64;
            assert!(end <= length, "record past the end");
            assert!(
                offset >= previous_end,
                "records out of order or overlapping"
            );
            previous_end = end;
            decode_batch(payload);
        }
        if let Some(lost) = contents.lost_unsynced_tail {
            assert!(
                lost.durable_bytes <= lost.offset
                    && lost.offset < lost.resumes_at
                    && lost.resumes_at < length,
                "lost tail {lost:?} out of place in {length} bytes"
            );
            assert!(
                previous_end <= lost.offset,
                "a record kept past the lost tail"
            );
        }
    }
    if let Ok(strict) = read(WalRecovery::Strict) {
        let Ok(point_in_time) = &point_in_time else {
            panic!("point-in-time recovery refused what strict recovery read");
        };
        assert!(
            strict.lost_unsynced_tail.is_none(),
            "strict recovery lost a tail"
        );
        assert!(
            strict.records().eq(point_in_time.records()),
            "the two modes read different records"
        );
    }
}

/// A WAL of today's version built from the input: header, batches, sync markers naming the
/// length before them; then damaged, possibly with a zeroed hole in the middle.
fn built_wal(source: &mut Source<'_>) -> Vec<u8> {
    // Any fixed nonce: the reader takes the header's.
    const NONCE: u64 = 0x0123_4567_89ab_cdef;
    let mut bytes = wal_header_record(NONCE);
    let mut sequence = 1u64;
    for _ in 0..=(source.byte() % 8) {
        if source.byte().is_multiple_of(3) {
            bytes.extend(sync_marker_record(NONCE, bytes.len() as u64));
        }
        let mut batch = WriteBatch::new();
        let count = usize::from(source_count(source));
        for (key, value) in entries(source, count) {
            batch.put(&key, &value);
        }
        if batch.is_empty() {
            batch.put(b"k", b"v");
        }
        let count = batch.len() as u64;
        bytes.extend(encode_record(batch.encode(sequence)));
        sequence += count;
    }
    damage(&mut bytes, source);
    // A hole: unsynced pages that never reached the disk, in the middle of the log.
    if !bytes.is_empty() && source.byte().is_multiple_of(2) {
        let start = usize::from(source.u16()) % bytes.len();
        let end = (start + usize::from(source.byte()) * 8).min(bytes.len());
        bytes[start..end].fill(0);
    }
    bytes
}

fn source_count(source: &mut Source<'_>) -> u8 {
    source.byte() % 6 + 1
}

fn decode_batch(payload: &[u8]) {
    if let Ok(batch) = DecodedBatch::decode(payload) {
        let mut seen = 0u64;
        for entry in batch.iter() {
            assert!(
                entry.is_ok(),
                "entry failed after decode validated the batch"
            );
            seen += 1;
            assert!(seen <= u64::from(batch.count), "more entries than declared");
        }
        assert_eq!(seen, u64::from(batch.count), "fewer entries than declared");
        let _ = batch.first_sequence.checked_add(u64::from(batch.count));
    }
}

/// Block reader: `Block::new`, then forward and backward iteration and seeks.
pub fn fuzz_block(data: &[u8]) {
    let mut source = Source { bytes: data };
    let mut built = None;
    let bytes = if source.byte() % 2 == 1 {
        let interval = usize::from(source.byte() % 5) + 1;
        let mut builder = BlockBuilder::new(interval);
        let count = usize::from(source.byte() % 40);
        let entries = entries(&mut source, count);
        for (key, value) in &entries {
            builder.add(key, value);
        }
        let mut bytes = builder.finish();
        if !damage(&mut bytes, &mut source) {
            built = Some(entries);
        }
        bytes
    } else {
        source.bytes.to_vec()
    };
    let limit = bytes.len() + 1;
    let block = Block::new(bytes, BlockOrigin::detached());
    if built.is_some() {
        assert!(block.is_ok(), "an undamaged block was rejected");
    }
    if let Ok(block) = block {
        let block = Arc::new(block);
        let mut iterator = block.iter();
        let keys = drain(&mut iterator, limit);
        if let Some(entries) = &built {
            let expected: Vec<Vec<u8>> = entries.iter().map(|(key, _)| key.clone()).collect();
            assert_eq!(keys, expected, "an undamaged block reads back differently");
            for (key, value) in entries {
                iterator.seek(key);
                assert!(iterator.valid() && iterator.key() == key.as_slice());
                assert_eq!(iterator.value(), value.as_slice());
            }
        }
        probe(&mut iterator, &keys, limit);
    }
}

/// `SSTable` reader: `Table::open` over a `MemFs` file, full iteration both ways, seeks and a
/// `get` for every key found (and a few that are not there).
pub fn fuzz_table(data: &[u8]) {
    let mut source = Source { bytes: data };
    let file_system = MemFs::new();
    let path = Path::new("/000001.sst");
    let mut built = None;
    let bytes = if source.byte() % 2 == 1 {
        let options = TableOptions {
            block_size_bytes: 64 + usize::from(source.byte()) * 4,
            block_restart_interval: usize::from(source.byte() % 4) + 1,
            bloom_bits_per_key: usize::from(source.byte() % 12),
            compression: if source.byte().is_multiple_of(2) {
                Compression::None
            } else {
                Compression::Lz4
            },
        };
        let Ok(file) = file_system.create(path) else {
            return;
        };
        let mut builder = TableBuilder::new(file, path.to_path_buf(), options);
        let count = usize::from(source.byte() % 64);
        let entries = entries(&mut source, count);
        for (key, value) in &entries {
            if builder.add(key, value).is_err() {
                return;
            }
        }
        if builder.finish().is_err() {
            return;
        }
        let mut bytes = file_system.file_contents(path).unwrap_or_default();
        if !damage(&mut bytes, &mut source) {
            built = Some(entries);
        }
        bytes
    } else {
        source.bytes.to_vec()
    };
    let limit = bytes.len() + 1;
    file_system.set_file_contents(path, bytes);
    let Ok(file) = file_system.open_read(path) else {
        return;
    };
    let cache = Some(Arc::new(BlockCache::new(64 * 1024)));
    for (cache, verify) in [(None, true), (cache, false)] {
        let table = Table::open(Arc::clone(&file), 1, cache, verify);
        if built.is_some() {
            assert!(table.is_ok(), "an undamaged table was rejected");
        }
        let Ok(table) = table else {
            return;
        };
        let table = Arc::new(table);
        let mut iterator = table.iter();
        let keys = drain(&mut iterator, limit);
        if let Some(entries) = &built {
            let expected: Vec<Vec<u8>> = entries.iter().map(|(key, _)| key.clone()).collect();
            assert_eq!(keys, expected, "an undamaged table reads back differently");
            for (key, value) in entries {
                match table.get(key) {
                    Ok(Some((_, kind, found))) => {
                        let parsed = crate::key::parse_internal_key(key);
                        assert_eq!(Some(kind), parsed.map(|parsed| parsed.kind));
                        assert_eq!(&found, value, "get returned another value");
                    }
                    other => panic!("get of a written key returned {other:?}"),
                }
            }
        }
        probe(&mut iterator, &keys, limit);
        for key in &keys {
            let _ = table.get(key);
        }
        let _ = table.get(&internal_key(b"absent", 1, ValueKind::SEEK));
        let _ = table.get(b"");
        let _ = table.may_contain(b"absent");
    }
}

/// MANIFEST decoder: `VersionEdit::decode`, a re-encode round trip, and `apply_edit` onto an
/// empty version and onto the version the edit itself builds.
pub fn fuzz_version_edit(data: &[u8]) {
    let mut source = Source { bytes: data };
    let bytes = if source.byte() % 2 == 1 {
        let mut edit = VersionEdit {
            log_number: Some(u64::from(source.u16())),
            next_file_number: Some(u64::from(source.u16())),
            last_sequence: Some(u64::from(source.u16())),
            format_version: Some(1),
            ..VersionEdit::default()
        };
        for _ in 0..source.byte() % 6 {
            let level = usize::from(source.byte() % 8);
            let pair = entries(&mut source, 2);
            let (smallest, largest) = match pair.as_slice() {
                [a, b] => (a.0.clone(), b.0.clone()),
                [a] => (a.0.clone(), a.0.clone()),
                _ => (Vec::new(), Vec::new()),
            };
            edit.added_files.push((
                level,
                AddedFile {
                    number: u64::from(source.byte()),
                    size_bytes: u64::from(source.u16()),
                    smallest,
                    largest,
                    smallest_sequence: 1,
                    largest_sequence: u64::from(source.byte()),
                },
            ));
        }
        for _ in 0..source.byte() % 3 {
            edit.deleted_files
                .push((usize::from(source.byte() % 8), u64::from(source.byte())));
        }
        if source.byte().is_multiple_of(2) {
            let key = source.take(8).to_vec();
            edit.compact_pointers
                .push((usize::from(source.byte() % 8), key));
        }
        let mut bytes = edit.encode();
        damage(&mut bytes, &mut source);
        bytes
    } else {
        source.bytes.to_vec()
    };
    let Ok(edit) = VersionEdit::decode(&bytes) else {
        return;
    };
    let encoded = edit.encode();
    assert_eq!(
        VersionEdit::decode(&encoded).as_ref(),
        Ok(&edit),
        "a decoded edit does not survive re-encoding"
    );
    let empty = Version::empty(7);
    if let Ok(version) = apply_edit(&empty, &edit) {
        assert!(version.check_invariants().is_ok());
        // Applying it again must fail cleanly or succeed; deleting what it added must work.
        let _ = apply_edit(&version, &edit);
        let undo = VersionEdit {
            deleted_files: edit
                .added_files
                .iter()
                .map(|(level, file)| (*level, file.number))
                .collect(),
            ..VersionEdit::default()
        };
        let _ = apply_edit(&version, &undo);
        for level in 1..version.level_count() {
            let _ = version.find_files(level, b"key").count();
            let _ = version.overlapping_files(level, Some(b"a"), Some(b"z"));
        }
    }
}
