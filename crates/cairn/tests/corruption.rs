//! Corruption sweep: flip bits and zero blocks in every file of a small database (WAL,
//! SSTable data/index/filter/properties/footer, MANIFEST, CURRENT), then open it and read
//! everything (a full scan and a `get` per key).
//!
//! The WAL's last writes are synced one by one, so every WAL byte but those after its last
//! sync marker is known to be synced (the marker of the last sync is never written: no record
//! follows it). Rules checked for every damaged copy:
//! - never a panic, never a wrong value: if everything reads without error, the state is
//!   exactly the written one — or, for damage after the WAL's last sync marker (a torn tail
//!   or a lost unsynced tail by the rules in `wal.rs`), the written state without the last
//!   write;
//! - SSTables are checksummed end to end: any damage is reported as `Error::Corruption`
//!   naming that table and an offset near the damage (at most one 64-byte footer past it:
//!   a checksum mismatch is reported where the checksum is stored);
//! - damage in a MANIFEST record followed by a valid record, and damage to WAL bytes a sync
//!   marker says were synced, is `Error::Corruption` naming that file and an offset near the
//!   damage (mid-file corruption);
//! - damage reaching the last MANIFEST record (a torn tail: no valid record follows it, even
//!   when the damage starts in the record before) and damage in CURRENT (not checksummed)
//!   must be reported by some error or leave the state intact.
//!
//! Damage to *unsynced* WAL bytes is tested apart
//! (`damage_in_unsynced_wal_bytes_recovers_a_prefix_unless_strict`): it is a power loss's
//! hole, recovered as a prefix, or refused under `WalRecovery::Strict`.
//!
//! Scale with `CAIRN_CORRUPTION_STRIDE` (test every n-th byte of large files, default 3).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::testing::filename::{self, FileKind};
use cairn::{Db, Error, FileSystem, MemFs, Options, WalRecovery, WriteOptions};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

const DB: &str = "/db";

fn options(fs: &MemFs) -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(fs.clone());
    options.write_buffer_size_bytes = 64 * 1024;
    options.block_size_bytes = 512;
    options.target_file_size_bytes = 8 * 1024;
    options.level0_compaction_trigger = 8;
    options.block_cache_size_bytes = 0;
    options
}

fn key(index: u32) -> Vec<u8> {
    common::key(index.into(), 5)
}

/// Builds the database; returns its files and the state before and after the last write.
fn build() -> (BTreeMap<PathBuf, Vec<u8>>, State, Vec<State>) {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let mut state = State::new();
    let put = |db: &Db, state: &mut State, index: u32, round: u32| {
        let value = format!(
            "value-{index}-{round}-{}",
            "z".repeat((index % 40) as usize)
        );
        // Synced: the WAL-only writes leave a sync marker after each record but the last.
        db.put_with(
            &WriteOptions::with_sync(round == 2),
            &key(index),
            value.as_bytes(),
        )
        .unwrap();
        state.insert(key(index), value.into_bytes());
    };
    for index in 0..400 {
        put(&db, &mut state, index, 0);
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap(); // deeper-level tables
    for index in (0..400).step_by(3) {
        put(&db, &mut state, index, 1);
    }
    db.delete(&key(7)).unwrap();
    state.remove(&key(7));
    db.flush().unwrap(); // a level-0 table; the MANIFEST's last edit is this flush
                         // The state before each WAL-only put, then after the last.
    let mut wal_prefixes = Vec::new();
    for index in 0..12 {
        wal_prefixes.push(state.clone());
        put(&db, &mut state, 1000 + index, 2); // in the WAL only, synced
    }
    wal_prefixes.push(state.clone());
    drop(db);
    let mut files = BTreeMap::new();
    for name in fs.list(Path::new(DB)).unwrap() {
        let path = Path::new(DB).join(&name);
        if name != "LOCK" {
            files.insert(path.clone(), fs.file_contents(&path).unwrap());
        }
    }
    (files, state, wal_prefixes)
}

fn kind_of(path: &Path) -> FileKind {
    filename::parse_file_name(path.file_name().unwrap().to_str().unwrap()).unwrap()
}

/// Opens a copy of `files` and reads everything.
fn read_all(files: &BTreeMap<PathBuf, Vec<u8>>, keys: &[Vec<u8>]) -> Result<State, Error> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(DB)).unwrap();
    for (path, contents) in files {
        fs.set_file_contents(path, contents.clone());
    }
    let db = Db::open(DB, options(&fs))?;
    let state: State = db.iter()?.collect::<Result<_, _>>()?;
    for key in keys {
        let got = db.get(key)?;
        if got.as_ref() != state.get(key) {
            return Err(Error::Internal(format!(
                "get and scan disagree on {}",
                String::from_utf8_lossy(key)
            )));
        }
    }
    Ok(state)
}

