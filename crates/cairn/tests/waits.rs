//! Waits on client paths: a panic in a user closure must not leave a waiter behind, and an
//! oversubscribed machine (far more threads than cores) must keep every thread making
//! progress.
//!
//! The write path holds no lock, but readers, snapshots, read-modify-writes and flushes wait
//! for writers that are between reserving and finishing a sequence. These tests check the
//! two ways such a wait could last forever: a reserved sequence that is never finished
//! (a panic unwinding through the write path) and a waiter that spins or yields while the
//! thread it waits for cannot get a core.
//!
//! Thread-safety contract: each test owns its database and directory.
//!
//! Invariants checked:
//! 1. A panic in the closure of `Db::update` / `Db::read_modify_write` — on its first run or
//!    on a retry after a conflict — leaves no lock poisoned and no sequence unfinished: later
//!    puts, gets, read-modify-writes, snapshots and flushes work, and a reopen sees every
//!    acknowledged write.
//! 2. Under oversubscription every thread makes progress: with `CAIRN_OVERSUBSCRIBED_SECONDS`
//!    set (the soak: 64 threads for that many seconds) every thread completes operations in
//!    every whole second of the run; by default (CI: 32 threads, 3 s, cores shared with
//!    other tests) every thread completes operations over the run. The p99.9 operation
//!    latency is printed.
//! 3. The WAL of the next memtable switch is prepared ahead: the directory's newest WAL is
//!    empty and numbered above every WAL in use, and a process-crash image of the directory
//!    recovers every acknowledged write (recovery stops at the first empty WAL).
//! 4. A writer that crosses a memtable switch does not wait through the next WAL's creation:
//!    while the switching writer is held (a `FaultFs` gate, released by the test or after
//!    20 s) in the create (and fallocate) of a WAL file, or in the directory fsync that makes
//!    its name durable, another writer's puts into the new buffer complete.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::testing::filename::{parse_file_name, FileKind};
use cairn::FaultFs;
use cairn::{Db, Options, Update, WriteOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `body` expecting it to panic (the panic message still goes to stderr).
fn expect_panic(body: impl FnOnce()) {
    let outcome = catch_unwind(AssertUnwindSafe(body));
    assert!(outcome.is_err(), "the closure was expected to panic");
}

/// Every operation still works, in bounded time, after the panics.
fn assert_usable(db: &Db, key: &[u8]) {
    db.put(b"after", b"1").unwrap();
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"1"[..]));
    let updated = db
        .update(key, |current| {
            let mut value = current.map(<[u8]>::to_vec).unwrap_or_default();
            value.push(b'+');
            Some(value)
        })
        .unwrap();
    assert!(updated.unwrap().ends_with(b"+"));
    assert_eq!(db.increment(b"counter", 2).unwrap() % 2, 0);
    let snapshot = db.snapshot();
    drop(snapshot);
    db.flush().unwrap();
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn a_panic_in_an_update_closure_leaves_the_database_usable() {
    let directory = common::TempDir::new("waits-panic");
    let options = || {
        let mut options = Options::default();
        options.write_buffer_size_bytes = 4096;
        options
    };
    let db = Db::open(directory.path(), options()).unwrap();
    db.put(b"key", b"v").unwrap();

    // First run of the closure panics.
    expect_panic(|| {
        let _ = db.update(b"key", |_| panic!("user closure"));
    });
    expect_panic(|| {
        let _ = db.read_modify_write(b"key", |_| -> Update { panic!("user closure") });
    });
    assert_usable(&db, b"key");

    // The first run writes the key itself (a conflicting write above the horizon), so the
    // attempt is spent on a void record and the retry — which panics — runs after the
    // reservation was finished.
    let mut runs = 0;
    expect_panic(|| {
        let _ = db.update(b"key", |_| {
            runs += 1;
            if runs == 1 {
                db.put(b"key", b"conflict").unwrap();
                Some(b"first".to_vec())
            } else {
                panic!("user closure on retry")
            }
        });
    });
    assert!(runs >= 2, "the conflicting put did not force a retry");
    assert_usable(&db, b"key");
    // Many panics in a row while the buffer switches underneath.
    for round in 0..200u64 {
        db.put(&common::key(round, 6), &[b'x'; 100]).unwrap();
        expect_panic(|| {
            let _ = db.update(&common::key(round, 6), |_| panic!("again"));
        });
    }
    assert_usable(&db, b"key");
    let expected = common::scan(&db);
    drop(db);

    let db = Db::open(directory.path(), options()).unwrap();
    assert_eq!(common::scan(&db), expected);
    assert_usable(&db, b"key");
}

