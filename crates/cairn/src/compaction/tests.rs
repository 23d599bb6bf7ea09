//! Unit tests of the leveled picker, the version filter and the output writer.

use super::filter::Decision;
use super::*;
use crate::key::{internal_key, ValueKind};
use crate::version::{apply_edit, AddedFile, VersionEdit};

fn shape() -> ShapeOptions {
    ShapeOptions::leveled(4, 1000, 10)
}

fn file(number: u64, low: &str, high: &str, size: u64) -> AddedFile {
    AddedFile {
        number,
        size_bytes: size,
        smallest: internal_key(low.as_bytes(), 9, ValueKind::Put),
        largest: internal_key(high.as_bytes(), 1, ValueKind::Put),
        smallest_sequence: 1,
        largest_sequence: 9,
    }
}

fn version(files: Vec<(usize, AddedFile)>) -> Version {
    let edit = VersionEdit {
        added_files: files,
        ..VersionEdit::default()
    };
    apply_edit(&Version::empty(4), &edit).unwrap()
}

#[test]
fn nothing_to_do_in_a_small_tree() {
    let version = version(vec![
        (0, file(1, "a", "b", 10)),
        (1, file(2, "a", "z", 500)),
    ]);
    assert!(matches!(choose(&version, &shape(), &[]), Choice::Nothing));
}

#[test]
fn level0_trigger_takes_all_level0_files_and_overlaps() {
    let version = version(vec![
        (0, file(10, "c", "d", 10)),
        (0, file(11, "a", "b", 10)),
        (0, file(12, "e", "f", 10)),
        (0, file(13, "c", "c", 10)),
        (1, file(2, "a", "b", 500)),
        (1, file(3, "g", "z", 100)),
    ]);
    let Choice::Compact(plan) = choose(&version, &shape(), &[]) else {
        panic!("expected a compaction");
    };
    assert_eq!(plan.level, 0);
    assert_eq!(plan.inputs.len(), 4);
    let numbers: Vec<u64> = plan.output_level_inputs.iter().map(|f| f.number).collect();
    assert_eq!(numbers, vec![2]);
}

#[test]
fn oversized_level_round_robins_from_the_pointer() {
    let version = version(vec![
        (1, file(2, "a", "b", 600)),
        (1, file(3, "c", "d", 600)),
        (2, file(4, "c", "c", 600)),
    ]);
    let Choice::Compact(plan) = choose(&version, &shape(), &[]) else {
        panic!("expected a compaction");
    };
    assert_eq!(plan.inputs[0].number, 2);
    assert!(plan.is_trivial_move());
    let pointers = vec![None, Some(internal_key(b"b", 1, ValueKind::Put))];
    let Choice::Compact(plan) = choose(&version, &shape(), &pointers) else {
        panic!("expected a compaction");
    };
    assert_eq!(plan.inputs[0].number, 3);
    assert_eq!(plan.output_level_inputs[0].number, 4);
}

#[test]
fn filter_keeps_one_version_per_snapshot_stripe() {
    let empty = Version::empty(3);
    let snapshots = [5u64, 10];
    let mut filter = VersionFilter::new(&snapshots, Some((&empty, 2)));
    // key "a": versions 12, 11 (stripe 2), 9, 7 (stripe 1), 4 (stripe 0, delete)
    let kept: Vec<bool> = [
        (12, ValueKind::Put),
        (11, ValueKind::Put),
        (9, ValueKind::Put),
        (7, ValueKind::Put),
        (4, ValueKind::Delete),
        (2, ValueKind::Put),
    ]
    .iter()
    .map(|&(sequence, kind)| filter.keep(b"a", sequence, kind))
    .collect();
    assert_eq!(kept, vec![true, false, true, false, false, false]);
    // A tombstone above the oldest snapshot must stay.
    assert!(filter.keep(b"b", 7, ValueKind::Delete));
    // Without snapshots only the newest survives, and a newest tombstone vanishes.
    let mut filter = VersionFilter::new(&[], Some((&empty, 2)));
    assert!(!filter.keep(b"c", 3, ValueKind::Delete));
    assert!(!filter.keep(b"c", 2, ValueKind::Put));
    // A flush (no base-level version) keeps tombstones.
    let mut filter = VersionFilter::new(&[], None);
    assert!(filter.keep(b"c", 3, ValueKind::Delete));
}

