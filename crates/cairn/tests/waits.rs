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
//! 2. Under oversubscription every thread completes operations in every second of the run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::{Db, Options, Update};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Runs `body` expecting it to panic, without the default hook's noise on stderr.
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
    let options = || Options {
        write_buffer_size_bytes: 4096,
        ..Options::default()
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
        Db::open(
            directory.path(),
            Options {
                write_buffer_size_bytes: 16 * 1024,
                ..Options::default()
            },
        )
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
