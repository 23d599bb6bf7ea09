//! Unit tests of versions, runs, edits and the version set.

use super::*;
use crate::fs::{FileSystem, MemFs};
use crate::key::{internal_key, ValueKind};
use std::path::Path;

fn added(number: u64, low: &[u8], high: &[u8]) -> AddedFile {
    AddedFile {
        number,
        size_bytes: 100,
        smallest: internal_key(low, 5, ValueKind::Put),
        largest: internal_key(high, 1, ValueKind::Delete),
        smallest_sequence: 1,
        largest_sequence: 5,
    }
}

#[test]
fn edit_round_trip_and_truncation() {
    let edit = VersionEdit {
        log_number: Some(3),
        next_file_number: Some(9),
        last_sequence: Some(77),
        format_version: Some(1),
        compact_pointers: vec![(2, b"k".to_vec())],
        deleted_files: vec![(1, 4)],
        file_runs: vec![(8, 42)],
        added_files: vec![(2, added(8, b"a", b"z"))],
    };
    let encoded = edit.encode();
    assert_eq!(VersionEdit::decode(&encoded).unwrap(), edit);
    // A cut at a field boundary decodes to a shorter edit (the record checksum, not the
    // edit encoding, detects truncation); a cut inside a field is an error. Never a panic.
    for cut in 1..encoded.len() {
        assert_ne!(
            VersionEdit::decode(&encoded[..cut]).as_ref(),
            Ok(&edit),
            "cut {cut}"
        );
    }
}

/// Found in review: a last sequence read from a MANIFEST was taken whatever its value, and
/// one no key can carry made the next sequence wrap (or panic in a checked build) at open.
#[test]
fn an_edit_with_a_last_sequence_past_the_largest_is_refused() {
    for (sequence, accepted) in [
        (crate::key::SEQUENCE_MAX, true),
        (crate::key::SEQUENCE_MAX + 1, false),
        (u64::MAX, false),
    ] {
        let edit = VersionEdit {
            last_sequence: Some(sequence),
            ..VersionEdit::default()
        };
        assert_eq!(
            VersionEdit::decode(&edit.encode()).is_ok(),
            accepted,
            "{sequence}"
        );
    }
}

#[test]
fn an_edit_with_a_file_number_past_the_largest_is_refused() {
    let max = crate::filename::FILE_NUMBER_MAX;
    // (number, accepted as a file or run, accepted as a bound on numbers)
    for (number, file, bound) in [
        (max - 1, true, true),
        (max, false, true),
        (max + 1, false, false),
        (u64::MAX, false, false),
    ] {
        let files = [
            VersionEdit {
                added_files: vec![(1, added(number, b"a", b"m"))],
                ..VersionEdit::default()
            },
            VersionEdit {
                deleted_files: vec![(1, number)],
                ..VersionEdit::default()
            },
            VersionEdit {
                file_runs: vec![(number, 1)],
                ..VersionEdit::default()
            },
            VersionEdit {
                file_runs: vec![(1, number)],
                ..VersionEdit::default()
            },
        ];
        let bounds = [
            VersionEdit {
                log_number: Some(number),
                ..VersionEdit::default()
            },
            VersionEdit {
                next_file_number: Some(number),
                ..VersionEdit::default()
            },
        ];
        let cases = files.iter().map(|edit| (edit, file));
        for (edit, accepted) in cases.chain(bounds.iter().map(|edit| (edit, bound))) {
            assert_eq!(
                VersionEdit::decode(&edit.encode()).is_ok(),
                accepted,
                "{number}: {edit:?}"
            );
        }
    }
}

#[test]
fn overlapping_files_in_a_level_are_rejected() {
    let base = Version::empty(3);
    let edit = VersionEdit {
        added_files: vec![(1, added(1, b"a", b"m")), (1, added(2, b"m", b"z"))],
        ..VersionEdit::default()
    };
    assert!(apply_edit(&base, &edit).is_err());
}

