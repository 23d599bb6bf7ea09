//! Model test: random operation sequences against a `BTreeMap` oracle.
//!
//! Each sequence (`common/ops.rs`) mixes puts, deletes (some with `sync: true`), gets, ranges
//! with every `Bound` kind on both sides in both directions, batches, read-modify-writes
//! (`update`, `put_if_absent`, `compare_and_swap`, `increment`), snapshots read later (after
//! more writes), flushes, ranged compactions, clean close/reopen and power loss: a reopen on a
//! `FaultFs::crash_image`. It runs under several option sets — one with a tiny memtable and
//! tiny blocks so that flushes and compactions happen every few operations. On a divergence
//! the test shrinks the sequence (delta debugging) and prints the seed and the shrunk list.
//!
//! After a power loss the recovered state must equal the oracle at some prefix of the
//! acknowledged atomic writes that includes every write acknowledged with `sync: true` and
//! every write before a successful `flush`/`compact_range` (or, without a WAL, a clean close):
//! the runner keeps the state at that durable floor and the writes after it, and the oracle
//! continues from the longest matching prefix.
//!
//! Scale with `CAIRN_MODEL_SEEDS` (seeds per option set, default 3) and `CAIRN_MODEL_OPS`
//! (operations per sequence, default 2000); replay one seed with `CAIRN_MODEL_SEED`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/ops.rs"]
mod ops;

use cairn::{Compression, Db, FaultFs, Options};
use ops::{execute, generate, shrink, Model, Op, Oracle, Snapshots};
use std::path::Path;
use std::sync::Arc;

/// The database, its file system and the oracle with its durable floor.
struct Runner<'a> {
    fs: FaultFs,
    db: Option<Db>,
    snapshots: Snapshots,
    oracle: Oracle,
    /// The oracle's state at the last point every earlier write was durable; `oracle.log`
    /// holds the atomic writes acknowledged since.
    durable: Model,
    make_options: &'a dyn Fn(&FaultFs) -> Options,
}

const PATH: &str = "/model-db";

impl<'a> Runner<'a> {
    fn new(make_options: &'a dyn Fn(&FaultFs) -> Options) -> Result<Self, String> {
        let fs = FaultFs::new();
        let db = Db::open(PATH, make_options(&fs)).map_err(|error| format!("open: {error}"))?;
        Ok(Runner {
            fs,
            db: Some(db),
            snapshots: Snapshots::new(),
            oracle: Oracle::default(),
            durable: Model::new(),
            make_options,
        })
    }

    fn wal_enabled(&self) -> bool {
        (self.make_options)(&self.fs).wal_enabled
    }

    fn open(&mut self) -> Result<(), String> {
        let options = (self.make_options)(&self.fs);
        self.db = Some(Db::open(Path::new(PATH), options).map_err(|e| format!("open: {e}"))?);
        Ok(())
    }

    fn mark_durable(&mut self) {
        self.durable = self.oracle.model.clone();
        self.oracle.log.clear();
    }

    fn reopen(&mut self) -> Result<(), String> {
        self.snapshots.clear();
        self.oracle.snapshots.clear();
        if let Some(db) = self.db.take() {
            db.close().map_err(|e| format!("close: {e}"))?;
        }
        if !self.wal_enabled() {
            // Without a WAL a clean close flushes: everything is on disk.
            self.mark_durable();
        }
        self.open()
    }

