//! Tests of the fault-injecting wrapper: the power-loss model and the fault plans.
#![allow(clippy::unwrap_used)]
use super::*;
use std::collections::HashSet;

fn write(fs: &FaultFs, path: &Path, data: &[u8], sync: bool) -> Box<dyn WritableFile> {
    let mut file = fs.create(path).unwrap();
    file.append(data).unwrap();
    if sync {
        file.sync().unwrap();
    }
    file
}

#[test]
fn unsynced_create_disappears_and_synced_data_survives() {
    let fs = FaultFs::new();
    let directory = Path::new("/d");
    fs.create_dir_all(directory).unwrap();
    let _a = write(&fs, &directory.join("a"), b"durable", true);
    fs.sync_dir(directory).unwrap();
    let _b = write(
        &fs,
        &directory.join("b"),
        b"synced data, unsynced name",
        true,
    );
    for seed in 0..50 {
        let image = fs.crash_image(seed);
        assert_eq!(
            image.file_contents(&directory.join("a")).unwrap(),
            b"durable"
        );
        // `b`'s create is pending: kept only if the random metadata prefix includes it,
        // and then with its synced data.
        if let Some(data) = image.file_contents(&directory.join("b")) {
            assert_eq!(data, b"synced data, unsynced name");
        }
    }
    let dropped = (0..50).any(|seed| {
        fs.crash_image(seed)
            .file_contents(&directory.join("b"))
            .is_none()
    });
    assert!(dropped);
}

#[test]
fn unsynced_appends_keep_a_prefix_possibly_torn() {
    let fs = FaultFs::new();
    let directory = Path::new("/d");
    let path = directory.join("log");
    let mut file = write(&fs, &path, &[1u8; 100], true);
    fs.sync_dir(directory).unwrap();
    file.append(&[2u8; 2000]).unwrap();
    let mut lengths = HashSet::new();
    for seed in 0..200 {
        let data = fs.crash_image(seed).file_contents(&path).unwrap();
        assert!(data.len() >= 100 && data.len() <= 2100);
        assert_eq!(&data[..100], &[1u8; 100]);
        lengths.insert(data.len());
    }
    assert!(lengths.len() > 10);
}

#[test]
fn unsynced_rename_reverts() {
    let fs = FaultFs::new();
    let directory = Path::new("/d");
    let _old = write(&fs, &directory.join("CURRENT"), b"old", true);
    fs.sync_dir(directory).unwrap();
    let _new = write(&fs, &directory.join("CURRENT.tmp"), b"new", true);
    fs.rename(&directory.join("CURRENT.tmp"), &directory.join("CURRENT"))
        .unwrap();
    let mut seen = HashSet::new();
    for seed in 0..100 {
        let image = fs.crash_image(seed);
        seen.insert(image.file_contents(&directory.join("CURRENT")).unwrap());
    }
    assert!(seen.contains(b"old".as_slice()) && seen.contains(b"new".as_slice()));
    fs.sync_dir(directory).unwrap();
    for seed in 0..20 {
        let image = fs.crash_image(seed);
        assert_eq!(
            image.file_contents(&directory.join("CURRENT")).unwrap(),
            b"new"
        );
        assert!(image
            .file_contents(&directory.join("CURRENT.tmp"))
            .is_none());
    }
}

#[test]
fn faults_fire_where_planned_and_are_reported() {
    let fs = FaultFs::new();
    let directory = Path::new("/d");
    fs.set_plan(FaultPlan::Once {
        index: 2,
        kind: FaultKind::Enospc,
    });
    let mut file = fs.create(&directory.join("a")).unwrap(); // 0
    file.append(b"0123").unwrap(); // 1
    let error = file.append(b"4567").unwrap_err(); // 2: short write
    assert!(error.is_io());
    file.append(b"89").unwrap(); // 3
    assert_eq!(fs.file_contents(&directory.join("a")).unwrap(), b"01234589");
    assert_eq!(fs.operation_count(), 4);
    let injected = fs.injected();
    assert_eq!(injected.len(), 1);
    assert_eq!(injected[0].operation_index, 2);
    assert_eq!(injected[0].operation, "append");

    fs.reset_counters();
    fs.set_plan(FaultPlan::CrashAtWritePoint { index: 1 });
    assert!(fs.exists(&directory.join("a")).unwrap()); // not a write point
    file.sync().unwrap(); // write point 0
    assert!(file.append(b"x").is_err()); // write point 1: crash
    assert!(fs.exists(&directory.join("a")).is_err()); // everything fails afterwards
    assert!(fs.crashed());
}