#[test]
fn log_and_apply_then_recover() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let directory = Path::new("/db");
    let mut set = VersionSet::new(directory, Arc::clone(&fs), 4, 1 << 20);
    set.write_snapshot().unwrap();
    let first = set.new_file_number();
    set.log_and_apply(VersionEdit {
        added_files: vec![(0, added(first, b"a", b"c"))],
        log_number: Some(7),
        last_sequence: Some(10),
        ..VersionEdit::default()
    })
    .unwrap();
    let second = set.new_file_number();
    set.log_and_apply(VersionEdit {
        added_files: vec![(1, added(second, b"a", b"c"))],
        deleted_files: vec![(0, first)],
        ..VersionEdit::default()
    })
    .unwrap();

    let mut recovered = VersionSet::new(directory, Arc::clone(&fs), 4, 1 << 20);
    recovered.recover().unwrap();
    let version = recovered.current();
    assert!(version.files(0).is_empty());
    assert_eq!(version.files(1).len(), 1);
    assert_eq!(version.files(1)[0].number, second);
    assert_eq!(recovered.log_number, 7);
    assert_eq!(recovered.last_sequence, 10);
    assert!(recovered.new_file_number() > second);
}

#[test]
fn manifest_rolls_over_when_too_big() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let directory = Path::new("/db");
    let mut set = VersionSet::new(directory, Arc::clone(&fs), 4, 1024);
    set.write_snapshot().unwrap();
    let first_manifest = set.manifest_number();
    for round in 0..40u64 {
        add_one_file(&mut set, round);
    }
    assert_ne!(set.manifest_number(), first_manifest);
    let mut recovered = VersionSet::new(directory, fs, 4, 1024);
    recovered.recover().unwrap();
    assert_eq!(recovered.current().files(0).len(), 40);
}

/// Once the snapshot alone passes the limit, a rollover must not follow every edit: each one
/// rewrites every live file and costs three syncs. The MANIFEST rolls over when it reaches
/// twice its last snapshot (or the limit, whichever is larger).
#[test]
fn a_manifest_whose_snapshot_passes_the_limit_does_not_roll_over_on_every_edit() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let directory = Path::new("/db");
    let mut set = VersionSet::new(directory, Arc::clone(&fs), 4, 1024);
    set.write_snapshot().unwrap();
    let mut rollovers = 0;
    for round in 0..200u64 {
        let before = set.manifest_number();
        add_one_file(&mut set, round);
        rollovers += usize::from(set.manifest_number() != before);
    }
    // The snapshot passes 1024 bytes at about 15 files; from there it doubles between
    // rollovers, so 200 edits roll over a handful of times, not ~185.
    assert!((1..=12).contains(&rollovers), "{rollovers} rollovers");
    let mut recovered = VersionSet::new(directory, fs, 4, 1024);
    recovered.recover().unwrap();
    assert_eq!(recovered.current().files(0).len(), 200);
}

/// Logs an edit adding one level-0 file whose keys are `round`, four digits.
fn add_one_file(set: &mut VersionSet, round: u64) {
    let number = set.new_file_number();
    let key = format!("{round:04}");
    set.log_and_apply(VersionEdit {
        added_files: vec![(0, added(number, key.as_bytes(), key.as_bytes()))],
        ..VersionEdit::default()
    })
    .unwrap();
}

fn meta(number: u64, low: &[u8], high: &[u8]) -> Arc<FileMeta> {
    Arc::new(added(number, low, high).to_meta())
}

/// Writes an `SSTable` holding `entries` (user key, sequence, value) and returns its metadata.
fn write_table(fs: &MemFs, number: u64, entries: &[(&[u8], u64, &[u8])]) -> Arc<FileMeta> {
    use crate::sstable::{TableBuilder, TableOptions};
    let path = crate::filename::table_path(Path::new("/db"), number);
    let file = fs.create(&path).unwrap();
    let mut builder = TableBuilder::new(file, path, TableOptions::default());
    let keys: Vec<Vec<u8>> = entries
        .iter()
        .map(|(key, sequence, _)| internal_key(key, *sequence, ValueKind::Put))
        .collect();
    for (key, (_, _, value)) in keys.iter().zip(entries) {
        builder.add(key, value).unwrap();
    }
    let (_, size_bytes) = builder.finish_with_size().unwrap();
    let sequences = entries.iter().map(|(_, sequence, _)| *sequence);
    Arc::new(FileMeta::new(
        number,
        size_bytes,
        keys[0].clone(),
        keys[keys.len() - 1].clone(),
        sequences.clone().min().unwrap(),
        sequences.max().unwrap(),
    ))
}

