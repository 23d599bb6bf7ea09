//! Unit tests of the leveled picker, the version filter and the output writer.

use super::*;
use crate::key::{internal_key, ValueKind};
use crate::version::{apply_edit, AddedFile, VersionEdit};

fn shape() -> ShapeOptions {
    ShapeOptions {
        level0_compaction_trigger: 4,
        level1_size_bytes_max: 1000,
        level_size_ratio: 10,
    }
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