    /// Power loss: the database reopens on a crash image and must hold a prefix of the
    /// acknowledged writes at or past the durable floor.
    fn crash(&mut self, seed: u64) -> Result<(), String> {
        self.snapshots.clear();
        self.oracle.snapshots.clear();
        let image = self.fs.crash_image(seed);
        self.fs.crash_now();
        drop(self.db.take());
        self.fs = image;
        self.open()?;
        let db = self.db.as_ref().ok_or("no db")?;
        let recovered = common::try_scan(db).map_err(|e| format!("scan after crash: {e}"))?;
        let mut state = self.durable.clone();
        let mut matched = (state == recovered).then_some(0);
        for (index, mutation) in self.oracle.log.iter().enumerate() {
            for (key, value) in mutation {
                match value {
                    Some(value) => state.insert(key.clone(), value.clone()),
                    None => state.remove(key),
                };
            }
            if state == recovered {
                matched = Some(index + 1);
            }
        }
        let Some(prefix) = matched else {
            return Err(format!(
                "after power loss the database holds {} entries, which is no prefix of the \
                 {} writes since the durable floor ({} entries)",
                recovered.len(),
                self.oracle.log.len(),
                self.durable.len()
            ));
        };
        self.oracle.log.truncate(prefix);
        self.oracle.model = recovered;
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Reopen => return self.reopen(),
            Op::Crash { seed } => return self.crash(*seed),
            _ => {}
        }
        let db = self.db.as_ref().ok_or("no db")?;
        let got = execute(db, &mut self.snapshots, op).map_err(|e| e.to_string())?;
        let expected = self.oracle.apply(op);
        if got != expected {
            return Err(format!("returned {got:?}, model {expected:?}"));
        }
        let durable_write = op.is_sync_write() && self.wal_enabled();
        if durable_write || matches!(op, Op::Flush | Op::Compact { .. }) {
            self.mark_durable();
        }
        Ok(())
    }
}

/// Runs `ops`; returns a description of the first divergence.
fn run(ops: &[Op], make_options: &dyn Fn(&FaultFs) -> Options) -> Result<(), String> {
    let mut runner = Runner::new(make_options)?;
    for (step, op) in ops.iter().enumerate() {
        runner
            .step(op)
            .map_err(|message| format!("step {step} ({op:?}): {message}"))?;
    }
    if std::env::var("CAIRN_MODEL_VERBOSE").is_ok() {
        if let Some(db) = runner.db.as_ref() {
            eprintln!("{}", db.stats());
        }
    }
    // Final full check after a clean reopen.
    runner.reopen().map_err(|e| format!("final reopen: {e}"))?;
    let db = runner.db.as_ref().ok_or("no db")?;
    let got = common::try_scan(db).map_err(|e| e.to_string())?;
    if got != runner.oracle.model {
        return Err(format!(
            "after the final reopen the database holds {} entries, the model {}",
            got.len(),
            runner.oracle.model.len()
        ));
    }
    let reverse: Result<Vec<_>, _> = db.iter().map_err(|e| e.to_string())?.rev().collect();
    let reverse = reverse.map_err(|e| e.to_string())?;
    let forward_reversed: Vec<(Vec<u8>, Vec<u8>)> = got.into_iter().rev().collect();
    if reverse != forward_reversed {
        return Err("the final reverse scan differs from the forward scan".into());
    }
    Ok(())
}

fn tiny_options(fs: &FaultFs) -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(fs.clone());
    options.write_buffer_size_bytes = 1024;
    options.max_immutable_memtables = 2;
    options.block_size_bytes = 64;
    options.block_restart_interval = 2;
    options.target_file_size_bytes = 2048;
    options.level1_size_bytes_max = 4096;
    options.level_size_ratio = 2;
    options.level0_compaction_trigger = 2;
    options.level0_slowdown_trigger = 4;
    options.level0_stop_trigger = 8;
    options.level_count = 4;
    options.manifest_size_bytes_max = 4096;
    options.block_cache_size_bytes = 16 * 1024;
    // A tiny Membuffer (256 bytes) over the tiny memtable: it fills and drains constantly.
    options.membuffer_enabled = true;
    common::shaped(options)
}

/// `tiny`, with mapped table reads and run probes on a pool of two threads.
fn tiny_mmap_parallel_options(fs: &FaultFs) -> Options {
    let mut options = tiny_options(fs);
    options.table_read_mode = cairn::TableReadMode::Mmap;
    options.lookup_threads = 2;
    options
}

fn default_options(fs: &FaultFs) -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(fs.clone());
    common::shaped(options)
}

fn no_wal_lz4_options(fs: &FaultFs) -> Options {
    let mut options = Options::default();
    options.file_system = Arc::new(fs.clone());
    options.wal_enabled = false;
    options.compression = Compression::Lz4;
    options.bloom_bits_per_key = 0;
    options.write_buffer_size_bytes = 8 * 1024;
    options.block_size_bytes = 256;
    options.target_file_size_bytes = 8 * 1024;
    options.level1_size_bytes_max = 32 * 1024;
    options.block_cache_size_bytes = 0;
    common::shaped(options)
}

