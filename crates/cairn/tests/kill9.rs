//! kill -9 loop: a child process writes from two threads with background flushes and
//! compactions running (small memtable); the parent SIGKILLs it at random moments, reopens
//! the database and checks that every acknowledged write is there (the default durability —
//! handed to the OS — survives a process crash) and that what survived is a prefix of the
//! *global* sequence order, not only of each writer's own order.
//!
//! What the engine promises: recovery yields the writes with sequence numbers up to some S
//! (no holes in the sequence order), S at least every acknowledged write's sequence. The
//! test checks this without engine sequence numbers, through real-time order: a write issued
//! after another write was acknowledged gets a larger sequence (sequences are reserved in
//! order; the acknowledged one already holds its own). So each data value records, for every
//! writer, how many of that writer's writes had been acknowledged when it was issued (its
//! *dependencies*); if a write survived, every dependency of it must have survived too —
//! including writes of the other writer whose acknowledgement the parent never saw.
//!
//! The child is this test binary re-executed with `CAIRN_KILL9_CHILD` set (the test
//! `kill9_child` does nothing otherwise). Writer `w` puts key `w{w}-{counter:010}` with a
//! value that encodes writer, counter and dependencies, and key `w{w}-latest` = its counter;
//! after each
//! acknowledged put it prints `ack {w} {counter}` (one write(2) per line) to the pipe the
//! parent reads. Some kills land during the child's recovery, before it writes anything.
//!
//! `CAIRN_KILL9_WAL_WRITE=1` writes the WAL with `write(2)` instead of through a mapping.
//! Scale with `CAIRN_KILL9_CYCLES` (default 20); `CAIRN_KILL9_RESET_EVERY` (default 25)
//! starts a fresh database every n cycles so verification stays fast in long soaks.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::{Db, Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: u64 = 2;

fn options() -> Options {
    let mut options = Options::default();
    options.write_buffer_size_bytes = 64 * 1024;
    options.block_size_bytes = 1024;
    options.target_file_size_bytes = 128 * 1024;
    options.level1_size_bytes_max = 512 * 1024;
    options.level0_compaction_trigger = 2;
    options.manifest_size_bytes_max = 16 * 1024;
    // `CAIRN_KILL9_WAL_WRITE=1` appends the WAL with write(2) instead of a mapping.
    options.wal_memory_mapped = std::env::var_os("CAIRN_KILL9_WAL_WRITE").is_none();
    // A 16 KiB Membuffer over the small memtable: it fills and drains constantly.
    options.membuffer_enabled = true;
    options
}

fn data_key(writer: u64, counter: u64) -> Vec<u8> {
    format!("w{writer}-{counter:010}").into_bytes()
}

fn latest_key(writer: u64) -> Vec<u8> {
    format!("w{writer}-latest").into_bytes()
}

/// `writer:counter:d0,d1:` and a padding that depends on the counter; `d[v]` = writes of
/// writer `v` acknowledged (counters `0..d[v]`) before this one was issued.
fn value(writer: u64, counter: u64, dependencies: &[u64]) -> Vec<u8> {
    let dependencies: Vec<String> = dependencies.iter().map(u64::to_string).collect();
    let mut value = format!("{writer}:{counter}:{}:", dependencies.join(",")).into_bytes();
    value.resize(
        value.len() + (counter % 64) as usize,
        b'a' + (counter % 26) as u8,
    );
    value
}

/// The dependencies of a value written by `writer` with `counter`, if it is well-formed.
fn parse_value(bytes: &[u8], writer: u64, counter: u64) -> Option<Vec<u64>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut parts = text.splitn(4, ':');
    let (found_writer, found_counter) = (parts.next()?, parts.next()?);
    let dependencies: Vec<u64> = parts
        .next()?
        .split(',')
        .map(|part| part.parse().ok())
        .collect::<Option<_>>()?;
    let well_formed = found_writer.parse() == Ok(writer)
        && found_counter.parse() == Ok(counter)
        && dependencies.len() == WRITERS as usize
        && value(writer, counter, &dependencies) == bytes;
    well_formed.then_some(dependencies)
}

