//! Model test: random operation sequences against a `BTreeMap` oracle.
//!
//! Each sequence mixes puts, deletes, gets, forward and reverse ranges, batches, snapshots
//! (read later, after more writes), flushes, compactions and close/reopen, and runs under
//! several option sets — one with a tiny memtable and tiny blocks so that flushes and
//! compactions happen every few operations. On a divergence the test shrinks the sequence
//! (delta debugging) and prints the seed and the shrunk operation list.
//!
//! Scale with `CAIRN_MODEL_SEEDS` (seeds per option set, default 4) and `CAIRN_MODEL_OPS`
//! (operations per sequence, default 2500); replay one seed with `CAIRN_MODEL_SEED`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn::{Compression, Db, MemFs, Options, Snapshot, WriteBatch};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Get(Vec<u8>),
    Range {
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        reverse: bool,
    },
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    TakeSnapshot,
    ReadSnapshot {
        index: usize,
        key: Vec<u8>,
    },
    ScanSnapshot {
        index: usize,
    },
    ReleaseSnapshot {
        index: usize,
    },
    Flush,
    Compact,
    Reopen,
}

fn random_key(rng: &mut SmallRng) -> Vec<u8> {
    // A small key space so keys are overwritten and deleted often; some keys are prefixes
    // of others, and the empty key is legal.
    match rng.gen_range(0..10) {
        0 => Vec::new(),
        1 => vec![b'k'; rng.gen_range(1..4)],
        _ => format!("key{:03}", rng.gen_range(0..150)).into_bytes(),
    }
}

fn random_value(rng: &mut SmallRng) -> Vec<u8> {
    let length = match rng.gen_range(0..20) {
        0 => 0,
        1 => rng.gen_range(200..3000),
        _ => rng.gen_range(1..40),
    };
    (0..length).map(|_| rng.gen()).collect()
}

fn generate(seed: u64, count: usize) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..count)
        .map(|_| match rng.gen_range(0..1000) {
            0..=349 => Op::Put(random_key(&mut rng), random_value(&mut rng)),
            350..=479 => Op::Delete(random_key(&mut rng)),
            480..=679 => Op::Get(random_key(&mut rng)),
            680..=759 => {
                let lower = rng.gen_bool(0.8).then(|| random_key(&mut rng));
                let upper = rng.gen_bool(0.8).then(|| random_key(&mut rng));
                Op::Range {
                    lower,
                    upper,
                    reverse: rng.gen_bool(0.5),
                }
            }
            760..=819 => Op::Batch(
                (0..rng.gen_range(1..8))
                    .map(|_| {
                        let key = random_key(&mut rng);
                        let value = rng.gen_bool(0.7).then(|| random_value(&mut rng));
                        (key, value)
                    })
                    .collect(),
            ),
            820..=844 => Op::TakeSnapshot,
            845..=889 => Op::ReadSnapshot {
                index: rng.gen_range(0..4),
                key: random_key(&mut rng),
            },
            890..=909 => Op::ScanSnapshot {
                index: rng.gen_range(0..4),
            },
            910..=934 => Op::ReleaseSnapshot {
                index: rng.gen_range(0..4),
            },
            935..=964 => Op::Flush,
            965..=984 => Op::Compact,
            _ => Op::Reopen,
        })
        .collect()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn model_range(
    model: &Model,
    lower: &Option<Vec<u8>>,
    upper: &Option<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(key, _)| lower.as_ref().is_none_or(|lower| *key >= lower))
        .filter(|(key, _)| upper.as_ref().is_none_or(|upper| *key < upper))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

fn bound(key: &Option<Vec<u8>>, included: bool) -> Bound<&[u8]> {
    match key {
        Some(key) if included => Bound::Included(key.as_slice()),
        Some(key) => Bound::Excluded(key.as_slice()),
        None => Bound::Unbounded,
    }
}