#[test]
fn a_tombstone_stays_while_another_run_of_the_output_level_may_hold_its_key() {
    // Level 2 (the output level) holds an older run with "k"; the job's inputs are files 5
    // and 6 (not file 7). Without the output-level check (`excluding`), "k" looks base-level
    // (nothing deeper) and its tombstone would be dropped, resurrecting file 7's value.
    let runs = Version::from_runs(vec![
        vec![],
        vec![vec![Arc::new(file(5, "a", "m", 10).to_meta())]],
        vec![
            vec![Arc::new(file(6, "a", "c", 10).to_meta())],
            vec![Arc::new(file(7, "j", "z", 10).to_meta())],
        ],
    ]);
    let inputs: std::collections::HashSet<u64> = [5, 6].into_iter().collect();
    let mut filter = VersionFilter::new(&[], Some((&runs, 2))).excluding(&inputs);
    // A key no other run covers is still dropped.
    assert!(!filter.keep(b"e", 9, ValueKind::Delete));
    assert!(filter.keep(b"k", 9, ValueKind::Delete));
    // When file 7 is an input too (a level rewrite), nothing else holds "k".
    let all: std::collections::HashSet<u64> = [5, 6, 7].into_iter().collect();
    let mut filter = VersionFilter::new(&[], Some((&runs, 2))).excluding(&all);
    assert!(!filter.keep(b"k", 9, ValueKind::Delete));
    // The check leveling always made (deeper levels only) would drop it.
    let mut filter = VersionFilter::new(&[], Some((&runs, 2)));
    assert!(!filter.keep(b"k", 9, ValueKind::Delete));
}

/// Drops keys starting with "expired", upper-cases values of keys starting with "shout".
#[derive(Debug)]
struct Expiry;

impl CompactionFilter for Expiry {
    fn filter(&self, _output_level: usize, user_key: &[u8], value: &[u8]) -> FilterDecision {
        if user_key.starts_with(b"expired") {
            FilterDecision::Remove
        } else if user_key.starts_with(b"shout") {
            FilterDecision::Change(value.to_ascii_uppercase())
        } else {
            FilterDecision::Keep
        }
    }
}

#[test]
fn compaction_filter_sees_only_the_newest_put_that_no_snapshot_reads() {
    let expiry = Expiry;
    // Not the base level (a deeper file covers every key): Remove becomes a tombstone.
    let deeper = version(vec![(3, file(1, "a", "z", 10))]);
    let mut filter =
        VersionFilter::new(&[5], Some((&deeper, 2))).with_compaction_filter(Some(&expiry), 2);
    let put = ValueKind::Put;
    assert_eq!(
        filter.decide(b"expired1", 9, put, b"v"),
        Decision::Rewrite(ValueKind::Delete, Vec::new())
    );
    // Seen by snapshot 5: kept as it is, although the hook would remove it.
    assert_eq!(filter.decide(b"expired1", 4, put, b"v"), Decision::Keep);
    assert_eq!(filter.decide(b"expired2", 3, put, b"v"), Decision::Keep);
    assert_eq!(
        filter.decide(b"shout", 8, put, b"hi"),
        Decision::Rewrite(ValueKind::Put, b"HI".to_vec())
    );
    assert_eq!(filter.decide(b"shout", 7, put, b"old"), Decision::Drop);
    assert_eq!(
        filter.decide(b"tombstone", 9, ValueKind::Delete, b""),
        Decision::Keep
    );
    // At the base level with no snapshots, a removed key leaves nothing behind.
    let empty = Version::empty(4);
    let mut filter =
        VersionFilter::new(&[], Some((&empty, 2))).with_compaction_filter(Some(&expiry), 2);
    assert_eq!(filter.decide(b"expired1", 9, put, b"v"), Decision::Drop);
    assert_eq!(filter.decide(b"expired1", 8, put, b"v"), Decision::Drop);
    assert_eq!(filter.decide(b"kept", 8, put, b"v"), Decision::Keep);
}