/// Offset of the last record of a MANIFEST, or of the last sync marker of a WAL: damage
/// from there on may be taken for a torn or lost unsynced tail. None for a log with no
/// record (the next WAL, prepared ahead of the memtable switch that will use it).
fn tail_offset(path: &Path, bytes: &[u8]) -> Option<u64> {
    let contents = cairn::testing::wal::parse_log(bytes.to_vec(), path).unwrap();
    if contents.record_count() == 0 {
        return None;
    }
    let is_wal = matches!(kind_of(path), FileKind::Wal(_));
    let offset = contents
        .records()
        .filter(|(_, payload)| {
            !is_wal || payload.starts_with(&cairn::testing::wal::WAL_SYNC_MARKER_MAGIC)
        })
        .last()
        .map(|(offset, _)| offset);
    Some(offset.expect("a WAL of this sweep's synced writes holds a sync marker"))
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip { position: usize, bit: u8 },
    Zero { position: usize, length: usize },
}

impl Damage {
    fn position(&self) -> usize {
        match *self {
            Damage::Flip { position, .. } | Damage::Zero { position, .. } => position,
        }
    }

    fn length(&self) -> u64 {
        match *self {
            Damage::Flip { .. } => 1,
            Damage::Zero { length, .. } => length as u64,
        }
    }

    fn apply(&self, bytes: &mut [u8]) -> bool {
        match *self {
            Damage::Flip { position, bit } => {
                bytes[position] ^= 1 << bit;
                true
            }
            Damage::Zero { position, length } => {
                let end = (position + length).min(bytes.len());
                let changed = bytes[position..end].iter().any(|&byte| byte != 0);
                bytes[position..end].fill(0);
                changed
            }
        }
    }
}

#[test]
fn corruption_sweep_detects_damage_in_every_file_type() {
    let (files, state, wal_prefixes) = build();
    let before_last = &wal_prefixes[wal_prefixes.len() - 2];
    let mut keys: Vec<Vec<u8>> = state.keys().cloned().collect();
    keys.push(key(7));
    assert_eq!(read_all(&files, &keys).unwrap(), state);
    let stride = common::env_or::<usize>("CAIRN_CORRUPTION_STRIDE", 3).max(1);
    let mut counts: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut kinds_seen = std::collections::BTreeSet::new();
    for (path, pristine) in &files {
        let kind = kind_of(path);
        let label = match kind {
            FileKind::Wal(_) => "WAL",
            FileKind::Table(_) => "SSTable",
            FileKind::Manifest(_) => "MANIFEST",
            FileKind::Current => "CURRENT",
            _ => continue,
        };
        kinds_seen.insert(label);
        let tail_start = match kind {
            FileKind::Wal(_) | FileKind::Manifest(_) => match tail_offset(path, pristine) {
                Some(offset) => Some(offset),
                // Nothing to damage but zeros that no reader trusts.
                None if pristine.iter().all(|&byte| byte == 0) => continue,
                None => panic!("{} holds bytes but no record", path.display()),
            },
            _ => None,
        };
        let step = if pristine.len() <= 600 { 1 } else { stride };
        let mut damages = Vec::new();
        for position in (0..pristine.len()).step_by(step) {
            damages.push(Damage::Flip {
                position,
                bit: (position % 8) as u8,
            });
        }
        for position in (0..pristine.len()).step_by(61) {
            damages.push(Damage::Zero {
                position,
                length: 32,
            });
        }
        for damage in damages {
            let mut bytes = pristine.clone();
            if !damage.apply(&mut bytes) {
                continue;
            }
            let mut damaged = files.clone();
            damaged.insert(path.clone(), bytes);
            let position = damage.position() as u64;
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| read_all(&damaged, &keys)));
            let entry = counts.entry(label).or_default();
            entry.0 += 1;
            // In a MANIFEST, damage that reaches the last record leaves no valid record after
            // it, so the reader takes it for a torn tail even when it starts in the record
            // before (a zeroed block across the two): with the flush edit's table salvaged
            // (db/salvage.rs), such damage can leave the state intact.
            let in_tail = tail_start.is_some_and(|tail| match kind {
                FileKind::Manifest(_) => position + damage.length() > tail,
                _ => position >= tail,
            });
            // In a WAL, damage that starts before the last sync marker and destroys it leaves
            // the synced records that marker named covered by no marker: they read as a lost
            // unsynced tail, a prefix of the writes (RELIABILITY.md, known limits).
            let across_last_marker = matches!(kind, FileKind::Wal(_))
                && tail_start
                    .is_some_and(|tail| position < tail && position + damage.length() > tail);
            let verdict: Result<(), String> = match result {
                Err(_) => Err("panicked".into()),
                Ok(Ok(read)) => {
                    let intact = read == state;
                    let torn_wal =
                        (matches!(kind, FileKind::Wal(_)) && in_tail && read == *before_last)
                            || (across_last_marker && wal_prefixes.contains(&read));
                    let allowed_intact = matches!(kind, FileKind::Current)
                        || (matches!(kind, FileKind::Manifest(_)) && in_tail);
                    if torn_wal || (intact && allowed_intact) {
                        Ok(())
                    } else if intact {
                        Err("damage in a checksummed region went undetected".into())
                    } else {
                        Err(format!(
                            "wrong data returned without an error ({} keys instead of {})",
                            read.len(),
                            state.len()
                        ))
                    }
                }
                Ok(Err(error)) => {
                    entry.1 += 1;
                    let must_name_file = matches!(kind, FileKind::Table(_))
                        || (matches!(kind, FileKind::Wal(_) | FileKind::Manifest(_)) && !in_tail);
                    match &error {
                        Error::Corruption { file, offset, .. } if file == path => {
                            // Checksums are reported where they are stored, so the offset may
                            // be past the damage by at most one footer (64 bytes).
                            if *offset <= position + damage.length() + 64 {
                                Ok(())
                            } else {
                                Err(format!("offset {offset} is past the damage: {error}"))
                            }
                        }
                        Error::Internal(_) => Err(format!("internal error: {error}")),
                        _ if must_name_file => {
                            Err(format!("expected a corruption naming the file: {error}"))
                        }
                        _ => Ok(()),
                    }
                }
            };
            if let Err(message) = verdict {
                failures.push(format!(
                    "{} {damage:?} (tail from {tail_start:?}): {message}",
                    path.display()
                ));
            }
        }
    }
    let total: u64 = counts.values().map(|(trials, _)| trials).sum();
    eprintln!(
        "corruption sweep: {total} damaged copies {counts:?} (trials, errors), {} violations",
        failures.len()
    );
    assert_eq!(
        kinds_seen.into_iter().collect::<Vec<_>>(),
        vec!["CURRENT", "MANIFEST", "SSTable", "WAL"]
    );
    assert!(
        failures.is_empty(),
        "{} violations:\n{}",
        failures.len(),
        failures[..failures.len().min(30)].join("\n")
    );
}

