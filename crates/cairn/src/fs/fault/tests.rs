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
