//! Regression tests for bugs found by the reliability harness (crash.rs, corruption.rs,
//! the fuzzers and the kill -9 loop). Each test is named after the bug and reproduces it
//! deterministically on the fault-injecting file system where that is possible.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::fs::fault::{FaultFs, FaultKind, FaultPlan};
use cairn::testing::version::{AddedFile, VersionEdit, VersionSet};
use cairn::{Compression, Db, Error, FileSystem, LevelOptions, Options, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::scan;

fn options(fs: &FaultFs) -> Options {
    common::small_lsm_options(Arc::new(fs.clone()))
}

fn key(index: u32) -> Vec<u8> {
    common::key(index.into(), 5)
}

/// Bug: recovery replays the newest WAL (whose tail was never synced), then creates its own
/// new WAL and syncs the directory before switching CURRENT. A power loss in that window
/// leaves a torn WAL followed by an empty one, and the next open refused it with "damaged
/// record at the end of a WAL that is not the newest". Fix: `db::recover_wals` accepts a
/// torn tail in any WAL that no WAL holding records follows.
#[test]
fn crash_during_recovery_leaves_a_torn_wal_before_an_empty_one() {
    let fs = FaultFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    db.put_with(&WriteOptions::with_sync(true), b"synced", b"1")
        .unwrap();
    for index in 0..10 {
        db.put(&key(index), &[b'v'; 50]).unwrap();
    }
    drop(db);
    // Reopen and crash at CURRENT's rename: the new WAL and MANIFEST exist durably, CURRENT
    // still names the old MANIFEST, and the old WAL's unsynced tail may be torn.
    fs.set_plan(FaultPlan::Matching {
        operation: "rename",
        path_contains: "CURRENT.tmp",
        skip: 0,
        kind: FaultKind::Eio,
        crash: true,
    });
    assert!(Db::open("/db", options(&fs)).is_err());
    for seed in 0..40 {
        let image = fs.crash_image(seed);
        let db = Db::open("/db", options(&image))
            .unwrap_or_else(|error| panic!("seed {seed}: open after a crash in recovery: {error}"));
        let state = scan(&db);
        assert_eq!(
            state.get(b"synced".as_slice()).map(Vec::as_slice),
            Some(&b"1"[..])
        );
        // A prefix of the unsynced puts.
        let present = (0..10)
            .take_while(|&index| state.contains_key(&key(index)))
            .count();
        assert_eq!(state.len(), 1 + present, "seed {seed}: a hole");
    }
}

fn added(number: u64, low: &[u8], high: &[u8]) -> AddedFile {
    AddedFile {
        number,
        size_bytes: 100,
        smallest: cairn::testing::key::internal_key(low, 2, cairn::testing::key::ValueKind::Put),
        largest: cairn::testing::key::internal_key(high, 1, cairn::testing::key::ValueKind::Put),
        smallest_sequence: 1,
        largest_sequence: 2,
    }
}

/// Bug: after a MANIFEST append or sync failed, later edits were still appended to the same
/// MANIFEST — behind a partial record (mid-file corruption at the next open) or behind an
/// edit that was never installed (a conflicting edit: "edit deletes file N, not in level L"),
/// so the database could not be opened again. Fix: `VersionSet::log_and_apply` poisons the
/// MANIFEST on the first failure and refuses every later edit.
#[test]
fn failed_manifest_sync_stops_all_later_manifest_writes() {
    for kind in [FaultKind::Eio, FaultKind::Enospc] {
        for operation in ["append", "sync"] {
            let fs = FaultFs::new();
            let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
            let directory = Path::new("/db");
            let mut set = VersionSet::new(directory, Arc::clone(&shared), 4, 1 << 20);
            set.write_snapshot().unwrap();
            let first = set.new_file_number();
            set.log_and_apply(VersionEdit {
                added_files: vec![(0, added(first, b"a", b"c"))],
                ..VersionEdit::default()
            })
            .unwrap();
            fs.set_plan(FaultPlan::Matching {
                operation,
                path_contains: "MANIFEST-",
                skip: 0,
                kind,
                crash: false,
            });
            let second = set.new_file_number();
            assert!(set
                .log_and_apply(VersionEdit {
                    added_files: vec![(1, added(second, b"a", b"c"))],
                    deleted_files: vec![(0, first)],
                    ..VersionEdit::default()
                })
                .is_err());
            // Nothing installed, and nothing more may be logged.
            assert_eq!(set.current().files(0).len(), 1);
            let third = set.new_file_number();
            let later = set.log_and_apply(VersionEdit {
                added_files: vec![(1, added(third, b"a", b"c"))],
                deleted_files: vec![(0, first)],
                ..VersionEdit::default()
            });
            assert!(
                later.is_err(),
                "{kind:?} {operation}: logged after a failure"
            );
            // The MANIFEST still opens: with or without the failed edit.
            fs.heal();
            let mut recovered = VersionSet::new(directory, shared, 4, 1 << 20);
            recovered
                .recover()
                .unwrap_or_else(|error| panic!("{kind:?} {operation}: {error}"));
        }
    }
}

/// Bug: when the MANIFEST rollover (`write_snapshot` after an edit) failed, the edit stayed
/// installed in the `VersionSet` while `log_and_apply` returned an error, so the database's
/// super version (not updated) and the version set disagreed; a compaction planned on the
/// former then logged an edit the latter rejected (`Error::Internal`: "bad version edit").
/// Fix: `VersionSet::log_and_apply` rolls its in-memory state back and poisons the MANIFEST.
#[test]
fn failed_manifest_rollover_installs_nothing() {
    let fs = FaultFs::new();
    let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let directory = Path::new("/db");
    let mut set = VersionSet::new(directory, Arc::clone(&shared), 4, 1024);
    set.write_snapshot().unwrap();
    fs.set_plan(FaultPlan::Matching {
        operation: "rename",
        path_contains: "CURRENT.tmp",
        skip: 0,
        kind: FaultKind::Eio,
        crash: false,
    });
    let mut installed = 0;
    let mut failed = false;
    for round in 0..100u64 {
        let number = set.new_file_number();
        let key = format!("{round:04}");
        let before = set.current().files(0).len();
        let result = set.log_and_apply(VersionEdit {
            added_files: vec![(0, added(number, key.as_bytes(), key.as_bytes()))],
            ..VersionEdit::default()
        });
        match result {
            Ok(_) => installed += 1,
            Err(error) => {
                assert!(error.is_io(), "{error}");
                assert_eq!(
                    set.current().files(0).len(),
                    before,
                    "failed edit installed"
                );
                failed = true;
                break;
            }
        }
    }
    assert!(failed && installed > 0, "the rollover never ran");
    fs.heal();
    let mut recovered = VersionSet::new(directory, shared, 4, 1024);
    recovered.recover().unwrap();
    // The failed edit was durable in the old MANIFEST before the rollover started.
    assert!(recovered.current().files(0).len() >= installed);
}

/// Bug: when a flush's MANIFEST edit failed to sync, its table was dropped from the
/// pending-outputs set and swept by the next obsolete-file deletion (of a compaction still
/// running), although the edit could be in the MANIFEST: the next open then listed a table
/// that no longer existed ("no such file"). Fix: `DbInner::apply_and_install` keeps the new
/// files of a failed edit pending. (Racy by nature: this test sweeps the failure across
/// every MANIFEST sync of a busy workload.)
#[test]
fn failed_manifest_sync_never_deletes_the_edits_tables() {
    for skip in 0..25 {
        let fs = FaultFs::new();
        let db = Db::open("/db", options(&fs)).unwrap();
        fs.set_plan(FaultPlan::Matching {
            operation: "sync",
            path_contains: "MANIFEST-",
            skip,
            kind: FaultKind::Eio,
            crash: false,
        });
        let mut acked = BTreeMap::new();
        for index in 0..600u32 {
            let value = format!("{index}-{}", "x".repeat(40)).into_bytes();
            match db.put(&key(index % 150), &value) {
                Ok(()) => {
                    acked.insert(key(index % 150), value);
                }
                Err(Error::WritesStopped { .. }) => break,
                Err(error) => panic!("skip {skip}: {error}"),
            }
        }
        drop(db);
        fs.heal();
        let db = Db::open("/db", options(&fs))
            .unwrap_or_else(|error| panic!("skip {skip}: reopen: {error}"));
        let state: BTreeMap<_, _> = db
            .iter()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|error| panic!("skip {skip}: scan: {error}"));
        assert_eq!(state, acked, "skip {skip}");
    }
}

