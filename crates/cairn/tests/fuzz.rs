//! The fuzz target bodies (`cairn::testing::fuzzing`) fed thousands of random and mutated inputs, so
//! CI exercises every decoder in seconds without cargo-fuzz. Each input is printed on a
//! failure (as hex) so it can be replayed, or dropped into `fuzz/corpus/<target>/`.
//!
//! Scale with `CAIRN_FUZZ_ITERATIONS` (inputs per target, default 20000) and
//! `CAIRN_FUZZ_SEED`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::panic::AssertUnwindSafe;

fn iterations() -> usize {
    common::env_or("CAIRN_FUZZ_ITERATIONS", 20000)
}

fn seed() -> u64 {
    common::env_or("CAIRN_FUZZ_SEED", 0x00f0_22ed)
}

/// A random input: mostly "build then damage" inputs (odd first byte), some raw ones, and
/// mutations of earlier inputs (a crude corpus).
fn run(name: &str, target: fn(&[u8])) {
    let mut rng = SmallRng::seed_from_u64(seed() ^ name.len() as u64);
    let mut corpus: Vec<Vec<u8>> = Vec::new();
    let count = iterations();
    for iteration in 0..count {
        let input: Vec<u8> = if !corpus.is_empty() && rng.gen_ratio(1, 3) {
            let mut input = corpus[rng.gen_range(0..corpus.len())].clone();
            for _ in 0..rng.gen_range(1..6) {
                match rng.gen_range(0..4) {
                    0 if !input.is_empty() => {
                        let at = rng.gen_range(0..input.len());
                        input[at] ^= 1 << rng.gen_range(0..8);
                    }
                    1 => input.insert(rng.gen_range(0..=input.len()), rng.gen()),
                    2 if !input.is_empty() => {
                        input.remove(rng.gen_range(0..input.len()));
                    }
                    _ => input.truncate(rng.gen_range(0..=input.len())),
                }
            }
            input
        } else {
            let length = rng.gen_range(0..600);
            let mut input: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
            if let Some(first) = input.first_mut() {
                if rng.gen_ratio(4, 5) {
                    *first |= 1;
                }
            }
            input
        };
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| target(&input)));
        if outcome.is_err() {
            let hex: String = input.iter().map(|byte| format!("{byte:02x}")).collect();
            panic!("{name}: input {iteration} failed: {hex}");
        }
        if corpus.len() < 256 {
            corpus.push(input);
        } else {
            let slot = rng.gen_range(0..corpus.len());
            corpus[slot] = input;
        }
    }
    eprintln!("fuzz {name}: {count} inputs, 0 failures");
}

#[test]
fn fuzz_wal_reader() {
    run("wal", cairn::testing::fuzzing::fuzz_wal);
}

#[test]
fn fuzz_wal_recovery() {
    run("wal_recovery", cairn::testing::fuzzing::fuzz_wal_recovery);
}

#[test]
fn fuzz_block_reader() {
    run("block", cairn::testing::fuzzing::fuzz_block);
}

#[test]
fn fuzz_table_reader() {
    run("table", cairn::testing::fuzzing::fuzz_table);
}

#[test]
fn fuzz_version_edit_decoder() {
    run("version_edit", cairn::testing::fuzzing::fuzz_version_edit);
}