/// The child: write until killed.
#[test]
fn kill9_child() {
    let Ok(directory) = std::env::var("CAIRN_KILL9_CHILD") else {
        return;
    };
    let starts: Vec<u64> = std::env::var("CAIRN_KILL9_START")
        .unwrap()
        .split(',')
        .map(|part| part.parse().unwrap())
        .collect();
    let db = Arc::new(Db::open(&directory, options()).unwrap());
    // `acknowledged[w]`: writer w's counters below it are acknowledged (or were recovered).
    let acknowledged: Arc<Vec<AtomicU64>> =
        Arc::new(starts.iter().map(|&start| AtomicU64::new(start)).collect());
    println!("ready");
    let threads: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let db = Arc::clone(&db);
            let acknowledged = Arc::clone(&acknowledged);
            let start = starts[writer as usize];
            std::thread::spawn(move || {
                let stdout = std::io::stdout();
                for counter in start.. {
                    let dependencies: Vec<u64> = acknowledged
                        .iter()
                        .map(|count| count.load(Ordering::SeqCst))
                        .collect();
                    let value = value(writer, counter, &dependencies);
                    db.put(&data_key(writer, counter), &value).unwrap();
                    acknowledged[writer as usize].store(counter + 1, Ordering::SeqCst);
                    db.put(&latest_key(writer), counter.to_string().as_bytes())
                        .unwrap();
                    // One write(2) per acknowledgement: a line on an unbuffered handle.
                    let line = format!("ack {writer} {counter}\n");
                    stdout.lock().write_all(line.as_bytes()).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

/// What the parent found after one kill.
struct Verified {
    next_counters: Vec<u64>,
    /// Each writer's recovered `latest` counter (None: absent).
    latest: Vec<Option<u64>>,
}

/// Checks the database after a kill. `started` is what the last verification found: the
/// counters the child started from and the `latest` values it left behind.
fn verify(directory: &Path, acked: &[Option<u64>], started: &Verified, cycle: usize) -> Verified {
    let db = Db::open(directory, options())
        .unwrap_or_else(|error| panic!("cycle {cycle}: reopen after kill -9 failed: {error}"));
    let mut next_counters = Vec::new();
    let mut latest_found = Vec::new();
    // (writer, counter, dependencies) of every surviving write, checked once all are known.
    let mut survivors: Vec<(u64, u64, Vec<u64>)> = Vec::new();
    for writer in 0..WRITERS {
        let lower = format!("w{writer}-").into_bytes();
        let upper = format!("w{writer}-:").into_bytes(); // ':' sorts after the digits
        let mut expected = 0u64;
        for entry in db.range(&lower[..]..&upper[..]).unwrap() {
            let (key, found) = entry.unwrap_or_else(|error| panic!("cycle {cycle}: {error}"));
            assert_eq!(
                key,
                data_key(writer, expected),
                "cycle {cycle}: writer {writer} has a hole before {}",
                String::from_utf8_lossy(&key)
            );
            let dependencies = parse_value(&found, writer, expected).unwrap_or_else(|| {
                panic!("cycle {cycle}: writer {writer} counter {expected}: wrong value {found:?}")
            });
            survivors.push((writer, expected, dependencies));
            expected += 1;
        }
        let present = expected; // counters 0..present are there, nothing beyond
        if let Some(acked) = acked[writer as usize] {
            assert!(
                present > acked,
                "cycle {cycle}: writer {writer} acknowledged {acked} but only 0..{present} survived"
            );
        }
        // `latest` is written after the data key: it is the last or second-to-last counter
        // written. If this child wrote at most one data key, `latest` may still be what the
        // previous cycle left (which itself may lag its data by two).
        let start = started.next_counters[writer as usize];
        let previous = started.latest[writer as usize];
        let latest = db
            .get(&latest_key(writer))
            .unwrap()
            .map(|latest| String::from_utf8(latest).unwrap().parse::<u64>().unwrap());
        let fits_this_run = latest.is_some_and(|latest| {
            (latest + 1 == present || latest + 2 == present) && latest + 1 >= start
        });
        let unchanged = present <= start + 1 && latest == previous;
        assert!(
            fits_this_run || unchanged,
            "cycle {cycle}: writer {writer} latest {latest:?}, data 0..{present} \
             (this child started at {start}, after latest {previous:?})"
        );
        next_counters.push(present);
        latest_found.push(latest);
    }
    check_global_prefix(&survivors, &next_counters, cycle);
    db.close().unwrap();
    Verified {
        next_counters,
        latest: latest_found,
    }
}

/// Recovery kept a prefix of the sequence order: every surviving write's dependencies (writes
/// acknowledged before it was issued, hence with smaller sequences) survived too.
fn check_global_prefix(survivors: &[(u64, u64, Vec<u64>)], present: &[u64], cycle: usize) {
    for (writer, counter, dependencies) in survivors {
        for (other, (&needed, &present)) in dependencies.iter().zip(present).enumerate() {
            assert!(
                needed <= present,
                "cycle {cycle}: writer {writer} counter {counter} survived, but it was issued \
                 after writer {other} counters 0..{needed} were acknowledged and only \
                 0..{present} survived: not a prefix of the sequence order"
            );
        }
    }
}

/// One child run: starts it from `found`'s counters, kills it (1 in 8 during recovery, else
/// 20–400 ms after it is ready) and returns each writer's last acknowledged counter and
/// whether the kill may have landed during recovery.
fn run_child(
    executable: &Path,
    directory: &Path,
    found: &Verified,
    rng: &mut SmallRng,
    cycle: usize,
) -> (Vec<Option<u64>>, bool) {
    let mut in_recovery = false;
    let start: Vec<String> = found.next_counters.iter().map(u64::to_string).collect();
    let mut child = Command::new(executable)
        .args(["kill9_child", "--exact", "--nocapture", "--test-threads=1"])
        .env("CAIRN_KILL9_CHILD", directory)
        .env("CAIRN_KILL9_START", start.join(","))
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let acked: Arc<Mutex<Vec<Option<u64>>>> = Arc::new(Mutex::new(vec![None; WRITERS as usize]));
    let ready = Arc::new(Mutex::new(None::<Instant>));
    let reader = {
        let acked = Arc::clone(&acked);
        let ready = Arc::clone(&ready);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // libtest may print "test kill9_child ... " on the same line.
                if line.ends_with("ready") {
                    *ready.lock().unwrap() = Some(Instant::now());
                } else if let Some(rest) = line.strip_prefix("ack ") {
                    let mut parts = rest.split(' ');
                    let writer: usize = parts.next().unwrap().parse().unwrap();
                    let counter: u64 = parts.next().unwrap().parse().unwrap();
                    acked.lock().unwrap()[writer] = Some(counter);
                }
            }
        })
    };
    if rng.gen_ratio(1, 8) {
        // Kill during recovery (or just after): no waiting for "ready".
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..40)));
        in_recovery = true;
    } else {
        let deadline = Instant::now() + Duration::from_secs(30);
        while ready.lock().unwrap().is_none() {
            assert!(Instant::now() < deadline, "child never became ready");
            if let Ok(Some(status)) = child.try_wait() {
                panic!("cycle {cycle}: child exited early: {status}");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..400)));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert!(
        !status.success(),
        "cycle {cycle}: child finished on its own"
    );
    let acked = acked.lock().unwrap().clone();
    (acked, in_recovery)
}