/// Flips one bit in the payload of the last record of `/db`'s MANIFEST (its checksum left
/// as it was); returns the MANIFEST's path and the record's offset.
fn damage_last_manifest_record(fs: &cairn::MemFs) -> (std::path::PathBuf, u64) {
    let manifest = fs
        .list(Path::new("/db"))
        .unwrap()
        .into_iter()
        .find(|name| name.starts_with("MANIFEST-"))
        .unwrap();
    let manifest = Path::new("/db").join(manifest);
    let pristine = fs.file_contents(&manifest).unwrap();
    let contents = cairn::testing::wal::parse_log(pristine.clone(), &manifest).unwrap();
    let (last, _) = contents.records().last().unwrap();
    let mut damaged = pristine;
    damaged[last as usize + 12] ^= 0x04;
    fs.set_file_contents(&manifest, damaged);
    (manifest, last)
}

/// Two flushes (the second deletes key 3 and sets key 4 to "new"), then, if `write_after`,
/// a write to the newest WAL; closed, and the MANIFEST's last record, the second flush's
/// edit, damaged. Returns the MANIFEST's path and the record's offset.
fn damaged_flush_edit(
    fs: &cairn::MemFs,
    options: &Options,
    write_after: bool,
) -> (std::path::PathBuf, u64) {
    let db = Db::open("/db", options.clone()).unwrap();
    for index in 0..50 {
        db.put(&key(index), b"old").unwrap();
    }
    db.flush().unwrap();
    db.delete(&key(3)).unwrap();
    db.put(&key(4), b"new").unwrap();
    db.flush().unwrap(); // the MANIFEST's last record: this flush; its WAL is deleted
    if write_after {
        db.put(b"in-the-wal", b"1").unwrap();
    }
    drop(db);
    damage_last_manifest_record(fs)
}

