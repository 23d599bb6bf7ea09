//! Code shared by integration tests. It lives in a directory so that cargo does not build it
//! as a test target of its own; a test includes it with `mod common;`. The linearizability
//! checker (`linearizability.rs`) is included by `history.rs` alone, with `#[path]`, so that its
//! unit tests run once rather than in every test binary; likewise the seeded operation
//! sequences (`ops.rs`: generator, executor, `BTreeMap` oracle, delta debugging) are included
//! by `model.rs` and `metamorphic.rs` alone.
//!
//! Thread-safety contract: the helpers are free functions over their arguments (plus
//! `TempDir`, owned by one test); any test thread may call them.
//!
//! Invariants:
//! 1. A helper here is the one copy of what several test files need (keys, options, a full
//!    scan, environment knobs, a scratch directory); a test file tweaks a returned `Options`
//!    with struct-update syntax instead of keeping its own copy.
//! 2. `key(index, width)` is `"key"` followed by `index` zero-padded to `width` digits, so keys
//!    sort in index order; tests choose the width they always used, which keeps their
//!    workloads (and the file sizes they were tuned on) unchanged.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use cairn::{Db, Error, FileSystem, Options};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// `"key"` followed by `index` zero-padded to `width` digits.
pub fn key(index: u64, width: usize) -> Vec<u8> {
    format!("key{index:0width$}").into_bytes()
}

/// Every live key and value, in key order (panics on a read error).
pub fn scan(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    try_scan(db).unwrap()
}

/// Every live key and value, in key order, or the first read error.
pub fn try_scan(db: &Db) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    db.range(Bound::Unbounded, Bound::Unbounded)?
        .collect::<Result<_, _>>()
}

/// Every live key and value as a list, in key order (panics on a read error).
pub fn scan_pairs(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan(db).into_iter().collect()
}

/// The environment variable `name` parsed as `T`, or `default` when it is unset or malformed
/// (test knobs such as iteration counts and durations).
pub fn env_or<T: FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// A small LSM shape that flushes, compacts and rolls the MANIFEST over after a few KiB of
/// writes, so short workloads reach every code path.
pub fn small_lsm_options(file_system: Arc<dyn FileSystem>) -> Options {
    let mut options = Options {
        file_system,
        write_buffer_size_bytes: 2048,
        max_immutable_memtables: 2,
        block_size_bytes: 256,
        target_file_size_bytes: 4096,
        level1_size_bytes_max: 8192,
        level0_compaction_trigger: 2,
        manifest_size_bytes_max: 1024,
        ..Options::default()
    };
    // A tiny Membuffer over the tiny memtable: it fills and drains constantly.
    options.membuffer_enabled = true;
    options
}

/// A fresh directory under the system temporary directory, removed (best effort) on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/cairn-<label>-<pid>-<n>`, emptying it first if a crashed run left it.
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("cairn-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Copies every file of `from` (not recursing) into `to`, which must exist.
pub fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
