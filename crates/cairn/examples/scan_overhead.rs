//! What the Membuffer adds to a short scan: one-key scans over a compacted table with a few
//! recent writes in the write buffer, the Membuffer on or off.
//!
//! `cargo run --release -p cairn --example scan_overhead -- [on|off|both] [threads] [rounds]`
//! Builds a database (200,000 keys flushed and compacted, then 2,000 more writes that stay in
//! the write buffer), then times `rounds` rounds of 300,000 scans per thread (a cursor, a seek,
//! one entry read) and prints nanoseconds per scan. `both` alternates the two databases
//! (on, off, off, on) and prints the median difference; on this 2-vCPU host that difference
//! moves by tens of nanoseconds from run to run, so the steady figure is the instruction count
//! under callgrind, where `round` is the function to count:
//! `valgrind --tool=callgrind --toggle-collect='scan_overhead::round' scan_overhead on 1 1`
//! (and `off`): the difference of the two totals over 300,000 is the instructions the
//! Membuffer adds to one scan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn::{Db, Options, ReadOptions};
use std::time::Instant;

/// Scans per round and thread.
const SCANS: u64 = 300_000;

fn open(directory: &std::path::Path, membuffer: bool) -> Db {
    let _ = std::fs::remove_dir_all(directory);
    let mut options = Options::default();
    options.membuffer_enabled = membuffer;
    let db = Db::open(directory, options).unwrap();
    for index in 0..200_000u64 {
        let key = (index.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16).to_be_bytes();
        db.put(key, [7u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    for index in 0..2_000u64 {
        let key = (index.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 15).to_be_bytes();
        db.put(key, [8u8; 100]).unwrap();
    }
    db
}

/// Nanoseconds per scan over `SCANS` one-key scans.
#[inline(never)]
fn round(db: &Db) -> f64 {
    let start = Instant::now();
    let mut bytes = 0usize;
    for index in 0..SCANS {
        let key = (index.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 16).to_be_bytes();
        let mut cursor = db
            .cursor(&ReadOptions::default(), Some(&key), None)
            .unwrap();
        cursor.seek(&key);
        if cursor.valid() {
            bytes += cursor.key().len();
        }
    }
    std::hint::black_box(bytes);
    start.elapsed().as_nanos() as f64 / SCANS as f64
}

/// One round on `threads` threads at once: the mean of their nanoseconds per scan.
fn parallel_round(db: &Db, threads: usize) -> f64 {
    let each: Vec<f64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(|| round(db))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    each.iter().sum::<f64>() / each.len() as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "both".to_string());
    let threads: usize = args.next().map_or(1, |s| s.parse().unwrap());
    let rounds: usize = args.next().map_or(15, |s| s.parse().unwrap());
    let base = std::env::temp_dir().join(format!("cairn-scan-overhead-{}", std::process::id()));
    if mode != "both" {
        let db = open(&base.join(&mode), mode == "on");
        for _ in 0..rounds {
            println!("{mode} {:.1} ns/scan", parallel_round(&db, threads));
        }
        drop(db);
        let _ = std::fs::remove_dir_all(&base);
        return;
    }
    let on = open(&base.join("on"), true);
    let off = open(&base.join("off"), false);
    let mut differences = Vec::new();
    for _ in 0..rounds {
        let (a, b) = (parallel_round(&on, threads), parallel_round(&off, threads));
        let (c, d) = (parallel_round(&off, threads), parallel_round(&on, threads));
        println!("on {a:.1} {d:.1} off {b:.1} {c:.1} ns/scan");
        differences.push((a + d - b - c) / 2.0);
    }
    println!(
        "threads {threads}: median on - off {:.1} ns/scan",
        median(differences)
    );
    drop((on, off));
    let _ = std::fs::remove_dir_all(&base);
}