/// Writes `count` WAL-only puts after one synced put; returns the files, the keys written
/// in order and the WAL's path.
fn unsynced_wal(count: u32) -> (BTreeMap<PathBuf, Vec<u8>>, Vec<Vec<u8>>, PathBuf) {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let mut keys = Vec::new();
    for index in 0..=count {
        let sync = index == 0;
        db.put_with(&WriteOptions::with_sync(sync), &key(index), &[b'v'; 300])
            .unwrap();
        keys.push(key(index));
    }
    drop(db);
    let mut files = BTreeMap::new();
    let mut wal = None;
    for name in fs.list(Path::new(DB)).unwrap() {
        let path = Path::new(DB).join(&name);
        if matches!(filename::parse_file_name(&name), Some(FileKind::Wal(_))) {
            wal = Some(path.clone());
        }
        if name != "LOCK" {
            files.insert(path.clone(), fs.file_contents(&path).unwrap());
        }
    }
    (files, keys, wal.unwrap())
}

fn open_with(files: &BTreeMap<PathBuf, Vec<u8>>, recovery: WalRecovery) -> Result<Db, Error> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(DB)).unwrap();
    for (path, contents) in files {
        fs.set_file_contents(path, contents.clone());
    }
    Db::open(DB, {
        let mut options = options(&fs);
        options.wal_recovery = recovery;
        options
    })
}

/// A hole in the unsynced part of a WAL (what a power loss leaves when pages reach the disk
/// out of order) opens as a prefix of the writes holding the synced one, by default; strict
/// recovery refuses it. Damage to the synced record is corruption in both modes.
#[test]
fn damage_in_unsynced_wal_bytes_recovers_a_prefix_unless_strict() {
    let (files, keys, wal) = unsynced_wal(12);
    let pristine = files[&wal].clone();
    let records: Vec<u64> = cairn::testing::wal::parse_log(pristine.clone(), &wal)
        .unwrap()
        .records()
        .map(|(offset, _)| offset)
        .collect();
    // Header, the synced put, its sync marker (written after the sync: unsynced itself), then
    // 12 unsynced puts; damage to the last one is a plain torn tail.
    assert_eq!(records.len(), 15);
    for hole in 2..records.len() - 1 {
        let mut damaged = files.clone();
        let bytes = damaged.get_mut(&wal).unwrap();
        let start = records[hole] as usize;
        bytes[start..start + 16].fill(0);
        let db = open_with(&damaged, WalRecovery::PointInTime).unwrap();
        let present: Vec<Vec<u8>> = common::scan(&db).into_keys().collect();
        let mut expected = keys[..(hole - 2).max(1)].to_vec();
        expected.sort();
        assert_eq!(present, expected, "hole in record {hole}");
        drop(db);
        match open_with(&damaged, WalRecovery::Strict) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file, offset), (wal.clone(), records[hole]))
            }
            other => panic!("strict recovery of hole {hole}: {:?}", other.map(|_| ())),
        }
    }
    for &record in &records[..2] {
        let mut damaged = files.clone();
        damaged.get_mut(&wal).unwrap()[record as usize + 9] ^= 0x40;
        for recovery in [WalRecovery::PointInTime, WalRecovery::Strict] {
            match open_with(&damaged, recovery) {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!((file, offset), (wal.clone(), record))
                }
                other => panic!("synced record at {record}: {:?}", other.map(|_| ())),
            }
        }
    }
}
