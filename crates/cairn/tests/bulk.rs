//! Bulk load: N random puts (16-byte keys, 100-byte values), close, reopen, read every key back.
//!
//! Ignored by default (it writes ~1.2 GB for 10 million keys). Run it with
//! `cargo test --release -p cairn --test bulk -- --ignored --nocapture`; set `CAIRN_BULK_KEYS`
//! (default 10,000,000) and `CAIRN_BULK_DIR` (default: a directory under the system temp dir).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::{Db, Options};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use std::time::Instant;

fn entry(rng: &mut SmallRng, index: u64) -> ([u8; 16], [u8; 100]) {
    let mut key = [0u8; 16];
    rng.fill_bytes(&mut key);
    let mut value = [0u8; 100];
    value[..8].copy_from_slice(&index.to_le_bytes());
    value[8..24].copy_from_slice(&key);
    value[24..].fill((index % 251) as u8);
    (key, value)
}

#[test]
#[ignore = "writes about 1.2 GB; run explicitly"]
fn ten_million_random_puts_survive_reopen() {
    let count: u64 = common::env_or("CAIRN_BULK_KEYS", 10_000_000);
    let directory = std::env::var("CAIRN_BULK_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join("cairn-bulk"));
    let _ = std::fs::remove_dir_all(&directory);

    let started = Instant::now();
    let db = Db::open(&directory, Options::default()).unwrap();
    let mut rng = SmallRng::seed_from_u64(42);
    for index in 0..count {
        let (key, value) = entry(&mut rng, index);
        db.put(&key, &value).unwrap();
    }
    let loaded = started.elapsed();
    db.close().unwrap();
    let closed = started.elapsed();

    let db = Db::open(&directory, Options::default()).unwrap();
    let reopened = started.elapsed();
    let mut rng = SmallRng::seed_from_u64(42);
    for index in 0..count {
        let (key, value) = entry(&mut rng, index);
        let got = db.get(&key).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(&value[..]),
            "key #{index} did not read back"
        );
    }
    let verified = started.elapsed();
    eprintln!(
        "{count} puts: load {:.1} s ({:.0} puts/s), close {:.1} s, reopen {:.1} s, \
         read back {:.1} s ({:.0} gets/s)\n{}",
        loaded.as_secs_f64(),
        count as f64 / loaded.as_secs_f64(),
        (closed - loaded).as_secs_f64(),
        (reopened - closed).as_secs_f64(),
        (verified - reopened).as_secs_f64(),
        count as f64 / (verified - reopened).as_secs_f64(),
        db.stats()
    );
    drop(db);
    let _ = std::fs::remove_dir_all(&directory);
}