/// Every entry of `iterator`, forward, as (user key, sequence).
fn user_keys_and_sequences(
    iterator: &mut dyn crate::iter::InternalIterator,
) -> Vec<(Vec<u8>, u64)> {
    crate::iter::test_support::collect_forward(iterator)
        .unwrap()
        .into_iter()
        .map(|(key, _)| {
            let parsed = crate::key::parse_internal_key(&key).unwrap();
            (parsed.user_key.to_vec(), parsed.sequence)
        })
        .collect()
}

#[test]
fn two_runs_in_one_level_are_read_newest_run_first_and_merged() {
    use crate::iter::{InternalIterator, MergingIterator};
    use crate::table_cache::{LevelIterator, ScanSource, TableCache};
    let fs = Arc::new(MemFs::new());
    // Level 1, run 0 (newer): b@20, d@21 | x@22. Run 1 (older): a@1, b@2 | c@3, d@4.
    let newer = vec![
        write_table(&fs, 10, &[(b"b", 20, b"b-new"), (b"d", 21, b"d-new")]),
        write_table(&fs, 11, &[(b"x", 22, b"x-new")]),
    ];
    let older = vec![
        write_table(&fs, 5, &[(b"a", 1, b"a-old"), (b"b", 2, b"b-old")]),
        write_table(&fs, 6, &[(b"c", 3, b"c-old"), (b"d", 4, b"d-old")]),
    ];
    let version = Version::from_runs(vec![vec![], vec![newer, older], vec![]]);
    version.check_invariants().unwrap();
    assert_eq!(version.runs(1).len(), 2);
    assert_eq!(
        version.level_bytes(1),
        version.files(1).iter().map(|f| f.size_bytes).sum()
    );

    // Lookup: candidates come newest run first, and the first hit is the newer value.
    let tables = Arc::new(TableCache::new(fs.clone(), "/db".into(), None, true));
    let candidates: Vec<u64> = version.find_files(1, b"b").map(|f| f.number).collect();
    assert_eq!(candidates, vec![10, 5]);
    let lookup = internal_key(b"b", 100, ValueKind::SEEK);
    let first_hit = version
        .find_files(1, b"b")
        .find_map(|file| tables.table(file).unwrap().get(&lookup).unwrap());
    assert_eq!(
        first_hit.map(|(sequence, _, value)| (sequence, value)),
        Some((20, b"b-new".to_vec()))
    );
    // File 10's range (b..d) covers c although it holds no c: both runs are candidates.
    let candidates: Vec<u64> = version.find_files(1, b"c").map(|f| f.number).collect();
    assert_eq!(candidates, vec![10, 6]);
    let only_old: Vec<u64> = version.find_files(1, b"a").map(|f| f.number).collect();
    assert_eq!(only_old, vec![5]);
    assert!(!version.is_base_level_for_key(0, b"c"));
    assert!(version.is_base_level_for_key(0, b"q"));

    // Iteration: one level iterator per run, merged, yields every entry in key order.
    let runs = version.overlapping_runs(1, Some(b"b"), Some(b"d"));
    assert_eq!(runs.len(), 2);
    let children: Vec<Box<dyn InternalIterator>> = version
        .overlapping_runs(1, None, None)
        .into_iter()
        .map(|files| {
            Box::new(LevelIterator::new(files, Arc::clone(&tables), false))
                as Box<dyn InternalIterator>
        })
        .collect();
    let mut merged = MergingIterator::new(children);
    let seen = user_keys_and_sequences(&mut merged);
    let expected: Vec<(Vec<u8>, u64)> = [
        (&b"a"[..], 1),
        (b"b", 20),
        (b"b", 2),
        (b"c", 3),
        (b"d", 21),
        (b"d", 4),
        (b"x", 22),
    ]
    .iter()
    .map(|(key, sequence)| (key.to_vec(), *sequence))
    .collect();
    assert_eq!(seen, expected);

    // The reference-count-free ranges name the same files, and lazy level iterators over
    // the shared version yield the same stream.
    let ranges = version.overlapping_run_ranges(1, Some(b"b"), Some(b"d"));
    let numbers = |files: &[Arc<FileMeta>]| files.iter().map(|f| f.number).collect::<Vec<_>>();
    assert_eq!(
        ranges
            .iter()
            .map(|range| numbers(&version.files(1)[range.clone()]))
            .collect::<Vec<_>>(),
        runs.iter().map(|files| numbers(files)).collect::<Vec<_>>()
    );
    assert!(version
        .overlapping_run_ranges(1, Some(b"y"), None)
        .is_empty());
    let shared = Arc::new(version);
    let source = ScanSource::new(Arc::clone(&shared), Arc::clone(&tables));
    let children: Vec<Box<dyn InternalIterator>> = shared
        .overlapping_run_ranges(1, None, None)
        .into_iter()
        .map(|range| {
            Box::new(LevelIterator::over_version(
                Arc::clone(&source),
                1,
                range,
                false,
            )) as Box<dyn InternalIterator>
        })
        .collect();
    let mut merged = MergingIterator::new(children);
    let lazy = user_keys_and_sequences(&mut merged);
    assert_eq!(lazy, expected);
}