#[test]
fn write_tables_applies_decisions_and_cuts_only_between_user_keys() {
    use crate::fs::{FileSystem, MemFs};
    use crate::iter::test_support::collect_forward;
    use crate::iter::VecIterator;
    use crate::sstable::TableOptions;
    use crate::table_cache::TableCache;
    use std::path::Path;
    let fs = Arc::new(MemFs::new());
    fs.create_dir_all(Path::new("/db")).unwrap();
    let mut entries = Vec::new();
    for index in 0..200u64 {
        let key = if index % 3 == 0 {
            format!("expired{index:04}")
        } else {
            format!("key{index:04}")
        };
        for sequence in [1000 + index, index + 1] {
            entries.push((
                internal_key(key.as_bytes(), sequence, ValueKind::Put),
                vec![b'v'; 100],
            ));
        }
    }
    let mut input = VecIterator::new(entries);
    let deeper = version(vec![(3, file(1, "a", "z", 10))]);
    let expiry = Expiry;
    let mut filter =
        VersionFilter::new(&[], Some((&deeper, 2))).with_compaction_filter(Some(&expiry), 2);
    let settings = OutputSettings {
        file_system: fs.as_ref(),
        directory: Path::new("/db"),
        table_options: TableOptions::default(),
        target_file_size_bytes: Some(4096),
    };
    let mut next = 100;
    let mut allocate = || {
        next += 1;
        next
    };
    let outputs = write_tables(&mut input, &mut filter, &settings, &mut allocate).unwrap();
    assert!(
        outputs.len() > 1,
        "expected several outputs, got {}",
        outputs.len()
    );
    let tables = TableCache::new(fs.clone(), "/db".into(), None, true);
    let mut kinds = (0, 0);
    for output in &outputs {
        let table = tables.table(&output.to_meta()).unwrap();
        for (key, value) in collect_forward(&mut table.iter()).unwrap() {
            let parsed = crate::key::parse_internal_key(&key).unwrap();
            assert!(parsed.sequence >= 1000, "an older version survived");
            if parsed.user_key.starts_with(b"expired") {
                assert_eq!((parsed.kind, value.len()), (ValueKind::Delete, 0));
                kinds.0 += 1;
            } else {
                assert_eq!(parsed.kind, ValueKind::Put);
                kinds.1 += 1;
            }
        }
    }
    assert_eq!(kinds, (67, 133));
}

#[test]
fn compaction_turns_expired_values_into_tombstones_and_drops_them_only_at_the_base() {
    use crate::expiry::encode;

    let expired = encode(1, b"v");
    let live = encode(u64::MAX, b"v");
    // A flush (no base-level test): an expired value must still hide what is below it.
    let mut filter = VersionFilter::new(&[], None);
    assert_eq!(
        filter.decide(b"k", 9, ValueKind::PutWithExpiry, &expired),
        Decision::Rewrite(ValueKind::Delete, Vec::new())
    );
    assert_eq!(
        filter.decide(b"l", 9, ValueKind::PutWithExpiry, &live),
        Decision::Keep
    );
    // Under a snapshot too: the value reads as absent at every sequence.
    let mut filter = VersionFilter::new(&[5], None);
    assert_eq!(
        filter.decide(b"k", 3, ValueKind::PutWithExpiry, &expired),
        Decision::Rewrite(ValueKind::Delete, Vec::new())
    );
    // Where no deeper level can hold the key, nothing is left behind.
    let empty = crate::version::Version::empty(4);
    let mut filter = VersionFilter::new(&[], Some((&empty, 3)));
    assert_eq!(
        filter.decide(b"k", 9, ValueKind::PutWithExpiry, &expired),
        Decision::Drop
    );
    assert_eq!(
        filter.decide(b"k", 8, ValueKind::Put, b"older"),
        Decision::Drop
    );
}

#[test]
fn the_user_filter_sees_an_expiring_value_without_its_expiry_and_change_keeps_it() {
    use crate::expiry::encode;
    let expiry = Expiry;
    let mut filter = VersionFilter::new(&[], None).with_compaction_filter(Some(&expiry), 1);
    let stored = encode(u64::MAX - 1, b"quiet");
    assert_eq!(
        filter.decide(b"shout1", 9, ValueKind::PutWithExpiry, &stored),
        Decision::Rewrite(ValueKind::PutWithExpiry, encode(u64::MAX - 1, b"QUIET"))
    );
    assert_eq!(
        filter.decide(b"shout2", 9, ValueKind::Put, b"plain"),
        Decision::Rewrite(ValueKind::Put, b"PLAIN".to_vec())
    );
}