#[cfg(target_os = "linux")]
#[test]
fn a_mapped_log_s_reserved_tail_and_unsynced_trim_may_survive_until_synced() {
    let directory = std::env::temp_dir().join(format!("cairn-faultfs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let fs = FaultFs::wrap(crate::StdFs);
    fs.create_dir_all(&directory).unwrap();
    let path = directory.join("000001.log");
    let mut file = fs.create_log(&path, 1000).unwrap();
    fs.sync_dir(&directory).unwrap();
    file.append(&[7u8; 100]).unwrap();
    file.sync().unwrap();
    if file.allocated_bytes() == 100 {
        let _ = std::fs::remove_dir_all(&directory);
        return; // no fallocate here: the log is a plain file
    }
    let lengths = |fs: &FaultFs| -> HashSet<usize> {
        (0..40)
            .map(|seed| {
                let data = fs.crash_image(seed).file_contents(&path).unwrap();
                assert_eq!(&data[..100], &[7u8; 100]);
                assert!(data[100..].iter().all(|&byte| byte == 0));
                data.len()
            })
            .collect()
    };
    // Synced with the reservation: the zero tail is durable.
    assert_eq!(lengths(&fs).len(), 1);
    assert!(file.trim().unwrap());
    // Trimmed, not synced: either length may come back.
    let after_trim = lengths(&fs);
    assert!(
        after_trim.contains(&100) && after_trim.len() > 1,
        "{after_trim:?}"
    );
    file.sync().unwrap();
    assert_eq!(lengths(&fs), HashSet::from([100]));
    drop(file);
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn holes_let_a_later_unsynced_page_survive_without_an_earlier_one() {
    let fs = FaultFs::new();
    let directory = Path::new("/d");
    let path = directory.join("log");
    let mut file = write(&fs, &path, &[1u8; 10], true);
    fs.sync_dir(directory).unwrap();
    file.append(&[2u8; 3 * 4096]).unwrap();
    fs.set_crash_holes(true);
    let hole = (0..200).any(|seed| {
        let data = fs.crash_image(seed).file_contents(&path).unwrap();
        assert_eq!(&data[..10], &[1u8; 10]);
        data.len() > 2 * 4096 && data[4096] == 0 && data[2 * 4096] == 2
    });
    assert!(hole, "no image had a hole");
}

#[test]
fn latency_delays_only_matching_operations() {
    let fs = FaultFs::new();
    let delay = std::time::Duration::from_millis(30);
    fs.set_latency("sync", ".log", delay);
    let mut log = fs.create(Path::new("/d/1.log")).unwrap();
    let mut table = fs.create(Path::new("/d/2.sst")).unwrap();
    let started = std::time::Instant::now();
    table.sync().unwrap();
    assert!(started.elapsed() < delay);
    let started = std::time::Instant::now();
    log.sync().unwrap();
    assert!(started.elapsed() >= delay);
    fs.clear_latency();
    let started = std::time::Instant::now();
    log.sync().unwrap();
    assert!(started.elapsed() < delay);
}

/// A sync through a `SyncHandle` runs while the writer appends: it makes durable what was
/// appended before it started, not what was appended while it ran (the model snapshots at
/// the start). Whatever the scheduling, the bytes appended after the sync was counted are
/// never claimed durable by it.
#[test]
fn a_sync_handle_makes_durable_only_what_was_written_before_it_started() {
    let fs = FaultFs::new();
    let directory = Path::new("/d");
    let path = directory.join("log");
    let mut file = write(&fs, &path, &[1u8; 100], false);
    fs.sync_dir(directory).unwrap();
    let handle = file.sync_handle().unwrap();
    fs.set_latency("sync", "log", std::time::Duration::from_millis(200));
    let before = fs.operation_count();
    let syncer = std::thread::spawn(move || handle.sync().unwrap());
    while fs.operation_count() == before {
        std::thread::yield_now();
    }
    file.append(&[2u8; 2000]).unwrap();
    syncer.join().unwrap();
    let mut lengths = HashSet::new();
    for seed in 0..200 {
        let data = fs.crash_image(seed).file_contents(&path).unwrap();
        assert_eq!(&data[..100], &[1u8; 100], "synced bytes lost");
        lengths.insert(data.len());
    }
    assert!(
        lengths.iter().any(|&length| length < 2100),
        "bytes appended during the sync were made durable by it"
    );
}