#[test]
fn kill9_loop() {
    let cycles: usize = common::env_or("CAIRN_KILL9_CYCLES", 20);
    let reset_every = common::env_or::<usize>("CAIRN_KILL9_RESET_EVERY", 25).max(1);
    let base = std::env::temp_dir().join(format!("cairn-kill9-{}", std::process::id()));
    let mut rng = SmallRng::seed_from_u64(
        std::env::var("CAIRN_KILL9_SEED")
            .ok()
            .and_then(|value| value.parse().ok())
            .unwrap_or(9),
    );
    let executable = std::env::current_exe().unwrap();
    let mut directory = PathBuf::new();
    let fresh = || Verified {
        next_counters: vec![0u64; WRITERS as usize],
        latest: vec![None; WRITERS as usize],
    };
    let mut found = fresh();
    let (mut total_acked, mut during_recovery) = (0u64, 0usize);
    let started = Instant::now();
    for cycle in 0..cycles {
        if cycle % reset_every == 0 {
            let _ = std::fs::remove_dir_all(&directory);
            directory = base.join(format!("db{cycle}"));
            found = fresh();
        }
        let (acked, in_recovery) = run_child(&executable, &directory, &found, &mut rng, cycle);
        during_recovery += usize::from(in_recovery);
        for (writer, acked) in acked.iter().enumerate() {
            if let Some(acked) = acked {
                total_acked += acked + 1 - found.next_counters[writer];
            }
        }
        found = verify(&directory, &acked, &found, cycle);
    }
    let _ = std::fs::remove_dir_all(&base);
    eprintln!(
        "kill9_loop: {cycles} cycles ({during_recovery} killed during recovery), {total_acked} acknowledged writes verified, 0 violations, {:.1}s",
        started.elapsed().as_secs_f64()
    );
}
