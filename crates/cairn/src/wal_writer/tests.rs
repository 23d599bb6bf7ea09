//! Unit tests of the concurrent WAL writer: reservations, roll-over, group commit.

use super::*;
use std::sync::atomic::AtomicU64 as StdAtomicU64;

fn log_without_file(first: u64) -> Log {
    Log::new(
        1,
        PathBuf::from("/x"),
        None,
        first,
        0,
        None,
        Arc::new(StdAtomicU64::new(0)),
    )
}

#[test]
fn reservations_are_contiguous_and_the_seal_hands_over_the_next_sequence() {
    let log = Arc::new(log_without_file(10));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for round in 0..5000u64 {
                    match log.reserve(1 + round % 3, 0) {
                        Reserve::Reserved { sequence, .. } => got.push((sequence, 1 + round % 3)),
                        Reserve::Sealed => break,
                    }
                }
                got
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let next = log.seal();
    let mut all: Vec<(u64, u64)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    let mut expected = 10;
    for (sequence, count) in all {
        assert_eq!(sequence, expected, "hole or overlap");
        expected += count;
    }
    assert_eq!(
        next, expected,
        "the next log must start right after the last reservation"
    );
    assert!(matches!(log.reserve(1, 0), Reserve::Sealed));
}

#[test]
fn segments_roll_over_and_records_survive_in_order() {
    use crate::fs::{FileSystem, MemFs};
    let fs = MemFs::new();
    let path = PathBuf::from("/wal");
    let file = fs.create(&path).unwrap();
    let log = Arc::new(Log::new(
        7,
        path.clone(),
        Some(file),
        1,
        4096,
        None,
        Arc::new(StdAtomicU64::new(0)),
    ));
    let handles: Vec<_> = (0..3u64)
        .map(|thread| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for round in 0..400u64 {
                    let mut batch = crate::batch::WriteBatch::new();
                    let value = vec![thread as u8; (round % 50) as usize];
                    batch.put(&round.to_le_bytes(), &value);
                    let bytes = log.reservation_bytes(batch.size_bytes());
                    let Reserve::Reserved {
                        segment,
                        sequence,
                        offset,
                    } = log.reserve(1, bytes)
                    else {
                        panic!("sealed")
                    };
                    // SAFETY: `offset` is this thread's fresh reservation of
                    // `reservation_bytes(size_bytes())`, exactly the encoded record.
                    unsafe { segment.publish(offset, batch.encode(sequence)) };
                    log.wait_durable(sequence, round % 10 == 0).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    log.seal();
    log.finish().unwrap();
    let contents = crate::wal::read_wal(
        &fs,
        &path,
        crate::wal::RECORD_PAYLOAD_BYTES_MAX,
        true,
        crate::options::WalRecovery::Strict,
    )
    .unwrap();
    assert_eq!(contents.wal_version, crate::wal::WAL_FORMAT_VERSION);
    let sequences: Vec<u64> = contents
        .records()
        .map(|(_, payload)| {
            crate::batch::DecodedBatch::decode(payload)
                .unwrap()
                .first_sequence
        })
        .collect();
    assert_eq!(sequences, (1..=1200).collect::<Vec<_>>());
    assert_eq!(log.written_sequence(), 1200);
}

thread_local! {
    /// Runs on this thread right after it installs a successor segment (see `reserve`).
    static AFTER_ROLL_OVER: std::cell::RefCell<Option<Box<dyn FnMut()>>> =
        const { std::cell::RefCell::new(None) };
}

/// The roll-over hook: lets a test land another writer's reservation exactly between the
/// installation of a successor and the retry of the writer that installed it.
pub(super) fn after_roll_over() {
    // Taken out while it runs: the hook itself reserves, and may roll over again.
    let hook = AFTER_ROLL_OVER.with(|cell| cell.borrow_mut().take());
    if let Some(mut hook) = hook {
        hook();
        AFTER_ROLL_OVER.with(|cell| *cell.borrow_mut() = Some(hook));
    }
}

/// Bug (debt G): the successor of a full segment was sized exactly for the record that
/// filled it; a small reservation landing in it first made the big record not fit, so its
/// writer sealed that segment too and started over, as long as small writers kept winning.
/// Fix: the writer that rolls over reserves its own record in the successor before
/// installing it. Deterministic: the hook plays a small writer winning every race.
#[test]
fn a_record_over_the_segment_size_is_not_starved_by_small_writers() {
    use crate::fs::{FileSystem, MemFs};
    let fs = MemFs::new();
    let log = Arc::new(Log::new(
        1,
        PathBuf::from("/wal"),
        Some(fs.create(std::path::Path::new("/wal")).unwrap()),
        1,
        4096,
        None,
        Arc::new(StdAtomicU64::new(0)),
    ));
    let small = log.reservation_bytes(40);
    assert!(matches!(log.reserve(1, small), Reserve::Reserved { .. }));
    let rivals = Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let (log, rivals) = (Arc::clone(&log), Arc::clone(&rivals));
        AFTER_ROLL_OVER.with(|cell| {
            *cell.borrow_mut() = Some(Box::new(move || {
                let mut rivals = rivals.lock().unwrap();
                assert!(
                    rivals.len() < 8,
                    "the big record lost {} roll-overs",
                    rivals.len()
                );
                if let Reserve::Reserved { sequence, .. } = log.reserve(1, small) {
                    rivals.push(sequence);
                }
            }));
        });
    }
    let big = log.reservation_bytes(3 * 4096);
    let reserved = log.reserve(1, big);
    AFTER_ROLL_OVER.with(|cell| cell.borrow_mut().take());
    let Reserve::Reserved {
        sequence, offset, ..
    } = reserved
    else {
        panic!("sealed")
    };
    // The big record took the first slot of the successor it installed; the small writer
    // that raced it comes right after (or in the next segment).
    assert_eq!((sequence, offset), (2, 0));
    assert_eq!(*rivals.lock().unwrap(), vec![3]);
}

/// Reserves, publishes and waits for one small record in `log`; returns its sequence.
fn write_one(log: &Log, sync: bool) -> Result<u64> {
    let sequence = publish_one(log);
    log.wait_durable(sequence, sync).map(|()| sequence)
}

/// A log with a file named `name` in `fs`, 4 KiB segments, raising `global`.
fn log_in(
    fs: &dyn crate::fs::FileSystem,
    (number, name): (u64, &str),
    first: u64,
    previous: Option<Arc<Log>>,
    global: &Arc<StdAtomicU64>,
) -> Log {
    let path = PathBuf::from(name);
    let file = fs.create(&path).unwrap();
    Log::new(
        number,
        path,
        Some(file),
        first,
        4096,
        previous,
        Arc::clone(global),
    )
}

/// Seals `old` and returns its successor, log 2 in `/new.log`.
fn successor(
    fs: &dyn crate::fs::FileSystem,
    old: &Arc<Log>,
    global: &Arc<StdAtomicU64>,
) -> Arc<Log> {
    let next = old.seal();
    Arc::new(log_in(
        fs,
        (2, "/new.log"),
        next,
        Some(Arc::clone(old)),
        global,
    ))
}

/// Reserves and publishes one small record in `log` without waiting; returns its sequence.
fn publish_one(log: &Log) -> u64 {
    let mut batch = crate::batch::WriteBatch::new();
    batch.put(b"key", b"value");
    let bytes = log.reservation_bytes(batch.size_bytes());
    let Reserve::Reserved {
        segment,
        sequence,
        offset,
    } = log.reserve(1, bytes)
    else {
        panic!("sealed")
    };
    // SAFETY: `offset` is this call's fresh reservation of the encoded record's bytes.
    unsafe { segment.publish(offset, batch.encode(sequence)) };
    sequence
}

/// `write_published` (the early lead a writer makes right after publishing) writes what is
/// published when the leader role is free, and otherwise returns at once: it never waits
/// for another leader, nor for a predecessor log's last record (invariant 4 leaves that
/// wait to `wait_durable`).
#[test]
fn write_published_leads_when_free_and_never_waits() {
    use crate::fs::{FileSystem as _, MemFs};
    let fs = MemFs::new();
    let global = Arc::new(StdAtomicU64::new(0));
    let old = Arc::new(log_in(&fs, (1, "/old.log"), 1, None, &global));
    // A writer of the old log holds sequence 1 between reserve and publish.
    let bytes = old.reservation_bytes(16);
    let Reserve::Reserved { .. } = old.reserve(1, bytes) else {
        panic!("sealed")
    };
    let new = successor(&fs, &old, &global);
    let first = publish_one(&new);
    // Returns although the old log's record is unpublished (a lead would wait for it): in a
    // thread, so that a wait fails the test instead of hanging it.
    let (done, returned) = std::sync::mpsc::channel();
    let writer = Arc::clone(&new);
    std::thread::spawn(move || {
        writer.write_published();
        let _ = done.send(());
    });
    assert!(
        returned
            .recv_timeout(std::time::Duration::from_secs(20))
            .is_ok(),
        "write_published waited for the predecessor log"
    );
    assert!(
        new.written_sequence() < first,
        "wrote past an unwritten predecessor"
    );

    let log = log_in(
        &fs,
        (3, "/solo.log"),
        1,
        None,
        &Arc::new(StdAtomicU64::new(0)),
    );
    let sequence = publish_one(&log);
    let held = log.leader.lock().unwrap();
    log.write_published();
    assert!(
        log.written_sequence() < sequence,
        "led while another held the role"
    );
    drop(held);
    log.write_published();
    assert_eq!(
        log.written_sequence(),
        sequence,
        "the free role was not taken"
    );

    // A file whose appends are system calls: the writer leads only from its wait.
    let directory = std::env::temp_dir().join(format!("cairn-wal-early-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("write.log");
    let file = crate::fs::StdFs.create(&path).unwrap();
    assert!(!file.appends_in_memory());
    let log = log_in(
        &crate::fs::StdFs,
        (4, path.to_str().unwrap()),
        1,
        None,
        &global,
    );
    let sequence = publish_one(&log);
    log.write_published();
    assert!(
        log.written_sequence() < sequence,
        "led after a publish with write(2)"
    );
    log.wait_durable(sequence, false).unwrap();
    drop(log);
    let _ = std::fs::remove_dir_all(&directory);
}

/// Why `lead` raises the database-wide written watermark with `fetch_max`, not a store: a
/// log retired before it was fully written (its flush needs its records inserted, not
/// written) may still be led by a late writer after its successor raised the watermark past
/// it; that lead must not lower the watermark (a plain store did, in an experiment).
#[test]
fn a_late_lead_of_a_retired_log_never_lowers_the_written_watermark() {
    use crate::fs::MemFs;
    let fs = MemFs::new();
    let global = Arc::new(StdAtomicU64::new(0));
    let old = Arc::new(log_in(&fs, (1, "/old.log"), 1, None, &global));
    // Published, never led: its writer is descheduled before its wait.
    let late = publish_one(&old);
    let new = successor(&fs, &old, &global);
    old.retire();
    let newer = write_one(&new, false).unwrap();
    assert_eq!(global.load(Ordering::Acquire), newer);
    // The late writer wakes and leads the retired log (no file left: nothing is written).
    old.wait_durable(late, false).unwrap();
    assert_eq!(old.written_sequence(), late);
    assert_eq!(
        global.load(Ordering::Acquire),
        newer,
        "a retired log's lead lowered the written watermark"
    );
}

/// Bug (debt D): the first sync asked of a new log fdatasynced the whole previous log while
/// holding the new log's leader lock, so every writer of the new log — even one that asked
/// for no sync — spun on `try_lock` until that fdatasync returned. Fix: the syncing waiter
/// syncs the predecessor before it competes for the leader role; a leader never syncs this
/// log before that is done (invariant 4).
#[test]
fn a_non_sync_write_does_not_wait_for_the_previous_logs_sync() {
    use crate::fs::FaultFs;
    use std::time::{Duration, Instant};
    let fs = FaultFs::new();
    let global = Arc::new(StdAtomicU64::new(0));
    let old = Arc::new(log_in(&fs, (1, "/old.log"), 1, None, &global));
    write_one(&old, false).unwrap();
    let new = successor(&fs, &old, &global);
    write_one(&new, false).unwrap();
    // Long against the bound below, so a loaded CI machine's scheduling delays cannot
    // push an unblocked write over it (it waited the whole sync before the fix).
    let delay = Duration::from_secs(1);
    fs.set_latency("sync", "/old.log", delay);
    let syncer = {
        let new = Arc::clone(&new);
        std::thread::spawn(move || {
            let started = Instant::now();
            write_one(&new, true).unwrap();
            started.elapsed()
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    let sequence = write_one(&new, false).unwrap();
    let waited = started.elapsed();
    let synced_after = syncer.join().unwrap();
    assert!(
        synced_after >= delay,
        "the sync finished in {synced_after:?}, before the old log's sync"
    );
    assert!(
        waited < Duration::from_millis(500),
        "a non-sync write waited {waited:?} behind the previous log's {delay:?} fdatasync"
    );
    assert_eq!(new.written_sequence(), sequence);
    // Invariant 4 still holds: the old log is durable before the new one counts as synced.
    assert_eq!(old.synced_sequence.load(Ordering::Acquire), 1);
}

/// A test hook a log runs at a fixed point (see `Log::before_sync`).
#[derive(Default)]
pub(super) struct Hook(std::sync::Mutex<Option<Box<dyn Fn() + Send>>>);

impl Hook {
    pub(super) fn set(&self, hook: impl Fn() + Send + 'static) {
        *self.0.lock().unwrap() = Some(Box::new(hook));
    }

    pub(super) fn run(&self) {
        let hook = self.0.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
    }
}

/// Bug (debt D, the general case): the leader fdatasynced the current log while holding the
/// leader role, so a writer that asked for no sync, arriving while a sync was in flight,
/// waited for that fdatasync. Deterministic: the sync is held at its start until the plain
/// write completes (or 20 s pass, the failure), so no timing decides the outcome.
#[test]
fn a_non_sync_write_does_not_wait_for_the_current_logs_sync() {
    use crate::fs::{FaultFs, FileSystem};
    use std::sync::mpsc;
    use std::time::Duration;
    let fs = FaultFs::new();
    let log = Arc::new(Log::new(
        1,
        PathBuf::from("/cur.log"),
        Some(fs.create(std::path::Path::new("/cur.log")).unwrap()),
        1,
        4096,
        None,
        Arc::new(StdAtomicU64::new(0)),
    ));
    write_one(&log, false).unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let (plain_done_tx, plain_done_rx) = mpsc::channel::<()>();
    let (verdict_tx, verdict_rx) = mpsc::channel();
    log.before_sync.set(move || {
        started_tx.send(()).unwrap();
        // Holds the fdatasync at its start until the plain write is acknowledged.
        let plain_first = plain_done_rx.recv_timeout(Duration::from_secs(20)).is_ok();
        verdict_tx.send(plain_first).unwrap();
    });
    let syncer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || write_one(&log, true).unwrap())
    };
    started_rx.recv().unwrap();
    let sequence = write_one(&log, false).unwrap();
    let _ = plain_done_tx.send(());
    let synced_sequence = syncer.join().unwrap();
    assert!(
        verdict_rx.recv().unwrap(),
        "a non-sync write waited for the current log's fdatasync in flight"
    );
    assert!(log.written_sequence() >= sequence);
    assert!(log.synced_sequence.load(Ordering::Acquire) >= synced_sequence);
}

/// A failed fdatasync through the sync handle is sticky (invariant 8): the sync writer gets
/// the error, and every later write of the log fails, plain or synced, even though the
/// leader that writes never saw the failure.
#[test]
fn a_failed_sync_beside_the_leader_fails_every_later_write() {
    use crate::fs::fault::{FaultKind, FaultPlan};
    use crate::fs::FaultFs;
    let fs = FaultFs::new();
    let log = log_in(
        &fs,
        (1, "/sticky.log"),
        1,
        None,
        &Arc::new(StdAtomicU64::new(0)),
    );
    write_one(&log, false).unwrap();
    fs.set_plan(FaultPlan::Matching {
        operation: "sync",
        path_contains: "sticky",
        skip: 0,
        kind: FaultKind::Eio,
        crash: false,
    });
    assert!(
        write_one(&log, true).is_err(),
        "the failed sync was acknowledged"
    );
    fs.set_plan(FaultPlan::None);
    assert!(
        write_one(&log, false).is_err(),
        "a plain write after a failed sync"
    );
    assert!(
        write_one(&log, true).is_err(),
        "a sync write after a failed sync"
    );
}

/// Bug (found in review): a lead never checked for an earlier failure once it held the role,
/// so after an append that failed part way (ENOSPC writes half here), the next lead wrote
/// the same records again from the old offset; replay then found a sequence gap and the
/// database could not reopen after a transient error.
#[test]
fn a_lead_after_a_failed_append_writes_nothing_again() {
    use crate::fs::fault::{FaultKind, FaultPlan};
    use crate::fs::FaultFs;
    let fs = FaultFs::new();
    let path = std::path::Path::new("/enospc.log");
    let log = log_in(
        &fs,
        (1, "/enospc.log"),
        1,
        None,
        &Arc::new(StdAtomicU64::new(0)),
    );
    write_one(&log, false).unwrap();
    fs.set_plan(FaultPlan::Matching {
        operation: "append",
        path_contains: "enospc",
        skip: 0,
        kind: FaultKind::Enospc,
        crash: false,
    });
    let second = publish_one(&log);
    assert!(
        log.wait_durable(second, false).is_err(),
        "the append failed"
    );
    fs.set_plan(FaultPlan::None);
    let size = fs.file_contents(path).unwrap().len();
    let _ = log.try_lead();
    assert_eq!(
        fs.file_contents(path).unwrap().len(),
        size,
        "a lead after the failure appended again"
    );
}