#[test]
fn an_overlapping_or_unsorted_run_fails_the_invariant_check() {
    let overlapping = Version::from_runs(vec![
        vec![],
        vec![vec![meta(1, b"a", b"m"), meta(2, b"k", b"z")]],
    ]);
    let error = overlapping.check_invariants().unwrap_err();
    assert!(error.contains("overlap"), "{error}");
    let unsorted = Version::from_runs(vec![
        vec![],
        vec![vec![meta(1, b"n", b"z"), meta(2, b"a", b"c")]],
    ]);
    assert!(unsorted.check_invariants().is_err());
    // Two runs may overlap each other; a level-0 run may not hold two files.
    let two_runs = Version::from_runs(vec![
        vec![vec![meta(9, b"a", b"z")], vec![meta(8, b"a", b"z")]],
        vec![vec![meta(1, b"a", b"m")], vec![meta(2, b"k", b"z")]],
    ]);
    two_runs.check_invariants().unwrap();
    let fat_level0 = Version::from_runs(vec![vec![vec![meta(1, b"a", b"b"), meta(2, b"c", b"d")]]]);
    assert!(fat_level0.check_invariants().is_err());
    let duplicate = Version::from_runs(vec![
        vec![vec![meta(3, b"a", b"b")]],
        vec![vec![meta(3, b"a", b"b")]],
    ]);
    assert!(duplicate.check_invariants().unwrap_err().contains("twice"));
}

#[test]
fn edits_place_level0_files_in_runs_of_their_own_and_deeper_files_in_the_newest_run() {
    let edit = VersionEdit {
        added_files: vec![
            (0, added(3, b"a", b"z")),
            (0, added(4, b"c", b"d")),
            (1, added(2, b"m", b"z")),
            (1, added(1, b"a", b"c")),
        ],
        ..VersionEdit::default()
    };
    let version = apply_edit(&Version::empty(3), &edit).unwrap();
    let level0: Vec<Vec<u64>> = version
        .runs(0)
        .map(|run| run.files().iter().map(|f| f.number).collect())
        .collect();
    assert_eq!(level0, vec![vec![4], vec![3]]);
    let level1: Vec<Vec<u64>> = version
        .runs(1)
        .map(|run| run.files().iter().map(|f| f.number).collect())
        .collect();
    assert_eq!(level1, vec![vec![1, 2]]);
    // Placement into an existing multi-run level goes to the newest run; deleting the last
    // file of a run removes the run.
    let base = Version::from_runs(vec![
        vec![],
        vec![vec![meta(7, b"a", b"b")], vec![meta(6, b"a", b"z")]],
    ]);
    let edit = VersionEdit {
        added_files: vec![(1, added(8, b"c", b"d"))],
        deleted_files: vec![(1, 6)],
        ..VersionEdit::default()
    };
    let next = apply_edit(&base, &edit).unwrap();
    assert_eq!(next.runs(1).len(), 1);
    assert_eq!(
        next.files(1).iter().map(|f| f.number).collect::<Vec<_>>(),
        vec![7, 8]
    );
}

