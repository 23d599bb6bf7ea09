//! The block format's unit tests: round trips against an oracle, seeks, corruption.

use super::*;
use crate::key::{internal_key, ValueKind};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::BTreeMap;

type Oracle = BTreeMap<(Vec<u8>, Reverse<u64>), Vec<u8>>;

fn oracle_key(entry: &(Vec<u8>, Reverse<u64>)) -> Vec<u8> {
    let mut key = entry.0.clone();
    key.extend_from_slice(&entry.1 .0.to_le_bytes());
    key
}

fn random_oracle(rng: &mut SmallRng, count: usize) -> Oracle {
    let mut oracle = Oracle::new();
    while oracle.len() < count {
        let length = rng.gen_range(0..12);
        let user: Vec<u8> = (0..length).map(|_| rng.gen_range(b'a'..b'e')).collect();
        let sequence = rng.gen_range(0..1000u64);
        let kind = if rng.gen_bool(0.2) {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let trailer = (sequence << 8) | kind as u64;
        let value_length = rng.gen_range(0..20);
        let value: Vec<u8> = (0..value_length).map(|_| rng.gen()).collect();
        oracle.insert((user, Reverse(trailer)), value);
    }
    oracle
}

fn build(oracle: &Oracle, restart_interval: usize) -> Arc<Block> {
    let mut builder = BlockBuilder::new(restart_interval);
    for (entry, value) in oracle {
        builder.add(&oracle_key(entry), value);
    }
    Arc::new(Block::new(builder.finish(), BlockOrigin::detached()).unwrap())
}

#[test]
fn round_trip_with_oracle() {
    let mut rng = SmallRng::seed_from_u64(7);
    for (count, restart_interval) in [(0, 4), (1, 1), (300, 1), (300, 4), (500, 16), (64, 1000)] {
        let oracle = random_oracle(&mut rng, count);
        let expected: Vec<(Vec<u8>, Vec<u8>)> = oracle
            .iter()
            .map(|(entry, value)| (oracle_key(entry), value.clone()))
            .collect();
        let block = build(&oracle, restart_interval);
        let mut iter = block.iter();
        assert!(!iter.valid());

        let mut forward = Vec::new();
        iter.seek_to_first();
        while iter.valid() {
            forward.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next();
        }
        iter.status().unwrap();
        assert_eq!(forward, expected);

        let mut backward = Vec::new();
        iter.seek_to_last();
        while iter.valid() {
            backward.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.prev();
        }
        iter.status().unwrap();
        backward.reverse();
        assert_eq!(backward, expected);

        for _ in 0..500 {
            let target = oracle_key(&random_oracle(&mut rng, 1).into_keys().next().unwrap());
            let position = expected
                .partition_point(|(key, _)| compare_internal_keys(key, &target) == Ordering::Less);
            iter.seek(&target);
            match expected.get(position) {
                Some((key, value)) => {
                    assert!(iter.valid());
                    assert_eq!(iter.key(), key.as_slice());
                    assert_eq!(iter.value(), value.as_slice());
                    // Step around the seek position.
                    iter.prev();
                    if position == 0 {
                        assert!(!iter.valid());
                    } else {
                        assert_eq!(iter.key(), expected[position - 1].0.as_slice());
                        iter.next();
                        assert_eq!(iter.key(), key.as_slice());
                    }
                    if position + 1 < expected.len() {
                        iter.seek(key);
                        iter.next();
                        assert_eq!(iter.key(), expected[position + 1].0.as_slice());
                    }
                }
                None => assert!(!iter.valid()),
            }
            iter.status().unwrap();
        }
    }
}

#[test]
fn builder_reuse_and_estimates() {
    let mut builder = BlockBuilder::new(2);
    assert!(builder.is_empty());
    builder.add(&internal_key(b"a", 1, ValueKind::Put), b"1");
    builder.add(&internal_key(b"b", 1, ValueKind::Put), b"2");
    builder.add(&internal_key(b"c", 1, ValueKind::Put), b"3");
    assert_eq!(builder.entry_count(), 3);
    let estimate = builder.size_estimate();
    let first = builder.finish();
    assert_eq!(first.len(), estimate);
    assert!(builder.is_empty());
    builder.add(&internal_key(b"a", 1, ValueKind::Put), b"1");
    builder.add(&internal_key(b"b", 1, ValueKind::Put), b"2");
    builder.add(&internal_key(b"c", 1, ValueKind::Put), b"3");
    assert_eq!(builder.size_estimate(), first.len());
    assert_eq!(builder.finish(), first);
}

/// Walks a (possibly corrupt) block every way the iterator can move; returns true if any
/// error surfaced. Never panics on any input.
fn exercise(block: &Arc<Block>, targets: &[Vec<u8>]) -> bool {
    let mut iter = block.iter();
    let mut failed = false;
    iter.seek_to_first();
    let mut steps = 0;
    while iter.valid() && steps < 10_000 {
        let _ = (iter.key(), iter.value());
        iter.next();
        steps += 1;
    }
    failed |= iter.status().is_err();
    iter.seek_to_last();
    steps = 0;
    while iter.valid() && steps < 10_000 {
        iter.prev();
        steps += 1;
    }
    failed |= iter.status().is_err();
    for target in targets {
        iter.seek(target);
        if iter.valid() {
            iter.next();
            if iter.valid() {
                iter.prev();
            }
        }
        failed |= iter.status().is_err();
    }
    failed
}

#[test]
fn corrupt_blocks_error_and_never_panic() {
    let mut rng = SmallRng::seed_from_u64(11);
    let oracle = random_oracle(&mut rng, 120);
    let mut builder = BlockBuilder::new(4);
    for (entry, value) in &oracle {
        builder.add(&oracle_key(entry), value);
    }
    let good = builder.finish();
    let targets: Vec<Vec<u8>> = oracle.keys().step_by(7).map(oracle_key).collect();

    // Every truncation is detected.
    for length in 0..good.len() {
        let truncated = good[..length].to_vec();
        let detected = match Block::new(truncated, BlockOrigin::detached()) {
            Err(error) => {
                assert!(error.is_corruption());
                true
            }
            Ok(block) => exercise(&Arc::new(block), &targets),
        };
        assert!(detected, "truncation to {length} bytes went unnoticed");
    }

    // Random bit flips, byte overwrites and splices never panic.
    let mut detected = 0;
    let trials = 3000;
    for trial in 0..trials {
        let mut bytes = good.clone();
        match trial % 3 {
            0 => {
                let bit = rng.gen_range(0..bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
            }
            1 => {
                for _ in 0..rng.gen_range(1..4) {
                    let at = rng.gen_range(0..bytes.len());
                    bytes[at] = rng.gen();
                }
            }
            _ => {
                let at = rng.gen_range(0..bytes.len());
                let length = rng.gen_range(0..16).min(bytes.len() - at);
                bytes.drain(at..at + length);
            }
        }
        match Block::new(bytes, BlockOrigin::detached()) {
            Err(error) => {
                assert!(error.is_corruption());
                detected += 1;
            }
            Ok(block) => detected += usize::from(exercise(&Arc::new(block), &targets)),
        }
    }
    println!(
        "block corruption: {detected} of {trials} random corruptions detected without a checksum"
    );
    assert!(detected > 0);
}

#[test]
fn errors_name_file_and_offset() {
    let origin = BlockOrigin {
        file: Arc::from(Path::new("/db/000007.sst")),
        offset: 4096,
        compressed: false,
    };
    let error = Block::new(vec![0, 0, 0, 0], origin).unwrap_err();
    match error {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, Path::new("/db/000007.sst"));
            assert_eq!(offset, 4096);
        }
        other => panic!("unexpected {other}"),
    }
}

