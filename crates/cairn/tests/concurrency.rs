//! Concurrency test: writers and readers on one `Db` with a small memtable, so memtable
//! switches, flushes and compactions run underneath them the whole time.
//!
//! Each writer owns the keys `k % WRITERS == writer` and writes values that encode
//! `(key, writer, counter)`. Readers check that every value they read — by `get` and by range
//! scans — was written to that key by its owner and is not from the future (its counter is at
//! most the owner's published counter). Reads are also checked for monotonicity per reader:
//! a key's owner writes it with increasing counters, so once a reader has seen counter `c`
//! for a key (by `get` or in a scan) it must never later see a smaller counter, or the key
//! absent, for that key (reads go to the latest state, and the visible sequence only grows).
//! After the join every key must hold its owner's last value, also after a reopen.
//!
//! Duration: `CAIRN_CONCURRENCY_SECONDS` (default 10).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::{Db, Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WRITERS: u64 = 2;
const READERS: usize = 2;
const KEYS: u64 = 2000;

fn key(index: u64) -> Vec<u8> {
    common::key(index, 6)
}

fn value(index: u64, writer: u64, counter: u64) -> Vec<u8> {
    let mut value = format!("{index:06}:{writer}:{counter:012}:").into_bytes();
    value.resize(64, b'.');
    value
}

fn parse_value(bytes: &[u8]) -> Option<(u64, u64, u64)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut parts = text.split(':');
    Some((
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
    ))
}

/// Checks one value read for key `index` and returns its counter.
fn check_read(index: u64, bytes: &[u8], published: &[AtomicU64]) -> u64 {
    let (value_index, writer, counter) =
        parse_value(bytes).unwrap_or_else(|| panic!("key {index}: unparsable value {bytes:?}"));
    assert_eq!(
        value_index, index,
        "key {index} holds a value written to key {value_index}"
    );
    assert_eq!(
        writer,
        index % WRITERS,
        "key {index} written by a writer that does not own it"
    );
    // A value's counter is published after its put returns, and each writer has at most one
    // put in flight, so a counter above `published + 1` (read after the get) was never
    // written: a value from the future.
    let bound = published[writer as usize].load(Ordering::Acquire) + 1;
    assert!(
        counter <= bound,
        "key {index}: counter {counter} beyond writer's {bound}"
    );
    counter
}

/// One reader's view: the largest counter it has seen per key (0: never seen the key).
struct SeenCounters(Vec<u64>);

impl SeenCounters {
    /// Records a read of key `index` (`None`: absent); panics if it goes back in time.
    fn observe(&mut self, reader: usize, index: u64, counter: Option<u64>, how: &str) {
        let seen = &mut self.0[index as usize];
        match counter {
            Some(counter) => {
                assert!(
                    counter >= *seen,
                    "reader {reader}: key {index} went back from counter {seen} to {counter} ({how})"
                );
                *seen = counter;
            }
            None => assert_eq!(
                *seen, 0,
                "reader {reader}: key {index} absent ({how}) after it was seen at counter {seen}"
            ),
        }
    }
}

