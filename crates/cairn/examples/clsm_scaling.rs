//! cLSM scaling figures (issue: cLSM layer): put throughput at 1, 2 and 16 threads, and the
//! optimistic read-modify-write (`Db::increment`) at 2 threads and at 16 threads on hot keys.
//! The lock-striped baseline of cLSM §5.1 (Fig. 9) is not in the engine: cairn-bench has its
//! own (engine `cairn-striped`, a get + put under a stripe lock), which is where the
//! optimistic RMW is compared with it.
//!
//! `cargo run --release -p cairn --example clsm_scaling -- [seconds_per_run] [repetitions]`
//! Runs are interleaved (1, 2, 16 threads, RMW, hot RMW, then again) and the median of the
//! repetitions is reported. Puts: 16-byte random keys, 100-byte values, WAL on, no sync.
//! RMW: increments of 10,000 counters chosen uniformly; the "hot" variants use 16 threads on
//! 64 counters, where optimistic retries are frequent.
//! Each run uses a fresh database. With `CLSM_SCALING_NO_WAL=1` the WAL is off (to separate
//! the cost of logging from the rest of the write path); with `CLSM_SCALING_WAL_WRITE=1` the
//! WAL is appended with `write(2)` instead of through a memory mapping.
//!
//! `Independent(2)` is the machine's ceiling: two threads putting into two *separate*
//! databases share nothing but the cores, caches and disk, so "2 threads ÷ 1 thread" on one
//! database cannot beat "Independent(2) ÷ Puts(1)" on the same machine.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn::{Db, Options};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Workload {
    Puts(usize),
    Independent(usize),
    Rmw(usize),
    RmwHot(usize),
}

impl Workload {
    fn threads(self) -> usize {
        match self {
            Workload::Puts(threads)
            | Workload::Independent(threads)
            | Workload::Rmw(threads)
            | Workload::RmwHot(threads) => threads,
        }
    }
}

const HOT_COUNTERS: u32 = 64;

fn run(workload: Workload, seconds: f64, directory: &std::path::Path) -> f64 {
    let _ = std::fs::remove_dir_all(directory);
    let threads = workload.threads();
    let databases = match workload {
        Workload::Independent(_) => threads,
        _ => 1,
    };
    let dbs: Vec<Arc<Db>> = (0..databases)
        .map(|index| {
            let path = directory.join(format!("db{index}"));
            let mut options = Options::default();
            options.wal_enabled = std::env::var_os("CLSM_SCALING_NO_WAL").is_none();
            options.wal_memory_mapped = std::env::var_os("CLSM_SCALING_WAL_WRITE").is_none();
            Arc::new(Db::open(path, options).unwrap())
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let db = Arc::clone(&dbs[thread % dbs.len()]);
            let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(thread as u64 * 7919 + 1);
                let mut key = [0u8; 16];
                let value = [b'v'; 100];
                let mut operations = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        match workload {
                            Workload::Puts(_) | Workload::Independent(_) => {
                                rng.fill_bytes(&mut key);
                                db.put(&key, &value).unwrap();
                            }
                            Workload::Rmw(_) => {
                                let counter = format!("counter{:05}", rng.gen_range(0..10_000));
                                db.increment(counter.as_bytes(), 1).unwrap();
                            }
                            Workload::RmwHot(_) => {
                                let counter = format!("hot{:03}", rng.gen_range(0..HOT_COUNTERS));
                                db.increment(counter.as_bytes(), 1).unwrap();
                            }
                        }
                        operations += 1;
                    }
                }
                done.fetch_add(operations, Ordering::Relaxed);
            })
        })
        .collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let throughput = done.load(Ordering::Relaxed) as f64 / elapsed;
    drop(dbs);
    let _ = std::fs::remove_dir_all(directory);
    throughput
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let seconds: f64 = arguments.get(1).and_then(|v| v.parse().ok()).unwrap_or(2.0);
    let repetitions: usize = arguments.get(2).and_then(|v| v.parse().ok()).unwrap_or(3);
    let directory = std::env::temp_dir().join(format!("cairn-clsm-scaling-{}", std::process::id()));
    let workloads = [
        Workload::Puts(1),
        Workload::Puts(2),
        Workload::Puts(16),
        Workload::Independent(2),
        Workload::Rmw(2),
        Workload::RmwHot(16),
    ];
    // `CLSM_SCALING_ONLY=Puts(1),Puts(2)` runs only those workloads (for profiling); ratios
    // involving the others are NaN.
    let only = std::env::var("CLSM_SCALING_ONLY").ok();
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); workloads.len()];
    for repetition in 0..repetitions {
        for (index, workload) in workloads.iter().enumerate() {
            if only
                .as_ref()
                .is_some_and(|only| !only.split(',').any(|name| name == format!("{workload:?}")))
            {
                results[index].push(f64::NAN);
                continue;
            }
            let throughput = run(*workload, seconds, &directory);
            eprintln!("rep {repetition} {workload:?}: {throughput:.0} ops/s");
            results[index].push(throughput);
        }
    }
    let medians: Vec<f64> = results.iter_mut().map(|values| median(values)).collect();
    println!("workload            median ops/s   min..max");
    for (index, workload) in workloads.iter().enumerate() {
        let values = &results[index];
        if values.iter().any(|value| value.is_nan()) {
            continue;
        }
        let (min, max) = values
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        println!(
            "{:<18} {:>14.0}   {min:.0}..{max:.0}",
            format!("{workload:?}"),
            medians[index]
        );
    }
    // Ratios both of the medians and as the median of per-repetition ratios: the runs of one
    // repetition sit next to each other in time, so pairing them cancels slow machine drift.
    let ratio = |numerator: usize, denominator: usize| {
        let mut paired: Vec<f64> = results[numerator]
            .iter()
            .zip(&results[denominator])
            .map(|(top, bottom)| top / bottom)
            .collect();
        (
            medians[numerator] / medians[denominator],
            median(&mut paired),
        )
    };
    let lines = [
        ("puts 2 threads / 1 thread (target >= 1.6)", ratio(1, 0)),
        ("puts 16 threads / 2 threads (target >= 0.9)", ratio(2, 1)),
        ("ceiling: 2 separate databases / 1 thread", ratio(3, 0)),
        ("RMW / puts, 2 threads", ratio(4, 1)),
        ("RMW 16 threads on 64 hot keys / RMW 2 threads", ratio(5, 4)),
    ];
    println!("ratio                                                     of medians  paired median");
    for (name, (of_medians, paired)) in lines {
        println!("{name:<58} {of_medians:>9.2}x {paired:>13.2}x");
    }
}