fn mem_options(fs: &cairn::MemFs) -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(fs.clone());
    options
}

/// Bug: a bit flip in the MANIFEST's last record (a flush edit) was taken for a torn tail
/// and the edit silently dropped; the flushed WAL was already deleted, so the database opened
/// with older values and a resurrected deleted key, and no error. Found by the corruption
/// sweep. First fix: `Replay::check_continues_manifest` (db/open.rs) checks that the first
/// replayed WAL record continues the MANIFEST's last sequence and reports a gap as
/// corruption, naming the MANIFEST's damaged tail. Now (s25): the open salvages the flushed
/// table the lost edit added (`db::salvage`), so it opens with every acknowledged write and
/// the WAL record after the flush continues the salvaged table's last sequence.
#[test]
fn a_damaged_flush_edit_followed_by_wal_records_salvages_the_flushed_table() {
    let fs = cairn::MemFs::new();
    let options = mem_options(&fs);
    damaged_flush_edit(&fs, &options, true);
    let db = Db::open("/db", options).unwrap();
    assert_eq!(db.get(&key(3)).unwrap(), None, "key 3 was deleted");
    assert_eq!(db.get(&key(4)).unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.get(b"in-the-wal").unwrap().as_deref(), Some(&b"1"[..]));
}

/// A damaged flush edit whose table is gone too (no candidate to salvage) is still reported
/// at the MANIFEST's ignored tail when a WAL record shows the gap (`check_continues_manifest`).
#[test]
fn a_damaged_flush_edit_whose_table_is_gone_is_reported() {
    let fs = cairn::MemFs::new();
    let options = mem_options(&fs);
    let (manifest, last) = damaged_flush_edit(&fs, &options, true);
    fs.remove(&newest_table(&fs)).unwrap();
    assert_corruption_at(
        Db::open("/db", options),
        (manifest, last),
        "the WALs continue at sequence",
    );
}