fn check_option_set(name: &str, make_options: &dyn Fn(&FaultFs) -> Options) {
    let seeds: u64 = common::env_or("CAIRN_MODEL_SEEDS", 3);
    let count: usize = common::env_or("CAIRN_MODEL_OPS", 2000);
    let seed_list: Vec<u64> = match std::env::var("CAIRN_MODEL_SEED") {
        Ok(seed) => vec![seed.parse().expect("CAIRN_MODEL_SEED must be a number")],
        Err(_) => (0..seeds).map(|index| 0x5eed_0000 + index).collect(),
    };
    for seed in seed_list {
        let ops = generate(seed, count, true);
        if let Err(message) = run(&ops, make_options) {
            let shrunk = shrink(ops, &|candidate| run(candidate, make_options).is_err());
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

/// The policy slice: the tiny shape under tiering and lazy leveling (see
/// `common::env_style` for the full matrix).
#[test]
fn model_tiny_under_tiering() {
    check_option_set("tiny-tiering", &|fs: &FaultFs| {
        common::with_style(tiny_options(fs), cairn::CompactionStyle::Tiering)
    });
}

#[test]
fn model_tiny_under_lazy_leveling() {
    check_option_set("tiny-lazy", &|fs: &FaultFs| {
        common::with_style(tiny_options(fs), cairn::CompactionStyle::LazyLeveling)
    });
}

#[test]
fn model_tiny_with_mmap_and_parallel_lookups() {
    check_option_set("tiny-mmap-parallel", &tiny_mmap_parallel_options);
}

#[test]
fn model_default_options() {
    check_option_set("default", &default_options);
}

#[test]
fn model_without_wal_with_lz4_and_no_bloom() {
    check_option_set("no-wal-lz4", &no_wal_lz4_options);
}

/// The tiny set with the single-level memory component (Membuffer off).
fn tiny_without_membuffer_options(fs: &FaultFs) -> Options {
    let mut options = tiny_options(fs);
    options.membuffer_enabled = false;
    options
}

/// The tiny set with half the write buffer in a Membuffer of several partitions: it fills
/// and drains constantly, and writers find full partitions.
fn tiny_half_membuffer_options(fs: &FaultFs) -> Options {
    let mut options = tiny_options(fs);
    options.write_buffer_size_bytes = 16 * 1024;
    options.membuffer_percent = 50;
    options.membuffer_partitions = 4;
    options
}

#[test]
fn model_tiny_without_membuffer() {
    check_option_set("tiny-no-membuffer", &tiny_without_membuffer_options);
}

#[test]
fn model_tiny_half_membuffer() {
    check_option_set("tiny-half-membuffer", &tiny_half_membuffer_options);
}

/// `tiny-half-membuffer` with scans that copy the partitions they enter instead of draining
/// them (the fallback behind a busy drain lock), forward and backward.
#[test]
fn model_tiny_half_membuffer_with_copying_scans() {
    check_option_set("tiny-half-membuffer-scans-copy", &|fs| {
        let mut options = tiny_half_membuffer_options(fs);
        options.membuffer_scans_always_copy = true;
        options
    });
}

/// The Membuffer option sets really exercise it: writes land in it, partitions drain (by
/// writers and by scans), and every write reads back by point read and by scan.
#[test]
fn tiny_membuffer_takes_writes_and_drains() {
    let fs = FaultFs::new();
    let db = Db::open("/membuffer-counters", tiny_half_membuffer_options(&fs)).unwrap();
    for round in 0..3u32 {
        for key in 0..500u32 {
            db.put(
                format!("key{key:05}").as_bytes(),
                format!("{round}").as_bytes(),
            )
            .unwrap();
        }
        let scanned = db.range::<[u8], _>(..).unwrap().count();
        assert_eq!(scanned, 500);
    }
    for key in 0..500u32 {
        let value = db.get(format!("key{key:05}").as_bytes()).unwrap();
        assert_eq!(value.as_deref(), Some(&b"2"[..]));
    }
    let stats = db.stats();
    assert!(stats.counter("membuffer_writes") > 0, "{stats}");
    assert!(stats.counter("membuffer_drains") > 0, "{stats}");
    assert!(stats.counter("membuffer_scan_drains") > 0, "{stats}");
}