/// One reader: gets (9 in 10) and 50-key scans until `stop`, every value checked by
/// `check_read` and every key's counters checked monotonic; returns (gets, scans).
fn reader_loop(reader: usize, db: &Db, stop: &AtomicBool, published: &[AtomicU64]) -> (u64, u64) {
    let mut rng = SmallRng::seed_from_u64(100 + reader as u64);
    let (mut gets, mut scans) = (0u64, 0u64);
    let mut seen = SeenCounters(vec![0; KEYS as usize]);
    while !stop.load(Ordering::Relaxed) {
        if rng.gen_bool(0.9) {
            let index = rng.gen_range(0..KEYS);
            let counter = db
                .get(&key(index))
                .unwrap()
                .map(|bytes| check_read(index, &bytes, published));
            seen.observe(reader, index, counter, "get");
            gets += 1;
        } else {
            let start = rng.gen_range(0..KEYS);
            let lower = key(start);
            let upper = key(start + 50);
            let mut previous: Option<Vec<u8>> = None;
            // Keys of the window the scan did not return were absent at its snapshot.
            let mut next_index = start;
            for entry in db.range(&lower[..]..&upper[..]).unwrap() {
                let (found_key, bytes) = entry.unwrap();
                if let Some(previous) = &previous {
                    assert!(previous < &found_key, "scan out of order");
                }
                let index: u64 = std::str::from_utf8(&found_key[3..])
                    .unwrap()
                    .parse()
                    .unwrap();
                for missing in next_index..index {
                    seen.observe(reader, missing, None, "scan");
                }
                let counter = check_read(index, &bytes, published);
                seen.observe(reader, index, Some(counter), "scan");
                next_index = index + 1;
                previous = Some(found_key);
            }
            for missing in next_index..(start + 50).min(KEYS) {
                seen.observe(reader, missing, None, "scan");
            }
            scans += 1;
        }
    }
    (gets, scans)
}

#[test]
fn two_writers_two_readers_small_memtable() {
    let seconds: u64 = common::env_or("CAIRN_CONCURRENCY_SECONDS", 10);
    let directory = std::env::temp_dir().join(format!("cairn-concurrency-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let options = || {
        let mut options = Options::default();
        options.write_buffer_size_bytes = 64 * 1024;
        options.target_file_size_bytes = 128 * 1024;
        options.level1_size_bytes_max = 512 * 1024;
        options.level0_compaction_trigger = 2;
        options
    };
    let db = Arc::new(Db::open(&directory, options()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // `published[w]` = largest counter whose put has returned; counters start at 1.
    let published: Arc<Vec<AtomicU64>> =
        Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    // Writer-side record of each key's last value (written only by its owner).
    let last_written: Arc<Vec<AtomicU64>> =
        Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let deadline = Instant::now() + Duration::from_secs(seconds);

    let mut handles = Vec::new();
    for writer in 0..WRITERS {
        let (db, stop, published, last_written) = (
            Arc::clone(&db),
            Arc::clone(&stop),
            Arc::clone(&published),
            Arc::clone(&last_written),
        );
        handles.push(std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(writer);
            let mut counter = 0u64;
            while !stop.load(Ordering::Relaxed) {
                counter += 1;
                let index = rng.gen_range(0..KEYS / WRITERS) * WRITERS + writer;
                db.put(&key(index), &value(index, writer, counter)).unwrap();
                last_written[index as usize].store(counter, Ordering::Release);
                published[writer as usize].store(counter, Ordering::Release);
            }
            counter
        }));
    }
    let mut readers = Vec::new();
    for reader in 0..READERS {
        let (db, stop, published) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&published));
        readers.push(std::thread::spawn(move || {
            reader_loop(reader, &db, &stop, &published)
        }));
    }
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let writes: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let reads: Vec<(u64, u64)> = readers.into_iter().map(|h| h.join().unwrap()).collect();
    let stats = db.stats();
    eprintln!(
        "writes per writer {writes:?}, (gets, scans) per reader {reads:?}, flushes {}, compactions {}",
        stats.counter("flushes"),
        stats.counter("compactions")
    );
    assert!(stats.counter("flushes") > 0 && stats.counter("compactions") > 0);

    let verify = |db: &Db| {
        for index in 0..KEYS {
            let counter = last_written[index as usize].load(Ordering::Acquire);
            let got = db.get(&key(index)).unwrap();
            if counter == 0 {
                assert_eq!(got, None, "key {index} was never written");
            } else {
                assert_eq!(
                    got,
                    Some(value(index, index % WRITERS, counter)),
                    "key {index}"
                );
            }
        }
    };
    verify(&db);
    let db = Arc::try_unwrap(db).unwrap();
    db.close().unwrap();
    let db = Db::open(&directory, options()).unwrap();
    verify(&db);
    drop(db);
    let _ = std::fs::remove_dir_all(&directory);
}