/// Runs `ops`; returns a description of the first divergence.
fn run(ops: &[Op], make_options: &dyn Fn(&MemFs) -> Options) -> Result<(), String> {
    let fs = MemFs::new();
    let path = Path::new("/model-db");
    let open = || Db::open(path, make_options(&fs)).map_err(|error| format!("open: {error}"));
    let mut db = Some(open()?);
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let fail = |message: String| format!("step {step} ({op:?}): {message}");
        let current = db.as_ref().ok_or_else(|| fail("no db".into()))?;
        match op {
            Op::Put(key, value) => {
                current.put(key, value).map_err(|e| fail(e.to_string()))?;
                model.insert(key.clone(), value.clone());
            }
            Op::Delete(key) => {
                current.delete(key).map_err(|e| fail(e.to_string()))?;
                model.remove(key);
            }
            Op::Get(key) => {
                let got = current.get(key).map_err(|e| fail(e.to_string()))?;
                if got.as_ref() != model.get(key) {
                    return Err(fail(format!(
                        "get returned {got:?}, model has {:?}",
                        model.get(key)
                    )));
                }
            }
            Op::Range {
                lower,
                upper,
                reverse,
            } => {
                let mut expected = model_range(&model, lower, upper);
                let iterator = if *reverse {
                    expected.reverse();
                    current.range_rev(bound(lower, true), bound(upper, false))
                } else {
                    current.range(bound(lower, true), bound(upper, false))
                }
                .map_err(|e| fail(e.to_string()))?;
                let got: Result<Vec<_>, _> = iterator.collect();
                let got = got.map_err(|e| fail(e.to_string()))?;
                if got != expected {
                    return Err(fail(format!(
                        "range returned {} entries, model {}; first difference at {:?}",
                        got.len(),
                        expected.len(),
                        got.iter().zip(&expected).position(|(a, b)| a != b)
                    )));
                }
            }
            Op::Batch(entries) => {
                let mut batch = WriteBatch::new();
                for (key, value) in entries {
                    match value {
                        Some(value) => batch.put(key, value),
                        None => batch.delete(key),
                    };
                }
                current
                    .write(&Default::default(), batch)
                    .map_err(|e| fail(e.to_string()))?;
                for (key, value) in entries {
                    match value {
                        Some(value) => model.insert(key.clone(), value.clone()),
                        None => model.remove(key),
                    };
                }
            }
            Op::TakeSnapshot => {
                if snapshots.len() < 4 {
                    snapshots.push((current.snapshot(), model.clone()));
                }
            }
            Op::ReadSnapshot { index, key } => {
                if let Some((snapshot, frozen)) = snapshots.get(*index) {
                    let got = current
                        .get_at(snapshot, key)
                        .map_err(|e| fail(e.to_string()))?;
                    if got.as_ref() != frozen.get(key) {
                        return Err(fail(format!(
                            "snapshot get returned {got:?}, model has {:?}",
                            frozen.get(key)
                        )));
                    }
                }
            }
            Op::ScanSnapshot { index } => {
                if let Some((snapshot, frozen)) = snapshots.get(*index) {
                    let got: Result<Vec<_>, _> = current
                        .range_at(Some(snapshot), Bound::Unbounded, Bound::Unbounded, false)
                        .map_err(|e| fail(e.to_string()))?
                        .collect();
                    let got = got.map_err(|e| fail(e.to_string()))?;
                    let expected = model_range(frozen, &None, &None);
                    if got != expected {
                        return Err(fail(format!(
                            "snapshot scan returned {} entries, model {}",
                            got.len(),
                            expected.len()
                        )));
                    }
                }
            }
            Op::ReleaseSnapshot { index } => {
                if *index < snapshots.len() {
                    snapshots.remove(*index);
                }
            }
            Op::Flush => current.flush().map_err(|e| fail(e.to_string()))?,
            Op::Compact => current
                .compact_range(None, None)
                .map_err(|e| fail(e.to_string()))?,
            Op::Reopen => {
                snapshots.clear();
                if let Some(db) = db.take() {
                    db.close().map_err(|e| fail(format!("close: {e}")))?;
                }
                db = Some(open().map_err(fail)?);
            }
        }
    }
    // Final full check after a reopen.
    if let Some(db) = db.as_ref() {
        if std::env::var("CAIRN_MODEL_VERBOSE").is_ok() {
            eprintln!("{}", db.stats());
        }
    }
    if let Some(db) = db.take() {
        snapshots.clear();
        db.close().map_err(|e| format!("final close: {e}"))?;
    }
    let db = open()?;
    let got: Result<Vec<_>, _> = db
        .range(Bound::Unbounded, Bound::Unbounded)
        .map_err(|e| e.to_string())?
        .collect();
    let got = got.map_err(|e| e.to_string())?;
    if got != model_range(&model, &None, &None) {
        return Err(format!(
            "after the final reopen the database holds {} entries, the model {}",
            got.len(),
            model.len()
        ));
    }
    Ok(())
}