#[test]
fn recorded_run_ids_place_files_and_order_runs() {
    let ids = |version: &Version, level: usize| -> Vec<(u64, Vec<u64>)> {
        let runs = version.level(level);
        runs.runs()
            .enumerate()
            .map(|(index, run)| {
                let files = run.files().iter().map(|file| file.number).collect();
                (runs.run_id(index).unwrap(), files)
            })
            .collect()
    };
    // Two runs at level 1 by id, the larger the newer, whatever the edit order.
    let edit = VersionEdit {
        added_files: vec![
            (1, added(3, b"a", b"c")),
            (1, added(4, b"a", b"z")),
            (1, added(5, b"d", b"f")),
        ],
        file_runs: vec![(3, 10), (4, 20), (5, 10)],
        ..VersionEdit::default()
    };
    let version = apply_edit(&Version::empty(3), &edit).unwrap();
    assert_eq!(ids(&version, 1), vec![(20, vec![4]), (10, vec![3, 5])]);
    // A file without a run id (format 1 or 2) joins the newest run.
    let legacy = VersionEdit {
        added_files: vec![(1, added(6, b"zz", b"zz"))],
        ..VersionEdit::default()
    };
    let next = apply_edit(&version, &legacy).unwrap();
    assert_eq!(ids(&next, 1), vec![(20, vec![4, 6]), (10, vec![3, 5])]);
    // ... and an empty level gets a run with id 0; level-0 runs take their file's number.
    let legacy = VersionEdit {
        added_files: vec![(2, added(7, b"a", b"b")), (0, added(9, b"a", b"b"))],
        ..VersionEdit::default()
    };
    let next = apply_edit(&version, &legacy).unwrap();
    assert_eq!(ids(&next, 2), vec![(0, vec![7])]);
    assert_eq!(ids(&next, 0), vec![(9, vec![9])]);
    // Files of two runs overlapping inside one run id are refused (invariant 2).
    let overlapping = VersionEdit {
        added_files: vec![(1, added(8, b"b", b"b"))],
        file_runs: vec![(8, 10)],
        ..VersionEdit::default()
    };
    assert!(apply_edit(&version, &overlapping).is_err());
}

#[test]
fn a_snapshot_records_run_ids_and_recovery_restores_them() {
    let fs = MemFs::new();
    let directory = Path::new("/runs");
    fs.create_dir_all(directory).unwrap();
    let mut set = VersionSet::new(directory, Arc::new(fs.clone()), 3, 1 << 20);
    set.write_snapshot().unwrap();
    set.log_and_apply(VersionEdit {
        added_files: vec![(1, added(3, b"a", b"c")), (1, added(4, b"a", b"z"))],
        file_runs: vec![(3, 10), (4, 20)],
        ..VersionEdit::default()
    })
    .unwrap();
    // A fresh MANIFEST holds only a snapshot: the run ids must be in it.
    set.write_snapshot().unwrap();
    let mut recovered = VersionSet::new(directory, Arc::new(fs), 3, 1 << 20);
    recovered.recover().unwrap();
    let level = recovered.current();
    let level = level.level(1);
    assert_eq!((level.run_id(0), level.run_id(1)), (Some(20), Some(10)));
    assert_eq!(recovered.manifest_format_version, MANIFEST_FORMAT_VERSION);
}
