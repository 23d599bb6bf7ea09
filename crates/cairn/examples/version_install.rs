//! The cost of installing one edit (`VersionSet::log_and_apply`) over a database of many
//! files: what every flush and compaction pays under the version set.
//!
//! `cargo run --release -p cairn --features testing --example version_install -- [files] [edits] [repetitions]`
//! Logs, into an in-memory file system, a version of `files` level-1 tables (one run,
//! disjoint key ranges), then times `edits` edits that each replace one table by a new one of
//! the same range (a compaction's churn: one deletion, one addition, in the largest level) and
//! prints microseconds per edit, the median of the repetitions. An edit that touches only
//! level 0 (a flush) costs less: the deep levels are shared, not copied.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/tables.rs"]
mod tables;

use cairn::testing::version::{VersionEdit, VersionSet, MANIFEST_FORMAT_VERSION};
use cairn::{FileSystem, MemFs};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tables::{table, RUN_ID};

/// A version set over `files` tables, and their numbers by slot.
fn populated(files: u64) -> (VersionSet, Vec<u64>) {
    let fs = MemFs::new();
    let directory = Path::new("/db");
    fs.create_dir_all(directory).unwrap();
    // No MANIFEST roll-over during the run: it would time a snapshot, not an install.
    let mut versions = VersionSet::new(directory, Arc::new(fs), 7, 1 << 40);
    versions.write_snapshot().unwrap();
    let mut snapshot = VersionEdit {
        format_version: Some(MANIFEST_FORMAT_VERSION),
        ..VersionEdit::default()
    };
    for slot in 0..files {
        snapshot.added_files.push((1, table(slot, 10 + slot)));
        snapshot.file_runs.push((10 + slot, RUN_ID));
    }
    versions.reserve_file_numbers_through(10 + files);
    versions.log_and_apply(snapshot).unwrap();
    (versions, (0..files).map(|slot| 10 + slot).collect())
}

/// Microseconds per `log_and_apply` over `edits` replacements.
fn time_edits(versions: &mut VersionSet, numbers: &mut [u64], edits: u64) -> f64 {
    let files = numbers.len() as u64;
    let start = Instant::now();
    for edit_index in 0..edits {
        let next = versions.new_file_number();
        let slot = (edit_index * 7919) % files;
        let index = slot as usize;
        let mut edit = VersionEdit::default();
        edit.deleted_files.push((1, numbers[index]));
        edit.added_files.push((1, table(slot, next)));
        edit.file_runs.push((next, RUN_ID));
        numbers[index] = next;
        versions.log_and_apply(edit).unwrap();
    }
    start.elapsed().as_secs_f64() * 1e6 / edits as f64
}

fn main() {
    let arguments: Vec<u64> = std::env::args()
        .skip(1)
        .map(|text| text.parse().expect("arguments are numbers"))
        .collect();
    let files = arguments.first().copied().unwrap_or(10_000).max(1);
    let edits = arguments.get(1).copied().unwrap_or(1_000).max(1);
    let repetitions = arguments.get(2).copied().unwrap_or(3).max(1);
    let mut times = Vec::new();
    for _ in 0..repetitions {
        let (mut versions, mut numbers) = populated(files);
        times.push(time_edits(&mut versions, &mut numbers, edits));
        assert_eq!(versions.current().files(1).len() as u64, files);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "files {files}, edits {edits}: {:.1} us per install (median of {repetitions}; all {times:.1?})",
        times[times.len() / 2]
    );
}