/// `opened` failed with corruption at `(file, offset)`, its reason containing `expected`.
fn assert_corruption_at(opened: cairn::Result<Db>, at: (std::path::PathBuf, u64), expected: &str) {
    match opened {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!((file, offset), at, "{reason}");
            assert!(reason.contains(expected), "{reason}");
        }
        Ok(db) => panic!(
            "opened; key 0 reads {:?}, key 3 {:?}",
            db.get(&key(0)),
            db.get(&key(3))
        ),
        Err(error) => panic!("unexpected error {error}"),
    }
}

/// Two orphan tables that each hold only writes past the MANIFEST's last sequence: the open
/// cannot tell which one the lost edit added, and reports the damaged tail, deleting neither.
#[test]
fn a_damaged_flush_edit_with_two_salvage_candidates_is_reported() {
    let fs = cairn::MemFs::new();
    let options = mem_options(&fs);
    let (manifest, last) = damaged_flush_edit(&fs, &options, false);
    let table = newest_table(&fs);
    let copy = Path::new("/db").join("999999.sst");
    fs.set_file_contents(&copy, fs.file_contents(&table).unwrap());
    assert_corruption_at(Db::open("/db", options), (manifest, last), "999999");
    assert!(fs.file_contents(&table).is_some() && fs.file_contents(&copy).is_some());
}

/// The table file with the largest number in `/db`.
fn newest_table(fs: &cairn::MemFs) -> std::path::PathBuf {
    let name = fs
        .list(Path::new("/db"))
        .unwrap()
        .into_iter()
        .filter(|name| name.ends_with(".sst"))
        .max()
        .unwrap();
    Path::new("/db").join(name)
}

/// Bug (review): a bit flip in the MANIFEST's last record, a flush edit, with no write after
/// the flush: the newest WAL is empty, so no replayed record showed that the edit was
/// missing. The database opened silently with the values from before the flush (a deleted
/// key came back) and the obsolete-file sweep deleted the flushed table, the only copy of
/// those acknowledged writes. Fix: a writable open whose MANIFEST had an ignored tail
/// salvages the one table in the directory that no version lists and that holds only writes
/// past the MANIFEST's last sequence (`db::salvage`).
#[test]
fn a_damaged_flush_edit_with_no_later_write_salvages_the_flushed_table() {
    let fs = cairn::MemFs::new();
    let options = mem_options(&fs);
    damaged_flush_edit(&fs, &options, false);
    for round in 0..2 {
        // The second open reads the fresh MANIFEST the first one wrote.
        let db = Db::open("/db", options.clone()).unwrap();
        assert_eq!(
            db.get(&key(3)).unwrap(),
            None,
            "round {round}: key 3 was deleted"
        );
        assert_eq!(
            db.get(&key(4)).unwrap().as_deref(),
            Some(&b"new"[..]),
            "round {round}: key 4"
        );
        assert_eq!(
            db.get(&key(5)).unwrap().as_deref(),
            Some(&b"old"[..]),
            "round {round}: key 5"
        );
        db.put(b"after", &[round]).unwrap();
        drop(db);
    }
    let db = Db::open("/db", options).unwrap();
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&[1u8][..]));
}

/// Bug (found when the EIO sweep met the lock-free write path): a sync that failed inside
/// `compact_range` returned the error to the caller but did not stop writes, although the
/// directory or the MANIFEST may be in an unknown state — later writes were accepted. Fix:
/// `Db::compact_range` sets the sticky error like the background compactor does.
#[test]
fn failed_manual_compaction_is_sticky() {
    let fs = FaultFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    for index in 0..400 {
        db.put(&key(index), &[b'v'; 40]).unwrap();
    }
    db.flush().unwrap();
    // Let the background compactor go quiet, so the fault lands in compact_range itself.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(db
        .stats()
        .levels
        .iter()
        .skip(1)
        .any(|level| level.files > 0));
    // Every manual compaction logs its edit to the MANIFEST and syncs it.
    fs.set_plan(FaultPlan::Matching {
        operation: "sync",
        path_contains: "MANIFEST-",
        skip: 0,
        kind: FaultKind::Eio,
        crash: false,
    });
    let compaction = db.compact_range(None, None);
    assert!(
        compaction.is_err(),
        "the injected sync failure must reach the caller"
    );
    match db.put(b"after", b"1") {
        Err(Error::WritesStopped { .. }) => {}
        other => panic!("writes must stop after a failed sync in compaction, got {other:?}"),
    }
}