#[test]
fn panics_in_concurrent_updates_do_not_stall_other_threads() {
    let directory = common::TempDir::new("waits-panic-concurrent");
    let db = Arc::new(
        Db::open(directory.path(), {
            let mut options = Options::default();
            options.write_buffer_size_bytes = 16 * 1024;
            options
        })
        .unwrap(),
    );
    let handles: Vec<_> = (0..4u64)
        .map(|thread| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for round in 0..500u64 {
                    let key = common::key(round % 16, 4);
                    if (round + thread) % 3 == 0 {
                        let outcome = catch_unwind(AssertUnwindSafe(|| {
                            db.update(&key, |_| panic!("user closure"))
                        }));
                        assert!(outcome.is_err());
                    } else {
                        db.increment(&key, 1).unwrap();
                        db.get(&key).unwrap().unwrap();
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let total: i64 = (0..16u64)
        .map(|index| {
            let value = db.get(&common::key(index, 4)).unwrap().unwrap_or_default();
            std::str::from_utf8(&value).unwrap().parse::<i64>().unwrap()
        })
        .sum();
    // Per thread, 500 rounds of which those with (round + thread) % 3 == 0 panic.
    let expected: i64 = (0..4u64)
        .map(|thread| {
            (0..500u64)
                .filter(|round| (round + thread) % 3 != 0)
                .count() as i64
        })
        .sum();
    assert_eq!(total, expected);
    assert_usable(&db, &common::key(0, 4));
}

/// One oversubscribed thread's record: operations completed per second of the run, and
/// every operation's latency in microseconds.
struct ThreadLog {
    per_second: Vec<u64>,
    latencies_micros: Vec<u32>,
}

/// Puts, gets and read-modify-writes on a shared key range until `stop`.
fn oversubscribed_worker(db: &Db, thread: u64, started: Instant, stop: &AtomicBool) -> ThreadLog {
    let mut log = ThreadLog {
        per_second: Vec::new(),
        latencies_micros: Vec::new(),
    };
    let mut round = thread.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    while !stop.load(Ordering::Relaxed) {
        round = round
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let key = common::key((round >> 33) % 1024, 6);
        let began = Instant::now();
        match (round >> 20) % 4 {
            0 | 1 => db.put(&key, &[b'v'; 64]).unwrap(),
            2 => drop(db.get(&key).unwrap()),
            _ => drop(db.increment(&common::key((round >> 33) % 64, 3), 1)),
        }
        let ended = Instant::now();
        let micros = ended.duration_since(began).as_micros();
        log.latencies_micros
            .push(u32::try_from(micros).unwrap_or(u32::MAX));
        let second = ended.duration_since(started).as_secs() as usize;
        if log.per_second.len() <= second {
            log.per_second.resize(second + 1, 0);
        }
        log.per_second[second] += 1;
    }
    log
}

#[test]
fn oversubscribed_threads_all_make_progress_every_second() {
    let configured: Option<u64> = std::env::var("CAIRN_OVERSUBSCRIBED_SECONDS")
        .ok()
        .and_then(|text| text.parse().ok());
    let (threads, seconds) = match configured {
        Some(seconds) => (64u64, seconds.max(1)),
        None => (32u64, 3),
    };
    let directory = common::TempDir::new("waits-oversubscribed");
    let db = Arc::new(
        Db::open(directory.path(), {
            let mut options = Options::default();
            // Small enough that memtable switches and flushes run under the load.
            options.write_buffer_size_bytes = 1 << 20;
            options
        })
        .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            std::thread::spawn(move || oversubscribed_worker(&db, thread, started, &stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let logs: Vec<ThreadLog> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut latencies: Vec<u32> = logs
        .iter()
        .flat_map(|log| log.latencies_micros.iter().copied())
        .collect();
    latencies.sort_unstable();
    let percentile = |fraction: f64| {
        let index = ((latencies.len() as f64 - 1.0) * fraction).round() as usize;
        latencies.get(index).copied().unwrap_or(0)
    };
    println!(
        "oversubscribed: {threads} threads, {seconds} s, {} operations; latency p50 {} us, \
         p99 {} us, p99.9 {} us, max {} us",
        latencies.len(),
        percentile(0.5),
        percentile(0.99),
        percentile(0.999),
        latencies.last().copied().unwrap_or(0),
    );
    // Invariant 2, over the whole seconds of the run (the last one is cut by `stop`). The
    // per-second rule is the soak's (`CAIRN_OVERSUBSCRIBED_SECONDS`): in CI this binary's other
    // tests and the debug build share the two cores, and a flush or compaction that falls
    // behind may stall every writer for a second together, which is back-pressure, not
    // starvation. CI checks that every thread made progress over the run.
    for (thread, log) in logs.iter().enumerate() {
        if configured.is_none() {
            assert!(
                log.per_second.iter().sum::<u64>() > 0,
                "thread {thread} completed no operation: {:?}",
                log.per_second
            );
            continue;
        }
        for second in 0..seconds as usize {
            let done = log.per_second.get(second).copied().unwrap_or(0);
            assert!(
                done > 0,
                "thread {thread} completed no operation in second {second}: {:?}",
                log.per_second
            );
        }
    }
}

/// The WAL files of `directory` as (number, holds a non-zero byte), by number.
fn wal_files(directory: &std::path::Path) -> Vec<(u64, bool)> {
    let mut wals: Vec<(u64, bool)> = std::fs::read_dir(directory)
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.unwrap();
            match parse_file_name(entry.file_name().to_str()?) {
                Some(FileKind::Wal(number)) => {
                    // The database is open: a flush may delete an old WAL after the listing.
                    let bytes = match std::fs::read(entry.path()) {
                        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
                        read => read.unwrap(),
                    };
                    Some((number, bytes.iter().any(|&byte| byte != 0)))
                }
                _ => None,
            }
        })
        .collect();
    wals.sort_unstable();
    wals
}

#[test]
fn the_next_wal_is_prepared_ahead_and_recovery_keeps_every_write() {
    let directory = common::TempDir::new("waits-prepared-wal");
    let options = || {
        let mut options = Options::default();
        options.write_buffer_size_bytes = 4096;
        options
    };
    let db = Db::open(directory.path(), options()).unwrap();
    let sync = WriteOptions::with_sync(true);
    for round in 0..300u64 {
        db.put_with(&sync, &common::key(round, 6), &[b'w'; 100])
            .unwrap();
    }
    let wals = wal_files(directory.path());
    let (newest, newest_written) = *wals.last().unwrap();
    assert!(
        !newest_written,
        "the newest WAL {newest} is not the prepared, empty one: {wals:?}"
    );
    assert!(
        wals.iter()
            .rev()
            .skip(1)
            .take(1)
            .all(|&(_, written)| written),
        "the WAL in use is not just below the prepared one: {wals:?}"
    );
    // A process-crash image: every file as the OS holds it now, the database still open.
    let image = common::TempDir::new("waits-prepared-wal-image");
    common::copy_dir(directory.path(), image.path());
    let expected = common::scan(&db);
    assert_eq!(expected.len(), 300);
    drop(db);
    let recovered = Db::open(image.path(), options()).unwrap();
    assert_eq!(common::scan(&recovered), expected);
}

/// Whether a writer arriving while the switching writer is held at the gated `operation`
/// (on paths containing `path_contains`) completes its puts before the gate is released
/// (invariant 4). The gate opens by itself after 20 s, so a writer that waits through it
/// still finishes, and the verdict is whether the gate was still holding when it did.
fn crossing_writer_finishes_while_the_switch_is_held(
    operation: &'static str,
    path_contains: &'static str,
) {
    let fs = FaultFs::new();
    let options = || {
        let mut options = Options::default();
        options.file_system = Arc::new(fs.clone());
        options.write_buffer_size_bytes = 64 * 1024;
        options
    };
    let db = Arc::new(Db::open("/db", options()).unwrap());
    // A first switch: from then on the next WAL is prepared ahead (where the engine does so).
    db.put(b"first", b"1").unwrap();
    db.flush().unwrap();
    let gate = fs.set_gate(operation, path_contains, Duration::from_secs(20));
    let stop = Arc::new(AtomicBool::new(false));
    let filler = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("switching-writer".into())
            .spawn(move || {
                let mut written = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    db.put(&common::key(written, 8), &[b'f'; 1024]).unwrap();
                    written += 1;
                }
                written
            })
            .unwrap()
    };
    // The filler fills the buffer; the put that finds it full switches and reaches the gate.
    assert!(
        gate.wait_for_arrival("switching-writer", Duration::from_secs(20)),
        "no switch reached the gated {operation}"
    );
    let crossing = {
        let (db, gate) = (Arc::clone(&db), Arc::clone(&gate));
        std::thread::spawn(move || {
            for index in 0..16u64 {
                db.put(format!("crossing{index:02}").as_bytes(), b"c")
                    .unwrap();
            }
            gate.is_holding()
        })
    };
    let finished_while_held = crossing.join().unwrap();
    let timed_out = gate.timed_out();
    gate.release();
    stop.store(true, Ordering::Relaxed);
    let filled = filler.join().unwrap();
    assert!(
        finished_while_held,
        "a writer crossing the memtable switch waited until the switching writer's gated \
         {operation} on a WAL was released (gate timed out: {timed_out})"
    );
    for index in 0..16u64 {
        assert_eq!(
            db.get(format!("crossing{index:02}").as_bytes())
                .unwrap()
                .as_deref(),
            Some(&b"c"[..])
        );
    }
    assert!(db.get(&common::key(filled - 1, 8)).unwrap().is_some());
}

#[test]
fn a_writer_crossing_a_switch_does_not_wait_for_the_next_wal_s_create() {
    // `create_log` (mapped WAL: create, fallocate, mmap) is counted as a "create".
    crossing_writer_finishes_while_the_switch_is_held("create", ".log");
}

#[test]
fn a_writer_crossing_a_switch_does_not_wait_for_the_directory_fsync() {
    crossing_writer_finishes_while_the_switch_is_held("sync_dir", "/db");
}