/// Delta debugging: removes chunks of operations while the failure persists.
fn shrink(mut ops: Vec<Op>, make_options: &dyn Fn(&MemFs) -> Options) -> Vec<Op> {
    let mut chunk = ops.len() / 2;
    let mut attempts = 0;
    while chunk >= 1 && attempts < 2000 {
        let mut start = 0;
        let mut removed_any = false;
        while start < ops.len() && attempts < 2000 {
            attempts += 1;
            let end = (start + chunk).min(ops.len());
            let mut candidate = ops.clone();
            candidate.drain(start..end);
            if run(&candidate, make_options).is_err() {
                ops = candidate;
                removed_any = true;
            } else {
                start += chunk;
            }
        }
        if !removed_any {
            chunk /= 2;
        }
    }
    ops
}

fn tiny_options(fs: &MemFs) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        write_buffer_size_bytes: 1024,
        max_immutable_memtables: 2,
        block_size_bytes: 64,
        block_restart_interval: 2,
        target_file_size_bytes: 2048,
        level1_size_bytes_max: 4096,
        level_size_ratio: 2,
        level0_compaction_trigger: 2,
        level0_slowdown_trigger: 4,
        level0_stop_trigger: 8,
        level_count: 4,
        manifest_size_bytes_max: 4096,
        block_cache_size_bytes: 16 * 1024,
        ..Options::default()
    }
}

fn default_options(fs: &MemFs) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        ..Options::default()
    }
}

fn no_wal_lz4_options(fs: &MemFs) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        wal_enabled: false,
        compression: Compression::Lz4,
        bloom_bits_per_key: 0,
        write_buffer_size_bytes: 8 * 1024,
        block_size_bytes: 256,
        target_file_size_bytes: 8 * 1024,
        level1_size_bytes_max: 32 * 1024,
        block_cache_size_bytes: 0,
        ..Options::default()
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn check_option_set(name: &str, make_options: &dyn Fn(&MemFs) -> Options) {
    let seeds = env_number("CAIRN_MODEL_SEEDS", 4);
    let count = env_number("CAIRN_MODEL_OPS", 2500) as usize;
    let seed_list: Vec<u64> = match std::env::var("CAIRN_MODEL_SEED") {
        Ok(seed) => vec![seed.parse().expect("CAIRN_MODEL_SEED must be a number")],
        Err(_) => (0..seeds).map(|index| 0x5eed_0000 + index).collect(),
    };
    for seed in seed_list {
        let ops = generate(seed, count);
        if let Err(message) = run(&ops, make_options) {
            let shrunk = shrink(ops, make_options);
            let shrunk_message = run(&shrunk, make_options).err().unwrap_or_default();
            panic!(
                "model divergence with options `{name}`, seed {seed}: {message}\n\
                 shrunk to {} operations ({shrunk_message}):\n{shrunk:#?}\n\
                 replay: CAIRN_MODEL_SEED={seed} cargo test -p cairn --test model",
                shrunk.len()
            );
        }
    }
}

#[test]
fn model_tiny_memtable_and_blocks() {
    check_option_set("tiny", &tiny_options);
}

#[test]
fn model_default_options() {
    check_option_set("default", &default_options);
}

#[test]
fn model_without_wal_with_lz4_and_no_bloom() {
    check_option_set("no-wal-lz4", &no_wal_lz4_options);
}