/// A fresh directory under the system temp directory for a test on the real file system.
fn temporary_directory(name: &str) -> std::path::PathBuf {
    let directory =
        std::env::temp_dir().join(format!("cairn-regressions-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// Bug: `Log::finish` trims a memory-mapped WAL's fallocated tail, but ignored `trim`'s
/// `Ok(true)` ("sync again"), and `sync_finished` skipped the fdatasync because every record
/// was already synced. After a power loss the old log could come back with its zero tail,
/// recovery read it as a torn tail and ignored the next log: acknowledged `sync: true` writes
/// in the newer log were lost. Runs the production mapped WAL (`FaultFs` over `StdFs`); the
/// flush is stalled so the old logs are still needed at the crash.
#[cfg(target_os = "linux")]
#[test]
fn trimmed_mapped_wal_is_synced_before_the_next_log_counts() {
    let directory = temporary_directory("trim");
    let path = directory.join("db");
    let fs = FaultFs::wrap(cairn::StdFs);
    // Keep every memtable unflushed: its log is what recovery must read.
    fs.set_latency("create", ".sst", std::time::Duration::from_secs(3));
    let db = Db::open(&path, {
        let mut options = Options::default();
        options.file_system = Arc::new(fs.clone());
        options.write_buffer_size_bytes = 16 << 10;
        options.max_immutable_memtables = 8;
        options.wal_memory_mapped = true;
        options
    })
    .unwrap();
    let mut acknowledged = 0u32;
    for index in 0..40 {
        if db
            .put_with(&WriteOptions::with_sync(true), &key(index), &[b'v'; 1500])
            .is_ok()
        {
            acknowledged = index + 1;
        }
    }
    assert_eq!(acknowledged, 40);
    assert!(db.stats().counter("memtable_switches") >= 2);
    fs.crash_now();
    let lost: Vec<u64> = (0..32)
        .filter(|&seed| {
            let image = fs.crash_image(seed);
            let db = Db::open(&path, options(&image)).unwrap();
            let state = scan(&db);
            (0..acknowledged).any(|index| !state.contains_key(&key(index)))
        })
        .collect();
    drop(db);
    let _ = std::fs::remove_dir_all(&directory);
    assert!(
        lost.is_empty(),
        "synced writes lost after power loss with images {lost:?}"
    );
}

/// Bug (found in review): the table that recovery writes from the WAL at open used the
/// database-wide table options, not level 0's (`level_options[0]`): Bloom bits, block size
/// and compression of level 0 were ignored for it.
#[test]
fn the_table_written_at_recovery_uses_level_0_options() {
    let directory = common::TempDir::new("recovery-level0-options");
    let options = || {
        let mut options = Options::default();
        options.bloom_bits_per_key = 10;
        options.block_size_bytes = 64 * 1024;
        options.compression = Compression::Lz4;
        let mut level0 = LevelOptions::default();
        level0.bloom_bits_per_key = Some(0);
        level0.block_size_bytes = Some(256);
        level0.compression = Some(Compression::None);
        options.level_options = vec![level0];
        options
    };
    let db = Db::open(directory.path(), options()).unwrap();
    for index in 0..200 {
        db.put(&key(index), &[b'v'; 100]).unwrap();
    }
    // A process crash: the files as the OS holds them, the WAL not flushed to a table.
    let image = common::TempDir::new("recovery-level0-options-image");
    common::copy_dir(directory.path(), image.path());
    drop(db);
    let recovered = Db::open(image.path(), options()).unwrap();
    assert_eq!(scan(&recovered).len(), 200);
    recovered.close().unwrap();
    let tables = cairn::inspect::manifest::live_tables(image.path()).unwrap();
    assert_eq!(tables.len(), 1, "{tables:?}");
    let dump = cairn::inspect::table::dump_table(&tables[0].path).unwrap();
    let blocks = dump.blocks.len();
    let compressed = dump.blocks.iter().filter(|block| block.compressed).count();
    assert!(
        dump.filter.size_bytes == 0 && blocks >= 40 && compressed == 0,
        "the recovered table ignores level 0's options (no filter, 256-byte blocks, no \
         compression): filter {} bytes, {blocks} data blocks, {compressed} compressed",
        dump.filter.size_bytes
    );
}

/// A snapshot cursor drains the Membuffer partition by partition as it moves. The snapshot it
/// was made from may be released before the cursor reaches a partition (`range_at` does not
/// keep it); an in-place update must not drop a version the cursor still has to read there.
/// Before the fix the cursor had no hold on the overwrite gate, so the updates below dropped
/// every `v1` and the scan returned nothing for those keys.
#[test]
fn a_snapshot_cursor_keeps_its_versions_after_the_snapshot_is_released() {
    let mut options = Options::in_memory();
    options.membuffer_enabled = true;
    options.write_buffer_size_bytes = 64 << 20;
    let db = Db::open("/db", options).unwrap();
    let key = |index: u32| format!("key{:08}", index.wrapping_mul(2_654_435_761) % 1_000_000);
    // The first writes are the sample that places the partitions; the rest land in them.
    for index in 0..4000 {
        db.put(key(index), "v1").unwrap();
    }
    let snapshot = db.snapshot();
    let cursor = db.range_at::<str, _>(&snapshot, ..).unwrap();
    drop(snapshot);
    for index in 0..4000 {
        db.put(key(index), "v2").unwrap();
    }
    let seen: Vec<(Vec<u8>, Vec<u8>)> = cursor.map(Result::unwrap).collect();
    let wanted: BTreeMap<Vec<u8>, Vec<u8>> = (0..4000)
        .map(|index| (key(index).into_bytes(), b"v1".to_vec()))
        .collect();
    assert_eq!(seen.len(), wanted.len(), "keys lost by the snapshot cursor");
    assert!(
        seen.iter()
            .zip(&wanted)
            .all(|(a, b)| a.0 == *b.0 && a.1 == *b.1),
        "the snapshot cursor returned a version other than its snapshot's"
    );
}

/// A read-only handle with `membuffer_enabled` has no Membuffer in its buffer (nothing is
/// written), so nothing can release a scan's hold on the overwrite gate through one. Before
/// the fix the handle still made a gate, and a scan's cursor dropped its detached hold
/// unreleased (a debug assertion; in release builds a hold that never ended).
#[test]
fn a_read_only_handle_with_the_membuffer_on_scans_without_a_gate_hold() {
    let directory = common::TempDir::new("read-only-membuffer");
    let path = directory.path().join("db");
    let mut options = Options::default();
    options.membuffer_enabled = true;
    {
        let db = Db::open(&path, options.clone()).unwrap();
        for index in 0..2000 {
            db.put(common::key(index, 4), "v").unwrap();
        }
    }
    let reader = Db::open_read_only(&path, options).unwrap();
    assert_eq!(reader.iter().unwrap().count(), 2000);
    assert_eq!(reader.prefix("key").unwrap().rev().count(), 2000);
}

/// Found by the metamorphic soak (seed 1048182790, shrunk to six operations): a reverse range
/// with an upper bound returned a key above the bound with the Membuffer on. The database
/// iterator seeks to the bound and, finding nothing at or after it, positions at the last
/// entry, trusting that nothing past the bound exists. But the memtable's cursor drains the
/// Membuffer lazily: its seek left the partitions past the bound undrained, and the
/// position-at-last drained them all, so it landed on `key097`. Fix: the draining cursor's
/// position-at-last stays below its upper bound.
#[test]
fn a_reverse_range_with_the_membuffer_on_stays_below_its_upper_bound() {
    let mut options = Options::in_memory();
    options.write_buffer_size_bytes = 64 << 10;
    options.membuffer_enabled = true;
    options.membuffer_partitions = 11;
    options.membuffer_percent = 33;
    options.membuffer_drainers = 2;
    let db = Db::open("/db", options).unwrap();
    let mut first = cairn::WriteBatch::new();
    first
        .put("key085", [4u8; 13])
        .put("key097", [5u8; 30])
        .put("", "x");
    first
        .delete("key107")
        .put("key057", [6u8; 10])
        .delete("key134");
    db.write(&WriteOptions::default(), first).unwrap();
    let mut second = cairn::WriteBatch::new();
    second.put("key084", [7u8; 36]).delete("kkk");
    db.write(&WriteOptions::default(), second).unwrap();
    db.put("key005", vec![8u8; 1662]).unwrap();
    let mut third = cairn::WriteBatch::new();
    third
        .delete("key113")
        .delete("key056")
        .put("key092", [9u8; 28]);
    third
        .put("key017", [1u8; 34])
        .put("key101", [2u8; 21])
        .delete("key101")
        .delete("key080");
    db.write(&WriteOptions::default(), third).unwrap();
    db.put("key097", [3u8; 12]).unwrap();

    let reverse: Vec<Vec<u8>> = db
        .range(..="key093")
        .unwrap()
        .rev()
        .map(|pair| pair.unwrap().0)
        .collect();
    let mut forward: Vec<Vec<u8>> = db
        .range(..="key093")
        .unwrap()
        .map(|pair| pair.unwrap().0)
        .collect();
    forward.reverse();
    assert_eq!(
        reverse, forward,
        "the reverse range is the forward one reversed"
    );
    assert!(reverse
        .iter()
        .all(|key| key.as_slice() <= b"key093".as_slice()));
}

/// Bug (review): a file in the database directory named with a number near `u64::MAX` (or a
/// MANIFEST recording one) drove the file-number counter to wrap, so new files took the
/// numbers of live ones (and a checked build panicked). Fix: names with numbers at or above
/// `FILE_NUMBER_MAX` are not cairn's files, and such numbers in a MANIFEST are corruption.
#[test]
fn a_file_named_with_the_largest_number_does_not_wrap_the_file_numbers() {
    let fs = cairn::MemFs::new();
    let options = mem_options(&fs);
    let db = Db::open("/db", options.clone()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    drop(db);
    for name in [format!("{}.log", u64::MAX), format!("{}.sst", u64::MAX - 1)] {
        fs.set_file_contents(&Path::new("/db").join(name), b"not ours".to_vec());
    }
    let db = Db::open("/db", options.clone()).unwrap();
    for index in 0..5u32 {
        db.put(&key(index), b"w").unwrap();
        db.flush().unwrap();
    }
    drop(db);
    let db = Db::open("/db", options).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.get(&key(4)).unwrap(), Some(b"w".to_vec()));
}

/// Bug (review): a bit flip in the MANIFEST's last record, a compaction's edit, was taken for
/// a torn tail: the database opened with the compaction's inputs listed (already deleted,
/// so reads failed) and deleted its outputs as obsolete, the only copy of those keys. Fix:
/// an open checks that every table the recovered version lists exists, and reports the
/// damaged tail when one was ignored.
#[test]
fn a_damaged_compaction_edit_is_reported_not_opened_with_missing_tables() {
    let fs = cairn::MemFs::new();
    let mut options = mem_options(&fs);
    // Two levels: the merge into level 1 is the last edit (no trivial moves further down).
    options.level_count = 2;
    let db = Db::open("/db", options.clone()).unwrap();
    for round in 0..3u8 {
        // Overlapping tables: the compaction merges them (no trivial move).
        for index in 0..50 {
            db.put(&key(index), &[round]).unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap(); // the MANIFEST's last record: this compaction
    drop(db);
    let (manifest, last) = damage_last_manifest_record(&fs);
    assert_corruption_at(Db::open("/db", options), (manifest, last), "missing");
}

/// Bug (review): expired values in files that compaction only moved down (time-ordered keys
/// never overlap the level below) were never read again, so their space was never reclaimed,
/// and `compact_range(None, None)` could not force it: the last level, one run, was left as
/// it was. Fix: a full-range `compact_range` rewrites the last level even when it holds one
/// run, and a level rewrite is never a move.
#[test]
fn a_full_compact_range_reclaims_expired_values_in_moved_files() {
    let fs = cairn::MemFs::new();
    let mut options = mem_options(&fs);
    options.level_count = 3;
    let db = Db::open("/db", options).unwrap();
    let soon = std::time::SystemTime::now() + std::time::Duration::from_millis(300);
    // Time-ordered keys, one table per flush: each table moves down without overlap.
    for batch in 0..4u32 {
        for index in 0..200 {
            db.put_with_expiry(&key(batch * 1000 + index), &[b'v'; 100], soon)
                .unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let bytes = |db: &Db| {
        db.stats()
            .levels
            .iter()
            .map(|level| level.bytes)
            .sum::<u64>()
    };
    assert!(bytes(&db) > 80_000, "{} bytes before expiry", bytes(&db));
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(db.get(&key(0)).unwrap(), None, "expired");
    db.compact_range(None, None).unwrap();
    assert_eq!(bytes(&db), 0, "{:?}", db.stats().levels);
}

/// Bug (review): an empty batch written with `sync` returned at once and synced nothing, so
/// LevelDB's durability barrier (plain writes, then an empty synced write) lost the plain
/// writes to a power loss although the barrier returned `Ok`. Fix: an empty synced write
/// syncs the WAL through every write acknowledged before it.
#[test]
fn an_empty_synced_batch_makes_earlier_writes_durable() {
    let fs = FaultFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    for index in 0..20 {
        db.put(&key(index), b"plain").unwrap();
    }
    db.write(
        &cairn::WriteOptions::with_sync(true),
        cairn::WriteBatch::new(),
    )
    .unwrap();
    for seed in 0..8 {
        let image = fs.crash_image(seed);
        let reopened = Db::open("/db", options(&image)).unwrap();
        for index in 0..20 {
            assert_eq!(
                reopened.get(&key(index)).unwrap().as_deref(),
                Some(&b"plain"[..]),
                "seed {seed}: key {index} lost"
            );
        }
    }
}

/// Bug (review): a synced read-modify-write that kept the value (`Update::Keep`) reported a
/// value that was not yet durable: it came from a plain write, and a power loss then took
/// it although the synced call had said it was there. Fix: with `sync` the kept version is
/// made durable before the call returns.
#[test]
fn a_synced_update_that_keeps_the_value_makes_it_durable() {
    let fs = FaultFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    db.put(b"k", b"plain").unwrap();
    let (seen, written) = db
        .update_with(&WriteOptions::with_sync(true), b"k", |_| {
            cairn::Update::Keep
        })
        .unwrap();
    assert_eq!((seen.as_deref(), written), (Some(&b"plain"[..]), None));
    for seed in 0..8 {
        let reopened = Db::open("/db", options(&fs.crash_image(seed))).unwrap();
        assert_eq!(
            reopened.get(b"k").unwrap().as_deref(),
            Some(&b"plain"[..]),
            "seed {seed}"
        );
    }
}

/// Bug (review): with the Membuffer on, updates of a hot set of keys rewrite their records in
/// place and drop the old versions, so neither the memtable nor the Membuffer grows: the
/// buffer was never full, never sealed or flushed, and its one WAL grew without bound (to a
/// full disk; recovery then replays it all into memory). Fix: a buffer whose WAL has grown
/// past twice the write-buffer size is full too.
#[test]
fn hot_key_updates_with_the_membuffer_still_seal_and_flush_the_buffer() {
    let fs = cairn::MemFs::new();
    let mut options = mem_options(&fs);
    options.membuffer_enabled = true;
    options.write_buffer_size_bytes = 8 << 20;
    let db = Db::open("/db", options).unwrap();
    // 200 hot keys (a small share of each partition's table, so no drain is wanted),
    // 100-byte values: about 36 MiB of WAL, 4.5 times the write buffer.
    for round in 0..1250u32 {
        for index in 0..200 {
            db.put(&key(index), &[(round % 251) as u8; 100]).unwrap();
        }
    }
    let stats = db.stats();
    assert!(
        stats.counter("flushes") >= 1,
        "flushes {}, dropped versions {}",
        stats.counter("flushes"),
        stats.counter("membuffer_dropped_versions")
    );
}
