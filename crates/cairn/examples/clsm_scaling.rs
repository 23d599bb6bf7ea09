//! cLSM scaling figures (issue: cLSM layer): put throughput at 1, 2 and 16 threads, and the
//! optimistic read-modify-write against the lock-striped baseline (cLSM §5.1, Fig. 9).
//!
//! `cargo run --release -p cairn --example clsm_scaling -- [seconds_per_run] [repetitions]`
//! Runs are interleaved (1, 2, 16 threads, RMW, striped, then again) and the median of the
//! repetitions is reported. Puts: 16-byte random keys, 100-byte values, WAL on, no sync.
//! RMW: increments of 10,000 counters chosen uniformly. Each run uses a fresh database.

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
    Rmw(usize),
    Striped(usize),
}

fn run(workload: Workload, seconds: f64, directory: &std::path::Path) -> f64 {
    let _ = std::fs::remove_dir_all(directory);
    let db = Arc::new(Db::open(directory, Options::default()).unwrap());
    let threads = match workload {
        Workload::Puts(threads) | Workload::Rmw(threads) | Workload::Striped(threads) => threads,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|thread| {
            let (db, stop, done) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(thread as u64 * 7919 + 1);
                let mut key = [0u8; 16];
                let value = [b'v'; 100];
                let mut operations = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        match workload {
                            Workload::Puts(_) => {
                                rng.fill_bytes(&mut key);
                                db.put(&key, &value).unwrap();
                            }
                            Workload::Rmw(_) => {
                                let counter = format!("counter{:05}", rng.gen_range(0..10_000));
                                db.increment(counter.as_bytes(), 1).unwrap();
                            }
                            Workload::Striped(_) => {
                                let counter = format!("counter{:05}", rng.gen_range(0..10_000));
                                db.increment_striped(counter.as_bytes(), 1).unwrap();
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
    drop(db);
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
        Workload::Rmw(2),
        Workload::Striped(2),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); workloads.len()];
    for repetition in 0..repetitions {
        for (index, workload) in workloads.iter().enumerate() {
            let throughput = run(*workload, seconds, &directory);
            eprintln!("rep {repetition} {workload:?}: {throughput:.0} ops/s");
            results[index].push(throughput);
        }
    }
    let medians: Vec<f64> = results.iter_mut().map(|values| median(values)).collect();
    println!("workload            median ops/s   min..max");
    for (index, workload) in workloads.iter().enumerate() {
        let values = &results[index];
        let (min, max) = values
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        println!(
            "{:<18} {:>14.0}   {min:.0}..{max:.0}",
            format!("{workload:?}"),
            medians[index]
        );
    }
    println!(
        "puts 2 threads / 1 thread: {:.2}x (target >= 1.6)",
        medians[1] / medians[0]
    );
    println!(
        "puts 16 threads / 2 threads: {:.0}% (target >= 90%)",
        100.0 * medians[2] / medians[1]
    );
    println!(
        "RMW optimistic / lock-striped at 2 threads: {:.2}x (target >= 2.5)",
        medians[3] / medians[4]
    );
}