/// Reads `block` front to back; the iterator's status at the end.
fn scan_status(block: Block) -> Result<usize> {
    let mut iter = Arc::new(block).iter();
    iter.seek_to_first();
    let mut entries = 0;
    while iter.valid() {
        entries += 1;
        iter.next();
    }
    iter.status().map(|()| entries)
}

/// A block by hand: entries of (shared, key delta, value), then the restart array.
fn raw_block(entries: &[(u32, &[u8], &[u8])], restarts: &[u32]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (shared, delta, value) in entries {
        for field in [*shared, delta.len() as u32, value.len() as u32] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        bytes.extend_from_slice(delta);
        bytes.extend_from_slice(value);
    }
    for restart in restarts {
        bytes.extend_from_slice(&restart.to_le_bytes());
    }
    bytes.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
    bytes
}

fn trailer_key(user: &[u8]) -> Vec<u8> {
    internal_key(user, 7, ValueKind::Put)
}

/// A restart point must start an entry: one inside an entry's value would let a seek land
/// on bytes a scan never checked (a forged index entry, or a key no scan returns).
#[test]
fn a_restart_point_inside_an_entry_is_corruption() {
    let hidden = trailer_key(b"p");
    let fake = raw_block(&[(0, &hidden, b"forged")], &[]);
    // The fake entry without its restart array: just the entry bytes.
    let fake_entry = &fake[..fake.len() - 4];
    let first = trailer_key(b"a");
    let fake_offset = (12 + first.len()) as u32;
    let bytes = raw_block(&[(0, &first, fake_entry)], &[0, fake_offset]);
    let block = Block::new(bytes, BlockOrigin::detached());
    let detected = block.map_or(true, |block| scan_status(block).is_err());
    assert!(detected, "a restart inside an entry went unnoticed");
}

/// The builder places a restart at most `BLOCK_RESTART_INTERVAL_MAX` entries apart; a block
/// with more between two would make `prev` quadratic.
#[test]
fn too_many_entries_between_restarts_is_corruption() {
    let mut builder = BlockBuilder::new(usize::MAX);
    for number in 0..=BLOCK_RESTART_INTERVAL_MAX as u32 {
        builder.add(&trailer_key(&number.to_be_bytes()), b"v");
    }
    let block = Block::new(builder.finish(), BlockOrigin::detached()).unwrap();
    assert!(scan_status(block).is_err());
    let mut builder = BlockBuilder::new(BLOCK_RESTART_INTERVAL_MAX);
    for number in 0..=BLOCK_RESTART_INTERVAL_MAX as u32 {
        builder.add(&trailer_key(&number.to_be_bytes()), b"v");
    }
    let block = Block::new(builder.finish(), BlockOrigin::detached()).unwrap();
    assert_eq!(scan_status(block).unwrap(), BLOCK_RESTART_INTERVAL_MAX + 1);
}

/// A key longer than any the builder takes is corruption when read, not a failure of the
/// compaction that later tries to write it again.
#[test]
fn a_key_over_the_limit_is_corruption() {
    for (length, accepted) in [
        (crate::key::KEY_BYTES_MAX, true),
        (crate::key::KEY_BYTES_MAX + 1, false),
    ] {
        let mut builder = BlockBuilder::new(16);
        builder.add(&trailer_key(&vec![b'k'; length]), b"v");
        let block = Block::new(builder.finish(), BlockOrigin::detached()).unwrap();
        assert_eq!(
            scan_status(block).is_ok(),
            accepted,
            "key of {length} bytes"
        );
    }
}
