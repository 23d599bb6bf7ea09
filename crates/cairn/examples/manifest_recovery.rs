//! MANIFEST replay time at open: how long `VersionSet::recover` takes for a MANIFEST of many
//! edits over a database of many files.
//!
//! `cargo run --release -p cairn --features testing --example manifest_recovery -- [files] [edits] [repetitions]`
//! Writes, in memory, a MANIFEST whose first record lists `files` level-1 tables (one run,
//! disjoint key ranges) followed by `edits` edits that each replace one table by a new one of
//! the same range (a compaction's churn: one deletion, one addition), then times
//! `recover()` over it and prints milliseconds, the median of the repetitions. The defaults
//! (5,000 files, 100,000 edits: about 10 MB of edits, under the 64 MiB roll-over limit) are
//! a large but ordinary database's MANIFEST.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/tables.rs"]
mod tables;

use cairn::testing::version::{VersionEdit, VersionSet, MANIFEST_FORMAT_VERSION};
use cairn::testing::wal::LogWriter;
use cairn::{FileSystem, MemFs};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tables::{table, RUN_ID};

/// Writes the MANIFEST and CURRENT into `fs` under `directory`.
fn write_manifest(fs: &MemFs, directory: &Path, files: u64, edits: u64) {
    fs.create_dir_all(directory).unwrap();
    let path = directory.join("MANIFEST-000001");
    let mut writer = LogWriter::new(fs.create(&path).unwrap(), path);
    let mut snapshot = VersionEdit {
        format_version: Some(MANIFEST_FORMAT_VERSION),
        log_number: Some(0),
        ..VersionEdit::default()
    };
    for slot in 0..files {
        snapshot.added_files.push((1, table(slot, 10 + slot)));
        snapshot.file_runs.push((10 + slot, RUN_ID));
    }
    writer.add_record(&snapshot.encode()).unwrap();
    let mut numbers: Vec<u64> = (0..files).map(|slot| 10 + slot).collect();
    for edit_index in 0..edits {
        let next = 10 + files + edit_index;
        let slot = (edit_index * 7919) % files;
        let mut edit = VersionEdit::default();
        let index = slot as usize;
        edit.deleted_files.push((1, numbers[index]));
        edit.added_files.push((1, table(slot, next)));
        edit.file_runs.push((next, RUN_ID));
        edit.next_file_number = Some(next + 1);
        numbers[index] = next;
        writer.add_record(&edit.encode()).unwrap();
    }
    writer.sync().unwrap();
    let mut current = fs.create(&directory.join("CURRENT")).unwrap();
    current.append(b"MANIFEST-000001\n").unwrap();
    current.sync().unwrap();
}

fn main() {
    let arguments: Vec<u64> = std::env::args()
        .skip(1)
        .map(|text| text.parse().expect("arguments are numbers"))
        .collect();
    let files = arguments.first().copied().unwrap_or(5_000).max(1);
    let edits = arguments.get(1).copied().unwrap_or(100_000);
    let repetitions = arguments.get(2).copied().unwrap_or(3).max(1);
    let fs = MemFs::new();
    let directory = Path::new("/db");
    write_manifest(&fs, directory, files, edits);
    let manifest_bytes = fs
        .file_contents(&directory.join("MANIFEST-000001"))
        .unwrap()
        .len();
    let mut times = Vec::new();
    for _ in 0..repetitions {
        let mut versions = VersionSet::new(directory, Arc::new(fs.clone()), 7, 64 << 20);
        let start = Instant::now();
        let replayed = versions.recover().unwrap();
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(replayed as u64, edits + 1);
        assert_eq!(versions.current().files(1).len() as u64, files);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "files {files}, edits {edits}, MANIFEST {manifest_bytes} bytes: recover {:.1} ms (median of {repetitions}; all {times:.1?})",
        times[times.len() / 2]
    );
}
